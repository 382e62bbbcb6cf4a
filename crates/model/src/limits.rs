//! Cluster-wide resource limits (`--max-nodes-total`, `--cores-total`, `--memory-total`,
//! `--gpu-total`; the `resourceLimits` of the `ClusterAutoscaler` resource in seed 002).
//!
//! Decides how many nodes of a given shape may still be added, and whether a node may be
//! removed, without crossing a limit. Totals count every node of the cluster, control-plane and
//! non-autoscaled ones included, by capacity. It must never propose a change that crosses a
//! limit, and never tries to repair a cluster that is already outside a range (seed 002): it only
//! refuses to make it worse.
//!
//! A GPU limit's type matches a node's GPUs either by resource name (`nvidia.com/gpu`, seed
//! 002) or by the value of the node's [`GPU_TYPE_LABEL`] (`nvidia-t4`, as OpenShift's operator
//! documents `resourceLimits.gpus[].type`); in the second case every GPU of the node counts.
//!
//! DRA GPUs count too (ours: upstream's DRA processor gives no resource target): a node's
//! devices that are GPUs ([`is_dra_gpu`](crate::is_dra_gpu)) count under their driver's name
//! (`gpu.nvidia.com:0:16` limits them) and among "every GPU of the node" for the label. A
//! template carries its devices; the totals of a cluster's nodes read their ResourceSlices
//! ([`ClusterTotals::from_nodes_and_devices`]).

use std::fmt;

use rustc_hash::FxHashMap;

use std::sync::Arc;

use crate::dra::{Dra, ResourceSlice};
use crate::dra_gpu::{dra_gpus, node_slices};
use crate::intern::Sym;
use crate::node::Node;
use crate::resources::ResourceName;

/// The node label whose value names the node's GPU type (Cluster API and OpenShift).
pub const GPU_TYPE_LABEL: &str = "cluster-api/accelerator";

/// Bytes in a GiB (memory limits are given in GiB).
const GIB: i64 = 1 << 30;

/// Why a `min:max` limit text was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitParseError {
    /// Not `min:max` (or `type:min:max` for GPUs) with non-negative integers.
    #[error("invalid limit {text:?}: expected {expected}")]
    Syntax {
        /// The rejected text.
        text: String,
        /// The expected form.
        expected: &'static str,
    },
    /// The GPU type is not an extended resource name.
    #[error("invalid limit {text:?}: {why}")]
    Resource {
        /// The rejected text.
        text: String,
        /// What is wrong.
        why: String,
    },
    /// min greater than max.
    #[error("invalid limit {text:?}: min {min} is greater than max {max}")]
    MinAboveMax {
        /// The rejected text.
        text: String,
        /// Parsed min.
        min: i64,
        /// Parsed max.
        max: i64,
    },
}

/// A range that cannot be built: a negative bound, or min above max.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid range {min}:{max}: bounds must be non-negative with min <= max")]
pub struct InvalidRange {
    /// The rejected minimum.
    pub min: i64,
    /// The rejected maximum.
    pub max: i64,
}

/// An inclusive range in the resource's unit (millicores, bytes, GPU count). Its bounds are
/// private so that every range is valid: `0 <= min <= max`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Range {
    min: i64,
    max: i64,
}

impl Range {
    /// No limit.
    pub const UNLIMITED: Range = Range {
        min: 0,
        max: i64::MAX,
    };

    /// A range `min..=max` in the resource's unit; rejects a negative bound or min above max.
    pub fn new(min: i64, max: i64) -> Result<Range, InvalidRange> {
        if min < 0 || min > max {
            return Err(InvalidRange { min, max });
        }
        Ok(Range { min, max })
    }

    /// The minimum, inclusive.
    pub fn min(&self) -> i64 {
        self.min
    }

    /// The maximum, inclusive.
    pub fn max(&self) -> i64 {
        self.max
    }

