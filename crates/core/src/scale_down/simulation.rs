//! Scale-down phase 2, the removal simulation: which candidates can go, given the ones chosen
//! before them in this pass.
//!
//! Candidates are tried in order on a fork of the snapshot that keeps each success, so later
//! candidates see the space as promised (seed 000); pods promised to a candidate that is removed
//! later move again. PodDisruptionBudgets are committed node by node: a node touching a budget
//! with nothing left is blocked, one needing more than is left is drained sequentially. The
//! number of non-empty candidates and the simulation time are bounded.
//!
//! It never places a pod where the predicates refuse it, never lets a budget's allowance be
//! promised twice and never crosses a cluster-wide minimum. The caller reverts the fork.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use super::eligibility::Candidate;
use super::removal::{Hints, try_remove};
use super::{Pass, Unremovable};
use crate::scale_down::drain::{BlockReason, Blocked};
use crate::scheduling::budget::Budget;
use crate::scheduling::snapshot::{ClusterSnapshot, NodeInfo};
use autoscaler_model::ClusterTotals;
use autoscaler_model::Pod;
use autoscaler_model::Sym;

/// A candidate the simulation could remove.
pub(super) struct Removable {
    pub(super) cand: Candidate,
    /// Where each evicted pod goes.
    pub(super) destinations: Vec<(Arc<Pod>, Sym)>,
    /// A PodDisruptionBudget allowed fewer evictions than this node needs at once when it was
    /// chosen: they must be made one at a time as replacements become ready.
    pub(super) sequential: bool,
}

/// One pass of the simulation over the candidates.
struct Simulation<'s, 'p, 'i> {
    pass: &'s mut Pass<'p, 'i>,
    /// Non-empty candidates tried (`--scale-down-candidates-pool-*` bound them).
    tried: usize,
    max_tries: usize,
    /// Non-empty candidates found removable (`--scale-down-non-empty-candidates-count`).
    found: usize,
    /// Cluster totals with the removable nodes taken out.
    totals: ClusterTotals,
    removable: Vec<Removable>,
    /// Pods placed on a node earlier in this pass, by key: which removable node they came from
    /// and which of its destinations they are. When their host is removed too, they move again.
    promised: FxHashMap<(Sym, Arc<str>), (usize, usize)>,
    /// Where the next search for a destination starts in the pass's node order (kept across
    /// candidates: see [`try_remove`]).
    search_from: usize,
}

/// Simulates removing `candidates` in order on `snapshot` (a fork the caller reverts), keeping
/// each success. Those that cannot go are added to `unremovable` with the reason.
pub(super) fn removable(
    snapshot: &mut ClusterSnapshot,
    candidates: Vec<Candidate>,
    pass: &mut Pass<'_, '_>,
    hints: &mut Hints,
    budget: &mut dyn Budget,
    unremovable: &mut Vec<(Sym, Unremovable)>,
) -> Vec<Removable> {
    let opts = pass.opts;
    let pool = opts
        .candidates_pool_min_count
        .max((opts.candidates_pool_ratio * pass.ids.len() as f64).ceil() as usize);
    let mut sim = Simulation {
        max_tries: opts.non_empty_candidates_count.saturating_add(pool),
        totals: pass.input.totals.clone(),
        pass,
        tried: 0,
        found: 0,
        removable: Vec::new(),
        promised: FxHashMap::default(),
        search_from: 0,
    };
    for cand in candidates {
        let name = cand.name;
        if let Err(why) = sim.consider(snapshot, cand, hints, budget) {
            unremovable.push((name, why));
        }
    }
    sim.removable
}

