//! PodDisruptionBudgets: the compact view built from `policy/v1` objects and the per-loop tracker
//! of how many more voluntary disruptions each budget allows.
//!
//! This module decides which budgets cover a pod and whether evicting a set of pods (on top of the
//! evictions already promised earlier in the same loop) stays within every covering budget. The
//! number it trusts is `status.disruptionsAllowed`, the value the API server's eviction check uses;
//! `minAvailable` / `maxUnavailable` are kept only to explain a refusal. It must never perform I/O,
//! read the clock or panic on any input: a malformed object becomes a [`ModelError`] naming the
//! budget and the field.

use std::fmt;
use std::sync::Arc;

use k8s_openapi::api::policy::v1 as policy;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use crate::intern::Sym;
use crate::labels::{LabelSelector, Labels};
use crate::pod::{ModelError, Pod};

/// The namespace of a namespaced object without `metadata.namespace`.
const DEFAULT_NAMESPACE: &str = "default";

/// `minAvailable` or `maxUnavailable`: an absolute count or a percentage of the expected pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IntOrPercent {
    /// An absolute number of pods.
    Int(i32),
    /// A percentage (`"50%"` is `Percent(50)`).
    Percent(i32),
}

impl fmt::Display for IntOrPercent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IntOrPercent::Int(n) => write!(f, "{n}"),
            IntOrPercent::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// The compact view of a `policy/v1` PodDisruptionBudget.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodDisruptionBudget {
    /// Namespace; the budget only covers pods of this namespace.
    pub namespace: Sym,
    /// Name.
    pub name: Arc<str>,
    /// `spec.selector`. `None` (a null selector) covers no pod; an empty selector covers every pod
    /// of the namespace (the `policy/v1` semantics).
    pub selector: Option<LabelSelector>,
    /// How many more pods may be evicted now: `status.disruptionsAllowed`, or 0 when the status
    /// is stale (see [`PodDisruptionBudget::stale`]), because the API server then refuses every
    /// eviction the budget covers.
    pub disruptions_allowed: i32,
    /// Whether `status.observedGeneration` lags `metadata.generation`: the disruption controller
    /// has not processed the latest spec yet, and the API server refuses evictions until it has.
    pub stale: bool,
    /// `spec.minAvailable`, for explanations only.
    pub min_available: Option<IntOrPercent>,
    /// `spec.maxUnavailable`, for explanations only.
    pub max_unavailable: Option<IntOrPercent>,
}

impl PodDisruptionBudget {
    /// A budget `namespace/name` covering the pods `selector` matches and allowing `allowed` more
    /// disruptions. Tests and simulated worlds start from this.
    pub fn new(
        namespace: &str,
        name: &str,
        selector: Option<LabelSelector>,
        allowed: i32,
    ) -> PodDisruptionBudget {
        PodDisruptionBudget {
            namespace: Sym::new(namespace),
            name: Arc::from(name),
            selector,
            disruptions_allowed: allowed.max(0),
            stale: false,
            min_available: None,
            max_unavailable: None,
        }
    }

