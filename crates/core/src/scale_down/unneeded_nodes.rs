//! The unneeded timers: since when each node has been continuously unneeded, kept across
//! loops in the scale-down state.
//!
//! Eligibility reads them (nodes unneeded longest are simulated first) and phase 3
//! (`unneeded`) rewrites them from the removal simulation's result; they live apart from both
//! so that neither phase imports the other. It never decides what is unneeded.

use rustc_hash::FxHashMap;

use autoscaler_model::Sym;

/// Since when each node has been unneeded (milliseconds since the Unix epoch).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnneededNodes {
    since: FxHashMap<Sym, i64>,
}

impl UnneededNodes {
    /// Records that exactly `nodes` are unneeded at `now_ms`: nodes already unneeded keep their
    /// time, new ones start now, the others are forgotten.
    pub fn update(&mut self, now_ms: i64, nodes: impl IntoIterator<Item = Sym>) {
        let mut next = FxHashMap::default();
        for n in nodes {
            let since = self.since.get(&n).copied().unwrap_or(now_ms);
            next.insert(n, since);
        }
        self.since = next;
    }

    /// Since when `node` has been unneeded.
    pub fn since(&self, node: Sym) -> Option<i64> {
        self.since.get(&node).copied()
    }

    /// Forgets `node` (e.g. once it is deleted).
    pub fn remove(&mut self, node: Sym) {
        self.since.remove(&node);
    }

    /// Number of unneeded nodes.
    pub fn len(&self) -> usize {
        self.since.len()
    }

    /// Whether no node is unneeded.
    pub fn is_empty(&self) -> bool {
        self.since.is_empty()
    }

    /// The nodes and their times, sorted by time then name (for stable reports).
    pub fn iter_sorted(&self) -> Vec<(Sym, i64)> {
        let mut v: Vec<(Sym, i64)> = self.since.iter().map(|(n, s)| (*n, *s)).collect();
        v.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.as_str().cmp(b.0.as_str())));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers_survive_only_while_unneeded() {
        let (a, b) = (Sym::new("a"), Sym::new("b"));
        let mut u = UnneededNodes::default();
        u.update(1_000, [a, b]);
        u.update(2_000, [a, b]);
        assert_eq!(u.since(a), Some(1_000));
        // b is needed at 3s: its timer is dropped...
        u.update(3_000, [a]);
        assert_eq!(u.since(b), None);
        // ...and restarts when it is unneeded again.
        u.update(4_000, [a, b]);
        assert_eq!(u.since(b), Some(4_000));
        assert_eq!(u.since(a), Some(1_000));
        assert_eq!(u.iter_sorted(), vec![(a, 1_000), (b, 4_000)]);
        u.remove(a);
        assert_eq!(u.len(), 1);
    }
}
