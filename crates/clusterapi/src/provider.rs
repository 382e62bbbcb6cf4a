//! Discovery: node groups from the MachineDeployments, MachineSets and MachinePools of an
//! object store, with their sizes, instances (from Machines), scale-from-zero templates and
//! option overrides, and the map from nodes to groups.
//!
//! It decides which objects are node groups and what state each Machine is in. It only reads
//! the store: it never changes an object and never talks to a cluster. Every problem with an
//! object becomes a warning naming the object, and that object is skipped; nothing panics.

use std::collections::BTreeMap;
use std::sync::Arc;

use autoscaler_model::Node;
use autoscaler_model::ObjectStore;
use autoscaler_model::{
    CloudProvider, Instance, InstanceError, InstanceErrorClass, InstanceState, NodeGroup,
    NodeGroupId,
};
use autoscaler_model::{ObjectKey, group_of};
use rustc_hash::{FxHashMap, FxHashSet};
use serde_json::Value;

use crate::annotations;
use crate::config::{
    ClusterApiConfig, OPENSHIFT_API_GROUP, OPENSHIFT_CLUSTER_API_NAMESPACE, cluster_name_of,
};
use crate::devices;
use crate::infrastructure;

/// Kind of a MachineDeployment.
pub const MACHINE_DEPLOYMENT: &str = "MachineDeployment";
/// Kind of a MachineSet.
pub const MACHINE_SET: &str = "MachineSet";
/// Kind of a MachinePool.
pub const MACHINE_POOL: &str = "MachinePool";
/// Kind of a Machine.
pub const MACHINE: &str = "Machine";
/// API group of OpenShift's `MachineAutoscaler`.
pub const MACHINE_AUTOSCALER_GROUP: &str = "autoscaling.openshift.io";
/// Kind of OpenShift's `MachineAutoscaler`.
pub const MACHINE_AUTOSCALER: &str = "MachineAutoscaler";
/// Annotation that pauses reconciliation of a Cluster API resource (upstream never autoscales
/// a paused resource).
pub const PAUSED_ANNOTATION: &str = "cluster.x-k8s.io/paused";
/// Label a MachineDeployment puts on its MachineSets.
pub const DEPLOYMENT_NAME_LABEL: &str = "cluster.x-k8s.io/deployment-name";
/// Annotation with which a MachineDeployment numbers the revision each of its MachineSets
/// stands for.
pub const REVISION_ANNOTATION: &str = "machinedeployment.clusters.x-k8s.io/revision";
/// Node label naming a node's GPU type for GPU limits.
pub const GPU_LABEL: &str = "cluster-api/accelerator";
/// `spec.authoritativeAPI` value of a Machine API MachineSet that Machine API manages.
pub const AUTHORITATIVE_MACHINE_API: &str = "MachineAPI";
/// Machine phase of a terminal failure.
const PHASE_FAILED: &str = "Failed";

/// The instance id of a Machine that has no `spec.providerID` yet: `clusterapi://<ns>/<name>`.
/// Stable across the Machine's life until it gets a provider id, so the core tracks it as one
/// instance.
pub fn placeholder_id(namespace: &str, name: &str) -> String {
    format!("clusterapi://{namespace}/{name}")
}

/// Where a group's min and max came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BoundsSource {
    /// The `<group>/cluster-api-autoscaler-node-group-{min,max}-size` annotations.
    Annotations,
    /// An OpenShift `MachineAutoscaler` targeting the resource.
    MachineAutoscaler(ObjectKey),
}

/// One Machine (or, for a MachinePool without Machine objects, one provider id) of a group.
#[derive(Clone, Debug, PartialEq)]
pub struct MachineInfo {
    /// The Machine, `None` for a MachinePool instance known only from `spec.providerIDList`.
    pub key: Option<ObjectKey>,
    /// The Machine's `apiVersion` as found.
    pub api_version: String,
    /// The provider id (`spec.providerID`, else the referenced Node's).
    pub provider_id: Option<Arc<str>>,
    /// The id reported to the core: the provider id, else [`placeholder_id`].
    pub instance_id: Arc<str>,
    /// `status.nodeRef.name`.
    pub node_name: Option<String>,
    /// State.
    pub state: InstanceState,
    /// The failure the Machine reports.
    pub error: Option<InstanceError>,
    /// Whether it already carries the delete-machine annotation.
    pub marked_for_deletion: bool,
    /// Whether that annotation carries the value this autoscaler writes
    /// ([`crate::changes::DELETE_MACHINE_VALUE`]): a mark of ours, not a user's.
    pub marked_by_autoscaler: bool,
    /// Whether the Machine has a deletion timestamp (its owner or someone deletes it).
    pub deletion_started: bool,
}

impl MachineInfo {
    /// Whether the Machine has become a healthy node: a node reference, not failed, not deleting.
    pub fn has_node(&self) -> bool {
        self.node_name.is_some() && self.error.is_none() && self.state != InstanceState::Deleting
    }
}

/// What actions need to know about a group's scalable resource.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalableResource {
    /// The resource (its group, kind, namespace, name).
    pub key: ObjectKey,
    /// Its `apiVersion` as found in the store.
    pub api_version: String,
    /// Min size.
    pub min_size: usize,
    /// Max size.
    pub max_size: usize,
    /// `spec.replicas`.
    pub replicas: i64,
    /// `metadata.resourceVersion`, the precondition of a replica change decided from it.
    pub resource_version: Option<String>,
    /// Where min and max came from.
    pub bounds_from: BoundsSource,
    /// Its Machines (shared with the discovery cache while a Machine is unchanged).
    pub machines: Vec<Arc<MachineInfo>>,
}

