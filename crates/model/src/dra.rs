//! The Dynamic Resource Allocation objects (`resource.k8s.io/v1`) the DRA filter reads:
//! DeviceClasses, ResourceClaims, ResourceClaimTemplates and ResourceSlices, reduced to what
//! kube-scheduler's DynamicResources plugin and its structured allocator look at, and the claims
//! a pod names (`spec.resourceClaims`, `status.resourceClaimStatuses`).
//!
//! [`Dra`] is built once per view from an [`ObjectStore`]; every object that does not convert is
//! reported with its identity and the field at fault and left out, never a panic. Lists inside an
//! object are bounded as the API bounds them. It decides nothing: whether a pod's claims can be
//! allocated on a node is answered by `scheduling::dra`.
//!
//! Pools as the allocator sees them: only the slices of a pool's newest generation count, and a
//! pool whose newest generation has fewer slices than `resourceSliceCount` is incomplete and
//! offers no device (the allocator would not allocate from it either).
//!
//! A claim's `constraints` are modelled for `matchAttribute` (the GA constraint); a constraint
//! with `distinctAttribute` (alpha in 1.34, behind `DRAConsumableCapacity`) is refused as
//! unsupported, as the scheduler's stable allocator refuses it.
//!
//! Not modelled (a claim using them is allocated as if they were absent): device `config`,
//! device taints and tolerations (alpha in 1.34, behind `DRADeviceTaints`), partitionable devices
//! (`sharedCounters`), consumable capacity, binding conditions, per-device node selection.

mod cel;
mod claim_key;

pub use self::cel::{CelSelector, MAX_DEVICE_ENTRIES, MAX_EXPRESSION_LEN};
pub use self::claim_key::ClaimKey;

use std::sync::Arc;

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::resource::v1 as resource;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::affinity::NodeSelector;
use crate::convert::node_selector;
use crate::intern::Sym;
use crate::pod::ModelError;
use crate::quantity::Quantity;
use crate::storage::{invalid, read};
use crate::store::ObjectError;
use crate::store::{ObjectKey, ObjectStore};

/// The API group of the DRA kinds.
pub const DRA_GROUP: &str = "resource.k8s.io";

/// Most requests of a claim, subrequests of a request and selectors of a request or class (the
/// API server's limit is 32 for each).
const MAX_REQUESTS: usize = 32;

/// Most devices of a slice (the API server's limit is 128; 64 with taints or counters).
const MAX_DEVICES: usize = 128;

/// Most devices one request may ask for: `count` above this is refused as malformed (the API
/// server's limit on the results of one allocation is 32).
pub const MAX_COUNT: u32 = 32;

/// Most entries of `reservedFor` (the API server's limit, `ResourceClaimReservedForMaxSize`): a
/// claim reserved for as many consumers cannot take another one.
pub const MAX_RESERVED_FOR: usize = 256;

/// How many devices a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AllocationMode {
    /// `ExactCount` with its `count` (1 when absent).
    ExactCount(u32),
    /// `All`: every matching device of the pool(s) reachable from the node, at least one.
    All,
}

/// One way to satisfy a request: an `exactly` request, or one entry of `firstAvailable`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Subrequest {
    /// The name the allocation result carries: `request` or `request/subrequest`.
    pub name: Arc<str>,
    /// `deviceClassName`.
    pub class: Arc<str>,
    /// `selectors[].cel`, all of which must match.
    pub selectors: Vec<CelSelector>,
    /// `allocationMode` and `count`.
    pub mode: AllocationMode,
    /// `adminAccess`: the devices are not taken from other claims (monitoring access).
    pub admin_access: bool,
}

/// One request of a claim: an `exactly` request (one alternative) or `firstAvailable` (tried in
/// order, the first that can be allocated wins).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DeviceRequest {
    /// `name`.
    pub name: Arc<str>,
    /// The alternatives, in order; never empty.
    pub alternatives: Vec<Subrequest>,
}

/// What a claim (or a claim template) asks for: `spec.devices.requests` and `constraints`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ClaimSpec {
    /// The requests, each of which must be allocated.
    pub requests: Vec<DeviceRequest>,
    /// `constraints`: every one must hold for the devices allocated to the claim.
    pub constraints: Vec<DeviceConstraint>,
}

/// One entry of a claim's `spec.devices.constraints`: `matchAttribute`, all devices allocated
/// for the requests it names have the attribute, with one value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DeviceConstraint {
    /// `requests`: request names (`request`, or `request/subrequest` for one alternative of a
    /// `firstAvailable` request); empty means every request of the claim.
    pub requests: Vec<Arc<str>>,
    /// `matchAttribute`: a fully qualified attribute name (`domain/id`).
    pub attribute: Arc<str>,
}

impl DeviceConstraint {
    /// Whether a device allocated for `request` through its alternative `alternative` (the
    /// result's name: `request` or `request/subrequest`) is bound by this constraint.
    pub fn applies_to(&self, request: &str, alternative: &str) -> bool {
        self.requests.is_empty()
            || self
                .requests
                .iter()
                .any(|r| **r == *request || **r == *alternative)
    }
}

/// A device, by the names the allocation result uses.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct DeviceId {
    /// `driver`.
    pub driver: Sym,
    /// `pool`.
    pub pool: Arc<str>,
    /// `device`.
    pub device: Arc<str>,
    /// The node whose own copy of a template's devices this is (`None` for devices published
    /// in the cluster): every node made from a template has devices of its own.
    pub node: Option<Sym>,
}

/// One allocated device of a claim.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AllocatedDevice {
    /// The request (or `request/subrequest`) it satisfies.
    pub request: Arc<str>,
    /// The device.
    pub id: DeviceId,
    /// Allocated with admin access: not exclusive.
    pub admin_access: bool,
}

