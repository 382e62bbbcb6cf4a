//! Dynamic Resource Allocation in the world: a DRA driver per node group, the resource claim
//! controller and the scheduler's allocation, as a cluster serving `resource.k8s.io/v1` runs them.
//!
//! - The driver's kubelet plugin publishes a node's devices as one ResourceSlice (its own pool,
//!   named after the node, generation 1) some time after the node joins Ready; the slice is
//!   owned by the Node and goes with it.
//! - The resource claim controller makes a pod's claims from its ResourceClaimTemplates when the
//!   pod is created (`<pod>-<entry>-<suffix>`, owned by the pod, named in the pod's
//!   `status.resourceClaimStatuses`), and when a pod ends drops it from `reservedFor`, deletes
//!   the claims made for it and deallocates a claim nobody is reserved for any more.
//! - At bind ([`reserve`]) the pod's unallocated claims are allocated on the chosen node by the
//!   core's structured allocator search (`autoscaler_core::allocate_devices`: devices in slice
//!   order, backtracking, `matchAttribute` constraints kept), the node's name as the
//!   allocation's node selector, and every claim is reserved for the pod.
//!
//! It decides device allocation and claim life cycles only; feasibility is the core's filter
//! (the scheduler binds only where it said the claims fit). It must never allocate a device twice
//! nor a device the node does not publish ([`violations`] checks both over the stored claims),
//! and never iterate a hash map where the order could leak into results. Not modelled: slices
//! reached through a node selector (only `nodeName` and `allNodes` slices are allocated from),
//! device taints, admin access requests sharing devices.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use autoscaler_core::{DeviceSource, MAX_SEARCH_STEPS, SearchError, allocate_devices};
use autoscaler_model::{
    ClaimSpec, DRA_GROUP, DeviceId, Dra, Pod, PodClaimSource, ResourceSlice, SliceReach, Sym,
};
use serde_json::{Value, json};

use crate::cluster::Cluster;
use crate::objects::key;
use crate::queue::{Event, NsName};
use crate::time::SimTime;

/// The annotation the resource claim controller puts on a claim made from a template: the
/// pod's entry it was made for.
const POD_CLAIM_NAME: &str = "resource.kubernetes.io/pod-claim-name";

/// The finalizer kube-scheduler puts on a claim it allocates.
const DELETE_PROTECTION: &str = "resource.kubernetes.io/delete-protection";

/// The longest base of a generated claim name (`<pod>-<entry>`) before its random suffix, as
/// the resource claim controller truncates it.
const MAX_BASE: usize = 57;

/// The DRA driver of a node group's nodes: which devices each node publishes, and when.
#[derive(Clone, Debug, PartialEq)]
pub struct DraDriverSpec {
    /// The driver's name (`spec.driver` of its slices, e.g. `gpu.nvidia.com`).
    pub driver: String,
    /// How long after the node joins Ready its slice is published, in ms.
    pub delay_ms: SimTime,
    /// The devices of one node, as the API writes them in `spec.devices`.
    pub devices: Vec<Value>,
}

/// What the driver knows of one node.
#[derive(Clone, Debug)]
struct NodeDra {
    /// The node's uid (a node of the same name made later is another node).
    uid: String,
    /// The slice published for it, once published.
    slice: Option<String>,
}

/// The DRA controllers' own state.
#[derive(Debug, Default)]
pub(crate) struct DraDriver {
    /// Drivers by node group (MachineDeployment name).
    groups: BTreeMap<String, DraDriverSpec>,
    /// Nodes of groups with a driver, by name.
    nodes: BTreeMap<String, NodeDra>,
    /// The node generation last looked at.
    node_gen: Option<u64>,
    /// Pods whose claims could not be made yet (their template did not exist), retried on
    /// every scheduler tick.
    waiting: BTreeSet<NsName>,
}

impl DraDriver {
    /// Gives the nodes of group `md` a driver.
    pub(crate) fn set_group(&mut self, md: &str, spec: DraDriverSpec) {
        self.groups.insert(md.to_string(), spec);
        self.node_gen = None;
    }

