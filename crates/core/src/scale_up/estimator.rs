//! The bin-packing estimator: how many new nodes of one node template the pending pods need, and
//! which pod would land on which new node.
//!
//! It decides only "how many nodes of this shape, holding which pods": it does not choose between
//! node groups, apply resource limits or scale anything. It is a pure function of the snapshot,
//! the pods, the template and the limits: it must never leave a trace in the snapshot (it forks
//! at the start and reverts at the end, on success and on error alike), never read the clock (the
//! caller's [`Budget`] says when time is up) and never panic on any input.
//!
//! # Algorithm
//!
//! 1. Pods are sorted largest first by `cpu / template cpu + memory / template memory` (the
//!    template's allocatable); ties keep the input order.
//! 2. Each pod is tried on the nodes opened so far by this estimate, in opening order (first
//!    fit). Existing nodes of the snapshot are never candidates: the caller has already decided
//!    that these pods do not fit there. They still matter to the predicates (inter-pod
//!    anti-affinity, topology spread, ...).
//! 3. When no opened node fits, a fresh node is built from the template (a unique name, a
//!    matching `kubernetes.io/hostname` label and copies of the template's DaemonSet pods) and the
//!    pod is tried there. If even the fresh node refuses it, the node is discarded (no new node is
//!    ever left empty) and the pod is reported unplaceable with the reason.
//!
//! # Equivalence groups
//!
//! Pods with equal [`Pod::equivalence`] are interchangeable for scheduling, so a node that refused
//! one of them refuses the others as long as nothing was removed from it, and nothing is ever
//! removed from an opened node here. Each group therefore remembers the opened nodes known not to
//! fit and skips them. Because candidates are always tried in opening order and a pod stops at its
//! first fit, the refused nodes of a group are exactly a prefix of the opened nodes, so the memory
//! is a single cursor per group; the whole estimate costs O(pods + opened nodes × groups) checks
//! rather than O(pods × opened nodes). Likewise, once a fresh template node refused a pod of a
//! group, the rest of the group is reported unplaceable with the same reason without building
//! another node. The group also shares one [`Prepared`] predicate state, refreshed before use.
//!
//! This memory is exact for resources, host ports, node selection, taints and anti-affinity (all
//! of which only get harder as pods are added). For positive inter-pod affinity and topology
//! spread a node could become acceptable again after later placements elsewhere; the estimator
//! then opens a node where a slower search would have reused one, i.e. it may overestimate,
//! never place a pod where the predicates refuse it.
//!
//! # Pending pods read once
//!
//! A scale-up estimates the same pending pods for every group, round after round. What the packer
//! reads of every pod (its equivalence class and its CPU and memory requests) is gathered once
//! into [`PendingPods`], side by side: a pod whose class is already refused by a fresh node, or
//! past the node cap, is counted without its own memory being fetched again, and groups whose
//! templates have the same allocatable share one largest-first order. With 50,000 pending pods
//! and 100 groups that is the difference between 5,000,000 scattered reads and a scan of two
//! arrays.
//!
//! # Limits
//!
//! * `max_nodes`: once that many nodes are open, no more are opened. Later pods are still tried
//!   on the open nodes (smaller pods may still fit); those that would need a new node are
//!   reported in [`Estimate::skipped`] and [`LimitHit::MaxNodes`] is set.
//! * the time budget: [`Budget::exhausted`] is asked before each pod; when it answers `true` the
//!   estimate stops, the remaining pods go to [`Estimate::skipped`] and [`LimitHit::TimeBudget`]
//!   is set.

use autoscaler_model::HOSTNAME_LABEL;
use std::borrow::Cow;
use std::fmt::Write as _;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::scheduling::predicates::{Prepared, Unfit};
use crate::scheduling::snapshot::{ClusterSnapshot, NodeId, SnapshotError};
use autoscaler_model::Node;
use autoscaler_model::Sym;
use autoscaler_model::{Pod, PodName};

// Kept here for the shells' old import path; the budget belongs to every simulation.
pub use crate::scheduling::budget::{Budget, Unlimited};

/// The shape of the nodes a node group would add: the node as it would register, and the
/// DaemonSet pods that would start on it (they consume its capacity before any pending pod).
#[derive(Clone, Debug)]
pub struct NodeTemplate {
    /// The template node. Its name is used as the stem of the new nodes' names
    /// (`template-<name>-<i>`); its `kubernetes.io/hostname` label is replaced on each new node.
    pub node: Node,
    /// DaemonSet pods copied onto each new node (renamed `<pod name>-<node name>` and bound to
    /// it). The caller is expected to pass only those that would run on the template.
    pub daemonset_pods: Vec<Arc<Pod>>,
}

/// Limits of one estimate.
#[derive(Clone, Debug, Default)]
pub struct EstimatorLimits<B = Unlimited> {
    /// At most this many new nodes; `None` is unlimited.
    pub(crate) max_nodes: Option<usize>,
    /// The time budget, asked before each pod.
    pub(crate) budget: B,
}

impl EstimatorLimits<Unlimited> {
    /// No node limit and no time limit.
    pub fn unlimited() -> Self {
        EstimatorLimits::new(None, Unlimited)
    }
}

