//! Builders for model objects, for tests and benchmarks of this and other crates (feature
//! `test-util`). They build the compact model directly, without going through the API types.
//!
//! They are never part of the product: crates enable `test-util` in dev-dependencies only (CI
//! checks it), and product code builds objects through the API conversion.

use std::sync::Arc;

use crate::affinity::{
    InclusionPolicy, NodeSelector, NodeSelectorOp, NodeSelectorRequirement, NodeSelectorTerm,
    PodAffinityTerm, TopologySpreadConstraint, WhenUnsatisfiable,
};
use crate::intern::Sym;
use crate::labels::{LabelSelector, Labels};
use crate::node::{Node, NodeCondition};
use crate::pod::{HostPort, OwnerRef, Pod};
use crate::resources::{ResourceName, Resources};
use crate::taints::{Taint, TaintEffect, Toleration, TolerationOp};

/// One GiB in bytes.
pub const GI: i64 = 1 << 30;
/// One MiB in bytes.
pub const MI: i64 = 1 << 20;

/// Builds a [`Node`].
#[derive(Clone, Debug)]
pub struct NodeBuilder(Node);

impl NodeBuilder {
    /// A Ready node named `name` with `cpu_milli` millicores, `memory` bytes and 110 pod slots.
    pub fn new(name: &str, cpu_milli: i64, memory: i64) -> NodeBuilder {
        let mut n = Node::new(name);
        n.allocatable = Resources {
            cpu: cpu_milli,
            memory,
            ephemeral_storage: 100 * GI,
            pods: 110,
            ..Default::default()
        };
        n.capacity = n.allocatable.clone();
        n.labels
            .insert(Sym::new("kubernetes.io/hostname"), Sym::new(name));
        n.conditions.push(NodeCondition {
            type_: Sym::new("Ready"),
            status: Sym::new("True"),
            last_transition_ms: None,
        });
        NodeBuilder(n)
    }
    /// Sets the pod slots.
    pub fn pods(mut self, pods: i64) -> Self {
        self.0.allocatable.pods = pods;
        self.0.capacity.pods = pods;
        self
    }
    /// Sets an allocatable resource by Kubernetes name (`nvidia.com/gpu`), in its unit.
    pub fn resource(mut self, name: &str, value: i64) -> Self {
        self.0.allocatable.set(ResourceName::parse(name), value);
        self.0.capacity.set(ResourceName::parse(name), value);
        self
    }
    /// Adds a label.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.labels.insert(Sym::new(k), Sym::new(v));
        self
    }
    /// Sets the zone label `topology.kubernetes.io/zone`.
    pub fn zone(self, zone: &str) -> Self {
        self.label("topology.kubernetes.io/zone", zone)
    }
    /// Adds a taint.
    pub fn taint(mut self, k: &str, v: &str, effect: TaintEffect) -> Self {
        self.0.taints.push(Taint {
            key: Sym::new(k),
            value: Sym::new(v),
            effect,
        });
        self
    }
    /// Sets `spec.providerID`.
    pub fn with_provider_id(mut self, id: &str) -> Self {
        self.0.provider_id = Some(Arc::from(id));
        self
    }
    /// Adds an annotation (kept sorted).
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.0.annotations.push((Arc::from(k), Arc::from(v)));
        self.0.annotations.sort();
        self
    }
    /// Marks the node not Ready (its `Ready` condition becomes `False`).
    pub fn not_ready(mut self) -> Self {
        for c in &mut self.0.conditions {
            if c.type_.as_str() == "Ready" {
                c.status = Sym::new("False");
            }
        }
        self
    }
    /// Gives mutable access for anything the builder lacks.
    pub fn with(mut self, f: impl FnOnce(&mut Node)) -> Self {
        f(&mut self.0);
        self
    }
    /// Cordons the node.
    pub fn unschedulable(mut self) -> Self {
        self.0.unschedulable = true;
        self
    }
    /// The node.
    pub fn build(self) -> Node {
        self.0
    }
    /// The node, shared.
    pub fn arc(self) -> Arc<Node> {
        Arc::new(self.0)
    }
}

/// Builds a [`Pod`]; the equivalence key is computed by [`PodBuilder::build`].
#[derive(Clone, Debug)]
pub struct PodBuilder(Pod);

