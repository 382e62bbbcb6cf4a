//! The watches of the infrastructure machine templates the scalable resources name
//! (`spec.template.spec.infrastructureRef` of MachineDeployments, MachineSets and
//! MachinePools): the objects whose `status.capacity` and `status.nodeInfo` let a group without
//! capacity annotations scale from zero (Cluster API's contract for autoscaling from zero).
//!
//! The kinds are not known in advance (`AWSMachineTemplate`, `DockerMachineTemplate`, ...): as
//! upstream's provider starts an informer per referenced resource lazily, each (group, kind) a
//! reference names is watched once, from the first resource that names it, on the management
//! cluster, in the Cluster API watch namespace when there is one. A reference names a group and
//! kind, at a version (v1beta1's `apiVersion`) or without one (v1beta2's `apiGroup`): the
//! resource is resolved by discovery, at the named version when the server serves the kind
//! there, else at the group's preferred version, else at any version serving it.
//!
//! The kind is marked unsynced the moment a reference to it is seen (before the resources that
//! name it finish listing), so no loop decides on a group whose template is still listing, as
//! upstream waits for its informer's cache. A kind that discovery does not find, or that answers
//! `403` or `404`, is a warning naming it and leaves it empty and synced (the groups then scale
//! from zero by their annotations only, as upstream does when it cannot read the template);
//! discovery is retried with backoff, the watch by the optional kinds' backoff. An object that
//! does not decode is skipped and named. At most [`MAX_KINDS`] kinds are watched.
//!
//! Nothing here decides or writes; a kind is never unwatched (references come and go with
//! rollouts, as upstream's informers stay).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use autoscaler_clusterapi::infrastructure_reference;
use autoscaler_model::version_of;
use kube::api::{Api, ApiResource, DynamicObject, TypeMeta};
use kube::runtime::watcher;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::{AbortOnDrop, Entry, OnNotFound, Shared, encode, spawn_kind};
use crate::lenient::Decoded;

/// The most infrastructure kinds watched: a cluster has a handful (one per provider, a few
/// more during a provider's migration); references beyond are ignored with a warning.
pub const MAX_KINDS: usize = 32;

/// The kinds of scalable resources whose template names an infrastructure object.
const SCALABLE_KINDS: [&str; 3] = ["MachineDeployment", "MachineSet", "MachinePool"];

/// The first wait before discovery of a kind not found is tried again; it doubles up to
/// [`super::MAX_OPTIONAL_BACKOFF`].
const FIRST_RETRY: Duration = Duration::from_millis(800);

/// A referenced infrastructure kind: its group and kind, and the version its first reference
/// named (none for a v1beta2 `apiGroup` reference).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Referenced {
    group: String,
    kind: String,
    version: Option<String>,
}

impl Referenced {
    /// `group/Kind`, as the sync state names kinds.
    fn name(&self) -> String {
        format!("{}/{}", self.group, self.kind)
    }
}

/// The infrastructure kinds referenced so far, shared by the Cluster API watches (which note
/// references) and the task that resolves and watches them.
#[derive(Clone, Debug, Default)]
pub(super) struct InfrastructureKinds {
    state: Arc<Mutex<KindsState>>,
    wake: Arc<Notify>,
}

#[derive(Debug, Default)]
struct KindsState {
    /// Every (group, kind) noted.
    known: BTreeSet<(String, String)>,
    /// Noted but not handed to the watching task yet.
    new: Vec<Referenced>,
    /// The groups never followed (the Cluster API groups themselves, watched already).
    skip_groups: BTreeSet<String>,
    /// Whether the warning about [`MAX_KINDS`] was given.
    warned_full: bool,
}

