//! Test support: a Kubernetes REST facade over the simulated [`World`], so that the real
//! `cluster-autoscaler` binary (or any kube-rs client) can run against it over loopback HTTP.
//!
//! [`Facade::start`] serves the API on `127.0.0.1` with a generated kubeconfig (plain HTTP, no
//! authentication) and runs the world on real time, optionally sped up: every ~50 ms a task
//! advances it by the elapsed real time × [`FacadeOptions::speed`]. Requests read and write the
//! world under one mutex (never held across an await), so its controllers (scheduler, machine
//! controller, workloads, disruption budgets) see every write and its change log feeds the
//! watch streams. Faults ([`FaultRule`]) make chosen requests fail, wait, or cut watches.
//!
//! [`FacadeHandle::open_view`] opens another door into the same world: a listener with its own
//! kubeconfig that serves only some API groups and may confine some groups to one namespace
//! (`403` otherwise, as a namespaced Role does). Two views, one serving the Cluster API objects
//! and one the nodes and pods, stand for a management and a workload cluster: the Machines and
//! the Nodes stay one world, linked by `providerID` and `nodeRef` as the real controllers link
//! them, while a client can reach each only through its own cluster.
//!
//! This crate must never be a dependency of the product's `run` path.
#![warn(missing_docs)]

mod faults;
mod paging;
mod patch;
mod resources;
mod selectors;
mod server;
mod status;
mod watch;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use autoscaler_world::World;
use tokio::task::JoinHandle;

pub use faults::{FaultAction, FaultCounts, FaultRule, Malformation, Verb};
pub use patch::{PatchKind, json_patch, merge};
pub use resources::{ServerVersion, Surface};
pub use selectors::{FieldSelector, LabelSelector};
pub use status::ApiError;

