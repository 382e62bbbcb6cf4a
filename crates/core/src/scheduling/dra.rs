//! kube-scheduler's DynamicResources filter over a [`ClusterSnapshot`], with its structured
//! allocator: a pod with ResourceClaims fits a node only if every claim is already allocated to
//! devices the node reaches (the allocation's node selector matches it), or can be allocated from
//! devices free on the node (its own ResourceSlices, those whose node selector matches it, and
//! those of every node). A claim shared by several pods is allocated once.
//!
//! Allocations made during a simulation live in the snapshot ([`DraState`]): inside a fork,
//! placing a pod allocates its unallocated claims on the node, removing the last pod using a
//! claim frees its devices (as the resource claim controller deallocates a claim nobody uses),
//! and `revert` undoes both. Outside any fork the snapshot follows the view, whose claims say
//! what is allocated. Only pods with claims ([`Pod::resource_claims`]) reach this module: for every
//! other pod the filter is one emptiness test. It never panics; a CEL selector that fails is a
//! reason on the pod.
//!
//! Devices are picked as the structured allocator picks them: greedily first (each request's
//! first free devices, in slice order), which is the allocator's own first try; when that fails
//! and another pick could succeed (several requests compete), or when it could be wrong (a
//! claim with `matchAttribute` constraints), the allocator's full search with backtracking runs
//! ([`crate::scheduling::dra_search`], bounded in steps). As the allocator: an `adminAccess`
//! request may take devices in use, and devices other claims of the pod took, but never one
//! its own claim took; a claim needing more than 32 devices (an `All` request counting every
//! matching device the node reaches, in use or not) is refused with the allocator's error.
//!
//! The filter keeps its pick; Reserve, which follows it for the same pod, node and snapshot
//! version (check, then place), allocates those devices instead of resolving and picking again.
//! Every mutation of the snapshot, a revert included, bumps its version, so a kept pick never
//! outlives the state it was made in.
//!
//! Known simplifications, besides those of `autoscaler_model`'s DRA objects ([`Dra`]): a claim
//! made from a template that the controller has not created yet is simulated as that controller
//! will make it, named `<pod>-<entry>`.

use std::collections::hash_map::Entry;
use std::fmt;
use std::sync::{Arc, Mutex};

use hashbrown::hash_map::EntryRef;
use rustc_hash::{FxBuildHasher, FxHashMap};
use smallvec::SmallVec;

use crate::scheduling::dra_search::{
    self, DeviceSource, MAX_RESULTS, MAX_SEARCH_STEPS, SearchError, allocate_devices,
};
use crate::scheduling::predicates::{Unfit, node_selector_matches};
use crate::scheduling::snapshot::{ClusterSnapshot, NodeId, NodeInfo};
use autoscaler_model::{
    AllocatedDevice, AllocationMode, AllocationNodes, CelSelector, ClaimAllocation, ClaimKey,
    ClaimSpec, DeviceId, Dra, MAX_RESERVED_FOR, Node, NodeSelector, Pod, PodClaim, PodClaimSource,
    PodName, ResourceSlice, SliceMatches, SliceReach, Subrequest, Sym,
};

/// A pool by driver and name.
type PoolKey<'a> = (Sym, &'a Arc<str>);

/// Why the DynamicResources plugin rejects a pod (Display = kube-scheduler's text).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DraUnfit {
    /// PreFilter: a claim the pod names does not exist.
    ClaimNotFound(Arc<str>),
    /// PreFilter: the template a pod's claim is made from does not exist.
    TemplateNotFound(Arc<str>),
    /// PreFilter: a claim the pod names is being deleted.
    ClaimDeleting(Arc<str>),
    /// PreFilter: an allocated claim is reserved for as many pods as it can be.
    ClaimInUse,
    /// PreFilter: a request names a device class that does not exist.
    ClassNotFound {
        /// The request (`request` or `request/subrequest`).
        request: Arc<str>,
        /// The class.
        class: Arc<str>,
    },
    /// PreFilter: the cluster's DRA objects are not known (the API server does not serve
    /// `resource.k8s.io/v1`), so the claims cannot be simulated.
    NotSimulated,
    /// Filter: a CEL selector failed to compile or evaluate.
    Selector(Arc<str>),
    /// Filter: an allocated claim's devices are not reachable from the node.
    NotAvailable,
    /// Filter: the unallocated claims cannot all be allocated from the node's free devices.
    CannotAllocate,
    /// Filter: the allocator's search gave up (its step bound, our stand-in for the filter's
    /// timeout).
    TimedOut,
    /// Filter: the allocator refused a claim whose `All` request's devices cannot keep one of
    /// its constraints.
    Constraint(Arc<str>),
    /// Filter: the allocator refused a claim whose requests need more devices than one
    /// allocation holds (an `All` request counting every matching device the node reaches).
    TooManyDevices {
        /// The claim, as `namespace/name`.
        claim: Arc<str>,
        /// The fewest devices its requests need.
        devices: usize,
    },
}

impl fmt::Display for DraUnfit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DraUnfit::ClaimNotFound(c) => write!(f, "resourceclaim.resource.k8s.io \"{c}\" not found"),
            DraUnfit::TemplateNotFound(t) => {
                write!(f, "resourceclaimtemplate.resource.k8s.io \"{t}\" not found")
            }
            DraUnfit::ClaimDeleting(c) => write!(f, "resourceclaim \"{c}\" is being deleted"),
            DraUnfit::ClaimInUse => f.write_str("resourceclaim in use"),
            DraUnfit::ClassNotFound { request, class } => {
                write!(f, "request {request}: device class {class} does not exist")
            }
            DraUnfit::NotSimulated => f.write_str(
                "resource claims cannot be simulated: the cluster does not serve resource.k8s.io/v1",
            ),
            DraUnfit::Selector(e) => f.write_str(e),
            DraUnfit::NotAvailable => f.write_str("resourceclaim not available on the node"),
            DraUnfit::CannotAllocate => f.write_str("cannot allocate all claims"),
            DraUnfit::TimedOut => f.write_str("timed out trying to allocate devices"),
            DraUnfit::Constraint(e) => f.write_str(e),
            DraUnfit::TooManyDevices { claim, devices } => write!(
                f,
                "claim {claim}: number of requested devices {devices} exceeds the claim limit of \
                 {MAX_RESULTS}"
            ),
        }
    }
}

impl DraUnfit {
    /// Whether the pod was rejected before any node was looked at.
    pub fn is_pre_filter(&self) -> bool {
        matches!(
            self,
            DraUnfit::ClaimNotFound(_)
                | DraUnfit::TemplateNotFound(_)
                | DraUnfit::ClaimDeleting(_)
                | DraUnfit::ClaimInUse
                | DraUnfit::ClassNotFound { .. }
                | DraUnfit::NotSimulated
        )
    }

    /// Whether removing pods from the node could not help (the scheduler's
    /// `UnschedulableAndUnresolvable`): everything but freeing devices.
    pub fn is_unresolvable(&self) -> bool {
        !matches!(self, DraUnfit::CannotAllocate)
    }
}

/// One claim of a pod, resolved against the DRA objects and the simulation's allocations.
#[derive(Clone, Debug)]
struct Resolved {
    key: ClaimKey,
    spec: Arc<ClaimSpec>,
    allocation: Option<Arc<ClaimAllocation>>,
}

/// The allocations a simulation changed, and how many pods of the snapshot use each claim.
#[derive(Clone, Debug, Default)]
pub(crate) struct DraState {
    /// Claims whose allocation the simulation set (`Some`) or cleared (`None`).
    changed: FxHashMap<ClaimKey, Option<Arc<ClaimAllocation>>>,
    /// Per device, allocations added (positive) or removed (negative) by the simulation
    /// (hashbrown's map for its entry by reference, see [`DraState::count`]).
    taken: hashbrown::HashMap<DeviceId, i32, FxBuildHasher>,
    /// Pods of the snapshot using each claim.
    users: FxHashMap<ClaimKey, u32>,
    /// Per template node, how many of its own devices have an entry in `taken` (none: the
    /// filter skips looking its devices up).
    node_taken: FxHashMap<Sym, u32>,
    /// The filter's last pick, for Reserve.
    pick: PickCache,
    /// The inverses of the changes made inside forks, newest last: the snapshot's undo log
    /// records only that a change was made (see [`DraState::undo_last`]), so its entries stay
    /// small for every other change.
    undo: Vec<DraUndo>,
}