impl<B> EstimatorLimits<B> {
    /// At most `max_nodes` new nodes (`None`: no limit; `Some(0)`: none, every pod a new node
    /// would take is skipped), asking `budget` before each pod. No value is impossible.
    pub fn new(max_nodes: Option<usize>, budget: B) -> Self {
        EstimatorLimits { max_nodes, budget }
    }

    /// The most new nodes; `None` is unlimited.
    pub fn max_nodes(&self) -> Option<usize> {
        self.max_nodes
    }

    /// The time budget, asked before each pod.
    pub fn budget(&self) -> &B {
        &self.budget
    }
}

/// Which limit cut an estimate short.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LimitHit {
    /// A pod needed a new node while `max_nodes` nodes were already open.
    MaxNodes,
    /// The budget was exhausted before every pod was tried.
    TimeBudget,
}

/// A node the estimate would add.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewNode {
    /// Its name (`template-<template name>-<i>`, unique in the snapshot at estimate time).
    pub name: Sym,
    /// The pending pods placed on it, as indices into the input slice, in placement order. Never
    /// empty. The DaemonSet pods copied from the template are not listed.
    pub pods: Vec<usize>,
}

/// The answer of [`estimate`]. Every input pod index appears exactly once, in one of
/// [`NewNode::pods`], `unplaced` or `skipped`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Estimate {
    /// How many new nodes are needed (`new_nodes.len()`).
    pub node_count: usize,
    /// The new nodes in opening order, with the pods placed on each.
    pub new_nodes: Vec<NewNode>,
    /// Pods that do not fit even a fresh template node, with the reason the predicates gave,
    /// in processing order (largest first).
    pub unplaced: Vec<(usize, Unfit)>,
    /// Pods not placed because a limit cut the estimate short (see `limit_hit`), in processing
    /// order. Empty when `limit_hit` is `None`.
    pub skipped: Vec<usize>,
    /// The limit that cut the estimate short, if any.
    pub limit_hit: Option<LimitHit>,
    /// How many pod-node predicate checks were run (for metrics, and to keep the equivalence
    /// shortcuts honest in tests).
    pub checks: usize,
}

impl Estimate {
    /// Number of pending pods placed on new nodes (for benches: the loop reads the nodes).
    #[cfg(any(test, feature = "bench"))]
    pub fn placed_count(&self) -> usize {
        self.new_nodes.iter().map(|n| n.pods.len()).sum()
    }
}

/// Errors of [`estimate`]: only inconsistent input can cause them (the snapshot is left as found
/// in every case).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EstimateError {
    /// The snapshot refused a mutation, e.g. a pending pod with the namespace/name of a pod
    /// already in the snapshot, or twice in the input.
    #[error("estimate: {0}")]
    Snapshot(#[from] SnapshotError),
}

/// Estimates how many nodes of `template` the `pods` need (see the module documentation for the
/// rules). `snapshot` holds the existing cluster; it is forked at the start and reverted at the
/// end, so it is left exactly as found (apart from its mutation counter, which only grows).
pub fn estimate<B: Budget>(
    snapshot: &mut ClusterSnapshot,
    pods: &[Arc<Pod>],
    template: &NodeTemplate,
    limits: EstimatorLimits<B>,
) -> Result<Estimate, EstimateError> {
    estimate_pending(snapshot, &mut PendingPods::new(pods), template, limits)
}

/// [`estimate`] for pods gathered once into [`PendingPods`], for callers that estimate the same
/// pods for several templates. Pod indices in the answer are indices into
/// [`PendingPods::pods`].
pub fn estimate_pending<B: Budget>(
    snapshot: &mut ClusterSnapshot,
    pending: &mut PendingPods<'_>,
    template: &NodeTemplate,
    limits: EstimatorLimits<B>,
) -> Result<Estimate, EstimateError> {
    let order = pending.largest_first(&template.node);
    snapshot.fork();
    let result = Packer::new(snapshot, pending, template, limits).run(&order);
    let reverted = snapshot.revert();
    let estimate = result?;
    reverted?;
    Ok(estimate)
}

/// Pending pods as the estimator reads them (see the module documentation): the pods, and side
/// by side each one's equivalence class, numbered from 0 in order of first appearance, and its
/// CPU and memory requests; largest-first orders are kept per template allocatable.
#[derive(Debug)]
pub struct PendingPods<'a> {
    pods: Cow<'a, [Arc<Pod>]>,
    class: Vec<u32>,
    classes: usize,
    requests: Vec<(i64, i64)>,
    /// Largest-first orders by the template's allocatable CPU and memory.
    orders: FxHashMap<(i64, i64), Arc<[usize]>>,
}

