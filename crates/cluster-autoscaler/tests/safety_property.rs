//! Safety under random faults: random clusters, workloads and fault schedules (machines that
//! never register, stockouts, slow provisioning, nodes going NotReady, scale API errors, a late
//! MachineSet controller, slow Machine deletion, replicas changed by someone else, restarts of
//! the autoscaler) run through `simulate`, whose checks of every loop must find no violation of
//! the safety invariants and no PodDisruptionBudget broken.
//!
//! The same runs on stale views: every change reaches the autoscaler's view a random delay
//! late (one object's changes in order, as late watch events), so it decides and writes on
//! objects of different ages; the invariants are the same. The lag of a run is drawn up to
//! 60 s, far beyond `--node-delete-delay-after-taint` (5 s): the view alone would then let a
//! pod bound after the decision go with its node; the fresh read of the node's pods right
//! before its deletion (the world's own objects, not the view) keeps it.
//!
//! `SAFETY_SEEDS=N` sets how many seeds run (default 100, which keeps this test well under two
//! minutes on two cores, with stale views too); `cargo test --test safety_property -- --ignored`
//! runs 2,000 of each.

use std::fmt::Write as _;
use std::process::Command;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde_json::Value;

fn dur(rng: &mut ChaCha8Rng, lo_s: u64, hi_s: u64) -> String {
    format!("{}s", rng.random_range(lo_s..=hi_s))
}

/// The views a run decides on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Views {
    /// Up to date at each decision.
    Current,
    /// Each change arrives late, by up to a random maximum for the run.
    Stale,
    /// Up to date, with consolidation on (`--consolidation=replace`, ours) and several drains
    /// at once, so that multi-node commands and replacements happen.
    Consolidating,
    /// Up to date, with jobs arriving through ProvisioningRequests of both classes and a
    /// CapacityBuffer, all three capacity flags on: the same invariants, and an atomic
    /// scale-up is never half-applied (with `--balance-similar-node-groups`, so that one spans
    /// several groups and a scale API fault can refuse one of them), a booking never outlives
    /// its time.
    Capacity,
}

/// The command-line flags of a run on `views`.
fn flags(views: Views) -> &'static [&'static str] {
    match views {
        Views::Capacity => &[
            "--enable-provisioning-requests=true",
            "--capacity-buffer-controller-enabled=true",
            "--capacity-buffer-pod-injection-enabled=true",
            "--balance-similar-node-groups=true",
        ],
        _ => &[],
    }
}

/// With consolidation on, random per-group settings of ours (disruption budgets, some in a
/// window; a minimum node age; node expiry) from their own generator, so that the rest of the
/// scenario is the one of the current views.
fn group_settings(seed: u64, g: u32, views: Views) -> String {
    if views != Views::Consolidating {
        return String::new();
    }
    let mut r = ChaCha8Rng::seed_from_u64(seed ^ 0x00B0_D6E7 ^ u64::from(g));
    let key = |k: &str| format!("cluster.x-k8s.io/cluster-api-autoscaler-{k}");
    let mut ann = Vec::new();
    if r.random_bool(0.6) {
        let nodes = ["\"0\"", "\"1\"", "\"50%\"", "2"][r.random_range(0..4)];
        let window = if r.random_bool(0.5) {
            format!(
                r#", "schedule": "*/20 * * * *", "duration": "{}m""#,
                r.random_range(1..20)
            )
        } else {
            String::new()
        };
        ann.push(format!(
            "{}: '[{{\"nodes\": {nodes}{window}}}]'",
            key("disruption-budgets")
        ));
    }
    if r.random_bool(0.3) {
        ann.push(format!(
            "{}: {}",
            key("consolidation-min-node-age"),
            dur(&mut r, 0, 900)
        ));
    }
    if r.random_bool(0.3) {
        ann.push(format!(
            "{}: {}",
            key("node-expire-after"),
            dur(&mut r, 600, 2400)
        ));
    }
    if ann.is_empty() {
        return String::new();
    }
    format!(", annotations: {{{}}}", ann.join(", "))
}

