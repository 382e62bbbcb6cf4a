//! The world: the shared cluster (clock, event queue, object store and watch log) and the
//! controllers that act on it — scheduler, machine controller, workload controllers, disruption
//! budgets with the Eviction API, node readiness — each owning its own state.
//!
//! It decides only which controller runs when: it hands each due event to the controller it
//! names, lets the workload controllers catch up after every change (as their watches would),
//! and routes API calls (create, replace, delete, scale, evict) to the controller of the object.
//! Controllers never see the world, only the cluster and the peers it lends them. It must never
//! read the real clock, never use unseeded randomness and never iterate a hash map where the
//! order could leak into results.

use std::sync::Arc;

use autoscaler_core::ClusterSnapshot;
use autoscaler_model::ObjectKey;
use autoscaler_model::ObjectStore;
use serde_json::{Value, json};

use crate::cluster::{Cluster, Owner};
use crate::dra_driver::{DraDriver, DraDriverSpec};
use crate::eviction::{BudgetStatus, Disruption, EvictionError};
use crate::machines::{self, MachineSettings, Machines, NodeGroupSpec, Peers, UnmarkedDeletion};
use crate::metrics::Metrics;
use crate::objects::WatchEvent;
use crate::queue::{Event, NsName};
use crate::readiness::{self, Readiness};
use crate::scheduler::Scheduler;
use crate::scoring::Scoring;
use crate::storage::{self, CsiSpec, StatefulSetSpec, Storage};
use crate::time::SimTime;
use crate::workloads::{DaemonSetSpec, JobSpec, ReplicaSetSpec, Restart, Workloads};

mod status;

pub use crate::cluster::WorldError;
pub use crate::faults::{Fault, FaultKind, ProvisioningDelay};

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
    /// How the scheduler scores nodes' resource fit (kube-scheduler's default:
    /// `LeastAllocated`).
    pub scoring: Scoring,
    /// How long after a new node joins Ready its device plugins advertise its extended
    /// resources (GPUs), in ms (0: at once, with the node).
    pub device_plugin_delay_ms: SimTime,
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
            scoring: Scoring::default(),
            device_plugin_delay_ms: 0,
        }
    }
}

/// The simulated cluster.
#[derive(Debug)]
pub struct World {
    cfg: WorldConfig,
    cluster: Cluster,
    scheduler: Scheduler,
    machines: Machines,
    workloads: Workloads,
    disruption: Disruption,
    readiness: Readiness,
    storage: Storage,
    dra: DraDriver,
}

/// The peers the world lends the machine controller: workloads react, evictions go through the
/// disruption controller (and the evicted pod's owner replaces it).
struct Lent<'a> {
    workloads: &'a mut Workloads,
    disruption: &'a mut Disruption,
}

impl Peers for Lent<'_> {
    fn react(&mut self, c: &mut Cluster) {
        self.workloads.reconcile(c);
    }

    fn evict(&mut self, c: &mut Cluster, (ns, name): &NsName) -> bool {
        // Cluster API's drain asks for no grace of its own: the pod's applies.
        evict(c, self.disruption, self.workloads, ns, name, None).is_ok()
    }
}

/// The Eviction API, then the evicted pod's owner catches up.
fn evict(
    c: &mut Cluster,
    disruption: &mut Disruption,
    workloads: &mut Workloads,
    namespace: &str,
    name: &str,
    grace_sec: Option<u64>,
) -> Result<(), EvictionError> {
    disruption.evict(c, namespace, name, grace_sec)?;
    workloads.reconcile(c);
    Ok(())
}

/// The clock, the queue and the store.
impl World {
    /// An empty world at virtual time 0, with its scheduler and metrics ticks queued.
    pub fn new(cfg: WorldConfig) -> World {
        let mut cluster = Cluster::new(cfg.seed, cfg.epoch_ms);
        cluster.schedule(cfg.scheduler_interval_ms.max(1), Event::SchedulerTick);
        cluster.schedule(0, Event::MetricsTick);
        let machines = Machines::new(MachineSettings {
            cluster_name: cfg.cluster_name.clone(),
            default_delay: cfg.default_delay,
            sync_ms: cfg.machine_set_sync_ms,
            deletion_ms: cfg.machine_deletion_ms,
            device_plugin_ms: cfg.device_plugin_delay_ms,
        });
        let scheduler = Scheduler::new(cfg.seed, cfg.scoring);
        World {
            cfg,
            cluster,
            scheduler,
            machines,
            workloads: Workloads::default(),
            disruption: Disruption::default(),
            readiness: Readiness::default(),
            storage: Storage::default(),
            dra: DraDriver::default(),
        }
    }

