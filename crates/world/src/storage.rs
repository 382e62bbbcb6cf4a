//! The world's storage controllers, as strict as the ones they stand in for: the StatefulSet
//! controller (pods `<set>-<ordinal>`, a claim `<template>-<set>-<ordinal>` per
//! `volumeClaimTemplate` that outlives its pod and is reused by the replacement), the ephemeral
//! volume controller (a claim `<pod>-<volume>` per generic ephemeral volume, owned by the pod and
//! collected with it), a CSI-like provisioner with the PersistentVolume controller's binding
//! (an `Immediate` claim is provisioned at once in a zone its class allows; a
//! `WaitForFirstConsumer` claim only when the scheduler picked a node for its pod, in that
//! node's zone, see [`pre_bind`]), reclaiming (`Delete` removes the volume with its claim,
//! `Retain` releases it), and a CSINode per node carrying its group's attach limit.
//!
//! It decides which claims and volumes exist and when a pod may bind given its volumes. It
//! never places pods (the scheduler does) and never deletes a volume because its node went (a
//! zonal disk survives its node). It stays idle, at no cost, until the world holds a storage
//! object or a StatefulSet with claims.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use crate::cluster::{Cluster, Owner, WorldError};
use crate::objects::key;
use crate::queue::{Event, NsName};
use crate::time::SimTime;
use crate::workloads::PodTemplate;

/// The zone label of nodes and of the node affinity of provisioned volumes.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
/// The zone label before `topology.kubernetes.io/zone` (still read on nodes and volumes).
pub const LEGACY_ZONE_LABEL: &str = "failure-domain.beta.kubernetes.io/zone";
/// The annotation the scheduler sets on a `WaitForFirstConsumer` claim: the node it chose.
pub const SELECTED_NODE_ANNOTATION: &str = "volume.kubernetes.io/selected-node";
/// The StorageClass annotation marking the default class.
pub const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";
/// The provisioner of classes whose volumes are created by hand (local volumes).
pub const NO_PROVISIONER: &str = "kubernetes.io/no-provisioner";

/// A claim template of a StatefulSet.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimTemplate {
    /// Template name (the pod's volume name, and the claim name's prefix).
    pub name: String,
    /// StorageClass; `None` takes the default class.
    pub storage_class: Option<String>,
    /// Requested size (quantity, e.g. `10Gi`).
    pub size: String,
    /// Access modes (e.g. `ReadWriteOnce`).
    pub access_modes: Vec<String>,
}

/// A StatefulSet whose replica count follows a schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct StatefulSetSpec {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Pod template.
    pub template: PodTemplate,
    /// Replicas at creation.
    pub replicas: u32,
    /// Later replica counts: `(virtual time, replicas)`.
    pub schedule: Vec<(SimTime, u32)>,
    /// `volumeClaimTemplates`.
    pub claims: Vec<ClaimTemplate>,
    /// `podManagementPolicy: Parallel` (all pods at once); otherwise `OrderedReady` (one
    /// ordinal after the other, each once its predecessors run).
    pub parallel: bool,
}

/// The CSI driver the nodes of a group run, and how many of its volumes a node can attach.
#[derive(Clone, Debug, PartialEq)]
pub struct CsiSpec {
    /// Driver name (the StorageClass provisioner).
    pub driver: String,
    /// Attachable volumes per node (`allocatable.count`); `None` is unlimited.
    pub max_volumes: Option<u32>,
}

/// The storage controllers' own state.
#[derive(Debug, Default)]
pub(crate) struct Storage {
    stateful_sets: BTreeMap<NsName, StatefulSetState>,
    /// CSI drivers by MachineDeployment name.
    csi: BTreeMap<String, CsiSpec>,
    /// Nodes with a CSINode written.
    csi_nodes: BTreeSet<String>,
    /// Whether any storage object or StatefulSet exists (until then reconciling is skipped).
    active: bool,
    /// The scheduling epoch and resourceVersion at the last reconcile that changed nothing.
    idle_at: Option<(u64, u64)>,
    /// Round-robin over zones for `Immediate` claims.
    zone_turn: usize,
}

#[derive(Clone, Debug)]
struct StatefulSetState {
    spec: StatefulSetSpec,
    uid: String,
    replicas: u32,
    /// One past the highest ordinal ever created.
    created_upto: u32,
}

/// A claim's class as the provisioner reads it.
#[derive(Clone, Debug)]
struct Class {
    provisioner: String,
    wait_for_consumer: bool,
    delete: bool,
    /// Zones of `allowedTopologies` (empty: any).
    zones: Vec<String>,
}

impl Storage {
    /// The world holds storage objects: reconcile from now on.
    pub(crate) fn activate(&mut self) {
        self.active = true;
        self.idle_at = None;
    }

    /// Sets the CSI driver of a group's nodes (their CSINode objects follow).
    pub(crate) fn set_group_csi(&mut self, group: &str, csi: CsiSpec) {
        self.csi.insert(group.to_string(), csi);
        self.activate();
    }

