//! The informer: the autoscaler's view of the cluster's objects, kept up to date from a stream
//! of changes (the live watches, or the simulated world's watch log), so that each loop converts
//! only the objects that changed since the previous one instead of decoding every Pod and Node
//! again.
//!
//! It decides nothing and does no I/O (no tokio, no client): whoever watches feeds it with
//! [`Informer::apply`] and [`Informer::replace_kind`]. The objects it hands out are exactly what
//! `read_objects` would return for a store holding the same objects (same order, same objects
//! left out because they do not convert). Pods kept across changes keep their `Arc`, so the
//! core's incremental snapshot cache recognises them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use autoscaler_clusterapi::{ClusterApiConfig, ClusterApiProvider, DiscoveryCache};
use autoscaler_core::PodRef;
use autoscaler_core::is_expendable;
use autoscaler_core::is_unschedulable;
use autoscaler_model::Dra;
use autoscaler_model::MIRROR_POD_ANNOTATION;
use autoscaler_model::Node;
use autoscaler_model::ObjectKey;
use autoscaler_model::ObjectStore;
use autoscaler_model::Pod;
use autoscaler_model::Storage;
use autoscaler_model::Sym;
use autoscaler_model::{ClusterObjects, read_objects_but_storage};
use autoscaler_model::{PRIORITY_CONFIG_KEY, PRIORITY_CONFIG_MAP_NAME};
use k8s_openapi::api::core::v1 as api;
use serde::Deserialize;
use serde_json::Value;

/// The converted objects, kept in step with a change stream.
#[derive(Debug, Default)]
pub struct Informer {
    /// Pods, converted, in store order.
    pods: BTreeMap<ObjectKey, Arc<Pod>>,
    /// The values of `pods` in order as of the last [`Informer::pods`] call (the `Arc`s are held
    /// here, so their addresses are not reused while they are listed).
    pod_list: Arc<Vec<Arc<Pod>>>,
    /// Addresses of the pods removed from or replaced in `pods` since then.
    pods_gone: rustc_hash::FxHashSet<usize>,
    /// Machines (of any group) created or updated since the last
    /// [`Informer::take_changed_machines`].
    machines_changed: BTreeSet<ObjectKey>,
    /// Whether a pod became unschedulable since the last [`Informer::take_new_unschedulable`].
    new_unschedulable: bool,
    /// Whether a node group may have appeared since the last [`Informer::take_new_group`].
    new_group: bool,
    /// Nodes, converted, in store order.
    nodes: BTreeMap<ObjectKey, Arc<Node>>,
    /// Every object but Pods (Nodes included): what the provider discovers groups from.
    no_pods: ObjectStore,
    /// Every object but Pods and Nodes: DaemonSets, budgets, namespaces, controllers.
    rest: ObjectStore,
    /// Bumped whenever an object discovery reads changes: any object of an API group other
    /// than the core one (Machines, MachineSets, ... and more), and the Nodes discovery
    /// looked a provider id up in ([`DiscoveryCache::reads_node`]). Other Nodes, Pods and
    /// the core group's other kinds do not change what discovery finds.
    discovery_version: u64,
    /// The provider discovered at `discovery_version`.
    provider: Option<(u64, Arc<ClusterApiProvider>)>,
    /// The warnings of that discovery (objects left out or used in part), for the shell to
    /// name them.
    provider_warnings: Arc<Vec<String>>,
    /// What discovery read from each Machine, so that rediscovery reads only those changed.
    discovery: DiscoveryCache,
    /// Bumped whenever `rest` changes.
    rest_version: u64,
    /// What [`Informer::objects_without_pods`] read at `rest_version` (nodes left out).
    rest_objects: Option<(u64, ClusterObjects)>,
    /// Bumped whenever a storage object (claim, volume, class, CSINode, capacity) changes.
    storage_version: u64,
    /// The storage model read at `storage_version`: one `Arc` while nothing it reads changes, so
    /// snapshots keep what they prepared for it.
    storage: Option<(u64, Arc<Storage>)>,
    /// The DRA kinds the API server answered `404` for (it does not serve
    /// `resource.k8s.io/v1`): while any is, the view's DRA objects are [`Dra::unserved`] and a
    /// pod with claims cannot be simulated.
    dra_unserved: BTreeSet<String>,
}

/// Whether the object is one the storage model reads.
fn is_storage(k: &ObjectKey) -> bool {
    // The DRA objects are read with the storage objects (`Storage::dra`).
    k.group == "storage.k8s.io"
        || k.group == autoscaler_model::DRA_GROUP
        || (k.group.is_empty()
            && matches!(
                k.kind.as_str(),
                "PersistentVolumeClaim" | "PersistentVolume"
            ))
}

/// Whether the object may make a node group: a MachineDeployment, MachineSet or MachinePool
/// with both size annotations (of any API group's prefix), or an OpenShift MachineAutoscaler.
/// A group discovered late (a resource created or annotated, its kinds installed after start)
/// is worth a loop at once, as new unschedulable pods are.
fn may_be_group(k: &ObjectKey, v: &Value) -> bool {
    if k.group.is_empty() {
        return false;
    }
    match k.kind.as_str() {
        "MachineAutoscaler" => true,
        "MachineDeployment" | "MachineSet" | "MachinePool" => v
            .pointer("/metadata/annotations")
            .and_then(Value::as_object)
            .is_some_and(|a| {
                let has = |suffix: &str| a.keys().any(|k| k.ends_with(suffix));
                has("/cluster-api-autoscaler-node-group-min-size")
                    && has("/cluster-api-autoscaler-node-group-max-size")
            }),
        _ => false,
    }
}

fn is_node(k: &ObjectKey) -> bool {
    k.group.is_empty() && k.kind == "Node"
}

