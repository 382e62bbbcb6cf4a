//! The simulation's informer: the autoscaler's view of the world's objects kept up to date from
//! the world's watch log, so that each loop converts only the objects that changed since the
//! previous one (as the live shell's informers do) instead of decoding every Pod and Node again.
//!
//! It decides nothing: the objects it hands out are exactly what
//! `read_objects` would return for the world's store at
//! the same instant (same order, same objects left out because they do not convert). It never
//! writes to the world.

use std::collections::BTreeMap;
use std::sync::Arc;

use autoscaler_clusterapi::{ClusterApiConfig, ClusterApiProvider};
use autoscaler_core::node::Node;
use autoscaler_core::objects::{ClusterObjects, read_objects};
use autoscaler_core::pod::Pod;
use autoscaler_core::store::{ObjectKey, ObjectStore};
use autoscaler_world::{WatchEventKind, World};
use k8s_openapi::api::core::v1 as api;
use serde::Deserialize;
use serde_json::Value;

/// The converted objects, kept in step with the world's watch log.
#[derive(Debug, Default)]
pub struct Informer {
    /// The last `resourceVersion` seen.
    rv: u64,
    /// Pods, converted, in store order.
    pods: BTreeMap<ObjectKey, Arc<Pod>>,
    /// The values of `pods` in order as of the last [`Informer::pods`] call (the `Arc`s are held
    /// here, so their addresses are not reused while they are listed).
    pod_list: Vec<Arc<Pod>>,
    /// Machines created or updated since the last [`Informer::take_changed_machines`].
    machines_changed: std::collections::BTreeSet<ObjectKey>,
    /// Addresses of the pods removed from or replaced in `pods` since then.
    pods_gone: rustc_hash::FxHashSet<usize>,
    /// Nodes, converted, in store order.
    nodes: BTreeMap<ObjectKey, Arc<Node>>,
    /// Every object but Pods (Nodes included): what the provider discovers groups from.
    no_pods: ObjectStore,
    /// Every object but Pods and Nodes: DaemonSets, budgets, namespaces, controllers.
    rest: ObjectStore,
    /// Bumped whenever `no_pods` changes.
    no_pods_version: u64,
    /// The provider discovered at `no_pods_version`.
    provider: Option<(u64, Arc<ClusterApiProvider>)>,
}

fn is_pod(k: &ObjectKey) -> bool {
    k.group.is_empty() && k.kind == "Pod"
}

fn is_node(k: &ObjectKey) -> bool {
    k.group.is_empty() && k.kind == "Node"
}