    /// Catches up after a change: claims of new pods, claims of ended pods, slices of new and
    /// gone nodes.
    pub(crate) fn reconcile(&mut self, c: &mut Cluster) {
        let created = std::mem::take(&mut c.claim_pods_created);
        let ended = std::mem::take(&mut c.claim_pods_ended);
        let mut changed = false;
        for id in created {
            changed |= self.make_claims(c, &id);
        }
        for (id, uid, view) in ended {
            changed |= release(c, &id, &uid, &view, true);
        }
        if self.node_gen != Some(c.node_gen) {
            self.node_gen = Some(c.node_gen);
            changed |= self.sync_nodes(c);
        }
        if changed {
            dra_changed(c);
        }
    }

    /// The scheduler's tick: new pods get their claims, and pods whose templates were missing
    /// get theirs if the templates exist now.
    pub(crate) fn tick(&mut self, c: &mut Cluster) {
        // Pods created by an API call since the last event get their claims before the pass.
        self.reconcile(c);
        if self.waiting.is_empty() {
            return;
        }
        let mut changed = false;
        for id in std::mem::take(&mut self.waiting) {
            changed |= self.make_claims(c, &id);
        }
        if changed {
            dra_changed(c);
        }
    }

    /// Makes the claims of pod `id` from its templates (those not made yet); whether any was.
    fn make_claims(&mut self, c: &mut Cluster, id: &NsName) -> bool {
        let Some(st) = c.pods.get(id) else {
            return false;
        };
        if st.node.is_some() {
            return false;
        }
        let uid = st.uid.clone();
        let view = st.view.clone();
        let mut made = Vec::new();
        let mut missing = false;
        for pc in view.resource_claims.iter() {
            let PodClaimSource::Template {
                template,
                generated: None,
            } = &pc.source
            else {
                continue;
            };
            let tk = key(DRA_GROUP, "ResourceClaimTemplate", &id.0, template);
            let Some(spec) = c.store.get(&tk).map(|t| t["spec"]["spec"].clone()) else {
                missing = true;
                continue;
            };
            let name = claim_name(c, id, &pc.name);
            let claim = json!({
                "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": id.0,
                    "annotations": {POD_CLAIM_NAME: &*pc.name},
                    "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": id.1,
                        "uid": uid, "controller": true, "blockOwnerDeletion": true}]},
                "spec": spec,
            });
            if c.put(claim).is_ok() {
                made.push((pc.name.to_string(), name));
            }
        }
        if missing {
            self.waiting.insert(id.clone());
        }
        if made.is_empty() {
            return false;
        }
        let pk = key("", "Pod", &id.0, &id.1);
        c.store.edit(&pk, c.now, |obj| {
            let mut statuses = obj
                .pointer("/status/resourceClaimStatuses")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (entry, claim) in &made {
                statuses.push(json!({"name": entry, "resourceClaimName": claim}));
            }
            obj["status"]["resourceClaimStatuses"] = Value::Array(statuses);
            true
        });
        c.refresh_pod_view(id);
        true
    }

    /// Schedules the slices of nodes of groups with a driver that joined, and deletes those of
    /// nodes that went; whether any slice was deleted.
    fn sync_nodes(&mut self, c: &mut Cluster) -> bool {
        if self.groups.is_empty() && self.nodes.is_empty() {
            return false;
        }
        let mut changed = false;
        let gone: Vec<String> = (self.nodes.iter())
            .filter(|(n, d)| c.uid_of(&key("", "Node", "", n)) != d.uid)
            .map(|(n, _)| n.clone())
            .collect();
        for n in gone {
            if let Some(NodeDra {
                slice: Some(slice), ..
            }) = self.nodes.remove(&n)
            {
                c.store
                    .delete(&key(DRA_GROUP, "ResourceSlice", "", &slice), c.now);
                changed = true;
            }
        }
        let names: Vec<String> = c
            .nodes
            .keys()
            .filter(|n| !self.nodes.contains_key(*n))
            .cloned()
            .collect();
        for n in names {
            let Some(spec) = group_of(c, &n).and_then(|g| self.groups.get(&g)) else {
                continue;
            };
            let uid = c.uid_of(&key("", "Node", "", &n));
            c.schedule(
                c.now + spec.delay_ms,
                Event::DraPublish {
                    node: n.clone(),
                    uid: uid.clone(),
                },
            );
            self.nodes.insert(n, NodeDra { uid, slice: None });
        }
        changed
    }

    /// The driver's kubelet plugin on node `name` (uid `uid`) publishes its slice; nothing if
    /// the node is gone or replaced.
    pub(crate) fn publish(&mut self, c: &mut Cluster, name: &str, uid: &str) {
        let Some(node) = self.nodes.get(name) else {
            return;
        };
        if node.uid != uid || node.slice.is_some() || c.uid_of(&key("", "Node", "", name)) != uid {
            return;
        }
        let Some(spec) = group_of(c, name).and_then(|g| self.groups.get(&g)) else {
            return;
        };
        let slice = format!("{name}-{}-{}", spec.driver, c.suffix());
        let obj = json!({
            "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": slice, "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid, "controller": true}]},
            "spec": {"driver": spec.driver, "nodeName": name,
                "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                "devices": spec.devices},
        });
        if c.put(obj).is_ok() {
            if let Some(n) = self.nodes.get_mut(name) {
                n.slice = Some(slice);
            }
            dra_changed(c);
        }
    }
}

