//! The status ConfigMap (`cluster-autoscaler-status`, key `status`) in upstream's structured
//! YAML layout: `time`, `autoscalerStatus`, `clusterWide` (health with node counts, scaleUp,
//! scaleDown) and `nodeGroups` (per group health with target and sizes, scaleUp with backoff,
//! scaleDown), each condition with `lastProbeTime` and `lastTransitionTime`.
//!
//! It renders what the core's [`LoopOutcome`] says (keeping when each condition last changed in
//! [`Transitions`]) and writes it; it never decides anything and never reads the clock (the
//! caller passes `now_ms`).

use std::collections::BTreeMap;

use autoscaler_core::{ClusterView, LoopOutcome};
use autoscaler_core::{GroupReadiness, format_time_ms};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use serde::Serialize;

/// Annotation with the time of the last write (upstream's).
pub const LAST_UPDATED_ANNOTATION: &str = "cluster-autoscaler.kubernetes.io/last-updated";

/// Upstream's limit on the status size (etcd's 1 MB value limit with a margin).
const MAX_STATUS_BYTES: usize = 1_000_000;

/// Why the status could not be written.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    /// Reading, creating or replacing the ConfigMap failed.
    #[error("status ConfigMap {namespace}/{name}: {source}")]
    Api {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The API error.
        source: kube::Error,
    },
}

