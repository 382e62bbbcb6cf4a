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
//! node's, and are not counted per node.
//!
//! The GPUs pods ask through their claims ([`claimed_dra_gpus`], for the `unit-price` expander)
//! are read off a template's devices as the allocator would first try them: per request, the
//! first alternative that enough of the template's devices match, its first `count` matching
//! devices (or all, `allocationMode: All`), of which the GPUs are counted. It is an estimate of a
//! pod mix's GPU share, never an allocation: the scheduling simulation decides where pods fit.
//! It decides nothing else and never allocates.

use std::sync::Arc;

use rustc_hash::{FxHashMap, FxHashSet};

use crate::dra::{
    AllocationMode, AttrValue, CelSelector, ClaimSpec, Device, Dra, PodClaimSource, ResourceSlice,
    Subrequest,
};
use crate::intern::Sym;
use crate::node::Node;
use crate::pod::Pod;

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

/// The GPUs the claims of `pods` would take on fresh nodes shaped like `template` (the devices
/// it carries), summed (see the module doc). A claim several pods share counts once; a claim
/// already allocated takes no new device; a missing claim, template or class, a selector that
/// fails, or an admin-access request counts none. 0 when the template has no DRA GPU or no pod
/// has a claim, without reading any claim.
pub fn claimed_dra_gpus<'a>(
    pods: impl IntoIterator<Item = &'a Pod>,
    dra: &Dra,
    template: &Node,
) -> i64 {
    let slices = match &template.devices {
        Some(d) if !dra_gpus(&d.slices).is_empty() => &d.slices[..],
        _ => return 0,
    };
    // Only a claim named by the pods may be shared; one made from a template is the pod's own.
    let mut seen: FxHashSet<(Sym, &Arc<str>)> = FxHashSet::default();
    // The pods of a workload ask the same spec (one template, or claims made from it).
    let mut by_spec: FxHashMap<&ClaimSpec, i64> = FxHashMap::default();
    let mut total = 0i64;
    for pod in pods {
        let ns = pod.namespace;
        for entry in &pod.resource_claims {
            let (claim, template) = match &entry.source {
                PodClaimSource::Claim(name) => {
                    if !seen.insert((ns, name)) {
                        continue;
                    }
                    (dra.claim(ns, name), None)
                }
                PodClaimSource::Template {
                    template,
                    generated,
                } => (
                    generated.as_ref().and_then(|g| dra.claim(ns, g)),
                    Some(template),
                ),
            };
            let spec = match (claim, template) {
                (Some(c), _) if c.allocation.is_some() => continue,
                (Some(c), _) => &c.spec,
                (None, Some(t)) => match dra.template(ns, t) {
                    Some(t) => &t.spec,
                    None => continue,
                },
                (None, None) => continue,
            };
            let gpus = *by_spec
                .entry(&**spec)
                .or_insert_with(|| spec_gpus(spec, dra, slices));
            total = total.saturating_add(gpus);
        }
    }
    total
}

/// The GPUs among the devices of `slices` each request of `spec` would first take.
fn spec_gpus(spec: &ClaimSpec, dra: &Dra, slices: &[Arc<ResourceSlice>]) -> i64 {
    let mut gpus = 0i64;
    for request in &spec.requests {
        for alt in &request.alternatives {
            // Whether each matching device, in slice order, is a GPU.
            let matching = matching_devices(alt, dra, slices);
            let taken = match alt.mode {
                AllocationMode::ExactCount(n) => {
                    let n = usize::try_from(n).unwrap_or(usize::MAX).max(1);
                    (matching.len() >= n).then(|| &matching[..n])
                }
                AllocationMode::All => (!matching.is_empty()).then_some(&matching[..]),
            };
            if let Some(taken) = taken {
                if !alt.admin_access {
                    let n = taken.iter().filter(|gpu| **gpu).count();
                    gpus = gpus.saturating_add(i64::try_from(n).unwrap_or(i64::MAX));
                }
                break;
            }
        }
    }
    gpus
}

