//! The taint of nodes waiting for their replacement (ours): which nodes get
//! `ToBeReplacedByClusterAutoscaler:NoSchedule` and which lose it, each loop.
//!
//! A node consolidation replaces keeps running until its replacement is Ready; without a taint
//! the scheduler would keep placing new pods on it, which the drain would then have to move
//! again (Karpenter taints its candidates `karpenter.sh/disrupted:NoSchedule` for the same
//! reason, and removes the taint when a replacement fails). The taint is hard, unlike upstream's
//! soft `DeletionCandidateOfClusterAutoscaler` (scale-down's own, removed from nodes it finds
//! needed), and is not `ToBeDeletedByClusterAutoscaler`, which means "being deleted" to the rest
//! of the autoscaler.
//!
//! The taint follows the consolidation state each loop: the nodes of the pending replacement
//! carry it, no other node does. So a replacement given up, a replacement whose nodes can no
//! longer go, a drain that failed, consolidation turned off and a restart (which forgets the
//! pending replacement) all take it away. It never touches another taint; it only lists
//! actions, the shell changes the nodes.

use std::sync::Arc;

use crate::actions::Action;
use autoscaler_model::Node;
use autoscaler_model::{Sym, Taint, TaintEffect};
use autoscaler_model::{TO_BE_DELETED_TAINT, TO_BE_REPLACED_TAINT};

/// The taint: `ToBeReplacedByClusterAutoscaler=<unix seconds>:NoSchedule`.
pub fn to_be_replaced_taint(now_ms: i64) -> Taint {
    Taint {
        key: Sym::new(TO_BE_REPLACED_TAINT),
        value: Sym::new(&now_ms.div_euclid(1000).to_string()),
        effect: TaintEffect::NoSchedule,
    }
}

/// The actions that make the taint of `nodes` match `waiting` (the nodes of the pending
/// replacement): added where missing, removed elsewhere, except from nodes being deleted
/// (`ToBeDeletedByClusterAutoscaler`, or among `deleting`, this loop's deletions), which keep
/// it until they go.
pub fn replacement_taint_actions(
    nodes: &[Arc<Node>],
    waiting: &[Sym],
    deleting: &[Sym],
    now_ms: i64,
) -> Vec<Action> {
    let key = Sym::new(TO_BE_REPLACED_TAINT);
    let to_be_deleted = Sym::new(TO_BE_DELETED_TAINT);
    let mut out = Vec::new();
    for node in nodes {
        let has = |k: Sym| node.taints.iter().any(|t| t.key == k);
        let wanted = waiting.contains(&node.name);
        if wanted && !has(key) {
            out.push(Action::AddTaint {
                node: node.name,
                taint: to_be_replaced_taint(now_ms),
            });
        } else if !wanted && has(key) && !has(to_be_deleted) && !deleting.contains(&node.name) {
            out.push(Action::RemoveTaint {
                node: node.name,
                key,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::testing::{GI, NodeBuilder};

    fn node(name: &str, taints: &[&str]) -> Arc<Node> {
        let mut n = NodeBuilder::new(name, 1000, GI).build();
        n.taints = (taints.iter())
            .map(|k| Taint {
                key: Sym::new(k),
                value: Sym::new("1"),
                effect: TaintEffect::NoSchedule,
            })
            .collect();
        Arc::new(n)
    }

    fn describe(actions: &[Action]) -> Vec<String> {
        (actions.iter())
            .map(|a| match a {
                Action::AddTaint { node, taint } => {
                    format!("+{node} {}:{}", taint.key, taint.effect.as_str())
                }
                Action::RemoveTaint { node, key } => format!("-{node} {key}"),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn waiting_nodes_get_the_hard_taint_and_others_lose_it() {
        let nodes = [
            node("a", &[]),
            node("b", &[TO_BE_REPLACED_TAINT]),
            node("c", &[TO_BE_REPLACED_TAINT]),
            node("d", &[]),
        ];
        let got = replacement_taint_actions(&nodes, &[Sym::new("a"), Sym::new("b")], &[], 5_000);
        assert_eq!(
            describe(&got),
            [
                "+a ToBeReplacedByClusterAutoscaler:NoSchedule",
                "-c ToBeReplacedByClusterAutoscaler"
            ]
        );
        assert!(matches!(&got[0], Action::AddTaint { taint, .. } if taint.value.as_str() == "5"));
    }

    #[test]
    fn nothing_waiting_removes_every_such_taint_but_from_nodes_being_deleted() {
        let nodes = [
            node("a", &[TO_BE_REPLACED_TAINT]),
            node("b", &[TO_BE_REPLACED_TAINT, TO_BE_DELETED_TAINT]),
            node("c", &[TO_BE_REPLACED_TAINT]),
            node("d", &["other"]),
        ];
        let got = replacement_taint_actions(&nodes, &[], &[Sym::new("c")], 0);
        assert_eq!(describe(&got), ["-a ToBeReplacedByClusterAutoscaler"]);
        assert!(replacement_taint_actions(&nodes[3..], &[], &[], 0).is_empty());
    }
}
