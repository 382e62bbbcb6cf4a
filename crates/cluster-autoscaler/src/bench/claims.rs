//! `bench --pvc-fraction`: gives a share of the synthetic cluster's pods a PersistentVolumeClaim,
//! so the volume filters are measured where stateful workloads are common.
//!
//! A chosen running pod gets a claim bound to a CSI volume whose node affinity is its node's
//! group (as a zonal disk is pinned to its zone); a chosen pending pod gets an unbound claim of
//! a `WaitForFirstConsumer` class. Every node has a CSINode with an attach limit. Deterministic:
//! pods are chosen evenly by index. It only builds objects; it never decides or measures.

use std::sync::Arc;

use autoscaler_model::Sym;
use autoscaler_model::VolumeRef;
use autoscaler_model::{
    AccessModes, BindingMode, Claim, CsiDriverLimit, CsiNode, CsiSource, PersistentVolume, Storage,
    StorageClass,
};
use autoscaler_model::{NodeSelector, NodeSelectorOp, NodeSelectorRequirement, NodeSelectorTerm};

use crate::bench::cluster::Cluster;

/// The CSI driver of the generated volumes.
const DRIVER: &str = "ebs.csi.aws.com";
/// Volumes a node may attach (the usual limit of a cloud instance).
const ATTACH_LIMIT: u32 = 39;
/// The class of the pending pods' claims.
const CLASS: &str = "zonal-ssd";
/// The node label naming a node's group (see `cluster`).
const GROUP_LABEL: &str = "node.cluster.x-k8s.io/group";

/// Whether pod `i` is among the `fraction` chosen (evenly spread by index).
fn chosen(i: usize, fraction: f64) -> bool {
    ((i + 1) as f64 * fraction).floor() > (i as f64 * fraction).floor()
}

/// Adds claims to `fraction` (0 to 1) of the running and of the pending pods, and the volumes,
/// class and CSINodes they need, to `cluster.storage`.
pub fn add_claims(cluster: &mut Cluster, fraction: f64) {
    if fraction <= 0.0 {
        return;
    }
    let mut storage = Storage::default();
    storage.insert_class(StorageClass {
        name: Arc::from(CLASS),
        provisioner: Sym::new(DRIVER),
        binding_mode: BindingMode::WaitForFirstConsumer,
        allowed_topologies: None,
    });
    let csi = CsiNode {
        drivers: vec![CsiDriverLimit {
            driver: Sym::new(DRIVER),
            count: Some(ATTACH_LIMIT),
        }],
    };
    for n in &cluster.nodes {
        storage.insert_csi_node(n.name, csi.clone());
    }
    let group_of: std::collections::HashMap<Sym, Sym> = cluster
        .nodes
        .iter()
        .filter_map(|n| Some((n.name, n.labels.get(Sym::new(GROUP_LABEL))?)))
        .collect();
    for (i, pod) in cluster.pods.iter_mut().enumerate() {
        if !chosen(i, fraction) {
            continue;
        }
        let claim: Arc<str> = Arc::from(format!("data-{}", pod.name));
        let mut c = Claim {
            namespace: pod.namespace,
            name: claim.clone(),
            class: Some(Arc::from(CLASS)),
            volume_name: None,
            access_modes: AccessModes::RWO,
            request_bytes: 10 << 30,
            selected_node: None,
            deleting: false,
        };
        if let Some(group) = pod.node_name.and_then(|n| group_of.get(&n)) {
            let volume: Arc<str> = Arc::from(format!("pv-{}", pod.name));
            storage.insert_volume(bound_volume(&volume, &c, *group));
            c.volume_name = Some(volume);
        }
        storage.insert_claim(c);
        let p = Arc::make_mut(pod);
        p.volume_refs.push(VolumeRef::Claim {
            claim,
            ephemeral: false,
        });
        p.update_equivalence();
    }
    cluster.storage = Arc::new(storage);
}

/// The CSI volume bound to claim `c`, reachable from the nodes of `group`.
fn bound_volume(name: &Arc<str>, c: &Claim, group: Sym) -> PersistentVolume {
    PersistentVolume {
        name: name.clone(),
        class: c.class.clone(),
        node_affinity: Some(NodeSelector {
            terms: vec![NodeSelectorTerm {
                match_expressions: vec![NodeSelectorRequirement {
                    key: Sym::new(GROUP_LABEL),
                    op: NodeSelectorOp::In,
                    values: vec![group],
                }],
                match_fields: Vec::new(),
            }],
        }),
        topology_labels: Vec::new(),
        csi: Some(CsiSource {
            driver: Sym::new(DRIVER),
            handle: name.clone(),
        }),
        local: false,
        capacity_bytes: c.request_bytes,
        access_modes: c.access_modes,
        claim_ref: Some((c.namespace, c.name.clone())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::cluster::{Shape, generate};

    #[test]
    fn a_fifth_of_the_pods_get_claims_bound_where_they_run() {
        let mut c = generate(&Shape {
            nodes: 10,
            groups: 2,
            pods: 100,
            pending: 20,
            pending_cpu_milli: 1000,
            pending_memory: 1 << 30,
            pending_owners: 2,
        })
        .unwrap();
        add_claims(&mut c, 0.2);
        let with: Vec<_> = c
            .pods
            .iter()
            .filter(|p| !p.volume_refs.is_empty())
            .collect();
        assert_eq!(with.len(), 24);
        let bound = with.iter().filter(|p| p.node_name.is_some()).count();
        assert_eq!(bound, 20);
        let s = &c.storage;
        let run = with.iter().find(|p| p.node_name.is_some()).unwrap();
        let claim = s
            .claim(run.namespace, &format!("data-{}", run.name))
            .unwrap();
        assert!(claim.is_bound());
        let pending = with.iter().find(|p| p.node_name.is_none()).unwrap();
        let claim = s
            .claim(pending.namespace, &format!("data-{}", pending.name))
            .unwrap();
        assert!(!claim.is_bound());
        assert!(s.csi_node(c.nodes[0].name).is_some());
    }
}