/// When each condition of the status took its current value, kept between loops so
/// `lastTransitionTime` only moves when a status changes.
#[derive(Clone, Debug, Default)]
pub struct Transitions {
    /// Condition path (`clusterWide/health`, `<group>/scaleUp`) to (status, since ms).
    since: BTreeMap<String, (&'static str, i64)>,
}

impl Transitions {
    /// Records `status` for `path` at `now_ms`; returns since when it holds.
    fn observe(&mut self, path: String, status: &'static str, now_ms: i64) -> i64 {
        let e = self.since.entry(path).or_insert((status, now_ms));
        if e.0 != status {
            *e = (status, now_ms);
        }
        e.1
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    time: String,
    autoscaler_status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cluster_wide: Option<ClusterWide>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    node_groups: Vec<GroupStatus>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ClusterWide {
    health: Health,
    scale_up: Condition,
    scale_down: ScaleDown,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Health {
    status: &'static str,
    node_counts: NodeCounts,
    #[serde(skip_serializing_if = "Option::is_none")]
    cloud_provider_target: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_size: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_size: Option<usize>,
    last_probe_time: String,
    last_transition_time: String,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct NodeCounts {
    registered: Registered,
    long_unregistered: usize,
    unregistered: usize,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct Registered {
    total: usize,
    ready: usize,
    not_started: usize,
    #[serde(skip_serializing_if = "is_zero")]
    being_deleted: usize,
    unready: Unready,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct Unready {
    total: usize,
    resource_unready: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Condition {
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    backoff_info: Option<BackoffInfo>,
    last_probe_time: String,
    last_transition_time: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct BackoffInfo {
    error_code: String,
    error_message: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ScaleDown {
    status: &'static str,
    #[serde(skip_serializing_if = "is_zero")]
    candidates: usize,
    /// Ours (upstream's layout has no such field): the nodes this loop does not remove,
    /// counted by upstream's reason, as `unremovable_nodes_count{reason}` counts them.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    unremovable_nodes: BTreeMap<&'static str, usize>,
    last_probe_time: String,
    last_transition_time: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GroupStatus {
    name: String,
    health: Health,
    scale_up: Condition,
    scale_down: ScaleDown,
}

/// Upstream's `time` format (Go's `2006-01-02 15:04:05.999999999 -0700 MST`, in UTC).
pub fn status_time(now_ms: i64) -> String {
    // format_time_ms gives `YYYY-MM-DDTHH:MM:SSZ`.
    let rfc = format_time_ms(now_ms);
    let base = rfc.trim_end_matches('Z').replacen('T', " ", 1);
    let millis = now_ms.rem_euclid(1000);
    let frac = if millis == 0 {
        String::new()
    } else {
        format!(".{millis:03}").trim_end_matches('0').to_string()
    };
    format!("{base}{frac} +0000 UTC")
}

fn counts(r: &GroupReadiness) -> NodeCounts {
    NodeCounts {
        registered: Registered {
            total: r.ready + r.unready + r.not_started + r.being_deleted,
            ready: r.ready,
            not_started: r.not_started,
            being_deleted: r.being_deleted,
            unready: Unready {
                total: r.unready,
                resource_unready: 0,
            },
        },
        long_unregistered: r.long_unregistered,
        unregistered: r.unregistered + r.failed,
    }
}

/// What the status says without any node group: nothing can be scaled, and why that may be.
pub const NO_NODE_GROUPS: &str = "No node groups: no MachineDeployment, MachineSet or \
     MachinePool with the autoscaler's min and max size annotations is visible (is the Cluster \
     API installed and are its groups annotated?); nothing will be scaled";

/// The status `message`: the core's, and the lack of node groups first when there are none.
fn message(core: Option<&str>, no_groups: bool) -> Option<String> {
    match (core, no_groups) {
        (Some(m), true) => Some(format!("{NO_NODE_GROUPS}. {m}")),
        (None, true) => Some(NO_NODE_GROUPS.to_string()),
        (m, false) => m.map(str::to_string),
    }
}

/// The status of a process that has not run a loop yet (`autoscalerStatus: Initializing`).
pub fn initializing_yaml(now_ms: i64) -> String {
    let status = Status {
        time: status_time(now_ms),
        autoscaler_status: "Initializing",
        message: None,
        cluster_wide: None,
        node_groups: Vec::new(),
    };
    serde_yaml_ng::to_string(&status).unwrap_or_default()
}

/// `yaml` with an `unsupportedSettings:` list appended when `settings` is not empty: the flags
/// given that ask for features this autoscaler does not have. Upstream's fields are unchanged.
pub fn with_unsupported_settings(mut yaml: String, settings: &[String]) -> String {
    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Section<'a> {
        unsupported_settings: &'a [String],
    }
    if settings.is_empty() {
        return yaml;
    }
    let section = Section {
        unsupported_settings: settings,
    };
    if !yaml.is_empty() && !yaml.ends_with('\n') {
        yaml.push('\n');
    }
    yaml.push_str(&serde_yaml_ng::to_string(&section).unwrap_or_default());
    yaml
}

/// The status YAML for one loop's `outcome` on `view` at `now_ms`, updating `transitions`.
/// Groups beyond etcd's size limit are left out, unhealthy and backed-off ones last.
pub fn status_yaml(
    view: &ClusterView<'_>,
    outcome: &LoopOutcome,
    now_ms: i64,
    transitions: &mut Transitions,
) -> String {
    let probe = format_time_ms(now_ms);
    let mut cond = |path: String, status: &'static str| -> (String, String) {
        let since = transitions.observe(path, status, now_ms);
        (probe.clone(), format_time_ms(since))
    };
    let st = &outcome.status;
    let increased: Vec<&str> = outcome
        .scale_up
        .result
        .increases
        .iter()
        .map(|i| i.group.as_str())
        .collect();

    // Unneeded nodes per group index.
    let mut candidates = vec![0usize; st.groups.len()];
    let by_name: rustc_hash::FxHashMap<_, _> = view.nodes.iter().map(|n| (n.name, n)).collect();
    for (name, _) in &outcome.scale_down.unneeded {
        if let Some(g) = by_name
            .get(name)
            .and_then(|n| view.provider.node_group_of(n))
            && let Some(c) = candidates.get_mut(g)
        {
            *c += 1;
        }
    }
    // Unremovable nodes by reason, cluster-wide and per group index.
    let mut unremovable_all: BTreeMap<&'static str, usize> = BTreeMap::new();
    let mut unremovable = vec![BTreeMap::<&'static str, usize>::new(); st.groups.len()];
    for (name, reason) in crate::metrics::unremovable_reasons(view, &outcome.scale_down) {
        *unremovable_all.entry(reason).or_default() += 1;
        if let Some(g) = by_name
            .get(&name)
            .and_then(|n| view.provider.node_group_of(n))
            && let Some(u) = unremovable.get_mut(g)
        {
            *u.entry(reason).or_default() += 1;
        }
    }

    let mut all = GroupReadiness {
        ready: st.ready,
        unready: st.unready,
        not_started: st.not_started,
        being_deleted: st.being_deleted,
        ..GroupReadiness::default()
    };
    let mut groups = Vec::with_capacity(st.groups.len());
    let mut any_in_progress = false;
    for (i, g) in st.groups.iter().enumerate() {
        all.unregistered += g.readiness.unregistered + g.readiness.failed;
        all.long_unregistered += g.readiness.long_unregistered;
        let name = g.id.as_str();
        let health = if g.unhealthy.is_none() {
            "Healthy"
        } else {
            "Unhealthy"
        };
        let (hp, ht) = cond(format!("{name}/health"), health);
        let in_progress = !g.requests.is_empty() || increased.contains(&name);
        any_in_progress |= in_progress;
        let (up, backoff_info) = match &g.backoff {
            Some(b) => (
                "Backoff",
                Some(BackoffInfo {
                    error_code: b.reason.code.clone(),
                    error_message: b.reason.message.clone(),
                }),
            ),
            None if in_progress => ("InProgress", None),
            None => ("NoActivity", None),
        };
        let (sp, stt) = cond(format!("{name}/scaleUp"), up);
        let c = candidates.get(i).copied().unwrap_or(0);
        let down = if c > 0 {
            "CandidatesPresent"
        } else {
            "NoCandidates"
        };
        let (dp, dt) = cond(format!("{name}/scaleDown"), down);
        groups.push(GroupStatus {
            name: name.to_string(),
            health: Health {
                status: health,
                node_counts: counts(&g.readiness),
                cloud_provider_target: Some(g.target_size),
                min_size: Some(g.min_size),
                max_size: Some(g.max_size),
                last_probe_time: hp,
                last_transition_time: ht,
            },
            scale_up: Condition {
                status: up,
                backoff_info,
                last_probe_time: sp,
                last_transition_time: stt,
            },
            scale_down: ScaleDown {
                status: down,
                candidates: c,
                unremovable_nodes: unremovable
                    .get_mut(i)
                    .map(std::mem::take)
                    .unwrap_or_default(),
                last_probe_time: dp,
                last_transition_time: dt,
            },
        });
    }

    let health = if st.healthy { "Healthy" } else { "Unhealthy" };
    let (hp, ht) = cond("clusterWide/health".into(), health);
    let up = if any_in_progress {
        "InProgress"
    } else {
        "NoActivity"
    };
    let (sp, stt) = cond("clusterWide/scaleUp".into(), up);
    let c = outcome.scale_down.unneeded.len();
    let down = if c > 0 {
        "CandidatesPresent"
    } else {
        "NoCandidates"
    };
    let (dp, dt) = cond("clusterWide/scaleDown".into(), down);
    let mut status = Status {
        time: status_time(now_ms),
        autoscaler_status: "Running",
        message: message(st.message.as_deref(), st.groups.is_empty()),
        cluster_wide: Some(ClusterWide {
            health: Health {
                status: health,
                node_counts: counts(&all),
                cloud_provider_target: None,
                min_size: None,
                max_size: None,
                last_probe_time: hp,
                last_transition_time: ht,
            },
            scale_up: Condition {
                status: up,
                backoff_info: None,
                last_probe_time: sp,
                last_transition_time: stt,
            },
            scale_down: ScaleDown {
                status: down,
                candidates: c,
                unremovable_nodes: unremovable_all,
                last_probe_time: dp,
                last_transition_time: dt,
            },
        }),
        node_groups: groups,
    };
    let yaml = serde_yaml_ng::to_string(&status).unwrap_or_default();
    if yaml.len() <= MAX_STATUS_BYTES {
        return yaml;
    }
    // Too big: keep the groups that matter most (unhealthy, backed off, scaling) first and
    // drop from the end until it fits.
    let rank = |g: &GroupStatus| {
        (
            g.health.status != "Unhealthy",
            g.scale_up.status != "Backoff",
            g.scale_up.status != "InProgress",
            g.scale_down.status != "CandidatesPresent",
        )
    };
    status.node_groups.sort_by_key(rank);
    let total = status.node_groups.len();
    let mut yaml = yaml;
    while yaml.len() > MAX_STATUS_BYTES && !status.node_groups.is_empty() {
        // Halve the excess count each round: a few serializations even for thousands of groups.
        let keep = status.node_groups.len() * MAX_STATUS_BYTES / yaml.len();
        status
            .node_groups
            .truncate(keep.min(status.node_groups.len() - 1));
        yaml = serde_yaml_ng::to_string(&status).unwrap_or_default();
    }
    tracing::info!(
        kept = status.node_groups.len(),
        total,
        "status ConfigMap truncated to fit the size limit"
    );
    yaml
}

/// Writes `yaml` into the ConfigMap `namespace/name` (key `status`, annotation
/// [`LAST_UPDATED_ANNOTATION`] set to `time`): reads it and replaces it, or creates it when it
/// does not exist. A conflict fails this write; the next loop writes again.
pub async fn write_status(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    yaml: &str,
    time: &str,
) -> Result<ConfigMap, StatusError> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let err = |source| StatusError::Api {
        namespace: namespace.to_string(),
        name: name.to_string(),
        source,
    };
    let pp = PostParams::default();
    match api.get_opt(name).await.map_err(err)? {
        Some(mut cm) => {
            cm.data
                .get_or_insert_default()
                .insert("status".into(), yaml.to_string());
            cm.metadata
                .annotations
                .get_or_insert_default()
                .insert(LAST_UPDATED_ANNOTATION.into(), time.to_string());
            api.replace(name, &pp, &cm).await.map_err(err)
        }
        None => {
            let cm = ConfigMap {
                metadata: ObjectMeta {
                    name: Some(name.to_string()),
                    namespace: Some(namespace.to_string()),
                    annotations: Some(
                        [(LAST_UPDATED_ANNOTATION.to_string(), time.to_string())].into(),
                    ),
                    ..ObjectMeta::default()
                },
                data: Some([("status".to_string(), yaml.to_string())].into()),
                ..ConfigMap::default()
            };
            api.create(&pp, &cm).await.map_err(err)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use autoscaler_core::BackoffStatus;
    use autoscaler_core::FailureReason;
    use autoscaler_core::{Autoscaler, AutoscalerOptions};

    use autoscaler_model::InstanceErrorClass;

    use http::{Method, Request, Response, StatusCode};
    use kube::client::Body;
    use serde_json::{Value, json};

    use crate::test_cluster::Cluster;

    const T0: i64 = 1_700_000_000_000;

    fn parse(yaml: &str) -> Value {
        serde_yaml_ng::from_str(yaml).expect("valid YAML")
    }

    #[test]
    fn a_healthy_loop_renders_upstream_fields_and_keeps_transition_times() {
        let c = Cluster::new(10, 0);
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        let mut tr = Transitions::default();
        let out = c.run(&mut a, T0);
        let y = parse(&status_yaml(&c.view(), &out, T0, &mut tr));
        assert_eq!(y["time"], "2023-11-14 22:13:20 +0000 UTC");
        assert_eq!(y["autoscalerStatus"], "Running");
        let h = &y["clusterWide"]["health"];
        assert_eq!(h["status"], "Healthy");
        assert_eq!(
            h["nodeCounts"],
            json!({"registered": {"total": 2, "ready": 2, "notStarted": 0,
                "unready": {"total": 0, "resourceUnready": 0}},
                "longUnregistered": 0, "unregistered": 0})
        );
        assert_eq!(h["lastProbeTime"], "2023-11-14T22:13:20Z");
        assert_eq!(h["lastTransitionTime"], "2023-11-14T22:13:20Z");
        assert_eq!(y["clusterWide"]["scaleUp"]["status"], "NoActivity");
        // n2 is empty: a scale-down candidate.
        assert_eq!(y["clusterWide"]["scaleDown"]["status"], "CandidatesPresent");
        assert_eq!(y["clusterWide"]["scaleDown"]["candidates"], 1);
        let g = &y["nodeGroups"][0];
        assert_eq!(g["name"], "ng");
        assert_eq!(g["health"]["status"], "Healthy");
        assert_eq!(g["health"]["cloudProviderTarget"], 2);
        assert_eq!(g["health"]["minSize"], 1);
        assert_eq!(g["health"]["maxSize"], 10);
        assert_eq!(g["health"]["nodeCounts"]["registered"]["ready"], 2);
        assert_eq!(g["scaleUp"]["status"], "NoActivity");
        assert!(g["scaleUp"].get("backoffInfo").is_none());
        assert_eq!(g["scaleDown"]["status"], "CandidatesPresent");
        assert_eq!(g["scaleDown"]["candidates"], 1);

        // A minute later nothing changed: probe time moves, transition time stays.
        let t1 = T0 + 60_500;
        let out = c.run(&mut a, t1);
        let y = parse(&status_yaml(&c.view(), &out, t1, &mut tr));
        assert_eq!(y["time"], "2023-11-14 22:14:20.5 +0000 UTC");
        let h = &y["clusterWide"]["health"];
        assert_eq!(h["lastProbeTime"], "2023-11-14T22:14:20Z");
        assert_eq!(h["lastTransitionTime"], "2023-11-14T22:13:20Z");
    }

    /// The nodes not removed are counted by upstream's reason, cluster-wide and in their group
    /// (ours, beside upstream's `candidates`); none: no field.
    #[test]
    fn unremovable_nodes_are_counted_by_reason_cluster_wide_and_per_group() {
        let c = Cluster::new(10, 0);
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        let out = c.run(&mut a, T0);
        // n1 runs a 3.5-CPU pod on 4 CPUs: above the 0.5 threshold; n2 is empty, unneeded
        // since now: kept until --scale-down-unneeded-time passes.
        assert_eq!(out.scale_down.unremovable.len(), 1, "{:?}", out.scale_down);
        let y = parse(&status_yaml(
            &c.view(),
            &out,
            T0,
            &mut Transitions::default(),
        ));
        let counts = json!({"NotUnderutilized": 1, "NotUnneededLongEnough": 1});
        assert_eq!(y["clusterWide"]["scaleDown"]["unremovableNodes"], counts);
        assert_eq!(y["nodeGroups"][0]["scaleDown"]["unremovableNodes"], counts);
        let mut none = out;
        none.scale_down.unremovable.clear();
        none.scale_down.waiting.clear();
        let y = parse(&status_yaml(
            &c.view(),
            &none,
            T0,
            &mut Transitions::default(),
        ));
        assert!(
            y["clusterWide"]["scaleDown"]
                .get("unremovableNodes")
                .is_none()
        );
        assert!(
            y["nodeGroups"][0]["scaleDown"]
                .get("unremovableNodes")
                .is_none()
        );
    }

    #[test]
    fn scale_up_in_progress_then_backoff_and_unhealthy_are_rendered() {
        let c = Cluster::new(10, 3);
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        let mut tr = Transitions::default();
        let mut out = c.run(&mut a, T0);
        assert_eq!(out.scale_up.result.total_nodes(), 2);
        let y = parse(&status_yaml(&c.view(), &out, T0, &mut tr));
        assert_eq!(y["clusterWide"]["scaleUp"]["status"], "InProgress");
        assert_eq!(y["nodeGroups"][0]["scaleUp"]["status"], "InProgress");

        // The same group later backed off and unhealthy, the cluster too.
        let t1 = T0 + 120_000;
        out.status.healthy = false;
        out.status.message = Some("Cluster is not ready for autoscaling".into());
        let g = &mut out.status.groups[0];
        g.unhealthy = Some("no nodes".into());
        g.backoff = Some(BackoffStatus {
            until_ms: t1 + 300_000,
            failures: 1,
            reason: FailureReason {
                class: InstanceErrorClass::OutOfResources,
                code: "QUOTA_EXCEEDED".into(),
                message: "quota exceeded in region".into(),
            },
        });
        let y = parse(&status_yaml(&c.view(), &out, t1, &mut tr));
        assert_eq!(y["message"], "Cluster is not ready for autoscaling");
        assert_eq!(y["clusterWide"]["health"]["status"], "Unhealthy");
        assert_eq!(
            y["clusterWide"]["health"]["lastTransitionTime"],
            "2023-11-14T22:15:20Z"
        );
        let g = &y["nodeGroups"][0];
        assert_eq!(g["health"]["status"], "Unhealthy");
        assert_eq!(g["scaleUp"]["status"], "Backoff");
        assert_eq!(
            g["scaleUp"]["backoffInfo"],
            json!({"errorCode": "QUOTA_EXCEEDED", "errorMessage": "quota exceeded in region"})
        );
        assert_eq!(g["scaleUp"]["lastTransitionTime"], "2023-11-14T22:15:20Z");
    }

    #[test]
    fn without_node_groups_the_status_says_so() {
        let c = Cluster::new(10, 0);
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        let mut out = c.run(&mut a, T0);
        let y = parse(&status_yaml(
            &c.view(),
            &out,
            T0,
            &mut Transitions::default(),
        ));
        assert!(y.get("message").is_none(), "{y}");
        out.status.groups.clear();
        let y = parse(&status_yaml(
            &c.view(),
            &out,
            T0,
            &mut Transitions::default(),
        ));
        assert_eq!(y["message"], NO_NODE_GROUPS);
        assert!(y.get("nodeGroups").is_none());
        assert_eq!(y["autoscalerStatus"], "Running");
        out.status.message = Some("Cluster is not ready for autoscaling".into());
        let y = parse(&status_yaml(
            &c.view(),
            &out,
            T0,
            &mut Transitions::default(),
        ));
        let m = y["message"].as_str().expect("a message");
        assert!(m.starts_with("No node groups") && m.ends_with("not ready for autoscaling"));
    }

    #[test]
    fn unsupported_settings_are_listed_after_upstreams_fields() {
        let base = initializing_yaml(T0);
        assert_eq!(with_unsupported_settings(base.clone(), &[]), base);
        let settings = ["--enable-provisioning-requests=true: not handled".to_string()];
        let y = parse(&with_unsupported_settings(base, &settings));
        assert_eq!(y["autoscalerStatus"], "Initializing");
        assert_eq!(
            y["unsupportedSettings"][0],
            "--enable-provisioning-requests=true: not handled"
        );
    }

    #[test]
    fn the_initializing_status_has_only_time_and_state() {
        let y = parse(&initializing_yaml(T0));
        assert_eq!(
            y,
            json!({"time": "2023-11-14 22:13:20 +0000 UTC", "autoscalerStatus": "Initializing"})
        );
    }

    type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

    async fn body_json(req: Request<Body>) -> Value {
        let bytes = req.into_body().collect_bytes().await.expect("request body");
        serde_json::from_slice(&bytes).expect("JSON body")
    }

    fn reply(status: StatusCode, body: &Value) -> Response<Body> {
        Response::builder()
            .status(status)
            .body(Body::from(serde_json::to_vec(body).expect("json")))
            .expect("response")
    }

    const PATH: &str = "/api/v1/namespaces/kube-system/configmaps/cluster-autoscaler-status";

    #[tokio::test]
    async fn a_missing_configmap_is_created() {
        let (svc, mut handle): (_, Handle) = tower_test::mock::pair();
        let client = kube::Client::new(svc, "default");
        let server = tokio::spawn(async move {
            let (req, send) = handle.next_request().await.expect("GET");
            assert_eq!(req.method(), Method::GET);
            assert_eq!(req.uri().to_string(), PATH);
            send.send_response(reply(
                StatusCode::NOT_FOUND,
                &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                    "reason": "NotFound", "code": 404, "message": "not found"}),
            ));
            let (req, send) = handle.next_request().await.expect("POST");
            assert_eq!(req.method(), Method::POST);
            assert_eq!(
                req.uri().to_string(),
                "/api/v1/namespaces/kube-system/configmaps?"
            );
            let body = body_json(req).await;
            assert_eq!(
                body,
                json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {
                        "name": "cluster-autoscaler-status", "namespace": "kube-system",
                        "annotations": {LAST_UPDATED_ANNOTATION: "T"}
                    },
                    "data": {"status": "autoscalerStatus: Running\n"}
                })
            );
            send.send_response(reply(StatusCode::CREATED, &body));
        });
        let cm = write_status(
            &client,
            "kube-system",
            "cluster-autoscaler-status",
            "autoscalerStatus: Running\n",
            "T",
        )
        .await
        .expect("written");
        assert_eq!(
            cm.data.and_then(|d| d.get("status").cloned()).as_deref(),
            Some("autoscalerStatus: Running\n")
        );
        server.await.expect("mock server");
    }

    #[tokio::test]
    async fn an_existing_configmap_is_replaced_keeping_its_other_fields() {
        let (svc, mut handle): (_, Handle) = tower_test::mock::pair();
        let client = kube::Client::new(svc, "default");
        let server = tokio::spawn(async move {
            let (req, send) = handle.next_request().await.expect("GET");
            assert_eq!(req.method(), Method::GET);
            assert_eq!(req.uri().to_string(), PATH);
            send.send_response(reply(
                StatusCode::OK,
                &json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cluster-autoscaler-status", "namespace": "kube-system",
                        "resourceVersion": "42", "annotations": {"keep": "me",
                        LAST_UPDATED_ANNOTATION: "old"}},
                    "data": {"status": "old", "other": "x"}
                }),
            ));
            let (req, send) = handle.next_request().await.expect("PUT");
            assert_eq!(req.method(), Method::PUT);
            assert_eq!(req.uri().to_string(), format!("{PATH}?"));
            let body = body_json(req).await;
            assert_eq!(
                body,
                json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "cluster-autoscaler-status", "namespace": "kube-system",
                        "resourceVersion": "42", "annotations": {"keep": "me",
                        LAST_UPDATED_ANNOTATION: "T2"}},
                    "data": {"status": "new", "other": "x"}
                })
            );
            send.send_response(reply(StatusCode::OK, &body));
        });
        write_status(
            &client,
            "kube-system",
            "cluster-autoscaler-status",
            "new",
            "T2",
        )
        .await
        .expect("written");
        server.await.expect("mock server");
    }
}