impl<'a> PendingPods<'a> {
    /// Gathers `pods` (borrowed, or owned when given a `Vec`), reading each pod once.
    pub fn new(pods: impl Into<Cow<'a, [Arc<Pod>]>>) -> PendingPods<'a> {
        let pods = pods.into();
        let mut ids: FxHashMap<u64, u32> = FxHashMap::default();
        let mut class = Vec::with_capacity(pods.len());
        let mut requests = Vec::with_capacity(pods.len());
        for pod in pods.iter() {
            let next = ids.len() as u32;
            class.push(*ids.entry(pod.equivalence).or_insert(next));
            requests.push((pod.requests.cpu, pod.requests.memory));
        }
        PendingPods {
            pods,
            class,
            classes: ids.len(),
            requests,
            orders: FxHashMap::default(),
        }
    }

    /// The pods, in the order given.
    pub fn pods(&self) -> &[Arc<Pod>] {
        &self.pods
    }

    /// The pods at positions `keep` (in that order), gathered from what was gathered here
    /// without reading the pods again. Positions out of range are left out.
    pub fn subset(&self, keep: &[usize]) -> PendingPods<'static> {
        let keep: Vec<usize> = keep
            .iter()
            .copied()
            .filter(|&i| i < self.pods.len())
            .collect();
        PendingPods {
            pods: keep.iter().map(|&i| self.pods[i].clone()).collect(),
            class: keep.iter().map(|&i| self.class[i]).collect(),
            classes: self.classes,
            requests: keep.iter().map(|&i| self.requests[i]).collect(),
            orders: FxHashMap::default(),
        }
    }

    /// Indices of the pods, largest first by `cpu / template cpu + memory / template memory`
    /// (the template's allocatable); ties keep the input order.
    fn largest_first(&mut self, template: &Node) -> Arc<[usize]> {
        let key = (template.allocatable.cpu, template.allocatable.memory);
        let requests = &self.requests;
        self.orders
            .entry(key)
            .or_insert_with(|| largest_first(requests, key).into())
            .clone()
    }
}

/// What an equivalence group remembers.
struct Group {
    /// Predicate state shared by the group's pods (refreshed before each use).
    prepared: Prepared,
    /// Opened nodes `[0, cursor)` are known to refuse the group.
    cursor: usize,
    /// Why a fresh template node refused the group, once it did.
    fresh_refusal: Option<Unfit>,
}

/// A node opened by the estimate.
struct Opened {
    id: NodeId,
    name: Sym,
    pods: Vec<usize>,
}

/// State of one estimate.
struct Packer<'a, B> {
    snapshot: &'a mut ClusterSnapshot,
    pods: &'a [Arc<Pod>],
    /// Each pod's equivalence class.
    class: &'a [u32],
    template: &'a NodeTemplate,
    limits: EstimatorLimits<B>,
    /// By equivalence class, once a pod of the class was tried.
    groups: Vec<Option<Group>>,
    opened: Vec<Opened>,
    /// Suffix of the next candidate node name.
    next_suffix: usize,
    /// `template-<template name>-`, the start of every candidate node name.
    name_prefix: String,
    unplaced: Vec<(usize, Unfit)>,
    skipped: Vec<usize>,
    limit_hit: Option<LimitHit>,
    checks: usize,
}

/// Outcome of trying a pod on a fresh template node.
enum Trial {
    /// The node was kept with the pod on it.
    Opened(Opened),
    /// The node was discarded.
    Refused(Unfit),
}

impl<'a, B: Budget> Packer<'a, B> {
    fn new(
        snapshot: &'a mut ClusterSnapshot,
        pending: &'a PendingPods<'_>,
        template: &'a NodeTemplate,
        limits: EstimatorLimits<B>,
    ) -> Self {
        Packer {
            snapshot,
            pods: &pending.pods,
            class: &pending.class,
            template,
            limits,
            groups: std::iter::repeat_with(|| None)
                .take(pending.classes)
                .collect(),
            opened: Vec::new(),
            next_suffix: 0,
            name_prefix: format!("template-{}-", template.node.name),
            unplaced: Vec::new(),
            skipped: Vec::new(),
            limit_hit: None,
            checks: 0,
        }
    }

    fn run(mut self, order: &[usize]) -> Result<Estimate, EstimateError> {
        for (pos, &i) in order.iter().enumerate() {
            if self.limits.budget.exhausted() {
                self.limit_hit = Some(LimitHit::TimeBudget);
                self.skipped.extend_from_slice(&order[pos..]);
                break;
            }
            self.place(i)?;
        }
        let new_nodes: Vec<NewNode> = self
            .opened
            .into_iter()
            .map(|o| NewNode {
                name: o.name,
                pods: o.pods,
            })
            .collect();
        Ok(Estimate {
            node_count: new_nodes.len(),
            new_nodes,
            unplaced: self.unplaced,
            skipped: self.skipped,
            limit_hit: self.limit_hit,
            checks: self.checks,
        })
    }

