//! `--gpu-total` on DRA GPUs end to end: `simulate examples/gpu-dra.yaml`, whose GPU nodes
//! publish 8 devices with `type: gpu` 30 s after they join, with a GPU max and a GPU min.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The GPU group's entry of the report of `simulate examples/gpu-dra.yaml` with `limit`.
fn gpu_group(limit: &str) -> Value {
    let dir = std::env::temp_dir().join(format!("ca-gpu-total-{}-{limit}", std::process::id()));
    let dir = dir.to_string_lossy().replace(':', "_");
    std::fs::create_dir_all(&dir).expect("temp dir");
    let report = Path::new(&dir).join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .args([
            "simulate",
            "examples/gpu-dra.yaml",
            "--quiet",
            "--gpu-total",
            limit,
        ])
        .arg("--report")
        .arg(&report)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."))
        .output()
        .expect("run the binary");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&report).expect("report written");
    let _ = std::fs::remove_dir_all(&dir);
    let r: Value = serde_json::from_str(&text).expect("report is JSON");
    assert_eq!(r["pods_pending_at_end"].as_f64(), Some(0.0), "{r}");
    let gpu = r["groups"][1].clone();
    assert_eq!(gpu["group"], "default/gpu");
    gpu
}

/// A max of 16 GPUs holds two 8-GPU nodes at most, though 28 GPUs are claimed at once: the
/// node whose driver has not published its slices yet counts with its template's 8.
#[test]
fn the_max_counts_the_gpus_of_a_node_still_starting() {
    let gpu = gpu_group("gpu.example.com:0:16");
    assert_eq!(gpu["nodes_max"].as_f64(), Some(2.0), "{gpu}");
}

/// A min of 16 GPUs keeps two GPU nodes once the jobs are done (without it the group shrinks
/// back to its min size, 1).
#[test]
fn the_min_keeps_the_dra_gpus_it_counts() {
    let gpu = gpu_group("gpu.example.com:16:64");
    assert_eq!(gpu["nodes_end"].as_f64(), Some(2.0), "{gpu}");
}
