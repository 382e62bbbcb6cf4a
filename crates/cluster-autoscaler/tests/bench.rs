//! `cluster-autoscaler bench` as a user runs it: a small synthetic cluster, every phase in the
//! table with its decisions, the peak RSS line; bad flags are refused with exit code 2.

use std::process::Command;

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .arg("bench")
        .args(args)
        .output()
        .expect("run cluster-autoscaler bench")
}

#[test]
fn prints_every_phase_with_its_decisions_and_the_peak_rss() {
    let out = bench(&[
        "--nodes",
        "40",
        "--groups",
        "4",
        "--pods",
        "1200",
        "--pending",
        "200",
        "--pending-cpu",
        "14",
        "--pending-memory",
        "8Gi",
        "--max-nodes-per-scaleup",
        "25",
        "--iterations",
        "2",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.starts_with(
        "cluster: 40 nodes in 4 groups, 1200 running pods, 200 pending pods of 14 CPU / 8Gi (20 ReplicaSets)"
    ), "{stdout}");
    let row = |phase: &str| -> &str {
        stdout
            .lines()
            .find(|l| l.starts_with(phase))
            .unwrap_or_else(|| panic!("no row {phase:?} in\n{stdout}"))
    };
    // Wall median and maximum, then the median CPU time.
    assert!(
        stdout.contains("median         max         cpu  decisions"),
        "{stdout}"
    );
    assert!(row("snapshot build").ends_with("40 nodes, 1200 pods bound"));
    assert!(
        row("filter pending onto existing nodes")
            .ends_with("0 pods fit existing nodes, 200 need new nodes")
    );
    // Pods of 14 CPU need a node each: capped by --max-nodes-per-scaleup.
    assert!(row("scale-up decision").contains("+25 nodes ("), "{stdout}");
    assert!(
        row("bin-packing estimate").contains("(capped at 25 nodes)"),
        "{stdout}"
    );
    // 8 lightly loaded nodes: 30 unneeded at most by default, 8 here.
    assert!(row("scale-down pass 1").contains("8 unneeded"), "{stdout}");
    assert!(row("scale-down pass 2").contains("deletions: "), "{stdout}");
    row("scale-down planning (both passes)");
    assert!(
        row("run_once (first loop").contains("+25 nodes"),
        "{stdout}"
    );
    assert!(
        row("run_once (next loop").contains("upcoming nodes: 25"),
        "{stdout}"
    );
    assert!(
        stdout.contains("model conversion of the generated API objects"),
        "{stdout}"
    );
    if cfg!(target_os = "linux") {
        assert!(stdout.contains("peak RSS: "), "{stdout}");
        assert!(!stdout.contains("not available"), "{stdout}");
    }
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    for (args, flag) in [
        (&["--pending-memory", "eight"][..], "--pending-memory"),
        (&["--nodes", "0"][..], "--nodes"),
        (&["--iterations", "many"][..], "--iterations"),
        // Panicked on capacity overflow / aborted on a 64 GiB allocation.
        (
            &["--iterations", "18446744073709551615"][..],
            "--iterations",
        ),
        (&["--iterations", "4294967296"][..], "--iterations"),
        // Took 2.45 GB.
        (&["--pending", "1000000"][..], "--pending"),
    ] {
        let out = bench(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