/// The devices the filter last picked for a pod's unallocated claims on a node, so that
/// Reserve, which follows at once for the same pod, node and snapshot version, allocates them
/// without resolving and picking again. Any mutation of the snapshot (a revert included) bumps
/// its version, so an entry never outlives the state it was picked in. A clone starts empty.
#[derive(Default)]
struct PickCache(Mutex<Option<CachedPick>>);

impl Clone for PickCache {
    fn clone(&self) -> Self {
        PickCache::default()
    }
}

impl fmt::Debug for PickCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PickCache")
    }
}

/// One cached pick and what it was picked for.
struct CachedPick {
    version: u64,
    node: NodeId,
    namespace: Sym,
    pod: PodName,
    /// The pod's claim entries (they, its namespace and name decide the claims).
    claims: SmallVec<[PodClaim; 2]>,
    /// The claims the pick allocates, in order.
    unallocated: SmallVec<[ClaimKey; 2]>,
    picks: Picks,
}

impl CachedPick {
    fn is_for(&self, version: u64, node: NodeId, pod: &Pod) -> bool {
        self.version == version
            && self.node == node
            && self.namespace == pod.namespace
            && self.pod.text_hash() == pod.name.text_hash()
            && *self.pod == *pod.name
            && self.claims[..] == pod.resource_claims[..]
    }
}

/// A device picked for one of a pod's unallocated claims.
#[derive(Clone, Debug)]
struct DevicePlace {
    /// The claim's place among the unallocated claims.
    claim: usize,
    /// The pool's place among the slices the node reaches ([`reachable`]).
    pool: usize,
    /// The device's place in that slice.
    device: usize,
    /// The request (or `request/subrequest`) it satisfies.
    request: Arc<str>,
    admin_access: bool,
}

/// The devices picked for a pod's unallocated claims.
type Picks = SmallVec<[DevicePlace; 4]>;

/// The inverse of one allocation change.
#[derive(Clone, Debug)]
struct DraUndo {
    key: ClaimKey,
    old: Option<Option<Arc<ClaimAllocation>>>,
}

impl DraState {
    /// The claim's allocation as the simulation sees it.
    fn allocation(&self, dra: &Dra, key: &ClaimKey) -> Option<Arc<ClaimAllocation>> {
        match self.changed.get(key) {
            Some(a) => a.clone(),
            None => dra.claim_by_key(key).and_then(|c| c.allocation.clone()),
        }
    }

    /// [`DraState::allocation`] of a claim whose allocation in the view is `base` (the caller
    /// looked the claim up already).
    fn allocation_over(
        &self,
        key: &ClaimKey,
        base: Option<&Arc<ClaimAllocation>>,
    ) -> Option<Arc<ClaimAllocation>> {
        if !self.changed.is_empty()
            && let Some(a) = self.changed.get(key)
        {
            return a.clone();
        }
        base.cloned()
    }

    /// Keeps the filter's pick for Reserve.
    fn remember(&self, pick: CachedPick) {
        let mut cache = match self.pick.0.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        *cache = Some(pick);
    }

    /// The filter's pick for `pod` on `node` at snapshot `version`, if it was the last one.
    fn take_pick(&self, version: u64, node: NodeId, pod: &Pod) -> Option<CachedPick> {
        let mut cache = match self.pick.0.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        if cache.as_ref()?.is_for(version, node, pod) {
            cache.take()
        } else {
            None
        }
    }

    /// Whether a device is allocated exclusively by some claim.
    fn in_use(&self, dra: &Dra, id: &DeviceId) -> bool {
        let base = i32::from(id.node.is_none() && dra.is_allocated(id));
        base + self.taken.get(id).copied().unwrap_or(0) > 0
    }

    /// Whether `pool` is a template's copy (`node` set) none of whose devices the simulation
    /// took: such a copy is never allocated in the cluster's claims, only the simulation's
    /// allocations on that very node can hold its devices.
    fn untaken_copy(&self, pool: &Pool<'_>) -> bool {
        pool.node
            .is_some_and(|node| !self.node_taken.contains_key(&node))
    }

    fn count(&mut self, allocation: Option<&Arc<ClaimAllocation>>, by: i32) {
        for d in allocation.iter().flat_map(|a| &a.devices) {
            if d.admin_access {
                continue;
            }
            // One hash of the id (strings) a device; the id is cloned only for a device not
            // counted yet (a new entry): undoing an allocation finds every one of its devices
            // counted.
            let (before, after) = match self.taken.entry_ref(&d.id) {
                EntryRef::Occupied(mut e) => {
                    let before = *e.get();
                    let after = before + by;
                    if after == 0 {
                        e.remove();
                    } else {
                        *e.get_mut() = after;
                    }
                    (before, after)
                }
                EntryRef::Vacant(e) => {
                    if by != 0 {
                        e.insert(by);
                    }
                    (0, by)
                }
            };
            if let Some(node) = d.id.node {
                if before == 0 && after != 0 {
                    *self.node_taken.entry(node).or_insert(0) += 1;
                } else if before != 0
                    && after == 0
                    && let Some(n) = self.node_taken.get_mut(&node)
                {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        self.node_taken.remove(&node);
                    }
                }
            }
        }
    }

    /// Sets the claim's allocation; keeps the inverse for [`DraState::undo_last`].
    fn set(&mut self, dra: &Dra, key: ClaimKey, new: Option<Arc<ClaimAllocation>>) {
        // One lookup of the claim among the changes: the replaced entry is the current
        // allocation when there was one. Counts add up per device, so counting the new
        // allocation first ends the same.
        self.count(new.as_ref(), 1);
        let old = self.changed.insert(key.clone(), new);
        let current = match &old {
            Some(a) => a.as_ref(),
            None => dra.claim_by_key(&key).and_then(|c| c.allocation.as_ref()),
        };
        self.count(current, -1);
        self.undo.push(DraUndo { key, old });
    }

    /// Undoes the newest change kept by [`DraState::set`] (the snapshot's revert, which meets
    /// its records of them newest first).
    pub(crate) fn undo_last(&mut self, dra: &Dra) {
        if let Some(u) = self.undo.pop() {
            self.undo(dra, u);
        }
    }

    /// Drops the kept inverses: the outermost fork was committed, nothing will be undone.
    pub(crate) fn forget_undo(&mut self) {
        self.undo.clear();
    }

    /// Applies an inverse recorded by [`DraState::set`].
    fn undo(&mut self, dra: &Dra, u: DraUndo) {
        let base = || dra.claim_by_key(&u.key).and_then(|c| c.allocation.clone());
        // One lookup: the change being undone is in `changed` (set inserted it), and it is
        // taken out here, to be put back only when an older change precedes it.
        let current = match self.changed.remove(&u.key) {
            Some(a) => a,
            None => base(),
        };
        self.count(current.as_ref(), -1);
        match u.old {
            Some(old) => {
                self.count(old.as_ref(), 1);
                self.changed.insert(u.key, old);
            }
            None => {
                let base = base();
                self.count(base.as_ref(), 1);
            }
        }
    }

    /// Counts `pod`'s claims as used by one more (`by` = 1) or one fewer (-1) pod.
    pub(crate) fn count_users(&mut self, pod: &Pod, by: i32) {
        // A pod with one claim (the usual case) counts its key without gathering the keys.
        if let [claim] = &pod.resource_claims[..] {
            self.count_user(claim.claim_key(pod.namespace, pod.name.as_arc()), by);
            return;
        }
        for key in claim_keys(pod) {
            self.count_user(key, by);
        }
    }

    /// Counts one more (`by` = 1) or one fewer (-1) pod using the claim `key`.
    fn count_user(&mut self, key: ClaimKey, by: i32) {
        // One lookup; the key is moved into a new entry, never cloned; an uncounted claim
        // stays uncounted when a user goes.
        match self.users.entry(key) {
            Entry::Occupied(mut e) => {
                let n = e.get().saturating_add_signed(by);
                if n == 0 {
                    e.remove();
                } else {
                    *e.get_mut() = n;
                }
            }
            Entry::Vacant(e) => {
                let n = 0u32.saturating_add_signed(by);
                if n != 0 {
                    e.insert(n);
                }
            }
        }
    }

    /// How many pods of the snapshot use the claim.
    fn users(&self, key: &ClaimKey) -> u32 {
        self.users.get(key).copied().unwrap_or(0)
    }
}