impl ScalableResource {
    /// The Machines this autoscaler marked for deletion that their owner will not delete: none
    /// of them has a deletion timestamp, and the Machines without one are no more than the
    /// replicas, so the lowered replicas were absorbed elsewhere (the set deleted another
    /// "must delete" Machine first, an unhealthy one or one without a node, or the decrease
    /// never landed). Left alone, such a mark keeps its node tainted for good, and at the next
    /// decrease the set deletes that Machine instead of the node drained for it. A
    /// MachinePool's instances are not deleted through marks, so it has none.
    pub fn stale_marks(&self) -> impl Iterator<Item = &MachineInfo> {
        let existing = self
            .machines
            .iter()
            .filter(|m| m.key.is_some() && !m.deletion_started)
            .count();
        let absorbed = self.key.kind != MACHINE_POOL
            && i64::try_from(existing).is_ok_and(|n| n <= self.replicas);
        self.machines
            .iter()
            .map(|m| &**m)
            .filter(move |m| absorbed && m.marked_by_autoscaler && !m.deletion_started)
    }
}

/// The Cluster API provider: node groups discovered from an object store.
#[derive(Clone, Debug, Default)]
pub struct ClusterApiProvider {
    config: ClusterApiConfig,
    groups: Vec<NodeGroup>,
    resources: Vec<ScalableResource>,
    by_provider_id: FxHashMap<Arc<str>, usize>,
    by_node_name: FxHashMap<String, usize>,
}

/// What discovery reads from one Machine: what selection needs and the instance it stands
/// for. Kept in a [`DiscoveryCache`] while the Machine is the same object (the same `Arc`).
#[derive(Debug)]
struct MachineRead {
    /// The object this was read from (held: its address identifies it in the cache).
    obj: Arc<Value>,
    /// The Node consulted for the provider id (`spec.providerID` empty) and what it was
    /// (`None`: none consulted).
    node: Option<Option<Arc<Value>>>,
    labels: BTreeMap<String, String>,
    owner_set: Option<String>,
    owner_pool: Option<String>,
    cluster: String,
    info: Arc<MachineInfo>,
}

/// A Machine object with what selection needs.
struct MachineObj<'a> {
    key: &'a ObjectKey,
    read: Arc<MachineRead>,
}

/// What discovery read from each Machine in its last pass, so that the next pass reads again
/// only the Machines that changed (the informers keep an unchanged object's `Arc`, so identity
/// tells). Without it ([`ClusterApiProvider::discover`]) every pass reads every Machine's JSON;
/// with it ([`ClusterApiProvider::discover_cached`]) a pass where few Machines changed costs
/// little more than listing them. The result is the same either way.
#[derive(Debug, Default)]
pub struct DiscoveryCache {
    /// The configuration the reads were made with (another one starts afresh).
    config: Option<ClusterApiConfig>,
    /// Reads by the address of the object read (held in the read, so never reused while
    /// cached), with the pass that last listed it.
    machines: FxHashMap<usize, (u64, Arc<MachineRead>)>,
    /// The pass under way.
    pass: u64,
    /// Machines listed by the pass under way.
    listed: usize,
    /// Names of the Nodes the last pass looked a provider id up in (present or not).
    nodes_read: FxHashSet<String>,
}

impl DiscoveryCache {
    /// An empty cache.
    pub fn new() -> DiscoveryCache {
        DiscoveryCache::default()
    }

    /// Number of Machines remembered.
    pub fn len(&self) -> usize {
        self.machines.len()
    }

    /// Whether no Machine is remembered.
    pub fn is_empty(&self) -> bool {
        self.machines.is_empty()
    }

    /// Starts a pass with `config`, forgetting everything read with another configuration.
    fn begin(&mut self, config: &ClusterApiConfig) {
        if self.config.as_ref() != Some(config) {
            self.machines.clear();
            self.config = Some(config.clone());
        }
        self.pass += 1;
        self.listed = 0;
    }

    /// Ends a pass: what it did not list (Machines gone or changed since) is forgotten.
    fn end(&mut self) {
        if self.machines.len() > self.listed {
            let pass = self.pass;
            self.machines.retain(|_, (seen, _)| *seen == pass);
        }
        self.nodes_read.clear();
        let consulted = self.machines.values().filter(|(_, r)| r.node.is_some());
        let names = consulted.filter_map(|(_, r)| r.info.node_name.clone());
        self.nodes_read.extend(names);
    }

    /// Whether the last pass's outcome depends on the Node `name`: a Machine without
    /// `spec.providerID` took (or looked for) its provider id there. Discovery reads no other
    /// Node, so a change to any other leaves its outcome as it was.
    pub fn reads_node(&self, name: &str) -> bool {
        self.nodes_read.contains(name)
    }

    /// The read of the Machine `key` (`obj` in `store`), reused while the same object.
    fn read(
        &mut self,
        store: &ObjectStore,
        config: &ClusterApiConfig,
        key: &ObjectKey,
        obj: &Arc<Value>,
    ) -> Arc<MachineRead> {
        let addr = Arc::as_ptr(obj) as usize;
        if let Some((seen, r)) = self.machines.get_mut(&addr)
            && Arc::ptr_eq(&r.obj, obj)
            && r.info.key.as_ref() == Some(key)
            && r.node.as_ref().is_none_or(|n| same_node(store, &r.info, n))
        {
            if *seen != self.pass {
                *seen = self.pass;
                self.listed += 1;
            }
            return r.clone();
        }
        let r = Arc::new(read_machine(store, config, key, obj));
        if self
            .machines
            .insert(addr, (self.pass, r.clone()))
            .is_none_or(|(seen, _)| seen != self.pass)
        {
            self.listed += 1;
        }
        r
    }
}

/// Whether the Node a Machine's provider id was looked up in is still the object it was.
fn same_node(store: &ObjectStore, info: &MachineInfo, seen: &Option<Arc<Value>>) -> bool {
    let now = info
        .node_name
        .as_ref()
        .and_then(|n| store.get(&node_key(n)));
    match (now, seen) {
        (None, None) => true,
        (Some(a), Some(b)) => Arc::ptr_eq(a, b),
        _ => false,
    }
}

