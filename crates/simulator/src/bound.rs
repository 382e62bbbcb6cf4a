//! The fluid lower bound of a run: how few nodes, and how cheap a mix of them, could have held
//! the pods at each instant if pods could be split across nodes (no packing loss) and nodes
//! came and went instantly (no provisioning or scale-down delays).
//!
//! At each metrics sample of the run (the same samples, hence the same time base and the same
//! trace rows, as the report's node-hours) the demand is the summed requests of the pods bound
//! to a node, DaemonSet pods excepted (they come with nodes, not with the workload); the report
//! counts replayed pods as the trace gives them instead, and takes the work evictions made lost
//! out of the rest first (see `distance`). Bound pods
//! rather than all live pods: a pod waiting for a node does not stretch the demand, so over a run
//! each pod counts for exactly the time it ran, and the bound is a true lower bound of the run
//! (no node set smaller than it could have held those pods at those instants).
//!
//! - With one node shape, the nodes needed at an instant are `max over resources of demand /
//!   allocatable` (cpu, memory, pods, and every extended resource a shape offers).
//! - DRA devices count as a resource named after their driver: a group's `dra:` driver offers
//!   its devices per node, and the devices allocated to the bound pods' claims are the demand
//!   (a claim's devices once, however many pods share it). Pods without claims add nothing.
//! - With several shapes, two small linear programs per instant: the fewest nodes, and the
//!   cheapest mix (prices per node-hour), whose summed allocatable covers the demand. Which
//!   pod may run on which shape (selectors, taints) and the groups' max sizes are ignored: they
//!   could only raise the bound.
//!
//! It measures a finished run and decides nothing; the autoscaler must never read it.

use std::collections::BTreeMap;

use autoscaler_model::Resources;
use autoscaler_model::{parse_milli, parse_units};
#[cfg(test)]
use autoscaler_world::Sample;
use autoscaler_world::SimTime;
use microlp::{ComparisonOp, OptimizationDirection, Problem};

use super::scenario::Group;

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// The allocatable of one node of a group, per resource, and its price per node-hour.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    /// Allocatable per resource name (`cpu` in cores, `memory` in GiB, `pods`, extended ones
    /// in their units).
    pub allocatable: BTreeMap<String, f64>,
    /// Price per node-hour (0 when the scenario gives none).
    pub price: f64,
}

impl Shape {
    /// The shape of a scenario group's nodes (the world gives nodes their capacity as
    /// allocatable). `None` when a quantity does not parse (the scenario was validated, so only
    /// for hand-built groups).
    pub fn of_group(g: &Group) -> Option<Shape> {
        let mut allocatable = BTreeMap::new();
        allocatable.insert("cpu".into(), parse_milli(&g.spec.cpu).ok()? as f64 / 1000.0);
        allocatable.insert(
            "memory".into(),
            parse_units(&g.spec.memory).ok()? as f64 / GIB,
        );
        allocatable.insert("pods".into(), f64::from(g.spec.max_pods));
        if let Some((name, count)) = &g.spec.gpu {
            allocatable.insert(name.clone(), f64::from(*count));
        }
        if let Some(dra) = &g.dra {
            allocatable.insert(dra.driver.clone(), dra.devices.len() as f64);
        }
        Some(Shape {
            allocatable,
            price: g.price_per_hour,
        })
    }
}

/// The demand of one instant in the units of [`Shape::allocatable`].
pub fn demand(r: &Resources) -> BTreeMap<String, f64> {
    let mut d = BTreeMap::new();
    d.insert("cpu".into(), r.cpu.max(0) as f64 / 1000.0);
    d.insert("memory".into(), r.memory.max(0) as f64 / GIB);
    d.insert("pods".into(), r.pods.max(0) as f64);
    for (name, v) in &r.extended {
        d.insert(name.to_string(), (*v).max(0) as f64);
    }
    d
}

/// The bound over a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FluidBound {
    /// Node-hours of the fewest nodes at each instant.
    pub node_hours: f64,
    /// Cost of the cheapest mix at each instant.
    pub cost: f64,
    /// The fewest nodes at each sample (fractional), for the plot.
    pub nodes: Vec<f64>,
    /// Demanded resources no shape offers (left out of the bound).
    pub uncovered: Vec<String>,
    /// Per resource, the node-hours it alone needs on the shape offering most of it (which
    /// resource binds; the bound is at least the largest of them).
    pub by_resource: BTreeMap<String, f64>,
}

