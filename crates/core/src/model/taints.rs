//! Taints and tolerations, with the matching rules of the TaintToleration filter.
//!
//! Only `NoSchedule` and `NoExecute` taints keep a pod off a node; `PreferNoSchedule` never does.

use crate::model::intern::Sym;

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
}