/// A random scenario for `seed`.
fn scenario(seed: u64, views: Views) -> String {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut s = String::new();
    let _ = writeln!(s, "name: safety-{seed}\nduration: 90m\nseed: {seed}");
    if views == Views::Stale {
        // Its own generator: the rest of the scenario is the one of the current views.
        let mut lag = ChaCha8Rng::seed_from_u64(seed ^ 0x05EE_D1A6);
        let _ = writeln!(s, "watch_lag: {}", dur(&mut lag, 1, 60));
    }
    let _ = writeln!(s, "machine_set_sync: {}", dur(&mut rng, 0, 45));
    let _ = writeln!(s, "machine_deletion: {}", dur(&mut rng, 0, 90));
    let _ = writeln!(s, "options:\n  scan-interval: 10s");
    let _ = writeln!(s, "  max-node-provision-time: {}", dur(&mut rng, 60, 300));
    let _ = writeln!(s, "  scale-down-unneeded-time: {}", dur(&mut rng, 60, 600));
    let _ = writeln!(s, "  scale-down-delay-after-add: {}", dur(&mut rng, 0, 300));
    if views == Views::Consolidating {
        // Its own generator, as for the lag: the rest is the scenario of the current views.
        let mut c = ChaCha8Rng::seed_from_u64(seed ^ 0xC0_5011D);
        let _ = writeln!(s, "  consolidation: replace");
        let _ = writeln!(s, "  consolidate-after: {}", dur(&mut c, 0, 120));
        let _ = writeln!(s, "  max-drain-parallelism: {}", c.random_range(1..=3));
    }
    if rng.random_bool(0.3) {
        let _ = writeln!(s, "  max-nodes-total: {}", rng.random_range(3..=12));
    }
    let restarts: Vec<String> = (0..rng.random_range(0..=2))
        .map(|_| format!("{}m", rng.random_range(5..85)))
        .collect();
    let mut restarts = restarts;
    restarts.sort_by_key(|r| r.trim_end_matches('m').parse::<u32>().unwrap_or(0));
    let _ = writeln!(s, "  restart-at: [{}]", restarts.join(", "));
    let groups = rng.random_range(1..=3);
    let _ = writeln!(s, "node_groups:");
    for g in 0..groups {
        let min = rng.random_range(0..=1);
        let max = rng.random_range(2..=6);
        let replicas = rng.random_range(min..=max.min(2));
        let policy = ["Random", "Newest", "Oldest"][rng.random_range(0..3)];
        let delay = dur(&mut rng, 30, 150);
        let _ = writeln!(
            s,
            "  - {{name: g{g}, min: {min}, max: {max}, replicas: {replicas}, cpu: \"4\", memory: 16Gi, delete_policy: {policy}, provisioning_delay: {{min: 30s, max: {delay}}}{}}}",
            group_settings(seed, g, views)
        );
    }
    let _ = writeln!(s, "faults:");
    for _ in 0..rng.random_range(0..=5) {
        let g = rng.random_range(0..groups);
        let from = rng.random_range(0..80);
        let to = from + rng.random_range(1..30);
        let kind = match rng.random_range(0..6) {
            0 => "never-registers".to_string(),
            1 => "stockout".to_string(),
            2 => format!("slow, delay: {}", dur(&mut rng, 120, 900)),
            3 => format!("nodes-not-ready, count: {}", rng.random_range(1..=2)),
            4 => "scale-api-error".to_string(),
            _ => format!("replicas-changed, delta: {}", rng.random_range(-1..=2)),
        };
        let _ = writeln!(
            s,
            "  - {{group: g{g}, from: {from}m, to: {to}m, kind: {kind}}}"
        );
    }
    let _ = writeln!(s, "objects:");
    let _ = writeln!(
        s,
        "  - {{apiVersion: policy/v1, kind: PodDisruptionBudget, metadata: {{name: web, namespace: default}}, spec: {{minAvailable: {}, selector: {{matchLabels: {{app: web}}}}}}}}",
        rng.random_range(1..=3)
    );
    // Its own generator, as for the lag: the rest is the scenario of the current views.
    let mut cap = ChaCha8Rng::seed_from_u64(seed ^ 0xCA_9AC1);
    if views == Views::Capacity {
        let _ = writeln!(
            s,
            "  - {{apiVersion: v1, kind: PodTemplate, metadata: {{name: spare, namespace: default}}, template: {{spec: {{containers: [{{name: c, image: i, resources: {{requests: {{cpu: {}m, memory: 1Gi}}}}}}]}}}}}}",
            cap.random_range(300..=2000)
        );
        let _ = writeln!(
            s,
            "  - {{apiVersion: autoscaling.x-k8s.io/v1beta1, kind: CapacityBuffer, metadata: {{name: spare, namespace: default}}, spec: {{podTemplateRef: {{name: spare}}, replicas: {}}}}}",
            cap.random_range(1..=4)
        );
    }
    let _ = writeln!(s, "workloads:");
    let schedule: Vec<String> = (0..rng.random_range(1..=4))
        .map(|i| {
            format!(
                "{{at: {}m, replicas: {}}}",
                10 + i * 20,
                rng.random_range(0..=10)
            )
        })
        .collect();
    let _ = writeln!(
        s,
        "  - {{kind: deployment, name: web, replicas: {}, schedule: [{}], pod: {{cpu: {}m, memory: 1Gi}}}}",
        rng.random_range(1..=6),
        schedule.join(", "),
        rng.random_range(300..=1800)
    );
    if rng.random_bool(0.5) {
        let _ = writeln!(
            s,
            "  - {{kind: job, name: batch, at: {}m, completions: {}, parallelism: {}, duration: {}, pod: {{cpu: \"1\", memory: 1Gi}}}}",
            rng.random_range(0..60),
            rng.random_range(1..=8),
            rng.random_range(1..=4),
            dur(&mut rng, 60, 1200)
        );
    }
    if views == Views::Capacity {
        for i in 0..cap.random_range(1..=3) {
            let class = if cap.random_bool(0.5) {
                "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
            } else {
                "check-capacity.autoscaling.x-k8s.io"
            };
            let _ = writeln!(
                s,
                "  - {{kind: provisioning-request, name: req{i}, namespace: batch, class: {class}, at: {}m, count: {}, duration: {}, pod: {{cpu: {}m, memory: 1Gi}}}}",
                cap.random_range(0..70),
                cap.random_range(1..=8),
                dur(&mut cap, 60, 1200),
                cap.random_range(300..=3000)
            );
        }
    }
    s
}

