//! The `unit-price` expander (ours, not upstream's): prefer the options whose node group sells
//! what the pending pods need at the lowest price per unit.
//!
//! Score of an option: `node_price * max_r(R_r / A_r)` over CPU, memory, ephemeral storage, pod
//! slots, every extended resource (GPUs) the pods request and DRA GPUs, where `R` is the
//! option's pods' summed requests (for DRA GPUs, the GPUs their claims ask) and `A` one new
//! node's allocatable (for DRA GPUs, its devices with `type: gpu`): the price of the share of a node the
//! pods take on the resource that binds them, that is the price per copy of this pod mix when
//! nodes are full. The lowest score wins, ties kept (chain another expander after it, e.g.
//! `unit-price,least-waste`).
//!
//! Why it exists: `least-waste` and upstream's `price` judge an option by the nodes it adds
//! now. For the steady trickle of one-node scale-ups of a large cluster, every option gets the
//! same pods, so they prefer the smaller or cheaper node even when it holds fewer of these pods
//! per unit of price; the node then fills up over the following minutes with more pods of the
//! same mix, at that worse price. Scoring the price per unit of the binding resource does not
//! depend on how many nodes this one scale-up adds, so it keeps choosing the shape the workload's
//! mix is cheapest on.
//!
//! An option without a usable price, adding no node, or whose node lacks a resource the pods
//! request, cannot be scored and is dropped with a warning (unless none can be scored: then all
//! survive). It must never look at group names.

use super::price::usable_price;
use super::{Expander, ExpanderName, ExpanderWarning, ExpansionOption, keep_min};
use autoscaler_model::Resources;

/// Keeps the options with the lowest price per unit of the pods' binding resource.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnitPrice;

/// The largest `requested / offered` over the resources the pods request (0 when they request
/// nothing), or `None` when a new node offers none of a requested resource.
pub fn binding_share(requests: &Resources, node: &Resources) -> Option<f64> {
    let share = |requested: i64, offered: i64| -> Option<f64> {
        match (requested.max(0), offered.max(0)) {
            (0, _) => Some(0.0),
            (_, 0) => None,
            (r, a) => Some(r as f64 / a as f64),
        }
    };
    let mut worst = share(requests.cpu, node.cpu)?
        .max(share(requests.memory, node.memory)?)
        .max(share(requests.ephemeral_storage, node.ephemeral_storage)?)
        .max(share(requests.pods, node.pods)?);
    for (name, amount) in &requests.extended {
        let offered = node
            .extended
            .iter()
            .find(|(n, _)| n == name)
            .map_or(0, |(_, a)| *a);
        worst = worst.max(share(*amount, offered)?);
    }
    Some(worst)
}

/// The unit-price score of `option` (lower is better), or why it has none.
pub fn unit_price_score(option: &ExpansionOption) -> Result<f64, &'static str> {
    let price = usable_price(option).ok_or("no usable price")?;
    if option.node_count == 0 {
        return Err("it adds no node");
    }
    let share = binding_share(&option.pods_requests, &option.node_allocatable)
        .ok_or("its node offers none of a resource the pods request")?;
    let dra = match (option.pods_dra_gpus.max(0), option.node_dra_gpus.max(0)) {
        (0, _) => 0.0,
        (_, 0) => return Err("its node offers none of a resource the pods request"),
        (r, a) => r as f64 / a as f64,
    };
    Ok(price * share.max(dra))
}

impl Expander for UnitPrice {
    fn name(&self) -> ExpanderName {
        ExpanderName::UnitPrice
    }

