//! The install manifests: every Kustomize overlay under `kustomize/` renders with
//! `kubectl kustomize`, and what it renders is what it promises (namespace, flags, mounts,
//! RBAC); the Deployment's arguments pass the binary's own validation (through `plan`, which
//! takes every flag of `run`).
//!
//! Rendering needs `kubectl` on the PATH. Without it these tests say so and pass, unless
//! `REQUIRE_KUBECTL` is set, as CI (`.ci/run`, which installs kubectl) sets it: there a missing
//! kubectl fails them.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_yaml_ng::Value;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The documents `kubectl kustomize kustomize/<overlay>` prints, or None without kubectl.
fn render(overlay: &str) -> Option<Vec<Value>> {
    let dir = repo().join("kustomize").join(overlay);
    let out = match Command::new("kubectl").arg("kustomize").arg(&dir).output() {
        Ok(out) => out,
        Err(e) if std::env::var_os("REQUIRE_KUBECTL").is_none() => {
            eprintln!("kubectl not runnable ({e}): {overlay} not rendered");
            return None;
        }
        Err(e) => panic!("REQUIRE_KUBECTL is set and kubectl is not runnable: {e}"),
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{overlay} does not render: {stderr}");
    let text = String::from_utf8(out.stdout).expect("utf-8 output");
    Some(parse(&text, overlay))
}

fn parse(text: &str, what: &str) -> Vec<Value> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap_or_else(|e| panic!("{what}: {e}")))
        .filter(|d: &Value| !d.is_null())
        .collect()
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    let mut cur = v;
    for p in path {
        cur = cur.get(*p)?;
    }
    cur.as_str()
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter()
        .filter(|d| str_at(d, &["kind"]) == Some(kind))
        .collect()
}

/// The one Deployment of an overlay and its one container.
fn container(docs: &[Value]) -> (&Value, &Value) {
    let deployments = of_kind(docs, "Deployment");
    assert_eq!(deployments.len(), 1, "one Deployment");
    let d = deployments[0];
    let containers = d
        .get("spec")
        .and_then(|s| s.get("template"))
        .and_then(|t| t.get("spec"))
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_sequence)
        .expect("containers");
    assert_eq!(containers.len(), 1, "one container");
    (d, &containers[0])
}

fn args(c: &Value) -> Vec<String> {
    c.get("args")
        .and_then(Value::as_sequence)
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string arg").to_string())
        .collect()
}

/// The value of `--name=value` in `args`.
fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let prefix = format!("--{name}=");
    args.iter().find_map(|a| a.strip_prefix(&prefix))
}

/// Every namespaced object of the rendering is in `ns` (and every ServiceAccount subject).
fn all_in_namespace(docs: &[Value], ns: &str) {
    for d in docs {
        let kind = str_at(d, &["kind"]).unwrap_or_default();
        if !kind.starts_with("Cluster") {
            assert_eq!(str_at(d, &["metadata", "namespace"]), Some(ns), "{kind}");
        }
        for s in d
            .get("subjects")
            .and_then(Value::as_sequence)
            .into_iter()
            .flatten()
        {
            assert_eq!(str_at(s, &["namespace"]), Some(ns), "{kind} subject");
        }
    }
}

/// A kubeconfig that parses (the server is never contacted by `plan`).
const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: m\n  cluster:\n    server: https://127.0.0.1:1\n\
    users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: m\n    user: u\n\
    current-context: c\n";

