//! The `most-pods` expander: prefer the options that get the most pending pods running.
//!
//! It counts pods only (not their size) and keeps every option tied for the most. It must never
//! look at nodes, prices or group names.

use std::cmp::Reverse;

use super::{Expander, ExpanderName, ExpanderWarning, ExpansionOption, keep_min};

/// Keeps the options that schedule the most pods.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MostPods;

impl Expander for MostPods {
    fn name(&self) -> ExpanderName {
        ExpanderName::MostPods
    }

    fn filter(
        &self,
        options: &[ExpansionOption],
        candidates: &[usize],
        warnings: &mut Vec<ExpanderWarning>,
    ) -> Vec<usize> {
        keep_min(ExpanderName::MostPods, options, candidates, warnings, |o| {
            Ok(Reverse(o.pods.len()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale_up::expander::tests::opt;

    #[test]
    fn keeps_the_options_with_most_pods_ties_included() {
        let options = vec![
            opt("a", 1, 2, 4000, 8),
            opt("b", 3, 5, 4000, 8),
            opt("c", 2, 5, 4000, 8),
            opt("d", 1, 4, 4000, 8),
        ];
        assert_eq!(MostPods.best(&options), vec![1, 2]);
        assert_eq!(MostPods.best(&options[..1]), vec![0]);
    }

    #[test]
    fn filters_only_the_candidates_given() {
        let options = vec![
            opt("a", 1, 9, 4000, 8),
            opt("b", 1, 2, 4000, 8),
            opt("c", 1, 3, 4000, 8),
        ];
        let mut w = Vec::new();
        assert_eq!(MostPods.filter(&options, &[1, 2], &mut w), vec![2]);
        assert!(w.is_empty());
    }
}
