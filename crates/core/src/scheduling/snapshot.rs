//! The cluster snapshot the scheduling simulation runs on: nodes, the pods placed on them and
//! the indices the predicates read.
//!
//! Mutations can be undone in nested layers: [`ClusterSnapshot::fork`] opens a layer, and every
//! mutation made while a layer is open records its inverse in that layer's undo log.
//! [`ClusterSnapshot::revert`] replays the log backwards, [`ClusterSnapshot::commit`] hands it to
//! the layer below (or drops it at the outermost layer). Both cost time proportional to the
//! changes made since the fork, never to the size of the cluster, and revert restores the exact
//! previous state (same node ids, same pod order, same indices).
//!
//! Every mutation also bumps [`ClusterSnapshot::version`] and is recorded in a bounded change
//! journal (pod added to / removed from a node, node added / removed), so prepared predicate
//! state can replay what changed since it was computed instead of recomputing it. A revert or a
//! namespace-label change clears the journal: state prepared before it is recomputed in full.
//!
//! Pods are indexed by namespace and name (a table of name hashes, for duplicate checks and
//! lookups), by namespace and by (namespace, label key, value) for selectors (built when a selector
//! first asks, then kept up to date), separately when they carry required anti-affinity terms, and
//! by the claims they use (for `ReadWriteOncePod`). Loading a pod reads it once and copies nothing
//! of it but its `Arc`; a load in bulk ([`ClusterSnapshot::add_bound_pods`]) writes the name index
//! after the pods are placed, in the table's order, as writes to a table larger than the caches are
//! cheapest. The snapshot also holds the view's storage objects, which the volume filters read, and
//! the DRA objects with the allocations a simulation made (see [`crate::scheduling::dra`]).
//!
//! The snapshot never checks predicates: [`ClusterSnapshot::add_pod`] places a pod wherever it
//! is told to. It never panics on any sequence of calls; misuse is a [`SnapshotError`].

mod index;
mod prefetch;

pub use self::prefetch::prefetching;

use std::sync::{Arc, OnceLock};

use rustc_hash::FxHashMap;

use self::index::{NameIndex, PodsById, SelectorIndex, key_hash, pod_identity, tag};

use autoscaler_model::Labels;
use autoscaler_model::NamespaceLabels;
use autoscaler_model::Node;
use autoscaler_model::Resources;
use autoscaler_model::Storage;
use autoscaler_model::Sym;
use autoscaler_model::{HostPort, Pod, VolumeRef, text_hash};

/// Index of a node in a snapshot. Stable while the node exists; may be reused after the node is
/// removed or its fork reverted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(pub u32);

impl NodeId {
    #[inline]
    fn idx(self) -> usize {
        self.0 as usize
    }
}

/// Errors of snapshot mutations.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SnapshotError {
    /// A node with this name is already in the snapshot.
    #[error("node {0} is already in the snapshot")]
    DuplicateNode(String),
    /// No such node.
    #[error("node {0} is not in the snapshot")]
    UnknownNode(String),
    /// A pod with this namespace/name is already in the snapshot.
    #[error("pod {0} is already in the snapshot")]
    DuplicatePod(String),
    /// No such pod on that node.
    #[error("pod {0} is not on node {1}")]
    UnknownPod(String, String),
    /// `revert` or `commit` without a matching `fork`.
    #[error("no fork to revert or commit")]
    NoFork,
}

/// A node and the pods on it, with the sums the filters read.
#[derive(Clone, Debug)]
pub struct NodeInfo {
    /// The node.
    pub node: Arc<Node>,
    /// Pods on it.
    pub pods: Vec<Arc<Pod>>,
    /// Sum of the pods' requests (`pods` counts them).
    pub requested: Resources,
    /// Host ports bound by the pods, as a sorted multiset (one entry per binding pod).
    ports: Vec<HostPort>,
}

fn port_key(p: &HostPort) -> (u16, Sym, Sym) {
    (p.port, p.protocol, p.ip)
}

impl NodeInfo {
    fn new(node: Arc<Node>) -> NodeInfo {
        NodeInfo {
            node,
            pods: Vec::new(),
            requested: Resources::default(),
            ports: Vec::new(),
        }
    }

    /// Host ports in use on this node, sorted by port, protocol and IP; a port bound by two pods
    /// appears twice.
    pub fn used_ports(&self) -> &[HostPort] {
        &self.ports
    }

    fn account(&mut self, pod: &Pod) {
        self.requested.add(&pod.requests);
        for hp in &pod.host_ports {
            let k = port_key(hp);
            let at = self.ports.partition_point(|p| port_key(p) <= k);
            self.ports.insert(at, *hp);
        }
    }

    /// The sums counted again from the pods, in their order, as adding them one by one
    /// would.
    fn recount(&mut self) {
        let pods = std::mem::take(&mut self.pods);
        self.requested = Resources::default();
        self.ports.clear();
        for pod in &pods {
            self.account(pod);
        }
        self.pods = pods;
    }

    fn unaccount(&mut self, pod: &Pod) {
        self.requested.sub(&pod.requests);
        for hp in &pod.host_ports {
            if let Some(i) = self.ports.iter().position(|p| p == hp) {
                self.ports.remove(i);
            }
        }
    }
}

/// The claims a pod uses (each once, even if two volumes name it).
fn claims_of(pod: &Pod) -> impl Iterator<Item = Arc<str>> + '_ {
    pod.volume_refs
        .iter()
        .enumerate()
        .filter_map(|(i, v)| match v {
            VolumeRef::Claim { claim, .. } => {
                let seen = pod.volume_refs[..i]
                    .iter()
                    .any(|w| matches!(w, VolumeRef::Claim { claim: c, .. } if c == claim));
                (!seen).then(|| claim.clone())
            }
            VolumeRef::InlineCsi { .. } => None,
        })
}

/// One recorded inverse operation.
#[derive(Debug)]
enum Undo {
    /// A node was added at this id; `reused` says whether the id came from the free list.
    AddedNode { id: NodeId, reused: bool },
    /// A node was removed from position `pos` of the node order, with everything it held.
    RemovedNode {
        id: NodeId,
        pos: usize,
        info: Box<NodeInfo>,
    },
    /// The node order was replaced.
    NodeOrder { old: Vec<NodeId> },
    /// The order of a node's pods was replaced.
    PodOrder { node: NodeId, old: Vec<Arc<Pod>> },
    /// A pod was appended to a node's pod list.
    AddedPod { node: NodeId },
    /// A pod was removed from position `at` of a node's pod list.
    RemovedPod {
        node: NodeId,
        at: usize,
        pod: Arc<Pod>,
    },
    /// The namespace labels were replaced.
    NamespaceLabels { old: FxHashMap<Sym, Labels> },
    /// The storage objects were replaced.
    Storage { old: Arc<Storage> },
    /// A DRA claim's allocation changed in the simulation (its inverse is kept by the
    /// snapshot's `DraState`, newest last).
    Dra,
}

/// One recorded mutation, as prepared predicate state sees it: what was added or removed, and
/// the node (as it was then) it happened on.
#[derive(Debug, Clone)]
pub(crate) enum Change {
    /// A node was added, without pods.
    AddedNode(Arc<Node>),
    /// A node was removed together with these pods.
    RemovedNode(Arc<Node>, Vec<Arc<Pod>>),
    /// A pod was placed on the node.
    AddedPod(Arc<Node>, Arc<Pod>),
    /// A pod was removed from the node.
    RemovedPod(Arc<Node>, Arc<Pod>),
}

/// Journal length at which its older half is dropped (state prepared before the dropped part is
/// then recomputed in full).
const JOURNAL_CAP: usize = 1 << 14;

/// The snapshot.
#[derive(Debug, Default)]
pub struct ClusterSnapshot {
    slots: Vec<Option<NodeInfo>>,
    /// Live nodes in iteration order: order of addition unless set by `set_node_order`.
    order: Vec<NodeId>,
    free: Vec<u32>,
    live: usize,
    by_name: FxHashMap<Sym, NodeId>,
    /// Every pod by the hash of its namespace and name, with its node.
    names: NameIndex,
    /// Pods per namespace (namespaces without pods are absent).
    namespace_pods: FxHashMap<Sym, usize>,
    /// Pods with required anti-affinity terms.
    anti: PodsById,
    /// Every pod by namespace and under each of its labels: built when a selector first asks,
    /// kept up to date from then on.
    selectors: OnceLock<SelectorIndex>,
    ns_labels: FxHashMap<Sym, Labels>,
    /// Claims, volumes, classes and CSI nodes the volume filters read.
    storage: Arc<Storage>,
    /// Pods using each claim, by namespace and claim name (only pods with volume refs).
    claim_users: FxHashMap<(Sym, Arc<str>), u32>,
    /// DRA allocations made or freed by the simulation, and the pods using each claim.
    dra: crate::scheduling::dra::DraState,
    /// Returned for namespaces without known labels.
    no_labels: Labels,
    logs: Vec<Vec<Undo>>,
    version: u64,
    /// `journal[i]` is the mutation that produced version `journal_floor + i + 1`.
    journal: Vec<Change>,
    journal_floor: u64,
    /// Bumped by every mutation that can change what existing pods' anti-affinity forbids: a pod
    /// with anti-affinity terms added or removed (also with its node or by a revert), namespace
    /// labels replaced.
    anti_epoch: u64,
    /// Inside [`ClusterSnapshot::unjournaled`]: changes clear the journal instead of joining it.
    unjournaled: bool,
    /// Room for pods given to each node's list as it is added (see
    /// [`ClusterSnapshot::with_size_hints`]).
    pods_per_node: usize,
}

/// The most pods a node's list gets room for up front (kubelet's default limit is 110).
const MAX_PODS_PER_NODE_HINT: usize = 256;

/// How many pods a snapshot is about to hold, to size its indices once.
#[derive(Debug, Default)]
pub struct SizeHints {
    pods: usize,
}

