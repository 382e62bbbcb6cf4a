//! The report's distance to the bound: the bound counts the trace's own work once, whatever
//! the drains restart, and the excess is split into parts that sum to it.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn scenarios() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/scenarios")
}

/// Runs `simulate` on `scenario` (a path) with `args`, returning the report JSON.
fn simulate(name: &str, scenario: &Path, args: &[&str]) -> Value {
    let dir = std::env::temp_dir().join(format!("ca-distance-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let report = dir.join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .arg("simulate")
        .arg(scenario)
        .args(args)
        .arg("--quiet")
        .arg("--report")
        .arg(&report)
        .current_dir(repo())
        .output()
        .expect("run the binary");
    assert!(
        out.status.success(),
        "simulate {scenario:?} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&report).expect("report written");
    let _ = std::fs::remove_dir_all(&dir);
    serde_json::from_str(&text).expect("report is JSON")
}

fn num(v: &Value, ptr: &str) -> f64 {
    v.pointer(ptr)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{ptr} missing in report"))
}

/// The six parts sum to the run's node-hours minus the bound's (each rounded to thousandths).
fn assert_parts_sum(r: &Value) {
    let excess = num(r, "/node_hours") - num(r, "/bound/node_hours");
    assert!(
        (num(r, "/distance/excess_node_hours") - excess).abs() < 0.003,
        "{excess} vs {}",
        r["distance"]
    );
    let parts: f64 = [
        "shape_choice",
        "waiting",
        "packing",
        "provisioning",
        "restarted_work",
        "delayed_work",
    ]
    .iter()
    .map(|p| num(r, &format!("/distance/{p}")))
    .sum();
    assert!(
        (parts - excess).abs() < 0.006,
        "parts {parts} vs excess {excess}: {}",
        r["distance"]
    );
}

#[test]
fn a_drain_that_restarts_tasks_leaves_the_bound_of_their_work_unchanged() {
    let scenario = scenarios().join("job-trace-drains.yaml");
    let drained = simulate("job", &scenario, &[]);
    assert!(num(&drained, "/evictions") >= 1.0, "no eviction");
    assert_eq!(num(&drained, "/pods_pending_at_end"), 0.0);
    assert!(num(&drained, "/distance/restarted_runs") >= 1.0);
    assert!(num(&drained, "/distance/restarted_work") > 0.0);

    // The same tasks as bare pods: never evicted, each runs once.
    let text = std::fs::read_to_string(&scenario).expect("scenario");
    let csv = scenarios().join("task-trace.csv");
    let bare_text = text
        .replace("owner: job", "owner: none")
        .replace("file: task-trace.csv", &format!("file: {}", csv.display()));
    assert_ne!(bare_text, text);
    let dir = std::env::temp_dir().join(format!("ca-distance-bare-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let bare = dir.join("bare.yaml");
    std::fs::write(&bare, bare_text).expect("write scenario");
    let once = simulate("bare", &bare, &[]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(num(&once, "/evictions"), 0.0);
    assert_eq!(num(&once, "/distance/restarted_work"), 0.0);

    // One node shape bound by CPU: the bound is the tasks' CPU-hours over a node's CPU, however
    // the tasks were placed or delayed, within a sample per task (10 s of 1.5 of 8 CPU).
    let (with_drains, without) = (
        num(&drained, "/bound/node_hours"),
        num(&once, "/bound/node_hours"),
    );
    assert!(
        (with_drains - without).abs() <= 40.0 * 10.0 / 3600.0 * 1.5 / 8.0,
        "bound with drains {with_drains}, without {without}"
    );
    // Counted in the bound, the restarted work would have raised it by more than that.
    assert!(
        with_drains + num(&drained, "/distance/restarted_work") > without + 0.1,
        "{}",
        drained["distance"]
    );
    assert_parts_sum(&drained);
    assert_parts_sum(&once);
}

#[test]
fn every_run_of_a_trace_has_the_same_bound() {
    // The same replayed tasks, drained after 3 minutes of unneeded time or never (the nodes are
    // kept an hour): different evictions, waits and restarts, the same bound of the trace's work.
    let scenario = scenarios().join("job-trace-drains.yaml");
    let drained = simulate("drained", &scenario, &[]);
    let kept = simulate("kept", &scenario, &["--scale-down-unneeded-time", "1h"]);
    assert!(num(&drained, "/evictions") >= 1.0, "no eviction");
    assert_eq!(num(&kept, "/evictions"), 0.0);
    assert_ne!(drained["node_hours"], kept["node_hours"]);
    for part in ["node_hours", "cost", "node_hours_by_resource"] {
        assert_eq!(drained["bound"][part], kept["bound"][part], "{part}");
    }
    assert_parts_sum(&drained);
    assert_parts_sum(&kept);
}

#[test]
fn the_summary_says_where_the_distance_is() {
    let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .arg("simulate")
        .arg(scenarios().join("job-trace-drains.yaml"))
        .current_dir(repo())
        .output()
        .expect("run the binary");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("  above the bound: ") && text.contains(" = shape choice "),
        "{text}"
    );
    assert!(text.contains("  restarted work: "), "{text}");
}
