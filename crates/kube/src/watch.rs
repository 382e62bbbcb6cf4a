//! The watches: one kube-rs watcher per kind the decision reads (Nodes, Pods, budgets, workload
//! controllers, Namespaces, storage (PersistentVolumeClaims, PersistentVolumes, StorageClasses,
//! CSINodes, CSIStorageCapacities), the priority-expander ConfigMap, and the Cluster API objects
//! of the configured group, their versions discovered), feeding a shared [`Informer`].
//!
//! CSIStorageCapacity is optional: a server that does not serve it (`404`) or an identity not
//! allowed to read it (`403`) leaves it empty with a warning, and it counts as synced, since
//! kube-scheduler too treats capacity as unknown (not as zero) when it has none. The DRA kinds
//! (`resource.k8s.io/v1`) are optional too, but a `404` for them (a server below 1.34) is told to
//! the informer, whose view then says DRA is not served: a pod with claims gets "cannot be
//! simulated" instead of being simulated against no devices.
//!
//! Pods come as a streaming list (a watch with `sendInitialEvents`) where the server serves
//! one, in pages otherwise, decoded with only the fields the model reads ([`SlimPod`]). Each
//! kind's stream is read on a task of its own, ahead of the conversion.
//!
//! Pods are converted to the model as they arrive (never held as JSON); other objects are
//! cached as JSON without `metadata.managedFields` (and Nodes without their image list). A
//! relist replaces the kind's objects at once (buffered from `Init` to `InitDone`). Watch
//! errors are logged and retried with the watcher's default backoff, never fatal; a kind that
//! never synced keeps [`Watches::is_synced`] false.
//!
//! The Cluster API kinds (and MachineAutoscalers) are read from the management cluster
//! ([`crate::Clients::management`]), everything else from the workload cluster. They are
//! listed and watched in one namespace when every auto-discovery spec names it
//! ([`ClusterApiConfig::watch_namespace`], so a namespaced Role is enough), cluster-wide
//! otherwise, at the version `CAPI_VERSION` pins or else the one the server prefers.
//!
//! The Cluster API kinds (and MachineAutoscalers) are re-discovered periodically and at once
//! when one of them answers `404`: a kind that appeared is watched from then on, one that
//! disappeared stops being watched and its objects leave the view. A fixed kind answering `404`
//! (an API the server may have stopped serving) signals [`Watches::api_not_found`].
//!
//! The infrastructure machine templates the scalable resources reference are watched per kind,
//! lazily, from the management cluster (`infrastructure_watch.rs`): a kind counts as unsynced
//! from the moment a reference to it is seen until it has listed.
//!
//! It never decides anything and never writes to the API.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use autoscaler_clusterapi::ClusterApiConfig;
use autoscaler_model::ObjectKey;
use autoscaler_model::ObjectStore;
use autoscaler_model::PRIORITY_CONFIG_MAP_NAME;
use autoscaler_model::Pod;
use futures::StreamExt;
use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::core::v1 as api;
use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::api::resource::v1 as resource;
use k8s_openapi::api::storage::v1 as storage;
use kube::Resource;
use kube::api::{Api, ApiResource, DynamicObject, TypeMeta};
use kube::runtime::utils::Backoff;
use kube::runtime::watcher::{self, Event, InitialListStrategy, watcher};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

use autoscaler_actuation::Informer;

use crate::Clients;
use crate::lenient::{Decoded, Undecodable};
use crate::skipped::SkippedObjects;
use crate::slim::SlimPod;

#[path = "capacity_watch.rs"]
mod capacity;
pub use capacity::{CapacityWatch, capacity_versions};

#[path = "infrastructure_watch.rs"]
mod infrastructure;

/// The Cluster API kinds watched, when their group serves them.
pub const CLUSTER_API_KINDS: [&str; 4] =
    ["MachineDeployment", "MachineSet", "MachinePool", "Machine"];

/// The API group of OpenShift's MachineAutoscaler, watched when served.
pub const MACHINE_AUTOSCALER_GROUP: &str = "autoscaling.openshift.io";

/// What to watch beyond the fixed kinds, and how often to look for Cluster API kinds again.
#[derive(Clone, Debug)]
pub struct WatchConfig {
    /// Namespace of the priority-expander ConfigMap (`--namespace`).
    pub namespace: String,
    /// The Cluster API group whose objects are watched.
    pub clusterapi: ClusterApiConfig,
    /// How often the Cluster API kinds are discovered again (1 minute).
    pub rediscover_every: Duration,
    /// How often while the Cluster API group is not served at all (the scan interval): the
    /// autoscaler has nothing to scale until it appears.
    pub rediscover_while_unserved: Duration,
    /// Where the objects left out are noted (warned about, counted, listed in the status).
    pub skipped: Arc<SkippedObjects>,
    /// The version of `storage.k8s.io` CSIStorageCapacity is read at ([`capacity_version`]).
    pub capacity_version: String,
    /// The capacity-on-request kinds watched (none by default).
    pub capacity: CapacityWatch,
}

impl WatchConfig {
    /// The defaults for `namespace` and `clusterapi`: rediscovery every minute, every 10 s
    /// while the Cluster API group is not served.
    pub fn new(namespace: &str, clusterapi: ClusterApiConfig) -> WatchConfig {
        WatchConfig {
            namespace: namespace.to_string(),
            clusterapi,
            rediscover_every: Duration::from_secs(60),
            rediscover_while_unserved: Duration::from_secs(10),
            skipped: Arc::new(SkippedObjects::default()),
            capacity_version: "v1".to_string(),
            capacity: CapacityWatch::default(),
        }
    }
}

/// Why the watches could not start.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// Discovering the served versions of an API group failed (other than the group not being
    /// served, which only skips it).
    #[error("discovery of API group {group}: {source}")]
    Discovery {
        /// The API group.
        group: String,
        /// Why.
        source: kube::Error,
    },
}

/// The dynamic kinds watched (`group/Kind`), with their resource and task.
type DynamicTasks = BTreeMap<String, (ApiResource, JoinHandle<()>)>;

/// The running watches and what they fill.
#[derive(Debug)]
pub struct Watches {
    informer: Arc<Mutex<Informer>>,
    /// The kinds (`group/Kind`) that have not completed their first list yet.
    pending: watch::Receiver<BTreeSet<String>>,
    new_unschedulable: Arc<Notify>,
    tasks: Vec<JoinHandle<()>>,
    /// Only the rediscovery task changes it, never holding the lock across an await.
    dynamic: Arc<Mutex<DynamicTasks>>,
    shared: Shared,
}

impl Watches {
    /// The informer the watches feed.
    pub fn informer(&self) -> &Arc<Mutex<Informer>> {
        &self.informer
    }

    /// Whether every kind completed its first list (no decision before this).
    pub fn is_synced(&self) -> bool {
        self.pending.borrow().is_empty()
    }

    /// The kinds (`group/Kind`, `/Kind` for the core group) not synced yet, for logs.
    pub fn unsynced(&self) -> BTreeSet<String> {
        self.pending.borrow().clone()
    }

    /// The kinds not synced yet, as a channel (empty once every kind listed).
    pub fn sync_state(&self) -> watch::Receiver<BTreeSet<String>> {
        self.pending.clone()
    }

    /// Signalled whenever a fixed kind's list or watch answers `404`: an API the autoscaler
    /// needs may no longer be served (the controller confirms it by discovery).
    pub fn api_not_found(&self) -> Arc<Notify> {
        self.shared.api_not_found.clone()
    }

    /// The dynamic kinds watched now (`group/Kind`).
    pub fn dynamic_kinds(&self) -> BTreeSet<String> {
        lock_tasks(&self.dynamic).keys().cloned().collect()
    }

    /// Waits until [`Watches::is_synced`].
    pub async fn wait_synced(&self) {
        let mut rx = self.pending.clone();
        // The sender lives in the watch tasks' shared state, which `self` keeps alive; if it
        // were gone nothing could sync any more, and waiting forever is the honest answer.
        if rx.wait_for(|p| p.is_empty()).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Signalled when a pod became unschedulable (see [`Informer::take_new_unschedulable`]);
    /// the controller debounces it and runs a loop early.
    pub fn new_unschedulable(&self) -> &Arc<Notify> {
        &self.new_unschedulable
    }

    /// Discovers the Cluster API kinds again every [`WatchConfig::rediscover_every`] (every
    /// [`WatchConfig::rediscover_while_unserved`] while its group is not served) and whenever
    /// a dynamic kind answers `404`, and watches what changed. Must be called within a tokio
    /// runtime; the task ends with the watches.
    pub fn keep_discovering(&mut self, management: kube::Client, config: WatchConfig) {
        let client = management;
        let dynamic = self.dynamic.clone();
        let shared = self.shared.clone();
        self.tasks.push(tokio::spawn(async move {
            loop {
                let groups = config.clusterapi.groups();
                let unserved = groups.iter().all(|g| {
                    let prefix = format!("{g}/");
                    !lock_tasks(&dynamic).keys().any(|k| k.starts_with(&prefix))
                });
                let wait = if unserved {
                    config.rediscover_while_unserved
                } else {
                    config.rediscover_every
                };
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = shared.rediscover.notified() => {}
                }
                match discover_clusterapi(&client, &config.clusterapi).await {
                    Ok(found) => reconcile(&client, &config, &shared, &dynamic, found).await,
                    Err(e) => tracing::debug!(error = %e, "rediscovery failed; retried later"),
                }
            }
        }));
    }
}

impl Drop for Watches {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        for (_, t) in lock_tasks(&self.dynamic).values() {
            t.abort();
        }
    }
}

/// What every watch task shares.
#[derive(Clone, Debug)]
struct Shared {
    informer: Arc<Mutex<Informer>>,
    pending: Arc<watch::Sender<BTreeSet<String>>>,
    /// Signalled when a fixed kind answers `404`.
    api_not_found: Arc<Notify>,
    new_unschedulable: Arc<Notify>,
    /// Signalled when a dynamic kind answers `404`.
    rediscover: Arc<Notify>,
    skipped: Arc<SkippedObjects>,
    /// The infrastructure kinds the scalable resources reference, watched as they appear.
    infrastructure: infrastructure::InfrastructureKinds,
}

