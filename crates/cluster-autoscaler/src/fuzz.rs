//! The fuzz suite: generated and mutated inputs for every reader of untrusted text — the
//! snapshot loader behind `plan`, the scenario loader of `simulate`, the `ClusterAutoscaler`
//! config file, `run`'s flags, quantities and durations — asserting that each one answers
//! (a value or an error) without panicking, within a time bound and a memory bound.
//!
//! It runs in every `cargo test` with few cases; `FUZZ_CASES=20000 cargo test -p
//! cluster-autoscaler fuzz` is the long run (docs/fuzzing.md). It never writes files.

use std::time::{Duration, Instant};

use autoscaler_clusterapi::ClusterApiConfig;
use autoscaler_model::testing::fuzz_cases;
use proptest::prelude::*;

/// Longest any one input may take (debug build, shared CI machine).
const TIME_BOUND: Duration = Duration::from_secs(5);
/// Highest peak resident memory the test process may reach.
const MEMORY_BOUND_KB: u64 = 2 * 1024 * 1024;

/// Runs `f` on one input and checks the time and memory bounds.
fn bounded<T>(what: &str, input: &str, f: impl FnOnce() -> T) -> T {
    let start = Instant::now();
    let out = f();
    let took = start.elapsed();
    assert!(took < TIME_BOUND, "{what} took {took:?} on:\n{input}");
    if let Some(kb) = peak_rss_kb() {
        assert!(
            kb < MEMORY_BOUND_KB,
            "{what}: peak RSS {kb} kB on:\n{input}"
        );
    }
    out
}

/// The process's peak resident set (VmHWM), where /proc exists.
fn peak_rss_kb() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Numbers as they come in YAML: ordinary, boundary, huge, negative, not numbers.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        150 => (0u32..20).prop_map(|n| n.to_string()),
        1 => Just("-1".to_string()),
        1 => Just("2147483647".to_string()),
        1 => Just("2147483648".to_string()),
        1 => Just("4294967295".to_string()),
        1 => Just("10000000".to_string()),
        1 => Just("18446744073709551615".to_string()),
        1 => Just("9223372036854775808".to_string()),
        1 => Just("1e400".to_string()),
        1 => Just(".nan".to_string()),
        1 => Just("'x'".to_string()),
        1 => Just("[]".to_string()),
    ]
}

/// Kubernetes quantities, valid and not.
fn quantity() -> impl Strategy<Value = String> {
    prop_oneof![
        80 => Just("4".to_string()),
        1 => Just("500m".to_string()),
        1 => Just("16Gi".to_string()),
        1 => Just("1.5e3".to_string()),
        1 => Just("9223372036854775808".to_string()),
        1 => Just("999999999999999999999Ei".to_string()),
        1 => Just("-1".to_string()),
        1 => Just("0.0000000001".to_string()),
        1 => Just("lots".to_string()),
        1 => "[0-9]{1,25}(\\.[0-9]{1,12})?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e[0-9]{1,4}|e-[0-9]{1,3})?",
    ]
}

/// Go durations, valid and not.
fn duration() -> impl Strategy<Value = String> {
    prop_oneof![
        80 => "[1-9][0-9]?(s|m|h)",
        1 => Just("0s".to_string()),
        1 => Just("1ms".to_string()),
        1 => Just("2562048h".to_string()),
        1 => Just("99999999999999999999h".to_string()),
        1 => Just("-5m".to_string()),
        1 => Just("soon".to_string()),
        1 => "[0-9]{1,20}(\\.[0-9]{1,10})?(ns|us|ms|s|m|h)",
    ]
}

/// Timestamps, valid and not.
fn timestamp() -> impl Strategy<Value = String> {
    prop_oneof![
        5 => Just("2026-01-01T00:00:00Z".to_string()),
        1 => Just("2026-13-01T00:00:00Z".to_string()),
        1 => Just("0000-00-00T00:00:00Z".to_string()),
        1 => Just("yesterday".to_string()),
    ]
}

