//! kube-scheduler's volume filters over a [`ClusterSnapshot`]: VolumeRestrictions
//! (`ReadWriteOncePod`), NodeVolumeLimits (CSI attach limits), VolumeBinding (bound volumes'
//! node affinity; unbound `WaitForFirstConsumer` claims bindable or provisionable on the node)
//! and VolumeZone (bound volumes' zone labels), with the scheduler's reasons.
//!
//! Only pods with claim or inline CSI volumes ([`Pod::volume_refs`]) reach this module: for every
//! other pod the filters are one emptiness test in [`ClusterSnapshot::check`]. It reads the
//! snapshot's storage objects and pods; it never mutates anything and never panics.
//!
//! Known simplifications: the legacy in-tree volume limits and disk conflicts of
//! VolumeRestrictions (inline GCE PD, AWS EBS, RBD, iSCSI) are not modelled.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::scheduling::predicates::{Unfit, node_selector_matches};
use crate::scheduling::snapshot::{ClusterSnapshot, NodeInfo};
use autoscaler_model::HOSTNAME_LABEL;
use autoscaler_model::Node;
use autoscaler_model::Sym;
use autoscaler_model::{
    AccessModes, BindingMode, Claim, PersistentVolume, Storage, VOLUME_TOPOLOGY_LABELS, csi_of,
};
use autoscaler_model::{NodeSelector, NodeSelectorOp};
use autoscaler_model::{Pod, VolumeRef};

/// A volume as NodeVolumeLimits counts it: the driver, then an identity unique among that
/// driver's volumes (a bound volume's handle with no namespace, a claim's namespace and name).
type Attachment = (Sym, Option<Sym>, Arc<str>);

impl ClusterSnapshot {
    /// VolumeBinding's PreFilter: every claim of the pod exists and is not being deleted, and
    /// every unbound claim waits for its first consumer. Fails for every node alike.
    pub(crate) fn check_claims(&self, pod: &Pod) -> Result<(), Unfit> {
        let storage = self.storage();
        for claim in pod_claims(pod) {
            let Some(c) = storage.claim(pod.namespace, claim) else {
                return Err(Unfit::ClaimNotFound(claim.clone()));
            };
            if c.deleting {
                return Err(Unfit::ClaimDeleting(claim.clone()));
            }
            if c.is_bound() {
                continue;
            }
            let Some(class) = c.class.as_ref() else {
                return Err(Unfit::UnboundImmediateClaims);
            };
            match storage.class(class) {
                None => return Err(Unfit::ClassNotFound(class.clone())),
                Some(sc) if sc.binding_mode == BindingMode::Immediate => {
                    return Err(Unfit::UnboundImmediateClaims);
                }
                Some(_) => {}
            }
        }
        Ok(())
    }

    /// The per-node volume filters in the scheduler's order; [`ClusterSnapshot::check_claims`]
    /// must have passed.
    pub(crate) fn check_volumes(&self, pod: &Pod, info: &NodeInfo) -> Result<(), Unfit> {
        let storage = self.storage();
        self.check_read_write_once_pod(pod)?;
        check_volume_limits(storage, pod, info)?;
        check_binding(storage, pod, &info.node)?;
        check_zone(storage, pod, &info.node)
    }

    /// The first bound volume of `pod` that only one node can reach: a `local` volume, or one
    /// whose node affinity names a single host in every term. A pod on such a volume cannot
    /// move to another node.
    pub fn pinned_volume(&self, pod: &Pod) -> Option<Arc<str>> {
        let storage = self.storage();
        pod_claims(pod)
            .filter_map(|c| bound_volume(storage, pod, c)?.ok())
            .find(|pv| pv.local || pv.node_affinity.as_ref().is_some_and(names_one_host))
            .map(|pv| pv.name.clone())
    }

    /// VolumeRestrictions: a `ReadWriteOncePod` claim may be used by one pod only, wherever.
    fn check_read_write_once_pod(&self, pod: &Pod) -> Result<(), Unfit> {
        let storage = self.storage();
        for claim in pod_claims(pod) {
            let rwop = storage
                .claim(pod.namespace, claim)
                .is_some_and(|c| c.access_modes.contains(AccessModes::RWOP));
            if rwop && self.claim_users(pod.namespace, claim) > 0 {
                return Err(Unfit::ReadWriteOncePodConflict);
            }
        }
        Ok(())
    }
}

