//! `plan` end to end: the real binary on snapshot files.

use std::io::Write;
use std::process::{Command, Output};

const NOW: &str = "2026-01-01T00:00:00Z";

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .args(args)
        .env_remove("CAPI_GROUP")
        .output()
        .expect("the binary runs")
}

/// A self-deleting temporary file (avoids a dev-dependency for one helper).
struct TempPath(std::path::PathBuf);

impl TempPath {
    fn with_text(text: &str) -> TempPath {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("ca-plan-test-{}-{n}.yaml", std::process::id()));
        let mut f = std::fs::File::create(&path).expect("create temp file");
        f.write_all(text.as_bytes()).expect("write temp file");
        TempPath(path)
    }
    fn as_str(&self) -> &str {
        self.0.to_str().expect("utf-8 temp path")
    }
}

impl Drop for TempPath {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The standard output of a run that must succeed (its standard error in the failure message).
fn stdout_of(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

fn example() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/examples/snapshot.yaml").to_string()
}

#[test]
fn example_snapshot_is_explained_and_decided() {
    let stdout = stdout_of(&["plan", "--snapshot", &example(), "--now", NOW]);
    for line in [
        // Scheduling, in kube-scheduler's words (reasons sorted as it sorts them).
        "  default/web-3: 0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 node(s) didn't match pod anti-affinity rules.",
        "  default/batch-1: 1/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}. Fits on: general-b.",
        // Node groups from the Cluster API objects.
        "  MachineDeployment/default/general: size 2 (min 1, max 5)",
        "  MachineDeployment/default/gpu: size 1 (min 0, max 3)",
        // Only the anti-affinity pod needs a new node; two pods fit existing nodes.
        "  MachineDeployment/default/general: 2 -> 3 (+1, for pending pods)",
        "  for 1 pod: default/web-3",
        "  2 pending pods fit existing or upcoming nodes: default/batch-1, ml/train-1",
        "  ml/train-2 triggers no scale-up: MachineDeployment/default/general: Insufficient nvidia.com/gpu; MachineDeployment/default/gpu: node(s) had untolerated taint {dedicated: gpu}",
        // The pods about to land keep every node needed.
        "  gpu-a is not removable: not underutilized: utilization 1.000 >= threshold 0.5",
        "  increase MachineDeployment/default/general by 1 to 3",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "missing line {line:?} in:\n{stdout}"
        );
    }
}

