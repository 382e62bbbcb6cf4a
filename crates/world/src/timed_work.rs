//! The work a scenario's replayed pods bring, as the trace gives it: each pod's requests from
//! its arrival for its duration, whatever the run does with it (waits, evictions, restarts).
//! The report's fluid bound is built from it, so that every run of a trace has the same bound.
//!
//! A replay may bring hundreds of thousands of pods: each is kept as its two instants and an
//! index into the distinct requests seen (24 bytes), not as its object.
//!
//! It records only; it never decides anything.

use autoscaler_model::Resources;
use rustc_hash::FxHashMap;

use crate::cluster::{Owner, PodState};
use crate::time::SimTime;

/// The replayed pods' work as given: `(from, to, requests)` per pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimedWork {
    distinct: Vec<Resources>,
    index: FxHashMap<Resources, u32>,
    windows: Vec<(SimTime, SimTime, u32)>,
}

impl TimedWork {
    /// Records a pod holding `requests` from `from_ms` until `to_ms`.
    pub fn push(&mut self, from_ms: SimTime, to_ms: SimTime, requests: &Resources) {
        let i = match self.index.get(requests) {
            Some(i) => *i,
            None => {
                let i = u32::try_from(self.distinct.len()).unwrap_or(u32::MAX);
                self.distinct.push(requests.clone());
                self.index.insert(requests.clone(), i);
                i
            }
        };
        self.windows.push((from_ms, to_ms, i));
    }

    /// The distinct requests, indexed as [`TimedWork::windows`] names them.
    pub fn requests(&self) -> &[Resources] {
        &self.distinct
    }

    /// Each pod's `(from, to, index of its requests)`, in the order they arrived.
    pub fn windows(&self) -> &[(SimTime, SimTime, u32)] {
        &self.windows
    }

    /// Whether no pod was recorded.
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }
}

/// Whether a pod is replayed work (a trace's pod whose controller the world stands in for, or
/// its replacement): its work is counted as [`TimedWork`], not as the run held it.
pub(crate) fn is_timed(st: &PodState) -> bool {
    matches!(st.owner, Owner::Replayed(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_requests_are_kept_once() {
        let a = Resources {
            cpu: 1000,
            pods: 1,
            ..Resources::default()
        };
        let b = Resources {
            cpu: 2000,
            pods: 1,
            ..Resources::default()
        };
        let mut w = TimedWork::default();
        assert!(w.is_empty());
        w.push(0, 10, &a);
        w.push(5, 20, &b);
        w.push(7, 9, &a);
        assert_eq!(w.requests(), &[a, b]);
        assert_eq!(w.windows(), &[(0, 10, 0), (5, 20, 1), (7, 9, 0)]);
    }
}