/// The keys of a pod's claims, each once.
fn claim_keys(pod: &Pod) -> SmallVec<[ClaimKey; 2]> {
    let mut out: SmallVec<[ClaimKey; 2]> = SmallVec::new();
    for c in &pod.resource_claims {
        let key = c.claim_key(pod.namespace, pod.name.as_arc());
        if !out.contains(&key) {
            out.push(key);
        }
    }
    out
}

impl ClusterSnapshot {
    /// The DRA objects of the snapshot.
    fn dra_objects(&self) -> &Arc<Dra> {
        self.storage().dra()
    }

    /// DynamicResources' PreFilter: every claim of the pod resolves (exists, or its template
    /// does), is not being deleted nor reserved to the limit for other pods, and every request
    /// of an unallocated claim names an existing class. Fails for every node alike.
    fn resolve_claims(&self, pod: &Pod) -> Result<SmallVec<[Resolved; 2]>, DraUnfit> {
        let dra = self.dra_objects();
        if !dra.is_available() {
            return Err(DraUnfit::NotSimulated);
        }
        let state = self.dra_state();
        let mut out: SmallVec<[Resolved; 2]> = SmallVec::new();
        for c in &pod.resource_claims {
            // The key joins no name: the pod is tried on many nodes.
            let key = c.claim_key(pod.namespace, pod.name.as_arc());
            if out.iter().any(|r| r.key == key) {
                continue;
            }
            // The claim is looked up once: its allocation in the view comes with it.
            let (spec, base) = match (dra.claim_by_key(&key), &c.source) {
                (Some(claim), _) => {
                    if claim.deleting {
                        return Err(DraUnfit::ClaimDeleting(key.name()));
                    }
                    let reserved_elsewhere = claim.allocation.is_some()
                        && claim.reserved_for.len() >= MAX_RESERVED_FOR
                        && !claim.reserved_for.iter().any(|p| **p == *pod.name);
                    if reserved_elsewhere {
                        return Err(DraUnfit::ClaimInUse);
                    }
                    (claim.spec.clone(), claim.allocation.as_ref())
                }
                (None, PodClaimSource::Claim(_)) => {
                    return Err(DraUnfit::ClaimNotFound(key.name()));
                }
                (None, PodClaimSource::Template { template, .. }) => {
                    match dra.template(pod.namespace, template) {
                        Some(t) => (t.spec.clone(), None),
                        None => return Err(DraUnfit::TemplateNotFound(template.clone())),
                    }
                }
            };
            let allocation = state.allocation_over(&key, base);
            if allocation.is_none() {
                for r in &spec.requests {
                    for alt in &r.alternatives {
                        if dra.class(&alt.class).is_none() {
                            return Err(DraUnfit::ClassNotFound {
                                request: alt.name.clone(),
                                class: alt.class.clone(),
                            });
                        }
                    }
                }
            }
            out.push(Resolved {
                key,
                spec,
                allocation,
            });
        }
        Ok(out)
    }

    /// The DynamicResources filter for one node (PreFilter included). It only picks the
    /// devices, building no allocation; the pick is kept for Reserve (see [`PickCache`]).
    pub(crate) fn check_dra(&self, pod: &Pod, node: NodeId, info: &NodeInfo) -> Result<(), Unfit> {
        let claims = self.resolve_claims(pod).map_err(Unfit::Dra)?;
        for c in &claims {
            if let Some(a) = &c.allocation
                && !allocation_reaches(a, &info.node)
            {
                return Err(Unfit::Dra(DraUnfit::NotAvailable));
            }
        }
        if claims.iter().all(|c| c.allocation.is_some()) {
            return Ok(());
        }
        let picks = self.pick_devices(&claims, &info.node).map_err(Unfit::Dra)?;
        self.dra_state().remember(CachedPick {
            version: self.version(),
            node,
            namespace: pod.namespace,
            pod: pod.name.clone(),
            claims: pod.resource_claims.iter().cloned().collect(),
            unallocated: (claims.into_iter())
                .filter(|c| c.allocation.is_none())
                .map(|c| c.key)
                .collect(),
            picks,
        });
        Ok(())
    }

    /// Picks devices for the unallocated `claims` on `node` as the structured allocator does:
    /// the claims' sizes checked first, then greedily, or by the full search where the greedy
    /// pick may be wrong or may have missed a fit.
    fn pick_devices(&self, claims: &[Resolved], node: &Node) -> Result<Picks, DraUnfit> {
        let pools = reachable(self.dra_objects(), node);
        self.check_result_sizes(claims, &pools)?;
        if dra_search::needs_search(unallocated(claims)) {
            return self.search(claims, &pools);
        }
        match self.pick(claims, &pools) {
            Ok(picks) => {
                // The greedy pick numbers claims among all of them; a place counts the
                // unallocated ones only.
                let mut place = SmallVec::<[usize; 2]>::new();
                let mut n = 0;
                for c in claims {
                    place.push(n);
                    n += usize::from(c.allocation.is_none());
                }
                Ok((picks.into_iter())
                    .map(|k| DevicePlace {
                        claim: place[k.claim],
                        pool: k.pool,
                        device: k.device,
                        request: k.alt.name.clone(),
                        admin_access: k.alt.admin_access,
                    })
                    .collect())
            }
            // The greedy pick is the allocator's first try; the search decides when it fails
            // and another pick could succeed.
            Err(DraUnfit::CannotAllocate) if dra_search::could_backtrack(unallocated(claims)) => {
                self.search(claims, &pools)
            }
            Err(e) => Err(e),
        }
    }