/// The claim names of a pod's claim volumes.
fn pod_claims(pod: &Pod) -> impl Iterator<Item = &Arc<str>> + '_ {
    pod.volume_refs.iter().filter_map(|v| match v {
        VolumeRef::Claim { claim, .. } => Some(claim),
        VolumeRef::InlineCsi { .. } => None,
    })
}

/// The bound volume of a claim, if the claim exists and is bound.
fn bound_volume<'a>(
    storage: &'a Storage,
    pod: &Pod,
    claim: &str,
) -> Option<Result<&'a Arc<PersistentVolume>, Unfit>> {
    let c = storage.claim(pod.namespace, claim)?;
    let name = c.volume_name.as_ref()?;
    Some(storage.volume(name).ok_or(Unfit::VolumeNotFound))
}

/// The CSI attachments of `pod`'s volumes: bound claims by their volume's handle, unbound
/// claims by their class's provisioner (one new volume each), inline volumes per pod.
fn attachments(storage: &Storage, pod: &Pod, out: &mut SmallVec<[Attachment; 4]>) {
    for v in &pod.volume_refs {
        match v {
            VolumeRef::Claim { claim, .. } => {
                let Some(c) = storage.claim(pod.namespace, claim) else {
                    continue;
                };
                if let Some(name) = c.volume_name.as_ref() {
                    if let Some(csi) = storage.volume(name).and_then(|pv| pv.csi.as_ref()) {
                        out.push((csi.driver, None, csi.handle.clone()));
                    }
                } else if let Some(sc) = c.class.as_ref().and_then(|n| storage.class(n)) {
                    out.push((sc.provisioner, Some(pod.namespace), claim.clone()));
                }
            }
            VolumeRef::InlineCsi { driver, volume } => {
                let id = format!("{}/{}", pod.name, volume);
                out.push((*driver, Some(pod.namespace), Arc::from(id)));
            }
        }
    }
}

/// NodeVolumeLimits: for each CSI driver with an attach limit on the node, the volumes already
/// attached there plus the pod's new ones (volumes already attached count once) stay within
/// the limit. A node without a CSINode has no limits.
fn check_volume_limits(storage: &Storage, pod: &Pod, info: &NodeInfo) -> Result<(), Unfit> {
    let Some(csi) = csi_of(storage, &info.node) else {
        return Ok(());
    };
    let mut new: SmallVec<[Attachment; 4]> = SmallVec::new();
    attachments(storage, pod, &mut new);
    new.retain(|(driver, ..)| csi.limit(*driver).is_some());
    if new.is_empty() {
        return Ok(());
    }
    let mut attached: SmallVec<[Attachment; 4]> = SmallVec::new();
    for p in info.pods.iter().filter(|p| !p.volume_refs.is_empty()) {
        attachments(storage, p, &mut attached);
    }
    attached.sort_unstable();
    attached.dedup();
    new.sort_unstable();
    new.dedup();
    new.retain(|a| attached.binary_search(a).is_err());
    let mut per_driver: FxHashMap<Sym, u32> = FxHashMap::default();
    for (driver, ..) in attached.iter().chain(new.iter()) {
        *per_driver.entry(*driver).or_default() += 1;
    }
    for (driver, ..) in &new {
        let limit = csi.limit(*driver).unwrap_or(u32::MAX);
        if per_driver.get(driver).copied().unwrap_or(0) > limit {
            return Err(Unfit::MaxVolumeCount);
        }
    }
    Ok(())
}

/// VolumeBinding's Filter: a bound claim's volume must be reachable from the node; an unbound
/// (`WaitForFirstConsumer`) claim must find an available volume reachable from the node, or
/// be provisionable there.
fn check_binding(storage: &Storage, pod: &Pod, node: &Node) -> Result<(), Unfit> {
    for claim in pod_claims(pod) {
        if let Some(pv) = bound_volume(storage, pod, claim) {
            let pv = pv?;
            if !selector_allows(pv.node_affinity.as_ref(), node) {
                return Err(Unfit::VolumeNodeAffinity);
            }
            continue;
        }
        let Some(c) = storage.claim(pod.namespace, claim) else {
            continue;
        };
        check_unbound(storage, c, node)?;
    }
    Ok(())
}

