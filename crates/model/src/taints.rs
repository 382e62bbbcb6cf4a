//! Taints and tolerations, with the matching rules of the TaintToleration filter.
//!
//! Only `NoSchedule` and `NoExecute` taints keep a pod off a node; `PreferNoSchedule` never does.

use crate::intern::Sym;
use crate::labels::check_qualified_name;
use crate::names::{IGNORE_TAINT_PREFIX, STARTUP_TAINT_PREFIX, STATUS_TAINT_PREFIX};

/// A taint effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TaintEffect {
    /// `NoSchedule`.
    NoSchedule,
    /// `PreferNoSchedule`: a preference only, ignored by the filter.
    PreferNoSchedule,
    /// `NoExecute`.
    NoExecute,
}

impl TaintEffect {
    /// Parses the API spelling.
    pub fn parse(s: &str) -> Option<TaintEffect> {
        match s {
            "NoSchedule" => Some(TaintEffect::NoSchedule),
            "PreferNoSchedule" => Some(TaintEffect::PreferNoSchedule),
            "NoExecute" => Some(TaintEffect::NoExecute),
            _ => None,
        }
    }

    /// The API spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaintEffect::NoSchedule => "NoSchedule",
            TaintEffect::PreferNoSchedule => "PreferNoSchedule",
            TaintEffect::NoExecute => "NoExecute",
        }
    }
}

/// A node taint.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Taint {
    /// Key.
    pub key: Sym,
    /// Value (empty string when absent).
    pub value: Sym,
    /// Effect.
    pub effect: TaintEffect,
}

/// Which node taints are expected to go away (startup taints) or only report a status (status
/// taints), from `--startup-taint` (and the deprecated `--ignore-taint`) and `--status-taint`,
/// plus the key prefixes upstream honours without any flag.
///
/// A startup taint means the node has not finished starting: the node counts as not ready. A
/// status taint only describes the node: it still counts as ready. Both are left out of node
/// templates, so a new node is not expected to carry them.
///
/// Every key listed is a qualified name, as the API requires of a taint key (a key that is not
/// could never match a node's taint): the constructor and the setters refuse one that is not.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaintConfig {
    /// Exact keys of startup taints.
    startup: Vec<String>,
    /// Exact keys of status taints.
    status: Vec<String>,
}

/// A taint key [`TaintConfig`] refused: not a qualified name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct InvalidTaintKey {
    field: &'static str,
    key: String,
    reason: String,
}

impl InvalidTaintKey {
    /// The field the key was meant for (`startup` or `status`).
    pub fn field(&self) -> &'static str {
        self.field
    }

    /// The key refused.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// Why it was refused (it names the key).
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

/// `keys` if each is a qualified name, or the first that is not, for `field`.
fn qualified_keys(field: &'static str, keys: Vec<String>) -> Result<Vec<String>, InvalidTaintKey> {
    for key in &keys {
        check_qualified_name(key).map_err(|reason| InvalidTaintKey {
            field,
            key: key.clone(),
            reason,
        })?;
    }
    Ok(keys)
}

impl TaintConfig {
    /// The startup and status taint keys, each checked to be a qualified name.
    pub fn new(startup: Vec<String>, status: Vec<String>) -> Result<TaintConfig, InvalidTaintKey> {
        Ok(TaintConfig {
            startup: qualified_keys("startup", startup)?,
            status: qualified_keys("status", status)?,
        })
    }

    /// The exact keys of startup taints (`--startup-taint`, `--ignore-taint`).
    pub fn startup(&self) -> &[String] {
        &self.startup
    }

    /// The exact keys of status taints (`--status-taint`).
    pub fn status(&self) -> &[String] {
        &self.status
    }

    /// Sets [`Self::startup`]; each key must be a qualified name (nothing is changed otherwise).
    pub fn set_startup(&mut self, keys: Vec<String>) -> Result<(), InvalidTaintKey> {
        self.startup = qualified_keys("startup", keys)?;
        Ok(())
    }

    /// Sets [`Self::status`]; each key must be a qualified name (nothing is changed otherwise).
    pub fn set_status(&mut self, keys: Vec<String>) -> Result<(), InvalidTaintKey> {
        self.status = qualified_keys("status", keys)?;
        Ok(())
    }

    /// Whether `key` is a startup taint (listed, or under a startup or ignore prefix).
    pub fn is_startup(&self, key: &str) -> bool {
        key.starts_with(STARTUP_TAINT_PREFIX)
            || key.starts_with(IGNORE_TAINT_PREFIX)
            || self.startup.iter().any(|k| k == key)
    }