/// The name of the claim made for entry `entry` of pod `pod`: `<pod>-<entry>-<suffix>`, the
/// base truncated as the resource claim controller does.
fn claim_name(c: &mut Cluster, (ns, pod): &NsName, entry: &str) -> String {
    let cut = |s: &str, n: usize| -> String { s.chars().take(n).collect() };
    let base = if pod.len() + 1 + entry.len() > MAX_BASE {
        format!("{}-{}", cut(pod, 28), cut(entry, 28))
    } else {
        format!("{pod}-{entry}")
    };
    loop {
        let name = format!("{base}-{}", c.suffix());
        if c.store
            .get(&key(DRA_GROUP, "ResourceClaim", ns, &name))
            .is_none()
        {
            return name;
        }
    }
}

/// The node group (MachineDeployment name) of a node made by the machine controller.
fn group_of(c: &Cluster, node: &str) -> Option<String> {
    let (ns, machine) = c.nodes.get(node)?.machine.clone()?;
    let m = c
        .store
        .get(&key(crate::machines::CAPI_GROUP, "Machine", &ns, &machine))?;
    m.pointer("/metadata/labels/cluster.x-k8s.io~1deployment-name")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The DRA objects changed: the scheduler's snapshot gets them as stored now, and its per-node
/// verdicts are stale.
pub(crate) fn dra_changed(c: &mut Cluster) {
    let (dra, _) = Dra::from_store(c.store.objects());
    let mut storage = (**c.snapshot.storage()).clone();
    storage.set_dra(Arc::new(dra));
    c.snapshot.set_storage(Arc::new(storage));
    c.sched_epoch += 1;
    let ids: Vec<_> = c.nodes.values().map(|n| n.id).collect();
    for id in ids {
        c.touch_node(id);
    }
}

/// The claim keys of a pod: namespace and name of each claim it uses, each once.
fn claims_of(pod: &Pod) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for pc in pod.resource_claims.iter() {
        let name = pc.claim_name(&pod.name).to_string();
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// Why the world's scheduler could not reserve a pod's claims on a node.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ReserveError {
    /// A claim does not exist (yet).
    #[error("resourceclaim {0} not found")]
    ClaimNotFound(String),
    /// The claims cannot all be allocated from the node's free devices.
    #[error("cannot allocate all claims")]
    CannotAllocate,
    /// The allocator stopped with an error (a selector failed, its search gave up, a claim's
    /// constraint cannot hold).
    #[error("{0}")]
    Allocation(String),
}

/// kube-scheduler's Reserve and PreBind for pod `id` on node `node`: its unallocated claims are
/// allocated from the node's free devices and every claim is reserved for the pod, written to
/// the claims. Nothing is written if any claim cannot be.
pub(crate) fn reserve(c: &mut Cluster, id: &NsName, node: &str) -> Result<(), ReserveError> {
    let Some(st) = c.pods.get(id) else {
        return Ok(());
    };
    if st.view.resource_claims.is_empty() {
        return Ok(());
    }
    let (view, uid) = (st.view.clone(), st.uid.clone());
    let dra = c.snapshot.storage().dra().clone();
    let ns = Sym::new(&id.0);
    let slices: Vec<&Arc<ResourceSlice>> = (dra.node_slices(Sym::new(node)).iter())
        .chain(
            dra.shared_slices()
                .iter()
                .filter(|s| s.reach == SliceReach::AllNodes),
        )
        .collect();
    let mut writes: Vec<(String, Option<Value>)> = Vec::new();
    let mut specs: Vec<&ClaimSpec> = Vec::new();
    for name in claims_of(&view) {
        let claim = dra
            .claim(ns, &Arc::from(name.as_str()))
            .ok_or_else(|| ReserveError::ClaimNotFound(name.clone()))?;
        if claim.allocation.is_some() {
            writes.push((name, None));
        } else {
            specs.push(&claim.spec);
            writes.push((name, Some(Value::Null)));
        }
    }
    // The pod's unallocated claims together, as the scheduler's allocator takes them.
    let sources: Vec<DeviceSource<'_>> = (slices.iter())
        .map(|s| DeviceSource {
            slice: s,
            node: None,
        })
        .collect();
    let in_use = |id: &DeviceId| dra.is_allocated(id);
    let picks = allocate_devices(&dra, &specs, &sources, &in_use, MAX_SEARCH_STEPS).map_err(
        |e| match e {
            SearchError::NoFit => ReserveError::CannotAllocate,
            e => ReserveError::Allocation(e.to_string()),
        },
    )?;
    let mut picks = picks.into_iter();
    for (_, results) in writes.iter_mut().filter(|w| w.1.is_some()) {
        let list: Vec<Value> = (picks.next().unwrap_or_default().into_iter())
            .map(|p| {
                let id = sources[p.source].id(p.device);
                let mut r = json!({"request": &*p.request, "driver": id.driver.as_str(),
                    "pool": &*id.pool, "device": &*id.device});
                if p.admin_access {
                    r["adminAccess"] = json!(true);
                }
                r
            })
            .collect();
        *results = Some(Value::Array(list));
    }
    for (name, results) in writes {
        let k = key(DRA_GROUP, "ResourceClaim", &id.0, &name);
        let pod_ref = json!({"resource": "pods", "name": id.1, "uid": uid});
        c.store.edit(&k, c.now, |obj| {
            if let Some(results) = results {
                obj["status"]["allocation"] = json!({
                    "devices": {"results": results},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [node]}]}]},
                });
                let mut fin = obj
                    .pointer("/metadata/finalizers")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                if !fin.iter().any(|f| f == DELETE_PROTECTION) {
                    fin.push(json!(DELETE_PROTECTION));
                }
                obj["metadata"]["finalizers"] = Value::Array(fin);
            }
            let mut reserved = obj
                .pointer("/status/reservedFor")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            if !reserved.iter().any(|r| r["uid"] == pod_ref["uid"]) {
                reserved.push(pod_ref.clone());
            }
            obj["status"]["reservedFor"] = Value::Array(reserved);
            true
        });
    }
    dra_changed(c);
    debug_assert_eq!(violations(c.store.objects()), Vec::<String>::new());
    Ok(())
}