/// One object of a snapshot, as YAML (flow style).
fn object() -> impl Strategy<Value = String> {
    let name = "[a-z]{1,6}";
    prop_oneof![
        (name, quantity(), quantity(), number()).prop_map(|(n, c, m, p)| format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {n}, labels: {{kubernetes.io/os: linux}}}}\n\
             status: {{allocatable: {{cpu: '{c}', memory: '{m}', pods: {p}}}, conditions: [{{type: Ready, status: 'True'}}]}}\n"
        )),
        (name, quantity(), quantity(), timestamp(), number()).prop_map(|(n, c, m, t, pr)| format!(
            "apiVersion: v1\nkind: Pod\nmetadata: {{name: {n}, namespace: ns, creationTimestamp: '{t}'}}\n\
             spec: {{priority: {pr}, containers: [{{name: c, resources: {{requests: {{cpu: '{c}', memory: '{m}'}}}}}}]}}\n\
             status: {{phase: Pending, conditions: [{{type: PodScheduled, status: 'False', reason: Unschedulable, lastTransitionTime: '{t}'}}]}}\n"
        )),
        (name, 0u32..1000, 0u32..1000, 0u32..1000, quantity()).prop_map(|(n, min, max, r, c)| format!(
            "apiVersion: cluster.x-k8s.io/v1beta1\nkind: MachineDeployment\nmetadata: {{name: {n}, namespace: ns, annotations: \
             {{cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size: '{min}', cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size: '{max}', \
             capacity.cluster-autoscaler.kubernetes.io/cpu: '{c}'}}}}\nspec: {{clusterName: c, replicas: {r}, template: {{spec: {{clusterName: c}}}}}}\n"
        )),
        (name, number()).prop_map(|(n, v)| format!(
            "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {{name: {n}, namespace: ns}}\nspec: {{minAvailable: {v}, selector: {{}}}}\n"
        )),
        Just("apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: Namespace, metadata: {name: ns}}]\n".to_string()),
    ]
}

