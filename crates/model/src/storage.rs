//! The storage objects the volume filters read: PersistentVolumeClaims, PersistentVolumes,
//! StorageClasses, CSINodes and CSIStorageCapacities, reduced to what kube-scheduler's
//! VolumeBinding, VolumeZone, NodeVolumeLimits and VolumeRestrictions plugins look at.
//!
//! [`Storage`] is built once per view from an [`ObjectStore`] (see
//! [`crate::objects::read_objects`]); every object that does not convert is reported
//! with its identity and the field at fault and left out, never a panic. It decides nothing:
//! whether a pod's volumes allow a node is answered by `scheduling::volumes`.

use std::sync::{Arc, LazyLock};

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::storage::v1 as storage;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::affinity::NodeSelectorTerm;
use crate::affinity::{NodeSelector, NodeSelectorOp, NodeSelectorRequirement};
use crate::convert::{label_selector, node_selector};
use crate::intern::Sym;
use crate::labels::LabelSelector;
use crate::node::{CsiDriverLimit, CsiNode, Node};
use crate::pod::ModelError;
use crate::quantity::parse_units;
use crate::store::{MAX_LIST, ObjectError, ObjectKey, ObjectStore, typed};

/// The annotation the scheduler sets on a WaitForFirstConsumer claim once it picked a node
/// (the provisioner then creates the volume where that node is).
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";

/// The provisioner name of classes whose volumes are created by hand (local volumes): no
/// dynamic provisioning.
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// The zone and region labels a PersistentVolume may carry (GA and legacy beta forms); the
/// VolumeZone filter compares them to the node's.
pub const VOLUME_TOPOLOGY_LABELS: [&str; 4] = [
    "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/region",
];

/// Access modes of a claim or volume, as a bit set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct AccessModes(u8);

impl AccessModes {
    /// `ReadWriteOnce`.
    pub const RWO: AccessModes = AccessModes(1);
    /// `ReadOnlyMany`.
    pub const ROX: AccessModes = AccessModes(2);
    /// `ReadWriteMany`.
    pub const RWX: AccessModes = AccessModes(4);
    /// `ReadWriteOncePod`.
    pub const RWOP: AccessModes = AccessModes(8);

    /// Whether every mode of `other` is in `self`.
    pub fn contains(self, other: AccessModes) -> bool {
        self.0 & other.0 == other.0
    }

    /// The union.
    pub fn with(self, other: AccessModes) -> AccessModes {
        AccessModes(self.0 | other.0)
    }

    fn parse(object: &str, path: &str, modes: Option<&Vec<String>>) -> Result<Self, ModelError> {
        let mut out = AccessModes::default();
        for (i, m) in modes.into_iter().flatten().enumerate().take(MAX_LIST + 1) {
            let bit = match m.as_str() {
                "ReadWriteOnce" => AccessModes::RWO,
                "ReadOnlyMany" => AccessModes::ROX,
                "ReadWriteMany" => AccessModes::RWX,
                "ReadWriteOncePod" => AccessModes::RWOP,
                other => {
                    return Err(invalid(
                        object,
                        &format!("{path}[{i}]"),
                        other,
                        "access mode must be one of ReadWriteOnce, ReadOnlyMany, ReadWriteMany, ReadWriteOncePod",
                    ));
                }
            };
            out = out.with(bit);
        }
        Ok(out)
    }
}

/// A PersistentVolumeClaim.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    /// Namespace.
    pub namespace: Sym,
    /// Name.
    pub name: Arc<str>,
    /// `spec.storageClassName`; `None` when absent or empty (no class: only pre-bound or
    /// immediately bound volumes).
    pub class: Option<Arc<str>>,
    /// `spec.volumeName`: the volume it is bound (or pre-bound) to.
    pub volume_name: Option<Arc<str>>,
    /// `spec.accessModes`.
    pub access_modes: AccessModes,
    /// `spec.resources.requests.storage`, bytes (0 when absent).
    pub request_bytes: i64,
    /// The `volume.kubernetes.io/selected-node` annotation.
    pub selected_node: Option<Sym>,
    /// Whether it is being deleted.
    pub deleting: bool,
}