#[test]
fn an_idle_node_is_unneeded_with_its_deletion_time() {
    // Without the pending pods, the GPU node is idle.
    let text = std::fs::read_to_string(example()).unwrap();
    let idle: String = text
        .split("\n---\n")
        .filter(|d| !d.contains("reason: Unschedulable"))
        .collect::<Vec<_>>()
        .join("\n---\n");
    let f = TempPath::with_text(&idle);
    let out = run(&["plan", "--snapshot", f.as_str(), "--now", NOW]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("  gpu-a: unneeded; deletable after 10m0s"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  none\n\nScale-down:") || stdout.contains("Scale-up:\n  none"),
        "{stdout}"
    );
}

#[test]
fn the_api_group_comes_from_the_flag_or_capi_group() {
    let text = std::fs::read_to_string(example())
        .unwrap()
        .replace("cluster.x-k8s.io", "machine.openshift.io");
    let f = TempPath::with_text(&text);
    let default = run(&["plan", "--snapshot", f.as_str(), "--now", NOW]);
    assert!(
        String::from_utf8(default.stdout)
            .unwrap()
            .contains("Node groups: none found")
    );
    let flagged = run(&[
        "plan",
        "--snapshot",
        f.as_str(),
        "--now",
        NOW,
        "--capi-group",
        "machine.openshift.io",
    ]);
    assert!(
        String::from_utf8(flagged.stdout)
            .unwrap()
            .contains("MachineDeployment/default/general: size 2")
    );
    let env = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .args(["plan", "--snapshot", f.as_str(), "--now", NOW])
        .env("CAPI_GROUP", "machine.openshift.io")
        .output()
        .unwrap();
    assert!(
        String::from_utf8(env.stdout)
            .unwrap()
            .contains("MachineDeployment/default/gpu: size 1")
    );
    let bad = run(&[
        "plan",
        "--snapshot",
        f.as_str(),
        "--capi-group",
        "Not A Group",
    ]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn bad_quantity_names_the_object_and_field_and_exits_2() {
    let f = TempPath::with_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: x, namespace: ns}\nspec: {containers: [{name: a, resources: {requests: {cpu: 12Zi}}}]}\n",
    );
    let out = run(&["plan", "--snapshot", f.as_str()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("Pod ns/x"), "{err}");
    assert!(
        err.contains("spec.containers[0].resources.requests.cpu"),
        "{err}"
    );
    assert_eq!(
        err.matches("12Zi").count(),
        1,
        "the cause is printed once: {err}"
    );
}

#[test]
fn malformed_inputs_exit_2_without_panicking() {
    let cases = [
        ("not: [valid", "not valid YAML"),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec: {taints: [{key: k, effect: Sometimes}]}\n",
            "spec.taints[0].effect",
        ),
        (
            "metadata: {name: n}\n",
            "document 1: object has no apiVersion",
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {allocatable: 3}\n",
            "Node n: status.allocatable: invalid type",
        ),
        (
            "apiVersion: v1\nkind: List\nitems: 7\n",
            "items of a List is not a list",
        ),
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: train-1, namespace: ml}\nspec: {containers: []}\nstatus: {conditions: [{type: Ready, status: 'True', lastTransitionTime: '2026-13-01T00:00:00Z'}]}\n",
            "Pod ml/train-1: status.conditions[0].lastTransitionTime: ",
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: a}\nmetadata: {name: b}\n",
            "duplicate key \"metadata\"",
        ),
        (&"[".repeat(100_000), "nested more than 128 levels"),
    ];
    for (text, expected) in cases {
        let f = TempPath::with_text(text);
        let out = run(&["plan", "--snapshot", f.as_str()]);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{text}: {err}");
        assert!(
            err.contains(expected),
            "{text}: expected {expected:?} in {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    assert_eq!(
        run(&["plan", "--snapshot", "/nonexistent/snapshot.yaml"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(run(&["plan", "--no-such-flag"]).status.code(), Some(2));
    assert_eq!(
        run(&["plan", "--snapshot", &example(), "--now", "yesterday"])
            .status
            .code(),
        Some(2)
    );
}

#[test]
fn pods_bound_to_unknown_nodes_are_skipped_with_a_warning() {
    let f = TempPath::with_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: default}\nspec: {nodeName: ghost, containers: [{name: a}]}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
    );
    let out = run(&["plan", "--snapshot", f.as_str(), "--now", NOW]);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("warning: Pod default/p skipped: its node ghost is not known"),
        "{stdout}"
    );
    assert!(stdout.contains("no pod is waiting for a node"), "{stdout}");
}

#[test]
fn help_is_the_documented_main_job() {
    let out = run(&["plan", "--help"]);
    assert!(out.status.success());
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("--snapshot <FILE>")
    );
}

#[test]
fn json_output_carries_the_same_decision() {
    let v: serde_json::Value = serde_json::from_str(&stdout_of(&[
        "plan",
        "--snapshot",
        &example(),
        "--now",
        NOW,
        "--output",
        "json",
    ]))
    .expect("one JSON document");
    assert_eq!(
        v["scale_up"]["increases"][0]["group"],
        "MachineDeployment/default/general"
    );
    assert_eq!(v["scale_up"]["increases"][0]["to"], 3);
    assert_eq!(
        v["scale_up"]["pods_helped"],
        serde_json::json!(["default/web-3"])
    );
    assert_eq!(
        v["scale_up"]["pods_without_scale_up"][0]["reasons"]["MachineDeployment/default/gpu"],
        "node(s) had untolerated taint {dedicated: gpu}"
    );
    assert_eq!(
        v["scale_down"]["unremovable"].as_array().map(Vec::len),
        Some(3)
    );
    assert_eq!(
        v["actions"],
        serde_json::json!(["increase MachineDeployment/default/general by 1 to 3"])
    );
    // Everything the text shows: per-pod scheduling, cluster health, the would-be events.
    let scheduling = v["scheduling"].as_array().expect("scheduling");
    assert_eq!(scheduling.len(), 4);
    let batch = &scheduling[0];
    assert_eq!(batch["pod"], "default/batch-1");
    assert_eq!(
        (batch["nodes_available"].as_u64(), batch["nodes"].as_u64()),
        (Some(1), Some(3))
    );
    assert_eq!(batch["fits_on"], serde_json::json!(["general-b"]));
    assert_eq!(
        batch["message"],
        "1/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}."
    );
    assert_eq!(
        scheduling[1]["reasons"],
        serde_json::json!([
            "1 node(s) had untolerated taint {dedicated: gpu}",
            "2 node(s) didn't match pod anti-affinity rules"
        ])
    );
    assert_eq!(v["cluster"]["healthy"], true);
    assert_eq!(v["cluster"]["ready"], 3);
    assert_eq!(v["node_groups"][0]["upcoming"], 0);
    assert_eq!(v["would_emit_events"][0]["reason"], "ScaledUpGroup");
    assert_eq!(
        v["would_emit_events"][0]["object"],
        "MachineDeployment/default/general"
    );
}