impl Shared {
    fn new(skipped: Arc<SkippedObjects>) -> Shared {
        Shared {
            informer: Arc::new(Mutex::new(Informer::new())),
            pending: Arc::new(watch::Sender::new(BTreeSet::new())),
            api_not_found: Arc::new(Notify::new()),
            new_unschedulable: Arc::new(Notify::new()),
            rediscover: Arc::new(Notify::new()),
            skipped,
            infrastructure: infrastructure::InfrastructureKinds::default(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Informer> {
        autoscaler_actuation::lock_informer(&self.informer)
    }
}

/// What a kind's `404` means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OnNotFound {
    /// A fixed kind: a needed API is gone ([`Watches::missing_apis`]).
    Missing,
    /// A discovered kind: look again ([`Watches::keep_discovering`]).
    Rediscover,
    /// An optional kind (CSIStorageCapacity): `404` or `403` leaves it empty and synced, with
    /// a warning the first time; the watcher keeps retrying in case it appears.
    Optional,
}

/// Finds the served versions of the Cluster API kinds of `capi.api_group` (the pinned
/// `capi.api_version`, else the preferred one) and of MachineAutoscalers. A group, version or
/// kind not served is skipped (the caller says so).
pub async fn discover_clusterapi(
    client: &kube::Client,
    capi: &ClusterApiConfig,
) -> Result<Vec<ApiResource>, WatchError> {
    let mut out = Vec::new();
    // `--cloud-provider=openshift` reads OpenShift's Machine API besides Cluster API; the
    // pinned version is Cluster API's own.
    let groups = capi.groups();
    let wanted = (groups.iter())
        .map(|g| {
            let pinned = (*g == capi.api_group.as_str())
                .then_some(capi.api_version.as_deref())
                .flatten();
            (*g, &CLUSTER_API_KINDS[..], pinned)
        })
        .chain([(MACHINE_AUTOSCALER_GROUP, &["MachineAutoscaler"][..], None)]);
    for (group, kinds, pinned) in wanted {
        let served = match kube::discovery::group(client, group).await {
            Ok(g) => g,
            Err(kube::Error::Discovery(kube::error::DiscoveryError::MissingApiGroup(_))) => {
                continue;
            }
            Err(source) => {
                return Err(WatchError::Discovery {
                    group: group.to_string(),
                    source,
                });
            }
        };
        match pinned {
            Some(version) => {
                let at_version = served.versioned_resources(version);
                out.extend(
                    kinds
                        .iter()
                        .filter_map(|k| at_version.iter().find(|(ar, _)| ar.kind == *k))
                        .map(|(ar, _)| ar.clone()),
                );
            }
            None => out.extend(
                kinds
                    .iter()
                    .filter_map(|k| served.recommended_kind(k))
                    .map(|(ar, _)| ar),
            ),
        }
    }
    Ok(out)
}

/// The version of `storage.k8s.io` serving CSIStorageCapacity: `v1` (Kubernetes 1.24 and
/// later), else `v1beta1` where only it is (1.21 to 1.23); `v1` when discovery fails or
/// neither is served (the kind is optional: it then counts as synced, empty).
pub async fn capacity_version(client: &kube::Client) -> &'static str {
    let Ok(group) = kube::discovery::group(client, "storage.k8s.io").await else {
        return "v1";
    };
    let serves = |version: &str| {
        (group.versioned_resources(version).iter()).any(|(ar, _)| ar.kind == "CSIStorageCapacity")
    };
    if !serves("v1") && serves("v1beta1") {
        tracing::info!(
            "CSIStorageCapacity is served at storage.k8s.io/v1beta1 only; reading it there"
        );
        "v1beta1"
    } else {
        "v1"
    }
}

/// Says at info level, once at start, which dynamic kinds are watched and which groups are
/// not served (a normal condition: most clusters have no MachineAutoscalers).
fn log_discovered(config: &WatchConfig, resources: &[ApiResource]) {
    let groups = config.clusterapi.groups();
    for group in groups.iter().copied().chain([MACHINE_AUTOSCALER_GROUP]) {
        let kinds: Vec<String> = resources
            .iter()
            .filter(|r| r.group == group)
            .map(|r| format!("{}/{}", r.api_version, r.kind))
            .collect();
        if kinds.is_empty() {
            tracing::info!(
                group,
                "API group not served (yet); looking for it again periodically"
            );
        } else {
            let namespace = config.clusterapi.watch_namespace().unwrap_or("(all)");
            tracing::info!(
                group,
                ?kinds,
                namespace,
                "watching the kinds this API group serves"
            );
        }
    }
}

/// Discovers the Cluster API kinds on the management cluster, starts every watch
/// ([`start_with`]) and keeps discovering ([`Watches::keep_discovering`]).
pub async fn start(clients: &Clients, mut config: WatchConfig) -> Result<Watches, WatchError> {
    let resources = discover_clusterapi(&clients.management, &config.clusterapi).await?;
    config.capacity_version = capacity_version(&clients.workload).await.to_string();
    if config.capacity.any() {
        let (requests, buffers) = capacity_versions(&clients.workload).await;
        config.capacity.request_version = requests;
        config.capacity.buffer_version = buffers;
    }
    log_discovered(&config, &resources);
    let mut watches = start_with(clients, &config, resources);
    watches.keep_discovering(clients.management.clone(), config);
    Ok(watches)
}

/// Starts one watch task per kind: the fixed kinds, the priority-expander ConfigMap in
/// `config.namespace` (all from the workload cluster), and the dynamic kinds of `resources`
/// (from [`discover_clusterapi`], from the management cluster). Must be called within a tokio
/// runtime.
pub fn start_with(clients: &Clients, config: &WatchConfig, resources: Vec<ApiResource>) -> Watches {
    let shared = Shared {
        infrastructure: infrastructure::InfrastructureKinds::skipping(&config.clusterapi.groups()),
        ..Shared::new(config.skipped.clone())
    };
    let mut tasks = Vec::new();
    let all = watcher::Config::default;
    let c = &clients.workload;
    spawn_typed_with::<api::Node>(
        &mut tasks,
        &shared,
        Api::all(c.clone()),
        all(),
        strip_node,
        check_node,
        OnNotFound::Missing,
    );
    spawn_pods(&mut tasks, &shared, Api::all(c.clone()), all());
    spawn_typed_with::<policy::PodDisruptionBudget>(
        &mut tasks,
        &shared,
        Api::all(c.clone()),
        all(),
        keep,
        check_pdb,
        OnNotFound::Missing,
    );
    spawn_typed_with::<apps::DaemonSet>(
        &mut tasks,
        &shared,
        Api::all(c.clone()),
        all(),
        keep,
        check_daemonset,
        OnNotFound::Missing,
    );
    spawn_typed::<apps::ReplicaSet>(&mut tasks, &shared, Api::all(c.clone()), all(), keep);
    spawn_typed::<apps::StatefulSet>(&mut tasks, &shared, Api::all(c.clone()), all(), keep);
    spawn_typed::<batch::Job>(&mut tasks, &shared, Api::all(c.clone()), all(), keep);
    spawn_typed::<api::ReplicationController>(
        &mut tasks,
        &shared,
        Api::all(c.clone()),
        all(),
        keep,
    );
    spawn_typed_with::<api::Namespace>(
        &mut tasks,
        &shared,
        Api::all(c.clone()),
        all(),
        keep,
        check_namespace,
        OnNotFound::Missing,
    );
    spawn_storage(&mut tasks, &shared, c, &config.capacity_version);
    capacity::spawn_capacity(&mut tasks, &shared, c, &config.capacity);
    spawn_typed::<api::ConfigMap>(
        &mut tasks,
        &shared,
        Api::namespaced(c.clone(), &config.namespace),
        all().fields(&format!("metadata.name={PRIORITY_CONFIG_MAP_NAME}")),
        keep,
    );
    // Before the Cluster API kinds, which note the templates they reference.
    infrastructure::spawn_infrastructure(
        &mut tasks,
        &shared,
        clients.management.clone(),
        config.clusterapi.watch_namespace().map(str::to_string),
    );
    let mut dynamic = DynamicTasks::new();
    for ar in resources {
        let name = format!("{}/{}", ar.group, ar.kind);
        let task = spawn_dynamic(&clients.management, config, &shared, &ar);
        dynamic.insert(name, (ar, task));
    }
    Watches {
        informer: shared.informer.clone(),
        pending: shared.pending.subscribe(),
        new_unschedulable: shared.new_unschedulable.clone(),
        tasks,
        dynamic: Arc::new(Mutex::new(dynamic)),
        shared,
    }
}

/// Starts the watch of one discovered kind, in the namespace of
/// [`ClusterApiConfig::watch_namespace_of`] its group when there is one.
fn spawn_dynamic(
    client: &kube::Client,
    config: &WatchConfig,
    shared: &Shared,
    ar: &ApiResource,
) -> JoinHandle<()> {
    let api = match config.clusterapi.watch_namespace_of(&ar.group) {
        Some(ns) => Api::<Decoded<DynamicObject>>::namespaced_with(client.clone(), ns, ar),
        None => Api::<Decoded<DynamicObject>>::all_with(client.clone(), ar),
    };
    let types = TypeMeta {
        api_version: ar.api_version.clone(),
        kind: ar.kind.clone(),
    };
    let noted = shared.clone();
    let encode = move |mut o: DynamicObject| {
        // List items may come without their type; the store keys objects by it.
        o.types = Some(types.clone());
        let entry = encode(&o).map(Entry::valid)?;
        // The infrastructure template it names is watched before this kind counts as synced.
        (noted.infrastructure).note(&noted, &entry.key.kind, &entry.value);
        Some(entry)
    };
    let (group, kind) = (ar.group.clone(), ar.kind.clone());
    let config = watcher::Config::default();
    spawn_kind(
        shared,
        api,
        config,
        group,
        kind,
        OnNotFound::Rediscover,
        encode,
    )
}

/// Brings the dynamic watches in line with `found`: kinds no longer served (or served at
/// another version) stop and their objects leave the view; new ones start.
async fn reconcile(
    client: &kube::Client,
    config: &WatchConfig,
    shared: &Shared,
    dynamic: &Mutex<DynamicTasks>,
    found: Vec<ApiResource>,
) {
    let wanted: BTreeMap<String, ApiResource> = found
        .into_iter()
        .map(|ar| (format!("{}/{}", ar.group, ar.kind), ar))
        .collect();
    let stale: Vec<(String, (ApiResource, JoinHandle<()>))> = {
        let mut d = lock_tasks(dynamic);
        let names: Vec<String> = d
            .iter()
            .filter(|(k, (ar, _))| {
                wanted
                    .get(*k)
                    .is_none_or(|w| w.api_version != ar.api_version)
            })
            .map(|(k, _)| k.clone())
            .collect();
        names
            .into_iter()
            .filter_map(|n| d.remove(&n).map(|t| (n, t)))
            .collect()
    };
    for (name, (ar, task)) in stale {
        task.abort();
        // Wait for it to stop, so nothing it held is applied after the kind is cleared.
        let _ = task.await;
        shared.pending.send_if_modified(|p| p.remove(&name));
        shared.lock().replace_kind(&ar.group, &ar.kind, Vec::new());
        tracing::info!(kind = %name, version = %ar.api_version, "kind no longer served; its objects leave the view");
    }
    let mut d = lock_tasks(dynamic);
    for (name, ar) in wanted {
        if d.contains_key(&name) {
            continue;
        }
        tracing::info!(kind = %name, version = %ar.api_version, "kind now served; watching it");
        let task = spawn_dynamic(client, config, shared, &ar);
        d.insert(name, (ar, task));
    }
}

fn lock_tasks(tasks: &Mutex<DynamicTasks>) -> MutexGuard<'_, DynamicTasks> {
    // Task handles only: a panic elsewhere cannot leave them inconsistent.
    tasks.lock().unwrap_or_else(|e| e.into_inner())
}

fn keep<K>(o: K) -> K {
    o
}

/// For kinds the model does not convert: every object that decodes is valid.
fn any<K>(_: &K) -> Result<(), String> {
    Ok(())
}

/// Whether the model takes the Node (an unparsable allocatable quantity drops it).
fn check_node(n: &api::Node) -> Result<(), String> {
    autoscaler_model::Node::from_k8s(n)
        .map(drop)
        .map_err(|e| e.detail())
}

/// Whether the model takes the budget (a percentage that does not parse drops it).
pub(crate) fn check_pdb(p: &policy::PodDisruptionBudget) -> Result<(), String> {
    autoscaler_model::PodDisruptionBudget::from_k8s(p)
        .map(drop)
        .map_err(|e| e.detail())
}

/// Whether the model takes the DaemonSet.
pub(crate) fn check_daemonset(d: &apps::DaemonSet) -> Result<(), String> {
    autoscaler_model::DaemonSet::from_k8s(d)
        .map(drop)
        .map_err(|e| e.detail())
}

/// Whether the model takes the Namespace.
pub(crate) fn check_namespace(n: &api::Namespace) -> Result<(), String> {
    autoscaler_model::NamespaceLabels::from_k8s(n)
        .map(drop)
        .map_err(|e| e.detail())
}