/// The nodes that reach an allocation's devices: `status.allocation.nodeSelector`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum AllocationNodes {
    /// No selector: every node.
    #[default]
    All,
    /// The selector.
    Selector(Arc<NodeSelector>),
    /// This node alone: the selector kube-scheduler writes for a node's own devices (the
    /// field `metadata.name` in `[node]`), held as the name, so that the simulation, which
    /// allocates on thousands of template nodes, builds no selector per node.
    Node(Sym),
}

/// `status.allocation` of a claim.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ClaimAllocation {
    /// `nodeSelector`: the nodes that reach the devices.
    pub node_selector: AllocationNodes,
    /// `devices.results`.
    pub devices: Vec<AllocatedDevice>,
}

/// A ResourceClaim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceClaim {
    /// Namespace.
    pub namespace: Sym,
    /// Name.
    pub name: Arc<str>,
    /// What it asks for.
    pub spec: Arc<ClaimSpec>,
    /// `status.allocation`.
    pub allocation: Option<Arc<ClaimAllocation>>,
    /// `status.reservedFor`: the names of the pods it is reserved for.
    pub reserved_for: Vec<Arc<str>>,
    /// Whether it is being deleted.
    pub deleting: bool,
}

/// A ResourceClaimTemplate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClaimTemplate {
    /// Namespace.
    pub namespace: Sym,
    /// Name.
    pub name: Arc<str>,
    /// `spec.spec`: what each claim made from it asks for.
    pub spec: Arc<ClaimSpec>,
}

/// A DeviceClass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceClass {
    /// Name.
    pub name: Arc<str>,
    /// `spec.selectors[].cel`, all of which a device of the class must match.
    pub selectors: Vec<CelSelector>,
    /// `spec.extendedResourceName`, if the class also serves an extended resource.
    pub extended_resource_name: Option<Arc<str>>,
}

/// A device attribute's value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AttrValue {
    /// `bool`.
    Bool(bool),
    /// `int`.
    Int(i64),
    /// `string`.
    String(Arc<str>),
    /// `version` (a semantic version, compared as text here).
    Version(Arc<str>),
}

/// A device of a slice.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Device {
    /// `name`, unique in its pool.
    pub name: Arc<str>,
    /// `attributes`, by (possibly qualified) name.
    pub attributes: Vec<(Arc<str>, AttrValue)>,
    /// `capacity` values, by (possibly qualified) name.
    pub capacity: Vec<(Arc<str>, Quantity)>,
}

impl Device {
    /// The attribute named by the fully qualified `name` (`domain/id`), as the allocator looks it
    /// up: the attribute of that exact name, or, when the domain is the device's `driver`, the
    /// attribute named by the id alone (a driver's own attributes may omit its domain).
    pub fn attribute(&self, driver: &str, name: &str) -> Option<&AttrValue> {
        let find = |n: &str| {
            self.attributes
                .iter()
                .find(|(k, _)| **k == *n)
                .map(|(_, v)| v)
        };
        find(name).or_else(|| match name.split_once('/') {
            Some((domain, id)) if domain == driver => find(id),
            _ => None,
        })
    }
}

/// Which nodes reach a slice's devices.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SliceReach {
    /// `nodeName`: that node only.
    Node(Sym),
    /// `nodeSelector`: the nodes it selects.
    Selector(NodeSelector),
    /// `allNodes`.
    AllNodes,
}

/// A ResourceSlice.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ResourceSlice {
    /// Name.
    pub name: Arc<str>,
    /// `driver`.
    pub driver: Sym,
    /// `pool.name`.
    pub pool: Arc<str>,
    /// `pool.generation`.
    pub generation: i64,
    /// `pool.resourceSliceCount`.
    pub slice_count: i64,
    /// Which nodes reach its devices.
    pub reach: SliceReach,
    /// `devices`.
    pub devices: Vec<Device>,
}

/// The devices a node template carries: copies of the slices of the node it was made from (or
/// of those the provider describes), reached by that node only. Node-local devices of a real
/// node are looked up by its name instead.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeDevices {
    /// The slices, their reach ignored (the carrying node reaches them).
    pub slices: Vec<Arc<ResourceSlice>>,
}

/// Where a pod's claim comes from: `spec.resourceClaims[]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PodClaimSource {
    /// `resourceClaimName`: a claim that exists on its own (it may be shared).
    Claim(Arc<str>),
    /// `resourceClaimTemplateName`: a claim made for this pod from the template, named in
    /// `status.resourceClaimStatuses` once the controller created it.
    Template {
        /// The template.
        template: Arc<str>,
        /// The claim made from it, once created.
        generated: Option<Arc<str>>,
    },
}

/// One entry of a pod's `spec.resourceClaims`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodClaim {
    /// The entry's name (what containers name in `resources.claims`).
    pub name: Arc<str>,
    /// Where the claim comes from.
    pub source: PodClaimSource,
}

impl PodClaim {
    /// The name of the claim this entry stands for: the named claim, the generated one, or
    /// (not yet created) `<pod>-<entry>`, the name the simulation gives the claim the controller
    /// is about to make from the template.
    pub fn claim_name(&self, pod: &str) -> Arc<str> {
        match &self.source {
            PodClaimSource::Claim(c) => c.clone(),
            PodClaimSource::Template {
                generated: Some(g), ..
            } => g.clone(),
            PodClaimSource::Template {
                generated: None, ..
            } => Arc::from(format!("{pod}-{}", self.name)),
        }
    }

