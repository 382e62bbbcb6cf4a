//! The world: virtual clock, discrete-event queue, the object store and the state the
//! controllers keep, plus the generic operations on pods and nodes (create, bind, delete,
//! taint) that every controller and the autoscaler's actuator go through.
//!
//! It decides the order in which things happen (events at the same virtual instant run in the
//! order they were queued) and keeps the scheduling snapshot in step with the stored objects.
//! It must never read the real clock, never use unseeded randomness and never iterate a hash map
//! where the order could leak into results.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};
use std::sync::Arc;

use autoscaler_core::intern::Sym;
use autoscaler_core::node::Node;
use autoscaler_core::pod::{Pod, PodPhase};
use autoscaler_core::snapshot::{ClusterSnapshot, NodeId};
use autoscaler_core::store::{ObjectKey, ObjectStore, StoreError};
use k8s_openapi::api::core::v1 as api;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::machines::{GroupState, MachineState};
use crate::metrics::{Metrics, PodWait};
use crate::objects::{VersionedStore, WatchEvent, key};
use crate::time::SimTime;
use crate::workloads::{DaemonSetState, JobState, ReplicaSetState};

/// Errors of world operations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorldError {
    /// The named object does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// An object with this identity already exists.
    #[error("{0} already exists")]
    AlreadyExists(String),
    /// An injected fault made the scale request fail.
    #[error("scaling {group} failed: injected API error")]
    ScaleApi {
        /// The MachineDeployment.
        group: String,
    },
    /// The object lacks its identity fields.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The object does not decode or convert into the model.
    #[error("{object}: {message}")]
    Invalid {
        /// The object.
        object: String,
        /// Why.
        message: String,
    },
}

/// A uniform distribution of provisioning delays: from Machine creation to a Ready Node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProvisioningDelay {
    /// Shortest delay, in ms.
    pub min_ms: SimTime,
    /// Longest delay, in ms (inclusive; values below `min_ms` are read as `min_ms`).
    pub max_ms: SimTime,
}

/// What an injected fault does to a node group while it is active.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// Machines created in the window fail at once with `status.failureReason = reason` and
    /// never get an instance or a Node.
    Stockout {
        /// The failure reason written on the Machine.
        reason: String,
    },
    /// Machines created in the window take exactly `delay_ms` to become Nodes.
    Slow {
        /// Provisioning delay, in ms.
        delay_ms: SimTime,
    },
    /// Machines created in the window get an instance (provider ID) but never a Node.
    NeverRegisters,
    /// `set_replicas` on the group fails during the window.
    ScaleApiError,
    /// At the start of the window the first `count` Ready nodes of the group (by name) become
    /// NotReady (Ready condition `False`, `node.kubernetes.io/not-ready` taint); at its end they
    /// are Ready again. Machines created meanwhile are not affected.
    NodesNotReady {
        /// How many nodes go down.
        count: u32,
    },
    /// At the start of the window someone else (a person with `kubectl scale`, another
    /// controller) changes the group's `spec.replicas` by `delta`, never below 0.
    ReplicasChanged {
        /// The change.
        delta: i64,
    },
}

/// A fault injected into one node group (MachineDeployment name) for `[from_ms, to_ms)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The MachineDeployment's name.
    pub group: String,
    /// Start of the window, inclusive.
    pub from_ms: SimTime,
    /// End of the window, exclusive.
    pub to_ms: SimTime,
    /// What goes wrong.
    pub kind: FaultKind,
}

impl Fault {
    pub(crate) fn active(&self, group: &str, now: SimTime) -> bool {
        self.group == group && self.from_ms <= now && now < self.to_ms
    }

    /// Whether the fault changes how new Machines of its group are provisioned.
    pub(crate) fn affects_provisioning(&self) -> bool {
        !matches!(
            self.kind,
            FaultKind::ScaleApiError
                | FaultKind::NodesNotReady { .. }
                | FaultKind::ReplicasChanged { .. }
        )
    }
}

/// Settings of a world.
#[derive(Clone, Debug)]
pub struct WorldConfig {
    /// Seed of every random choice (names, provisioning delays).
    pub seed: u64,
    /// Milliseconds since the Unix epoch that virtual time 0 stands for in API timestamps.
    pub epoch_ms: i64,
    /// How often the scheduler runs, in ms.
    pub scheduler_interval_ms: SimTime,
    /// How often a metrics sample is taken, in ms.
    pub metrics_interval_ms: SimTime,
    /// Provisioning delay of groups without their own.
    pub default_delay: ProvisioningDelay,
    /// `spec.clusterName` of the Cluster API objects the world creates.
    pub cluster_name: String,
    /// How long the MachineSet controller takes to act on a change of replicas, in ms (0: at
    /// once).
    pub machine_set_sync_ms: SimTime,
    /// How long a Machine being deleted lingers after its drain, in ms (instance termination).
    pub machine_deletion_ms: SimTime,
}

