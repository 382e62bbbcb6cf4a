//! The `price` expander: prefer the options whose new nodes cost the least for the pods they get
//! running, on nodes of about the size the cluster's size calls for.
//!
//! Cost model (after upstream's price expander, with the pod side priced from resources, since
//! Cluster API has no pricing model for pods):
//!
//! ```text
//! score      = unfitness * (n * node_price + stab_price) / (pod_price + stab_price)
//! pod_price  = unit * core_equivalents(pods_requests)
//! stab_price = unit * core_equivalents(0.5 CPU, 500 MiB)
//! unit       = the lowest price per core-equivalent of a node among the priced candidates
//! core_equivalents(r) = r.cpu / 1000 + r.memory / 4 GiB
//! unfitness  = (u - 1) * (1 - tanh((n - 1) / 15)) + 1,  u = max(p / c, c / p)
//! ```
//!
//! `c` is the new node's CPU and `p` the CPU of the *preferred node* for the cluster's size
//! (1 CPU up to 2 nodes, then doubling each time the cluster triples: 2 up to 6, 4 up to 20, 8 up
//! to 60, 16 up to 200, 32 above; 4 CPU when the size is unknown): a node far from it, larger or
//! smaller, is penalised, less so the more nodes the option adds. A node with a GPU gets the
//! unfitness 1000, which keeps GPU nodes for pods no other option can take; DRA GPUs count as
//! GPUs here (ours: upstream's test reads the GPU label and extended resources only). Memory is converted
//! at 4 GiB per core (the shape of upstream's 4-CPU / 16-GiB default preferred node); pricing the
//! pods at the cheapest unit price on offer keeps the score a ratio of prices, so multiplying
//! every price by a constant changes no decision. The lowest score wins, ties kept.
//!
//! This follows upstream in what it ranks: the stabilisation pod, the preferred node, the
//! unfitness suppression and the GPU override. Not modelled: the penalty for node groups that do
//! not exist yet (this autoscaler does not create groups). A consequence shared with upstream: for
//! a scale-up of one node, every option gets the same pods, so the cheaper node (weighted by its
//! unfitness) wins even when it holds less of what the pods need per unit of price.
//!
//! Options without a usable price (missing, negative, not finite) are dropped with a warning when
//! some other option has one; when none has, all survive and a warning says so. Options adding
//! no node are dropped the same way. It must never look at group names.

use super::{Expander, ExpanderName, ExpanderWarning, ExpansionOption, keep_min};
use autoscaler_model::Resources;

/// Bytes of memory counted as one core-equivalent (4 GiB).
pub const MEMORY_BYTES_PER_CORE_EQUIVALENT: f64 = 4.0 * 1024.0 * 1024.0 * 1024.0;

/// Core-equivalents of upstream's "stabilization pod" (0.5 CPU, 500 MiB).
pub const STABILIZATION_CORE_EQUIVALENTS: f64 =
    0.5 + 500.0 * 1024.0 * 1024.0 / MEMORY_BYTES_PER_CORE_EQUIVALENT;

/// Unfitness of a node that has a GPU: high enough that such nodes are chosen only when nothing
/// else can take the pods.
pub const GPU_UNFITNESS: f64 = 1000.0;

/// CPU cores plus memory in units of [`MEMORY_BYTES_PER_CORE_EQUIVALENT`]; negative amounts count
/// as zero.
pub fn core_equivalents(requests: &Resources) -> f64 {
    requests.cpu.max(0) as f64 / 1000.0
        + requests.memory.max(0) as f64 / MEMORY_BYTES_PER_CORE_EQUIVALENT
}

/// The price of one node of `option`, if it is usable (known, finite, not negative).
pub fn usable_price(option: &ExpansionOption) -> Option<f64> {
    option
        .node_price_per_hour
        .filter(|p| p.is_finite() && *p >= 0.0)
}

/// CPU cores of the node preferred for a cluster of `nodes` nodes (`None`: size unknown).
pub fn preferred_node_cores(nodes: Option<usize>) -> f64 {
    match nodes {
        None => 4.0,
        Some(0..=2) => 1.0,
        Some(3..=6) => 2.0,
        Some(7..=20) => 4.0,
        Some(21..=60) => 8.0,
        Some(61..=200) => 16.0,
        Some(_) => 32.0,
    }
}

/// How far `option`'s node is from the preferred node (1 = a perfect fit), damped by the number
/// of nodes the option adds; [`GPU_UNFITNESS`] for a node with a GPU.
pub fn unfitness(option: &ExpansionOption, preferred_cores: f64) -> f64 {
    let node = &option.node_allocatable;
    if option.node_dra_gpus > 0
        || node
            .extended
            .iter()
            .any(|(name, n)| *n > 0 && is_gpu(*name))
    {
        return GPU_UNFITNESS;
    }
    let cores = node.cpu.max(0) as f64 / 1000.0;
    let raw = if cores > 0.0 && preferred_cores > 0.0 {
        (preferred_cores / cores).max(cores / preferred_cores)
    } else {
        1.0
    };
    let extra_nodes = option.node_count.saturating_sub(1) as f64;
    (raw - 1.0) * (1.0 - (extra_nodes / 15.0).tanh()) + 1.0
}

