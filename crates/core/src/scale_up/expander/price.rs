//! The `price` expander: prefer the options whose new nodes cost the least for the pods they get
//! running.
//!
//! Cost model (after upstream's "node cost relative to pod cost" idea, with the pod side
//! measured in resources rather than in provider pod prices, which this crate does not have):
//!
//! ```text
//! score = node_count * node_price_per_hour / (core_equivalents(pods_requests) + S)
//! core_equivalents(r) = r.cpu / 1000 + r.memory / 4 GiB
//! S = core_equivalents(0.5 CPU, 500 MiB)
//! ```
//!
//! that is, the hourly cost of the new nodes per requested core-equivalent, memory converted at
//! 4 GiB per core (the shape of upstream's 4-CPU / 16-GiB reference node) and `S` the requests
//! of upstream's small "stabilization pod", which keeps the ratio finite for pods that request
//! nothing and damps it for tiny ones. The lowest score wins, ties kept.
//!
//! Options without a usable price (missing, negative, not finite) are dropped with a warning when
//! some other option has one; when none has, all survive and a warning says so. Options adding
//! no node are dropped the same way. Not modelled: upstream's preferred-node "unfitness", its
//! penalty for groups that do not exist yet, and its GPU override. It must never look at group
//! names.

use super::{Expander, ExpanderName, ExpanderWarning, ExpansionOption, keep_min};
use crate::model::resources::Resources;

/// Bytes of memory counted as one core-equivalent (4 GiB).
pub const MEMORY_BYTES_PER_CORE_EQUIVALENT: f64 = 4.0 * 1024.0 * 1024.0 * 1024.0;

/// Core-equivalents added to the pods' requests: those of a 0.5-CPU, 500-MiB pod.
pub const STABILIZATION_CORE_EQUIVALENTS: f64 =
    0.5 + 500.0 * 1024.0 * 1024.0 / MEMORY_BYTES_PER_CORE_EQUIVALENT;

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

/// The price score of `option` (hourly cost per requested core-equivalent; lower is better), or
/// why it has none.
pub fn price_score(option: &ExpansionOption) -> Result<f64, &'static str> {
    let price = usable_price(option).ok_or("no usable price")?;
    if option.node_count == 0 {
        return Err("it adds no node");
    }
    let cost = option.node_count as f64 * price;
    let score = cost / (core_equivalents(&option.pods_requests) + STABILIZATION_CORE_EQUIVALENTS);
    if score.is_finite() {
        Ok(score)
    } else {
        Err("cost is not finite")
    }
}

/// Keeps the options with the lowest node cost per requested core-equivalent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Price;

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
        keep_min(ExpanderName::Price, options, &priced, warnings, price_score)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale_up::expander::tests::{opt, with_price, with_req};

    #[test]
    fn score_is_cost_per_requested_core_equivalent() {
        // 2 nodes at 0.5/h for 3 cores + 4 GiB (= 1 core-equivalent): 1.0 / (4 + S).
        let o = with_price(with_req(opt("a", 2, 3, 4000, 16), 3000, 4), 0.5);
        let s = price_score(&o).expect("priced");
        assert!((s - 1.0 / (4.0 + STABILIZATION_CORE_EQUIVALENTS)).abs() < 1e-12);
        // Pods that request nothing still get a finite score: the cheapest node wins.
        let empty = with_price(opt("b", 1, 1, 4000, 16), 0.3);
        assert!(
            (price_score(&empty).expect("priced") - 0.3 / STABILIZATION_CORE_EQUIVALENTS).abs()
                < 1e-12
        );
    }

    #[test]
    fn keeps_the_cheapest_per_resource_not_the_cheapest_overall() {
        let options = vec![
            // Cheap node, but 4 of them for the same pods: 4 * 0.2 = 0.8.
            with_price(with_req(opt("small", 4, 4, 1000, 4), 4000, 8), 0.2),
            // One bigger node at 0.6.
            with_price(with_req(opt("big", 1, 4, 4000, 16), 4000, 8), 0.6),
            // Same as "big".
            with_price(with_req(opt("big2", 1, 4, 4000, 16), 4000, 8), 0.6),
        ];
        assert_eq!(Price.best(&options), vec![1, 2]);
    }

    #[test]
    fn unpriced_options_are_dropped_unless_none_is_priced() {
        let options = vec![
            opt("unknown", 1, 1, 4000, 16),
            with_price(opt("nan", 1, 1, 4000, 16), f64::NAN),
            with_price(opt("known", 1, 1, 4000, 16), 9.0),
        ];
        let mut w = Vec::new();
        assert_eq!(Price.filter(&options, &[0, 1, 2], &mut w), vec![2]);
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
        assert_eq!(Price.filter(&options, &[0, 1], &mut w), vec![0, 1]);
        assert_eq!(w, vec![ExpanderWarning::NoPrices]);
    }
}