impl PodBuilder {
    /// A pending pod `default/name` requesting `cpu_milli` millicores and `memory` bytes.
    pub fn new(name: &str, cpu_milli: i64, memory: i64) -> PodBuilder {
        let mut p = Pod::new("default", name);
        p.requests.cpu = cpu_milli;
        p.requests.memory = memory;
        p.uid = Arc::from(format!("uid-{name}"));
        PodBuilder(p)
    }
    /// Sets the namespace.
    pub fn namespace(mut self, ns: &str) -> Self {
        self.0.namespace = Sym::new(ns);
        self
    }
    /// Adds a request of an extended resource by Kubernetes name, in its unit.
    pub fn resource(mut self, name: &str, value: i64) -> Self {
        self.0.requests.set(ResourceName::parse(name), value);
        self
    }
    /// Adds a label.
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0.labels.insert(Sym::new(k), Sym::new(v));
        self
    }
    /// Sets the controller owner (a ReplicaSet with uid `rs-<name>`).
    pub fn owner(mut self, kind: &str, name: &str) -> Self {
        self.0.owner = Some(OwnerRef {
            kind: Sym::new(kind),
            api_version: Sym::new("apps/v1"),
            name: Arc::from(name),
            uid: Arc::from(format!("{kind}-{name}")),
            controller: true,
        });
        self
    }
    /// Adds a `persistentVolumeClaim` volume using claim `claim`.
    pub fn claim(mut self, claim: &str) -> Self {
        self.0.volume_refs.push(crate::pod::VolumeRef::Claim {
            claim: Arc::from(claim),
            ephemeral: false,
        });
        self
    }
    /// Binds to a node by name.
    pub fn node_name(mut self, node: &str) -> Self {
        self.0.node_name = Some(Sym::new(node));
        self
    }
    /// Adds a node selector pair.
    pub fn node_selector(mut self, k: &str, v: &str) -> Self {
        self.0.node_selector.insert(Sym::new(k), Sym::new(v));
        self
    }
    /// Adds a required node affinity term with one label requirement.
    pub fn node_affinity(mut self, key: &str, op: NodeSelectorOp, values: &[&str]) -> Self {
        let term = NodeSelectorTerm {
            match_expressions: vec![NodeSelectorRequirement {
                key: Sym::new(key),
                op,
                values: values.iter().map(|v| Sym::new(v)).collect(),
            }],
            match_fields: vec![],
        };
        self.0
            .required_node_affinity
            .get_or_insert_with(NodeSelector::default)
            .terms
            .push(term);
        self
    }
    /// Adds a toleration.
    pub fn toleration(
        mut self,
        key: Option<&str>,
        op: TolerationOp,
        value: &str,
        effect: Option<TaintEffect>,
    ) -> Self {
        self.0.tolerations.push(Toleration {
            key: key.map(Sym::new),
            op,
            value: Sym::new(value),
            effect,
        });
        self
    }
    /// Adds a TCP host port on 0.0.0.0.
    pub fn host_port(mut self, port: u16) -> Self {
        self.0.host_ports.push(HostPort {
            ip: Sym::new("0.0.0.0"),
            protocol: Sym::new("TCP"),
            port,
        });
        self
    }
    /// Adds a required anti-affinity term against pods labelled `k=v` in the pod's namespace.
    pub fn anti_affinity(mut self, k: &str, v: &str, topology_key: &str) -> Self {
        let term = affinity_term(self.0.namespace, k, v, topology_key);
        self.0.anti_affinity.push(term);
        self
    }
    /// Adds a required affinity term towards pods labelled `k=v` in the pod's namespace.
    pub fn affinity(mut self, k: &str, v: &str, topology_key: &str) -> Self {
        let term = affinity_term(self.0.namespace, k, v, topology_key);
        self.0.affinity.push(term);
        self
    }
    /// Adds a hard topology spread constraint over pods labelled `k=v`.
    pub fn spread(
        mut self,
        k: &str,
        v: &str,
        topology_key: &str,
        max_skew: i32,
        min_domains: Option<i32>,
    ) -> Self {
        self.0.spread.push(TopologySpreadConstraint {
            max_skew,
            topology_key: Sym::new(topology_key),
            when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
            label_selector: Some(LabelSelector {
                match_labels: Labels::from_pairs([(k, v)]),
                match_expressions: vec![],
            }),
            min_domains,
            node_affinity_policy: InclusionPolicy::Honor,
            node_taints_policy: InclusionPolicy::Ignore,
        });
        self
    }
    /// Marks the pod as kube-scheduler does when it fits nowhere: `PodScheduled=False`, reason
    /// `Unschedulable`.
    pub fn unschedulable(mut self) -> Self {
        self.0.conditions.push(crate::pod::PodCondition {
            type_: Sym::new("PodScheduled"),
            status: Sym::new("False"),
            reason: Some(Sym::new("Unschedulable")),
            last_transition_ms: None,
        });
        self
    }
    /// Sets the priority.
    pub fn priority(mut self, p: i32) -> Self {
        self.0.priority = p;
        self
    }
    /// Gives mutable access for anything the builder lacks.
    pub fn with(mut self, f: impl FnOnce(&mut Pod)) -> Self {
        f(&mut self.0);
        self
    }
    /// The pod, with its equivalence key computed.
    pub fn build(mut self) -> Pod {
        self.0.update_equivalence();
        self.0
    }
    /// The pod, shared.
    pub fn arc(self) -> Arc<Pod> {
        Arc::new(self.build())
    }
}

fn affinity_term(ns: Sym, k: &str, v: &str, topology_key: &str) -> PodAffinityTerm {
    PodAffinityTerm {
        label_selector: Some(LabelSelector {
            match_labels: Labels::from_pairs([(k, v)]),
            match_expressions: vec![],
        }),
        namespaces: vec![ns],
        namespace_selector: None,
        topology_key: Sym::new(topology_key),
        match_label_keys: vec![],
        mismatch_label_keys: vec![],
    }
}

/// How many cases a fuzz (property) test runs: `FUZZ_CASES` from the environment for a long
/// run, else `default` (kept small so CI stays fast). See docs/fuzzing.md.
// Test helpers may read the environment (`FUZZ_CASES`); the core itself never does.
#[allow(clippy::disallowed_methods)]
pub fn fuzz_cases(default: u32) -> u32 {
    std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}
