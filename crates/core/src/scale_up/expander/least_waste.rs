//! The `least-waste` expander (upstream's default): prefer the options that leave the least idle
//! CPU and memory on the new nodes once the pods have landed.
//!
//! Score of an option: `(A_cpu - R_cpu) / A_cpu + (A_mem - R_mem) / A_mem`, where `A` is one new
//! node's allocatable times the node count and `R` the pods' summed requests; the lowest score
//! wins, ties kept. An option adding no node, or whose node has no CPU or no memory, cannot be
//! scored and is dropped (unless no option can be scored). It must never look at prices, group
//! names or resources other than CPU and memory: as upstream, GPUs (extended resources or DRA
//! devices alike) have no term of their own; they weigh through the node count, which the
//! estimator finds by allocating the pods' devices on the template's.

use super::{Expander, ExpanderName, ExpanderWarning, ExpansionOption, keep_min};

/// Keeps the options with the smallest idle CPU + memory fraction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeastWaste;

/// The waste score of `option` (0 = nothing idle, 2 = everything idle), or why it has none.
pub fn waste_score(option: &ExpansionOption) -> Result<f64, &'static str> {
    if option.node_count == 0 {
        return Err("it adds no node");
    }
    let nodes = i128::try_from(option.node_count).unwrap_or(i128::MAX);
    let fraction = |per_node: i64, requested: i64| -> Option<f64> {
        let available = i128::from(per_node).saturating_mul(nodes);
        if available <= 0 {
            return None;
        }
        let idle = available - i128::from(requested);
        Some(idle as f64 / available as f64)
    };
    let cpu = fraction(option.node_allocatable.cpu, option.pods_requests.cpu)
        .ok_or("its node has no allocatable CPU")?;
    let memory = fraction(option.node_allocatable.memory, option.pods_requests.memory)
        .ok_or("its node has no allocatable memory")?;
    Ok(cpu + memory)
}

impl Expander for LeastWaste {
    fn name(&self) -> ExpanderName {
        ExpanderName::LeastWaste
    }

    fn filter(
        &self,
        options: &[ExpansionOption],
        candidates: &[usize],
        warnings: &mut Vec<ExpanderWarning>,
    ) -> Vec<usize> {
        keep_min(
            ExpanderName::LeastWaste,
            options,
            candidates,
            warnings,
            waste_score,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale_up::expander::tests::{GIB, opt, with_req};

    #[test]
    fn score_is_idle_cpu_fraction_plus_idle_memory_fraction() {
        // 2 nodes of 4 cores / 8 GiB; pods request 6 cores and 4 GiB:
        // idle cpu 2/8 = 0.25, idle memory 12/16 = 0.75.
        let o = with_req(opt("a", 2, 3, 4000, 8), 6000, 4);
        let s = waste_score(&o).expect("scorable");
        assert!((s - 1.0).abs() < 1e-12, "{s}");
        let full = with_req(opt("b", 1, 1, 4000, 8), 4000, 8);
        assert_eq!(waste_score(&full), Ok(0.0));
    }

    #[test]
    fn keeps_the_least_wasteful_options_ties_included() {
        let options = vec![
            // idle 0.5 + 0.5 = 1.0
            with_req(opt("half", 1, 1, 4000, 8), 2000, 4),
            // idle 0.25 + 0.25 = 0.5
            with_req(opt("snug", 1, 1, 4000, 8), 3000, 6),
            // Same proportions on twice the nodes: 0.25 + 0.25.
            with_req(opt("snug2", 2, 2, 4000, 8), 6000, 12),
        ];
        assert_eq!(LeastWaste.best(&options), vec![1, 2]);
    }

    #[test]
    fn unscorable_options_are_dropped_with_a_warning() {
        let mut no_cpu = opt("nocpu", 1, 1, 0, 8);
        no_cpu.pods_requests.memory = GIB;
        let options = vec![no_cpu, with_req(opt("ok", 1, 1, 4000, 8), 100, 1)];
        let mut w = Vec::new();
        assert_eq!(LeastWaste.filter(&options, &[0, 1], &mut w), vec![1]);
        assert_eq!(w.len(), 1);
        let mut w = Vec::new();
        assert_eq!(LeastWaste.filter(&options, &[0], &mut w), vec![0]);
        assert_eq!(
            w,
            vec![ExpanderWarning::NothingScorable {
                expander: ExpanderName::LeastWaste
            }]
        );
    }

    #[test]
    fn huge_quantities_do_not_overflow() {
        let o = with_req(opt("big", usize::MAX, 1, i64::MAX, i64::MAX / GIB), 1, 1);
        let s = waste_score(&o).expect("scorable");
        assert!(s.is_finite() && s > 1.9, "{s}");
    }
}