fn node_key(name: &str) -> ObjectKey {
    ObjectKey {
        group: String::new(),
        kind: "Node".into(),
        namespace: String::new(),
        name: name.to_string(),
    }
}

impl ClusterApiProvider {
    /// Discovers the node groups in `store`, returning the provider and a warning for every
    /// object that looks meant to be autoscaled but cannot be. In OpenShift mode
    /// ([`ClusterApiConfig::openshift`]) the Machine API MachineSets come first, then the
    /// Cluster API resources, less the Cluster API MachineSets that mirror a Machine
    /// API-authoritative one (same name in `openshift-cluster-api`), as OpenShift's own
    /// autoscaler does.
    pub fn discover(
        store: &ObjectStore,
        config: &ClusterApiConfig,
    ) -> (ClusterApiProvider, Vec<String>) {
        Self::discover_cached(store, config, &mut DiscoveryCache::new())
    }

    /// [`ClusterApiProvider::discover`], reading again only the Machines that are not the
    /// objects `cache` read in its last pass (and remembering this pass's reads there).
    pub fn discover_cached(
        store: &ObjectStore,
        config: &ClusterApiConfig,
        cache: &mut DiscoveryCache,
    ) -> (ClusterApiProvider, Vec<String>) {
        cache.begin(config);
        let out = Self::discover_passes(store, config, cache);
        cache.end();
        out
    }

    fn discover_passes(
        store: &ObjectStore,
        config: &ClusterApiConfig,
        cache: &mut DiscoveryCache,
    ) -> (ClusterApiProvider, Vec<String>) {
        let groups = config.groups();
        if groups.len() == 1 {
            let (mut p, w) = Self::discover_group(store, config, &groups, cache);
            p.config = config.clone();
            return (p, w);
        }
        let (mut p, mut warnings) =
            Self::discover_group(store, &config.machine_api(), &groups, cache);
        let capi = ClusterApiConfig {
            openshift: false,
            ..config.clone()
        };
        let (other, w) = Self::discover_group(store, &capi, &groups, cache);
        warnings.extend(w);
        p.config = config.clone();
        for (group, resource) in other.groups.into_iter().zip(other.resources) {
            let k = &resource.key;
            let mirror = k.kind == MACHINE_SET
                && k.namespace == OPENSHIFT_CLUSTER_API_NAMESPACE
                && p.resources.iter().any(|m| m.key.name == k.name);
            if !mirror {
                p.push(group, resource);
            }
        }
        (p, warnings)
    }

    /// Discovery over `config.api_group` alone; `known` are the groups of the whole run (a
    /// `MachineAutoscaler` targeting another of them is not this pass's to warn about).
    fn discover_group(
        store: &ObjectStore,
        config: &ClusterApiConfig,
        known: &[&str],
        cache: &mut DiscoveryCache,
    ) -> (ClusterApiProvider, Vec<String>) {
        let mut warnings = Vec::new();
        let group = config.api_group.as_str();
        let autoscalers = machine_autoscalers(store, config, known, &mut warnings);
        let mut machines: Vec<MachineObj> = Vec::with_capacity(cache.len());
        machines.extend(store.list(group, MACHINE).map(|(key, obj)| MachineObj {
            key,
            read: cache.read(store, config, key, obj),
        }));

        let mut p = ClusterApiProvider {
            config: config.clone(),
            ..ClusterApiProvider::default()
        };
        for kind in [MACHINE_DEPLOYMENT, MACHINE_SET, MACHINE_POOL] {
            for (key, obj) in store.list(group, kind) {
                if kind == MACHINE_SET && owner(obj, MACHINE_DEPLOYMENT).is_some() {
                    // Its MachineDeployment owns the replica count.
                    continue;
                }
                if !config.admits(obj, &key.namespace) || !machine_api_authoritative(key, obj) {
                    continue;
                }
                let ma =
                    autoscalers.get(&(kind.to_string(), key.namespace.clone(), key.name.clone()));
                match p.build(store, key, obj, ma, &machines, &mut warnings) {
                    Ok(Some((group, resource))) => p.push(group, resource),
                    Ok(None) => {}
                    Err(why) => warnings.push(format!("{key}: {why}; not autoscaled")),
                }
            }
        }
        (p, warnings)
    }

    /// Adds a group and indexes its machines.
    fn push(&mut self, group: NodeGroup, resource: ScalableResource) {
        let i = self.groups.len();
        self.by_provider_id.reserve(resource.machines.len());
        self.by_node_name.reserve(resource.machines.len());
        for m in &resource.machines {
            if let Some(id) = &m.provider_id {
                self.by_provider_id.insert(id.clone(), i);
            }
            if let Some(n) = &m.node_name {
                self.by_node_name.insert(n.clone(), i);
            }
        }
        self.groups.push(group);
        self.resources.push(resource);
    }

    /// The configuration discovery used.
    pub fn config(&self) -> &ClusterApiConfig {
        &self.config
    }

    /// The scalable resources, parallel to [`CloudProvider::node_groups`].
    pub fn resources(&self) -> &[ScalableResource] {
        &self.resources
    }

    /// Index of the group with this id.
    pub fn group_index(&self, id: &str) -> Option<usize> {
        self.groups.iter().position(|g| g.id().as_str() == id)
    }

    /// The scalable resource of the group with this id.
    pub fn resource(&self, id: &str) -> Option<&ScalableResource> {
        self.group_index(id).map(|i| &self.resources[i])
    }