    /// The current virtual time.
    pub fn now(&self) -> SimTime {
        self.cluster.now
    }

    /// The world's settings.
    pub fn config(&self) -> &WorldConfig {
        &self.cfg
    }

    /// The objects as they are now, for readers that borrow.
    pub fn objects(&self) -> &ObjectStore {
        self.cluster.store.objects()
    }

    /// A copy of the objects as they are now, for the autoscaler's view. Objects are shared, so
    /// this costs one map entry per object.
    pub fn store(&self) -> ObjectStore {
        self.cluster.store.objects().clone()
    }

    /// The latest `resourceVersion`.
    pub fn resource_version(&self) -> u64 {
        self.cluster.store.resource_version()
    }

    /// Every change after `rv`, oldest first (a watch from `rv`).
    pub fn events_since(&self, rv: u64) -> &[WatchEvent] {
        self.cluster.store.events_since(rv)
    }

    /// Lets edits of an object whose current version was not yet forgotten from the change log
    /// be made in place, the superseded version's entry then carrying `null`: for a single
    /// reader that applies only each object's latest state and skips such entries, like the
    /// simulation's informer (see `VersionedStore::set_latest_only`). Off by default: a watch
    /// stream needs every version.
    pub fn set_latest_only_log(&mut self, on: bool) {
        self.cluster.store.set_latest_only(on);
    }

    /// Forgets the change log up to and including `rv`: [`World::events_since`] from an
    /// earlier version then starts after `rv`. For a single reader that has seen those changes.
    pub fn forget_events_upto(&mut self, rv: u64) {
        self.cluster.store.forget_upto(rv);
    }

    /// The `resourceVersion` of the oldest change still in the log, if any: a watch from an
    /// older version can no longer be served completely.
    pub fn oldest_logged_version(&self) -> Option<u64> {
        self.cluster.store.log().first().map(|e| e.rv)
    }

    /// The metrics recorded so far.
    pub fn metrics(&self) -> &Metrics {
        &self.cluster.metrics
    }

    /// Hands the metrics log over (leaving it empty), for a caller done with the world: a copy
    /// of a long run's samples would double their memory.
    pub fn take_metrics(&mut self) -> Metrics {
        std::mem::take(&mut self.cluster.metrics)
    }

    /// Takes a sample now (also done every `metrics_interval_ms`).
    pub fn sample_metrics(&mut self) {
        sample_metrics(&mut self.cluster, &self.machines);
    }

    /// Sets the provisioning delay of a group (MachineDeployment name).
    pub fn set_provisioning_delay(&mut self, group: &str, delay: ProvisioningDelay) {
        self.machines.set_provisioning_delay(group, delay);
    }

    /// Injects a fault: node readiness takes `NodesNotReady`, the machine controller the rest.
    pub fn inject_fault(&mut self, fault: Fault) {
        if matches!(fault.kind, FaultKind::NodesNotReady { .. }) {
            self.readiness.inject(&mut self.cluster, fault);
        } else {
            self.machines.inject(&mut self.cluster, fault);
        }
    }

    /// Runs every event due at or before `t`, then sets the clock to `t` (never backwards).
    pub fn step_until(&mut self, t: SimTime) {
        while let Some((at, event)) = self.cluster.queue.pop_due(t) {
            self.cluster.now = self.cluster.now.max(at);
            self.handle(event);
            self.reconcile();
        }
        self.cluster.now = self.cluster.now.max(t);
    }

    /// Advances the clock by `dt`, running what falls due.
    pub fn advance(&mut self, dt: SimTime) {
        self.step_until(self.cluster.now.saturating_add(dt));
    }

