//! One decision of the autoscaler over a consistent view of the cluster: cluster state (broken
//! instances, timed-out scale-ups, health, backoff), then scale-up, then scale-down.
//!
//! Decides, from nodes, pods, DaemonSets and the provider's node groups at time `now`, which
//! broken instances go, which groups grow and why every other pending pod causes nothing, and
//! which nodes are removed. It is a pure function of its
//! inputs: no I/O, no clock (the caller passes `now` and a [`Budget`]), no randomness but the
//! seeded generator it is handed.

use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;

use crate::actions::{Action, scale_down_actions};
use crate::cluster_state::{ClusterState, ClusterStateOptions, ClusterStatus, Event};
use crate::outcome::Outcome;
use crate::scale_down::consolidation::{
    ConsolidationOptions, ConsolidationPlan, ConsolidationState,
};
use crate::scale_down::{
    InFlight, ScaleDownInput, ScaleDownOptions, ScaleDownPlan, ScaleDownState, Unremovable,
    plan_scale_down,
};
use crate::scale_up::estimator::{Budget, Unlimited};
use crate::scale_up::expander::ExpanderChain;
use crate::scale_up::pending::{self, PendingOptions, SetAside};
use crate::scale_up::template::daemon_pods_for;
use crate::scale_up::template::{
    GroupTemplate, NoTemplate, TemplateOptions, TemplateSource, build_template,
};
use crate::scale_up::{GroupInput, ScaleUpInput, ScaleUpOptions, ScaleUpResult, scale_up};
use crate::scheduling::snapshot::{
    ClusterSnapshot, NodeId, NodeInfo, SizeHints, SnapshotError, prefetching,
};
use autoscaler_model::ControllerLookup;
use autoscaler_model::DaemonSet;
use autoscaler_model::HOSTNAME_LABEL;
use autoscaler_model::NamespaceLabels;
use autoscaler_model::Node;
use autoscaler_model::Pod;
use autoscaler_model::SCALED_UP_GROUP;
use autoscaler_model::Storage;
use autoscaler_model::Sym;
use autoscaler_model::TaintConfig;
use autoscaler_model::{CloudProvider, NodeGroup};
use autoscaler_model::{ClusterTotals, ResourceLimits};
use autoscaler_model::{DisruptionBudgets, PodDisruptionBudget};

mod capacity;
mod consolidate;
#[cfg(test)]
mod dra_gpus;
mod loop_input;

pub use loop_input::LoopInput;

/// The objects one decision reads.
pub struct ClusterView<'a> {
    /// Every node of the cluster (control plane and unmanaged nodes included).
    pub nodes: &'a [Arc<Node>],
    /// Every pod.
    pub pods: &'a [Arc<Pod>],
    /// DaemonSets, for node templates.
    pub daemonsets: &'a [DaemonSet],
    /// Namespaces with labels, for affinity namespace selectors.
    pub namespaces: &'a [NamespaceLabels],
    /// The provider's node groups.
    pub provider: &'a dyn CloudProvider,
    /// PodDisruptionBudgets.
    pub pdbs: &'a [PodDisruptionBudget],
    /// Claims, volumes, storage classes, CSINodes and capacities, for the volume filters
    /// ([`Storage::none`] for a view without storage objects).
    pub storage: &'a Arc<Storage>,
}

impl<'a> ClusterView<'a> {
    /// The view of everything `objects` holds but its pods, with `pods` and `provider` (the
    /// informer keeps its pods apart from the other objects).
    pub fn of_objects(
        objects: &'a autoscaler_model::ClusterObjects,
        pods: &'a [Arc<Pod>],
        provider: &'a dyn CloudProvider,
    ) -> ClusterView<'a> {
        ClusterView {
            nodes: &objects.nodes,
            pods,
            daemonsets: &objects.daemonsets,
            namespaces: &objects.namespaces,
            provider,
            pdbs: &objects.pdbs,
            storage: &objects.storage,
        }
    }

    /// A view of `nodes` and `pods` under `provider`, with no DaemonSets, namespace labels,
    /// budgets or storage objects.
    pub fn of(
        nodes: &'a [Arc<Node>],
        pods: &'a [Arc<Pod>],
        provider: &'a dyn CloudProvider,
    ) -> ClusterView<'a> {
        ClusterView {
            nodes,
            pods,
            daemonsets: &[],
            namespaces: &[],
            provider,
            pdbs: &[],
            storage: Storage::none(),
        }
    }
}

/// Options of the scale-up decision.
#[derive(Clone, Debug, Default)]
pub struct ScaleUpConfig {
    /// Pending-pod selection.
    pub pending: PendingOptions,
    /// Scale-up and balancing.
    pub scale_up: ScaleUpOptions,
    /// Cluster-wide limits.
    pub limits: ResourceLimits,
    /// Template building.
    pub template: TemplateOptions,
    /// The expander chain (with its priority config, if any).
    pub expander: ExpanderChain,
}

/// What one scale-up decision found and decided.
#[derive(Clone, Debug, Default)]
pub struct ScaleUpDecision {
    /// The decision proper.
    pub result: ScaleUpResult,
    /// Unschedulable pods not acted on, with why.
    pub set_aside: Vec<(Arc<Pod>, SetAside)>,
    /// Unschedulable pods that fit on existing or upcoming nodes (no new node needed).
    pub fit_existing: Vec<Arc<Pod>>,
    /// Upcoming nodes counted as capacity, per group index (target minus registered nodes).
    pub upcoming: Vec<usize>,
    /// Objects skipped because they were inconsistent (duplicate nodes, pods on unknown nodes).
    pub warnings: Vec<String>,
}

/// Builds the scheduling snapshot of `view`: every node and every non-terminal pod bound to a
/// known node. Inconsistent objects are skipped with a warning, never fatal.
pub fn build_snapshot(view: &ClusterView<'_>, warnings: &mut Vec<String>) -> ClusterSnapshot {
    build_snapshot_with(view, warnings, |_, _, _| {}, |_| {})
}

/// [`build_snapshot`] in one pass over the view, handing each pod placed in the snapshot to
/// `placed` (its position in the view, the pod, its node) and every other pod to `outside`.
///
/// The objects are already in the model (requests summed, labels interned at conversion), so
/// building reads each pod once; the snapshot is loaded without journaling (nothing prepared
/// can predate it) and sized for the view's nodes up front.
fn build_snapshot_with(
    view: &ClusterView<'_>,
    warnings: &mut Vec<String>,
    mut placed: impl FnMut(usize, &Arc<Pod>, NodeId),
    mut outside: impl FnMut(&Arc<Pod>),
) -> ClusterSnapshot {
    let mut snapshot = ClusterSnapshot::new();
    snapshot.set_namespace_labels(view.namespaces.to_vec());
    snapshot.set_storage(view.storage.clone());
    snapshot.reserve_nodes(view.nodes.len());
    // Every pod of the view, pending ones included: placing those later (on a fork) does not
    // grow the indices either.
    let hints = SizeHints::count(view.pods.iter().map(|p| &**p));
    snapshot.with_size_hints(hints, |snapshot| {
        snapshot.unjournaled(|snapshot| {
            for node in view.nodes {
                if let Err(e) = snapshot.add_node(node.clone()) {
                    warnings.push(format!("Node {} skipped: {e}", node.name));
                }
            }
            let pods = prefetching(view.pods).filter_map(|(i, pod)| match pod.node_name {
                Some(node) if !pod.is_terminal() => Some((i, pod, node)),
                _ => {
                    outside(pod);
                    None
                }
            });
            let refused = snapshot.add_bound_pods(pods, |i, id| placed(i, &view.pods[i], id));
            for (i, e) in refused {
                let pod = &view.pods[i];
                warnings.push(match (e, pod.node_name) {
                    (SnapshotError::UnknownNode(_), Some(node)) => {
                        format!("Pod {} skipped: its node {node} is not known", pod.key())
                    }
                    (e, _) => format!("Pod {} skipped: {e}", pod.key()),
                });
            }
        })
    });
    snapshot
}

/// Decides the scale-up for `view` at `now_ms` (milliseconds since the Unix epoch). `blocked`
/// says why a group must not grow now (backoff, unhealthy), if it must not. The loop does this
/// itself; alone, it is for tests and benches.
#[cfg(any(test, feature = "bench"))]
pub fn decide_scale_up(
    view: &ClusterView<'_>,
    config: &ScaleUpConfig,
    now_ms: i64,
    blocked: &dyn Fn(usize, &NodeGroup) -> Option<String>,
    rng: &mut ChaCha8Rng,
    budget: &mut dyn Budget,
) -> ScaleUpDecision {
    let mut warnings = Vec::new();
    let mut snapshot = build_snapshot(view, &mut warnings);
    let mut decision = decide_scale_up_with_upcoming(
        &mut snapshot,
        view,
        config,
        now_ms,
        blocked,
        None,
        rng,
        budget,
    );
    warnings.append(&mut decision.warnings);
    decision.warnings = warnings;
    decision
}

/// `decide_scale_up` on a snapshot the caller built from `view` with [`build_snapshot`], which
/// is left as found (every change is made on a fork and reverted), with the upcoming nodes per
/// group index given by the caller (the
/// cluster state's count, which leaves out failed, long-unregistered and reverted instances);
/// `None` derives them from the view (target minus started nodes).
#[allow(clippy::too_many_arguments)]
pub fn decide_scale_up_with_upcoming(
    snapshot: &mut ClusterSnapshot,
    view: &ClusterView<'_>,
    config: &ScaleUpConfig,
    now_ms: i64,
    blocked: &dyn Fn(usize, &NodeGroup) -> Option<String>,
    upcoming: Option<&[usize]>,
    rng: &mut ChaCha8Rng,
    budget: &mut dyn Budget,
) -> ScaleUpDecision {
    // Upcoming nodes and pending placements are simulated on a fork that is never kept.
    snapshot.forked(|snapshot| {
        let mut timer = Timer::off();
        let (up, _) = scale_up_on_fork(
            snapshot, view, config, now_ms, blocked, upcoming, rng, budget, &mut timer,
        );
        up
    })
}

/// The scale-up decision on a fork the caller opened and reverts: upcoming nodes are added to
/// it and the pending pods that fit existing or upcoming nodes are left placed there (the
/// scale-up proper runs on a fork of its own). The flag says whether no upcoming node was
/// added: then the fork holds exactly what scale-down must see (the view's nodes, nominated
/// pods on their nodes, the pods that fit placed where placing them again would put them).
#[allow(clippy::too_many_arguments)]
fn scale_up_on_fork(
    snapshot: &mut ClusterSnapshot,
    view: &ClusterView<'_>,
    config: &ScaleUpConfig,
    now_ms: i64,
    blocked: &dyn Fn(usize, &NodeGroup) -> Option<String>,
    upcoming: Option<&[usize]>,
    rng: &mut ChaCha8Rng,
    budget: &mut dyn Budget,
    timer: &mut Timer<'_>,
) -> (ScaleUpDecision, bool) {
    {
        let mut decision = ScaleUpDecision::default();
        let groups = view.provider.node_groups();
        let members = GroupMembers::of(view, groups.len(), now_ms, &config.template.taints);
        let templates = group_templates(snapshot, view, &members, &config.template);
        let mut totals = ClusterTotals::from_nodes_and_devices(
            view.nodes.iter().map(|n| &**n),
            view.storage.dra(),
        );
        count_promised_gpus(view, config, now_ms, &templates, &mut totals);
        // Nodes being provisioned count as capacity, so one burst never causes two scale-ups.
        decision.upcoming = groups
            .iter()
            .enumerate()
            .map(|(g, group)| match upcoming {
                Some(u) => u.get(g).copied().unwrap_or(0),
                None => group.target_size().saturating_sub(members.started[g]),
            })
            .collect();
        let nodes = snapshot.len();
        add_upcoming_nodes(
            snapshot,
            view,
            &members,
            &templates,
            &mut totals,
            &mut decision,
        );
        let view_nodes_only = snapshot.len() == nodes;

        let filter_start = timer.start();
        let exists = |n: Sym| snapshot.node_id(n).is_some();
        let selected = pending::select_with(view.pods, now_ms, &config.pending, &exists);
        decision.set_aside = selected.set_aside;
        // Pods waiting for a preemption take their nominated node's room first.
        pending::place_nominated(snapshot, &decision.set_aside);
        let placement = pending::place_on_existing(snapshot, selected.eligible);
        decision.fit_existing = placement.placed.into_iter().map(|(p, _)| p).collect();
        timer.stop(Phase::FilterOutSchedulable, filter_start);

        let inputs: Vec<GroupInput<'_>> = groups
            .iter()
            .zip(templates)
            .enumerate()
            .map(|(g, (group, template))| GroupInput {
                group,
                template,
                blocked: blocked(g, group),
            })
            .collect();
        let input = ScaleUpInput {
            groups: inputs,
            pods: placement.remaining,
            limits: &config.limits,
            totals,
            expander: &config.expander,
        };
        let scale_up_start = timer.start();
        decision.result =
            snapshot.forked(|snapshot| scale_up(snapshot, input, &config.scale_up, rng, budget));
        timer.stop(Phase::ScaleUp, scale_up_start);
        (decision, view_nodes_only)
    }
}