    /// The allocator's check before it picks anything: a claim whose requests need more
    /// devices than one allocation holds ([`MAX_RESULTS`]) is refused as malformed, on this
    /// node. A request needs its count, an `All` request every device the node reaches that
    /// matches it (in use or not), a `firstAvailable` request its smallest alternative.
    fn check_result_sizes(&self, claims: &[Resolved], pools: &[Pool<'_>]) -> Result<(), DraUnfit> {
        let dra = self.dra_objects();
        for c in claims.iter().filter(|c| c.allocation.is_none()) {
            let mut devices = 0usize;
            for request in &c.spec.requests {
                let mut fewest = usize::MAX;
                for alt in &request.alternatives {
                    let n = match alt.mode {
                        AllocationMode::ExactCount(n) => n as usize,
                        AllocationMode::All => match dra.class(&alt.class) {
                            Some(class) => {
                                let selectors = class.selectors.iter().chain(&alt.selectors);
                                count_matching(dra, selectors, pools)?
                            }
                            None => 0,
                        },
                    };
                    fewest = fewest.min(n);
                }
                if fewest != usize::MAX {
                    devices = devices.saturating_add(fewest);
                }
            }
            if devices > MAX_RESULTS {
                return Err(DraUnfit::TooManyDevices {
                    claim: Arc::from(c.key.to_string()),
                    devices,
                });
            }
        }
        Ok(())
    }

    /// Picks devices for the unallocated `claims` from the free devices of `pools` (those a
    /// node reaches), greedily: claim by claim, request by request, the first alternative that
    /// can be satisfied, devices in slice order. Every device of every pool is matched against
    /// the selectors (a selector failing on any of them fails the pod), as before any pick.
    fn pick<'c>(
        &self,
        claims: &'c [Resolved],
        pools: &[Pool<'_>],
    ) -> Result<SmallVec<[Pick<'c>; 4]>, DraUnfit> {
        let dra = self.dra_objects();
        let state = self.dra_state();
        let mut picks: SmallVec<[Pick<'c>; 4]> = SmallVec::new();
        for (claim, c) in claims.iter().enumerate() {
            if c.allocation.is_some() {
                continue;
            }
            for request in &c.spec.requests {
                let mut done = false;
                for alt in &request.alternatives {
                    let Some(class) = dra.class(&alt.class) else {
                        continue;
                    };
                    // Devices that match, free or not, with whether they are free.
                    let mut matching: SmallVec<[(usize, usize, bool); 16]> = SmallVec::new();
                    for (p, pool) in pools.iter().enumerate() {
                        let results: SmallVec<[SliceMatches; 2]> = (class.selectors.iter())
                            .chain(&alt.selectors)
                            .map(|s| dra.slice_matches(s, pool.slice))
                            .collect();
                        // A template copy none of whose devices the simulation took is free
                        // throughout: asked once per pool, not once per device.
                        let untaken = state.untaken_copy(pool);
                        for (i, d) in pool.slice.devices.iter().enumerate() {
                            // A device this pod's claims picked already is taken, but an
                            // admin-access request only skips those of its own claim (the
                            // allocator's rule: results of one claim are unique).
                            if picks.iter().any(|k| {
                                (!alt.admin_access || k.claim == claim)
                                    && same_device(pools, (k.pool, k.device), (p, i))
                            }) {
                                continue;
                            }
                            let mut ok = true;
                            for r in &results {
                                match &r[i] {
                                    Ok(true) => {}
                                    Ok(false) => {
                                        ok = false;
                                        break;
                                    }
                                    Err(e) => return Err(DraUnfit::Selector(e.clone())),
                                }
                            }
                            if ok {
                                // The id is built only where an allocation could name it.
                                let free = alt.admin_access
                                    || untaken
                                    || !state.in_use(dra, &pool.id(&d.name));
                                matching.push((p, i, free));
                            }
                        }
                    }
                    let before = picks.len();
                    // No more devices than one allocation holds: past it the allocator tries
                    // the request's next alternative.
                    let held = picks.iter().filter(|k| k.claim == claim).count();
                    let wanted = match alt.mode {
                        AllocationMode::ExactCount(n) => n as usize,
                        AllocationMode::All => matching.len(),
                    };
                    if held.saturating_add(wanted) > MAX_RESULTS {
                        continue;
                    }
                    match alt.mode {
                        AllocationMode::ExactCount(n) => {
                            let n = n as usize;
                            let free = matching.iter().filter(|m| m.2).take(n);
                            picks.extend(free.map(|m| Pick {
                                claim,
                                pool: m.0,
                                device: m.1,
                                alt,
                            }));
                            if picks.len() - before < n {
                                picks.truncate(before);
                                continue;
                            }
                        }
                        AllocationMode::All => {
                            if matching.is_empty() || matching.iter().any(|m| !m.2) {
                                continue;
                            }
                            picks.extend(matching.iter().map(|m| Pick {
                                claim,
                                pool: m.0,
                                device: m.1,
                                alt,
                            }));
                        }
                    }
                    done = true;
                    break;
                }
                if !done {
                    return Err(DraUnfit::CannotAllocate);
                }
            }
        }
        Ok(picks)
    }

    /// [`ClusterSnapshot::pick_devices`] by the allocator's search with backtracking.
    fn search(&self, claims: &[Resolved], pools: &[Pool<'_>]) -> Result<Picks, DraUnfit> {
        let dra = self.dra_objects();
        let state = self.dra_state();
        let sources: Vec<DeviceSource<'_>> = (pools.iter())
            .map(|p| DeviceSource {
                slice: p.slice,
                node: p.node,
            })
            .collect();
        let specs: Vec<&ClaimSpec> = unallocated(claims).collect();
        let in_use = |id: &DeviceId| state.in_use(dra, id);
        let picks = allocate_devices(dra, &specs, &sources, &in_use, MAX_SEARCH_STEPS);
        let picks = picks.map_err(|e| match e {
            SearchError::NoFit => DraUnfit::CannotAllocate,
            SearchError::Selector(e) => DraUnfit::Selector(e),
            SearchError::StepLimit => DraUnfit::TimedOut,
            SearchError::ConstraintConflict { claim, .. } => {
                let key = claims.iter().filter(|c| c.allocation.is_none()).nth(claim);
                let name = key.map_or(String::new(), |c| c.key.to_string());
                DraUnfit::Constraint(Arc::from(format!("claim {name}, {e}")))
            }
        })?;
        let mut out = Picks::new();
        for (claim, picked) in picks.into_iter().enumerate() {
            out.extend(picked.into_iter().map(|p| DevicePlace {
                claim,
                pool: p.source,
                device: p.device,
                request: p.request,
                admin_access: p.admin_access,
            }));
        }
        Ok(out)
    }

    /// Allocates `pod`'s unallocated claims on node `id` (where it was just placed), as
    /// kube-scheduler's Reserve does: the devices the filter just picked for it there, or,
    /// when the filter did not (the caller placed it without checking, or checked something
    /// else since), those picked now; nothing if they cannot be allocated there. Returns how
    /// many allocation changes it made (see [`DraState::undo_last`]).
    pub(crate) fn reserve_claims(&mut self, pod: &Pod, id: NodeId) -> usize {
        let Some(node) = self.node(id).map(|info| info.node.clone()) else {
            return 0;
        };
        let (unallocated, picks) = match self.dra_state().take_pick(self.version(), id, pod) {
            Some(cached) => (cached.unallocated, cached.picks),
            None => {
                let Ok(claims) = self.resolve_claims(pod) else {
                    return 0;
                };
                if claims.iter().all(|c| c.allocation.is_some()) {
                    return 0;
                }
                let Ok(picks) = self.pick_devices(&claims, &node) else {
                    return 0;
                };
                let keys = (claims.into_iter())
                    .filter(|c| c.allocation.is_none())
                    .map(|c| c.key)
                    .collect::<SmallVec<[ClaimKey; 2]>>();
                (keys, picks)
            }
        };
        let dra = self.dra_objects().clone();
        let pools = reachable(&dra, &node);
        let changes = unallocated.len();
        for (claim, key) in unallocated.into_iter().enumerate() {
            let picked = picks.iter().filter(|k| k.claim == claim).map(|k| {
                let pool = &pools[k.pool];
                let device = AllocatedDevice {
                    request: k.request.clone(),
                    id: pool.id(&pool.slice.devices[k.device].name),
                    admin_access: k.admin_access,
                };
                (k.pool, device)
            });
            let allocation = claim_allocation(&node, &pools, picked);
            self.dra_state_mut().set(&dra, key, Some(allocation));
        }
        changes
    }

    /// Frees the devices of `pod`'s claims that no pod of the snapshot uses any more (the pod
    /// was just removed), as the resource claim controller deallocates an unused claim.
    /// Returns how many allocation changes it made (see [`DraState::undo_last`]).
    pub(crate) fn release_claims(&mut self, pod: &Pod) -> usize {
        let dra = self.dra_objects().clone();
        let mut changes = 0;
        for key in claim_keys(pod) {
            let state = self.dra_state();
            if state.users(&key) == 0 && state.allocation(&dra, &key).is_some() {
                self.dra_state_mut().set(&dra, key, None);
                changes += 1;
            }
        }
        changes
    }

    /// The highest share of allocated devices among the pools of node `id`'s own slices, with
    /// the pool as `driver/pool`; `None` for a node without devices of its own.
    pub fn device_utilization(&self, id: NodeId) -> Option<(f64, Sym)> {
        let info = self.node(id)?;
        let dra = self.dra_objects();
        let state = self.dra_state();
        // (driver, pool) -> (allocated, total), in the order met.
        let mut pools: Vec<(PoolKey<'_>, (usize, usize))> = Vec::new();
        // Only node-local pools count, and a shared slice never is one.
        for pool in own_pools(dra, &info.node).filter(Pool::local) {
            let key = (pool.slice.driver, &pool.slice.pool);
            let at = match pools.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    pools.push((key, (0, 0)));
                    pools.len() - 1
                }
            };
            for d in &pool.slice.devices {
                pools[at].1.1 += 1;
                if state.in_use(dra, &pool.id(&d.name)) {
                    pools[at].1.0 += 1;
                }
            }
        }
        let mut best: Option<(f64, PoolKey<'_>)> = None;
        for (key, (used, total)) in pools {
            let share = if total == 0 {
                0.0
            } else {
                used as f64 / total as f64
            };
            if best.as_ref().is_none_or(|b| share > b.0) {
                best = Some((share, key));
            }
        }
        best.map(|(share, (driver, pool))| (share, Sym::new(&format!("{driver}/{pool}"))))
    }

    /// The devices allocated to claims of pods on node `id` and the devices the node reaches,
    /// counted over its own slices (node-local devices only): (allocated, total).
    pub fn node_devices_in_use(&self, id: NodeId) -> (usize, usize) {
        let Some(info) = self.node(id) else {
            return (0, 0);
        };
        let dra = self.dra_objects();
        let state = self.dra_state();
        let mut total = 0;
        let mut used = 0;
        for pool in own_pools(dra, &info.node).filter(Pool::local) {
            for d in &pool.slice.devices {
                total += 1;
                if state.in_use(dra, &pool.id(&d.name)) {
                    used += 1;
                }
            }
        }
        (used, total)
    }
}

/// A device picked for a claim: the claim (its place among the pod's claims), the pool (its
/// place among the node's reachable pools), the device (its place in that slice), and the
/// subrequest it satisfies.
#[derive(Clone, Copy)]
struct Pick<'c> {
    claim: usize,
    pool: usize,
    device: usize,
    alt: &'c Subrequest,
}

/// Whether two devices, each a (pool, device) place in `pools`, are one device: the same place,
/// or the same driver, pool, device name and node (a pool may span several slices).
fn same_device(pools: &[Pool<'_>], a: (usize, usize), b: (usize, usize)) -> bool {
    if a == b {
        return true;
    }
    let (pa, pb) = (&pools[a.0], &pools[b.0]);
    pa.node == pb.node
        && pa.slice.driver == pb.slice.driver
        && pa.slice.pool == pb.slice.pool
        && pa.slice.devices[a.1].name == pb.slice.devices[b.1].name
}

/// The allocation of one claim on `node` from its picked devices, each with the place of its
/// pool in `pools`: reached by the node alone when a device is the node's own (or its
/// template's copy), else by the node selector of the slices that reach it.
fn claim_allocation(
    node: &Node,
    pools: &[Pool<'_>],
    picked: impl Iterator<Item = (usize, AllocatedDevice)>,
) -> Arc<ClaimAllocation> {
    let mut local = false;
    let mut selector: Option<Arc<NodeSelector>> = None;
    let mut devices = Vec::new();
    for (p, device) in picked {
        let pool = &pools[p];
        match &pool.slice.reach {
            SliceReach::Node(_) => local = true,
            SliceReach::Selector(s) if pool.node.is_none() => {
                selector.get_or_insert_with(|| Arc::new(s.clone()));
            }
            _ => local |= pool.node.is_some(),
        }
        devices.push(device);
    }
    let node_selector = match (local, selector) {
        (true, _) => AllocationNodes::Node(node.name),
        (false, Some(s)) => AllocationNodes::Selector(s),
        (false, None) => AllocationNodes::All,
    };
    Arc::new(ClaimAllocation {
        node_selector,
        devices,
    })
}

/// A slice reachable from a node, with the node whose template copy it is.
struct Pool<'a> {
    slice: &'a Arc<ResourceSlice>,
    node: Option<Sym>,
}

impl Pool<'_> {
    fn id(&self, device: &Arc<str>) -> DeviceId {
        DeviceId {
            driver: self.slice.driver,
            pool: self.slice.pool.clone(),
            device: device.clone(),
            node: self.node,
        }
    }

    /// Whether only this node reaches it.
    fn local(&self) -> bool {
        self.node.is_some() || matches!(self.slice.reach, SliceReach::Node(_))
    }
}

/// The slices whose devices `node` reaches: its own (see [`own_pools`]), and those whose node
/// selector matches it or that every node reaches.
fn reachable<'a>(dra: &'a Dra, node: &'a Node) -> SmallVec<[Pool<'a>; 4]> {
    let mut out: SmallVec<[Pool<'a>; 4]> = own_pools(dra, node).collect();
    for s in dra.shared_slices() {
        let reached = match &s.reach {
            SliceReach::AllNodes => true,
            SliceReach::Selector(sel) => node_selector_matches(sel, node),
            SliceReach::Node(_) => false,
        };
        if reached {
            out.push(Pool {
                slice: s,
                node: None,
            });
        }
    }
    out
}

/// The slices only `node` reaches: those it carries (a template's copies) or, for a node read
/// from the API, those published for it by name. The node-local counts read these alone, so a
/// node without devices costs them one lookup, and shared slices' selectors are not evaluated.
fn own_pools<'a>(dra: &'a Dra, node: &'a Node) -> impl Iterator<Item = Pool<'a>> {
    let (slices, own) = match &node.devices {
        Some(d) => (&d.slices[..], Some(node.name)),
        None => (dra.node_slices(node.name), None),
    };
    slices.iter().map(move |slice| Pool { slice, node: own })
}

/// How many devices of `pools` match every one of `selectors`.
fn count_matching<'s>(
    dra: &Dra,
    selectors: impl Iterator<Item = &'s CelSelector> + Clone,
    pools: &[Pool<'_>],
) -> Result<usize, DraUnfit> {
    let mut n = 0;
    for pool in pools {
        let results: SmallVec<[SliceMatches; 2]> = (selectors.clone())
            .map(|s| dra.slice_matches(s, pool.slice))
            .collect();
        'device: for i in 0..pool.slice.devices.len() {
            for r in &results {
                match &r[i] {
                    Ok(true) => {}
                    Ok(false) => continue 'device,
                    Err(e) => return Err(DraUnfit::Selector(e.clone())),
                }
            }
            n += 1;
        }
    }
    Ok(n)
}

/// The specs of the claims not allocated yet, in order.
fn unallocated(claims: &[Resolved]) -> impl Iterator<Item = &ClaimSpec> + Clone {
    claims
        .iter()
        .filter(|c| c.allocation.is_none())
        .map(|c| &*c.spec)
}

/// Whether an allocation's devices are reachable from `node`.
fn allocation_reaches(a: &ClaimAllocation, node: &Node) -> bool {
    match &a.node_selector {
        AllocationNodes::All => true,
        AllocationNodes::Selector(s) => node_selector_matches(s, node),
        AllocationNodes::Node(name) => *name == node.name,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
    use autoscaler_model::{
        NodeDevices, NodeSelectorOp, NodeSelectorRequirement, NodeSelectorTerm, ObjectStore,
        Storage,
    };

    /// The node selector kube-scheduler writes for devices of one node: its name as a field.
    fn name_selector(node: &Node) -> NodeSelector {
        NodeSelector {
            terms: vec![NodeSelectorTerm {
                match_expressions: Vec::new(),
                match_fields: vec![NodeSelectorRequirement {
                    key: Sym::new("metadata.name"),
                    op: NodeSelectorOp::In,
                    values: vec![node.name],
                }],
            }],
        }
    }

    /// A GPU class, a one-GPU template and a claim shared by name, and a node with two GPUs
    /// (`gpu-1`, one of them an `h100`), another with one (`gpu-2`).
    const OBJECTS: &str = "\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors: [{cel: {expression: \"device.driver == 'gpu.example.com'\"}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared, namespace: default}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gpu-1-slice}
spec:
  driver: gpu.example.com
  nodeName: gpu-1
  pool: {name: gpu-1, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: gpu-0, attributes: {model: {string: a100}}}
  - {name: gpu-1, attributes: {model: {string: h100}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: gpu-2-slice}
spec:
  driver: gpu.example.com
  nodeName: gpu-2
  pool: {name: gpu-2, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0, attributes: {model: {string: a100}}}]
";

    fn snapshot(extra: &str) -> ClusterSnapshot {
        let mut store = ObjectStore::new();
        store.load_yaml(&format!("{OBJECTS}---\n{extra}")).unwrap();
        let (storage, errors) = Storage::from_store(&store);
        assert!(errors.is_empty(), "{errors:?}");
        let mut s = ClusterSnapshot::new();
        s.set_storage(Arc::new(storage));
        for name in ["cpu-a", "gpu-1", "gpu-2"] {
            s.add_node(NodeBuilder::new(name, 8000, 32 * GI).arc())
                .unwrap();
        }
        s
    }

    fn claim_pod(name: &str, source: PodClaimSource) -> Arc<Pod> {
        PodBuilder::new(name, 100, GI)
            .with(|p| {
                p.resource_claims.push(PodClaim {
                    name: Arc::from("gpu"),
                    source,
                })
            })
            .arc()
    }

    fn from_template(name: &str, template: &str) -> Arc<Pod> {
        let source = PodClaimSource::Template {
            template: Arc::from(template),
            generated: None,
        };
        claim_pod(name, source)
    }

    fn check(s: &ClusterSnapshot, pod: &Pod, node: &str) -> Result<(), String> {
        let id = s.node_id(Sym::new(node)).unwrap();
        s.check_pod(pod, id).map_err(|e| e.to_string())
    }

    fn place(s: &mut ClusterSnapshot, pod: &Arc<Pod>, node: &str) {
        let id = s.node_id(Sym::new(node)).unwrap();
        s.add_pod(pod.clone(), id).unwrap();
    }

    #[test]
    fn claim_keys_are_the_models_names() {
        let pod = from_template("p\u{e9}", "one-gpu");
        let mut generated = (*from_template("q", "one-gpu")).clone();
        if let PodClaimSource::Template { generated: g, .. } =
            &mut generated.resource_claims[0].source
        {
            *g = Some(Arc::from("q-gpu-x7"));
        }
        let named = claim_pod("r", PodClaimSource::Claim(Arc::from("shared")));
        for p in [&*pod, &generated, &*named] {
            let c = &p.resource_claims[0];
            let key = c.claim_key(p.namespace, p.name.as_arc());
            assert_eq!(key, ClaimKey::new(p.namespace, c.claim_name(&p.name)));
            assert_eq!(key.name(), c.claim_name(&p.name));
        }
        let key = pod.resource_claims[0].claim_key(pod.namespace, pod.name.as_arc());
        assert_eq!(&*key.name(), "p\u{e9}-gpu");
    }

    #[test]
    fn a_claim_pod_fits_only_a_node_with_a_free_device() {
        let s = snapshot("");
        let pod = from_template("p", "one-gpu");
        assert_eq!(
            check(&s, &pod, "cpu-a"),
            Err("cannot allocate all claims".into())
        );
        assert_eq!(check(&s, &pod, "gpu-1"), Ok(()));
        // A pod without claims is not looked at by the filter.
        let plain = PodBuilder::new("plain", 100, GI).arc();
        assert_eq!(check(&s, &plain, "cpu-a"), Ok(()));
    }

    #[test]
    fn allocations_live_in_the_snapshot_and_revert_undoes_them() {
        let mut s = snapshot("");
        s.fork();
        place(&mut s, &from_template("p1", "one-gpu"), "gpu-2");
        let next = from_template("p2", "one-gpu");
        assert_eq!(
            check(&s, &next, "gpu-2"),
            Err("cannot allocate all claims".into())
        );
        let id = s.node_id(Sym::new("gpu-2")).unwrap();
        assert_eq!(s.node_devices_in_use(id), (1, 1));
        s.revert().unwrap();
        assert_eq!(check(&s, &next, "gpu-2"), Ok(()));
        assert_eq!(s.node_devices_in_use(id), (0, 1));
    }

    #[test]
    fn an_allocation_on_a_nodes_own_devices_is_reached_by_that_node_alone() {
        let mut s = snapshot("");
        s.fork();
        place(&mut s, &from_template("p1", "one-gpu"), "gpu-1");
        let a = allocation_of(&s, "p1-gpu").unwrap();
        assert_eq!(a.node_selector, AllocationNodes::Node(Sym::new("gpu-1")));
        // The nodes kube-scheduler's selector for it (the field metadata.name in [gpu-1])
        // selects, and no other.
        let written = name_selector(&NodeBuilder::new("gpu-1", 1, 1).build());
        for name in ["gpu-1", "gpu-2", "cpu-a"] {
            let node = NodeBuilder::new(name, 1, 1).build();
            assert_eq!(
                allocation_reaches(&a, &node),
                node_selector_matches(&written, &node),
                "{name}"
            );
        }
        // A pod sharing the claim follows it there.
        let shared = claim_pod("q1", PodClaimSource::Claim(Arc::from("shared")));
        place(&mut s, &shared, "gpu-1");
        let next = claim_pod("q2", PodClaimSource::Claim(Arc::from("shared")));
        assert_eq!(check(&s, &next, "gpu-1"), Ok(()));
        assert_eq!(
            check(&s, &next, "gpu-2"),
            Err("resourceclaim not available on the node".into())
        );
        s.revert().unwrap();
        assert!(s.dra_state().undo.is_empty());
    }

    #[test]
    fn reserve_never_takes_a_pick_made_before_the_node_changed() {
        let mut s = snapshot("");
        s.fork();
        // p1's filter picks gpu-2's only device; p2 is placed without a check and takes it.
        let p1 = from_template("p1", "one-gpu");
        assert_eq!(check(&s, &p1, "gpu-2"), Ok(()));
        place(&mut s, &from_template("p2", "one-gpu"), "gpu-2");
        assert!(allocation_of(&s, "p2-gpu").is_some());
        // Placed anyway, p1 gets nothing: its pick was made before p2 took the device.
        place(&mut s, &p1, "gpu-2");
        assert_eq!(allocation_of(&s, "p1-gpu"), None);
        let id = s.node_id(Sym::new("gpu-2")).unwrap();
        assert_eq!(s.node_devices_in_use(id), (1, 1));
    }

    #[test]
    fn reserve_never_takes_a_pick_made_before_a_revert() {
        let mut s = snapshot("");
        let p = from_template("p", "one-gpu");
        // With gpu-0 taken inside a fork, p's filter picks gpu-1; the fork is reverted.
        s.fork();
        place(&mut s, &from_template("q", "one-gpu"), "gpu-1");
        assert_eq!(check(&s, &p, "gpu-1"), Ok(()));
        s.revert().unwrap();
        // gpu-0 is free again: Reserve picks it, as the allocator would now.
        s.fork();
        place(&mut s, &p, "gpu-1");
        let a = allocation_of(&s, "p-gpu").expect("allocated");
        assert_eq!(devices_of(&a), ["gpu=gpu-0"]);
    }

    #[test]
    fn reserve_takes_the_filters_pick_for_the_same_pod_only() {
        let mut s = snapshot("");
        s.fork();
        // The filter's pick for one pod is not another's: each gets its own claim allocated.
        let p1 = from_template("p1", "one-gpu");
        assert_eq!(check(&s, &p1, "gpu-1"), Ok(()));
        place(&mut s, &from_template("p2", "one-gpu"), "gpu-1");
        place(&mut s, &p1, "gpu-1");
        let one = allocation_of(&s, "p1-gpu").expect("allocated");
        let two = allocation_of(&s, "p2-gpu").expect("allocated");
        assert_eq!(devices_of(&two), ["gpu=gpu-0"]);
        assert_eq!(devices_of(&one), ["gpu=gpu-1"]);
        let id = s.node_id(Sym::new("gpu-1")).unwrap();
        assert_eq!(s.node_devices_in_use(id), (2, 2));
    }

    #[test]
    fn a_shared_claim_is_allocated_once_and_pins_its_other_pods() {
        let mut s = snapshot("");
        s.fork();
        let shared = || PodClaimSource::Claim(Arc::from("shared"));
        place(&mut s, &claim_pod("p1", shared()), "gpu-2");
        let p2 = claim_pod("p2", shared());
        // Allocated on gpu-2's only device: the second user fits there without a device of
        // its own, and nowhere else.
        assert_eq!(check(&s, &p2, "gpu-2"), Ok(()));
        assert_eq!(
            check(&s, &p2, "gpu-1"),
            Err("resourceclaim not available on the node".into())
        );
        place(&mut s, &p2, "gpu-2");
        // Removing one user keeps the claim allocated; removing the last frees its device.
        let id = s.node_id(Sym::new("gpu-2")).unwrap();
        s.remove_pod(id, Sym::new("default"), "p1").unwrap();
        assert_eq!(s.node_devices_in_use(id), (1, 1));
        s.remove_pod(id, Sym::new("default"), "p2").unwrap();
        assert_eq!(s.node_devices_in_use(id), (0, 1));
        s.revert().unwrap();
        assert_eq!(s.node_devices_in_use(id), (0, 1));
    }

    #[test]
    fn a_claim_allocated_in_the_cluster_holds_its_device_until_its_pod_leaves() {
        let mut s = snapshot(
            "\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: running-gpu, namespace: default}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]
status:
  allocation:
    devices:
      results: [{request: gpu, driver: gpu.example.com, pool: gpu-2, device: gpu-0}]
    nodeSelector:
      nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [gpu-2]}]}]
  reservedFor: [{resource: pods, name: running, uid: u1}]
",
        );
        let running = claim_pod("running", PodClaimSource::Claim(Arc::from("running-gpu")));
        let running = Arc::new(Pod {
            node_name: Some(Sym::new("gpu-2")),
            ..(*running).clone()
        });
        place(&mut s, &running, "gpu-2");
        let id = s.node_id(Sym::new("gpu-2")).unwrap();
        assert_eq!(s.node_devices_in_use(id), (1, 1));
        let pending = from_template("pending", "one-gpu");
        assert_eq!(
            check(&s, &pending, "gpu-2"),
            Err("cannot allocate all claims".into())
        );
        // Removing the node (a scale-down simulation) frees the claim: its pod may go where
        // a device can be allocated again, and only there.
        s.fork();
        s.remove_node(id).unwrap();
        let moved = Arc::new(Pod {
            node_name: None,
            ..(*running).clone()
        });
        assert_eq!(
            check(&s, &moved, "cpu-a"),
            Err("cannot allocate all claims".into())
        );
        assert_eq!(check(&s, &moved, "gpu-1"), Ok(()));
        s.revert().unwrap();
        assert_eq!(s.node_devices_in_use(id), (1, 1));
    }

    #[test]
    fn first_available_and_all_follow_the_allocator() {
        let s = snapshot(
            "\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: h100-or-two, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        firstAvailable:
        - name: h100
          deviceClassName: gpu.example.com
          selectors: [{cel: {expression: \"device.attributes['gpu.example.com'].model == 'h100'\"}}]
        - {name: two, deviceClassName: gpu.example.com, count: 2}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: all, namespace: default}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com, allocationMode: All}}]
",
        );
        let p = from_template("p", "h100-or-two");
        assert_eq!(check(&s, &p, "gpu-1"), Ok(()));
        assert_eq!(
            check(&s, &p, "gpu-2"),
            Err("cannot allocate all claims".into())
        );
        let all = from_template("all", "all");
        assert_eq!(check(&s, &all, "gpu-1"), Ok(()));
        assert_eq!(
            check(&s, &all, "cpu-a"),
            Err("cannot allocate all claims".into())
        );
    }

    /// Node `cpu-a` gets four GPUs: `x0` and `x2` on NUMA node 0, `x1` on 1, `x3` without the
    /// attribute; templates ask for two GPUs (or one) sharing `gpu.example.com/numa`.
    const NUMA: &str = "\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: cpu-a-slice}