impl Claim {
    /// Whether the claim names its volume (the scheduler then checks that volume's node
    /// affinity instead of finding or provisioning one).
    pub fn is_bound(&self) -> bool {
        self.volume_name.is_some()
    }
}

/// The CSI source of a volume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CsiSource {
    /// Driver name (`ebs.csi.aws.com`).
    pub driver: Sym,
    /// `volumeHandle`: what is attached to a node.
    pub handle: Arc<str>,
}

/// A PersistentVolume.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PersistentVolume {
    /// Name.
    pub name: Arc<str>,
    /// `spec.storageClassName` (`None` when absent or empty).
    pub class: Option<Arc<str>>,
    /// `spec.nodeAffinity.required`: the nodes that can reach the volume.
    pub node_affinity: Option<NodeSelector>,
    /// Zone and region labels ([`VOLUME_TOPOLOGY_LABELS`]) with their values (a value may
    /// name several zones joined by `__`).
    pub topology_labels: Vec<(Sym, Vec<Sym>)>,
    /// The CSI source, if it is a CSI volume.
    pub csi: Option<CsiSource>,
    /// Whether it is a `local` volume (one node's disk).
    pub local: bool,
    /// `spec.capacity.storage`, bytes.
    pub capacity_bytes: i64,
    /// `spec.accessModes`.
    pub access_modes: AccessModes,
    /// `spec.claimRef` (namespace, name): the claim it is bound or reserved for.
    pub claim_ref: Option<(Sym, Arc<str>)>,
}

/// `volumeBindingMode` of a StorageClass.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BindingMode {
    /// Bound (and provisioned) as soon as the claim exists, before any pod is scheduled.
    #[default]
    Immediate,
    /// Bound when the first pod using the claim is scheduled, in that pod's node's topology.
    WaitForFirstConsumer,
}

/// A StorageClass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageClass {
    /// Name.
    pub name: Arc<str>,
    /// `provisioner` (a CSI driver name for CSI classes).
    pub provisioner: Sym,
    /// `volumeBindingMode`.
    pub binding_mode: BindingMode,
    /// `allowedTopologies` as a node selector (terms ORed, each requirement `In`); `None`
    /// allows every node.
    pub allowed_topologies: Option<NodeSelector>,
}

impl StorageClass {
    /// Whether volumes of this class are created on demand.
    pub fn provisions(&self) -> bool {
        !self.provisioner.as_str().is_empty() && self.provisioner.as_str() != NO_PROVISIONER
    }
}

/// A CSIStorageCapacity: free space of one class in one topology segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StorageCapacity {
    /// `storageClassName`.
    pub class: Arc<str>,
    /// `nodeTopology`: the nodes the space is reachable from (`None` reaches no node).
    pub node_topology: Option<LabelSelector>,
    /// `capacity`, bytes (`None`: unknown, counts as none).
    pub capacity_bytes: Option<i64>,
    /// `maximumVolumeSize`, bytes: when set, the largest volume that can be created, compared
    /// instead of `capacity`.
    pub maximum_volume_bytes: Option<i64>,
}

/// Every storage object of a view, indexed for the filters.
#[derive(Clone, Debug, Default)]
pub struct Storage {
    claims: FxHashMap<Sym, FxHashMap<Arc<str>, Arc<Claim>>>,
    volumes: FxHashMap<Arc<str>, Arc<PersistentVolume>>,
    /// Volumes without a `claimRef`, by class (`""` for none): what an unbound claim can bind.
    available: FxHashMap<Arc<str>, Vec<Arc<PersistentVolume>>>,
    /// Volumes reserved for a claim by `claimRef`, by (namespace, claim).
    reserved: FxHashMap<(Sym, Arc<str>), Vec<Arc<PersistentVolume>>>,
    classes: FxHashMap<Arc<str>, Arc<StorageClass>>,
    csi_nodes: FxHashMap<Sym, Arc<CsiNode>>,
    capacities: Vec<StorageCapacity>,
    /// The CSI drivers whose CSIDriver object opts into capacity tracking
    /// (`spec.storageCapacity: true`).
    capacity_drivers: FxHashSet<Sym>,
    /// The DRA objects (`resource.k8s.io`): they travel with the storage objects from the store
    /// into the snapshot, where the DRA filter reads them as the volume filters read these.
    dra: Arc<crate::dra::Dra>,
}