/// Errors starting the facade.
#[derive(Debug, thiserror::Error)]
pub enum FacadeError {
    /// The listening socket could not be opened.
    #[error("cannot listen on 127.0.0.1: {0}")]
    Bind(#[source] std::io::Error),
    /// The kubeconfig could not be written.
    #[error("cannot write the kubeconfig {path}: {source}")]
    Kubeconfig {
        /// Where.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// How the facade runs.
#[derive(Debug, Clone)]
pub struct FacadeOptions {
    /// Virtual milliseconds per real millisecond (10 ⇒ a 60 s provisioning delay takes 6 s).
    pub speed: f64,
    /// How often the world is advanced.
    pub tick: Duration,
    /// Where to write the kubeconfig; `None` writes one in a fresh directory under the
    /// system's temporary directory.
    pub kubeconfig_path: Option<PathBuf>,
    /// Faults active from the start (more can be added with [`FacadeHandle::add_fault`]).
    pub faults: Vec<FaultRule>,
    /// How many changes the watch log keeps; a watch from an older `resourceVersion` gets
    /// `410 Gone`.
    pub watch_log_retention: usize,
    /// How often an idle watch stream that asked for bookmarks gets one.
    pub bookmark_interval: Duration,
    /// Group-versions not served at start (`policy/v1`, `cluster.x-k8s.io/v1beta1`): absent
    /// from discovery, `404` on every request, as on a cluster without them. See
    /// [`FacadeHandle::install`].
    pub withheld: Vec<String>,
    /// The version `/version` claims.
    pub version: ServerVersion,
    /// Whether watches serve streaming lists (`sendInitialEvents=true`), as API servers with
    /// the `WatchList` feature do (on by default in 1.32 and from 1.34, off in 1.33); without
    /// it such a watch is refused with `422`, as those servers refuse it.
    pub watch_list: bool,
}

/// The group-versions of the ProvisioningRequest (`v1`) and CapacityBuffer (`v1beta1`) CRDs,
/// withheld by default as on a cluster without them; [`FacadeHandle::install`] serves them.
pub const CAPACITY_CRDS: [&str; 2] = ["autoscaling.x-k8s.io/v1", "autoscaling.x-k8s.io/v1beta1"];

impl Default for FacadeOptions {
    fn default() -> Self {
        FacadeOptions {
            speed: 1.0,
            tick: Duration::from_millis(50),
            kubeconfig_path: None,
            faults: Vec::new(),
            watch_log_retention: 20_000,
            bookmark_interval: Duration::from_secs(2),
            watch_list: true,
            withheld: CAPACITY_CRDS.iter().map(|gv| gv.to_string()).collect(),
            version: ServerVersion::default(),
        }
    }
}

/// Which API groups a view serves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum GroupFilter {
    /// Every group the facade serves.
    #[default]
    All,
    /// Only these groups (`""` for the core group).
    Only(Vec<String>),
    /// Every group but these.
    Except(Vec<String>),
}

impl GroupFilter {
    fn serves(&self, group: &str) -> bool {
        match self {
            GroupFilter::All => true,
            GroupFilter::Only(gs) => gs.iter().any(|g| g == group),
            GroupFilter::Except(gs) => !gs.iter().any(|g| g == group),
        }
    }
}

/// An identity bound by a namespaced Role: the resources of `groups` may only be read and
/// written inside `namespace`; any other request on them (cluster-wide lists and watches
/// included) is `403 Forbidden`. Discovery stays open, as `system:discovery` grants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceRole {
    /// The namespace of the Role.
    pub namespace: String,
    /// The API groups it covers.
    pub groups: Vec<String>,
}

/// How a view ([`FacadeHandle::open_view`]) serves the world.
#[derive(Debug, Clone, Default)]
pub struct ViewOptions {
    /// The groups served; the others are absent from discovery and `404`.
    pub groups: GroupFilter,
    /// Confines some groups to one namespace.
    pub role: Option<NamespaceRole>,
    /// Where to write the view's kubeconfig (`None`: a fresh temporary directory).
    pub kubeconfig_path: Option<PathBuf>,
}

/// What one listener serves of the world (the facade's own listener: everything).
#[derive(Debug, Default)]
pub(crate) struct View {
    groups: GroupFilter,
    role: Option<NamespaceRole>,
}

impl View {
    /// The facade's surface, less the group-versions of groups this view does not serve.
    pub(crate) fn surface(&self, facade: &Surface) -> Surface {
        let mut surface = facade.clone();
        surface.withheld.extend(
            resources::RESOURCES
                .iter()
                .filter(|r| !self.groups.serves(r.group))
                .map(|r| r.api_version()),
        );
        surface
    }

