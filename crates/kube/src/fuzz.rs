//! The fuzz suite of the live decoders: watch event lines, list bodies and objects of every
//! watched kind, generated from valid objects with one field replaced by any JSON value (the
//! object stays JSON, as a server holding a malformed object serves it) and, for a third of
//! the lines, a few bytes changed. Each input must be answered without a panic within a time
//! bound; a list must keep every item, the untouched ones decoded; a bounded body must fail
//! exactly when a line or the whole passes its limit.
//!
//! It runs in every `cargo test` with few cases; `FUZZ_CASES=20000 cargo test -p
//! autoscaler-kube --lib fuzz` is the long run (docs/fuzzing.md). It never writes files.

use std::time::{Duration, Instant};

use autoscaler_model::testing::fuzz_cases;
use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::storage::v1 as storage;
use kube::api::DynamicObject;
use kube::core::{ObjectList, WatchEvent};
use proptest::prelude::*;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::bounded::{BoundedReadsLayer, ReadLimits};
use crate::lenient::Decoded;
use crate::slim::SlimPod;

/// Longest any one input may take (debug build, shared CI machine).
const TIME_BOUND: Duration = Duration::from_secs(5);

fn bounded<T>(what: &str, input: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    assert!(took < TIME_BOUND, "{what} took {took:?} on:\n{input}");
    out
}

/// A valid object of each watched kind (index into [`KINDS`]).
fn base(kind: usize) -> Value {
    let md = |name: &str| {
        json!({"name": name, "namespace": "ns", "resourceVersion": "7",
        "uid": "u", "labels": {"app": "a"}, "annotations": {"x": "y"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
            "uid": "r", "controller": true}],
        "creationTimestamp": "2024-01-01T00:00:00Z"})
    };
    let selector = json!({"matchLabels": {"app": "a"},
        "matchExpressions": [{"key": "k", "operator": "In", "values": ["v"]}]});
    let template = json!({"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [
        {"name": "c", "image": "i", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}});
    match KINDS[kind] {
        "Pod" => json!({"apiVersion": "v1", "kind": "Pod", "metadata": md("p"),
            "spec": {"nodeName": "n", "priority": 10, "schedulerName": "default-scheduler",
                "nodeSelector": {"zone": "a"},
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                    {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone",
                        "operator": "In", "values": ["a"]}]}]}}},
                "volumes": [{"name": "d", "persistentVolumeClaim": {"claimName": "c"}}],
                "containers": [{"name": "c", "image": "i",
                    "ports": [{"containerPort": 80, "hostPort": 8080}],
                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}]},
            "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled",
                "status": "False", "reason": "Unschedulable"}]}}),
        "Node" => json!({"apiVersion": "v1", "kind": "Node", "metadata": md("n"),
            "spec": {"providerID": "p://n", "taints": [{"key": "k", "effect": "NoSchedule"}]},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True",
                    "lastTransitionTime": "2024-01-01T00:00:00Z"}],
                "images": [{"names": ["a"], "sizeBytes": 1}]}}),
        "PodDisruptionBudget" => json!({"apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget", "metadata": md("b"),
            "spec": {"minAvailable": "50%", "selector": selector},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 2, "desiredHealthy": 1,
                "expectedPods": 2}}),
        "DaemonSet" => json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": md("d"),
            "spec": {"selector": selector, "template": template}}),
        "ReplicaSet" => json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": md("r"),
            "spec": {"replicas": 2, "selector": selector, "template": template}}),
        "StatefulSet" => json!({"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": md("s"), "spec": {"replicas": 2, "selector": selector,
                "serviceName": "s", "template": template}}),
        "Job" => json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": md("j"),
            "spec": {"parallelism": 2, "template": template}}),
        "ReplicationController" => json!({"apiVersion": "v1", "kind": "ReplicationController",
            "metadata": md("rc"), "spec": {"replicas": 1, "selector": {"app": "a"},
                "template": template}}),
        "Namespace" => json!({"apiVersion": "v1", "kind": "Namespace", "metadata": md("ns")}),
        "PersistentVolumeClaim" => json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": md("c"), "spec": {"storageClassName": "zonal",
                "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}),
        "PersistentVolume" => json!({"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": md("v"), "spec": {"capacity": {"storage": "1Gi"},
                "csi": {"driver": "d", "volumeHandle": "h"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "zone", "operator": "In", "values": ["a"]}]}]}}}}),
        "StorageClass" => json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": md("zonal"), "provisioner": "d",
            "volumeBindingMode": "WaitForFirstConsumer"}),
        "CSINode" => json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
            "metadata": md("n"), "spec": {"drivers": [{"name": "d", "nodeID": "n",
                "allocatable": {"count": 16}}]}}),
        "CSIDriver" => json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver",
            "metadata": md("d"), "spec": {"storageCapacity": true}}),
        "CSIStorageCapacity" => json!({"apiVersion": "storage.k8s.io/v1",
            "kind": "CSIStorageCapacity", "metadata": md("cap"), "storageClassName": "zonal",
            "capacity": "10Gi", "nodeTopology": selector}),
        "ConfigMap" => json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": md("cm"),
            "data": {"priorities": "10:\n  - .*\n"}}),
        _ => json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
            "metadata": md("md"), "spec": {"replicas": 1, "selector": selector,
                "template": {"spec": {"clusterName": "c"}}}}),
    }
}