    fn parse_pair(text: &str, min: &str, max: &str, unit: i64) -> Result<Range, LimitParseError> {
        let syntax = || LimitParseError::Syntax {
            text: text.to_string(),
            expected: "min:max",
        };
        let min: i64 = min.trim().parse().map_err(|_| syntax())?;
        let max: i64 = max.trim().parse().map_err(|_| syntax())?;
        if min < 0 || max < 0 {
            return Err(syntax());
        }
        if min > max {
            return Err(LimitParseError::MinAboveMax {
                text: text.to_string(),
                min,
                max,
            });
        }
        Ok(Range {
            min: min.saturating_mul(unit),
            max: max.saturating_mul(unit),
        })
    }

    /// Parses `--cores-total` (`min:max` in cores) into millicores.
    pub fn parse_cores(text: &str) -> Result<Range, LimitParseError> {
        let (min, max) = split2(text)?;
        Range::parse_pair(text, min, max, 1000)
    }

    /// Parses `--memory-total` (`min:max` in GiB) into bytes.
    pub fn parse_memory_gib(text: &str) -> Result<Range, LimitParseError> {
        let (min, max) = split2(text)?;
        Range::parse_pair(text, min, max, GIB)
    }
}

fn split2(text: &str) -> Result<(&str, &str), LimitParseError> {
    text.split_once(':')
        .filter(|(_, max)| !max.contains(':'))
        .ok_or_else(|| LimitParseError::Syntax {
            text: text.to_string(),
            expected: "min:max",
        })
}

/// Parses one `--gpu-total` value, `type:min:max` (e.g. `nvidia.com/gpu:0:16`).
pub fn parse_gpu_limit(text: &str) -> Result<(ResourceName, Range), LimitParseError> {
    let syntax = || LimitParseError::Syntax {
        text: text.to_string(),
        expected: "type:min:max",
    };
    let mut parts = text.rsplitn(3, ':');
    let (max, min, kind) = match (parts.next(), parts.next(), parts.next()) {
        (Some(max), Some(min), Some(kind)) if !kind.trim().is_empty() => (max, min, kind.trim()),
        _ => return Err(syntax()),
    };
    let range = Range::parse_pair(text, min, max, 1).map_err(|e| match e {
        LimitParseError::Syntax { .. } => syntax(),
        other => other,
    })?;
    check_gpu_type(kind).map_err(|why| LimitParseError::Resource {
        text: text.to_string(),
        why,
    })?;
    Ok((ResourceName::parse(kind), range))
}

/// Checks a GPU resource name: an extended resource, so a qualified name with a domain prefix
/// (`nvidia.com/gpu`); `cpu` or `memory` would silently limit or request something else.
pub fn check_gpu_resource(name: &str) -> Result<(), String> {
    crate::labels::check_qualified_name(name)?;
    if !name.contains('/') {
        return Err(format!(
            "{name:?} is not an extended resource name (domain/name, e.g. nvidia.com/gpu)"
        ));
    }
    Ok(())
}

/// Checks a GPU limit's type: an extended resource name with a domain prefix
/// (`nvidia.com/gpu`), or a [`GPU_TYPE_LABEL`] value without one (`nvidia-t4`). A core resource
/// name (`cpu`, `memory`...) would silently limit something else, so it is refused.
pub fn check_gpu_type(name: &str) -> Result<(), String> {
    crate::labels::check_qualified_name(name)?;
    if matches!(
        ResourceName::parse(name),
        ResourceName::Cpu
            | ResourceName::Memory
            | ResourceName::EphemeralStorage
            | ResourceName::Pods
    ) {
        return Err(format!(
            "{name:?} is not a GPU type (an extended resource name such as nvidia.com/gpu, or a \
             {GPU_TYPE_LABEL} label value such as nvidia-t4)"
        ));
    }
    Ok(())
}

/// The GPUs of `node` a limit of type `kind` counts: its capacity of the resource `kind`, else
/// its DRA GPUs of the driver `kind` (those a template carries), else, when its
/// [`GPU_TYPE_LABEL`] is `kind`, all its GPUs.
pub fn gpus_of(node: &Node, kind: Sym) -> i64 {
    gpus_with(node, &dra_gpus(own_slices(node)), kind)
}