impl Default for WorldConfig {
    fn default() -> Self {
        WorldConfig {
            seed: 0,
            epoch_ms: 1_735_689_600_000,
            scheduler_interval_ms: 1_000,
            metrics_interval_ms: 10_000,
            default_delay: ProvisioningDelay {
                min_ms: 60_000,
                max_ms: 120_000,
            },
            cluster_name: "sim".to_string(),
            machine_set_sync_ms: 0,
            machine_deletion_ms: 0,
        }
    }
}

/// Namespace and name.
pub(crate) type NsName = (String, String);

/// Which controller owns a pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Owner {
    /// A bare pod.
    None,
    /// A ReplicaSet of the world.
    ReplicaSet(NsName),
    /// A Job of the world.
    Job(NsName),
    /// A DaemonSet of the world, for the given node.
    DaemonSet(NsName, String),
}

/// What the world knows about a live (non-terminal) pod.
#[derive(Clone, Debug)]
pub(crate) struct PodState {
    /// The model view (bound views carry the node name and phase Running).
    pub view: Arc<Pod>,
    /// The pod's uid.
    pub uid: String,
    /// Creation time.
    pub created: SimTime,
    /// Creation order, for deterministic tie-breaks.
    pub seq: u64,
    /// The node it is bound to.
    pub node: Option<String>,
    /// Its controller.
    pub owner: Owner,
    /// How long it runs once started; `None` runs forever.
    pub lifetime: Option<SimTime>,
    /// The last Unschedulable message written, to avoid rewriting it every tick.
    pub unschedulable: Option<String>,
}

/// What the world knows about a node.
#[derive(Clone, Debug)]
pub(crate) struct NodeState {
    /// Its id in the scheduling snapshot.
    pub id: NodeId,
    /// The Machine it belongs to.
    pub machine: Option<NsName>,
}

/// A queued event.
#[derive(Clone, Debug)]
pub(crate) enum Event {
    /// The scheduler's periodic run.
    SchedulerTick,
    /// A periodic metrics sample.
    MetricsTick,
    /// A Machine's provisioning delay has elapsed.
    MachineReady { machine: NsName, uid: String },
    /// A pod's lifetime has elapsed.
    PodDone { pod: NsName, uid: String },
    /// A ReplicaSet's replica schedule changes its count.
    Replicas { rs: NsName, replicas: u32 },
    /// Start or end of a `NodesNotReady` fault (index into the faults).
    Readiness { fault: usize, start: bool },
    /// The MachineSet controller acts on a change of replicas.
    SyncGroup { group: NsName },
    /// Someone else changes a group's replicas (a `ReplicasChanged` fault, by index).
    ExternalScale { fault: usize },
    /// Drain the Node of a Machine being deleted.
    DrainMachine { machine: NsName, uid: String },
    /// A Machine being deleted (and its Node) is gone.
    MachineGone { machine: NsName, uid: String },
}

#[derive(Debug)]
struct Queued {
    at: SimTime,
    seq: u64,
    event: Event,
}

impl PartialEq for Queued {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Queued {}
impl PartialOrd for Queued {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Queued {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// The simulated cluster.
#[derive(Debug)]
pub struct World {
    pub(crate) cfg: WorldConfig,
    pub(crate) now: SimTime,
    pub(crate) rng: ChaCha8Rng,
    queue: BinaryHeap<Reverse<Queued>>,
    queued: u64,
    pub(crate) store: VersionedStore,
    pub(crate) snapshot: ClusterSnapshot,
    pub(crate) pods: rustc_hash::FxHashMap<NsName, PodState>,
    pod_seq: u64,
    pub(crate) nodes: BTreeMap<String, NodeState>,
    pub(crate) machines: BTreeMap<NsName, MachineState>,
    pub(crate) machine_seq: u64,
    pub(crate) groups: BTreeMap<NsName, GroupState>,
    pub(crate) delays: BTreeMap<String, ProvisioningDelay>,
    pub(crate) faults: Vec<Fault>,
    pub(crate) replica_sets: BTreeMap<NsName, ReplicaSetState>,
    pub(crate) jobs: BTreeMap<NsName, JobState>,
    pub(crate) daemon_sets: BTreeMap<NsName, DaemonSetState>,
    pub(crate) pdbs_dirty: bool,
    pub(crate) metrics: Metrics,
    /// Nodes taken down by each active `NodesNotReady` fault (by fault index).
    pub(crate) not_ready_by_fault: BTreeMap<usize, Vec<String>>,
    /// Pods kept with a terminal phase since the last [`World::gc_terminal_pods`].
    terminal: Vec<NsName>,
    /// Whether [`World::gc_terminal_pods`] has scanned every pod object once.
    gc_scanned: bool,
    /// Live pods not bound to a node, in scheduling-queue order (priority, then creation).
    pub(crate) pending: std::collections::BTreeSet<(i32, u64, NsName)>,
    /// Bumped by every change that can alter a scheduling outcome (pods created, bound or
    /// removed; nodes added, edited or removed).
    pub(crate) sched_epoch: u64,
    /// The epoch at which a scheduler pass changed nothing: until the epoch moves, another
    /// pass would decide exactly the same and is skipped.
    pub(crate) sched_idle_at: Option<u64>,
    /// Per snapshot node id: a stamp renewed whenever the node or its pods change (see
    /// [`World::touch_node`]), so that per-node scheduling verdicts can be reused.
    pub(crate) node_stamps: Vec<u64>,
    /// The last stamp handed out.
    pub(crate) stamp_seq: u64,
    /// kube-scheduler failure verdicts kept between scheduler passes, per equivalence class.
    pub(crate) failures: crate::scheduler::FailureCache,
    /// Healthy unmarked Machines the sets deleted.
    pub(crate) unmarked_deletions: Vec<crate::machines::UnmarkedDeletion>,
}

impl World {
    /// An empty world at virtual time 0, with its scheduler and metrics ticks queued.
    pub fn new(cfg: WorldConfig) -> World {
        let mut w = World {
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            store: VersionedStore::new(cfg.epoch_ms),
            cfg,
            now: 0,
            queue: BinaryHeap::new(),
            queued: 0,
            snapshot: ClusterSnapshot::new(),
            pods: rustc_hash::FxHashMap::default(),
            pod_seq: 0,
            nodes: BTreeMap::new(),
            machines: BTreeMap::new(),
            machine_seq: 0,
            groups: BTreeMap::new(),
            delays: BTreeMap::new(),
            faults: Vec::new(),
            replica_sets: BTreeMap::new(),
            jobs: BTreeMap::new(),
            daemon_sets: BTreeMap::new(),
            pdbs_dirty: false,
            metrics: Metrics::default(),
            not_ready_by_fault: BTreeMap::new(),
            terminal: Vec::new(),
            gc_scanned: false,
            pending: std::collections::BTreeSet::new(),
            sched_epoch: 0,
            sched_idle_at: None,
            node_stamps: Vec::new(),
            stamp_seq: 0,
            failures: Default::default(),
            unmarked_deletions: Vec::new(),
        };
        let tick = w.cfg.scheduler_interval_ms.max(1);
        w.schedule(tick, Event::SchedulerTick);
        w.schedule(0, Event::MetricsTick);
        w
    }

