//! DRA devices of a scale-from-zero template: the `capacity.cluster-autoscaler.kubernetes.io/
//! dra-driver` annotation names the DRA driver that will publish a new node's GPUs, and
//! `gpu-count` (shared with the device plugin's `gpu-type`) how many.
//!
//! As upstream's Cluster API provider, the template then carries one ResourceSlice of that
//! driver, reached by the template node only, in a pool named after the node, with devices
//! `gpu-0` … `gpu-<count-1>` whose attribute `type` is the string `gpu`. The GPUs are not put
//! in the node's capacity (a DRA GPU is no extended resource).
//!
//! It decides only what the annotations mean: a malformed driver name or a count above what a
//! slice holds gives no devices and a warning naming the object and the annotation; it never
//! panics and never builds more than one slice.

use std::collections::BTreeMap;
use std::sync::Arc;

use autoscaler_model::{AttrValue, Device, Node, NodeDevices, ResourceSlice, SliceReach, Sym};

use crate::annotations::GPU_COUNT_KEY;

/// The DRA driver publishing a new node's GPUs (`gpu.nvidia.com`).
pub const DRA_DRIVER_KEY: &str = "capacity.cluster-autoscaler.kubernetes.io/dra-driver";

/// The `type` attribute upstream gives the template's devices.
const GPU_DEVICE_TYPE: &str = "gpu";

/// Most devices of one ResourceSlice (the API server's limit): a count above it describes no
/// node a driver could publish.
const MAX_SLICE_DEVICES: i64 = 128;

/// Whether `ann` names a DRA driver (then `gpu-count` without `gpu-type` is no mistake).
pub(crate) fn names_dra_driver(ann: &BTreeMap<String, String>) -> bool {
    ann.get(DRA_DRIVER_KEY)
        .is_some_and(|v| !v.trim().is_empty())
}

/// `node` with the DRA devices the annotations promise (none: `node` as is).
pub(crate) fn with_dra_devices(
    node: Option<Arc<Node>>,
    ann: &BTreeMap<String, String>,
    what: &str,
    warnings: &mut Vec<String>,
) -> Option<Arc<Node>> {
    let mut node = node?;
    let Some(driver) = ann.get(DRA_DRIVER_KEY).map(|v| v.trim()) else {
        return Some(node);
    };
    if driver.is_empty() {
        return Some(node);
    }
    if let Err(why) = check_driver(driver) {
        warnings.push(format!(
            "{what}: annotation {DRA_DRIVER_KEY} is {driver:?}: {why}; no DRA devices in the template"
        ));
        return Some(node);
    }
    // A malformed count was already reported by the capacity reading (which then gave no
    // template at all); absent or zero promises nothing, as upstream.
    let count = match ann.get(GPU_COUNT_KEY).map(|v| v.trim().parse::<i64>()) {
        Some(Ok(n)) if n > 0 => n,
        _ => return Some(node),
    };
    if count > MAX_SLICE_DEVICES {
        warnings.push(format!(
            "{what}: annotation {GPU_COUNT_KEY} is {count}: a ResourceSlice holds at most {MAX_SLICE_DEVICES} devices; no DRA devices in the template"
        ));
        return Some(node);
    }
    let name = node.name;
    let slice = ResourceSlice {
        name: Arc::from(format!("{}-{driver}", name.as_str())),
        driver: Sym::new(driver),
        pool: Arc::from(name.as_str()),
        generation: 0,
        slice_count: 1,
        reach: SliceReach::Node(name),
        devices: (0..count)
            .map(|i| Device {
                name: Arc::from(format!("gpu-{i}")),
                attributes: vec![(
                    Arc::from("type"),
                    AttrValue::String(Arc::from(GPU_DEVICE_TYPE)),
                )],
                capacity: Vec::new(),
            })
            .collect(),
    };
    Arc::make_mut(&mut node).devices = Some(Arc::new(NodeDevices {
        slices: vec![Arc::new(slice)],
    }));
    Some(node)
}

