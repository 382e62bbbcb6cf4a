//! Which DRA devices are GPUs, and of which type, for everything that counts GPUs: the
//! cluster-wide `--gpu-total` limits, the expanders and the similarity of node groups (ours:
//! upstream's DRA processor returns no resource targets, so upstream counts no DRA device there).
//!
//! A device of a ResourceSlice is a GPU when it has the attribute `type` whose value is the
//! string `gpu`, named either bare or qualified with the slice's driver as domain
//! (`gpu.nvidia.com/type`), as the allocator resolves a driver's own attributes. That is the
//! attribute upstream's Cluster API provider gives the devices of a scale-from-zero template
//! (`capacity.cluster-autoscaler.kubernetes.io/dra-driver`), and the one NVIDIA's DRA driver
//! publishes for a whole GPU (its MIG devices are `mig`, not counted). The GPU's type is the
//! slice's driver name (`gpu.nvidia.com`), the name a `--gpu-total` entry gives to limit them.
//!
//! Only the devices a node holds count as its GPUs: the slices published for it by name (or
//! carried by a template). Devices reached through a node selector or by every node are not one
//! node's, and are not counted per node. It decides nothing else and never allocates.

use std::sync::Arc;

use crate::dra::{AttrValue, Device, Dra, ResourceSlice};
use crate::intern::Sym;
use crate::node::Node;

/// The device attribute naming what a device is.
pub const DRA_GPU_ATTRIBUTE: &str = "type";

/// The value of [`DRA_GPU_ATTRIBUTE`] that makes a device a GPU.
pub const DRA_GPU_TYPE: &str = "gpu";

/// Whether `device`, published by `driver`, is a GPU (see the module doc).
pub fn is_dra_gpu(driver: &str, device: &Device) -> bool {
    device.attributes.iter().any(|(name, value)| {
        let own = match name.split_once('/') {
            Some((domain, id)) => domain == driver && id == DRA_GPU_ATTRIBUTE,
            None => &**name == DRA_GPU_ATTRIBUTE,
        };
        own && matches!(value, AttrValue::String(v) if &**v == DRA_GPU_TYPE)
    })
}

/// The slices `node` holds: those it carries (a template), else those published for it by name.
pub fn node_slices<'a>(node: &'a Node, dra: &'a Dra) -> &'a [Arc<ResourceSlice>] {
    match &node.devices {
        Some(d) => &d.slices,
        None => dra.node_slices(node.name),
    }
}

/// The GPUs among `slices`, per driver, in order of first appearance (drivers with none left
/// out).
pub fn dra_gpus(slices: &[Arc<ResourceSlice>]) -> Vec<(Sym, i64)> {
    let mut out: Vec<(Sym, i64)> = Vec::new();
    for s in slices {
        let n = s
            .devices
            .iter()
            .filter(|d| is_dra_gpu(s.driver.as_str(), d))
            .count();
        if n == 0 {
            continue;
        }
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        match out.iter_mut().find(|(d, _)| *d == s.driver) {
            Some((_, total)) => *total = total.saturating_add(n),
            None => out.push((s.driver, n)),
        }
    }
    out
}

/// The GPUs a template node carries, per driver (none for a node read from the API, whose
/// slices are looked up by name: see [`node_slices`]).
pub fn template_dra_gpus(node: &Node) -> Vec<(Sym, i64)> {
    node.devices
        .as_ref()
        .map_or_else(Vec::new, |d| dra_gpus(&d.slices))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dra::{NodeDevices, SliceReach};

    fn device(name: &str, attrs: &[(&str, AttrValue)]) -> Device {
        Device {
            name: Arc::from(name),
            attributes: attrs
                .iter()
                .map(|(k, v)| (Arc::from(*k), v.clone()))
                .collect(),
            capacity: Vec::new(),
        }
    }

    fn text(v: &str) -> AttrValue {
        AttrValue::String(Arc::from(v))
    }

    fn slice(driver: &str, devices: Vec<Device>) -> Arc<ResourceSlice> {
        Arc::new(ResourceSlice {
            name: Arc::from(format!("n-{driver}")),
            driver: Sym::new(driver),
            pool: Arc::from("n"),
            generation: 1,
            slice_count: 1,
            reach: SliceReach::Node(Sym::new("n")),
            devices,
        })
    }

    /// `type: gpu`, bare or qualified by the driver, is a GPU; another value, another domain or
    /// another value kind is not.
    #[test]
    fn a_gpu_is_a_device_whose_type_is_gpu() {
        let d = "gpu.nvidia.com";
        assert!(is_dra_gpu(d, &device("a", &[("type", text("gpu"))])));
        assert!(is_dra_gpu(
            d,
            &device("b", &[("gpu.nvidia.com/type", text("gpu"))])
        ));
        assert!(!is_dra_gpu(d, &device("c", &[("type", text("mig"))])));
        assert!(!is_dra_gpu(
            d,
            &device("d", &[("other.example.com/type", text("gpu"))])
        ));
        assert!(!is_dra_gpu(
            d,
            &device("e", &[("type", AttrValue::Bool(true))])
        ));
        assert!(!is_dra_gpu(d, &device("f", &[("kind", text("gpu"))])));
        assert!(!is_dra_gpu(d, &device("g", &[])));
    }

    #[test]
    fn gpus_are_counted_per_driver() {
        let gpu = || device("g", &[("type", text("gpu"))]);
        let nic = device("nic", &[("type", text("nic"))]);
        let slices = vec![
            slice("gpu.nvidia.com", vec![gpu(), gpu(), nic.clone()]),
            slice("net.example.com", vec![nic]),
            slice("gpu.nvidia.com", vec![gpu()]),
            slice("gpu.amd.com", vec![gpu()]),
        ];
        assert_eq!(
            dra_gpus(&slices),
            vec![
                (Sym::new("gpu.nvidia.com"), 3),
                (Sym::new("gpu.amd.com"), 1)
            ]
        );
        let mut template = Node::new("t");
        assert!(template_dra_gpus(&template).is_empty());
        template.devices = Some(Arc::new(NodeDevices { slices }));
        assert_eq!(template_dra_gpus(&template).len(), 2);
        assert_eq!(node_slices(&template, &Dra::default()).len(), 4);
    }
}