/// A phase of one loop, named as upstream labels `function_duration_seconds{function}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// The cluster state's update (readiness, requests, health, backoff).
    UpdateClusterState,
    /// Setting aside pending pods and placing those that fit existing or upcoming nodes.
    FilterOutSchedulable,
    /// The scale-up proper: estimation and expanders for the pods left.
    ScaleUp,
    /// Finding the unneeded nodes and choosing removals (part of `ScaleDown`).
    FindUnneeded,
    /// The whole scale-down decision.
    ScaleDown,
}

impl Phase {
    /// Upstream's label value.
    pub fn label(self) -> &'static str {
        match self {
            Phase::UpdateClusterState => "updateClusterState",
            Phase::FilterOutSchedulable => "filterOutSchedulable",
            Phase::ScaleUp => "scaleUp",
            Phase::FindUnneeded => "findUnneeded",
            Phase::ScaleDown => "scaleDown",
        }
    }
}

/// A monotonic clock the shell hands to [`Autoscaler::run_once`] ([`LoopInput::timed`]) to
/// time the phases of a loop: the core reads it only to measure itself, never to decide.
pub trait PhaseClock {
    /// Time since an origin of the caller's choosing; never decreases.
    fn elapsed(&self) -> std::time::Duration;
}

/// Records phase durations when it has a clock; records nothing without one.
struct Timer<'c> {
    clock: Option<&'c dyn PhaseClock>,
    phases: Vec<(Phase, std::time::Duration)>,
}

impl<'c> Timer<'c> {
    fn off() -> Timer<'c> {
        Timer {
            clock: None,
            phases: Vec::new(),
        }
    }

    fn start(&self) -> Option<std::time::Duration> {
        self.clock.map(|c| c.elapsed())
    }

    fn stop(&mut self, phase: Phase, start: Option<std::time::Duration>) {
        if let (Some(clock), Some(start)) = (self.clock, start) {
            self.phases
                .push((phase, clock.elapsed().saturating_sub(start)));
        }
    }
}

/// The registered nodes of each group (by group index), in view order (the first healthy one
/// becomes the template), and how many of them have started (a node not started yet is still
/// on its way).
struct GroupMembers {
    names: Vec<Vec<Sym>>,
    started: Vec<usize>,
}

impl GroupMembers {
    fn of(
        view: &ClusterView<'_>,
        groups: usize,
        now_ms: i64,
        taints: &TaintConfig,
    ) -> GroupMembers {
        let mut members = GroupMembers {
            names: vec![Vec::new(); groups],
            started: vec![0; groups],
        };
        for node in view.nodes {
            let Some(g) = view.provider.node_group_of(node).filter(|&g| g < groups) else {
                continue;
            };
            members.names[g].push(node.name);
            if !is_not_started(node, now_ms, taints) {
                members.started[g] += 1;
            }
        }
        members
    }
}

/// Each group's template, from its registered nodes in the snapshot or from the provider.
fn group_templates(
    snapshot: &ClusterSnapshot,
    view: &ClusterView<'_>,
    members: &GroupMembers,
    options: &TemplateOptions,
) -> Vec<Result<GroupTemplate, NoTemplate>> {
    (view.provider.node_groups().iter().enumerate())
        .map(|(g, group)| {
            let infos: Vec<&NodeInfo> = members.names[g]
                .iter()
                .filter_map(|n| snapshot.node_by_name(*n))
                .collect();
            group_template(snapshot, group, &infos, view.daemonsets, options)
        })
        .collect()
}

/// One group's template as the loop builds it: from `members` (its nodes in `snapshot`) or
/// from the provider, with the CSI drivers and the ResourceSlices of the node it was built from.
pub fn group_template(
    snapshot: &ClusterSnapshot,
    group: &NodeGroup,
    members: &[&NodeInfo],
    daemonsets: &[DaemonSet],
    options: &TemplateOptions,
) -> Result<GroupTemplate, NoTemplate> {
    let mut t = build_template(group, members, daemonsets, options)?;
    with_csi_of_source(snapshot, &mut t);
    with_devices_of_source(snapshot, &mut t);
    Ok(t)
}

/// Gives a template built from a node the CSI drivers and attach limits of that node's CSINode
/// (a provider template keeps what the provider gave it).
fn with_csi_of_source(snapshot: &ClusterSnapshot, t: &mut GroupTemplate) {
    if let TemplateSource::Node(name) = t.source
        && t.template.node.csi.is_none()
        && let Some(csi) = snapshot.storage().csi_node(name)
    {
        t.template.node.csi = Some(csi.clone());
    }
}

/// Gives a template built from a node copies of that node's own ResourceSlices: every node
/// made from the template then has devices of its own, as a new node of the group will once its
/// DRA driver publishes them (upstream copies the slices too, renamed per new node).
fn with_devices_of_source(snapshot: &ClusterSnapshot, t: &mut GroupTemplate) {
    if let TemplateSource::Node(name) = t.source
        && t.template.node.devices.is_none()
    {
        let slices = snapshot.storage().dra().node_slices(name);
        if !slices.is_empty() {
            t.template.node.devices = Some(Arc::new(autoscaler_model::NodeDevices {
                slices: slices.to_vec(),
            }));
        }
    }
}

/// Adds `decision.upcoming` nodes of each group's template to the snapshot, and the
/// unregistered ones among them to `totals` (registered nodes are already there, started or not).
fn add_upcoming_nodes(
    snapshot: &mut ClusterSnapshot,
    view: &ClusterView<'_>,
    members: &GroupMembers,
    templates: &[Result<GroupTemplate, NoTemplate>],
    totals: &mut ClusterTotals,
    decision: &mut ScaleUpDecision,
) {
    let groups = view.provider.node_groups();
    for (g, &n) in decision.upcoming.iter().enumerate() {
        let Ok(t) = &templates[g] else { continue };
        let unregistered = groups[g]
            .target_size()
            .saturating_sub(members.names[g].len());
        totals.add_node(&t.template.node, unregistered.min(n));
        for i in 0..n {
            add_upcoming_node(
                snapshot,
                &t.template.node,
                &format!("upcoming-{}-{i}", groups[g].id().as_str().replace('/', "-")),
                view.daemonsets,
                &mut decision.warnings,
            );
        }
    }
}

/// Options of the whole loop.
#[derive(Clone, Debug, Default)]
pub struct AutoscalerOptions {
    /// Scale-up (pending pods, expanders, balancing, limits, templates).
    pub scale_up: ScaleUpConfig,
    /// Scale-down.
    pub scale_down: ScaleDownOptions,
    /// Seed of the expanders' tie-break generator (deterministic decisions).
    pub seed: u64,
    /// Cluster state: provision and startup times, health thresholds, backoff.
    pub cluster_state: ClusterStateOptions,
    /// Consolidation (ours; off by default).
    pub consolidation: ConsolidationOptions,
    /// ProvisioningRequests and CapacityBuffers (off by default), decided within the loop
    /// ([`LoopInput::capacity`]).
    pub capacity: crate::provisioning::CapacityOptions,
}

/// What one loop decided.
#[derive(Clone, Debug, Default)]
pub struct LoopOutcome {
    /// The scale-up decision.
    pub scale_up: ScaleUpDecision,
    /// The scale-down plan.
    pub scale_down: ScaleDownPlan,
    /// What the shell should do, in order: removal of broken instances and reverts of
    /// unfulfilled scale-ups first, then scale-up, then scale-down.
    pub actions: Vec<Action>,
    /// Events for the shell to publish (`ScaledUpGroup`, `ScaleUpTimedOut`, `ScaleUpFailed`,
    /// `DeleteUnregistered`, `ClusterUnhealthy`, `FailedToScaleUpGroup`, ...).
    pub events: Vec<Event>,
    /// Cluster health and per-group health, backoff and upcoming nodes, for the status.
    pub status: ClusterStatus,
    /// Actions the final safety check refused (each one a bug of an earlier phase): they are
    /// not in `actions`.
    pub refused: Vec<crate::safety::Refused>,
    /// How long each phase took, in order, when the loop was given a clock
    /// ([`LoopInput::timed`]); empty otherwise.
    pub phases: Vec<(Phase, std::time::Duration)>,
    /// What consolidation decided (nothing while it is off); its deletions are also in
    /// `scale_down.deletions`.
    pub consolidation: ConsolidationPlan,
    /// The capacity-on-request decision of a loop given the objects ([`LoopInput::capacity`])
    /// on a healthy cluster: its status writes are the
    /// shell's to carry out; a best-effort-atomic scale-up is already in `scale_up` and
    /// `actions`.
    pub capacity: Option<crate::provisioning::CapacityDecision>,
}

/// The autoscaler: options plus the state kept between loops.
#[derive(Clone, Debug)]
pub struct Autoscaler {
    // Private: shells read through the accessors and report what they did through `observe`,
    // so the state between loops changes only by a loop or an outcome.
    options: AutoscalerOptions,
    /// Scale-down state (unneeded timers, remembered destinations, delays).
    scale_down: ScaleDownState,
    /// Cluster state (scale-up requests, instance ages, backoff, health).
    cluster_state: ClusterState,
    rng: ChaCha8Rng,
    /// The scheduling snapshot of the last loop's view, updated instead of rebuilt.
    cache: SnapshotCache,
    /// Whether scale-down plans on the scale-up filter's placements when they are what it
    /// needs (always, but in the test comparing them with placing the pods again).
    reuse_placements: bool,
    /// Consolidation's timers and pending replacement.
    consolidation: ConsolidationState,
    /// ProvisioningRequests' retry backoff and turn, kept between loops.
    requests: crate::provisioning::request::Requests,
}

/// Whether `pod` belongs in the scheduling snapshot: bound to a node and not terminal.
fn in_snapshot(pod: &Pod) -> bool {
    pod.node_name.is_some() && !pod.is_terminal()
}

/// The address of an object behind an `Arc`: the cache holds a clone of every `Arc` it keys,
/// so an address is never reused for another object while it is a key.
fn addr<T>(a: &Arc<T>) -> usize {
    Arc::as_ptr(a) as usize
}

/// The scheduling snapshot kept between loops. Each loop updates it from the view: objects
/// whose `Arc` is the one seen last loop are kept, others are removed and added again, and the
/// node and pod order is set to the view's, so that it equals what [`build_snapshot`] would
/// build (same nodes in the same order, same pods per node in the same order, same namespace
/// labels). A view that [`build_snapshot`] would warn about is always built afresh.
///
/// Pods are matched by walking the last view's list and the new one side by side: lists that
/// keep their order between loops (an informer's, sorted by name; a list that only appends)
/// cost one pointer comparison per kept pod, without touching the pod or hashing anything.
#[derive(Debug, Default)]
struct SnapshotCache {
    snapshot: ClusterSnapshot,
    /// Whether `snapshot` and the maps are those of the last view (false: rebuild).
    valid: bool,
    /// Nodes in the snapshot by address: the node, its id and the generation last seen.
    nodes: FxHashMap<usize, (Arc<Node>, NodeId, u64)>,
    /// The pods in the snapshot, in the last view's order, by address with their node. The
    /// snapshot holds every one of them (their addresses cannot be reused while they are
    /// listed), and every pod of a new view existed before it was read, so a pod of the new
    /// view at a listed address is that very pod.
    pods: Vec<(usize, NodeId)>,
    /// The namespace labels set in the snapshot.
    namespaces: Vec<NamespaceLabels>,
    /// The view's pods that are not in the snapshot (unbound or terminal), in view order: the
    /// only ones that can be pending.
    outside: Vec<Arc<Pod>>,
    /// Bumped by every update.
    generation: u64,
}

impl Clone for SnapshotCache {
    /// A clone starts without a snapshot (its first loop builds one).
    fn clone(&self) -> Self {
        SnapshotCache::default()
    }
}