fn is_gpu(name: autoscaler_model::Sym) -> bool {
    autoscaler_model::ResourceName::Extended(name).is_gpu()
}

/// The price per core-equivalent of `option`'s node, if it has a price and any CPU or memory.
fn unit_price(option: &ExpansionOption) -> Option<f64> {
    let per_node = core_equivalents(&option.node_allocatable);
    let price = usable_price(option)?;
    (per_node > 0.0).then(|| price / per_node)
}

/// The price score of `option` (lower is better) given the preferred node's cores and the unit
/// price of a core-equivalent, or why it has none.
pub fn price_score(
    option: &ExpansionOption,
    preferred_cores: f64,
    unit: f64,
) -> Result<f64, &'static str> {
    let price = usable_price(option).ok_or("no usable price")?;
    if option.node_count == 0 {
        return Err("it adds no node");
    }
    let nodes_price = option.node_count as f64 * price;
    let stabilization = unit * STABILIZATION_CORE_EQUIVALENTS;
    let pods_price = unit * core_equivalents(&option.pods_requests);
    let ratio = (nodes_price + stabilization) / (pods_price + stabilization);
    let score = unfitness(option, preferred_cores) * ratio;
    if score.is_finite() {
        Ok(score)
    } else {
        Err("cost is not finite")
    }
}

/// Keeps the options with the lowest price score for a cluster of `cluster_nodes` nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Price {
    /// Nodes in the cluster, upcoming ones included (`None`: unknown).
    pub cluster_nodes: Option<usize>,
}

impl Expander for Price {
    fn name(&self) -> ExpanderName {
        ExpanderName::Price
    }