    /// The current virtual time.
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// The world's settings.
    pub fn config(&self) -> &WorldConfig {
        &self.cfg
    }

    /// The objects as they are now, for readers that borrow.
    pub fn objects(&self) -> &ObjectStore {
        self.store.objects()
    }

    /// A copy of the objects as they are now, for the autoscaler's view. Objects are shared, so
    /// this costs one map entry per object.
    pub fn store(&self) -> ObjectStore {
        self.store.objects().clone()
    }

    /// The latest `resourceVersion`.
    pub fn resource_version(&self) -> u64 {
        self.store.resource_version()
    }

    /// Every change after `rv`, oldest first (a watch from `rv`).
    pub fn events_since(&self, rv: u64) -> &[WatchEvent] {
        self.store.events_since(rv)
    }

    /// Forgets the change log up to and including `rv`: [`World::events_since`] from an
    /// earlier version then starts after `rv`. For a single reader that has seen those changes.
    pub fn forget_events_upto(&mut self, rv: u64) {
        self.store.forget_upto(rv);
    }

    /// The metrics recorded so far.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Hands the metrics log over (leaving it empty), for a caller done with the world: a copy
    /// of a long run's samples would double their memory.
    pub fn take_metrics(&mut self) -> Metrics {
        std::mem::take(&mut self.metrics)
    }

    /// Sets the provisioning delay of a group (MachineDeployment name).
    pub fn set_provisioning_delay(&mut self, group: &str, delay: ProvisioningDelay) {
        self.delays.insert(group.to_string(), delay);
    }

    /// Injects a fault.
    pub fn inject_fault(&mut self, fault: Fault) {
        if matches!(fault.kind, FaultKind::NodesNotReady { .. }) {
            let index = self.faults.len();
            self.schedule(
                fault.from_ms,
                Event::Readiness {
                    fault: index,
                    start: true,
                },
            );
            self.schedule(
                fault.to_ms,
                Event::Readiness {
                    fault: index,
                    start: false,
                },
            );
        }
        if matches!(fault.kind, FaultKind::ReplicasChanged { .. }) {
            let index = self.faults.len();
            self.schedule(fault.from_ms, Event::ExternalScale { fault: index });
        }
        self.faults.push(fault);
    }

    pub(crate) fn schedule(&mut self, at: SimTime, event: Event) {
        self.queued += 1;
        self.queue.push(Reverse(Queued {
            at,
            seq: self.queued,
            event,
        }));
    }

    /// Runs every event due at or before `t`, then sets the clock to `t` (never backwards).
    pub fn step_until(&mut self, t: SimTime) {
        while let Some(Reverse(top)) = self.queue.peek() {
            if top.at > t {
                break;
            }
            let Some(Reverse(q)) = self.queue.pop() else {
                break;
            };
            self.now = self.now.max(q.at);
            self.handle(q.event);
            self.reconcile();
        }
        self.now = self.now.max(t);
    }