static EMPTY: LazyLock<Arc<Storage>> = LazyLock::new(|| Arc::new(Storage::default()));

impl Storage {
    /// A shared empty storage view (for views of clusters without storage objects).
    pub fn none() -> &'static Arc<Storage> {
        &EMPTY
    }

    /// The DRA objects (DeviceClasses, ResourceClaims and their templates, ResourceSlices).
    pub fn dra(&self) -> &Arc<crate::dra::Dra> {
        &self.dra
    }

    /// Replaces the DRA objects.
    pub fn set_dra(&mut self, dra: Arc<crate::dra::Dra>) {
        self.dra = dra;
    }

    /// Whether no storage object is known.
    pub fn is_empty(&self) -> bool {
        self.claims.is_empty()
            && self.volumes.is_empty()
            && self.classes.is_empty()
            && self.csi_nodes.is_empty()
            && self.capacities.is_empty()
            && self.capacity_drivers.is_empty()
    }

    /// The claim `namespace/name`.
    pub fn claim(&self, namespace: Sym, name: &str) -> Option<&Arc<Claim>> {
        self.claims.get(&namespace)?.get(name)
    }

    /// The volumes an unbound claim of class `class` could bind (no `claimRef`), and those
    /// reserved for it by `claimRef`.
    pub fn bindable<'a>(
        &'a self,
        claim: &'a Claim,
    ) -> impl Iterator<Item = &'a Arc<PersistentVolume>> + 'a {
        let class = claim.class.as_deref().unwrap_or("");
        let reserved = self
            .reserved
            .get(&(claim.namespace, claim.name.clone()))
            .into_iter()
            .flatten();
        self.available
            .get(class)
            .into_iter()
            .flatten()
            .chain(reserved)
    }

    /// The volume `name`.
    pub fn volume(&self, name: &str) -> Option<&Arc<PersistentVolume>> {
        self.volumes.get(name)
    }

    /// The storage class `name`.
    pub fn class(&self, name: &str) -> Option<&Arc<StorageClass>> {
        self.classes.get(name)
    }

    /// The CSINode of node `name`.
    pub fn csi_node(&self, name: Sym) -> Option<&Arc<CsiNode>> {
        self.csi_nodes.get(&name)
    }

    /// Every volume, in no particular order.
    pub fn volumes(&self) -> impl Iterator<Item = &Arc<PersistentVolume>> + '_ {
        self.volumes.values()
    }

    /// The CSIStorageCapacity objects of class `class`.
    pub fn capacities_of<'a>(
        &'a self,
        class: &'a str,
    ) -> impl Iterator<Item = &'a StorageCapacity> + 'a {
        self.capacities
            .iter()
            .filter(move |c| c.class.as_ref() == class)
    }

    /// Whether the scheduler checks CSIStorageCapacity for volumes `driver` provisions: only
    /// when its CSIDriver object says `storageCapacity: true` (no CSIDriver: not tracked).
    pub fn tracks_capacity(&self, driver: Sym) -> bool {
        self.capacity_drivers.contains(&driver)
    }

    /// Records the CSIDriver `driver` and whether it opts into capacity tracking.
    pub fn insert_csi_driver(&mut self, driver: Sym, storage_capacity: bool) {
        if storage_capacity {
            self.capacity_drivers.insert(driver);
        } else {
            self.capacity_drivers.remove(&driver);
        }
    }

    /// Adds a claim (replacing one with the same namespace and name).
    pub fn insert_claim(&mut self, claim: Claim) {
        self.claims
            .entry(claim.namespace)
            .or_default()
            .insert(claim.name.clone(), Arc::new(claim));
    }

    /// Adds a volume.
    pub fn insert_volume(&mut self, volume: PersistentVolume) {
        let volume = Arc::new(volume);
        match &volume.claim_ref {
            None => {
                let class = volume.class.clone().unwrap_or_else(|| Arc::from(""));
                self.available
                    .entry(class)
                    .or_default()
                    .push(volume.clone());
            }
            Some(claim) => self
                .reserved
                .entry(claim.clone())
                .or_default()
                .push(volume.clone()),
        }
        if let Some(old) = self.volumes.insert(volume.name.clone(), volume) {
            for list in self
                .available
                .values_mut()
                .chain(self.reserved.values_mut())
            {
                list.retain(|v| !Arc::ptr_eq(v, &old));
            }
        }
    }

    /// Adds a storage class.
    pub fn insert_class(&mut self, class: StorageClass) {
        self.classes.insert(class.name.clone(), Arc::new(class));
    }

    /// Sets the CSINode of node `node`.
    pub fn insert_csi_node(&mut self, node: Sym, csi: CsiNode) {
        self.csi_nodes.insert(node, Arc::new(csi));
    }

    /// Adds a CSIStorageCapacity.
    pub fn insert_capacity(&mut self, capacity: StorageCapacity) {
        self.capacities.push(capacity);
    }

    /// Reads every storage object of `store`; objects that do not convert are returned as
    /// errors naming the object and the field (and left out).
    pub fn from_store(store: &ObjectStore) -> (Storage, Vec<ObjectError>) {
        let mut out = Storage::default();
        let mut errors = Vec::new();
        read::<core::PersistentVolumeClaim, _>(
            store,
            "",
            "PersistentVolumeClaim",
            &mut errors,
            |k, o| {
                out.insert_claim(claim_from_k8s(k, o)?);
                Ok(())
            },
        );
        read::<core::PersistentVolume, _>(store, "", "PersistentVolume", &mut errors, |k, o| {
            out.insert_volume(volume_from_k8s(k, o)?);
            Ok(())
        });
        read::<storage::StorageClass, _>(
            store,
            "storage.k8s.io",
            "StorageClass",
            &mut errors,
            |k, o| {
                out.insert_class(class_from_k8s(k, o)?);
                Ok(())
            },
        );
        read::<storage::CSINode, _>(store, "storage.k8s.io", "CSINode", &mut errors, |k, o| {
            out.insert_csi_node(Sym::new(&k.name), csi_node_from_k8s(k, o)?);
            Ok(())
        });
        read::<storage::CSIDriver, _>(store, "storage.k8s.io", "CSIDriver", &mut errors, |k, o| {
            let tracked = o.spec.storage_capacity.unwrap_or(false);
            out.insert_csi_driver(Sym::new(&k.name), tracked);
            Ok(())
        });
        read::<storage::CSIStorageCapacity, _>(
            store,
            "storage.k8s.io",
            "CSIStorageCapacity",
            &mut errors,
            |k, o| {
                out.insert_capacity(capacity_from_k8s(k, o)?);
                Ok(())
            },
        );
        let (dra, mut dra_errors) = crate::dra::Dra::from_store(store);
        out.dra = Arc::new(dra);
        errors.append(&mut dra_errors);
        (out, errors)
    }
}

