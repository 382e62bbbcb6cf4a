//! `plan` end to end: the real binary on snapshot files.

use std::io::Write;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn temp_file(text: &str) -> tempfile_path::TempPath {
    tempfile_path::TempPath::with_text(text)
}

/// A tiny self-deleting temporary file (avoids a dev-dependency for one helper).
mod tempfile_path {
    use super::Write;
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicUsize, Ordering};

    static N: AtomicUsize = AtomicUsize::new(0);

    pub struct TempPath(pub PathBuf);

    impl TempPath {
        pub fn with_text(text: &str) -> TempPath {
            let n = N.fetch_add(1, Ordering::Relaxed);
            let path =
                std::env::temp_dir().join(format!("ca-plan-test-{}-{n}.yaml", std::process::id()));
            let mut f = std::fs::File::create(&path).expect("create temp file");
            f.write_all(text.as_bytes()).expect("write temp file");
            TempPath(path)
        }
        pub fn as_str(&self) -> &str {
            self.0.to_str().expect("utf-8 temp path")
        }
    }

    impl Drop for TempPath {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

#[test]
fn example_snapshot_is_explained_in_kube_scheduler_words() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/snapshot.yaml");
    let out = run(&["plan", "--snapshot", example]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "default/web-3: 0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 node(s) didn't match pod anti-affinity rules.",
            "default/batch-1: 1/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}. Fits on: general-b.",
            "ml/train-1: 1/3 nodes are available: 1 Insufficient cpu, 2 Insufficient nvidia.com/gpu. Fits on: gpu-a.",
            "ml/train-2: 0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient nvidia.com/gpu.",
        ]
    );
}

#[test]
fn bad_quantity_names_the_object_and_field_and_exits_2() {
    let f = temp_file(
        "kind: Pod\nmetadata: {name: x, namespace: ns}\nspec: {containers: [{name: a, resources: {requests: {cpu: 12Zi}}}]}\n",
    );
    let out = run(&["plan", "--snapshot", f.as_str()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.contains("Pod ns/x"), "{err}");
    assert!(
        err.contains("spec.containers[0].resources.requests.cpu"),
        "{err}"
    );
    assert!(err.contains("\"12Zi\""), "{err}");
    assert_eq!(
        err.matches("12Zi").count(),
        1,
        "the cause is printed once: {err}"
    );
}

#[test]
fn malformed_inputs_exit_2_without_panicking() {
    let cases = [
        ("not: [valid", "not valid YAML"),
        (
            "kind: Node\nmetadata: {name: n}\nspec: {taints: [{key: k, effect: Sometimes}]}\n",
            "spec.taints[0].effect",
        ),
        ("metadata: {name: n}\n", "has no kind"),
        (
            "kind: Node\nmetadata: {name: 5}\nstatus: {allocatable: 3}\n",
            "does not match the Node schema",
        ),
        ("kind: List\nitems: 7\n", "items is not a list"),
    ];
    for (text, expected) in cases {
        let f = temp_file(text);
        let out = run(&["plan", "--snapshot", f.as_str()]);
        let err = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{text}: {err}");
        assert!(
            err.contains(expected),
            "{text}: expected {expected:?} in {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    let out = run(&["plan", "--snapshot", "/nonexistent/snapshot.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    let out = run(&["plan", "--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn pods_bound_to_unknown_nodes_are_skipped_with_a_warning() {
    let f = temp_file(
        "kind: Pod\nmetadata: {name: p, namespace: default}\nspec: {nodeName: ghost, containers: [{name: a}]}\n---\nkind: ConfigMap\nmetadata: {name: c}\n",
    );
    let out = run(&["plan", "--snapshot", f.as_str()]);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("warning: Pod default/p skipped: bound to node ghost"),
        "{stdout}"
    );
    assert!(
        stdout.contains("note: ignored objects of other kinds: 1 ConfigMap"),
        "{stdout}"
    );
    assert!(stdout.contains("No pod is waiting for a node."), "{stdout}");
}

#[test]
fn help_is_the_documented_main_job() {
    let out = run(&["plan", "--help"]);
    assert!(out.status.success());
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .contains("--snapshot <FILE>")
    );
}