    /// The key of the claim this entry stands for (see [`PodClaim::claim_name`]) in the pod's
    /// `namespace`, built without joining `<pod>-<entry>`.
    pub fn claim_key(&self, namespace: Sym, pod: &Arc<str>) -> ClaimKey {
        match &self.source {
            PodClaimSource::Claim(c) => ClaimKey::new(namespace, c.clone()),
            PodClaimSource::Template {
                generated: Some(g), ..
            } => ClaimKey::new(namespace, g.clone()),
            PodClaimSource::Template {
                generated: None, ..
            } => ClaimKey::generated(namespace, pod.clone(), self.name.clone()),
        }
    }
}

/// The DRA objects of a view.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Dra {
    classes: FxHashMap<Arc<str>, Arc<DeviceClass>>,
    claims: FxHashMap<ClaimKey, Arc<ResourceClaim>>,
    /// By namespace, then name: a pod's claims look a template up by a name they hold, which
    /// is then hashed without being cloned into a key.
    templates: FxHashMap<Sym, FxHashMap<Arc<str>, Arc<ClaimTemplate>>>,
    /// Slices of complete pools reached by one node, by that node.
    by_node: FxHashMap<Sym, Vec<Arc<ResourceSlice>>>,
    /// Slices of complete pools reached through a node selector or by every node.
    shared: Vec<Arc<ResourceSlice>>,
    /// Devices allocated (exclusively) by the claims' `status.allocation`.
    allocated: FxHashSet<DeviceId>,
    /// The API server does not serve the DRA kinds: claims cannot be simulated.
    unserved: bool,
    /// Selector results already evaluated (see [`Dra::slice_matches`]).
    matched: SelectorCache,
}

/// The result of one CEL selector on each device of one slice, in the slice's order.
pub type SliceMatches = Arc<[Result<bool, Arc<str>>]>;

/// Results of CEL selectors on the devices of slices, by (program, slice) identity, with how
/// many device results they hold. Each entry keeps the selector and the slice alive, so an
/// identity cannot be reused by another object while its entry exists. A clone starts empty;
/// equality ignores it.
#[derive(Default)]
struct SelectorCache(std::sync::Mutex<CachedMatches>);

/// The entries by (program, slice) identity, and the device results they hold in all.
type CachedMatches = (FxHashMap<(usize, usize), CacheEntry>, usize);

/// The cached results of a slice, with the selector and the slice they keep alive.
type CacheEntry = (SliceMatches, CelSelector, Arc<ResourceSlice>);

impl Clone for SelectorCache {
    fn clone(&self) -> Self {
        SelectorCache::default()
    }
}

impl PartialEq for SelectorCache {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl std::fmt::Debug for SelectorCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SelectorCache")
    }
}

/// Most cached selector results (one per device and selector): past it the cache is emptied
/// (memory stays bounded whatever the number of devices and expressions).
const MAX_CACHED_MATCHES: usize = 1 << 20;

impl Dra {
    /// No DRA object.
    pub fn none() -> Arc<Dra> {
        static NONE: std::sync::LazyLock<Arc<Dra>> = std::sync::LazyLock::new(Arc::default);
        NONE.clone()
    }

    /// DRA objects of a cluster whose API server does not serve `resource.k8s.io/v1` (below
    /// Kubernetes 1.34, or DRA turned off): pods with claims cannot be simulated.
    pub fn unserved() -> Dra {
        Dra {
            unserved: true,
            ..Dra::default()
        }
    }

    /// Whether the cluster serves the DRA kinds (see [`Dra::unserved`]).
    pub fn is_available(&self) -> bool {
        !self.unserved
    }

    /// Whether each device of `slice` matches `selector`, in the slice's order, evaluated once
    /// per (selector, slice): a selector is a pure function of the device, and a decision asks
    /// the same question for every pending pod of a workload on every node, and for every copy
    /// of a template's slices. One lock per slice, not per device: the DRA filter reads a
    /// node's devices as a whole. Every device is evaluated the first time, so callers read the
    /// results in their own order and meet errors as lazy evaluation would.
    pub fn slice_matches(
        &self,
        selector: &CelSelector,
        slice: &Arc<ResourceSlice>,
    ) -> SliceMatches {
        let evaluate = || -> SliceMatches {
            let driver = slice.driver.as_str();
            (slice.devices.iter())
                .map(|d| selector.matches(driver, d).map_err(Arc::from))
                .collect()
        };
        let Some(program) = selector.program_id() else {
            return evaluate();
        };
        let key = (program, Arc::as_ptr(slice) as usize);
        let mut cache = match self.matched.0.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        let (entries, held) = &mut *cache;
        if let Some((results, ..)) = entries.get(&key) {
            return results.clone();
        }
        let results = evaluate();
        if *held + results.len() > MAX_CACHED_MATCHES {
            entries.clear();
            *held = 0;
        }
        *held += results.len();
        entries.insert(key, (results.clone(), selector.clone(), slice.clone()));
        results
    }

    /// Whether there is no DRA object at all.
    pub fn is_empty(&self) -> bool {
        self.classes.is_empty()
            && self.claims.is_empty()
            && self.templates.is_empty()
            && self.by_node.is_empty()
            && self.shared.is_empty()
    }

    /// The DeviceClass `name`.
    pub fn class(&self, name: &str) -> Option<&Arc<DeviceClass>> {
        self.classes.get(name)
    }

    /// The ResourceClaim `namespace/name`.
    pub fn claim(&self, namespace: Sym, name: &Arc<str>) -> Option<&Arc<ResourceClaim>> {
        self.claim_by_key(&ClaimKey::new(namespace, name.clone()))
    }

    /// The ResourceClaim of `key`.
    pub fn claim_by_key(&self, key: &ClaimKey) -> Option<&Arc<ResourceClaim>> {
        self.claims.get(key)
    }