/// Runs `simulate` on the scenario of `seed` and returns its report.
fn run(seed: u64, views: Views) -> Value {
    let dir =
        std::env::temp_dir().join(format!("ca-safety-{}-{seed}-{views:?}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (file, report) = (dir.join("s.yaml"), dir.join("r.json"));
    std::fs::write(&file, scenario(seed, views)).expect("write scenario");
    let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .args(["simulate", "--quiet", "--report"])
        .arg(&report)
        .arg(&file)
        .args(flags(views))
        .output()
        .expect("run the binary");
    assert!(
        out.status.success(),
        "seed {seed}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        scenario(seed, views)
    );
    let text = std::fs::read_to_string(&report).expect("report");
    let _ = std::fs::remove_dir_all(&dir);
    serde_json::from_str(&text).expect("report is JSON")
}

/// Runs `seeds` on two threads and fails with every seed that broke an invariant.
fn check(seeds: &[u64], views: Views) {
    let started = std::time::Instant::now();
    let failures = std::sync::Mutex::new(Vec::new());
    let next = std::sync::atomic::AtomicU64::new(0);
    // Requests answered over all seeds: with requests, the runs must have decided some.
    let answered = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(&seed) = seeds.get(i as usize) else {
                        break;
                    };
                    let r = run(seed, views);
                    let n = r["capacity"]["requests"].as_array().map_or(0, |rs| {
                        rs.iter()
                            .filter(|x| !x["answered_after_s"].is_null())
                            .count()
                    });
                    answered.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
                    let safety = r["safety_violations"].as_u64().unwrap_or(u64::MAX);
                    let pdb = r["pdb_violations"].as_u64().unwrap_or(u64::MAX);
                    assert!(
                        r["safety_checks"].as_u64().unwrap_or(0) >= 500,
                        "seed {seed}"
                    );
                    if safety != 0 || pdb != 0 {
                        failures.lock().unwrap().push(format!(
                            "seed {seed}: {safety} safety, {pdb} PDB violation(s): {}\n{}",
                            r["safety_violation_samples"],
                            scenario(seed, views)
                        ));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    if views == Views::Capacity && !seeds.is_empty() {
        assert!(answered.into_inner() > 0, "no request was ever answered");
    }
    eprintln!(
        "{} seeds in {:.1}s, {} failing",
        seeds.len(),
        started.elapsed().as_secs_f64(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn seeds(default: u64) -> Vec<u64> {
    let n = std::env::var("SAFETY_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    (0..n).collect()
}

#[test]
fn random_faults_never_break_the_safety_invariants() {
    check(&seeds(100), Views::Current);
}

#[test]
fn random_faults_on_stale_views_never_break_the_safety_invariants() {
    check(&seeds(100), Views::Stale);
}

#[test]
fn random_faults_with_consolidation_never_break_the_safety_invariants() {
    check(&seeds(100), Views::Consolidating);
}

#[test]
fn random_faults_with_requests_and_buffers_never_break_the_safety_invariants() {
    // Half the seeds of the others: each run with a buffer is run twice (with and without it).
    check(&seeds(50), Views::Capacity);
}

/// Seeds beyond the default range that once found a defect, kept so it stays fixed.
/// 229: a drain blocked by a budget kept a Machine deleting for half an hour; each later
/// decrease let the set pick it again, which the world counted as a new careless deletion.
#[test]
fn seeds_that_once_failed_still_hold() {
    check(&[229], Views::Current);
}

#[test]
#[ignore = "long: 2,000 seeds"]
fn random_faults_never_break_the_safety_invariants_long() {
    check(&(0..2_000).collect::<Vec<_>>(), Views::Current);
}

#[test]
#[ignore = "long: 2,000 seeds"]
fn random_faults_on_stale_views_never_break_the_safety_invariants_long() {
    check(&(0..2_000).collect::<Vec<_>>(), Views::Stale);
}

#[test]
fn scenarios_are_random_per_seed_and_the_same_for_a_seed() {
    assert_eq!(scenario(7, Views::Current), scenario(7, Views::Current));
    assert_ne!(scenario(7, Views::Current), scenario(8, Views::Current));
    let stale = scenario(7, Views::Stale);
    assert!(stale.contains("watch_lag: "), "{stale}");
    // The same scenario, only late.
    let same: Vec<&str> = stale
        .lines()
        .filter(|l| !l.starts_with("watch_lag"))
        .collect();
    assert_eq!(same.join("\n") + "\n", scenario(7, Views::Current));
    // With requests and buffers: the same scenario, plus them.
    let cap = scenario(7, Views::Capacity);
    assert!(cap.contains("kind: provisioning-request"), "{cap}");
    assert!(cap.contains("kind: CapacityBuffer"), "{cap}");
    let base: Vec<&str> = cap
        .lines()
        .filter(|l| !l.contains("provisioning-request") && !l.contains("name: spare"))
        .collect();
    assert_eq!(base.join("\n") + "\n", scenario(7, Views::Current));
}
