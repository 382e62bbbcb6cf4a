//! GPUs end to end: `plan` on snapshots of GPU node groups whose newest node has not
//! advertised its GPUs yet (its device plugin is starting, or its DRA driver has not published
//! its ResourceSlices).

use std::process::Command;

const NOW: &str = "2026-01-01T00:00:00Z";

fn plan(snapshot: &str) -> String {
    let path = format!("{}/tests/snapshots/{snapshot}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .args(["plan", "--snapshot", &path, "--now", NOW])
        .env_remove("CAPI_GROUP")
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("UTF-8 output")
}

fn assert_lines(stdout: &str, lines: &[&str]) {
    for line in lines {
        assert!(
            stdout.lines().any(|l| l == *line),
            "missing line {line:?} in:\n{stdout}"
        );
    }
}

/// A Ready node labelled `cluster-api/accelerator` without `nvidia.com/gpu` yet is starting, as
/// upstream's GPU processor counts it: the pod waiting for it causes no second scale-up, and the
/// node is not offered for removal.
#[test]
fn a_node_whose_gpus_are_not_advertised_yet_is_upcoming_not_unneeded() {
    let stdout = plan("gpu-device-plugin-starting.yaml");
    assert_lines(
        &stdout,
        &[
            "Cluster: healthy (1 ready, 0 unready, 1 starting, 0 being deleted)",
            "  MachineDeployment/default/gpu: size 2 (min 1, max 5), 1 upcoming",
            "  1 pending pod fits existing or upcoming nodes: ml/train-2",
        ],
    );
    let scale_up = stdout
        .split("\nScale-up:\n")
        .nth(1)
        .and_then(|s| s.split("\nScale-down:").next())
        .expect("a scale-up section");
    assert!(scale_up.starts_with("  none\n"), "{stdout}");
    assert!(!stdout.contains("gpu-b: unneeded"), "{stdout}");
    assert!(!stdout.contains("taint gpu-b"), "{stdout}");
    assert!(!stdout.contains("increase "), "{stdout}");
    assert!(
        stdout.contains("gpu-b is not removable: node has not started yet"),
        "{stdout}"
    );
}

/// The DRA flavour: the group's template has the GPU of its `dra-driver` annotation, and the
/// newest node's DRA driver has not published its ResourceSlice yet: that node is starting, the
/// pod whose claim waits for it causes no scale-up, and the node is not offered for removal.
#[test]
fn a_node_whose_dra_slices_are_not_published_yet_is_upcoming_not_unneeded() {
    let stdout = plan("gpu-dra-driver-starting.yaml");
    assert_lines(
        &stdout,
        &[
            "Cluster: healthy (1 ready, 0 unready, 1 starting, 0 being deleted)",
            "  MachineDeployment/default/gpu: size 2 (min 1, max 5), 1 upcoming",
            "  1 pending pod fits existing or upcoming nodes: ml/train-2",
        ],
    );
    assert!(!stdout.contains("gpu-b: unneeded"), "{stdout}");
    assert!(!stdout.contains("taint gpu-b"), "{stdout}");
    assert!(!stdout.contains("increase "), "{stdout}");
}

/// The group's only node has not advertised its GPUs: the template comes from the capacity
/// annotations (with the GPU), not from that node, so one pod waits for the node and the other
/// grows the group by one, instead of "Insufficient nvidia.com/gpu" for both.
#[test]
fn the_template_is_never_taken_from_a_node_whose_gpus_are_not_advertised() {
    let stdout = plan("gpu-template-from-starting-node.yaml");
    assert_lines(
        &stdout,
        &[
            "  MachineDeployment/default/gpu: 1 -> 2 (+1, for pending pods)",
            "  increase MachineDeployment/default/gpu by 1 to 2",
        ],
    );
    assert!(!stdout.contains("Insufficient nvidia.com/gpu;"), "{stdout}");
    assert!(!stdout.contains("triggers no scale-up"), "{stdout}");
}

/// No capacity annotations: the infrastructure template's `status.capacity` (with its GPU) and
/// `status.nodeInfo` (arm64) make the template, so the group scales from zero for the pod.
#[test]
fn a_group_scales_from_zero_with_its_infrastructure_template() {
    let stdout = plan("gpu-infrastructure-template.yaml");
    assert_lines(
        &stdout,
        &[
            "  MachineDeployment/default/gpu: size 0 (min 0, max 3)",
            "  MachineDeployment/default/gpu: 0 -> 1 (+1, for pending pods)",
            "  increase MachineDeployment/default/gpu by 1 to 1",
        ],
    );
}

/// `simulate` with a device plugin that advertises the GPUs 90 s after the node joins: the GPU
/// group grows once by the two nodes the two training pods need (the nodes waiting for their
/// GPUs are upcoming, never a reason for more), every pod runs, and the two go after the pods end.
#[test]
fn gpu_nodes_are_added_once_per_need_while_their_device_plugin_starts() {
    let dir = std::env::temp_dir().join(format!("ca-gpu-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let report = dir.join("report.json");
    let scenario = format!(
        "{}/tests/scenarios/gpu-device-plugin.yaml",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .args(["simulate", &scenario, "--report"])
        .arg(&report)
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("JSON");
    let _ = std::fs::remove_dir_all(&dir);
    let gpu = r["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["group"].as_str().is_some_and(|n| n.ends_with("/gpu")))
        .expect("the gpu group");
    // One serving node plus one per training pod, in one scale-up (before, with this seed, the
    // template came from the serving node and the group grew three times, to 7).
    assert_eq!(gpu["nodes_max"].as_f64(), Some(3.0), "{gpu}");
    assert_eq!(r["scale_ups"].as_f64(), Some(1.0), "{r}");
    assert_eq!(r["pods_pending_at_end"].as_f64(), Some(0.0), "{r}");
    let at_end = r["timeline"]
        .as_array()
        .and_then(|t| t.last())
        .and_then(|p| p["nodes"]["default/gpu"].as_f64());
    assert_eq!(at_end, Some(1.0), "{}", r["timeline"]);
}