    /// The ResourceClaimTemplate `namespace/name`.
    pub fn template(&self, namespace: Sym, name: &Arc<str>) -> Option<&Arc<ClaimTemplate>> {
        self.templates.get(&namespace)?.get(&**name)
    }

    /// Every claim.
    pub fn claims(&self) -> impl Iterator<Item = &Arc<ResourceClaim>> + '_ {
        self.claims.values()
    }

    /// The slices whose devices only the node `name` reaches (those of complete pools).
    pub fn node_slices(&self, name: Sym) -> &[Arc<ResourceSlice>] {
        self.by_node.get(&name).map_or(&[], |v| v.as_slice())
    }

    /// The slices reached through a node selector or by every node (complete pools only).
    pub fn shared_slices(&self) -> &[Arc<ResourceSlice>] {
        &self.shared
    }

    /// Whether `id` is allocated exclusively by a claim's `status.allocation`.
    pub fn is_allocated(&self, id: &DeviceId) -> bool {
        self.allocated.contains(id)
    }

    /// Adds (or replaces) a DeviceClass.
    pub fn insert_class(&mut self, class: DeviceClass) {
        self.classes.insert(class.name.clone(), Arc::new(class));
    }

    /// Adds (or replaces) a claim, with its allocated devices.
    pub fn insert_claim(&mut self, claim: ResourceClaim) {
        let key = ClaimKey::new(claim.namespace, claim.name.clone());
        if let Some(old) = self.claims.get(&key) {
            for d in old.allocation.iter().flat_map(|a| &a.devices) {
                self.allocated.remove(&d.id);
            }
        }
        for d in claim.allocation.iter().flat_map(|a| &a.devices) {
            if !d.admin_access {
                self.allocated.insert(d.id.clone());
            }
        }
        self.claims.insert(key, Arc::new(claim));
    }

    /// Adds (or replaces) a claim template.
    pub fn insert_template(&mut self, template: ClaimTemplate) {
        (self.templates.entry(template.namespace).or_default())
            .insert(template.name.clone(), Arc::new(template));
    }

    /// Sets the slices, keeping those of complete pools at their newest generation.
    pub fn set_slices(&mut self, slices: Vec<ResourceSlice>) {
        // (driver, pool) -> (newest generation, slices of it seen, count they promise)
        let mut pools: FxHashMap<(Sym, Arc<str>), (i64, i64, i64)> = FxHashMap::default();
        for s in &slices {
            let e =
                pools
                    .entry((s.driver, s.pool.clone()))
                    .or_insert((s.generation, 0, s.slice_count));
            if s.generation > e.0 {
                *e = (s.generation, 0, s.slice_count);
            }
            if s.generation == e.0 {
                e.1 += 1;
            }
        }
        self.by_node.clear();
        self.shared.clear();
        for s in slices {
            let Some(&(generation, seen, count)) = pools.get(&(s.driver, s.pool.clone())) else {
                continue;
            };
            if s.generation != generation || seen < count {
                continue;
            }
            match s.reach {
                SliceReach::Node(n) => self.by_node.entry(n).or_default().push(Arc::new(s)),
                _ => self.shared.push(Arc::new(s)),
            }
        }
    }

    /// Reads the DRA kinds of `store`; objects that do not convert are returned as errors.
    pub fn from_store(store: &ObjectStore) -> (Dra, Vec<ObjectError>) {
        let mut out = Dra::default();
        let mut errors = Vec::new();
        read::<resource::DeviceClass, _>(store, DRA_GROUP, "DeviceClass", &mut errors, |k, o| {
            out.insert_class(class_from_k8s(k, o)?);
            Ok(())
        });
        read::<resource::ResourceClaim, _>(
            store,
            DRA_GROUP,
            "ResourceClaim",
            &mut errors,
            |k, o| {
                out.insert_claim(claim_from_k8s(k, o)?);
                Ok(())
            },
        );
        read::<resource::ResourceClaimTemplate, _>(
            store,
            DRA_GROUP,
            "ResourceClaimTemplate",
            &mut errors,
            |k, o| {
                out.insert_template(template_from_k8s(k, o)?);
                Ok(())
            },
        );
        let mut slices = Vec::new();
        read::<resource::ResourceSlice, _>(
            store,
            DRA_GROUP,
            "ResourceSlice",
            &mut errors,
            |k, o| {
                slices.push(slice_from_k8s(k, o)?);
                Ok(())
            },
        );
        out.set_slices(slices);
        (out, errors)
    }
}

/// Refuses a list longer than `max` at `field`.
fn bounded<T>(object: &str, field: &str, list: &[T], max: usize) -> Result<(), ModelError> {
    if list.len() > max {
        return Err(invalid(
            object,
            field,
            &format!("{} entries", list.len()),
            &format!("must have at most {max} entries"),
        ));
    }
    Ok(())
}

fn selectors(
    object: &str,
    field: &str,
    list: Option<&Vec<resource::DeviceSelector>>,
) -> Result<Vec<CelSelector>, ModelError> {
    let list = list.map_or(&[][..], |l| l.as_slice());
    bounded(object, field, list, MAX_REQUESTS)?;
    // A selector without `cel` selects every device (no other kind of selector exists yet).
    Ok(list
        .iter()
        .filter_map(|s| s.cel.as_ref())
        .map(|c| CelSelector::compile(&c.expression))
        .collect())
}

fn mode(
    object: &str,
    field: &str,
    mode: Option<&str>,
    count: Option<i64>,
) -> Result<AllocationMode, ModelError> {
    match mode.unwrap_or("ExactCount") {
        "ExactCount" => {
            let n = count.unwrap_or(1);
            match u32::try_from(n) {
                Ok(n) if (1..=MAX_COUNT).contains(&n) => Ok(AllocationMode::ExactCount(n)),
                _ => Err(invalid(
                    object,
                    &format!("{field}.count"),
                    &n.to_string(),
                    &format!("must be between 1 and {MAX_COUNT}"),
                )),
            }
        }
        "All" => Ok(AllocationMode::All),
        other => Err(invalid(
            object,
            &format!("{field}.allocationMode"),
            other,
            "must be ExactCount or All",
        )),
    }
}