    /// Hands an event to its controller.
    fn handle(&mut self, event: Event) {
        let c = &mut self.cluster;
        let mut peers = Lent {
            workloads: &mut self.workloads,
            disruption: &mut self.disruption,
        };
        match event {
            Event::SchedulerTick => {
                self.dra.tick(c);
                self.scheduler.schedule_pending(c);
                peers.disruption.refresh(c);
                let next = c.now + self.cfg.scheduler_interval_ms.max(1);
                c.schedule(next, Event::SchedulerTick);
            }
            Event::MetricsTick => {
                sample_metrics(c, &self.machines);
                let next = c.now + self.cfg.metrics_interval_ms.max(1);
                c.schedule(next, Event::MetricsTick);
            }
            Event::MachineReady { machine, uid } => self.machines.machine_ready(c, &machine, &uid),
            Event::PodDone { pod, uid } => c.pod_done(&pod, &uid),
            Event::PodTerminated { pod, uid } => c.pod_terminated(&pod, &uid),
            Event::Replicas { rs, replicas } => peers.workloads.set_rs_replicas(c, &rs, replicas),
            Event::StatefulSetReplicas { sts, replicas } => {
                self.storage.set_replicas(c, &sts, replicas)
            }
            Event::Readiness { fault, start } => {
                self.readiness.fault(c, &self.machines, fault, start)
            }
            Event::SyncGroup { group } => self.machines.reconcile_group(c, &group),
            Event::ExternalScale { fault } => self.machines.external_scale(c, &mut peers, fault),
            Event::DrainMachine { machine, uid } => {
                self.machines.drain_machine(c, &mut peers, &machine, &uid)
            }
            Event::MachineGone { machine, uid } => {
                self.machines.machine_gone(c, &mut peers, &machine, &uid)
            }
            Event::DevicePlugin {
                node,
                uid,
                resources,
            } => crate::device_plugin::advertise(c, &node, &uid, &resources),
            Event::DraPublish { node, uid } => self.dra.publish(c, &node, &uid),
        }
    }

    /// Lets the workload controllers catch up after a change.
    fn reconcile(&mut self) {
        self.workloads.reconcile(&mut self.cluster);
        self.storage.reconcile(&mut self.cluster);
        self.dra.reconcile(&mut self.cluster);
    }

    /// The peers lent to the machine controller, with the cluster.
    fn machines_and_peers(&mut self) -> (&mut Machines, &mut Cluster, Lent<'_>) {
        (
            &mut self.machines,
            &mut self.cluster,
            Lent {
                workloads: &mut self.workloads,
                disruption: &mut self.disruption,
            },
        )
    }
}

/// Objects through the API: each kind goes to its controller.
impl World {
    /// Adds any object: Pods and Nodes are taken over by the scheduler, MachineDeployments by
    /// the machine controller; anything else (PDBs, ConfigMaps, ...) is stored as is.
    pub fn apply(&mut self, obj: Value) -> Result<ObjectKey, WorldError> {
        let k = ObjectStore::key_of(&obj, "apply")?;
        // A CRD's status subresource: only `write_status` sets the status.
        let obj = if status::has_status_subresource(&k) {
            self.without_status_write(&k, obj)
        } else {
            obj
        };
        match (k.group.as_str(), k.kind.as_str()) {
            ("", "Pod") => self.cluster.create_pod(obj, Owner::None, None).map(|_| k),
            ("", "Node") => {
                self.cluster.register_node(obj, None)?;
                self.reconcile();
                Ok(k)
            }
            (machines::CAPI_GROUP, "MachineDeployment") => {
                self.cluster.put(with_generation(obj))?;
                let id = (k.namespace.clone(), k.name.clone());
                self.machines.reconcile_group(&mut self.cluster, &id);
                self.reconcile();
                Ok(k)
            }
            (autoscaler_model::DRA_GROUP, _) => {
                self.cluster.put(obj)?;
                crate::dra_driver::dra_changed(&mut self.cluster);
                self.reconcile();
                Ok(k)
            }
            ("policy", "PodDisruptionBudget") => {
                self.cluster.put(with_generation(obj))?;
                self.disruption.budget_written();
                self.disruption.refresh(&mut self.cluster);
                Ok(k)
            }
            ("", "PersistentVolumeClaim" | "PersistentVolume")
            | ("storage.k8s.io", "StorageClass" | "CSINode" | "CSIDriver" | "CSIStorageCapacity") =>
            {
                self.cluster.put(obj)?;
                self.storage.activate();
                storage::storage_changed(&mut self.cluster);
                self.reconcile();
                Ok(k)
            }
            _ => {
                self.cluster.put(obj)?;
                Ok(k)
            }
        }
    }