/// The model of a Pod object, as the informer converts it (`None`: it does not convert).
pub fn pod_view(v: &Value) -> Option<Pod> {
    let typed = api::Pod::deserialize(v).ok()?;
    Pod::from_k8s(&typed).ok()
}

fn node_view(v: &Value) -> Option<Arc<Node>> {
    let typed = api::Node::deserialize(v).ok()?;
    Node::from_k8s(&typed).ok().map(Arc::new)
}

impl Informer {
    /// An informer that has seen nothing yet.
    pub fn new() -> Informer {
        Informer::default()
    }

    /// Applies one change: `object` is the object's new state, `None` when it was deleted.
    /// The caller vouches that `key` is the object's identity.
    pub fn apply(&mut self, key: ObjectKey, object: Option<Arc<Value>>) {
        if key.is_pod() {
            self.apply_pod(key, object.as_deref());
            return;
        }
        if is_node(&key) {
            match object.as_deref().and_then(node_view) {
                Some(n) => {
                    self.nodes.insert(key.clone(), n);
                }
                None => {
                    self.nodes.remove(&key);
                }
            }
        }
        if !key.group.is_empty() || (is_node(&key) && self.discovery.reads_node(&key.name)) {
            self.discovery_version += 1;
        }
        if let Some(new) = object.as_deref()
            && !self.new_group
            && may_be_group(&key, new)
        {
            let before = self.no_pods.get(&key);
            self.new_group = !before.is_some_and(|old| may_be_group(&key, old));
        }
        if !is_node(&key) {
            self.rest_version += 1;
            if is_storage(&key) {
                self.storage_version += 1;
            }
        }
        match object {
            Some(object) => {
                if !is_node(&key) {
                    self.rest.insert_shared(key.clone(), object.clone());
                }
                if key.kind == "Machine" && !key.group.is_empty() {
                    self.machines_changed.insert(key.clone());
                }
                self.no_pods.insert_shared(key, object);
            }
            None => {
                self.rest.remove(&key);
                self.no_pods.remove(&key);
            }
        }
    }

    fn apply_pod(&mut self, key: ObjectKey, object: Option<&Value>) {
        // A deleted pod's last version is not converted: it is dropped either way.
        self.apply_pod_model(key, object.and_then(pod_view));
    }

    /// Applies one change to a Pod already converted to the model (`None`: deleted, or not
    /// convertible, which drops it just the same). The live watches convert each Pod as it
    /// arrives, so no Pod is ever held as JSON: with 150,000 pods, buffering a relist as JSON
    /// peaked at ~9 KB per pod.
    pub fn apply_pod_model(&mut self, key: ObjectKey, view: Option<Pod>) {
        self.apply_pod_shared(key, view.map(Arc::new));
    }

    /// [`Informer::apply_pod_model`] for a Pod converted straight into its `Arc`, as the live
    /// watches convert it (the informer keeps that allocation; no copy of the pod is made).
    pub fn apply_pod_shared(&mut self, key: ObjectKey, view: Option<Arc<Pod>>) {
        use std::collections::btree_map::Entry;
        // One search of the map per change (its keys compare four strings each).
        let old = match (self.pods.entry(key), view) {
            // An update that changes nothing the model holds keeps the pod's `Arc`, so the
            // snapshot cache does not see it as changed.
            (Entry::Occupied(e), Some(p)) if **e.get() == *p => return,
            (Entry::Occupied(mut e), Some(p)) => {
                if !is_unschedulable(e.get()) && is_unschedulable(&p) {
                    self.new_unschedulable = true;
                }
                Some(e.insert(p))
            }
            (Entry::Vacant(e), Some(p)) => {
                if is_unschedulable(&p) {
                    self.new_unschedulable = true;
                }
                e.insert(p);
                None
            }
            (Entry::Occupied(e), None) => Some(e.remove()),
            (Entry::Vacant(_), None) => None,
        };
        if let Some(old) = old {
            self.pods_gone.insert(Arc::as_ptr(&old) as usize);
        }
    }

    /// Replaces every object of `group` and `kind` with `objects` (a relist): objects of that
    /// kind not in the list are deleted; listed objects equal to the ones held are left alone,
    /// so a relist of an unchanged cluster changes nothing.
    pub fn replace_kind(&mut self, group: &str, kind: &str, objects: Vec<(ObjectKey, Arc<Value>)>) {
        let listed: rustc_hash::FxHashSet<&ObjectKey> = objects.iter().map(|(k, _)| k).collect();
        let held: Vec<ObjectKey> = if group.is_empty() && kind == "Pod" {
            self.pods.keys().cloned().collect()
        } else {
            self.no_pods
                .list(group, kind)
                .map(|(k, _)| k.clone())
                .collect()
        };
        let gone: Vec<ObjectKey> = held.into_iter().filter(|k| !listed.contains(k)).collect();
        drop(listed);
        for k in gone {
            self.apply(k, None);
        }
        for (k, v) in objects {
            let unchanged = !k.is_pod() && self.no_pods.get(&k).is_some_and(|held| **held == *v);
            if !unchanged {
                self.apply(k, Some(v));
            }
        }
    }

