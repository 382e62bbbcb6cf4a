//! The Helm chart (`charts/cluster-autoscaler`), the alert rules and the Grafana dashboard.
//!
//! - The chart lints and renders for each documented values case (`ci/*.yaml`), and what it
//!   renders equals the Kustomize manifests where the two overlap: RBAC rules, the Deployment's
//!   arguments, ports, probes, security contexts, resources, volumes, the Service. Its
//!   arguments pass the binary's own validation (through `plan`, which takes every flag of
//!   `run`).
//! - The alert rules (chart and `deploy/prometheus-rule.yaml`, which must be equal) and the
//!   dashboard's queries (chart and `deploy/grafana-dashboard.json`, equal too) parse as PromQL,
//!   and every metric they name is one a run of the binary exposes on `/metrics`, with the label
//!   values they match on.
//! - `promtool` accepts the rules, and their unit tests (`tests/alerts/rules_test.yaml`: each
//!   alert fires on the series that should fire it, and not on the near misses) pass.
//!
//! Rendering needs `helm` (and `kubectl` for the Kustomize side) on the PATH, the rule checks
//! `promtool`. Without them these tests say so and pass, unless `REQUIRE_HELM`
//! (`REQUIRE_KUBECTL`, `REQUIRE_PROMTOOL`) is set, as CI (`.ci/run`, which installs all three)
//! sets them: there a missing tool fails them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use autoscaler_facade::{Facade, FacadeOptions, FaultAction, FaultRule, Verb};
use autoscaler_world::{NodeGroupSpec, ProvisioningDelay, World, WorldConfig};
use promql_parser::label::MatchOp;
use promql_parser::parser::{self as promql, Expr};
use promql_parser::util::{ExprVisitor, walk_expr};
use serde_yaml_ng::Value;

mod support;
use support::Autoscaler;

/// The release name and namespace the chart is rendered with: those give deploy/'s names.
const RELEASE: &str = "cluster-autoscaler";
const NAMESPACE: &str = "kube-system";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn chart() -> PathBuf {
    repo().join("charts/cluster-autoscaler")
}

fn read(path: &str) -> String {
    let p = repo().join(path);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Runs `tool args`; None when the tool is not runnable and `require` is not set.
fn run_tool(tool: &str, require: &str, args: &[&str]) -> Option<std::process::Output> {
    match Command::new(tool).args(args).output() {
        Ok(out) => Some(out),
        Err(e) if std::env::var_os(require).is_none() => {
            eprintln!("{tool} not runnable ({e}): {args:?} not run");
            None
        }
        Err(e) => panic!("{require} is set and {tool} is not runnable: {e}"),
    }
}

/// `helm template` of the chart with the values file `ci/<case>` (None: the defaults) in
/// `namespace`, as documents; None without helm.
fn helm_template(case: Option<&str>, namespace: &str) -> Option<Vec<Value>> {
    let out = helm_template_output(case, namespace, &[])?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{case:?} does not render: {stderr}");
    let text = String::from_utf8(out.stdout).expect("utf-8 output");
    Some(parse_docs(&text, &format!("helm template {case:?}")))
}

fn helm_template_output(
    case: Option<&str>,
    namespace: &str,
    extra: &[&str],
) -> Option<std::process::Output> {
    let chart = chart();
    let values = case.map(|c| chart.join("ci").join(c));
    let mut args = vec![
        "template".to_string(),
        RELEASE.into(),
        chart.display().to_string(),
        "--namespace".into(),
        namespace.into(),
    ];
    if let Some(v) = &values {
        args.push("--values".into());
        args.push(v.display().to_string());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run_tool("helm", "REQUIRE_HELM", &args)
}

/// `kubectl kustomize <dir>` as documents; None without kubectl.
fn kustomize(dir: &str) -> Option<Vec<Value>> {
    let path = repo().join(dir);
    let out = run_tool(
        "kubectl",
        "REQUIRE_KUBECTL",
        &["kustomize", &path.display().to_string()],
    )?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{dir} does not render: {stderr}");
    Some(parse_docs(
        &String::from_utf8(out.stdout).expect("utf-8"),
        dir,
    ))
}

fn parse_docs(text: &str, what: &str) -> Vec<Value> {
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

/// The one object of `kind` named `name`.
fn object<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    let found: Vec<&Value> = docs
        .iter()
        .filter(|d| str_at(d, &["kind"]) == Some(kind))
        .filter(|d| str_at(d, &["metadata", "name"]) == Some(name))
        .collect();
    assert_eq!(found.len(), 1, "one {kind} {name}");
    found[0]
}

fn of_kind<'a>(docs: &'a [Value], kind: &str) -> Vec<&'a Value> {
    docs.iter()
        .filter(|d| str_at(d, &["kind"]) == Some(kind))
        .collect()
}