/// The bound of a run sampled by `samples`, over the node `shapes` of its groups (all their
/// bound pods counted).
#[cfg(test)]
pub fn fluid_bound(shapes: &[Shape], samples: &[Sample]) -> FluidBound {
    let points: Vec<(SimTime, &Resources)> = samples
        .iter()
        .map(|s| (s.at_ms, &s.bound_requests))
        .collect();
    fluid_bound_of(shapes, &points)
}

/// The bound of a demand given at instants `(at_ms, requests)`, oldest first: each demand holds
/// until the next instant (the last one counts for no time).
pub fn fluid_bound_of(shapes: &[Shape], points: &[(SimTime, &Resources)]) -> FluidBound {
    let shapes = distinct(shapes);
    let mut out = FluidBound::default();
    let mut uncovered = std::collections::BTreeSet::new();
    // Consecutive samples often hold the same pods: their programs are solved once.
    let mut last: Option<(Resources, (f64, f64))> = None;
    let mut at_sample = |r: &Resources| -> (f64, f64) {
        if let Some((seen, answer)) = &last
            && seen == r
        {
            return *answer;
        }
        let d = demand(r);
        for (name, v) in &d {
            if *v > 0.0 && !shapes.iter().any(|sh| offers(sh, name)) {
                uncovered.insert(name.clone());
            }
        }
        let nodes = cheapest(&shapes, &d, |_| 1.0);
        let cost = cheapest(&shapes, &d, |sh| sh.price);
        last = Some((r.clone(), (nodes, cost)));
        (nodes, cost)
    };
    let per_sample: Vec<(f64, f64)> = points.iter().map(|(_, r)| at_sample(r)).collect();
    let largest = |name: &str| {
        shapes
            .iter()
            .filter_map(|s| s.allocatable.get(name).copied())
            .fold(0.0, f64::max)
    };
    for (w, (nodes, cost)) in points.windows(2).zip(&per_sample) {
        let hours = w[1].0.saturating_sub(w[0].0) as f64 / 3_600_000.0;
        out.node_hours += nodes * hours;
        out.cost += cost * hours;
        for (name, v) in demand(w[0].1) {
            let cap = largest(&name);
            if cap > 0.0 {
                *out.by_resource.entry(name).or_default() += v / cap * hours;
            }
        }
    }
    out.nodes = per_sample.iter().map(|(n, _)| *n).collect();
    out.uncovered = uncovered.into_iter().collect();
    out
}

fn offers(shape: &Shape, resource: &str) -> bool {
    shape.allocatable.get(resource).is_some_and(|v| *v > 0.0)
}

/// The shapes with distinct allocatable, each at the lowest price it is offered at.
fn distinct(shapes: &[Shape]) -> Vec<Shape> {
    let mut out: Vec<Shape> = Vec::new();
    for s in shapes {
        match out.iter_mut().find(|o| o.allocatable == s.allocatable) {
            Some(o) => o.price = o.price.min(s.price),
            None => out.push(s.clone()),
        }
    }
    out
}

/// The least `sum(weight(shape) * nodes(shape))` over fractional node counts whose summed
/// allocatable covers `demand` (resources no shape offers are left out); 0 without shapes.
fn cheapest(
    shapes: &[Shape],
    demand: &BTreeMap<String, f64>,
    weight: impl Fn(&Shape) -> f64,
) -> f64 {
    let needed: Vec<(&String, f64)> = demand
        .iter()
        .filter(|(name, v)| **v > 0.0 && shapes.iter().any(|s| offers(s, name)))
        .map(|(name, v)| (name, *v))
        .collect();
    if needed.is_empty() || shapes.is_empty() {
        return 0.0;
    }
    if let [only] = shapes {
        let n = needed
            .iter()
            .map(|(name, v)| v / only.allocatable[*name])
            .fold(0.0, f64::max);
        return n * weight(only);
    }
    solve(shapes, &needed, &weight).unwrap_or_else(|| fallback(shapes, &needed, &weight))
}

