//! What every controller of the world shares, as an API server and its clients share the
//! cluster: the virtual clock, the event queue, the object store with its watch log, the name
//! generator (`generateName`'s random suffixes), and the typed index of pods and nodes with the
//! scheduling snapshot kept in step with the stored objects. It also plays the kubelet's part in a
//! pod's life: a bound pod runs, ends when its lifetime is up, and, deleted gracefully, terminates
//! over its grace period while keeping its node.
//!
//! It decides object identity, the pod and node bookkeeping every controller reads, and the
//! order of the random draws (one seeded generator). It never runs a controller: controllers
//! learn what changed from it (the pods removed since they last looked, the scheduling epoch,
//! the pod generation). It must never read the real clock, never use unseeded randomness and
//! never iterate a hash map where the order could leak into results.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use autoscaler_core::{ClusterSnapshot, NodeId};
use autoscaler_model::Node;
use autoscaler_model::ObjectStore;
use autoscaler_model::Pod;
use autoscaler_model::PodPhase;
use autoscaler_model::Sym;
use autoscaler_model::{ObjectKey, StoreError};
use k8s_openapi::api::core::v1 as api;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::metrics::{Metrics, PodWait};
use crate::objects::{VersionedStore, key};
use crate::queue::{Event, EventQueue, NsName};
use crate::time::SimTime;
use crate::workloads::Restart;

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
    /// A write carried a `resourceVersion` precondition the object no longer has (the API
    /// server's 409 Conflict).
    #[error(
        "{object}: the object has been modified (version {wanted} asked for, {stored} stored); apply your changes to the latest version and try again"
    )]
    Conflict {
        /// The object.
        object: String,
        /// The version the write was made against.
        wanted: String,
        /// The version stored.
        stored: String,
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
    /// A controller the world does not run (a replayed trace pod's), replacing the pod as said.
    Replayed(Restart),
    /// A StatefulSet of the world (its controller finds its pods by name).
    StatefulSet(NsName),
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
    /// When it was bound (started running).
    pub started: Option<SimTime>,
    /// Its controller.
    pub owner: Owner,
    /// How long it runs once started; `None` runs forever.
    pub lifetime: Option<SimTime>,
    /// The last Unschedulable message written, to avoid rewriting it every tick.
    pub unschedulable: Option<String>,
    /// Being deleted gracefully: when its kubelet finishes and the pod goes. A terminating pod
    /// keeps its node and resources but no longer counts for its controller or its budget.
    pub terminating: Option<SimTime>,
}

/// What the world knows about a node.
#[derive(Clone, Debug)]
pub(crate) struct NodeState {
    /// Its id in the scheduling snapshot.
    pub id: NodeId,
    /// The Machine it belongs to.
    pub machine: Option<NsName>,
}

/// The grace period of a deletion when neither the request nor the pod gives one (the API's
/// default `terminationGracePeriodSeconds`).
pub(crate) const DEFAULT_GRACE_SEC: u64 = 30;

/// A controller's pod that left or began terminating, for its owner to see (as a watch would
/// tell it).
#[derive(Clone, Debug)]
pub(crate) struct RemovedPod {
    /// The pod.
    pub id: NsName,
    /// Its controller.
    pub owner: Owner,
    /// Whether it ended with phase `Succeeded` (rather than being deleted).
    pub succeeded: bool,
    /// For a replayed pod deleted before its end: its object and how long it had left to run.
    pub replay: Option<(Arc<Value>, SimTime)>,
}

/// How many of the last touched nodes [`Cluster::touched_since`] remembers (few in tests, so
/// that the scheduler's equivalence tests also run past what it remembers).
#[cfg(not(test))]
const TOUCHES_KEPT: usize = 1 << 16;
#[cfg(test)]
const TOUCHES_KEPT: usize = 6;