/// Pod `id` (uid `uid`, model view `view`) no longer runs: each of its claims drops it from
/// `reservedFor`, a claim made for it is deleted (`ended`), a claim reserved for nobody is
/// deallocated. Whether any claim changed.
pub(crate) fn release(c: &mut Cluster, id: &NsName, uid: &str, view: &Pod, ended: bool) -> bool {
    let mut changed = false;
    for name in claims_of(view) {
        let k = key(DRA_GROUP, "ResourceClaim", &id.0, &name);
        let Some(obj) = c.store.get(&k) else {
            continue;
        };
        let owned = ended
            && obj
                .pointer("/metadata/ownerReferences")
                .and_then(Value::as_array)
                .is_some_and(|refs| {
                    refs.iter()
                        .any(|r| r["kind"] == "Pod" && r["uid"] == uid && r["controller"] == true)
                });
        if owned {
            c.store.delete(&k, c.now);
            changed = true;
            continue;
        }
        changed |= c.store.edit(&k, c.now, |obj| {
            let before = obj["status"].clone();
            if let Some(r) = obj["status"]["reservedFor"].as_array_mut() {
                r.retain(|r| r["uid"] != uid);
            }
            let nobody = obj["status"]["reservedFor"]
                .as_array()
                .is_none_or(Vec::is_empty);
            if nobody && let Some(status) = obj["status"].as_object_mut() {
                status.remove("allocation");
                status.remove("reservedFor");
                if let Some(fin) = obj["metadata"]["finalizers"].as_array_mut() {
                    fin.retain(|f| f != DELETE_PROTECTION);
                }
            }
            obj["status"] != before
        });
    }
    changed
}