    /// The refusal of a request outside the view's Role, if it is one.
    pub(crate) fn forbids(
        &self,
        t: &server::Target,
        verb: Verb,
        resource: &str,
    ) -> Option<ApiError> {
        let role = self.role.as_ref()?;
        if !role.groups.iter().any(|g| g == t.res.group) {
            return None;
        }
        let scope = match t.namespace.as_deref() {
            Some(ns) if ns == role.namespace => return None,
            Some(ns) => format!("in the namespace \"{ns}\""),
            None => "at the cluster scope".to_string(),
        };
        Some(ApiError::forbidden(
            verb.rbac(),
            resource,
            t.res.group,
            &scope,
        ))
    }
}

/// A running view of a facade ([`FacadeHandle::open_view`]); dropping it stops its listener.
#[derive(Debug)]
pub struct ViewHandle {
    addr: std::net::SocketAddr,
    kubeconfig: PathBuf,
    /// The temporary directory of `kubeconfig`, removed on drop (never a caller's path).
    temp_dir: Option<PathBuf>,
    task: JoinHandle<()>,
}

impl ViewHandle {
    /// The address served.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// The kubeconfig written for this view.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }
}

impl Drop for ViewHandle {
    fn drop(&mut self) {
        self.task.abort();
        remove_temp_dir(self.temp_dir.as_deref());
    }
}

/// The temporary directory a facade wrote its own kubeconfig into, if it chose the path.
fn temp_dir_of(chosen: &Option<PathBuf>, kubeconfig: &Path) -> Option<PathBuf> {
    match chosen {
        Some(_) => None,
        None => kubeconfig.parent().map(Path::to_path_buf),
    }
}

/// Removes a facade's temporary kubeconfig directory; a failure only leaves a file behind.
fn remove_temp_dir(dir: Option<&Path>) {
    if let Some(dir) = dir {
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// A fresh kubeconfig path under the temporary directory for a listener on `port`.
fn temp_kubeconfig(port: u16) -> PathBuf {
    std::env::temp_dir()
        .join(format!("autoscaler-facade-{}-{port}", std::process::id()))
        .join("kubeconfig")
}

/// Serves `app` on `listener` until the facade stops.
fn spawn_server(
    shared: &Shared,
    listener: tokio::net::TcpListener,
    app: axum::Router,
) -> JoinHandle<()> {
    let mut stop = shared.stop.subscribe();
    tokio::spawn(async move {
        // Graceful: open connections close once their requests end (watch streams end on
        // the same signal), so no old connection keeps answering after shutdown.
        let stopped = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        if let Err(e) = axum::serve(listener, app)
            .with_graceful_shutdown(stopped)
            .await
        {
            tracing::error!(error = %e, "facade server stopped");
        }
    })
}

/// State shared by the request handlers, the watch streams and the clock task.
#[derive(Debug)]
pub(crate) struct Shared {
    world: Mutex<World>,
    /// Every change with a `resourceVersion` up to this one has been forgotten.
    compacted: AtomicU64,
    /// The latest `resourceVersion`, sent after every write (wakes watch streams).
    changes: tokio::sync::watch::Sender<u64>,
    /// Set to `true` on shutdown (ends watch streams).
    stop: tokio::sync::watch::Sender<bool>,
    faults: Mutex<faults::Faults>,
    started: Instant,
    /// `127.0.0.1:port`.
    addr: String,
    bookmark_interval: Duration,
    /// [`FacadeOptions::watch_list`].
    watch_list: bool,
    /// Suffixes for `generateName`.
    names: AtomicU64,
    /// Lists being paged through.
    pager: Mutex<paging::Pager>,
    /// The writes served so far (see [`FacadeHandle::writes`]).
    journal: Mutex<Vec<WriteRecord>>,
    /// What is served of the resources.
    surface: Mutex<Surface>,
    /// The objects served malformed ([`FacadeHandle::serve_malformed`]).
    malformed: Mutex<Vec<faults::Malformation>>,
    /// Whether `malformed` holds any (read without the lock on every object served).
    any_malformed: AtomicBool,
}

/// How many writes the journal keeps (the oldest half is dropped beyond this).
const JOURNAL_CAPACITY: usize = 100_000;

/// A write request the facade answered: creates, updates, patches and deletes (and
/// evictions, which are creates of `pods/eviction`), with or without success.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WriteRecord {
    /// Real time since the facade started at which the request arrived (before any injected
    /// delay), on the same clock as [`FacadeHandle::elapsed`].
    pub received: Duration,
    /// Real time since start at which it was answered.
    pub answered: Duration,
    /// The verb.
    pub verb: Verb,
    /// The request path (without the query).
    pub path: String,
    /// The HTTP status code answered.
    pub code: u16,
}

impl Shared {
    /// The world, locked. A panic while it was held leaves it usable (the facade keeps serving).
    pub(crate) fn world(&self) -> MutexGuard<'_, World> {
        self.world.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The fault rules, locked.
    pub(crate) fn faults(&self) -> MutexGuard<'_, faults::Faults> {
        self.faults.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `obj` of `kind` as served: malformed when a [`faults::Malformation`] names it.
    pub(crate) fn served<'a>(
        &self,
        kind: &str,
        obj: &'a serde_json::Value,
    ) -> Cow<'a, serde_json::Value> {
        if !self.any_malformed.load(Ordering::Relaxed) {
            return Cow::Borrowed(obj);
        }
        let rules = self.malformed.lock().unwrap_or_else(|e| e.into_inner());
        faults::malformed(&rules, kind, obj).map_or(Cow::Borrowed(obj), Cow::Owned)
    }