    /// Advances the clock by `dt`, running what falls due.
    pub fn advance(&mut self, dt: SimTime) {
        self.step_until(self.now.saturating_add(dt));
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::SchedulerTick => {
                self.schedule_pending();
                self.refresh_pdbs();
                let next = self.now + self.cfg.scheduler_interval_ms.max(1);
                self.schedule(next, Event::SchedulerTick);
            }
            Event::MetricsTick => {
                self.sample_metrics();
                let next = self.now + self.cfg.metrics_interval_ms.max(1);
                self.schedule(next, Event::MetricsTick);
            }
            Event::MachineReady { machine, uid } => self.machine_ready(&machine, &uid),
            Event::PodDone { pod, uid } => self.pod_done(&pod, &uid),
            Event::Replicas { rs, replicas } => self.set_rs_replicas(&rs, replicas),
            Event::Readiness { fault, start } => self.readiness_fault(fault, start),
            Event::SyncGroup { group } => self.reconcile_group(&group),
            Event::ExternalScale { fault } => self.external_scale(fault),
            Event::DrainMachine { machine, uid } => self.drain_machine(&machine, &uid),
            Event::MachineGone { machine, uid } => self.machine_gone(&machine, &uid),
        }
    }

    /// Brings every controller's objects in line after a change: workloads, then budgets.
    pub(crate) fn reconcile(&mut self) {
        self.reconcile_workloads();
    }

    /// A random lowercase-alphanumeric suffix of 5 characters, as generated names have.
    pub(crate) fn suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..5)
            .map(|_| char::from(ALPHABET[self.rng.random_range(0..ALPHABET.len())]))
            .collect()
    }

    /// Writes an object, ignoring no-op writes. The object's identity is checked by callers.
    pub(crate) fn put(&mut self, obj: Value) -> Result<Option<ObjectKey>, WorldError> {
        Ok(self.store.put(obj, self.now)?)
    }

    /// The stored object, cloned for modification.
    pub(crate) fn get_owned(&self, k: &ObjectKey) -> Option<Value> {
        self.store.get(k).map(|v| (**v).clone())
    }

    /// Adds any object: Pods and Nodes are taken over by the scheduler, MachineDeployments by
    /// the machine controller; anything else (PDBs, ConfigMaps, ...) is stored as is.
    pub fn apply(&mut self, obj: Value) -> Result<ObjectKey, WorldError> {
        let k = ObjectStore::key_of(&obj, "apply")?;
        match (k.group.as_str(), k.kind.as_str()) {
            ("", "Pod") => self.create_pod(obj, Owner::None, None).map(|_| k),
            ("", "Node") => {
                self.register_node(obj, None)?;
                self.reconcile();
                Ok(k)
            }
            ("cluster.x-k8s.io", "MachineDeployment") => {
                let mut obj = obj;
                if obj.pointer("/metadata/generation").is_none() {
                    obj["metadata"]["generation"] = json!(1);
                }
                self.put(obj)?;
                self.reconcile_group(&(k.namespace.clone(), k.name.clone()));
                self.reconcile();
                Ok(k)
            }
            ("policy", "PodDisruptionBudget") => {
                let mut obj = obj;
                if obj.pointer("/metadata/generation").is_none() {
                    obj["metadata"]["generation"] = json!(1);
                }
                self.put(obj)?;
                self.pdbs_dirty = true;
                self.refresh_pdbs();
                Ok(k)
            }
            _ => {
                self.put(obj)?;
                Ok(k)
            }
        }
    }

    // ----- pods -----