impl InfrastructureKinds {
    /// Kinds of these API groups are never followed (they are watched as Cluster API kinds).
    pub(super) fn skipping(groups: &[&str]) -> InfrastructureKinds {
        let kinds = InfrastructureKinds::default();
        kinds.lock().skip_groups = groups.iter().map(|g| g.to_string()).collect();
        kinds
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, KindsState> {
        // Plain sets: a panic elsewhere cannot leave them inconsistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes the infrastructure reference of `value`, an object of `kind` watched as a Cluster
    /// API kind: a kind not seen before is marked unsynced in `shared` at once and handed to
    /// the watching task.
    pub(super) fn note(&self, shared: &Shared, kind: &str, value: &Value) {
        if !SCALABLE_KINDS.contains(&kind) {
            return;
        }
        let Some(key) = infrastructure_reference(value, "") else {
            return;
        };
        let version = value
            .pointer("/spec/template/spec/infrastructureRef/apiVersion")
            .and_then(Value::as_str)
            .filter(|v| v.contains('/'))
            .map(|v| version_of(v).to_string());
        let r = Referenced {
            group: key.group,
            kind: key.kind,
            version,
        };
        {
            let mut s = self.lock();
            let id = (r.group.clone(), r.kind.clone());
            if s.known.contains(&id) || s.skip_groups.contains(&r.group) || r.group.is_empty() {
                return;
            }
            if s.known.len() >= MAX_KINDS {
                if !std::mem::replace(&mut s.warned_full, true) {
                    tracing::warn!(kind = %r.name(), max = MAX_KINDS, "too many infrastructure kinds referenced; this one and later ones are not watched (their groups scale from zero by annotations only)");
                }
                return;
            }
            s.known.insert(id);
            s.new.push(r.clone());
        }
        let name = r.name();
        tracing::debug!(kind = %name, "infrastructure kind referenced; watching it");
        shared.pending.send_modify(|p| {
            p.insert(name);
        });
        self.wake.notify_one();
    }

    fn take_new(&self) -> Vec<Referenced> {
        std::mem::take(&mut self.lock().new)
    }
}

/// Starts the task that resolves each referenced kind by discovery on `client` (the
/// management cluster) and watches it, in `namespace` when given. The task (and with it every
/// watch it started) ends when aborted.
pub(super) fn spawn_infrastructure(
    tasks: &mut Vec<JoinHandle<()>>,
    shared: &Shared,
    client: kube::Client,
    namespace: Option<String>,
) {
    let shared = shared.clone();
    tasks.push(tokio::spawn(async move {
        let kinds = shared.infrastructure.clone();
        // The watches started, aborted with this task.
        let mut watching: Vec<AbortOnDrop> = Vec::new();
        // Kinds discovery did not find yet: when to try again, and the wait after that.
        let mut waiting: BTreeMap<Referenced, (tokio::time::Instant, Duration)> = BTreeMap::new();
        loop {
            let now = tokio::time::Instant::now();
            for r in kinds.take_new() {
                waiting.insert(r, (now, FIRST_RETRY));
            }
            let due: Vec<Referenced> = waiting
                .iter()
                .filter(|(_, (at, _))| *at <= now)
                .map(|(r, _)| r.clone())
                .collect();
            for r in due {
                match resolve(&client, &r).await {
                    Ok(ar) => {
                        waiting.remove(&r);
                        tracing::info!(kind = %r.name(), version = %ar.api_version, namespace = namespace.as_deref().unwrap_or("(all)"), "watching the infrastructure templates of this kind");
                        watching.push(AbortOnDrop(spawn_watch(
                            &shared,
                            &client,
                            namespace.as_deref(),
                            &ar,
                        )));
                    }
                    Err(e) => {
                        let Some((at, wait)) = waiting.get_mut(&r) else {
                            continue;
                        };
                        let first = *wait == FIRST_RETRY;
                        *at = tokio::time::Instant::now() + *wait;
                        *wait = (*wait * 2).min(super::MAX_OPTIONAL_BACKOFF);
                        let name = r.name();
                        // Not readable: the groups naming it go on with their annotations.
                        shared.pending.send_if_modified(|p| p.remove(&name));
                        if first {
                            tracing::warn!(kind = %name, error = %e, "infrastructure kind not found by discovery; groups naming it scale from zero by their annotations only; looking again later");
                        } else {
                            tracing::debug!(kind = %name, error = %e, "infrastructure kind still not found");
                        }
                    }
                }
            }
            let next = waiting.values().map(|(at, _)| *at).min();
            match next {
                Some(at) => tokio::select! {
                    _ = tokio::time::sleep_until(at) => {}
                    _ = kinds.wake.notified() => {}
                },
                None => kinds.wake.notified().await,
            }
        }
    }));
}

/// Why a referenced kind could not be resolved.
#[derive(Debug, thiserror::Error)]
enum ResolveError {
    #[error("discovery of API group {group}: {source}")]
    Discovery { group: String, source: kube::Error },
    #[error("API group {group} does not serve kind {kind}")]
    NoKind { group: String, kind: String },
}

/// The served resource of `r`, by discovery.
async fn resolve(client: &kube::Client, r: &Referenced) -> Result<ApiResource, ResolveError> {
    let group = kube::discovery::group(client, &r.group)
        .await
        .map_err(|source| ResolveError::Discovery {
            group: r.group.clone(),
            source,
        })?;
    let versions: Vec<(String, Vec<ApiResource>)> = group
        .versions()
        .map(|v| {
            let ars = group.versioned_resources(v).into_iter().map(|(ar, _)| ar);
            (v.to_string(), ars.collect())
        })
        .collect();
    choose(
        &versions,
        group.preferred_version_or_latest(),
        &r.kind,
        r.version.as_deref(),
    )
    .ok_or_else(|| ResolveError::NoKind {
        group: r.group.clone(),
        kind: r.kind.clone(),
    })
}

/// The resource of `kind` among the group's `versions` (in the server's order): at `named`
/// when served there, else at `preferred`, else at the first version serving it.
fn choose(
    versions: &[(String, Vec<ApiResource>)],
    preferred: &str,
    kind: &str,
    named: Option<&str>,
) -> Option<ApiResource> {
    let at = |version: &str| {
        versions
            .iter()
            .filter(|(v, _)| v == version)
            .flat_map(|(_, ars)| ars)
            .find(|ar| ar.kind == kind)
            .cloned()
    };
    named.and_then(at).or_else(|| at(preferred)).or_else(|| {
        (versions.iter().flat_map(|(_, ars)| ars))
            .find(|ar| ar.kind == kind)
            .cloned()
    })
}

/// The watch of one infrastructure kind, cached as JSON under the key the provider reads.
fn spawn_watch(
    shared: &Shared,
    client: &kube::Client,
    namespace: Option<&str>,
    ar: &ApiResource,
) -> JoinHandle<()> {
    let api = match namespace {
        Some(ns) => Api::<Decoded<DynamicObject>>::namespaced_with(client.clone(), ns, ar),
        None => Api::<Decoded<DynamicObject>>::all_with(client.clone(), ar),
    };
    let types = TypeMeta {
        api_version: ar.api_version.clone(),
        kind: ar.kind.clone(),
    };
    spawn_kind(
        shared,
        api,
        watcher::Config::default(),
        ar.group.clone(),
        ar.kind.clone(),
        OnNotFound::Optional,
        move |mut o: DynamicObject| {
            // List items may come without their type; the store keys objects by it.
            o.types = Some(types.clone());
            encode(&o).map(Entry::valid)
        },
    )
}

#[cfg(test)]
mod tests {
    use super::super::{WatchConfig, start_with};
    use super::*;
    use crate::Clients;
    use autoscaler_clusterapi::ClusterApiConfig;
    use autoscaler_model::ObjectKey;
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::json;

    type Respond = tower_test::mock::SendResponse<Response<Body>>;

    fn send(r: Respond, code: u16, body: Vec<u8>) {
        r.send_response(
            Response::builder()
                .status(code)
                .body(Body::from(body))
                .expect("response"),
        );
    }

    fn json_body(v: &Value) -> Vec<u8> {
        serde_json::to_vec(v).expect("json")
    }

    fn list(items: Vec<Value>) -> Value {
        json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"},
               "items": items})
    }