    /// [`Informer::replace_kind`] for Pods already converted to the model (`None`: a listed pod
    /// that does not convert, which is dropped as [`Informer::apply_pod_model`] drops it).
    pub fn replace_pods(&mut self, pods: Vec<(ObjectKey, Option<Arc<Pod>>)>) {
        if self.pods.is_empty() {
            // The first list: nothing is replaced, so the map is built at once from the list
            // (which the API server sends in key order) instead of one search per pod.
            let mut added = Vec::with_capacity(pods.len());
            for (k, p) in pods {
                if let Some(p) = p {
                    self.new_unschedulable |= is_unschedulable(&p);
                    added.push((k, p));
                }
            }
            // Sorted (stably: of equal keys the later entry is kept, as applying them in turn
            // would keep it), then built in one pass.
            self.pods = added.into_iter().collect();
            return;
        }
        let listed: rustc_hash::FxHashSet<&ObjectKey> = pods.iter().map(|(k, _)| k).collect();
        let gone: Vec<ObjectKey> = self
            .pods
            .keys()
            .filter(|k| !listed.contains(k))
            .cloned()
            .collect();
        drop(listed);
        for k in gone {
            self.apply_pod_model(k, None);
        }
        for (k, p) in pods {
            self.apply_pod_shared(k, p);
        }
    }

    /// The Machines of `api_group` created or updated since the last call, in store order
    /// (Machines of other groups seen since are forgotten too).
    pub fn take_changed_machines(&mut self, api_group: &str) -> BTreeSet<ObjectKey> {
        let mut all = std::mem::take(&mut self.machines_changed);
        all.retain(|k| k.group == api_group);
        all
    }

    /// Whether a pod became unschedulable (`PodScheduled=False`, reason `Unschedulable`, not
    /// before) since the last call; the controller runs a loop early for it.
    pub fn take_new_unschedulable(&mut self) -> bool {
        std::mem::take(&mut self.new_unschedulable)
    }

    /// Whether a pod became unschedulable since the last [`Informer::take_new_unschedulable`]
    /// (without clearing it).
    pub fn has_new_unschedulable(&self) -> bool {
        self.new_unschedulable
    }

    /// Whether a node group may have appeared (a scalable resource created with its size
    /// annotations, or given them; a MachineAutoscaler created) since the last call; the
    /// controller runs a loop early for it.
    pub fn take_new_group(&mut self) -> bool {
        std::mem::take(&mut self.new_group)
    }

    /// Whether a loop is wanted early: a pod became unschedulable or a node group may have
    /// appeared since the controller last took them (without clearing either: the watches use
    /// it to signal the controller).
    pub fn has_news(&self) -> bool {
        self.new_unschedulable || self.new_group
    }

    /// The Cluster API provider discovered from the objects (rediscovered only when an object
    /// discovery reads changed since the last call, or the configuration differs).
    pub fn provider(&mut self, config: &ClusterApiConfig) -> Arc<ClusterApiProvider> {
        match &self.provider {
            Some((v, p)) if *v == self.discovery_version && p.config() == config => p.clone(),
            _ => {
                let (p, warnings) =
                    ClusterApiProvider::discover_cached(&self.no_pods, config, &mut self.discovery);
                self.provider_warnings = Arc::new(warnings);
                let p = Arc::new(p);
                self.provider = Some((self.discovery_version, p.clone()));
                p
            }
        }
    }

    /// The warnings of the discovery [`Informer::provider`] last made (each names its object:
    /// `MachineDeployment ns/md: ...`).
    pub fn provider_warnings(&self) -> Arc<Vec<String>> {
        self.provider_warnings.clone()
    }

    /// Discovers the provider and reads the objects other than pods, so that the next
    /// [`Informer::provider`] and [`Informer::objects_without_pods`] find them cached (unless
    /// something they read changes meanwhile). Pods are not read.
    pub fn prepare(&mut self, config: &ClusterApiConfig) {
        self.provider(config);
        self.objects_without_pods();
    }

    /// Whether the provider and the objects other than pods are cached for the objects as they
    /// are now (after [`Informer::prepare`], until a change they read).
    pub fn is_prepared(&self, config: &ClusterApiConfig) -> bool {
        let provider = matches!(&self.provider,
            Some((v, p)) if *v == self.discovery_version && p.config() == config);
        let rest = matches!(&self.rest_objects, Some((v, _)) if *v == self.rest_version);
        provider && rest
    }

    /// Every object but Pods (Nodes included), as received: the provider's input, and where the
    /// priority expander's ConfigMap is read.
    pub fn store(&self) -> &ObjectStore {
        &self.no_pods
    }

    /// The model objects, as `read_objects` reads them from a store holding the same objects
    /// (builds a fresh pod list: loops use [`Informer::pods`] and
    /// [`Informer::objects_without_pods`]).
    pub fn objects(&mut self) -> ClusterObjects {
        let mut out = self.objects_without_pods();
        out.pods = self.pods.values().cloned().collect();
        out
    }

    /// The pods, as [`Informer::objects`] lists them. The list is patched rather than rebuilt:
    /// pods kept since the last call are moved over without touching them, only new ones are
    /// cloned from the map. A loop keeps the list by cloning the outer `Arc`, not each pod's
    /// (450,000 reference counts, each a cache miss, at 15,000 nodes); once it has dropped it,
    /// the next call patches the list in place of copying it.
    pub fn pods(&mut self) -> &Arc<Vec<Arc<Pod>>> {
        let gone = std::mem::take(&mut self.pods_gone);
        let old = std::mem::take(&mut self.pod_list);
        let old = Arc::try_unwrap(old).unwrap_or_else(|kept| kept.as_ref().clone());
        let mut old = old.into_iter().peekable();
        let mut list = Vec::with_capacity(self.pods.len());
        for v in self.pods.values() {
            // Kept pods come in the same order in both; removed ones are skipped.
            loop {
                match old.peek() {
                    Some(o) if Arc::ptr_eq(o, v) => {
                        list.extend(old.next());
                        break;
                    }
                    Some(o) if gone.contains(&(Arc::as_ptr(o) as usize)) => {
                        old.next();
                    }
                    _ => {
                        list.push(v.clone());
                        break;
                    }
                }
            }
        }
        self.pod_list = Arc::new(list);
        &self.pod_list
    }