    /// Adds a StatefulSet and queues its replica schedule.
    pub(crate) fn add_stateful_set(
        &mut self,
        c: &mut Cluster,
        spec: StatefulSetSpec,
    ) -> Result<(), WorldError> {
        let id = (spec.namespace.clone(), spec.name.clone());
        if self.stateful_sets.contains_key(&id) {
            return Err(WorldError::AlreadyExists(format!(
                "StatefulSet {}/{}",
                id.0, id.1
            )));
        }
        let claims: Vec<Value> = spec
            .claims
            .iter()
            .map(|t| claim_template(&spec, t))
            .collect();
        c.put(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": spec.name, "namespace": spec.namespace, "generation": 1},
            "spec": {
                "replicas": spec.replicas, "serviceName": spec.name,
                "selector": {"matchLabels": spec.template.labels},
                "template": {"metadata": {"labels": spec.template.labels}, "spec": spec.template.spec},
                "volumeClaimTemplates": claims,
                "podManagementPolicy": if spec.parallel { "Parallel" } else { "OrderedReady" },
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Retain", "whenScaled": "Retain"},
            },
        }))?;
        let uid = c.uid_of(&key("apps", "StatefulSet", &id.0, &id.1));
        for (t, n) in &spec.schedule {
            let sts = id.clone();
            c.schedule(*t, Event::StatefulSetReplicas { sts, replicas: *n });
        }
        self.stateful_sets.insert(
            id,
            StatefulSetState {
                replicas: spec.replicas,
                spec,
                uid,
                created_upto: 0,
            },
        );
        self.activate();
        self.reconcile(c);
        Ok(())
    }

    /// Changes a StatefulSet's replica count (its schedule, or a scale request).
    pub(crate) fn set_replicas(&mut self, c: &mut Cluster, id: &NsName, replicas: u32) {
        let Some(s) = self.stateful_sets.get_mut(id) else {
            return;
        };
        s.replicas = replicas;
        if let Some(mut obj) = c.get_owned(&key("apps", "StatefulSet", &id.0, &id.1)) {
            obj["spec"]["replicas"] = json!(replicas);
            let g = obj["metadata"]["generation"].as_i64().unwrap_or(1);
            obj["metadata"]["generation"] = json!(g + 1);
            let _ = c.put(obj);
        }
        self.idle_at = None;
    }

    /// Brings claims, volumes, StatefulSet pods and CSINodes in line with what exists.
    pub(crate) fn reconcile(&mut self, c: &mut Cluster) {
        if !self.active {
            return;
        }
        let mark = (c.sched_epoch, c.store.resource_version());
        if self.idle_at == Some(mark) {
            return;
        }
        let ids: Vec<NsName> = self.stateful_sets.keys().cloned().collect();
        let mut changed = false;
        for id in &ids {
            changed |= self.reconcile_stateful_set(c, id);
        }
        changed |= ensure_ephemeral_claims(c);
        changed |= collect_orphan_claims(c);
        changed |= reclaim_volumes(c);
        changed |= self.provision_immediate(c);
        changed |= self.sync_csi_nodes(c);
        if changed {
            storage_changed(c);
        }
        self.idle_at = Some((c.sched_epoch, c.store.resource_version()));
    }

    /// Creates and deletes the set's pods; whether a claim was created.
    fn reconcile_stateful_set(&mut self, c: &mut Cluster, id: &NsName) -> bool {
        let Some(s) = self.stateful_sets.get(id).cloned() else {
            return false;
        };
        let mut claimed = false;
        let mut created_upto = s.created_upto;
        for ordinal in 0..s.replicas {
            let pod = (id.0.clone(), format!("{}-{ordinal}", id.1));
            if let Some(p) = c.pods.get(&pod) {
                // OrderedReady: the next ordinal waits until this one runs.
                if !s.spec.parallel && (p.node.is_none() || p.terminating.is_some()) {
                    break;
                }
                continue;
            }
            match create_stateful_claims(c, &s, ordinal) {
                Ok(created) => claimed |= created,
                Err(_) => break,
            }
            if create_stateful_pod(c, &s, ordinal).is_err() {
                break;
            }
            created_upto = created_upto.max(ordinal + 1);
            if !s.spec.parallel {
                break;
            }
        }
        // Scale-in: the highest ordinals go first (one at a time when OrderedReady).
        for ordinal in (s.replicas..created_upto).rev() {
            let pod = (id.0.clone(), format!("{}-{ordinal}", id.1));
            let Some(p) = c.pods.get(&pod) else {
                continue;
            };
            let terminating = p.terminating.is_some();
            if !terminating {
                c.delete_pod_gracefully(&pod, None);
            }
            if !s.spec.parallel {
                break;
            }
        }
        if let Some(st) = self.stateful_sets.get_mut(id) {
            st.created_upto = created_upto;
        }
        write_stateful_status(c, id, created_upto);
        claimed
    }

    /// Provisions every unbound claim of an `Immediate` class, in a zone the class allows.
    fn provision_immediate(&mut self, c: &mut Cluster) -> bool {
        let unbound: Vec<Value> = (c.store.objects().list("", "PersistentVolumeClaim"))
            .filter(|(_, v)| bound_volume(v).is_none() && v.get("metadata").is_some())
            .map(|(_, v)| (**v).clone())
            .collect();
        let mut changed = false;
        for pvc in unbound {
            let Some(class) = class_of(c, &pvc) else {
                continue;
            };
            if class.wait_for_consumer {
                continue;
            }
            if let Some(pv) = available_volume(c, &pvc, None) {
                changed |= bind_existing(c, &pvc, &pv, None);
                continue;
            }
            if class.provisioner == NO_PROVISIONER {
                continue;
            }
            let zones = if class.zones.is_empty() {
                node_zones(c)
            } else {
                class.zones.clone()
            };
            let zone = (!zones.is_empty()).then(|| zones[self.zone_turn % zones.len()].clone());
            self.zone_turn += 1;
            changed |= provision(c, &pvc, &class, zone.as_deref(), None);
        }
        changed
    }

    /// Writes a CSINode for each node of a group with a CSI driver, and removes those of nodes
    /// gone.
    fn sync_csi_nodes(&mut self, c: &mut Cluster) -> bool {
        if self.csi.is_empty() {
            return false;
        }
        let mut changed = false;
        let names: Vec<String> = c.nodes.keys().cloned().collect();
        for n in &names {
            if self.csi_nodes.contains(n) {
                continue;
            }
            let Some(csi) = group_of_node(c, n).and_then(|g| self.csi.get(&g)).cloned() else {
                continue;
            };
            let mut driver = json!({"name": csi.driver, "nodeID": n, "topologyKeys": [ZONE_LABEL]});
            if let Some(max) = csi.max_volumes {
                driver["allocatable"] = json!({"count": max});
            }
            let node_uid = c.uid_of(&key("", "Node", "", n));
            let _ = c.put(json!({
                "apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                "metadata": {"name": n, "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": n, "uid": node_uid}]},
                "spec": {"drivers": [driver]},
            }));
            self.csi_nodes.insert(n.clone());
            changed = true;
        }
        let gone: Vec<String> = (self.csi_nodes.iter())
            .filter(|n| !c.nodes.contains_key(*n))
            .cloned()
            .collect();
        for n in gone {
            c.store
                .delete(&key("storage.k8s.io", "CSINode", "", &n), c.now);
            self.csi_nodes.remove(&n);
            changed = true;
        }
        changed
    }
}

/// Something that changes volume verdicts happened: the scheduler's snapshot gets the storage
/// objects as stored now, it must look again, and its per-node verdicts are stale. Objects that
/// do not convert are left out (the autoscaler's view reports them).
pub(crate) fn storage_changed(c: &mut Cluster) {
    let (storage, _) = autoscaler_model::Storage::from_store(c.store.objects());
    c.snapshot.set_storage(std::sync::Arc::new(storage));
    c.sched_epoch += 1;
    let ids: Vec<_> = c.nodes.values().map(|n| n.id).collect();
    for id in ids {
        c.touch_node(id);
    }
}