/// A driver name as the API server accepts it in a ResourceSlice: a DNS subdomain of at most
/// 63 characters.
fn check_driver(driver: &str) -> Result<(), &'static str> {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    if driver.len() > 63 {
        return Err("longer than 63 characters");
    }
    if !driver.split('.').all(label_ok) {
        return Err("not a DNS subdomain");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ann(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn template() -> Option<Arc<Node>> {
        Some(Arc::new(Node::new("template-node-for-md-ns-gpu")))
    }

    /// Upstream's slice: named `<node>-<driver>`, the node's own pool, `count` devices
    /// `gpu-<i>` with `type: gpu`.
    #[test]
    fn the_driver_and_count_give_one_slice_of_gpus() {
        let mut w = Vec::new();
        let a = ann(&[(DRA_DRIVER_KEY, "gpu.nvidia.com"), (GPU_COUNT_KEY, "2")]);
        let node = with_dra_devices(template(), &a, "md", &mut w).expect("a node");
        assert!(w.is_empty(), "{w:?}");
        let slices = &node.devices.as_ref().expect("devices").slices;
        assert_eq!(slices.len(), 1);
        let s = &slices[0];
        assert_eq!(&*s.name, "template-node-for-md-ns-gpu-gpu.nvidia.com");
        assert_eq!(s.driver.as_str(), "gpu.nvidia.com");
        assert_eq!(&*s.pool, "template-node-for-md-ns-gpu");
        assert_eq!(s.reach, SliceReach::Node(node.name));
        let names: Vec<&str> = s.devices.iter().map(|d| &*d.name).collect();
        assert_eq!(names, ["gpu-0", "gpu-1"]);
        assert_eq!(
            s.devices[1].attributes,
            vec![(Arc::from("type"), AttrValue::String(Arc::from("gpu")))]
        );
    }

    #[test]
    fn no_driver_no_count_or_no_template_give_no_devices() {
        let mut w = Vec::new();
        for a in [
            ann(&[(GPU_COUNT_KEY, "2")]),
            ann(&[(DRA_DRIVER_KEY, "gpu.nvidia.com")]),
            ann(&[(DRA_DRIVER_KEY, "gpu.nvidia.com"), (GPU_COUNT_KEY, "0")]),
            ann(&[(DRA_DRIVER_KEY, " "), (GPU_COUNT_KEY, "2")]),
        ] {
            let node = with_dra_devices(template(), &a, "md", &mut w).expect("a node");
            assert!(node.devices.is_none(), "{a:?}");
        }
        let a = ann(&[(DRA_DRIVER_KEY, "gpu.nvidia.com"), (GPU_COUNT_KEY, "1")]);
        assert!(with_dra_devices(None, &a, "md", &mut w).is_none());
        assert!(w.is_empty(), "{w:?}");
    }

    /// A bad driver name or a count no slice can hold: the template stays without devices and
    /// the warning names the object and the annotation.
    #[test]
    fn a_malformed_driver_or_a_huge_count_is_a_warning() {
        for (driver, count, key) in [
            ("GPU.Nvidia.com", "1", DRA_DRIVER_KEY),
            ("gpu..com", "1", DRA_DRIVER_KEY),
            (&*"a".repeat(64), "1", DRA_DRIVER_KEY),
            ("gpu.nvidia.com", "100000000", GPU_COUNT_KEY),
        ] {
            let mut w = Vec::new();
            let a = ann(&[(DRA_DRIVER_KEY, driver), (GPU_COUNT_KEY, count)]);
            let node = with_dra_devices(template(), &a, "MachineDeployment ns/gpu", &mut w)
                .expect("a node");
            assert!(node.devices.is_none());
            assert_eq!(w.len(), 1, "{w:?}");
            assert!(
                w[0].starts_with("MachineDeployment ns/gpu: annotation ") && w[0].contains(key),
                "{w:?}"
            );
        }
    }

    /// Through discovery: a MachineDeployment annotated for DRA scales from zero with the
    /// driver's GPUs in its template and none in its capacity, without a warning about the
    /// missing `gpu-type`.
    #[test]
    fn a_machine_deployment_with_a_dra_driver_has_template_devices() {
        use crate::annotations::{CPU_KEY, MEMORY_KEY};
        use crate::{ClusterApiConfig, ClusterApiProvider};
        use autoscaler_model::{CloudProvider, ObjectStore};
        let config = ClusterApiConfig::default();
        let md = serde_json::json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachineDeployment",
            "metadata": {"name": "gpu", "namespace": "ns", "annotations": {
                config.min_size_key(): "0", config.max_size_key(): "3",
                CPU_KEY: "8", MEMORY_KEY: "32Gi",
                DRA_DRIVER_KEY: "gpu.nvidia.com", GPU_COUNT_KEY: "4",
            }},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"a": "b"}}},
        });
        let mut store = ObjectStore::new();
        store.insert(md, "test").expect("inserted");
        let (p, warnings) = ClusterApiProvider::discover(&store, &config);
        assert!(warnings.is_empty(), "{warnings:?}");
        let groups = p.node_groups();
        let t = groups[0].template().expect("a template");
        assert!(
            t.capacity.iter().all(|(name, _)| !name.is_gpu()),
            "{:?}",
            t.capacity
        );
        let slices = &t.devices.as_ref().expect("devices").slices;
        assert_eq!(slices[0].devices.len(), 4);
        assert_eq!(slices[0].reach, SliceReach::Node(t.name));
    }
}