    /// Builds the view of an API object. Fails with a [`ModelError`] naming the budget and the
    /// field when the object is malformed (missing name, bad selector operator, a percentage that
    /// does not parse, a negative `disruptionsAllowed`).
    pub fn from_k8s(pdb: &policy::PodDisruptionBudget) -> Result<PodDisruptionBudget, ModelError> {
        let md = &pdb.metadata;
        let namespace = md.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE);
        let Some(name) = md.name.as_deref() else {
            return Err(ModelError::Missing {
                object: format!("PodDisruptionBudget {namespace}/<unnamed>"),
                field: "metadata.name".into(),
            });
        };
        let object = format!("PodDisruptionBudget {namespace}/{name}");
        let spec = pdb.spec.as_ref();
        let selector = match spec.and_then(|s| s.selector.as_ref()) {
            None => None,
            Some(sel) => Some(crate::convert::label_selector(
                &object,
                "spec.selector",
                sel,
            )?),
        };
        let min_available = spec
            .and_then(|s| s.min_available.as_ref())
            .map(|v| int_or_percent(&object, "spec.minAvailable", v))
            .transpose()?;
        let max_unavailable = spec
            .and_then(|s| s.max_unavailable.as_ref())
            .map(|v| int_or_percent(&object, "spec.maxUnavailable", v))
            .transpose()?;
        // A budget without status has not been processed by the disruption controller: the
        // eviction check then allows nothing.
        let (allowed, stale) = match &pdb.status {
            None => (0, true),
            Some(st) => {
                if st.disruptions_allowed < 0 {
                    return Err(ModelError::Invalid {
                        object,
                        field: "status.disruptionsAllowed".into(),
                        value: st.disruptions_allowed.to_string(),
                        why: "must not be negative".into(),
                    });
                }
                let stale = match (st.observed_generation, md.generation) {
                    (Some(observed), Some(generation)) => observed < generation,
                    (None, Some(generation)) => generation > 0,
                    _ => false,
                };
                (if stale { 0 } else { st.disruptions_allowed }, stale)
            }
        };
        Ok(PodDisruptionBudget {
            namespace: Sym::new(namespace),
            name: Arc::from(name),
            selector,
            disruptions_allowed: allowed,
            stale,
            min_available,
            max_unavailable,
        })
    }

    /// Whether this budget covers `pod`: same namespace and a selector that matches its labels.
    pub fn matches(&self, pod: &Pod) -> bool {
        self.namespace == pod.namespace && self.matches_labels(&pod.labels)
    }

    /// Whether the selector matches `labels` (namespace not checked).
    pub fn matches_labels(&self, labels: &Labels) -> bool {
        self.selector.as_ref().is_some_and(|s| s.matches(labels))
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// A short explanation of the budget's spec and status, e.g.
    /// `minAvailable 2, it allows 1 disruption now`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(m) = self.min_available {
            parts.push(format!("minAvailable {m}"));
        }
        if let Some(m) = self.max_unavailable {
            parts.push(format!("maxUnavailable {m}"));
        }
        if self.stale {
            parts.push("status not yet updated for the latest spec".to_string());
        }
        parts.push(format!(
            "it allows {} now",
            disruptions(i64::from(self.disruptions_allowed))
        ));
        parts.join(", ")
    }
}

/// `1 disruption`, `2 disruptions`.
fn disruptions(n: i64) -> String {
    format!("{n} disruption{}", if n == 1 { "" } else { "s" })
}

impl TryFrom<&policy::PodDisruptionBudget> for PodDisruptionBudget {
    type Error = ModelError;
    fn try_from(pdb: &policy::PodDisruptionBudget) -> Result<Self, Self::Error> {
        PodDisruptionBudget::from_k8s(pdb)
    }
}

fn int_or_percent(object: &str, field: &str, v: &IntOrString) -> Result<IntOrPercent, ModelError> {
    let invalid = |value: String, why: &str| ModelError::Invalid {
        object: object.to_string(),
        field: field.to_string(),
        value,
        why: why.to_string(),
    };
    match v {
        IntOrString::Int(n) if *n >= 0 => Ok(IntOrPercent::Int(*n)),
        IntOrString::Int(n) => Err(invalid(n.to_string(), "must not be negative")),
        IntOrString::String(s) => {
            let digits = s
                .strip_suffix('%')
                .ok_or_else(|| invalid(s.clone(), "a string must be a percentage like \"50%\""))?;
            match digits.parse::<i32>() {
                Ok(p) if (0..=100).contains(&p) => Ok(IntOrPercent::Percent(p)),
                _ => Err(invalid(
                    s.clone(),
                    "percentage must be an integer from 0 to 100",
                )),
            }
        }
    }
}

/// A set of evictions refused because one budget would be exceeded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "evicting pod {pod} would exceed PodDisruptionBudget {pdb_key} ({needed} covered pods to evict, \
     {remaining} disruptions left)"
)]
pub struct PdbBlocked {
    /// Index of the budget in [`DisruptionBudgets::pdbs`].
    pub pdb: usize,
    /// The budget, `namespace/name`.
    pub pdb_key: String,
    /// The first pod (`namespace/name`) that does not fit in the budget's allowance.
    pub pod: String,
    /// Disruptions the budget still allows in this loop.
    pub remaining: i64,
    /// Covered pods in the refused set.
    pub needed: i64,
}

/// Indices of the budgets covering one pod (rarely more than one).
pub type PdbIndices = SmallVec<[usize; 2]>;

/// All budgets of the cluster and how many disruptions each still allows in this loop.
///
/// Build one per loop from the current budgets; [`DisruptionBudgets::commit`] records the
/// evictions promised to earlier nodes so later nodes see what is left.
#[derive(Clone, Debug, Default)]
pub struct DisruptionBudgets {
    pdbs: Vec<PodDisruptionBudget>,
    remaining: Vec<i64>,
    by_namespace: FxHashMap<Sym, Vec<usize>>,
}

