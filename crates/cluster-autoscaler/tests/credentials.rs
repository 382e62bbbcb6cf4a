//! `run` refuses, at start, credentials the Kubernetes client cannot use, with exit 2 and the
//! kubeconfig file and field named, never a panic: a token, impersonation value or certificate
//! that is malformed, and an exec credential plugin that writes without end. Runs the real
//! binary under a 4 GiB address-space limit; nothing here reaches a cluster.

use std::path::PathBuf;
use std::process::{Command, Output};

fn bin() -> Command {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg("ulimit -v 4194304; exec \"$@\"")
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("RUST_LOG");
    c
}

/// Asserts exit code 2, every `needle` in stderr, and no panic.
fn refused(out: Output, needles: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    for n in needles {
        assert!(stderr.contains(n), "{n:?} not in {stderr}");
    }
    assert!(!stderr.contains("panicked"), "{stderr}");
}

fn run(args: &[&str]) -> Output {
    bin().args(args).output().expect("the binary runs")
}

fn temp_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ca-credentials-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A kubeconfig whose current context uses cluster `c` (a YAML flow mapping) and user `u`.
fn kubeconfig(name: &str, cluster: &str, user: &str) -> PathBuf {
    let p = temp_dir().join(name);
    std::fs::write(
        &p,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {cluster}\n\
             contexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n\
             users:\n- name: u\n  user: {user}\n"
        ),
    )
    .expect("kubeconfig");
    p
}

const SERVER: &str = "{server: 'https://127.0.0.1:6443'}";

#[test]
fn a_token_with_a_control_character_is_refused_naming_the_field() {
    // The client panicked on it ("token is not valid header", exit 101).
    let kc = kubeconfig("token-ctl.yaml", SERVER, r#"{token: "abc\u0001def"}"#);
    refused(
        run(&["run", "--kubeconfig", kc.to_str().unwrap()]),
        &[
            "--kubeconfig",
            "token-ctl.yaml",
            "users[0] (u).user.token",
            "header value",
        ],
    );
    // The same through KUBECONFIG and as the management cluster's kubeconfig.
    refused(
        bin().env("KUBECONFIG", &kc).arg("run").output().unwrap(),
        &["KUBECONFIG", "users[0] (u).user.token"],
    );
    let good = kubeconfig("token-good.yaml", SERVER, "{token: abc}");
    refused(
        run(&[
            "run",
            "--kubeconfig",
            good.to_str().unwrap(),
            "--cloud-config",
            kc.to_str().unwrap(),
        ]),
        &[
            "--cloud-config",
            "token-ctl.yaml",
            "users[0] (u).user.token",
        ],
    );
}

#[test]
fn impersonation_and_certificates_that_cannot_be_used_are_refused_naming_the_field() {
    for (i, (cluster, user, field)) in [
        (
            SERVER,
            r#"{token: t, as: "adm\nin"}"#,
            "users[0] (u).user.as",
        ),
        (
            SERVER,
            r#"{auth-provider: {name: oidc, config: {id-token: "a\u0002"}}}"#,
            "users[0] (u).user.auth-provider.config.id-token",
        ),
        (
            SERVER,
            r#"{token: t, as-groups: [a, "b\u0007"]}"#,
            "users[0] (u).user.as-groups[1]",
        ),
        (
            SERVER,
            "{client-certificate-data: 'not base64!', client-key-data: 'eA=='}",
            "users[0] (u).user.client-certificate-data",
        ),
        (
            "{server: 'https://127.0.0.1:6443', certificate-authority-data: 'aGVsbG8='}",
            "{token: t}",
            "clusters[0] (c).cluster.certificate-authority-data",
        ),
        (
            "{server: 'https://127.0.0.1:6443', certificate-authority: /nonexistent/ca.crt}",
            "{token: t}",
            "clusters[0] (c).cluster.certificate-authority",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let kc = kubeconfig(&format!("cred-{i}.yaml"), cluster, user);
        refused(
            run(&["run", "--kubeconfig", kc.to_str().unwrap()]),
            &["--kubeconfig", &format!("cred-{i}.yaml"), field],
        );
    }
}

#[test]
fn an_exec_plugin_that_writes_without_end_is_stopped_at_its_limit() {
    use std::os::unix::fs::PermissionsExt;
    let plugin = temp_dir().join("endless-plugin.sh");
    std::fs::write(&plugin, "#!/bin/sh\nexec yes\n").unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let kc = kubeconfig(
        "exec-endless.yaml",
        SERVER,
        &format!(
            "{{exec: {{apiVersion: client.authentication.k8s.io/v1, command: {}, \
             interactiveMode: Never}}}}",
            plugin.display()
        ),
    );
    let start = std::time::Instant::now();
    refused(
        run(&["run", "--kubeconfig", kc.to_str().unwrap()]),
        &[
            "--kubeconfig",
            "exec credential plugin of kubeconfig user \"u\"",
            "more than 1 MiB",
        ],
    );
    assert!(start.elapsed() < std::time::Duration::from_secs(30));
}

/// The `Authorization` header of the first request the binary sends with kubeconfig `kc` (a
/// plain-HTTP listener stands in for the API server and answers nothing).
fn first_authorization(kc: &std::path::Path) -> String {
    use std::io::{BufRead, BufReader};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let text = std::fs::read_to_string(kc)
        .unwrap()
        .replace("PORT", &port.to_string());
    std::fs::write(kc, text).unwrap();
    let mut child = bin()
        .args([
            "run",
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--address=127.0.0.1:0",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Never wait without end: a binary that does not connect fails the test.
    listener.set_nonblocking(true).unwrap();
    let start = std::time::Instant::now();
    let stream = loop {
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(_) if start.elapsed() < std::time::Duration::from_secs(30) => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("no request within 30 s: {e}");
            }
        }
    };
    stream.set_nonblocking(false).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    let mut auth = String::new();
    for line in BufReader::new(stream).lines() {
        let line = line.unwrap();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("authorization: ") {
            auth = v.to_string();
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    auth
}

#[test]
fn requests_carry_the_token_of_the_exec_plugin_and_of_the_token_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir();
    let plugin = dir.join("token-plugin.sh");
    std::fs::write(
        &plugin,
        "#!/bin/sh\nprintf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\
         \"kind\":\"ExecCredential\",\"status\":{\"token\":\"from-plugin\"}}'\n",
    )
    .unwrap();
    std::fs::set_permissions(&plugin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let server = "{server: 'http://127.0.0.1:PORT'}";
    let kc = kubeconfig(
        "exec-good.yaml",
        server,
        // Relative to the kubeconfig's directory, as client-go resolves it.
        "{exec: {apiVersion: client.authentication.k8s.io/v1, command: ./token-plugin.sh, \
         interactiveMode: Never}}",
    );
    assert_eq!(first_authorization(&kc), "Bearer from-plugin");
    std::fs::write(dir.join("token"), "from-file\n").unwrap();
    let kc = kubeconfig("token-file.yaml", server, "{tokenFile: token}");
    assert_eq!(first_authorization(&kc), "Bearer from-file");
}