fn spawn_typed<K>(
    tasks: &mut Vec<JoinHandle<()>>,
    shared: &Shared,
    api: Api<Decoded<K>>,
    config: watcher::Config,
    strip: fn(K) -> K,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
{
    spawn_typed_with(tasks, shared, api, config, strip, any, OnNotFound::Missing);
}

/// Watches a typed kind; `check` says why the model would leave an object out (the object is
/// cached all the same, as the model reads it, and the reason noted as skipped).
fn spawn_typed_with<K>(
    tasks: &mut Vec<JoinHandle<()>>,
    shared: &Shared,
    api: Api<Decoded<K>>,
    config: watcher::Config,
    strip: fn(K) -> K,
    check: fn(&K) -> Result<(), String>,
    on_404: OnNotFound,
) where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
{
    let group = K::group(&()).to_string();
    let kind = K::kind(&()).to_string();
    tasks.push(spawn_kind(
        shared,
        api,
        config,
        group,
        kind,
        on_404,
        move |o: K| {
            let invalid = check(&o).err().map(|reason| Invalid {
                version: o.meta().resource_version.clone().unwrap_or_default(),
                reason,
            });
            encode(&strip(o)).map(|(key, value)| Entry {
                key,
                value,
                invalid,
            })
        },
    ));
}

/// The storage kinds the volume filters read, all cluster-wide (list and watch only);
/// CSIStorageCapacity at `capacity_version` ([`capacity_version`]).
fn spawn_storage(
    tasks: &mut Vec<JoinHandle<()>>,
    shared: &Shared,
    c: &kube::Client,
    capacity_version: &str,
) {
    let all = watcher::Config::default;
    spawn_typed::<api::PersistentVolumeClaim>(tasks, shared, Api::all(c.clone()), all(), keep);
    spawn_typed::<api::PersistentVolume>(tasks, shared, Api::all(c.clone()), all(), keep);
    spawn_typed::<storage::StorageClass>(tasks, shared, Api::all(c.clone()), all(), keep);
    spawn_typed::<storage::CSINode>(tasks, shared, Api::all(c.clone()), all(), keep);
    spawn_typed_with::<storage::CSIDriver>(
        tasks,
        shared,
        Api::all(c.clone()),
        all(),
        keep,
        any,
        OnNotFound::Optional,
    );
    spawn_dra(tasks, shared, c);
    if capacity_version == "v1" {
        spawn_typed_with::<storage::CSIStorageCapacity>(
            tasks,
            shared,
            Api::all(c.clone()),
            all(),
            keep,
            any,
            OnNotFound::Optional,
        );
        return;
    }
    let (group, kind) = ("storage.k8s.io", "CSIStorageCapacity");
    let ar = ApiResource {
        group: group.into(),
        version: capacity_version.into(),
        api_version: format!("{group}/{capacity_version}"),
        kind: kind.into(),
        plural: "csistoragecapacities".into(),
    };
    // v1beta1 has v1's fields; cached as v1, the version the storage model reads.
    let types = TypeMeta {
        api_version: format!("{group}/v1"),
        kind: kind.into(),
    };
    tasks.push(spawn_kind(
        shared,
        Api::<Decoded<DynamicObject>>::all_with(c.clone(), &ar),
        all(),
        group.into(),
        kind.into(),
        OnNotFound::Optional,
        move |mut o: DynamicObject| {
            o.types = Some(types.clone());
            encode(&o).map(Entry::valid)
        },
    ));
}

/// The DRA kinds the DynamicResources filter reads (`resource.k8s.io/v1`), all optional: a
/// server below Kubernetes 1.34 (or without DRA) answers `404` and the autoscaler goes on
/// without them.
fn spawn_dra(tasks: &mut Vec<JoinHandle<()>>, shared: &Shared, c: &kube::Client) {
    spawn_optional::<resource::DeviceClass>(tasks, shared, c);
    spawn_optional::<resource::ResourceClaim>(tasks, shared, c);
    spawn_optional::<resource::ResourceClaimTemplate>(tasks, shared, c);
    spawn_optional::<resource::ResourceSlice>(tasks, shared, c);
}

/// How the sync state names the DRA kinds: `resource.k8s.io/<Kind>`.
const DRA_PREFIX: &str = "resource.k8s.io/";

/// One optional cluster-wide kind, kept whole and checked by the model only.
fn spawn_optional<K>(tasks: &mut Vec<JoinHandle<()>>, shared: &Shared, c: &kube::Client)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug + Send + 'static,
{
    let config = watcher::Config::default();
    let api = Api::all(c.clone());
    spawn_typed_with::<K>(
        tasks,
        shared,
        api,
        config,
        keep,
        check_dra,
        OnNotFound::Optional,
    );
}

/// Whether the model takes the DRA object (a CEL selector that does not compile, a bad
/// quantity, a list longer than the API allows drop it): read as the view reads it, so the
/// object is named among the skipped ones while the rest goes on.
fn check_dra<K: Serialize>(o: &K) -> Result<(), String> {
    let mut store = ObjectStore::new();
    // Typed objects serialize with their kind; one that does not is no DRA object to check.
    let Ok(value) = serde_json::to_value(o) else {
        return Ok(());
    };
    if store.insert(value, "watch").is_err() {
        return Ok(());
    }
    match autoscaler_model::Dra::from_store(&store)
        .1
        .into_iter()
        .next()
    {
        Some(e) => Err(e.error),
        None => Ok(()),
    }
}

/// How the sync state ([`Watches::sync_state`]) names the Pods.
pub const PODS: &str = "/Pod";

/// Pods are converted to the model as they arrive and never held as JSON: a relist of 150,000
/// pods buffered as JSON values until `InitDone` peaked at ~9 KB per pod (each small JSON object
/// a B-tree map), against ~2 KB per converted pod. They are decoded as [`SlimPod`]s: only the
/// fields the model reads.
fn spawn_pods(
    tasks: &mut Vec<JoinHandle<()>>,
    shared: &Shared,
    api: Api<Decoded<SlimPod>>,
    config: watcher::Config,
) {
    let (group, kind) = (String::new(), "Pod".to_string());
    debug_assert_eq!(format!("{group}/{kind}"), PODS);
    // The thread ends by itself once the reader's task is aborted.
    let (reader, _thread) = spawn_kind_on_thread(
        shared,
        api,
        config.streaming_lists(),
        group,
        kind,
        pod_entry,
    );
    tasks.push(reader);
}

/// A Pod as the informer takes it: its key, and the model pod (`None` when it does not
/// convert, noted as invalid). `None` for a pod without namespace or name.
fn pod_entry(o: SlimPod) -> Option<Entry<Option<Arc<Pod>>>> {
    let (Some(namespace), Some(name)) = (&o.meta().namespace, &o.meta().name) else {
        tracing::warn!("pod without namespace or name; skipped");
        return None;
    };
    let key = ObjectKey {
        group: String::new(),
        kind: "Pod".into(),
        namespace: namespace.clone(),
        name: name.clone(),
    };
    let version = o.meta().resource_version.clone();
    Some(match o.into_model() {
        Ok(p) => Entry::valid((key, Some(Arc::new(p)))),
        Err(e) => Entry {
            key,
            value: None,
            invalid: Some(Invalid {
                version: version.unwrap_or_default(),
                reason: e.detail(),
            }),
        },
    })
}

/// One object as it enters the informer: its key and cached form, and why the model leaves it
/// out when it does.
struct Entry<T> {
    key: ObjectKey,
    value: T,
    invalid: Option<Invalid>,
}

impl<T> Entry<T> {
    fn valid((key, value): (ObjectKey, T)) -> Entry<T> {
        Entry {
            key,
            value,
            invalid: None,
        }
    }
}

/// Why an object is left out, at which version.
struct Invalid {
    version: String,
    reason: String,
}

/// How the object is named in a warning: `namespace/name`, or `name`.
fn object_name(key: &ObjectKey) -> String {
    if key.namespace.is_empty() {
        key.name.clone()
    } else {
        format!("{}/{}", key.namespace, key.name)
    }
}

/// How the items of one watched kind enter the informer.
trait Cached: Sized + Send + 'static {
    /// One change (`None`: deleted).
    fn apply(informer: &mut Informer, key: ObjectKey, object: Option<Self>);
    /// A relist of the kind.
    fn relist(informer: &mut Informer, group: &str, kind: &str, objects: Vec<(ObjectKey, Self)>);
}

/// Every kind but Pods: JSON, as the object store and the provider read it.
impl Cached for Arc<Value> {
    fn apply(informer: &mut Informer, key: ObjectKey, object: Option<Self>) {
        informer.apply(key, object);
    }
    fn relist(informer: &mut Informer, group: &str, kind: &str, objects: Vec<(ObjectKey, Self)>) {
        informer.replace_kind(group, kind, objects);
    }
}

/// Pods: converted, each into the allocation the informer keeps (`None`: not convertible,
/// dropped).
impl Cached for Option<Arc<Pod>> {
    fn apply(informer: &mut Informer, key: ObjectKey, object: Option<Self>) {
        informer.apply_pod_shared(key, object.flatten());
    }
    fn relist(informer: &mut Informer, _: &str, _: &str, objects: Vec<(ObjectKey, Self)>) {
        informer.replace_pods(objects);
    }
}

/// The object as cached: JSON with `apiVersion` and `kind`, without managed fields.
fn encode<K: Serialize>(o: &K) -> Option<(ObjectKey, Arc<Value>)> {
    let mut v = match serde_json::to_value(o) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(error = %e, "object not serializable; skipped");
            return None;
        }
    };
    if let Some(md) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        md.remove("managedFields");
    }
    match ObjectStore::key_of(&v, "watch") {
        Ok(k) => Some((k, Arc::new(v))),
        Err(e) => {
            tracing::warn!(error = %e, "object without identity; skipped");
            None
        }
    }
}

/// Whether a watcher error is the server answering `404` (the kind is not served).
fn not_found(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => crate::compat::is_not_found(e),
        watcher::Error::WatchError(s) => s.code == 404,
        watcher::Error::NoResourceVersion => false,
    }
}

/// Whether a watcher error is the server answering `403` (not allowed).
fn forbidden(e: &watcher::Error) -> bool {
    match e {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => matches!(e, kube::Error::Api(s) if s.code == 403),
        watcher::Error::WatchError(s) => s.code == 403,
        watcher::Error::NoResourceVersion => false,
    }
}

/// The longest error text a watch failure logs.
const MAX_ERROR_IN_LOG: usize = 1_000;

/// Notes a failed list or watch of `name` (retried by the watcher): a `404` is a needed API
/// possibly gone, or a reason to rediscover; for an optional kind a `404` or `403` only makes
/// it count as synced (empty).
fn watch_failed(shared: &Shared, name: &str, on_404: OnNotFound, error: &watcher::Error) {
    // A decoding error quotes the value it choked on, which a server can make any length.
    let e = crate::lenient::truncate(&error.to_string(), MAX_ERROR_IN_LOG);
    if on_404 == OnNotFound::Optional && (not_found(error) || forbidden(error)) {
        // A DRA kind not served (below Kubernetes 1.34): pods with claims cannot be simulated,
        // which the view must say rather than show a cluster without DRA objects.
        if let Some(kind) = name.strip_prefix(DRA_PREFIX)
            && not_found(error)
        {
            shared.lock().set_dra_served(kind, false);
        }
        if shared.pending.send_if_modified(|p| p.remove(name)) {
            tracing::warn!(kind = %name, error = %e, "optional kind not readable; decisions go on without it (storage capacity, DRA devices, capacity requests or infrastructure templates unknown)");
        } else {
            tracing::debug!(kind = %name, error = %e, "optional kind still not readable");
        }
        return;
    }
    if !not_found(error) {
        tracing::warn!(kind = %name, error = %e, "watch failed; retrying");
        return;
    }
    match on_404 {
        OnNotFound::Missing => {
            tracing::error!(kind = %name, error = %e, "the API server does not serve this kind, which the autoscaler needs; retrying");
            shared.api_not_found.notify_one();
        }
        OnNotFound::Rediscover => {
            tracing::debug!(kind = %name, error = %e, "kind not found; discovering again");
            shared.rediscover.notify_one();
        }
        OnNotFound::Optional => tracing::warn!(kind = %name, error = %e, "watch failed; retrying"),
    }
}

fn spawn_kind<K, T, F>(
    shared: &Shared,
    api: Api<Decoded<K>>,
    config: watcher::Config,
    group: String,
    kind: String,
    on_404: OnNotFound,
    encode: F,
) -> JoinHandle<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    T: Cached,
    F: Fn(K) -> Option<Entry<T>> + Send + 'static,
{
    let mut consumer = Consumer::new(shared, group, kind, on_404, encode);
    let (mut events, reader) = read_ahead(api, config, consumer.name.clone(), on_404);
    tokio::spawn(async move {
        let _reader = AbortOnDrop(reader);
        while let Some(event) = events.recv().await {
            consumer.take(event);
        }
    })
}

