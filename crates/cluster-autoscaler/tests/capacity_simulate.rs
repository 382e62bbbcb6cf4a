//! Scenario tests of capacity on request in `simulate`: the examples
//! `examples/provisioning-request.yaml` and `examples/capacity-buffer.yaml` run through the
//! binary, and their JSON reports are checked against the facts they show.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `simulate` with `args`, returning the report JSON and the summary.
fn simulate(name: &str, args: &[&str]) -> (Value, String) {
    let dir = std::env::temp_dir().join(format!("ca-cap-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let report = dir.join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .arg("simulate")
        .args(args)
        .arg("--report")
        .arg(&report)
        .current_dir(repo())
        .output()
        .expect("run the binary");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "simulate {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&report).expect("report written");
    let _ = std::fs::remove_dir_all(&dir);
    (serde_json::from_str(&text).expect("report is JSON"), stdout)
}

fn group<'r>(r: &'r Value, name: &str) -> &'r Value {
    r["groups"]
        .as_array()
        .and_then(|gs| gs.iter().find(|g| g["group"].as_str() == Some(name)))
        .unwrap_or_else(|| panic!("group {name} missing: {r}"))
}

fn request<'r>(r: &'r Value, key: &str) -> &'r Value {
    r["capacity"]["requests"]
        .as_array()
        .and_then(|rs| rs.iter().find(|x| x["request"].as_str() == Some(key)))
        .unwrap_or_else(|| panic!("request {key} missing: {}", r["capacity"]))
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn atomic_requests_get_all_their_nodes_or_fail_and_check_capacity_is_answered_next_loop() {
    let (r, out) = simulate(
        "provreq",
        &[
            "examples/provisioning-request.yaml",
            "--enable-provisioning-requests=true",
        ],
    );
    assert!(out.contains("Capacity on request:"), "{out}");
    let scan = f(&r["scan_interval_s"]);

    // The atomic request for 8 GPU nodes: one scale-up of 8, Provisioned once they are Ready
    // (so after at least the shortest provisioning delay, 60s), then its 8 pods run.
    let a = group(&r, "default/gpu-a");
    assert_eq!(f(&a["scale_ups"]), 1.0, "{a}");
    assert_eq!(f(&a["nodes_added"]), 8.0, "{a}");
    let train = request(&r, "batch/train");
    let provisioned = f(&train["provisioned_after_s"]);
    assert!(
        provisioned >= 60.0,
        "Provisioned before the nodes were Ready: {train}"
    );
    assert!(provisioned <= 120.0 + 2.0 * scan, "{train}");
    assert!(train["failed"].is_null(), "{train}");

    // The one only 6 could ever fit (gpu-b's max is 6): Failed in the loop that takes it up,
    // and gpu-b does not grow at all.
    let big = request(&r, "batch/too-big");
    let why = big["failed"].as_str().expect("failed");
    assert!(why.starts_with("CapacityCannotFit"), "{why}");
    assert!(why.contains("only 6 of 8 pods fit"), "{why}");
    assert!(f(&big["failed_after_s"]) <= scan, "{big}");
    let b = group(&r, "default/gpu-b");
    assert_eq!(f(&b["scale_ups"]), 0.0, "no partial growth: {b}");
    assert_eq!(f(&b["nodes_added"]), 0.0, "{b}");

    // check-capacity: answered (and here provisioned: its pods fit the cpu node) in the next
    // loop, with no scale-up of its own.
    let check = request(&r, "batch/check");
    assert!(f(&check["answered_after_s"]) <= scan, "{check}");
    assert!(f(&check["provisioned_after_s"]) <= scan, "{check}");
    assert_eq!(f(&group(&r, "default/cpu")["scale_ups"]), 0.0);

    // Every pod of the admitted jobs ran; none is left pending.
    assert_eq!(f(&r["pods_created"]), 10.0);
    assert_eq!(f(&r["pods_pending_at_end"]), 0.0);
    assert_eq!(f(&r["safety_violations"]), 0.0);
}

#[test]
fn without_the_flag_requests_are_left_alone() {
    // The example's `options:` turn the flag on; the command line wins over them.
    let (r, _) = simulate(
        "provreq-off",
        &[
            "examples/provisioning-request.yaml",
            "--enable-provisioning-requests=false",
        ],
    );
    for key in ["batch/train", "batch/too-big", "batch/check"] {
        let x = request(&r, key);
        assert!(x["answered_after_s"].is_null(), "{x}");
    }
    assert_eq!(f(&group(&r, "default/gpu-a")["scale_ups"]), 0.0);
    assert_eq!(f(&r["pods_created"]), 0.0, "no job was admitted");
}