    /// [`Informer::objects`] without the pods (see [`Informer::pods`]). The objects are read
    /// again only when one of them changed since the last call, and the storage model only when
    /// a storage object did.
    pub fn objects_without_pods(&mut self) -> ClusterObjects {
        let mut out = match &self.rest_objects {
            Some((v, objects)) if *v == self.rest_version => objects.clone(),
            _ => {
                let (mut objects, _errors) = read_objects_but_storage(&self.rest);
                objects.storage = self.storage();
                self.rest_objects = Some((self.rest_version, objects.clone()));
                objects
            }
        };
        out.nodes = self.nodes.values().cloned().collect();
        out
    }

    /// Notes whether the API server serves the DRA kind `kind` (`false` when its list or watch
    /// answered `404`, `true` once it listed).
    pub fn set_dra_served(&mut self, kind: &str, served: bool) {
        let changed = if served {
            self.dra_unserved.remove(kind)
        } else {
            self.dra_unserved.insert(kind.to_string())
        };
        if changed {
            self.storage_version += 1;
            self.rest_version += 1;
        }
    }

    /// The storage model, read again only when a storage object changed.
    fn storage(&mut self) -> Arc<Storage> {
        match &self.storage {
            Some((v, s)) if *v == self.storage_version => s.clone(),
            _ => {
                let mut s = Storage::from_store(&self.rest).0;
                if !self.dra_unserved.is_empty() {
                    s.set_dra(Arc::new(Dra::unserved()));
                }
                let s = Arc::new(s);
                self.storage = Some((self.storage_version, s.clone()));
                s
            }
        }
    }

    /// The pod `namespace/name`, converted, if cached.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Arc<Pod>> {
        self.pods.get(&ObjectKey {
            group: String::new(),
            kind: "Pod".into(),
            namespace: namespace.into(),
            name: name.into(),
        })
    }

    /// The pods on any of `nodes` that deleting it would take along: not finished, neither a
    /// DaemonSet's nor a mirror pod (one pass over the pods, for the few nodes of a deletion).
    pub fn pods_left_on(&self, nodes: &[Sym], expendable_below: i32) -> Vec<(Sym, PodRef)> {
        blocking_pods(self.pods.values().map(|p| &**p), nodes, expendable_below)
    }

    /// The pods on any of `nodes`, whatever they are (a test's truth for a fresh read).
    #[cfg(test)]
    pub(crate) fn pods_on(&self, nodes: &[Sym]) -> Vec<Arc<Pod>> {
        let on = |p: &&Arc<Pod>| p.node_name.is_some_and(|n| nodes.contains(&n));
        self.pods.values().filter(on).cloned().collect()
    }

    /// The node named, converted.
    pub fn node(&self, name: &str) -> Option<&Arc<Node>> {
        self.nodes.get(&ObjectKey {
            group: String::new(),
            kind: "Node".into(),
            namespace: String::new(),
            name: name.into(),
        })
    }

    /// The priority expander's configuration: the `priorities` text of the ConfigMap
    /// `cluster-autoscaler-priority-expander` in `namespace` (the autoscaler's `--namespace`),
    /// if there is one. Every shell reads it here, before each loop.
    pub fn priority_text(&self, namespace: &str) -> Option<String> {
        let key = ObjectKey {
            group: String::new(),
            kind: "ConfigMap".into(),
            namespace: namespace.into(),
            name: PRIORITY_CONFIG_MAP_NAME.into(),
        };
        self.no_pods
            .get(&key)?
            .pointer(&format!("/data/{PRIORITY_CONFIG_KEY}"))?
            .as_str()
            .map(str::to_string)
    }

    /// An informer holding every object of `store`, as if each had been applied.
    pub fn from_store(store: &ObjectStore) -> Informer {
        let mut inf = Informer::new();
        for (k, v) in store.iter() {
            inf.apply(k.clone(), Some(v.clone()));
        }
        inf
    }

    /// The nodes named, converted.
    pub fn nodes_named(&self, names: &[String]) -> Vec<Arc<Node>> {
        self.nodes
            .values()
            .filter(|n| names.iter().any(|x| x == n.name.as_str()))
            .cloned()
            .collect()
    }
}

/// The pods of `pods` on any of `nodes` that deleting it would take along, with their node:
/// not finished (a terminating pod still runs there), neither a DaemonSet's nor a mirror pod,
/// nor expendable (priority below `expendable_below`: it goes with the node, as the scale-down
/// decision planned). The view's re-check and the fresh read before a deletion both decide
/// with it.
pub fn blocking_pods<'p>(
    pods: impl Iterator<Item = &'p Pod>,
    nodes: &[Sym],
    expendable_below: i32,
) -> Vec<(Sym, PodRef)> {
    pods.filter_map(|p| {
        let node = p.node_name.filter(|n| nodes.contains(n))?;
        let daemon = p
            .owner
            .as_ref()
            .is_some_and(|o| o.kind.as_str() == "DaemonSet");
        let mirror = p.annotation(MIRROR_POD_ANNOTATION).is_some();
        let expendable = is_expendable(p, expendable_below);
        (!p.is_terminal() && !daemon && !mirror && !expendable).then(|| {
            let pod = PodRef {
                namespace: p.namespace,
                name: p.name.as_arc().clone(),
            };
            (node, pod)
        })
    })
    .collect()
}