/// The linear program: minimize the weighted node count subject to one covering constraint
/// per resource. Each constraint is divided by its demand so that coefficients stay near 1
/// (bytes and cores side by side would be ill-conditioned).
fn solve(
    shapes: &[Shape],
    needed: &[(&String, f64)],
    weight: &impl Fn(&Shape) -> f64,
) -> Option<f64> {
    let mut lp = Problem::new(OptimizationDirection::Minimize);
    let vars: Vec<_> = shapes
        .iter()
        .map(|s| lp.add_var(weight(s), (0.0, f64::INFINITY)))
        .collect();
    for (name, v) in needed {
        let terms: Vec<_> = shapes
            .iter()
            .zip(&vars)
            .filter_map(|(s, x)| {
                let a = s.allocatable.get(*name).copied().unwrap_or(0.0);
                (a > 0.0).then_some((*x, a / v))
            })
            .collect();
        lp.add_constraint(terms.as_slice(), ComparisonOp::Ge, 1.0);
    }
    let solution = lp.solve().ok()?.into_solution().ok()?;
    Some(solution.objective().max(0.0))
}

/// A feasible (not always least) answer if the solver fails: each resource covered by the
/// shape cheapest for it alone, summed.
fn fallback(shapes: &[Shape], needed: &[(&String, f64)], weight: &impl Fn(&Shape) -> f64) -> f64 {
    needed
        .iter()
        .map(|(name, v)| {
            shapes
                .iter()
                .filter(|s| offers(s, name))
                .map(|s| v / s.allocatable[*name] * weight(s))
                .fold(f64::INFINITY, f64::min)
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::Sym;

    fn shape(cpu: f64, mem: f64, gpu: f64, price: f64) -> Shape {
        let mut allocatable = BTreeMap::from([
            ("cpu".to_string(), cpu),
            ("memory".to_string(), mem),
            ("pods".to_string(), 110.0),
        ]);
        if gpu > 0.0 {
            allocatable.insert("nvidia.com/gpu".into(), gpu);
        }
        Shape { allocatable, price }
    }

    fn sample(at_s: u64, cpu_cores: i64, mem_gib: i64, gpu: i64, pods: i64) -> Sample {
        let mut r = Resources {
            cpu: cpu_cores * 1000,
            memory: mem_gib << 30,
            pods,
            ..Resources::default()
        };
        if gpu > 0 {
            r.extended.push((Sym::new("nvidia.com/gpu"), gpu));
        }
        Sample {
            at_ms: at_s * 1000,
            pending: 0,
            unschedulable: 0,
            running: 0,
            nodes: 0,
            nodes_per_group: BTreeMap::new(),
            machines_per_group: BTreeMap::new(),
            bound_requests: r,
            timed_requests: Resources::default(),
            empty_per_group: BTreeMap::new(),
            empty_fresh: 0,
        }
    }

    #[test]
    fn one_shape_needs_the_most_demanded_resource_over_its_allocatable() {
        let shapes = [shape(16.0, 64.0, 0.0, 2.0)];
        // 1 h of 40 cores / 80 GiB (2.5 nodes by cpu), then 1 h of 8 cores / 128 GiB (2 by memory).
        let samples = [
            sample(0, 40, 80, 0, 10),
            sample(3600, 8, 128, 0, 10),
            sample(7200, 0, 0, 0, 0),
        ];
        let b = fluid_bound(&shapes, &samples);
        assert!((b.node_hours - 4.5).abs() < 1e-9, "{b:?}");
        assert!((b.cost - 9.0).abs() < 1e-9, "{b:?}");
        assert_eq!(b.nodes, vec![2.5, 2.0, 0.0]);
        // cpu alone: 2.5 + 0.5 node-hours; memory alone: 1.25 + 2.
        assert!((b.by_resource["cpu"] - 3.0).abs() < 1e-9, "{b:?}");
        assert!((b.by_resource["memory"] - 3.25).abs() < 1e-9, "{b:?}");
        assert!(b.uncovered.is_empty());
        // The same shape offered twice counts once, at its lower price.
        let twice = [shape(16.0, 64.0, 0.0, 3.0), shape(16.0, 64.0, 0.0, 2.0)];
        assert_eq!(fluid_bound(&twice, &samples), b);
    }

    #[test]
    fn several_shapes_take_the_cheapest_mix_for_cost_and_the_fewest_nodes_for_node_hours() {
        // GPU nodes: 8 GPUs, 96 cores, 24/h. CPU nodes: 32 cores, 1.5/h.
        let shapes = [shape(96.0, 384.0, 8.0, 24.0), shape(32.0, 256.0, 0.0, 1.5)];
        // 8 GPUs and 160 cores for one hour.
        let samples = [sample(0, 160, 100, 8, 20), sample(3600, 0, 0, 0, 0)];
        let b = fluid_bound(&shapes, &samples);
        // Cheapest: 1 GPU node (96 cores) + 2 CPU nodes (64 cores) = 24 + 3 = 27.
        assert!((b.cost - 27.0).abs() < 1e-6, "{b:?}");
        // Fewest: GPU nodes alone, 160/96 = 1.667 of them (1 GPU node + 2 CPU nodes is 3).
        assert!((b.node_hours - (1.0 + 64.0 / 96.0)).abs() < 1e-6, "{b:?}");
    }

    /// A group's DRA driver offers its devices per node under the driver's name, and the
    /// devices the claims hold are demand: 28 GPUs on 8-GPU nodes need 3.5 of them, where
    /// CPU and memory alone would ask for fewer.
    #[test]
    fn dra_devices_are_demand_against_the_driver_s_devices() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
        let path = std::path::Path::new(dir).join("gpu-dra.yaml");
        let text = std::fs::read_to_string(&path).unwrap();
        let scenario = crate::scenario::Scenario::parse(&text, path.parent().unwrap()).unwrap();
        let shapes: Vec<Shape> = scenario.groups.iter().filter_map(Shape::of_group).collect();
        let gpu = shapes
            .iter()
            .find(|s| s.allocatable.contains_key("gpu.example.com"))
            .expect("the GPU group offers its DRA devices");
        assert_eq!(gpu.allocatable["gpu.example.com"], 8.0);
        assert!(shapes.iter().filter(|s| s.allocatable.len() == 3).count() == 1);
        let mut busy = sample(0, 56, 224, 0, 14);
        busy.bound_requests
            .extended
            .push((Sym::new("gpu.example.com"), 28));
        let b = fluid_bound(std::slice::from_ref(gpu), &[busy, sample(3600, 0, 0, 0, 0)]);
        assert!((b.node_hours - 3.5).abs() < 1e-9, "{b:?}");
        assert!(
            (b.by_resource["gpu.example.com"] - 3.5).abs() < 1e-9,
            "{b:?}"
        );
        assert!(b.uncovered.is_empty(), "{b:?}");
    }

    #[test]
    fn demand_no_shape_offers_is_left_out_and_named() {
        let shapes = [shape(16.0, 64.0, 0.0, 1.0)];
        let samples = [sample(0, 16, 1, 2, 1), sample(3600, 0, 0, 0, 0)];
        let b = fluid_bound(&shapes, &samples);
        assert!((b.node_hours - 1.0).abs() < 1e-9);
        assert_eq!(b.uncovered, vec!["nvidia.com/gpu".to_string()]);
        // No shapes at all: nothing to measure against.
        assert_eq!(fluid_bound(&[], &samples).node_hours, 0.0);
    }

    #[test]
    fn the_linear_program_is_never_above_a_feasible_mix() {
        let shapes = [
            shape(96.0, 384.0, 8.0, 24.0),
            shape(104.0, 512.0, 2.0, 6.0),
            shape(32.0, 256.0, 0.0, 1.5),
        ];
        for (cpu, mem, gpu) in [(500, 900, 30), (10, 2000, 1), (1000, 100, 0), (1, 1, 50)] {
            let d = demand(&sample(0, cpu, mem, gpu, 30).bound_requests);
            let needed: Vec<(&String, f64)> = d.iter().map(|(k, v)| (k, *v)).collect();
            let lp = cheapest(&shapes, &d, |s| s.price);
            let greedy = fallback(&shapes, &needed, &|s: &Shape| s.price);
            assert!(lp <= greedy + 1e-6, "{cpu}/{mem}/{gpu}: {lp} > {greedy}");
            // And it covers every resource of the demand by at least one node's worth of
            // the cheapest shape per unit: positive.
            assert!(lp > 0.0);
        }
    }
}
