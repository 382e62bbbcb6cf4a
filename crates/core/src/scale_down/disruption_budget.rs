//! Consolidation's per-group rules (ours): each group's mode (its annotation, else
//! `--consolidation`), how many more of its nodes may be disrupted now (its disruption budgets
//! at the time passed in, less the nodes already being deleted or waiting for their
//! replacement), and how old a node must be before it is consolidated.
//!
//! It decides only these numbers; the consolidation search asks them per candidate and per node
//! it adds to a command. It never reads a clock and never lets a group with a budget of 0 lose a
//! node to consolidation. `--max-drain-parallelism` and `--max-scale-down-parallelism` still
//! bound the whole, on top of every group's budget.

use autoscaler_model::{CloudProvider, GroupConsolidation, Node, Sym};

use super::InFlight;
use super::consolidation::ConsolidationMode;
use crate::scheduling::snapshot::ClusterSnapshot;

/// The rules of one group this pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GroupRule {
    /// What consolidation may do with its nodes.
    pub(crate) mode: ConsolidationMode,
    /// Nodes it may still lose to consolidation now (`None`: no budget applies).
    pub(crate) allowed: Option<usize>,
    /// Milliseconds a node must have lived before it is consolidated (`None`: no minimum).
    pub(crate) min_age_ms: Option<i64>,
}

/// Every group's rules this pass, by group index.
#[derive(Clone, Debug, Default)]
pub(crate) struct GroupRules {
    rules: Vec<GroupRule>,
}

impl GroupRules {
    /// The rules at `now_ms`: `global` where a group says nothing; a group's budget counts its
    /// nodes in `snapshot` and subtracts its deletions in flight and the nodes in `waiting`
    /// (those of a pending replacement).
    pub(crate) fn of(
        provider: &dyn CloudProvider,
        snapshot: &ClusterSnapshot,
        global: ConsolidationMode,
        in_flight: &InFlight,
        waiting: &[Sym],
        now_ms: i64,
    ) -> GroupRules {
        let groups = provider.node_groups();
        let mut nodes = vec![0usize; groups.len()];
        let mut disrupting = in_flight.per_group.clone();
        disrupting.resize(groups.len(), 0);
        for (_, info) in snapshot.nodes() {
            if let Some(g) = provider
                .node_group_of(&info.node)
                .filter(|&g| g < groups.len())
            {
                nodes[g] += 1;
                if waiting.contains(&info.node.name) {
                    disrupting[g] += 1;
                }
            }
        }
        let rules = groups
            .iter()
            .enumerate()
            .map(|(g, group)| {
                let d = &group.options().disruption();
                let mode = match d.consolidation {
                    None => global,
                    Some(GroupConsolidation::Off) => ConsolidationMode::Off,
                    Some(GroupConsolidation::Delete) => ConsolidationMode::Delete,
                    Some(GroupConsolidation::Replace) => ConsolidationMode::Replace,
                };
                GroupRule {
                    mode,
                    allowed: d
                        .allowed(nodes[g], now_ms)
                        .map(|a| a.saturating_sub(disrupting[g])),
                    min_age_ms: d
                        .min_node_age
                        .map(|a| i64::try_from(a.as_millis()).unwrap_or(i64::MAX)),
                }
            })
            .collect();
        GroupRules { rules }
    }

    /// Whether any group may be consolidated (or its nodes expire) with `global` as the
    /// cluster-wide mode (a group annotation may turn it on where the flag is off).
    pub(crate) fn any_on(provider: &dyn CloudProvider, global: ConsolidationMode) -> bool {
        global != ConsolidationMode::Off
            || provider.node_groups().iter().any(|g| {
                let d = &g.options().disruption();
                d.expire_after.is_some()
                    || matches!(
                        d.consolidation,
                        Some(GroupConsolidation::Delete | GroupConsolidation::Replace)
                    )
            })
    }

    /// Whether any group may need a replacement node: one that replaces its nodes (a group
    /// annotation may ask for it) or whose nodes expire.
    pub(crate) fn any_replace(provider: &dyn CloudProvider, global: ConsolidationMode) -> bool {
        provider.node_groups().iter().any(|g| {
            let d = &g.options().disruption();
            d.expire_after.is_some()
                || match d.consolidation {
                    None => global == ConsolidationMode::Replace,
                    Some(m) => m == GroupConsolidation::Replace,
                }
        })
    }

    /// The rule of group `g` (the cluster-wide mode, unbounded, for an unknown index).
    pub(crate) fn get(&self, g: usize) -> GroupRule {
        self.rules.get(g).copied().unwrap_or(GroupRule {
            mode: ConsolidationMode::Off,
            allowed: Some(0),
            min_age_ms: None,
        })
    }

