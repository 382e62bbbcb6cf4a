//! Process-wide string interning for label keys and values, namespaces, node names and resource
//! names. Interned symbols are `Copy`, four bytes wide and compare in one instruction, which keeps
//! the model compact and the predicate hot path free of string comparisons.
//!
//! The interner only grows; it must never be used for unbounded, per-request strings (pod names,
//! uids), only for the vocabulary of a cluster.
//!
//! Each thread keeps the symbols it interned last in a small table of its own,
//! answered before the shared interner is asked: converting 450,000 listed pods interns ~20
//! strings per pod out of a vocabulary of a few dozen (condition types, label keys, resource
//! names), and the shared table's lookup (a hash, a shard lock, a probe) was 7% of the conversion
//! thread's time.

use std::cell::RefCell;
use std::fmt;
use std::sync::LazyLock;

use lasso::{Spur, ThreadedRodeo};

use super::recent::RecentTable;

/// Hashed with aHash, seeded per process: as resistant to crafted collisions as the default
/// SipHash (label values come from anyone who may create a pod), several times faster on the
/// short strings interned for every converted object.
static INTERNER: LazyLock<ThreadedRodeo<Spur, ahash::RandomState>> =
    LazyLock::new(|| ThreadedRodeo::with_hasher(ahash::RandomState::new()));

/// Slots of a thread's table of recent symbols.
const RECENT_SLOTS: usize = 256;

thread_local! {
    /// The symbols this thread interned last (every one the shared interner's, so a miss or an
    /// eviction changes nothing but the time taken).
    static RECENT: RefCell<RecentTable<(&'static str, Sym)>> =
        RefCell::new(RecentTable::new(RECENT_SLOTS));
}

/// An interned string.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sym(Spur);

impl Sym {
    /// Interns `s`, returning its symbol (the same symbol for equal strings).
    pub fn new(s: &str) -> Sym {
        // A thread being torn down (its table gone) asks the shared table directly.
        RECENT
            .try_with(|r| {
                r.borrow_mut().get_or_insert(
                    s,
                    |(text, _)| text,
                    || {
                        let sym = Sym(INTERNER.get_or_intern(s));
                        (sym.as_str(), sym)
                    },
                )
            })
            .map(|(_, sym)| sym)
            .unwrap_or_else(|_| Sym(INTERNER.get_or_intern(s)))
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

    /// Through the thread's table or not, and from any thread, equal strings get one symbol
    /// and different strings different ones, also when they share a slot.
    #[test]
    // A second thread, with a table of its own, is what this checks (the shells intern from
    // several threads).
    #[allow(clippy::disallowed_methods)]
    fn the_recent_table_answers_as_the_shared_interner() {
        let words: Vec<String> = (0..4 * RECENT_SLOTS).map(|i| format!("w-{i}")).collect();
        let first: Vec<Sym> = words.iter().map(|w| Sym::new(w)).collect();
        // Again in reverse order, after evictions: the same symbols.
        for (w, s) in words.iter().zip(&first).rev() {
            assert_eq!(Sym::new(w), *s);
            assert_eq!(s.as_str(), w);
        }
        let distinct: std::collections::HashSet<Sym> = first.iter().copied().collect();
        assert_eq!(distinct.len(), words.len());
        let elsewhere =
            std::thread::spawn(move || words.iter().map(|w| Sym::new(w)).collect::<Vec<_>>())
                .join()
                .expect("thread");
        assert_eq!(elsewhere, first);
    }
}
