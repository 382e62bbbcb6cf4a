//! Scenario tests of `cluster-autoscaler simulate`: the examples (shortened where they are long)
//! run through the binary, and their JSON reports are checked against the outcomes they show.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether the shared trace `file` is there; says the test is skipped when it is not (the traces
/// live beside the repository, not in it).
fn trace_present(file: &str) -> bool {
    let trace = repo().join("../shared/traces").join(file);
    if !trace.exists() {
        eprintln!(
            "skipped: trace {} is absent (see ../shared/traces/README.md)",
            trace.display()
        );
    }
    trace.exists()
}

/// Runs `simulate` with `args`, returning the report JSON and the summary.
fn simulate(name: &str, args: &[&str]) -> (Value, String) {
    let dir = std::env::temp_dir().join(format!("ca-sim-{}-{name}", std::process::id()));
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

fn num(v: &Value, ptr: &str) -> f64 {
    v.pointer(ptr)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{ptr} missing in report"))
}

#[test]
fn the_default_scenario_runs_and_prints_the_summary() {
    let (r, out) = simulate("default", &[]);
    for needle in [
        "Timeline",
        "Node groups:",
        "Pod wait (creation to running): p50",
        "PDB violations: 0",
        "Failed provisionings:",
    ] {
        assert!(out.contains(needle), "summary lacks {needle:?}:\n{out}");
    }
    assert_eq!(r["groups"].as_array().map(Vec::len), Some(3));
    assert_eq!(num(&r, "/pdb_violations"), 0.0);
    assert_eq!(num(&r, "/pods_pending_at_end"), 0.0);
    assert!(num(&r, "/scale_ups") >= 2.0, "burst and GPU job scale up");
    assert!(num(&r, "/scale_downs") >= 1.0, "quiet hours scale down");
    // Three node shapes (general, GPU, ...): the bound is a linear program per sample, and the
    // run can only be above it.
    assert_eq!(r["bound"]["method"], "linear program over 3 node shapes");
    assert!(num(&r, "/bound/node_hours") > 0.0);
    assert!(num(&r, "/bound/node_hours_ratio") >= 1.0, "{}", r["bound"]);
    assert!(num(&r, "/bound/cost_ratio") >= 1.0, "{}", r["bound"]);
    assert!(
        out.contains("Fluid bound (linear program over 3 node shapes): "),
        "{out}"
    );
}

#[test]
fn burst_pods_all_run_within_the_provisioning_delay_plus_two_scan_intervals() {
    let (r, _) = simulate("burst", &["examples/burst.yaml", "--duration", "15m"]);
    assert_eq!(num(&r, "/pods_pending_at_end"), 0.0);
    assert_eq!(num(&r, "/pod_wait/started"), num(&r, "/pods_created"));
    // Delay at most 90 s (examples/burst.yaml), scan interval 10 s.
    let bound = 90.0 + 2.0 * num(&r, "/scan_interval_s");
    assert!(
        num(&r, "/pod_wait/max_s") <= bound,
        "max wait {} > {bound}",
        num(&r, "/pod_wait/max_s")
    );
    assert_eq!(num(&r, "/scale_ups"), 1.0, "one burst, one scale-up");
    // The fluid bound: 40 one-CPU pods on 4-CPU nodes need 10 nodes once they run; the run
    // can only be above it, and here (nothing to remove, one scale-up) close to it.
    let ratio = num(&r, "/bound/node_hours_ratio");
    assert!((1.0..1.1).contains(&ratio), "ratio {ratio}: {}", r["bound"]);
    assert_eq!(r["bound"]["method"], "one node shape");
    let last = r["timeline"]
        .as_array()
        .and_then(|t| t.last())
        .expect("timeline");
    assert_eq!(num(last, "/bound_nodes"), 10.0);
}

#[test]
fn quiet_hours_return_nodes_to_min_after_the_unneeded_time() {
    let (r, _) = simulate("quiet", &["examples/quiet-hours.yaml"]);
    let g = &r["groups"][0];
    assert!(
        num(g, "/nodes_max") > num(g, "/min"),
        "the busy hour scaled up"
    );
    assert_eq!(num(g, "/nodes_end"), num(g, "/min"));
    // The burst ends at 50 m; unneeded time and delay after add are 5 m each. The group is
    // back at min well before 50 m + 5 m + 15 m.
    let min = num(g, "/min") as u64;
    let back = r["timeline"]
        .as_array()
        .expect("timeline")
        .iter()
        .filter(|p| num(p, "/t_s") >= 3000.0)
        .find(|p| p["nodes"]["default/workers"].as_u64() == Some(min))
        .map(|p| num(p, "/t_s"))
        .expect("back at min");
    assert!(back <= 3000.0 + 20.0 * 60.0, "back at min only at {back} s");
    // The web pods' replacements keep off the soft-tainted unneeded nodes (kube-scheduler's
    // taint score), so those empty and go without a drain. Drains under a budget: the tests of
    // `consolidation.yaml` and `trace-drains-under-budget.yaml`.
    assert_eq!(num(&r, "/drains"), 0.0, "a node still held web pods");
    assert_eq!(num(&r, "/evictions"), 0.0);
    assert_eq!(num(&r, "/pdb_violations"), 0.0);
    assert_eq!(num(&r, "/safety_violations"), 0.0);
}

#[test]
fn balanced_groups_grow_evenly() {
    let (r, _) = simulate(
        "zones",
        &["examples/three-zones-balanced.yaml", "--duration", "20m"],
    );
    let peaks: Vec<f64> = (0..3).map(|i| num(&r["groups"][i], "/nodes_max")).collect();
    let (lo, hi) = peaks
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), x| (l.min(*x), h.max(*x)));
    assert!(hi - lo <= 1.0, "peaks {peaks:?}");
    assert_eq!(num(&r, "/pods_pending_at_end"), 0.0);
}