    /// Builds one group; `Ok(None)` when the object is not meant to be autoscaled.
    fn build(
        &self,
        store: &ObjectStore,
        key: &ObjectKey,
        obj: &Value,
        ma: Option<&(ObjectKey, usize, usize)>,
        machines: &[MachineObj],
        warnings: &mut Vec<String>,
    ) -> Result<Option<(NodeGroup, ScalableResource)>, String> {
        let config = &self.config;
        let ann = annotations::annotations_of(obj);
        let (min_key, max_key) = (config.min_size_key(), config.max_size_key());
        let ((min_size, max_size), bounds_from) = match ma {
            Some((ma_key, min, max)) => (
                (*min, *max),
                BoundsSource::MachineAutoscaler(ma_key.clone()),
            ),
            None => match annotations::bounds(&ann, &min_key, &max_key) {
                Ok(Some(b)) => (b, BoundsSource::Annotations),
                Ok(None) => return Ok(None),
                Err(e) => return Err(e.to_string()),
            },
        };
        if ann.contains_key(PAUSED_ANNOTATION) {
            return Err(format!("paused ({PAUSED_ANNOTATION})"));
        }
        let replicas = match obj.pointer("/spec/replicas") {
            None | Some(Value::Null) => return Err("has no spec.replicas".to_string()),
            Some(v) => match v.as_i64() {
                Some(r) if (0..=i64::from(i32::MAX)).contains(&r) => r,
                Some(r) if r > 0 => {
                    return Err(format!(
                        "spec.replicas is {r}: above {}, the most an int32 field holds",
                        i32::MAX
                    ));
                }
                _ => return Err(format!("spec.replicas is {v}: not a non-negative integer")),
            },
        };
        let api_version = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if replicas > i64::try_from(max_size).unwrap_or(i64::MAX) {
            warnings.push(format!(
                "{key}: spec.replicas {replicas} is above the max size {max_size}: the group is not grown, and at most {max_size} nodes count as on their way"
            ));
        }
        let id = format!("{}/{}/{}", key.kind, key.namespace, key.name);
        let what = key.to_string();
        // A MachineDeployment's MachineSets, read once: its Machines and its rollout state.
        let sets: Vec<&Value> = if key.kind == MACHINE_DEPLOYMENT {
            machine_sets_of(store, key).map(|(_, o)| o).collect()
        } else {
            Vec::new()
        };
        let machine_infos = self.machines_of(key, obj, machines, &sets)?;
        // The infrastructure template's capacity and node info, under the annotations.
        let infra = infrastructure::read(store, obj, &key.namespace, warnings);
        let filled = infrastructure::fill_annotations(&ann, infra.as_ref());
        let mut shape = if key.group == OPENSHIFT_API_GROUP {
            let ann = annotations::with_openshift_capacity(&filled, &what, warnings);
            annotations::node_shape(obj, &ann, &what, warnings)
        } else {
            annotations::node_shape(obj, &filled, &what, warnings)
        };
        infrastructure::add_extended(&mut shape, infra.as_ref());
        let template = annotations::template_node(&id, &shape, &config.default_arch);
        let template = infrastructure::with_node_info(template, &shape, infra.as_ref());
        let template = devices::with_dra_devices(template, &filled, &what, warnings);
        if template.is_none() && !machine_infos.iter().any(|m| m.has_node()) {
            if replicas == 0 {
                return Err(format!(
                    "has 0 replicas and no capacity annotations ({}cpu and memory): it cannot scale from zero",
                    annotations::CAPACITY_PREFIX
                ));
            }
            warnings.push(format!(
                "{what}: no node yet and no capacity annotations: the group has no template until a node registers"
            ));
        }
        let options = annotations::options(&ann, &config.options_prefix(), &what, warnings);
        let price = annotations::price(&ann, &config.price_key(), &what, warnings);
        let group = NodeGroup::try_new(
            &id,
            min_size,
            max_size,
            usize::try_from(replicas).unwrap_or(0),
        )
        .and_then(|g| g.with_node_price_per_hour(price))
        .map_err(|e| e.to_string())?
        .with_instances(
            machine_infos
                .iter()
                .map(|m| Instance {
                    id: m.instance_id.clone(),
                    state: m.state,
                    error: m.error.clone(),
                })
                .collect(),
        )
        .with_template(template)
        .with_options(
            options.with_disruption(annotations::disruption(&ann, config, &what, warnings)),
        )
        .with_rolling_out(rolling_out(&sets));
        Ok(Some((
            group,
            ScalableResource {
                key: key.clone(),
                api_version,
                min_size,
                max_size,
                replicas,
                resource_version: obj
                    .pointer("/metadata/resourceVersion")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                bounds_from,
                machines: machine_infos,
            },
        )))
    }

    /// The Machines of a resource: selected by its selector in its namespace (and cluster), and
    /// owned by it (a MachineSet), by one of its MachineSets (a MachineDeployment) or by it (a
    /// MachinePool, plus provider ids of `spec.providerIDList` without a Machine).
    fn machines_of(
        &self,
        key: &ObjectKey,
        obj: &Value,
        machines: &[MachineObj],
        deployment_sets: &[&Value],
    ) -> Result<Vec<Arc<MachineInfo>>, String> {
        let cluster = cluster_name_of(obj, &self.config.cluster_name_label());
        let same_place = |m: &&MachineObj| {
            let c = &m.read.cluster;
            m.key.namespace == key.namespace
                && (cluster.is_empty() || c.is_empty() || *c == cluster)
        };
        let selected: Vec<&MachineObj> = match key.kind.as_str() {
            MACHINE_POOL => machines
                .iter()
                .filter(|m| m.read.owner_pool.as_deref() == Some(key.name.as_str()))
                .filter(same_place)
                .collect(),
            kind => {
                let selector = match obj.pointer("/spec/selector") {
                    Some(s) if !s.is_null() => Selector::parse(s)?,
                    _ => return Err("has no spec.selector".to_string()),
                };
                let sets: Vec<&str> = if kind == MACHINE_DEPLOYMENT {
                    (deployment_sets.iter())
                        .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
                        .collect()
                } else {
                    vec![key.name.as_str()]
                };
                // The owner first: it rules out most Machines of other groups at once.
                machines
                    .iter()
                    .filter(|m| {
                        m.read
                            .owner_set
                            .as_deref()
                            .is_none_or(|s| sets.contains(&s))
                    })
                    .filter(same_place)
                    .filter(|m| selector.matches(&m.read.labels))
                    .collect()
            }
        };
        let mut out: Vec<Arc<MachineInfo>> =
            selected.into_iter().map(|m| m.read.info.clone()).collect();
        if key.kind == MACHINE_POOL {
            let list = obj
                .pointer("/spec/providerIDList")
                .and_then(Value::as_array);
            for id in list.into_iter().flatten().filter_map(Value::as_str) {
                if id.is_empty() || out.iter().any(|m| m.provider_id.as_deref() == Some(id)) {
                    continue;
                }
                out.push(Arc::new(MachineInfo {
                    key: None,
                    api_version: String::new(),
                    provider_id: Some(Arc::from(id)),
                    instance_id: Arc::from(id),
                    node_name: None,
                    state: InstanceState::Running,
                    error: None,
                    marked_for_deletion: false,
                    marked_by_autoscaler: false,
                    deletion_started: false,
                }));
            }
        }
        Ok(out)
    }
}

