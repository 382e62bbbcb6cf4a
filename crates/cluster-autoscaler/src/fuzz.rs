//! The fuzz suite of the binary's readers of untrusted text — the snapshot loader behind `plan`,
//! the `ClusterAutoscaler` config file, `run`'s flags, quantities and durations — asserting that
//! each one answers (a value or an error) without panicking, within a time bound and a memory
//! bound. The scenario loader of `simulate` has its own suite in the simulator, whose generators
//! and bounds this one shares.
//!
//! It runs in every `cargo test` with few cases; `FUZZ_CASES=20000 cargo test -p
//! cluster-autoscaler fuzz` is the long run (docs/fuzzing.md). It never writes files.

use autoscaler_clusterapi::ClusterApiConfig;
use autoscaler_model::testing::fuzz_cases;
use autoscaler_simulator::testing::{accepted, bounded, duration, mutated, number, quantity};
use proptest::prelude::*;

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

fn snapshot() -> impl Strategy<Value = String> {
    mutated(proptest::collection::vec(object(), 0..6).prop_map(|docs| docs.join("---\n")))
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
    fn config_file(text in mutated(config())) {
        let _ = bounded("config", &text, || {
            let file = autoscaler_options::parse_config(&text)?;
            let args = autoscaler_options::RunArgs::default();
            autoscaler_options::RunOptions::build(&args, Some(&file), &|_| None).map(|_| ())
                .map_err(|e| autoscaler_options::ConfigFileError::Parse { path: Default::default(), message: e.to_string() })
        });
    }

    #[test]
    fn run_flags(args in flags()) {
        use clap::Parser;
        #[derive(Debug, Parser)]
        struct Cli {
            #[command(flatten)]
            run: autoscaler_options::RunArgs,
        }
        let text = args.join(" ");
        let _ = bounded("flags", &text, || {
            let argv = std::iter::once("cluster-autoscaler".to_string()).chain(args.iter().cloned());
            Cli::try_parse_from(argv).map(|c| autoscaler_options::RunOptions::build(&c.run, None, &|_| None).is_ok())
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
        let _ = bounded("config", &text, || autoscaler_options::parse_config(&text));
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
    assert!(bounded("config", "deep", || autoscaler_options::parse_config(&deep)).is_err());
}

#[test]
fn generators_reach_valid_inputs() {
    let capi = ClusterApiConfig::from_env_and_flag(None, None).expect("default config");
    let plans = accepted(snapshot(), 200, |t| {
        crate::plan::plan_text(t, &capi, &Default::default(), "kube-system", 0, 3).is_ok()
    });
    let configs = accepted(config(), 400, |t| {
        autoscaler_options::parse_config(t).is_ok()
    });
    eprintln!("accepted: {plans}/200 snapshots, {configs}/400 configs");
    assert!(plans > 10, "{plans} snapshots planned");
    assert!(configs > 0, "{configs} configs accepted");
}
