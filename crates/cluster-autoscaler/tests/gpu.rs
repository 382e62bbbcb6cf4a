//! GPUs end to end: `plan` on snapshots of GPU node groups whose newest node has not
//! advertised its GPUs yet (its device plugin is starting).

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