/// What walking the last view's pods beside the new view's found.
#[derive(Default)]
struct PodChanges {
    /// Listed pods not in the new view (or not matched in order), by address and node.
    gone: Vec<(usize, NodeId)>,
    /// The new view's pods to add, by position in the view, with their node.
    added: Vec<(usize, NodeId)>,
    /// Per node id, the position in the view of its last kept pod.
    last_kept: Vec<Option<usize>>,
}

impl SnapshotCache {
    /// Reverts every fork above `depth`: every change a loop made was on forks, so the snapshot
    /// is the view's again (or, should a fork be missing, is rebuilt next loop).
    fn close_forks(&mut self, depth: usize) {
        while self.snapshot.depth() > depth {
            let _ = self.snapshot.revert();
        }
        debug_assert_eq!(self.snapshot.depth(), 0);
        if self.snapshot.depth() != 0 {
            self.valid = false;
        }
    }

    /// Replaces the scale-up's fork (above `depth`) with one holding what scale-down must see:
    /// the pending pods that fit existing nodes placed there and pods waiting for a preemption
    /// on their nominated node, but none of the upcoming nodes the scale-up counted.
    fn place_again(&mut self, depth: usize, up: &ScaleUpDecision) {
        while self.snapshot.depth() > depth {
            let _ = self.snapshot.revert();
        }
        self.snapshot.fork();
        pending::place_nominated(&mut self.snapshot, &up.set_aside);
        let _ = pending::place_on_existing(&mut self.snapshot, up.fit_existing.clone());
    }

    /// Brings the snapshot to `view`, incrementally when the last view's snapshot is kept,
    /// afresh otherwise.
    fn sync(&mut self, view: &ClusterView<'_>, warnings: &mut Vec<String>) {
        if !(self.valid && self.snapshot.depth() == 0 && self.update(view).is_some()) {
            self.rebuild(view, warnings);
        }
    }

    /// A fresh snapshot with [`build_snapshot`]; kept for the next loop only without warnings.
    fn rebuild(&mut self, view: &ClusterView<'_>, warnings: &mut Vec<String>) {
        let before = warnings.len();
        let g = self.generation;
        let mut pods = Vec::with_capacity(view.pods.len());
        let mut outside = Vec::new();
        let snapshot = build_snapshot_with(
            view,
            warnings,
            |_, p, id| pods.push((addr(p), id)),
            |p| outside.push(p.clone()),
        );
        *self = SnapshotCache {
            snapshot,
            outside,
            generation: g,
            ..SnapshotCache::default()
        };
        if warnings.len() != before {
            return;
        }
        self.pods = pods;
        self.nodes.reserve(view.nodes.len());
        for n in view.nodes {
            let Some(id) = self.snapshot.node_id(n.name) else {
                return;
            };
            self.nodes.insert(addr(n), (n.clone(), id, g));
        }
        self.namespaces = view.namespaces.to_vec();
        self.valid = true;
    }

    /// Applies the differences between the last view and `view`; `None` when `view` is not
    /// consistent (what [`build_snapshot`] would warn about), leaving the cache to rebuild.
    fn update(&mut self, view: &ClusterView<'_>) -> Option<()> {
        self.generation += 1;
        let g = self.generation;
        let removed = self.update_nodes(view, g)?;
        let unordered = self.update_pods(view, &removed)?;
        if self.namespaces != view.namespaces {
            self.namespaces = view.namespaces.to_vec();
            self.snapshot.set_namespace_labels(self.namespaces.clone());
        }
        self.snapshot.set_storage(view.storage.clone());
        self.restore_order(view, &unordered)
    }

    /// Keeps the view's unchanged nodes (marked with generation `g`), removes changed and
    /// removed ones with their pods, and adds new ones. Returns, per node id, whether the node
    /// that had it was removed (its listed pods went with it, whatever node has the id now).
    fn update_nodes(&mut self, view: &ClusterView<'_>, g: u64) -> Option<Vec<bool>> {
        let mut new_nodes = Vec::new();
        for n in view.nodes {
            match self.nodes.get_mut(&addr(n)) {
                Some(e) if e.2 != g => e.2 = g,
                Some(_) => return None,
                None => new_nodes.push(n),
            }
        }
        let slots = self.nodes.values().map(|e| e.1.0 as usize + 1).max();
        let mut removed = vec![false; slots.unwrap_or(0)];
        if new_nodes.len() + self.nodes.len() != view.nodes.len() {
            let gone: Vec<usize> = self
                .nodes
                .iter()
                .filter(|(_, e)| e.2 != g)
                .map(|(k, _)| *k)
                .collect();
            for k in gone {
                let (_, id, _) = self.nodes.remove(&k)?;
                *removed.get_mut(id.0 as usize)? = true;
                self.snapshot.remove_node(id).ok()?;
            }
        }
        for n in new_nodes {
            let id = self.snapshot.add_node(n.clone()).ok()?;
            self.nodes.insert(addr(n), (n.clone(), id, g));
        }
        Some(removed)
    }

    /// Keeps the view's unchanged pods, removes the others and adds new ones; collects the
    /// unbound ones in `outside`. Returns, per node id, whether its pods may be out of view
    /// order.
    fn update_pods(&mut self, view: &ClusterView<'_>, removed: &[bool]) -> Option<Vec<bool>> {
        // Removed ones first (a replaced pod keeps its name), then new ones. Kept pods keep
        // their relative order (they are matched in order), so each node's pods stay in view
        // order unless a pod added to it comes before one of its kept pods in the view.
        let changes = self.match_pods(view, removed)?;
        for (a, id) in changes.gone {
            let info = self.snapshot.node(id)?;
            let pod = info.pods.iter().find(|p| addr(p) == a)?;
            let (namespace, name) = (pod.namespace, pod.name.clone());
            self.snapshot.remove_pod(id, namespace, &name).ok()?;
        }
        let mut unordered = vec![
            false;
            self.snapshot
                .node_ids()
                .map(|id| id.0 as usize + 1)
                .max()
                .unwrap_or(0)
        ];
        for (i, id) in changes.added {
            self.snapshot.add_pod(view.pods[i].clone(), id).ok()?;
            let later_kept = changes.last_kept.get(id.0 as usize).copied().flatten();
            if later_kept.is_some_and(|k| k > i) {
                *unordered.get_mut(id.0 as usize)? = true;
            }
        }
        Some(unordered)
    }

    /// Walks the listed pods beside `view`'s, matching the same objects in order: listed pods
    /// left unmatched are gone, the view's pods left unmatched are added (a pod seen out of
    /// order is removed and added again). Rebuilds `pods` and `outside` for `view`.
    fn match_pods(&mut self, view: &ClusterView<'_>, removed: &[bool]) -> Option<PodChanges> {
        let old = std::mem::take(&mut self.pods);
        let mut changes = PodChanges {
            last_kept: vec![None; removed.len()],
            ..PodChanges::default()
        };
        let dead = |e: &(usize, NodeId)| removed.get(e.1.0 as usize).copied().unwrap_or(true);
        let mut pods = Vec::with_capacity(old.len());
        // Pods looked at beyond the walk to find a pod listed further on; past a few times the
        // list, the order changed too much to walk, and a rebuild is cheaper.
        let mut searched = 0usize;
        let mut j = 0usize;
        self.outside.clear();
        for (i, p) in view.pods.iter().enumerate() {
            while old.get(j).is_some_and(dead) {
                j += 1;
            }
            let a = addr(p);
            let at = if old.get(j).is_some_and(|e| e.0 == a) {
                Some(j)
            } else if !in_snapshot(p) {
                self.outside.push(p.clone());
                continue;
            } else if self
                .snapshot
                .pod(p.namespace, &p.name)
                .is_some_and(|(_, q)| Arc::ptr_eq(q, p))
            {
                // Listed, not next: further on (listed pods before it are gone), or passed
                // over as gone already.
                let ahead = old[j..].iter().position(|e| e.0 == a && !dead(e));
                searched += ahead.unwrap_or(old.len() - j);
                if searched > 4 * old.len() + 1024 {
                    return None;
                }
                ahead.map(|k| j + k)
            } else {
                None
            };
            match at {
                Some(k) => {
                    let e = old[k];
                    let gone = old[j..k].iter().filter(|e| !dead(e));
                    changes.gone.extend(gone);
                    j = k + 1;
                    *changes.last_kept.get_mut(e.1.0 as usize)? = Some(i);
                    pods.push(e);
                }
                None => {
                    let id = self.snapshot.node_id(p.node_name?)?;
                    changes.added.push((i, id));
                    pods.push((a, id));
                }
            }
        }
        changes.gone.extend(old[j..].iter().filter(|e| !dead(e)));
        self.pods = pods;
        Some(changes)
    }

    /// Puts the nodes in view order, and the pods of each node marked `unordered` too.
    fn restore_order(&mut self, view: &ClusterView<'_>, unordered: &[bool]) -> Option<()> {
        // Order: nodes as in the view, each node's pods as in the view.
        let ids: Vec<NodeId> = view
            .nodes
            .iter()
            .map(|n| self.nodes.get(&addr(n)).map(|e| e.1))
            .collect::<Option<_>>()?;
        if !self.snapshot.node_ids().eq(ids.iter().copied()) {
            self.snapshot.set_node_order(ids).ok()?;
        }
        if !unordered.contains(&true) {
            return Some(());
        }
        // Each pod's rank in the list, for the nodes to sort only.
        let is_unordered = |id: NodeId| unordered.get(id.0 as usize).copied().unwrap_or(false);
        let ranks: FxHashMap<usize, usize> = (self.pods.iter().enumerate())
            .filter(|(_, e)| is_unordered(e.1))
            .map(|(r, e)| (e.0, r))
            .collect();
        for (i, _) in unordered.iter().enumerate().filter(|(_, u)| **u) {
            let id = NodeId(i as u32);
            if self.snapshot.node(id).is_some() {
                self.snapshot
                    .sort_pods_by_key(id, |p| ranks.get(&addr(p)).copied())
                    .ok()?;
            }
        }
        Some(())
    }
}

impl Autoscaler {
    /// A fresh autoscaler (no state from earlier loops).
    pub fn new(options: AutoscalerOptions) -> Autoscaler {
        let rng = ChaCha8Rng::seed_from_u64(options.seed);
        Autoscaler {
            cluster_state: ClusterState::new(options.cluster_state.clone()),
            options,
            scale_down: ScaleDownState::default(),
            rng,
            cache: SnapshotCache::default(),
            reuse_placements: true,
            consolidation: ConsolidationState::default(),
            requests: Default::default(),
        }
    }

    /// The options this autoscaler decides with.
    pub fn options(&self) -> &AutoscalerOptions {
        &self.options
    }

    /// Decides with `options` from the next loop on (the shell reconfigured without a restart):
    /// the state kept between loops (unneeded timers, delays, scale-up requests, backoff, the
    /// snapshot cache and the random generator) stays, so a change of settings neither forgets
    /// a pending scale-up nor restarts the unneeded clocks.
    pub fn set_options(&mut self, options: AutoscalerOptions) {
        self.cluster_state
            .set_options(options.cluster_state.clone());
        self.options = options;
    }

    /// The cluster state kept between loops (requests, backoff, health), to read.
    pub fn cluster_state(&self) -> &ClusterState {
        &self.cluster_state
    }

    /// The scale-down state kept between loops (unneeded timers, delays), to read.
    pub fn scale_down_state(&self) -> &ScaleDownState {
        &self.scale_down
    }

    /// Feeds what became of an action at `now_ms` into the state it concerns: a failed
    /// scale-up backs its group off, a deletion (done or failed) starts the scale-down delays.
    /// The only way shells report outcomes back.
    pub fn observe(&mut self, outcome: &Outcome, now_ms: i64) {
        match outcome {
            // A failed `IncreaseSize`: the group is backed off at once and a
            // `FailedToScaleUpGroup` event comes with the next loop's events.
            Outcome::ScaleUpFailed { group, error } => {
                self.cluster_state
                    .record_scale_up_failure(group, now_ms, &error.message)
            }
            Outcome::NodeDeleted { node } => self.scale_down.record_deletion(*node, true, now_ms),
            Outcome::NodeDeletionFailed { node } => {
                self.scale_down.record_deletion(*node, false, now_ms)
            }
        }
    }

    /// Sets the priority expander's configuration (the text of its ConfigMap; `None`: none),
    /// read by the shell from the cluster before each loop.
    pub fn set_priority_text(&mut self, text: Option<&str>) {
        self.options.scale_up.expander.set_priority_text(text);
    }

