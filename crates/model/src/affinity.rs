//! Scheduling constraints beyond resources: required node affinity (node selector terms),
//! required pod affinity and anti-affinity terms, and topology spread constraints.
//!
//! Only the hard (required, `DoNotSchedule`) forms are modelled for filtering, as the autoscaler
//! simulates kube-scheduler's filters and ignores its scores.

use crate::intern::Sym;
use crate::labels::{LabelSelector, Labels};

/// Operator of a node selector requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NodeSelectorOp {
    /// Value is one of `values`.
    In,
    /// Label absent or value none of `values`.
    NotIn,
    /// Label present.
    Exists,
    /// Label absent.
    DoesNotExist,
    /// Value, parsed as an integer, is greater than the single value; non-integers never match.
    Gt,
    /// Value, parsed as an integer, is less than the single value; non-integers never match.
    Lt,
}

/// One requirement of a node selector term, on a label (`matchExpressions`) or a field
/// (`matchFields`, where only `metadata.name` exists).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeSelectorRequirement {
    /// Label key, or for `matchFields` the field name (`metadata.name`).
    pub key: Sym,
    /// Operator.
    pub op: NodeSelectorOp,
    /// Values.
    pub values: Vec<Sym>,
}

/// One `nodeSelectorTerms` entry: all requirements must hold. A term with no requirement matches
/// no node (Kubernetes semantics).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeSelectorTerm {
    /// `matchExpressions` on node labels.
    pub match_expressions: Vec<NodeSelectorRequirement>,
    /// `matchFields` on node fields.
    pub match_fields: Vec<NodeSelectorRequirement>,
}

/// A required node selector: the terms are ORed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct NodeSelector {
    /// Terms, any of which must match.
    pub terms: Vec<NodeSelectorTerm>,
}

/// A required pod affinity or anti-affinity term.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodAffinityTerm {
    /// Selector of the pods this term is about; `None` matches no pod.
    pub label_selector: Option<LabelSelector>,
    /// Namespaces to look in. Empty together with `namespace_selector == None` means the
    /// namespace of the pod declaring the term (resolved when the model is built, so this list
    /// is never empty unless a namespace selector is set).
    pub namespaces: Vec<Sym>,
    /// `namespaceSelector`: namespaces whose labels match (an empty selector matches all).
    pub namespace_selector: Option<LabelSelector>,
    /// Node label defining the topology domain.
    pub topology_key: Sym,
    /// `matchLabelKeys`: the declaring pod's values for these keys are ANDed into the selector
    /// (already merged into `label_selector` when the model is built).
    pub match_label_keys: Vec<Sym>,
    /// `mismatchLabelKeys` (already merged as NotIn requirements when the model is built).
    pub mismatch_label_keys: Vec<Sym>,
}

/// `whenUnsatisfiable` of a spread constraint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WhenUnsatisfiable {
    /// Hard constraint, enforced by the filter.
    DoNotSchedule,
    /// Soft constraint, ignored by the autoscaler.
    ScheduleAnyway,
}

/// `nodeAffinityPolicy` / `nodeTaintsPolicy` of a spread constraint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum InclusionPolicy {
    /// Only nodes passing the pod's node affinity / tolerating the node's taints are counted.
    Honor,
    /// All nodes are counted.
    Ignore,
}

/// A topology spread constraint.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TopologySpreadConstraint {
    /// `maxSkew` (>= 1).
    pub max_skew: i32,
    /// Node label defining the domain.
    pub topology_key: Sym,
    /// Hard or soft.
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// Selector of the pods counted; `None` counts none. `matchLabelKeys` are already merged in.
    pub label_selector: Option<LabelSelector>,
    /// `minDomains` (only meaningful with DoNotSchedule).
    pub min_domains: Option<i32>,
    /// `nodeAffinityPolicy` (default Honor).
    pub node_affinity_policy: InclusionPolicy,
    /// `nodeTaintsPolicy` (default Ignore).
    pub node_taints_policy: InclusionPolicy,
}

/// A namespace's labels, for `namespaceSelector` in pod affinity terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamespaceLabels {
    /// Namespace name.
    pub name: Sym,
    /// Its labels.
    pub labels: Labels,
}