/// The shared state of the world's controllers.
#[derive(Debug)]
pub(crate) struct Cluster {
    /// The virtual clock.
    pub now: SimTime,
    /// The one random generator (names, provisioning delays).
    rng: ChaCha8Rng,
    /// What happens next.
    pub queue: EventQueue,
    /// The API server's storage and watch log.
    pub store: VersionedStore,
    epoch_ms: i64,
    /// Nodes and bound pods, as the scheduler sees them.
    pub snapshot: ClusterSnapshot,
    /// Live pods.
    pub pods: rustc_hash::FxHashMap<NsName, PodState>,
    pod_seq: u64,
    /// Nodes by name.
    pub nodes: BTreeMap<String, NodeState>,
    /// Live pods not bound to a node, in scheduling-queue order (priority, then creation).
    pub pending: BTreeSet<(i32, u64, NsName)>,
    /// Bumped by every change that can alter a scheduling outcome (pods created, bound or
    /// removed; nodes added, edited or removed).
    pub sched_epoch: u64,
    /// Per snapshot node id: a stamp renewed whenever the node or its pods change (see
    /// [`Cluster::touch_node`]), so that per-node scheduling verdicts can be reused.
    pub node_stamps: Vec<u64>,
    stamp_seq: u64,
    /// The nodes given the last stamps, oldest first: the one at position `i` from the end got
    /// stamp `stamp_seq - i` (at most [`TOUCHES_KEPT`] of them), so that what was derived from
    /// every node at a stamp can be brought up to date from the nodes changed since.
    touched: VecDeque<NodeId>,
    /// Bumped whenever a node is added, removed or edited (its object replaced), so that what
    /// is derived from the node list and labels can be kept while it stays the same.
    pub node_gen: u64,
    /// Bumped whenever a pod is created, bound or removed (budgets are recomputed on it).
    pod_gen: u64,
    /// Controllers' pods removed since their owners last looked.
    removed: Vec<RemovedPod>,
    /// Pods kept with a terminal phase since the last [`Cluster::gc_terminal_pods`].
    terminal: Vec<NsName>,
    /// Whether [`Cluster::gc_terminal_pods`] has scanned every pod object once.
    gc_scanned: bool,
    /// The metrics log (pod waits are recorded here as pods start).
    pub metrics: Metrics,
    /// Pods with DRA claims created since the DRA controller last looked.
    pub claim_pods_created: Vec<NsName>,
    /// Pods with DRA claims gone since the DRA controller last looked: id, uid and last view.
    pub claim_pods_ended: Vec<(NsName, String, Arc<Pod>)>,
}

impl Cluster {
    /// An empty cluster at virtual time 0.
    pub fn new(seed: u64, epoch_ms: i64) -> Cluster {
        Cluster {
            now: 0,
            rng: ChaCha8Rng::seed_from_u64(seed),
            queue: EventQueue::default(),
            store: VersionedStore::new(epoch_ms),
            epoch_ms,
            snapshot: ClusterSnapshot::new(),
            pods: rustc_hash::FxHashMap::default(),
            pod_seq: 0,
            nodes: BTreeMap::new(),
            pending: BTreeSet::new(),
            sched_epoch: 0,
            node_stamps: Vec::new(),
            stamp_seq: 0,
            touched: VecDeque::new(),
            node_gen: 0,
            pod_gen: 0,
            removed: Vec::new(),
            terminal: Vec::new(),
            gc_scanned: false,
            metrics: Metrics::default(),
            claim_pods_created: Vec::new(),
            claim_pods_ended: Vec::new(),
        }
    }

    /// Queues `event` at virtual time `at`.
    pub fn schedule(&mut self, at: SimTime, event: Event) {
        self.queue.push(at, event);
    }