#[test]
fn prices_from_the_annotation_are_shown_per_group_per_option_and_per_increase() {
    let key = "cluster.x-k8s.io/cluster-api-autoscaler-node-price-per-hour";
    let text = std::fs::read_to_string(example())
        .expect("example")
        .replace(
            "      cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: \"5\"\n",
            &format!("      cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: \"5\"\n      {key}: \"0.25\"\n"),
        )
        .replace(
            "      cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: \"3\"\n",
            &format!("      cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: \"3\"\n      {key}: \"a lot\"\n"),
        );
    let file = TempPath::with_text(&text);
    let out = run(&["plan", "--snapshot", file.as_str(), "--now", NOW]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    for line in [
        "  MachineDeployment/default/general: size 2 (min 1, max 5), 0.250/node-hour",
        // A malformed price leaves the group unpriced, with a warning naming it.
        "  MachineDeployment/default/gpu: size 1 (min 0, max 3)",
        "  MachineDeployment/default/general: 2 -> 3 (+1, for pending pods, +0.250/hour)",
        // Each option the expander was offered, with its price.
        "  option 1: MachineDeployment/default/general +1 node for 1 pod, 1 x 0.250 = 0.250/hour (chosen)",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "missing line {line:?} in:\n{stdout}"
        );
    }
    assert!(
        stdout.lines().any(|l| l.starts_with("warning: ")
            && l.contains("gpu")
            && l.contains(&format!("annotation {key} is \"a lot\""))),
        "{stdout}"
    );
    let out = run(&[
        "plan",
        "--snapshot",
        file.as_str(),
        "--now",
        NOW,
        "--output",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(v["node_groups"][0]["price_per_hour"], 0.25);
    assert_eq!(
        v["node_groups"][1]["price_per_hour"],
        serde_json::Value::Null
    );
    assert_eq!(v["scale_up"]["increases"][0]["added_cost_per_hour"], 0.25);
    assert_eq!(
        v["scale_up"]["options"],
        serde_json::json!([{
            "round": 0, "group": "MachineDeployment/default/general", "nodes": 1, "pods": 1,
            "price_per_node_hour": 0.25, "cost_per_hour": 0.25, "chosen": true,
        }])
    );
}

#[test]
fn text_says_events_would_be_emitted_and_counts_in_words() {
    let out = run(&["plan", "--snapshot", &example(), "--now", NOW]);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    // Nothing is emitted by a plan: the event is what a loop would emit.
    assert!(
        stdout.contains("  would emit event ScaledUpGroup MachineDeployment/default/general: "),
        "{stdout}"
    );
    assert!(!stdout.contains("  event "), "{stdout}");
    assert!(stdout.contains("  for 1 pod: default/web-3\n"), "{stdout}");
    assert!(
        stdout.contains("  2 pending pods fit existing or upcoming nodes: "),
        "{stdout}"
    );
    assert!(!stdout.contains("pod(s)"), "{stdout}");
}

#[test]
fn a_failed_machine_backs_its_group_off_and_is_deleted() {
    let failed = r#"
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Machine
metadata:
  name: gpu-1-b
  namespace: default
  labels: {cluster.x-k8s.io/deployment-name: gpu}
  ownerReferences: [{apiVersion: cluster.x-k8s.io/v1beta1, kind: MachineSet, name: gpu-1, uid: ms-gpu, controller: true}]
spec: {clusterName: demo}
status: {phase: Failed, failureReason: InsufficientCapacity, failureMessage: "no GPU capacity in zone-a"}
"#;
    // The gpu group asked for a second machine, which failed.
    let text = std::fs::read_to_string(example())
        .unwrap()
        .replace("replicas: 1\n", "replicas: 2\n")
        + failed;
    let f = TempPath::with_text(&text);
    let stdout = stdout_of(&["plan", "--snapshot", f.as_str(), "--now", NOW]);
    assert!(
        stdout.contains("MachineDeployment/default/gpu: size 2 (min 0, max 3)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("in backoff after failed scale-up"),
        "{stdout}"
    );
    assert!(
        stdout.contains("would emit event ScaleUpFailed MachineDeployment/default/gpu"),
        "{stdout}"
    );
    assert!(
        stdout.contains("delete instance(s) clusterapi://default/gpu-1-b of MachineDeployment/default/gpu (ScaleUpFailed)"),
        "{stdout}"
    );
}

/// Runs `plan` on `text` under a 2 GiB address-space limit, killed after 30 s; returns the
/// exit code (None when killed) and stdout + stderr.
fn plan_bounded(text: &str) -> (Option<i32>, String) {
    let f = TempPath::with_text(text);
    let bin = env!("CARGO_BIN_EXE_cluster-autoscaler");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 2097152; exec '{bin}' plan --snapshot '{}' --now {NOW}",
            f.as_str()
        ))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while child.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    (out.status.code(), text)
}

#[test]
fn huge_machine_deployment_replicas_finish_in_bounded_memory() {
    // spec.replicas 10,000,000 with max 5 took 7.1 GB ("9999998 upcoming"); 2^31 is not an
    // int32 and aborted.
    let example = std::fs::read_to_string(example()).expect("example");
    for replicas in ["10000000", "2147483648"] {
        let text = example.replacen(
            "    replicas: 2\n",
            &format!("    replicas: {replicas}\n"),
            1,
        );
        let (code, out) = plan_bounded(&text);
        assert!(
            matches!(code, Some(0 | 2)),
            "{replicas}: exit {code:?}: {out}"
        );
        assert!(!out.contains("panicked"), "{out}");
        assert!(
            out.contains("replicas"),
            "{replicas}: no warning or error names it: {out}"
        );
    }
}

/// `plan` answers for the configuration the cluster runs with: every flag of `run` and its
/// `--config` file go through the same options and the same validation.
#[test]
fn plan_takes_the_flags_and_config_of_run() {
    let base = ["plan", "--snapshot", &example(), "--now", NOW];
    let text = |extra: &[&str]| {
        let out = run(&[&base[..], extra].concat());
        assert!(
            out.status.success(),
            "{extra:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let default = text(&[]);
    assert!(default.contains("increase MachineDeployment/default/general by 1 to 3"));
    // A node limit stops the scale-up, given as a flag or by the ClusterAutoscaler resource.
    let limited = text(&["--max-nodes-total=3"]);
    assert!(
        limited.contains("max total nodes in cluster reached"),
        "{limited}"
    );
    assert!(!limited.contains("increase MachineDeployment"), "{limited}");
    let config = TempPath::with_text(
        "apiVersion: autoscaling.openshift.io/v1\nkind: ClusterAutoscaler\nmetadata: {name: default}\nspec:\n  resourceLimits: {maxNodesTotal: 3}\n",
    );
    let from_file = text(&["--config", config.as_str()]);
    assert!(
        from_file.contains("max total nodes in cluster reached"),
        "{from_file}"
    );
    // The flag wins over the file, as for run.
    let flag_wins = text(&["--config", config.as_str(), "--max-nodes-total=10"]);
    assert!(flag_wins.contains("increase MachineDeployment/default/general by 1 to 3"));
    // Thresholds change what scale-down says.
    assert!(default.contains("general-a is not removable: not underutilized"));
    let threshold = text(&["--scale-down-utilization-threshold=0.9"]);
    assert!(
        !threshold.contains("general-a is not removable: not underutilized"),
        "{threshold}"
    );
    // The issue's example, and a bad value refused as run refuses it.
    text(&[
        "--expander=least-waste",
        "--cores-total=0:64",
        "--config",
        config.as_str(),
    ]);
    let bad = run(&[&base[..], &["--cores-total=10:5"]].concat());
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("cores-total"));
}

#[test]
fn zonal_volumes_are_explained_and_grow_only_their_zone() {
    let snapshot = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/zonal-volumes-snapshot.yaml"
    );
    let stdout = stdout_of(&[
        "plan",
        "--snapshot",
        snapshot,
        "--now",
        NOW,
        "--balance-similar-node-groups",
    ]);
    for line in [
        // Every pending pod is explained in the scheduler's words: the volume in zone c rules
        // out the other zones' nodes that have room.
        "  default/db-2: 0/6 nodes are available: 2 node(s) had volume node affinity conflict, 4 Insufficient cpu.",
        // A claim not bound yet (WaitForFirstConsumer) may go to any node with room.
        "  default/new-0: 5/6 nodes are available: 1 Insufficient cpu. Fits on: data-a, data-a2, data-b, data-b2, data-c2.",
        // A missing claim rejects the pod before any node is looked at.
        "  default/orphan-0: 0/6 nodes are available: persistentvolumeclaim \"data-orphan-0\" not found.",
        // Balancing is on and the three groups are similar, yet only zone c grows.
        "  MachineDeployment/default/data-c: 2 -> 3 (+1, for pending pods)",
        "  for 1 pod: default/db-2",
        "  1 pending pod fits existing or upcoming nodes: default/new-0",
        // Scale-down moves a pod with a zonal volume only within its zone: zone b has room,
        // zone c has not; a pod on a local volume cannot move at all.
        "  data-a2 is not removable: no place to move pod default/cache-0: its volume pv-cache-0 is reachable from this node only",
        "  data-c2 is not removable: no place to move pod default/queue-1",
        "  increase MachineDeployment/default/data-c by 1 to 3",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "missing line {line:?} in:\n{stdout}"
        );
    }
    assert!(
        stdout.lines().any(|l| l.starts_with("  data-b2: unneeded")),
        "{stdout}"
    );
    assert!(
        stdout.contains("default/orphan-0 triggers no scale-up: MachineDeployment/default/data-a: persistentvolumeclaim \"data-orphan-0\" not found"),
        "{stdout}"
    );
    assert_eq!(stdout.matches(" -> ").count(), 1, "{stdout}");
}