/// [`spawn_kind`] with the conversion on a thread of its own, for the kind whose list is
/// large (Pods): a reader task and a consumer task woken by it run on the same runtime worker
/// (tokio runs the woken task next on the waker's worker), so decoding and converting 450,000
/// pods took turns on one core while the other waited. A plain thread, not the runtime's
/// blocking pool: a blocking task that never ends would hold a paused test clock still.
/// Returns the reader's task (aborting it closes the channel, which ends the thread) and the
/// thread (`None` when none could be started: the conversion then runs as a task).
fn spawn_kind_on_thread<K, T, F>(
    shared: &Shared,
    api: Api<Decoded<K>>,
    config: watcher::Config,
    group: String,
    kind: String,
    encode: F,
) -> (JoinHandle<()>, Option<std::thread::JoinHandle<()>>)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    T: Cached,
    F: Fn(K) -> Option<Entry<T>> + Send + 'static,
{
    // The thread starts first, then receives its consumer: a failed start leaves both here.
    type Work<T, F, K> = (Consumer<T, F>, Events<Decoded<K>>);
    let (hand, receive) = std::sync::mpsc::sync_channel::<Work<T, F, K>>(1);
    let thread = std::thread::Builder::new()
        .name(format!("{kind}-conversion"))
        .spawn(move || {
            if let Ok((mut consumer, mut events)) = receive.recv() {
                while let Some(event) = events.blocking_recv() {
                    consumer.take(event);
                }
            }
        });
    let mut consumer = Consumer::new(shared, group, kind, OnNotFound::Missing, encode);
    let (mut events, reader) = read_ahead(api, config, consumer.name.clone(), OnNotFound::Missing);
    match thread {
        Ok(thread) => {
            // The thread waits for exactly this message, so the send cannot fail.
            let _ = hand.send((consumer, events));
            (reader, Some(thread))
        }
        Err(e) => {
            tracing::warn!(error = %e, "no thread for the conversion; it shares the runtime");
            let task = tokio::spawn(async move {
                let _reader = AbortOnDrop(reader);
                while let Some(event) = events.recv().await {
                    consumer.take(event);
                }
            });
            (task, None)
        }
    }
}

/// A kind's watch events as its reader hands them over.
type Events<K> = tokio::sync::mpsc::Receiver<Result<Event<K>, watcher::Error>>;

/// Takes one kind's watch events into the informer: changes one by one, a relist at once when
/// its list is complete; marks the kind synced then.
struct Consumer<T, F> {
    shared: Shared,
    group: String,
    kind: String,
    /// `group/kind`, as the sync state names it.
    name: String,
    on_404: OnNotFound,
    encode: F,
    /// The objects of a list in progress.
    buffer: Vec<(ObjectKey, T)>,
    /// The objects of a list in progress left out (as [`object_name`] names them).
    skipped_in_list: Vec<String>,
}

impl<T: Cached, F> Consumer<T, F> {
    fn new(shared: &Shared, group: String, kind: String, on_404: OnNotFound, encode: F) -> Self {
        let name = format!("{group}/{kind}");
        shared.pending.send_modify(|p| {
            p.insert(name.clone());
        });
        Consumer {
            shared: shared.clone(),
            group,
            kind,
            name,
            on_404,
            encode,
            buffer: Vec::new(),
            skipped_in_list: Vec::new(),
        }
    }

    fn take<K>(&mut self, event: Result<Event<Decoded<K>>, watcher::Error>)
    where
        K: Resource,
        F: Fn(K) -> Option<Entry<T>>,
    {
        let changed = match event {
            Ok(Event::Apply(o)) => self.object(o).map(|(key, value, invalid)| {
                self.note(&key, invalid.as_ref());
                T::apply(&mut self.shared.lock(), key, value);
            }),
            Ok(Event::Delete(o)) => self.object(o).map(|(key, _, _)| {
                self.note(&key, None);
                T::apply(&mut self.shared.lock(), key, None);
            }),
            Ok(Event::Init) => {
                self.buffer.clear();
                self.skipped_in_list.clear();
                None
            }
            Ok(Event::InitApply(o)) => {
                if let Some((key, value, invalid)) = self.object(o) {
                    self.note(&key, invalid.as_ref());
                    if invalid.is_some() {
                        self.skipped_in_list.push(object_name(&key));
                    }
                    self.buffer.extend(value.map(|v| (key, v)));
                }
                None
            }
            Ok(Event::InitDone) => {
                let objects = std::mem::take(&mut self.buffer);
                let skipped = std::mem::take(&mut self.skipped_in_list);
                self.shared.skipped.relisted(&self.kind, &skipped);
                let shared = &self.shared;
                {
                    let mut informer = shared.lock();
                    T::relist(&mut informer, &self.group, &self.kind, objects);
                    if self.group == autoscaler_model::DRA_GROUP {
                        informer.set_dra_served(&self.kind, true);
                    }
                }
                shared.pending.send_if_modified(|p| p.remove(&self.name));
                Some(())
            }
            Err(e) => {
                watch_failed(&self.shared, &self.name, self.on_404, &e);
                None
            }
        };
        let shared = &self.shared;
        if changed.is_some() && shared.lock().has_news() {
            shared.new_unschedulable.notify_one();
        }
    }

    /// One listed or watched object: its key, what to cache (`None`: nothing, it did not
    /// decode) and why it is left out, if it is. `None` for an object without identity.
    fn object<K>(&self, o: Decoded<K>) -> Option<(ObjectKey, Option<T>, Option<Invalid>)>
    where
        F: Fn(K) -> Option<Entry<T>>,
    {
        match o {
            Decoded::Object(o) => (self.encode)(o).map(|e| (e.key, Some(e.value), e.invalid)),
            Decoded::Undecodable(u) => self.undecodable(*u),
        }
    }

    /// The key of an object that did not decode, and why: its cached form is dropped (a relist
    /// would not hold it either).
    fn undecodable(&self, u: Undecodable) -> Option<(ObjectKey, Option<T>, Option<Invalid>)> {
        let invalid = Invalid {
            version: u.meta.resource_version.clone().unwrap_or_default(),
            reason: u.reason(),
        };
        let Some(name) = u.meta.name else {
            self.shared
                .skipped
                .skipped(&self.kind, "(unnamed)", &invalid.version, &invalid.reason);
            return None;
        };
        let key = ObjectKey {
            group: self.group.clone(),
            kind: self.kind.clone(),
            namespace: u.meta.namespace.unwrap_or_default(),
            name,
        };
        Some((key, None, Some(invalid)))
    }

    /// Notes whether the object at `key` is left out now.
    fn note(&self, key: &ObjectKey, invalid: Option<&Invalid>) {
        let skipped = &self.shared.skipped;
        match invalid {
            Some(i) => {
                skipped.skipped(&self.kind, &object_name(key), &i.version, &i.reason);
            }
            None if !skipped.is_empty() => skipped.cleared(&self.kind, &object_name(key)),
            None => {}
        }
    }
}

/// How many events a kind's reader may run ahead of their conversion: two list pages of 500.
const READ_AHEAD: usize = 1_000;

/// Aborts the task when dropped: the reader of a watch ends with the task that consumes it.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Runs the watcher of `api` on a task of its own, at most [`READ_AHEAD`] events ahead of the
/// consumer, so that the next list page (or the next events of a streaming list) is fetched and
/// decoded while this one is converted and cached: one task doing both left one core idle for
/// most of a long list. Order is kept; the caller aborts the returned task when its consumer
/// ends.
///
/// A streaming list (`sendInitialEvents`) that the server refuses (`422` or `400`: no
/// `WatchList` feature, as in Kubernetes 1.33 by default and before 1.32) falls back to listing
/// in pages, as client-go's reflector does.
///
/// A failed list or watch is retried after an exponential backoff ([`backoff_of`]) reset only
/// by progress (an object, or a list completed): kube's stream backoff was reset by the
/// `Init` marker each list attempt starts with, so a list failing for good was retried every
/// second or so forever.
fn read_ahead<K>(
    api: Api<K>,
    config: watcher::Config,
    name: String,
    on_404: OnNotFound,
) -> (Events<K>, JoinHandle<()>)
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(READ_AHEAD);
    let reader = tokio::spawn(async move {
        let mut config = config;
        let mut backoff = backoff_of(on_404);
        loop {
            let streaming = config.initial_list_strategy == InitialListStrategy::StreamingList;
            let stream = watcher(api.clone(), config.clone());
            let mut stream = std::pin::pin!(stream);
            let mut refused = false;
            while let Some(event) = stream.next().await {
                if streaming && refuses_streaming(&event) {
                    refused = true;
                    break;
                }
                let failed = event.is_err();
                let progressed = matches!(&event, Ok(e) if !matches!(e, Event::Init));
                if tx.send(event).await.is_err() {
                    return;
                }
                if failed {
                    if let Some(wait) = backoff.next() {
                        tokio::time::sleep(wait).await;
                    }
                } else if progressed {
                    backoff.reset();
                }
            }
            if !refused {
                return;
            }
            tracing::info!(
                kind = %name,
                "the API server does not serve streaming lists; listing in pages"
            );
            config.initial_list_strategy = InitialListStrategy::ListWatch;
        }
    });
    (rx, reader)
}

/// The longest wait between retries of a kind the autoscaler needs: client-go's reflector
/// backs off from 800 ms to 30 s.
pub const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// The longest wait between retries of an optional kind (one the server may never serve).
pub const MAX_OPTIONAL_BACKOFF: Duration = Duration::from_secs(5 * 60);

/// The retry backoff of a kind: from 800 ms, doubling with jitter, to [`MAX_BACKOFF`]
/// ([`MAX_OPTIONAL_BACKOFF`] for an optional kind).
fn backoff_of(on_404: OnNotFound) -> watcher::ExponentialBackoff {
    let max = match on_404 {
        OnNotFound::Optional => MAX_OPTIONAL_BACKOFF,
        OnNotFound::Missing | OnNotFound::Rediscover => MAX_BACKOFF,
    };
    let builder = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(800))
        .with_max_delay(max)
        .with_factor(2.0)
        .with_jitter()
        .without_max_times();
    watcher::ExponentialBackoff::from(builder)
}

/// Whether the server refused to start a streaming list (`422`/`400` on the watch request).
fn refuses_streaming<K>(event: &Result<Event<K>, watcher::Error>) -> bool {
    matches!(event, Err(watcher::Error::WatchStartFailed(kube::Error::Api(s))) if s.code == 422 || s.code == 400)
}

/// A Node as cached: without its image list (never read, and often the bulk of a Node).
pub fn strip_node(mut node: api::Node) -> api::Node {
    if let Some(s) = node.status.as_mut() {
        s.images = None;
    }
    node
}

/// What the watches make of a decoded Pod: `None` without identity, else whether the model
/// takes it (for the fuzz suite).
#[cfg(test)]
pub(crate) fn fuzz_entry_pod(p: SlimPod) -> Option<bool> {
    pod_entry(p).map(|e| e.invalid.is_none())
}

/// [`fuzz_entry_pod`] for a Node.
#[cfg(test)]
pub(crate) fn fuzz_entry_node(n: api::Node) -> Option<bool> {
    fuzz_entry(strip_node(n), check_node)
}