/// [`gpus_of`] with the node's DRA GPUs per driver given.
fn gpus_with(node: &Node, dra: &[(Sym, i64)], kind: Sym) -> i64 {
    let by_name = node.capacity.get(ResourceName::Extended(kind));
    if by_name > 0 {
        return by_name;
    }
    if let Some((_, n)) = dra.iter().find(|(driver, _)| *driver == kind) {
        return *n;
    }
    if node.labels.get_str(GPU_TYPE_LABEL) == Some(kind.as_str()) {
        return all_gpus(node, dra);
    }
    0
}

/// Every GPU of `node`, whatever its resource name, its DRA GPUs `dra` included.
fn all_gpus(node: &Node, dra: &[(Sym, i64)]) -> i64 {
    (node.capacity.iter())
        .filter(|(n, _)| n.is_gpu())
        .map(|(_, v)| v)
        .chain(dra.iter().map(|(_, v)| *v))
        .fold(0i64, |a, v| a.saturating_add(v))
}

/// The totals a node adds per GPU type: by resource name, by DRA driver (its DRA GPUs `dra`),
/// and under its [`GPU_TYPE_LABEL`] value (unless that value is itself one of those names,
/// counted already).
fn gpu_entries(node: &Node, dra: &[(Sym, i64)]) -> Vec<(Sym, i64)> {
    let mut out: Vec<(Sym, i64)> = (node.capacity.iter())
        .filter_map(|(name, v)| match (name, name.is_gpu()) {
            (ResourceName::Extended(s), true) => Some((s, v)),
            _ => None,
        })
        .collect();
    out.extend(dra.iter().copied());
    if let Some(label) = node.labels.get_str(GPU_TYPE_LABEL) {
        let total = all_gpus(node, dra);
        if total > 0 && !out.iter().any(|(s, _)| s.as_str() == label) {
            out.push((Sym::new(label), total));
        }
    }
    out
}

/// The slices a node adds to the totals by itself: those it carries (a template).
fn own_slices(node: &Node) -> &[Arc<ResourceSlice>] {
    node.devices.as_ref().map_or(&[][..], |d| &d.slices[..])
}

/// The cluster-wide limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceLimits {
    /// `--max-nodes-total` (0 means no limit, as upstream).
    pub max_nodes_total: usize,
    /// Cores, in millicores.
    pub cpu: Range,
    /// Memory, in bytes.
    pub memory: Range,
    /// Per GPU resource name (`nvidia.com/gpu`), in devices.
    pub gpus: Vec<(ResourceName, Range)>,
}

impl Default for ResourceLimits {
    /// Upstream's defaults: no node limit, cores 0:320000, memory 0:6400000 GiB, no GPU limit.
    fn default() -> Self {
        ResourceLimits {
            max_nodes_total: 0,
            cpu: Range {
                min: 0,
                max: 320_000 * 1000,
            },
            memory: Range {
                min: 0,
                max: 6_400_000 * GIB,
            },
            gpus: Vec::new(),
        }
    }
}

/// What the cluster has now (capacity of every node, plus upcoming nodes the caller adds).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterTotals {
    /// Number of nodes.
    pub nodes: usize,
    /// Millicores of capacity.
    pub cpu: i64,
    /// Bytes of memory capacity.
    pub memory: i64,
    /// GPU devices by resource name, DRA driver name and accelerator label value.
    pub gpus: FxHashMap<Sym, i64>,
    /// The DRA GPUs per driver of each node counted with its published slices (by node name,
    /// [`ClusterTotals::from_nodes_and_devices`]): a node read from the API carries no slices,
    /// so its removal takes these off and its removal check counts them.
    pub node_dra_gpus: FxHashMap<Sym, Vec<(Sym, i64)>>,
}

