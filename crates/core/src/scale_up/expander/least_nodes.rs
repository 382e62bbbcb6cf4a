//! The `least-nodes` expander: prefer the options that add the fewest nodes.
//!
//! Options adding zero nodes are not meaningful and are dropped (as upstream does) unless every
//! candidate adds zero. It must never look at pods, prices or group names.

use super::{Expander, ExpanderName, ExpanderWarning, ExpansionOption, keep_min};

/// Keeps the options adding the fewest nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeastNodes;

impl Expander for LeastNodes {
    fn name(&self) -> ExpanderName {
        ExpanderName::LeastNodes
    }

    fn filter(
        &self,
        options: &[ExpansionOption],
        candidates: &[usize],
        warnings: &mut Vec<ExpanderWarning>,
    ) -> Vec<usize> {
        keep_min(
            ExpanderName::LeastNodes,
            options,
            candidates,
            warnings,
            |o| {
                if o.node_count == 0 {
                    Err("it adds no node")
                } else {
                    Ok(o.node_count)
                }
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale_up::expander::tests::opt;

    #[test]
    fn keeps_the_options_with_fewest_nodes() {
        let options = vec![
            opt("a", 3, 2, 4000, 8),
            opt("b", 2, 5, 4000, 8),
            opt("c", 2, 1, 4000, 8),
        ];
        assert_eq!(LeastNodes.best(&options), vec![1, 2]);
    }

    #[test]
    fn zero_node_options_are_dropped_unless_all_are() {
        let options = vec![opt("a", 0, 2, 4000, 8), opt("b", 4, 5, 4000, 8)];
        let mut w = Vec::new();
        assert_eq!(LeastNodes.filter(&options, &[0, 1], &mut w), vec![1]);
        assert!(matches!(
            &w[..],
            [ExpanderWarning::OptionNotScorable {
                expander: ExpanderName::LeastNodes,
                ..
            }]
        ));
        let mut w = Vec::new();
        assert_eq!(LeastNodes.filter(&options, &[0], &mut w), vec![0]);
        assert_eq!(
            w,
            vec![ExpanderWarning::NothingScorable {
                expander: ExpanderName::LeastNodes
            }]
        );
    }
}
