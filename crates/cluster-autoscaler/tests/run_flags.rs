//! `run` rejects bad flags, config files and kubeconfigs at start: exit code 2, the offending
//! name in stderr, no panic. Runs the real binary; nothing here reaches a cluster.

use std::path::PathBuf;
use std::process::{Command, Output};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"));
    // Keep kube's inference from finding a real cluster on the test machine.
    c.env_remove("KUBERNETES_SERVICE_HOST")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("RUST_LOG");
    c
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("the binary runs")
}

/// Asserts exit code 2, every `needle` in stderr, and no panic.
fn rejected(args: &[&str], needles: &[&str]) {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{args:?}: {n:?} not in {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ca-run-flags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join(name);
    std::fs::write(&p, text).expect("temp file");
    p
}

#[test]
fn unknown_flag_is_rejected() {
    rejected(&["run", "--no-such-flag=1"], &["--no-such-flag"]);
    // Flags alone mean `run`.
    rejected(&["--no-such-flag"], &["--no-such-flag"]);
    rejected(&["--cloud-provider=aws"], &["--cloud-provider", "aws"]);
}

#[test]
fn bad_duration_is_rejected() {
    rejected(&["run", "--scan-interval=10x"], &["--scan-interval", "10x"]);
    rejected(
        &["--scale-down-unneeded-time", "soon"],
        &["--scale-down-unneeded-time", "soon"],
    );
    rejected(&["-max-inactivity=0s"], &["--max-inactivity", "0s"]);
}

#[test]
fn bad_threshold_is_rejected() {
    rejected(
        &["run", "--scale-down-utilization-threshold=1.5"],
        &["--scale-down-utilization-threshold", "1.5"],
    );
    rejected(&["--v=11"], &["--v", "11"]);
    rejected(&["--leader-elect", "false"], &["false"]);
}

#[test]
fn malformed_config_file_is_rejected() {
    let p = temp_file(
        "threshold.yaml",
        "apiVersion: autoscaling.openshift.io/v1\nkind: ClusterAutoscaler\nspec:\n  scaleDown:\n    enabled: true\n    utilizationThreshold: \"abc\"\n",
    );
    rejected(
        &["run", "--config", p.to_str().unwrap()],
        &[
            "spec.scaleDown.utilizationThreshold",
            "\"abc\"",
            "threshold.yaml",
        ],
    );
    let p = temp_file(
        "typo.yaml",
        "apiVersion: autoscaling.openshift.io/v1\nkind: ClusterAutoscaler\nspec:\n  scaleDwon:\n    enabled: true\n",
    );
    rejected(
        &["--config", p.to_str().unwrap()],
        &["scaleDwon", "typo.yaml"],
    );
    let p = temp_file("broken.yaml", "spec: [\n");
    rejected(&["--config", p.to_str().unwrap()], &["broken.yaml"]);
}

#[test]
fn missing_config_file_is_rejected() {
    rejected(
        &["run", "--config=/nonexistent/ca-config.yaml"],
        &["/nonexistent/ca-config.yaml"],
    );
    // The cause once, not once in the message and again as its source.
    let out = run(&["run", "--config=/nonexistent/ca-config.yaml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("os error 2").count(), 1, "{stderr}");
}

#[test]
fn missing_kubeconfig_is_rejected() {
    rejected(
        &["run", "--kubeconfig", "/nonexistent/kc.yaml"],
        &["--kubeconfig", "/nonexistent/kc.yaml"],
    );
    let p = temp_file("kc.yaml", "this: is: not: a kubeconfig\n");
    rejected(
        &["--kubeconfig", p.to_str().unwrap()],
        &["--kubeconfig", "kc.yaml"],
    );
}

#[test]
fn bad_cloud_config_is_rejected_naming_the_file_and_field() {
    let workload = kubeconfig("kc-workload.yaml", "https://127.0.0.1:6443");
    let w = workload.to_str().unwrap();
    rejected(
        &[
            "run",
            "--kubeconfig",
            w,
            "--cloud-config=/nonexistent/mgmt.yaml",
        ],
        &["--cloud-config", "/nonexistent/mgmt.yaml", "cannot read"],
    );
    let p = temp_file("mgmt-garbage.yaml", "this: is: not: a kubeconfig\n");
    rejected(
        &[
            "run",
            "--kubeconfig",
            w,
            "--cloud-config",
            p.to_str().unwrap(),
        ],
        &["--cloud-config", "mgmt-garbage.yaml"],
    );
    let p = kubeconfig("mgmt-bad-server.yaml", "127.0.0.1:6443");
    rejected(
        &[
            "run",
            "--kubeconfig",
            w,
            "--cloud-config",
            p.to_str().unwrap(),
        ],
        &[
            "--cloud-config",
            "mgmt-bad-server.yaml",
            "clusters[0] (c).cluster.server",
            "no scheme",
        ],
    );
}

#[test]
fn help_lists_the_flags() {
    let out = run(&["run", "--help"]);
    assert_eq!(out.status.code(), Some(0));
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--scan-interval",
        "--kubeconfig",
        "--namespace",
        "--cloud-provider",
        "--node-group-auto-discovery",
        "--leader-elect",
        "--address",
        "--write-status-configmap",
        "--max-inactivity",
        "--max-failing-time",
        "--config",
        "--expander",
        "--scale-down-utilization-threshold",
        "--max-nodes-total",
        "--cores-total",
        "--gpu-total",
        "--v <LEVEL>",
        "--cloud-config",
        "--clusterapi-cloud-config-authoritative",
    ] {
        assert!(help.contains(flag), "{flag} not in help:\n{help}");
    }
    // The plain `plan` and `simulate` subcommands are still there.
    let out = run(&["--help"]);
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("plan") && help.contains("simulate") && help.contains("run"));
}

/// A kubeconfig whose current context's cluster has `server`.
fn kubeconfig(name: &str, server: &str) -> PathBuf {
    temp_file(
        name,
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {server}\n\
             contexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n\
             users:\n- name: u\n  user: {{token: abc}}\n"
        ),
    )
}