impl ClusterTotals {
    /// Totals over `nodes` (every node: control plane and unmanaged nodes count, seed 002).
    pub fn from_nodes<'a>(nodes: impl IntoIterator<Item = &'a Node>) -> ClusterTotals {
        let mut t = ClusterTotals::default();
        for n in nodes {
            t.add_node(n, 1);
        }
        t
    }

    /// Totals over `nodes` as [`ClusterTotals::from_nodes`], with each node's DRA GPUs: its
    /// ResourceSlices in `dra` (those published for it by name), or those it carries.
    pub fn from_nodes_and_devices<'a>(
        nodes: impl IntoIterator<Item = &'a Node>,
        dra: &Dra,
    ) -> ClusterTotals {
        let mut t = ClusterTotals::default();
        for n in nodes {
            let gpus = dra_gpus(node_slices(n, dra));
            t.add_with_dra(n, &gpus, 1);
            if n.devices.is_none() && !gpus.is_empty() {
                t.node_dra_gpus.insert(n.name, gpus);
            }
        }
        t
    }

    /// The DRA GPUs of `node` per driver: those it carries (a template), else those counted
    /// with its published slices.
    fn dra_of(&self, node: &Node) -> Vec<(Sym, i64)> {
        match &node.devices {
            Some(d) => dra_gpus(&d.slices),
            None => (self.node_dra_gpus.get(&node.name))
                .cloned()
                .unwrap_or_default(),
        }
    }

    /// Adds `count` nodes shaped like `node` (e.g. upcoming nodes of a group), with the DRA
    /// GPUs it carries (a template's).
    pub fn add_node(&mut self, node: &Node, count: usize) {
        self.add_with_dra(node, &dra_gpus(own_slices(node)), count);
    }

    fn add_with_dra(&mut self, node: &Node, dra: &[(Sym, i64)], count: usize) {
        let c = i64::try_from(count).unwrap_or(i64::MAX);
        self.nodes = self.nodes.saturating_add(count);
        self.cpu = self.cpu.saturating_add(node.capacity.cpu.saturating_mul(c));
        self.memory = self
            .memory
            .saturating_add(node.capacity.memory.saturating_mul(c));
        for (s, v) in gpu_entries(node, dra) {
            let e = self.gpus.entry(s).or_default();
            *e = e.saturating_add(v.saturating_mul(c));
        }
    }
}

impl ClusterTotals {
    /// Counts `node` (already counted) with at least the GPUs of each type `template` carries:
    /// a node that has not started has not advertised its accelerators yet, and upstream
    /// counts such a node's GPUs from its group's template.
    pub fn count_promised_gpus(&mut self, node: &Node, template: &Node) {
        let have = gpu_entries(node, &self.dra_of(node));
        for (s, v) in gpu_entries(template, &dra_gpus(own_slices(template))) {
            let own = have.iter().find(|(h, _)| *h == s).map_or(0, |(_, n)| *n);
            if v > own {
                let e = self.gpus.entry(s).or_default();
                *e = e.saturating_add(v - own);
            }
        }
    }

    /// Removes `count` nodes shaped like `node` (e.g. nodes planned for deletion), with the DRA
    /// GPUs it carries or was counted with.
    pub fn remove_node(&mut self, node: &Node, count: usize) {
        let c = i64::try_from(count).unwrap_or(i64::MAX);
        self.nodes = self.nodes.saturating_sub(count);
        self.cpu = self.cpu.saturating_sub(node.capacity.cpu.saturating_mul(c));
        self.memory = self
            .memory
            .saturating_sub(node.capacity.memory.saturating_mul(c));
        for (s, v) in gpu_entries(node, &self.dra_of(node)) {
            let e = self.gpus.entry(s).or_default();
            *e = e.saturating_sub(v.saturating_mul(c));
        }
    }
}

/// Which limit stopped or capped a change. `Display` is the reason shown for pods and nodes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LimitReached {
    /// `--max-nodes-total`.
    MaxNodesTotal,
    /// The cores range.
    Cores,
    /// The memory range.
    Memory,
    /// A GPU range.
    Gpu(ResourceName),
}

impl fmt::Display for LimitReached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LimitReached::MaxNodesTotal => f.write_str("max total nodes in cluster reached"),
            LimitReached::Cores => f.write_str("exceeded quota: cluster-wide cores"),
            LimitReached::Memory => f.write_str("exceeded quota: cluster-wide memory"),
            LimitReached::Gpu(name) => write!(f, "exceeded quota: cluster-wide {name}"),
        }
    }
}