spec:
  driver: gpu.example.com
  nodeName: cpu-a
  pool: {name: cpu-a, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: x0, attributes: {numa: {int: 0}}}
  - {name: x1, attributes: {numa: {int: 1}}}
  - {name: x2, attributes: {numa: {int: 0}}}
  - {name: x3}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: numa-pair, namespace: default}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com, count: 2}}]
      constraints: [{matchAttribute: gpu.example.com/numa}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: numa-one, namespace: default}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]
      constraints: [{matchAttribute: gpu.example.com/numa}]
";

    #[test]
    fn match_attribute_takes_devices_sharing_the_value_and_refuses_others() {
        let mut s = snapshot(NUMA);
        s.fork();
        let pair = from_template("pair", "numa-pair");
        assert_eq!(check(&s, &pair, "cpu-a"), Ok(()));
        place(&mut s, &pair, "cpu-a");
        // x0 and x2 went (the greedy pick x0, x1 breaks the constraint): x1 and x3 are left,
        // which do not share a NUMA node.
        let id = s.node_id(Sym::new("cpu-a")).unwrap();
        assert_eq!(s.node_devices_in_use(id), (2, 4));
        assert_eq!(
            check(&s, &from_template("pair-2", "numa-pair"), "cpu-a"),
            Err("cannot allocate all claims".into())
        );
        // A device without the attribute never keeps the constraint.
        place(&mut s, &from_template("one", "numa-one"), "cpu-a");
        assert_eq!(
            check(&s, &from_template("one-2", "numa-one"), "cpu-a"),
            Err("cannot allocate all claims".into())
        );
        // Nor do devices of different values (gpu-1's a100 and h100 have no NUMA node at all).
        assert_eq!(
            check(&s, &from_template("pair-3", "numa-pair"), "gpu-1"),
            Err("cannot allocate all claims".into())
        );
    }

    /// The allocation of claim `name` as the simulation sees it.
    fn allocation_of(s: &ClusterSnapshot, name: &str) -> Option<Arc<ClaimAllocation>> {
        let key = ClaimKey::new(Sym::new("default"), Arc::from(name));
        s.dra_state().allocation(s.storage().dra(), &key)
    }

    /// The devices of an allocation as `request=device`, with `(admin)` for admin access.
    fn devices_of(a: &ClaimAllocation) -> Vec<String> {
        (a.devices.iter())
            .map(|d| {
                let admin = if d.admin_access { " (admin)" } else { "" };
                format!("{}={}{admin}", d.request, d.id.device)
            })
            .collect()
    }

    #[test]
    fn an_admin_access_request_shares_a_device_another_claim_of_the_pod_took() {
        // The allocator skips, for an admin-access request, only the devices being allocated
        // for the same claim: the pod's other claim took gpu-0, the monitor gets gpu-0 too.
        let mut s = snapshot(
            "\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: monitor, namespace: default}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com, adminAccess: true}}]
",
        );
        let pod = PodBuilder::new("p", 100, GI)
            .with(|p| {
                for (entry, template) in [("gpu", "one-gpu"), ("monitor", "monitor")] {
                    p.resource_claims.push(PodClaim {
                        name: Arc::from(entry),
                        source: PodClaimSource::Template {
                            template: Arc::from(template),
                            generated: None,
                        },
                    });
                }
            })
            .arc();
        s.fork();
        assert_eq!(check(&s, &pod, "gpu-1"), Ok(()));
        place(&mut s, &pod, "gpu-1");
        let gpu = allocation_of(&s, "p-gpu").expect("allocated");
        assert_eq!(devices_of(&gpu), ["gpu=gpu-0"]);
        let monitor = allocation_of(&s, "p-monitor").expect("allocated");
        assert_eq!(devices_of(&monitor), ["gpu=gpu-0 (admin)"]);
        // Admin access takes no device from others: gpu-1 is still free.
        let id = s.node_id(Sym::new("gpu-1")).unwrap();
        assert_eq!(s.node_devices_in_use(id), (1, 2));
        // Nor does it need a free device: with both taken, the monitor alone still fits.
        place(&mut s, &from_template("q", "one-gpu"), "gpu-1");
        let alone = claim_pod(
            "m",
            PodClaimSource::Template {
                template: Arc::from("monitor"),
                generated: None,
            },
        );
        assert_eq!(check(&s, &alone, "gpu-1"), Ok(()));
    }

    /// A slice of node `cpu-a` with `n` devices, and templates asking for all of them, for all
    /// or else one, and for `n` by count in two requests (one asks for 32 at most).
    fn many_devices(n: usize) -> String {
        let devices: Vec<String> = (0..n).map(|i| format!("{{name: d{i}}}")).collect();
        format!(
            "\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {{name: cpu-a-slice}}
spec:
  driver: gpu.example.com
  nodeName: cpu-a
  pool: {{name: cpu-a, generation: 1, resourceSliceCount: 1}}
  devices: [{}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: all, namespace: default}}
spec:
  spec:
    devices:
      requests: [{{name: gpu, exactly: {{deviceClassName: gpu.example.com, allocationMode: All}}}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: all-or-one, namespace: default}}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        firstAvailable:
        - {{name: all, deviceClassName: gpu.example.com, allocationMode: All}}
        - {{name: one, deviceClassName: gpu.example.com}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {{name: by-count, namespace: default}}
spec:
  spec:
    devices:
      requests:
      - {{name: gpu, exactly: {{deviceClassName: gpu.example.com, count: {}}}}}
      - {{name: more, exactly: {{deviceClassName: gpu.example.com, count: {}}}}}
",
            devices.join(", "),
            n / 2,
            n - n / 2
        )
    }

    #[test]
    fn a_claim_needing_more_than_32_devices_is_refused_as_the_allocator_refuses_it() {
        // 32 devices fit one allocation.
        let s = snapshot(&many_devices(32));
        assert_eq!(check(&s, &from_template("p", "all"), "cpu-a"), Ok(()));
        assert_eq!(check(&s, &from_template("p", "by-count"), "cpu-a"), Ok(()));
        // 33 do not: the allocator refuses the claim before picking (its error, not a lack of
        // devices), counting every matching device of the node, in use or not.
        let mut s = snapshot(&many_devices(33));
        s.fork();
        let want = "claim default/p-gpu: number of requested devices 33 exceeds the claim limit \
                    of 32";
        for template in ["all", "by-count"] {
            let id = s.node_id(Sym::new("cpu-a")).unwrap();
            let err = s.check_pod(&from_template("p", template), id).unwrap_err();
            assert_eq!(err.to_string(), want, "{template}");
            assert!(err.is_unresolvable() && !err.is_pre_filter(), "{template}");
        }
        // A first alternative over the limit gives way to the next one.
        let pod = from_template("p", "all-or-one");
        assert_eq!(check(&s, &pod, "cpu-a"), Ok(()));
        place(&mut s, &pod, "cpu-a");
        let a = allocation_of(&s, "p-gpu").expect("allocated");
        assert_eq!(devices_of(&a), ["gpu/one=d0"]);
        let id = s.node_id(Sym::new("cpu-a")).unwrap();
        assert_eq!(s.node_devices_in_use(id), (1, 33));
        let err = check(&s, &from_template("q", "all"), "cpu-a").unwrap_err();
        assert!(err.contains("requested devices 33 exceeds"), "{err}");
    }

    #[test]
    fn backtracking_finds_the_fit_the_greedy_pick_misses() {
        let s = snapshot(
            "\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: any-and-a100, namespace: default}
spec:
  spec:
    devices:
      requests:
      - {name: any, exactly: {deviceClassName: gpu.example.com}}
      - name: a100
        exactly:
          deviceClassName: gpu.example.com
          selectors: [{cel: {expression: \"device.attributes['gpu.example.com'].model == 'a100'\"}}]
",
        );
        // gpu-1 has an a100 then an h100: `any` first takes the a100 that `a100` needs; the
        // allocator gives `any` the h100 instead.
        let pod = from_template("p", "any-and-a100");
        assert_eq!(check(&s, &pod, "gpu-1"), Ok(()));
        assert_eq!(
            check(&s, &pod, "gpu-2"),
            Err("cannot allocate all claims".into())
        );
    }

    #[test]
    fn prefilter_reasons_are_the_schedulers() {
        let s = snapshot(
            "\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: no-class, namespace: default}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: tpu.example.com}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: bad-cel, namespace: default}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.example.com
          selectors: [{cel: {expression: \"device.attributes['gpu.example.com'].missing == 1\"}}]
",
        );
        let cases = [
            (
                from_template("a", "no-class"),
                "request gpu: device class tpu.example.com does not exist",
            ),
            (
                claim_pod("b", PodClaimSource::Claim(Arc::from("gone"))),
                "resourceclaim.resource.k8s.io \"gone\" not found",
            ),
            (
                from_template("c", "gone"),
                "resourceclaimtemplate.resource.k8s.io \"gone\" not found",
            ),
        ];
        for (pod, want) in cases {
            let id = s.node_id(Sym::new("gpu-1")).unwrap();
            let err = s.check_pod(&pod, id).unwrap_err();
            assert_eq!(err.to_string(), want);
            assert!(err.is_pre_filter() && err.is_unresolvable(), "{want}");
            assert_eq!(err.plugin(), "DynamicResources");
        }
        let bad = check(&s, &from_template("d", "bad-cel"), "gpu-1").unwrap_err();
        assert!(bad.starts_with("CEL runtime error"), "{bad}");
    }

    #[test]
    fn without_the_dra_api_claims_cannot_be_simulated() {
        let mut s = snapshot("");
        let mut storage = (**s.storage()).clone();
        storage.set_dra(Arc::new(Dra::unserved()));
        s.set_storage(Arc::new(storage));
        let err = check(&s, &from_template("p", "one-gpu"), "gpu-1").unwrap_err();
        assert!(err.contains("cannot be simulated"), "{err}");
    }

    #[test]
    fn device_utilization_is_the_highest_allocated_share_of_a_pool() {
        let mut s = snapshot("");
        let gpu1 = s.node_id(Sym::new("gpu-1")).unwrap();
        let cpu = s.node_id(Sym::new("cpu-a")).unwrap();
        assert_eq!(s.device_utilization(cpu), None);
        assert_eq!(
            s.device_utilization(gpu1),
            Some((0.0, Sym::new("gpu.example.com/gpu-1")))
        );
        s.fork();
        place(&mut s, &from_template("p1", "one-gpu"), "gpu-1");
        assert_eq!(
            s.device_utilization(gpu1),
            Some((0.5, Sym::new("gpu.example.com/gpu-1")))
        );
    }

    #[test]
    fn devices_every_node_reaches_count_toward_no_nodes_own_use() {
        // A fabric pool every node reaches, its one device allocated in the cluster: it is
        // nobody's own, so neither a node's utilization nor its devices in use count it.
        let s = snapshot(
            "\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: fabric}
spec:
  driver: net.example.com
  allNodes: true
  pool: {name: fabric, generation: 1, resourceSliceCount: 1}
  devices: [{name: nic-0}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: link, namespace: default}
spec:
  devices:
    requests: [{name: nic, exactly: {deviceClassName: gpu.example.com}}]
status:
  allocation:
    devices:
      results: [{request: nic, driver: net.example.com, pool: fabric, device: nic-0}]
",
        );
        let cpu = s.node_id(Sym::new("cpu-a")).unwrap();
        let gpu1 = s.node_id(Sym::new("gpu-1")).unwrap();
        assert_eq!(s.device_utilization(cpu), None);
        assert_eq!(s.node_devices_in_use(cpu), (0, 0));
        assert_eq!(
            s.device_utilization(gpu1),
            Some((0.0, Sym::new("gpu.example.com/gpu-1")))
        );
        assert_eq!(s.node_devices_in_use(gpu1), (0, 2));
    }

    #[test]
    fn template_nodes_carry_devices_of_their_own() {
        let mut s = snapshot("");
        let slices = s.storage().dra().node_slices(Sym::new("gpu-2")).to_vec();
        let devices = Arc::new(NodeDevices { slices });
        s.fork();
        for name in ["t-1", "t-2"] {
            let node = NodeBuilder::new(name, 8000, 32 * GI)
                .with(|n| n.devices = Some(devices.clone()))
                .arc();
            s.add_node(node).unwrap();
        }
        place(&mut s, &from_template("p1", "one-gpu"), "t-1");
        let p2 = from_template("p2", "one-gpu");
        assert_eq!(
            check(&s, &p2, "t-1"),
            Err("cannot allocate all claims".into())
        );
        // The second copy's device is its own, and the real node's is untouched.
        assert_eq!(check(&s, &p2, "t-2"), Ok(()));
        assert_eq!(check(&s, &p2, "gpu-2"), Ok(()));
    }
}
