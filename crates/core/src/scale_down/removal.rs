//! Removal simulation: can this node's pods all go elsewhere, and where?
//!
//! Decides, for one node, whether every pod that must move fits on some other node of the
//! snapshot, and records the destinations in the snapshot so that later simulations see the space
//! as promised (seed 000's A/B/C/X/Y reasoning). It tries each pod's remembered destination first.
//! It never places a pod where the predicates refuse it, and leaves the snapshot unchanged when
//! the node cannot be removed.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::scheduling::snapshot::{ClusterSnapshot, NodeId};
use autoscaler_model::Pod;
use autoscaler_model::Sym;

/// Where a pod was (or would be) moved: key `namespace/name` → destination node name.
pub type Hints = FxHashMap<(Sym, Arc<str>), Sym>;

/// A pod that found no place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoPlace {
    /// `namespace/name` of the pod.
    pub pod: String,
    /// The pod's bound volume that only its node reaches (a local volume), if that is why.
    pub pinned_by: Option<Arc<str>>,
}

impl std::fmt::Display for NoPlace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "no place to move pod {}", self.pod)?;
        if let Some(v) = &self.pinned_by {
            write!(f, ": its volume {v} is reachable from this node only")?;
        }
        Ok(())
    }
}

/// Removes `node` from the snapshot and places every pod of `to_move` on another node.
///
/// On success the removal and the placements stay in the snapshot (callers fork around a whole
/// pass) and the destinations are returned; on failure the snapshot is restored and the first
/// pod without a place is named. `order` lists the candidate destinations in the order to try
/// (removed nodes are skipped), round-robin from position `start`, which is left where the last
/// pod found its place; `hints` are tried first and updated with the new destinations.
///
/// A caller keeps `start` across the nodes of one pass, as upstream keeps its search position
/// across its whole simulation: in a full cluster, where the room left is far along `order`,
/// a search from the beginning for every candidate node would cost a pass of every node for
/// each of them.
pub fn try_remove(
    snapshot: &mut ClusterSnapshot,
    node: NodeId,
    to_move: &[Arc<Pod>],
    (order, start): (&[NodeId], &mut usize),
    hints: &mut Hints,
) -> Result<Vec<(Arc<Pod>, NodeId)>, NoPlace> {
    // Kept (folded into the caller's fork) only if every pod found a place.
    let moves = snapshot.tentatively(|s| place_all(s, node, to_move, (order, start), hints))?;
    for (pod, dest) in &moves {
        if let Some(info) = snapshot.node(*dest) {
            hints.insert((pod.namespace, pod.name.as_arc().clone()), info.node.name);
        }
    }
    Ok(moves)
}