    /// Replaces an existing object (an update through the API): Nodes are re-read by the
    /// scheduler, a MachineDeployment whose `spec.replicas` changed goes through the scale
    /// rules (a `ScaleApiError` fault refuses it) and is reconciled, budgets are recomputed;
    /// other objects are stored as given. The caller checks `resourceVersion` preconditions.
    pub fn replace_object(&mut self, obj: Value) -> Result<ObjectKey, WorldError> {
        let k = ObjectStore::key_of(&obj, "replace")?;
        let Some(old) = self.cluster.store.get(&k).cloned() else {
            return Err(WorldError::NotFound(k.to_string()));
        };
        match (k.group.as_str(), k.kind.as_str()) {
            ("", "Node") => {
                self.cluster.edit_node(&k.name, |o| *o = obj)?;
                self.reconcile();
                Ok(k)
            }
            ("", "Pod") => {
                self.cluster.put(obj)?;
                Ok(k)
            }
            (machines::CAPI_GROUP, "MachineDeployment") => {
                let replicas = |v: &Value| v.pointer("/spec/replicas").and_then(Value::as_u64);
                if replicas(&old) != replicas(&obj)
                    && self.machines.scale_refused(&k.name, self.cluster.now)
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
        let Some(last) = self.cluster.store.get(k).cloned() else {
            return Err(WorldError::NotFound(k.to_string()));
        };
        let id = (k.namespace.clone(), k.name.clone());
        let now = self.cluster.now;
        match (k.group.as_str(), k.kind.as_str()) {
            ("", "Pod") if self.cluster.pods.contains_key(&id) => {
                self.delete_pod(&k.namespace, &k.name)?
            }
            ("", "Node") if self.cluster.nodes.contains_key(&k.name) => {
                self.delete_node(&k.name)?
            }
            (machines::CAPI_GROUP, "Machine") if self.machines.contains(&id) => {
                self.remove_machine(&k.namespace, &k.name)?
            }
            (machines::CAPI_GROUP, "MachineDeployment") => {
                self.machines.delete_deployment(&mut self.cluster, &id);
                self.reconcile();
            }
            ("policy", "PodDisruptionBudget") => {
                self.cluster.store.delete(k, now);
                self.disruption.budget_written();
            }
            ("", "PersistentVolumeClaim" | "PersistentVolume")
            | ("storage.k8s.io", "StorageClass" | "CSINode" | "CSIDriver" | "CSIStorageCapacity") =>
            {
                self.cluster.store.delete(k, now);
                storage::storage_changed(&mut self.cluster);
                self.reconcile();
            }
            (autoscaler_model::DRA_GROUP, _) => {
                self.cluster.store.delete(k, now);
                crate::dra_driver::dra_changed(&mut self.cluster);
                self.reconcile();
            }
            _ => {
                self.cluster.store.delete(k, now);
            }
        }
        Ok(last)
    }
}

/// Records a metrics sample of the cluster and the machine controller's groups now.
fn sample_metrics(c: &mut Cluster, machines: &Machines) {
    let pods = c
        .pods
        .values()
        .map(|p| (p.node.is_some(), p.unschedulable.is_some()));
    let mut s = crate::metrics::sample(
        c.now,
        c.nodes.len(),
        pods,
        machines.groups(),
        machines.members(),
    );
    let mut holding: std::collections::HashSet<&str> = std::collections::HashSet::new();
    for p in c.pods.values() {
        if let Some(node) = &p.node
            && !matches!(p.owner, Owner::DaemonSet(..))
        {
            s.bound_requests.add(&p.view.requests);
            if crate::timed_work::is_timed(p) {
                s.timed_requests.add(&p.view.requests);
            }
            holding.insert(node);
        }
    }
    // DRA devices held by the bound pods' claims, counted like extended resources under the
    // driver's name (claims are allocated at bind and freed when no pod holds them).
    for (driver, n) in crate::dra_driver::allocated_per_driver(c.store.objects()) {
        let name = autoscaler_model::ResourceName::Extended(autoscaler_model::Sym::new(&driver));
        s.bound_requests
            .set(name, s.bound_requests.get(name).saturating_add(n));
    }
    // Which registered nodes are empty, and which of them never held a pod at a sample: the
    // report splits the run's distance to its bound with them.
    for (group, node) in machines.registered() {
        if holding.contains(node) {
            if !c.metrics.used_nodes.contains(node) {
                c.metrics.used_nodes.insert(node.to_string());
            }
        } else {
            *s.empty_per_group
                .entry(format!("{}/{}", group.0, group.1))
                .or_default() += 1;
            if !c.metrics.used_nodes.contains(node) {
                s.empty_fresh += 1;
            }
        }
    }
    c.metrics.samples.push(s);
}

/// An object with `metadata.generation` (1 when it has none).
fn with_generation(mut obj: Value) -> Value {
    if obj.pointer("/metadata/generation").is_none() {
        obj["metadata"]["generation"] = json!(1);
    }
    obj
}

/// Pods and nodes.
impl World {
    /// Adds a bare pod (no controller) that runs for `lifetime_ms` once started, or forever.
    pub fn add_pod(&mut self, obj: Value, lifetime_ms: Option<SimTime>) -> Result<(), WorldError> {
        self.cluster.create_pod(obj, Owner::None, lifetime_ms)?;
        Ok(())
    }

    /// Adds a pod replayed from a trace whose controller (named by its `ownerReferences`) the
    /// world does not run: it runs `lifetime_ms` once started, and when it is evicted or deleted
    /// before its end, a replacement is created at once as its controller would: see
    /// [`Restart`].
    pub fn add_replayed_pod(
        &mut self,
        obj: Value,
        lifetime_ms: SimTime,
        restart: Restart,
    ) -> Result<(), WorldError> {
        let id = self
            .cluster
            .create_pod(obj, Owner::Replayed(restart), Some(lifetime_ms))?;
        let now = self.cluster.now;
        if let Some(st) = self.cluster.pods.get(&id) {
            let requests = st.view.requests.clone();
            (self.cluster.metrics.timed_work).push(now, now.saturating_add(lifetime_ms), &requests);
        }
        Ok(())
    }

    /// Deletes a pod (as `kubectl delete pod` does, without a grace period). Its controller,
    /// if any, replaces it.
    pub fn delete_pod(&mut self, namespace: &str, name: &str) -> Result<(), WorldError> {
        let id = (namespace.to_string(), name.to_string());
        if self.cluster.remove_pod(&id, None).is_none() {
            return Err(WorldError::NotFound(format!("Pod {namespace}/{name}")));
        }
        self.reconcile();
        Ok(())
    }

    /// Deletes the objects of pods that have finished (phase `Succeeded` or `Failed`), as the
    /// pod garbage collector does; returns how many. Keeps long replays from carrying every
    /// finished pod in the store.
    pub fn gc_terminal_pods(&mut self) -> usize {
        self.cluster.gc_terminal_pods()
    }

    /// Evicts a pod as the Eviction API does: pending pods go at once; a running pod goes only
    /// if the one budget covering it (if any) allows a disruption, and then over its grace
    /// period: `grace_period_sec` (the request's `deleteOptions.gracePeriodSeconds`) if given,
    /// else the pod's `terminationGracePeriodSeconds`, else 30 s. Meanwhile it carries
    /// `deletionTimestamp` and `deletionGracePeriodSeconds`, keeps its node and resources, and
    /// neither its controller (which replaces it at once) nor its budget counts it. It exits
    /// after its own grace, or at the end of a shorter requested one (always the full time: no
    /// random draw). Evicting a pod already terminating succeeds and changes nothing.
    pub fn evict(
        &mut self,
        namespace: &str,
        name: &str,
        grace_period_sec: Option<u64>,
    ) -> Result<(), EvictionError> {
        evict(
            &mut self.cluster,
            &mut self.disruption,
            &mut self.workloads,
            namespace,
            name,
            grace_period_sec,
        )
    }

    /// Every budget's current healthy and desired counts, sorted by budget (for callers that
    /// check that no disruption broke a budget).
    pub fn budget_statuses(&self) -> Vec<BudgetStatus> {
        crate::eviction::budget_statuses(&self.cluster)
    }

    /// Removes a node, its object and the pods bound to it (as the pod garbage collector does);
    /// controllers replace the pods. The node's Machine, if any, is left alone.
    pub fn delete_node(&mut self, name: &str) -> Result<(), WorldError> {
        self.cluster.remove_node(name)?;
        self.reconcile();
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
        self.cluster.taint_node(name, taint_key, value, effect)
    }

    /// Removes every taint with this key from a node.
    pub fn untaint_node(&mut self, name: &str, taint_key: &str) -> Result<(), WorldError> {
        self.cluster.untaint_node(name, taint_key)
    }

    /// Marks a node (un)schedulable, as `kubectl cordon` / `uncordon` do.
    pub fn set_unschedulable(&mut self, name: &str, unschedulable: bool) -> Result<(), WorldError> {
        self.cluster.set_unschedulable(name, unschedulable)
    }

    /// Marks a node Ready (condition `True`, `not-ready` taint removed) or NotReady (condition
    /// `False`, `node.kubernetes.io/not-ready:NoSchedule` taint added). Pods stay bound.
    pub fn set_node_ready(&mut self, name: &str, ready: bool) -> Result<(), WorldError> {
        readiness::set_node_ready(&mut self.cluster, name, ready)
    }

    /// Whether a node's Ready condition is True (false for an unknown node).
    pub fn node_ready(&self, name: &str) -> bool {
        self.cluster.node_ready(name)
    }

    /// Names of the nodes, sorted.
    pub fn node_names(&self) -> Vec<String> {
        self.cluster.nodes.keys().cloned().collect()
    }

    /// Live (not terminal) pods as `(namespace, name, node)`, sorted; terminating pods are
    /// live until they are gone.
    pub fn live_pods(&self) -> Vec<(String, String, Option<String>)> {
        let mut pods: Vec<_> = self
            .cluster
            .pods
            .iter()
            .map(|((ns, n), p)| (ns.clone(), n.clone(), p.node.clone()))
            .collect();
        pods.sort();
        pods
    }

    /// When a terminating pod goes (virtual time), or `None` for a pod not terminating or
    /// unknown.
    pub fn terminating_until(&self, namespace: &str, name: &str) -> Option<SimTime> {
        self.cluster
            .pods
            .get(&(namespace.to_string(), name.to_string()))
            .and_then(|p| p.terminating)
    }

    /// Live pods bound to `node` that are not DaemonSet pods (those a drain must move),
    /// terminating ones included: they still run there.
    pub fn non_daemon_pods_on(&self, node: &str) -> usize {
        self.cluster.non_daemon_pods_on(node).len()
    }

    /// The pods [`World::non_daemon_pods_on`] counts, as `(namespace, name)` in name order.
    pub fn non_daemon_pods(&self, node: &str) -> Vec<(String, String)> {
        self.cluster.non_daemon_pods_on(node)
    }

    /// Number of live pods, terminating ones included.
    pub fn live_pod_count(&self) -> usize {
        self.cluster.pods.len()
    }

    /// Number of live pods not bound to a node.
    pub fn pending_count(&self) -> usize {
        self.cluster.pending.len()
    }

    /// The pods not bound to a node (`namespace/name`), each with the scheduler's last
    /// Unschedulable message if it wrote one, in scheduling-queue order.
    pub fn pending_pods(&self) -> Vec<(String, Option<String>)> {
        self.cluster
            .pending
            .iter()
            .map(|(_, _, id)| {
                let message = self
                    .cluster
                    .pods
                    .get(id)
                    .and_then(|p| p.unschedulable.clone());
                (format!("{}/{}", id.0, id.1), message)
            })
            .collect()
    }

    /// The scheduling snapshot the scheduler works on (nodes and bound pods).
    pub fn snapshot(&self) -> &ClusterSnapshot {
        &self.cluster.snapshot
    }

    /// The Machine (`namespace`, `name`) a node belongs to, if the machine controller made it.
    pub fn machine_of_node(&self, node: &str) -> Option<(String, String)> {
        self.cluster.nodes.get(node).and_then(|n| n.machine.clone())
    }
}

/// Cluster API: node groups and Machines.
impl World {
    /// Adds a node group: its MachineDeployment, reconciled at once.
    pub fn add_node_group(&mut self, spec: &NodeGroupSpec) -> Result<(), WorldError> {
        let obj = spec.to_object(self.machines.cluster_name());
        self.apply(obj)?;
        Ok(())
    }

    /// Sets a MachineDeployment's `spec.replicas` (the scale subresource) and reconciles it.
    /// Fails when the MachineDeployment does not exist or a `ScaleApiError` fault is active.
    pub fn set_replicas(&mut self, namespace: &str, md: &str, n: u32) -> Result<(), WorldError> {
        let (machines, c, mut peers) = self.machines_and_peers();
        machines.set_replicas(c, &mut peers, (namespace, md), n)
    }

    /// [`World::set_replicas`] on the condition that the MachineDeployment is still at
    /// `resource_version` (a scale write carrying it, as the autoscaler sends): at any other
    /// version it is [`WorldError::Conflict`] and nothing changes, as the API server answers
    /// 409. `None` is no precondition.
    pub fn set_replicas_at(
        &mut self,
        namespace: &str,
        md: &str,
        n: u32,
        resource_version: Option<&str>,
    ) -> Result<(), WorldError> {
        if let Some(wanted) = resource_version {
            let k = crate::objects::key(machines::CAPI_GROUP, "MachineDeployment", namespace, md);
            let stored = self
                .objects()
                .get(&k)
                .ok_or_else(|| WorldError::NotFound(k.to_string()))?
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if stored != wanted {
                return Err(WorldError::Conflict {
                    object: k.to_string(),
                    wanted: wanted.to_string(),
                    stored,
                });
            }
        }
        self.set_replicas(namespace, md, n)
    }

    /// Machines the set deleted although they were healthy and unmarked, oldest first.
    pub fn unmarked_healthy_deletions(&self) -> &[UnmarkedDeletion] {
        self.machines.unmarked_healthy_deletions()
    }

    /// Sets an annotation on a Machine (the autoscaler marks machines to delete this way).
    pub fn annotate_machine(
        &mut self,
        namespace: &str,
        machine: &str,
        annotation: &str,
        value: &str,
    ) -> Result<(), WorldError> {
        machines::annotate_machine(&mut self.cluster, namespace, machine, annotation, value)
    }

    /// Removes an annotation from a Machine (no-op if it is absent).
    pub fn remove_machine_annotation(
        &mut self,
        namespace: &str,
        machine: &str,
        annotation: &str,
    ) -> Result<(), WorldError> {
        machines::remove_machine_annotation(&mut self.cluster, namespace, machine, annotation)
    }

    /// Names of a group's Machines, oldest first.
    pub fn machines_of(&self, namespace: &str, md: &str) -> Vec<String> {
        self.machines.machines_of(namespace, md)
    }

    /// Deletes a Machine object, as `kubectl delete machine` does: it gets a
    /// `deletionTimestamp`, its Node is cordoned and drained, then both go; its MachineSet
    /// replaces it if the replicas still ask for it.
    pub fn remove_machine(&mut self, namespace: &str, name: &str) -> Result<(), WorldError> {
        let k = (namespace.to_string(), name.to_string());
        self.machines.remove_machine(&mut self.cluster, &k)?;
        self.reconcile();
        Ok(())
    }
}

/// Workloads.
impl World {
    /// Adds a ReplicaSet (and its Deployment) and queues its replica schedule.
    pub fn add_replica_set(&mut self, spec: ReplicaSetSpec) -> Result<(), WorldError> {
        self.workloads.add_replica_set(&mut self.cluster, spec)
    }

    /// Changes a ReplicaSet's (and its Deployment's) replica count now.
    pub fn scale_replica_set(
        &mut self,
        namespace: &str,
        name: &str,
        replicas: u32,
    ) -> Result<(), WorldError> {
        self.workloads
            .scale_replica_set(&mut self.cluster, namespace, name, replicas)
    }

    /// Adds a Job.
    pub fn add_job(&mut self, spec: JobSpec) -> Result<(), WorldError> {
        self.workloads.add_job(&mut self.cluster, spec)
    }

    /// Adds a StatefulSet (its claims per ordinal, its pods in order).
    pub fn add_stateful_set(&mut self, spec: StatefulSetSpec) -> Result<(), WorldError> {
        self.storage.add_stateful_set(&mut self.cluster, spec)
    }

    /// Gives the nodes of group `md` (MachineDeployment name) a CSI driver: each gets a CSINode
    /// with the driver and its attach limit.
    pub fn set_group_csi(&mut self, md: &str, csi: CsiSpec) {
        self.storage.set_group_csi(md, csi);
        self.reconcile();
    }

    /// Gives the nodes of group `md` (MachineDeployment name) a DRA driver: each publishes its
    /// devices as a ResourceSlice `spec.delay_ms` after it joins.
    pub fn set_group_dra(&mut self, md: &str, spec: DraDriverSpec) {
        self.dra.set_group(md, spec);
        self.reconcile();
    }

    /// What breaks the DRA invariants now (a device allocated twice, or not published for the
    /// claim's node); empty when they hold.
    pub fn dra_violations(&self) -> Vec<String> {
        crate::dra_driver::violations(self.objects())
    }

    /// Adds a DaemonSet.
    pub fn add_daemon_set(&mut self, spec: DaemonSetSpec) -> Result<(), WorldError> {
        self.workloads.add_daemon_set(&mut self.cluster, spec)
    }
}

#[cfg(test)]
mod api_tests {
    use super::*;
    use crate::objects::key;

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
    fn a_scale_write_against_an_older_version_conflicts_and_changes_nothing() {
        let mut w = World::new(WorldConfig::default());
        let spec = NodeGroupSpec {
            namespace: "capi".into(),
            name: "md".into(),
            replicas: 1,
            max_size: 5,
            cpu: "2".into(),
            memory: "4Gi".into(),
            max_pods: 10,
            ..Default::default()
        };
        w.add_node_group(&spec).unwrap();
        let k = key("cluster.x-k8s.io", "MachineDeployment", "capi", "md");
        let rv = |w: &World| {
            w.objects().get(&k).unwrap()["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_string()
        };
        let seen = rv(&w);
        // Someone else scales it in between.
        w.set_replicas("capi", "md", 2).unwrap();
        let e = w.set_replicas_at("capi", "md", 3, Some(&seen)).unwrap_err();
        assert!(matches!(e, WorldError::Conflict { .. }), "{e}");
        let replicas = |w: &World| w.objects().get(&k).unwrap()["spec"]["replicas"].clone();
        assert_eq!(replicas(&w), json!(2));
        let now = rv(&w);
        w.set_replicas_at("capi", "md", 3, Some(&now)).unwrap();
        assert_eq!(replicas(&w), json!(3));
        w.set_replicas_at("capi", "md", 4, None).unwrap();
        assert_eq!(replicas(&w), json!(4));
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

/// The whole world together: every controller replays identically from a seed, and a watch
/// resumes from a resourceVersion.
#[cfg(test)]
mod whole_world_tests {
    use crate::testkit::*;

    fn scenario(seed: u64) -> World {
        let mut w = world(seed);
        w.add_node_group(&group("workers", 2)).unwrap();
        let mut spec = rs("web", 3, "500m");
        spec.schedule = vec![(100_000, 12), (200_000, 2)];
        spec.pod_lifetime_ms = Some(45_000);
        w.add_replica_set(spec).unwrap();
        w.step_until(120_000);
        w.set_replicas("capi", "workers", 4).unwrap();
        w.step_until(400_000);
        w
    }

    #[test]
    fn same_seed_same_event_log() {
        let a = scenario(42);
        let b = scenario(42);
        assert!(a.resource_version() > 50);
        assert_eq!(a.events_since(0), b.events_since(0));
        assert_eq!(a.metrics(), b.metrics());
        let c = scenario(43);
        assert_ne!(a.events_since(0), c.events_since(0));
    }

    #[test]
    fn watch_resumes_from_a_resource_version() {
        let mut w = world(10);
        w.add_node_group(&group("workers", 1)).unwrap();
        let rv = w.resource_version();
        w.advance(61_000);
        let events = w.events_since(rv);
        assert!(events.iter().all(|e| e.rv > rv));
        assert!(events.iter().any(|e| e.key.kind == "Node"));
        let node = w.node_names()[0].clone();
        w.delete_node(&node).unwrap();
        assert_eq!(
            w.events_since(w.resource_version() - 1)[0].kind,
            crate::WatchEventKind::Deleted
        );
    }
}