#[test]
fn a_malformed_storage_object_names_the_object_and_field_and_exits_2() {
    let text = "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: data, namespace: db}\n\
                spec: {accessModes: [Sometimes]}\n";
    let file = TempPath::with_text(text);
    let out = run(&["plan", "--snapshot", file.as_str(), "--now", NOW]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("PersistentVolumeClaim db/data: field spec.accessModes[0]"),
        "{stderr}"
    );
}

/// The issue's second snapshot: a pod asking one GPU through a DRA claim template, no free GPU
/// anywhere. kube-scheduler's filter rejects both nodes, the GPU group grows (its template
/// carries the GPU node's devices), the CPU group does not, and the GPU node whose only device
/// is allocated is judged by its devices, not by its CPU.
#[test]
fn a_dra_claim_pod_grows_the_gpu_group_not_the_cpu_one() {
    let snapshot = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/gpu-dra-snapshot.yaml"
    );
    let stdout = stdout_of(&["plan", "--snapshot", snapshot, "--now", NOW]);
    for line in [
        "  ml/train-2: 0/2 nodes are available: 2 cannot allocate all claims.",
        "  MachineDeployment/default/gpu: 1 -> 2 (+1, for pending pods)",
        "  for 1 pod: ml/train-2",
        "  gpu-a is not removable: not underutilized: utilization 1.000 >= threshold 0.5",
        "  increase MachineDeployment/default/gpu by 1 to 2",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "missing line {line:?} in:\n{stdout}"
        );
    }
    assert!(!stdout.contains("Fits on: cpu-a"), "{stdout}");
    assert_eq!(stdout.matches(" -> ").count(), 1, "{stdout}");
}