/// Text with a few bytes changed: the reader must cope with anything near valid input.
fn mutated(base: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
    let edits = prop_oneof![
        2 => Just(Vec::new()),
        1 => proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
    ];
    (base, edits).prop_map(|(text, edits)| {
        let mut bytes = text.into_bytes();
        for (at, b) in edits {
            if !bytes.is_empty() {
                let i = at.index(bytes.len());
                bytes[i] = b;
            }
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

fn snapshot() -> impl Strategy<Value = String> {
    mutated(proptest::collection::vec(object(), 0..6).prop_map(|docs| docs.join("---\n")))
}

/// A scenario with generated values everywhere a user can write one.
fn scenario() -> impl Strategy<Value = String> {
    let group = (
        number(),
        number(),
        number(),
        quantity(),
        quantity(),
        "([a-z]{1,12}\\.)?[a-z]{1,12}/[a-z]{1,5}|[a-z]{1,5}",
    );
    let workload = (number(), number(), duration(), quantity());
    let option = prop_oneof![
        number().prop_map(|n| format!("max-nodes-per-scaleup: {n}")),
        number().prop_map(|n| format!("max-scale-down-parallelism: {n}")),
        duration().prop_map(|d| format!("scan-interval: '{d}'")),
        duration().prop_map(|d| format!("max-node-group-backoff-duration: '{d}'")),
        prop_oneof![Just("0.5".to_string()), number()]
            .prop_map(|n| format!("scale-down-utilization-threshold: {n}")),
        Just("expander: priority".to_string()),
    ];
    (duration(), duration(), group, workload, option, duration(), duration()).prop_map(
        |(total, sample, (min, max, replicas, cpu, memory, gpu), (r, c, d, pcpu), option, from, to)| {
            format!(
                "name: fuzz\nduration: '{total}'\nsample_interval: '{sample}'\noptions: {{{option}}}\n\
                 node_groups:\n- {{name: a, min: {min}, max: {max}, replicas: {replicas}, cpu: '{cpu}', memory: '{memory}', \
                 gpu: {{resource: {gpu}, count: 1}}, taints: ['{gpu}=x:NoSchedule']}}\n\
                 faults: [{{group: a, from: '{from}', to: '{to}', kind: stockout}}]\n\
                 workloads:\n- {{kind: deployment, name: d, replicas: {r}, pod: {{cpu: '{pcpu}'}}}}\n\
                 - {{kind: job, name: j, completions: {c}, duration: '{d}'}}\n"
            )
        },
    )
}

/// A `ClusterAutoscaler` resource with generated values.
fn config() -> impl Strategy<Value = String> {
    (number(), duration(), duration(), quantity(), number(), "[a-z./]{1,20}").prop_map(
        |(n, d1, d2, q, v, gpu)| {
            format!(
                "apiVersion: autoscaling.openshift.io/v1\nkind: ClusterAutoscaler\nmetadata: {{name: default}}\nspec:\n  \
                 podPriorityThreshold: {n}\n  maxPodGracePeriod: {n}\n  maxNodeProvisionTime: '{d1}'\n  logVerbosity: {v}\n  \
                 resourceLimits:\n    maxNodesTotal: {n}\n    cores: {{min: {n}, max: {v}}}\n    gpus: [{{type: '{gpu}', min: 0, max: {v}}}]\n  \
                 scaleDown:\n    enabled: true\n    unneededTime: '{d2}'\n    utilizationThreshold: '{q}'\n"
            )
        },
    )
}

/// `run`'s flags with generated values.
fn flags() -> impl Strategy<Value = Vec<String>> {
    let flag = prop_oneof![
        duration().prop_map(|d| format!("--scan-interval={d}")),
        duration().prop_map(|d| format!("--max-node-group-backoff-duration={d}")),
        number().prop_map(|n| format!("--max-nodes-per-scaleup={n}")),
        number().prop_map(|n| format!("--max-drain-parallelism={n}")),
        number().prop_map(|n| format!("--max-nodes-total={n}")),
        number().prop_map(|n| format!("--v={n}")),
        quantity().prop_map(|q| format!("--scale-down-utilization-threshold={q}")),
        (number(), number()).prop_map(|(a, b)| format!("--cores-total={a}:{b}")),
        ("[a-z./]{1,12}", number()).prop_map(|(t, n)| format!("--gpu-total={t}:0:{n}")),
        "[ -~]{0,12}".prop_map(|a| format!("--address={a}")),
        "[ -~]{0,20}".prop_map(|e| format!("--expander={e}")),
        "[ -~]{0,20}".prop_map(|a| format!("--node-group-auto-discovery={a}")),
    ];
    proptest::collection::vec(flag, 0..6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(fuzz_cases(32)))]

    #[test]
    fn snapshot_loader(text in snapshot()) {
        let config = ClusterApiConfig::from_env_and_flag(None, None).expect("default config");
        let _ = bounded("plan", &text, || crate::plan::plan_text(&text, &config, &Default::default(), "kube-system", 1_800_000_000_000, 3));
        let _ = bounded("plan --output json", &text, || crate::plan::plan_json(&text, &config, &Default::default(), "kube-system", 1_800_000_000_000, 3));
    }

    #[test]
    fn scenario_loader(text in mutated(scenario())) {
        let _ = bounded("scenario", &text, || {
            crate::simulate::scenario::Scenario::parse(&text, std::path::Path::new("/nonexistent"))
        });
    }

    /// Accepted scenarios also run (10 virtual minutes): values the loader lets through must not
    /// hurt the world or the decision.
    #[test]
    fn accepted_scenarios_run(text in scenario()) {
        if let Ok(mut s) = crate::simulate::scenario::Scenario::parse(&text, std::path::Path::new(".")) {
            // At most 10 virtual minutes and 500 loops (a 1ms scan interval is valid).
            s.duration = s.duration.min(600_000).min(500 * s.scan_interval);
            s.sample_interval = s.sample_interval.max(s.duration / 100).max(1);
            let _ = bounded("simulate", &text, || {
                crate::simulate::driver::Driver::new(&s).map(|d| d.run(&mut |_| {}).map(|log| log.pending_at_end))
            });
        }
    }

    #[test]
    fn config_file(text in mutated(config())) {
        let _ = bounded("config", &text, || {
            let file = crate::config::parse(&text)?;
            let args = crate::options::RunArgs::default();
            crate::options::RunOptions::build(&args, Some(&file), &|_| None).map(|_| ())
                .map_err(|e| crate::config::ConfigFileError::Parse { path: Default::default(), message: e.to_string() })
        });
    }

    #[test]
    fn run_flags(args in flags()) {
        use clap::Parser;
        #[derive(Debug, Parser)]
        struct Cli {
            #[command(flatten)]
            run: crate::options::RunArgs,
        }
        let text = args.join(" ");
        let _ = bounded("flags", &text, || {
            let argv = std::iter::once("cluster-autoscaler".to_string()).chain(args.iter().cloned());
            Cli::try_parse_from(argv).map(|c| crate::options::RunOptions::build(&c.run, None, &|_| None).is_ok())
        });
    }

    #[test]
    fn quantities_and_durations(q in quantity(), d in duration(), raw in "[ -~]{0,40}") {
        for text in [&q, &d, &raw] {
            bounded("quantity", text, || {
                if let Ok(v) = autoscaler_model::parse_quantity(text) {
                    let _ = (v.to_milli_ceil(), v.to_units_ceil());
                }
                let _ = autoscaler_model::parse_duration(text);
                let _ = autoscaler_model::parse_gpu_limit(text);
                let _ = autoscaler_model::Range::parse_cores(text);
            });
        }
    }

    #[test]
    fn arbitrary_text_in_every_reader(text in "[\\[\\]{}:,\\-?|>'\"#&*!%@` \n\ra-z0-9]{0,400}") {
        let config = ClusterApiConfig::from_env_and_flag(None, None).expect("default config");
        let _ = bounded("plan", &text, || crate::plan::plan_text(&text, &config, &Default::default(), "kube-system", 0, 3));
        let _ = bounded("scenario", &text, || {
            crate::simulate::scenario::Scenario::parse(&text, std::path::Path::new("/nonexistent"))
        });
        let _ = bounded("config", &text, || crate::config::parse(&text));
    }
}

#[test]
fn the_reproducers_of_the_issue_stay_bounded() {
    let deep = "[".repeat(100_000);
    let config = ClusterApiConfig::from_env_and_flag(None, None).expect("default config");
    assert!(
        bounded("plan", "deep", || crate::plan::plan_text(
            &deep,
            &config,
            &Default::default(),
            "kube-system",
            0,
            3
        ))
        .is_err()
    );
    assert!(bounded("config", "deep", || crate::config::parse(&deep)).is_err());
    let scenario = bounded("scenario", "deep", || {
        crate::simulate::scenario::Scenario::parse(&deep, std::path::Path::new("."))
    });
    assert!(scenario.is_err());
}

/// The hostile scenarios of issue 34: each is refused (an error naming its field) within the
/// time and memory bounds, none runs.
#[test]
fn hostile_scenarios_are_refused_within_bounds() {
    let deep = "[".repeat(100_000);
    let object = (0..100).map(|i| format!("k{i}: v{i}")).collect::<Vec<_>>();
    let object = format!("{{{}}}", object.join(", "));
    let group = "node_groups: [{name: a, min: 20, max: 20, cpu: '4', memory: 16Gi}]";
    let cases = [
        // A stray quote in a plain scalar once hid the next line from the nesting guard.
        (
            format!("name: x 'y\nduration: {deep}\n"),
            "nested more than",
        ),
        (format!("name: x\rduration: {deep}\n"), "nested more than"),
        (
            format!("name: x\n  'y\nduration: {deep}\n"),
            "nested more than",
        ),
        (format!("- k: |\n  {deep}\n"), "nested more than"),
        // 25,000 aliases of a 100-value object: 2.5 million values from 125 KB.
        (
            format!(
                "name: x\nduration: 1h\n{group}\nobjects:\n- &a {object}\n{}",
                "- *a\n".repeat(25_000)
            ),
            "aliases expand",
        ),
        (
            format!(
                "name: x\nduration: 1h\n{group}\nworkloads: [{{kind: deployment, name: d, replicas: 200000}}]\n"
            ),
            "field `workloads`",
        ),
        (
            format!(
                "name: x\nduration: 1h\n{group}\nworkloads: [{{kind: deployment, name: d, replicas: 10, pod_lifetime: 1ms}}]\n"
            ),
            "field `workloads[0].pod_lifetime`",
        ),
        (
            format!(
                "name: x\nduration: 1h\n{group}\nfaults: [{{group: a, from: 1m, to: 2m, kind: replicas-changed, delta: {}}}]\n",
                i64::MAX
            ),
            "field `faults[0].delta`",
        ),
        (
            format!(
                "name: x\nduration: 1h\nnode_groups: [{{name: {}, min: 0, max: 2, cpu: '4', memory: 16Gi}}]\n",
                "a".repeat(1 << 20)
            ),
            "field `node_groups[0].name`",
        ),
        (
            "name: x\nduration: 1h\nnode_groups: [{name: a, min: 0, max: 2, cpu: '-4', memory: 16Gi}]\n"
                .to_string(),
            "field `node_groups[0].cpu`",
        ),
        (
            format!(
                "name: x\nduration: 1h\n{group}\nworkloads: [{{kind: deployment, name: d, replicas: 1, pod: {{spec: {{containers: x}}}}}}]\n"
            ),
            "field `workloads[0].pod.spec.containers`",
        ),
    ];
    for (text, expected) in cases {
        let shown = &text[..text.len().min(200)];
        let e = bounded("scenario", shown, || {
            crate::simulate::scenario::Scenario::parse(&text, std::path::Path::new("."))
        })
        .map(|_| ())
        .expect_err(shown)
        .to_string();
        assert!(e.contains(expected), "{shown}: {e}");
    }
}

/// How many of `n` generated inputs `accept` takes: the generators must reach past the parsers
/// into validation and decisions, or the suite would only test error paths.
fn accepted<S: Strategy>(strategy: S, n: usize, accept: impl Fn(&S::Value) -> bool) -> usize {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    (0..n)
        .filter(|_| accept(&strategy.new_tree(&mut runner).expect("value").current()))
        .count()
}

#[test]
fn generators_reach_valid_inputs() {
    let capi = ClusterApiConfig::from_env_and_flag(None, None).expect("default config");
    let plans = accepted(snapshot(), 200, |t| {
        crate::plan::plan_text(t, &capi, &Default::default(), "kube-system", 0, 3).is_ok()
    });
    let scenarios = accepted(scenario(), 400, |t| {
        crate::simulate::scenario::Scenario::parse(t, std::path::Path::new(".")).is_ok()
    });
    let configs = accepted(config(), 400, |t| crate::config::parse(t).is_ok());
    eprintln!("accepted: {plans}/200 snapshots, {scenarios}/400 scenarios, {configs}/400 configs");
    assert!(plans > 10, "{plans} snapshots planned");
    assert!(scenarios > 2, "{scenarios} scenarios accepted");
    assert!(configs > 0, "{configs} configs accepted");
}