fn claim_template(s: &StatefulSetSpec, t: &ClaimTemplate) -> Value {
    let mut spec = json!({
        "accessModes": t.access_modes,
        "resources": {"requests": {"storage": t.size}},
    });
    if let Some(class) = &t.storage_class {
        spec["storageClassName"] = json!(class);
    }
    json!({"metadata": {"name": t.name, "labels": s.template.labels}, "spec": spec})
}

/// Creates the claims of ordinal `ordinal` that do not exist yet (an existing one is reused,
/// as the StatefulSet controller does); whether it created one.
fn create_stateful_claims(
    c: &mut Cluster,
    s: &StatefulSetState,
    ordinal: u32,
) -> Result<bool, WorldError> {
    let (ns, set) = (&s.spec.namespace, &s.spec.name);
    let mut created = false;
    for t in &s.spec.claims {
        let claim = format!("{}-{set}-{ordinal}", t.name);
        if c.store
            .get(&key("", "PersistentVolumeClaim", ns, &claim))
            .is_none()
        {
            let mut pvc = claim_template(&s.spec, t);
            pvc["apiVersion"] = json!("v1");
            pvc["kind"] = json!("PersistentVolumeClaim");
            pvc["metadata"]["name"] = json!(claim);
            pvc["metadata"]["namespace"] = json!(ns);
            pvc["status"] = json!({"phase": "Pending"});
            c.put(pvc)?;
            created = true;
        }
    }
    Ok(created)
}

/// Creates the pod of ordinal `ordinal`, its claims in its volumes.
fn create_stateful_pod(
    c: &mut Cluster,
    s: &StatefulSetState,
    ordinal: u32,
) -> Result<(), WorldError> {
    let (ns, set) = (&s.spec.namespace, &s.spec.name);
    let pod_name = format!("{set}-{ordinal}");
    let mut template = s.spec.template.clone();
    let mut volumes = template.spec["volumes"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for t in &s.spec.claims {
        let claim = format!("{}-{set}-{ordinal}", t.name);
        volumes.push(json!({"name": t.name, "persistentVolumeClaim": {"claimName": claim}}));
    }
    template.spec["volumes"] = Value::Array(volumes);
    template.spec["hostname"] = json!(pod_name);
    template.spec["subdomain"] = json!(set);
    let template = template
        .label("statefulset.kubernetes.io/pod-name", &pod_name)
        .label("apps.kubernetes.io/pod-index", &ordinal.to_string());
    let owner = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": set,
        "uid": s.uid, "controller": true, "blockOwnerDeletion": true});
    let obj = template.pod_object(ns, &pod_name, owner, "Always");
    c.create_pod(obj, Owner::StatefulSet((ns.clone(), set.clone())), None)?;
    Ok(())
}

fn write_stateful_status(c: &mut Cluster, id: &NsName, upto: u32) {
    let (mut current, mut ready) = (0, 0);
    for ordinal in 0..upto {
        if let Some(p) = c.pods.get(&(id.0.clone(), format!("{}-{ordinal}", id.1))) {
            current += 1;
            if p.node.is_some() && p.terminating.is_none() {
                ready += 1;
            }
        }
    }
    let Some(mut obj) = c.get_owned(&key("apps", "StatefulSet", &id.0, &id.1)) else {
        return;
    };
    let status = json!({
        "replicas": current, "currentReplicas": current, "updatedReplicas": current,
        "readyReplicas": ready, "availableReplicas": ready,
        "observedGeneration": obj["metadata"]["generation"],
    });
    if obj["status"] != status {
        obj["status"] = status;
        let _ = c.put(obj);
    }
}

/// The claims a pod uses: `(volume name, claim name, ephemeral template)`.
fn pod_claims(pod: &Value) -> Vec<(String, String, Option<Value>)> {
    let name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    let Some(volumes) = pod.pointer("/spec/volumes").and_then(Value::as_array) else {
        return Vec::new();
    };
    volumes
        .iter()
        .filter_map(|v| {
            let vol = v.get("name").and_then(Value::as_str)?.to_string();
            if let Some(claim) = v
                .pointer("/persistentVolumeClaim/claimName")
                .and_then(Value::as_str)
            {
                return Some((vol, claim.to_string(), None));
            }
            let template = v.pointer("/ephemeral/volumeClaimTemplate")?.clone();
            Some((vol.clone(), format!("{name}-{vol}"), Some(template)))
        })
        .collect()
}

/// The ephemeral volume controller: a claim per generic ephemeral volume of each pod waiting
/// to be scheduled, owned by the pod.
fn ensure_ephemeral_claims(c: &mut Cluster) -> bool {
    let pending: Vec<NsName> = c.pending.iter().map(|(_, _, id)| id.clone()).collect();
    let mut changed = false;
    for (ns, name) in pending {
        let Some(pod) = c.store.get(&key("", "Pod", &ns, &name)).cloned() else {
            continue;
        };
        for (_, claim, template) in pod_claims(&pod) {
            let Some(template) = template else { continue };
            if c.store
                .get(&key("", "PersistentVolumeClaim", &ns, &claim))
                .is_some()
            {
                continue;
            }
            let uid = pod.pointer("/metadata/uid").cloned().unwrap_or(json!(""));
            let mut meta = template.get("metadata").cloned().unwrap_or(json!({}));
            meta["name"] = json!(claim);
            meta["namespace"] = json!(ns);
            meta["ownerReferences"] = json!([{"apiVersion": "v1", "kind": "Pod", "name": name,
                "uid": uid, "controller": true, "blockOwnerDeletion": true}]);
            let spec = template.get("spec").cloned().unwrap_or(json!({}));
            let pvc = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": meta, "spec": spec, "status": {"phase": "Pending"}});
            changed |= c.put(pvc).is_ok();
        }
    }
    changed
}

/// The garbage collector for claims owned by a pod: gone with the pod object (same uid).
fn collect_orphan_claims(c: &mut Cluster) -> bool {
    let orphans: Vec<_> = (c.store.objects().list("", "PersistentVolumeClaim"))
        .filter(|(k, v)| {
            let Some(owners) = v
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
            else {
                return false;
            };
            owners.iter().any(|o| {
                o["kind"] == "Pod" && {
                    let name = o["name"].as_str().unwrap_or("");
                    let alive = c.store.get(&key("", "Pod", &k.namespace, name));
                    alive.is_none_or(|p| p.pointer("/metadata/uid") != o.get("uid"))
                }
            })
        })
        .map(|(k, _)| k.clone())
        .collect();
    for k in &orphans {
        c.store.delete(k, c.now);
    }
    !orphans.is_empty()
}