#[test]
fn plan_decides_provisioning_requests_with_their_flag_and_leaves_them_alone_without() {
    let extra = "\
---
apiVersion: v1
kind: PodTemplate
metadata: {name: trainer, namespace: batch}
template:
  spec:
    tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]
    containers: [{name: c, image: i, resources: {requests: {cpu: \"4\", nvidia.com/gpu: \"1\"}, limits: {nvidia.com/gpu: \"1\"}}}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: huge, namespace: batch, creationTimestamp: \"2025-12-31T23:30:00Z\"}
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: trainer}, count: 5}]
";
    let base = std::fs::read_to_string(example()).expect("the example snapshot");
    let plan = |snapshot: &str| {
        let file = TempPath::with_text(&format!("{snapshot}\n{extra}"));
        let args = ["--now", NOW, "--enable-provisioning-requests"];
        stdout_of(&[&["plan", "--snapshot", file.as_str()][..], &args[..]].concat())
    };
    // The snapshot's four pods marked Unschedulable wait too: as in `run`'s first loop, the
    // ordinary pods take the loop's scale-up and the request waits for its turn (the next
    // loop's).
    let stdout = plan(&base);
    assert!(
        stdout.contains(
            "  ProvisioningRequest batch/huge (best-effort-atomic-scale-up.autoscaling.x-k8s.io): \
             waiting for its turn or its retry backoff\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("  increase MachineDeployment/default/general by "),
        "{stdout}"
    );
    // Without them (not marked by kube-scheduler yet), the loop is the request's.
    let stdout = plan(&base.replace("reason: Unschedulable}", "reason: SchedulingGated}"));
    // 5 GPU pods: the gpu group (max 3 nodes of 1 GPU) can never take them all, so it grows
    // by nothing and the request fails.
    let line = stdout
        .lines()
        .find(|l| l.starts_with("  ProvisioningRequest batch/huge"))
        .unwrap_or_else(|| panic!("no request line in:\n{stdout}"));
    assert!(
        line.starts_with(
            "  ProvisioningRequest batch/huge (best-effort-atomic-scale-up.autoscaling.x-k8s.io): \
             can never fit: only 3 of 5 pods fit ("
        ),
        "{line}"
    );
    assert!(
        line.contains(
            "writes Accepted=True (Accepted: ProvisioningRequest is accepted by \
             ClusterAutoscaler), Failed=True (CapacityCannotFit: The node groups cannot hold all \
             pods even at their max sizes: only 3 of 5 pods fit ("
        ),
        "{line}"
    );
    assert!(
        !stdout.contains("increase MachineDeployment/default/gpu"),
        "{stdout}"
    );
    let file = TempPath::with_text(&format!("{base}\n{extra}"));
    let without = stdout_of(&["plan", "--snapshot", file.as_str(), "--now", NOW]);
    assert!(!without.contains("Capacity on request"), "{without}");
}

/// In the request's turn (no ordinary pod waits), `plan` shows the atomic scale-up among the
/// loop's actions as `run` carries it out: one action for all its groups, all or none.
#[test]
fn plan_shows_an_atomic_request_s_scale_up_as_one_all_or_none_action() {
    let extra = "\
---
apiVersion: v1
kind: PodTemplate
metadata: {name: trainer, namespace: batch}
template:
  spec:
    tolerations: [{key: dedicated, operator: Equal, value: gpu, effect: NoSchedule}]
    containers: [{name: c, image: i, resources: {requests: {cpu: \"4\", nvidia.com/gpu: \"1\"}, limits: {nvidia.com/gpu: \"1\"}}}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: train, namespace: batch, creationTimestamp: \"2025-12-31T23:30:00Z\"}
spec:
  provisioningClassName: best-effort-atomic-scale-up.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: trainer}, count: 2}]
";
    let base = std::fs::read_to_string(example()).expect("the example snapshot");
    let quiet = base.replace("reason: Unschedulable}", "reason: SchedulingGated}");
    let file = TempPath::with_text(&format!("{quiet}\n{extra}"));
    let stdout = stdout_of(&[
        "plan",
        "--snapshot",
        file.as_str(),
        "--now",
        NOW,
        "--enable-provisioning-requests",
    ]);
    assert!(
        stdout.lines().any(|l| l
            == "  increase MachineDeployment/default/gpu by 1 to 2 (all or none, for \
                ProvisioningRequest batch/train)"),
        "{stdout}"
    );
    assert_eq!(stdout.matches("  increase ").count(), 1, "{stdout}");
}