impl ResourceLimits {
    /// How many nodes shaped like `node` may be added to a cluster with `totals`, at most
    /// `wanted`. Returns the count and, when it is below `wanted`, the first limit that capped it.
    pub fn max_new_nodes(
        &self,
        totals: &ClusterTotals,
        node: &Node,
        wanted: usize,
    ) -> (usize, Option<LimitReached>) {
        let mut allowed = wanted;
        let mut reason = None;
        let mut cap = |headroom: i64, per_node: i64, why: LimitReached| {
            if per_node <= 0 {
                return;
            }
            let n = usize::try_from((headroom.max(0)) / per_node).unwrap_or(usize::MAX);
            if n < allowed {
                allowed = n;
                reason = Some(why);
            }
        };
        if self.max_nodes_total > 0 {
            let headroom = self.max_nodes_total.saturating_sub(totals.nodes);
            cap(
                i64::try_from(headroom).unwrap_or(i64::MAX),
                1,
                LimitReached::MaxNodesTotal,
            );
        }
        cap(
            self.cpu.max.saturating_sub(totals.cpu),
            node.capacity.cpu,
            LimitReached::Cores,
        );
        cap(
            self.memory.max.saturating_sub(totals.memory),
            node.capacity.memory,
            LimitReached::Memory,
        );
        for (name, range) in &self.gpus {
            if let ResourceName::Extended(s) = name {
                let have = totals.gpus.get(s).copied().unwrap_or(0);
                cap(
                    range.max.saturating_sub(have),
                    gpus_of(node, *s),
                    LimitReached::Gpu(*name),
                );
            }
        }
        (allowed, reason)
    }