/// For each device of `slices` that `alt`'s class and selectors match, in order, whether it is
/// a GPU. Empty when the class is unknown.
fn matching_devices(alt: &Subrequest, dra: &Dra, slices: &[Arc<ResourceSlice>]) -> Vec<bool> {
    let Some(class) = dra.class(&alt.class) else {
        return Vec::new();
    };
    let selectors: Vec<&CelSelector> = class.selectors.iter().chain(&alt.selectors).collect();
    let mut out = Vec::new();
    for slice in slices {
        let results: Vec<_> = selectors
            .iter()
            .map(|sel| dra.slice_matches(sel, slice))
            .collect();
        for (i, device) in slice.devices.iter().enumerate() {
            if results.iter().all(|r| matches!(r.get(i), Some(Ok(true)))) {
                out.push(is_dra_gpu(slice.driver.as_str(), device));
            }
        }
    }
    out
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

    /// The GPUs pods' claims ask on a template: per request the first alternative enough devices
    /// match, its first `count` matching devices (all for `All`), GPUs among them; a shared
    /// claim once, an allocated claim and a pod without claims none.
    #[test]
    fn claimed_gpus_are_read_off_the_template_as_the_allocator_tries_devices() {
        use crate::ObjectStore;
        use crate::dra::{NodeDevices, PodClaim};
        use crate::testing::{GI, PodBuilder};
        let yaml = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: any}\n\
            spec: {selectors: [{cel: {expression: \"device.driver == 'gpu.example.com'\"}}]}\n\
            ---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n\
            metadata: {name: one, namespace: default}\n\
            spec: {spec: {devices: {requests: [{name: r, exactly: {deviceClassName: any}}]}}}\n\
            ---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n\
            metadata: {name: all, namespace: default}\n\
            spec: {spec: {devices: {requests: [{name: r, exactly: {deviceClassName: any, allocationMode: All}}]}}}\n\
            ---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n\
            metadata: {name: first, namespace: default}\n\
            spec: {spec: {devices: {requests: [{name: r, firstAvailable: [\
            {name: big, deviceClassName: any, count: 9}, {name: small, deviceClassName: any, count: 2}]}]}}}\n\
            ---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n\
            metadata: {name: unknown-class, namespace: default}\n\
            spec: {spec: {devices: {requests: [{name: r, exactly: {deviceClassName: nope}}]}}}\n\
            ---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n\
            metadata: {name: shared, namespace: default}\n\
            spec: {devices: {requests: [{name: r, exactly: {deviceClassName: any}}]}}\n\
            ---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n\
            metadata: {name: done, namespace: default}\n\
            spec: {devices: {requests: [{name: r, exactly: {deviceClassName: any}}]}}\n\
            status: {allocation: {devices: {results: [{request: r, driver: gpu.example.com, pool: n1, device: gpu-0}]}}}\n";
        let mut store = ObjectStore::new();
        store.load_yaml(yaml).unwrap();
        let (dra, errors) = Dra::from_store(&store);
        assert!(errors.is_empty(), "{errors:?}");
        let pod = |name: &str, source: Option<PodClaimSource>| {
            PodBuilder::new(name, 100, GI)
                .with(|p| {
                    p.resource_claims.extend(source.map(|source| PodClaim {
                        name: Arc::from("c"),
                        source,
                    }))
                })
                .build()
        };
        let from = |t: &str| {
            Some(PodClaimSource::Template {
                template: Arc::from(t),
                generated: None,
            })
        };
        let named = |c: &str| Some(PodClaimSource::Claim(Arc::from(c)));
        let gpu = || device("g", &[("type", text("gpu"))]);
        let mig = device("m", &[("type", text("mig"))]);
        let mut template = Node::new("t");
        template.devices = Some(Arc::new(NodeDevices {
            slices: vec![slice(
                "gpu.example.com",
                vec![gpu(), gpu(), gpu(), gpu(), mig],
            )],
        }));
        let count = |pods: &[Pod]| claimed_dra_gpus(pods, &dra, &template);
        assert_eq!(count(&[pod("a", from("one"))]), 1);
        // All five devices match; the MIG device is not a GPU.
        assert_eq!(count(&[pod("b", from("all"))]), 4);
        // Nine devices are not there: the second alternative, two.
        assert_eq!(count(&[pod("c", from("first"))]), 2);
        assert_eq!(
            count(&[pod("d", named("shared")), pod("e", named("shared"))]),
            1
        );
        assert_eq!(count(&[pod("f", named("done"))]), 0);
        assert_eq!(count(&[pod("g", None), pod("h", from("unknown-class"))]), 0);
        assert_eq!(
            count(&[pod("i", named("missing")), pod("j", from("missing"))]),
            0
        );
        // A claim made from the template: its own state once created (allocated: none).
        let made = |claim: &str| {
            Some(PodClaimSource::Template {
                template: Arc::from("one"),
                generated: Some(Arc::from(claim)),
            })
        };
        assert_eq!(count(&[pod("k", made("done"))]), 0);
        assert_eq!(count(&[pod("l", made("not-seen-yet"))]), 1);
        let mix = [
            pod("a", from("one")),
            pod("b", from("all")),
            pod("c", from("first")),
        ];
        assert_eq!(count(&mix), 7);
        // A template without DRA GPUs: nothing.
        assert_eq!(claimed_dra_gpus(&mix, &dra, &Node::new("cpu")), 0);
    }
}