/// Reads a Machine: what selection needs and its instance.
fn read_machine(
    store: &ObjectStore,
    config: &ClusterApiConfig,
    key: &ObjectKey,
    obj: &Arc<Value>,
) -> MachineRead {
    let (info, node) = machine_info(store, config, key, obj);
    MachineRead {
        obj: obj.clone(),
        node,
        labels: annotations::string_map(obj.pointer("/metadata/labels")),
        owner_set: owner(obj, MACHINE_SET).map(str::to_string),
        owner_pool: owner(obj, MACHINE_POOL).map(str::to_string),
        cluster: cluster_name_of(obj, &config.cluster_name_label()),
        info: Arc::new(info),
    }
}

/// The instance a Machine stands for, and the Node consulted for its provider id (`None`: none
/// consulted; `Some(node)`: the Node as found, if any).
fn machine_info(
    store: &ObjectStore,
    config: &ClusterApiConfig,
    key: &ObjectKey,
    obj: &Value,
) -> (MachineInfo, Option<Option<Arc<Value>>>) {
    let node_name = obj
        .pointer("/status/nodeRef/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    let mut consulted = None;
    let provider_id: Option<Arc<str>> = obj
        .pointer("/spec/providerID")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
        .map(Arc::from)
        .or_else(|| {
            // Not every infrastructure provider fills spec.providerID: take the Node's.
            let node = store.get(&node_key(node_name.as_deref()?));
            consulted = Some(node.cloned());
            node?
                .pointer("/spec/providerID")
                .and_then(Value::as_str)
                .filter(|p| !p.is_empty())
                .map(Arc::from)
        });
    let deleting = obj
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null());
    let mark = obj
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(config.delete_machine_key()));
    let marked_for_deletion = mark.is_some();
    let marked_by_autoscaler =
        mark.and_then(Value::as_str) == Some(crate::changes::DELETE_MACHINE_VALUE);
    // A marked Machine is on its way out: its set deletes it before any unmarked one when
    // the replicas drop, so it no longer counts as a live instance, and it must never be
    // the reason for a second decrement.
    let state = if deleting || marked_for_deletion {
        InstanceState::Deleting
    } else if node_name.is_none() {
        InstanceState::Creating
    } else {
        InstanceState::Running
    };
    let instance_id = provider_id
        .clone()
        .unwrap_or_else(|| Arc::from(placeholder_id(&key.namespace, &key.name)));
    let info = MachineInfo {
        key: Some(key.clone()),
        api_version: obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        provider_id,
        instance_id,
        error: machine_error(obj, deleting, node_name.is_some()),
        node_name,
        state,
        marked_for_deletion,
        marked_by_autoscaler,
        deletion_started: deleting,
    };
    (info, consulted)
}

/// The failure a Machine reports: phase `Failed`, or `status.failureReason` /
/// `status.failureMessage` (v1beta2 keeps them under `status.deprecated.v1beta1`; OpenShift
/// calls them `status.errorReason` / `status.errorMessage`).
fn machine_error(obj: &Value, deleting: bool, has_node: bool) -> Option<InstanceError> {
    let text = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    // Cluster API v1beta1, Cluster API v1beta2, OpenShift Machine API.
    let reason = text("/status/failureReason")
        .or_else(|| text("/status/deprecated/v1beta1/failureReason"))
        .or_else(|| text("/status/errorReason"));
    let message = text("/status/failureMessage")
        .or_else(|| text("/status/deprecated/v1beta1/failureMessage"))
        .or_else(|| text("/status/errorMessage"));
    let failed_phase = text("/status/phase").as_deref() == Some(PHASE_FAILED);
    if !failed_phase && reason.is_none() && message.is_none() {
        return None;
    }
    let stockout = |s: &Option<String>| {
        s.as_deref().is_some_and(|s| {
            let s = s.to_ascii_lowercase();
            // Stockouts and quota as the infrastructure providers word them (AWS
            // `InsufficientInstanceCapacity`, GCE `ZONE_RESOURCE_POOL_EXHAUSTED`, Azure
            // `SkuNotAvailable` / `AllocationFailed`, generic "out of capacity").
            [
                "insufficientresources",
                "insufficient capacity",
                "insufficientinstancecapacity",
                "resource_pool_exhausted",
                "skunotavailable",
                "allocationfailed",
                "out of capacity",
                "outofcapacity",
                "stockout",
                "quota",
            ]
            .iter()
            .any(|k| s.contains(k))
        })
    };
    let class = if stockout(&reason) || stockout(&message) {
        InstanceErrorClass::OutOfResources
    } else {
        InstanceErrorClass::Other
    };
    let fallback = if deleting {
        "DeletingFailed"
    } else if has_node {
        "MachineFailed"
    } else {
        "ProvisioningFailed"
    };
    Some(InstanceError {
        class,
        code: reason.unwrap_or_else(|| fallback.to_string()),
        message: message.unwrap_or_else(|| format!("Machine failed ({fallback})")),
    })
}