    fn filter(
        &self,
        options: &[ExpansionOption],
        candidates: &[usize],
        warnings: &mut Vec<ExpanderWarning>,
    ) -> Vec<usize> {
        keep_min(
            ExpanderName::UnitPrice,
            options,
            candidates,
            warnings,
            unit_price_score,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale_up::expander::tests::{opt, with_price, with_req};
    use autoscaler_model::Sym;

    #[test]
    fn a_one_node_trickle_goes_to_the_shape_cheapest_for_its_binding_resource() {
        // 6 cores and 12 GiB (CPU binds on both shapes): 4.6 * 6/96 = 0.2875 on the 96-CPU
        // node, 4.0 * 6/64 = 0.375 on the cheaper 64-CPU / 512-GiB one.
        let cpu_bound = vec![
            with_price(with_req(opt("general", 1, 3, 96_000, 384), 6000, 12), 4.6),
            with_price(with_req(opt("highmem", 1, 3, 64_000, 512), 6000, 12), 4.0),
        ];
        assert_eq!(UnitPrice.best(&cpu_bound), vec![0]);
        let s = unit_price_score(&cpu_bound[0]).expect("scorable");
        assert!((s - 4.6 * 6.0 / 96.0).abs() < 1e-12, "{s}");
        // 2 cores and 96 GiB (memory binds): the 512-GiB node sells memory cheaper.
        let memory_bound = vec![
            with_price(with_req(opt("general", 1, 1, 96_000, 384), 2000, 96), 4.6),
            with_price(with_req(opt("highmem", 1, 1, 64_000, 512), 2000, 96), 4.0),
        ];
        assert_eq!(UnitPrice.best(&memory_bound), vec![1]);
    }

    #[test]
    fn gpus_bind_when_requested_and_a_node_without_them_is_unscorable() {
        let gpu = Sym::new("nvidia.com/gpu");
        let mut eight = with_price(with_req(opt("gpu-8x", 1, 1, 96_000, 384), 8000, 32), 24.0);
        eight.node_allocatable.extended.push((gpu, 8));
        let mut two = with_price(with_req(opt("gpu-2x", 1, 1, 104_000, 512), 8000, 32), 7.0);
        two.node_allocatable.extended.push((gpu, 2));
        let cpu = with_price(with_req(opt("cpu", 1, 1, 32_000, 256), 8000, 32), 1.5);
        let mut options = vec![eight, two, cpu];
        for o in &mut options {
            o.pods_requests.extended.push((gpu, 1));
        }
        // One GPU: 24/8 = 3.0 against 7/2 = 3.5; the CPU node cannot be scored.
        let mut w = Vec::new();
        assert_eq!(UnitPrice.filter(&options, &[0, 1, 2], &mut w), vec![0]);
        assert_eq!(w.len(), 1);
        // Without GPUs the CPU-only node is cheapest: 1.5 * 8/32.
        for o in &mut options {
            o.pods_requests.extended.clear();
        }
        assert_eq!(UnitPrice.best(&options), vec![2]);
    }

    /// DRA GPUs (not in the allocatable) bind as extended GPUs do, and a node without them
    /// cannot be scored for pods whose claims ask GPUs.
    #[test]
    fn dra_gpus_bind_as_extended_gpus_do() {
        let mut eight = with_price(with_req(opt("gpu-8x", 1, 1, 96_000, 384), 8000, 32), 24.0);
        eight.node_dra_gpus = 8;
        let mut two = with_price(with_req(opt("gpu-2x", 1, 1, 104_000, 512), 8000, 32), 7.0);
        two.node_dra_gpus = 2;
        let cpu = with_price(with_req(opt("cpu", 1, 1, 32_000, 256), 8000, 32), 1.5);
        let mut options = vec![eight, two, cpu];
        for o in &mut options {
            o.pods_dra_gpus = 1;
        }
        let mut w = Vec::new();
        assert_eq!(UnitPrice.filter(&options, &[0, 1, 2], &mut w), vec![0]);
        assert_eq!(w.len(), 1);
        let s = unit_price_score(&options[1]).expect("scorable");
        assert!((s - 7.0 / 2.0).abs() < 1e-12, "{s}");
        // Pods asking no GPU: the cores bind, the 2-GPU node's are cheaper than the 8-GPU's.
        for o in &mut options {
            o.pods_dra_gpus = 0;
        }
        assert_eq!(UnitPrice.best(&options[..2]), vec![1]);
    }

    #[test]
    fn pods_requesting_nothing_tie_and_missing_prices_warn() {
        let options = vec![
            with_price(opt("a", 1, 1, 4000, 16), 1.0),
            with_price(opt("b", 2, 1, 8000, 32), 9.0),
            opt("unpriced", 1, 1, 4000, 16),
        ];
        let mut w = Vec::new();
        assert_eq!(UnitPrice.filter(&options, &[0, 1, 2], &mut w), vec![0, 1]);
        assert_eq!(w.len(), 1);
        let mut w = Vec::new();
        assert_eq!(UnitPrice.filter(&options, &[2], &mut w), vec![2]);
        assert_eq!(
            w,
            vec![ExpanderWarning::NothingScorable {
                expander: ExpanderName::UnitPrice
            }]
        );
    }
}
