//! Every file the binary is given is read with a size limit: `/dev/zero` or `/dev/urandom` in
//! place of a snapshot, config, scenario, trace, kubeconfig or a file a kubeconfig names is
//! refused with exit 2 naming the file and the limit, instead of being read until memory runs
//! out. Runs the real binary under a 4 GiB address-space limit, so that a loader reading
//! without bound fails fast here (allocation failure) rather than filling the machine.

use std::path::PathBuf;
use std::process::{Command, Output};

/// The binary with `args`, under `ulimit -v` (KiB) and away from any real cluster.
fn run(args: &[&str]) -> Output {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("ulimit -v 4194304; exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .args(args)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("RUST_LOG");
    c.output().expect("the binary runs")
}

/// Asserts exit code 2, every `needle` in stderr, and no panic or abort.
fn refused(args: &[&str], needles: &[&str]) {
    let out = run(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{args:?}: {n:?} not in {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ca-bounded-files-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join(name);
    std::fs::write(&p, text).expect("temp file");
    p
}

/// A kubeconfig whose one user is `user` (a YAML flow mapping) and cluster `cluster`.
fn kubeconfig(name: &str, cluster: &str, user: &str) -> PathBuf {
    temp_file(
        name,
        &format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {cluster}\n\
             contexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n\
             users:\n- name: u\n  user: {user}\n"
        ),
    )
}

const SERVER: &str = "{server: 'https://127.0.0.1:6443'}";

#[test]
fn snapshot_that_never_ends_is_refused_at_its_limit() {
    refused(
        &["plan", "--snapshot", "/dev/zero"],
        &["snapshot file /dev/zero", "1024 MiB"],
    );
}

#[test]
fn config_file_that_never_ends_is_refused_at_its_limit() {
    refused(
        &["run", "--config", "/dev/zero"],
        &["config file /dev/zero", "16 MiB"],
    );
    refused(
        &[
            "plan",
            "--snapshot",
            "/dev/null",
            "--config",
            "/dev/urandom",
        ],
        &["config file /dev/urandom", "16 MiB"],
    );
}

#[test]
fn scenario_and_trace_that_never_end_are_refused_at_their_limits() {
    refused(
        &["simulate", "/dev/zero"],
        &["scenario /dev/zero", "64 MiB"],
    );
    let s = temp_file(
        "endless-trace.yaml",
        "name: t\nduration: 10m\nnode_groups:\n  - {name: g, min: 0, max: 2, cpu: \"4\", \
         memory: 8Gi}\nworkloads:\n  - kind: trace\n    file: /dev/zero\n",
    );
    refused(
        &["simulate", s.to_str().unwrap()],
        &["/dev/zero", "longer than 65536 bytes"],
    );
}

#[test]
fn kubeconfigs_that_never_end_are_refused_at_their_limit() {
    refused(
        &["run", "--kubeconfig", "/dev/zero"],
        &["--kubeconfig /dev/zero", "16 MiB"],
    );
    let good = kubeconfig("kc-good.yaml", SERVER, "{token: abc}");
    refused(
        &[
            "run",
            "--kubeconfig",
            good.to_str().unwrap(),
            "--cloud-config",
            "/dev/urandom",
        ],
        &["--cloud-config /dev/urandom", "16 MiB"],
    );
    // `KUBECONFIG` naming a device (not a regular file) is read by us too.
    let out = {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg("ulimit -v 4194304; exec \"$@\"")
            .arg("sh")
            .arg(env!("CARGO_BIN_EXE_cluster-autoscaler"))
            .arg("run")
            .env_remove("KUBERNETES_SERVICE_HOST")
            .env("KUBECONFIG", "/dev/zero");
        c.output().expect("the binary runs")
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("KUBECONFIG /dev/zero") && stderr.contains("16 MiB"),
        "{stderr}"
    );
}

#[test]
fn files_a_kubeconfig_names_that_never_end_are_refused_naming_the_field() {
    for (i, (cluster, user, field, limit)) in [
        (
            SERVER.to_string(),
            "{tokenFile: /dev/zero}",
            "users[0] (u).user.tokenFile",
            "1 MiB",
        ),
        (
            SERVER.to_string(),
            "{client-certificate: /dev/zero, client-key: /dev/zero}",
            "users[0] (u).user.client-certificate",
            "4 MiB",
        ),
        (
            "{server: 'https://127.0.0.1:6443', certificate-authority: /dev/urandom}".to_string(),
            "{token: abc}",
            "clusters[0] (c).cluster.certificate-authority",
            "4 MiB",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let kc = kubeconfig(&format!("kc-files-{i}.yaml"), &cluster, user);
        refused(
            &["run", "--kubeconfig", kc.to_str().unwrap()],
            &["--kubeconfig", field, limit],
        );
    }
}