/// `spec.devices` of a claim or template, at `path`.
fn claim_spec(
    object: &str,
    path: &str,
    devices: Option<&resource::DeviceClaim>,
) -> Result<ClaimSpec, ModelError> {
    let requests = devices.and_then(|d| d.requests.as_ref());
    let requests = requests.map_or(&[][..], |r| r.as_slice());
    let field = format!("{path}.requests");
    bounded(object, &field, requests, MAX_REQUESTS)?;
    let mut out = Vec::with_capacity(requests.len());
    for (i, r) in requests.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let mut alternatives = Vec::new();
        if let Some(e) = r.exactly.as_ref() {
            let at = format!("{at}.exactly");
            alternatives.push(Subrequest {
                name: Arc::from(r.name.as_str()),
                class: Arc::from(e.device_class_name.as_str()),
                selectors: selectors(object, &format!("{at}.selectors"), e.selectors.as_ref())?,
                mode: mode(object, &at, e.allocation_mode.as_deref(), e.count)?,
                admin_access: e.admin_access.unwrap_or(false),
            });
        } else if let Some(subs) = r.first_available.as_ref() {
            let at = format!("{at}.firstAvailable");
            bounded(object, &at, subs, MAX_REQUESTS)?;
            for (j, s) in subs.iter().enumerate() {
                let at = format!("{at}[{j}]");
                alternatives.push(Subrequest {
                    name: Arc::from(format!("{}/{}", r.name, s.name)),
                    class: Arc::from(s.device_class_name.as_str()),
                    selectors: selectors(object, &format!("{at}.selectors"), s.selectors.as_ref())?,
                    mode: mode(object, &at, s.allocation_mode.as_deref(), s.count)?,
                    admin_access: false,
                });
            }
        }
        if alternatives.is_empty() {
            return Err(ModelError::Missing {
                object: object.to_string(),
                field: format!("{at}.exactly"),
            });
        }
        out.push(DeviceRequest {
            name: Arc::from(r.name.as_str()),
            alternatives,
        });
    }
    let constraints = devices.and_then(|d| d.constraints.as_ref());
    let constraints = constraints.map_or(&[][..], |c| c.as_slice());
    let field = format!("{path}.constraints");
    bounded(object, &field, constraints, MAX_REQUESTS)?;
    let constraints = (constraints.iter().enumerate())
        .map(|(i, c)| constraint(object, &format!("{field}[{i}]"), c, &out))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ClaimSpec {
        requests: out,
        constraints,
    })
}

/// Longest domain of a fully qualified attribute name (the API's `DeviceMaxDomainLength`).
const MAX_DOMAIN_LEN: usize = 63;

/// Longest id of an attribute name (the API's `DeviceMaxIDLength`).
const MAX_ID_LEN: usize = 32;

/// One entry of `constraints`, at `path`, checked as the API server validates it: exactly one
/// kind of constraint, a fully qualified attribute name, requests that the claim has.
fn constraint(
    object: &str,
    path: &str,
    c: &resource::DeviceConstraint,
    requests: &[DeviceRequest],
) -> Result<DeviceConstraint, ModelError> {
    if let Some(d) = c.distinct_attribute.as_deref() {
        return Err(invalid(
            object,
            &format!("{path}.distinctAttribute"),
            d,
            "distinctAttribute (alpha, DRAConsumableCapacity) is not supported",
        ));
    }
    let Some(name) = c.match_attribute.as_deref() else {
        return Err(ModelError::Missing {
            object: object.to_string(),
            field: format!("{path}.matchAttribute"),
        });
    };
    let at = format!("{path}.matchAttribute");
    let qualified = name.split_once('/').is_some_and(|(domain, id)| {
        let domain_ok = !domain.is_empty()
            && domain.len() <= MAX_DOMAIN_LEN
            && domain.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            });
        let id_ok = !id.is_empty()
            && id.len() <= MAX_ID_LEN
            && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !id.as_bytes()[0].is_ascii_digit();
        domain_ok && id_ok
    });
    if !qualified {
        return Err(invalid(
            object,
            &at,
            name,
            "must be a fully qualified attribute name (domain/id)",
        ));
    }
    let names = c.requests.as_deref().unwrap_or(&[]);
    let field = format!("{path}.requests");
    bounded(object, &field, names, MAX_REQUESTS)?;
    for (i, n) in names.iter().enumerate() {
        let (main, sub) = match n.split_once('/') {
            Some((m, s)) => (m, Some(s)),
            None => (n.as_str(), None),
        };
        let known = requests.iter().any(|r| {
            *r.name == *main && sub.is_none_or(|_| r.alternatives.iter().any(|a| *a.name == **n))
        });
        if !known {
            return Err(invalid(
                object,
                &format!("{field}[{i}]"),
                n,
                "must be the name of a request in the claim",
            ));
        }
    }
    Ok(DeviceConstraint {
        requests: names.iter().map(|n| Arc::from(n.as_str())).collect(),
        attribute: Arc::from(name),
    })
}

fn class_from_k8s(key: &ObjectKey, o: &resource::DeviceClass) -> Result<DeviceClass, ModelError> {
    let object = format!("DeviceClass {}", key.name);
    Ok(DeviceClass {
        name: Arc::from(key.name.as_str()),
        selectors: selectors(&object, "spec.selectors", o.spec.selectors.as_ref())?,
        extended_resource_name: o.spec.extended_resource_name.as_deref().map(Arc::from),
    })
}