/// Whether `obj` is managed by its own API: a Machine API MachineSet whose
/// `spec.authoritativeAPI` names another API (Cluster API, during OpenShift's migration) is
/// not a node group here; its Cluster API mirror is. An absent field means Machine API (an
/// older MachineSet).
fn machine_api_authoritative(key: &ObjectKey, obj: &Value) -> bool {
    if key.group != OPENSHIFT_API_GROUP || key.kind != MACHINE_SET {
        return true;
    }
    match obj
        .pointer("/spec/authoritativeAPI")
        .and_then(Value::as_str)
    {
        None | Some("") => true,
        Some(api) => api == AUTHORITATIVE_MACHINE_API,
    }
}

/// The MachineSets of the MachineDeployment `key`: owned by it, or labelled with its name.
fn machine_sets_of<'a>(
    store: &'a ObjectStore,
    key: &'a ObjectKey,
) -> impl Iterator<Item = (&'a ObjectKey, &'a Value)> + 'a {
    let sets = store.list(&key.group, MACHINE_SET);
    sets.map(|(k, o)| (k, &**o)).filter(|(k, o)| {
        k.namespace == key.namespace
            && (owner(o, MACHINE_DEPLOYMENT) == Some(key.name.as_str())
                || o.pointer("/metadata/labels")
                    .and_then(|l| l.get(DEPLOYMENT_NAME_LABEL))
                    .and_then(Value::as_str)
                    == Some(key.name.as_str()))
    })
}

/// Whether a MachineDeployment with these MachineSets is rolling out, as upstream's provider
/// tells: a MachineSet other than the newest revision still has replicas (wanted or running).
/// Without any revision annotation (never the case under Cluster API's controller) it cannot
/// tell, and says no.
fn rolling_out(sets: &[&Value]) -> bool {
    let revision = |o: &Value| {
        o.pointer("/metadata/annotations")
            .and_then(|a| a.get(REVISION_ANNOTATION))
            .and_then(Value::as_str)
            .and_then(|r| r.parse::<i64>().ok())
    };
    let Some(newest) = sets.iter().filter_map(|o| revision(o)).max() else {
        return false;
    };
    let has_replicas = |o: &Value, ptr: &str| o.pointer(ptr).and_then(Value::as_i64) > Some(0);
    sets.iter()
        .filter(|o| revision(o) != Some(newest))
        .any(|o| has_replicas(o, "/spec/replicas") || has_replicas(o, "/status/replicas"))
}

/// Name of the first owner of `kind`.
fn owner<'a>(obj: &'a Value, kind: &str) -> Option<&'a str> {
    obj.pointer("/metadata/ownerReferences")?
        .as_array()?
        .iter()
        .find(|r| r.get("kind").and_then(Value::as_str) == Some(kind))
        .and_then(|r| r.get("name").and_then(Value::as_str))
        .filter(|n| !n.is_empty())
}

/// Min and max from valid `MachineAutoscaler`s, keyed by target (kind, namespace, name).
fn machine_autoscalers(
    store: &ObjectStore,
    config: &ClusterApiConfig,
    known: &[&str],
    warnings: &mut Vec<String>,
) -> BTreeMap<(String, String, String), (ObjectKey, usize, usize)> {
    let mut out = BTreeMap::new();
    for (key, obj) in store.list(MACHINE_AUTOSCALER_GROUP, MACHINE_AUTOSCALER) {
        let size = |field: &str| -> Result<usize, String> {
            let v = obj.pointer(&format!("/spec/{field}"));
            v.and_then(Value::as_i64)
                .and_then(|i| usize::try_from(i).ok())
                .ok_or_else(|| match v {
                    None => format!("spec.{field} is missing"),
                    Some(v) => format!("spec.{field} is {v}: not a non-negative integer"),
                })
        };
        let target = obj.pointer("/spec/scaleTargetRef");
        let field = |f: &str| {
            target
                .and_then(|t| t.get(f))
                .and_then(Value::as_str)
                .unwrap_or("")
        };
        let result = (|| {
            let (min, max) = (size("minReplicas")?, size("maxReplicas")?);
            let (min, max) =
                annotations::check_bounds(min, max, "spec.minReplicas", "spec.maxReplicas")
                    .map_err(|e| e.to_string())?;
            let (api_version, kind, name) = (field("apiVersion"), field("kind"), field("name"));
            if kind.is_empty() || name.is_empty() {
                return Err("spec.scaleTargetRef needs kind and name".to_string());
            }
            let group = group_of(api_version);
            if !api_version.is_empty() && group != config.api_group {
                if known.contains(&group) {
                    return Ok(None);
                }
                return Err(format!(
                    "spec.scaleTargetRef.apiVersion {api_version} is not in group {}",
                    config.api_group
                ));
            }
            Ok(Some((kind.to_string(), name.to_string(), min, max)))
        })();
        match result {
            Ok(None) => {}
            Ok(Some((kind, name, min, max))) => {
                let target = (kind, key.namespace.clone(), name);
                if let Some((first, _, _)) = out.get(&target) {
                    warnings.push(format!(
                        "{key}: targets {} {}/{} like {first}; ignored",
                        target.0, target.1, target.2
                    ));
                } else {
                    out.insert(target, (key.clone(), min, max));
                }
            }
            Err(why) => warnings.push(format!("{key}: {why}; ignored")),
        }
    }
    out
}

/// A `metav1.LabelSelector` over plain strings (no interning of object data).
#[derive(Debug, Default)]
struct Selector {
    labels: BTreeMap<String, String>,
    expressions: Vec<(String, String, Vec<String>)>,
}