    /// Whether removing `node` keeps the cluster at or above every minimum. A cluster already
    /// below a minimum is not made worse: the removal is refused. The node's DRA GPUs are those
    /// it carries or was counted with in `totals`.
    pub fn check_removal(&self, totals: &ClusterTotals, node: &Node) -> Result<(), LimitReached> {
        if node.capacity.cpu > 0 && totals.cpu.saturating_sub(node.capacity.cpu) < self.cpu.min {
            return Err(LimitReached::Cores);
        }
        if node.capacity.memory > 0
            && totals.memory.saturating_sub(node.capacity.memory) < self.memory.min
        {
            return Err(LimitReached::Memory);
        }
        let dra = totals.dra_of(node);
        for (name, range) in &self.gpus {
            if let ResourceName::Extended(s) = name {
                let per = gpus_with(node, &dra, *s);
                let have = totals.gpus.get(s).copied().unwrap_or(0);
                if per > 0 && have.saturating_sub(per) < range.min {
                    return Err(LimitReached::Gpu(*name));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{GI, NodeBuilder};

    fn node(cpu_cores: i64) -> Node {
        let mut n = NodeBuilder::new("n", cpu_cores * 1000, 4 * cpu_cores * GI).build();
        n.capacity = n.allocatable.clone();
        n
    }

    #[test]
    fn seed_002_example_cores_64_adds_at_most_4_nodes() {
        let limits = ResourceLimits {
            cpu: Range::parse_cores("0:64").unwrap(),
            ..Default::default()
        };
        // 30 cores in the cluster.
        let mut totals = ClusterTotals::default();
        totals.add_node(&node(30), 1);
        let (n, why) = limits.max_new_nodes(&totals, &node(8), 6);
        assert_eq!(n, 4);
        assert_eq!(why, Some(LimitReached::Cores));
        assert_eq!(
            why.unwrap().to_string(),
            "exceeded quota: cluster-wide cores"
        );
        totals.add_node(&node(8), n);
        assert_eq!(totals.cpu, 62_000);
    }

    #[test]
    fn max_nodes_total_counts_every_node() {
        let limits = ResourceLimits {
            max_nodes_total: 3,
            ..Default::default()
        };
        let totals = ClusterTotals::from_nodes([&node(4), &node(4)]);
        assert_eq!(
            limits.max_new_nodes(&totals, &node(4), 3),
            (1, Some(LimitReached::MaxNodesTotal))
        );
        assert_eq!(limits.max_new_nodes(&totals, &node(4), 1), (1, None));
        let full = ClusterTotals::from_nodes([&node(4), &node(4), &node(4), &node(4)]);
        assert_eq!(
            limits.max_new_nodes(&full, &node(4), 2),
            (0, Some(LimitReached::MaxNodesTotal))
        );
    }

    #[test]
    fn gpu_limits_apply_per_type_and_only_to_gpu_nodes() {
        let (name, range) = parse_gpu_limit("nvidia.com/gpu:0:4").unwrap();
        let limits = ResourceLimits {
            gpus: vec![(name, range)],
            ..Default::default()
        };
        let mut gpu_node = node(8);
        gpu_node
            .capacity
            .set(ResourceName::parse("nvidia.com/gpu"), 2);
        let mut totals = ClusterTotals::default();
        totals.add_node(&gpu_node, 1);
        assert_eq!(limits.max_new_nodes(&totals, &gpu_node, 5).0, 1);
        assert_eq!(limits.max_new_nodes(&totals, &node(8), 5), (5, None));
        let mut amd = node(8);
        amd.capacity.set(ResourceName::parse("amd.com/gpu"), 8);
        assert_eq!(limits.max_new_nodes(&totals, &amd, 5), (5, None));
    }

    #[test]
    fn gpu_limits_match_the_accelerator_label_value_too() {
        // The operator's semantics: the type is the node's cluster-api/accelerator value.
        let (name, range) = parse_gpu_limit("nvidia-t4:1:4").unwrap();
        let limits = ResourceLimits {
            gpus: vec![(name, range)],
            ..Default::default()
        };
        let t4 = |gpus: i64| {
            let mut n = node(8);
            n.capacity.set(ResourceName::parse("nvidia.com/gpu"), gpus);
            n.labels
                .insert(Sym::new(GPU_TYPE_LABEL), Sym::new("nvidia-t4"));
            n
        };
        let mut a100 = node(8);
        a100.capacity.set(ResourceName::parse("nvidia.com/gpu"), 8);
        a100.labels
            .insert(Sym::new(GPU_TYPE_LABEL), Sym::new("nvidia-a100"));
        let totals = ClusterTotals::from_nodes([&t4(2), &a100]);
        assert_eq!(totals.gpus.get(&Sym::new("nvidia-t4")), Some(&2));
        assert_eq!(totals.gpus.get(&Sym::new("nvidia.com/gpu")), Some(&10));
        // Two more T4s fit under 4; A100 nodes are another type, not limited.
        assert_eq!(
            limits.max_new_nodes(&totals, &t4(2), 3),
            (1, Some(LimitReached::Gpu(ResourceName::parse("nvidia-t4"))))
        );
        assert_eq!(limits.max_new_nodes(&totals, &a100, 3), (3, None));
        // The min: the last T4 node stays; an A100 node may go.
        assert_eq!(
            limits.check_removal(&totals, &t4(2)),
            Err(LimitReached::Gpu(ResourceName::parse("nvidia-t4")))
        );
        assert_eq!(limits.check_removal(&totals, &a100), Ok(()));
        // A label value equal to the resource name is not counted twice.
        let mut same = node(8);
        same.capacity.set(ResourceName::parse("nvidia.com/gpu"), 2);
        same.labels
            .insert(Sym::new(GPU_TYPE_LABEL), Sym::new("nvidia.com/gpu"));
        let t = ClusterTotals::from_nodes([&same]);
        assert_eq!(t.gpus.get(&Sym::new("nvidia.com/gpu")), Some(&2));
    }

    /// A node's slice of `gpus` devices of `gpu.nvidia.com`, each with `type: gpu`.
    fn gpu_slice(node: &str, gpus: usize) -> ResourceSlice {
        use crate::dra::{AttrValue, Device, SliceReach};
        ResourceSlice {
            name: Arc::from(node),
            driver: Sym::new("gpu.nvidia.com"),
            pool: Arc::from(node),
            generation: 1,
            slice_count: 1,
            reach: SliceReach::Node(Sym::new(node)),
            devices: (0..gpus)
                .map(|i| Device {
                    name: Arc::from(format!("gpu-{i}")),
                    attributes: vec![(Arc::from("type"), AttrValue::String(Arc::from("gpu")))],
                    capacity: Vec::new(),
                })
                .collect(),
        }
    }

    /// DRA GPUs (devices with `type: gpu`) count under their driver's name: a template carries
    /// them, a cluster's node has them in its ResourceSlices; the accelerator label counts them
    /// among all the node's GPUs.
    #[test]
    fn dra_gpus_count_under_their_driver_and_the_label() {
        use crate::dra::NodeDevices;
        let slice = gpu_slice;
        let mut dra = Dra::default();
        dra.set_slices(vec![slice("a", 4)]);
        let mut a = node(8);
        a.name = Sym::new("a");
        a.labels
            .insert(Sym::new(GPU_TYPE_LABEL), Sym::new("nvidia-h100"));
        let totals = ClusterTotals::from_nodes_and_devices([&a], &dra);
        assert_eq!(totals.gpus.get(&Sym::new("gpu.nvidia.com")), Some(&4));
        assert_eq!(totals.gpus.get(&Sym::new("nvidia-h100")), Some(&4));
        // Without the slices, the node has no GPU.
        assert!(ClusterTotals::from_nodes([&a]).gpus.is_empty());
        let (name, range) = parse_gpu_limit("gpu.nvidia.com:0:12").unwrap();
        let limits = ResourceLimits {
            gpus: vec![(name, range)],
            ..Default::default()
        };
        let mut template = node(8);
        template.devices = Some(Arc::new(NodeDevices {
            slices: vec![Arc::new(slice("t", 4))],
        }));
        assert_eq!(gpus_of(&template, Sym::new("gpu.nvidia.com")), 4);
        assert_eq!(
            limits.max_new_nodes(&totals, &template, 3),
            (
                2,
                Some(LimitReached::Gpu(ResourceName::parse("gpu.nvidia.com")))
            )
        );
        assert_eq!(
            LimitReached::Gpu(ResourceName::parse("gpu.nvidia.com")).to_string(),
            "exceeded quota: cluster-wide gpu.nvidia.com"
        );
        let mut grown = totals.clone();
        grown.add_node(&template, 2);
        assert_eq!(grown.gpus.get(&Sym::new("gpu.nvidia.com")), Some(&12));
        assert_eq!(limits.max_new_nodes(&grown, &template, 1).0, 0);
        grown.remove_node(&template, 1);
        assert_eq!(grown.gpus.get(&Sym::new("gpu.nvidia.com")), Some(&8));
    }

    /// A cluster node's DRA GPUs (its published slices) count against a `--gpu-total` minimum
    /// when it is removed, as its extended GPUs do: the last node holding the minimum stays,
    /// and a removed node takes its devices off the totals (the label's total too).
    #[test]
    fn removing_a_node_takes_off_its_published_dra_gpus() {
        let slice = |node: &str| gpu_slice(node, 4);
        let mut dra = Dra::default();
        dra.set_slices(vec![slice("a"), slice("b")]);
        let named = |name: &str| {
            let mut n = node(8);
            n.name = Sym::new(name);
            n.labels
                .insert(Sym::new(GPU_TYPE_LABEL), Sym::new("nvidia-h100"));
            n
        };
        let (a, b, cpu) = (named("a"), named("b"), named("c"));
        let mut totals = ClusterTotals::from_nodes_and_devices([&a, &b, &cpu], &dra);
        assert_eq!(totals.gpus.get(&Sym::new("gpu.nvidia.com")), Some(&8));
        for kind in ["gpu.nvidia.com:4:16", "nvidia-h100:4:16"] {
            let (name, range) = parse_gpu_limit(kind).unwrap();
            let limits = ResourceLimits {
                gpus: vec![(name, range)],
                ..Default::default()
            };
            assert_eq!(limits.check_removal(&totals, &a), Ok(()), "{kind}");
            let mut after = totals.clone();
            after.remove_node(&a, 1);
            assert_eq!(
                limits.check_removal(&after, &b),
                Err(LimitReached::Gpu(name)),
                "{kind}"
            );
            // A node without GPUs is not held by the GPU minimum.
            assert_eq!(limits.check_removal(&after, &cpu), Ok(()), "{kind}");
        }
        totals.remove_node(&a, 1);
        assert_eq!(totals.gpus.get(&Sym::new("gpu.nvidia.com")), Some(&4));
        assert_eq!(totals.gpus.get(&Sym::new("nvidia-h100")), Some(&4));
    }

    /// A starting node counts the GPUs its template promises, less those it has already, per
    /// type; a node that has them all adds nothing.
    #[test]
    fn a_starting_node_counts_the_gpus_its_template_promises() {
        let gpu = ResourceName::parse("nvidia.com/gpu");
        let mut template = node(8);
        template.capacity.set(gpu, 4);
        template
            .labels
            .insert(Sym::new(GPU_TYPE_LABEL), Sym::new("nvidia-t4"));
        let mut starting = node(8);
        starting
            .labels
            .insert(Sym::new(GPU_TYPE_LABEL), Sym::new("nvidia-t4"));
        let mut totals = ClusterTotals::from_nodes([&starting]);
        assert!(totals.gpus.is_empty());
        totals.count_promised_gpus(&starting, &template);
        assert_eq!(totals.gpus.get(&Sym::new("nvidia.com/gpu")), Some(&4));
        assert_eq!(totals.gpus.get(&Sym::new("nvidia-t4")), Some(&4));
        let mut started = ClusterTotals::from_nodes([&template]);
        started.count_promised_gpus(&template, &template);
        assert_eq!(started.gpus.get(&Sym::new("nvidia.com/gpu")), Some(&4));
        assert_eq!(started.nodes, 1);
    }

    #[test]
    fn removal_respects_minimums_and_does_not_repair() {
        let limits = ResourceLimits {
            cpu: Range::parse_cores("8:100").unwrap(),
            memory: Range::parse_memory_gib("0:1000").unwrap(),
            ..Default::default()
        };
        let totals = ClusterTotals::from_nodes([&node(4), &node(4), &node(4)]);
        assert_eq!(limits.check_removal(&totals, &node(4)), Ok(()));
        let small = ClusterTotals::from_nodes([&node(4), &node(4)]);
        assert_eq!(
            limits.check_removal(&small, &node(4)),
            Err(LimitReached::Cores)
        );
        // Already above max: adding is refused, nothing is removed to repair it.
        let over = ResourceLimits {
            cpu: Range::parse_cores("0:4").unwrap(),
            ..Default::default()
        };
        assert_eq!(
            over.max_new_nodes(&small, &node(4), 1),
            (0, Some(LimitReached::Cores))
        );
    }

    #[test]
    fn a_range_is_built_only_when_valid() {
        let r = Range::new(2, 8).unwrap();
        assert_eq!((r.min(), r.max()), (2, 8));
        assert_eq!(Range::new(5, 5).unwrap().max(), 5);
        assert_eq!(Range::new(9, 8), Err(InvalidRange { min: 9, max: 8 }));
        assert_eq!(Range::new(-1, 8), Err(InvalidRange { min: -1, max: 8 }));
        assert!(Range::new(0, -1).is_err());
    }

    #[test]
    fn limit_texts_are_validated() {
        assert_eq!(
            Range::parse_cores("8:128").unwrap(),
            Range {
                min: 8000,
                max: 128_000
            }
        );
        assert_eq!(Range::parse_memory_gib("4:256").unwrap().max, 256 * GI);
        for bad in ["", "8", "a:b", "1:2:3", "-1:4", "4:-1"] {
            assert!(
                matches!(Range::parse_cores(bad), Err(LimitParseError::Syntax { .. })),
                "{bad}"
            );
        }
        assert!(matches!(
            Range::parse_cores("9:8"),
            Err(LimitParseError::MinAboveMax { .. })
        ));
        assert!(parse_gpu_limit("0:4").is_err());
        assert!(parse_gpu_limit(":0:4").is_err());
        assert!(parse_gpu_limit("a/b/c:0:4").is_err());
        assert!(parse_gpu_limit("cpu:0:4").is_err());
        assert!(parse_gpu_limit("memory:0:4").is_err());
        assert!(parse_gpu_limit("-t4:0:4").is_err());
        let (t4, _) = parse_gpu_limit("nvidia-t4:0:4").unwrap();
        assert_eq!(t4.as_str(), "nvidia-t4");
        assert!(matches!(
            parse_gpu_limit("nvidia.com/gpu:5:4"),
            Err(LimitParseError::MinAboveMax { .. })
        ));
    }
}