impl SizeHints {
    /// Counts `pods` (those to be added, and those that may be placed later, such as pending
    /// pods, so that placing them does not grow the indices either). Only counts: no pod is
    /// read.
    pub fn count<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> SizeHints {
        SizeHints {
            pods: pods.into_iter().count(),
        }
    }
}

/// Whether `node` (live) holds the pod `namespace/name`.
fn holds(slots: &[Option<NodeInfo>], node: NodeId, namespace: Sym, name: &str) -> bool {
    slots
        .get(node.idx())
        .and_then(Option::as_ref)
        .is_some_and(|n| {
            n.pods
                .iter()
                .any(|p| p.namespace == namespace && &*p.name == name)
        })
}

impl ClusterSnapshot {
    /// An empty snapshot with no fork open.
    pub fn new() -> Self {
        Self::default()
    }

    /// Namespace labels, for `namespaceSelector` in affinity terms. Replaces any previous set;
    /// undone by `revert` like every other mutation.
    pub fn set_namespace_labels(&mut self, namespaces: Vec<NamespaceLabels>) {
        let new: FxHashMap<Sym, Labels> =
            namespaces.into_iter().map(|n| (n.name, n.labels)).collect();
        let old = std::mem::replace(&mut self.ns_labels, new);
        self.record(Undo::NamespaceLabels { old });
        self.anti_epoch += 1;
        self.bump(None);
    }

    /// The storage objects the volume filters read (claims, volumes, classes, CSINodes,
    /// capacities). Replaces any previous set; undone by `revert`. Setting the same `Arc`
    /// again changes nothing.
    pub fn set_storage(&mut self, storage: Arc<Storage>) {
        if Arc::ptr_eq(&self.storage, &storage) {
            return;
        }
        let old = std::mem::replace(&mut self.storage, storage);
        self.record(Undo::Storage { old });
        self.bump(None);
    }

    /// The storage objects (see [`ClusterSnapshot::set_storage`]).
    pub fn storage(&self) -> &Arc<Storage> {
        &self.storage
    }

    /// The DRA allocations of the simulation (see [`crate::scheduling::dra`]).
    pub(crate) fn dra_state(&self) -> &crate::scheduling::dra::DraState {
        &self.dra
    }

    pub(crate) fn dra_state_mut(&mut self) -> &mut crate::scheduling::dra::DraState {
        &mut self.dra
    }

    /// How many pods of the snapshot use the claim `namespace/name`.
    pub fn claim_users(&self, namespace: Sym, claim: &Arc<str>) -> u32 {
        self.claim_users
            .get(&(namespace, claim.clone()))
            .copied()
            .unwrap_or(0)
    }

    /// The labels of `namespace` (empty when unknown).
    pub fn namespace_labels(&self, namespace: Sym) -> &Labels {
        self.ns_labels.get(&namespace).unwrap_or(&self.no_labels)
    }

    /// Room for `nodes` more nodes without growing the node tables.
    pub fn reserve_nodes(&mut self, nodes: usize) {
        self.slots.reserve(nodes);
        self.order.reserve(nodes);
        self.by_name.reserve(nodes);
    }

    /// Runs `f` with the journal off: its changes are not journaled (each clears the journal
    /// instead, so state prepared before them is recomputed in full). For loading a snapshot
    /// in bulk, where no prepared state predates the load and journaling every pod would only
    /// cost time.
    pub fn unjournaled<R>(&mut self, f: impl FnOnce(&mut ClusterSnapshot) -> R) -> R {
        let outer = std::mem::replace(&mut self.unjournaled, true);
        let out = f(self);
        self.unjournaled = outer;
        out
    }

    /// Runs `f` with the pod indices sized by `hints`: room for all the pods counted at once,
    /// instead of growing (and rehashing) as they come, and each node added meanwhile room for
    /// its share of them. Hints change no content, only capacity.
    pub fn with_size_hints<R>(
        &mut self,
        hints: SizeHints,
        f: impl FnOnce(&mut ClusterSnapshot) -> R,
    ) -> R {
        self.names
            .reserve(hints.pods.saturating_sub(self.names.len()));
        // Nodes added meanwhile get room for their share of the pods, as if spread evenly over
        // the nodes reserved (`reserve_nodes`), so their lists do not grow from empty one
        // reallocation after another; capped, so that too few nodes reserved cannot make every
        // node's list huge.
        let per_node = match self.slots.capacity() {
            0 => 0,
            nodes => hints.pods.div_ceil(nodes).min(MAX_PODS_PER_NODE_HINT),
        };
        let outer = std::mem::replace(&mut self.pods_per_node, per_node);
        let out = f(self);
        self.pods_per_node = outer;
        out
    }

    /// Adds a node without pods.
    pub fn add_node(&mut self, node: Arc<Node>) -> Result<NodeId, SnapshotError> {
        if self.by_name.contains_key(&node.name) {
            return Err(SnapshotError::DuplicateNode(node.name.to_string()));
        }
        let (id, reused) = match self.free.pop() {
            Some(i) => (NodeId(i), true),
            None => {
                self.slots.push(None);
                (NodeId((self.slots.len() - 1) as u32), false)
            }
        };
        self.by_name.insert(node.name, id);
        let change = (!self.unjournaled).then(|| Change::AddedNode(node.clone()));
        let mut info = NodeInfo::new(node);
        info.pods.reserve(self.pods_per_node);
        self.slots[id.idx()] = Some(info);
        self.order.push(id);
        self.live += 1;
        self.record(Undo::AddedNode { id, reused });
        self.bump(change);
        Ok(id)
    }

    /// Removes the node and its pods.
    pub fn remove_node(&mut self, id: NodeId) -> Result<(), SnapshotError> {
        let info = self
            .slots
            .get_mut(id.idx())
            .and_then(Option::take)
            .ok_or_else(|| SnapshotError::UnknownNode(format!("#{}", id.0)))?;
        for pod in &info.pods {
            self.unindex_pod(id, pod);
        }
        self.by_name.remove(&info.node.name);
        self.free.push(id.0);
        self.live -= 1;
        let pos = self
            .order
            .iter()
            .rposition(|&o| o == id)
            .unwrap_or(self.order.len());
        if pos < self.order.len() {
            self.order.remove(pos);
        }
        if info.pods.iter().any(|p| !p.anti_affinity.is_empty()) {
            self.anti_epoch += 1;
        }
        let change = Change::RemovedNode(info.node.clone(), info.pods.clone());
        let forked = !self.logs.is_empty();
        let claimed: Vec<Arc<Pod>> = (info.pods.iter())
            .filter(|p| forked && !p.resource_claims.is_empty())
            .cloned()
            .collect();
        self.record(Undo::RemovedNode {
            id,
            pos,
            info: Box::new(info),
        });
        for pod in &claimed {
            for _ in 0..self.release_claims(pod) {
                self.record(Undo::Dra);
            }
        }
        self.bump(Some(change));
        Ok(())
    }

    /// Places `pod` on `node` (regardless of predicates: callers check first).
    pub fn add_pod(&mut self, pod: Arc<Pod>, node: NodeId) -> Result<(), SnapshotError> {
        if self.slot(node).is_none() {
            return Err(SnapshotError::UnknownNode(format!("#{}", node.0)));
        }
        let hash = key_hash(pod.namespace, pod.name.text_hash());
        let slots = &self.slots;
        if !self
            .names
            .insert_new(hash, node, |n| holds(slots, n, pod.namespace, &pod.name))
        {
            return Err(SnapshotError::DuplicatePod(pod.key()));
        }
        if !pod.anti_affinity.is_empty() {
            self.anti_epoch += 1;
        }
        let change = match self.slot(node) {
            Some(on) if !self.unjournaled => Some(Change::AddedPod(on.node.clone(), pod.clone())),
            _ => None,
        };
        self.index_others(node, &pod);
        // Outside a fork the snapshot follows the view, whose claims say their allocations.
        // A pod without claims is moved in, not counted and dropped again.
        let claimed =
            (!pod.resource_claims.is_empty() && !self.logs.is_empty()).then(|| pod.clone());
        self.push(node, pod);
        self.record(Undo::AddedPod { node });
        if let Some(pod) = claimed {
            for _ in 0..self.reserve_claims(&pod, node) {
                self.record(Undo::Dra);
            }
        }
        self.bump(change);
        Ok(())
    }

    /// Places each of `pods`, given with a label of the caller's choosing (such as its place
    /// in a list), on the node it names, as [`ClusterSnapshot::add_pod`] would one after
    /// another: the same pods placed, in the same order on each node, the same ones refused (a
    /// pod of an unknown node, a second pod of one namespace and name) with the same errors.
    /// `placed` is told the label and node of each pod placed, in order; the refused ones'
    /// labels and errors are returned, in order.
    ///
    /// For loading: on a snapshot without pods, outside any fork and unjournaled (see
    /// [`ClusterSnapshot::unjournaled`]), the pods are put on their nodes first and their names
    /// indexed after, in the name table's order rather than theirs (see `NameIndex::filled`);
    /// otherwise each is added in turn.
    pub fn add_bound_pods<'a>(
        &mut self,
        pods: impl IntoIterator<Item = (usize, &'a Arc<Pod>, Sym)>,
        mut placed: impl FnMut(usize, NodeId),
    ) -> Vec<(usize, SnapshotError)> {
        let bulk = self.unjournaled
            && self.logs.is_empty()
            && self.names.len() == 0
            && self.selectors.get().is_none();
        if bulk {
            return self.load_pods(pods, placed);
        }
        let mut refused = Vec::new();
        for (label, pod, node) in pods {
            let added = match self.node_id(node) {
                Some(id) => self.add_pod(pod.clone(), id).map(|()| id),
                None => Err(SnapshotError::UnknownNode(node.to_string())),
            };
            match added {
                Ok(id) => placed(label, id),
                Err(e) => refused.push((label, e)),
            }
        }
        refused
    }