    /// Whether `node` of group `g` may be a candidate at `now_ms`: its group consolidated, a
    /// budget not used up, old enough (a node of unknown age is not, when a minimum is set).
    pub(crate) fn admits(&self, g: usize, node: &Node, now_ms: i64) -> bool {
        let r = self.get(g);
        r.mode != ConsolidationMode::Off
            && r.allowed != Some(0)
            && r.min_age_ms.is_none_or(|min| {
                node.creation_ms
                    .is_some_and(|c| now_ms.saturating_sub(c) >= min)
            })
    }

    /// Whether group `g` may lose one more node after `leaving` of its nodes chosen already.
    pub(crate) fn has_room(&self, g: usize, leaving: usize) -> bool {
        self.get(g).allowed.is_none_or(|a| leaving < a)
    }

    /// Whether group `g`'s nodes may be replaced.
    pub(crate) fn replaces(&self, g: usize) -> bool {
        self.get(g).mode == ConsolidationMode::Replace
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::testing::{GI, NodeBuilder};
    use autoscaler_model::{
        GroupDisruption, Instance, InstanceState, NodeGroup, StaticProvider, parse_budgets,
    };
    use std::time::Duration;

    /// Groups of `n` nodes each, `disruption` per group.
    fn cluster(groups: &[(usize, GroupDisruption)]) -> (StaticProvider, ClusterSnapshot) {
        let mut snapshot = ClusterSnapshot::new();
        let mut ngs = Vec::new();
        for (g, (n, d)) in groups.iter().enumerate() {
            let mut ng = NodeGroup::new(&format!("g{g}"), 0, 100, *n);
            ng.set_options(ng.options().clone().with_disruption(d.clone()));
            for i in 0..*n {
                let name = format!("g{g}-{i}");
                let node = NodeBuilder::new(&name, 1000, 16 * GI)
                    .with_provider_id(&format!("test:///{name}"))
                    .arc();
                ng.push_instance(Instance {
                    id: node.provider_id.clone().unwrap(),
                    state: InstanceState::Running,
                    error: None,
                });
                snapshot.add_node(node).unwrap();
            }
            ngs.push(ng);
        }
        (StaticProvider::new(ngs), snapshot)
    }

    fn budgets(text: &str) -> GroupDisruption {
        GroupDisruption {
            budgets: parse_budgets(text).unwrap(),
            ..GroupDisruption::default()
        }
    }

    #[test]
    fn budgets_count_the_groups_nodes_less_those_being_disrupted() {
        let (p, s) = cluster(&[
            (10, budgets(r#"[{"nodes": "20%"}]"#)),
            (4, GroupDisruption::default()),
            (3, budgets(r#"[{"nodes": "1"}]"#)),
        ]);
        let in_flight = InFlight {
            per_group: vec![1, 0, 0],
            empty: 0,
            drains: 1,
        };
        let r = GroupRules::of(
            &p,
            &s,
            ConsolidationMode::Delete,
            &in_flight,
            &[Sym::new("g2-0")],
            0,
        );
        assert_eq!(r.get(0).allowed, Some(1), "20% of 10, one deleting");
        assert_eq!(r.get(1).allowed, None, "no budget given");
        assert_eq!(r.get(2).allowed, Some(0), "one waits for its replacement");
        assert!(r.has_room(0, 0) && !r.has_room(0, 1));
        assert!(r.has_room(1, 1000));
        let node = NodeBuilder::new("g2-1", 1000, GI).build();
        assert!(!r.admits(2, &node, 0), "budget used up");
    }

    #[test]
    fn a_group_annotation_sets_the_mode_and_the_flag_fills_the_rest() {
        let replace = GroupDisruption {
            consolidation: Some(GroupConsolidation::Replace),
            ..GroupDisruption::default()
        };
        let off = GroupDisruption {
            consolidation: Some(GroupConsolidation::Off),
            ..GroupDisruption::default()
        };
        let (p, s) = cluster(&[(1, replace), (1, off), (1, GroupDisruption::default())]);
        let r = GroupRules::of(&p, &s, ConsolidationMode::Off, &InFlight::default(), &[], 0);
        let modes: Vec<ConsolidationMode> = (0..3).map(|g| r.get(g).mode).collect();
        use ConsolidationMode::*;
        assert_eq!(modes, [Replace, Off, Off]);
        assert!(GroupRules::any_on(&p, Off) && GroupRules::any_replace(&p, Off));
        let (p, _) = cluster(&[(1, GroupDisruption::default())]);
        assert!(!GroupRules::any_on(&p, Off) && !GroupRules::any_replace(&p, Delete));
        assert!(GroupRules::any_on(&p, Delete));
    }

    /// Consolidation passes over `groups` (4 nodes of 1000m, one 100m pod each), twice so the
    /// pods are quiet: the nodes of the command.
    fn consolidate(groups: &[GroupDisruption], global: ConsolidationMode) -> Vec<String> {
        use crate::scale_down::consolidation::{
            ConsolidationInput, ConsolidationOptions, ConsolidationState, plan_consolidation,
        };
        use crate::scale_down::drain::DrainOptions;
        use crate::scheduling::budget::Unlimited;
        use autoscaler_model::ResourceLimits;
        use autoscaler_model::testing::PodBuilder;
        use autoscaler_model::{ClusterTotals, DisruptionBudgets, NoControllerLookup};
        let spec: Vec<(usize, GroupDisruption)> = groups.iter().map(|d| (4, d.clone())).collect();
        let (provider, mut snapshot) = cluster(&spec);
        let nodes: Vec<_> = snapshot.nodes().map(|(id, i)| (id, i.node.name)).collect();
        for (id, name) in nodes {
            let pod = PodBuilder::new(&format!("{name}-p"), 100, GI)
                .owner("ReplicaSet", "rs")
                .node_name(name.as_str())
                .arc();
            snapshot.add_pod(pod, id).unwrap();
        }
        let all: Vec<_> = snapshot.nodes().map(|(_, i)| i.node.clone()).collect();
        let (drain, limits) = (DrainOptions::default(), ResourceLimits::default());
        let opts = ConsolidationOptions {
            mode: global,
            ..ConsolidationOptions::default()
        };
        let mut state = ConsolidationState::default();
        let mut last = None;
        for now in [0, 60_000] {
            let input = ConsolidationInput {
                provider: &provider,
                budgets: DisruptionBudgets::new(Vec::new()),
                controllers: &NoControllerLookup,
                drain: &drain,
                limits: &limits,
                totals: ClusterTotals::from_nodes(all.iter().map(|n| &**n)),
                in_flight: InFlight::default(),
                max_drain_parallelism: 10,
                max_scale_down_parallelism: 10,
                max_graceful_termination_sec: 600,
                shapes: &[],
                hold: false,
                last_scale_up_ms: None,
            };
            let plan =
                plan_consolidation(&mut snapshot, &mut state, input, &opts, now, &mut Unlimited);
            last = plan.command;
        }
        last.map(|c| c.deletions.iter().map(|d| d.node.to_string()).collect())
            .unwrap_or_default()
    }

    /// A budget of one node turns a three-node command into a single-node one; a group
    /// annotated off is left alone; a group annotated on is consolidated with the flag off.
    #[test]
    fn consolidation_keeps_to_the_groups_budgets_and_modes() {
        use ConsolidationMode::*;
        let free = consolidate(&[GroupDisruption::default()], Delete);
        assert_eq!(free.len(), 3, "{free:?}");
        let one = consolidate(&[budgets(r#"[{"nodes": "1"}]"#)], Delete);
        assert_eq!(one.len(), 1, "{one:?}");
        let none = consolidate(&[budgets(r#"[{"nodes": "0%"}]"#)], Delete);
        assert!(none.is_empty(), "{none:?}");
        let off = GroupDisruption {
            consolidation: Some(GroupConsolidation::Off),
            ..GroupDisruption::default()
        };
        assert!(consolidate(&[off], Delete).is_empty());
        let on = GroupDisruption {
            consolidation: Some(GroupConsolidation::Delete),
            ..budgets(r#"[{"nodes": "50%"}]"#)
        };
        let got = consolidate(&[on, GroupDisruption::default()], Off);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got.iter().all(|n| n.starts_with("g0-")), "{got:?}");
    }

    #[test]
    fn a_node_younger_than_the_minimum_age_or_of_unknown_age_waits() {
        let d = GroupDisruption {
            min_node_age: Some(Duration::from_secs(600)),
            ..GroupDisruption::default()
        };
        let (p, s) = cluster(&[(1, d)]);
        let r = GroupRules::of(
            &p,
            &s,
            ConsolidationMode::Delete,
            &InFlight::default(),
            &[],
            0,
        );
        let mut node = NodeBuilder::new("n", 1000, GI).build();
        assert!(!r.admits(0, &node, 1_000_000), "unknown age");
        node.creation_ms = Some(500_000);
        assert!(!r.admits(0, &node, 1_099_999));
        assert!(r.admits(0, &node, 1_100_000));
    }
}
