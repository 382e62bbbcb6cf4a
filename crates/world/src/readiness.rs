//! Node readiness: the node lifecycle controller's view of a node whose kubelet stops (or
//! resumes) posting Ready, and the `NodesNotReady` fault that drives it.
//!
//! It decides how a NotReady node looks (Ready condition `False` with reason
//! `NodeStatusUnknown`, and the `node.kubernetes.io/not-ready:NoSchedule` taint, so the scheduler
//! places nothing new there) and which nodes of a group a fault takes down (the first `count`
//! Ready nodes by name, deterministic); it owns its faults and the nodes each took down. It
//! never deletes a node or evicts a pod: pods already bound keep running.

use serde_json::{Value, json};

use std::collections::BTreeMap;

use crate::cluster::{Cluster, WorldError};
use crate::faults::{Fault, FaultKind};
use crate::machines::Machines;
use crate::queue::Event;

/// The taint the node lifecycle controller puts on a node whose Ready condition is not True.
pub const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";

/// Marks a node Ready (condition `True`, `not-ready` taint removed) or NotReady (condition
/// `False`, `node.kubernetes.io/not-ready:NoSchedule` taint added). Pods stay bound.
pub(crate) fn set_node_ready(c: &mut Cluster, name: &str, ready: bool) -> Result<(), WorldError> {
    let ts = c.timestamp();
    c.edit_node(name, |obj| {
            let cond = if ready {
                json!({"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastHeartbeatTime": ts, "lastTransitionTime": ts})
            } else {
                json!({"type": "Ready", "status": "False", "reason": "NodeStatusUnknown", "message": "Kubelet stopped posting node status.", "lastHeartbeatTime": ts, "lastTransitionTime": ts})
            };
            let mut conds: Vec<Value> = obj
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            conds.retain(|c| c["type"] != "Ready");
            conds.push(cond);
            obj["status"]["conditions"] = Value::Array(conds);
            let mut taints: Vec<Value> = obj
                .pointer("/spec/taints")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            taints.retain(|t| t["key"] != NOT_READY_TAINT);
            if !ready {
                taints.push(json!({"key": NOT_READY_TAINT, "effect": "NoSchedule", "timeAdded": ts}));
            }
            obj["spec"]["taints"] = Value::Array(taints);
        })
}

/// The node readiness controller's own state.
#[derive(Debug, Default)]
pub(crate) struct Readiness {
    /// The `NodesNotReady` faults, in the order injected.
    faults: Vec<Fault>,
    /// Nodes taken down by each active fault (by index into `faults`).
    not_ready_by_fault: BTreeMap<usize, Vec<String>>,
}

impl Readiness {
    /// Takes a `NodesNotReady` fault and queues its start and end.
    pub(crate) fn inject(&mut self, c: &mut Cluster, fault: Fault) {
        let index = self.faults.len();
        c.schedule(
            fault.from_ms,
            Event::Readiness {
                fault: index,
                start: true,
            },
        );
        c.schedule(
            fault.to_ms,
            Event::Readiness {
                fault: index,
                start: false,
            },
        );
        self.faults.push(fault);
    }

    /// Start (`start`) or end of the fault number `index`: takes the first `count` Ready nodes
    /// of the group down, or brings back up the ones it took down.
    pub(crate) fn fault(
        &mut self,
        c: &mut Cluster,
        machines: &Machines,
        index: usize,
        start: bool,
    ) {
        let Some(fault) = self.faults.get(index).cloned() else {
            return;
        };
        let FaultKind::NodesNotReady { count } = fault.kind else {
            return;
        };
        if start {
            let mut names: Vec<String> = c
                .nodes
                .iter()
                .filter(|(_, st)| {
                    st.machine
                        .as_ref()
                        .and_then(|m| machines.group_of(m))
                        .is_some_and(|g| g.1 == fault.group)
                })
                .map(|(n, _)| n.clone())
                .filter(|n| c.node_ready(n))
                .collect();
            names.truncate(count as usize);
            for n in &names {
                let _ = set_node_ready(c, n, false);
            }
            self.not_ready_by_fault.insert(index, names);
        } else {
            for n in self.not_ready_by_fault.remove(&index).unwrap_or_default() {
                // A node deleted meanwhile is simply gone.
                let _ = set_node_ready(c, &n, true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::faults::{Fault, FaultKind};
    use crate::machines::NodeGroupSpec;
    use crate::world::{World, WorldConfig};

    #[test]
    fn a_nodes_not_ready_fault_takes_nodes_down_and_back_up() {
        let mut w = World::new(WorldConfig::default());
        w.add_node_group(&NodeGroupSpec {
            namespace: "default".into(),
            name: "g".into(),
            replicas: 3,
            min_size: 0,
            max_size: 5,
            cpu: "4".into(),
            memory: "16Gi".into(),
            max_pods: 110,
            ..NodeGroupSpec::default()
        })
        .unwrap();
        w.inject_fault(Fault {
            group: "g".into(),
            from_ms: 600_000,
            to_ms: 900_000,
            kind: FaultKind::NodesNotReady { count: 2 },
        });
        w.step_until(300_000);
        let names = w.node_names();
        assert_eq!(names.len(), 3);
        assert!(names.iter().all(|n| w.node_ready(n)));
        w.step_until(600_000);
        let down: Vec<&String> = names.iter().filter(|n| !w.node_ready(n)).collect();
        assert_eq!(down.len(), 2);
        let obj = w
            .objects()
            .get(&crate::objects::key("", "Node", "", down[0]))
            .cloned()
            .unwrap();
        assert!(
            obj["spec"]["taints"]
                .as_array()
                .unwrap()
                .iter()
                .any(|t| t["key"] == super::NOT_READY_TAINT)
        );
        w.step_until(900_000);
        assert!(names.iter().all(|n| w.node_ready(n)));
    }
}