    /// [`ClusterSnapshot::add_bound_pods`] on a snapshot without pods, forks, journal or
    /// selector index: the pods are put on their nodes and counted, those with anti-affinity
    /// terms or claims (few) set apart; the name index is filled in the table's order, which
    /// finds the duplicates; those are taken back off their nodes, and the pods set apart are
    /// indexed once the duplicates are known.
    fn load_pods<'a>(
        &mut self,
        pods: impl IntoIterator<Item = (usize, &'a Arc<Pod>, Sym)>,
        mut placed: impl FnMut(usize, NodeId),
    ) -> Vec<(usize, SnapshotError)> {
        // (order, label, error), sorted by order at the end: a pod refused for its node comes
        // before the pod loaded next, (n, false), a duplicate in place of loaded pod n, (n, true).
        let mut refused = Vec::new();
        let mut loaded: Vec<(&'a Arc<Pod>, usize)> = Vec::new();
        // The tag of each loaded pod's key, and its node.
        let mut keys: Vec<(u32, NodeId)> = Vec::new();
        let mut apart = Vec::new();
        for (label, pod, node) in pods {
            let Some(id) = self.node_id(node) else {
                let order = (loaded.len(), false);
                refused.push((order, label, SnapshotError::UnknownNode(node.to_string())));
                continue;
            };
            if pod.anti_affinity.is_empty()
                && pod.volume_refs.is_empty()
                && pod.resource_claims.is_empty()
            {
                *self.namespace_pods.entry(pod.namespace).or_default() += 1;
            } else {
                apart.push(loaded.len());
            }
            keys.push((tag(key_hash(pod.namespace, pod.name.text_hash())), id));
            loaded.push((pod, label));
            self.push(id, pod.clone());
        }
        let same = |i: usize, j: usize| {
            let (a, b) = (loaded[i].0, loaded[j].0);
            a.namespace == b.namespace && a.name == b.name
        };
        // A table of its own, the hinted empty one dropped after: filling that one in place,
        // or dropping it first, measured slower at a thousand nodes (see BENCHMARKS.md).
        let (names, duplicates) = NameIndex::filled(self.names.capacity(), &keys, same);
        self.names = names;
        for &d in &duplicates {
            let (pod, label) = loaded[d];
            refused.push(((d, true), label, SnapshotError::DuplicatePod(pod.key())));
        }
        if !duplicates.is_empty() {
            self.take_back(&loaded, &keys, &duplicates);
        }
        let mut duplicate = duplicates.iter().copied().peekable();
        let mut added = 0u64;
        for (i, &(_, label)) in loaded.iter().enumerate() {
            if duplicate.next_if_eq(&i).is_some() {
                continue;
            }
            added += 1;
            placed(label, keys[i].1);
        }
        for &i in &apart {
            if duplicates.binary_search(&i).is_err() {
                let pod = loaded[i].0;
                if !pod.anti_affinity.is_empty() {
                    self.anti_epoch += 1;
                }
                self.index_others(keys[i].1, pod);
            }
        }
        // What `add_pod` would have done to the version and journal, once per pod added.
        if added > 0 {
            self.version += added;
            self.journal.clear();
            self.journal_floor = self.version;
        }
        refused.sort_by_key(|r| r.0);
        refused
            .into_iter()
            .map(|(_, label, e)| (label, e))
            .collect()
    }

    /// Takes the pods `loaded[d]` for each `d` of `duplicates` (ascending), put on their nodes
    /// by [`ClusterSnapshot::load_pods`] but refused, back off them: out of the nodes' lists
    /// and, unless set apart, their namespaces' counts. Each node that held one has its sums
    /// counted again from the pods it keeps, in order: sums stop at the largest value rather
    /// than overflow, so subtracting a pod does not always undo adding it. Linear in the pods
    /// of those nodes, however many duplicates there are.
    fn take_back(
        &mut self,
        loaded: &[(&Arc<Pod>, usize)],
        keys: &[(u32, NodeId)],
        duplicates: &[usize],
    ) {
        // The snapshot held no pods before the load, so a node's list is the loaded pods on it,
        // in order: the n-th loaded pod on a node is at position n of its list.
        let mut next = vec![0usize; self.slots.len()];
        let mut refused: FxHashMap<NodeId, Vec<usize>> = FxHashMap::default();
        let mut duplicate = duplicates.iter().copied().peekable();
        for (i, &(_, node)) in keys.iter().enumerate() {
            let Some(at) = next.get_mut(node.idx()) else {
                continue;
            };
            if duplicate.next_if_eq(&i).is_some() {
                refused.entry(node).or_default().push(*at);
                let pod = loaded[i].0;
                if pod.anti_affinity.is_empty()
                    && pod.volume_refs.is_empty()
                    && pod.resource_claims.is_empty()
                {
                    self.uncount_namespace(pod.namespace);
                }
            }
            *at += 1;
        }
        for (node, positions) in refused {
            if let Some(info) = self.slots.get_mut(node.idx()).and_then(Option::as_mut) {
                let mut at = 0;
                let mut gone = positions.iter().copied().peekable();
                info.pods.retain(|_| {
                    let keep = gone.next_if_eq(&at).is_none();
                    at += 1;
                    keep
                });
                info.recount();
            }
        }
    }

    /// One pod fewer in `namespace`'s count (and no entry once none is left).
    fn uncount_namespace(&mut self, namespace: Sym) {
        if let Some(n) = self.namespace_pods.get_mut(&namespace) {
            *n -= 1;
            if *n == 0 {
                self.namespace_pods.remove(&namespace);
            }
        }
    }

    /// Removes the pod `namespace/name` from `node` and returns it.
    pub fn remove_pod(
        &mut self,
        node: NodeId,
        namespace: Sym,
        name: &str,
    ) -> Result<Arc<Pod>, SnapshotError> {
        let Some(info) = self.slot(node) else {
            return Err(SnapshotError::UnknownNode(format!("#{}", node.0)));
        };
        let Some(at) = info
            .pods
            .iter()
            .position(|p| p.namespace == namespace && &*p.name == name)
        else {
            return Err(SnapshotError::UnknownPod(
                format!("{namespace}/{name}"),
                info.node.name.to_string(),
            ));
        };
        let on = info.node.clone();
        let pod = self.take_pod(node, at);
        if !pod.anti_affinity.is_empty() {
            self.anti_epoch += 1;
        }
        self.record(Undo::RemovedPod {
            node,
            at,
            pod: pod.clone(),
        });
        if !pod.resource_claims.is_empty() && !self.logs.is_empty() {
            for _ in 0..self.release_claims(&pod) {
                self.record(Undo::Dra);
            }
        }
        self.bump(Some(Change::RemovedPod(on, pod.clone())));
        Ok(pod)
    }

    /// The id of the node named `name`.
    pub fn node_id(&self, name: Sym) -> Option<NodeId> {
        self.by_name.get(&name).copied()
    }

    /// The node with this id, if live.
    pub fn node(&self, id: NodeId) -> Option<&NodeInfo> {
        self.slot(id)
    }

    /// The node with this name, if present.
    pub fn node_by_name(&self, name: Sym) -> Option<&NodeInfo> {
        self.node_id(name).and_then(|id| self.slot(id))
    }

    /// The pod `namespace/name` and the node it is on.
    pub fn pod(&self, namespace: Sym, name: &str) -> Option<(NodeId, &Arc<Pod>)> {
        self.names
            .nodes(key_hash(namespace, text_hash(name)))
            .find_map(|id| {
                let pods = &self.slot(id)?.pods;
                let p = pods
                    .iter()
                    .find(|p| p.namespace == namespace && &*p.name == name)?;
                Some((id, p))
            })
    }

    /// The selector index, built on first use.
    fn selectors(&self) -> &SelectorIndex {
        self.selectors
            .get_or_init(|| SelectorIndex::of(self.all_pods()))
    }

    /// Every pod of `namespace` with its node, in no particular order.
    pub fn pods_in_namespace(
        &self,
        namespace: Sym,
    ) -> impl Iterator<Item = (NodeId, &Arc<Pod>)> + '_ {
        self.selectors()
            .in_namespace(namespace)
            .into_iter()
            .flat_map(|m| m.values().map(|(n, p)| (*n, p)))
    }

