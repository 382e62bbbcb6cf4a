//! Process-wide string interning for label keys and values, namespaces, node names and resource
//! names. Interned symbols are `Copy`, four bytes wide and compare in one instruction, which keeps
//! the model compact and the predicate hot path free of string comparisons.
//!
//! The interner only grows; it must never be used for unbounded, per-request strings (pod names,
//! uids), only for the vocabulary of a cluster.

use std::fmt;
use std::sync::LazyLock;

use lasso::{Spur, ThreadedRodeo};

/// Hashed with aHash, seeded per process: as resistant to crafted collisions as the default
/// SipHash (label values come from anyone who may create a pod), several times faster on the
/// short strings interned for every converted object.
static INTERNER: LazyLock<ThreadedRodeo<Spur, ahash::RandomState>> =
    LazyLock::new(|| ThreadedRodeo::with_hasher(ahash::RandomState::new()));

/// An interned string.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym(Spur);

impl Sym {
    /// Interns `s`, returning its symbol (the same symbol for equal strings).
    pub fn new(s: &str) -> Sym {
        Sym(INTERNER.get_or_intern(s))
    }

    /// The symbol of `s` if it was ever interned; `None` means no label, name or key with this
    /// text exists anywhere, which callers use to answer "no match" without interning.
    pub fn lookup(s: &str) -> Option<Sym> {
        INTERNER.get(s).map(Sym)
    }

    /// The interned text.
    pub fn as_str(self) -> &'static str {
        // The interner is a static that is never dropped, so its strings live forever.
        let rodeo: &'static ThreadedRodeo<Spur, ahash::RandomState> = &INTERNER;
        rodeo.resolve(&self.0)
    }
}

impl From<&str> for Sym {
    fn from(s: &str) -> Self {
        Sym::new(s)
    }
}

impl fmt::Debug for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Sym {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_share_a_symbol() {
        let a = Sym::new("topology.kubernetes.io/zone");
        let b = Sym::new("topology.kubernetes.io/zone");
        assert_eq!(a, b);
        assert_ne!(a, Sym::new("kubernetes.io/hostname"));
        assert_eq!(a.as_str(), "topology.kubernetes.io/zone");
        assert_eq!(Sym::lookup("topology.kubernetes.io/zone"), Some(a));
        assert_eq!(Sym::lookup("never-interned-\u{1F600}"), None);
    }
}