#[test]
fn a_buffer_of_four_starts_each_bursts_first_four_pods_within_one_scan_interval() {
    let (r, out) = simulate(
        "buffer",
        &[
            "examples/capacity-buffer.yaml",
            "--capacity-buffer-controller-enabled=true",
            "--capacity-buffer-pod-injection-enabled=true",
        ],
    );
    assert!(out.contains("without the buffers (same scenario)"), "{out}");
    let scan = f(&r["scan_interval_s"]);
    let b = &r["capacity"]["buffers"];
    assert_eq!(f(&b["buffers"]["web/headroom"]), 4.0, "{b}");
    // Two bursts of 4: their 8 pods, with and without the buffer.
    assert_eq!(f(&b["with_buffers"]["pods"]), 8.0, "{b}");
    assert_eq!(f(&b["without_buffers"]["pods"]), 8.0, "{b}");
    let with = f(&b["with_buffers"]["p50_s"]);
    let without = f(&b["without_buffers"]["p50_s"]);
    assert!(
        with < scan,
        "p50 with the buffer {with}s, scan interval {scan}s"
    );
    // Without it, they wait for a scale-up: at least the shortest provisioning delay (60s).
    assert!(without >= 60.0, "p50 without the buffer {without}s");
}

/// An atomic request for 8 GPU nodes that `--balance-similar-node-groups` splits over two
/// similar groups (4 each, gpu-b's change first), while the scale API refuses gpu-a for the
/// first two minutes: the first try grows gpu-b, gpu-a's change fails and gpu-b is set back
/// (never half applied); the request is written not found, tried again after its backoff (gpu-a
/// backed off) and then gets its 8 nodes on gpu-b.
const ATOMIC_ACROSS_GROUPS: &str = "\
name: atomic-across-groups
duration: 30m
seed: 1
provisioning_delay: {min: 60s, max: 60s}
options:
  scan-interval: 10s
  enable-provisioning-requests: true
  balance-similar-node-groups: true
node_groups:
  - {name: gpu-a, min: 0, max: 8, cpu: \"8\", memory: 32Gi, gpu: {count: 1}, labels: {pool: gpu},
     annotations: {capacity.cluster-autoscaler.kubernetes.io/labels: pool=gpu}}
  - {name: gpu-b, min: 0, max: 8, cpu: \"8\", memory: 32Gi, gpu: {count: 1}, labels: {pool: gpu},
     annotations: {capacity.cluster-autoscaler.kubernetes.io/labels: pool=gpu}}
faults:
  - {group: gpu-a, from: 0m, to: 2m, kind: scale-api-error}
workloads:
  - kind: provisioning-request
    name: train
    namespace: batch
    at: 1m
    count: 8
    duration: 10m
    pod: {cpu: \"4\", memory: 8Gi, gpu: 1, node_selector: {pool: gpu}}
";

#[test]
fn an_atomic_scale_up_whose_second_group_fails_sets_the_first_back() {
    let dir = std::env::temp_dir().join(format!("ca-cap-atomic-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("atomic.yaml");
    std::fs::write(&file, ATOMIC_ACROSS_GROUPS).expect("write scenario");
    let (r, out) = simulate(
        "atomic-across-groups",
        &[file.to_str().expect("utf-8 path"), "--quiet"],
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        f(&r["safety_violations"]),
        0.0,
        "{}",
        r["safety_violation_samples"]
    );
    let (a, b) = (group(&r, "default/gpu-a"), group(&r, "default/gpu-b"));
    // The first try: gpu-a refused, gpu-b grown and set back (its target lowered again).
    assert_eq!(f(&a["scale_up_errors"]), 1.0, "{a}");
    assert_eq!(f(&a["scale_ups"]), 0.0, "{a}");
    assert_eq!(f(&b["target_decreases"]), 1.0, "{b}\n{out}");
    // Then its 8 nodes in one scale-up.
    assert_eq!(f(&b["scale_ups"]), 2.0, "{b}");
    assert_eq!(f(&b["nodes_added"]), 12.0, "{b}");
    // A later try: the request provisioned, its 8 pods run.
    let train = request(&r, "batch/train");
    assert!(train["failed"].is_null(), "{train}");
    assert!(!train["provisioned_after_s"].is_null(), "{train}");
    assert_eq!(f(&r["pods_created"]), 8.0);
    assert_eq!(f(&r["pods_pending_at_end"]), 0.0);
}
