//! The `random` expander: no preference at all.
//!
//! It keeps every candidate; the chain's final seeded tie-break then picks one uniformly, which
//! is what upstream's `random` does. It must never draw randomness itself.

use super::{Expander, ExpanderName, ExpanderWarning, ExpansionOption};

/// Keeps every option; the chain's tie-break chooses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Random;

impl Expander for Random {
    fn name(&self) -> ExpanderName {
        ExpanderName::Random
    }

    fn filter(
        &self,
        _options: &[ExpansionOption],
        candidates: &[usize],
        _warnings: &mut Vec<ExpanderWarning>,
    ) -> Vec<usize> {
        candidates.to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scale_up::expander::tests::opt;

    #[test]
    fn keeps_everything() {
        let options = vec![opt("a", 1, 1, 100, 100), opt("b", 2, 3, 100, 100)];
        assert_eq!(Random.best(&options), vec![0, 1]);
        assert_eq!(Random.best(&[]), Vec::<usize>::new());
    }
}