/// Decodes and converts every object of `group`/`kind`, collecting errors.
pub(crate) fn read<T: serde::de::DeserializeOwned, F>(
    store: &ObjectStore,
    group: &str,
    kind: &str,
    errors: &mut Vec<ObjectError>,
    mut convert: F,
) where
    F: FnMut(&ObjectKey, &T) -> Result<(), ModelError>,
{
    for (key, value) in store.list(group, kind) {
        let result = typed::<T>(value).and_then(|o| convert(key, &o).map_err(|e| e.detail()));
        if let Err(error) = result {
            errors.push(ObjectError {
                key: key.clone(),
                error,
            });
        }
    }
}

pub(crate) fn invalid(object: &str, field: &str, value: &str, why: &str) -> ModelError {
    ModelError::Invalid {
        object: object.to_string(),
        field: field.to_string(),
        value: value.to_string(),
        why: why.to_string(),
    }
}

fn bytes(
    object: &str,
    field: &str,
    q: &k8s_openapi::apimachinery::pkg::api::resource::Quantity,
) -> Result<i64, ModelError> {
    parse_units(&q.0).map_err(|error| ModelError::Quantity {
        object: object.to_string(),
        field: field.to_string(),
        error,
    })
}

fn non_empty(s: Option<&String>) -> Option<Arc<str>> {
    s.filter(|s| !s.is_empty()).map(|s| Arc::from(s.as_str()))
}