    /// Creates a pod from its object. A pod naming an existing node in `spec.nodeName` is bound
    /// at once; otherwise it waits for the scheduler.
    pub(crate) fn create_pod(
        &mut self,
        mut obj: Value,
        owner: Owner,
        lifetime: Option<SimTime>,
    ) -> Result<NsName, WorldError> {
        if obj.pointer("/metadata/namespace").is_none() {
            obj["metadata"]["namespace"] = json!("default");
        }
        let k = ObjectStore::key_of(&obj, "pod")?;
        let id = (k.namespace.clone(), k.name.clone());
        if self.store.get(&k).is_some() {
            return Err(WorldError::AlreadyExists(k.to_string()));
        }
        if obj.pointer("/status/phase").is_none() {
            obj["status"] = json!({"phase": "Pending"});
        }
        let typed = api::Pod::deserialize(&obj).map_err(|e| WorldError::Invalid {
            object: k.to_string(),
            message: e.to_string(),
        })?;
        let mut view = Pod::from_k8s(&typed).map_err(|e| WorldError::Invalid {
            object: k.to_string(),
            message: e.to_string(),
        })?;
        self.put(obj)?;
        let stored = self.store.get(&k).cloned();
        let uid = stored
            .as_ref()
            .and_then(|o| o.pointer("/metadata/uid"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        view.uid = Arc::from(uid.as_str());
        view.creation_ms = Some(self.cfg.epoch_ms + self.now as i64);
        let node = view.node_name.map(|n| n.as_str().to_string());
        self.pod_seq += 1;
        self.pending
            .insert((-view.priority, self.pod_seq, id.clone()));
        self.sched_epoch += 1;
        self.pods.insert(
            id.clone(),
            PodState {
                view: Arc::new(view),
                uid,
                created: self.now,
                seq: self.pod_seq,
                node: None,
                owner,
                lifetime,
                unschedulable: None,
            },
        );
        self.pdbs_dirty = true;
        if let Some(node) = node
            && self.nodes.contains_key(&node)
        {
            self.bind(&id, &node);
        }
        Ok(id)
    }

    /// Binds a pending pod to a node: the snapshot, the object (nodeName, PodScheduled, phase
    /// Running), the wait-time metric and the pod's end of life.
    pub(crate) fn bind(&mut self, id: &NsName, node: &str) -> bool {
        let Some(node_id) = self.nodes.get(node).map(|n| n.id) else {
            return false;
        };
        let Some(st) = self.pods.get(id) else {
            return false;
        };
        let mut view = (*st.view).clone();
        view.node_name = Some(Sym::new(node));
        view.phase = PodPhase::Running;
        let view = Arc::new(view);
        if self.snapshot.add_pod(view.clone(), node_id).is_err() {
            return false;
        }
        self.touch_node(node_id);
        let k = key("", "Pod", &id.0, &id.1);
        let ts = self.store.timestamp(self.now);
        if let Some(mut obj) = self.get_owned(&k) {
            obj["spec"]["nodeName"] = json!(node);
            let cond = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": ts});
            obj["status"] = json!({
                "phase": "Running",
                "startTime": ts,
                "conditions": [cond("PodScheduled"), cond("Initialized"), cond("ContainersReady"), cond("Ready")],
            });
            // The stored object is known to carry its identity.
            let _ = self.put(obj);
        }
        let now = self.now;
        let Some(st) = self.pods.get_mut(id) else {
            return false;
        };
        let queued = (-st.view.priority, st.seq, id.clone());
        st.view = view;
        st.node = Some(node.to_string());
        st.unschedulable = None;
        self.pending.remove(&queued);
        self.sched_epoch += 1;
        let created = st.created;
        let lifetime = st.lifetime;
        let uid = st.uid.clone();
        self.metrics.waits.push(PodWait {
            pod: format!("{}/{}", id.0, id.1),
            created_ms: created,
            running_ms: now,
        });
        if let Some(life) = lifetime {
            self.schedule(
                now.saturating_add(life),
                Event::PodDone {
                    pod: id.clone(),
                    uid,
                },
            );
        }
        self.pdbs_dirty = true;
        true
    }

    /// Renews the stamp of snapshot node `id`: the node or its pods changed.
    pub(crate) fn touch_node(&mut self, id: NodeId) {
        let i = id.0 as usize;
        if self.node_stamps.len() <= i {
            self.node_stamps.resize(i + 1, 0);
        }
        self.stamp_seq += 1;
        self.node_stamps[i] = self.stamp_seq;
    }

    /// Removes a live pod. `terminal` keeps its object with that final phase (`Succeeded`);
    /// otherwise the object is deleted. The owner is told.
    pub(crate) fn remove_pod(&mut self, id: &NsName, terminal: Option<&str>) -> Option<PodState> {
        let st = self.pods.remove(id)?;
        self.pending
            .remove(&(-st.view.priority, st.seq, id.clone()));
        self.sched_epoch += 1;
        if let Some(node) = &st.node
            && let Some(n) = self.nodes.get(node)
        {
            let nid = n.id;
            let _ = self
                .snapshot
                .remove_pod(nid, st.view.namespace, &st.view.name);
            self.touch_node(nid);
        }
        let k = key("", "Pod", &id.0, &id.1);
        match terminal {
            Some(phase) => {
                if let Some(mut obj) = self.get_owned(&k) {
                    obj["status"]["phase"] = json!(phase);
                    if let Some(conds) = obj["status"]["conditions"].as_array_mut() {
                        for c in conds.iter_mut() {
                            if c["type"] == "Ready" || c["type"] == "ContainersReady" {
                                c["status"] = json!("False");
                                c["reason"] = json!("PodCompleted");
                            }
                        }
                    }
                    let _ = self.put(obj);
                    self.terminal.push(id.clone());
                }
            }
            None => {
                self.store.delete(&k, self.now);
            }
        }
        self.pdbs_dirty = true;
        self.pod_removed(id, &st, terminal.is_some());
        Some(st)
    }

    fn pod_done(&mut self, id: &NsName, uid: &str) {
        let Some(st) = self.pods.get(id) else {
            return;
        };
        if st.uid != uid {
            return;
        }
        // A ReplicaSet's pod that ends is replaced; modelled as deletion. Others succeed.
        let terminal = match st.owner {
            Owner::ReplicaSet(_) | Owner::DaemonSet(..) => None,
            Owner::None | Owner::Job(_) => Some("Succeeded"),
        };
        self.remove_pod(id, terminal);
    }

    /// Deletes a pod (as `kubectl delete pod` does, without a grace period). Its controller,
    /// if any, replaces it.
    pub fn delete_pod(&mut self, namespace: &str, name: &str) -> Result<(), WorldError> {
        let id = (namespace.to_string(), name.to_string());
        if self.remove_pod(&id, None).is_none() {
            return Err(WorldError::NotFound(format!("Pod {namespace}/{name}")));
        }
        self.reconcile();
        Ok(())
    }

    /// Deletes the objects of pods that have finished (phase `Succeeded` or `Failed`), as the
    /// pod garbage collector does; returns how many. Keeps long replays from carrying every
    /// finished pod in the store.
    pub fn gc_terminal_pods(&mut self) -> usize {
        // Only pods that ended in this world since the last collection can be new garbage,
        // plus terminal pods given as objects at the start (found by the first full scan).
        let mut candidates: Vec<ObjectKey> = std::mem::take(&mut self.terminal)
            .into_iter()
            .map(|(ns, n)| key("", "Pod", &ns, &n))
            .collect();
        if !self.gc_scanned {
            self.gc_scanned = true;
            candidates.extend(self.store.objects().list("", "Pod").map(|(k, _)| k.clone()));
        }
        candidates.sort();
        candidates.dedup();
        let done: Vec<ObjectKey> = candidates
            .into_iter()
            .filter(|k| {
                self.store.get(k).is_some_and(|v| {
                    matches!(
                        v.pointer("/status/phase").and_then(Value::as_str),
                        Some("Succeeded" | "Failed")
                    )
                })
            })
            .filter(|k| {
                !self
                    .pods
                    .contains_key(&(k.namespace.clone(), k.name.clone()))
            })
            .collect();
        for k in &done {
            self.store.delete(k, self.now);
        }
        done.len()
    }

    /// Adds a bare pod (no controller) that runs for `lifetime_ms` once started, or forever.
    pub fn add_pod(&mut self, obj: Value, lifetime_ms: Option<SimTime>) -> Result<(), WorldError> {
        self.create_pod(obj, Owner::None, lifetime_ms)?;
        Ok(())
    }

    // ----- nodes -----

    /// Stores a Node object and adds it to the scheduling snapshot.
    pub(crate) fn register_node(
        &mut self,
        obj: Value,
        machine: Option<NsName>,
    ) -> Result<String, WorldError> {
        let k = ObjectStore::key_of(&obj, "node")?;
        if self.nodes.contains_key(&k.name) {
            return Err(WorldError::AlreadyExists(k.to_string()));
        }
        let view = self.node_view(&obj, &k)?;
        self.put(obj)?;
        let mut view = view;
        if let Some(uid) = self
            .store
            .get(&k)
            .and_then(|o| o.pointer("/metadata/uid"))
            .and_then(Value::as_str)
        {
            view.uid = Arc::from(uid);
        }
        let id = self
            .snapshot
            .add_node(Arc::new(view))
            .map_err(|e| WorldError::Invalid {
                object: k.to_string(),
                message: e.to_string(),
            })?;
        self.nodes.insert(k.name.clone(), NodeState { id, machine });
        self.touch_node(id);
        self.sched_epoch += 1;
        Ok(k.name)
    }

    fn node_view(&self, obj: &Value, k: &ObjectKey) -> Result<Node, WorldError> {
        let typed = api::Node::deserialize(obj).map_err(|e| WorldError::Invalid {
            object: k.to_string(),
            message: e.to_string(),
        })?;
        let mut view = Node::from_k8s(&typed).map_err(|e| WorldError::Invalid {
            object: k.to_string(),
            message: e.to_string(),
        })?;
        if view.creation_ms.is_none() {
            view.creation_ms = Some(self.cfg.epoch_ms + self.now as i64);
        }
        Ok(view)
    }

    /// Removes a node, its object and the pods bound to it (as the pod garbage collector does);
    /// controllers replace the pods. The node's Machine, if any, is left alone.
    pub fn delete_node(&mut self, name: &str) -> Result<(), WorldError> {
        self.remove_node(name)?;
        self.reconcile();
        Ok(())
    }

    pub(crate) fn remove_node(&mut self, name: &str) -> Result<(), WorldError> {
        let Some(st) = self.nodes.get(name).cloned() else {
            return Err(WorldError::NotFound(format!("Node {name}")));
        };
        let mut on: Vec<NsName> = self
            .pods
            .iter()
            .filter(|(_, p)| p.node.as_deref() == Some(name))
            .map(|(k, _)| k.clone())
            .collect();
        // The pod map is unordered; remove in name order so the change log is deterministic.
        on.sort();
        for id in on {
            self.remove_pod(&id, None);
        }
        let _ = self.snapshot.remove_node(st.id);
        self.touch_node(st.id);
        self.nodes.remove(name);
        self.sched_epoch += 1;
        self.store.delete(&key("", "Node", "", name), self.now);
        Ok(())
    }

    /// Rewrites a node object through `edit` and refreshes its snapshot entry, keeping its pods.
    pub(crate) fn edit_node(
        &mut self,
        name: &str,
        edit: impl FnOnce(&mut Value),
    ) -> Result<(), WorldError> {
        let k = key("", "Node", "", name);
        let (Some(mut obj), Some(st)) = (self.get_owned(&k), self.nodes.get(name).cloned()) else {
            return Err(WorldError::NotFound(format!("Node {name}")));
        };
        edit(&mut obj);
        let mut view = self.node_view(&obj, &k)?;
        self.put(obj)?;
        if let Some(old) = self.snapshot.node(st.id) {
            view.uid = old.node.uid.clone();
            view.creation_ms = old.node.creation_ms;
        }
        let pods: Vec<Arc<Pod>> = self
            .snapshot
            .node(st.id)
            .map(|i| i.pods.clone())
            .unwrap_or_default();
        let _ = self.snapshot.remove_node(st.id);
        let id = self
            .snapshot
            .add_node(Arc::new(view))
            .map_err(|e| WorldError::Invalid {
                object: k.to_string(),
                message: e.to_string(),
            })?;
        for p in pods {
            let _ = self.snapshot.add_pod(p, id);
        }
        self.touch_node(st.id);
        self.touch_node(id);
        if let Some(n) = self.nodes.get_mut(name) {
            n.id = id;
        }
        self.sched_epoch += 1;
        Ok(())
    }

    /// Adds (or replaces, by key and effect) a taint on a node.
    pub fn taint_node(
        &mut self,
        name: &str,
        taint_key: &str,
        value: &str,
        effect: &str,
    ) -> Result<(), WorldError> {
        let taint = json!({"key": taint_key, "value": value, "effect": effect});
        self.edit_node(name, |obj| {
            let mut taints: Vec<Value> = obj
                .pointer("/spec/taints")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            taints.retain(|t| !(t["key"] == taint_key && t["effect"] == effect));
            taints.push(taint);
            obj["spec"]["taints"] = Value::Array(taints);
        })
    }

    /// Removes every taint with this key from a node.
    pub fn untaint_node(&mut self, name: &str, taint_key: &str) -> Result<(), WorldError> {
        self.edit_node(name, |obj| {
            if let Some(taints) = obj
                .pointer_mut("/spec/taints")
                .and_then(Value::as_array_mut)
            {
                taints.retain(|t| t["key"] != taint_key);
            }
        })
    }

    /// Marks a node (un)schedulable, as `kubectl cordon` / `uncordon` do.
    pub fn set_unschedulable(&mut self, name: &str, unschedulable: bool) -> Result<(), WorldError> {
        self.edit_node(name, |obj| {
            obj["spec"]["unschedulable"] = json!(unschedulable);
        })
    }

    /// Names of the nodes, sorted.
    pub fn node_names(&self) -> Vec<String> {
        self.nodes.keys().cloned().collect()
    }

    /// Live (not terminal) pods as `(namespace, name, node)`, sorted.
    pub fn live_pods(&self) -> Vec<(String, String, Option<String>)> {
        let mut pods: Vec<_> = self
            .pods
            .iter()
            .map(|((ns, n), p)| (ns.clone(), n.clone(), p.node.clone()))
            .collect();
        pods.sort();
        pods
    }

    /// Live pods bound to `node` that are not DaemonSet pods (those a drain must move).
    pub fn non_daemon_pods_on(&self, node: &str) -> usize {
        self.pods
            .values()
            .filter(|p| p.node.as_deref() == Some(node) && !matches!(p.owner, Owner::DaemonSet(..)))
            .count()
    }

    /// Number of live pods not bound to a node.
    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// The scheduling snapshot the scheduler works on (nodes and bound pods).
    pub fn snapshot(&self) -> &ClusterSnapshot {
        &self.snapshot
    }

    /// The Machine (`namespace`, `name`) a node belongs to, if the machine controller made it.
    pub fn machine_of_node(&self, node: &str) -> Option<(String, String)> {
        self.nodes.get(node).and_then(|n| n.machine.clone())
    }
}

/// Generic writes for an API front end (the REST facade): replace or delete any stored object
/// through the path its controller would see.
impl World {
    /// Replaces an existing object (an update through the API): Nodes are re-read by the
    /// scheduler, a MachineDeployment whose `spec.replicas` changed goes through the scale
    /// rules (a `ScaleApiError` fault refuses it) and is reconciled, budgets are recomputed;
    /// other objects are stored as given. The caller checks `resourceVersion` preconditions.
    pub fn replace_object(&mut self, obj: Value) -> Result<ObjectKey, WorldError> {
        let k = ObjectStore::key_of(&obj, "replace")?;
        let Some(old) = self.store.get(&k).cloned() else {
            return Err(WorldError::NotFound(k.to_string()));
        };
        match (k.group.as_str(), k.kind.as_str()) {
            ("", "Node") => {
                self.edit_node(&k.name, |o| *o = obj)?;
                self.reconcile();
                Ok(k)
            }
            ("", "Pod") => {
                self.put(obj)?;
                Ok(k)
            }
            ("cluster.x-k8s.io", "MachineDeployment") => {
                let replicas = |v: &Value| v.pointer("/spec/replicas").and_then(Value::as_u64);
                if replicas(&old) != replicas(&obj)
                    && self
                        .faults
                        .iter()
                        .any(|f| f.active(&k.name, self.now) && f.kind == FaultKind::ScaleApiError)
                {
                    return Err(WorldError::ScaleApi {
                        group: format!("{}/{}", k.namespace, k.name),
                    });
                }
                self.apply(obj)
            }
            _ => self.apply(obj),
        }
    }

    /// Deletes any stored object, returning its last version: Pods, Nodes and Machines through
    /// their controllers (pods are replaced by their owners, a Machine takes its Node along and
    /// is replaced if its set still wants it), a MachineDeployment with its MachineSet and
    /// Machines; anything else is removed from the store.
    pub fn delete_object(&mut self, k: &ObjectKey) -> Result<Arc<Value>, WorldError> {
        let Some(last) = self.store.get(k).cloned() else {
            return Err(WorldError::NotFound(k.to_string()));
        };
        let id = (k.namespace.clone(), k.name.clone());
        match (k.group.as_str(), k.kind.as_str()) {
            ("", "Pod") if self.pods.contains_key(&id) => self.delete_pod(&k.namespace, &k.name)?,
            ("", "Node") if self.nodes.contains_key(&k.name) => self.delete_node(&k.name)?,
            ("cluster.x-k8s.io", "Machine") if self.machines.contains_key(&id) => {
                self.remove_machine(&k.namespace, &k.name)?
            }
            ("cluster.x-k8s.io", "MachineDeployment") => {
                let members: Vec<NsName> = self
                    .machines
                    .iter()
                    .filter(|(_, m)| m.group == id)
                    .map(|(mk, _)| mk.clone())
                    .collect();
                for m in members {
                    self.delete_machine(&m);
                }
                if let Some(g) = self.groups.remove(&id) {
                    let ms = crate::objects::key(k.group.as_str(), "MachineSet", &id.0, &g.ms_name);
                    self.store.delete(&ms, self.now);
                }
                self.store.delete(k, self.now);
                self.reconcile();
            }
            ("policy", "PodDisruptionBudget") => {
                self.store.delete(k, self.now);
                self.pdbs_dirty = true;
            }
            _ => {
                self.store.delete(k, self.now);
            }
        }
        Ok(last)
    }

    /// The `resourceVersion` of the oldest change still in the log, if any: a watch from an
    /// older version can no longer be served completely.
    pub fn oldest_logged_version(&self) -> Option<u64> {
        self.store.log().first().map(|e| e.rv)
    }
}

#[cfg(test)]
mod api_tests {
    use super::*;
    use crate::machines::NodeGroupSpec;

    fn node(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                "conditions": [{"type": "Ready", "status": "True"}]}})
    }

    #[test]
    fn replaced_nodes_reach_the_scheduler_and_deletions_go_through_controllers() {
        let mut w = World::new(WorldConfig::default());
        w.apply(node("n1")).unwrap();
        let mut tainted = node("n1");
        tainted["spec"] = json!({"taints": [{"key": "k", "effect": "NoSchedule"}]});
        w.replace_object(tainted).unwrap();
        w.add_pod(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}), None).unwrap();
        w.advance(5_000);
        assert_eq!(
            w.pending_count(),
            1,
            "the taint written by replace_object is seen"
        );
        w.replace_object(node("n1")).unwrap();
        w.advance(5_000);
        assert_eq!(w.pending_count(), 0);
        assert!(matches!(
            w.replace_object(node("n9")),
            Err(WorldError::NotFound(_))
        ));

        w.delete_object(&key("", "Node", "", "n1")).unwrap();
        assert!(w.node_names().is_empty());
        assert_eq!(w.live_pods().len(), 0, "its pods went with it");
        assert!(matches!(
            w.delete_object(&key("", "Node", "", "n1")),
            Err(WorldError::NotFound(_))
        ));

        let spec = NodeGroupSpec {
            namespace: "capi".into(),
            name: "md".into(),
            replicas: 2,
            max_size: 3,
            cpu: "2".into(),
            memory: "4Gi".into(),
            max_pods: 10,
            ..Default::default()
        };
        w.add_node_group(&spec).unwrap();
        assert_eq!(w.machines_of("capi", "md").len(), 2);
        w.delete_object(&key("cluster.x-k8s.io", "MachineDeployment", "capi", "md"))
            .unwrap();
        assert!(w.machines_of("capi", "md").is_empty());
        assert_eq!(
            w.objects().list("cluster.x-k8s.io", "MachineSet").count(),
            0
        );
        assert!(w.oldest_logged_version().is_some());
    }

    #[test]
    fn machine_deployment_replica_changes_honour_scale_faults() {
        let mut w = World::new(WorldConfig::default());
        let spec = NodeGroupSpec {
            namespace: "capi".into(),
            name: "md".into(),
            replicas: 0,
            max_size: 3,
            cpu: "2".into(),
            memory: "4Gi".into(),
            max_pods: 10,
            ..Default::default()
        };
        w.add_node_group(&spec).unwrap();
        w.inject_fault(Fault {
            group: "md".into(),
            from_ms: 0,
            to_ms: 1_000,
            kind: FaultKind::ScaleApiError,
        });
        let k = key("cluster.x-k8s.io", "MachineDeployment", "capi", "md");
        let mut md = (**w.objects().get(&k).unwrap()).clone();
        md["spec"]["replicas"] = json!(1);
        assert!(matches!(
            w.replace_object(md.clone()),
            Err(WorldError::ScaleApi { .. })
        ));
        w.advance(1_000);
        w.replace_object(md).unwrap();
        assert_eq!(w.machines_of("capi", "md").len(), 1);
    }
}
