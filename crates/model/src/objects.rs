//! The model objects a decision reads, taken out of an [`ObjectStore`]: nodes, pods, DaemonSets,
//! PodDisruptionBudgets, namespaces, storage objects, and the workload controllers the drain
//! rules look up.
//!
//! It converts each object once, reporting every object that does not convert with its identity
//! and the field at fault; the caller decides whether that is fatal (`plan` on a file) or a
//! warning (a live cluster, where one bad object must not stop the autoscaler). It reads only.

use std::sync::Arc;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::policy::v1 as policy;
use rustc_hash::FxHashMap;
use serde_json::Value;

use crate::affinity::NamespaceLabels;
use crate::controller::{ControllerLookup, ControllerState};
use crate::daemonset::DaemonSet;
use crate::intern::Sym;
use crate::node::Node;
use crate::pdb::PodDisruptionBudget;
use crate::pod::{OwnerRef, Pod};
use crate::storage::Storage;
use crate::store::{ObjectError, ObjectStore, typed};

/// The objects of a store, as model views.
#[derive(Clone, Debug, Default)]
pub struct ClusterObjects {
    /// Nodes.
    pub nodes: Vec<Arc<Node>>,
    /// Pods.
    pub pods: Vec<Arc<Pod>>,
    /// DaemonSets.
    pub daemonsets: Vec<DaemonSet>,
    /// PodDisruptionBudgets.
    pub pdbs: Vec<PodDisruptionBudget>,
    /// Namespaces with labels.
    pub namespaces: Vec<NamespaceLabels>,
    /// Controllers of pods, for the drain rules.
    pub controllers: StoreControllers,
    /// PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes and
    /// CSIStorageCapacities, for the volume filters.
    pub storage: Arc<Storage>,
}

/// Reads every supported object of `store`; objects that do not convert are returned as errors
/// (and left out).
pub fn read_objects(store: &ObjectStore) -> (ClusterObjects, Vec<ObjectError>) {
    let (mut out, mut errors) = read_objects_but_storage(store);
    let (storage, mut storage_errors) = Storage::from_store(store);
    out.storage = Arc::new(storage);
    errors.append(&mut storage_errors);
    (out, errors)
}

/// [`read_objects`] without the storage objects (`storage` is left empty): for a caller that
/// keeps the storage model and rebuilds it only when a storage object changed.
pub fn read_objects_but_storage(store: &ObjectStore) -> (ClusterObjects, Vec<ObjectError>) {
    let mut out = ClusterObjects::default();
    let mut errors = Vec::new();
    fn each<T: serde::de::DeserializeOwned, M>(
        store: &ObjectStore,
        group: &str,
        kind: &str,
        errors: &mut Vec<ObjectError>,
        convert: impl Fn(&T) -> Result<M, String>,
        mut push: impl FnMut(M),
    ) {
        for (key, value) in store.list(group, kind) {
            let result = typed::<T>(value).and_then(|obj| convert(&obj));
            match result {
                Ok(m) => push(m),
                Err(error) => errors.push(ObjectError {
                    key: key.clone(),
                    error,
                }),
            }
        }
    }
    // The caller prefixes the object's identity; the message must not repeat it.
    let s = |e: crate::pod::ModelError| e.detail();
    each::<core::Node, _>(
        store,
        "",
        "Node",
        &mut errors,
        |n| Node::from_k8s(n).map_err(s),
        |n| out.nodes.push(Arc::new(n)),
    );
    each::<core::Pod, _>(
        store,
        "",
        "Pod",
        &mut errors,
        |p| Pod::from_k8s(p).map_err(s),
        |p| out.pods.push(Arc::new(p)),
    );
    each::<apps::DaemonSet, _>(
        store,
        "apps",
        "DaemonSet",
        &mut errors,
        |d| DaemonSet::from_k8s(d).map_err(s),
        |d| out.daemonsets.push(d),
    );
    each::<policy::PodDisruptionBudget, _>(
        store,
        "policy",
        "PodDisruptionBudget",
        &mut errors,
        |p| PodDisruptionBudget::from_k8s(p).map_err(s),
        |p| out.pdbs.push(p),
    );
    each::<core::Namespace, _>(
        store,
        "",
        "Namespace",
        &mut errors,
        |n| NamespaceLabels::from_k8s(n).map_err(s),
        |n| out.namespaces.push(n),
    );
    out.controllers = StoreControllers::from_store(store);
    (out, errors)
}

/// Workload controllers found in a store: kinds the store holds any object of are checked
/// (a missing controller is `Missing`); kinds it holds none of are `Unknown`, so a snapshot without
/// workload objects never blocks scale-down on their account.
#[derive(Clone, Debug, Default)]
pub struct StoreControllers {
    /// (kind, namespace, name) → replicas.
    known: FxHashMap<(String, String, String), Option<i32>>,
    kinds: Vec<String>,
}