    fn filter(
        &self,
        options: &[ExpansionOption],
        candidates: &[usize],
        warnings: &mut Vec<ExpanderWarning>,
    ) -> Vec<usize> {
        let (priced, unpriced): (Vec<usize>, Vec<usize>) = candidates
            .iter()
            .copied()
            .filter(|&i| i < options.len())
            .partition(|&i| usable_price(&options[i]).is_some());
        if priced.is_empty() {
            if !candidates.is_empty() {
                warnings.push(ExpanderWarning::NoPrices);
            }
            return candidates.to_vec();
        }
        warnings.extend(unpriced.into_iter().map(|i| ExpanderWarning::PriceUnknown {
            group: options[i].group.clone(),
        }));
        // Pods priced at the cheapest core-equivalent on offer (1 if no node has CPU or memory:
        // then only the node prices differ).
        let unit = priced
            .iter()
            .filter_map(|&i| unit_price(&options[i]))
            .fold(None, |m: Option<f64>, u| Some(m.map_or(u, |m| m.min(u))))
            .filter(|u| *u > 0.0)
            .unwrap_or(1.0);
        let preferred = preferred_node_cores(self.cluster_nodes);
        keep_min(ExpanderName::Price, options, &priced, warnings, |o| {
            price_score(o, preferred, unit)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale_up::expander::tests::{opt, with_price, with_req};
    use autoscaler_model::Sym;

    const UNKNOWN: Option<usize> = None;

    #[test]
    fn score_is_stabilised_price_ratio_times_unfitness() {
        // 2 nodes of 4 cores (the preferred size when the cluster size is unknown: unfitness 1)
        // at 0.5/h for 3 cores + 4 GiB (= 4 core-equivalents), unit price 0.25 per
        // core-equivalent given.
        let o = with_price(with_req(opt("a", 2, 3, 4000, 16), 3000, 4), 0.5);
        let s = price_score(&o, preferred_node_cores(UNKNOWN), 0.25).expect("priced");
        let stab = 0.25 * STABILIZATION_CORE_EQUIVALENTS;
        assert!(
            (s - (1.0 + stab) / (0.25 * 4.0 + stab)).abs() < 1e-12,
            "{s}"
        );
        // Pods that request nothing still get a finite score.
        let empty = with_price(opt("b", 1, 1, 4000, 16), 0.3);
        let s = price_score(&empty, 4.0, 0.25).expect("priced");
        assert!((s - (0.3 + stab) / stab).abs() < 1e-12, "{s}");
    }

    #[test]
    fn preferred_node_doubles_each_time_the_cluster_triples() {
        let sizes = [0, 2, 3, 6, 7, 20, 21, 60, 61, 200, 201, 100_000];
        let cores: Vec<f64> = sizes
            .iter()
            .map(|&n| preferred_node_cores(Some(n)))
            .collect();
        assert_eq!(
            cores,
            vec![
                1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 8.0, 8.0, 16.0, 16.0, 32.0, 32.0
            ]
        );
        assert_eq!(preferred_node_cores(UNKNOWN), 4.0);
    }

    #[test]
    fn unfitness_is_symmetric_and_fades_with_the_node_count() {
        let big = opt("big", 1, 1, 64_000, 256);
        let small = opt("small", 1, 1, 1_000, 4);
        assert_eq!(unfitness(&big, 8.0), 8.0);
        assert_eq!(unfitness(&small, 8.0), 8.0);
        assert_eq!(unfitness(&opt("fit", 1, 1, 8_000, 32), 8.0), 1.0);
        let many = opt("big", 16, 1, 64_000, 256);
        let u = unfitness(&many, 8.0);
        // (8 - 1) * (1 - tanh(1)) + 1
        assert!((u - (7.0 * (1.0 - 1f64.tanh()) + 1.0)).abs() < 1e-12, "{u}");
        let mut gpu = opt("gpu", 1, 1, 8_000, 32);
        gpu.node_allocatable
            .extended
            .push((Sym::new("nvidia.com/gpu"), 2));
        assert_eq!(unfitness(&gpu, 8.0), GPU_UNFITNESS);
    }

    #[test]
    fn one_node_for_the_same_pods_goes_to_the_cheaper_fitter_node() {
        // Upstream's myopia, kept: a +1 scale-up for the same pods on a 96-CPU node at 4.6 or a
        // 64-CPU node at 4.0 in a 300-node cluster (preferred 32 CPU) picks the 64-CPU node.
        let options = vec![
            with_price(with_req(opt("general", 1, 3, 96_000, 384), 6000, 12), 4.6),
            with_price(with_req(opt("highmem", 1, 3, 64_000, 512), 6000, 12), 4.0),
        ];
        let p = Price {
            cluster_nodes: Some(300),
        };
        assert_eq!(p.best(&options), vec![1]);
        // 2,560 cores of CPU-bound pods: 27 general or 40 highmem nodes; the node count damps the unfitness and the total price decides.
        let options = vec![
            with_price(
                with_req(opt("general", 27, 500, 96_000, 384), 2_560_000, 4600),
                4.6,
            ),
            with_price(
                with_req(opt("highmem", 40, 500, 64_000, 512), 2_560_000, 4600),
                4.0,
            ),
        ];
        assert_eq!(p.best(&options), vec![0]);
    }

    #[test]
    fn gpu_nodes_lose_to_any_cpu_node() {
        let mut gpu = with_price(with_req(opt("gpu", 1, 4, 32_000, 128), 8000, 32), 1.0);
        gpu.node_allocatable
            .extended
            .push((Sym::new("nvidia.com/gpu"), 8));
        let cpu = with_price(with_req(opt("cpu", 4, 4, 4_000, 16), 8000, 32), 5.0);
        let p = Price {
            cluster_nodes: Some(10),
        };
        assert_eq!(p.best(&[gpu.clone(), cpu]), vec![1]);
        // Alone, the GPU option is still chosen.
        assert_eq!(p.best(&[gpu]), vec![0]);
    }

    /// A node whose GPUs are DRA devices (not in its allocatable) is a GPU node too.
    #[test]
    fn dra_gpu_nodes_lose_to_any_cpu_node() {
        let mut gpu = with_price(with_req(opt("gpu", 1, 4, 32_000, 128), 8000, 32), 1.0);
        gpu.node_dra_gpus = 8;
        assert_eq!(unfitness(&gpu, 8.0), GPU_UNFITNESS);
        let cpu = with_price(with_req(opt("cpu", 4, 4, 4_000, 16), 8000, 32), 5.0);
        let p = Price {
            cluster_nodes: Some(10),
        };
        assert_eq!(p.best(&[gpu, cpu]), vec![1]);
    }

    #[test]
    fn scaling_every_price_changes_no_decision() {
        let options = vec![
            with_price(with_req(opt("small", 4, 4, 4000, 16), 4000, 8), 0.2),
            with_price(with_req(opt("big", 1, 4, 16_000, 64), 4000, 8), 0.9),
            with_price(with_req(opt("mid", 2, 4, 8000, 32), 4000, 8), 0.5),
        ];
        let p = Price {
            cluster_nodes: Some(30),
        };
        let want = p.best(&options);
        for k in [0.001, 3.0, 1000.0] {
            let scaled: Vec<_> = options
                .iter()
                .cloned()
                .map(|mut o| {
                    o.node_price_per_hour = o.node_price_per_hour.map(|x| x * k);
                    o
                })
                .collect();
            assert_eq!(p.best(&scaled), want, "x{k}");
        }
    }

    #[test]
    fn unpriced_options_are_dropped_unless_none_is_priced() {
        let options = vec![
            opt("unknown", 1, 1, 4000, 16),
            with_price(opt("nan", 1, 1, 4000, 16), f64::NAN),
            with_price(opt("known", 1, 1, 4000, 16), 9.0),
        ];
        let mut w = Vec::new();
        assert_eq!(
            Price::default().filter(&options, &[0, 1, 2], &mut w),
            vec![2]
        );
        assert_eq!(
            w,
            vec![
                ExpanderWarning::PriceUnknown {
                    group: "unknown".into()
                },
                ExpanderWarning::PriceUnknown {
                    group: "nan".into()
                },
            ]
        );
        let mut w = Vec::new();
        assert_eq!(
            Price::default().filter(&options, &[0, 1], &mut w),
            vec![0, 1]
        );
        assert_eq!(w, vec![ExpanderWarning::NoPrices]);
    }
}