/// What breaks the DRA invariants in `store`: a device allocated (exclusively) by two claims,
/// or allocated although no slice of the claim's node publishes it. Empty when all hold.
pub fn violations(store: &autoscaler_model::ObjectStore) -> Vec<String> {
    let mut out = Vec::new();
    // (driver, pool, device) -> nodes of the slices publishing it
    let mut published: BTreeMap<(String, String, String), Vec<Option<String>>> = BTreeMap::new();
    for (_, s) in store.list(DRA_GROUP, "ResourceSlice") {
        let text = |p: &str| {
            s.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string()
        };
        let node = s.pointer("/spec/nodeName").and_then(Value::as_str);
        for d in s
            .pointer("/spec/devices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let name = d["name"].as_str().unwrap_or("").to_string();
            published
                .entry((text("/spec/driver"), text("/spec/pool/name"), name))
                .or_default()
                .push(node.map(str::to_string));
        }
    }
    let mut owner: BTreeMap<(String, String, String), String> = BTreeMap::new();
    for (k, claim) in store.list(DRA_GROUP, "ResourceClaim") {
        let Some(a) = claim.pointer("/status/allocation") else {
            continue;
        };
        let node = a
            .pointer("/nodeSelector/nodeSelectorTerms/0/matchFields/0/values/0")
            .and_then(Value::as_str);
        for r in a
            .pointer("/devices/results")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let text = |f: &str| r[f].as_str().unwrap_or("").to_string();
            let dev = (text("driver"), text("pool"), text("device"));
            let reached = published
                .get(&dev)
                .is_some_and(|nodes| nodes.iter().any(|n| n.is_none() || n.as_deref() == node));
            if !reached {
                out.push(format!("{k}: device {dev:?} is not published for its node"));
            }
            if r["adminAccess"] == true {
                continue;
            }
            if let Some(other) = owner.insert(dev.clone(), k.to_string()) {
                out.push(format!("device {dev:?} is allocated to {other} and {k}"));
            }
        }
    }
    out
}