#[test]
fn the_cores_limit_is_never_exceeded() {
    let (r, _) = simulate("cores", &["examples/cores-limit.yaml", "--duration", "20m"]);
    for p in r["timeline"].as_array().expect("timeline") {
        let nodes = p["nodes"]["default/workers"].as_u64().unwrap_or(0);
        assert!(nodes * 4 <= 32, "{nodes} 4-core nodes at {}", p["t_s"]);
    }
    assert!(
        num(&r, "/pods_pending_at_end") > 0.0,
        "the limit leaves pods pending"
    );
}

#[test]
fn stockouts_are_counted_as_failed_provisionings() {
    let (r, out) = simulate(
        "stockout",
        &["examples/stockout-fallback.yaml", "--duration", "10m"],
    );
    assert!(num(&r["groups"][0], "/failed_provisionings") > 0.0);
    assert_eq!(r["fallbacks"][0]["group"], "default/spot");
    assert!(out.contains("default/spot failed at"), "{out}");
}

#[test]
fn every_example_keeps_every_pdb() {
    for f in [
        "examples/quiet-hours.yaml",
        "examples/three-zones-balanced.yaml",
        "examples/consolidation.yaml",
    ] {
        let (r, _) = simulate("pdb", &[f, "--duration", "1h"]);
        assert_eq!(num(&r, "/pdb_violations"), 0.0, "{f}");
    }
}