fn pod_spec(docs: &[Value]) -> &Value {
    let d = of_kind(docs, "Deployment");
    assert_eq!(d.len(), 1, "one Deployment");
    &d[0]["spec"]["template"]["spec"]
}

fn container(docs: &[Value]) -> &Value {
    let c = pod_spec(docs)["containers"]
        .as_sequence()
        .expect("containers");
    assert_eq!(c.len(), 1, "one container");
    &c[0]
}

fn args(c: &Value) -> Vec<String> {
    c["args"]
        .as_sequence()
        .expect("args")
        .iter()
        .map(|a| a.as_str().expect("string arg").to_string())
        .collect()
}

/// The arguments as a sorted list, a bare `--flag` written `--flag=true`: the order of flags
/// and the spelling of a true boolean do not change what the binary does.
fn normalized_args(c: &Value) -> Vec<String> {
    let mut a: Vec<String> = args(c)
        .into_iter()
        .map(|a| {
            if a.starts_with("--") && !a.contains('=') {
                format!("{a}=true")
            } else {
                a
            }
        })
        .collect();
    a.sort();
    a
}

fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let prefix = format!("--{name}=");
    args.iter().find_map(|a| a.strip_prefix(&prefix))
}

/// RBAC rules as a comparable set of (group, resource, verb) triples.
fn grants(role: &Value) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    let strs = |v: &Value| -> Vec<String> {
        v.as_sequence()
            .expect("a list")
            .iter()
            .map(|s| s.as_str().expect("a string").to_string())
            .collect()
    };
    for rule in role["rules"].as_sequence().expect("rules") {
        for g in strs(&rule["apiGroups"]) {
            for r in strs(&rule["resources"]) {
                for v in strs(&rule["verbs"]) {
                    out.insert((g.clone(), r.clone(), v));
                }
            }
        }
    }
    out
}

/// Asserts two roles grant the same, naming only what one grants and the other does not.
fn assert_same_grants(
    chart: &BTreeSet<(String, String, String)>,
    expected: &BTreeSet<(String, String, String)>,
    what: &str,
) {
    let extra: Vec<_> = chart.difference(expected).collect();
    let lacking: Vec<_> = expected.difference(chart).collect();
    assert!(
        extra.is_empty() && lacking.is_empty(),
        "{what}: the chart also grants {extra:?} and lacks {lacking:?}"
    );
}

/// The fields of the pod spec and its container that the chart and the Kustomize manifests
/// both set, and must set alike.
fn assert_same_pod(chart: &[Value], kustomize: &[Value], what: &str) {
    let (cp, kp) = (pod_spec(chart), pod_spec(kustomize));
    for field in [
        "serviceAccountName",
        "priorityClassName",
        "automountServiceAccountToken",
        "securityContext",
        "affinity",
        "tolerations",
        "volumes",
    ] {
        assert_eq!(cp.get(field), kp.get(field), "{what}: pod spec {field}");
    }
    let (cc, kc) = (container(chart), container(kustomize));
    assert_eq!(normalized_args(cc), normalized_args(kc), "{what}: args");
    for field in [
        "image",
        "imagePullPolicy",
        "env",
        "ports",
        "livenessProbe",
        "readinessProbe",
        "resources",
        "securityContext",
        "volumeMounts",
    ] {
        assert_eq!(cc.get(field), kc.get(field), "{what}: container {field}");
    }
    let (cd, kd) = (
        &of_kind(chart, "Deployment")[0]["spec"],
        &of_kind(kustomize, "Deployment")[0]["spec"],
    );
    for field in ["replicas", "strategy"] {
        assert_eq!(cd.get(field), kd.get(field), "{what}: Deployment {field}");
    }
}

