//! The per-pod cost of `run`'s start: decoding a watch event line into a [`SlimPod`] (as the
//! watch does, on the reader's thread) and converting it to the model (on the conversion
//! thread), for pods shaped as a running Deployment replica is served (owner, labels, requests,
//! four started conditions). `cargo bench -p autoscaler-kube --bench pods`.
//!
//! `decode` is the watch's decoding, object by object ([`Decoded`]: the object's text is kept
//! and decoded alone, so one malformed pod fails alone); `decode_typed` the typed decoding of
//! the whole event it replaced, for comparison.

use std::hint::black_box;

use autoscaler_kube::{Decoded, SlimPod};
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use kube::core::WatchEvent;
use serde_json::json;

/// Pods per measured batch.
const PODS: usize = 1_000;

/// A watch event line of a running replica, as an API server writes it.
fn line(i: usize) -> String {
    let ts = "2026-11-24T10:00:00Z";
    let cond = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": ts});
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": format!("web-5d9c7b-{i:06}"), "namespace": "default",
            "uid": format!("0b6f3c1e-4a2d-4e8f-9c1b-{i:012}"), "resourceVersion": format!("{}", 1000 + i),
            "creationTimestamp": ts, "labels": {"app": "web", "pod-template-hash": "5d9c7b"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "name": "web-5d9c7b", "uid": "0b6f3c1e-web", "controller": true,
                "blockOwnerDeletion": true}]},
        "spec": {"nodeName": format!("node-{:05}", i / 30), "schedulerName": "default-scheduler",
            "containers": [{"name": "c", "image": "registry.example/web:1.2.3",
                "resources": {"requests": {"cpu": "530m", "memory": "2Gi"}}}]},
        "status": {"phase": "Running", "startTime": ts,
            "conditions": [cond("PodScheduled"), cond("Initialized"), cond("ContainersReady"), cond("Ready")]},
    });
    format!("{{\"type\":\"ADDED\",\"object\":{pod}}}")
}

fn decoded(line: &str) -> SlimPod {
    match serde_json::from_str::<WatchEvent<Decoded<SlimPod>>>(line) {
        Ok(WatchEvent::Added(Decoded::Object(p))) => p,
        other => panic!("not an ADDED pod: {:?}", other.err()),
    }
}

fn decoded_typed(line: &str) -> SlimPod {
    match serde_json::from_str::<WatchEvent<SlimPod>>(line) {
        Ok(WatchEvent::Added(p)) => p,
        other => panic!("not an ADDED pod: {:?}", other.err()),
    }
}

fn pods(c: &mut Criterion) {
    let lines: Vec<String> = (0..PODS).map(line).collect();
    let mut g = c.benchmark_group("pods");
    g.throughput(Throughput::Elements(PODS as u64));
    g.bench_function("decode", |b| {
        b.iter(|| {
            for l in &lines {
                black_box(decoded(l));
            }
        })
    });
    g.bench_function("decode_typed", |b| {
        b.iter(|| {
            for l in &lines {
                black_box(decoded_typed(l));
            }
        })
    });
    g.bench_function("convert", |b| {
        b.iter_batched(
            || lines.iter().map(|l| decoded(l)).collect::<Vec<_>>(),
            |slim| {
                for p in slim {
                    black_box(p.into_model().expect("converts"));
                }
            },
            BatchSize::LargeInput,
        )
    });
    g.bench_function("decode_and_convert", |b| {
        b.iter(|| {
            for l in &lines {
                black_box(decoded(l).into_model().expect("converts"));
            }
        })
    });
    g.finish();
    // The strings a running replica's conversion interns, 1,000 times over.
    let words = [
        "default",
        "app",
        "web",
        "pod-template-hash",
        "5d9c7b",
        "PodScheduled",
        "Initialized",
        "ContainersReady",
        "Ready",
        "True",
        "cpu",
        "memory",
        "default-scheduler",
        "ReplicaSet",
        "apps/v1",
        "node-00042",
    ];
    let mut g = c.benchmark_group("intern");
    g.throughput(Throughput::Elements((PODS * words.len()) as u64));
    g.bench_function("typical_pod_strings", |b| {
        b.iter(|| {
            for _ in 0..PODS {
                for w in &words {
                    black_box(autoscaler_model::Sym::new(black_box(w)));
                }
            }
        })
    });
    g.finish();
}

criterion_group!(benches, pods);
criterion_main!(benches);