/// Runs the container's arguments (after the `run` subcommand) through `plan` on an empty
/// snapshot: exit 0 means every flag and value passed `run`'s validation. The files the flags
/// named in `kubeconfigs` point to are replaced by a kubeconfig that parses.
fn validate_args(args: &[String], kubeconfigs: &[&str]) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    assert_eq!(args.first().map(String::as_str), Some("run"), "{args:?}");
    let n = N.fetch_add(1, Ordering::Relaxed);
    let tmp = std::env::temp_dir().join(format!("ca-install-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    let snapshot = tmp.join("empty.yaml");
    std::fs::write(&snapshot, "").expect("snapshot");
    let kubeconfig = tmp.join("kubeconfig");
    std::fs::write(&kubeconfig, KUBECONFIG).expect("kubeconfig");
    let mut flags: Vec<String> = args[1..].to_vec();
    for f in &mut flags {
        for name in kubeconfigs {
            if f.starts_with(&format!("--{name}=")) {
                *f = format!("--{name}={}", kubeconfig.display());
            }
        }
    }
    let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .args(["plan", "--now", "2026-01-01T00:00:00Z", "--snapshot"])
        .arg(&snapshot)
        .args(&flags)
        .env_remove("CAPI_GROUP")
        .output()
        .expect("the binary runs");
    let _ = std::fs::remove_dir_all(&tmp);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{flags:?}: {stderr}");
}

#[test]
fn joined_overlay_runs_clusterapi_in_kube_system() {
    let Some(docs) = render("joined") else { return };
    all_in_namespace(&docs, "kube-system");
    let (_, c) = container(&docs);
    let a = args(c);
    assert_eq!(flag(&a, "cloud-provider"), Some("clusterapi"));
    assert_eq!(flag(&a, "namespace"), Some("kube-system"));
    assert_eq!(flag(&a, "cloud-config"), None, "one cluster, one client");
    assert!(
        flag(&a, "node-group-auto-discovery").is_some_and(|d| d.starts_with("clusterapi:")),
        "{a:?}"
    );
    validate_args(&a, &[]);
}

#[test]
fn management_workload_overlay_mounts_the_management_kubeconfig() {
    let Some(docs) = render("management-workload/workload") else {
        return;
    };
    all_in_namespace(&docs, "kube-system");
    let (d, c) = container(&docs);
    let a = args(c);
    assert_eq!(flag(&a, "cloud-provider"), Some("clusterapi"));
    let cloud_config = Path::new(flag(&a, "cloud-config").expect("--cloud-config"));
    // The file --cloud-config names is the Secret's key, mounted read-only.
    let mount = c
        .get("volumeMounts")
        .and_then(Value::as_sequence)
        .into_iter()
        .flatten()
        .find(|m| str_at(m, &["mountPath"]).map(Path::new) == cloud_config.parent())
        .expect("a mount at the --cloud-config directory");
    assert_eq!(mount.get("readOnly").and_then(Value::as_bool), Some(true));
    let volume_name = str_at(mount, &["name"]).expect("mount name");
    let volumes = d
        .get("spec")
        .and_then(|s| s.get("template"))
        .and_then(|t| t.get("spec"))
        .and_then(|s| s.get("volumes"))
        .and_then(Value::as_sequence)
        .expect("volumes");
    let volume = volumes
        .iter()
        .find(|v| str_at(v, &["name"]) == Some(volume_name))
        .expect("the mounted volume");
    assert_eq!(
        str_at(volume, &["secret", "secretName"]),
        Some("cluster-autoscaler-management-kubeconfig")
    );
    let items = volume
        .get("secret")
        .and_then(|s| s.get("items"))
        .and_then(Value::as_sequence)
        .expect("items");
    assert!(items.iter().any(|i| str_at(i, &["path"]).map(Path::new)
        == cloud_config.file_name().map(Path::new)));
    // Auto-discovery names the namespace the management Role is in, so watches can be
    // namespaced there.
    let discovery = flag(&a, "node-group-auto-discovery").expect("auto-discovery");
    let management = render("management-workload/management").expect("rendered above");
    let role = of_kind(&management, "Role");
    assert_eq!(role.len(), 1);
    let ns = str_at(role[0], &["metadata", "namespace"]).expect("Role namespace");
    assert!(
        discovery
            .trim_start_matches("clusterapi:")
            .split(',')
            .any(|kv| kv == format!("namespace={ns}")),
        "{discovery} does not name the Role's namespace {ns}"
    );
    validate_args(&a, &["cloud-config"]);
}

#[test]
fn management_side_is_one_namespaced_role_over_the_cluster_api() {
    if let Some(docs) = render("management-workload/management") {
        assert!(of_kind(&docs, "ClusterRole").is_empty());
        assert!(of_kind(&docs, "ClusterRoleBinding").is_empty());
        all_in_namespace(&docs, "default");
        let sa = of_kind(&docs, "ServiceAccount");
        let binding = of_kind(&docs, "RoleBinding");
        assert_eq!((sa.len(), binding.len()), (1, 1));
        assert_eq!(
            str_at(&binding[0]["subjects"][0], &["name"]),
            str_at(sa[0], &["metadata", "name"])
        );
        assert_eq!(
            str_at(binding[0], &["roleRef", "name"]),
            str_at(of_kind(&docs, "Role")[0], &["metadata", "name"])
        );
    }
    // Its rules, exactly the calls on cluster.x-k8s.io objects, are checked next to those
    // calls (crates/kube/src/api_calls.rs).
}

#[test]
fn openshift_overlay_runs_as_the_operator_does() {
    let Some(docs) = render("openshift") else {
        return;
    };
    all_in_namespace(&docs, "openshift-machine-api");
    let (d, c) = container(&docs);
    let a = args(c);
    assert_eq!(flag(&a, "cloud-provider"), Some("openshift"));
    assert_eq!(flag(&a, "namespace"), Some("openshift-machine-api"));
    assert_eq!(
        flag(&a, "node-group-auto-discovery"),
        Some("clusterapi:namespace=openshift-cluster-api")
    );
    let pod_security = &d["spec"]["template"]["spec"]["securityContext"];
    assert!(pod_security.get("runAsUser").is_none());
    assert!(pod_security.get("runAsGroup").is_none());
    assert_eq!(
        pod_security.get("runAsNonRoot").and_then(Value::as_bool),
        Some(true)
    );
    // The ClusterAutoscaler resource is read and watched.
    let reads_cluster_autoscaler = of_kind(&docs, "ClusterRole").iter().any(|r| {
        r["rules"].as_sequence().into_iter().flatten().any(|rule| {
            let has = |f: &str, s: &str| {
                rule[f]
                    .as_sequence()
                    .is_some_and(|l| l.iter().any(|x| x.as_str() == Some(s)))
            };
            has("apiGroups", "autoscaling.openshift.io")
                && has("resources", "clusterautoscalers")
                && ["get", "list", "watch"].iter().all(|v| has("verbs", v))
        })
    });
    assert!(reads_cluster_autoscaler);
}

#[test]
fn openshift_overlay_args_pass_validation() {
    let Some(docs) = render("openshift") else {
        return;
    };
    validate_args(&args(container(&docs).1), &[]);
}