/// A kubeconfig that parses (the server is never contacted by `plan`).
const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: m\n  cluster:\n    server: https://127.0.0.1:1\n\
    users:\n- name: u\n  user:\n    token: t\ncontexts:\n- name: c\n  context:\n    cluster: m\n    user: u\n\
    current-context: c\n";

/// Runs the container's arguments (after `run`) through `plan` on an empty snapshot: exit 0
/// means every flag and value passed `run`'s validation. The files that `--kubeconfig` and
/// `--cloud-config` name are replaced by a kubeconfig that parses.
fn validate_args(args: &[String], what: &str) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    assert_eq!(args.first().map(String::as_str), Some("run"), "{args:?}");
    let n = N.fetch_add(1, Ordering::Relaxed);
    let tmp = std::env::temp_dir().join(format!("ca-chart-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    let snapshot = tmp.join("empty.yaml");
    std::fs::write(&snapshot, "").expect("snapshot");
    let kubeconfig = tmp.join("kubeconfig");
    std::fs::write(&kubeconfig, KUBECONFIG).expect("kubeconfig");
    let flags: Vec<String> = args[1..]
        .iter()
        .map(|f| {
            for name in ["kubeconfig", "cloud-config"] {
                if f.starts_with(&format!("--{name}=")) {
                    return format!("--{name}={}", kubeconfig.display());
                }
            }
            f.clone()
        })
        .collect();
    let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .args(["plan", "--now", "2026-01-01T00:00:00Z", "--snapshot"])
        .arg(&snapshot)
        .args(&flags)
        .env_remove("CAPI_GROUP")
        .output()
        .expect("the binary runs");
    let _ = std::fs::remove_dir_all(&tmp);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{what}: {flags:?}: {stderr}");
}

/// Every values case CI renders (`ci/*.yaml`), by file name.
fn values_cases() -> Vec<String> {
    let mut cases: Vec<String> = std::fs::read_dir(chart().join("ci"))
        .expect("charts/cluster-autoscaler/ci")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with("-values.yaml"))
        .collect();
    cases.sort();
    cases
}

