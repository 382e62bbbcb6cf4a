//! Label sets and label selectors (the `metav1.LabelSelector` semantics used by pod affinity,
//! topology spread and PodDisruptionBudgets).
//!
//! A [`Labels`] set is a sorted vector of interned pairs: small, cache-friendly and searched by
//! binary search. Selectors must match exactly as the API server does; they never allocate while
//! matching.

use crate::intern::Sym;

/// A set of labels, sorted by key, keys unique.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Labels(Vec<(Sym, Sym)>);

impl Labels {
    /// An empty set.
    pub fn new() -> Labels {
        Labels(Vec::new())
    }

    /// Builds a set from pairs; a later duplicate key wins.
    pub fn from_pairs<K: AsRef<str>, V: AsRef<str>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Labels {
        let mut v: Vec<(Sym, Sym)> = Vec::new();
        for (k, val) in pairs {
            let k = Sym::new(k.as_ref());
            let val = Sym::new(val.as_ref());
            match v.iter_mut().find(|(key, _)| *key == k) {
                Some(slot) => slot.1 = val,
                None => v.push((k, val)),
            }
        }
        v.sort_unstable_by_key(|(k, _)| *k);
        Labels(v)
    }

    /// The value of `key`, if present.
    #[inline]
    pub fn get(&self, key: Sym) -> Option<Sym> {
        self.0
            .binary_search_by_key(&key, |(k, _)| *k)
            .ok()
            .map(|i| self.0[i].1)
    }

    /// The value of the label named `key`, if present (looks the key up without interning it).
    pub fn get_str(&self, key: &str) -> Option<&'static str> {
        Sym::lookup(key).and_then(|k| self.get(k)).map(Sym::as_str)
    }

    /// Whether `key` is present.
    #[inline]
    pub fn contains_key(&self, key: Sym) -> bool {
        self.get(key).is_some()
    }

    /// Sets `key` to `value`, replacing any previous value.
    pub fn insert(&mut self, key: Sym, value: Sym) {
        match self.0.binary_search_by_key(&key, |(k, _)| *k) {
            Ok(i) => self.0[i].1 = value,
            Err(i) => self.0.insert(i, (key, value)),
        }
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: Sym) -> Option<Sym> {
        match self.0.binary_search_by_key(&key, |(k, _)| *k) {
            Ok(i) => Some(self.0.remove(i).1),
            Err(_) => None,
        }
    }

    /// The pairs, sorted by key.
    pub fn iter(&self) -> impl Iterator<Item = (Sym, Sym)> + '_ {
        self.0.iter().copied()
    }

    /// Number of labels.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no labels.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether every pair of `subset` is present here with the same value.
    pub fn contains_all(&self, subset: &Labels) -> bool {
        subset.0.iter().all(|(k, v)| self.get(*k) == Some(*v))
    }
}

/// Operator of a label selector requirement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SelectorOp {
    /// The label's value is one of the values.
    In,
    /// The label is absent or its value is none of the values.
    NotIn,
    /// The label is present.
    Exists,
    /// The label is absent.
    DoesNotExist,
}

/// One `matchExpressions` entry.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SelectorRequirement {
    /// Label key.
    pub key: Sym,
    /// Operator.
    pub op: SelectorOp,
    /// Values (empty for Exists / DoesNotExist).
    pub values: Vec<Sym>,
}

impl SelectorRequirement {
    /// Whether `labels` satisfy this requirement.
    #[inline]
    pub fn matches(&self, labels: &Labels) -> bool {
        let v = labels.get(self.key);
        match self.op {
            SelectorOp::In => v.is_some_and(|v| self.values.contains(&v)),
            SelectorOp::NotIn => v.is_none_or(|v| !self.values.contains(&v)),
            SelectorOp::Exists => v.is_some(),
            SelectorOp::DoesNotExist => v.is_none(),
        }
    }
}