impl DisruptionBudgets {
    /// A tracker over `pdbs`, each starting at its `disruptions_allowed`.
    pub fn new(pdbs: Vec<PodDisruptionBudget>) -> DisruptionBudgets {
        let mut by_namespace: FxHashMap<Sym, Vec<usize>> = FxHashMap::default();
        for (i, p) in pdbs.iter().enumerate() {
            by_namespace.entry(p.namespace).or_default().push(i);
        }
        let remaining = pdbs
            .iter()
            .map(|p| i64::from(p.disruptions_allowed))
            .collect();
        DisruptionBudgets {
            pdbs,
            remaining,
            by_namespace,
        }
    }

    /// The budgets, in the order given to [`DisruptionBudgets::new`].
    #[inline]
    pub fn pdbs(&self) -> &[PodDisruptionBudget] {
        &self.pdbs
    }

    /// Disruptions budget `pdb` still allows in this loop (0 for an unknown index).
    #[inline]
    pub fn remaining(&self, pdb: usize) -> i64 {
        self.remaining.get(pdb).copied().unwrap_or(0)
    }

    /// Why budget `pdb` allows no further disruption in this pass: its spec, what its status
    /// allows now, and how many of those the nodes removed earlier in this pass take, e.g.
    /// `minAvailable 2, it allows 1 disruption now; nodes removed earlier in this pass take 1`.
    pub fn exhausted_detail(&self, pdb: usize) -> String {
        let Some(p) = self.pdbs.get(pdb) else {
            return String::new();
        };
        let taken = i64::from(p.disruptions_allowed) - self.remaining(pdb);
        if taken > 0 {
            format!(
                "{}; nodes removed earlier in this pass take {taken}",
                p.describe()
            )
        } else {
            p.describe()
        }
    }