#[test]
fn the_chart_lints_for_every_values_case() {
    let mut cases: Vec<Option<String>> = vec![None];
    cases.extend(values_cases().into_iter().map(Some));
    for case in cases {
        let mut args = vec![
            "lint".to_string(),
            chart().display().to_string(),
            "--strict".into(),
        ];
        if let Some(c) = &case {
            args.push("--values".into());
            args.push(chart().join("ci").join(c).display().to_string());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let Some(out) = run_tool("helm", "REQUIRE_HELM", &args) else {
            return;
        };
        assert!(
            out.status.success(),
            "helm lint {case:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn every_values_case_is_documented_and_its_args_pass_validation() {
    let docs = read("docs/install.md");
    for case in values_cases() {
        assert!(
            docs.contains(&format!("ci/{case}")),
            "docs/install.md does not mention the values case ci/{case}"
        );
    }
    for case in values_cases() {
        let ns = if case.starts_with("openshift") {
            "openshift-machine-api"
        } else {
            NAMESPACE
        };
        let Some(rendered) = helm_template(Some(&case), ns) else {
            return;
        };
        validate_args(&args(container(&rendered)), &case);
    }
}

#[test]
fn default_values_render_the_kustomize_base() {
    let Some(chart) = helm_template(None, NAMESPACE) else {
        return;
    };
    let Some(kust) = kustomize("kustomize/joined") else {
        return;
    };
    assert_same_pod(&chart, &kust, "default values vs kustomize/joined");
    validate_args(&args(container(&chart)), "default values");
    // Every object of the Kustomize base is in the chart, under the same name and namespace.
    for k in &kust {
        let kind = str_at(k, &["kind"]).expect("kind");
        let name = str_at(k, &["metadata", "name"]).expect("name");
        let c = object(&chart, kind, name);
        assert_eq!(
            str_at(c, &["metadata", "namespace"]),
            str_at(k, &["metadata", "namespace"]),
            "{kind} {name}"
        );
        if kind.ends_with("Role") {
            assert_same_grants(&grants(c), &grants(k), &format!("{kind} {name}"));
        }
        if kind.ends_with("Binding") {
            assert_eq!(c["subjects"], k["subjects"], "{kind} {name}: subjects");
            assert_eq!(c["roleRef"], k["roleRef"], "{kind} {name}: roleRef");
        }
        if kind == "Service" {
            assert_eq!(c["spec"]["ports"], k["spec"]["ports"], "Service ports");
        }
    }
    // The chart's selectors select its pods.
    let pod_labels = &of_kind(&chart, "Deployment")[0]["spec"]["template"]["metadata"]["labels"];
    let service = object(&chart, "Service", RELEASE);
    for (k, v) in service["spec"]["selector"].as_mapping().expect("selector") {
        assert_eq!(pod_labels.get(k), Some(v), "Service selector {k:?}");
    }
    let pdb = object(&chart, "PodDisruptionBudget", RELEASE);
    for (k, v) in pdb["spec"]["selector"]["matchLabels"]
        .as_mapping()
        .expect("PDB selector")
    {
        assert_eq!(pod_labels.get(k), Some(v), "PDB selector {k:?}");
    }
    // Nothing that needs the Prometheus Operator's CRDs unless asked for.
    for kind in ["ServiceMonitor", "PrometheusRule", "ConfigMap"] {
        assert!(of_kind(&chart, kind).is_empty(), "{kind} by default");
    }
}

#[test]
fn management_workload_values_render_the_workload_overlay() {
    let Some(chart) = helm_template(Some("management-workload-values.yaml"), NAMESPACE) else {
        return;
    };
    let Some(kust) = kustomize("kustomize/management-workload/workload") else {
        return;
    };
    assert_same_pod(&chart, &kust, "management-workload values vs overlay");
    let a = args(container(&chart));
    assert_eq!(
        flag(&a, "cloud-config"),
        Some("/etc/cluster-autoscaler/management/kubeconfig")
    );
}

#[test]
fn workload_kubeconfig_values_mount_the_cluster_api_secret() {
    let Some(chart) = helm_template(Some("workload-kubeconfig-values.yaml"), NAMESPACE) else {
        return;
    };
    let c = container(&chart);
    let a = args(c);
    assert_eq!(
        flag(&a, "clusterapi-cloud-config-authoritative"),
        Some("true")
    );
    assert_eq!(flag(&a, "cloud-config"), None, "management: in-cluster");
    let kubeconfig = Path::new(flag(&a, "kubeconfig").expect("--kubeconfig"));
    // The file --kubeconfig names is key `value` of Cluster API's kubeconfig Secret, mounted
    // read-only at its directory.
    let mount = c["volumeMounts"]
        .as_sequence()
        .into_iter()
        .flatten()
        .find(|m| str_at(m, &["mountPath"]).map(Path::new) == kubeconfig.parent())
        .expect("a mount at the --kubeconfig directory");
    assert_eq!(mount["readOnly"].as_bool(), Some(true));
    let volume = pod_spec(&chart)["volumes"]
        .as_sequence()
        .into_iter()
        .flatten()
        .find(|v| v["name"] == mount["name"])
        .expect("the mounted volume");
    assert_eq!(
        str_at(volume, &["secret", "secretName"]),
        Some("my-cluster-kubeconfig")
    );
    let item = &volume["secret"]["items"][0];
    assert_eq!(str_at(item, &["key"]), Some("value"));
    assert_eq!(
        str_at(item, &["path"]).map(Path::new),
        kubeconfig.file_name().map(Path::new)
    );
}

#[test]
fn namespaced_values_grant_the_cluster_api_in_a_role_only() {
    let Some(chart) = helm_template(Some("namespaced-values.yaml"), NAMESPACE) else {
        return;
    };
    let a = args(container(&chart));
    let discovery = flag(&a, "node-group-auto-discovery").expect("auto-discovery");
    assert_eq!(discovery, "clusterapi:namespace=capi-clusters");
    let expected_role = parse_docs(
        &read("deploy/rbac-clusterapi-namespaced.yaml"),
        "rbac-clusterapi-namespaced.yaml",
    );
    let expected_role = of_kind(&expected_role, "Role")[0];
    let role = object(&chart, "Role", "cluster-autoscaler-clusterapi");
    assert_eq!(
        str_at(role, &["metadata", "namespace"]),
        Some("capi-clusters")
    );
    assert_same_grants(
        &grants(role),
        &grants(expected_role),
        "the Cluster API Role",
    );
    let binding = object(&chart, "RoleBinding", "cluster-autoscaler-clusterapi");
    assert_eq!(
        str_at(binding, &["metadata", "namespace"]),
        Some("capi-clusters")
    );
    assert_eq!(str_at(&binding["subjects"][0], &["name"]), Some(RELEASE));
    assert_eq!(
        str_at(&binding["subjects"][0], &["namespace"]),
        Some(NAMESPACE)
    );
    // The ClusterRole is deploy/rbac.yaml's without the Cluster API (and Machine API) objects.
    let base = parse_docs(&read("deploy/rbac.yaml"), "rbac.yaml");
    // The infrastructure templates go with the Cluster API objects, in the namespace.
    let machine_groups = [
        "cluster.x-k8s.io",
        "machine.openshift.io",
        "infrastructure.cluster.x-k8s.io",
    ];
    let expected: BTreeSet<_> = grants(object(&base, "ClusterRole", RELEASE))
        .into_iter()
        .filter(|(g, _, _)| !machine_groups.contains(&g.as_str()))
        .collect();
    assert_same_grants(
        &grants(object(&chart, "ClusterRole", RELEASE)),
        &expected,
        "the ClusterRole",
    );
}

#[test]
fn openshift_values_render_the_openshift_overlay() {
    let ns = "openshift-machine-api";
    let Some(chart) = helm_template(Some("openshift-values.yaml"), ns) else {
        return;
    };
    let Some(kust) = kustomize("kustomize/openshift") else {
        return;
    };
    assert_same_pod(&chart, &kust, "openshift values vs overlay");
    for kind in ["ClusterRole", "Role"] {
        for k in of_kind(&kust, kind) {
            let name = str_at(k, &["metadata", "name"]).expect("name");
            assert_eq!(
                grants(object(&chart, kind, name)),
                grants(k),
                "{kind} {name}"
            );
        }
    }
    for kind in ["ClusterRoleBinding", "RoleBinding"] {
        for k in of_kind(&kust, kind) {
            let name = str_at(k, &["metadata", "name"]).expect("name");
            assert_eq!(
                object(&chart, kind, name)["subjects"],
                k["subjects"],
                "{name}"
            );
        }
    }
}

/// `extraArgs` as upstream's chart reads them: a name's part from its first `_` on is dropped
/// (a flag given twice), and whole numbers from a values file stay whole (Helm reads them as
/// floating point, which would print 1000000 as 1e+06).
#[test]
fn extra_args_repeat_flags_and_keep_whole_numbers() {
    let tmp = std::env::temp_dir().join(format!("ca-chart-values-{}.yaml", std::process::id()));
    std::fs::write(
        &tmp,
        "extraArgs:\n  max-nodes-total: 1000000\n  scale-down-utilization-threshold: 0.5\n  \
         balancing-ignore-label_1: example.com/a\n  balancing-ignore-label_2: example.com/b\n",
    )
    .expect("values file");
    let out = helm_template_output(None, NAMESPACE, &["--values", &tmp.display().to_string()]);
    let _ = std::fs::remove_file(&tmp);
    let Some(out) = out else { return };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs = parse_docs(&String::from_utf8(out.stdout).expect("utf-8"), "extraArgs");
    let a = args(container(&docs));
    for expected in [
        "--max-nodes-total=1000000",
        "--scale-down-utilization-threshold=0.5",
        "--balancing-ignore-label=example.com/a",
        "--balancing-ignore-label=example.com/b",
        "--scan-interval=10s",
    ] {
        assert!(a.iter().any(|x| x == expected), "{expected} not in {a:?}");
    }
    validate_args(&a, "extraArgs");
}

#[test]
fn bad_values_fail_the_rendering_with_a_message_naming_them() {
    for (set, message) in [
        ("clusterAPIMode=in-cluster", "clusterAPIMode \"in-cluster\""),
        ("cloudProvider=aws", "cloudProvider \"aws\""),
        (
            "rbac.clusterScoped=false,autoDiscovery.namespace=",
            "autoDiscovery.namespace",
        ),
    ] {
        let Some(out) = helm_template_output(None, NAMESPACE, &["--set", set]) else {
            return;
        };
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{set} renders");
        assert!(stderr.contains(message), "{set}: {stderr}");
    }
}

/// The metric names (with the label values they match on) that a PromQL expression reads.
#[derive(Default)]
struct Selectors(BTreeMap<String, BTreeSet<(String, String)>>);

impl ExprVisitor for Selectors {
    type Error = String;
    fn pre_visit(&mut self, e: &Expr) -> Result<bool, String> {
        let vs = match e {
            Expr::VectorSelector(vs) => vs,
            Expr::MatrixSelector(m) => &m.vs,
            _ => return Ok(true),
        };
        let name = vs
            .name
            .clone()
            .or_else(|| {
                vs.matchers
                    .matchers
                    .iter()
                    .find(|m| m.name == "__name__")
                    .map(|m| m.value.clone())
            })
            .ok_or("a selector without a metric name")?;
        let entry = self.0.entry(name).or_default();
        for m in &vs.matchers.matchers {
            if matches!(m.op, MatchOp::Equal) && m.name != "__name__" {
                entry.insert((m.name.clone(), m.value.clone()));
            }
        }
        Ok(true)
    }
}

fn selectors(expr: &str, what: &str) -> Selectors {
    let parsed = promql::parse(expr).unwrap_or_else(|e| panic!("{what}: {expr}: {e}"));
    let mut s = Selectors::default();
    walk_expr(&mut s, &parsed).unwrap_or_else(|e| panic!("{what}: {e}"));
    s
}

/// What a run of the binary exposes on `/metrics`: each series name a declared family gives
/// (`x` for a gauge, `x_total` for a counter, `x_bucket`, `x_sum`, `x_count` for a histogram),
/// with the label sets of its samples.
struct Exposed {
    series: BTreeMap<String, Vec<BTreeSet<(String, String)>>>,
}

fn label_set(labels: &str) -> BTreeSet<(String, String)> {
    // Our label values hold no `,` or `"`, which keeps this simple split exact here.
    labels
        .split(',')
        .filter(|l| !l.is_empty())
        .filter_map(|l| {
            let (k, v) = l.split_once('=')?;
            Some((k.to_string(), v.trim_matches('"').to_string()))
        })
        .collect()
}

fn exposed_from(text: &str) -> Exposed {
    let mut series: BTreeMap<String, Vec<BTreeSet<(String, String)>>> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE line");
            let suffixes: &[&str] = match kind {
                "counter" => &["_total"],
                "histogram" => &["_bucket", "_sum", "_count"],
                _ => &[""],
            };
            for s in suffixes {
                series.entry(format!("{name}{s}")).or_default();
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let series_part = line.rsplit_once(' ').expect("sample").0;
            let (name, labels) = match series_part.split_once('{') {
                Some((n, l)) => (n, label_set(l.trim_end_matches('}'))),
                None => (series_part, BTreeSet::new()),
            };
            series.entry(name.to_string()).or_default().push(labels);
        }
    }
    Exposed { series }
}

/// A bare pod asking for `cpu` cores.
fn pod(name: &str, cpu: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}}}]},
    })
}