fn place_all(
    snapshot: &mut ClusterSnapshot,
    node: NodeId,
    to_move: &[Arc<Pod>],
    (order, start): (&[NodeId], &mut usize),
    hints: &Hints,
) -> Result<Vec<(Arc<Pod>, NodeId)>, NoPlace> {
    let no_place = |s: &ClusterSnapshot, p: &Pod| NoPlace {
        pod: p.key(),
        pinned_by: if p.volume_refs.is_empty() {
            None
        } else {
            s.pinned_volume(p)
        },
    };
    snapshot.remove_node(node).map_err(|_| NoPlace {
        pod: String::from("<node not in snapshot>"),
        pinned_by: None,
    })?;
    let mut moves = Vec::with_capacity(to_move.len());
    for original in to_move {
        // The moved copy is no longer bound: the NodeName filter must not pin it to the old node.
        let mut pod = (**original).clone();
        pod.node_name = None;
        let prepared = {
            let mut p = snapshot.prepare(&pod);
            snapshot.refresh(&pod, &mut p);
            p
        };
        let hinted = hints
            .get(&(pod.namespace, pod.name.as_arc().clone()))
            .and_then(|n| snapshot.node_id(*n))
            .filter(|&id| snapshot.check(&pod, &prepared, id).is_ok());
        let dest = hinted.or_else(|| {
            let from = *start;
            let found = (0..order.len())
                .map(|k| (from + k) % order.len())
                .find(|&i| {
                    snapshot.node(order[i]).is_some()
                        && snapshot.check(&pod, &prepared, order[i]).is_ok()
                });
            if let Some(i) = found {
                *start = i;
            }
            found.map(|i| order[i])
        });
        let Some(dest) = dest else {
            return Err(no_place(snapshot, &pod));
        };
        if let Some(info) = snapshot.node(dest) {
            pod.node_name = Some(info.node.name);
        }
        let pod = Arc::new(pod);
        snapshot
            .add_pod(pod.clone(), dest)
            .map_err(|_| no_place(snapshot, &pod))?;
        moves.push((pod, dest));
    }
    Ok(moves)
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};

    fn cluster(nodes: &[(&str, i64, &[i64])]) -> (ClusterSnapshot, Vec<NodeId>) {
        let mut s = ClusterSnapshot::new();
        let mut ids = Vec::new();
        for (name, cpu, pods) in nodes {
            let id = s
                .add_node(NodeBuilder::new(name, *cpu, 64 * GI).arc())
                .unwrap();
            for (i, p) in pods.iter().enumerate() {
                let pod = PodBuilder::new(&format!("{name}-p{i}"), *p, GI)
                    .owner("ReplicaSet", "rs")
                    .node_name(name)
                    .arc();
                s.add_pod(pod, id).unwrap();
            }
            ids.push(id);
        }
        (s, ids)
    }

    fn pods_of(s: &ClusterSnapshot, id: NodeId) -> Vec<Arc<Pod>> {
        s.node(id).unwrap().pods.clone()
    }

    /// Seed 000: A's and B's pods fit only on X (room for one of them), C's on Y. After A is
    /// removed, B cannot be, C still can.
    #[test]
    fn promised_space_is_seen_by_later_candidates() {
        let (mut s, ids) = cluster(&[
            ("a", 1000, &[400]),
            ("b", 1000, &[350]),
            ("c", 1000, &[300]),
            ("x", 1000, &[550]),
            ("y", 320, &[]),
        ]);
        let (a, b, c, x, y) = (ids[0], ids[1], ids[2], ids[3], ids[4]);
        // Only X and Y are destinations (A, B, C are candidates being removed in this pass).
        let order = [x, y];
        let mut hints = Hints::default();
        s.fork();
        let pods = pods_of(&s, a);
        let moved =
            try_remove(&mut s, a, &pods, (&order, &mut 0), &mut hints).expect("A goes to X");
        assert_eq!(moved[0].1, x);
        let pods = pods_of(&s, b);
        let err = try_remove(&mut s, b, &pods, (&order, &mut 0), &mut hints).unwrap_err();
        assert_eq!(err.to_string(), "no place to move pod default/b-p0");
        assert!(
            s.node(b).is_some(),
            "a failed removal leaves the node in place"
        );
        let pods = pods_of(&s, c);
        let moved =
            try_remove(&mut s, c, &pods, (&order, &mut 0), &mut hints).expect("C goes to Y");
        assert_eq!(moved[0].1, y);
        assert_eq!(
            hints.get(&(Sym::new("default"), Arc::from("a-p0"))),
            Some(&Sym::new("x"))
        );
        s.revert().unwrap();
        assert_eq!(s.len(), 5);
    }

    /// The search for a destination goes on where the last pod found its place, across nodes
    /// (the caller keeps the position for a pass), not from the start of the order each time.
    #[test]
    fn the_search_resumes_where_the_last_pod_found_its_place() {
        let (mut s, ids) = cluster(&[
            ("a", 1000, &[300, 300]),
            ("b", 1000, &[100]),
            ("x", 1000, &[500]),
            ("y", 1000, &[]),
        ]);
        let (a, b, x, y) = (ids[0], ids[1], ids[2], ids[3]);
        let order = [x, y];
        let mut start = 0;
        let mut hints = Hints::default();
        let pods = pods_of(&s, a);
        let moved = try_remove(&mut s, a, &pods, (&order, &mut start), &mut hints).unwrap();
        assert_eq!(moved.iter().map(|m| m.1).collect::<Vec<_>>(), [x, y]);
        assert_eq!(start, 1, "left at y, where the last pod went");
        // x still has room for b's pod, but the search starts at y.
        let pods = pods_of(&s, b);
        let moved = try_remove(&mut s, b, &pods, (&order, &mut start), &mut hints).unwrap();
        assert_eq!(moved[0].1, y);
        let (mut s, ids) = cluster(&[("b", 1000, &[100]), ("x", 1000, &[]), ("y", 1000, &[950])]);
        let (order, mut start) = ([ids[1], ids[2]], 1);
        let pods = pods_of(&s, ids[0]);
        let moved = try_remove(
            &mut s,
            ids[0],
            &pods,
            (&order, &mut start),
            &mut Hints::default(),
        );
        assert_eq!(
            moved.unwrap()[0].1,
            ids[1],
            "y is full: the search wraps round to x"
        );
        assert_eq!(start, 0);
    }

    #[test]
    fn remembered_destinations_are_tried_first() {
        let (mut s, ids) = cluster(&[("a", 1000, &[100]), ("x", 1000, &[]), ("y", 1000, &[])]);
        let mut hints = Hints::default();
        hints.insert((Sym::new("default"), Arc::from("a-p0")), Sym::new("y"));
        let pods = pods_of(&s, ids[0]);
        let moved = try_remove(
            &mut s,
            ids[0],
            &pods,
            (&[ids[1], ids[2]], &mut 0),
            &mut hints,
        )
        .unwrap();
        assert_eq!(moved[0].1, ids[2]);
        assert_eq!(moved[0].0.node_name, Some(Sym::new("y")));
    }

    #[test]
    fn all_pods_must_fit_or_nothing_changes() {
        let (mut s, ids) = cluster(&[("a", 1000, &[300, 300]), ("x", 1000, &[500])]);
        let before = (s.len(), s.pod_count());
        let pods = pods_of(&s, ids[0]);
        let err = try_remove(
            &mut s,
            ids[0],
            &pods,
            (&[ids[1]], &mut 0),
            &mut Hints::default(),
        );
        assert!(err.is_err());
        assert_eq!((s.len(), s.pod_count()), before);
        assert_eq!(s.node(ids[1]).unwrap().pods.len(), 1);
    }
}