    /// Places pod `i` on an opened node, a new node, or reports it.
    fn place(&mut self, i: usize) -> Result<(), EstimateError> {
        // Only the pod's reference and class are read here: a pod whose class has nothing
        // left to try is counted without fetching the pod itself.
        let pod = &self.pods[i];
        let snapshot = &mut *self.snapshot;
        // Classes are numbered below `groups.len()` by construction.
        let group = self.groups[self.class[i] as usize].get_or_insert_with(|| Group {
            prepared: snapshot.prepare(pod),
            cursor: 0,
            fresh_refusal: None,
        });
        if group.cursor < self.opened.len() {
            snapshot.refresh(pod, &mut group.prepared);
        }
        while let Some(node) = self.opened.get_mut(group.cursor) {
            self.checks += 1;
            if snapshot.check(pod, &group.prepared, node.id).is_ok() {
                snapshot.add_pod(Arc::clone(pod), node.id)?;
                node.pods.push(i);
                return Ok(());
            }
            group.cursor += 1;
        }

        if let Some(reason) = &group.fresh_refusal {
            self.unplaced.push((i, reason.clone()));
            return Ok(());
        }
        if self
            .limits
            .max_nodes
            .is_some_and(|max| self.opened.len() >= max)
        {
            self.limit_hit = Some(LimitHit::MaxNodes);
            self.skipped.push(i);
            return Ok(());
        }

        let name = free_name(snapshot, &self.name_prefix, &mut self.next_suffix);
        snapshot.fork();
        self.checks += 1;
        let trial = try_fresh_node(snapshot, self.template, name, pod, i, &mut group.prepared);
        match trial {
            Ok(Trial::Opened(node)) => {
                snapshot.commit()?;
                self.next_suffix += 1;
                // Every earlier node refused this pod: the group's cursor is at the new node.
                group.cursor = self.opened.len();
                self.opened.push(node);
            }
            Ok(Trial::Refused(reason)) => {
                snapshot.revert()?;
                self.unplaced.push((i, reason.clone()));
                group.fresh_refusal = Some(reason);
            }
            Err(e) => {
                snapshot.revert()?;
                return Err(e.into());
            }
        }
        Ok(())
    }
}

/// Adds a node built from `template` named `name` (with its DaemonSet pods) and tries `pod` on
/// it; on success the pod is added too. Runs inside a fork the caller commits or reverts.
fn try_fresh_node(
    snapshot: &mut ClusterSnapshot,
    template: &NodeTemplate,
    name: Sym,
    pod: &Arc<Pod>,
    index: usize,
    prepared: &mut Prepared,
) -> Result<Trial, SnapshotError> {
    let id = snapshot.add_node(Arc::new(node_from_template(&template.node, name)))?;
    for ds in &template.daemonset_pods {
        snapshot.add_pod(Arc::new(daemonset_pod_for(ds, name)), id)?;
    }
    snapshot.refresh(pod, prepared);
    match snapshot.check(pod, prepared, id) {
        Ok(()) => {
            snapshot.add_pod(Arc::clone(pod), id)?;
            Ok(Trial::Opened(Opened {
                id,
                name,
                pods: vec![index],
            }))
        }
        Err(reason) => Ok(Trial::Refused(reason)),
    }
}

/// Indices of pods whose `(cpu, memory)` requests are `requests`, largest first by `cpu /
/// template cpu + memory / template memory` (`allocatable` is the template's); ties keep the
/// input order.
fn largest_first(requests: &[(i64, i64)], allocatable: (i64, i64)) -> Vec<usize> {
    let cpu = allocatable.0.max(1) as f64;
    let memory = allocatable.1.max(1) as f64;
    let scores: Vec<f64> = requests
        .iter()
        .map(|&(c, m)| c as f64 / cpu + m as f64 / memory)
        .collect();
    let mut order: Vec<usize> = (0..requests.len()).collect();
    // Stable sort: equal scores stay in input order.
    order.sort_by(|&a, &b| scores[b].total_cmp(&scores[a]));
    order
}

/// The first name `<prefix><i>` (from `*suffix` on) that no node of the snapshot has; `*suffix`
/// is advanced past taken names. The prefix is `template-<template name>-`, written once per
/// estimate: a large scale-up tries thousands of names.
fn free_name(snapshot: &ClusterSnapshot, prefix: &str, suffix: &mut usize) -> Sym {
    let mut text = String::with_capacity(prefix.len() + 8);
    loop {
        text.clear();
        text.push_str(prefix);
        let _ = write!(text, "{}", *suffix);
        // A name that was never interned cannot belong to any node; one that was is looked up
        // once, not again to intern it.
        match Sym::lookup(&text) {
            Some(sym) if snapshot.node_id(sym).is_some() => *suffix += 1,
            Some(sym) => return sym,
            None => return Sym::new(&text),
        }
    }
}

/// A copy of the template node named `name`, with a matching hostname label and no provider ID
/// (the instance does not exist yet).
fn node_from_template(template: &Node, name: Sym) -> Node {
    let mut node = template.clone();
    node.name = name;
    node.labels.insert(Sym::new(HOSTNAME_LABEL), name);
    node.provider_id = None;
    node
}