/// Every kind the watches read (the last stands for every Cluster API kind: dynamic objects).
const KINDS: [&str; 18] = [
    "Pod",
    "Node",
    "PodDisruptionBudget",
    "DaemonSet",
    "ReplicaSet",
    "StatefulSet",
    "Job",
    "ReplicationController",
    "Namespace",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "StorageClass",
    "CSINode",
    "CSIDriver",
    "CSIStorageCapacity",
    "ConfigMap",
    "MachineDeployment",
    "MachineSet",
];

/// Any JSON value, with the ones that have hurt before now and then.
fn any_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        "[a-z0-9%.-]{0,12}".prop_map(Value::from),
        Just(json!("abc")),
        Just(json!("200%")),
        Just(json!("2147483648")),
        Just(json!(u64::MAX)),
        Just(json!("1e400")),
        Just(json!("")),
        (0usize..200_000).prop_map(|n| Value::from("x".repeat(n))),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map("[a-zA-Z]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every JSON pointer inside `v` (the root excluded).
fn pointers(v: &Value, at: &str, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, c) in m {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                pointers(c, &p, out);
            }
        }
        Value::Array(a) => {
            for (i, c) in a.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                pointers(c, &p, out);
            }
        }
        _ => {}
    }
}

/// An object of kind `KINDS[kind]`, with one field (chosen by `at`) replaced by `value` when
/// `corrupt`.
fn object(kind: usize, corrupt: bool, at: prop::sample::Index, value: Value) -> Value {
    let mut obj = base(kind);
    if corrupt {
        let mut all = Vec::new();
        pointers(&obj, "", &mut all);
        let p = &all[at.index(all.len())];
        if let Some(slot) = obj.pointer_mut(p) {
            *slot = value;
        }
    }
    obj
}

fn generated() -> impl Strategy<Value = (usize, bool, Value)> {
    (
        0..KINDS.len(),
        any::<bool>(),
        any::<prop::sample::Index>(),
        any_value(),
    )
        .prop_map(|(kind, corrupt, at, value)| (kind, corrupt, object(kind, corrupt, at, value)))
}

/// A watch event line, a third of them with a few bytes changed.
fn line() -> impl Strategy<Value = (usize, String)> {
    let kind = prop_oneof![
        Just("ADDED"),
        Just("MODIFIED"),
        Just("DELETED"),
        Just("BOOKMARK"),
        Just("ERROR"),
        Just("added"),
    ];
    let edits = prop_oneof![
        2 => Just(Vec::new()),
        1 => proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ];
    (generated(), kind, any::<bool>(), edits).prop_map(|((k, _, obj), t, object_first, edits)| {
        let text = if object_first {
            format!("{{\"object\":{obj},\"type\":\"{t}\"}}")
        } else {
            format!("{{\"type\":\"{t}\",\"object\":{obj}}}")
        };
        let mut bytes = text.into_bytes();
        for (at, b) in edits {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        (k, String::from_utf8_lossy(&bytes).into_owned())
    })
}

/// Decodes `text` as a watch line of `K`, and each object the way the watches take it.
fn watch_line<K: DeserializeOwned + Clone>(text: &str, take: impl Fn(K)) {
    if let Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o)) =
        serde_json::from_str::<WatchEvent<Decoded<K>>>(text)
        && let Decoded::Object(o) = o
    {
        take(o);
    }
}