    const INFRA: &str = "infrastructure.cluster.x-k8s.io";

    fn md(name: &str, reference: Value) -> Value {
        json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
               "metadata": {"name": name, "namespace": "capi", "resourceVersion": "3"},
               "spec": {"template": {"spec": {"infrastructureRef": reference}}}})
    }

    fn template(gpus: &str, rv: &str) -> Value {
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
               "kind": "DockerMachineTemplate",
               "metadata": {"name": "gpu", "namespace": "capi", "resourceVersion": rv},
               "status": {"capacity": {"cpu": "8", "nvidia.com/gpu": gpus}}})
    }

    /// The management cluster: two MachineDeployments, one naming a DockerMachineTemplate by
    /// `apiGroup` (v1beta2), one an AWSMachineTemplate the server does not serve; the
    /// templates' first watch brings a status change, later ones stay open. Every request is
    /// checked against the declared calls and logged.
    fn management() -> (kube::Client, JoinHandle<()>, Arc<Mutex<Vec<String>>>) {
        let (svc, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = kube::Client::new(svc, "default");
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let task = tokio::spawn(async move {
            let mut open = Vec::new();
            let mut template_watches = 0;
            while let Some((req, r)) = handle.next_request().await {
                let uri = req.uri().to_string();
                assert!(
                    crate::api_calls::is_declared(req.method(), &uri),
                    "undeclared {uri}"
                );
                log.lock().expect("log").push(uri.clone());
                let path = req.uri().path();
                let watch = uri.contains("watch=true");
                if path == "/apis" {
                    let gv =
                        json!({"groupVersion": format!("{INFRA}/v1beta1"), "version": "v1beta1"});
                    let groups = json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                        {"name": INFRA, "versions": [gv], "preferredVersion": gv}]});
                    send(r, 200, json_body(&groups));
                } else if path == format!("/apis/{INFRA}/v1beta1") {
                    let resources = json!({"kind": "APIResourceList", "apiVersion": "v1",
                        "groupVersion": format!("{INFRA}/v1beta1"), "resources": [
                        {"name": "dockermachinetemplates", "singularName": "dockermachinetemplate",
                         "namespaced": true, "kind": "DockerMachineTemplate",
                         "verbs": ["get", "list", "watch"]}]});
                    send(r, 200, json_body(&resources));
                } else if path.starts_with("/apis/cluster.x-k8s.io/") && !watch {
                    let v1beta2 = json!({"apiGroup": INFRA, "kind": "DockerMachineTemplate",
                                         "name": "gpu"});
                    let v1beta1 = json!({"apiVersion": format!("{INFRA}/v1beta2"),
                                         "kind": "AWSMachineTemplate", "name": "aws"});
                    let items = vec![md("md-gpu", v1beta2), md("md-aws", v1beta1)];
                    send(r, 200, json_body(&list(items)));
                } else if path.contains("/dockermachinetemplates") && !watch {
                    send(r, 200, json_body(&list(vec![template("1", "5")])));
                } else if path.contains("/dockermachinetemplates") && template_watches == 0 {
                    template_watches += 1;
                    // `type` first, as the API server writes it.
                    let event = format!(
                        "{{\"type\":\"MODIFIED\",\"object\":{}}}\n",
                        template("2", "6")
                    );
                    send(r, 200, event.into_bytes());
                } else if watch {
                    open.push(r);
                } else {
                    send(r, 200, json_body(&list(Vec::new())));
                }
            }
        });
        (client, task, seen)
    }

    /// The workload cluster: every list empty, every watch held open.
    fn workload() -> (kube::Client, JoinHandle<()>) {
        let (svc, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = kube::Client::new(svc, "default");
        let task = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Some((req, r)) = handle.next_request().await {
                let uri = req.uri().to_string();
                if uri.contains("sendInitialEvents=true") {
                    let status = json!({"kind": "Status", "apiVersion": "v1",
                        "status": "Failure", "reason": "Invalid", "code": 422});
                    send(r, 422, json_body(&status));
                } else if uri.contains("watch=true") {
                    open.push(r);
                } else {
                    send(r, 200, json_body(&list(Vec::new())));
                }
            }
        });
        (client, task)
    }

    async fn until(what: &str, mut cond: impl FnMut() -> bool) {
        for _ in 0..1000 {
            if cond() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("timed out waiting for {what}");
    }

    fn gpus_of_template(watches: &super::super::Watches) -> Option<String> {
        let inf = autoscaler_actuation::lock_informer(watches.informer());
        let key = ObjectKey {
            group: INFRA.into(),
            kind: "DockerMachineTemplate".into(),
            namespace: "capi".into(),
            name: "gpu".into(),
        };
        let t = inf.store().get(&key)?;
        t.pointer("/status/capacity/nvidia.com~1gpu")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    /// The template a MachineDeployment names is listed (in the auto-discovery namespace, at
    /// the version discovery resolves for a reference without one) before the watches count
    /// as synced, and its changes are watched; a kind the server does not serve is left out
    /// without holding the sync.
    #[tokio::test]
    async fn referenced_templates_are_listed_before_the_sync_and_watched() {
        let (management, m_task, seen) = management();
        let (workload, w_task) = workload();
        let capi = ClusterApiConfig::default()
            .with_auto_discovery(&["clusterapi:namespace=capi"])
            .expect("valid");
        let config = WatchConfig::new("kube-system", capi);
        let mds = ApiResource {
            group: "cluster.x-k8s.io".into(),
            version: "v1beta1".into(),
            api_version: "cluster.x-k8s.io/v1beta1".into(),
            kind: "MachineDeployment".into(),
            plural: "machinedeployments".into(),
        };
        let clients = Clients {
            workload,
            management,
        };
        let watches = start_with(&clients, &config, vec![mds]);
        tokio::time::timeout(Duration::from_secs(10), watches.wait_synced())
            .await
            .expect("synced");
        // Synced means the template is there: no loop decides without it.
        assert!(
            gpus_of_template(&watches).is_some(),
            "listed before the sync"
        );
        until("the watched change", || {
            gpus_of_template(&watches).as_deref() == Some("2")
        })
        .await;
        let seen = seen.lock().expect("log").clone();
        let lists: Vec<&String> = seen
            .iter()
            .filter(|u| u.contains("machinetemplates"))
            .collect();
        assert!(
            lists.iter().all(|u| u.starts_with(
                "/apis/infrastructure.cluster.x-k8s.io/v1beta1/namespaces/capi/dockermachinetemplates?"
            )),
            "{lists:?}"
        );
        assert!(lists.len() >= 2, "listed and watched: {lists:?}");
        assert!(watches.is_synced(), "{:?}", watches.unsynced());
        drop(watches);
        m_task.abort();
        w_task.abort();
    }

    fn ar(version: &str, kind: &str) -> ApiResource {
        let group = "infrastructure.cluster.x-k8s.io";
        ApiResource {
            group: group.into(),
            version: version.into(),
            api_version: format!("{group}/{version}"),
            kind: kind.into(),
            plural: format!("{}s", kind.to_lowercase()),
        }
    }

    /// A v1beta1 reference keeps its version where it is served; a v1beta2 one (no version)
    /// takes the preferred version; a kind served only at another version is found there.
    #[test]
    fn the_version_is_the_named_one_else_the_preferred_else_any_serving_the_kind() {
        let versions = vec![
            (
                "v1beta2".to_string(),
                vec![ar("v1beta2", "AWSMachineTemplate")],
            ),
            (
                "v1beta1".to_string(),
                vec![
                    ar("v1beta1", "AWSMachineTemplate"),
                    ar("v1beta1", "OldTemplate"),
                ],
            ),
        ];
        let pick = |kind: &str, named: Option<&str>| {
            choose(&versions, "v1beta2", kind, named).map(|a| a.api_version)
        };
        let v = |s: &str| Some(format!("infrastructure.cluster.x-k8s.io/{s}"));
        assert_eq!(pick("AWSMachineTemplate", Some("v1beta1")), v("v1beta1"));
        assert_eq!(pick("AWSMachineTemplate", None), v("v1beta2"));
        assert_eq!(pick("AWSMachineTemplate", Some("v1alpha4")), v("v1beta2"));
        assert_eq!(pick("OldTemplate", None), v("v1beta1"));
        assert_eq!(pick("Unknown", None), None);
    }
}