impl Simulation<'_, '_, '_> {
    /// Removes `cand` from the snapshot if it can go, or says why not.
    fn consider(
        &mut self,
        snapshot: &mut ClusterSnapshot,
        cand: Candidate,
        hints: &mut Hints,
        budget: &mut dyn Budget,
    ) -> Result<(), Unremovable> {
        let left = || Unremovable::NotConsidered("node left the simulation");
        let info = snapshot.node(cand.id).ok_or_else(left)?;
        let node = info.node.clone();
        let own_moves = !cand.to_move.is_empty();
        // Past the candidate limit a node with pods of its own is not simulated, guests or not:
        // said before looking for guests, which reads every pod of every remaining candidate.
        if own_moves && self.candidate_limit_reached() {
            return Err(Unremovable::NotConsidered(
                "non-empty candidate limit reached",
            ));
        }
        let guests = self.guests(info);
        self.check_time(own_moves || !guests.is_empty(), budget)?;
        self.pass
            .input
            .limits
            .check_removal(&self.totals, &node)
            .map_err(Unremovable::MinimalResourceLimit)?;
        let evicted: Vec<&Pod> = cand
            .to_move
            .iter()
            .chain(&cand.evict_only)
            .map(|p| &**p)
            .collect();
        self.check_budgets(&evicted)?;
        let sequential = self.pass.input.budgets.can_evict(&evicted).is_err();
        let destinations = if own_moves || !guests.is_empty() {
            self.place(snapshot, &cand, guests, hints)?
        } else {
            snapshot.remove_node(cand.id).map_err(|_| left())?;
            Vec::new()
        };
        self.pass.input.budgets.commit(&evicted);
        self.totals.remove_node(&node, 1);
        self.removable.push(Removable {
            cand,
            destinations,
            sequential,
        });
        Ok(())
    }

    /// Pods promised to this node by nodes removed earlier in this pass: they must find
    /// another place too, or they would vanish with it.
    fn guests(&self, info: &NodeInfo) -> Vec<Arc<Pod>> {
        if self.promised.is_empty() {
            return Vec::new();
        }
        info.pods
            .iter()
            .filter(|p| {
                self.promised
                    .contains_key(&(p.namespace, p.name.as_arc().clone()))
            })
            .cloned()
            .collect()
    }

    /// Whether the pass may still simulate a candidate with pods to move (the time bound; the
    /// candidate count is checked before its guests are looked for).
    fn check_time(&self, moves: bool, budget: &mut dyn Budget) -> Result<(), Unremovable> {
        if moves && budget.exhausted() {
            return Err(Unremovable::NotConsidered("scale-down simulation timeout"));
        }
        Ok(())
    }

    /// Whether enough non-empty candidates were found or tried in this pass.
    fn candidate_limit_reached(&self) -> bool {
        self.found >= self.pass.opts.non_empty_candidates_count || self.tried >= self.max_tries
    }

    /// Blocks a node evicting a pod whose budget has nothing left after the nodes chosen before.
    fn check_budgets(&self, evicted: &[&Pod]) -> Result<(), Unremovable> {
        let budgets = &self.pass.input.budgets;
        let Some((pod, pdb)) = evicted
            .iter()
            .find_map(|p| budgets.exhausted_for(p).map(|i| (p, i)))
        else {
            return Ok(());
        };
        Err(Unremovable::PodBlocks(Blocked {
            pod: pod.key(),
            reason: BlockReason::NotEnoughPdb {
                pdb: budgets.pdbs()[pdb].key(),
                detail: budgets.exhausted_detail(pdb),
            },
        }))
    }

    /// Places the candidate's pods and its guests elsewhere on the snapshot; returns where its
    /// own pods went (guests update the destinations of the node they were promised by).
    fn place(
        &mut self,
        snapshot: &mut ClusterSnapshot,
        cand: &Candidate,
        guests: Vec<Arc<Pod>>,
        hints: &mut Hints,
    ) -> Result<Vec<(Arc<Pod>, Sym)>, Unremovable> {
        let own_moves = !cand.to_move.is_empty();
        if own_moves {
            self.tried += 1;
        }
        let mut to_move = cand.to_move.clone();
        to_move.extend(guests);
        let order = (&self.pass.ids[..], &mut self.search_from);
        let moves = try_remove(snapshot, cand.id, &to_move, order, hints)
            .map_err(Unremovable::NoPlaceToMovePods)?;
        if own_moves {
            self.found += 1;
        }
        let index = self.removable.len();
        let mut destinations = Vec::new();
        for (pod, dest) in moves {
            let Some(dest) = snapshot.node(dest).map(|i| i.node.name) else {
                continue;
            };
            let key = (pod.namespace, pod.name.as_arc().clone());
            match self.promised.get(&key) {
                Some(&(from, at)) => {
                    let slot = self
                        .removable
                        .get_mut(from)
                        .and_then(|r| r.destinations.get_mut(at));
                    if let Some(slot) = slot {
                        *slot = (pod, dest);
                    }
                }
                None => {
                    self.promised.insert(key, (index, destinations.len()));
                    destinations.push((pod, dest));
                }
            }
        }
        Ok(destinations)
    }
}