fn group(name: &str, replicas: u32, min: u32, max: u32, cpu: &str) -> NodeGroupSpec {
    NodeGroupSpec {
        namespace: "capi".into(),
        name: name.into(),
        replicas,
        min_size: min,
        max_size: max,
        cpu: cpu.into(),
        memory: "16Gi".into(),
        max_pods: 110,
        ..Default::default()
    }
}

/// Runs the binary (with the per-node-group gauges, `--emit-per-nodegroup-metrics`) against a
/// simulated cluster in which it scales up (the first scale request failing), finds a node it
/// cannot remove and removes an empty one, until `/metrics` shows every series `wanted` names
/// with the label values it matches on, or 120 s pass; returns what it exposed last.
fn exposed_by_a_run(wanted: &Selectors) -> Exposed {
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let mut w = World::new(WorldConfig {
            default_delay: ProvisioningDelay {
                min_ms: 1_000,
                max_ms: 2_000,
            },
            ..WorldConfig::default()
        });
        // `busy` keeps its one node (at its minimum, and busy); `spare`'s empty node is removed;
        // a second 3-core pod needs a new `busy` node, whose first scale request fails.
        w.add_node_group(&group("busy", 1, 1, 3, "4"))
            .expect("group");
        w.add_node_group(&group("spare", 1, 0, 1, "1"))
            .expect("group");
        for i in 0..2 {
            w.add_pod(pod(&format!("p-{i}"), "3"), None).expect("pod");
        }
        let h = Facade::start(
            w,
            FacadeOptions {
                speed: 10.0,
                ..FacadeOptions::default()
            },
        )
        .await
        .expect("facade");
        h.add_fault(
            FaultRule::new(FaultAction::InternalError)
                .verb(Verb::Patch)
                .resource("machinedeployments/scale")
                .at_most(1),
        );
        let ca = Autoscaler::spawn(
            "chart",
            "ca-0",
            h.kubeconfig_path(),
            &[],
            &[
                "--namespace=kube-system",
                "--scan-interval=1s",
                "--scale-down-unneeded-time=2s",
                "--scale-down-delay-after-add=0s",
                "--scale-down-delay-after-delete=0s",
                "--scale-down-delay-after-failure=0s",
                "--leader-elect-lease-duration=3s",
                "--leader-elect-renew-deadline=2s",
                "--leader-elect-retry-period=500ms",
                "--emit-per-nodegroup-metrics=true",
                "--v=1",
            ],
        );
        let end = Instant::now() + Duration::from_secs(120);
        let exposed = loop {
            let exposed = match ca.get("/metrics") {
                Some((200, body)) => exposed_from(&body),
                _ => Exposed {
                    series: BTreeMap::new(),
                },
            };
            if missing(&exposed, wanted).is_empty() || Instant::now() >= end {
                break exposed;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        };
        if !missing(&exposed, wanted).is_empty() {
            eprintln!("{}", support::tail(&ca.log()));
        }
        drop(ca);
        h.shutdown().await;
        exposed
    })
}

