//! The fuzz suite of the simulator's reader of untrusted text, the scenario loader of
//! `simulate`: generated and mutated scenarios, asserting that the loader answers (a scenario or
//! an error) without panicking, within a time bound and a memory bound, and that the scenarios it
//! accepts also run. It also holds the suite's generators of the values a user writes
//! (numbers, quantities, durations, mutations) and its bounds, which the binary's fuzz tests of
//! the snapshot, config and flag readers use too (feature `test-util`).
//!
//! It runs in every `cargo test` with few cases; `FUZZ_CASES=20000 cargo test -p
//! autoscaler-simulator fuzz` is the long run (docs/fuzzing.md). It never writes files.

use std::time::{Duration, Instant};

use proptest::prelude::*;

use crate::cpu_clock::thread_cpu;

/// Most CPU time any one input may take (debug build). CPU time of the thread, not the wall
/// clock: a loaded machine lengthens the wall clock, not the work an input costs.
pub const TIME_BOUND: Duration = Duration::from_secs(5);
/// Longest any one input may take on the wall clock: only a hang (waiting, not working) gets
/// near it on a loaded machine.
pub const HANG_BOUND: Duration = Duration::from_secs(60);
/// Highest peak resident memory the test process may reach.
pub const MEMORY_BOUND_KB: u64 = 2 * 1024 * 1024;

/// Runs `f` on one input and checks the time and memory bounds.
pub fn bounded<T>(what: &str, input: &str, f: impl FnOnce() -> T) -> T {
    let (start, cpu) = (Instant::now(), thread_cpu());
    let out = f();
    let (took, worked) = (start.elapsed(), thread_cpu().saturating_sub(cpu));
    assert!(
        worked < TIME_BOUND,
        "{what} took {worked:?} of CPU on:\n{input}"
    );
    assert!(took < HANG_BOUND, "{what} took {took:?} on:\n{input}");
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
pub fn number() -> impl Strategy<Value = String> {
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
pub fn quantity() -> impl Strategy<Value = String> {
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
pub fn duration() -> impl Strategy<Value = String> {
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

/// Text with a few bytes changed: the reader must cope with anything near valid input.
pub fn mutated(base: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
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

/// How many of `n` generated inputs `accept` takes: the generators must reach past the parsers
/// into validation and decisions, or the suite would only test error paths.
pub fn accepted<S: Strategy>(strategy: S, n: usize, accept: impl Fn(&S::Value) -> bool) -> usize {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    (0..n)
        .filter(|_| accept(&strategy.new_tree(&mut runner).expect("value").current()))
        .count()
}

#[cfg(test)]
mod tests {
    use autoscaler_model::testing::fuzz_cases;

    use super::*;

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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(fuzz_cases(32)))]

        #[test]
        fn scenario_loader(text in mutated(scenario())) {
            let _ = bounded("scenario", &text, || {
                crate::scenario::Scenario::parse(&text, std::path::Path::new("/nonexistent"))
            });
        }

        /// Accepted scenarios also run (10 virtual minutes): values the loader lets through must not
        /// hurt the world or the decision.
        #[test]
        fn accepted_scenarios_run(text in scenario()) {
            if let Ok(mut s) = crate::scenario::Scenario::parse(&text, std::path::Path::new(".")) {
                // At most 10 virtual minutes and 500 loops (a 1ms scan interval is valid).
                s.duration = s.duration.min(600_000).min(500 * s.scan_interval);
                s.sample_interval = s.sample_interval.max(s.duration / 100).max(1);
                let _ = bounded("simulate", &text, || {
                    crate::driver::Driver::new(&s).map(|d| d.run(&mut |_| {}).map(|log| log.pending_at_end))
                });
            }
        }

        #[test]
        fn arbitrary_text_in_the_scenario_reader(text in "[\\[\\]{}:,\\-?|>'\"#&*!%@` \n\ra-z0-9]{0,400}") {
            let _ = bounded("scenario", &text, || {
                crate::scenario::Scenario::parse(&text, std::path::Path::new("/nonexistent"))
            });
        }
    }

    #[test]
    fn the_reproducer_of_the_issue_stays_bounded() {
        let deep = "[".repeat(100_000);
        let scenario = bounded("scenario", "deep", || {
            crate::scenario::Scenario::parse(&deep, std::path::Path::new("."))
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
                crate::scenario::Scenario::parse(&text, std::path::Path::new("."))
            })
            .map(|_| ())
            .expect_err(shown)
            .to_string();
            assert!(e.contains(expected), "{shown}: {e}");
        }
    }

    #[test]
    fn generators_reach_valid_scenarios() {
        let scenarios = accepted(scenario(), 400, |t| {
            crate::scenario::Scenario::parse(t, std::path::Path::new(".")).is_ok()
        });
        eprintln!("accepted: {scenarios}/400 scenarios");
        assert!(scenarios > 2, "{scenarios} scenarios accepted");
    }
}