/// What actuation reads of the cluster when it advances an action: the provider, nodes and
/// pods as they are now.
pub trait ClusterLookup {
    /// The provider as the objects are now.
    fn provider(&mut self) -> Arc<ClusterApiProvider>;
    /// The node named, converted.
    fn node(&self, name: &str) -> Option<Arc<Node>>;
    /// The nodes named that exist, converted, in the informer's (name) order.
    fn nodes(&self, names: &[Sym]) -> Vec<Arc<Node>>;
    /// Whether `pod` is still on `node` and not finished.
    fn pod_on_node(&self, pod: &PodRef, node: &str) -> bool;
    /// The pods on any of `nodes` that deleting it would take along (see [`blocking_pods`]),
    /// with their node.
    fn pods_left_on(&self, nodes: &[Sym], expendable_below: i32) -> Vec<(Sym, PodRef)>;
}

/// The [`ClusterLookup`] of an informer, with the provider configuration to discover with.
pub struct InformerLookup<'a> {
    informer: &'a mut Informer,
    config: &'a ClusterApiConfig,
}

impl<'a> InformerLookup<'a> {
    /// Looks things up in `informer`, discovering groups with `config`.
    pub fn new(informer: &'a mut Informer, config: &'a ClusterApiConfig) -> InformerLookup<'a> {
        InformerLookup { informer, config }
    }
}

impl ClusterLookup for InformerLookup<'_> {
    fn provider(&mut self) -> Arc<ClusterApiProvider> {
        self.informer.provider(self.config)
    }

    fn node(&self, name: &str) -> Option<Arc<Node>> {
        self.informer.node(name).cloned()
    }

    fn nodes(&self, names: &[Sym]) -> Vec<Arc<Node>> {
        let names: Vec<String> = names.iter().map(|n| n.as_str().to_string()).collect();
        self.informer.nodes_named(&names)
    }

    fn pod_on_node(&self, pod: &PodRef, node: &str) -> bool {
        self.informer
            .pod(pod.namespace.as_str(), &pod.name)
            .is_some_and(|p| p.node_name.is_some_and(|n| n.as_str() == node) && !p.is_terminal())
    }

    fn pods_left_on(&self, nodes: &[Sym], expendable_below: i32) -> Vec<(Sym, PodRef)> {
        self.informer.pods_left_on(nodes, expendable_below)
    }
}