/// What of `wanted` the exposition lacks: a series not exposed, or a label value no sample of
/// it has.
fn missing(exposed: &Exposed, wanted: &Selectors) -> Vec<String> {
    let mut out = Vec::new();
    for (name, matchers) in &wanted.0 {
        let Some(samples) = exposed.series.get(name) else {
            out.push(format!("{name} is not exposed on /metrics"));
            continue;
        };
        if samples.is_empty() {
            out.push(format!("{name} has no sample"));
        }
        for m in matchers {
            if !samples.iter().any(|labels| labels.contains(m)) {
                out.push(format!("no sample of {name} has {}={:?}", m.0, m.1));
            }
        }
    }
    out
}

/// The rules of deploy/prometheus-rule.yaml, which must equal the chart's.
fn alert_rules() -> Vec<Value> {
    let deploy = parse_docs(&read("deploy/prometheus-rule.yaml"), "prometheus-rule.yaml");
    assert_eq!(deploy.len(), 1);
    let chart_rules: Value = serde_yaml_ng::from_str(&read(
        "charts/cluster-autoscaler/files/prometheus-rules.yaml",
    ))
    .expect("chart rules parse");
    let (ours, theirs) = (&deploy[0]["spec"]["groups"], &chart_rules["groups"]);
    let rules_of = |groups: &Value| -> Vec<Value> {
        groups
            .as_sequence()
            .expect("groups")
            .iter()
            .flat_map(|g| g["rules"].as_sequence().expect("rules").clone())
            .collect()
    };
    for (a, b) in rules_of(ours).iter().zip(rules_of(theirs).iter()) {
        assert_eq!(
            a, b,
            "deploy/prometheus-rule.yaml and the chart's rules differ"
        );
    }
    assert_eq!(
        ours, theirs,
        "deploy/prometheus-rule.yaml and the chart's groups differ"
    );
    chart_rules["groups"]
        .as_sequence()
        .expect("groups")
        .iter()
        .flat_map(|g| g["rules"].as_sequence().expect("rules").clone())
        .collect()
}

