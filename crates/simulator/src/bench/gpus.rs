//! `bench --gpus`: makes the synthetic cluster a GPU cluster, every node with 8 GPUs and every
//! pending pod asking for one, either as an extended resource (`nvidia.com/gpu`, a device
//! plugin) or through DRA (each node publishing a ResourceSlice of 8 devices, each pod claiming
//! one device from a ResourceClaimTemplate), so that the two can be timed on the same cluster.
//!
//! It only builds objects; it never decides or measures. Running pods use no GPU.

use std::sync::Arc;

use autoscaler_model::{
    AllocationMode, AttrValue, CelSelector, ClaimSpec, ClaimTemplate, Device, DeviceClass,
    DeviceRequest, Dra, PodClaim, PodClaimSource, ResourceName, ResourceSlice, SliceReach,
    Subrequest, Sym,
};

use crate::bench::cluster::Cluster;

/// GPUs per node.
pub const GPUS_PER_NODE: i64 = 8;
/// The extended resource of the device-plugin GPUs.
const RESOURCE: &str = "nvidia.com/gpu";
/// The DRA driver (and device class) of the DRA GPUs.
const DRIVER: &str = "gpu.example.com";
/// The claim template every pending pod names.
const TEMPLATE: &str = "one-gpu";

/// How the GPUs are offered and asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Gpus {
    /// An extended resource advertised by a device plugin, requested by the pods.
    Extended,
    /// DRA: ResourceSlices per node, one claim per pod from a template.
    Dra,
}

/// Gives every node 8 GPUs and every pending pod a request for one, as `mode` says.
pub fn add_gpus(cluster: &mut Cluster, mode: Gpus) {
    match mode {
        Gpus::Extended => extended(cluster),
        Gpus::Dra => dra(cluster),
    }
}

fn extended(cluster: &mut Cluster) {
    let gpu = ResourceName::parse(RESOURCE);
    for n in &mut cluster.nodes {
        let node = Arc::make_mut(n);
        node.allocatable.set(gpu, GPUS_PER_NODE);
        node.capacity.set(gpu, GPUS_PER_NODE);
    }
    for p in cluster.pods.iter_mut().filter(|p| p.node_name.is_none()) {
        let pod = Arc::make_mut(p);
        pod.requests.set(gpu, 1);
        pod.update_equivalence();
    }
}

fn dra(cluster: &mut Cluster) {
    let mut dra = Dra::default();
    let class: Arc<str> = Arc::from(DRIVER);
    dra.insert_class(DeviceClass {
        name: class.clone(),
        selectors: vec![CelSelector::compile(&format!(
            "device.driver == '{DRIVER}'"
        ))],
        extended_resource_name: None,
    });
    let namespace = Sym::new("default");
    dra.insert_template(ClaimTemplate {
        namespace,
        name: Arc::from(TEMPLATE),
        spec: Arc::new(ClaimSpec {
            requests: vec![DeviceRequest {
                name: Arc::from("gpu"),
                alternatives: vec![Subrequest {
                    name: Arc::from("gpu"),
                    class,
                    selectors: Vec::new(),
                    mode: AllocationMode::ExactCount(1),
                    admin_access: false,
                }],
            }],
            constraints: Vec::new(),
        }),
    });
    let devices: Vec<Device> = (0..GPUS_PER_NODE)
        .map(|i| Device {
            name: Arc::from(format!("gpu-{i}")),
            attributes: vec![(Arc::from("index"), AttrValue::Int(i))],
            capacity: Vec::new(),
        })
        .collect();
    let slices = cluster
        .nodes
        .iter()
        .map(|n| ResourceSlice {
            name: Arc::from(format!("{}-{DRIVER}", n.name)),
            driver: Sym::new(DRIVER),
            pool: Arc::from(n.name.as_str()),
            generation: 1,
            slice_count: 1,
            reach: SliceReach::Node(n.name),
            devices: devices.clone(),
        })
        .collect();
    dra.set_slices(slices);
    let mut storage = (*cluster.storage).clone();
    storage.set_dra(Arc::new(dra));
    cluster.storage = Arc::new(storage);
    for p in cluster.pods.iter_mut().filter(|p| p.node_name.is_none()) {
        let pod = Arc::make_mut(p);
        pod.resource_claims.push(PodClaim {
            name: Arc::from("gpu"),
            source: PodClaimSource::Template {
                template: Arc::from(TEMPLATE),
                generated: None,
            },
        });
        pod.update_equivalence();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::cluster::{Shape, generate};

    fn cluster() -> Cluster {
        generate(&Shape {
            nodes: 4,
            groups: 2,
            pods: 8,
            pending: 3,
            pending_cpu_milli: 1000,
            pending_memory: 1 << 30,
            pending_owners: 1,
        })
        .unwrap()
    }

    #[test]
    fn both_modes_give_every_node_eight_gpus_and_every_pending_pod_one() {
        let mut ext = cluster();
        add_gpus(&mut ext, Gpus::Extended);
        let gpu = ResourceName::parse(RESOURCE);
        assert!(ext.nodes.iter().all(|n| n.allocatable.get(gpu) == 8));
        let pending: Vec<_> = ext.pods.iter().filter(|p| p.node_name.is_none()).collect();
        assert_eq!(pending.len(), 3);
        assert!(pending.iter().all(|p| p.requests.get(gpu) == 1));
        let mut dra = cluster();
        add_gpus(&mut dra, Gpus::Dra);
        let objects = dra.storage.dra();
        for n in &dra.nodes {
            let slices = objects.node_slices(n.name);
            assert_eq!(slices.len(), 1);
            assert_eq!(slices[0].devices.len(), 8);
        }
        let pending: Vec<_> = dra.pods.iter().filter(|p| p.node_name.is_none()).collect();
        assert!(pending.iter().all(|p| p.resource_claims.len() == 1));
        assert!(
            dra.pods
                .iter()
                .filter(|p| p.node_name.is_some())
                .all(|p| p.resource_claims.is_empty())
        );
    }
}