/// A copy of DaemonSet pod `ds` for the new node `node`: renamed `<name>-<node>` (unique per
/// node) and bound to it.
fn daemonset_pod_for(ds: &Pod, node: Sym) -> Pod {
    let mut pod = ds.clone();
    pod.name = PodName::from(format!("{}-{}", ds.name, node));
    pod.node_name = Some(node);
    pod.update_equivalence();
    pod
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use proptest::prelude::*;

    use super::*;
    use autoscaler_model::testing::{GI, MI, NodeBuilder, PodBuilder};

    fn template(cpu: i64, memory: i64) -> NodeTemplate {
        NodeTemplate {
            node: NodeBuilder::new("t", cpu, memory).build(),
            daemonset_pods: vec![],
        }
    }

    fn pods(n: usize, cpu: i64, memory: i64) -> Vec<Arc<Pod>> {
        (0..n)
            .map(|i| {
                PodBuilder::new(&format!("p{i}"), cpu, memory)
                    .owner("ReplicaSet", "rs")
                    .arc()
            })
            .collect()
    }

    /// Every input index exactly once across placed, unplaced and skipped; no empty new node.
    fn assert_partition(e: &Estimate, n: usize) {
        let mut seen = vec![0u32; n];
        for node in &e.new_nodes {
            assert!(!node.pods.is_empty(), "new node {} is empty", node.name);
            for &i in &node.pods {
                seen[i] += 1;
            }
        }
        for (i, _) in &e.unplaced {
            seen[*i] += 1;
        }
        for &i in &e.skipped {
            seen[i] += 1;
        }
        assert!(
            seen.iter().all(|&c| c == 1),
            "indices not a partition: {seen:?}"
        );
        assert_eq!(e.node_count, e.new_nodes.len());
    }

    #[test]
    fn ten_pods_of_350m_need_five_1000m_nodes() {
        let mut snap = ClusterSnapshot::new();
        let ps = pods(10, 350, 100 * MI);
        let e = estimate(
            &mut snap,
            &ps,
            &template(1000, 4 * GI),
            EstimatorLimits::unlimited(),
        )
        .expect("estimate");
        assert_partition(&e, ps.len());
        assert_eq!(e.node_count, 5);
        assert!(e.new_nodes.iter().all(|n| n.pods.len() == 2));
        assert!(e.unplaced.is_empty() && e.skipped.is_empty() && e.limit_hit.is_none());
        assert_eq!(e.placed_count(), 10);
    }

    #[test]
    fn equivalent_pods_check_each_opened_node_once() {
        let mut snap = ClusterSnapshot::new();
        // Two groups interleaved, 10 pods per 1000m node.
        let ps: Vec<_> = (0..200)
            .map(|i| {
                PodBuilder::new(&format!("p{i}"), 100, MI)
                    .owner("ReplicaSet", if i % 2 == 0 { "a" } else { "b" })
                    .arc()
            })
            .collect();
        let e = estimate(
            &mut snap,
            &ps,
            &template(1000, 4 * GI),
            EstimatorLimits::unlimited(),
        )
        .expect("estimate");
        assert_partition(&e, ps.len());
        assert_eq!(e.node_count, 20);
        // One check per pod plus at most one refusal per (group, node).
        assert!(
            e.checks <= ps.len() + 2 * e.node_count,
            "{} checks",
            e.checks
        );
        // Input order is kept for equal sizes, so the groups share nodes.
        assert_eq!(e.new_nodes[0].pods, (0..10).collect::<Vec<_>>());

        // A whole group that fits no template node costs one check.
        let big = pods(50, 5000, MI);
        let e = estimate(
            &mut snap,
            &big,
            &template(1000, 4 * GI),
            EstimatorLimits::unlimited(),
        )
        .expect("estimate");
        assert_eq!((e.node_count, e.unplaced.len(), e.checks), (0, 50, 1));
    }

    #[test]
    fn pods_sharing_a_host_port_take_one_node_each() {
        let mut snap = ClusterSnapshot::new();
        let ps: Vec<_> = (0..4)
            .map(|i| {
                PodBuilder::new(&format!("hp{i}"), 10, MI)
                    .owner("ReplicaSet", "hp")
                    .host_port(8080)
                    .arc()
            })
            .collect();
        let e = estimate(
            &mut snap,
            &ps,
            &template(1000, 4 * GI),
            EstimatorLimits::unlimited(),
        )
        .expect("estimate");
        assert_partition(&e, ps.len());
        assert_eq!(e.node_count, 4);
        assert!(e.new_nodes.iter().all(|n| n.pods.len() == 1));
    }

    #[test]
    fn max_nodes_stops_opening_nodes() {
        let mut snap = ClusterSnapshot::new();
        let ps = pods(20, 500, 100 * MI);
        let limits = EstimatorLimits {
            max_nodes: Some(5),
            budget: Unlimited,
        };
        let e = estimate(&mut snap, &ps, &template(1000, 4 * GI), limits).expect("estimate");
        assert_partition(&e, ps.len());
        assert_eq!(e.node_count, 5);
        assert_eq!(e.placed_count(), 10);
        assert_eq!(e.skipped.len(), 10);
        assert!(e.unplaced.is_empty());
        assert_eq!(e.limit_hit, Some(LimitHit::MaxNodes));
    }

    #[test]
    fn max_nodes_still_fills_open_nodes_with_smaller_pods() {
        let mut snap = ClusterSnapshot::new();
        let mut ps = pods(2, 800, MI);
        ps.push(PodBuilder::new("small", 100, MI).arc());
        let limits = EstimatorLimits {
            max_nodes: Some(1),
            budget: Unlimited,
        };
        let e = estimate(&mut snap, &ps, &template(1000, 4 * GI), limits).expect("estimate");
        assert_partition(&e, ps.len());
        assert_eq!(e.new_nodes.len(), 1);
        assert_eq!(e.new_nodes[0].pods, vec![0, 2]);
        assert_eq!(e.skipped, vec![1]);
        assert_eq!(e.limit_hit, Some(LimitHit::MaxNodes));
    }

    #[test]
    fn pod_bigger_than_the_template_is_unplaceable_and_opens_no_node() {
        let mut snap = ClusterSnapshot::new();
        let ps = vec![PodBuilder::new("huge", 2000, MI).arc()];
        let e = estimate(
            &mut snap,
            &ps,
            &template(1000, 4 * GI),
            EstimatorLimits::unlimited(),
        )
        .expect("estimate");
        assert_partition(&e, ps.len());
        assert_eq!(e.node_count, 0);
        assert_eq!(e.unplaced.len(), 1);
        let (i, reason) = &e.unplaced[0];
        assert_eq!(*i, 0);
        assert!(
            reason.to_string().contains("Insufficient cpu"),
            "reason: {reason}"
        );
        assert!(e.limit_hit.is_none());
        assert_eq!(snap.len(), 0);
    }

    #[test]
    fn unplaceable_group_does_not_disturb_the_others() {
        let mut snap = ClusterSnapshot::new();
        let mut ps = pods(3, 2000, MI);
        ps.extend((0..3).map(|i| {
            PodBuilder::new(&format!("s{i}"), 300, MI)
                .owner("ReplicaSet", "s")
                .arc()
        }));
        let e = estimate(
            &mut snap,
            &ps,
            &template(1000, 4 * GI),
            EstimatorLimits::unlimited(),
        )
        .expect("estimate");
        assert_partition(&e, ps.len());
        assert_eq!(e.node_count, 1);
        assert_eq!(e.new_nodes[0].pods, vec![3, 4, 5]);
        let unplaced: Vec<usize> = e.unplaced.iter().map(|(i, _)| *i).collect();
        assert_eq!(unplaced, vec![0, 1, 2]);
        assert!(
            e.unplaced
                .iter()
                .all(|(_, r)| r.to_string().contains("Insufficient cpu"))
        );
    }

    #[test]
    fn daemonset_pods_consume_template_capacity() {
        let ps = pods(4, 350, MI);
        let mut snap = ClusterSnapshot::new();
        let without = estimate(
            &mut snap,
            &ps,
            &template(1000, 4 * GI),
            EstimatorLimits::unlimited(),
        )
        .expect("estimate");
        assert_eq!(without.node_count, 2);

        let mut t = template(1000, 4 * GI);
        t.daemonset_pods = vec![
            PodBuilder::new("ds", 400, MI)
                .owner("DaemonSet", "ds")
                .arc(),
        ];
        let with = estimate(&mut snap, &ps, &t, EstimatorLimits::unlimited()).expect("estimate");
        assert_partition(&with, ps.len());
        assert_eq!(with.node_count, 4);
        assert!(with.new_nodes.iter().all(|n| n.pods.len() == 1));
    }

    #[test]
    fn largest_pods_go_first() {
        let mut snap = ClusterSnapshot::new();
        let ps: Vec<_> = [200, 200, 200, 600, 600]
            .iter()
            .enumerate()
            .map(|(i, cpu)| PodBuilder::new(&format!("p{i}"), *cpu, MI).arc())
            .collect();
        let e = estimate(
            &mut snap,
            &ps,
            &template(1000, 4 * GI),
            EstimatorLimits::unlimited(),
        )
        .expect("estimate");
        assert_partition(&e, ps.len());
        assert_eq!(e.node_count, 2);
        assert_eq!(e.new_nodes[0].pods, vec![3, 0, 1]);
        assert_eq!(e.new_nodes[1].pods, vec![4, 2]);
    }

    #[test]
    fn budget_stops_the_estimate_early() {
        let mut snap = ClusterSnapshot::new();
        let ps = pods(10, 100, MI);
        let calls = Cell::new(0u32);
        let budget = || {
            calls.set(calls.get() + 1);
            calls.get() > 3
        };
        let limits = EstimatorLimits {
            max_nodes: None,
            budget,
        };
        let e = estimate(&mut snap, &ps, &template(1000, 4 * GI), limits).expect("estimate");
        assert_partition(&e, ps.len());
        assert_eq!(e.placed_count(), 3);
        assert_eq!(e.skipped, (3..10).collect::<Vec<_>>());
        assert_eq!(e.limit_hit, Some(LimitHit::TimeBudget));
        assert_eq!(calls.get(), 4);
    }

    #[test]
    fn anti_affine_pods_spread_and_others_fill_their_nodes() {
        let mut snap = ClusterSnapshot::new();
        let mut ps: Vec<_> = (0..3)
            .map(|i| {
                PodBuilder::new(&format!("web{i}"), 300, MI)
                    .owner("ReplicaSet", "web")
                    .label("app", "web")
                    .anti_affinity("app", "web", HOSTNAME_LABEL)
                    .arc()
            })
            .collect();
        ps.extend(pods(6, 200, MI));
        let e = estimate(
            &mut snap,
            &ps,
            &template(1000, 4 * GI),
            EstimatorLimits::unlimited(),
        )
        .expect("estimate");
        assert_partition(&e, ps.len());
        assert_eq!(e.node_count, 3);
        for node in &e.new_nodes {
            assert_eq!(node.pods.iter().filter(|&&i| i < 3).count(), 1, "{node:?}");
        }
    }

    #[test]
    fn new_node_names_avoid_existing_nodes_and_label_the_hostname() {
        let mut snap = ClusterSnapshot::new();
        snap.add_node(NodeBuilder::new("template-t-0", 100, GI).arc())
            .expect("add");
        let ps = pods(2, 600, MI);
        let e = estimate(
            &mut snap,
            &ps,
            &template(1000, 4 * GI),
            EstimatorLimits::unlimited(),
        )
        .expect("estimate");
        let names: Vec<&str> = e.new_nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, vec!["template-t-1", "template-t-2"]);
        let node = node_from_template(&template(1000, GI).node, Sym::new("template-t-1"));
        assert_eq!(node.labels.get_str(HOSTNAME_LABEL), Some("template-t-1"));
    }

    /// Node names with the names and requests of their pods, in node order.
    fn contents(snap: &ClusterSnapshot) -> Vec<(Sym, Vec<String>, autoscaler_model::Resources)> {
        let mut out: Vec<_> = snap
            .node_ids()
            .filter_map(|id| snap.node(id).map(|info| (id, info)))
            .map(|(_, info)| {
                let mut pods: Vec<String> = info.pods.iter().map(|p| p.key()).collect();
                pods.sort();
                (info.node.name, pods, info.requested.clone())
            })
            .collect();
        out.sort_by_key(|(name, _, _)| name.as_str());
        out
    }

    fn existing_cluster() -> ClusterSnapshot {
        let mut snap = ClusterSnapshot::new();
        for n in 0..3 {
            let id = snap
                .add_node(NodeBuilder::new(&format!("n{n}"), 1000, 4 * GI).arc())
                .expect("add node");
            for p in 0..2 {
                let pod = PodBuilder::new(&format!("e{n}-{p}"), 300, GI)
                    .label("app", "web")
                    .node_name(&format!("n{n}"))
                    .arc();
                snap.add_pod(pod, id).expect("add pod");
            }
        }
        snap
    }

    #[test]
    fn snapshot_is_left_as_found() {
        let mut snap = existing_cluster();
        let before = contents(&snap);
        let (len, depth, version) = (snap.len(), snap.depth(), snap.version());
        let mut t = template(1000, 4 * GI);
        t.daemonset_pods = vec![
            PodBuilder::new("ds", 100, MI)
                .owner("DaemonSet", "ds")
                .arc(),
        ];
        let mut ps = pods(7, 350, MI);
        ps.push(PodBuilder::new("huge", 5000, MI).arc());
        let e = estimate(&mut snap, &ps, &t, EstimatorLimits::unlimited()).expect("estimate");
        assert!(e.node_count > 0 && !e.unplaced.is_empty());
        assert_eq!(snap.len(), len);
        assert_eq!(snap.depth(), depth);
        assert!(snap.version() >= version);
        assert_eq!(contents(&snap), before);
    }

    #[test]
    fn inconsistent_input_is_an_error_and_leaves_the_snapshot_as_found() {
        let mut snap = existing_cluster();
        let before = contents(&snap);
        // The same pod twice: the snapshot refuses the second copy.
        let p = PodBuilder::new("dup", 100, MI).arc();
        let ps = vec![Arc::clone(&p), p];
        let err = estimate(
            &mut snap,
            &ps,
            &template(1000, 4 * GI),
            EstimatorLimits::unlimited(),
        );
        assert!(matches!(
            err,
            Err(EstimateError::Snapshot(SnapshotError::DuplicatePod(_)))
        ));
        assert_eq!(snap.depth(), 0);
        assert_eq!(contents(&snap), before);
    }

    /// A generated pod spec: (cpu, memory MiB, host port, app, anti-affinity, selector, copies).
    type Spec = (i64, i64, Option<u16>, u8, bool, Option<bool>, usize);

    fn spec() -> impl Strategy<Value = Spec> {
        (
            20i64..1300,
            16i64..3000,
            prop::option::weighted(0.2, prop::sample::select(vec![80u16, 443])),
            0u8..3,
            prop::bool::weighted(0.3),
            prop::option::weighted(0.2, any::<bool>()),
            1usize..4,
        )
    }

    fn build_pods(specs: &[Spec]) -> Vec<Arc<Pod>> {
        let mut out = Vec::new();
        for (s, &(cpu, mem, port, app, anti, selector, copies)) in specs.iter().enumerate() {
            for c in 0..copies {
                let app = format!("app{app}");
                let mut b = PodBuilder::new(&format!("g{s}-{c}"), cpu, mem * MI)
                    .owner("ReplicaSet", &format!("rs{s}"))
                    .label("app", &app);
                if let Some(port) = port {
                    b = b.host_port(port);
                }
                if anti {
                    b = b.anti_affinity("app", &app, HOSTNAME_LABEL);
                }
                if let Some(matching) = selector {
                    b = b.node_selector("pool", if matching { "a" } else { "b" });
                }
                out.push(b.arc());
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Pods gathered once and estimated for several templates in turn (two of the same
        /// allocatable, sharing an order; node caps cutting some short) give each template the
        /// estimate a fresh call gives.
        #[test]
        fn pods_gathered_once_estimate_as_fresh_ones(
            specs in prop::collection::vec(spec(), 1..12),
            caps in prop::collection::vec(prop::option::of(0usize..4), 4),
        ) {
            let ps = build_pods(&specs);
            let templates = [
                NodeBuilder::new("t0", 1000, 2 * GI).label("pool", "a").pods(8).build(),
                NodeBuilder::new("t1", 1000, 2 * GI).label("pool", "b").pods(8).build(),
                NodeBuilder::new("t2", 2000, 2 * GI).label("pool", "a").pods(8).build(),
                NodeBuilder::new("t3", 1000, 2 * GI).label("pool", "a").pods(3).build(),
            ];
            let mut snap = existing_cluster();
            let mut pending = PendingPods::new(&ps[..]);
            for (node, max_nodes) in templates.into_iter().zip(caps) {
                let t = NodeTemplate { node, daemonset_pods: Vec::new() };
                let limits = || EstimatorLimits { max_nodes, budget: Unlimited };
                let shared = estimate_pending(&mut snap, &mut pending, &t, limits());
                let fresh = estimate(&mut snap, &ps, &t, limits());
                prop_assert_eq!(shared, fresh);
            }
        }

        /// A subset of gathered pods estimates as the same pods gathered afresh.
        #[test]
        fn a_subset_estimates_as_its_pods_gathered_afresh(
            specs in prop::collection::vec(spec(), 1..12),
            keep in prop::collection::vec(any::<prop::sample::Index>(), 0..20),
            max_nodes in prop::option::of(0usize..4),
        ) {
            let ps = build_pods(&specs);
            let mut keep: Vec<usize> = keep.iter().map(|k| k.index(ps.len())).collect();
            keep.sort_unstable();
            keep.dedup();
            let picked: Vec<Arc<Pod>> = keep.iter().map(|&i| ps[i].clone()).collect();
            let t = NodeTemplate {
                node: NodeBuilder::new("t", 1000, 2 * GI).label("pool", "a").pods(8).build(),
                daemonset_pods: Vec::new(),
            };
            let limits = || EstimatorLimits { max_nodes, budget: Unlimited };
            let mut snap = existing_cluster();
            let mut subset = PendingPods::new(&ps[..]).subset(&keep);
            prop_assert_eq!(subset.pods(), &picked[..]);
            let from_subset = estimate_pending(&mut snap, &mut subset, &t, limits());
            let fresh = estimate(&mut snap, &picked, &t, limits());
            prop_assert_eq!(from_subset, fresh);
        }

        /// Every placement satisfies every predicate on the resulting cluster, no new node is
        /// empty, and unplaced pods indeed fit no fresh template node.
        #[test]
        fn placements_satisfy_all_predicates(specs in prop::collection::vec(spec(), 1..12)) {
            let ps = build_pods(&specs);
            let t = NodeTemplate {
                node: NodeBuilder::new("t", 1000, 2 * GI).label("pool", "a").pods(8).build(),
                daemonset_pods: vec![
                    PodBuilder::new("ds", 100, 64 * MI).owner("DaemonSet", "ds").arc(),
                ],
            };
            let mut snap = existing_cluster();
            let e = estimate(&mut snap, &ps, &t, EstimatorLimits::unlimited()).expect("estimate");
            assert_partition(&e, ps.len());
            prop_assert!(e.skipped.is_empty() && e.limit_hit.is_none());

            // Rebuild the outcome in a fresh snapshot.
            let mut after = existing_cluster();
            let mut placed = Vec::new();
            for node in &e.new_nodes {
                let id = after.add_node(Arc::new(node_from_template(&t.node, node.name)))
                    .expect("add node");
                for ds in &t.daemonset_pods {
                    after.add_pod(Arc::new(daemonset_pod_for(ds, node.name)), id).expect("ds");
                }
                for &i in &node.pods {
                    after.add_pod(Arc::clone(&ps[i]), id).expect("add pod");
                    placed.push((i, id));
                }
            }
            for &(i, id) in &placed {
                let pod = &ps[i];
                after.fork();
                after.remove_pod(id, pod.namespace, &pod.name).expect("remove");
                let verdict = after.check_pod(pod, id);
                after.revert().expect("revert");
                prop_assert!(verdict.is_ok(), "pod {} on {:?}: {:?}", pod.key(), id, verdict);
            }
            // Unplaced pods do not fit a fresh template node either.
            let fresh = Sym::new("template-t-fresh");
            let id = after.add_node(Arc::new(node_from_template(&t.node, fresh))).expect("add");
            for ds in &t.daemonset_pods {
                after.add_pod(Arc::new(daemonset_pod_for(ds, fresh)), id).expect("ds");
            }
            for (i, reason) in &e.unplaced {
                let verdict = after.check_pod(&ps[*i], id);
                prop_assert!(verdict.is_err(), "pod {} fits a fresh node ({reason})", ps[*i].key());
            }
        }
    }
}