/// The queries of the dashboard, which must equal the chart's, with Grafana's interval
/// variable replaced by a duration.
fn dashboard_queries() -> Vec<(String, String)> {
    let deploy = read("deploy/grafana-dashboard.json");
    assert_eq!(
        deploy,
        read("charts/cluster-autoscaler/files/grafana-dashboard.json"),
        "deploy/grafana-dashboard.json and the chart's differ"
    );
    let d: serde_json::Value = serde_json::from_str(&deploy).expect("dashboard JSON");
    let mut out = Vec::new();
    for p in d["panels"].as_array().expect("panels") {
        for t in p["targets"].as_array().into_iter().flatten() {
            let title = p["title"].as_str().expect("title").to_string();
            let expr = t["expr"].as_str().expect("expr");
            out.push((title, expr.replace("$__rate_interval", "5m")));
        }
    }
    out
}

#[test]
fn alerts_and_dashboard_parse_and_read_metrics_the_binary_exposes() {
    let rules = alert_rules();
    let queries = dashboard_queries();
    let mut checks = Vec::new();
    for r in &rules {
        let name = str_at(r, &["alert"]).expect("alert name");
        let expr = str_at(r, &["expr"]).expect("expr");
        assert!(
            str_at(r, &["labels", "severity"]).is_some(),
            "{name}: severity"
        );
        assert!(
            str_at(r, &["annotations", "summary"]).is_some(),
            "{name}: summary"
        );
        if let Some(d) = str_at(r, &["for"]) {
            promql_parser::util::parse_duration(d).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        checks.push((format!("alert {name}"), selectors(expr, name)));
    }
    for (title, expr) in &queries {
        checks.push((format!("panel {title}"), selectors(expr, title)));
    }
    assert!(queries.len() >= 10, "the dashboard has its queries");
    let mut wanted = Selectors::default();
    for (what, s) in &checks {
        assert!(!s.0.is_empty(), "{what} reads no metric");
        for (name, matchers) in &s.0 {
            wanted
                .0
                .entry(name.clone())
                .or_default()
                .extend(matchers.iter().cloned());
        }
    }
    let exposed = exposed_by_a_run(&wanted);
    for (what, s) in &checks {
        let lacking = missing(&exposed, s);
        assert!(lacking.is_empty(), "{what}: {lacking:?}");
    }
}

/// `promtool` (Prometheus's own checker) accepts the rules, and each alert fires on the series of
/// `tests/alerts/rules_test.yaml` that should fire it and on none of the near misses there.
#[test]
fn alert_rules_pass_promtool_and_their_unit_tests() {
    let rules = chart().join("files/prometheus-rules.yaml");
    let unit_tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/alerts/rules_test.yaml");
    for args in [
        ["check", "rules", &rules.display().to_string()],
        ["test", "rules", &unit_tests.display().to_string()],
    ] {
        let Some(out) = run_tool("promtool", "REQUIRE_PROMTOOL", &args) else {
            return;
        };
        assert!(
            out.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_chart_ships_the_same_rules_and_dashboard_as_deploy() {
    let rules = alert_rules();
    let dashboard = read("deploy/grafana-dashboard.json");
    let Some(chart) = helm_template(Some("monitoring-values.yaml"), NAMESPACE) else {
        return;
    };
    let rule = object(&chart, "PrometheusRule", RELEASE);
    let groups = rule["spec"]["groups"].as_sequence().expect("groups");
    assert_eq!(
        groups[0]["rules"].as_sequence(),
        Some(&rules),
        "default rules"
    );
    // The values' own rules follow in a group of their own.
    assert_eq!(
        str_at(&groups[1]["rules"][0], &["alert"]),
        Some("ClusterAutoscalerTooManyUnneededNodes")
    );
    let cm = object(&chart, "ConfigMap", "cluster-autoscaler-dashboard");
    assert_eq!(
        str_at(cm, &["metadata", "labels", "grafana_dashboard"]),
        Some("1")
    );
    assert_eq!(
        str_at(cm, &["data", "cluster-autoscaler.json"]),
        Some(dashboard.trim_end())
    );
    let monitor = object(&chart, "ServiceMonitor", RELEASE);
    let service = object(&chart, "Service", RELEASE);
    assert_eq!(
        monitor["spec"]["endpoints"][0]["port"],
        service["spec"]["ports"][0]["name"]
    );
    assert_eq!(
        monitor["spec"]["selector"]["matchLabels"],
        service["metadata"]["labels"]
            .as_mapping()
            .map(|l| {
                let mut m = serde_yaml_ng::Mapping::new();
                for k in ["app.kubernetes.io/name", "app.kubernetes.io/instance"] {
                    m.insert(k.into(), l[k].clone());
                }
                Value::Mapping(m)
            })
            .expect("Service labels")
    );
}