    /// Indices of the budgets covering `pod`.
    #[inline]
    pub fn for_pod(&self, pod: &Pod) -> PdbIndices {
        self.by_namespace
            .get(&pod.namespace)
            .map(|idx| {
                idx.iter()
                    .copied()
                    .filter(|&i| self.pdbs[i].matches_labels(&pod.labels))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether any budget covers `pod`.
    #[inline]
    pub fn covers(&self, pod: &Pod) -> bool {
        self.by_namespace.get(&pod.namespace).is_some_and(|idx| {
            idx.iter()
                .any(|&i| self.pdbs[i].matches_labels(&pod.labels))
        })
    }

    /// The first budget covering `pod` that allows no further disruption in this loop, if any.
    #[inline]
    pub fn exhausted_for(&self, pod: &Pod) -> Option<usize> {
        self.first_exhausted(&self.for_pod(pod))
    }

    /// The first of the budgets `covering` (indices, as [`DisruptionBudgets::for_pod`] gives
    /// them) that allows no further disruption in this loop, if any: for a caller that has
    /// already looked a pod's budgets up.
    #[inline]
    pub fn first_exhausted(&self, covering: &[usize]) -> Option<usize> {
        covering.iter().copied().find(|&i| self.remaining(i) < 1)
    }

    /// Checks that evicting all of `pods` together, on top of what was committed earlier in this
    /// loop, exceeds no budget: for every budget, the number of covered pods in the set must not
    /// exceed its remaining allowance. A pod covered by several budgets needs all of them.
    pub fn can_evict(&self, pods: &[&Pod]) -> Result<(), PdbBlocked> {
        // Without budgets nothing is looked up: scale-down asks this of every drained node.
        if self.pdbs.is_empty() {
            return Ok(());
        }
        let mut needed: FxHashMap<usize, i64> = FxHashMap::default();
        for pod in pods {
            for i in self.for_pod(pod) {
                let n = needed.entry(i).or_insert(0);
                *n += 1;
                let remaining = self.remaining(i);
                if *n > remaining {
                    return Err(PdbBlocked {
                        pdb: i,
                        pdb_key: self.pdbs[i].key(),
                        pod: pod.key(),
                        remaining,
                        needed: *n,
                    });
                }
            }
        }
        Ok(())
    }

    /// Records the eviction of `pods`: every budget covering one of them loses one allowed
    /// disruption per covered pod. Call after [`DisruptionBudgets::can_evict`] accepted the set;
    /// committing more than allowed drives the remaining allowance below zero, which blocks every
    /// further covered pod.
    pub fn commit(&mut self, pods: &[&Pod]) {
        for pod in pods {
            for i in self.for_pod(pod) {
                if let Some(r) = self.remaining.get_mut(i) {
                    *r -= 1;
                }
            }
        }
    }

    /// Forgets every commit: each budget is back at its `disruptions_allowed`.
    pub fn reset(&mut self) {
        for (r, p) in self.remaining.iter_mut().zip(&self.pdbs) {
            *r = i64::from(p.disruptions_allowed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::PodBuilder;
    use proptest::prelude::*;
    use serde_json::json;

    fn sel(k: &str, v: &str) -> Option<LabelSelector> {
        Some(LabelSelector {
            match_labels: Labels::from_pairs([(k, v)]),
            match_expressions: Vec::new(),
        })
    }

    fn pod(name: &str, labels: &[(&str, &str)]) -> Pod {
        labels
            .iter()
            .fold(PodBuilder::new(name, 100, 0), |b, (k, v)| b.label(k, v))
            .build()
    }

    fn parse(v: serde_json::Value) -> Result<PodDisruptionBudget, ModelError> {
        let api: policy::PodDisruptionBudget = serde_json::from_value(v).expect("valid json");
        PodDisruptionBudget::from_k8s(&api)
    }

    #[test]
    fn from_k8s_reads_spec_and_status() {
        let p = parse(json!({
            "metadata": {"name": "web", "namespace": "prod", "generation": 2},
            "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe"]}]}},
            "status": {"disruptionsAllowed": 3, "observedGeneration": 2, "currentHealthy": 4,
                       "desiredHealthy": 1, "expectedPods": 4}
        }))
        .expect("valid pdb");
        assert_eq!(p.key(), "prod/web");
        assert_eq!(p.disruptions_allowed, 3);
        assert!(!p.stale);
        assert_eq!(p.min_available, Some(IntOrPercent::Percent(50)));
        assert_eq!(p.max_unavailable, None);
        let mut ok = pod("a", &[("app", "web"), ("tier", "fe")]);
        ok.namespace = Sym::new("prod");
        assert!(p.matches(&ok));
        let mut other_ns = ok.clone();
        other_ns.namespace = Sym::new("default");
        assert!(!p.matches(&other_ns), "another namespace is never covered");
        assert!(p.describe().contains("minAvailable 50%"));
    }

    #[test]
    fn an_exhausted_budget_says_what_it_allows_now_and_what_earlier_removals_took() {
        let p = parse(json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 1}
        }))
        .expect("valid pdb");
        let mut b = DisruptionBudgets::new(vec![p]);
        let web = pod("a", &[("app", "web")]);
        assert_eq!(
            b.exhausted_detail(0),
            "minAvailable 2, it allows 1 disruption now"
        );
        b.commit(&[&web]);
        assert_eq!(b.exhausted_for(&web), Some(0));
        let detail = b.exhausted_detail(0);
        assert_eq!(
            detail,
            "minAvailable 2, it allows 1 disruption now; \
             nodes removed earlier in this pass take 1"
        );
        assert!(!detail.contains("disruptions allowed"), "{detail}");
        let none = parse(json!({
            "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"disruptionsAllowed": 0}
        }))
        .expect("valid pdb");
        let b = DisruptionBudgets::new(vec![none]);
        assert_eq!(
            b.exhausted_detail(0),
            "maxUnavailable 0, it allows 0 disruptions now"
        );
    }

    #[test]
    fn null_selector_matches_nothing_empty_matches_all() {
        let null = parse(json!({"metadata": {"name": "n"}, "spec": {},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}}))
        .expect("valid");
        let empty = parse(json!({"metadata": {"name": "e"}, "spec": {"selector": {}},
            "status": {"disruptionsAllowed": 1, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}}))
        .expect("valid");
        let p = pod("a", &[("app", "x")]);
        assert_eq!(null.namespace.as_str(), "default");
        assert!(!null.matches(&p));
        assert!(empty.matches(&p));
        assert!(empty.matches(&pod("b", &[])));
    }

    #[test]
    fn stale_or_missing_status_allows_nothing() {
        let stale = parse(json!({"metadata": {"name": "s", "generation": 3},
            "spec": {"selector": {}},
            "status": {"disruptionsAllowed": 5, "observedGeneration": 2, "currentHealthy": 0,
                       "desiredHealthy": 0, "expectedPods": 0}}))
        .expect("valid");
        assert!(stale.stale);
        assert_eq!(stale.disruptions_allowed, 0);
        let no_status =
            parse(json!({"metadata": {"name": "s"}, "spec": {"selector": {}}})).expect("valid");
        assert_eq!(no_status.disruptions_allowed, 0);
    }

    #[test]
    fn malformed_objects_name_budget_and_field() {
        let cases = [
            (
                json!({"metadata": {"namespace": "x"}, "spec": {}}),
                "metadata.name",
            ),
            (
                json!({"metadata": {"name": "p"}, "spec": {"maxUnavailable": "lots"}}),
                "spec.maxUnavailable",
            ),
            (
                json!({"metadata": {"name": "p"}, "spec": {"minAvailable": "150%"}}),
                "spec.minAvailable",
            ),
            (
                json!({"metadata": {"name": "p"}, "spec": {"selector": {"matchExpressions":
                    [{"key": "a", "operator": "Near"}]}}}),
                "spec.selector.matchExpressions[0].operator",
            ),
            (
                json!({"metadata": {"name": "p"}, "spec": {}, "status": {"disruptionsAllowed": -1,
                    "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}}),
                "status.disruptionsAllowed",
            ),
        ];
        for (obj, field) in cases {
            let err = parse(obj).expect_err("malformed");
            let msg = err.to_string();
            assert!(msg.contains("PodDisruptionBudget"), "{msg}");
            assert!(msg.contains(field), "{msg} should name {field}");
        }
    }

    #[test]
    fn allowance_one_two_covered_pods() {
        let mut b = DisruptionBudgets::new(vec![PodDisruptionBudget::new(
            "default",
            "web",
            sel("app", "web"),
            1,
        )]);
        let (p1, p2) = (pod("p1", &[("app", "web")]), pod("p2", &[("app", "web")]));
        let other = pod("o", &[("app", "db")]);
        assert_eq!(b.for_pod(&p1).as_slice(), &[0]);
        assert!(b.for_pod(&other).is_empty());
        assert!(b.can_evict(&[&p1]).is_ok());
        assert!(b.can_evict(&[&p2, &other]).is_ok());
        let err = b
            .can_evict(&[&p1, &p2])
            .expect_err("two evictions, allowance one");
        assert_eq!(
            (err.pdb, err.pod.as_str(), err.needed),
            (0, "default/p2", 2)
        );
        assert!(err.to_string().contains("default/web"));
        b.commit(&[&p1]);
        assert_eq!(b.remaining(0), 0);
        assert!(b.can_evict(&[&p2]).is_err(), "commit used the allowance");
        assert_eq!(b.exhausted_for(&p2), Some(0));
        assert!(
            b.can_evict(&[&other]).is_ok(),
            "uncovered pods are unaffected"
        );
        b.reset();
        assert!(b.can_evict(&[&p2]).is_ok());
    }

    #[test]
    fn every_covering_budget_must_allow() {
        let b = DisruptionBudgets::new(vec![
            PodDisruptionBudget::new("default", "by-app", sel("app", "web"), 5),
            PodDisruptionBudget::new("default", "by-tier", sel("tier", "fe"), 0),
        ]);
        let both = pod("p", &[("app", "web"), ("tier", "fe")]);
        let app_only = pod("q", &[("app", "web")]);
        assert_eq!(b.for_pod(&both).as_slice(), &[0, 1]);
        let err = b.can_evict(&[&both]).expect_err("by-tier allows nothing");
        assert_eq!(err.pdb, 1);
        assert!(b.can_evict(&[&app_only]).is_ok());
        assert!(b.covers(&app_only));
    }

    proptest! {
        /// However batches are proposed, accepted commits never exceed any budget's allowance.
        #[test]
        fn commits_never_exceed_allowance(
            allowed in proptest::collection::vec(0i32..4, 1..4),
            batches in proptest::collection::vec(
                proptest::collection::vec((0usize..4, 0usize..4), 0..5), 0..8),
        ) {
            // Budget i selects label `b<i>=y`; a pod carries the labels of up to two budgets.
            let pdbs: Vec<_> = allowed.iter().enumerate().map(|(i, &a)| {
                PodDisruptionBudget::new("default", &format!("b{i}"), sel(&format!("b{i}"), "y"), a)
            }).collect();
            let mut budgets = DisruptionBudgets::new(pdbs);
            let mut used = vec![0i64; allowed.len()];
            let mut n = 0;
            for batch in batches {
                let pods: Vec<Pod> = batch.iter().map(|&(x, y)| {
                    n += 1;
                    let bx = format!("b{x}");
                    let by = format!("b{y}");
                    pod(&format!("p{n}"), &[(bx.as_str(), "y"), (by.as_str(), "y")])
                }).collect();
                let refs: Vec<&Pod> = pods.iter().collect();
                if budgets.can_evict(&refs).is_ok() {
                    for p in &refs {
                        for i in budgets.for_pod(p) { used[i] += 1; }
                    }
                    budgets.commit(&refs);
                }
            }
            for (i, &a) in allowed.iter().enumerate() {
                prop_assert!(used[i] <= i64::from(a), "budget {} used {} of {}", i, used[i], a);
                prop_assert_eq!(budgets.remaining(i), i64::from(a) - used[i]);
            }
        }
    }
}