/// The PersistentVolume controller's reclaiming: a volume whose claim is gone is deleted
/// (`Delete`) or released (`Retain`).
fn reclaim_volumes(c: &mut Cluster) -> bool {
    let mut todo = Vec::new();
    for (k, pv) in c.store.objects().list("", "PersistentVolume") {
        let Some(claim) = pv.pointer("/spec/claimRef") else {
            continue;
        };
        if pv.pointer("/status/phase").and_then(Value::as_str) == Some("Released") {
            continue;
        }
        let ns = claim["namespace"].as_str().unwrap_or("");
        let name = claim["name"].as_str().unwrap_or("");
        let live = c.store.get(&key("", "PersistentVolumeClaim", ns, name));
        if live.is_some_and(|p| {
            claim
                .get("uid")
                .is_none_or(|u| p.pointer("/metadata/uid") == Some(u))
        }) {
            continue;
        }
        let delete = pv
            .pointer("/spec/persistentVolumeReclaimPolicy")
            .and_then(Value::as_str)
            != Some("Retain");
        todo.push((k.clone(), delete));
    }
    for (k, delete) in &todo {
        if *delete {
            c.store.delete(k, c.now);
        } else if let Some(mut pv) = c.get_owned(k) {
            pv["status"] = json!({"phase": "Released"});
            let _ = c.put(pv);
        }
    }
    !todo.is_empty()
}

/// The class of a claim: its `storageClassName`, or the default class when it names none.
fn class_of(c: &Cluster, pvc: &Value) -> Option<Class> {
    let named = pvc
        .pointer("/spec/storageClassName")
        .and_then(Value::as_str);
    let sc = match named {
        Some(n) => c
            .store
            .get(&key("storage.k8s.io", "StorageClass", "", n))?
            .clone(),
        None => c
            .store
            .objects()
            .list("storage.k8s.io", "StorageClass")
            .find(|(_, v)| {
                v.pointer(&format!(
                    "/metadata/annotations/{}",
                    DEFAULT_CLASS_ANNOTATION.replace('/', "~1")
                ))
                .and_then(Value::as_str)
                    == Some("true")
            })
            .map(|(_, v)| v.clone())?,
    };
    let zones = (sc.get("allowedTopologies").and_then(Value::as_array))
        .into_iter()
        .flatten()
        .flat_map(|t| {
            t["matchLabelExpressions"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter(|e| e["key"] == ZONE_LABEL || e["key"] == LEGACY_ZONE_LABEL)
        .flat_map(|e| e["values"].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect();
    Some(Class {
        provisioner: sc["provisioner"].as_str().unwrap_or("").to_string(),
        wait_for_consumer: sc["volumeBindingMode"] == "WaitForFirstConsumer",
        delete: sc["reclaimPolicy"] != "Retain",
        zones,
    })
}

/// The zones of the nodes, sorted.
fn node_zones(c: &Cluster) -> Vec<String> {
    let zones: BTreeSet<String> = (c.store.objects().list("", "Node"))
        .filter_map(|(_, n)| zone_of(n))
        .collect();
    zones.into_iter().collect()
}

fn label<'a>(obj: &'a Value, k: &str) -> Option<&'a str> {
    obj.pointer("/metadata/labels")?.get(k)?.as_str()
}

fn zone_of(obj: &Value) -> Option<String> {
    label(obj, ZONE_LABEL)
        .or_else(|| label(obj, LEGACY_ZONE_LABEL))
        .map(str::to_string)
}

/// The volume a claim is bound to.
fn bound_volume(pvc: &Value) -> Option<&str> {
    pvc.pointer("/spec/volumeName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
}

/// Creates a volume for `pvc` (in `zone`, when the driver is topology-aware) and binds both,
/// as a CSI external-provisioner and the PersistentVolume controller do together.
fn provision(
    c: &mut Cluster,
    pvc: &Value,
    class: &Class,
    zone: Option<&str>,
    node: Option<&str>,
) -> bool {
    let (Some(ns), Some(name), Some(uid)) = (
        pvc.pointer("/metadata/namespace").and_then(Value::as_str),
        pvc.pointer("/metadata/name").and_then(Value::as_str),
        pvc.pointer("/metadata/uid").and_then(Value::as_str),
    ) else {
        return false;
    };
    let pv_name = format!("pvc-{uid}");
    let size = pvc
        .pointer("/spec/resources/requests/storage")
        .cloned()
        .unwrap_or(json!("1Gi"));
    let modes = pvc
        .pointer("/spec/accessModes")
        .cloned()
        .unwrap_or(json!(["ReadWriteOnce"]));
    let class_name = pvc.pointer("/spec/storageClassName").cloned();
    let mut spec = json!({
        "capacity": {"storage": size},
        "accessModes": modes,
        "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "namespace": ns, "name": name, "uid": uid},
        "persistentVolumeReclaimPolicy": if class.delete { "Delete" } else { "Retain" },
        "csi": {"driver": class.provisioner, "volumeHandle": format!("vol-{uid}"), "fsType": "ext4"},
        "volumeMode": "Filesystem",
    });
    if let Some(class_name) = &class_name {
        spec["storageClassName"] = class_name.clone();
    }
    if let Some(zone) = zone {
        spec["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": ZONE_LABEL, "operator": "In", "values": [zone]}]}]}});
    }
    let pv = json!({"apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": pv_name, "annotations": {"pv.kubernetes.io/provisioned-by": class.provisioner}},
        "spec": spec, "status": {"phase": "Bound"}});
    if c.put(pv).is_err() {
        return false;
    }
    let mut claim = pvc.clone();
    let ann = &mut claim["metadata"]["annotations"];
    if !ann.is_object() {
        *ann = json!({});
    }
    ann["pv.kubernetes.io/bind-completed"] = json!("yes");
    ann["pv.kubernetes.io/bound-by-controller"] = json!("yes");
    ann["volume.kubernetes.io/storage-provisioner"] = json!(class.provisioner);
    if let Some(node) = node {
        ann[SELECTED_NODE_ANNOTATION] = json!(node);
    }
    claim["spec"]["volumeName"] = json!(pv_name);
    claim["status"] =
        json!({"phase": "Bound", "accessModes": modes, "capacity": {"storage": size}});
    c.put(claim).is_ok()
}