    /// A random lowercase-alphanumeric suffix of 5 characters, as generated names have.
    pub fn suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..5)
            .map(|_| char::from(ALPHABET[self.rng.random_range(0..ALPHABET.len())]))
            .collect()
    }

    /// A uniform draw from `min..=max` (`min` when the range is empty).
    pub fn draw(&mut self, min: SimTime, max: SimTime) -> SimTime {
        if max <= min {
            min
        } else {
            self.rng.random_range(min..=max)
        }
    }

    /// Writes an object, ignoring no-op writes. The object's identity is checked by callers.
    pub fn put(&mut self, obj: Value) -> Result<Option<ObjectKey>, WorldError> {
        Ok(self.store.put(obj, self.now)?)
    }

    /// The stored object, cloned for modification.
    pub fn get_owned(&self, k: &ObjectKey) -> Option<Value> {
        self.store.get(k).map(|v| (**v).clone())
    }

    /// The API timestamp of now.
    pub fn timestamp(&self) -> String {
        self.store.timestamp(self.now)
    }

    /// The uid of a stored object (empty if it has none).
    pub fn uid_of(&self, k: &ObjectKey) -> String {
        self.store
            .get(k)
            .and_then(|o| o.pointer("/metadata/uid"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    }

    /// Changes to pods (created, bound, removed) so far: a reader that remembers the value
    /// knows whether any happened since.
    pub fn pod_generation(&self) -> u64 {
        self.pod_gen
    }

    /// Controllers' pods removed since the last call, oldest first.
    pub fn take_removed(&mut self) -> Vec<RemovedPod> {
        std::mem::take(&mut self.removed)
    }
}

/// Pods: creation, binding, the end of their life, removal and garbage collection.
impl Cluster {
    /// Creates a pod from its object. A pod naming an existing node in `spec.nodeName` is bound
    /// at once; otherwise it waits for the scheduler.
    pub fn create_pod(
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
        let mut view = pod_view(&obj, &k)?;
        self.put(obj)?;
        let uid = self.uid_of(&k);
        view.uid = Arc::from(uid.as_str());
        view.creation_ms = Some(self.epoch_ms + self.now as i64);
        let node = view.node_name.map(|n| n.as_str().to_string());
        if !view.resource_claims.is_empty() {
            self.claim_pods_created.push(id.clone());
        }
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
                started: None,
                owner,
                lifetime,
                unschedulable: None,
                terminating: None,
            },
        );
        self.pod_gen += 1;
        if let Some(node) = node
            && self.nodes.contains_key(&node)
        {
            self.bind(&id, &node);
        }
        Ok(id)
    }

    /// Binds a pending pod to a node: the snapshot, the object (nodeName, PodScheduled, phase
    /// Running), the wait-time metric and the pod's end of life.
    pub fn bind(&mut self, id: &NsName, node: &str) -> bool {
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
        self.write_running(id, node);
        let now = self.now;
        let Some(st) = self.pods.get_mut(id) else {
            return false;
        };
        let queued = (-st.view.priority, st.seq, id.clone());
        st.view = view;
        st.node = Some(node.to_string());
        st.started = Some(now);
        st.unschedulable = None;
        let (created, lifetime, uid) = (st.created, st.lifetime, st.uid.clone());
        if let Some(task) = crate::workloads::task_of(st, id) {
            let requests = st.view.requests.clone();
            let pod = format!("{}/{}", id.0, id.1);
            self.metrics.task_started(&task, pod, &requests, now);
        }
        self.pending.remove(&queued);
        self.sched_epoch += 1;
        self.metrics.pod_started(PodWait {
            pod: format!("{}/{}", id.0, id.1),
            created_ms: created,
            running_ms: now,
        });
        if let Some(life) = lifetime {
            let pod = id.clone();
            self.schedule(now.saturating_add(life), Event::PodDone { pod, uid });
        }
        self.pod_gen += 1;
        true
    }

    /// Reads a pending pod's model view again from its stored object (a controller changed its
    /// status, e.g. the claims made for it), keeping its uid and creation time.
    pub fn refresh_pod_view(&mut self, id: &NsName) {
        let k = key("", "Pod", &id.0, &id.1);
        let Some(obj) = self.store.get(&k).cloned() else {
            return;
        };
        let Ok(mut view) = pod_view(&obj, &k) else {
            return;
        };
        let Some(st) = self.pods.get_mut(id) else {
            return;
        };
        if st.node.is_some() {
            return;
        }
        view.uid = st.view.uid.clone();
        view.creation_ms = st.view.creation_ms;
        st.view = Arc::new(view);
        self.sched_epoch += 1;
    }

    /// Writes a bound pod's object: nodeName, phase Running, the started conditions.
    fn write_running(&mut self, id: &NsName, node: &str) {
        let ts = self.timestamp();
        let cond = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": ts});
        let status = json!({
            "phase": "Running",
            "startTime": ts,
            "conditions": [cond("PodScheduled"), cond("Initialized"), cond("ContainersReady"), cond("Ready")],
        });
        let node = json!(node);
        self.store
            .edit(&key("", "Pod", &id.0, &id.1), self.now, |obj| {
                let changed = obj["spec"]["nodeName"] != node || obj["status"] != status;
                obj["spec"]["nodeName"] = node;
                obj["status"] = status;
                changed
            });
    }

    /// Renews the stamp of snapshot node `id`: the node or its pods changed.
    pub fn touch_node(&mut self, id: NodeId) {
        let i = id.0 as usize;
        if self.node_stamps.len() <= i {
            self.node_stamps.resize(i + 1, 0);
        }
        self.stamp_seq += 1;
        self.node_stamps[i] = self.stamp_seq;
        if self.touched.len() == TOUCHES_KEPT {
            self.touched.pop_front();
        }
        self.touched.push_back(id);
    }

    /// The nodes touched since stamp `stamp` (with repeats), or `None` if no longer known.
    pub fn touched_since(&self, stamp: u64) -> Option<impl Iterator<Item = NodeId> + '_> {
        let n = usize::try_from(self.stamp_seq.checked_sub(stamp)?).ok()?;
        let len = self.touched.len();
        (n <= len).then(|| self.touched.range(len - n..).copied())
    }

    /// The last stamp given by [`Cluster::touch_node`]: unchanged, no node nor its pods changed.
    pub fn last_stamp(&self) -> u64 {
        self.stamp_seq
    }

    /// Removes a live pod. `terminal` keeps its object with that final phase (`Succeeded`);
    /// otherwise the object is deleted. The owner sees it through [`Cluster::take_removed`].
    pub fn remove_pod(&mut self, id: &NsName, terminal: Option<&str>) -> Option<PodState> {
        let st = self.pods.remove(id)?;
        if !st.view.resource_claims.is_empty() {
            (self.claim_pods_ended).push((id.clone(), st.uid.clone(), st.view.clone()));
        }
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
        let replay = if terminal.is_none() && st.terminating.is_none() {
            self.replay_of(&st, &k)
        } else {
            None
        };
        match terminal {
            Some(phase) => self.write_terminal(id, &k, phase),
            None => {
                self.store.delete(&k, self.now);
            }
        }
        self.pod_gen += 1;
        // A terminating pod's owner was told when its termination began.
        if st.owner != Owner::None && st.terminating.is_none() {
            self.removed.push(RemovedPod {
                id: id.clone(),
                owner: st.owner.clone(),
                succeeded: terminal.is_some(),
                replay,
            });
        }
        Some(st)
    }

    /// A replayed pod's object and the time it had left, for its replacement (`None` for
    /// other pods, or one whose time is up).
    fn replay_of(&self, st: &PodState, k: &ObjectKey) -> Option<(Arc<Value>, SimTime)> {
        let Owner::Replayed(restart) = st.owner else {
            return None;
        };
        let life = st.lifetime?;
        let ran = st.started.map_or(0, |t| self.now.saturating_sub(t));
        let left = match restart {
            Restart::Rerun => life,
            Restart::Resume => life.saturating_sub(ran),
        };
        (left > 0).then_some((self.store.get(k)?.clone(), left))
    }

    /// Keeps a finished pod's object with its final phase, for the garbage collector.
    fn write_terminal(&mut self, id: &NsName, k: &ObjectKey, phase: &str) {
        if self.store.get(k).is_none() {
            return;
        }
        // Edited in place: the object is usually held by the store alone by now.
        self.store.edit(k, self.now, |obj| {
            let before = obj["status"].clone();
            obj["status"]["phase"] = json!(phase);
            if let Some(conds) = obj["status"]["conditions"].as_array_mut() {
                for c in conds.iter_mut() {
                    if c["type"] == "Ready" || c["type"] == "ContainersReady" {
                        c["status"] = json!("False");
                        c["reason"] = json!("PodCompleted");
                    }
                }
            }
            obj["status"] != before
        });
        self.terminal.push(id.clone());
    }

    /// A pod's lifetime has elapsed: a ReplicaSet's or DaemonSet's pod is deleted (its
    /// controller replaces it), others succeed. A terminating pod is just removed: it was
    /// being killed, and its owner no longer counted it.
    pub fn pod_done(&mut self, id: &NsName, uid: &str) {
        let Some(st) = self.pods.get(id) else {
            return;
        };
        if st.uid != uid {
            return;
        }
        let terminal = match st.owner {
            _ if st.terminating.is_some() => None,
            Owner::ReplicaSet(_) | Owner::DaemonSet(..) | Owner::StatefulSet(_) => None,
            Owner::None | Owner::Job(_) | Owner::Replayed(_) => Some("Succeeded"),
        };
        self.remove_pod(id, terminal);
    }

    /// Deletes a pod gracefully, as the API server does for a pod deletion or an eviction: an
    /// unbound pod, or a grace of 0, goes at once; a bound pod gets `deletionTimestamp` (now +
    /// grace) and `deletionGracePeriodSeconds`, keeps its node and resources, and goes when its
    /// kubelet finishes ([`Cluster::pod_terminated`]). Its owner learns at once that it is no
    /// longer active. A pod already terminating is left as it is. The grace is `grace_sec`
    /// (the request's `gracePeriodSeconds`) if given, else the pod's
    /// `terminationGracePeriodSeconds`, else 30 s. The pod exits after its own grace (it takes
    /// all the time it declares it needs), or when killed at the end of a shorter requested
    /// grace: deterministic, no random draw. Returns `None` for an unknown pod.
    pub fn delete_pod_gracefully(&mut self, id: &NsName, grace_sec: Option<u64>) -> Option<()> {
        let st = self.pods.get(id)?;
        if st.terminating.is_some() {
            return Some(());
        }
        let own_sec = st
            .view
            .termination_grace_ms
            .map_or(DEFAULT_GRACE_SEC, |ms| {
                u64::try_from(ms / 1000).unwrap_or(0)
            });
        let grace_sec = grace_sec.unwrap_or(own_sec);
        if st.node.is_none() || grace_sec == 0 {
            self.remove_pod(id, None);
            return Some(());
        }
        let ends = self
            .now
            .saturating_add(grace_sec.min(own_sec).saturating_mul(1000));
        let uid = st.uid.clone();
        let replay = self.replay_of(st, &key("", "Pod", &id.0, &id.1));
        self.write_terminating(id, grace_sec);
        let st = self.pods.get_mut(id)?;
        st.terminating = Some(ends);
        if st.owner != Owner::None {
            let owner = st.owner.clone();
            self.removed.push(RemovedPod {
                id: id.clone(),
                owner,
                succeeded: false,
                replay,
            });
        }
        self.pod_gen += 1;
        self.sched_epoch += 1;
        let pod = id.clone();
        self.schedule(ends, Event::PodTerminated { pod, uid });
        Some(())
    }

    /// Marks a pod's object as being deleted with `grace_sec`.
    fn write_terminating(&mut self, id: &NsName, grace_sec: u64) {
        let at = self.now.saturating_add(grace_sec.saturating_mul(1000));
        let ts = self.store.timestamp(at);
        if let Some(mut obj) = self.get_owned(&key("", "Pod", &id.0, &id.1)) {
            obj["metadata"]["deletionTimestamp"] = json!(ts);
            obj["metadata"]["deletionGracePeriodSeconds"] = json!(grace_sec);
            // The stored object is known to carry its identity.
            let _ = self.put(obj);
        }
    }

    /// A terminating pod's kubelet has finished: the pod and its object go.
    pub fn pod_terminated(&mut self, id: &NsName, uid: &str) {
        if self
            .pods
            .get(id)
            .is_some_and(|st| st.uid == uid && st.terminating.is_some())
        {
            self.remove_pod(id, None);
        }
    }

    /// Deletes the objects of pods that have finished (phase `Succeeded` or `Failed`), as the
    /// pod garbage collector does; returns how many.
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

    /// A name `base-xxxxx` no live pod and no stored pod has.
    pub fn fresh_pod_name(&mut self, ns: &str, base: &str) -> String {
        loop {
            let n = format!("{base}-{}", self.suffix());
            if !self.pods.contains_key(&(ns.to_string(), n.clone()))
                && self.store.get(&key("", "Pod", ns, &n)).is_none()
            {
                return n;
            }
        }
    }
}