    /// What is served, locked.
    pub(crate) fn surface(&self) -> MutexGuard<'_, Surface> {
        self.surface.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lists being paged through, locked.
    pub(crate) fn pager(&self) -> MutexGuard<'_, paging::Pager> {
        self.pager.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Notes an answered write.
    pub(crate) fn record_write(&self, record: WriteRecord) {
        let mut j = self.journal.lock().unwrap_or_else(|e| e.into_inner());
        if j.len() >= JOURNAL_CAPACITY {
            j.drain(..JOURNAL_CAPACITY / 2);
        }
        j.push(record);
    }

    /// Runs `f` on the world and wakes the watch streams.
    pub(crate) fn write<R>(&self, f: impl FnOnce(&mut World) -> R) -> R {
        let (r, rv) = {
            let mut w = self.world();
            let r = f(&mut w);
            (r, w.resource_version())
        };
        self.changes.send_replace(rv);
        r
    }

    /// Forgets the change log up to and including `rv`.
    pub(crate) fn compact(&self, w: &mut World, rv: u64) {
        w.forget_events_upto(rv);
        self.compacted.fetch_max(rv, Ordering::SeqCst);
    }

    /// The version up to which changes are forgotten.
    pub(crate) fn compacted(&self) -> u64 {
        self.compacted.load(Ordering::SeqCst)
    }

    /// Real time since start.
    pub(crate) fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

/// The facade's entry point.
#[derive(Debug)]
pub struct Facade;

impl Facade {
    /// Serves `world` on `127.0.0.1:<free port>`, writes the kubeconfig and starts the clock.
    pub async fn start(world: World, options: FacadeOptions) -> Result<FacadeHandle, FacadeError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(FacadeError::Bind)?;
        let addr = listener.local_addr().map_err(FacadeError::Bind)?;
        let kubeconfig = match &options.kubeconfig_path {
            Some(p) => p.clone(),
            None => temp_kubeconfig(addr.port()),
        };
        write_kubeconfig(&kubeconfig, &format!("http://{addr}"))?;

        let rv = world.resource_version();
        let mut faults = faults::Faults::default();
        for f in options.faults.iter().cloned() {
            faults.add(f);
        }
        let shared = Arc::new(Shared {
            world: Mutex::new(world),
            compacted: AtomicU64::new(0),
            changes: tokio::sync::watch::Sender::new(rv),
            stop: tokio::sync::watch::Sender::new(false),
            faults: Mutex::new(faults),
            started: Instant::now(),
            addr: addr.to_string(),
            bookmark_interval: options.bookmark_interval,
            watch_list: options.watch_list,
            names: AtomicU64::new(0),
            pager: Mutex::new(paging::Pager::default()),
            journal: Mutex::new(Vec::new()),
            malformed: Mutex::new(Vec::new()),
            any_malformed: AtomicBool::new(false),
            surface: Mutex::new(Surface {
                withheld: options.withheld.iter().cloned().collect(),
                version: options.version,
            }),
        });

        let app = server::router(shared.clone(), Arc::new(View::default()));
        let server = spawn_server(&shared, listener, app);
        let clock = tokio::spawn(run_clock(
            shared.clone(),
            options.speed,
            options.tick,
            options.watch_log_retention,
        ));
        tracing::info!(%addr, kubeconfig = %kubeconfig.display(), "facade serving");
        Ok(FacadeHandle {
            shared,
            addr,
            temp_dir: temp_dir_of(&options.kubeconfig_path, &kubeconfig),
            kubeconfig,
            tasks: vec![server, clock],
        })
    }
}