    /// One loop over the input's view at its time: cluster state first (broken instances,
    /// timed-out scale-ups, health, backoff), then, if the cluster is healthy, the
    /// capacity-on-request decisions (when the input has the objects and the options' `capacity`
    /// is on: in a loop that takes a request up, the loop's scale-up is that request's or none),
    /// scale-up for the pending pods and scale-down planning on one snapshot of the view. The
    /// input's deletions in flight are those started by earlier loops and not finished; its
    /// budget bounds bin-packing and removal simulation together; its clock, if any, times the
    /// phases into [`LoopOutcome::phases`]. An unhealthy cluster only gets its instances
    /// without a node removed.
    pub fn run_once(&mut self, input: LoopInput<'_>) -> LoopOutcome {
        let LoopInput {
            view,
            now_ms,
            controllers,
            in_flight,
            budget,
            capacity,
            clock,
        } = input;
        let mut unlimited = Unlimited;
        let budget: &mut dyn Budget = match budget {
            Some(budget) => budget,
            None => &mut unlimited,
        };
        let timer = Timer {
            clock,
            phases: Vec::new(),
        };
        let capacity = capacity.filter(|_| self.options.capacity.any());
        self.run_loop(
            view,
            controllers,
            in_flight,
            now_ms,
            budget,
            timer,
            capacity,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn run_loop(
        &mut self,
        view: &ClusterView<'_>,
        controllers: &dyn ControllerLookup,
        in_flight: InFlight,
        now_ms: i64,
        budget: &mut dyn Budget,
        mut timer: Timer<'_>,
        capacity: Option<&autoscaler_model::CapacityObjects>,
    ) -> LoopOutcome {
        // Nodes still waiting for their accelerators are seen as not ready all through the loop.
        let marked = crate::cluster_state::accelerator::with_unready_accelerators(
            view.nodes,
            view.provider,
            view.storage.dra(),
        );
        let view = &ClusterView {
            nodes: marked.as_deref().unwrap_or(view.nodes),
            ..*view
        };
        let state_start = timer.start();
        let state = self.cluster_state.update(view.nodes, view.provider, now_ms);
        timer.stop(Phase::UpdateClusterState, state_start);
        let (mut actions, mut events, status) = (state.actions, state.events, state.status);
        if !status.healthy {
            let (actions, refused) = crate::safety::enforce(actions, view.provider, &status);
            return LoopOutcome {
                actions,
                events,
                status,
                refused,
                phases: timer.phases,
                ..LoopOutcome::default()
            };
        }
        // Requests and buffers first: the loop goes on with their pods (booked room held,
        // consumer pods left to their request, buffer pods after the real ones).
        let capacity = capacity.map(|o| self.decide_capacity(view, o, &status, now_ms, budget));
        let loop_pods = capacity.as_ref().map(|c| c.pods_for_loop(view.pods));
        let view = &ClusterView {
            pods: loop_pods.as_deref().unwrap_or(view.pods),
            ..*view
        };
        // Scale-up and scale-down share one fork of the kept snapshot: the pending pods the
        // scale-up filter placed stay placed for scale-down, which must see them there.
        let mut warnings = Vec::new();
        self.cache.sync(view, &mut warnings);
        let depth = self.cache.snapshot.depth();
        self.cache.snapshot.fork();
        let (mut up, placed) = self.decide_scale_up(view, &status, now_ms, budget, &mut timer);
        if let Some(c) = capacity.as_ref().filter(|c| c.requests.took_turn) {
            // The request's turn: its all-or-nothing scale-up (or none) is the loop's.
            up.result = c
                .requests
                .scale_up
                .as_ref()
                .map(|d| d.result.clone())
                .unwrap_or_default();
        }
        let up = ScaleUpDecision {
            warnings: [warnings, up.warnings].concat(),
            ..up
        };
        self.record_scale_up(&up.result, now_ms, &mut events);
        let down_start = timer.start();
        if !(placed && self.reuse_placements) {
            self.cache.place_again(depth, &up);
        }
        let mut down = self.decide_scale_down(
            view,
            controllers,
            in_flight.clone(),
            &status,
            now_ms,
            budget,
            &mut timer,
        );
        actions.extend(capacity::scale_up_actions_of(capacity.as_ref(), &up.result));
        let on = crate::scale_down::disruption_budget::GroupRules::any_on(
            view.provider,
            self.options.consolidation.mode,
        );
        let consolidation = if !on {
            ConsolidationPlan::default()
        } else {
            self.consolidate(
                view,
                controllers,
                in_flight,
                &status,
                &up,
                &mut down,
                now_ms,
                budget,
                &mut actions,
                &mut events,
            )
        };
        self.cache.close_forks(depth);
        timer.stop(Phase::ScaleDown, down_start);
        // Nodes waiting for their replacement take no new pods (ours; see replacement_taint).
        let waiting = self.consolidation.waiting_nodes();
        let deleting: Vec<_> = down.deletions.iter().map(|d| d.node).collect();
        actions.extend(
            crate::scale_down::replacement_taint::replacement_taint_actions(
                view.nodes, &waiting, &deleting, now_ms,
            ),
        );
        let start = actions.len();
        actions.extend(scale_down_actions(&down, now_ms));
        if let Some(config) = &self.options.scale_down.drain_priority {
            crate::scale_down::drain_priority::stage_drains(
                &mut actions[start..],
                &down.deletions,
                config,
            );
        }
        let (actions, refused) = crate::safety::enforce(actions, view.provider, &status);
        LoopOutcome {
            scale_up: up,
            scale_down: down,
            actions,
            events,
            status,
            refused,
            phases: timer.phases,
            consolidation,
            capacity,
        }
    }

    /// The loop's scale-up decision on a fork of the kept snapshot (synced with the view), for
    /// the view's unbound pods, counting the upcoming nodes of `status` and skipping its
    /// blocked groups. The fork is left open with the pending pods that fit placed; the flag
    /// says whether it holds only the view's nodes (see [`scale_up_on_fork`]).
    fn decide_scale_up(
        &mut self,
        view: &ClusterView<'_>,
        status: &ClusterStatus,
        now_ms: i64,
        budget: &mut dyn Budget,
        timer: &mut Timer<'_>,
    ) -> (ScaleUpDecision, bool) {
        // Only pods outside the snapshot (not bound) can be pending: the scale-up reads those.
        let pending_view = ClusterView {
            pods: &self.cache.outside,
            ..*view
        };
        let upcoming: Vec<usize> = status.groups.iter().map(|g| g.upcoming).collect();
        let blocked =
            |g: usize, _: &NodeGroup| status.groups.get(g).and_then(|s| s.blocked_reason());
        scale_up_on_fork(
            &mut self.cache.snapshot,
            &pending_view,
            &self.options.scale_up,
            now_ms,
            &blocked,
            Some(&upcoming),
            &mut self.rng,
            budget,
            timer,
        )
    }

    /// Remembers the scale-ups decided (they hold scale-down and count as upcoming) and
    /// announces each with an event.
    fn record_scale_up(&mut self, result: &ScaleUpResult, now_ms: i64, events: &mut Vec<Event>) {
        if !result.increases.is_empty() {
            let groups = result.increases.iter().map(|i| &i.group);
            self.scale_down.record_scale_up(groups, now_ms);
        }
        for inc in &result.increases {
            self.cluster_state
                .record_scale_up(&inc.group, inc.delta, now_ms);
            events.push(Event {
                reason: SCALED_UP_GROUP,
                object: inc.group.to_string(),
                message: format!(
                    "Scale-up: setting group {} size to {} (+{})",
                    inc.group, inc.new_target, inc.delta
                ),
                warning: false,
            });
        }
    }

    /// The loop's scale-down plan on the open fork of the kept snapshot, which holds the
    /// pending pods that fit existing nodes placed there (and nothing else), leaving the nodes
    /// of unhealthy groups alone.
    #[allow(clippy::too_many_arguments)]
    fn decide_scale_down(
        &mut self,
        view: &ClusterView<'_>,
        controllers: &dyn ControllerLookup,
        in_flight: InFlight,
        status: &ClusterStatus,
        now_ms: i64,
        budget: &mut dyn Budget,
        timer: &mut Timer<'_>,
    ) -> ScaleDownPlan {
        let hidden: Vec<bool> = status
            .groups
            .iter()
            .map(|g| g.unhealthy.is_some())
            .collect();
        let cs = &self.options.cluster_state;
        let startup_ms = crate::cluster_state::backoff::ms(cs.max_node_startup_time);
        let not_started = |n: &Node| {
            !cs.taints.is_started_ready(n.is_ready(), &n.taints)
                && n.creation_ms
                    .is_some_and(|c| now_ms < c.saturating_add(startup_ms))
        };
        let provider = HideGroups {
            inner: view.provider,
            hidden: &hidden,
            not_started: &not_started,
        };
        let input = ScaleDownInput {
            provider: &provider,
            budgets: DisruptionBudgets::new(view.pdbs.to_vec()),
            controllers,
            limits: &self.options.scale_up.limits,
            totals: ClusterTotals::from_nodes_and_devices(
                view.nodes.iter().map(|n| &**n),
                view.storage.dra(),
            ),
            in_flight,
        };
        let start = timer.start();
        let mut plan = plan_scale_down(
            &mut self.cache.snapshot,
            &mut self.scale_down,
            input,
            &self.options.scale_down,
            now_ms,
            budget,
        );
        timer.stop(Phase::FindUnneeded, start);
        name_the_starting_nodes(&mut plan, view, &not_started);
        plan
    }
}

/// The starting nodes that scale-down did not see (hidden as in no group) are unremovable
/// because they have not started, which is what `plan` and the status should say.
fn name_the_starting_nodes(
    plan: &mut ScaleDownPlan,
    view: &ClusterView<'_>,
    not_started: &dyn Fn(&Node) -> bool,
) {
    let starting: Vec<Sym> = (view.nodes.iter())
        .filter(|n| not_started(n) && view.provider.node_group_of(n).is_some())
        .map(|n| n.name)
        .collect();
    if starting.is_empty() {
        return;
    }
    for (name, why) in plan.unremovable.iter_mut() {
        if *why == Unremovable::NotAutoscaled && starting.contains(name) {
            *why = Unremovable::NotStarted;
        }
    }
}

/// A provider that hides from scale-down the nodes of some groups (unhealthy ones) and the nodes
/// that have not started yet (upstream leaves registered upcoming nodes out of scale-down: they
/// are the answer to a scale-up, not spare capacity).
struct HideGroups<'a> {
    inner: &'a dyn CloudProvider,
    hidden: &'a [bool],
    not_started: &'a dyn Fn(&Node) -> bool,
}

impl CloudProvider for HideGroups<'_> {
    fn node_groups(&self) -> &[NodeGroup] {
        self.inner.node_groups()
    }

    fn node_group_of(&self, node: &Node) -> Option<usize> {
        if (self.not_started)(node) {
            return None;
        }
        self.inner
            .node_group_of(node)
            .filter(|&g| !self.hidden.get(g).copied().unwrap_or(false))
    }

    fn gpu_label(&self) -> Option<&str> {
        self.inner.gpu_label()
    }
}

/// How long a registered node may take to become Ready before it stops counting as upcoming
/// (upstream's `MaxNodeStartupTime`, 15 minutes).
pub const MAX_NODE_STARTUP_MS: i64 = 15 * 60 * 1000;

/// Whether `node` has registered but not started yet: not Ready (or Ready with a startup taint
/// of `taints`) and created less than [`MAX_NODE_STARTUP_MS`] before `now_ms`. Such a node
/// cannot take pods yet (the kubelet's `not-ready` taint, or the startup taint) but is the answer
/// to an earlier scale-up, so it counts as upcoming.
pub fn is_not_started(node: &Node, now_ms: i64, taints: &TaintConfig) -> bool {
    !taints.is_started_ready(node.is_ready(), &node.taints)
        && node
            .creation_ms
            .is_some_and(|c| now_ms < c.saturating_add(MAX_NODE_STARTUP_MS))
}

/// Counts each registered node that has not started with the GPUs its group's template
/// promises (`--gpu-total` only: upstream's GPU processor gives such a node its template's GPUs
/// as resource target), so a node whose device plugin or DRA driver is still starting does not
/// leave room under the max for one more.
fn count_promised_gpus(
    view: &ClusterView<'_>,
    config: &ScaleUpConfig,
    now_ms: i64,
    templates: &[Result<GroupTemplate, NoTemplate>],
    totals: &mut ClusterTotals,
) {
    if config.limits.gpus.is_empty() {
        return;
    }
    for node in view.nodes {
        if !is_not_started(node, now_ms, &config.template.taints) {
            continue;
        }
        let template = view
            .provider
            .node_group_of(node)
            .and_then(|g| templates.get(g));
        if let Some(Ok(t)) = template {
            totals.count_promised_gpus(node, &t.template.node);
        }
    }
}