/// Locks a shared informer. A panic elsewhere while it was held leaves it usable (every update
/// is one whole object), so a poisoned lock is taken over rather than propagated.
pub fn lock(informer: &std::sync::Mutex<Informer>) -> std::sync::MutexGuard<'_, Informer> {
    informer
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use serde_json::json;

    fn key(group: &str, kind: &str, namespace: &str, name: &str) -> ObjectKey {
        ObjectKey {
            group: group.into(),
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    fn obj(v: Value) -> (ObjectKey, Arc<Value>) {
        let k = ObjectStore::key_of(&v, "test").expect("test objects have identities");
        (k, Arc::new(v))
    }

    /// The same change through the model entry points, as the live Pod watch makes it.
    fn model((k, v): &(ObjectKey, Arc<Value>)) -> (ObjectKey, Option<Arc<Pod>>) {
        (k.clone(), pod_view(v).map(Arc::new))
    }

    fn listed(i: &mut Informer) -> Vec<(String, bool)> {
        i.pods()
            .iter()
            .map(|p| (p.name.to_string(), is_unschedulable(p)))
            .collect()
    }

    #[test]
    fn converted_pods_are_applied_and_relisted_as_json_ones_are() {
        let (mut json, mut typed) = (Informer::new(), Informer::new());
        let (a, b, c) = (pod("a", false), pod("b", false), pod("c", true));
        json.replace_kind("", "Pod", vec![a.clone(), b.clone()]);
        typed.replace_pods(vec![model(&a), model(&b)]);
        assert_eq!(listed(&mut json), listed(&mut typed));
        assert!(!typed.take_new_unschedulable());
        let kept = typed.pod("default", "a").cloned().expect("a");

        // A new unschedulable pod wakes the loop; an unchanged pod keeps its Arc.
        json.apply(c.0.clone(), Some(c.1.clone()));
        let (k, p) = model(&c);
        typed.apply_pod_shared(k, p);
        assert!(typed.take_new_unschedulable());
        let (k, p) = model(&a);
        typed.apply_pod_shared(k, p);
        assert!(Arc::ptr_eq(&kept, typed.pod("default", "a").expect("a")));
        assert_eq!(listed(&mut json), listed(&mut typed));

        // A relist without `b` deletes it; a pod that does not convert is dropped.
        let broken = (key("", "Pod", "default", "a"), None);
        json.replace_kind("", "Pod", vec![c.clone()]);
        typed.replace_pods(vec![broken, model(&c)]);
        assert_eq!(listed(&mut json), listed(&mut typed));
        assert_eq!(listed(&mut typed), vec![("c".to_string(), true)]);
    }

    /// The first list (built at once) holds what applying its pods in turn holds: out of order,
    /// a key listed twice keeps its later entry, a pod that does not convert is left out, and
    /// an unschedulable pod wakes the loop.
    #[test]
    fn a_first_list_is_the_same_as_its_pods_applied_in_turn() {
        let (a, b, c) = (pod("a", false), pod("b", false), pod("c", true));
        let b_late = pod("b", true);
        let list = vec![
            model(&c),
            model(&b),
            (key("", "Pod", "default", "z"), None),
            model(&a),
            model(&b_late),
        ];
        let (mut built, mut applied) = (Informer::new(), Informer::new());
        built.replace_pods(list.clone());
        for (k, p) in list {
            applied.apply_pod_shared(k, p);
        }
        assert_eq!(listed(&mut built), listed(&mut applied));
        assert_eq!(
            listed(&mut built),
            [("a", false), ("b", true), ("c", true)].map(|(n, u)| (n.to_string(), u))
        );
        assert!(built.take_new_unschedulable());
        let mut calm = Informer::new();
        calm.replace_pods(vec![model(&a)]);
        assert!(!calm.take_new_unschedulable());
    }

    #[test]
    fn a_terminating_pod_is_still_on_its_node_until_it_is_gone() {
        // An evicted pod keeps its node while it terminates: a drain must not take it for gone.
        let mut i = Informer::new();
        let config = ClusterApiConfig::default();
        let on_node = |terminating: bool| {
            let mut p = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "default", "uid": "p"},
                "spec": {"nodeName": "n1", "containers": [{"name": "c"}]},
                "status": {"phase": "Running"}});
            if terminating {
                p["metadata"]["deletionTimestamp"] = json!("2025-01-01T00:00:30Z");
                p["metadata"]["deletionGracePeriodSeconds"] = json!(30);
            }
            obj(p)
        };
        let p = PodRef {
            namespace: Sym::new("default"),
            name: "p".into(),
        };
        for terminating in [false, true] {
            let (k, v) = on_node(terminating);
            i.apply(k, Some(v));
            let lookup = InformerLookup::new(&mut i, &config);
            assert!(lookup.pod_on_node(&p, "n1"), "terminating: {terminating}");
            assert!(!lookup.pod_on_node(&p, "n2"));
        }
        i.apply(key("", "Pod", "default", "p"), None);
        assert!(!InformerLookup::new(&mut i, &config).pod_on_node(&p, "n1"));
    }

    fn pod(name: &str, unschedulable: bool) -> (ObjectKey, Arc<Value>) {
        let conditions = if unschedulable {
            json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}])
        } else {
            json!([])
        };
        obj(json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "uid": name},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]},
            "status": {"phase": "Pending", "conditions": conditions}}))
    }

    fn node(name: &str) -> (ObjectKey, Arc<Value>) {
        obj(
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}),
        )
    }

    fn md(replicas: i64) -> (ObjectKey, Arc<Value>) {
        let config = ClusterApiConfig::default();
        obj(
            json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
            "metadata": {"name": "md", "namespace": "ns", "annotations": {
                config.min_size_key(): "0", config.max_size_key(): "5"}},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"a": "b"}}}}),
        )
    }

    fn names(inf: &mut Informer) -> Vec<String> {
        inf.pods().iter().map(|p| p.name.to_string()).collect()
    }

    #[test]
    fn a_relist_deletes_what_it_does_not_list_and_keeps_what_is_unchanged() {
        let mut inf = Informer::new();
        for n in ["a", "b", "c"] {
            let (k, v) = pod(n, false);
            inf.apply(k, Some(v));
        }
        let (k, v) = node("n1");
        inf.apply(k, Some(v));
        let (k, v) = node("n2");
        inf.apply(k, Some(v));
        assert_eq!(names(&mut inf), ["a", "b", "c"]);
        let b_before = inf.pods()[1].clone();

        inf.replace_kind("", "Pod", vec![pod("b", false), pod("d", false)]);
        assert_eq!(names(&mut inf), ["b", "d"]);
        assert!(
            Arc::ptr_eq(&inf.pods()[0], &b_before),
            "an unchanged pod keeps its Arc across a relist"
        );

        inf.replace_kind("", "Node", vec![node("n2")]);
        let nodes = inf.objects_without_pods().nodes;
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].name.as_str(), "n2");
        assert!(inf.store().get(&key("", "Node", "", "n1")).is_none());
        // Other kinds are untouched by a relist of one kind.
        assert_eq!(inf.objects().pods.len(), 2);

        inf.replace_kind("", "Pod", Vec::new());
        assert!(names(&mut inf).is_empty());
    }

    /// A list a loop still holds stays as it was, and the informer's next list is the same
    /// whether the loop's copy is still held or dropped.
    #[test]
    fn a_held_pod_list_is_left_alone_and_the_next_one_is_current() {
        let mut inf = Informer::new();
        for n in ["a", "b", "c"] {
            let (k, v) = pod(n, false);
            inf.apply(k, Some(v));
        }
        let held = inf.pods().clone();
        inf.apply(key("", "Pod", "default", "a"), None);
        let (k, v) = pod("d", false);
        inf.apply(k, Some(v));
        let (k, v) = pod("b", true);
        inf.apply(k, Some(v));
        assert_eq!(names(&mut inf), ["b", "c", "d"]);
        assert!(is_unschedulable(&inf.pods()[0]), "b replaced");
        let held_names: Vec<&str> = held.iter().map(|p| p.name.as_ref()).collect();
        assert_eq!(held_names, ["a", "b", "c"], "the held list is unchanged");
        assert!(!is_unschedulable(&held[1]));
        drop(held);
        inf.apply(key("", "Pod", "default", "c"), None);
        assert_eq!(names(&mut inf), ["b", "d"]);
        assert_eq!(Arc::strong_count(inf.pods()), 1, "no copy left behind");
    }

    #[test]
    fn the_provider_is_rediscovered_only_after_a_non_pod_change() {
        let config = ClusterApiConfig::default();
        let mut inf = Informer::new();
        let (k, v) = md(1);
        inf.apply(k, Some(v));
        let p1 = inf.provider(&config);
        assert_eq!(p1.resources().len(), 1);
        assert_eq!(p1.resources()[0].replicas, 1);

        let (k, v) = pod("a", true);
        inf.apply(k, Some(v));
        assert!(Arc::ptr_eq(&p1, &inf.provider(&config)));

        // A relist listing the same MachineDeployment changes nothing.
        inf.replace_kind("cluster.x-k8s.io", "MachineDeployment", vec![md(1)]);
        assert!(Arc::ptr_eq(&p1, &inf.provider(&config)));

        let (k, v) = md(3);
        inf.apply(k, Some(v));
        let p2 = inf.provider(&config);
        assert!(!Arc::ptr_eq(&p1, &p2));
        assert_eq!(p2.resources()[0].replicas, 3);

        inf.replace_kind("cluster.x-k8s.io", "MachineDeployment", Vec::new());
        assert!(inf.provider(&config).resources().is_empty());
    }

    /// Prepared caches stay prepared through pod changes, are stale after a change they read,
    /// and are what the loop's calls then return.
    #[test]
    fn prepared_caches_hold_until_a_change_they_read() {
        let config = ClusterApiConfig::default();
        let mut inf = Informer::new();
        let (k, v) = md(1);
        inf.apply(k, Some(v));
        assert!(!inf.is_prepared(&config), "nothing read yet");
        inf.prepare(&config);
        assert!(inf.is_prepared(&config));
        let (k, v) = pod("a", true);
        inf.apply(k, Some(v));
        assert!(inf.is_prepared(&config), "pods are not read by either");
        let held = inf.provider(&config);
        assert_eq!(held.resources()[0].replicas, 1);

        let (k, v) = md(2);
        inf.apply(k, Some(v));
        assert!(!inf.is_prepared(&config), "a MachineDeployment changed");
        inf.prepare(&config);
        assert!(inf.is_prepared(&config));
        assert_eq!(inf.provider(&config).resources()[0].replicas, 2);

        let (k, v) = obj(json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": "x"}}));
        inf.apply(k, Some(v));
        assert!(!inf.is_prepared(&config), "a namespace changed");
        let other = ClusterApiConfig {
            default_arch: "arm64".into(),
            ..ClusterApiConfig::default()
        };
        inf.prepare(&config);
        assert!(
            !inf.is_prepared(&other),
            "prepared for another configuration"
        );
    }

    /// A Machine `m{i}` of the MachineSet `ms` in `ns` (owned, labelled `a: b`), with its
    /// provider id and node reference if given.
    fn machine(i: u64, provider_id: bool, node_ref: bool) -> (ObjectKey, Arc<Value>) {
        let mut m = json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
            "metadata": {"name": format!("m{i}"), "namespace": "ns", "labels": {"a": "b"},
                "ownerReferences": [{"kind": "MachineSet", "name": "ms"}]},
            "spec": {}});
        if provider_id {
            m["spec"]["providerID"] = json!(format!("sim:///m{i}"));
        }
        if node_ref {
            m["status"] = json!({"nodeRef": {"name": format!("n{i}")}});
        }
        obj(m)
    }

    /// The Node `n{i}`, with the provider id `sim:///n{i}` if asked.
    fn node_with(i: u64, provider_id: bool) -> (ObjectKey, Arc<Value>) {
        let (k, mut v) = node(&format!("n{i}"));
        if provider_id {
            Arc::make_mut(&mut v)["spec"] = json!({"providerID": format!("sim:///n{i}")});
        }
        (k, v)
    }

    /// The informer's provider equals a fresh discovery of its objects: groups, resources and
    /// the group of every Node.
    fn assert_as_fresh(inf: &mut Informer, config: &ClusterApiConfig, step: &str) {
        use autoscaler_model::CloudProvider;
        let held = inf.provider(config);
        let (fresh, _) = ClusterApiProvider::discover(inf.store(), config);
        assert_eq!(held.node_groups(), fresh.node_groups(), "{step}");
        assert_eq!(held.resources(), fresh.resources(), "{step}");
        for n in inf.objects_without_pods().nodes {
            assert_eq!(
                held.node_group_of(&n),
                fresh.node_group_of(&n),
                "{step}: {}",
                n.name
            );
        }
    }

    /// Rediscovery is skipped after changes discovery does not read (Pods, ConfigMaps, Nodes no
    /// Machine takes its provider id from), and the provider held always equals a fresh
    /// discovery, through random changes to Machines, Nodes, the set and other objects.
    #[test]
    fn the_provider_equals_a_fresh_discovery_after_random_changes() {
        let config = ClusterApiConfig::default();
        for seed in 1..=20u64 {
            let mut inf = Informer::new();
            let ms = obj(
                json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet",
                "metadata": {"name": "ms", "namespace": "ns", "annotations": {
                    config.min_size_key(): "0", config.max_size_key(): "9"}},
                "spec": {"replicas": 2, "selector": {"matchLabels": {"a": "b"}}}}),
            );
            inf.apply(ms.0.clone(), Some(ms.1.clone()));
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut next = |n: u64| rng.random_range(0..n);
            for step in 0..60 {
                let i = next(4);
                let before = inf.provider(&config);
                let (k, v) = match next(7) {
                    0 | 1 => machine(i, next(2) == 0, next(3) != 0),
                    2 => node_with(i, next(2) == 0),
                    3 => pod(&format!("p{i}"), next(2) == 0),
                    4 => obj(json!({"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": "c", "namespace": "ns"},
                        "data": {"x": step.to_string()}})),
                    5 => {
                        let mut v = ms.1.clone();
                        Arc::make_mut(&mut v)["spec"]["replicas"] = json!(next(5));
                        (ms.0.clone(), v)
                    }
                    _ => {
                        let (k, _) = if next(2) == 0 {
                            machine(i, false, false)
                        } else {
                            node_with(i, false)
                        };
                        inf.apply(k, None);
                        assert_as_fresh(&mut inf, &config, &format!("{seed}/{step}: delete"));
                        continue;
                    }
                };
                let read = !k.group.is_empty() || inf.discovery.reads_node(&k.name);
                inf.apply(k.clone(), Some(v));
                let after = inf.provider(&config);
                if !read {
                    assert!(
                        Arc::ptr_eq(&before, &after),
                        "{seed}/{step}: {k} rediscovered"
                    );
                }
                assert_as_fresh(&mut inf, &config, &format!("{seed}/{step}: {k}"));
            }
        }
    }

    #[test]
    fn only_a_pod_turning_unschedulable_raises_the_flag() {
        let mut inf = Informer::new();
        assert!(!inf.take_new_unschedulable());
        let (k, v) = pod("a", false);
        inf.apply(k, Some(v));
        assert!(
            !inf.take_new_unschedulable(),
            "a pending pod not yet marked"
        );

        let (k, v) = pod("a", true);
        inf.apply(k.clone(), Some(v));
        assert!(inf.take_new_unschedulable());
        assert!(!inf.take_new_unschedulable(), "taking clears the flag");

        // Still unschedulable (a status update): not new.
        let (_, mut v) = pod("a", true);
        Arc::make_mut(&mut v)["metadata"]["labels"] = json!({"x": "y"});
        inf.apply(k.clone(), Some(v));
        assert!(!inf.take_new_unschedulable());

        // Deleted, then created unschedulable again: new.
        inf.apply(k, None);
        assert!(!inf.take_new_unschedulable());
        inf.replace_kind("", "Pod", vec![pod("a", true)]);
        assert!(inf.take_new_unschedulable());
    }

    #[test]
    fn a_resource_created_or_annotated_as_a_group_raises_the_new_group_flag() {
        let ann = json!({
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size": "0",
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size": "3"});
        let md = |annotations: Value, replicas: i64| {
            obj(
                json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
                "metadata": {"name": "late", "namespace": "default", "annotations": annotations},
                "spec": {"replicas": replicas}}),
            )
        };
        let mut inf = Informer::new();
        let (k, v) = md(json!({}), 1);
        inf.apply(k, Some(v));
        assert!(!inf.has_news() && !inf.take_new_group(), "not a group yet");
        let (k, v) = md(ann.clone(), 1);
        inf.apply(k, Some(v));
        assert!(inf.has_news(), "annotated: a group appeared");
        assert!(inf.take_new_group());
        assert!(!inf.take_new_group() && !inf.has_news(), "taken");
        let (k, v) = md(ann.clone(), 2);
        inf.apply(k, Some(v));
        assert!(
            !inf.take_new_group(),
            "a resize of a known group is no news"
        );
        // Listed for the first time (its kind installed after start): news.
        let mut late = Informer::new();
        late.replace_kind("cluster.x-k8s.io", "MachineDeployment", vec![md(ann, 1)]);
        assert!(late.take_new_group());
    }

    #[test]
    fn changed_machines_are_those_of_the_configured_group() {
        let mut inf = Informer::new();
        for (group, version) in [
            ("cluster.x-k8s.io", "v1beta1"),
            ("machine.openshift.io", "v1beta1"),
        ] {
            let (k, v) = obj(json!({"apiVersion": format!("{group}/{version}"),
                "kind": "Machine", "metadata": {"name": "m", "namespace": "ns"}}));
            inf.apply(k, Some(v));
        }
        let got = inf.take_changed_machines("machine.openshift.io");
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            [key("machine.openshift.io", "Machine", "ns", "m")]
        );
        assert!(inf.take_changed_machines("cluster.x-k8s.io").is_empty());
    }

    #[test]
    fn the_priority_text_is_read_from_the_namespace_given() {
        let mut store = ObjectStore::new();
        store
            .load_yaml(
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cluster-autoscaler-priority-expander\n  namespace: kube-system\ndata:\n  priorities: |\n    10:\n    - .*\n",
            )
            .expect("yaml");
        let inf = Informer::from_store(&store);
        assert_eq!(
            inf.priority_text("kube-system").as_deref(),
            Some("10:\n- .*\n")
        );
        assert_eq!(inf.priority_text("other"), None);
    }

    /// The objects are read again only when one changed, the storage model only when a storage
    /// object changed, and what is read always equals a fresh read of the same objects.
    #[test]
    fn objects_are_reread_only_after_a_change_and_storage_only_after_a_storage_change() {
        let mut inf = Informer::new();
        let pdb = |name: &str| {
            obj(
                json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": name}}}}),
            )
        };
        let claim = obj(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "data", "namespace": "ns"},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
                "resources": {"requests": {"storage": "1Gi"}}}}));
        let (k, v) = pdb("a");
        inf.apply(k, Some(v));
        let first = inf.objects_without_pods();
        let again = inf.objects_without_pods();
        assert!(
            Arc::ptr_eq(&first.storage, &again.storage),
            "nothing changed"
        );
        assert_eq!(again.pdbs.len(), 1);

        // A budget changes: the objects are read again, the storage model is kept.
        let (k, v) = pdb("b");
        inf.apply(k, Some(v));
        let after_pdb = inf.objects_without_pods();
        assert_eq!(after_pdb.pdbs.len(), 2, "the new budget is seen");
        assert!(Arc::ptr_eq(&first.storage, &after_pdb.storage));

        // A claim arrives, then goes: the storage model follows each time.
        inf.apply(claim.0.clone(), Some(claim.1.clone()));
        let with_claim = inf.objects_without_pods();
        assert!(!Arc::ptr_eq(&first.storage, &with_claim.storage));
        let fresh = autoscaler_model::read_objects(&inf.rest).0;
        assert_eq!(
            format!("{:?}", with_claim.storage),
            format!("{:?}", fresh.storage)
        );
        assert_eq!(
            format!("{:?}", with_claim.pdbs),
            format!("{:?}", fresh.pdbs)
        );
        inf.apply(claim.0, None);
        let without = inf.objects_without_pods();
        assert!(!Arc::ptr_eq(&with_claim.storage, &without.storage));
        assert_eq!(
            format!("{:?}", without.storage),
            format!("{:?}", first.storage)
        );
    }
}