    /// Whether `key` is a status taint (listed, or under the status prefix).
    pub fn is_status(&self, key: &str) -> bool {
        key.starts_with(STATUS_TAINT_PREFIX) || self.status.iter().any(|k| k == key)
    }

    /// The first startup taint of `taints`, if any.
    pub fn startup_taint<'a>(&self, taints: &'a [Taint]) -> Option<&'a Taint> {
        taints.iter().find(|t| self.is_startup(t.key.as_str()))
    }

    /// Whether a node with `taints` and Ready condition `ready` has started: Ready and without
    /// a startup taint (upstream overrides such a node's readiness to not ready).
    pub fn is_started_ready(&self, ready: bool, taints: &[Taint]) -> bool {
        ready && self.startup_taint(taints).is_none()
    }
}

/// Operator of a toleration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TolerationOp {
    /// `Equal` (the default): key and value must match.
    Equal,
    /// `Exists`: any value; with an empty key, any taint.
    Exists,
}

/// A pod toleration.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Toleration {
    /// Key; `None` (empty) with `Exists` tolerates every key.
    pub key: Option<Sym>,
    /// Operator.
    pub op: TolerationOp,
    /// Value for `Equal` (empty string when absent).
    pub value: Sym,
    /// Effect; `None` tolerates every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// Whether this toleration tolerates `taint` (Kubernetes `ToleratesTaint`).
    #[inline]
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if self.key.is_some_and(|k| k != taint.key) {
            return false;
        }
        match self.op {
            TolerationOp::Exists => true,
            // An empty key is only meaningful with Exists; with Equal it matches no taint key
            // except the empty one, which the API forbids.
            TolerationOp::Equal => self.key.is_some() && self.value == taint.value,
        }
    }
}

/// The first `NoSchedule`/`NoExecute` taint of `taints` that no toleration tolerates.
pub fn first_untolerated<'a>(taints: &'a [Taint], tolerations: &[Toleration]) -> Option<&'a Taint> {
    taints.iter().find(|t| {
        t.effect != TaintEffect::PreferNoSchedule && !tolerations.iter().any(|tol| tol.tolerates(t))
    })
}