/// Nodes: registration, edits (taints, cordon, conditions) and removal with their pods.
impl Cluster {
    /// Stores a Node object and adds it to the scheduling snapshot.
    pub fn register_node(
        &mut self,
        obj: Value,
        machine: Option<NsName>,
    ) -> Result<String, WorldError> {
        let k = ObjectStore::key_of(&obj, "node")?;
        if self.nodes.contains_key(&k.name) {
            return Err(WorldError::AlreadyExists(k.to_string()));
        }
        let mut view = self.node_view(&obj, &k)?;
        self.put(obj)?;
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
            .map_err(|e| invalid(&k, e))?;
        self.nodes.insert(k.name.clone(), NodeState { id, machine });
        self.touch_node(id);
        self.node_gen += 1;
        self.sched_epoch += 1;
        Ok(k.name)
    }

    fn node_view(&self, obj: &Value, k: &ObjectKey) -> Result<Node, WorldError> {
        let typed = api::Node::deserialize(obj).map_err(|e| invalid(k, e))?;
        let mut view = Node::from_k8s(&typed).map_err(|e| invalid(k, e))?;
        if view.creation_ms.is_none() {
            view.creation_ms = Some(self.epoch_ms + self.now as i64);
        }
        Ok(view)
    }

    /// Removes a node, its object and the pods bound to it (as the pod garbage collector does).
    /// The node's Machine, if any, is left alone.
    pub fn remove_node(&mut self, name: &str) -> Result<(), WorldError> {
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
        self.node_gen += 1;
        self.sched_epoch += 1;
        self.store.delete(&key("", "Node", "", name), self.now);
        Ok(())
    }