fn claim_from_k8s(key: &ObjectKey, c: &core::PersistentVolumeClaim) -> Result<Claim, ModelError> {
    let object = key.to_string();
    let spec = c.spec.as_ref();
    let request_bytes = match spec
        .and_then(|s| s.resources.as_ref())
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage"))
    {
        Some(q) => bytes(&object, "spec.resources.requests.storage", q)?,
        None => 0,
    };
    Ok(Claim {
        namespace: Sym::new(if key.namespace.is_empty() {
            "default"
        } else {
            &key.namespace
        }),
        name: Arc::from(key.name.as_str()),
        class: non_empty(spec.and_then(|s| s.storage_class_name.as_ref())),
        volume_name: non_empty(spec.and_then(|s| s.volume_name.as_ref())),
        access_modes: AccessModes::parse(
            &object,
            "spec.accessModes",
            spec.and_then(|s| s.access_modes.as_ref()),
        )?,
        request_bytes,
        selected_node: c
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SELECTED_NODE_ANNOTATION))
            .filter(|n| !n.is_empty())
            .map(|n| Sym::new(n)),
        deleting: c.metadata.deletion_timestamp.is_some(),
    })
}

fn volume_from_k8s(
    key: &ObjectKey,
    v: &core::PersistentVolume,
) -> Result<PersistentVolume, ModelError> {
    let object = key.to_string();
    let spec = v.spec.as_ref();
    let node_affinity = match spec
        .and_then(|s| s.node_affinity.as_ref())
        .and_then(|a| a.required.as_ref())
    {
        Some(sel) => Some(node_selector(&object, "spec.nodeAffinity.required", sel)?),
        None => None,
    };
    let labels = v.metadata.labels.as_ref();
    let topology_labels = VOLUME_TOPOLOGY_LABELS
        .iter()
        .filter_map(|k| {
            let value = labels?.get(*k)?;
            let values = value.split("__").map(|z| Sym::new(z.trim())).collect();
            Some((Sym::new(k), values))
        })
        .collect();
    let capacity_bytes = match spec
        .and_then(|s| s.capacity.as_ref())
        .and_then(|c| c.get("storage"))
    {
        Some(q) => bytes(&object, "spec.capacity.storage", q)?,
        None => 0,
    };
    let csi = spec.and_then(|s| s.csi.as_ref()).map(|c| CsiSource {
        driver: Sym::new(&c.driver),
        handle: Arc::from(c.volume_handle.as_str()),
    });
    let claim_ref = spec.and_then(|s| s.claim_ref.as_ref()).and_then(|r| {
        let name = r.name.as_deref().filter(|n| !n.is_empty())?;
        let ns = r
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or("default");
        Some((Sym::new(ns), Arc::from(name)))
    });
    Ok(PersistentVolume {
        name: Arc::from(key.name.as_str()),
        class: non_empty(spec.and_then(|s| s.storage_class_name.as_ref())),
        node_affinity,
        topology_labels,
        csi,
        local: spec.is_some_and(|s| s.local.is_some()),
        capacity_bytes,
        access_modes: AccessModes::parse(
            &object,
            "spec.accessModes",
            spec.and_then(|s| s.access_modes.as_ref()),
        )?,
        claim_ref,
    })
}

