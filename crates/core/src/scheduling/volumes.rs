//! kube-scheduler's volume filters over a [`ClusterSnapshot`]: VolumeRestrictions
//! (`ReadWriteOncePod`), NodeVolumeLimits (CSI attach limits), VolumeBinding (bound volumes'
//! node affinity; unbound `WaitForFirstConsumer` claims bindable or provisionable on the node)
//! and VolumeZone (bound volumes' zone labels), with the scheduler's reasons.
//!
//! Only pods with claim or inline CSI volumes ([`Pod::volume_refs`]) reach this module: for every
//! other pod the filters are one emptiness test in [`ClusterSnapshot::check`]. It reads the
//! snapshot's storage objects and pods; it never mutates anything and never panics.
//!
//! Known simplifications: storage capacity counts as tracked for a class when any
//! CSIStorageCapacity of that class exists (the scheduler reads the CSIDriver's
//! `storageCapacity` flag instead); the legacy in-tree volume limits and disk conflicts of
//! VolumeRestrictions (inline GCE PD, AWS EBS, RBD, iSCSI) are not modelled.

use std::sync::Arc;

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::model::intern::Sym;
use crate::model::node::Node;
use crate::model::pod::{Pod, VolumeRef};
use crate::model::storage::{
    AccessModes, BindingMode, Claim, PersistentVolume, Storage, VOLUME_TOPOLOGY_LABELS, csi_of,
};
use crate::scheduling::affinity::NodeSelector;
use crate::scheduling::predicates::{Unfit, node_selector_matches};
use crate::scheduling::snapshot::{ClusterSnapshot, NodeInfo};

/// A volume as NodeVolumeLimits counts it: the driver and an identity unique among that
/// driver's volumes.
type Attachment = (Sym, Arc<str>);

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
                        out.push((csi.driver, csi.handle.clone()));
                    }
                } else if let Some(sc) = c.class.as_ref().and_then(|n| storage.class(n)) {
                    let id = format!("{}/{}", pod.namespace, claim);
                    out.push((sc.provisioner, Arc::from(id)));
                }
            }
            VolumeRef::InlineCsi { driver, volume } => {
                let id = format!("{}/{}/{}", pod.namespace, pod.name, volume);
                out.push((*driver, Arc::from(id)));
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
    new.retain(|(driver, _)| csi.limit(*driver).is_some());
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
    for (driver, _) in attached.iter().chain(new.iter()) {
        *per_driver.entry(*driver).or_default() += 1;
    }
    for (driver, _) in &new {
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
/// topology and tracked capacity.
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
    let mut tracked = storage.capacities_of(&class.name).peekable();
    if tracked.peek().is_none() {
        return Ok(());
    }
    let room = tracked.any(|cap| {
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