    /// Rewrites a node object through `edit` and refreshes its snapshot entry, keeping its pods.
    pub fn edit_node(
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
        self.node_gen += 1;
        let id = self
            .snapshot
            .add_node(Arc::new(view))
            .map_err(|e| invalid(&k, e))?;
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

    /// Whether a node's Ready condition is True (false for an unknown node).
    pub fn node_ready(&self, name: &str) -> bool {
        self.nodes
            .get(name)
            .and_then(|n| self.snapshot.node(n.id))
            .is_some_and(|i| i.node.is_ready())
    }

    /// Live pods bound to `node` that are not DaemonSet pods (those a drain must move), in
    /// name order.
    pub fn non_daemon_pods_on(&self, node: &str) -> Vec<NsName> {
        let mut on: Vec<NsName> = self
            .pods
            .iter()
            .filter(|(_, p)| {
                p.node.as_deref() == Some(node) && !matches!(p.owner, Owner::DaemonSet(..))
            })
            .map(|(id, _)| id.clone())
            .collect();
        on.sort();
        on
    }
}

fn invalid(k: &ObjectKey, e: impl std::fmt::Display) -> WorldError {
    WorldError::Invalid {
        object: k.to_string(),
        message: e.to_string(),
    }
}

/// The model view of a pod object.
fn pod_view(obj: &Value, k: &ObjectKey) -> Result<Pod, WorldError> {
    let typed = api::Pod::deserialize(obj).map_err(|e| invalid(k, e))?;
    Pod::from_k8s(&typed).map_err(|e| invalid(k, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, node: Option<&str>) -> Value {
        let mut p = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "x"}]}});
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
        }
        p
    }

    fn node(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                "allocatable": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                "conditions": [{"type": "Ready", "status": "True"}]}})
    }

    #[test]
    fn the_nodes_touched_since_a_stamp_are_known_while_remembered() {
        let mut c = Cluster::new(0, 0);
        c.register_node(node("n1"), None).unwrap();
        c.register_node(node("n2"), None).unwrap();
        let (n1, n2) = (c.nodes["n1"].id, c.nodes["n2"].id);
        let at = c.last_stamp();
        assert_eq!(c.touched_since(at).map(|t| t.count()), Some(0));
        c.touch_node(n2);
        c.touch_node(n1);
        c.touch_node(n2);
        let since: Vec<NodeId> = c.touched_since(at).unwrap().collect();
        assert_eq!(since, [n2, n1, n2]);
        assert_eq!(c.touched_since(at + 2).unwrap().collect::<Vec<_>>(), [n2]);
        assert!(
            c.touched_since(c.last_stamp() + 1).is_none(),
            "a stamp not given yet"
        );
        for _ in 0..TOUCHES_KEPT {
            c.touch_node(n1);
        }
        assert!(c.touched_since(at).is_none(), "forgotten");
        let recent = c.last_stamp() - TOUCHES_KEPT as u64;
        assert_eq!(c.touched_since(recent).unwrap().count(), TOUCHES_KEPT);
    }

    #[test]
    fn removing_a_node_takes_its_pods_and_tells_their_owners() {
        let mut c = Cluster::new(0, 0);
        c.register_node(node("n1"), None).unwrap();
        let rs = ("default".to_string(), "web".to_string());
        c.create_pod(pod("a", Some("n1")), Owner::ReplicaSet(rs.clone()), None)
            .unwrap();
        c.create_pod(pod("b", None), Owner::None, None).unwrap();
        assert_eq!(c.pending.len(), 1, "b waits for the scheduler");
        assert_eq!(c.metrics.waits.len(), 1, "a started at once");
        let generation = c.pod_generation();
        c.remove_node("n1").unwrap();
        assert!(c.pod_generation() > generation);
        assert!(c.nodes.is_empty() && !c.pods.contains_key(&("default".into(), "a".into())));
        let removed = c.take_removed();
        assert_eq!(removed.len(), 1, "the bare pod b is nobody's to tell about");
        assert_eq!(removed[0].owner, Owner::ReplicaSet(rs));
        assert!(!removed[0].succeeded);
        assert!(c.take_removed().is_empty());
    }

    #[test]
    fn a_finished_pod_keeps_its_object_until_collected() {
        let mut c = Cluster::new(0, 0);
        c.register_node(node("n1"), None).unwrap();
        let id = c
            .create_pod(pod("j", Some("n1")), Owner::None, Some(1_000))
            .unwrap();
        let uid = c.pods[&id].uid.clone();
        c.pod_done(&id, "another-uid");
        assert!(c.pods.contains_key(&id), "a stale end of life is ignored");
        c.pod_done(&id, &uid);
        let k = key("", "Pod", "default", "j");
        assert_eq!(c.store.get(&k).unwrap()["status"]["phase"], "Succeeded");
        assert_eq!(c.gc_terminal_pods(), 1);
        assert!(c.store.get(&k).is_none());
    }
}