/// Adds an upcoming node shaped like `template` (with its daemon pods) to the snapshot.
fn add_upcoming_node(
    snapshot: &mut ClusterSnapshot,
    template: &Node,
    name: &str,
    daemonsets: &[DaemonSet],
    warnings: &mut Vec<String>,
) {
    let mut node = template.clone();
    node.name = Sym::new(name);
    node.labels.insert(Sym::new(HOSTNAME_LABEL), node.name);
    let pods = daemon_pods_for(daemonsets, &node);
    match snapshot.add_node(Arc::new(node)) {
        Ok(id) => {
            for p in pods {
                let _ = snapshot.add_pod(p, id);
            }
        }
        Err(e) => warnings.push(format!("upcoming node {name} not simulated: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
    use autoscaler_model::{Instance, InstanceState, StaticProvider};
    use rand::SeedableRng;

    fn pending(name: &str, cpu: i64) -> Arc<Pod> {
        PodBuilder::new(name, cpu, GI)
            .owner("ReplicaSet", "web")
            .unschedulable()
            .arc()
    }

    fn group_node(name: &str, cpu: i64) -> Arc<Node> {
        let mut n = NodeBuilder::new(name, cpu, 16 * GI).build();
        n.provider_id = Some(Arc::from(format!("test:///{name}")));
        Arc::new(n)
    }

    /// One group `ng` with `nodes` registered 4-CPU nodes and the given target.
    fn provider(nodes: &[&str], target: usize) -> StaticProvider {
        let mut g = NodeGroup::new("ng", 0, 10, target);
        g = g.with_instances(
            nodes
                .iter()
                .map(|n| Instance {
                    id: Arc::from(format!("test:///{n}")),
                    state: InstanceState::Running,
                    error: None,
                })
                .collect(),
        );
        StaticProvider::new(vec![g])
    }

    fn decide(nodes: &[Arc<Node>], pods: &[Arc<Pod>], p: &StaticProvider) -> ScaleUpDecision {
        let view = ClusterView::of(nodes, pods, p);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        decide_scale_up(
            &view,
            &ScaleUpConfig::default(),
            0,
            &|_, _| None,
            &mut rng,
            &mut Unlimited,
        )
    }

    #[test]
    fn pending_pods_grow_the_group_from_a_node_template() {
        let nodes = vec![group_node("n1", 4000)];
        let busy = PodBuilder::new("busy", 4000, GI).node_name("n1").arc();
        let pods = vec![
            busy,
            pending("p1", 3000),
            pending("p2", 3000),
            pending("p3", 1000),
        ];
        let d = decide(&nodes, &pods, &provider(&["n1"], 1));
        assert_eq!(d.result.increases.len(), 1);
        // 3 + 3 + 1 CPU on 4-CPU nodes: two new nodes.
        assert_eq!(d.result.increases[0].delta, 2);
        assert_eq!(d.result.increases[0].new_target, 3);
        assert_eq!(d.result.triggered.len(), 3);
    }

    #[test]
    fn a_template_from_a_node_keeps_its_csi_attach_limits() {
        let mut store = autoscaler_model::ObjectStore::new();
        let mut yaml = String::from(
            "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: ssd}\n\
             provisioner: ebs.csi.aws.com\nvolumeBindingMode: WaitForFirstConsumer\n---\n\
             apiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {name: n1}\n\
             spec: {drivers: [{name: ebs.csi.aws.com, nodeID: i, allocatable: {count: 1}}]}\n",
        );
        for c in ["held", "c1", "c2"] {
            yaml.push_str(&format!(
                "---\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {c}, namespace: default}}\n\
                 spec: {{storageClassName: ssd}}\n"
            ));
        }
        store.load_yaml(&yaml).unwrap();
        let (storage, errors) = Storage::from_store(&store);
        assert!(errors.is_empty(), "{errors:?}");
        let storage = Arc::new(storage);
        let nodes = vec![group_node("n1", 4000)];
        let claimed = |name: &str, claim: &str| {
            PodBuilder::new(name, 100, GI)
                .owner("ReplicaSet", "db")
                .claim(claim)
                .unschedulable()
        };
        let pods = vec![
            claimed("holder", "held").node_name("n1").arc(),
            claimed("p1", "c1").arc(),
            claimed("p2", "c2").arc(),
        ];
        let p = provider(&["n1"], 1);
        let view = ClusterView {
            nodes: &nodes,
            pods: &pods,
            daemonsets: &[],
            namespaces: &[],
            provider: &p,
            pdbs: &[],
            storage: &storage,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let d = decide_scale_up(
            &view,
            &ScaleUpConfig::default(),
            0,
            &|_, _| None,
            &mut rng,
            &mut Unlimited,
        );
        // n1 has room but its one attachment is taken; a new node of its group can attach one
        // volume too, so the two pods need a node each.
        assert_eq!(d.result.increases.len(), 1, "{d:?}");
        assert_eq!(d.result.increases[0].delta, 2);
    }

    #[test]
    fn upcoming_nodes_absorb_the_burst_so_it_causes_one_scale_up() {
        let nodes = vec![group_node("n1", 4000)];
        let busy = PodBuilder::new("busy", 4000, GI).node_name("n1").arc();
        let pods = vec![busy, pending("p1", 3000), pending("p2", 3000)];
        // The previous loop already raised the target to 3: two nodes are on their way.
        let d = decide(&nodes, &pods, &provider(&["n1"], 3));
        assert_eq!(d.upcoming, vec![2]);
        assert!(d.result.increases.is_empty(), "{:?}", d.result.increases);
        assert_eq!(d.fit_existing.len(), 2);
    }

    /// n1 is full, `fresh` (n2, the group's second node) has not started: the pending pod that
    /// n2 will take causes no scale-up, and n2 counts as upcoming.
    fn assert_still_upcoming(fresh: Arc<Node>, now: i64) {
        let nodes = vec![group_node("n1", 4000), fresh];
        let busy = PodBuilder::new("busy", 4000, GI).node_name("n1").arc();
        let pods = vec![busy, pending("p1", 3000)];
        let p = provider(&["n1", "n2"], 2);
        let view = ClusterView::of(&nodes, &pods, &p);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let d = decide_scale_up(
            &view,
            &ScaleUpConfig::default(),
            now,
            &|_, _| None,
            &mut rng,
            &mut Unlimited,
        );
        assert!(d.result.increases.is_empty(), "{:?}", d.result.increases);
        assert_eq!(d.upcoming, vec![1]);
        assert_eq!(d.fit_existing.len(), 1);
    }

    /// A node the last scale-up asked for has registered but is not Ready yet (it still carries
    /// the kubelet's `not-ready` taint): it is still on its way, so the pods waiting for it must
    /// not cause a second scale-up.
    #[test]
    fn a_registered_node_not_started_yet_still_counts_as_upcoming() {
        use autoscaler_model::TaintEffect;
        let now = 10 * 60 * 1000;
        let fresh = NodeBuilder::new("n2", 4000, 16 * GI)
            .not_ready()
            .taint("node.kubernetes.io/not-ready", "", TaintEffect::NoSchedule)
            .with_provider_id("test:///n2")
            .with(|n| n.creation_ms = Some(now - 60_000))
            .arc();
        assert_still_upcoming(fresh, now);
    }

    /// A node that is Ready but still carries a startup taint has not started either: it
    /// counts as upcoming (its template, without the taint, takes the pod) rather than as a
    /// full node the pod cannot use, which would grow the group a second time.
    #[test]
    fn a_ready_node_with_a_startup_taint_still_counts_as_upcoming() {
        use autoscaler_model::TaintEffect;
        let now = 10 * 60 * 1000;
        let key = "startup-taint.cluster-autoscaler.kubernetes.io/cni";
        let fresh = NodeBuilder::new("n2", 4000, 16 * GI)
            .taint(key, "", TaintEffect::NoSchedule)
            .with_provider_id("test:///n2")
            .with(|n| n.creation_ms = Some(now - 60_000))
            .arc();
        assert_still_upcoming(fresh, now);
    }

    #[test]
    fn pods_fitting_existing_nodes_and_expendable_pods_cause_nothing() {
        let nodes = vec![group_node("n1", 4000)];
        let low = PodBuilder::new("low", 8000, GI)
            .priority(-20)
            .unschedulable()
            .arc();
        let pods = vec![pending("fits", 1000), low];
        let d = decide(&nodes, &pods, &provider(&["n1"], 1));
        assert!(d.result.increases.is_empty());
        assert_eq!(d.fit_existing.len(), 1);
        assert_eq!(d.set_aside.len(), 1);
        assert!(matches!(
            d.set_aside[0].1,
            SetAside::Expendable {
                priority: -20,
                cutoff: -10
            }
        ));
    }

    #[test]
    fn a_blocked_group_is_reported_and_not_grown() {
        let nodes = vec![group_node("n1", 4000)];
        let busy = PodBuilder::new("busy", 4000, GI).node_name("n1").arc();
        let pods = vec![busy, pending("p1", 3000)];
        let p = provider(&["n1"], 1);
        let view = ClusterView::of(&nodes, &pods, &p);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let blocked =
            |_: usize, _: &NodeGroup| Some("in backoff after failed scale-up".to_string());
        let d = decide_scale_up(
            &view,
            &ScaleUpConfig::default(),
            0,
            &blocked,
            &mut rng,
            &mut Unlimited,
        );
        assert!(d.result.increases.is_empty());
        let reasons = &d.result.no_scale_up[0].reasons;
        assert_eq!(
            reasons.values().next(),
            Some("in backoff after failed scale-up")
        );
    }

    #[test]
    fn inconsistent_objects_are_skipped_with_warnings() {
        let nodes = vec![group_node("n1", 4000), group_node("n1", 4000)];
        let ghost = PodBuilder::new("ghost", 100, GI).node_name("nowhere").arc();
        let d = decide(&nodes, &[ghost], &provider(&["n1"], 1));
        assert_eq!(d.warnings.len(), 2, "{:?}", d.warnings);
    }
}

#[cfg(test)]
mod loop_tests {
    use super::*;
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
    use autoscaler_model::{Instance, InstanceState, StaticProvider};

    const MIN: i64 = 60_000;

    fn cluster(nodes: &[&str], target: usize) -> (Vec<Arc<Node>>, StaticProvider) {
        let nodes: Vec<Arc<Node>> = nodes
            .iter()
            .map(|n| {
                NodeBuilder::new(n, 4000, 16 * GI)
                    .with_provider_id(&format!("test:///{n}"))
                    .arc()
            })
            .collect();
        let mut g = NodeGroup::new("ng", 1, 10, target);
        g = g.with_instances(
            nodes
                .iter()
                .map(|n| Instance {
                    id: n.provider_id.clone().unwrap(),
                    state: InstanceState::Running,
                    error: None,
                })
                .collect(),
        );
        (nodes, StaticProvider::new(vec![g]))
    }

    fn run(
        a: &mut Autoscaler,
        nodes: &[Arc<Node>],
        pods: &[Arc<Pod>],
        p: &StaticProvider,
        now: i64,
    ) -> LoopOutcome {
        let view = ClusterView::of(nodes, pods, p);
        a.run_once(LoopInput::new(&view, now))
    }

    /// A clock that moves one millisecond every time it is read.
    struct Ticking(std::cell::Cell<u64>);

    impl PhaseClock for Ticking {
        fn elapsed(&self) -> std::time::Duration {
            let t = self.0.get() + 1;
            self.0.set(t);
            std::time::Duration::from_millis(t)
        }
    }

    /// The phases are timed with the clock given, in loop order under upstream's labels, the
    /// scale-down one spanning its unneeded search; without a clock nothing is recorded and the
    /// decision is the same.
    #[test]
    fn a_timed_loop_reports_its_phases_in_order() {
        let (nodes, p) = cluster(&["n1", "n2"], 2);
        let pods: Vec<Arc<Pod>> = (0..3)
            .map(|i| {
                PodBuilder::new(&format!("p{i}"), 3000, GI)
                    .unschedulable()
                    .arc()
            })
            .collect();
        let view = ClusterView::of(&nodes, &pods, &p);
        let clock = Ticking(std::cell::Cell::new(0));
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        let timed = a.run_once(LoopInput::new(&view, 0).timed(&clock));
        let labels: Vec<&str> = timed.phases.iter().map(|(ph, _)| ph.label()).collect();
        assert_eq!(
            labels,
            [
                "updateClusterState",
                "filterOutSchedulable",
                "scaleUp",
                "findUnneeded",
                "scaleDown"
            ]
        );
        assert!(timed.phases.iter().all(|(_, d)| !d.is_zero()));
        let (find, down) = (timed.phases[3].1, timed.phases[4].1);
        assert!(
            down > find,
            "scaleDown {down:?} spans findUnneeded {find:?}"
        );
        let mut b = Autoscaler::new(AutoscalerOptions::default());
        let plain = run(&mut b, &nodes, &pods, &p, 0);
        assert!(plain.phases.is_empty());
        assert_eq!(plain.actions, timed.actions);
    }

    #[test]
    fn a_burst_scales_up_and_holds_scale_down() {
        let (nodes, p) = cluster(&["n1", "n2"], 2);
        let mut pods = vec![
            PodBuilder::new("busy", 3500, GI)
                .owner("ReplicaSet", "a")
                .node_name("n1")
                .arc(),
        ];
        pods.extend((0..3).map(|i| {
            PodBuilder::new(&format!("p{i}"), 3000, GI)
                .owner("ReplicaSet", "b")
                .unschedulable()
                .arc()
        }));
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        let out = run(&mut a, &nodes, &pods, &p, 0);
        // n2 is empty and takes one pod; two more nodes for the others.
        assert_eq!(
            out.actions,
            vec![Action::IncreaseSize {
                group: "ng".into(),
                delta: 2,
                new_target: 4
            }]
        );
        assert_eq!(a.scale_down.last_scale_up_ms, Some(0));
        // n2 is not unneeded: the pending pod that fits there will land on it.
        assert!(
            out.scale_down.unneeded.is_empty(),
            "{:?}",
            out.scale_down.unneeded
        );
    }

    /// One ReplicaSet pod on n1, leaving the cluster's other nodes empty.
    fn web_on_n1() -> Vec<Arc<Pod>> {
        vec![
            PodBuilder::new("web", 1000, GI)
                .owner("ReplicaSet", "a")
                .node_name("n1")
                .arc(),
        ]
    }

    #[test]
    fn quiet_nodes_are_removed_after_the_unneeded_time() {
        let (nodes, p) = cluster(&["n1", "n2", "n3"], 3);
        let pods = web_on_n1();
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        let first = run(&mut a, &nodes, &pods, &p, 0);
        // n2 and n3 are empty and go first; then n1's pod has nowhere left to move.
        assert_eq!(first.scale_down.unneeded.len(), 2);
        assert!(first.scale_down.deletions.is_empty());
        let later = run(&mut a, &nodes, &pods, &p, 11 * MIN);
        // min size 1: two of the three go. The emptiest go first; n1's pod has nowhere to move
        // once the others are promised for deletion, or n1 is kept by min size.
        assert_eq!(later.scale_down.deletions.len(), 2);
        let deleted: Vec<Action> = later
            .actions
            .iter()
            .filter(|a| {
                matches!(
                    a,
                    Action::DeleteEmptyNodes { .. } | Action::DrainAndDelete { .. }
                )
            })
            .cloned()
            .collect();
        assert!(!deleted.is_empty());
    }

    /// A node still starting (here Ready but with a startup taint) is the answer to a
    /// scale-up, not spare capacity: it is never a scale-down candidate within the startup
    /// time, while an equally empty started node is.
    #[test]
    fn a_node_still_starting_is_no_scale_down_candidate() {
        use autoscaler_model::TaintEffect;
        let (mut nodes, p) = cluster(&["n1", "n2", "n3"], 3);
        // n3 registered at 0 and still carries a startup taint.
        let mut n3 = (*nodes[2]).clone();
        n3.creation_ms = Some(0);
        n3.taints.push(autoscaler_model::Taint {
            key: Sym::new("startup-taint.cluster-autoscaler.kubernetes.io/cni"),
            value: Sym::new(""),
            effect: TaintEffect::NoSchedule,
        });
        nodes[2] = Arc::new(n3);
        let pods = web_on_n1();
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        let first = run(&mut a, &nodes, &pods, &p, 0);
        let unneeded: Vec<&str> = first
            .scale_down
            .unneeded
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(unneeded, ["n2"]);
        let later = run(&mut a, &nodes, &pods, &p, 11 * MIN);
        let deleted: Vec<&str> = later
            .scale_down
            .deletions
            .iter()
            .map(|d| d.node.as_str())
            .collect();
        assert_eq!(deleted, ["n2"]);
    }

    /// A reconfiguration between loops keeps the unneeded clocks: a shorter unneeded time
    /// applies to the time already counted.
    #[test]
    fn new_options_apply_from_the_next_loop_and_keep_the_state() {
        let (nodes, p) = cluster(&["n1", "n2", "n3"], 3);
        let pods = web_on_n1();
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        assert_eq!(
            run(&mut a, &nodes, &pods, &p, 0).scale_down.unneeded.len(),
            2
        );
        // At 6 minutes, under the default 10 minutes, nothing goes.
        assert!(
            run(&mut a, &nodes, &pods, &p, 6 * MIN)
                .scale_down
                .deletions
                .is_empty()
        );
        let mut o = AutoscalerOptions::default();
        o.scale_down.unneeded_time = std::time::Duration::from_secs(5 * 60);
        o.cluster_state
            .set_max_node_provision_time(std::time::Duration::from_secs(60))
            .unwrap();
        a.set_options(o);
        assert_eq!(
            a.cluster_state().options.max_node_provision_time,
            std::time::Duration::from_secs(60)
        );
        // The clocks started at 0 still run: at 7 minutes both are past the new 5 minutes.
        let after = run(&mut a, &nodes, &pods, &p, 7 * MIN);
        assert_eq!(
            after.scale_down.deletions.len(),
            2,
            "{:?}",
            after.scale_down
        );
    }
}

#[cfg(test)]
mod state_tests {
    use super::*;
    use crate::outcome::{ActionError, ErrorClass};
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
    use autoscaler_model::{
        CLUSTER_UNHEALTHY, DELETE_UNREGISTERED, FIX_NODE_GROUP_SIZE, SCALE_UP_FAILED,
        SCALE_UP_TIMED_OUT,
    };
    use autoscaler_model::{
        Instance, InstanceError, InstanceErrorClass, InstanceState, StaticProvider,
    };

    const SEC: i64 = 1000;
    const MIN: i64 = 60 * SEC;
    /// A clock value far from zero, as real loops see.
    const T0: i64 = 1_700_000_000_000;

    fn node(name: &str, ready: bool) -> Arc<Node> {
        let b = NodeBuilder::new(name, 4000, 16 * GI).with_provider_id(&format!("test:///{name}"));
        if ready { b.arc() } else { b.not_ready().arc() }
    }

    fn instance(id: &str, state: InstanceState, error: Option<InstanceError>) -> Instance {
        Instance {
            id: Arc::from(format!("test:///{id}")),
            state,
            error,
        }
    }

    fn group(id: &str, nodes: &[Arc<Node>]) -> NodeGroup {
        let mut g = NodeGroup::new(id, 0, 20, nodes.len());
        g = g.with_instances(
            nodes
                .iter()
                .map(|n| instance(n.name.as_str(), InstanceState::Running, None))
                .collect(),
        );
        g
    }

    fn busy(node: &str, cpu: i64) -> Arc<Pod> {
        PodBuilder::new(&format!("busy-{node}"), cpu, GI)
            .owner("ReplicaSet", "busy")
            .node_name(node)
            .arc()
    }

    fn pending(name: &str) -> Arc<Pod> {
        PodBuilder::new(name, 3000, GI)
            .owner("ReplicaSet", "web")
            .unschedulable()
            .arc()
    }

    /// Groups `a` and `b`, one full 4-CPU node each, one pending 3-CPU pod.
    fn two_groups() -> (Vec<Arc<Node>>, Vec<Arc<Pod>>, StaticProvider) {
        let (a1, b1) = (node("a1", true), node("b1", true));
        let p = StaticProvider::new(vec![
            group("a", std::slice::from_ref(&a1)),
            group("b", std::slice::from_ref(&b1)),
        ]);
        let pods = vec![busy("a1", 4000), busy("b1", 4000), pending("p")];
        (vec![a1, b1], pods, p)
    }

    fn run(
        a: &mut Autoscaler,
        nodes: &[Arc<Node>],
        pods: &[Arc<Pod>],
        p: &StaticProvider,
        now: i64,
    ) -> LoopOutcome {
        let view = ClusterView::of(nodes, pods, p);
        a.run_once(LoopInput::new(&view, now))
    }

    /// Applies the actions as a provider would: increases create instances (in `Creating`, with
    /// `error` if given), decreases drop instances without a node, deletions drop instances.
    fn apply(p: &mut StaticProvider, actions: &[Action], error: Option<InstanceError>) {
        for action in actions {
            match action {
                Action::IncreaseSize {
                    group, new_target, ..
                } => {
                    let g = p.groups_mut().iter_mut().find(|g| g.id() == group).unwrap();
                    while g.instances().len() < *new_target {
                        let id = format!("{}-new{}", group, g.instances().len());
                        g.push_instance(instance(&id, InstanceState::Creating, error.clone()));
                    }
                    g.set_target_size(*new_target);
                }
                Action::DecreaseTargetSize { group, delta } => {
                    let g = p.groups_mut().iter_mut().find(|g| g.id() == group).unwrap();
                    // As Cluster API's provider: never below the instances that exist.
                    let live = g
                        .instances()
                        .iter()
                        .filter(|i| i.state != InstanceState::Deleting)
                        .count();
                    assert!(
                        g.target_size() - delta >= live,
                        "target {} - {delta} below {live} live instances",
                        g.target_size()
                    );
                    for _ in 0..*delta {
                        if let Some(i) = g
                            .instances()
                            .iter()
                            .rposition(|i| i.state == InstanceState::Creating)
                        {
                            let removed = g.instances()[i].id.clone();
                            g.retain_instances(|i| i.id != removed);
                        }
                    }
                    g.set_target_size(g.target_size() - delta);
                }
                Action::DeleteInstances {
                    group, instances, ..
                } => {
                    let g = p.groups_mut().iter_mut().find(|g| g.id() == group).unwrap();
                    g.retain_instances(|i| !instances.contains(&i.id));
                    g.set_target_size(g.target_size() - instances.len());
                }
                _ => {}
            }
        }
        p.reindex();
    }

    fn increases(out: &LoopOutcome) -> Vec<(String, usize)> {
        out.actions
            .iter()
            .filter_map(|a| match a {
                Action::IncreaseSize { group, delta, .. } => Some((group.to_string(), *delta)),
                _ => None,
            })
            .collect()
    }

    fn reasons(out: &LoopOutcome) -> Vec<&'static str> {
        out.events.iter().map(|e| e.reason).collect()
    }

    #[test]
    fn a_timed_out_scale_up_is_reverted_backed_off_and_sought_elsewhere() {
        let (nodes, pods, mut p) = two_groups();
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        let first = run(&mut a, &nodes, &pods, &p, T0);
        let grown = increases(&first);
        assert_eq!(grown.len(), 1, "{:?}", first.actions);
        let (x, other) = if grown[0].0 == "a" {
            ("a", "b")
        } else {
            ("b", "a")
        };
        apply(&mut p, &first.actions, None);

        // The node is on its way: the same pod causes no second scale-up.
        let out = run(&mut a, &nodes, &pods, &p, T0 + 10 * SEC);
        assert!(increases(&out).is_empty(), "{:?}", out.actions);
        let gx = out
            .status
            .groups
            .iter()
            .find(|g| g.id.as_str() == x)
            .unwrap();
        assert_eq!(gx.upcoming, 1);
        assert_eq!(gx.requests.len(), 1);
        let out = run(&mut a, &nodes, &pods, &p, T0 + 15 * MIN);
        assert!(out.actions.is_empty(), "{:?}", out.actions);

        // Past the provision time: back off and grow the other group in the same loop. The
        // instance exists, so the target is not lowered for it (that would remove a machine
        // the provider picks, maybe a healthy one); it is deleted by name once it is itself
        // past the provision time.
        let out = run(&mut a, &nodes, &pods, &p, T0 + 15 * MIN + 5 * SEC);
        assert!(
            !out.actions
                .iter()
                .any(|a| matches!(a, Action::DecreaseTargetSize { .. })),
            "{:?}",
            out.actions
        );
        assert_eq!(increases(&out), vec![(other.to_string(), 1)]);
        assert!(
            reasons(&out).contains(&SCALE_UP_TIMED_OUT),
            "{:?}",
            out.events
        );
        let gx = out
            .status
            .groups
            .iter()
            .find(|g| g.id.as_str() == x)
            .unwrap();
        let b = gx.backoff.as_ref().expect("backed off");
        assert_eq!(b.reason.code, "timeout");
        assert_eq!(b.until_ms, T0 + 20 * MIN + 5 * SEC);
        assert!(
            gx.blocked_reason()
                .unwrap()
                .starts_with("in backoff after failed scale-up")
        );
        apply(&mut p, &out.actions, None);

        // Next loop: the instance first seen at T0 + 10 s is now past the provision time and
        // is deleted by name, once; nothing else (the other group's node is on its way).
        let out = run(&mut a, &nodes, &pods, &p, T0 + 15 * MIN + 15 * SEC);
        assert_eq!(
            out.actions,
            vec![Action::DeleteInstances {
                group: x.into(),
                instances: vec![Arc::from(format!("test:///{x}-new1"))],
                reason: DELETE_UNREGISTERED,
            }]
        );
        apply(&mut p, &out.actions, None);
        let out = run(&mut a, &nodes, &pods, &p, T0 + 15 * MIN + 25 * SEC);
        assert!(out.actions.is_empty(), "{:?}", out.actions);
    }

    #[test]
    fn a_stockout_backs_off_at_once_deletes_the_instances_and_grows_another_group() {
        let (nodes, pods, mut p) = two_groups();
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        let first = run(&mut a, &nodes, &pods, &p, T0);
        let x = increases(&first)[0].0.clone();
        let stockout = InstanceError {
            class: InstanceErrorClass::OutOfResources,
            code: "ZONE_RESOURCE_POOL_EXHAUSTED".into(),
            message: "no capacity in zone".into(),
        };
        apply(&mut p, &first.actions, Some(stockout));
        let out = run(&mut a, &nodes, &pods, &p, T0 + 10 * SEC);
        let failed_id: Arc<str> = Arc::from(format!("test:///{x}-new1"));
        assert_eq!(
            out.actions[0],
            Action::DeleteInstances {
                group: x.as_str().into(),
                instances: vec![failed_id],
                reason: SCALE_UP_FAILED
            }
        );
        let grown = increases(&out);
        assert_eq!(grown.len(), 1, "{:?}", out.actions);
        assert_ne!(grown[0].0, x);
        assert!(reasons(&out).contains(&SCALE_UP_FAILED));
        let gx = out
            .status
            .groups
            .iter()
            .find(|g| g.id.as_str() == x)
            .unwrap();
        let b = gx.backoff.as_ref().expect("backed off");
        assert_eq!(b.reason.class, InstanceErrorClass::OutOfResources);
        assert_eq!(b.until_ms, T0 + 10 * SEC + 5 * MIN);

        // The shell has not deleted the instance yet: no duplicate deletion, no new scale-up.
        let mut lagging = p.clone();
        apply(&mut lagging, &out.actions[1..], None);
        let again = run(&mut a, &nodes, &pods, &lagging, T0 + 20 * SEC);
        assert!(again.actions.is_empty(), "{:?}", again.actions);
    }

    /// Eight nodes with `unready` of them unready, full, and one instance that never registered.
    fn unready_cluster(unready: usize) -> (Vec<Arc<Node>>, Vec<Arc<Pod>>, StaticProvider) {
        let nodes: Vec<Arc<Node>> = (0..8)
            .map(|i| node(&format!("n{i}"), i >= unready))
            .collect();
        let mut g = group("ng", &nodes);
        g.push_instance(instance("ghost", InstanceState::Running, None));
        g.set_target_size(g.target_size() + 1);
        let mut pods: Vec<Arc<Pod>> = nodes.iter().map(|n| busy(n.name.as_str(), 2000)).collect();
        pods.push(pending("p"));
        (nodes, pods, StaticProvider::new(vec![g]))
    }

    #[test]
    fn an_unhealthy_cluster_only_removes_unregistered_instances() {
        let (nodes, pods, p) = unready_cluster(4);
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        let out = run(&mut a, &nodes, &pods, &p, T0);
        assert!(!out.status.healthy);
        assert!(
            out.status
                .message
                .as_deref()
                .unwrap()
                .starts_with("Cluster is not ready for autoscaling")
        );
        assert!(reasons(&out).contains(&CLUSTER_UNHEALTHY));
        assert!(out.actions.is_empty(), "{:?}", out.actions);
        assert!(out.scale_up.result.increases.is_empty());
        assert!(out.scale_down.unneeded.is_empty());

        let out = run(&mut a, &nodes, &pods, &p, T0 + 16 * MIN);
        assert_eq!(
            out.actions,
            vec![Action::DeleteInstances {
                group: "ng".into(),
                instances: vec![Arc::from("test:///ghost")],
                reason: DELETE_UNREGISTERED
            }]
        );
        assert!(reasons(&out).contains(&DELETE_UNREGISTERED));
    }

    #[test]
    fn three_unready_of_eight_is_healthy_and_scales() {
        let (nodes, pods, mut p) = unready_cluster(3);
        // Without the instance that never registered.
        let g = &mut p.groups_mut()[0];
        let ghost = g.instances().last().map(|i| i.id.clone());
        g.retain_instances(|i| Some(&i.id) != ghost.as_ref());
        g.set_target_size(g.target_size() - 1);
        p.reindex();
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        let out = run(&mut a, &nodes, &pods, &p, T0);
        assert!(out.status.healthy);
        assert_eq!(out.status.unready, 3);
        assert!(out.status.groups[0].unhealthy.is_none());
        assert_eq!(increases(&out), vec![("ng".to_string(), 1)]);
        assert!(reasons(&out).contains(&SCALED_UP_GROUP));
    }

    /// An instance that never registers is deleted after the provision time; the excess it
    /// stood for times out like a scale-up, so the group is backed off too.
    #[test]
    fn an_instance_that_never_registers_is_deleted_and_its_group_backed_off() {
        let (nodes, pods, p) = unready_cluster(0);
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        let out = run(&mut a, &nodes, &pods, &p, T0);
        // The instance counts as upcoming and takes the pod.
        assert!(out.actions.is_empty(), "{:?}", out.actions);
        let out = run(&mut a, &nodes, &pods, &p, T0 + 15 * MIN + SEC);
        assert_eq!(
            out.actions,
            vec![Action::DeleteInstances {
                group: "ng".into(),
                instances: vec![Arc::from("test:///ghost")],
                reason: DELETE_UNREGISTERED
            }]
        );
        assert!(out.status.groups[0].backoff.is_some());
        assert!(out.status.groups[0].unhealthy.is_none());
    }

    /// Seed 004, third scenario: after a restart, a group with no node in the cluster and a
    /// target above what exists (instances stuck in creation, or none at all) is corrected
    /// within one provision time of the first loop, and backed off.
    #[test]
    fn a_restart_rebuilds_requests_and_corrects_a_stuck_group_within_one_provision_time() {
        for with_instances in [true, false] {
            let mut g = NodeGroup::new("stuck", 0, 10, 2);
            if with_instances {
                g = g.with_instances(vec![
                    instance("s1", InstanceState::Creating, None),
                    instance("s2", InstanceState::Creating, None),
                ]);
            }
            let p = StaticProvider::new(vec![g]);
            let mut a = Autoscaler::new(AutoscalerOptions::default());
            let first = run(&mut a, &[], &[], &p, T0);
            assert!(first.actions.is_empty());
            let status = &first.status.groups[0];
            assert_eq!(status.upcoming, 2);
            assert_eq!(status.requests.len(), 1);
            assert!(!status.requests[0].ours);
            assert!(run(&mut a, &[], &[], &p, T0 + 15 * MIN).actions.is_empty());

            let out = run(&mut a, &[], &[], &p, T0 + 15 * MIN + 10 * SEC);
            let expected = if with_instances {
                Action::DeleteInstances {
                    group: "stuck".into(),
                    instances: vec![Arc::from("test:///s1"), Arc::from("test:///s2")],
                    reason: DELETE_UNREGISTERED,
                }
            } else {
                Action::DecreaseTargetSize {
                    group: "stuck".into(),
                    delta: 2,
                }
            };
            assert_eq!(out.actions, vec![expected]);
            assert!(
                reasons(&out).contains(&FIX_NODE_GROUP_SIZE),
                "{:?}",
                out.events
            );
            assert!(out.status.groups[0].backoff.is_some());
            assert_eq!(out.status.groups[0].upcoming, 0);
        }
    }

    #[test]
    fn a_failed_provider_call_backs_off_at_once() {
        let (nodes, pods, mut p) = two_groups();
        let mut a = Autoscaler::new(AutoscalerOptions::default());
        let first = run(&mut a, &nodes, &pods, &p, T0);
        let x = increases(&first)[0].0.clone();
        // The call failed: the provider shows nothing new.
        let error = ActionError::new(ErrorClass::Unavailable, "quota exceeded");
        a.observe(
            &Outcome::ScaleUpFailed {
                group: x.as_str().into(),
                error,
            },
            T0 + SEC,
        );
        apply(&mut p, &[], None);
        let out = run(&mut a, &nodes, &pods, &p, T0 + 10 * SEC);
        assert!(reasons(&out).contains(&autoscaler_model::FAILED_TO_SCALE_UP_GROUP));
        let grown = increases(&out);
        assert_eq!(grown.len(), 1);
        assert_ne!(grown[0].0, x);
    }

    /// Eight 4-CPU nodes in two zones, some nearly idle (scale-down candidates), and pending
    /// pods that fit them: plain ones of two priorities, some spread over the zones, some
    /// keeping apart by host, one waiting for a preemption on its nominated node, one too big.
    fn placements_cluster() -> (Vec<Arc<Node>>, Vec<Arc<Pod>>, StaticProvider) {
        let nodes: Vec<Arc<Node>> = (0..8)
            .map(|i| {
                let name = format!("n{i}");
                NodeBuilder::new(&name, 4000, 16 * GI)
                    .with_provider_id(&format!("test:///{name}"))
                    .zone(if i % 2 == 0 { "a" } else { "b" })
                    .arc()
            })
            .collect();
        let p = StaticProvider::new(vec![group("g", &nodes)]);
        let mut pods: Vec<Arc<Pod>> = [3500, 300, 3000, 200, 500, 3900, 100, 1000]
            .iter()
            .enumerate()
            .map(|(i, &cpu)| busy(&format!("n{i}"), cpu))
            .collect();
        for i in 0..6 {
            let b = PodBuilder::new(&format!("plain-{i}"), 600, GI)
                .owner("ReplicaSet", "plain")
                .priority(if i % 3 == 0 { 10 } else { 0 });
            pods.push(b.unschedulable().arc());
        }
        for i in 0..4 {
            let b = PodBuilder::new(&format!("spread-{i}"), 400, GI)
                .owner("ReplicaSet", "spread")
                .label("app", "spread")
                .spread("app", "spread", "topology.kubernetes.io/zone", 1, None);
            pods.push(b.unschedulable().arc());
        }
        for i in 0..3 {
            let b = PodBuilder::new(&format!("apart-{i}"), 300, GI)
                .owner("ReplicaSet", "apart")
                .label("app", "apart")
                .anti_affinity("app", "apart", HOSTNAME_LABEL);
            pods.push(b.unschedulable().arc());
        }
        let nominated = PodBuilder::new("nominated", 2000, GI)
            .owner("ReplicaSet", "nominated")
            .with(|p| p.nominated_node_name = Some(Sym::new("n3")));
        pods.push(nominated.unschedulable().arc());
        pods.push(
            PodBuilder::new("huge", 8000, GI)
                .owner("ReplicaSet", "huge")
                .unschedulable()
                .arc(),
        );
        (nodes, pods, p)
    }

    /// Scale-down plans on the pods the scale-up filter placed (no upcoming node: the fork is
    /// reused) exactly as on the same pods placed again, over loops that find nodes unneeded
    /// and then delete them; and those placements matter (without the pending pods the plan
    /// differs).
    #[test]
    fn reused_placements_give_the_same_scale_down_plan_as_placing_again() {
        let (nodes, pods, p) = placements_cluster();
        let mut options = AutoscalerOptions::default();
        options.scale_down.delay_after_add = std::time::Duration::ZERO;
        let mut reusing = Autoscaler::new(options.clone());
        let mut placing = Autoscaler::new(options.clone());
        placing.reuse_placements = false;
        let mut without_pending = Autoscaler::new(options);
        let bound: Vec<Arc<Pod>> = pods
            .iter()
            .filter(|p| p.node_name.is_some())
            .cloned()
            .collect();
        for step in 0..3 {
            let now = T0 + step * 11 * MIN;
            let a = run(&mut reusing, &nodes, &pods, &p, now);
            let b = run(&mut placing, &nodes, &pods, &p, now);
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "step {step}");
            // Every pending pod fits but the huge one and the nominated one (set aside).
            assert_eq!(a.scale_up.fit_existing.len(), 13, "step {step}");
            let c = run(&mut without_pending, &nodes, &bound, &p, now);
            assert_ne!(
                format!("{:?}", a.scale_down),
                format!("{:?}", c.scale_down),
                "step {step}"
            );
            if step > 0 {
                assert!(!a.scale_down.deletions.is_empty(), "step {step}");
            }
        }
    }

    /// The scale-up's fork holds only the view's nodes when no node is upcoming, and upcoming
    /// nodes as well when one is: then scale-down must not plan on it.
    #[test]
    fn the_scale_up_fork_is_reusable_only_without_upcoming_nodes() {
        let (nodes, pods, p) = placements_cluster();
        let view = ClusterView::of(&nodes, &pods, &p);
        let mut warnings = Vec::new();
        let mut snapshot = build_snapshot(&view, &mut warnings);
        let config = ScaleUpConfig::default();
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for (upcoming, reusable) in [([0], true), ([2], false)] {
            let (up, placed) = snapshot.forked(|s| {
                scale_up_on_fork(
                    s,
                    &view,
                    &config,
                    T0,
                    &|_, _| None,
                    Some(&upcoming),
                    &mut rng,
                    &mut Unlimited,
                    &mut Timer::off(),
                )
            });
            assert_eq!(placed, reusable, "upcoming {upcoming:?}");
            assert_eq!(up.upcoming, upcoming);
        }
        assert_eq!(snapshot.depth(), 0);
    }

    /// Nodes in snapshot order with their pods in order, sums and ports; namespace labels.
    fn picture(
        s: &ClusterSnapshot,
    ) -> Vec<(Sym, Vec<String>, String, Vec<autoscaler_model::HostPort>)> {
        s.nodes()
            .map(|(_, i)| {
                (
                    i.node.name,
                    i.pods.iter().map(|p| p.key()).collect(),
                    format!("{:?}", i.requested),
                    i.used_ports().to_vec(),
                )
            })
            .collect()
    }

    /// The kept snapshot follows views changed at random (pods added anywhere, removed,
    /// replaced by a new object, moved, blocks of the list reordered; nodes replaced, removed
    /// with their pods, added) and always equals a fresh build, its pod list being the view's.
    #[test]
    fn the_kept_snapshot_follows_random_changes_of_the_lists() {
        use rand::Rng;
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let p = StaticProvider::new(vec![]);
        let mut nodes: Vec<Arc<Node>> = (0..6).map(|i| node(&format!("n{i}"), true)).collect();
        let serial = std::cell::Cell::new(0);
        let pod = |rng: &mut ChaCha8Rng, nodes: &[Arc<Node>]| {
            serial.set(serial.get() + 1);
            let b = PodBuilder::new(&format!("p{}", serial.get()), 100, GI).label("app", "x");
            match rng.random_range(0..8) {
                0 => b.unschedulable().arc(),
                1 => b
                    .node_name(nodes[0].name.as_str())
                    .with(|p| p.phase = autoscaler_model::PodPhase::Succeeded)
                    .arc(),
                _ => b
                    .node_name(nodes[rng.random_range(0..nodes.len())].name.as_str())
                    .arc(),
            }
        };
        let mut pods: Vec<Arc<Pod>> = (0..40).map(|_| pod(&mut rng, &nodes)).collect();
        let mut cache = SnapshotCache::default();
        for step in 0..300 {
            for _ in 0..rng.random_range(0..4) {
                let len = pods.len();
                match rng.random_range(0..9) {
                    0 | 1 => {
                        let at = rng.random_range(0..=len);
                        pods.insert(at, pod(&mut rng, &nodes));
                    }
                    2 if len > 0 => {
                        pods.remove(rng.random_range(0..len));
                    }
                    3 if len > 0 => {
                        let at = rng.random_range(0..len);
                        pods[at] = Arc::new((*pods[at]).clone());
                    }
                    4 if len > 1 => {
                        let from = rng.random_range(0..len);
                        let moved = pods.remove(from);
                        pods.insert(rng.random_range(0..len), moved);
                    }
                    5 if len > 1 => {
                        let at = rng.random_range(0..len - 1);
                        let end = (at + rng.random_range(2..12)).min(len);
                        pods[at..end].reverse();
                    }
                    6 => {
                        let at = rng.random_range(0..nodes.len());
                        nodes[at] = Arc::new((*nodes[at]).clone());
                    }
                    7 if nodes.len() > 2 => {
                        let gone = nodes.remove(rng.random_range(0..nodes.len()));
                        pods.retain(|p| p.node_name != Some(gone.name));
                    }
                    _ => {
                        serial.set(serial.get() + 1);
                        let at = rng.random_range(0..=nodes.len());
                        nodes.insert(at, node(&format!("m{}", serial.get()), true));
                    }
                }
            }
            let view = ClusterView::of(&nodes, &pods, &p);
            let mut warnings = Vec::new();
            cache.sync(&view, &mut warnings);
            let built = build_snapshot(&view, &mut Vec::new());
            assert!(warnings.is_empty() && cache.valid, "step {step}");
            assert_eq!(picture(&cache.snapshot), picture(&built), "step {step}");
            assert_eq!(cache.snapshot.pod_count(), built.pod_count(), "step {step}");
            let listed: Vec<usize> = pods.iter().filter(|p| in_snapshot(p)).map(addr).collect();
            let kept: Vec<usize> = cache.pods.iter().map(|e| e.0).collect();
            assert_eq!(kept, listed, "step {step}");
            let outside: Vec<usize> = pods.iter().filter(|p| !in_snapshot(p)).map(addr).collect();
            assert_eq!(cache.outside.iter().map(addr).collect::<Vec<_>>(), outside);
        }
    }

    /// Runs `run_once` over a sequence of changing views with the kept snapshot and with a
    /// clone of the autoscaler (which starts without one): same outcome, and the kept snapshot
    /// equals a fresh [`build_snapshot`] of each view.
    #[test]
    fn the_kept_snapshot_equals_a_fresh_build_over_changing_views() {
        let ns_a = NamespaceLabels {
            name: Sym::new("default"),
            labels: autoscaler_model::Labels::from_pairs([("team", "a")]),
        };
        let ns_b = NamespaceLabels {
            name: Sym::new("default"),
            labels: autoscaler_model::Labels::from_pairs([("team", "b")]),
        };
        let mk = |name: &str| node(name, true);
        let pod = |name: &str, on: &str, cpu: i64| {
            PodBuilder::new(name, cpu, GI)
                .owner("ReplicaSet", "rs")
                .label("app", name)
                .node_name(on)
                .arc()
        };
        let (n0, n1, n2, n3) = (mk("n0"), mk("n1"), mk("n2"), mk("n3"));
        let p = StaticProvider::new(vec![group(
            "g",
            &[n0.clone(), n1.clone(), n2.clone(), n3.clone()],
        )]);
        let a0 = pod("a0", "n0", 500);
        let a1 = pod("a1", "n0", 700);
        let b0 = pod("b0", "n1", 300);
        let c0 = pod("c0", "n2", 1000);
        let d0 = PodBuilder::new("d0", 200, GI)
            .node_name("n3")
            .host_port(8080)
            .arc();
        let pend = pending("pend");
        // A pod moved from n0 to n1 (same name, new object), a pod with a changed spec.
        let a1_moved = pod("a1", "n1", 700);
        let b0_bigger = pod("b0", "n1", 1500);
        let n4 = mk("n4");
        let n1_relabelled = NodeBuilder::new("n1", 4000, 16 * GI)
            .with_provider_id("test:///n1")
            .label("x", "y")
            .arc();
        let done = PodBuilder::new("e0", 100, GI)
            .node_name("n3")
            .with(|p| p.phase = autoscaler_model::PodPhase::Succeeded)
            .arc();
        let orphan = pod("o0", "gone", 100);
        type View = (Vec<Arc<Node>>, Vec<Arc<Pod>>, Vec<NamespaceLabels>);
        let views: Vec<View> = vec![
            (
                vec![n0.clone(), n1.clone(), n2.clone(), n3.clone()],
                vec![
                    a0.clone(),
                    a1.clone(),
                    b0.clone(),
                    c0.clone(),
                    d0.clone(),
                    pend.clone(),
                ],
                vec![ns_a.clone()],
            ),
            // Unchanged.
            (
                vec![n0.clone(), n1.clone(), n2.clone(), n3.clone()],
                vec![
                    a0.clone(),
                    a1.clone(),
                    b0.clone(),
                    c0.clone(),
                    d0.clone(),
                    pend.clone(),
                ],
                vec![ns_a.clone()],
            ),
            // A pod moves, another's spec changes, the pod order changes, namespace labels change.
            (
                vec![n0.clone(), n1.clone(), n2.clone(), n3.clone()],
                vec![
                    a1_moved.clone(),
                    b0_bigger.clone(),
                    a0.clone(),
                    c0.clone(),
                    d0.clone(),
                    pend.clone(),
                ],
                vec![ns_b.clone()],
            ),
            // A node goes with its pod, a new one comes first in the view, a pod finishes.
            (
                vec![n4.clone(), n0.clone(), n1.clone(), n3.clone()],
                vec![
                    a1_moved.clone(),
                    b0_bigger.clone(),
                    a0.clone(),
                    done.clone(),
                    d0.clone(),
                    pend.clone(),
                    pod("f0", "n4", 400),
                ],
                vec![ns_b.clone()],
            ),
            // A node object replaced (its pods stay), nodes reordered, pods back on n0.
            (
                vec![n3.clone(), n1_relabelled.clone(), n0.clone(), n4.clone()],
                vec![
                    a1.clone(),
                    a0.clone(),
                    b0_bigger.clone(),
                    d0.clone(),
                    pend.clone(),
                ],
                vec![],
            ),
            // An inconsistent view (a pod on an unknown node): warned about, as a fresh build.
            (
                vec![n3.clone(), n1_relabelled.clone(), n0.clone()],
                vec![a1.clone(), orphan.clone(), d0.clone(), pend.clone()],
                vec![],
            ),
            // Back to a consistent view.
            (
                vec![n0.clone(), n1.clone(), n2.clone(), n3.clone()],
                vec![
                    a0.clone(),
                    a1.clone(),
                    b0.clone(),
                    c0.clone(),
                    d0.clone(),
                    pend.clone(),
                ],
                vec![ns_a.clone()],
            ),
            (
                vec![n0.clone(), n1.clone(), n2.clone(), n3.clone()],
                vec![d0.clone(), c0.clone(), b0.clone(), a1.clone(), a0.clone()],
                vec![ns_a.clone()],
            ),
            // A new pod before the kept pods of its node, the others in the same order.
            (
                vec![n0.clone(), n1.clone(), n2.clone(), n3.clone()],
                vec![
                    d0.clone(),
                    c0.clone(),
                    b0.clone(),
                    pod("a00", "n0", 100),
                    a1.clone(),
                    a0.clone(),
                ],
                vec![ns_a.clone()],
            ),
        ];
        let mut kept = Autoscaler::new(AutoscalerOptions::default());
        for (step, (nodes, pods, namespaces)) in views.iter().enumerate() {
            let view = ClusterView {
                nodes,
                pods,
                daemonsets: &[],
                namespaces,
                provider: &p,
                pdbs: &[],
                storage: Storage::none(),
            };
            let mut fresh = kept.clone();
            let now = T0 + step as i64 * 10 * SEC;
            let out = kept.run_once(LoopInput::new(&view, now));
            let expected = fresh.run_once(LoopInput::new(&view, now));
            assert_eq!(format!("{out:?}"), format!("{expected:?}"), "step {step}");
            let mut warnings = Vec::new();
            let built = build_snapshot(&view, &mut warnings);
            assert_eq!(
                picture(&kept.cache.snapshot),
                picture(&built),
                "step {step}"
            );
            assert_eq!(
                kept.cache.snapshot.pod_count(),
                built.pod_count(),
                "step {step}"
            );
            let ns = Sym::new("default");
            assert_eq!(
                kept.cache.snapshot.namespace_labels(ns),
                built.namespace_labels(ns),
                "step {step}"
            );
            assert_eq!(kept.cache.snapshot.depth(), 0);
            assert_eq!(kept.cache.valid, warnings.is_empty(), "step {step}");
        }
    }
}