/// A list body of `K`: it must decode with every item, the untouched ones as objects.
fn list_of<K: DeserializeOwned + Clone>(items: &[(bool, Value)], take: impl Fn(K)) {
    let body = json!({"apiVersion": "v1", "kind": "List",
        "metadata": {"resourceVersion": "9"},
        "items": items.iter().map(|(_, v)| v.clone()).collect::<Vec<_>>()})
    .to_string();
    let list: ObjectList<Decoded<K>> =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("the list fails: {e}\n{body}"));
    assert_eq!(list.items.len(), items.len());
    for ((corrupt, _), item) in items.iter().zip(list.items) {
        match item {
            Decoded::Object(o) => take(o),
            Decoded::Undecodable(u) => {
                assert!(corrupt, "an untouched item did not decode: {u:?}");
                assert!(!u.reason().is_empty());
            }
        }
    }
}

/// Runs `f` with the decoder of `KINDS[kind]` and what the watches do with each object.
macro_rules! per_kind {
    ($kind:expr, $f:ident, $arg:expr) => {
        match KINDS[$kind] {
            "Pod" => $f::<SlimPod>($arg, |p| {
                let _ = crate::watch::fuzz_entry_pod(p);
            }),
            "Node" => $f::<api::Node>($arg, |n| {
                let _ = crate::watch::fuzz_entry_node(n);
            }),
            "PodDisruptionBudget" => $f::<policy::PodDisruptionBudget>($arg, |p| {
                let _ = crate::watch::fuzz_entry(p, crate::watch::check_pdb);
            }),
            "DaemonSet" => $f::<apps::DaemonSet>($arg, |d| {
                let _ = crate::watch::fuzz_entry(d, crate::watch::check_daemonset);
            }),
            "ReplicaSet" => $f::<apps::ReplicaSet>($arg, drop),
            "StatefulSet" => $f::<apps::StatefulSet>($arg, drop),
            "Job" => $f::<batch::Job>($arg, drop),
            "ReplicationController" => $f::<api::ReplicationController>($arg, drop),
            "Namespace" => $f::<api::Namespace>($arg, |n| {
                let _ = crate::watch::fuzz_entry(n, crate::watch::check_namespace);
            }),
            "PersistentVolumeClaim" => $f::<api::PersistentVolumeClaim>($arg, drop),
            "PersistentVolume" => $f::<api::PersistentVolume>($arg, drop),
            "StorageClass" => $f::<storage::StorageClass>($arg, drop),
            "CSINode" => $f::<storage::CSINode>($arg, drop),
            "CSIDriver" => $f::<storage::CSIDriver>($arg, drop),
            "CSIStorageCapacity" => $f::<storage::CSIStorageCapacity>($arg, drop),
            "ConfigMap" => $f::<api::ConfigMap>($arg, drop),
            _ => $f::<DynamicObject>($arg, drop),
        }
    };
}