#[test]
fn kubeconfig_server_urls_are_validated() {
    // Without a scheme the client panicked and retried forever while /health-check said 200.
    for (i, (server, why)) in [
        ("127.0.0.1:6443", "no scheme"),
        ("ftp://x", "\"ftp\""),
        ("https://x:99999", "99999"),
    ]
    .into_iter()
    .enumerate()
    {
        let p = kubeconfig(&format!("kc-server-{i}.yaml"), server);
        rejected(
            &["run", "--kubeconfig", p.to_str().unwrap()],
            &[
                "--kubeconfig",
                "clusters[0] (c).cluster.server",
                server,
                why,
            ],
        );
    }
}

#[test]
fn kubeconfig_env_server_urls_are_validated() {
    let p = kubeconfig("kc-env.yaml", "127.0.0.1:6443");
    let out = bin()
        .env("KUBECONFIG", &p)
        .arg("run")
        .output()
        .expect("the binary runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("KUBECONFIG"), "{stderr}");
    assert!(stderr.contains("kc-env.yaml"), "{stderr}");
    assert!(stderr.contains("no scheme"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn kubeconfig_errors_quote_the_path_once_and_the_cause_once() {
    let out = run(&["run", "--kubeconfig", "/nonexistent/kc.yaml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("'\""), "{stderr}");
    assert_eq!(stderr.matches("os error 2").count(), 1, "{stderr}");
}

#[test]
fn deeply_nested_config_is_refused_quickly() {
    // 100,000 `[` took 24 s of CPU in the parser before it gave up.
    let p = temp_file("deep.yaml", &"[".repeat(100_000));
    let start = std::time::Instant::now();
    rejected(
        &["run", "--config", p.to_str().unwrap()],
        &["deep.yaml", "nested more than 128 levels"],
    );
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
}