    /// Every pod with its node, node by node in the node order.
    pub fn all_pods(&self) -> impl Iterator<Item = (NodeId, &Arc<Pod>)> + '_ {
        self.nodes()
            .flat_map(|(id, info)| info.pods.iter().map(move |p| (id, p)))
    }

    /// Pods of `namespace` labelled `key=value`, with their node, in no particular order.
    pub fn pods_with_label(
        &self,
        namespace: Sym,
        key: Sym,
        value: Sym,
    ) -> impl Iterator<Item = (NodeId, &Arc<Pod>)> + '_ {
        self.selectors()
            .with_label(namespace, key, value)
            .into_iter()
            .flat_map(|m| m.values().map(|(n, p)| (*n, p)))
    }

    /// Number of pods of `namespace` labelled `key=value`.
    pub fn pods_with_label_count(&self, namespace: Sym, key: Sym, value: Sym) -> usize {
        self.selectors()
            .with_label(namespace, key, value)
            .map_or(0, |m| m.len())
    }

    /// Number of pods in `namespace`.
    pub fn pods_in_namespace_count(&self, namespace: Sym) -> usize {
        self.namespace_pods.get(&namespace).copied().unwrap_or(0)
    }

    /// Namespaces holding at least one pod.
    pub fn namespaces(&self) -> impl Iterator<Item = Sym> + '_ {
        self.namespace_pods.keys().copied()
    }

    /// Pods with required anti-affinity terms, with their node, in no particular order.
    pub fn pods_with_anti_affinity(&self) -> impl Iterator<Item = (NodeId, &Arc<Pod>)> + '_ {
        self.anti.values().map(|(n, p)| (*n, p))
    }

    /// Number of pods with required anti-affinity terms.
    pub fn anti_affinity_pod_count(&self) -> usize {
        self.anti.len()
    }

    /// Number of pods in the snapshot.
    pub fn pod_count(&self) -> usize {
        self.names.len()
    }

    /// Live nodes, in the node order: order of addition (a node re-added after a removal comes
    /// last), unless set by [`ClusterSnapshot::set_node_order`]. A snapshot built by adding
    /// nodes only lists them by increasing id.
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.order.iter().copied()
    }

    /// Live nodes with their info, in the node order (see [`ClusterSnapshot::node_ids`]).
    pub fn nodes(&self) -> impl Iterator<Item = (NodeId, &NodeInfo)> + '_ {
        self.order
            .iter()
            .filter_map(|&id| self.slot(id).map(|n| (id, n)))
    }

    /// Replaces the node order with `ids`, which must list every live node exactly once
    /// (otherwise nothing changes and the first offending id is reported). Undone by `revert`.
    pub fn set_node_order(&mut self, ids: Vec<NodeId>) -> Result<(), SnapshotError> {
        let mut seen = vec![false; self.slots.len()];
        for &id in &ids {
            match seen.get_mut(id.idx()) {
                Some(s) if !*s && self.slot(id).is_some() => *s = true,
                _ => return Err(SnapshotError::UnknownNode(format!("#{}", id.0))),
            }
        }
        if ids.len() != self.live {
            return Err(SnapshotError::UnknownNode(format!(
                "{} of {} nodes ordered",
                ids.len(),
                self.live
            )));
        }
        if ids != self.order {
            let old = std::mem::replace(&mut self.order, ids);
            self.record(Undo::NodeOrder { old });
            self.bump(None);
        }
        Ok(())
    }

    /// Reorders the pods of `node` by `key` (a stable sort). Undone by `revert`.
    pub fn sort_pods_by_key<K: Ord>(
        &mut self,
        node: NodeId,
        key: impl FnMut(&Arc<Pod>) -> K,
    ) -> Result<(), SnapshotError> {
        let Some(info) = self.slots.get_mut(node.idx()).and_then(Option::as_mut) else {
            return Err(SnapshotError::UnknownNode(format!("#{}", node.0)));
        };
        let old = info.pods.clone();
        info.pods.sort_by_key(key);
        if info.pods.iter().zip(&old).any(|(a, b)| !Arc::ptr_eq(a, b)) {
            self.record(Undo::PodOrder { node, old });
            self.bump(None);
        }
        Ok(())
    }

    /// Number of live nodes.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether there is no node.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Opens a new undo layer.
    pub fn fork(&mut self) {
        self.logs.push(Vec::new());
    }

    /// Undoes every mutation since the matching `fork` and closes that layer.
    pub fn revert(&mut self) -> Result<(), SnapshotError> {
        let log = self.logs.pop().ok_or(SnapshotError::NoFork)?;
        let mut anti = false;
        for op in log.into_iter().rev() {
            anti |= self.undo(op);
        }
        if anti {
            self.anti_epoch += 1;
        }
        self.bump(None);
        Ok(())
    }

    /// Keeps the mutations since the matching `fork` and closes that layer (they stay undoable
    /// by the enclosing layer, if any).
    pub fn commit(&mut self) -> Result<(), SnapshotError> {
        let log = self.logs.pop().ok_or(SnapshotError::NoFork)?;
        match self.logs.last_mut() {
            Some(below) => below.extend(log),
            // Nothing can be undone any more, DRA changes included.
            None => self.dra.forget_undo(),
        }
        Ok(())
    }

    /// Runs `f` on a fork that is always reverted: whatever `f` changes, and whatever forks it
    /// leaves open, the snapshot is as it was before when this returns.
    pub fn forked<R>(&mut self, f: impl FnOnce(&mut ClusterSnapshot) -> R) -> R {
        let depth = self.logs.len();
        self.fork();
        let out = f(self);
        self.revert_to(depth);
        out
    }

    /// Runs `f` on a fork that is kept when `f` succeeds (folded into the enclosing fork, if
    /// any) and reverted when it fails.
    pub fn tentatively<T, E>(
        &mut self,
        f: impl FnOnce(&mut ClusterSnapshot) -> Result<T, E>,
    ) -> Result<T, E> {
        let depth = self.logs.len();
        self.fork();
        let out = f(self);
        match &out {
            Ok(_) => {
                // Forks `f` left open are folded in with ours.
                while self.logs.len() > depth {
                    let _ = self.commit();
                }
            }
            Err(_) => self.revert_to(depth),
        }
        out
    }

    /// Reverts every fork above `depth`.
    fn revert_to(&mut self, depth: usize) {
        while self.logs.len() > depth {
            let _ = self.revert();
        }
    }

    /// Number of open forks.
    pub fn depth(&self) -> usize {
        self.logs.len()
    }

    /// A counter bumped by every mutation (add/remove node or pod, revert): prepared predicate
    /// state records it to know when it is stale.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// A counter bumped by every mutation that can change what existing pods' required
    /// anti-affinity forbids (a pod with such terms added or removed, directly, with its node or
    /// by a revert; namespace labels replaced). Equal values at two versions mean that part of
    /// the cluster is the same.
    pub(crate) fn anti_epoch(&self) -> u64 {
        self.anti_epoch
    }

    /// The mutations since `version`, oldest first, or `None` when the journal no longer reaches
    /// back that far (a revert or namespace-label change since, or trimmed) or `version` is not
    /// one of this snapshot's past versions.
    pub(crate) fn changes_since(&self, version: u64) -> Option<&[Change]> {
        if version < self.journal_floor || version > self.version {
            return None;
        }
        let from = usize::try_from(version - self.journal_floor).ok()?;
        self.journal.get(from..)
    }

    /// Bumps the version and journals `change`; `None` (a change the journal cannot express)
    /// clears the journal, so older prepared state is recomputed.
    fn bump(&mut self, change: Option<Change>) {
        self.version += 1;
        match change {
            Some(c) => {
                if self.journal.len() >= JOURNAL_CAP {
                    let drop = JOURNAL_CAP / 2;
                    self.journal.drain(..drop);
                    self.journal_floor += drop as u64;
                }
                self.journal.push(c);
            }
            None => {
                self.journal.clear();
                self.journal_floor = self.version;
            }
        }
        debug_assert_eq!(self.journal_floor + self.journal.len() as u64, self.version);
    }

    #[inline]
    fn slot(&self, id: NodeId) -> Option<&NodeInfo> {
        self.slots.get(id.idx()).and_then(Option::as_ref)
    }

    fn record(&mut self, op: Undo) {
        if let Some(log) = self.logs.last_mut() {
            log.push(op);
        }
    }

    /// Indexes `pod`, on `node`, by name and in every other index.
    fn index_pod(&mut self, node: NodeId, pod: &Arc<Pod>) {
        self.names
            .insert(key_hash(pod.namespace, pod.name.text_hash()), node);
        self.index_others(node, pod);
    }

    /// Indexes `pod`, on `node`, in every index but the name index.
    fn index_others(&mut self, node: NodeId, pod: &Arc<Pod>) {
        *self.namespace_pods.entry(pod.namespace).or_default() += 1;
        if let Some(index) = self.selectors.get_mut() {
            index.insert(node, pod);
        }
        if !pod.anti_affinity.is_empty() {
            self.anti.insert(pod_identity(pod), (node, pod.clone()));
        }
        if !pod.volume_refs.is_empty() {
            for claim in claims_of(pod) {
                *self.claim_users.entry((pod.namespace, claim)).or_default() += 1;
            }
        }
        if !pod.resource_claims.is_empty() {
            self.dra.count_users(pod, 1);
        }
    }

    /// Removes `pod`, which was on `node`, from every index.
    fn unindex_pod(&mut self, node: NodeId, pod: &Pod) {
        self.names
            .remove(key_hash(pod.namespace, pod.name.text_hash()), node);
        self.uncount_namespace(pod.namespace);
        if let Some(index) = self.selectors.get_mut() {
            index.remove(pod);
        }
        if !pod.anti_affinity.is_empty() {
            self.anti.remove(&pod_identity(pod));
        }
        for claim in claims_of(pod) {
            let key = (pod.namespace, claim);
            if let Some(n) = self.claim_users.get_mut(&key) {
                *n -= 1;
                if *n == 0 {
                    self.claim_users.remove(&key);
                }
            }
        }
        if !pod.resource_claims.is_empty() {
            self.dra.count_users(pod, -1);
        }
    }

    /// Appends `pod` (indexed already) to a live node.
    fn push(&mut self, node: NodeId, pod: Arc<Pod>) {
        if let Some(info) = self.slots.get_mut(node.idx()).and_then(Option::as_mut) {
            info.account(&pod);
            info.pods.push(pod);
        }
    }

    /// Inserts `pod` at position `at` of a live node and indexes it.
    fn insert_pod(&mut self, node: NodeId, at: usize, pod: Arc<Pod>) {
        self.index_pod(node, &pod);
        if let Some(info) = self.slots.get_mut(node.idx()).and_then(Option::as_mut) {
            info.account(&pod);
            let at = at.min(info.pods.len());
            info.pods.insert(at, pod);
        }
    }

    /// Removes the pod at position `at` of a live node (the caller checked both exist).
    fn take_pod(&mut self, node: NodeId, at: usize) -> Arc<Pod> {
        let info = self
            .slots
            .get_mut(node.idx())
            .and_then(Option::as_mut)
            .expect("take_pod on a live node");
        let pod = info.pods.remove(at);
        info.unaccount(&pod);
        self.unindex_pod(node, &pod);
        pod
    }

    /// Applies one inverse operation; returns whether it touched a pod with anti-affinity terms
    /// or namespace labels.
    fn undo(&mut self, op: Undo) -> bool {
        match op {
            Undo::AddedNode { id, reused } => {
                if let Some(info) = self.slots.get_mut(id.idx()).and_then(Option::take) {
                    self.by_name.remove(&info.node.name);
                    self.live -= 1;
                }
                if let Some(p) = self.order.iter().rposition(|&o| o == id) {
                    self.order.remove(p);
                }
                if reused {
                    self.free.push(id.0);
                } else if id.idx() + 1 == self.slots.len() {
                    self.slots.pop();
                }
                false
            }
            Undo::RemovedNode { id, pos, info } => {
                self.order.insert(pos.min(self.order.len()), id);
                if let Some(i) = self.free.iter().rposition(|f| *f == id.0) {
                    self.free.remove(i);
                }
                for pod in &info.pods {
                    self.index_pod(id, pod);
                }
                let anti = info.pods.iter().any(|p| !p.anti_affinity.is_empty());
                self.by_name.insert(info.node.name, id);
                self.live += 1;
                if let Some(slot) = self.slots.get_mut(id.idx()) {
                    *slot = Some(*info);
                }
                anti
            }
            Undo::AddedPod { node } => {
                let last = self.slot(node).map(|n| n.pods.len()).unwrap_or(0);
                last > 0 && !self.take_pod(node, last - 1).anti_affinity.is_empty()
            }
            Undo::RemovedPod { node, at, pod } => {
                let anti = !pod.anti_affinity.is_empty();
                self.insert_pod(node, at, pod);
                anti
            }
            Undo::NamespaceLabels { old } => {
                self.ns_labels = old;
                true
            }
            Undo::Storage { old } => {
                self.storage = old;
                false
            }
            Undo::Dra => {
                let dra = self.storage.dra().clone();
                self.dra.undo_last(&dra);
                false
            }
            Undo::NodeOrder { old } => {
                self.order = old;
                false
            }
            Undo::PodOrder { node, old } => {
                if let Some(info) = self.slots.get_mut(node.idx()).and_then(Option::as_mut) {
                    info.pods = old;
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};

    /// One node as seen by a [`Picture`]: id, name, pod keys in order, sums, ports.
    type NodePicture = (u32, Sym, Vec<String>, Resources, Vec<HostPort>);

    /// A canonical, comparable picture of everything observable in a snapshot.
    #[derive(Clone, Debug, PartialEq)]
    struct Picture {
        nodes: Vec<NodePicture>,
        by_name: Vec<(Sym, u32)>,
        pods: Vec<(String, u32)>,
        anti: Vec<(String, u32)>,
        by_label: Vec<(Sym, Sym, Sym, String, u32)>,
        by_namespace: Vec<(Sym, String, u32)>,
        free: Vec<u32>,
        len: usize,
        pod_count: usize,
        anti_count: usize,
        ns_labels: Vec<(Sym, Labels)>,
    }

    /// Label entries and namespace entries of a selector index.
    type SelectorEntries = (Vec<(Sym, Sym, Sym, String, u32)>, Vec<(Sym, String, u32)>);

    /// The selector index's entries: the maintained one if built, else a fresh one (without
    /// building it, so that pictures never change what they look at).
    fn selector_entries(s: &ClusterSnapshot) -> SelectorEntries {
        let entries = |i: &SelectorIndex| (i.label_entries(), i.namespace_entries());
        match s.selectors.get() {
            Some(i) => entries(i),
            None => entries(&SelectorIndex::of(s.all_pods())),
        }
    }

    /// Checks every index against a scan of the nodes' pod lists.
    fn check_indices(s: &ClusterSnapshot) {
        let all: Vec<(NodeId, &Arc<Pod>)> = s.all_pods().collect();
        assert_eq!(s.pod_count(), all.len(), "name index size");
        let mut namespaces: FxHashMap<Sym, usize> = FxHashMap::default();
        for &(n, p) in &all {
            let (m, q) = s.pod(p.namespace, &p.name).expect("indexed by name");
            assert!(m == n && Arc::ptr_eq(p, q), "{} found on its node", p.key());
            *namespaces.entry(p.namespace).or_default() += 1;
        }
        assert_eq!(s.namespace_pods, namespaces);
        let anti = all.iter().filter(|(_, p)| !p.anti_affinity.is_empty());
        assert_eq!(s.anti.len(), anti.clone().count());
        for (n, p) in anti {
            assert_eq!(s.anti.get(&pod_identity(p)).map(|e| e.0), Some(*n));
        }
        if let Some(built) = s.selectors.get() {
            let fresh = SelectorIndex::of(s.all_pods());
            assert_eq!(built.label_entries(), fresh.label_entries());
            assert_eq!(built.namespace_entries(), fresh.namespace_entries());
        }
    }

    fn picture(s: &ClusterSnapshot) -> Picture {
        check_indices(s);
        let mut by_name: Vec<_> = s.by_name.iter().map(|(k, v)| (*k, v.0)).collect();
        by_name.sort();
        let mut ns_labels: Vec<_> = s.ns_labels.iter().map(|(k, v)| (*k, v.clone())).collect();
        ns_labels.sort_by_key(|(k, _)| *k);
        let sorted = |it: &mut dyn Iterator<Item = (NodeId, &Arc<Pod>)>| {
            let mut v: Vec<(String, u32)> = it.map(|(n, p)| (p.key(), n.0)).collect();
            v.sort();
            v
        };
        let (by_label, by_namespace) = selector_entries(s);
        Picture {
            nodes: s
                .nodes()
                .map(|(id, n)| {
                    (
                        id.0,
                        n.node.name,
                        n.pods.iter().map(|p| p.key()).collect(),
                        n.requested.clone(),
                        n.ports.clone(),
                    )
                })
                .collect(),
            by_name,
            pods: sorted(&mut s.all_pods()),
            anti: sorted(&mut s.pods_with_anti_affinity()),
            by_label,
            by_namespace,
            free: s.free.clone(),
            len: s.len(),
            pod_count: s.pod_count(),
            anti_count: s.anti_affinity_pod_count(),
            ns_labels,
        }
    }

    fn pod(name: &str) -> Arc<Pod> {
        PodBuilder::new(name, 100, 1 << 20).host_port(80).arc()
    }

    /// Nodes `n0..n<nodes>` and pods `p<i>` (labelled `app=<i % 3>`) on node `i % nodes`,
    /// added the ordinary way or in bulk (unjournaled, with size hints for `extra` more pods).
    fn loaded(nodes: usize, pods: usize, bulk: Option<usize>) -> ClusterSnapshot {
        let pod = |i: usize| {
            PodBuilder::new(&format!("p{i}"), 10, 1 << 20)
                .label("app", &(i % 3).to_string())
                .arc()
        };
        let all: Vec<Arc<Pod>> = (0..pods + bulk.unwrap_or(0)).map(pod).collect();
        let load = |s: &mut ClusterSnapshot| {
            for n in 0..nodes {
                s.add_node(NodeBuilder::new(&format!("n{n}"), 1000, 1 << 30).arc())
                    .unwrap();
            }
            for (i, p) in all.iter().take(pods).enumerate() {
                s.add_pod(p.clone(), NodeId((i % nodes) as u32)).unwrap();
            }
        };
        let mut s = ClusterSnapshot::new();
        match bulk {
            None => load(&mut s),
            Some(_) => {
                s.reserve_nodes(nodes);
                let hints = SizeHints::count(all.iter().map(|p| &**p));
                s.with_size_hints(hints, |s| s.unjournaled(load));
            }
        }
        s
    }

    #[test]
    fn a_bulk_load_holds_the_same_and_journals_nothing() {
        let plain = loaded(4, 40, None);
        let bulk = loaded(4, 40, Some(20));
        assert_eq!(picture(&plain), picture(&bulk));
        assert_eq!(plain.version(), bulk.version());
        // Journaled: state prepared at version 0 can catch up; after a bulk load it cannot.
        assert_eq!(plain.changes_since(0).map(<[_]>::len), Some(44));
        assert!(bulk.changes_since(0).is_none());
        assert_eq!(bulk.changes_since(bulk.version()).map(<[_]>::len), Some(0));
        assert!(!bulk.unjournaled);
    }

    #[test]
    fn after_a_bulk_load_changes_are_journaled_and_hinted_pods_fit_without_growing() {
        let mut s = loaded(4, 40, Some(2000));
        let cap = |s: &ClusterSnapshot| s.names.capacity();
        let before = cap(&s);
        assert!(before >= 2040, "{before}");
        assert!(s.selectors.get().is_none(), "no selector asked yet");
        let v = s.version();
        s.fork();
        for i in 40..2040 {
            let p = PodBuilder::new(&format!("p{i}"), 1, 1)
                .label("app", &(i % 3).to_string())
                .arc();
            s.add_pod(p, NodeId((i % 4) as u32)).unwrap();
        }
        assert_eq!(cap(&s), before, "the hinted pods needed no growth");
        assert_eq!(s.changes_since(v).map(<[_]>::len), Some(2000));
        s.revert().unwrap();
        assert_eq!(picture(&s), picture(&loaded(4, 40, None)));
    }

    /// Nodes added under size hints get room for their share of the hinted pods, capped, and
    /// only while the hints apply; without reserved nodes nothing is given.
    #[test]
    fn hinted_nodes_get_room_for_their_share_of_pods() {
        let room = |s: &ClusterSnapshot| -> Vec<usize> {
            s.nodes().map(|(_, n)| n.pods.capacity()).collect()
        };
        // 4 nodes reserved, 40 + 2000 pods hinted: 510 each, capped.
        let s = loaded(4, 40, Some(2000));
        assert!(
            room(&s).iter().all(|&c| c >= MAX_PODS_PER_NODE_HINT),
            "{:?}",
            room(&s)
        );
        assert!(
            room(&s).iter().all(|&c| c < 2 * MAX_PODS_PER_NODE_HINT),
            "capped"
        );
        // 4 nodes reserved, 40 pods hinted: 10 each, the 10 they get fit without growing.
        let s = loaded(4, 40, Some(0));
        assert_eq!(room(&s), [10, 10, 10, 10]);
        // A node added after the hints no longer apply starts empty.
        let mut s = s;
        let late = s
            .add_node(NodeBuilder::new("late", 1000, 1 << 30).arc())
            .unwrap();
        assert_eq!(s.node(late).unwrap().pods.capacity(), 0);
        // No node reserved: no room given.
        let mut bare = ClusterSnapshot::new();
        let hints = SizeHints::count([&*pod("p")]);
        bare.with_size_hints(hints, |s| {
            s.add_node(NodeBuilder::new("a", 1000, 1 << 30).arc())
                .unwrap()
        });
        assert_eq!(room(&bare), [0]);
    }

    #[test]
    fn add_remove_and_lookup() {
        let mut s = ClusterSnapshot::new();
        assert!(s.is_empty());
        let a = s
            .add_node(NodeBuilder::new("a", 1000, 1 << 30).arc())
            .unwrap();
        let b = s
            .add_node(NodeBuilder::new("b", 1000, 1 << 30).arc())
            .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s.node_id(Sym::new("b")), Some(b));
        s.add_pod(pod("p1"), a).unwrap();
        s.add_pod(
            PodBuilder::new("p2", 300, 0)
                .anti_affinity("x", "y", "h")
                .arc(),
            a,
        )
        .unwrap();
        let n = s.node(a).unwrap();
        assert_eq!(n.requested.cpu, 400);
        assert_eq!(n.requested.pods, 2);
        assert_eq!(n.used_ports().len(), 1);
        assert_eq!(s.pod(Sym::new("default"), "p2").map(|(n, _)| n), Some(a));
        assert_eq!(s.anti_affinity_pod_count(), 1);
        let p = s.remove_pod(a, Sym::new("default"), "p1").unwrap();
        assert_eq!(&*p.name, "p1");
        assert_eq!(s.node(a).unwrap().requested.cpu, 300);
        assert!(s.node(a).unwrap().used_ports().is_empty());
        s.remove_node(a).unwrap();
        assert_eq!(s.anti_affinity_pod_count(), 0);
        assert_eq!(s.pod_count(), 0);
        assert!(s.node(a).is_none());
        assert_eq!(s.node_ids().collect::<Vec<_>>(), vec![b]);
        // The freed id is reused.
        let c = s.add_node(NodeBuilder::new("c", 1, 1).arc()).unwrap();
        assert_eq!(c, a);
    }

    /// Two names of namespace `default` whose index keys share their tag (the 32 bits the name
    /// index keeps), found by searching: the index must tell such pods apart by their names.
    fn colliding_names() -> (String, String) {
        let ns = Sym::new("default");
        let mut seen: FxHashMap<u32, String> = FxHashMap::default();
        for i in 0.. {
            let name = format!("p{i}");
            let tag = (key_hash(ns, text_hash(&name)) >> 32) as u32;
            if let Some(first) = seen.insert(tag, name.clone()) {
                return (first, name);
            }
        }
        unreachable!("the search ends at the first collision")
    }

    /// Pods whose keys collide are both held, found and removed by their own names, on one node
    /// or two, and a duplicate of either is refused.
    #[test]
    fn pods_with_colliding_keys_stay_apart() {
        let (x, y) = colliding_names();
        let ns = Sym::new("default");
        for same_node in [true, false] {
            let mut s = ClusterSnapshot::new();
            let a = s.add_node(NodeBuilder::new("a", 1000, GI).arc()).unwrap();
            let b = s.add_node(NodeBuilder::new("b", 1000, GI).arc()).unwrap();
            let on_y = if same_node { a } else { b };
            s.add_pod(pod(&x), a).unwrap();
            s.add_pod(pod(&y), on_y).unwrap();
            assert_eq!(s.pod_count(), 2);
            assert_eq!(
                s.pod(ns, &x).map(|(n, p)| (n, p.name.to_string())),
                Some((a, x.clone()))
            );
            assert_eq!(
                s.pod(ns, &y).map(|(n, p)| (n, p.name.to_string())),
                Some((on_y, y.clone()))
            );
            assert!(matches!(
                s.add_pod(pod(&x), b),
                Err(SnapshotError::DuplicatePod(_))
            ));
            assert!(matches!(
                s.add_pod(pod(&y), a),
                Err(SnapshotError::DuplicatePod(_))
            ));
            s.remove_pod(a, ns, &x).unwrap();
            assert!(s.pod(ns, &x).is_none());
            assert_eq!(s.pod(ns, &y).map(|(n, _)| n), Some(on_y));
            s.add_pod(pod(&x), b).unwrap();
            assert_eq!(s.pod(ns, &x).map(|(n, _)| n), Some(b));
            check_indices(&s);
        }
    }

    /// A pod for the load tests: `name` in namespace `ns`, with an anti-affinity term, a
    /// claim or neither (`kind` 1, 2 or else).
    fn load_pod(name: &str, ns: &str, kind: u8) -> Arc<Pod> {
        let b = PodBuilder::new(name, 10, 1 << 20)
            .namespace(ns)
            .host_port(u16::from(kind) + 1);
        match kind {
            1 => b.anti_affinity("a", "b", "h"),
            2 => b.claim("data"),
            _ => b,
        }
        .arc()
    }

    /// What a snapshot counts per namespace and claim, and its counters, for `namespaces`.
    fn counts(s: &ClusterSnapshot, namespaces: &[&str]) -> (Vec<(usize, u32)>, u64, u64) {
        let per_namespace = namespaces
            .iter()
            .map(|ns| {
                let ns = Sym::new(ns);
                (
                    s.pods_in_namespace_count(ns),
                    s.claim_users(ns, &Arc::from("data")),
                )
            })
            .collect();
        (per_namespace, s.version(), s.anti_epoch())
    }

    /// Loads `pods` (pod, node name) onto nodes `n0..n<nodes>` one pod at a time with
    /// `add_pod` and at once with `add_bound_pods` (loading in bulk); both must place, refuse
    /// and count exactly alike.
    fn assert_loads_alike(nodes: usize, pods: &[(Arc<Pod>, Sym)], namespaces: &[&str]) {
        let fresh = || {
            let mut s = ClusterSnapshot::new();
            for n in 0..nodes {
                s.add_node(NodeBuilder::new(&format!("n{n}"), 1000, GI).arc())
                    .unwrap();
            }
            s
        };
        let mut one = fresh();
        let (mut placed_one, mut refused_one) = (Vec::new(), Vec::new());
        for (i, (pod, node)) in pods.iter().enumerate() {
            let added = match one.node_id(*node) {
                Some(id) => one.add_pod(pod.clone(), id).map(|()| id),
                None => Err(SnapshotError::UnknownNode(node.to_string())),
            };
            match added {
                Ok(id) => placed_one.push((i, id)),
                Err(e) => refused_one.push((i, e)),
            }
        }
        let mut bulk = fresh();
        let mut placed_bulk = Vec::new();
        let hints = SizeHints::count(pods.iter().map(|(p, _)| &**p));
        let refused_bulk = bulk.with_size_hints(hints, |s| {
            s.unjournaled(|s| {
                let labelled = pods.iter().enumerate().map(|(i, (p, n))| (i, p, *n));
                s.add_bound_pods(labelled, |i, id| placed_bulk.push((i, id)))
            })
        });
        assert_eq!(placed_bulk, placed_one);
        assert_eq!(refused_bulk, refused_one);
        assert_eq!(picture(&bulk), picture(&one));
        assert_eq!(counts(&bulk, namespaces), counts(&one, namespaces));
        // Lookups by name find what the pod lists hold.
        for (pod, _) in pods {
            let find = |s: &ClusterSnapshot| {
                s.pod(pod.namespace, &pod.name)
                    .map(|(n, p)| (n, Arc::as_ptr(p)))
            };
            assert_eq!(find(&bulk), find(&one));
        }
    }

    /// A load in bulk large enough to be written stretch by stretch, with duplicates (of
    /// other objects and of the very same `Arc`, on one node and on two), names whose keys
    /// share their tag, pods with anti-affinity terms and claims, and unknown nodes: the same
    /// as loading one pod at a time.
    #[test]
    fn a_bulk_load_of_many_pods_places_and_refuses_as_one_at_a_time() {
        let (x, y) = colliding_names();
        let mut pods: Vec<(Arc<Pod>, Sym)> = Vec::new();
        let node = |i: usize| Sym::new(&format!("n{}", i % 7));
        for i in 0..9000 {
            let ns = ["default", "kube-system", "team"][i % 3];
            let pod = load_pod(&format!("p{}", i % 8500), ns, (i % 11) as u8);
            pods.push((pod, node(i)));
            if i % 1000 == 3 {
                pods.push((pods[i / 2].0.clone(), node(i)));
                pods.push((pods[i / 3].0.clone(), pods[i / 3].1));
            }
        }
        pods.push((load_pod(&x, "default", 1), node(1)));
        pods.push((load_pod(&y, "default", 0), node(1)));
        pods.push((load_pod(&y, "default", 2), node(2)));
        pods.push((load_pod("lost", "default", 0), Sym::new("nowhere")));
        pods.push((load_pod(&x, "default", 0), node(3)));
        assert_loads_alike(7, &pods, &["default", "kube-system", "team"]);
    }

    /// Duplicates taken back off a node whose sums stopped at the largest value leave the sums
    /// adding the pods in turn leaves (subtracting a pod does not undo adding it there); and
    /// many duplicates on one node are taken back in one pass.
    #[test]
    fn duplicates_taken_back_leave_capped_sums_and_many_go_at_once() {
        let huge = PodBuilder::new("a", i64::MAX, 1).arc();
        let n0 = Sym::new("n0");
        assert_loads_alike(1, &[(huge.clone(), n0), (huge, n0)], &["default"]);
        let big = |name: &str| PodBuilder::new(name, 1, 4_000_000_000_000_000_000).arc();
        let pods = [big("a"), big("b"), big("c"), big("a")].map(|p| (p, n0));
        assert_loads_alike(1, &pods, &["default"]);
        let mut many: Vec<(Arc<Pod>, Sym)> = Vec::new();
        let one = load_pod("same", "default", 0);
        for i in 0..6000 {
            many.push((load_pod(&format!("p{i}"), "default", (i % 3) as u8), n0));
            many.push((one.clone(), n0));
        }
        assert_loads_alike(1, &many, &["default"]);
    }

    /// A snapshot that already holds pods, or is forked, adds them one at a time, with the
    /// same outcome.
    #[test]
    fn adding_bound_pods_to_a_loaded_or_forked_snapshot_adds_them_in_turn() {
        let mut s = ClusterSnapshot::new();
        let a = s.add_node(NodeBuilder::new("a", 1000, GI).arc()).unwrap();
        s.add_pod(pod("p0"), a).unwrap();
        let (p0, p1) = (pod("p0"), pod("p1"));
        let pods = [(0, &p0, Sym::new("a")), (1, &p1, Sym::new("a"))];
        let mut placed = Vec::new();
        let refused = s.unjournaled(|s| s.add_bound_pods(pods, |i, id| placed.push((i, id))));
        assert_eq!(placed, [(1, a)]);
        assert!(matches!(refused[..], [(0, SnapshotError::DuplicatePod(_))]));
        s.fork();
        let p2 = pod("p2");
        let refused = s.add_bound_pods([(7, &p2, Sym::new("b"))], |_, _| panic!("no node b"));
        assert_eq!(refused, [(7, SnapshotError::UnknownNode("b".into()))]);
        assert_eq!(s.changes_since(s.version()).map(<[_]>::len), Some(0));
        check_indices(&s);
    }

    #[test]
    fn errors() {
        let mut s = ClusterSnapshot::new();
        let a = s
            .add_node(NodeBuilder::new("a", 1000, 1 << 30).arc())
            .unwrap();
        assert!(matches!(
            s.add_node(NodeBuilder::new("a", 1, 1).arc()),
            Err(SnapshotError::DuplicateNode(n)) if n == "a"
        ));
        s.add_pod(pod("p"), a).unwrap();
        assert!(matches!(
            s.add_pod(pod("p"), a),
            Err(SnapshotError::DuplicatePod(_))
        ));
        assert!(matches!(
            s.add_pod(pod("q"), NodeId(7)),
            Err(SnapshotError::UnknownNode(_))
        ));
        assert!(matches!(
            s.remove_pod(a, Sym::new("default"), "nope"),
            Err(SnapshotError::UnknownPod(_, _))
        ));
        assert!(matches!(
            s.remove_pod(NodeId(9), Sym::new("default"), "p"),
            Err(SnapshotError::UnknownNode(_))
        ));
        assert!(matches!(
            s.remove_node(NodeId(9)),
            Err(SnapshotError::UnknownNode(_))
        ));
        assert_eq!(s.revert(), Err(SnapshotError::NoFork));
        assert_eq!(s.commit(), Err(SnapshotError::NoFork));
        assert_eq!(s.depth(), 0);
    }

    /// Node order and pod order changes are undone by `revert`, and removing then re-adding a
    /// node lists it last.
    #[test]
    fn order_changes_revert_exactly() {
        let mut s = ClusterSnapshot::new();
        let ids: Vec<NodeId> = ["a", "b", "c"]
            .iter()
            .map(|n| {
                s.add_node(NodeBuilder::new(n, 1000, 1 << 30).arc())
                    .expect("node")
            })
            .collect();
        for p in ["p1", "p2", "p3"] {
            s.add_pod(pod(p), ids[0]).expect("pod");
        }
        let before = picture(&s);
        s.fork();
        s.set_node_order(vec![ids[2], ids[0], ids[1]])
            .expect("order");
        let names: Vec<Sym> = s.nodes().map(|(_, i)| i.node.name).collect();
        assert_eq!(names, vec![Sym::new("c"), Sym::new("a"), Sym::new("b")]);
        s.sort_pods_by_key(ids[0], |p| std::cmp::Reverse(p.name.to_string()))
            .expect("sort");
        let pods: Vec<String> = s
            .node(ids[0])
            .expect("a")
            .pods
            .iter()
            .map(|p| p.key())
            .collect();
        assert_eq!(pods.first().map(String::as_str), Some("default/p3"));
        s.remove_node(ids[1]).expect("remove");
        let again = s
            .add_node(NodeBuilder::new("b", 1000, 1 << 30).arc())
            .expect("re-add");
        assert_eq!(s.node_ids().last(), Some(again));
        assert!(s.set_node_order(vec![ids[0]]).is_err());
        s.revert().expect("revert");
        assert_eq!(picture(&s), before);
    }

    #[test]
    fn nested_fork_revert_commit_restore_exactly() {
        let mut s = ClusterSnapshot::new();
        let a = s
            .add_node(NodeBuilder::new("a", 4000, 1 << 30).arc())
            .unwrap();
        let b = s
            .add_node(NodeBuilder::new("b", 4000, 1 << 30).arc())
            .unwrap();
        s.add_pod(pod("p1"), a).unwrap();
        s.add_pod(
            PodBuilder::new("p2", 1, 1)
                .anti_affinity("k", "v", "h")
                .arc(),
            a,
        )
        .unwrap();
        s.add_pod(pod("p3"), b).unwrap();
        let base = picture(&s);
        let mut last = s.version();

        s.fork();
        s.remove_pod(a, Sym::new("default"), "p1").unwrap();
        s.remove_node(a).unwrap();
        let c = s.add_node(NodeBuilder::new("c", 1, 1).arc()).unwrap();
        assert_eq!(c, a, "id reused inside the fork");
        let mid = picture(&s);
        s.fork();
        s.add_pod(pod("p4"), c).unwrap();
        s.remove_node(b).unwrap();
        s.set_namespace_labels(vec![NamespaceLabels {
            name: Sym::new("default"),
            labels: Labels::from_pairs([("team", "x")]),
        }]);
        assert_eq!(s.depth(), 2);
        assert!(s.version() > last);
        last = s.version();
        s.revert().unwrap();
        assert!(s.version() > last);
        last = s.version();
        assert_eq!(picture(&s), mid);
        s.fork();
        s.add_pod(pod("p5"), c).unwrap();
        s.commit().unwrap();
        assert_eq!(s.depth(), 1);
        s.revert().unwrap();
        assert!(s.version() > last);
        assert_eq!(picture(&s), base);
        assert_eq!(s.depth(), 0);

        // A commit at depth 0 keeps the changes.
        s.fork();
        s.remove_node(b).unwrap();
        s.commit().unwrap();
        assert!(s.node(b).is_none());
        assert_eq!(s.revert(), Err(SnapshotError::NoFork));
    }

    #[test]
    fn guards_balance_forks_whatever_the_closure_leaves_open() {
        let mut s = ClusterSnapshot::new();
        let a = s
            .add_node(NodeBuilder::new("a", 1000, 1 << 30).arc())
            .unwrap();
        let base = picture(&s);
        let n = s.forked(|s| {
            s.add_pod(pod("p1"), a).unwrap();
            s.fork(); // left open on purpose
            s.add_pod(pod("p2"), a).unwrap();
            s.node(a).map_or(0, |i| i.pods.len())
        });
        assert_eq!(n, 2);
        assert_eq!((picture(&s), s.depth()), (base.clone(), 0));
        let failed: Result<(), ()> = s.tentatively(|s| {
            s.add_pod(pod("p1"), a).unwrap();
            Err(())
        });
        assert!(failed.is_err());
        assert_eq!((picture(&s), s.depth()), (base.clone(), 0));
        s.fork();
        let kept: Result<(), ()> = s.tentatively(|s| {
            s.add_pod(pod("p1"), a).unwrap();
            s.fork();
            s.add_pod(pod("p2"), a).unwrap();
            Ok(())
        });
        assert!(kept.is_ok());
        assert_eq!(s.depth(), 1, "folded into the caller's fork");
        assert_eq!(s.node(a).map(|i| i.pods.len()), Some(2));
        s.revert().unwrap();
        assert_eq!(picture(&s), base);
    }

    #[test]
    fn journal_records_changes_and_resets() {
        let mut s = ClusterSnapshot::new();
        let v0 = s.version();
        assert_eq!(s.changes_since(v0).map(<[Change]>::len), Some(0));
        let a = s
            .add_node(NodeBuilder::new("a", 1000, 1 << 30).arc())
            .unwrap();
        s.add_pod(pod("p1"), a).unwrap();
        let epoch = s.anti_epoch();
        let v1 = s.version();
        s.add_pod(
            PodBuilder::new("p2", 1, 1)
                .anti_affinity("k", "v", "h")
                .arc(),
            a,
        )
        .unwrap();
        assert!(
            s.anti_epoch() > epoch,
            "an anti-affinity pod bumps the epoch"
        );
        let epoch = s.anti_epoch();
        s.remove_pod(a, Sym::new("default"), "p1").unwrap();
        assert_eq!(s.anti_epoch(), epoch, "a plain pod does not");
        let kinds: Vec<&str> = s
            .changes_since(v0)
            .unwrap()
            .iter()
            .map(|c| match c {
                Change::AddedNode(_) => "node+",
                Change::RemovedNode(..) => "node-",
                Change::AddedPod(..) => "pod+",
                Change::RemovedPod(..) => "pod-",
            })
            .collect();
        assert_eq!(kinds, ["node+", "pod+", "pod+", "pod-"]);
        assert_eq!(s.changes_since(v1).map(<[Change]>::len), Some(2));
        assert!(s.changes_since(s.version() + 1).is_none(), "future version");

        // Removing a node journals its pods with it.
        s.fork();
        let v2 = s.version();
        s.remove_node(a).unwrap();
        assert!(s.anti_epoch() > epoch);
        match s.changes_since(v2) {
            Some([Change::RemovedNode(n, pods)]) => {
                assert_eq!(n.name, Sym::new("a"));
                assert_eq!(pods.len(), 1);
            }
            other => panic!("unexpected {other:?}"),
        }
        // A revert clears the journal: older versions must recompute.
        let epoch = s.anti_epoch();
        s.revert().unwrap();
        assert!(s.anti_epoch() > epoch, "the anti-affinity pod came back");
        assert!(s.changes_since(v2).is_none());
        assert_eq!(s.changes_since(s.version()).map(<[Change]>::len), Some(0));
        // A revert of plain changes only keeps the epoch.
        let epoch = s.anti_epoch();
        s.fork();
        s.add_pod(pod("p3"), a).unwrap();
        s.revert().unwrap();
        assert_eq!(s.anti_epoch(), epoch);
        // Namespace labels reset too.
        let v3 = s.version();
        s.set_namespace_labels(vec![]);
        assert!(s.changes_since(v3).is_none());
        assert!(s.anti_epoch() > epoch);
    }

    #[test]
    fn storage_and_claim_users_revert_exactly() {
        let mut s = ClusterSnapshot::new();
        let n = s.add_node(NodeBuilder::new("n", 1000, GI).arc()).unwrap();
        let before = s.storage().clone();
        let claim: Arc<str> = Arc::from("data");
        s.fork();
        s.set_storage(Arc::new(Storage::default()));
        assert!(!Arc::ptr_eq(s.storage(), &before));
        let user = PodBuilder::new("u", 1, GI)
            .claim("data")
            .claim("data")
            .arc();
        s.add_pod(user, n).unwrap();
        assert_eq!(s.claim_users(Sym::new("default"), &claim), 1);
        s.revert().unwrap();
        assert!(Arc::ptr_eq(s.storage(), &before));
        assert_eq!(s.claim_users(Sym::new("default"), &claim), 0);
        // Setting the same storage again is no change at all.
        let v = s.version();
        s.set_storage(before);
        assert_eq!(s.version(), v);
    }

    #[test]
    fn journal_is_bounded() {
        let mut s = ClusterSnapshot::new();
        let v0 = s.version();
        let a = s
            .add_node(NodeBuilder::new("a", 1000, 1 << 30).arc())
            .unwrap();
        let p = pod("p");
        for _ in 0..(JOURNAL_CAP + 10) / 2 {
            s.add_pod(p.clone(), a).unwrap();
            s.remove_pod(a, Sym::new("default"), "p").unwrap();
        }
        assert!(s.journal.len() <= JOURNAL_CAP);
        assert!(s.changes_since(v0).is_none(), "trimmed past v0");
        let recent = s.version() - 10;
        assert_eq!(s.changes_since(recent).map(<[Change]>::len), Some(10));
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        #[derive(Clone, Debug)]
        enum Op {
            AddNode(u8),
            RemoveNode(u8),
            AddPod(u8, u8, bool),
            RemovePod(u8),
            Fork,
            Revert,
            Commit,
            /// A selector query (builds the selector index of the lazy snapshot).
            Select(u8),
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                3 => (0u8..6).prop_map(Op::AddNode),
                1 => (0u8..8).prop_map(Op::RemoveNode),
                4 => (0u8..12, 0u8..8, any::<bool>()).prop_map(|(p, n, a)| Op::AddPod(p, n, a)),
                2 => (0u8..12).prop_map(Op::RemovePod),
                2 => Just(Op::Fork),
                1 => Just(Op::Revert),
                1 => Just(Op::Commit),
                1 => (0u8..3).prop_map(Op::Select),
            ]
        }

        /// Applies `op` to `s`; returns what `revert` or `commit` returned.
        fn apply(s: &mut ClusterSnapshot, op: &Op) -> Option<Result<(), SnapshotError>> {
            match *op {
                Op::AddNode(i) => {
                    let _ = s.add_node(NodeBuilder::new(&format!("n{i}"), 1000, 1000).arc());
                }
                Op::RemoveNode(i) => {
                    let _ = s.remove_node(NodeId(u32::from(i)));
                }
                Op::AddPod(p, n, anti) => {
                    let mut b = PodBuilder::new(&format!("p{p}"), i64::from(p) + 1, 7)
                        .host_port(u16::from(p % 3) + 1)
                        .label("app", if p % 2 == 0 { "even" } else { "odd" });
                    if p % 3 == 0 {
                        b = b.label("tier", "x");
                    }
                    if anti {
                        b = b.anti_affinity("a", "b", "h");
                    }
                    let _ = s.add_pod(b.arc(), NodeId(u32::from(n)));
                }
                Op::RemovePod(p) => {
                    let name = format!("p{p}");
                    if let Some((n, _)) = s.pod(Sym::new("default"), &name) {
                        s.remove_pod(n, Sym::new("default"), &name).unwrap();
                    }
                }
                Op::Fork => s.fork(),
                Op::Revert => return Some(s.revert()),
                Op::Commit => return Some(s.commit()),
                Op::Select(i) => {
                    let value = ["even", "odd", "x"][usize::from(i)];
                    let key = if i == 2 { "tier" } else { "app" };
                    let _ = s.pods_with_label_count(
                        Sym::new("default"),
                        Sym::new(key),
                        Sym::new(value),
                    );
                }
            }
            None
        }

        proptest! {
            /// Random pods (names from a few, so that some repeat; some the very same `Arc`;
            /// some with anti-affinity terms or claims; some on unknown nodes) loaded in bulk
            /// and one at a time come out alike.
            #[test]
            fn random_bulk_loads_match_adding_one_at_a_time(
                picks in proptest::collection::vec(
                    (0u8..24, 0u8..3, 0u8..4, 0u8..6, any::<bool>()),
                    0..120,
                )
            ) {
                let namespaces = ["default", "a", "b"];
                let mut pods: Vec<(Arc<Pod>, Sym)> = Vec::new();
                for (name, ns, kind, node, again) in picks {
                    let node = Sym::new(&format!("n{node}"));
                    let pod = match pods.last() {
                        Some((last, _)) if again => last.clone(),
                        _ => super::load_pod(&format!("p{name}"), namespaces[usize::from(ns)], kind),
                    };
                    pods.push((pod, node));
                }
                // Nodes n0..n4: n5 is unknown.
                super::assert_loads_alike(5, &pods, &namespaces);
            }

            /// Random changes, forks, reverts and commits on two snapshots: `lazy` builds its
            /// selector index only when an `Op::Select` asks, `eager` at every step. Both
            /// always look the same, every index equals a scan of the pod lists (checked by
            /// `picture`), and a revert restores the picture taken at its fork.
            #[test]
            fn random_sequences_match_model_and_lazy_equals_eager(ops in proptest::collection::vec(op(), 1..80)) {
                let mut lazy = ClusterSnapshot::new();
                let mut eager = ClusterSnapshot::new();
                // The model: a picture taken at every fork.
                let mut saved: Vec<Picture> = Vec::new();
                let mut version = lazy.version();
                for op in ops {
                    if matches!(op, Op::Fork) {
                        saved.push(picture(&lazy));
                    }
                    let r = apply(&mut lazy, &op);
                    prop_assert_eq!(&apply(&mut eager, &op), &r);
                    match (&op, r) {
                        (Op::Revert, Some(r)) => match saved.pop() {
                            Some(p) => {
                                prop_assert!(r.is_ok());
                                prop_assert_eq!(picture(&lazy), p);
                            }
                            None => prop_assert_eq!(r, Err(SnapshotError::NoFork)),
                        },
                        (Op::Commit, Some(r)) => prop_assert_eq!(r.is_ok(), saved.pop().is_some()),
                        _ => {}
                    }
                    prop_assert!(lazy.version() >= version);
                    version = lazy.version();
                    prop_assert_eq!(lazy.depth(), saved.len());
                    // The eager snapshot answers a selector query at every step.
                    let _ = eager.pods_with_label_count(Sym::new("default"), Sym::new("app"), Sym::new("odd"));
                    prop_assert_eq!(picture(&lazy), picture(&eager));
                    // The selector queries equal a recomputation.
                    let mut want: Vec<_> = lazy
                        .all_pods()
                        .flat_map(|(n, p)| {
                            p.labels
                                .iter()
                                .map(move |(k, v)| (p.namespace, k, v, p.key(), n.0))
                        })
                        .collect();
                    want.sort();
                    prop_assert_eq!(&picture(&eager).by_label, &want);
                    for &(ns, k, v, _, _) in &want {
                        let n = want.iter().filter(|w| (w.0, w.1, w.2) == (ns, k, v)).count();
                        prop_assert_eq!(eager.pods_with_label_count(ns, k, v), n);
                        prop_assert_eq!(eager.pods_with_label(ns, k, v).count(), n);
                    }
                    prop_assert_eq!(
                        eager.pods_in_namespace(Sym::new("default")).count(),
                        eager.pods_in_namespace_count(Sym::new("default"))
                    );
                    // Sums always equal a recomputation.
                    for (_, n) in lazy.nodes() {
                        let mut r = Resources::default();
                        for p in &n.pods {
                            r.add(&p.requests);
                        }
                        prop_assert_eq!(&r, &n.requested);
                    }
                }
                while let Some(p) = saved.pop() {
                    lazy.revert().unwrap();
                    prop_assert_eq!(picture(&lazy), p);
                }
            }
        }
    }
}