/// Devices allocated (not for admin access) by the stored claims, per driver: what the pods
/// holding those claims take of the nodes' devices, as the report's fluid bound counts it.
pub(crate) fn allocated_per_driver(store: &autoscaler_model::ObjectStore) -> BTreeMap<String, i64> {
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    for (_, claim) in store.list(DRA_GROUP, "ResourceClaim") {
        for r in claim
            .pointer("/status/allocation/devices/results")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if r["adminAccess"] == true {
                continue;
            }
            if let Some(driver) = r["driver"].as_str() {
                *out.entry(driver.to_string()).or_default() += 1;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::*;

    const CLASS: &str = "gpu.example.com";

    fn dra_objects(w: &mut World) {
        w.apply(json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.example.com'"}}]}}))
            .unwrap();
        for (name, count) in [("one-gpu", 1), ("three-gpus", 3)] {
            w.apply(
                json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": CLASS, "count": count}}]}}}}),
            )
            .unwrap();
        }
    }

    /// A world with one GPU node (after 10 s) whose driver publishes 4 devices 30 s later.
    fn gpu_world() -> World {
        let mut w = World::new(WorldConfig {
            default_delay: ProvisioningDelay {
                min_ms: 10_000,
                max_ms: 10_000,
            },
            ..WorldConfig::default()
        });
        dra_objects(&mut w);
        let devices = (0..4)
            .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"index": {"int": i}}}))
            .collect();
        w.set_group_dra(
            "gpu",
            DraDriverSpec {
                driver: CLASS.into(),
                delay_ms: 30_000,
                devices,
            },
        );
        w.add_node_group(&group("gpu", 1)).unwrap();
        w
    }

    fn job(name: &str, template: &str, pods: u32) -> JobSpec {
        let mut t = PodTemplate::new()
            .requests("100m", "128Mi")
            .label("app", name);
        t.spec["resourceClaims"] = json!([{"name": "gpu", "resourceClaimTemplateName": template}]);
        JobSpec {
            namespace: "default".into(),
            name: name.into(),
            template: t,
            completions: pods,
            parallelism: pods,
            duration_ms: 60_000,
        }
    }

    fn claims(w: &World) -> Vec<Value> {
        w.objects()
            .list(DRA_GROUP, "ResourceClaim")
            .map(|(_, v)| (**v).clone())
            .collect()
    }

    fn pending_message(w: &World) -> Vec<String> {
        w.objects()
            .list("", "Pod")
            .filter(|(_, p)| p["spec"]["nodeName"].is_null())
            .filter_map(|(_, p)| {
                p.pointer("/status/conditions/0/message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect()
    }

    #[test]
    fn claims_are_made_allocated_at_bind_and_freed_when_their_pods_end() {
        let mut w = gpu_world();
        w.add_job(job("train", "one-gpu", 2)).unwrap();
        w.add_job(job("big", "three-gpus", 1)).unwrap();
        w.step_until(1);
        // The controller made one claim per pod, owned by it and named in its status.
        let made = claims(&w);
        assert_eq!(made.len(), 3);
        for c in &made {
            let name = c["metadata"]["name"].as_str().unwrap();
            let pod = c["metadata"]["ownerReferences"][0]["name"]
                .as_str()
                .unwrap();
            assert!(name.starts_with(&format!("{pod}-gpu-")), "{name}");
            let p = get(&w, "", "Pod", "default", pod).unwrap();
            assert_eq!(
                p["status"]["resourceClaimStatuses"][0]["resourceClaimName"],
                name
            );
        }
        // The node joins at 10 s without devices: the pods wait with the scheduler's reason.
        w.step_until(20_000);
        assert_eq!(w.node_names().len(), 1);
        assert!(
            w.objects()
                .list(DRA_GROUP, "ResourceSlice")
                .next()
                .is_none()
        );
        let msgs = pending_message(&w);
        assert_eq!(msgs.len(), 3, "{msgs:?}");
        assert!(
            msgs.iter()
                .all(|m| m.contains("cannot allocate all claims")),
            "{msgs:?}"
        );
        // At 40 s the slice is out: the one-GPU pods come first in the queue and take two of
        // its four devices; the three-GPU pod waits.
        w.step_until(42_000);
        assert_eq!(w.objects().list(DRA_GROUP, "ResourceSlice").count(), 1);
        let bound = |w: &World| -> Vec<String> {
            (w.live_pods().into_iter())
                .filter(|p| p.2.is_some())
                .map(|p| p.1)
                .collect()
        };
        let allocated = |w: &World| -> usize {
            claims(w)
                .iter()
                .filter_map(|c| c.pointer("/status/allocation/devices/results"))
                .map(|r| r.as_array().unwrap().len())
                .sum()
        };
        assert_eq!(bound(&w).len(), 2, "{:?}", bound(&w));
        assert!(bound(&w).iter().all(|p| p.starts_with("train-")));
        assert_eq!(allocated(&w), 2);
        let msgs = pending_message(&w);
        assert!(
            msgs.len() == 1 && msgs[0].contains("cannot allocate all claims"),
            "{msgs:?}"
        );
        for c in claims(&w)
            .iter()
            .filter(|c| c["status"]["allocation"].is_object())
        {
            let pod = &c["metadata"]["ownerReferences"][0]["name"];
            assert_eq!(c["status"]["reservedFor"][0]["name"], *pod);
            assert_eq!(
                c["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]
                    ["values"][0],
                w.node_names()[0].as_str()
            );
        }
        assert_eq!(w.dra_violations(), Vec::<String>::new());
        // The one-GPU pods end at 101 s: their claims go, and the three-GPU pod gets three of
        // the freed devices.
        w.step_until(103_000);
        assert_eq!(claims(&w).len(), 1);
        assert_eq!(bound(&w).len(), 1);
        assert_eq!(allocated(&w), 3);
        assert_eq!(w.pending_count(), 0);
        assert_eq!(w.dra_violations(), Vec::<String>::new());
        w.step_until(200_000);
        assert!(claims(&w).is_empty(), "every claim went with its pod");
        // The node goes: its slice goes with it.
        let node = w.node_names()[0].clone();
        w.delete_node(&node).unwrap();
        w.step_until(201_000);
        assert!(
            w.objects()
                .list(DRA_GROUP, "ResourceSlice")
                .next()
                .is_none()
        );
    }

    /// A bare pod added through the API gets its claim before the next scheduler pass, and a
    /// pod naming a template that does not exist yet gets its claim once it does.
    /// A metrics sample counts the devices the bound pods' claims hold under the driver's
    /// name, as the report's fluid bound reads it; claims not allocated yet count nothing.
    #[test]
    fn samples_count_allocated_devices_per_driver() {
        let mut w = gpu_world();
        w.add_job(job("train", "one-gpu", 2)).unwrap();
        w.add_job(job("big", "three-gpus", 1)).unwrap();
        let devices = |w: &World| {
            let s = w.metrics().samples.last().expect("a sample");
            s.bound_requests
                .get(autoscaler_model::ResourceName::Extended(Sym::new(CLASS)))
        };
        w.step_until(20_000);
        w.sample_metrics();
        assert_eq!(devices(&w), 0);
        w.step_until(42_000);
        w.sample_metrics();
        assert_eq!(devices(&w), 2);
        w.step_until(103_000);
        w.sample_metrics();
        assert_eq!(devices(&w), 3);
    }

    #[test]
    fn bare_pods_get_their_claims_and_a_late_template_is_waited_for() {
        let mut w = gpu_world();
        w.step_until(45_000);
        let pod = |name: &str, template: &str| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": "x",
                    "resources": {"claims": [{"name": "gpu"}]}}],
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}]}})
        };
        w.add_pod(pod("bare", "one-gpu"), None).unwrap();
        w.add_pod(pod("late", "later"), None).unwrap();
        w.step_until(47_000);
        let bound =
            |w: &World, name: &str| w.live_pods().iter().any(|p| p.1 == name && p.2.is_some());
        assert!(bound(&w, "bare"));
        assert!(!bound(&w, "late"));
        assert!(pending_message(&w)[0].contains("\"later\" not found"));
        w.apply(
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "later", "namespace": "default"},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}}}}),
        )
        .unwrap();
        w.step_until(49_000);
        assert!(bound(&w, "late"));
        assert_eq!(claims(&w).len(), 2);
        assert_eq!(w.dra_violations(), Vec::<String>::new());
    }

    /// At bind, a claim's devices keep its `matchAttribute` constraint: of four GPUs on NUMA
    /// nodes 0, 1, 0, 1, each pod's pair shares one NUMA node.
    #[test]
    fn bind_keeps_match_attribute_constraints() {
        let mut w = gpu_world();
        let devices = (0..4)
            .map(|i| json!({"name": format!("gpu-{i}"), "attributes": {"numa": {"int": i % 2}}}))
            .collect();
        w.set_group_dra(
            "gpu",
            DraDriverSpec {
                driver: CLASS.into(),
                delay_ms: 30_000,
                devices,
            },
        );
        w.apply(
            json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "numa-pair", "namespace": "default"},
            "spec": {"spec": {"devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS, "count": 2}}],
                "constraints": [{"matchAttribute": "gpu.example.com/numa"}]}}}}),
        )
        .unwrap();
        w.add_job(job("pairs", "numa-pair", 2)).unwrap();
        w.step_until(45_000);
        assert_eq!(w.pending_count(), 0);
        let numa = |device: &str| device["gpu-".len()..].parse::<u32>().unwrap() % 2;
        let mut pairs = Vec::new();
        for c in claims(&w) {
            let results = c
                .pointer("/status/allocation/devices/results")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let devices: Vec<String> = results
                .iter()
                .map(|r| r["device"].as_str().unwrap().to_string())
                .collect();
            assert_eq!(devices.len(), 2, "{c}");
            assert_eq!(numa(&devices[0]), numa(&devices[1]), "{devices:?}");
            pairs.push(devices);
        }
        pairs.sort();
        assert_eq!(pairs, [["gpu-0", "gpu-2"], ["gpu-1", "gpu-3"]]);
        assert_eq!(w.dra_violations(), Vec::<String>::new());
    }

    #[test]
    fn violations_name_a_device_allocated_twice_or_not_published() {
        let mut w = gpu_world();
        w.step_until(45_000);
        let node = w.node_names()[0].clone();
        let slice = w
            .objects()
            .list(DRA_GROUP, "ResourceSlice")
            .next()
            .unwrap()
            .1
            .clone();
        let pool = slice["spec"]["pool"]["name"].as_str().unwrap().to_string();
        for (name, device) in [("a", "gpu-0"), ("b", "gpu-0"), ("c", "gpu-9")] {
            w.apply(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]}},
                "status": {"allocation": {
                    "devices": {"results": [{"request": "gpu", "driver": CLASS, "pool": pool, "device": device}]},
                    "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}}))
                .unwrap();
        }
        let v = w.dra_violations();
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(
            v[0].contains("allocated to") && v[0].contains("gpu-0"),
            "{v:?}"
        );
        assert!(
            v[1].contains("gpu-9") && v[1].contains("not published"),
            "{v:?}"
        );
    }
}