fn class_from_k8s(key: &ObjectKey, c: &storage::StorageClass) -> Result<StorageClass, ModelError> {
    let object = key.to_string();
    let binding_mode = match c.volume_binding_mode.as_deref() {
        None | Some("Immediate") => BindingMode::Immediate,
        Some("WaitForFirstConsumer") => BindingMode::WaitForFirstConsumer,
        Some(other) => {
            return Err(invalid(
                &object,
                "volumeBindingMode",
                other,
                "must be Immediate or WaitForFirstConsumer",
            ));
        }
    };
    let allowed_topologies = match c.allowed_topologies.as_ref().filter(|t| !t.is_empty()) {
        None => None,
        Some(terms) if terms.len() > MAX_LIST => {
            return Err(invalid(
                &object,
                "allowedTopologies",
                &terms.len().to_string(),
                "too many terms",
            ));
        }
        Some(terms) => Some(NodeSelector {
            terms: terms
                .iter()
                .map(|t| NodeSelectorTerm {
                    match_expressions: t
                        .match_label_expressions
                        .iter()
                        .flatten()
                        .map(|e| NodeSelectorRequirement {
                            key: Sym::new(&e.key),
                            op: NodeSelectorOp::In,
                            values: e.values.iter().map(|v| Sym::new(v)).collect(),
                        })
                        .collect(),
                    match_fields: Vec::new(),
                })
                .collect(),
        }),
    };
    Ok(StorageClass {
        name: Arc::from(key.name.as_str()),
        provisioner: Sym::new(&c.provisioner),
        binding_mode,
        allowed_topologies,
    })
}

fn csi_node_from_k8s(key: &ObjectKey, c: &storage::CSINode) -> Result<CsiNode, ModelError> {
    let object = key.to_string();
    if c.spec.drivers.len() > MAX_LIST {
        return Err(invalid(
            &object,
            "spec.drivers",
            &c.spec.drivers.len().to_string(),
            "too many drivers",
        ));
    }
    let mut drivers = Vec::with_capacity(c.spec.drivers.len());
    for (i, d) in c.spec.drivers.iter().enumerate() {
        let count = match d.allocatable.as_ref().and_then(|a| a.count) {
            None => None,
            Some(n) => Some(u32::try_from(n).map_err(|_| {
                invalid(
                    &object,
                    &format!("spec.drivers[{i}].allocatable.count"),
                    &n.to_string(),
                    "must not be negative",
                )
            })?),
        };
        drivers.push(CsiDriverLimit {
            driver: Sym::new(&d.name),
            count,
        });
    }
    Ok(CsiNode { drivers })
}

fn capacity_from_k8s(
    key: &ObjectKey,
    c: &storage::CSIStorageCapacity,
) -> Result<StorageCapacity, ModelError> {
    let object = key.to_string();
    let node_topology = match c.node_topology.as_ref() {
        Some(sel) => Some(label_selector(&object, "nodeTopology", sel)?),
        None => None,
    };
    Ok(StorageCapacity {
        class: Arc::from(c.storage_class_name.as_str()),
        node_topology,
        capacity_bytes: c
            .capacity
            .as_ref()
            .map(|q| bytes(&object, "capacity", q))
            .transpose()?,
        maximum_volume_bytes: c
            .maximum_volume_size
            .as_ref()
            .map(|q| bytes(&object, "maximumVolumeSize", q))
            .transpose()?,
    })
}

/// The CSI drivers and limits of `node`: its own (a template's, see [`Node::csi`](Node::csi)) or the
/// CSINode of its name.
pub fn csi_of<'a>(storage: &'a Storage, node: &'a Node) -> Option<&'a Arc<CsiNode>> {
    node.csi.as_ref().or_else(|| storage.csi_node(node.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OBJECTS: &str = r#"
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: data-db-0
  namespace: shop
  annotations: {volume.kubernetes.io/selected-node: n1}
spec:
  storageClassName: zonal
  accessModes: [ReadWriteOncePod]
  resources: {requests: {storage: 10Gi}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: bound, namespace: shop}
spec: {volumeName: pv-1, accessModes: [ReadWriteOnce]}
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv-1
  labels: {topology.kubernetes.io/zone: a__b}
spec:
  capacity: {storage: 10Gi}
  accessModes: [ReadWriteOnce]
  claimRef: {namespace: shop, name: bound}
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-1}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [a]}]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: zonal}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [a, b]}]
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: n1}
spec:
  drivers:
  - {name: ebs.csi.aws.com, nodeID: i-1, allocatable: {count: 25}}