/// How many `PreferNoSchedule` taints of `taints` no toleration tolerates: what kube-scheduler's
/// `TaintToleration` score plugin counts (fewer is better).
pub fn intolerable_preferences(taints: &[Taint], tolerations: &[Toleration]) -> usize {
    taints
        .iter()
        .filter(|t| {
            t.effect == TaintEffect::PreferNoSchedule
                && !tolerations.iter().any(|tol| tol.tolerates(t))
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn taint(k: &str, v: &str, e: TaintEffect) -> Taint {
        Taint {
            key: Sym::new(k),
            value: Sym::new(v),
            effect: e,
        }
    }

    fn tol(k: Option<&str>, op: TolerationOp, v: &str, e: Option<TaintEffect>) -> Toleration {
        Toleration {
            key: k.map(Sym::new),
            op,
            value: Sym::new(v),
            effect: e,
        }
    }

    #[test]
    fn toleration_rules() {
        let t = taint("gpu", "true", TaintEffect::NoSchedule);
        assert!(tol(Some("gpu"), TolerationOp::Equal, "true", None).tolerates(&t));
        assert!(!tol(Some("gpu"), TolerationOp::Equal, "false", None).tolerates(&t));
        assert!(tol(Some("gpu"), TolerationOp::Exists, "", None).tolerates(&t));
        assert!(
            tol(None, TolerationOp::Exists, "", None).tolerates(&t),
            "empty key + Exists"
        );
        assert!(!tol(None, TolerationOp::Equal, "", None).tolerates(&t));
        assert!(
            !tol(
                Some("gpu"),
                TolerationOp::Exists,
                "",
                Some(TaintEffect::NoExecute)
            )
            .tolerates(&t)
        );
        assert!(
            tol(
                None,
                TolerationOp::Exists,
                "",
                Some(TaintEffect::NoSchedule)
            )
            .tolerates(&t)
        );
    }

    #[test]
    fn prefer_no_schedule_never_blocks() {
        let taints = [
            taint("a", "", TaintEffect::PreferNoSchedule),
            taint("b", "", TaintEffect::NoExecute),
        ];
        assert_eq!(
            first_untolerated(&taints, &[]).map(|t| t.key),
            Some(Sym::new("b"))
        );
        let tols = [tol(Some("b"), TolerationOp::Exists, "", None)];
        assert!(first_untolerated(&taints, &tols).is_none());
    }

    #[test]
    fn only_untolerated_preferences_are_counted() {
        let taints = [
            taint("a", "", TaintEffect::PreferNoSchedule),
            taint("b", "1", TaintEffect::PreferNoSchedule),
            taint("c", "", TaintEffect::NoSchedule),
        ];
        assert_eq!(intolerable_preferences(&taints, &[]), 2);
        let exists_a = tol(Some("a"), TolerationOp::Exists, "", None);
        assert_eq!(intolerable_preferences(&taints, &[exists_a]), 1);
        // A toleration for another effect does not tolerate a preference.
        let b_no_schedule = tol(
            Some("b"),
            TolerationOp::Equal,
            "1",
            Some(TaintEffect::NoSchedule),
        );
        assert_eq!(intolerable_preferences(&taints, &[b_no_schedule]), 2);
        let everything = tol(None, TolerationOp::Exists, "", None);
        assert_eq!(intolerable_preferences(&taints, &[everything]), 0);
    }

    #[test]
    fn startup_and_status_taints_by_key_and_prefix() {
        let cfg = TaintConfig::new(
            vec!["example.com/warming".into()],
            vec!["example.com/degraded".into()],
        )
        .unwrap();
        for key in [
            "example.com/warming",
            "startup-taint.cluster-autoscaler.kubernetes.io/cni",
            "ignore-taint.cluster-autoscaler.kubernetes.io/cni",
        ] {
            assert!(cfg.is_startup(key), "{key}");
            assert!(!cfg.is_status(key), "{key}");
        }
        for key in [
            "example.com/degraded",
            "status-taint.cluster-autoscaler.kubernetes.io/gpu",
        ] {
            assert!(cfg.is_status(key), "{key}");
            assert!(!cfg.is_startup(key), "{key}");
        }
        assert!(!cfg.is_startup("example.com/warming-up"));
        assert!(!TaintConfig::default().is_startup("example.com/warming"));
    }

    #[test]
    fn a_ready_node_with_a_startup_taint_has_not_started_but_a_status_taint_is_harmless() {
        let cfg = TaintConfig::default();
        let startup = [taint(
            "startup-taint.cluster-autoscaler.kubernetes.io/cni",
            "",
            TaintEffect::NoSchedule,
        )];
        let status = [taint(
            "status-taint.cluster-autoscaler.kubernetes.io/x",
            "",
            TaintEffect::NoSchedule,
        )];
        assert!(!cfg.is_started_ready(true, &startup));
        assert!(cfg.is_started_ready(true, &status));
        assert!(cfg.is_started_ready(true, &[]));
        assert!(!cfg.is_started_ready(false, &[]));
    }

    #[test]
    fn a_key_that_is_not_a_qualified_name_is_refused_naming_its_field() {
        for bad in [
            "",
            "two words",
            "-lead",
            "Example.com/x",
            "example.com/",
            "a/b/c",
        ] {
            let e = TaintConfig::new(vec![bad.into()], vec![]).unwrap_err();
            assert_eq!((e.field(), e.key()), ("startup", bad), "{e}");
            let e = TaintConfig::new(vec![], vec![bad.into()]).unwrap_err();
            assert_eq!((e.field(), e.key()), ("status", bad), "{e}");
        }
        let e = TaintConfig::new(vec!["ok".into(), "not ok".into()], vec![]).unwrap_err();
        assert!(e.to_string().starts_with("startup: \"not ok\""), "{e}");
        let mut cfg = TaintConfig::default();
        cfg.set_startup(vec!["example.com/warming".into()]).unwrap();
        assert!(cfg.set_startup(vec!["bad key".into()]).is_err());
        assert!(cfg.set_status(vec!["bad key".into()]).is_err());
        assert_eq!(
            cfg.startup(),
            ["example.com/warming"],
            "a refused list changes nothing"
        );
        assert!(cfg.status().is_empty());
        cfg.set_status(vec![
            "ignore-taint.cluster-autoscaler.kubernetes.io/x".into(),
        ])
        .unwrap();
        assert_eq!(
            cfg.status(),
            ["ignore-taint.cluster-autoscaler.kubernetes.io/x"]
        );
    }
}