fn pod_view(v: &Value) -> Option<Arc<Pod>> {
    let typed = api::Pod::deserialize(v).ok()?;
    Pod::from_k8s(&typed).ok().map(Arc::new)
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

    /// Applies every change the world logged since the last sync.
    pub fn sync(&mut self, world: &World) {
        for e in world.events_since(self.rv) {
            self.rv = e.rv;
            let k = &e.key;
            let deleted = e.kind == WatchEventKind::Deleted;
            if is_pod(k) {
                // A deleted pod's last version is not converted: it is dropped either way.
                let view = if deleted { None } else { pod_view(&e.object) };
                let old = match view {
                    Some(p) => self.pods.insert(k.clone(), p),
                    None => self.pods.remove(k),
                };
                if let Some(old) = old {
                    self.pods_gone.insert(Arc::as_ptr(&old) as usize);
                }
                continue;
            }
            if is_node(k) {
                let view = if deleted { None } else { node_view(&e.object) };
                match view {
                    Some(n) => {
                        self.nodes.insert(k.clone(), n);
                    }
                    _ => {
                        self.nodes.remove(k);
                    }
                }
            } else if deleted {
                self.rest.remove(k);
            } else {
                self.rest.insert_shared(k.clone(), e.object.clone());
            }
            self.no_pods_version += 1;
            if !deleted && k.group == "cluster.x-k8s.io" && k.kind == "Machine" {
                self.machines_changed.insert(k.clone());
            }
            if deleted {
                self.no_pods.remove(k);
            } else {
                self.no_pods.insert_shared(k.clone(), e.object.clone());
            }
        }
    }

    /// The Machines created or updated since the last call, in store order.
    pub fn take_changed_machines(&mut self) -> std::collections::BTreeSet<ObjectKey> {
        std::mem::take(&mut self.machines_changed)
    }

    /// The last `resourceVersion` applied.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// The Cluster API provider discovered from the objects (rediscovered only when an object
    /// other than a Pod changed since the last call).
    pub fn provider(&mut self, config: &ClusterApiConfig) -> Arc<ClusterApiProvider> {
        match &self.provider {
            Some((v, p)) if *v == self.no_pods_version && p.config() == config => p.clone(),
            _ => {
                let p = Arc::new(ClusterApiProvider::discover(&self.no_pods, config).0);
                self.provider = Some((self.no_pods_version, p.clone()));
                p
            }
        }
    }

    /// The model objects, as `read_objects` reads them from the world's store.
    #[cfg(test)]
    pub fn objects(&self) -> ClusterObjects {
        let (mut out, _errors) = read_objects(&self.rest);
        out.nodes = self.nodes.values().cloned().collect();
        out.pods = self.pods.values().cloned().collect();
        out
    }

    /// The pods, as `Informer::objects` lists them. The list is patched rather than rebuilt:
    /// pods kept since the last call are moved over without touching them, only new ones are
    /// cloned from the map.
    pub fn pods(&mut self) -> &[Arc<Pod>] {
        let gone = std::mem::take(&mut self.pods_gone);
        let mut old = std::mem::take(&mut self.pod_list).into_iter().peekable();
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
        self.pod_list = list;
        &self.pod_list
    }

    /// `Informer::objects` without the pods (see [`Informer::pods`]).
    pub fn objects_without_pods(&self) -> ClusterObjects {
        let (mut out, _errors) = read_objects(&self.rest);
        out.nodes = self.nodes.values().cloned().collect();
        out
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

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_world::{NodeGroupSpec, WorldConfig};
    use serde_json::json;

    #[test]
    fn the_informer_reads_what_read_objects_reads() {
        let mut w = World::new(WorldConfig::default());
        let spec = NodeGroupSpec {
            namespace: "default".into(),
            name: "g".into(),
            replicas: 2,
            min_size: 0,
            max_size: 5,
            cpu: "4".into(),
            memory: "16Gi".into(),
            max_pods: 110,
            gpu: None,
            labels: Default::default(),
            taints: Vec::new(),
        };
        w.apply(spec.to_object("sim")).expect("group");
        let mut inf = Informer::new();
        for i in 0..5 {
            let pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("p{i}"), "namespace": "default"},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}});
            w.add_pod(pod, Some(200_000 + i * 10_000)).expect("pod");
            w.advance(60_000);
            inf.sync(&w);
            let listed: Vec<_> = inf.pods().to_vec();
            assert_eq!(listed.len(), inf.objects().pods.len());
            assert!(
                listed
                    .iter()
                    .zip(&inf.objects().pods)
                    .all(|(a, b)| Arc::ptr_eq(a, b))
            );
        }
        w.advance(600_000);
        w.gc_terminal_pods();
        inf.sync(&w);
        let (want, _) = read_objects(w.objects());
        let got = inf.objects();
        let names = |v: &[Arc<Pod>]| {
            v.iter()
                .map(|p| (p.name.clone(), p.node_name, p.phase))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&got.pods), names(&want.pods));
        assert_eq!(names(inf.pods()), names(&want.pods));
        let nn = |v: &[Arc<Node>]| v.iter().map(|n| n.name).collect::<Vec<_>>();
        assert_eq!(nn(&got.nodes), nn(&want.nodes));
        assert!(!want.nodes.is_empty());
        assert_eq!(inf.resource_version(), w.resource_version());
    }
}
