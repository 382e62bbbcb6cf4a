//! Unneeded-node tracking across loops: since when each node has been continuously unneeded.
//!
//! A node's timer is kept only while it stays unneeded; the first loop in which it is needed
//! again drops it, so it restarts from zero if the node becomes unneeded later. Scale-down's
//! phase 3 lives here: after the removal simulation, the removable nodes are the unneeded ones,
//! and only their pods' destinations are remembered as hints (so the hints never outgrow the
//! cluster). It never decides what is unneeded, only remembers since when.

use std::sync::Arc;

use rustc_hash::FxHashSet;

use super::ScaleDownState;
use super::simulation::Removable;
use autoscaler_model::Sym;

/// Scale-down phase 3: records that exactly the `removable` nodes are unneeded at `now_ms`,
/// keeps hints only for their pods, and returns each with since when it has been unneeded.
pub(super) fn record(
    state: &mut ScaleDownState,
    removable: &[Removable],
    now_ms: i64,
) -> Vec<(Sym, i64)> {
    let keep: FxHashSet<(Sym, Arc<str>)> = removable
        .iter()
        .flat_map(|r| r.destinations.iter())
        .map(|(p, _)| (p.namespace, p.name.as_arc().clone()))
        .collect();
    state.hints.retain(|k, _| keep.contains(k));
    let names = || removable.iter().map(|r| r.cand.name);
    state.unneeded.update(now_ms, names());
    names()
        .map(|n| (n, state.unneeded.since(n).unwrap_or(now_ms)))
        .collect()
}