fn template_from_k8s(
    key: &ObjectKey,
    o: &resource::ResourceClaimTemplate,
) -> Result<ClaimTemplate, ModelError> {
    let object = format!("ResourceClaimTemplate {}/{}", key.namespace, key.name);
    Ok(ClaimTemplate {
        namespace: Sym::new(&key.namespace),
        name: Arc::from(key.name.as_str()),
        spec: Arc::new(claim_spec(
            &object,
            "spec.spec.devices",
            o.spec.spec.devices.as_ref(),
        )?),
    })
}

fn claim_from_k8s(
    key: &ObjectKey,
    o: &resource::ResourceClaim,
) -> Result<ResourceClaim, ModelError> {
    let object = format!("ResourceClaim {}/{}", key.namespace, key.name);
    let spec = claim_spec(&object, "spec.devices", o.spec.devices.as_ref())?;
    let status = o.status.as_ref();
    let allocation = match status.and_then(|s| s.allocation.as_ref()) {
        None => None,
        Some(a) => {
            let node_selector = match a.node_selector.as_ref() {
                None => AllocationNodes::All,
                Some(s) => AllocationNodes::Selector(Arc::new(node_selector(
                    &object,
                    "status.allocation.nodeSelector",
                    s,
                )?)),
            };
            let results = a.devices.as_ref().and_then(|d| d.results.as_ref());
            let results = results.map_or(&[][..], |r| r.as_slice());
            bounded(
                &object,
                "status.allocation.devices.results",
                results,
                MAX_DEVICES,
            )?;
            let devices = results
                .iter()
                .map(|r| AllocatedDevice {
                    request: Arc::from(r.request.as_str()),
                    id: DeviceId {
                        driver: Sym::new(&r.driver),
                        pool: Arc::from(r.pool.as_str()),
                        device: Arc::from(r.device.as_str()),
                        node: None,
                    },
                    admin_access: r.admin_access.unwrap_or(false),
                })
                .collect();
            Some(Arc::new(ClaimAllocation {
                node_selector,
                devices,
            }))
        }
    };
    let reserved = status.and_then(|s| s.reserved_for.as_ref());
    let reserved = reserved.map_or(&[][..], |r| r.as_slice());
    bounded(&object, "status.reservedFor", reserved, MAX_RESERVED_FOR)?;
    Ok(ResourceClaim {
        namespace: Sym::new(&key.namespace),
        name: Arc::from(key.name.as_str()),
        spec: Arc::new(spec),
        allocation,
        reserved_for: reserved
            .iter()
            .filter(|r| r.resource == "pods")
            .map(|r| Arc::from(r.name.as_str()))
            .collect(),
        deleting: o.metadata.deletion_timestamp.is_some(),
    })
}

fn slice_from_k8s(
    key: &ObjectKey,
    o: &resource::ResourceSlice,
) -> Result<ResourceSlice, ModelError> {
    let object = format!("ResourceSlice {}", key.name);
    let spec = &o.spec;
    let reach = match (
        spec.node_name.as_deref().filter(|n| !n.is_empty()),
        spec.node_selector.as_ref(),
        spec.all_nodes.unwrap_or(false),
    ) {
        (Some(n), None, false) => SliceReach::Node(Sym::new(n)),
        (None, Some(s), false) => {
            SliceReach::Selector(node_selector(&object, "spec.nodeSelector", s)?)
        }
        (None, None, true) => SliceReach::AllNodes,
        (None, None, false) if spec.per_device_node_selection == Some(true) => {
            return Err(invalid(
                &object,
                "spec.perDeviceNodeSelection",
                "true",
                "per-device node selection is not supported",
            ));
        }
        _ => {
            return Err(invalid(
                &object,
                "spec.nodeName",
                spec.node_name.as_deref().unwrap_or(""),
                "exactly one of nodeName, nodeSelector, allNodes must be set",
            ));
        }
    };
    let devices = spec.devices.as_ref().map_or(&[][..], |d| d.as_slice());
    bounded(&object, "spec.devices", devices, MAX_DEVICES)?;
    let mut out = Vec::with_capacity(devices.len());
    for (i, d) in devices.iter().enumerate() {
        out.push(device_from_k8s(&object, &format!("spec.devices[{i}]"), d)?);
    }
    Ok(ResourceSlice {
        name: Arc::from(key.name.as_str()),
        driver: Sym::new(&spec.driver),
        pool: Arc::from(spec.pool.name.as_str()),
        generation: spec.pool.generation,
        slice_count: spec.pool.resource_slice_count.max(1),
        reach,
        devices: out,
    })
}

fn device_from_k8s(object: &str, path: &str, d: &resource::Device) -> Result<Device, ModelError> {
    let attributes = d.attributes.as_ref();
    let capacity = d.capacity.as_ref();
    let entries = attributes.map_or(0, |a| a.len()) + capacity.map_or(0, |c| c.len());
    if entries > cel::MAX_DEVICE_ENTRIES {
        return Err(invalid(
            object,
            &format!("{path}.attributes"),
            &format!("{entries} attributes and capacities"),
            &format!("must have at most {} together", cel::MAX_DEVICE_ENTRIES),
        ));
    }
    let mut attrs = Vec::new();
    for (name, a) in attributes.into_iter().flatten() {
        let value = match (a.bool, a.int, a.string.as_deref(), a.version.as_deref()) {
            (Some(b), None, None, None) => AttrValue::Bool(b),
            (None, Some(i), None, None) => AttrValue::Int(i),
            (None, None, Some(s), None) => AttrValue::String(Arc::from(s)),
            (None, None, None, Some(v)) => AttrValue::Version(Arc::from(v)),
            _ => {
                return Err(invalid(
                    object,
                    &format!("{path}.attributes[{name}]"),
                    "",
                    "exactly one of bool, int, string, version must be set",
                ));
            }
        };
        attrs.push((Arc::from(name.as_str()), value));
    }
    let mut caps = Vec::new();
    for (name, c) in capacity.into_iter().flatten() {
        let q = c
            .value
            .0
            .trim()
            .parse::<Quantity>()
            .map_err(|error| ModelError::Quantity {
                object: object.to_string(),
                field: format!("{path}.capacity[{name}].value"),
                error,
            })?;
        caps.push((Arc::from(name.as_str()), q));
    }
    Ok(Device {
        name: Arc::from(d.name.as_str()),
        attributes: attrs,
        capacity: caps,
    })
}