---
apiVersion: storage.k8s.io/v1
kind: CSIStorageCapacity
metadata: {name: cap-a, namespace: kube-system}
storageClassName: zonal
nodeTopology: {matchLabels: {topology.kubernetes.io/zone: a}}
capacity: 100Gi
"#;

    #[test]
    fn storage_objects_are_read() {
        let mut store = ObjectStore::new();
        store.load_yaml(OBJECTS).unwrap();
        let (s, errors) = Storage::from_store(&store);
        assert!(errors.is_empty(), "{errors:?}");
        let shop = Sym::new("shop");
        let c = s.claim(shop, "data-db-0").unwrap();
        assert_eq!(c.class.as_deref(), Some("zonal"));
        assert!(c.access_modes.contains(AccessModes::RWOP) && !c.is_bound());
        assert_eq!(c.request_bytes, 10 << 30);
        assert_eq!(c.selected_node, Some(Sym::new("n1")));
        assert!(s.claim(shop, "bound").unwrap().is_bound());
        let pv = s.volume("pv-1").unwrap();
        assert_eq!(pv.csi.as_ref().unwrap().driver, Sym::new("ebs.csi.aws.com"));
        assert_eq!(pv.topology_labels[0].1, [Sym::new("a"), Sym::new("b")]);
        assert_eq!(pv.claim_ref, Some((shop, Arc::from("bound"))));
        assert!(pv.node_affinity.is_some() && !pv.local);
        let class = s.class("zonal").unwrap();
        assert_eq!(class.binding_mode, BindingMode::WaitForFirstConsumer);
        assert!(class.provisions());
        assert_eq!(class.allowed_topologies.as_ref().unwrap().terms.len(), 1);
        let csi = s.csi_node(Sym::new("n1")).unwrap();
        assert_eq!(csi.limit(Sym::new("ebs.csi.aws.com")), Some(25));
        assert_eq!(s.capacities_of("zonal").count(), 1);
    }

    #[test]
    fn bad_storage_objects_are_named_errors() {
        let mut store = ObjectStore::new();
        store
            .load_yaml(
                "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: c, namespace: ns}\n\
                 spec: {accessModes: [WriteSometimes]}\n---\n\
                 apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv}\n\
                 spec: {capacity: {storage: lots}}\n---\n\
                 apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: sc}\n\
                 provisioner: x\nvolumeBindingMode: Later\n---\n\
                 apiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {name: n}\n\
                 spec: {drivers: [{name: d, nodeID: i, allocatable: {count: -1}}]}\n",
            )
            .unwrap();
        let (s, errors) = Storage::from_store(&store);
        assert!(s.is_empty());
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(text.len(), 4, "{text:?}");
        assert!(
            text[0].starts_with("PersistentVolumeClaim ns/c: field spec.accessModes[0]"),
            "{text:?}"
        );
        assert!(
            text[1].starts_with("PersistentVolume pv: field spec.capacity.storage"),
            "{text:?}"
        );
        assert!(
            text[2].starts_with("StorageClass sc: field volumeBindingMode"),
            "{text:?}"
        );
        assert!(
            text[3].starts_with("CSINode n: field spec.drivers[0].allocatable.count"),
            "{text:?}"
        );
    }

    #[test]
    fn csi_annotation_parses_driver_counts() {
        let c = CsiNode::from_annotation("ebs.csi.aws.com=25, efs.csi.aws.com=100").unwrap();
        assert_eq!(c.limit(Sym::new("ebs.csi.aws.com")), Some(25));
        assert_eq!(c.limit(Sym::new("efs.csi.aws.com")), Some(100));
        assert!(CsiNode::from_annotation("ebs.csi.aws.com").is_err());
        assert!(CsiNode::from_annotation("ebs.csi.aws.com=-1").is_err());
        assert!(CsiNode::from_annotation("=3").is_err());
        assert_eq!(CsiNode::from_annotation("").unwrap(), CsiNode::default());
    }
}