/// Advances the world by elapsed real time × speed, and trims the watch log.
async fn run_clock(shared: Arc<Shared>, speed: f64, tick: Duration, retention: usize) {
    let mut interval = tokio::time::interval(tick.max(Duration::from_millis(1)));
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = Instant::now();
    // Fractions of a virtual millisecond carried to the next tick, so slow speeds still move.
    let mut carry = 0.0f64;
    let speed = if speed.is_finite() && speed > 0.0 {
        speed
    } else {
        1.0
    };
    let mut stop = shared.stop.subscribe();
    loop {
        tokio::select! {
            _ = interval.tick() => {}
            _ = stop.wait_for(|s| *s) => return,
        }
        let now = Instant::now();
        let ms = (now - last).as_secs_f64() * 1000.0 * speed + carry;
        last = now;
        let whole = ms.floor();
        carry = ms - whole;
        shared.write(|w| {
            if whole >= 1.0 {
                w.advance(whole as u64);
            }
            let log = w.events_since(0);
            if log.len() > retention.max(1) {
                let upto = log[log.len() - retention.max(1) - 1].rv;
                shared.compact(w, upto);
            }
        });
    }
}

fn write_kubeconfig(path: &Path, server: &str) -> Result<(), FacadeError> {
    let err = |source| FacadeError::Kubeconfig {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: facade\n  cluster:\n    server: {server}\n\
         contexts:\n- name: facade\n  context:\n    cluster: facade\n    user: facade\n    namespace: default\n\
         current-context: facade\nusers:\n- name: facade\n  user: {{}}\npreferences: {{}}\n"
    );
    std::fs::write(path, text).map_err(err)
}

/// A running facade. Dropping it stops the server and the clock (as [`FacadeHandle::shutdown`]
/// does, without waiting).
#[derive(Debug)]
pub struct FacadeHandle {
    shared: Arc<Shared>,
    addr: std::net::SocketAddr,
    kubeconfig: PathBuf,
    /// The temporary directory of `kubeconfig`, removed on drop (never a caller's path).
    temp_dir: Option<PathBuf>,
    tasks: Vec<JoinHandle<()>>,
}

impl FacadeHandle {
    /// The address served.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:port`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The kubeconfig written for this facade.
    pub fn kubeconfig_path(&self) -> &Path {
        &self.kubeconfig
    }

    /// Opens another listener on the same world, serving it as `options` say, with its own
    /// kubeconfig (see the crate documentation).
    pub async fn open_view(&self, options: ViewOptions) -> Result<ViewHandle, FacadeError> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(FacadeError::Bind)?;
        let addr = listener.local_addr().map_err(FacadeError::Bind)?;
        let kubeconfig = options
            .kubeconfig_path
            .clone()
            .unwrap_or_else(|| temp_kubeconfig(addr.port()));
        write_kubeconfig(&kubeconfig, &format!("http://{addr}"))?;
        let view = View {
            groups: options.groups,
            role: options.role,
        };
        let app = server::router(self.shared.clone(), Arc::new(view));
        let task = spawn_server(&self.shared, listener, app);
        tracing::info!(%addr, kubeconfig = %kubeconfig.display(), "facade view serving");
        Ok(ViewHandle {
            addr,
            temp_dir: temp_dir_of(&options.kubeconfig_path, &kubeconfig),
            kubeconfig,
            task,
        })
    }

    /// Runs `f` on the world (to add objects or look at it); watch streams see its writes.
    /// Must not be called from inside `f`.
    pub fn with_world<R>(&self, f: impl FnOnce(&mut World) -> R) -> R {
        self.shared.write(f)
    }

    /// Runs `f` on the world without waking the watch streams: for looking only (a test
    /// polling the world often must not disturb what it measures).
    pub fn read_world<R>(&self, f: impl FnOnce(&World) -> R) -> R {
        f(&self.shared.world())
    }

    /// Adds a fault rule (its window is in real time since start), returning its index in
    /// [`FaultCounts::per_rule`].
    pub fn add_fault(&self, rule: FaultRule) -> usize {
        self.shared.faults().add(rule)
    }

    /// Serves one object malformed from now on (see [`Malformation`]); watchers see it with
    /// its next change or list.
    pub fn serve_malformed(&self, malformation: Malformation) {
        let mut rules = self
            .shared
            .malformed
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        rules.push(malformation);
        self.shared.any_malformed.store(true, Ordering::Relaxed);
    }

    /// What was injected so far.
    pub fn fault_counts(&self) -> FaultCounts {
        self.shared.faults().counts()
    }

    /// Real time since start (fault windows are measured from there).
    pub fn elapsed(&self) -> Duration {
        self.shared.elapsed()
    }

    /// The writes answered so far, oldest first (at most the latest 100,000): what a test
    /// times reactions against (e.g. when a scale subresource PATCH arrived).
    pub fn writes(&self) -> Vec<WriteRecord> {
        self.shared
            .journal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Starts serving a withheld group-version (`cluster.x-k8s.io/v1beta1`), as installing its
    /// CRDs does: it appears in discovery and its objects (already in the world) can be listed
    /// and watched.
    pub fn install(&self, group_version: &str) {
        self.shared.surface().withheld.remove(group_version);
        // Wakes the watch streams (nothing changed in the world).
        self.shared.changes.send_modify(|_| {});
    }

    /// Stops serving a group-version, as deleting its CRDs does: it leaves discovery, requests
    /// get `404` and its open watch streams end.
    pub fn withhold(&self, group_version: &str) {
        self.shared
            .surface()
            .withheld
            .insert(group_version.to_string());
        self.shared.changes.send_modify(|_| {});
    }

    /// Forgets the whole watch log: a watch from any version before the current one then gets
    /// `410 Gone` (clients must relist).
    pub fn compact_watch_log(&self) {
        self.shared.write(|w| {
            let rv = w.resource_version();
            self.shared.compact(w, rv);
        });
    }

    /// Stops serving: ends watch streams, closes connections (waiting up to 5 s for requests
    /// in flight) and stops the clock.
    pub async fn shutdown(mut self) {
        self.shared.stop.send_replace(true);
        let tasks: Vec<JoinHandle<()>> = self.tasks.drain(..).collect();
        for mut t in tasks {
            if tokio::time::timeout(Duration::from_secs(5), &mut t)
                .await
                .is_err()
            {
                t.abort();
            }
        }
    }
}