impl Selector {
    fn parse(v: &Value) -> Result<Selector, String> {
        let mut s = Selector {
            labels: annotations::string_map(v.get("matchLabels")),
            expressions: Vec::new(),
        };
        if let Some(list) = v.get("matchExpressions").filter(|l| !l.is_null()) {
            let list = list
                .as_array()
                .ok_or("spec.selector.matchExpressions is not a list")?;
            for (i, e) in list.iter().enumerate() {
                let key = e.get("key").and_then(Value::as_str).unwrap_or("");
                let op = e.get("operator").and_then(Value::as_str).unwrap_or("");
                let values: Vec<String> = e
                    .get("values")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|x| x.as_str().map(str::to_string))
                    .collect();
                if key.is_empty() || !matches!(op, "In" | "NotIn" | "Exists" | "DoesNotExist") {
                    return Err(format!(
                        "spec.selector.matchExpressions[{i}] has no key or an unknown operator {op:?}"
                    ));
                }
                s.expressions
                    .push((key.to_string(), op.to_string(), values));
            }
        }
        Ok(s)
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.labels.iter().all(|(k, v)| labels.get(k) == Some(v))
            && self.expressions.iter().all(|(k, op, values)| {
                let v = labels.get(k);
                match op.as_str() {
                    "In" => v.is_some_and(|v| values.contains(v)),
                    "NotIn" => v.is_none_or(|v| !values.contains(v)),
                    "Exists" => v.is_some(),
                    _ => v.is_none(),
                }
            })
    }
}

impl CloudProvider for ClusterApiProvider {
    fn node_groups(&self) -> &[NodeGroup] {
        &self.groups
    }

    fn node_group_of(&self, node: &Node) -> Option<usize> {
        node.provider_id
            .as_ref()
            .and_then(|id| self.by_provider_id.get(id).copied())
            .or_else(|| self.by_node_name.get(node.name.as_str()).copied())
    }

    fn gpu_label(&self) -> Option<&str> {
        Some(GPU_LABEL)
    }
}

impl ClusterApiProvider {
    /// The id of the group `node` belongs to.
    pub fn group_id_of(&self, node: &Node) -> Option<&NodeGroupId> {
        self.node_group_of(node).map(|i| self.groups[i].id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::{
        CPU_KEY, EPHEMERAL_DISK_KEY, GPU_COUNT_KEY, GPU_TYPE_KEY, LABELS_KEY, MAX_PODS_KEY,
        MEMORY_KEY, TAINTS_KEY,
    };
    use proptest::prelude::*;
    use serde_json::json;

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[-+ 0-9]{0,4}",
            "[0-9.]{1,5}(m|Mi|Gi|G|k|e3|s|h)?",
            "[a-z=,:/.A-Z ]{0,20}",
            any::<String>(),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        /// Random annotation texts never panic and give either a valid group or a warning that
        /// names the object.
        #[test]
        fn random_annotations_give_a_group_or_a_warning(
            min in text(), max in text(), cpu in text(), mem in text(), disk in text(),
            pods in text(), gpu_type in text(), gpu_count in text(), labels in text(),
            taints in text(), option in text(), replicas in -2i64..4,
        ) {
            let config = ClusterApiConfig::default();
            let md = json!({
                "apiVersion": "cluster.x-k8s.io/v1beta1",
                "kind": "MachineDeployment",
                "metadata": {"name": "md", "namespace": "ns", "annotations": {
                    config.min_size_key(): min, config.max_size_key(): max,
                    CPU_KEY: cpu, MEMORY_KEY: mem, EPHEMERAL_DISK_KEY: disk, MAX_PODS_KEY: pods,
                    GPU_TYPE_KEY: gpu_type, GPU_COUNT_KEY: gpu_count, LABELS_KEY: labels,
                    TAINTS_KEY: taints,
                    format!("{}scaledownunneededtime", config.options_prefix()): option.clone(),
                    format!("{}scaledownutilizationthreshold", config.options_prefix()): option,
                }},
                "spec": {"replicas": replicas, "selector": {"matchLabels": {"a": "b"}}},
            });
            let mut store = ObjectStore::new();
            store.insert(md, "test").unwrap();
            let (p, warnings) = ClusterApiProvider::discover(&store, &config);
            match p.node_groups() {
                [] => prop_assert!(
                    warnings.iter().any(|w| w.starts_with("MachineDeployment ns/md: ")),
                    "no group and no warning: {:?}", warnings
                ),
                [g] => {
                    prop_assert!(g.min_size() <= g.max_size() && g.max_size() > 0);
                    prop_assert!(replicas >= 0);
                    if let Some(t) = &g.template() {
                        prop_assert!(t.capacity.cpu > 0 && t.capacity.memory > 0);
                        prop_assert!(t.capacity.pods > 0);
                    }
                    if let Some(u) = g.options().scale_down_utilization_threshold() {
                        prop_assert!((0.0..=1.0).contains(&u));
                    }
                    // Resizes never panic either.
                    let _ = p.increase_size(g.id().as_str(), 1);
                    let _ = p.decrease_target_size(g.id().as_str(), 1);
                    let _ = p.delete_nodes(g.id().as_str(), &[]);
                }
                more => prop_assert!(false, "one object, {} groups", more.len()),
            }
        }
    }

    #[test]
    fn placeholder_and_selector_basics() {
        assert_eq!(placeholder_id("ns", "m"), "clusterapi://ns/m");
        let s = Selector::parse(&json!({"matchExpressions": [
            {"key": "a", "operator": "NotIn", "values": ["x"]},
            {"key": "b", "operator": "Exists"}]}))
        .unwrap();
        let l = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        assert!(s.matches(&l(&[("b", "")])));
        assert!(!s.matches(&l(&[("a", "x"), ("b", "")])));
        assert!(!s.matches(&l(&[])));
        assert!(
            Selector::parse(&json!({"matchExpressions": [{"key": "a", "operator": "Near"}]}))
                .is_err()
        );
        assert!(Selector::parse(&json!({"matchExpressions": 3})).is_err());
    }

    #[test]
    fn replicas_and_selector_problems_are_warnings() {
        let config = ClusterApiConfig::default();
        let mut store = ObjectStore::new();
        for (name, spec) in [
            ("no-replicas", json!({"selector": {}})),
            ("neg-replicas", json!({"replicas": -1, "selector": {}})),
            ("str-replicas", json!({"replicas": "3", "selector": {}})),
            ("no-selector", json!({"replicas": 1})),
            ("bad-spec", json!("nonsense")),
        ] {
            store
                .insert(
                    json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet",
                    "metadata": {"name": name, "namespace": "ns", "annotations": {
                        config.min_size_key(): "1", config.max_size_key(): "2",
                        CPU_KEY: "1", MEMORY_KEY: "1Gi"}},
                    "spec": spec}),
                    "t",
                )
                .unwrap();
        }
        let (p, w) = ClusterApiProvider::discover(&store, &config);
        assert!(p.node_groups().is_empty());
        assert_eq!(w.len(), 5, "{w:?}");
        assert!(
            w.iter()
                .any(|w| w.contains("no-selector") && w.contains("spec.selector"))
        );
        assert!(
            w.iter()
                .any(|w| w.contains("neg-replicas") && w.contains("spec.replicas"))
        );
    }

    #[test]
    fn the_price_annotation_gives_the_group_its_price() {
        let config = ClusterApiConfig::default();
        let mut store = ObjectStore::new();
        for (name, price) in [("priced", "0.75"), ("malformed", "-2"), ("unpriced", "")] {
            store
                .insert(
                    json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
                    "metadata": {"name": name, "namespace": "ns", "annotations": {
                        config.min_size_key(): "0", config.max_size_key(): "2",
                        config.price_key(): price, CPU_KEY: "1", MEMORY_KEY: "1Gi"}},
                    "spec": {"replicas": 0, "selector": {}}}),
                    "t",
                )
                .unwrap();
        }
        let (p, w) = ClusterApiProvider::discover(&store, &config);
        let price = |n: &str| {
            p.node_groups()
                .iter()
                .find(|g| g.id().as_str() == format!("MachineDeployment/ns/{n}"))
                .expect("group")
                .node_price_per_hour()
        };
        assert_eq!(price("priced"), Some(0.75));
        assert_eq!(price("malformed"), None);
        assert_eq!(price("unpriced"), None);
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("malformed")
                && w[0].contains("cluster.x-k8s.io/cluster-api-autoscaler-node-price-per-hour"),
            "{w:?}"
        );
    }
}