/// The MachineDeployment a node's Machine belongs to.
fn group_of_node(c: &Cluster, node: &str) -> Option<String> {
    let n = c.store.get(&key("", "Node", "", node))?;
    let ann = n.pointer("/metadata/annotations")?;
    let machine = ann.get("cluster.x-k8s.io/machine")?.as_str()?;
    let ns = ann.get("cluster.x-k8s.io/cluster-namespace")?.as_str()?;
    let m = c
        .store
        .get(&key(crate::machines::CAPI_GROUP, "Machine", ns, machine))?;
    label(m, "cluster.x-k8s.io/deployment-name").map(str::to_string)
}

/// Whether `node` satisfies a volume's node affinity (terms ORed, expressions ANDed) and its
/// legacy zone labels.
fn volume_fits(pv: &Value, node: &Value) -> bool {
    for k in [ZONE_LABEL, LEGACY_ZONE_LABEL] {
        if let Some(z) = label(pv, k) {
            // A zone label on a volume may list zones joined by `__`.
            if !label(node, k).is_some_and(|nz| z.split("__").any(|x| x == nz)) {
                return false;
            }
        }
    }
    let Some(terms) = pv
        .pointer("/spec/nodeAffinity/required/nodeSelectorTerms")
        .and_then(Value::as_array)
    else {
        return true;
    };
    terms.iter().any(|t| {
        let exprs = t["matchExpressions"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        let fields = t["matchFields"].as_array().cloned().unwrap_or_default();
        !(exprs.is_empty() && fields.is_empty())
            && exprs
                .iter()
                .all(|e| expression_holds(e, label(node, e["key"].as_str().unwrap_or(""))))
            && fields.iter().all(|e| {
                let name = node.pointer("/metadata/name").and_then(Value::as_str);
                e["key"] == "metadata.name" && expression_holds(e, name)
            })
    })
}

fn expression_holds(e: &Value, value: Option<&str>) -> bool {
    let values: Vec<&str> = (e["values"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    match e["operator"].as_str() {
        Some("In") => value.is_some_and(|v| values.contains(&v)),
        Some("NotIn") => value.is_none_or(|v| !values.contains(&v)),
        Some("Exists") => value.is_some(),
        Some("DoesNotExist") => value.is_none(),
        Some(op @ ("Gt" | "Lt")) => {
            let (Some(v), Some(bound)) = (
                value.and_then(|v| v.parse::<i64>().ok()),
                values.first().and_then(|b| b.parse::<i64>().ok()),
            ) else {
                return false;
            };
            if op == "Gt" { v > bound } else { v < bound }
        }
        _ => false,
    }
}

/// How one unbound claim of a pod gets its volume at PreBind.
struct Binding {
    pvc: std::sync::Arc<Value>,
    class: Class,
    zone: Option<String>,
    /// An existing available volume to bind; `None` provisions one.
    existing: Option<String>,
}

/// The size a claim requests or a volume holds, in bytes (0 when absent or invalid).
fn storage_bytes(obj: &Value, pointer: &str) -> i64 {
    (obj.pointer(pointer).and_then(Value::as_str))
        .and_then(|q| autoscaler_model::parse_units(q).ok())
        .unwrap_or(0)
}

/// The PersistentVolume controller's choice of an existing volume for `pvc`: an available one
/// (unclaimed, or pre-bound to this claim) of the claim's class, with its access modes and
/// enough capacity, reachable from `node` when given (and not in `taken`); the smallest such.
fn available_volume(c: &Cluster, pvc: &Value, node: Option<(&Value, &[&str])>) -> Option<String> {
    let class = pvc
        .pointer("/spec/storageClassName")
        .and_then(Value::as_str)
        .unwrap_or("");
    let ns = pvc.pointer("/metadata/namespace").and_then(Value::as_str)?;
    let name = pvc.pointer("/metadata/name").and_then(Value::as_str)?;
    let want = storage_bytes(pvc, "/spec/resources/requests/storage");
    let modes: Vec<&Value> = (pvc.pointer("/spec/accessModes").and_then(Value::as_array))
        .map(|m| m.iter().collect())
        .unwrap_or_default();
    (c.store.objects().list("", "PersistentVolume"))
        .filter(|(_, pv)| {
            let claim = pv.pointer("/spec/claimRef");
            let free = claim.is_none_or(|r| r["namespace"] == ns && r["name"] == name);
            let phase = pv.pointer("/status/phase").and_then(Value::as_str);
            let pv_modes = pv.pointer("/spec/accessModes").and_then(Value::as_array);
            free && phase != Some("Released")
                && pv
                    .pointer("/spec/storageClassName")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    == class
                && storage_bytes(pv, "/spec/capacity/storage") >= want
                && modes
                    .iter()
                    .all(|m| pv_modes.is_some_and(|p| p.contains(m)))
                && node.is_none_or(|(n, taken)| {
                    volume_fits(pv, n)
                        && !taken.contains(&pv["metadata"]["name"].as_str().unwrap_or(""))
                })
        })
        .min_by_key(|(k, pv)| (storage_bytes(pv, "/spec/capacity/storage"), k.name.clone()))
        .map(|(k, _)| k.name.clone())
}

/// Binds `pvc` to the existing volume `pv_name` (both sides, as the PersistentVolume controller
/// does).
fn bind_existing(c: &mut Cluster, pvc: &Value, pv_name: &str, node: Option<&str>) -> bool {
    let Some(mut pv) = c.get_owned(&key("", "PersistentVolume", "", pv_name)) else {
        return false;
    };
    pv["spec"]["claimRef"] = json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "namespace": pvc["metadata"]["namespace"], "name": pvc["metadata"]["name"],
        "uid": pvc["metadata"]["uid"]});
    pv["status"] = json!({"phase": "Bound"});
    if c.put(pv.clone()).is_err() {
        return false;
    }
    let mut claim = pvc.clone();
    let ann = &mut claim["metadata"]["annotations"];
    if !ann.is_object() {
        *ann = json!({});
    }
    ann["pv.kubernetes.io/bind-completed"] = json!("yes");
    ann["pv.kubernetes.io/bound-by-controller"] = json!("yes");
    if let Some(node) = node {
        ann[SELECTED_NODE_ANNOTATION] = json!(node);
    }
    claim["spec"]["volumeName"] = json!(pv_name);
    claim["status"] = json!({"phase": "Bound", "accessModes": pv["spec"]["accessModes"],
        "capacity": pv["spec"]["capacity"]});
    c.put(claim).is_ok()
}

/// kube-scheduler's VolumeBinding PreBind, and the provisioning it waits for: before `pod`
/// binds to `node`, every claim it uses must exist and be bound to a volume the node can reach;
/// an unbound `WaitForFirstConsumer` claim is provisioned now in the node's zone (the claim gets
/// the selected-node annotation). Refuses (the pod stays pending, retried at the next pass) a
/// missing claim, an unbound `Immediate` claim, a bound volume the node cannot reach, and a
/// zone the class does not allow. A pod without claims binds as before.
pub(crate) fn pre_bind(c: &mut Cluster, pod: &NsName, node: &str) -> Result<(), String> {
    let Some(obj) = c.store.get(&key("", "Pod", &pod.0, &pod.1)) else {
        return Ok(());
    };
    if obj.pointer("/spec/volumes").is_none() {
        return Ok(());
    }
    let claims = pod_claims(obj);
    if claims.is_empty() {
        return Ok(());
    }
    let node_obj = c
        .store
        .get(&key("", "Node", "", node))
        .cloned()
        .ok_or_else(|| format!("node {node} not found"))?;
    let mut to_provision = Vec::new();
    for (_, claim, _) in &claims {
        let pvc = c
            .store
            .get(&key("", "PersistentVolumeClaim", &pod.0, claim))
            .cloned()
            .ok_or_else(|| format!("persistentvolumeclaim \"{claim}\" not found"))?;
        if let Some(pv_name) = bound_volume(&pvc) {
            let pv = c
                .store
                .get(&key("", "PersistentVolume", "", pv_name))
                .ok_or_else(|| format!("persistentvolume \"{pv_name}\" not found"))?;
            if !volume_fits(pv, &node_obj) {
                return Err("node(s) had volume node affinity conflict".into());
            }
            continue;
        }
        let class = class_of(c, &pvc).ok_or("pod has unbound immediate PersistentVolumeClaims")?;
        if !class.wait_for_consumer {
            return Err("pod has unbound immediate PersistentVolumeClaims".into());
        }
        let taken: Vec<&str> = (to_provision.iter())
            .filter_map(|p: &Binding| p.existing.as_deref())
            .collect();
        if let Some(pv) = available_volume(c, &pvc, Some((&node_obj, &taken))) {
            to_provision.push(Binding {
                pvc,
                class,
                zone: None,
                existing: Some(pv),
            });
            continue;
        }
        if class.provisioner == NO_PROVISIONER {
            return Err("node(s) didn't find available persistent volumes to bind".into());
        }
        let zone = zone_of(&node_obj);
        if !class.zones.is_empty() && !zone.as_ref().is_some_and(|z| class.zones.contains(z)) {
            return Err("node(s) didn't find available persistent volumes to bind".into());
        }
        to_provision.push(Binding {
            pvc,
            class,
            zone,
            existing: None,
        });
    }
    let any = !to_provision.is_empty();
    for b in to_provision {
        match &b.existing {
            Some(pv) => bind_existing(c, &b.pvc, pv, Some(node)),
            None => provision(c, &b.pvc, &b.class, b.zone.as_deref(), Some(node)),
        };
    }
    if any {
        storage_changed(c);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;

    fn zonal_group(name: &str, zone: &str, replicas: u32) -> NodeGroupSpec {
        let mut g = group(name, replicas);
        g.labels.insert(ZONE_LABEL.into(), zone.into());
        g
    }

    fn class(name: &str, mode: &str, reclaim: &str, zones: &[&str]) -> Value {
        let mut sc = json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": name}, "provisioner": "disk.csi.example.com",
            "volumeBindingMode": mode, "reclaimPolicy": reclaim});
        if !zones.is_empty() {
            sc["allowedTopologies"] =
                json!([{"matchLabelExpressions": [{"key": ZONE_LABEL, "values": zones}]}]);
        }
        sc
    }

    fn sts(name: &str, replicas: u32, class: &str, parallel: bool) -> StatefulSetSpec {
        StatefulSetSpec {
            namespace: "default".into(),
            name: name.into(),
            template: PodTemplate::new().requests("1", "1Gi").label("app", name),
            replicas,
            schedule: Vec::new(),
            claims: vec![ClaimTemplate {
                name: "data".into(),
                storage_class: Some(class.into()),
                size: "10Gi".into(),
                access_modes: vec!["ReadWriteOnce".into()],
            }],
            parallel,
        }
    }

    fn pvc(w: &World, name: &str) -> Option<Value> {
        get(w, "", "PersistentVolumeClaim", "default", name)
    }

    fn pv_zone(w: &World, claim: &str) -> Option<String> {
        let c = pvc(w, claim)?;
        let pv = get(
            w,
            "",
            "PersistentVolume",
            "",
            c["spec"]["volumeName"].as_str()?,
        )?;
        pv.pointer("/spec/nodeAffinity/required/nodeSelectorTerms/0/matchExpressions/0/values/0")
            .and_then(Value::as_str)
            .map(str::to_string)
    }

    fn node_of(w: &World, pod: &str) -> Option<String> {
        (w.live_pods().into_iter())
            .find(|(ns, n, _)| ns == "default" && n == pod)
            .and_then(|p| p.2)
    }

    fn zone_of_node(w: &World, node: &str) -> String {
        get(w, "", "Node", "", node).expect("node")["metadata"]["labels"][ZONE_LABEL]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    #[test]
    fn a_stateful_set_gets_a_claim_per_ordinal_provisioned_in_the_zone_of_its_node() {
        let mut w = world(1);
        w.add_node_group(&zonal_group("workers", "a", 1)).unwrap();
        w.apply(class("zonal", "WaitForFirstConsumer", "Delete", &[]))
            .unwrap();
        w.add_stateful_set(sts("db", 3, "zonal", false)).unwrap();
        // Before a node is there: ordinal 0 and its claim exist, unbound; OrderedReady holds 1.
        assert!(node_of(&w, "db-0").is_none());
        let claim = pvc(&w, "data-db-0").expect("claim of ordinal 0");
        assert!(bound_volume(&claim).is_none());
        assert!(
            pvc(&w, "data-db-1").is_none(),
            "OrderedReady waits for db-0"
        );
        w.advance(200_000);
        for i in 0..3 {
            let pod = format!("db-{i}");
            let node = node_of(&w, &pod).unwrap_or_else(|| panic!("{pod} runs"));
            let claim = pvc(&w, &format!("data-db-{i}")).expect("claim");
            assert_eq!(claim["status"]["phase"], "Bound");
            assert_eq!(
                claim["metadata"]["annotations"][SELECTED_NODE_ANNOTATION],
                json!(node)
            );
            assert_eq!(pv_zone(&w, &format!("data-db-{i}")).as_deref(), Some("a"));
            let obj = get(&w, "", "Pod", "default", &pod).expect("pod");
            assert_eq!(
                obj["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"],
                json!(format!("data-db-{i}"))
            );
        }
        let set = get(&w, "apps", "StatefulSet", "default", "db").expect("set");
        assert_eq!(set["status"]["readyReplicas"], 3);
    }

    #[test]
    fn a_replacement_pod_reuses_its_claim_and_never_runs_outside_the_volume_zone() {
        let mut w = world(2);
        w.add_node_group(&zonal_group("workers", "a", 1)).unwrap();
        w.add_node_group(&zonal_group("other", "b", 1)).unwrap();
        w.apply(class("zonal", "WaitForFirstConsumer", "Delete", &[]))
            .unwrap();
        w.add_stateful_set(sts("db", 1, "zonal", true)).unwrap();
        w.advance(200_000);
        let node = node_of(&w, "db-0").expect("db-0 runs");
        let zone = zone_of_node(&w, &node);
        assert_eq!(pv_zone(&w, "data-db-0"), Some(zone.clone()));
        let volume = pvc(&w, "data-db-0").unwrap()["spec"]["volumeName"].clone();
        // The node goes: the pod is recreated with the same name and claim; the volume stays.
        w.delete_node(&node).unwrap();
        w.advance(5_000);
        assert_eq!(
            pvc(&w, "data-db-0").unwrap()["spec"]["volumeName"],
            volume,
            "same claim, same volume"
        );
        assert!(
            get(&w, "", "PersistentVolume", "", volume.as_str().unwrap()).is_some(),
            "a zonal disk survives its node"
        );
        assert!(
            node_of(&w, "db-0").is_none(),
            "no node left in zone {zone}: the pod waits rather than run in the other zone"
        );
        assert_eq!(w.live_pods().len(), 1);
    }

    #[test]
    fn immediate_claims_are_provisioned_at_once_in_an_allowed_zone() {
        let mut w = world(3);
        w.add_node_group(&zonal_group("workers", "a", 1)).unwrap();
        w.apply(class("fast", "Immediate", "Delete", &["c"]))
            .unwrap();
        w.apply(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "scratch", "namespace": "default"},
            "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1Gi"}}}}))
            .unwrap();
        let claim = pvc(&w, "scratch").expect("claim");
        assert_eq!(claim["status"]["phase"], "Bound");
        assert!(
            claim["metadata"]["annotations"]
                .get(SELECTED_NODE_ANNOTATION)
                .is_none()
        );
        assert_eq!(pv_zone(&w, "scratch").as_deref(), Some("c"));
        // Its pod may not run in zone a, where the only node is.
        w.add_pod(
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "user", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "i"}],
                    "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "scratch"}}]}}),
            None,
        )
        .unwrap();
        w.advance(200_000);
        assert!(node_of(&w, "user").is_none());
        // Deleting the claim deletes its volume (reclaimPolicy Delete).
        let volume = claim["spec"]["volumeName"].as_str().unwrap().to_string();
        w.delete_object(&key("", "PersistentVolumeClaim", "default", "scratch"))
            .unwrap();
        w.advance(1_000);
        assert!(get(&w, "", "PersistentVolume", "", &volume).is_none());
    }

    #[test]
    fn retained_volumes_are_released_with_their_claim() {
        let mut w = world(4);
        w.add_node_group(&zonal_group("workers", "a", 1)).unwrap();
        w.advance(200_000);
        w.apply(class("keep", "Immediate", "Retain", &[])).unwrap();
        w.apply(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "k", "namespace": "default"},
            "spec": {"storageClassName": "keep", "resources": {"requests": {"storage": "1Gi"}}}}))
            .unwrap();
        let volume = pvc(&w, "k").unwrap()["spec"]["volumeName"]
            .as_str()
            .unwrap()
            .to_string();
        assert_eq!(pv_zone(&w, "k").as_deref(), Some("a"), "a zone with nodes");
        w.delete_object(&key("", "PersistentVolumeClaim", "default", "k"))
            .unwrap();
        w.advance(1_000);
        let pv = get(&w, "", "PersistentVolume", "", &volume).expect("retained");
        assert_eq!(pv["status"]["phase"], "Released");
    }

    #[test]
    fn ephemeral_volumes_get_a_claim_owned_by_the_pod_and_go_with_it() {
        let mut w = world(5);
        w.add_node_group(&zonal_group("workers", "b", 1)).unwrap();
        w.apply(class("zonal", "WaitForFirstConsumer", "Delete", &[]))
            .unwrap();
        w.add_pod(
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "job", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "i"}],
                    "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                        "metadata": {"labels": {"kind": "scratch"}},
                        "spec": {"storageClassName": "zonal", "accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "5Gi"}}}}}}]}}),
            None,
        )
        .unwrap();
        w.advance(1_000);
        let claim = pvc(&w, "job-scratch").expect("claim created with the pod");
        assert_eq!(claim["metadata"]["ownerReferences"][0]["kind"], "Pod");
        assert_eq!(claim["metadata"]["labels"]["kind"], "scratch");
        w.advance(200_000);
        assert!(node_of(&w, "job").is_some());
        assert_eq!(pv_zone(&w, "job-scratch").as_deref(), Some("b"));
        let volume = pvc(&w, "job-scratch").unwrap()["spec"]["volumeName"]
            .as_str()
            .unwrap()
            .to_string();
        w.delete_pod("default", "job").unwrap();
        w.advance(1_000);
        assert!(pvc(&w, "job-scratch").is_none(), "collected with its pod");
        assert!(get(&w, "", "PersistentVolume", "", &volume).is_none());
    }

    #[test]
    fn nodes_of_a_group_with_a_csi_driver_get_a_csi_node_with_its_limit() {
        let mut w = world(6);
        w.add_node_group(&zonal_group("workers", "a", 2)).unwrap();
        w.add_node_group(&zonal_group("plain", "a", 1)).unwrap();
        w.set_group_csi(
            "workers",
            CsiSpec {
                driver: "disk.csi.example.com".into(),
                max_volumes: Some(2),
            },
        );
        w.advance(200_000);
        let csi: Vec<Value> = (w.objects().list("storage.k8s.io", "CSINode"))
            .map(|(_, v)| (**v).clone())
            .collect();
        assert_eq!(csi.len(), 2, "only the nodes of the group with a driver");
        let workers = w.machines_of("capi", "workers");
        for n in &csi {
            assert_eq!(n["spec"]["drivers"][0]["allocatable"]["count"], 2);
            assert_eq!(n["spec"]["drivers"][0]["name"], "disk.csi.example.com");
            let node = n["metadata"]["name"].as_str().unwrap();
            assert!(
                w.machine_of_node(node)
                    .is_some_and(|m| workers.contains(&m.1))
            );
        }
        w.set_replicas("capi", "workers", 1).unwrap();
        w.advance(200_000);
        assert_eq!(w.objects().list("storage.k8s.io", "CSINode").count(), 1);
    }

    fn pod_with_scratch(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "i"}],
                "volumes": [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {
                    "spec": {"storageClassName": "zonal", "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "1Gi"}}}}}}]}})
    }

    #[test]
    fn a_node_at_its_attach_limit_takes_no_further_volume() {
        let mut w = world(7);
        w.add_node_group(&zonal_group("workers", "a", 1)).unwrap();
        w.set_group_csi(
            "workers",
            CsiSpec {
                driver: "disk.csi.example.com".into(),
                max_volumes: Some(1),
            },
        );
        w.apply(class("zonal", "WaitForFirstConsumer", "Delete", &[]))
            .unwrap();
        w.add_pod(pod_with_scratch("first"), None).unwrap();
        w.advance(200_000);
        assert!(node_of(&w, "first").is_some());
        w.add_pod(pod_with_scratch("second"), None).unwrap();
        w.advance(5_000);
        assert!(node_of(&w, "second").is_none(), "one volume per node");
        let pod = get(&w, "", "Pod", "default", "second").expect("pod");
        let message = pod["status"]["conditions"][0]["message"]
            .as_str()
            .unwrap_or("");
        assert_eq!(
            message, "0/1 nodes are available: 1 node(s) exceed max volume count.",
            "{pod}"
        );
        assert!(
            bound_volume(&pvc(&w, "second-scratch").expect("claim")).is_none(),
            "nothing provisioned for a pod that did not bind"
        );
        // The first pod goes (its claim and volume with it): the second takes the node.
        w.delete_pod("default", "first").unwrap();
        w.advance(5_000);
        assert!(node_of(&w, "second").is_some());
    }

    fn static_node(name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, ZONE_LABEL: "a"}},
            "spec": {},
            "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]}})
    }

    fn local_volume(name: &str, node: &str, size: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local", "persistentVolumeReclaimPolicy": "Retain",
                "local": {"path": "/mnt/disks/1"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}]}}},
            "status": {"phase": "Available"}})
    }

    #[test]
    fn a_claim_of_local_volumes_binds_the_smallest_fitting_one_and_its_pod_runs_there() {
        let mut w = world(8);
        w.apply(static_node("n1")).unwrap();
        w.apply(static_node("n2")).unwrap();
        w.apply(
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
            "metadata": {"name": "local"}, "provisioner": NO_PROVISIONER,
            "volumeBindingMode": "WaitForFirstConsumer"}),
        )
        .unwrap();
        w.apply(local_volume("big-n2", "n2", "100Gi")).unwrap();
        w.apply(local_volume("small-n2", "n2", "20Gi")).unwrap();
        w.apply(local_volume("tiny-n1", "n1", "1Gi")).unwrap();
        w.apply(json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "cache", "namespace": "default"},
            "spec": {"storageClassName": "local", "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "10Gi"}}}}))
            .unwrap();
        w.add_pod(
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "user", "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "i"}],
                    "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "cache"}}]}}),
            None,
        )
        .unwrap();
        w.advance(2_000);
        assert_eq!(
            node_of(&w, "user").as_deref(),
            Some("n2"),
            "only n2 has a volume that fits"
        );
        let claim = pvc(&w, "cache").unwrap();
        assert_eq!(claim["spec"]["volumeName"], "small-n2");
        assert_eq!(
            claim["metadata"]["annotations"][SELECTED_NODE_ANNOTATION],
            "n2"
        );
        let pv = get(&w, "", "PersistentVolume", "", "small-n2").unwrap();
        assert_eq!(pv["spec"]["claimRef"]["name"], "cache");
        assert_eq!(
            w.objects().list("", "PersistentVolume").count(),
            3,
            "none provisioned"
        );
        // Retained: the claim goes, the local volume is released, not deleted.
        w.delete_pod("default", "user").unwrap();
        w.delete_object(&key("", "PersistentVolumeClaim", "default", "cache"))
            .unwrap();
        w.advance(1_000);
        let pv = get(&w, "", "PersistentVolume", "", "small-n2").unwrap();
        assert_eq!(pv["status"]["phase"], "Released");
    }

    #[test]
    fn a_volume_matches_node_affinity_and_legacy_zone_labels() {
        let node = json!({"metadata": {"name": "n1", "labels": {ZONE_LABEL: "a", LEGACY_ZONE_LABEL: "a"}}});
        let pv = |affinity: Value, labels: Value| json!({"metadata": {"labels": labels}, "spec": {"nodeAffinity": affinity}});
        let terms = |op: &str, values: &[&str]| {
            json!({"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": ZONE_LABEL, "operator": op, "values": values}]}]}})
        };
        assert!(volume_fits(&pv(terms("In", &["a", "b"]), json!({})), &node));
        assert!(!volume_fits(&pv(terms("In", &["b"]), json!({})), &node));
        assert!(!volume_fits(&pv(terms("NotIn", &["a"]), json!({})), &node));
        assert!(volume_fits(
            &pv(json!(null), json!({LEGACY_ZONE_LABEL: "b__a"})),
            &node
        ));
        assert!(!volume_fits(
            &pv(json!(null), json!({LEGACY_ZONE_LABEL: "b"})),
            &node
        ));
        let by_name = json!({"required": {"nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["n2"]}]}, {"matchExpressions": [
            {"key": ZONE_LABEL, "operator": "Exists"}]}]}});
        assert!(
            volume_fits(&pv(by_name, json!({})), &node),
            "terms are ORed"
        );
        let empty = json!({"required": {"nodeSelectorTerms": [{}]}});
        assert!(
            !volume_fits(&pv(empty, json!({})), &node),
            "an empty term matches nothing"
        );
    }
}