impl Drop for FacadeHandle {
    fn drop(&mut self) {
        self.shared.stop.send_replace(true);
        // The server task ends by itself once its connections close; the clock never does.
        if let Some(clock) = self.tasks.get(1) {
            clock.abort();
        }
        remove_temp_dir(self.temp_dir.as_deref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Api, ListParams, Patch, PatchParams};
    use kube::config::{KubeConfigOptions, Kubeconfig};
    use serde_json::json;

    async fn client(h: &FacadeHandle) -> kube::Client {
        let kc = Kubeconfig::read_from(h.kubeconfig_path()).expect("kubeconfig");
        let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .expect("config");
        kube::Client::try_from(cfg).expect("client")
    }

    fn config_map(name: &str) -> serde_json::Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"}, "data": {"k": "v"}})
    }

    async fn client_of(path: &Path) -> kube::Client {
        let kc = Kubeconfig::read_from(path).expect("kubeconfig");
        let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
            .await
            .expect("config");
        kube::Client::try_from(cfg).expect("client")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_view_serves_its_groups_only_and_confines_them_to_its_namespace() {
        use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
        let mut w = World::new(autoscaler_world::WorldConfig::default());
        w.apply(config_map("cm")).expect("apply");
        let h = Facade::start(w, FacadeOptions::default())
            .await
            .expect("facade");
        let view = h
            .open_view(ViewOptions {
                groups: GroupFilter::Only(vec!["cluster.x-k8s.io".into()]),
                role: Some(NamespaceRole {
                    namespace: "capi".into(),
                    groups: vec!["cluster.x-k8s.io".into()],
                }),
                kubeconfig_path: None,
            })
            .await
            .expect("view");
        let c = client_of(view.kubeconfig_path()).await;
        let gvk = GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "Machine");
        let ar = ApiResource::from_gvk_with_plural(&gvk, "machines");
        let code = |r: Result<kube::core::ObjectList<DynamicObject>, kube::Error>| match r {
            Ok(_) => 200,
            Err(kube::Error::Api(s)) => s.code,
            Err(e) => panic!("{e}"),
        };
        let lp = ListParams::default();
        let all: Api<DynamicObject> = Api::all_with(c.clone(), &ar);
        let inside: Api<DynamicObject> = Api::namespaced_with(c.clone(), "capi", &ar);
        let outside: Api<DynamicObject> = Api::namespaced_with(c.clone(), "other", &ar);
        assert_eq!(code(all.list(&lp).await), 403);
        assert_eq!(code(outside.list(&lp).await), 403);
        assert_eq!(code(inside.list(&lp).await), 200);
        // The core group is not served by this view, but is by the facade itself.
        let cms: Api<ConfigMap> = Api::namespaced(c, "default");
        assert!(matches!(cms.list(&lp).await, Err(kube::Error::Api(s)) if s.code == 404));
        let cms: Api<ConfigMap> = Api::namespaced(client(&h).await, "default");
        assert_eq!(cms.list(&lp).await.expect("list").items.len(), 1);
        drop(view);
        h.shutdown().await;
    }