#[cfg(test)]
mod stockout_tests {
    use super::*;
    use autoscaler_model::InstanceErrorClass;

    #[test]
    fn provider_stockout_wordings_are_out_of_resources() {
        let class = |reason: &str| {
            let m = serde_json::json!({"status": {"phase": "Failed", "failureReason": reason}});
            machine_error(&m, false, false).map(|e| e.class)
        };
        for stockout in [
            "InsufficientInstanceCapacity",
            "ZONE_RESOURCE_POOL_EXHAUSTED",
            "SkuNotAvailable",
            "QuotaExceeded",
        ] {
            assert_eq!(
                class(stockout),
                Some(InstanceErrorClass::OutOfResources),
                "{stockout}"
            );
        }
        assert_eq!(
            class("InvalidConfiguration"),
            Some(InstanceErrorClass::Other)
        );
        assert_eq!(
            machine_error(
                &serde_json::json!({"status": {"phase": "Running"}}),
                false,
                true
            ),
            None
        );
    }
}

#[cfg(test)]
mod rollout_tests {
    use super::*;
    use crate::annotations::{CPU_KEY, MEMORY_KEY};
    use serde_json::json;

    /// A MachineDeployment `md` with a MachineSet per (revision, spec replicas, status
    /// replicas); whether its group is rolling out.
    fn rolling(sets: &[(Option<&str>, i64, i64)]) -> bool {
        let config = ClusterApiConfig::default();
        let mut store = ObjectStore::new();
        store
            .insert(
                json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
                "metadata": {"name": "md", "namespace": "ns", "annotations": {
                    config.min_size_key(): "1", config.max_size_key(): "5",
                    CPU_KEY: "1", MEMORY_KEY: "1Gi"}},
                "spec": {"replicas": 2, "selector": {}}}),
                "t",
            )
            .unwrap();
        for (i, (revision, spec, status)) in sets.iter().enumerate() {
            let mut annotations = serde_json::Map::new();
            if let Some(r) = revision {
                annotations.insert(REVISION_ANNOTATION.into(), json!(r));
            }
            store
                .insert(
                    json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet",
                    "metadata": {"name": format!("md-{i}"), "namespace": "ns",
                        "annotations": annotations,
                        "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1",
                            "kind": "MachineDeployment", "name": "md", "controller": true}]},
                    "spec": {"replicas": spec, "selector": {}},
                    "status": {"replicas": status}}),
                    "t",
                )
                .unwrap();
        }
        let (p, w) = ClusterApiProvider::discover(&store, &config);
        let [g] = p.node_groups() else {
            panic!("one group: {w:?}")
        };
        g.rolling_out()
    }

    #[test]
    fn a_machine_deployment_rolls_out_while_an_old_machine_set_has_replicas() {
        assert!(!rolling(&[(Some("1"), 2, 2)]), "one set: settled");
        assert!(
            rolling(&[(Some("1"), 1, 1), (Some("2"), 1, 1)]),
            "old set still wanted"
        );
        assert!(
            rolling(&[(Some("1"), 0, 1), (Some("2"), 2, 1)]),
            "old set still running"
        );
        assert!(
            !rolling(&[(Some("1"), 0, 0), (Some("2"), 2, 2)]),
            "old set scaled to zero: done"
        );
        // Revisions compare as numbers, not text.
        assert!(!rolling(&[(Some("10"), 2, 2), (Some("9"), 0, 0)]));
        assert!(rolling(&[(Some("10"), 2, 2), (Some("9"), 1, 1)]));
        // No revision at all: cannot tell, so not rolling out.
        assert!(!rolling(&[(None, 1, 1), (None, 1, 1)]));
    }
}