#[test]
fn the_same_scenario_and_seed_give_a_byte_identical_report() {
    let run = |tag: &str, seed: &str| {
        let dir = std::env::temp_dir().join(format!("ca-sim-{}-det-{tag}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let report = dir.join("r.json");
        let plot = dir.join("t.svg");
        let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
            .args([
                "simulate",
                "--duration",
                "1h30m",
                "--seed",
                seed,
                "--report",
            ])
            .arg(&report)
            .arg("--plot")
            .arg(&plot)
            .current_dir(repo())
            .output()
            .expect("run");
        assert!(out.status.success());
        let r = std::fs::read(&report).expect("report");
        let svg = std::fs::read_to_string(&plot).expect("plot");
        let _ = std::fs::remove_dir_all(&dir);
        (r, svg)
    };
    let (a, svg) = run("a", "9");
    let (b, _) = run("b", "9");
    assert!(a == b, "reports differ between two runs with the same seed");
    assert!(svg.starts_with("<svg") && svg.contains("virtual time (h:mm)"));
    assert!(svg.contains("default/gpu") && svg.contains("pending pods"));
    let (c, _) = run("c", "10");
    assert!(a != c, "another seed changes the run");
}

#[test]
fn a_bad_scenario_exits_2_naming_the_field() {
    let dir = std::env::temp_dir().join(format!("ca-sim-{}-bad", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("bad.yaml");
    std::fs::write(
        &path,
        "name: bad\nduration: 1h\nnode_groups:\n- {name: a, min: 0, max: 3, cpu: '4', memory: 16Gi, colour: red}\n",
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .arg("simulate")
        .arg(&path)
        .output()
        .expect("run");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unknown field `colour`"), "{err}");
}

#[test]
fn the_alibaba_trace_replays_when_the_trace_is_present() {
    if !trace_present("alibaba-gpu-2023-pods.csv") {
        return;
    }
    let (r, _) = simulate(
        "alibaba",
        &["examples/alibaba-gpu.yaml", "--duration", "30m"],
    );
    assert!(num(&r, "/pods_created") > 100.0);
    assert!(num(&r, "/pod_wait/started") > 100.0);
    assert_eq!(num(&r, "/pdb_violations"), 0.0);
}

#[test]
fn the_alibaba_trace_replays_in_real_time_when_the_trace_is_present() {
    if !trace_present("alibaba-gpu-2023-pods.csv") {
        return;
    }
    // The whole replay is 34 days of virtual time; its first 12 hours here.
    let (r, out) = simulate(
        "alibaba-realtime",
        &["examples/alibaba-gpu-realtime.yaml", "--duration", "12h"],
    );
    assert!(num(&r, "/pods_created") > 50.0, "{out}");
    assert_eq!(num(&r, "/pods_pending_at_end"), 0.0, "{out}");
    // Pods wait for at most one provisioning delay (2 min) plus two loops.
    assert!(num(&r, "/pod_wait/p99_s") <= 120.0 + 20.0, "{out}");
    assert_eq!(num(&r, "/pdb_violations"), 0.0);
    let ratio = num(&r, "/bound/node_hours_ratio");
    assert!(
        (1.0..1.25).contains(&ratio),
        "node-hours {ratio}x the bound:\n{out}"
    );
}

#[test]
fn consolidation_drains_scattered_pods_under_their_budget() {
    let (r, out) = simulate("consolidation", &["examples/consolidation.yaml"]);
    assert!(num(&r, "/drains") > 0.0, "no drain:\n{out}");
    assert!(num(&r, "/evictions") > 0.0, "no eviction:\n{out}");
    // The budget refused some evictions (a sequential drain, a replacement not yet running);
    // they were retried, and no drain gave up.
    assert!(num(&r, "/eviction_refusals") > 0.0, "no refusal:\n{out}");
    assert_eq!(num(&r, "/drains_failed"), 0.0);
    assert_eq!(num(&r, "/pdb_violations"), 0.0);
    // Every pod (evicted ones' replacements included) ends up running.
    assert_eq!(num(&r, "/pods_pending_at_end"), 0.0);
    assert_eq!(num(&r, "/pod_wait/started"), num(&r, "/pods_created"));
    // Back toward min: the ten web pods fit on three 4-CPU nodes.
    let g = &r["groups"][0];
    assert!(num(g, "/nodes_max") >= 8.0, "the batch burst scaled up");
    assert!(
        num(g, "/nodes_end") <= num(g, "/min") + 1.0,
        "{} nodes at the end",
        num(g, "/nodes_end")
    );
}

/// The scenario of the snapshot test: default autoscaler options (so that `plan`, which runs
/// with the defaults, decides with the same options as the simulated loop).
const SNAPSHOT_SCENARIO: &str = "name: snap
duration: 20m
seed: 5
node_groups:
  - {name: workers, min: 1, max: 10, cpu: '4', memory: 16Gi}
workloads:
  - kind: deployment
    name: web
    replicas: 2
    schedule:
      - {at: 5m, replicas: 20}
      - {at: 12m, replicas: 26}
    pod: {cpu: '1', memory: 1Gi}
";

#[test]
fn plan_on_a_world_snapshot_decides_the_scale_up_the_loop_decided() {
    let dir = std::env::temp_dir().join(format!("ca-sim-{}-snapshot", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let scenario = dir.join("snap.yaml");
    std::fs::write(&scenario, SNAPSHOT_SCENARIO).expect("write scenario");
    let bin = env!("CARGO_BIN_EXE_cluster-autoscaler");
    let mut scale_ups_seen = 0;
    // Before the burst, at the burst, while nodes are upcoming, at the second burst.
    for at in ["1m", "5m", "5m10s", "6m30s", "12m", "12m10s"] {
        let snap = dir.join(format!("snap-{at}.yaml"));
        let out = Command::new(bin)
            .arg("simulate")
            .arg(&scenario)
            .args(["--quiet", "--snapshot-at", at, "--snapshot-out"])
            .arg(&snap)
            .output()
            .expect("run simulate");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = std::fs::read_to_string(&snap).expect("snapshot written");
        let now = text
            .lines()
            .find_map(|l| l.strip_prefix("# now: "))
            .expect("now in the header")
            .to_string();
        let loop_actions: Vec<String> = text
            .lines()
            .skip_while(|l| !l.starts_with("# actions the loop decided:"))
            .skip(1)
            .map_while(|l| l.strip_prefix("#   "))
            .filter(|a| *a != "none")
            .map(str::to_string)
            .collect();
        let out = Command::new(bin)
            .args(["plan", "--output", "json", "--now", &now, "--snapshot"])
            .arg(&snap)
            .output()
            .expect("run plan");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let plan: Value = serde_json::from_slice(&out.stdout).expect("plan JSON");
        let plan_actions: Vec<String> = plan["actions"]
            .as_array()
            .expect("actions")
            .iter()
            .filter_map(|a| a.as_str().map(str::to_string))
            .collect();
        // The scale-up is decided from the objects alone (upcoming nodes are the target size
        // minus the registered nodes in both); scale-down also depends on the loop's memory
        // (how long each node has been unneeded), which a fresh `plan` does not have.
        let ups = |v: &[String]| -> Vec<String> {
            v.iter()
                .filter(|a| a.starts_with("increase "))
                .cloned()
                .collect()
        };
        assert_eq!(
            ups(&loop_actions),
            ups(&plan_actions),
            "at {at}: the loop decided {loop_actions:?}, plan {plan_actions:?}"
        );
        scale_ups_seen += ups(&loop_actions).len();
    }
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        scale_ups_seen >= 2,
        "both bursts scale up at a compared instant"
    );
}

#[test]
fn the_azure_replay_runs_shortened_when_the_trace_is_present() {
    if !trace_present("azure-v1-vms.csv") {
        return;
    }
    // The full replay (84 h of virtual time) is for `--release`; its first 30 minutes here.
    let (r, _) = simulate(
        "azure",
        &["examples/azure-replay.yaml", "--duration", "30m"],
    );
    assert!(
        num(&r, "/pods_created") > 1000.0,
        "the trace's first VMs arrive"
    );
    assert!(num(&r, "/scale_ups") >= 1.0);
    // Pods wait for at most one provisioning delay (2 min) plus two loops.
    assert!(num(&r, "/pod_wait/max_s") <= 120.0 + 20.0);
    assert_eq!(num(&r, "/pdb_violations"), 0.0);
}

#[test]
fn the_zonal_azure_replay_runs_shortened_and_balanced_when_the_trace_is_present() {
    if !trace_present("azure-v1-vms.csv") {
        return;
    }
    // The full replay (84 h) is for `--release`; its first 30 minutes here.
    let (r, _) = simulate(
        "azure-zones",
        &["examples/azure-replay-zones.yaml", "--duration", "30m"],
    );
    assert!(num(&r, "/pods_created") > 1000.0);
    let peaks: Vec<f64> = (0..3).map(|i| num(&r["groups"][i], "/nodes_max")).collect();
    assert!(peaks.iter().all(|&p| p >= 10.0), "peaks {peaks:?}");
    let (lo, hi) = peaks
        .iter()
        .fold((f64::MAX, 0.0f64), |(l, h), x| (l.min(*x), h.max(*x)));
    assert!(hi - lo <= 2.0, "balanced: peaks {peaks:?}");
    assert_eq!(num(&r, "/pdb_violations"), 0.0);
}

#[test]
fn a_trace_row_out_of_arrival_order_stops_the_replay_naming_file_and_line() {
    let dir = std::env::temp_dir().join(format!("ca-sim-{}-unordered", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(
        dir.join("t.csv"),
        "name,arrival_s,duration_s,cpu_milli,memory_mib,gpu,gpu_model,priority\n\
         a,0,60,100,128,0,,0\nb,120,60,100,128,0,,0\nc,60,60,100,128,0,,0\n",
    )
    .expect("trace");
    let scenario = dir.join("s.yaml");
    std::fs::write(
        &scenario,
        "name: unordered\nduration: 10m\nnode_groups:\n  - {name: w, min: 1, max: 2, cpu: \"4\", memory: 16Gi}\n\
         workloads:\n  - {kind: trace, file: t.csv}\n",
    )
    .expect("scenario");
    let (code, err, _) = simulate_raw(&[scenario.to_str().expect("utf-8 path")]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("t.csv: line 4: column arrival_s: 60 is before 120 on line 3"),
        "{err}"
    );
}

/// Runs `simulate` with `args` from the repository root; returns (exit code, stderr, wall time).
fn simulate_raw(args: &[&str]) -> (Option<i32>, String, std::time::Duration) {
    let start = std::time::Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .arg("simulate")
        .args(args)
        .current_dir(repo())
        .output()
        .expect("run the binary");
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!err.contains("panicked"), "{err}");
    (out.status.code(), err, start.elapsed())
}

#[test]
fn bad_outputs_and_snapshot_times_are_refused_before_the_run() {
    // The default scenario runs for seconds; these must fail at once.
    // An output that cannot be created is bad input, as a bad flag is: exit 2, naming both.
    for flag in ["--report", "--plot"] {
        let (code, err, took) = simulate_raw(&[flag, "/nonexistent/dir/out"]);
        assert_eq!(code, Some(2), "{err}");
        assert!(
            err.contains(&format!("{flag} /nonexistent/dir/out")),
            "{err}"
        );
        assert!(took < std::time::Duration::from_secs(2), "{took:?}");
    }
    let (code, err, _) = simulate_raw(&[
        "--snapshot-at",
        "1m",
        "--snapshot-out",
        "/nonexistent/dir/out",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--snapshot-out /nonexistent/dir/out"), "{err}");
    // A negative duration is the flag's to refuse, by name (not an unknown argument `-1`).
    for flag in ["--duration", "--snapshot-at", "--scan-interval"] {
        let mut args = vec![flag, "-1s"];
        if flag == "--snapshot-at" {
            args.extend(["--snapshot-out", "/dev/null"]);
        }
        let (code, err, _) = simulate_raw(&args);
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains(flag) && err.contains("-1s"), "{flag}: {err}");
        assert!(!err.contains("unexpected argument"), "{flag}: {err}");
    }
    let (code, err, took) = simulate_raw(&["--snapshot-at", "100h", "--snapshot-out", "/dev/null"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--snapshot-at \"100h\""), "{err}");
    assert!(took < std::time::Duration::from_secs(2), "{took:?}");
}

#[test]
fn one_unwritable_output_does_not_drop_the_others() {
    let dir = std::env::temp_dir().join(format!("ca-sim-{}-outputs", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let report = dir.join("report.json");
    // /dev/full opens but every write fails (Linux).
    if !Path::new("/dev/full").exists() {
        return;
    }
    let (code, err, _) = simulate_raw(&[
        "--duration",
        "10m",
        "--quiet",
        "--plot",
        "/dev/full",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--plot /dev/full: cannot write"), "{err}");
    let text = std::fs::read_to_string(&report).expect("the report is written");
    assert!(text.starts_with('{'), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `simulate` takes the flags of `run` and `--config`: the file's `maxNodesTotal` applies, the
/// scenario's `cores-total: 0:32` gives way to the flag's `0:64`, and bad values exit 2 naming
/// the flag or the file's field.
#[test]
fn simulate_takes_the_flags_and_config_of_run() {
    let dir = std::env::temp_dir().join(format!("ca-sim-{}-flags-config", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let config = dir.join("ca.yaml");
    std::fs::write(
        &config,
        "apiVersion: autoscaling.openshift.io/v1\nkind: ClusterAutoscaler\nspec:\n  resourceLimits:\n    maxNodesTotal: 14\n    cores: {min: 0, max: 16}\n  expanders: [Random]\n",
    )
    .expect("write config");
    let config = config.to_str().expect("utf-8 path");
    let (r, _) = simulate(
        "flags",
        &[
            "examples/cores-limit.yaml",
            "--duration",
            "20m",
            "--expander=least-waste",
            "--cores-total=0:64",
            "--config",
            config,
        ],
    );
    let peak = num(&r["groups"][0], "/nodes_max");
    assert!(
        peak > 8.0,
        "the flag's 64 cores, not the scenario's 32: peak {peak}"
    );
    assert!(peak <= 14.0, "the config file's maxNodesTotal: peak {peak}");
    assert_eq!(
        num(&r, "/scan_interval_s"),
        10.0,
        "the scenario's scan-interval"
    );
    // `--scan-interval` is the virtual loop interval, over the scenario's.
    let (r, _) = simulate(
        "flags-scan",
        &[
            "examples/cores-limit.yaml",
            "--duration",
            "10m",
            "--scan-interval=1m",
        ],
    );
    assert_eq!(num(&r, "/scan_interval_s"), 60.0);
    assert!(num(&r, "/loops") <= 11.0, "{} loops", num(&r, "/loops"));

    let (code, err, _) = simulate_raw(&["--cores-total=10:5"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--cores-total") && err.contains("10:5"),
        "{err}"
    );
    let (code, err, _) = simulate_raw(&["--scale-down-unneeded-time=soon"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--scale-down-unneeded-time"), "{err}");
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: autoscaling.openshift.io/v1\nkind: ClusterAutoscaler\nspec:\n  scaleDown: {enabled: true, unneededTime: soon}\n",
    )
    .expect("write config");
    let (code, err, _) = simulate_raw(&["--config", bad.to_str().expect("utf-8 path")]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("bad.yaml: spec.scaleDown.unneededTime"),
        "{err}"
    );
    let (code, err, _) = simulate_raw(&["--config", "/nonexistent/ca.yaml"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/nonexistent/ca.yaml"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The timeline rows of a summary: (time, last column).
fn timeline_pending(summary: &str) -> Vec<(String, u64)> {
    summary
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("time "))
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            let last = cols.last().and_then(|c| c.parse().ok()).expect("a count");
            (cols[0].to_string(), last)
        })
        .collect()
}

#[test]
fn the_summary_shows_the_peak_in_the_timeline_and_counts_in_words() {
    let (r, out) = simulate("honest", &[]);
    let rows = timeline_pending(&out);
    assert!(rows.len() >= 10, "{out}");
    // The peak of pending pods falls between two rows; the table still shows it.
    let peak = num(&r, "/pending_max") as u64;
    assert!(peak > 0);
    assert_eq!(rows.iter().map(|r| r.1).max(), Some(peak), "{out}");
    assert!(out.contains(&format!("(peak pending {peak})")), "{out}");
    assert!(out.contains("pending: the peak since the previous row"));
    // "1 scale-up", never "1 scale-ups".
    for g in r["groups"].as_array().expect("groups") {
        let n = num(g, "/scale_ups") as u64;
        let word = if n == 1 { "scale-up," } else { "scale-ups," };
        let needle = format!(" in {n} {word}");
        assert!(out.contains(&needle), "{needle:?} not in {out}");
    }
    assert!(!out.contains(" in 1 scale-ups"), "{out}");
}

#[test]
fn wait_percentiles_are_not_applicable_when_no_pod_started() {
    let dir = std::env::temp_dir().join(format!("ca-sim-{}-nostart", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let scenario = dir.join("too-big.yaml");
    std::fs::write(
        &scenario,
        "name: too-big\nduration: 10m\nnode_groups:\n  - {name: small, min: 0, max: 3, cpu: \"2\", memory: 4Gi}\n\
         workloads:\n  - {kind: deployment, name: huge, replicas: 2, pod: {cpu: \"8\", memory: 1Gi}}\n",
    )
    .expect("scenario");
    let (r, out) = simulate("nostart", &[scenario.to_str().expect("utf-8 path")]);
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(num(&r, "/pod_wait/started"), 0.0);
    assert!(r["pod_wait"]["p50_s"].is_null(), "{}", r["pod_wait"]);
    assert!(r["pod_wait"]["max_s"].is_null(), "{}", r["pod_wait"]);
    assert!(
        out.contains("Pod wait (creation to running): p50 n/a  p90 n/a  p99 n/a  max n/a"),
        "{out}"
    );
    assert!(
        out.contains("2 created, 0 started, 2 still pending"),
        "{out}"
    );
    // Why they never started: the scheduler's message and the autoscaler's, once for both.
    let why = &r["never_started"];
    assert_eq!(why.as_array().map(Vec::len), Some(1), "{why}");
    assert_eq!(num(&why[0], "/pods"), 2.0);
    assert_eq!(
        why[0]["autoscaler"],
        "pod didn't trigger scale-up: MachineDeployment/default/small: Insufficient cpu"
    );
    assert!(
        out.contains("  never started: 2 pods (e.g. default/huge-")
            && out.contains(
                "    autoscaler: pod didn't trigger scale-up: MachineDeployment/default/small: Insufficient cpu"
            ),
        "{out}"
    );
}

#[test]
fn the_scheduler_message_of_a_pod_that_never_started_is_reported() {
    let dir = std::env::temp_dir().join(format!("ca-sim-{}-sched-msg", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let scenario = dir.join("full.yaml");
    std::fs::write(
        &scenario,
        "name: full\nduration: 5m\nnode_groups:\n  - {name: fixed, min: 1, max: 1, cpu: \"2\", memory: 4Gi}\n\
         workloads:\n  - {kind: deployment, name: big, replicas: 1, pod: {cpu: \"3\", memory: 1Gi}}\n",
    )
    .expect("scenario");
    let (r, out) = simulate("sched-msg", &[scenario.to_str().expect("utf-8 path")]);
    let _ = std::fs::remove_dir_all(&dir);
    let why = &r["never_started"][0];
    assert_eq!(
        why["scheduler"],
        "0/1 nodes are available: 1 Insufficient cpu."
    );
    assert_eq!(
        why["autoscaler"],
        "pod didn't trigger scale-up: MachineDeployment/default/fixed: max node group size reached"
    );
    assert!(
        out.contains("    scheduler: 0/1 nodes are available: 1 Insufficient cpu."),
        "{out}"
    );
}

#[test]
fn a_node_running_only_expendable_pods_is_removed_and_they_are_dropped() {
    let scenario = "crates/cluster-autoscaler/tests/scenarios/expendable-scale-down.yaml";
    let (r, _) = simulate("expendable", &[scenario]);
    assert_eq!(num(&r["groups"][0], "/nodes_end"), 1.0, "{}", r["groups"]);
    let (r, _) = simulate(
        "not-expendable",
        &[scenario, "--expendable-pods-priority-cutoff=-100"],
    );
    assert_eq!(num(&r["groups"][0], "/nodes_end"), 2.0, "{}", r["groups"]);
}

/// The peak node count of the group named `name` in the report.
fn peak_of(r: &Value, name: &str) -> f64 {
    let g = r["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .find(|g| g["group"].as_str().is_some_and(|n| n.ends_with(name)))
        .unwrap_or_else(|| panic!("no group {name} in {}", r["groups"]));
    num(g, "/nodes_max")
}

#[test]
fn the_price_expander_grows_the_cheapest_group_from_the_scenario_prices() {
    let scenario = "crates/cluster-autoscaler/tests/scenarios/price-expander.yaml";
    let (r, _) = simulate("least-waste", &[scenario, "--expander=least-waste"]);
    assert_eq!((peak_of(&r, "fit"), peak_of(&r, "cheap")), (5.0, 0.0));
    for chain in ["price", "price,least-waste"] {
        let (r, _) = simulate("price", &[scenario, &format!("--expander={chain}")]);
        assert_eq!(
            (peak_of(&r, "fit"), peak_of(&r, "cheap")),
            (0.0, 5.0),
            "{chain}: {}",
            r["groups"]
        );
        assert_eq!(num(&r, "/pods_pending_at_end"), 0.0);
    }
}

/// `(t_s, nodes)` of `group` in the report's timeline.
fn nodes_over_time(r: &Value, group: &str) -> Vec<(f64, f64)> {
    r["timeline"]
        .as_array()
        .expect("timeline")
        .iter()
        .map(|p| (num(p, "/t_s"), p["nodes"][group].as_f64().expect("nodes")))
        .collect()
}

#[test]
fn no_node_is_removed_while_its_group_rolls_out_and_scale_down_resumes_after() {
    let scenario = "crates/cluster-autoscaler/tests/scenarios/rollout-pauses-scale-down.yaml";
    let (r, _) = simulate("rollout", &[scenario]);
    let nodes = nodes_over_time(&r, "default/workers");
    // The rollout surges to 4 nodes (maxSurge 1) for each replacement; the last surge is its end.
    let last_surge = nodes
        .iter()
        .filter(|(_, n)| *n == 4.0)
        .map(|(t, _)| *t)
        .fold(f64::NAN, f64::max);
    assert!(
        last_surge >= 300.0,
        "three replacements after 3m: {nodes:?}"
    );
    for (t, n) in nodes
        .iter()
        .filter(|(t, _)| (60.0..=last_surge).contains(t))
    {
        assert!(
            *n >= 3.0,
            "a node went during the rollout at {t} s: {nodes:?}"
        );
    }
    assert_eq!(
        num(&r["groups"][0], "/nodes_end"),
        1.0,
        "scale-down resumed"
    );
    assert_eq!(num(&r, "/safety_violations"), 0.0);

    // The same cluster without the rollout loses its two unneeded nodes before that time.
    let dir = std::env::temp_dir().join(format!("ca-sim-{}-rollout-files", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let text = std::fs::read_to_string(repo().join(scenario)).expect("scenario");
    let line = "  - {group: workers, from: 3m, to: 3m1s, kind: rollout}\n";
    assert!(text.contains(line));
    let plain = dir.join("plain.yaml");
    std::fs::write(&plain, text.replace(line, "")).expect("write");
    let (r, _) = simulate("no-rollout", &[plain.to_str().expect("utf-8 path")]);
    let first_one = nodes_over_time(&r, "default/workers")
        .into_iter()
        .find(|(_, n)| *n == 1.0)
        .map(|(t, _)| t);
    assert!(
        first_one.is_some_and(|t| t < last_surge),
        "{first_one:?} vs {last_surge}"
    );

    // Mid-rollout, `plan` on the loop's input says why no node goes.
    let snap = dir.join("snap.yaml");
    let snap = snap.to_str().expect("utf-8 path");
    simulate(
        "rollout-snap",
        &[
            scenario,
            "--quiet",
            "--snapshot-at",
            "5m30s",
            "--snapshot-out",
            snap,
        ],
    );
    let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .args(["plan", "--snapshot", snap, "--now", "2025-01-01T00:05:30Z"])
        .arg("--scale-down-unneeded-time=4m")
        .output()
        .expect("run plan");
    let _ = std::fs::remove_dir_all(&dir);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("is not removable: node group is being rolled out"),
        "{text}"
    );
}

/// Runs `scenario` with a snapshot of the world's objects at `at`; the report and the objects.
fn simulate_with_objects(name: &str, scenario: &str, at: &str) -> (Value, Vec<Value>) {
    let dir = std::env::temp_dir().join(format!("ca-sim-{}-{name}-objects", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let snap = dir.join("snapshot.yaml");
    let snap_arg = snap.to_str().expect("utf-8 path").to_string();
    let (report, _) = simulate(
        name,
        &[scenario, "--snapshot-at", at, "--snapshot-out", &snap_arg],
    );
    let text = std::fs::read_to_string(&snap).expect("snapshot written");
    let _ = std::fs::remove_dir_all(&dir);
    let objects = serde_yaml_ng::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).expect("a YAML document"))
        .filter(|v: &Value| !v.is_null())
        .collect();
    (report, objects)
}

/// Where a pod with a claim runs: its name, the zone of its node (`None`: not running) and the
/// zone its bound volume requires.
#[derive(Debug)]
struct Placement {
    pod: String,
    node: Option<String>,
    node_zone: Option<String>,
    volume_zone: Option<String>,
}

const ZONE: &str = "topology.kubernetes.io/zone";

fn placements(objects: &[Value]) -> Vec<Placement> {
    let of_kind = |k: &'static str| objects.iter().filter(move |o| o["kind"] == k);
    let name = |o: &Value| o["metadata"]["name"].as_str().unwrap_or("").to_string();
    let node_zone = |n: &str| {
        of_kind("Node")
            .find(|o| name(o) == n)
            .and_then(|o| o["metadata"]["labels"][ZONE].as_str().map(str::to_string))
    };
    let volume_zone = |ns: &str, claim: &str| {
        let pvc = of_kind("PersistentVolumeClaim")
            .find(|o| name(o) == claim && o["metadata"]["namespace"] == ns)?;
        let pv_name = pvc["spec"]["volumeName"].as_str()?;
        let pv = of_kind("PersistentVolume").find(|o| name(o) == pv_name)?;
        pv.pointer("/spec/nodeAffinity/required/nodeSelectorTerms/0/matchExpressions/0")
            .filter(|e| e["key"] == ZONE && e["operator"] == "In")
            .and_then(|e| e["values"][0].as_str())
            .map(str::to_string)
    };
    of_kind("Pod")
        .filter_map(|p| {
            let claim = p["spec"]["volumes"]
                .as_array()?
                .iter()
                .find_map(|v| v["persistentVolumeClaim"]["claimName"].as_str())?;
            let ns = p["metadata"]["namespace"].as_str().unwrap_or("");
            let node = p["spec"]["nodeName"].as_str().map(str::to_string);
            Some(Placement {
                pod: name(p),
                node_zone: node.as_deref().and_then(node_zone),
                node,
                volume_zone: volume_zone(ns, claim),
            })
        })
        .collect()
}

/// Registered nodes of `group` in each timeline row at or after `from_s`.
fn nodes_from(r: &Value, group: &str, from_s: f64) -> Vec<u64> {
    (r["timeline"].as_array().expect("timeline").iter())
        .filter(|p| p["t_s"].as_f64().unwrap_or(0.0) >= from_s)
        .map(|p| p["nodes"][group].as_u64().unwrap_or(0))
        .collect()
}

#[test]
fn zonal_stateful_set_pods_stay_in_their_volume_zones_and_only_those_zones_grow() {
    let scenario = "examples/zonal-statefulset.yaml";
    // After the growth to 9 (balanced: the claims were not bound yet).
    let (_, objects) = simulate_with_objects("zonal-sts-15", scenario, "15m");
    let placed = placements(&objects);
    assert_eq!(placed.len(), 9, "{placed:?}");
    for p in &placed {
        assert!(p.node.is_some(), "{} runs at 15m: {placed:?}", p.pod);
        assert_eq!(p.node_zone, p.volume_zone, "{p:?}");
    }
    for zone in ["zone-a", "zone-b", "zone-c"] {
        let n = (placed.iter())
            .filter(|p| p.volume_zone.as_deref() == Some(zone))
            .count();
        assert_eq!(
            n, 3,
            "balanced growth puts three pods in {zone}: {placed:?}"
        );
    }
    // Shrunk to 3, grown back to 5: db-3 and db-4 return to the zones of their volumes.
    let (r, objects) = simulate_with_objects("zonal-sts-49", scenario, "49m");
    assert_eq!(num(&r, "/pods_pending_at_end"), 0.0);
    let placed = placements(&objects);
    assert_eq!(placed.len(), 5, "{placed:?}");
    for p in &placed {
        assert!(p.node.is_some(), "{} runs: {placed:?}", p.pod);
        assert_eq!(p.node_zone, p.volume_zone, "{p:?}");
    }
    for (group, zone) in [("a", "zone-a"), ("b", "zone-b"), ("c", "zone-c")] {
        let pods = (placed.iter())
            .filter(|p| p.volume_zone.as_deref() == Some(zone))
            .count() as u64;
        // One pod per node (3 of 4 CPUs), at least the group's minimum of 1.
        let need = pods.max(1);
        let after = nodes_from(&r, &format!("default/workers-{group}"), 35.0 * 60.0);
        assert!(
            after.iter().all(|n| *n <= need),
            "workers-{group} grew past the {need} node(s) its zone's pods need: {after:?}"
        );
        assert_eq!(after.last().copied(), Some(need), "workers-{group}");
    }
}

#[test]
fn a_node_holding_a_zonal_volume_is_removed_only_if_its_zone_has_room() {
    let (r, objects) = simulate_with_objects("zonal-down", "examples/zonal-scale-down.yaml", "19m");
    assert_eq!(num(&r, "/pods_pending_at_end"), 0.0);
    assert_eq!(num(&r, "/safety_violations"), 0.0);
    // Zone a: db-a-0 has no room in its zone, so its node stays, whatever room zone b has.
    let a = nodes_from(&r, "default/workers-a", 60.0);
    assert!(a.iter().all(|n| *n == 2), "workers-a: {a:?}");
    // Zone b: once burst-b is gone, db-b-0 fits beside keep-b: its node goes.
    let b = nodes_from(&r, "default/workers-b", 60.0);
    assert_eq!(b.last().copied(), Some(1), "workers-b: {b:?}");
    assert!(num(&r, "/scale_downs") >= 1.0);
    let placed = placements(&objects);
    assert_eq!(placed.len(), 2, "{placed:?}");
    for p in &placed {
        assert!(p.node.is_some(), "{} runs: {placed:?}", p.pod);
        assert_eq!(p.node_zone, p.volume_zone, "{p:?}");
    }
    let keep_b = (objects.iter())
        .find(|o| {
            o["kind"] == "Pod"
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("keep-b-"))
        })
        .and_then(|o| o["spec"]["nodeName"].as_str())
        .expect("keep-b runs");
    let db_b = placed.iter().find(|p| p.pod == "db-b-0").expect("db-b-0");
    assert_eq!(
        db_b.node.as_deref(),
        Some(keep_b),
        "db-b-0 moved within zone b"
    );
}

/// examples/gpu-dra.yaml: pods claiming 1 to 8 GPUs through DRA claim templates all start on
/// GPU nodes added for them, every claim is allocated within what the nodes publish (checked
/// every loop as a safety invariant), and the GPU group shrinks back to its min once the jobs
/// are done.
#[test]
fn dra_claims_get_gpu_nodes_that_go_after() {
    let (r, out) = simulate("gpu-dra", &["examples/gpu-dra.yaml"]);
    assert_eq!(num(&r, "/pods_pending_at_end"), 0.0, "{out}");
    assert_eq!(
        r["never_started"].as_array().map(Vec::len),
        Some(0),
        "{out}"
    );
    let jobs = ["tune-", "eval-", "train-", "pretrain-"];
    let started = r["pod_starts"]
        .as_array()
        .expect("pod starts")
        .iter()
        .filter(|p| {
            let pod = p["pod"].as_str().unwrap_or("");
            jobs.iter()
                .any(|j| pod.starts_with(&format!("default/{j}")))
        })
        .count();
    // 6 one-GPU, 3 two-GPU, 2 four-GPU and 1 eight-GPU pods.
    assert!(started >= 12, "every DRA pod started: {started}");
    assert_eq!(
        num(&r, "/safety_violations"),
        0.0,
        "{}",
        r["safety_violation_samples"]
    );
    let gpu = &r["groups"][1];
    assert_eq!(gpu["group"], "default/gpu");
    // 28 GPUs are claimed at once and a node publishes 8: 3 nodes beside the first, added
    // once. A new node whose driver has not published its slices yet is starting, so the pods
    // waiting for it cause no second scale-up.
    assert_eq!(num(gpu, "/scale_ups"), 1.0, "GPU nodes added once: {gpu}");
    assert_eq!(num(gpu, "/nodes_added"), 3.0, "{gpu}");
    assert_eq!(num(gpu, "/nodes_max"), 4.0, "{gpu}");
    assert_eq!(num(gpu, "/nodes_end"), 1.0, "shrunk back to its min: {gpu}");
    assert!(num(gpu, "/nodes_removed") >= 3.0, "{gpu}");
    // The fluid bound counts the claimed devices against the 8 a GPU node offers.
    assert!(
        num(&r, "/bound/node_hours_by_resource/gpu.example.com") > 0.0,
        "{}",
        r["bound"]
    );
}