/// An unbound claim on `node`: a claim with a selected node only fits that node; otherwise an
/// available volume of its class that matches, or provisioning allowed by the class's
/// topology and, when its provisioner's CSIDriver opts into capacity tracking, by a
/// CSIStorageCapacity of the class reachable from the node with room for the claim.
fn check_unbound(storage: &Storage, c: &Claim, node: &Node) -> Result<(), Unfit> {
    if c.selected_node.is_some_and(|n| n != node.name) {
        return Err(Unfit::VolumeBindConflict);
    }
    if c.selected_node.is_none() && storage.bindable(c).any(|pv| binds(c, pv, node)) {
        return Ok(());
    }
    let Some(class) = c.class.as_ref().and_then(|n| storage.class(n)) else {
        return Err(Unfit::VolumeBindConflict);
    };
    if !class.provisions() || !selector_allows(class.allowed_topologies.as_ref(), node) {
        return Err(Unfit::VolumeBindConflict);
    }
    if !storage.tracks_capacity(class.provisioner) {
        return Ok(());
    }
    let room = storage.capacities_of(&class.name).any(|cap| {
        cap.node_topology
            .as_ref()
            .is_some_and(|t| t.matches(&node.labels))
            && cap
                .maximum_volume_bytes
                .or(cap.capacity_bytes)
                .is_some_and(|b| b >= c.request_bytes)
    });
    if room {
        Ok(())
    } else {
        Err(Unfit::VolumeNoSpace)
    }
}

/// Whether the available volume `pv` can bind claim `c` on `node`: same class, enough
/// capacity, every requested access mode, reachable from the node.
fn binds(c: &Claim, pv: &PersistentVolume, node: &Node) -> bool {
    pv.class == c.class
        && pv.capacity_bytes >= c.request_bytes
        && pv.access_modes.contains(c.access_modes)
        && selector_allows(pv.node_affinity.as_ref(), node)
}

fn selector_allows(sel: Option<&NodeSelector>, node: &Node) -> bool {
    sel.is_none_or(|s| node_selector_matches(s, node))
}

/// Whether every term of `sel` requires `kubernetes.io/hostname` to be one given host.
fn names_one_host(sel: &NodeSelector) -> bool {
    !sel.terms.is_empty()
        && sel.terms.iter().all(|t| {
            t.match_expressions.iter().any(|r| {
                r.key.as_str() == HOSTNAME_LABEL
                    && r.op == NodeSelectorOp::In
                    && r.values.len() == 1
            })
        })
}

/// The GA form of a legacy zone or region label.
fn ga_label(key: &str) -> &str {
    match key {
        "failure-domain.beta.kubernetes.io/zone" => "topology.kubernetes.io/zone",
        "failure-domain.beta.kubernetes.io/region" => "topology.kubernetes.io/region",
        other => other,
    }
}

/// VolumeZone: a bound volume's zone and region labels must name the node's (the GA label
/// answers for a legacy one). A node without any zone or region label passes.
fn check_zone(storage: &Storage, pod: &Pod, node: &Node) -> Result<(), Unfit> {
    let zoned = VOLUME_TOPOLOGY_LABELS
        .iter()
        .any(|k| node.labels.get_str(k).is_some());
    if !zoned {
        return Ok(());
    }
    for claim in pod_claims(pod) {
        let Some(Ok(pv)) = bound_volume(storage, pod, claim) else {
            continue;
        };
        for (key, values) in &pv.topology_labels {
            let have = node
                .labels
                .get(*key)
                .or_else(|| Sym::lookup(ga_label(key.as_str())).and_then(|k| node.labels.get(k)));
            if !have.is_some_and(|v| values.contains(&v)) {
                return Err(Unfit::VolumeZone);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scheduling::snapshot::NodeId;
    use autoscaler_model::CsiNode;
    use autoscaler_model::ObjectStore;
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};

    /// Storage objects shared by the cases: a zonal WaitForFirstConsumer CSI class, an
    /// Immediate class, a local class without provisioner, and a few claims and volumes.
    const STORAGE: &str = r#"
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: zonal}
provisioner: ebs.csi.aws.com
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions: [{key: topology.kubernetes.io/zone, values: [a, b]}]
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: now}
provisioner: ebs.csi.aws.com
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: local}
provisioner: kubernetes.io/no-provisioner
volumeBindingMode: WaitForFirstConsumer
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: new, namespace: default}
spec: {storageClassName: zonal, accessModes: [ReadWriteOnce], resources: {requests: {storage: 10Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: immediate, namespace: default}
spec: {storageClassName: now, accessModes: [ReadWriteOnce]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: classless, namespace: default}
spec: {accessModes: [ReadWriteOnce]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: gone-class, namespace: default}
spec: {storageClassName: nope}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: dying, namespace: default, deletionTimestamp: "2026-01-01T00:00:00Z"}
spec: {storageClassName: zonal}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: in-a, namespace: default}
spec: {volumeName: pv-a, accessModes: [ReadWriteOnce]}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: orphan, namespace: default}
spec: {volumeName: pv-missing}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: legacy, namespace: default}
spec: {volumeName: pv-legacy}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: picked, namespace: default, annotations: {volume.kubernetes.io/selected-node: n-b}}
spec: {storageClassName: zonal}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: disk, namespace: default}
spec: {storageClassName: local, accessModes: [ReadWriteOnce], resources: {requests: {storage: 50Gi}}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: solo, namespace: default}
spec: {volumeName: pv-solo, accessModes: [ReadWriteOncePod]}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-a}
spec:
  capacity: {storage: 10Gi}
  claimRef: {namespace: default, name: in-a}
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-a}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [a]}]
---
apiVersion: v1
kind: PersistentVolume
metadata:
  name: pv-legacy
  labels: {failure-domain.beta.kubernetes.io/zone: a__c}