    /// Each facade and view writes its kubeconfig into a temporary directory of its own and
    /// removes it when dropped; a path the caller chose is left alone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn temporary_kubeconfigs_go_with_their_facade_and_a_chosen_path_stays() {
        let w = World::new(autoscaler_world::WorldConfig::default());
        let h = Facade::start(w, FacadeOptions::default())
            .await
            .expect("facade");
        let view = h.open_view(ViewOptions::default()).await.expect("view");
        let chosen = std::env::temp_dir().join(format!("facade-chosen-{}", std::process::id()));
        let kept = h
            .open_view(ViewOptions {
                kubeconfig_path: Some(chosen.join("kubeconfig")),
                ..ViewOptions::default()
            })
            .await
            .expect("view at a chosen path");
        let (own, of_view) = (
            h.kubeconfig_path().to_path_buf(),
            view.kubeconfig_path().to_path_buf(),
        );
        assert!(own.exists() && of_view.exists());
        drop(view);
        assert!(
            !of_view.parent().expect("dir").exists(),
            "the view's directory is gone"
        );
        drop(kept);
        assert!(chosen.join("kubeconfig").exists(), "a chosen path stays");
        drop(h);
        assert!(
            !own.parent().expect("dir").exists(),
            "the facade's directory is gone"
        );
        let _ = std::fs::remove_dir_all(&chosen);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn lists_page_over_one_snapshot_and_writes_are_journaled() {
        let mut w = World::new(autoscaler_world::WorldConfig::default());
        for i in 0..7 {
            w.apply(config_map(&format!("cm-{i}"))).expect("apply");
        }
        let h = Facade::start(w, FacadeOptions::default())
            .await
            .expect("facade");
        let api: Api<ConfigMap> = Api::namespaced(client(&h).await, "default");

        let first = api
            .list(&ListParams::default().limit(3))
            .await
            .expect("page 1");
        let names = |l: &kube::core::ObjectList<ConfigMap>| -> Vec<String> {
            l.items
                .iter()
                .filter_map(|c| c.metadata.name.clone())
                .collect()
        };
        assert_eq!(names(&first), ["cm-0", "cm-1", "cm-2"]);
        assert_eq!(first.metadata.remaining_item_count, Some(4));
        let token = first.metadata.continue_.clone().expect("a continue token");
        // A write between pages does not show in the pages of the list begun before it.
        h.with_world(|w| w.apply(config_map("cm-00")))
            .expect("apply");
        let second = api
            .list(&ListParams::default().limit(3).continue_token(&token))
            .await
            .expect("page 2");
        assert_eq!(names(&second), ["cm-3", "cm-4", "cm-5"]);
        assert_eq!(
            second.metadata.resource_version,
            first.metadata.resource_version
        );
        let token = second.metadata.continue_.clone().expect("a continue token");
        let third = api
            .list(&ListParams::default().limit(3).continue_token(&token))
            .await
            .expect("page 3");
        assert_eq!(names(&third), ["cm-6"]);
        assert!(third.metadata.continue_.is_none_or(|c| c.is_empty()));
        // The list is forgotten once served to its end.
        let again = api
            .list(&ListParams::default().limit(3).continue_token(&token))
            .await;
        assert!(
            matches!(again, Err(kube::Error::Api(ref s)) if s.code == 410),
            "{again:?}"
        );
        // Without a limit, everything at once.
        let all = api.list(&ListParams::default()).await.expect("all");
        assert_eq!(all.items.len(), 8);
        assert!(all.metadata.continue_.is_none_or(|c| c.is_empty()));
        // From the watch cache (`resourceVersion=0`) the limit is ignored, as the API server
        // does: one whole list, no continue token. (kube-rs itself leaves `resourceVersion=0`
        // out of a list with a limit; client-go's informers send both.)
        let raw = |query: &str| {
            http::Request::get(format!("/api/v1/namespaces/default/configmaps?{query}"))
                .body(Vec::new())
                .expect("request")
        };
        let c = client(&h).await;
        let cached: kube::core::ObjectList<ConfigMap> = c
            .request(raw(
                "limit=3&resourceVersion=0&resourceVersionMatch=NotOlderThan",
            ))
            .await
            .expect("from the cache");
        assert_eq!(cached.items.len(), 8);
        assert!(cached.metadata.continue_.is_none_or(|c| c.is_empty()));
        let rv = all.metadata.resource_version.clone().unwrap_or_default();
        let exact: kube::core::ObjectList<ConfigMap> = c
            .request(raw(&format!("limit=3&resourceVersion={rv}")))
            .await
            .expect("at a version");
        assert_eq!(exact.items.len(), 3, "a non-zero version still pages");

        let before = h.elapsed();
        api.patch(
            "cm-1",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"k": "w"}})),
        )
        .await
        .expect("patch");
        let writes = h.writes();
        let last = writes.last().expect("the patch is journaled");
        assert_eq!(
            (last.verb, last.path.as_str(), last.code),
            (
                Verb::Patch,
                "/api/v1/namespaces/default/configmaps/cm-1",
                200
            )
        );
        assert!(before <= last.received && last.received <= last.answered);
        assert!(
            writes
                .iter()
                .all(|r| r.verb != Verb::List && r.verb != Verb::Get),
            "reads are not journaled"
        );
        h.shutdown().await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn streaming_lists_end_with_their_bookmark_or_are_refused_without_the_feature() {
        use futures::StreamExt;
        use kube::runtime::watcher::{self, Event};
        let world = || {
            let mut w = World::new(autoscaler_world::WorldConfig::default());
            for i in 0..5 {
                w.apply(config_map(&format!("cm-{i}"))).expect("apply");
            }
            w
        };
        let h = Facade::start(world(), FacadeOptions::default())
            .await
            .expect("facade");
        let api: Api<ConfigMap> = Api::namespaced(client(&h).await, "default");
        let config = watcher::Config::default().streaming_lists();
        let mut events = std::pin::pin!(watcher::watcher(api, config));
        let mut names = Vec::new();
        loop {
            let e = tokio::time::timeout(Duration::from_secs(10), events.next())
                .await
                .expect("an event")
                .expect("the stream goes on")
                .expect("no error");
            match e {
                Event::Init => {}
                Event::InitApply(cm) => names.extend(cm.metadata.name),
                Event::InitDone => break,
                other => panic!("unexpected before the end bookmark: {other:?}"),
            }
        }
        assert_eq!(names, ["cm-0", "cm-1", "cm-2", "cm-3", "cm-4"]);
        h.shutdown().await;

        // Without the feature (Kubernetes 1.33's default), the watch is refused with 422.
        let options = FacadeOptions {
            watch_list: false,
            ..FacadeOptions::default()
        };
        let h = Facade::start(world(), options).await.expect("facade");
        let c = client(&h).await;
        let watch = |query: &str| {
            http::Request::get(format!(
                "/api/v1/namespaces/default/configmaps?watch=true&{query}"
            ))
            .body(Vec::new())
            .expect("request")
        };
        let refused = c
            .request_text(watch(
                "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
            ))
            .await;
        assert!(
            matches!(refused, Err(kube::Error::Api(ref s)) if s.code == 422),
            "{refused:?}"
        );
        h.shutdown().await;
    }
}