/// The controller kinds looked up, with their API groups.
const CONTROLLER_KINDS: &[(&str, &str)] = &[
    ("apps", "ReplicaSet"),
    ("", "ReplicationController"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("batch", "Job"),
];

impl StoreControllers {
    /// Indexes the controllers of `store`.
    pub fn from_store(store: &ObjectStore) -> StoreControllers {
        let mut out = StoreControllers::default();
        for (group, kind) in CONTROLLER_KINDS {
            let mut any = false;
            for (key, value) in store.list(group, kind) {
                any = true;
                let replicas = value
                    .pointer("/spec/replicas")
                    .and_then(Value::as_i64)
                    .and_then(|r| i32::try_from(r).ok());
                out.known.insert(
                    (kind.to_string(), key.namespace.clone(), key.name.clone()),
                    replicas,
                );
            }
            if any {
                out.kinds.push(kind.to_string());
            }
        }
        out
    }
}

impl ControllerLookup for StoreControllers {
    fn controller(&self, namespace: Sym, owner: &OwnerRef) -> ControllerState {
        let kind = owner.kind.as_str();
        if !self.kinds.iter().any(|k| k == kind) {
            return ControllerState::Unknown;
        }
        match self.known.get(&(
            kind.to_string(),
            namespace.as_str().to_string(),
            owner.name.to_string(),
        )) {
            Some(replicas) => ControllerState::Present {
                replicas: *replicas,
            },
            None => ControllerState::Missing,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SNAPSHOT: &str = r#"
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "4", memory: 16Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata:
  name: web-1
  namespace: shop
  ownerReferences: [{apiVersion: apps/v1, kind: ReplicaSet, name: web, uid: u1, controller: true}]
spec: {nodeName: n1, containers: [{name: c, resources: {requests: {cpu: 500m}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: broken, namespace: shop}
spec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: web, namespace: shop}
spec: {replicas: 3, selector: {}}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web, namespace: shop}
spec: {maxUnavailable: 1, selector: {matchLabels: {app: web}}}
status: {disruptionsAllowed: 1, currentHealthy: 3, desiredHealthy: 2, expectedPods: 3}
---
apiVersion: v1
kind: Namespace
metadata: {name: shop, labels: {team: a}}
"#;

    #[test]
    fn errors_name_the_field_path_and_the_object_once() {
        let mut store = ObjectStore::new();
        store
            .load_yaml(
                "apiVersion: v1\nkind: Pod\nmetadata: {name: train-1, namespace: ml}\n\
                 spec: {containers: []}\nstatus:\n  conditions:\n  - type: Ready\n    \
                 status: 'True'\n    lastTransitionTime: '2026-13-01T00:00:00Z'\n---\n\
                 apiVersion: v1\nkind: Node\nmetadata: {name: general-a}\n\
                 status: {allocatable: {cpu: lots}}\n",
            )
            .unwrap();
        let (_, errors) = read_objects(&store);
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(messages.len(), 2, "{messages:?}");
        let pod = messages.iter().find(|m| m.starts_with("Pod ")).unwrap();
        assert!(
            pod.starts_with("Pod ml/train-1: status.conditions[0].lastTransitionTime: "),
            "{pod}"
        );
        let node = messages.iter().find(|m| m.starts_with("Node ")).unwrap();
        assert_eq!(node.matches("general-a").count(), 1, "{node}");
        assert!(node.contains("status.allocatable"), "{node}");
    }

    #[test]
    fn objects_are_read_and_bad_ones_reported() {
        let mut store = ObjectStore::new();
        store.load_yaml(SNAPSHOT).unwrap();
        let (objects, errors) = read_objects(&store);
        assert_eq!(objects.nodes.len(), 1);
        assert_eq!(objects.pods.len(), 1);
        assert_eq!(objects.pdbs.len(), 1);
        assert_eq!(objects.namespaces.len(), 1);
        assert_eq!(errors.len(), 1);
        let e = errors[0].to_string();
        assert!(
            e.starts_with("Pod shop/broken: ")
                && e.contains("spec.containers[0].resources.requests.cpu"),
            "{e}"
        );
    }

    #[test]
    fn controllers_are_looked_up_only_for_kinds_the_store_has() {
        let mut store = ObjectStore::new();
        store.load_yaml(SNAPSHOT).unwrap();
        let (objects, _) = read_objects(&store);
        let owner = |kind: &str, name: &str| OwnerRef {
            kind: Sym::new(kind),
            api_version: Sym::new("apps/v1"),
            name: Arc::from(name),
            uid: Arc::from(""),
            controller: true,
        };
        let c = &objects.controllers;
        let shop = Sym::new("shop");
        assert_eq!(
            c.controller(shop, &owner("ReplicaSet", "web")),
            ControllerState::Present { replicas: Some(3) }
        );
        assert_eq!(
            c.controller(shop, &owner("ReplicaSet", "gone")),
            ControllerState::Missing
        );
        assert_eq!(
            c.controller(Sym::new("other"), &owner("ReplicaSet", "web")),
            ControllerState::Missing
        );
        assert_eq!(
            c.controller(shop, &owner("Job", "x")),
            ControllerState::Unknown
        );
    }
}