/// A body cut in chunks: `(chunks, longest line, total)`.
fn chunked() -> impl Strategy<Value = (Vec<Vec<u8>>, usize, usize)> {
    let piece = prop_oneof![
        3 => proptest::collection::vec(b'a'..=b'z', 0..40),
        1 => Just(b"\n".to_vec()),
        1 => proptest::collection::vec(prop_oneof![Just(b'\n'), b'a'..=b'z'], 0..40),
    ];
    proptest::collection::vec(piece, 0..12).prop_map(|chunks| {
        let all: Vec<u8> = chunks.concat();
        let longest = all
            .split(|b| *b == b'\n')
            .map(<[u8]>::len)
            .max()
            .unwrap_or(0);
        let total = all.len();
        (chunks, longest, total)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(fuzz_cases(32)))]

    /// Any watch line of any kind is answered; an object in it is taken as the watches take it.
    #[test]
    fn watch_lines((kind, text) in line()) {
        bounded("watch line", &text, || per_kind!(kind, watch_line, &text));
    }

    /// A list holding malformed objects keeps every item; only malformed ones fail, alone.
    #[test]
    fn list_bodies(kind in 0..KINDS.len(), items in proptest::collection::vec(
        (any::<bool>(), any::<prop::sample::Index>(), any_value()), 0..6)) {
        let items: Vec<(bool, Value)> = (items.into_iter())
            .map(|(corrupt, at, v)| (corrupt, object(kind, corrupt, at, v)))
            .collect();
        let what = format!("{} list", KINDS[kind]);
        bounded(&what, &what, || per_kind!(kind, list_of, &items));
    }

    /// A bounded body fails exactly when a line (a watch) or the whole (anything else) passes
    /// its limit, however it is chunked.
    #[test]
    fn bounded_bodies((chunks, longest, total) in chunked(), limit in 0u64..80, watch in any::<bool>()) {
        let rt = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
        let limits = ReadLimits { watch_line: limit, response: limit };
        let svc = tower::service_fn(move |_req: http::Request<()>| {
            let frames: Vec<Result<http_body::Frame<Bytes>, std::io::Error>> = (chunks.iter())
                .map(|c| Ok(http_body::Frame::data(Bytes::from(c.clone()))))
                .collect();
            let body = StreamBody::new(futures::stream::iter(frames));
            async move { Ok::<_, std::io::Error>(http::Response::new(body)) }
        });
        let mut svc = tower::Layer::layer(&BoundedReadsLayer::new(limits), svc);
        let uri = if watch { "/api/v1/pods?watch=true" } else { "/api/v1/pods?limit=500" };
        let res = rt.block_on(async {
            let res = tower::Service::call(&mut svc, http::Request::get(uri).body(()).expect("request"))
                .await
                .expect("response");
            res.into_body().collect().await.map(|c| c.to_bytes().len())
        });
        let over = if watch { longest as u64 > limit } else { total as u64 > limit };
        prop_assert_eq!(res.is_err(), over, "longest {} total {} limit {}", longest, total, limit);
    }
}

#[test]
fn the_generated_objects_decode_when_untouched() {
    for (kind, name) in KINDS.iter().enumerate() {
        let text = format!("{{\"type\":\"ADDED\",\"object\":{}}}", base(kind));
        let decoded = |ok: bool| assert!(ok, "{name} does not decode: {text}");
        macro_rules! check {
            ($t:ty) => {
                decoded(matches!(
                    serde_json::from_str::<WatchEvent<Decoded<$t>>>(&text),
                    Ok(WatchEvent::Added(Decoded::Object(_)))
                ))
            };
        }
        match *name {
            "Pod" => check!(SlimPod),
            "Node" => check!(api::Node),
            "PodDisruptionBudget" => check!(policy::PodDisruptionBudget),
            "DaemonSet" => check!(apps::DaemonSet),
            "ReplicaSet" => check!(apps::ReplicaSet),
            "StatefulSet" => check!(apps::StatefulSet),
            "Job" => check!(batch::Job),
            "ReplicationController" => check!(api::ReplicationController),
            "Namespace" => check!(api::Namespace),
            "PersistentVolumeClaim" => check!(api::PersistentVolumeClaim),
            "PersistentVolume" => check!(api::PersistentVolume),
            "StorageClass" => check!(storage::StorageClass),
            "CSINode" => check!(storage::CSINode),
            "CSIDriver" => check!(storage::CSIDriver),
            "CSIStorageCapacity" => check!(storage::CSIStorageCapacity),
            "ConfigMap" => check!(api::ConfigMap),
            _ => check!(DynamicObject),
        }
    }
    // And the model takes them: the suite reaches the conversion, not only the decoding.
    let pod: SlimPod = serde_json::from_value(base(0)).expect("pod");
    let entry = crate::watch::fuzz_entry_pod(pod).expect("identity");
    assert!(entry, "the pod converts");
    let node: api::Node = serde_json::from_value(base(1)).expect("node");
    assert_eq!(crate::watch::fuzz_entry_node(node), Some(true));
}