/// [`fuzz_entry_pod`] for a kind cached as JSON and checked by `check`.
#[cfg(test)]
pub(crate) fn fuzz_entry<K: Serialize>(o: K, check: fn(&K) -> Result<(), String>) -> Option<bool> {
    let ok = check(&o).is_ok();
    encode(&o).map(|_| ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::Node;
    use autoscaler_model::Pod;
    use futures::FutureExt;
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::json;
    use std::time::Duration;

    fn rich_pod() -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                "generateName": "p-", "finalizers": ["x"],
                "labels": {"app": "a"}, "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                    "uid": "r1", "controller": true}],
                "creationTimestamp": "2024-01-01T00:00:00Z",
                "deletionTimestamp": "2024-01-01T01:00:00Z", "deletionGracePeriodSeconds": 30,
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
            "spec": {
                "nodeName": "n1", "priority": 1000, "priorityClassName": "high",
                "terminationGracePeriodSeconds": 45, "serviceAccountName": "sa",
                "nodeSelector": {"zone": "a"},
                "overhead": {"cpu": "10m"},
                "resources": {"limits": {"memory": "2Gi"}},
                "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}],
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]},
                        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1,
                            "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}}]},
                    "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": "kubernetes.io/hostname"}]}},
                "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone",
                    "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "a"}},
                    "matchLabelKeys": ["app"]}],
                "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
                    {"name": "cfg", "configMap": {"name": "c"}},
                    {"name": "host", "hostPath": {"path": "/var"}}],
                "initContainers": [{"name": "side", "image": "i", "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "100m"}}},
                    {"name": "init", "image": "i", "command": ["sh"],
                    "resources": {"requests": {"cpu": "2"}}}],
                "containers": [{"name": "c", "image": "img", "env": [{"name": "A", "value": "B"}],
                    "args": ["--x"], "livenessProbe": {"exec": {"command": ["true"]}},
                    "volumeMounts": [{"name": "cfg", "mountPath": "/c"}],
                    "ports": [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"},
                        {"containerPort": 9090, "name": "metrics"}],
                    "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1"}}}]},
            "status": {"phase": "Running", "hostIP": "10.0.0.1", "podIP": "10.1.0.1",
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2024-01-01T00:00:01Z",
                        "message": "m", "lastProbeTime": null},
                    {"type": "PodResizePending", "status": "True", "reason": "Deferred"}],
                "containerStatuses": [{"name": "c", "image": "img", "imageID": "sha", "ready": true,
                    "restartCount": 3, "state": {"running": {"startedAt": "2024-01-01T00:00:02Z"}},
                    "allocatedResources": {"cpu": "700m", "memory": "1Gi"},
                    "resources": {"requests": {"cpu": "600m", "memory": "1Gi"}}}]}})
    }

    #[test]
    fn pods_are_converted_on_arrival_and_never_cached_as_json() {
        let full: api::Pod = serde_json::from_value(rich_pod()).expect("valid pod");
        let want = Pod::from_k8s(&full).expect("converts");
        let slim: SlimPod = serde_json::from_value(rich_pod()).expect("valid pod");
        let entry = pod_entry(slim).expect("a pod with an identity");
        assert!(entry.invalid.is_none());
        let mut informer = Informer::new();
        <Option<Arc<Pod>> as Cached>::relist(
            &mut informer,
            "",
            "Pod",
            vec![(entry.key, entry.value)],
        );
        assert_eq!(informer.pods().len(), 1);
        assert_eq!(**informer.pod("ns", "p").expect("cached"), want);
        assert!(
            informer.store().list("", "Pod").next().is_none(),
            "no JSON pod"
        );
    }

    #[test]
    fn managed_fields_and_node_images_are_not_cached() {
        let node: api::Node = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "n", "managedFields": [{"manager": "kubelet"}],
                "labels": {"a": "b"}},
            "spec": {"providerID": "p://n"},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                "images": [{"names": ["big"], "sizeBytes": 1}]}}))
        .expect("valid node");
        let want = Node::from_k8s(&node).expect("converts");
        let (_, cached) = encode(&strip_node(node)).expect("encodes");
        let back: api::Node = serde_json::from_value((*cached).clone()).expect("decodes");
        assert_eq!(Node::from_k8s(&back).expect("converts"), want);
        assert!(cached.pointer("/metadata/managedFields").is_none());
        assert!(cached.pointer("/status/images").is_none());
        assert_eq!(cached["kind"], "Node");
    }

    type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

    fn mock() -> (kube::Client, Handle) {
        let (svc, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        (kube::Client::new(svc, "default"), handle)
    }

    fn reply(send: tower_test::mock::SendResponse<Response<Body>>, v: &Value) {
        let body = serde_json::to_vec(v).expect("json");
        send.send_response(
            Response::builder()
                .status(200)
                .body(Body::from(body))
                .expect("response"),
        );
    }

    #[tokio::test]
    async fn every_kind_is_listed_then_watched_and_the_informer_fills() {
        let (client, mut handle) = mock();
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = seen.clone();
        let server = tokio::spawn(async move {
            // Watch requests are held open (their senders kept) so the watchers stay quiet.
            let mut open = Vec::new();
            while let Some((req, send)) = handle.next_request().await {
                assert_eq!(req.method(), http::Method::GET);
                let uri = req.uri().to_string();
                log.lock().expect("log").push(uri.clone());
                // A server without streaming lists (as Kubernetes 1.33 by default).
                if uri.contains("sendInitialEvents=true") {
                    refuse(send, 422);
                    continue;
                }
                if uri.contains("watch=true") {
                    open.push(send);
                    continue;
                }
                let path = req.uri().path();
                let items = match path {
                    "/api/v1/pods" => vec![json!({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": "p", "namespace": "default", "managedFields": []},
                        "spec": {"containers": [{"name": "c", "image": "i"}]},
                        "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled",
                            "status": "False", "reason": "Unschedulable"}]}})],
                    "/api/v1/nodes" => vec![json!({"metadata": {"name": "n1"},
                        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}})],
                    "/apis/cluster.x-k8s.io/v1beta1/machinedeployments" => {
                        vec![json!({"metadata": {"name": "md", "namespace": "ns"},
                            "spec": {"replicas": 1}})]
                    }
                    _ => Vec::new(),
                };
                reply(
                    send,
                    &json!({"apiVersion": "v1", "kind": "List",
                    "metadata": {"resourceVersion": "10"}, "items": items}),
                );
            }
        });
        let md = ApiResource {
            group: "cluster.x-k8s.io".into(),
            version: "v1beta1".into(),
            api_version: "cluster.x-k8s.io/v1beta1".into(),
            kind: "MachineDeployment".into(),
            plural: "machinedeployments".into(),
        };
        let config = WatchConfig::new("kube-system", ClusterApiConfig::default());
        let watches = start_with(&Clients::joined(client), &config, vec![md]);
        tokio::time::timeout(Duration::from_secs(10), watches.wait_synced())
            .await
            .expect("synced");
        assert!(watches.is_synced());
        tokio::time::timeout(
            Duration::from_secs(10),
            watches.new_unschedulable().notified(),
        )
        .await
        .expect("the unschedulable pod is signalled");
        {
            let mut inf = watches.informer().lock().expect("informer");
            assert_eq!(inf.pods().len(), 1);
            assert!(inf.take_new_unschedulable());
            assert_eq!(inf.objects_without_pods().nodes.len(), 1);
            let key = ObjectKey {
                group: "cluster.x-k8s.io".into(),
                kind: "MachineDeployment".into(),
                namespace: "ns".into(),
                name: "md".into(),
            };
            let cached = inf
                .store()
                .get(&key)
                .expect("the MachineDeployment is cached");
            assert_eq!(cached["apiVersion"], "cluster.x-k8s.io/v1beta1");
        }
        // Each list is followed by a watch from its resourceVersion; wait for the last watches.
        let paths = [
            "/api/v1/namespaces/kube-system/configmaps?&fieldSelector=metadata.name%3Dcluster-autoscaler-priority-expander&",
            "/api/v1/namespaces?&",
            "/api/v1/nodes?&",
            "/api/v1/persistentvolumeclaims?&",
            "/api/v1/persistentvolumes?&",
            "/api/v1/pods?&",
            "/api/v1/replicationcontrollers?&",
            "/apis/apps/v1/daemonsets?&",
            "/apis/apps/v1/replicasets?&",
            "/apis/apps/v1/statefulsets?&",
            "/apis/batch/v1/jobs?&",
            "/apis/cluster.x-k8s.io/v1beta1/machinedeployments?&",
            "/apis/policy/v1/poddisruptionbudgets?&",
            "/apis/resource.k8s.io/v1/deviceclasses?&",
            "/apis/resource.k8s.io/v1/resourceclaims?&",
            "/apis/resource.k8s.io/v1/resourceclaimtemplates?&",
            "/apis/resource.k8s.io/v1/resourceslices?&",
            "/apis/storage.k8s.io/v1/csidrivers?&",
            "/apis/storage.k8s.io/v1/csinodes?&",
            "/apis/storage.k8s.io/v1/csistoragecapacities?&",
            "/apis/storage.k8s.io/v1/storageclasses?&",
        ];
        let mut want: Vec<String> = Vec::new();
        for p in paths {
            let (base, selector) = match p.split_once("?&") {
                Some((b, rest)) => (b, rest),
                None => (p, ""),
            };
            let sel = selector.trim_end_matches('&');
            let (list_sel, watch_sel) = if sel.is_empty() {
                (String::new(), String::new())
            } else {
                (format!("{sel}&"), format!("&{sel}"))
            };
            want.push(format!("{base}?&{list_sel}limit=500"));
            want.push(format!(
                "{base}?&watch=true&timeoutSeconds=290{watch_sel}&allowWatchBookmarks=true&resourceVersion=10"
            ));
        }
        want.sort();
        let got = tokio::time::timeout(Duration::from_secs(10), async {
            loop {
                let got = seen.lock().expect("log").clone();
                if got.len() >= want.len() {
                    return got;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .expect("every kind watched");
        let mut got = got;
        got.sort();
        // Pods first asked for a streaming list, refused; then listed in pages as the rest.
        let streaming: Vec<String> = got
            .iter()
            .filter(|u| u.contains("sendInitialEvents=true"))
            .cloned()
            .collect();
        assert_eq!(streaming.len(), 1, "{streaming:?}");
        assert!(streaming[0].starts_with("/api/v1/pods?"), "{streaming:?}");
        assert!(streaming[0].contains("resourceVersionMatch=NotOlderThan"));
        got.retain(|u| !u.contains("sendInitialEvents=true"));
        assert_eq!(got, want);
        drop(watches);
        server.abort();
    }

    /// A watch event line as the API server writes it: `type` first, then `object` (what the
    /// watches' object-by-object decoding reads; `json!` would sort `object` first).
    fn event_line(kind: &str, object: &Value) -> String {
        format!("{{\"type\":\"{kind}\",\"object\":{object}}}\n")
    }

    fn refuse(send: tower_test::mock::SendResponse<Response<Body>>, code: u16) {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "reason": "Invalid", "code": code,
            "message": "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"});
        send.send_response(
            Response::builder()
                .status(code)
                .body(Body::from(serde_json::to_vec(&status).expect("json")))
                .expect("response"),
        );
    }

    #[tokio::test]
    async fn pods_come_as_a_streaming_list_where_the_server_serves_one() {
        let (client, mut handle) = mock();
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = seen.clone();
        let server = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Some((req, send)) = handle.next_request().await {
                let uri = req.uri().to_string();
                log.lock().expect("log").push(uri.clone());
                if uri.starts_with("/api/v1/pods?") && uri.contains("sendInitialEvents=true") {
                    let pod = |name: &str| {
                        event_line(
                            "ADDED",
                            &json!({"apiVersion": "v1",
                        "kind": "Pod", "metadata": {"name": name, "namespace": "default",
                            "resourceVersion": "5"},
                        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "i",
                            "resources": {"requests": {"cpu": "1"}}}]},
                        "status": {"phase": "Running"}}),
                        )
                    };
                    let end = event_line(
                        "BOOKMARK",
                        &json!({"apiVersion": "v1",
                        "kind": "Pod", "metadata": {"resourceVersion": "10",
                            "annotations": {"k8s.io/initial-events-end": "true"}}}),
                    );
                    let body: String = [pod("a"), pod("b"), end].concat();
                    send.send_response(
                        Response::builder()
                            .status(200)
                            .body(Body::from(body.into_bytes()))
                            .expect("response"),
                    );
                } else {
                    answer_rest(&uri, send, &mut open, "10");
                }
            }
        });
        let config = WatchConfig::new("kube-system", ClusterApiConfig::default());
        let watches = start_with(&Clients::joined(client), &config, Vec::new());
        tokio::time::timeout(Duration::from_secs(10), watches.wait_synced())
            .await
            .expect("synced");
        {
            let mut inf = watches.informer().lock().expect("informer");
            let names: Vec<&str> = inf.pods().iter().map(|p| p.name.as_ref()).collect();
            assert_eq!(names, ["a", "b"]);
        }
        let got = seen.lock().expect("log").clone();
        assert!(
            !got.iter()
                .any(|u| u.starts_with("/api/v1/pods?") && u.contains("limit=")),
            "pods were not listed in pages: {got:?}"
        );
        drop(watches);
        server.abort();
    }

    /// The pods' conversion thread fills the informer and ends once its reader is aborted (as
    /// dropping the watches does), instead of waiting on the channel forever.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_pod_conversion_thread_syncs_and_ends_with_its_reader() {
        let (client, handle) = mock();
        let (_seen, server) = empty_server(handle);
        let shared = Shared::new(Arc::new(SkippedObjects::default()));
        let (reader, thread) = spawn_kind_on_thread(
            &shared,
            Api::<Decoded<SlimPod>>::all(client),
            watcher::Config::default(),
            String::new(),
            "Pod".into(),
            pod_entry,
        );
        let mut pending = shared.pending.subscribe();
        tokio::time::timeout(Duration::from_secs(10), pending.wait_for(|p| p.is_empty()))
            .await
            .expect("the empty pod list synced")
            .expect("sync state");
        reader.abort();
        let thread = thread.expect("a thread of its own");
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !thread.is_finished() {
            assert!(
                std::time::Instant::now() < deadline,
                "the conversion thread ended"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        thread.join().expect("without a panic");
        server.abort();
    }

    /// Answers every list with no items and holds watches open; returns the paths asked.
    /// What a test server without the WatchList feature answers when no case of its own
    /// applies: a streaming list is refused (422), a watch is held open in `open`, any other
    /// list is empty at resource version `rv`.
    fn answer_rest(uri: &str, send: Respond, open: &mut Vec<Respond>, rv: &str) {
        if uri.contains("sendInitialEvents=true") {
            refuse(send, 422);
        } else if uri.contains("watch=true") {
            open.push(send);
        } else {
            reply(
                send,
                &json!({"apiVersion": "v1", "kind": "List",
                    "metadata": {"resourceVersion": rv}, "items": []}),
            );
        }
    }

    type Respond = tower_test::mock::SendResponse<Response<Body>>;

    fn empty_server(mut handle: Handle) -> (Arc<Mutex<Vec<String>>>, JoinHandle<()>) {
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = seen.clone();
        let task = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Some((req, send)) = handle.next_request().await {
                let uri = req.uri().to_string();
                log.lock().expect("log").push(uri.clone());
                answer_rest(&uri, send, &mut open, "1");
            }
        });
        (seen, task)
    }

    #[tokio::test]
    async fn cluster_api_kinds_come_from_the_management_cluster_in_the_discovered_namespace() {
        let (workload, wh) = mock();
        let (management, mh) = mock();
        let (w_seen, w_task) = empty_server(wh);
        let (m_seen, m_task) = empty_server(mh);
        let capi = ClusterApiConfig::default()
            .with_auto_discovery(&["clusterapi:namespace=capi-ns,clusterName=c1"])
            .expect("valid");
        let config = WatchConfig::new("kube-system", capi);
        let machines = ApiResource {
            group: "cluster.x-k8s.io".into(),
            version: "v1beta1".into(),
            api_version: "cluster.x-k8s.io/v1beta1".into(),
            kind: "Machine".into(),
            plural: "machines".into(),
        };
        let clients = Clients {
            workload,
            management,
        };
        let watches = start_with(&clients, &config, vec![machines]);
        tokio::time::timeout(Duration::from_secs(10), watches.wait_synced())
            .await
            .expect("synced");
        let m = m_seen.lock().expect("log").clone();
        let w = w_seen.lock().expect("log").clone();
        assert!(!m.is_empty());
        assert!(
            m.iter()
                .all(|u| u
                    .starts_with("/apis/cluster.x-k8s.io/v1beta1/namespaces/capi-ns/machines?")),
            "{m:?}"
        );
        assert!(w.iter().any(|u| u.starts_with("/api/v1/nodes?")), "{w:?}");
        assert!(w.iter().all(|u| !u.contains("cluster.x-k8s.io")), "{w:?}");
        drop(watches);
        w_task.abort();
        m_task.abort();
    }

    #[tokio::test]
    async fn discovery_finds_the_preferred_versions_and_skips_what_is_not_served() {
        let (client, mut handle) = mock();
        let server = tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some((req, send)) = handle.next_request().await {
                assert_eq!(req.method(), http::Method::GET);
                let uri = req.uri().to_string();
                seen.push(uri.clone());
                let body = match uri.as_str() {
                    "/apis" => json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                        {"name": "cluster.x-k8s.io",
                         "versions": [{"groupVersion": "cluster.x-k8s.io/v1beta1", "version": "v1beta1"},
                                      {"groupVersion": "cluster.x-k8s.io/v1alpha4", "version": "v1alpha4"}],
                         "preferredVersion": {"groupVersion": "cluster.x-k8s.io/v1beta1", "version": "v1beta1"}}]}),
                    "/apis/cluster.x-k8s.io/v1beta1" => json!({"kind": "APIResourceList",
                        "apiVersion": "v1", "groupVersion": "cluster.x-k8s.io/v1beta1", "resources": [
                        {"name": "machinedeployments", "singularName": "machinedeployment", "namespaced": true,
                         "kind": "MachineDeployment", "verbs": ["get", "list", "watch", "patch"]},
                        {"name": "machinedeployments/scale", "singularName": "", "namespaced": true,
                         "kind": "Scale", "verbs": ["get", "patch"]},
                        {"name": "machinesets", "singularName": "machineset", "namespaced": true,
                         "kind": "MachineSet", "verbs": ["get", "list", "watch"]},
                        {"name": "machines", "singularName": "machine", "namespaced": true,
                         "kind": "Machine", "verbs": ["get", "list", "watch"]}]}),
                    "/apis/cluster.x-k8s.io/v1alpha4" => json!({"kind": "APIResourceList",
                        "apiVersion": "v1", "groupVersion": "cluster.x-k8s.io/v1alpha4", "resources": [
                        {"name": "machines", "singularName": "machine", "namespaced": true,
                         "kind": "Machine", "verbs": ["get", "list", "watch"]}]}),
                    other => panic!("unexpected request {other}"),
                };
                reply(send, &body);
            }
            seen
        });
        let found = discover_clusterapi(&client, &ClusterApiConfig::default())
            .await
            .expect("discovered");
        let kinds: Vec<(String, String)> = found
            .iter()
            .map(|ar| (ar.api_version.clone(), ar.plural.clone()))
            .collect();
        assert_eq!(
            kinds,
            [
                (
                    "cluster.x-k8s.io/v1beta1".to_string(),
                    "machinedeployments".to_string()
                ),
                ("cluster.x-k8s.io/v1beta1".into(), "machinesets".into()),
                ("cluster.x-k8s.io/v1beta1".into(), "machines".into()),
            ]
        );
        // CAPI_VERSION pins another served version: only its kinds, at that version.
        let pinned = ClusterApiConfig {
            api_version: Some("v1alpha4".into()),
            ..ClusterApiConfig::default()
        };
        let found = discover_clusterapi(&client, &pinned)
            .await
            .expect("discovered");
        let kinds: Vec<&str> = found.iter().map(|ar| ar.api_version.as_str()).collect();
        assert_eq!(kinds, ["cluster.x-k8s.io/v1alpha4"]);
        assert_eq!(found[0].kind, "Machine");
        drop(client);
        let seen = server.await.expect("server");
        assert_eq!(seen.iter().filter(|u| *u == "/apis").count(), 4, "{seen:?}");
    }

    /// `--cloud-provider=openshift`: both machine API groups are discovered.
    #[tokio::test]
    async fn openshift_mode_discovers_machine_api_and_cluster_api() {
        let (client, mut handle) = mock();
        let server = tokio::spawn(async move {
            let group = |g: &str| {
                json!({"name": g,
                    "versions": [{"groupVersion": format!("{g}/v1beta1"), "version": "v1beta1"}],
                    "preferredVersion": {"groupVersion": format!("{g}/v1beta1"), "version": "v1beta1"}})
            };
            let kinds = |g: &str| {
                json!({"kind": "APIResourceList", "apiVersion": "v1",
                    "groupVersion": format!("{g}/v1beta1"), "resources": [
                    {"name": "machinesets", "singularName": "machineset", "namespaced": true,
                     "kind": "MachineSet", "verbs": ["get", "list", "watch"]},
                    {"name": "machines", "singularName": "machine", "namespaced": true,
                     "kind": "Machine", "verbs": ["get", "list", "watch"]}]})
            };
            while let Some((req, send)) = handle.next_request().await {
                let body = match req.uri().path() {
                    "/apis" => json!({"kind": "APIGroupList", "apiVersion": "v1",
                        "groups": [group("machine.openshift.io"), group("cluster.x-k8s.io")]}),
                    "/apis/machine.openshift.io/v1beta1" => kinds("machine.openshift.io"),
                    "/apis/cluster.x-k8s.io/v1beta1" => kinds("cluster.x-k8s.io"),
                    other => panic!("unexpected request {other}"),
                };
                reply(send, &body);
            }
        });
        let config = ClusterApiConfig {
            openshift: true,
            ..ClusterApiConfig::default()
        };
        let found = discover_clusterapi(&client, &config)
            .await
            .expect("discovered");
        let kinds: Vec<String> = (found.iter())
            .map(|ar| format!("{}/{}", ar.api_version, ar.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                "machine.openshift.io/v1beta1/MachineSet",
                "machine.openshift.io/v1beta1/Machine",
                "cluster.x-k8s.io/v1beta1/MachineSet",
                "cluster.x-k8s.io/v1beta1/Machine",
            ]
        );
        drop(client);
        server.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_failing_kind_keeps_the_watches_unsynced_until_it_lists() {
        let (client, mut handle) = mock();
        let jobs_ok = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let jobs_failed = Arc::new(Notify::new());
        let (ok, failed) = (jobs_ok.clone(), jobs_failed.clone());
        let server = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Some((req, send)) = handle.next_request().await {
                let uri = req.uri().to_string();
                if uri.contains("sendInitialEvents=true") {
                    refuse(send, 422);
                    continue;
                }
                if uri.contains("watch=true") {
                    open.push(send);
                } else if uri.starts_with("/apis/batch/v1/jobs")
                    && !ok.load(std::sync::atomic::Ordering::SeqCst)
                {
                    let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "message": "boom", "reason": "InternalError", "code": 500});
                    send.send_response(
                        Response::builder()
                            .status(500)
                            .body(Body::from(serde_json::to_vec(&body).expect("json")))
                            .expect("response"),
                    );
                    failed.notify_one();
                } else {
                    reply(
                        send,
                        &json!({"apiVersion": "v1", "kind": "List",
                        "metadata": {"resourceVersion": "1"}, "items": []}),
                    );
                }
            }
        });
        let config = WatchConfig::new("kube-system", ClusterApiConfig::default());
        let watches = start_with(&Clients::joined(client), &config, Vec::new());
        // Let the first Job list fail and every other kind sync.
        jobs_failed.notified().await;
        jobs_failed.notified().await;
        until("every other kind synced", || {
            watches.unsynced().into_iter().collect::<Vec<_>>() == ["batch/Job"]
        })
        .await;
        assert!(!watches.is_synced());
        jobs_ok.store(true, std::sync::atomic::Ordering::SeqCst);
        tokio::time::timeout(Duration::from_secs(600), watches.wait_synced())
            .await
            .expect("synced once the Job list succeeds");
        assert!(watches.is_synced());
        drop(watches);
        server.abort();
    }

    fn not_found_reply(send: tower_test::mock::SendResponse<Response<Body>>) {
        let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "the server could not find the requested resource", "reason": "NotFound",
            "code": 404});
        send.send_response(
            Response::builder()
                .status(404)
                .body(Body::from(serde_json::to_vec(&body).expect("json")))
                .expect("response"),
        );
    }

    fn capi_group_list(served: bool) -> Value {
        let groups = if served {
            vec![json!({"name": "cluster.x-k8s.io",
                "versions": [{"groupVersion": "cluster.x-k8s.io/v1beta1", "version": "v1beta1"}],
                "preferredVersion": {"groupVersion": "cluster.x-k8s.io/v1beta1", "version": "v1beta1"}})]
        } else {
            Vec::new()
        };
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    fn md_key() -> ObjectKey {
        ObjectKey {
            group: "cluster.x-k8s.io".into(),
            kind: "MachineDeployment".into(),
            namespace: "ns".into(),
            name: "md".into(),
        }
    }

    async fn until(what: &str, mut cond: impl FnMut() -> bool) {
        for _ in 0..1000 {
            if cond() {
                return;
            }
            // The pods' conversion runs on a thread of its own, outside a paused clock: give
            // it real time too.
            std::thread::sleep(Duration::from_millis(2));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("timed out waiting for {what}");
    }

    #[tokio::test(start_paused = true)]
    async fn a_group_installed_later_is_watched_and_one_removed_leaves_the_view() {
        let (client, mut handle) = mock();
        let served = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let on = served.clone();
        let server = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Some((req, send)) = handle.next_request().await {
                let uri = req.uri().to_string();
                let path = req.uri().path().to_string();
                let capi = on.load(std::sync::atomic::Ordering::SeqCst);
                if path == "/apis" {
                    reply(send, &capi_group_list(capi));
                } else if path == "/apis/cluster.x-k8s.io/v1beta1" && capi {
                    reply(
                        send,
                        &json!({"kind": "APIResourceList", "apiVersion": "v1",
                        "groupVersion": "cluster.x-k8s.io/v1beta1", "resources": [
                        {"name": "machinedeployments", "singularName": "machinedeployment",
                         "namespaced": true, "kind": "MachineDeployment",
                         "verbs": ["get", "list", "watch"]}]}),
                    );
                } else if path.starts_with("/apis/cluster.x-k8s.io/") && !capi {
                    not_found_reply(send);
                } else if uri.contains("sendInitialEvents=true") {
                    refuse(send, 422);
                } else if uri.contains("watch=true") {
                    open.push(send);
                } else {
                    let items = if path == "/apis/cluster.x-k8s.io/v1beta1/machinedeployments" {
                        vec![json!({"metadata": {"name": "md", "namespace": "ns"},
                            "spec": {"replicas": 1}})]
                    } else {
                        Vec::new()
                    };
                    reply(
                        send,
                        &json!({"apiVersion": "v1", "kind": "List",
                        "metadata": {"resourceVersion": "1"}, "items": items}),
                    );
                }
            }
        });
        let config = WatchConfig::new("kube-system", ClusterApiConfig::default());
        let mut watches = start_with(&Clients::joined(client.clone()), &config, Vec::new());
        watches.keep_discovering(client, config);
        watches.wait_synced().await;
        assert!(watches.dynamic_kinds().is_empty());

        // The CRDs are installed: within the short interval the kind is watched and listed.
        served.store(true, std::sync::atomic::Ordering::SeqCst);
        let informer = watches.informer().clone();
        let has_md = move || {
            autoscaler_actuation::lock_informer(&informer)
                .store()
                .get(&md_key())
                .is_some()
        };
        until("the MachineDeployment", has_md.clone()).await;
        assert_eq!(
            watches.dynamic_kinds(),
            BTreeSet::from(["cluster.x-k8s.io/MachineDeployment".to_string()])
        );
        assert!(watches.is_synced());

        // The CRDs are removed: the kind is no longer watched and its objects are gone.
        served.store(false, std::sync::atomic::Ordering::SeqCst);
        until("the MachineDeployment to leave", || !has_md()).await;
        until("no dynamic kind", || watches.dynamic_kinds().is_empty()).await;
        assert!(watches.is_synced());
        drop(watches);
        server.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_needed_kind_answering_not_found_is_signalled() {
        let (client, mut handle) = mock();
        let server = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Some((req, send)) = handle.next_request().await {
                let uri = req.uri().to_string();
                if uri.starts_with("/apis/policy/v1/") {
                    not_found_reply(send);
                } else {
                    answer_rest(&uri, send, &mut open, "1");
                }
            }
        });
        let config = WatchConfig::new("kube-system", ClusterApiConfig::default());
        let watches = start_with(&Clients::joined(client), &config, Vec::new());
        tokio::time::timeout(Duration::from_secs(60), watches.api_not_found().notified())
            .await
            .expect("signalled");
        until("every other kind synced", || {
            watches.unsynced().into_iter().collect::<Vec<_>>() == ["policy/PodDisruptionBudget"]
        })
        .await;
        assert!(!watches.is_synced());
        drop(watches);
        server.abort();
    }

    fn status_reply(send: tower_test::mock::SendResponse<Response<Body>>, code: u16) {
        let body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "no", "reason": "Whatever", "code": code});
        send.send_response(
            Response::builder()
                .status(code)
                .body(Body::from(serde_json::to_vec(&body).expect("json")))
                .expect("response"),
        );
    }

    /// A server answering `code` for CSIStorageCapacities and CSIDrivers and serving one PVC and
    /// one CSINode.
    async fn storage_server(code: u16) -> (Watches, JoinHandle<()>, Arc<Notify>) {
        let (client, mut handle) = mock();
        let capacity_refused = Arc::new(Notify::new());
        let refused = capacity_refused.clone();
        let server = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Some((req, send)) = handle.next_request().await {
                let uri = req.uri().to_string();
                if uri.starts_with("/apis/storage.k8s.io/v1/csistoragecapacities") {
                    status_reply(send, code);
                    refused.notify_one();
                } else if uri.starts_with("/apis/storage.k8s.io/v1/csidrivers") {
                    status_reply(send, code);
                } else if uri.contains("sendInitialEvents=true") {
                    refuse(send, 422);
                } else if uri.contains("watch=true") {
                    open.push(send);
                } else {
                    let items = match req.uri().path() {
                        "/api/v1/persistentvolumeclaims" => vec![json!({
                            "metadata": {"name": "data-db-0", "namespace": "ns"},
                            "spec": {"storageClassName": "zonal",
                                "accessModes": ["ReadWriteOnce"],
                                "resources": {"requests": {"storage": "10Gi"}}}})],
                        "/apis/storage.k8s.io/v1/csinodes" => vec![json!({
                            "metadata": {"name": "n1"},
                            "spec": {"drivers": [{"name": "disk.csi.example.com",
                                "nodeID": "n1", "allocatable": {"count": 16}}]}})],
                        _ => Vec::new(),
                    };
                    reply(
                        send,
                        &json!({"apiVersion": "v1", "kind": "List",
                            "metadata": {"resourceVersion": "1"}, "items": items}),
                    );
                }
            }
        });
        let config = WatchConfig::new("kube-system", ClusterApiConfig::default());
        let watches = start_with(&Clients::joined(client), &config, Vec::new());
        (watches, server, capacity_refused)
    }

    #[tokio::test(start_paused = true)]
    async fn storage_kinds_are_cached_and_capacity_and_drivers_are_optional() {
        for code in [404, 403] {
            let (watches, server, refused) = storage_server(code).await;
            refused.notified().await;
            // Waited for in real time too: the pods' conversion runs on a thread of its own,
            // and with the capacities retried after a growing backoff nothing else keeps the
            // paused clock from jumping ahead.
            until("synced although capacities do not answer", || {
                watches.is_synced()
            })
            .await;
            assert!(
                watches.api_not_found().notified().now_or_never().is_none(),
                "an optional kind is not a missing API ({code})"
            );
            {
                let inf = watches.informer().lock().expect("informer");
                let store = inf.store();
                let pvcs: Vec<_> = store.list("", "PersistentVolumeClaim").collect();
                assert_eq!(pvcs.len(), 1, "{code}");
                let csi: Vec<_> = store.list("storage.k8s.io", "CSINode").collect();
                assert_eq!(csi.len(), 1, "{code}");
                assert_eq!(
                    csi[0].1.pointer("/spec/drivers/0/allocatable/count"),
                    Some(&json!(16))
                );
                for kind in ["CSIStorageCapacity", "CSIDriver"] {
                    assert_eq!(store.list("storage.k8s.io", kind).count(), 0, "{kind}");
                }
            }
            drop(watches);
            server.abort();
        }
    }

    fn dra_classes() -> Vec<Value> {
        let class = |name: &str, cel: &str| {
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": cel}}]}})
        };
        vec![
            class("gpu", "device.driver == 'gpu.example.com'"),
            class("bad-cel", "device.driver == "),
        ]
    }

    fn dra_slices() -> Vec<Value> {
        let slice = |name: &str, node: &str, devices: usize| {
            let devices: Vec<Value> = (0..devices)
                .map(|i| json!({"name": format!("gpu-{i}")}))
                .collect();
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                "metadata": {"name": name},
                "spec": {"driver": "gpu.example.com", "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices}})
        };
        let mut bad_quantity = slice("bad-quantity", "n3", 1);
        bad_quantity["spec"]["devices"][0]["capacity"] = json!({"memory": {"value": "12XYZ"}});
        vec![
            slice("good", "n1", 2),
            slice("too-many", "n2", 129),
            bad_quantity,
        ]
    }

    /// A server below Kubernetes 1.34 answers `404` (a Status body) for `resource.k8s.io/v1`:
    /// the watches sync, no API counts as missing, and the view says DRA is not served (a pod
    /// with claims then gets "cannot be simulated"). A server serving it, even with no object,
    /// gives a view where DRA is available.
    #[tokio::test(start_paused = true)]
    async fn dra_kinds_answering_404_make_the_view_say_dra_is_not_served() {
        for served in [false, true] {
            let (client, mut handle) = mock();
            let server = tokio::spawn(async move {
                let mut open = Vec::new();
                while let Some((req, send)) = handle.next_request().await {
                    let uri = req.uri().to_string();
                    if uri.starts_with("/apis/resource.k8s.io/v1/") && !served {
                        not_found_reply(send);
                    } else if uri.contains("sendInitialEvents=true") {
                        refuse(send, 422);
                    } else if uri.contains("watch=true") {
                        open.push(send);
                    } else {
                        let items = match req.uri().path() {
                            "/apis/resource.k8s.io/v1/deviceclasses" => dra_classes(),
                            "/apis/resource.k8s.io/v1/resourceslices" => dra_slices(),
                            _ => Vec::new(),
                        };
                        reply(
                            send,
                            &json!({"apiVersion": "v1", "kind": "List",
                                "metadata": {"resourceVersion": "1"}, "items": items}),
                        );
                    }
                }
            });
            let config = WatchConfig::new("kube-system", ClusterApiConfig::default());
            let watches = start_with(&Clients::joined(client), &config, Vec::new());
            until("synced", || watches.is_synced()).await;
            if served {
                // The malformed slices are named among the skipped ones; the good one stays.
                let (count, objects) = config.skipped.summary();
                assert_eq!(count, 2, "{objects:?}");
                let has = |prefix: &str| objects.iter().any(|o| o.starts_with(prefix));
                assert!(
                    has("ResourceSlice too-many: field spec.devices"),
                    "{objects:?}"
                );
                assert!(
                    has("ResourceSlice bad-quantity: field spec.devices[0].capacity"),
                    "{objects:?}"
                );
                let mut inf = watches.informer().lock().expect("informer");
                let storage = inf.objects_without_pods().storage;
                let node = |n: &str| autoscaler_model::Sym::new(n);
                assert_eq!(storage.dra().node_slices(node("n1")).len(), 1);
                assert!(storage.dra().node_slices(node("n2")).is_empty());
                assert!(storage.dra().node_slices(node("n3")).is_empty());
                // A selector that does not compile is kept, as kube-scheduler keeps the class:
                // a pod asking for it gets the compile error as its reason (scheduling::dra).
                assert!(storage.dra().class("gpu").is_some());
                let bad = storage.dra().class("bad-cel").expect("kept");
                assert!(bad.selectors[0].compile_error().is_some());
            }
            assert!(
                watches.api_not_found().notified().now_or_never().is_none(),
                "DRA is optional (served: {served})"
            );
            let available = watches
                .informer()
                .lock()
                .expect("informer")
                .objects_without_pods()
                .storage
                .dra()
                .is_available();
            assert_eq!(available, served);
            drop(watches);
            server.abort();
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_needed_storage_kind_that_fails_keeps_the_watches_unsynced() {
        let (client, mut handle) = mock();
        let server = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Some((req, send)) = handle.next_request().await {
                let uri = req.uri().to_string();
                if uri.starts_with("/apis/storage.k8s.io/v1/csinodes") {
                    status_reply(send, 403);
                } else {
                    answer_rest(&uri, send, &mut open, "1");
                }
            }
        });
        let config = WatchConfig::new("kube-system", ClusterApiConfig::default());
        let watches = start_with(&Clients::joined(client), &config, Vec::new());
        until("every other kind to sync", || watches.unsynced().len() == 1).await;
        assert_eq!(
            watches.unsynced().into_iter().collect::<Vec<_>>(),
            ["storage.k8s.io/CSINode"]
        );
        drop(watches);
        server.abort();
    }

    /// A server whose lists hold, besides good objects, a Node whose `status` is not an
    /// object, a Pod whose containers are not a list, a Node with `cpu: abc` and a budget of
    /// `minAvailable: 200%`; watches are held open.
    fn malformed_server(mut handle: Handle) -> JoinHandle<()> {
        tokio::spawn(async move {
            let mut open = Vec::new();
            while let Some((req, send)) = handle.next_request().await {
                let uri = req.uri().to_string();
                if uri.contains("sendInitialEvents=true") {
                    refuse(send, 422);
                    continue;
                }
                if uri.contains("watch=true") {
                    open.push(send);
                    continue;
                }
                let node = |name: &str, status: Value| json!({"metadata": {"name": name, "resourceVersion": "3"}, "status": status});
                let items = match req.uri().path() {
                    "/api/v1/nodes" => vec![
                        node(
                            "good",
                            json!({"allocatable": {"cpu": "4", "memory": "8Gi"}}),
                        ),
                        node("bad", json!("not an object")),
                        node("abc", json!({"allocatable": {"cpu": "abc"}})),
                    ],
                    "/api/v1/pods" => vec![
                        json!({"metadata": {"name": "p", "namespace": "ns"},
                            "spec": {"containers": [{"name": "c"}]}}),
                        json!({"metadata": {"name": "bad", "namespace": "ns",
                            "resourceVersion": "4"}, "spec": {"containers": "x"}}),
                    ],
                    "/apis/policy/v1/poddisruptionbudgets" => {
                        vec![json!({"metadata": {"name": "pdb", "namespace": "ns"},
                            "spec": {"minAvailable": "200%"}})]
                    }
                    _ => Vec::new(),
                };
                reply(
                    send,
                    &json!({"apiVersion": "v1", "kind": "List",
                        "metadata": {"resourceVersion": "5"}, "items": items}),
                );
            }
        })
    }

    #[tokio::test(start_paused = true)]
    async fn malformed_objects_are_skipped_and_named_and_every_kind_still_syncs() {
        let (client, handle) = mock();
        let server = malformed_server(handle);
        let metrics = Arc::new(crate::metrics::Metrics::new());
        let config = WatchConfig {
            skipped: Arc::new(SkippedObjects::new(Some(metrics.clone()))),
            ..WatchConfig::new("kube-system", ClusterApiConfig::default())
        };
        let watches = start_with(&Clients::joined(client), &config, Vec::new());
        until("synced although a Node and a Pod do not decode", || {
            watches.is_synced()
        })
        .await;
        until("the pods converted", || {
            autoscaler_actuation::lock_informer(watches.informer())
                .pod("ns", "p")
                .is_some()
        })
        .await;
        {
            let mut inf = autoscaler_actuation::lock_informer(watches.informer());
            let names: Vec<String> = (inf.store().list("", "Node"))
                .map(|(k, _)| k.name.clone())
                .collect();
            // The undecodable Node is not cached; the one the model refuses is, as before.
            assert_eq!(names, ["abc", "good"]);
            assert!(inf.pod("ns", "bad").is_none());
            assert_eq!(inf.pods().len(), 1);
        }
        let (count, objects) = config.skipped.summary();
        assert_eq!(count, 4, "{objects:?}");
        let has = |prefix: &str| objects.iter().any(|o| o.starts_with(prefix));
        assert!(has("Node bad: status: invalid type: string"), "{objects:?}");
        assert!(has("Node abc: "), "{objects:?}");
        assert!(
            has("Pod ns/bad: spec.containers: invalid type"),
            "{objects:?}"
        );
        assert!(has("PodDisruptionBudget ns/pdb: "), "{objects:?}");
        let text = metrics.encode();
        assert!(
            text.contains("cluster_autoscaler_skipped_objects_total{kind=\"Node\"} 2"),
            "{text}"
        );
        drop(watches);
        server.abort();
    }

    #[tokio::test]
    async fn a_malformed_pod_in_a_watch_event_leaves_the_view_and_comes_back_fixed() {
        use http_body_util::BodyExt;
        use http_body_util::combinators::UnsyncBoxBody;
        type Streamed = UnsyncBoxBody<bytes::Bytes, std::io::Error>;
        let (svc, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Streamed>>();
        let client = kube::Client::new(svc, "default");
        let whole = |v: &Value| -> Streamed {
            let bytes = bytes::Bytes::from(serde_json::to_vec(v).expect("json"));
            UnsyncBoxBody::new(http_body_util::Full::new(bytes).map_err(|e| match e {}))
        };
        let (events_tx, events_rx) = futures::channel::mpsc::unbounded::<Vec<u8>>();
        let server = tokio::spawn(async move {
            let mut events_rx = Some(events_rx);
            let mut open = Vec::new();
            while let Some((req, send)) = handle.next_request().await {
                let uri = req.uri().to_string();
                let pods = req.uri().path() == "/api/v1/pods";
                if uri.contains("sendInitialEvents=true") {
                    let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "reason": "Invalid", "code": 422, "message": "no WatchList"});
                    send.send_response(
                        Response::builder()
                            .status(422)
                            .body(whole(&status))
                            .expect("response"),
                    );
                } else if uri.contains("watch=true") {
                    match events_rx.take_if(|_| pods) {
                        // The pods' first watch: a body the test feeds line by line.
                        Some(rx) => {
                            let frames =
                                rx.map(|line| Ok(http_body::Frame::data(bytes::Bytes::from(line))));
                            let body = UnsyncBoxBody::new(http_body_util::StreamBody::new(frames));
                            send.send_response(
                                Response::builder()
                                    .status(200)
                                    .body(body)
                                    .expect("response"),
                            );
                        }
                        None => open.push(send),
                    }
                } else {
                    let items = if pods {
                        vec![
                            json!({"metadata": {"name": "p", "namespace": "ns", "resourceVersion": "2"},
                            "spec": {"containers": [{"name": "c"}]}}),
                        ]
                    } else {
                        Vec::new()
                    };
                    let list = json!({"apiVersion": "v1", "kind": "List",
                        "metadata": {"resourceVersion": "5"}, "items": items});
                    send.send_response(
                        Response::builder()
                            .status(200)
                            .body(whole(&list))
                            .expect("response"),
                    );
                }
            }
        });
        let config = WatchConfig::new("kube-system", ClusterApiConfig::default());
        let watches = start_with(&Clients::joined(client), &config, Vec::new());
        tokio::time::timeout(Duration::from_secs(10), watches.wait_synced())
            .await
            .expect("synced");
        let has_pod = || {
            autoscaler_actuation::lock_informer(watches.informer())
                .pod("ns", "p")
                .is_some()
        };
        until("the pod", has_pod).await;
        let event = |pod: Value| event_line("MODIFIED", &pod).into_bytes();
        events_tx
            .unbounded_send(event(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "6"},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": []}}}]}})))
            .expect("sent");
        until("the malformed pod to leave", || !has_pod()).await;
        assert_eq!(config.skipped.summary().0, 1);
        events_tx
            .unbounded_send(event(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "7"},
                "spec": {"containers": [{"name": "c"}]}})))
            .expect("sent");
        until("the fixed pod", has_pod).await;
        assert_eq!(config.skipped.summary().0, 0);
        drop(watches);
        server.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn an_optional_kind_never_served_is_retried_with_a_growing_backoff() {
        let (client, mut handle) = mock();
        let asked = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = asked.clone();
        let server = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Some((req, send)) = handle.next_request().await {
                let uri = req.uri().to_string();
                if uri.starts_with("/apis/storage.k8s.io/v1/csistoragecapacities") {
                    count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    not_found_reply(send);
                } else {
                    answer_rest(&uri, send, &mut open, "1");
                }
            }
        });
        let config = WatchConfig::new("kube-system", ClusterApiConfig::default());
        let watches = start_with(&Clients::joined(client), &config, Vec::new());
        until("synced without the optional kind", || watches.is_synced()).await;
        // Half an hour: from 0.8 s doubling to 5 minutes is about a dozen attempts (a retry
        // every ~1.3 s would be over a thousand).
        for _ in 0..180 {
            tokio::time::sleep(Duration::from_secs(10)).await;
        }
        let n = asked.load(std::sync::atomic::Ordering::SeqCst);
        assert!((5..=20).contains(&n), "{n} attempts in 30 minutes");
        drop(watches);
        server.abort();
    }

    #[tokio::test]
    async fn capacity_is_read_at_v1beta1_where_only_it_is_served() {
        let (client, mut handle) = mock();
        let seen = Arc::new(Mutex::new(Vec::<String>::new()));
        let log = seen.clone();
        let server = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Some((req, send)) = handle.next_request().await {
                let uri = req.uri().to_string();
                log.lock().expect("log").push(uri.clone());
                let resources = |gv: &str, kinds: &[(&str, &str)]| {
                    let list: Vec<Value> = (kinds.iter())
                        .map(|(plural, kind)| {
                            json!({"name": plural, "singularName": "",
                            "namespaced": *kind == "CSIStorageCapacity", "kind": kind,
                            "verbs": ["get", "list", "watch"]})
                        })
                        .collect();
                    json!({"kind": "APIResourceList", "apiVersion": "v1",
                        "groupVersion": gv, "resources": list})
                };
                match req.uri().path() {
                    "/apis" => reply(
                        send,
                        &json!({"kind": "APIGroupList", "apiVersion": "v1",
                        "groups": [{"name": "storage.k8s.io", "versions": [
                            {"groupVersion": "storage.k8s.io/v1", "version": "v1"},
                            {"groupVersion": "storage.k8s.io/v1beta1", "version": "v1beta1"}],
                            "preferredVersion": {"groupVersion": "storage.k8s.io/v1", "version": "v1"}}]}),
                    ),
                    "/apis/storage.k8s.io/v1" => reply(
                        send,
                        &resources(
                            "storage.k8s.io/v1",
                            &[("csinodes", "CSINode"), ("storageclasses", "StorageClass")],
                        ),
                    ),
                    "/apis/storage.k8s.io/v1beta1" => reply(
                        send,
                        &resources(
                            "storage.k8s.io/v1beta1",
                            &[("csistoragecapacities", "CSIStorageCapacity")],
                        ),
                    ),
                    "/apis/storage.k8s.io/v1beta1/csistoragecapacities"
                        if !uri.contains("watch=true") =>
                    {
                        reply(
                            send,
                            &json!({"apiVersion": "storage.k8s.io/v1beta1",
                            "kind": "CSIStorageCapacityList", "metadata": {"resourceVersion": "1"},
                            "items": [{"metadata": {"name": "cap", "namespace": "kube-system"},
                                "storageClassName": "zonal", "capacity": "100Gi"}]}),
                        )
                    }
                    _ => answer_rest(&uri, send, &mut open, "1"),
                }
            }
        });
        let version = capacity_version(&client).await;
        assert_eq!(version, "v1beta1");
        let config = WatchConfig {
            capacity_version: version.to_string(),
            ..WatchConfig::new("kube-system", ClusterApiConfig::default())
        };
        let watches = start_with(&Clients::joined(client), &config, Vec::new());
        tokio::time::timeout(Duration::from_secs(10), watches.wait_synced())
            .await
            .expect("synced");
        {
            let inf = autoscaler_actuation::lock_informer(watches.informer());
            let caps: Vec<_> = inf
                .store()
                .list("storage.k8s.io", "CSIStorageCapacity")
                .collect();
            assert_eq!(caps.len(), 1);
            // Cached as v1, the version the storage model reads (the fields are the same).
            let typed: storage::CSIStorageCapacity =
                serde_json::from_value((**caps[0].1).clone()).expect("a v1 capacity");
            assert_eq!(typed.storage_class_name, "zonal");
        }
        let seen = seen.lock().expect("log").clone();
        // RBAC grants every version of the resource: the calls are the declared ones.
        for uri in &seen {
            assert!(
                crate::api_calls::is_declared(&http::Method::GET, uri),
                "{uri} is not declared"
            );
        }
        assert!(
            !seen
                .iter()
                .any(|u| u.starts_with("/apis/storage.k8s.io/v1/csistoragecapacities")),
            "{seen:?}"
        );
        drop(watches);
        server.abort();
    }
}