/// The claims a pod names: `spec.resourceClaims`, with the generated names of
/// `status.resourceClaimStatuses`. `object` names the pod in errors.
pub(crate) fn pod_claims(object: &str, pod: &core::Pod) -> Result<Vec<PodClaim>, ModelError> {
    let Some(list) = pod.spec.as_ref().and_then(|s| s.resource_claims.as_ref()) else {
        return Ok(Vec::new());
    };
    bounded(object, "spec.resourceClaims", list, MAX_REQUESTS)?;
    let statuses = pod
        .status
        .as_ref()
        .and_then(|s| s.resource_claim_statuses.as_ref());
    let mut out = Vec::with_capacity(list.len());
    for (i, c) in list.iter().enumerate() {
        let source = match (
            c.resource_claim_name.as_deref(),
            c.resource_claim_template_name.as_deref(),
        ) {
            (Some(n), None) => PodClaimSource::Claim(Arc::from(n)),
            (None, Some(t)) => PodClaimSource::Template {
                template: Arc::from(t),
                generated: statuses
                    .into_iter()
                    .flatten()
                    .find(|s| s.name == c.name)
                    .and_then(|s| s.resource_claim_name.as_deref())
                    .map(Arc::from),
            },
            _ => {
                return Err(invalid(
                    object,
                    &format!("spec.resourceClaims[{i}]"),
                    &c.name,
                    "exactly one of resourceClaimName and resourceClaimTemplateName must be set",
                ));
            }
        };
        out.push(PodClaim {
            name: Arc::from(c.name.as_str()),
            source,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn store(yaml: &str) -> ObjectStore {
        let mut s = ObjectStore::new();
        s.load_yaml(yaml).expect("valid yaml");
        s
    }

    const SLICES: &str = "\
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpu}
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 1}
  devices:
  - name: gpu-0
    attributes: {model: {string: a100}, example.com/numa: {int: 0}}
    capacity: {memory: {value: 40Gi}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n2-gpu-old}
spec:
  driver: gpu.example.com
  nodeName: n2
  pool: {name: n2, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n2-gpu-a}
spec:
  driver: gpu.example.com
  nodeName: n2
  pool: {name: n2, generation: 2, resourceSliceCount: 2}
  devices: [{name: gpu-1}]
";

    #[test]
    fn slices_of_incomplete_pools_and_older_generations_offer_nothing() {
        let (dra, errors) = Dra::from_store(&store(SLICES));
        assert!(errors.is_empty(), "{errors:?}");
        let n1 = dra.node_slices(Sym::new("n1"));
        assert_eq!(n1.len(), 1);
        assert_eq!(n1[0].devices[0].capacity[0].1, "40Gi".parse().unwrap());
        assert_eq!(
            n1[0].devices[0].attributes,
            [
                (Arc::from("example.com/numa"), AttrValue::Int(0)),
                (Arc::from("model"), AttrValue::String(Arc::from("a100")))
            ]
        );
        // Generation 2 promises two slices and one is published: incomplete, and the older
        // generation no longer counts.
        assert!(dra.node_slices(Sym::new("n2")).is_empty());
    }

    #[test]
    fn selector_results_come_per_device_in_slice_order_and_are_evaluated_once() {
        let slice = Arc::new(ResourceSlice {
            name: Arc::from("s"),
            driver: Sym::new("gpu.example.com"),
            pool: Arc::from("n1"),
            generation: 1,
            slice_count: 1,
            reach: SliceReach::Node(Sym::new("n1")),
            devices: ["a100", "h100", "a100"]
                .iter()
                .enumerate()
                .map(|(i, model)| Device {
                    name: Arc::from(format!("gpu-{i}")),
                    attributes: vec![(Arc::from("model"), AttrValue::String(Arc::from(*model)))],
                    capacity: Vec::new(),
                })
                .collect(),
        });
        let dra = Dra::default();
        let a100 = CelSelector::compile("device.attributes['gpu.example.com'].model == 'a100'");
        let first = dra.slice_matches(&a100, &slice);
        assert_eq!(&first[..], [Ok(true), Ok(false), Ok(true)]);
        // The second question is answered from the cache: the very same results.
        assert!(Arc::ptr_eq(&first, &dra.slice_matches(&a100, &slice)));
        // A failure is the result of each device it fails on, never a panic.
        let missing = CelSelector::compile("device.attributes['gpu.example.com'].numa == 0");
        let results = dra.slice_matches(&missing, &slice);
        assert_eq!(results.len(), 3);
        assert!(
            results
                .iter()
                .all(|r| r.as_ref().is_err_and(|e| e.contains("CEL")))
        );
        let broken = CelSelector::compile("device.driver ==");
        let results = dra.slice_matches(&broken, &slice);
        assert!(
            results
                .iter()
                .all(|r| r.as_ref().is_err_and(|e| e.contains("compil")))
        );
        // Another slice with the same devices is another entry.
        let copy = Arc::new((*slice).clone());
        assert!(!Arc::ptr_eq(&first, &dra.slice_matches(&a100, &copy)));
    }

    #[test]
    fn claims_templates_and_classes_convert_with_their_requests() {
        let (dra, errors) = Dra::from_store(&store(
            "\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors: [{cel: {expression: \"device.driver == 'gpu.example.com'\"}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        firstAvailable:
        - {name: big, deviceClassName: gpu.example.com, count: 2}
        - {name: any, deviceClassName: gpu.example.com, allocationMode: All}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared, namespace: ml}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]
status:
  allocation:
    devices:
      results: [{request: gpu, driver: gpu.example.com, pool: n1, device: gpu-0}]
    nodeSelector:
      nodeSelectorTerms: [{matchFields: [{key: metadata.name, operator: In, values: [n1]}]}]
  reservedFor: [{resource: pods, name: p1, uid: u1}]
",
        ));
        assert!(errors.is_empty(), "{errors:?}");
        let class = dra.class("gpu.example.com").unwrap();
        assert_eq!(class.selectors.len(), 1);
        let t = dra.template(Sym::new("ml"), &Arc::from("one-gpu")).unwrap();
        let alts = &t.spec.requests[0].alternatives;
        assert_eq!(&*alts[0].name, "gpu/big");
        assert_eq!(alts[0].mode, AllocationMode::ExactCount(2));
        assert_eq!(alts[1].mode, AllocationMode::All);
        let c = dra.claim(Sym::new("ml"), &Arc::from("shared")).unwrap();
        assert_eq!(&*c.reserved_for[0], "p1");
        let id = &c.allocation.as_ref().unwrap().devices[0].id;
        assert!(dra.is_allocated(id));
    }

    #[test]
    fn constraints_convert_and_bad_ones_are_errors_naming_the_field() {
        let claim = |name: &str, constraints: &str| {
            format!(
                "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n\
                 metadata: {{name: {name}, namespace: ml}}\nspec:\n  devices:\n    requests:\n    \
                 - {{name: a, exactly: {{deviceClassName: g}}}}\n    \
                 - name: b\n      firstAvailable: [{{name: big, deviceClassName: g}}]\n    \
                 constraints: {constraints}\n"
            )
        };
        let yaml = [
            claim(
                "ok",
                "[{matchAttribute: gpu.example.com/numa}, \
                 {requests: [a, b/big], matchAttribute: example.com/pcie_root}]",
            ),
            claim("unqualified", "[{matchAttribute: numa}]"),
            claim(
                "unknown-request",
                "[{requests: [c], matchAttribute: x.io/numa}]",
            ),
            claim(
                "unknown-sub",
                "[{requests: [b/small], matchAttribute: x.io/numa}]",
            ),
            claim("distinct", "[{distinctAttribute: x.io/numa}]"),
            claim("empty", "[{requests: [a]}]"),
        ]
        .join("---\n");
        let (dra, errors) = Dra::from_store(&store(&yaml));
        let spec = &dra.claim(Sym::new("ml"), &Arc::from("ok")).unwrap().spec;
        assert_eq!(spec.constraints.len(), 2);
        assert!(spec.constraints[0].requests.is_empty());
        assert_eq!(&*spec.constraints[0].attribute, "gpu.example.com/numa");
        let c = &spec.constraints[1];
        assert!(c.applies_to("a", "a") && c.applies_to("b", "b/big"));
        assert!(!c.applies_to("b", "b/small"));
        let mut texts: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        texts.sort();
        let want = [
            (
                "ml/distinct",
                "spec.devices.constraints[0].distinctAttribute",
            ),
            ("ml/empty", "spec.devices.constraints[0].matchAttribute"),
            (
                "ml/unknown-request",
                "spec.devices.constraints[0].requests[0]",
            ),
            ("ml/unknown-sub", "spec.devices.constraints[0].requests[0]"),
            (
                "ml/unqualified",
                "spec.devices.constraints[0].matchAttribute",
            ),
        ];
        assert_eq!(texts.len(), want.len(), "{texts:?}");
        for (text, (claim, field)) in texts.iter().zip(want) {
            assert!(text.contains(claim) && text.contains(field), "{text}");
        }
    }

    #[test]
    fn an_attribute_is_found_by_its_full_name_or_in_the_drivers_domain() {
        let device = Device {
            name: Arc::from("gpu-0"),
            attributes: vec![
                (Arc::from("numa"), AttrValue::Int(1)),
                (Arc::from("example.com/numa"), AttrValue::Int(2)),
            ],
            capacity: Vec::new(),
        };
        let d = "gpu.example.com";
        assert_eq!(
            device.attribute(d, "gpu.example.com/numa"),
            Some(&AttrValue::Int(1))
        );
        assert_eq!(
            device.attribute(d, "example.com/numa"),
            Some(&AttrValue::Int(2))
        );
        // Another domain does not see the driver's own attributes.
        assert_eq!(device.attribute(d, "other.com/numa"), None);
        assert_eq!(device.attribute(d, "numa"), Some(&AttrValue::Int(1)));
    }

    #[test]
    fn malformed_objects_are_errors_naming_the_field() {
        let (_, errors) = Dra::from_store(&store(
            "\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: c, namespace: ml}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: g, count: 0}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: s}
spec:
  driver: d
  nodeName: n1
  allNodes: true
  pool: {name: p, generation: 1, resourceSliceCount: 1}
",
        ));
        let texts: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert_eq!(texts.len(), 2, "{texts:?}");
        assert!(
            texts[0].contains("spec.devices.requests[0].exactly.count"),
            "{texts:?}"
        );
        assert!(texts[1].contains("spec.nodeName"), "{texts:?}");
    }
}