spec:
  capacity: {storage: 10Gi}
  claimRef: {namespace: default, name: legacy}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-solo}
spec:
  capacity: {storage: 1Gi}
  claimRef: {namespace: default, name: solo}
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-solo}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: local-a1}
spec:
  storageClassName: local
  capacity: {storage: 100Gi}
  accessModes: [ReadWriteOnce]
  local: {path: /mnt/disk}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n-a]}]
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: local-b1-small}
spec:
  storageClassName: local
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  local: {path: /mnt/disk}
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [n-b]}]
"#;

    fn storage(extra: &str) -> Arc<Storage> {
        let mut store = ObjectStore::new();
        store.load_yaml(STORAGE).unwrap();
        store.load_yaml(extra).unwrap();
        let (s, errors) = Storage::from_store(&store);
        assert!(errors.is_empty(), "{errors:?}");
        Arc::new(s)
    }

    /// Nodes n-a, n-b (zones a, b) and n-x (no zone label), with the given storage.
    fn snapshot(extra: &str) -> ClusterSnapshot {
        let mut s = ClusterSnapshot::new();
        s.set_storage(storage(extra));
        for (name, zone) in [("n-a", Some("a")), ("n-b", Some("b")), ("n-x", None)] {
            let mut b = NodeBuilder::new(name, 4000, 16 * GI).label("kubernetes.io/hostname", name);
            if let Some(z) = zone {
                b = b.zone(z);
            }
            s.add_node(b.arc()).unwrap();
        }
        s
    }

    fn id(s: &ClusterSnapshot, name: &str) -> NodeId {
        s.node_id(Sym::new(name)).unwrap()
    }

    /// The verdict of each node (n-a, n-b, n-x) for a pod using `claims`.
    fn verdicts(s: &ClusterSnapshot, claims: &[&str]) -> Vec<Result<(), String>> {
        let mut b = PodBuilder::new("p", 100, GI);
        for c in claims {
            b = b.claim(c);
        }
        let pod = b.build();
        ["n-a", "n-b", "n-x"]
            .iter()
            .map(|n| s.check_pod(&pod, id(s, n)).map_err(|e| e.to_string()))
            .collect()
    }

    fn all(msg: &str) -> Vec<Result<(), String>> {
        vec![Err(msg.to_string()); 3]
    }

    #[test]
    fn a_missing_or_deleted_claim_or_class_rejects_every_node() {
        let s = snapshot("");
        assert_eq!(
            verdicts(&s, &["nope"]),
            all("persistentvolumeclaim \"nope\" not found")
        );
        assert_eq!(
            verdicts(&s, &["dying"]),
            all("persistentvolumeclaim \"dying\" is being deleted")
        );
        assert_eq!(
            verdicts(&s, &["gone-class"]),
            all("storageclass.storage.k8s.io \"nope\" not found")
        );
        let e = Unfit::ClaimNotFound(Arc::from("x"));
        assert!(e.is_unresolvable() && e.plugin() == "VolumeBinding");
    }

    #[test]
    fn an_unbound_immediate_claim_waits_for_the_binder_not_a_node() {
        let s = snapshot("");
        let msg = "pod has unbound immediate PersistentVolumeClaims";
        assert_eq!(verdicts(&s, &["immediate"]), all(msg));
        assert_eq!(verdicts(&s, &["classless"]), all(msg));
    }

    #[test]
    fn the_claim_check_comes_before_the_node_filters() {
        let s = snapshot("");
        let pod = PodBuilder::new("big", 64_000, GI).claim("nope").build();
        assert_eq!(
            s.check_pod(&pod, id(&s, "n-a")).unwrap_err(),
            Unfit::ClaimNotFound(Arc::from("nope"))
        );
    }

    #[test]
    fn a_bound_volume_is_reachable_only_where_its_node_affinity_allows() {
        let s = snapshot("");
        let conflict = "node(s) had volume node affinity conflict";
        assert_eq!(
            verdicts(&s, &["in-a"]),
            vec![Ok(()), Err(conflict.into()), Err(conflict.into())]
        );
        assert_eq!(
            verdicts(&s, &["orphan"]),
            all("node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)")
        );
        assert!(Unfit::VolumeNodeAffinity.is_unresolvable());
    }

    #[test]
    fn an_unbound_wait_for_first_consumer_claim_follows_the_class_topology() {
        let s = snapshot("");
        // Allowed in zones a and b; the zone-less node matches no allowed topology term.
        assert_eq!(
            verdicts(&s, &["new"]),
            vec![
                Ok(()),
                Ok(()),
                Err("node(s) didn't find available persistent volumes to bind".into())
            ]
        );
    }

    #[test]
    fn a_claim_with_a_selected_node_only_fits_that_node() {
        let s = snapshot("");
        let v = verdicts(&s, &["picked"]);
        assert_eq!(v[1], Ok(()));
        assert_eq!(
            v[0],
            Err("node(s) didn't find available persistent volumes to bind".into())
        );
    }

    const CAPACITIES: &str = "apiVersion: storage.k8s.io/v1\nkind: CSIStorageCapacity\nmetadata: {name: a, namespace: kube-system}\n\
             storageClassName: zonal\nnodeTopology: {matchLabels: {topology.kubernetes.io/zone: a}}\ncapacity: 5Gi\n---\n\
             apiVersion: storage.k8s.io/v1\nkind: CSIStorageCapacity\nmetadata: {name: b, namespace: kube-system}\n\
             storageClassName: zonal\nnodeTopology: {matchLabels: {topology.kubernetes.io/zone: b}}\ncapacity: 1Gi\nmaximumVolumeSize: 100Gi\n";

    fn csi_driver(storage_capacity: bool) -> String {
        format!(
            "---\napiVersion: storage.k8s.io/v1\nkind: CSIDriver\nmetadata: {{name: ebs.csi.aws.com}}\n\
             spec: {{storageCapacity: {storage_capacity}}}\n"
        )
    }

    #[test]
    fn tracked_capacity_limits_provisioning_to_segments_with_room() {
        let s = snapshot(&format!("{CAPACITIES}{}", csi_driver(true)));
        let v = verdicts(&s, &["new"]);
        assert_eq!(v[0], Err("node(s) did not have enough free storage".into()));
        // maximumVolumeSize, when set, is what a new volume is compared with.
        assert_eq!(v[1], Ok(()));
    }

    #[test]
    fn capacity_counts_only_for_a_driver_that_opts_in() {
        // The same capacities, but the CSIDriver does not opt in, or there is none: the
        // scheduler does not look at them.
        for extra in [
            format!("{CAPACITIES}{}", csi_driver(false)),
            CAPACITIES.into(),
        ] {
            let s = snapshot(&extra);
            assert_eq!(verdicts(&s, &["new"])[..2], [Ok(()), Ok(())], "{extra}");
        }
        // Opted in, but no capacity published yet: no node has room.
        let s = snapshot(&csi_driver(true));
        let full = Err("node(s) did not have enough free storage".to_string());
        assert_eq!(verdicts(&s, &["new"])[..2], [full.clone(), full]);
    }

    #[test]
    fn a_claim_of_a_class_without_provisioner_binds_an_available_volume_that_fits() {
        let s = snapshot("");
        // Only n-a has a local volume large enough; n-b's is too small.
        let bind = "node(s) didn't find available persistent volumes to bind";
        assert_eq!(
            verdicts(&s, &["disk"]),
            vec![Ok(()), Err(bind.into()), Err(bind.into())]
        );
    }

    #[test]
    fn volume_zone_labels_must_name_the_node_zone() {
        let s = snapshot("");
        // Legacy beta label with two zones; the nodes carry the GA label. A node without any
        // zone or region label passes.
        let v = verdicts(&s, &["legacy"]);
        assert_eq!(
            v,
            vec![
                Ok(()),
                Err("node(s) had no available volume zone".into()),
                Ok(())
            ]
        );
        assert_eq!(Unfit::VolumeZone.plugin(), "VolumeZone");
    }

    #[test]
    fn csi_attach_limits_count_distinct_volumes_already_on_the_node() {
        let extra = "apiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {name: n-a}\n\
             spec: {drivers: [{name: ebs.csi.aws.com, nodeID: i-a, allocatable: {count: 2}}]}\n---\n\
             apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: other, namespace: default}\n\
             spec: {storageClassName: zonal}\n";
        let mut s = snapshot(extra);
        let a = id(&s, "n-a");
        // Two pods share vol-a (one attachment), a third brings a new volume: 2 of 2.
        for (name, claim) in [("u1", "in-a"), ("u2", "in-a"), ("u3", "other")] {
            let p = PodBuilder::new(name, 100, GI).claim(claim).node_name("n-a");
            s.add_pod(p.arc(), a).unwrap();
        }
        assert_eq!(
            verdicts(&s, &["new"])[0],
            Err("node(s) exceed max volume count".into())
        );
        // A volume already attached does not count again.
        assert_eq!(verdicts(&s, &["in-a"])[0], Ok(()));
        assert!(!Unfit::MaxVolumeCount.is_unresolvable());
        // A node that carries its own limits (a template) is held to them.
        let mut t = NodeBuilder::new("t", 4000, 16 * GI).zone("a").build();
        t.csi = Some(Arc::new(
            CsiNode::from_annotation("ebs.csi.aws.com=0").unwrap(),
        ));
        let t = s.add_node(Arc::new(t)).unwrap();
        let pod = PodBuilder::new("p", 100, GI).claim("new").build();
        assert_eq!(s.check_pod(&pod, t), Err(Unfit::MaxVolumeCount));
        // Nodes without CSINode have no limit.
        assert_eq!(verdicts(&s, &["new"])[1], Ok(()));
    }

    #[test]
    fn a_read_write_once_pod_claim_in_use_rejects_every_node_until_released() {
        let mut s = snapshot("");
        let a = id(&s, "n-a");
        assert_eq!(verdicts(&s, &["solo"]), vec![Ok(()), Ok(()), Ok(())]);
        let user = PodBuilder::new("user", 100, GI)
            .claim("solo")
            .node_name("n-a");
        s.fork();
        s.add_pod(user.arc(), a).unwrap();
        let msg = "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode";
        assert_eq!(verdicts(&s, &["solo"]), all(msg));
        s.revert().unwrap();
        assert_eq!(verdicts(&s, &["solo"]), vec![Ok(()), Ok(()), Ok(())]);
        assert_eq!(s.claim_users(Sym::new("default"), &Arc::from("solo")), 0);
    }

    #[test]
    fn a_local_or_single_host_volume_pins_its_pod() {
        let s = snapshot("");
        let pod = |claim: &str| PodBuilder::new("p", 100, GI).claim(claim).build();
        // A zonal volume does not pin; a local one does (once bound).
        assert_eq!(s.pinned_volume(&pod("in-a")), None);
        assert_eq!(s.pinned_volume(&pod("disk")), None);
        let bound = snapshot(
            "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: mine, namespace: default}\n\
             spec: {volumeName: local-a1}\n",
        );
        assert_eq!(
            bound.pinned_volume(&pod("mine")).as_deref(),
            Some("local-a1")
        );
    }

    #[test]
    fn pods_without_volumes_ignore_storage() {
        let s = snapshot("");
        let pod = PodBuilder::new("plain", 100, GI).build();
        for n in ["n-a", "n-b", "n-x"] {
            assert_eq!(s.check_pod(&pod, id(&s, n)), Ok(()));
        }
    }
}