/// A `metav1.LabelSelector`. An empty selector matches everything; a missing selector (modelled
/// by the caller as `Option::None`) matches nothing, as in pod affinity terms.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LabelSelector {
    /// `matchLabels`.
    pub match_labels: Labels,
    /// `matchExpressions`.
    pub match_expressions: Vec<SelectorRequirement>,
}

impl LabelSelector {
    /// Whether `labels` satisfy every requirement.
    #[inline]
    pub fn matches(&self, labels: &Labels) -> bool {
        labels.contains_all(&self.match_labels)
            && self.match_expressions.iter().all(|r| r.matches(labels))
    }

    /// Whether the selector has no requirement at all (and so selects everything).
    pub fn is_empty(&self) -> bool {
        self.match_labels.is_empty() && self.match_expressions.is_empty()
    }
}

/// Checks a Kubernetes qualified name (label and annotation keys, taint keys, extended
/// resource names): an optional DNS-1123 subdomain prefix and `/`, then a name of at most 63
/// characters, alphanumeric at both ends with `-`, `_`, `.` inside.
pub fn check_qualified_name(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix
        && !is_dns_subdomain(p)
    {
        return Err(format!("{key:?}: prefix {p:?} is not a DNS subdomain"));
    }
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let valid = !name.is_empty()
        && name.len() <= 63
        && name.chars().all(ok_char)
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !valid {
        return Err(format!(
            "{key:?} is not a qualified name ([prefix/]name, name up to 63 alphanumerics, '-', '_', '.')"
        ));
    }
    Ok(())
}

/// A DNS-1123 subdomain: at most 253 characters, dot-separated lowercase alphanumeric labels
/// with `-` inside.
fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: SelectorOp, values: &[&str]) -> SelectorRequirement {
        SelectorRequirement {
            key: Sym::new(key),
            op,
            values: values.iter().map(|v| Sym::new(v)).collect(),
        }
    }

    #[test]
    fn labels_are_sorted_and_unique() {
        let mut l = Labels::from_pairs([("b", "1"), ("a", "2"), ("b", "3")]);
        assert_eq!(l.len(), 2);
        assert_eq!(l.get_str("b"), Some("3"));
        l.insert(Sym::new("0"), Sym::new("x"));
        assert_eq!(
            l.iter().next().map(|(k, _)| k),
            l.iter().map(|(k, _)| k).min()
        );
        assert_eq!(l.remove(Sym::new("a")), Some(Sym::new("2")));
        assert_eq!(l.get_str("a"), None);
    }

    #[test]
    fn selector_semantics() {
        let l = Labels::from_pairs([("app", "web"), ("tier", "fe")]);
        let empty = LabelSelector::default();
        assert!(empty.matches(&l) && empty.matches(&Labels::new()));
        let s = LabelSelector {
            match_labels: Labels::from_pairs([("app", "web")]),
            match_expressions: vec![req("tier", SelectorOp::In, &["fe", "be"])],
        };
        assert!(s.matches(&l));
        assert!(!s.matches(&Labels::from_pairs([("app", "web")])));
        assert!(
            req("x", SelectorOp::NotIn, &["1"]).matches(&l),
            "NotIn matches a missing key"
        );
        assert!(!req("app", SelectorOp::NotIn, &["web"]).matches(&l));
        assert!(req("app", SelectorOp::Exists, &[]).matches(&l));
        assert!(req("x", SelectorOp::DoesNotExist, &[]).matches(&l));
        assert!(!req("app", SelectorOp::DoesNotExist, &[]).matches(&l));
    }

    #[test]
    fn qualified_names_follow_kubernetes_rules() {
        for ok in [
            "app",
            "nvidia.com/gpu",
            "node.kubernetes.io/not-ready",
            "a_b.c-d",
            "A1",
        ] {
            assert_eq!(check_qualified_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "a/b/c",
            "/x",
            "x/",
            "-a",
            "a-",
            "a b",
            "Foo.com/x",
            &"a".repeat(64),
        ] {
            assert!(check_qualified_name(bad).is_err(), "{bad}");
        }
    }
}
