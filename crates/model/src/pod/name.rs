//! A pod's name together with its hash, computed once when the name is made.
//!
//! The snapshot indexes every pod by its namespace and name; hashing the name's text there
//! means reading the name's own allocation for every pod of every build. Carrying the hash in
//! the name makes it as cheap as reading an integer of the pod. The hash can never go stale:
//! the text cannot be changed in place, and every way of making a name computes it. This type
//! decides nothing; it must always compare, order, hash and print exactly as its text does.

use std::borrow::Borrow;
use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::ops::Deref;
use std::sync::Arc;

use rustc_hash::FxBuildHasher;

/// The hash [`PodName::text_hash`] returns for `text`: what lookups by a name given as text
/// compute to find a pod indexed by its [`PodName`].
pub fn text_hash(text: &str) -> u64 {
    FxBuildHasher.hash_one(text)
}

/// A pod's name, and its text's hash (see [`text_hash`]).
///
/// `repr(C)`, hash first: a reference to the name is the address of its hash, which is what
/// the snapshot build reads (and asks the CPU for ahead of time).
#[derive(Clone)]
#[repr(C)]
pub struct PodName {
    hash: u64,
    text: Arc<str>,
}

impl PodName {
    /// The name `text`.
    pub fn new(text: Arc<str>) -> PodName {
        let hash = text_hash(&text);
        PodName { hash, text }
    }

    /// The text's hash, as [`text_hash`] computes it (stored: reading it reads no text).
    #[inline]
    pub fn text_hash(&self) -> u64 {
        self.hash
    }

    /// The text, shared.
    pub fn as_arc(&self) -> &Arc<str> {
        &self.text
    }
}

impl Deref for PodName {
    type Target = str;
    #[inline]
    fn deref(&self) -> &str {
        &self.text
    }
}

impl AsRef<str> for PodName {
    fn as_ref(&self) -> &str {
        &self.text
    }
}

impl Borrow<str> for PodName {
    fn borrow(&self) -> &str {
        &self.text
    }
}

impl From<&str> for PodName {
    fn from(text: &str) -> PodName {
        PodName::new(Arc::from(text))
    }
}

impl From<String> for PodName {
    fn from(text: String) -> PodName {
        PodName::new(Arc::from(text))
    }
}

impl From<Arc<str>> for PodName {
    fn from(text: Arc<str>) -> PodName {
        PodName::new(text)
    }
}

impl From<PodName> for Arc<str> {
    fn from(name: PodName) -> Arc<str> {
        name.text
    }
}

impl PartialEq for PodName {
    #[inline]
    fn eq(&self, other: &PodName) -> bool {
        // Equal texts have equal hashes: unequal hashes settle it without reading either text.
        self.hash == other.hash && self.text == other.text
    }
}

impl Eq for PodName {}

impl PartialEq<str> for PodName {
    fn eq(&self, other: &str) -> bool {
        &*self.text == other
    }
}

impl PartialEq<&str> for PodName {
    fn eq(&self, other: &&str) -> bool {
        &*self.text == *other
    }
}

impl PartialOrd for PodName {
    fn partial_cmp(&self, other: &PodName) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for PodName {
    fn cmp(&self, other: &PodName) -> std::cmp::Ordering {
        self.text.cmp(&other.text)
    }
}

impl Hash for PodName {
    /// Hashes the text, as `str` does (so `Borrow<str>` lookups agree).
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.text.hash(state);
    }
}

impl fmt::Display for PodName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.text, f)
    }
}

impl fmt::Debug for PodName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.text, f)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// However a name is made, its stored hash is its text's; it compares, orders, hashes
        /// and prints as its text.
        #[test]
        fn a_name_behaves_as_its_text(a in "[a-z0-9-]{0,12}", b in "[a-z0-9-]{0,12}") {
            let made = [
                PodName::from(a.as_str()),
                PodName::from(a.clone()),
                PodName::from(Arc::<str>::from(a.as_str())),
                PodName::new(Arc::from(a.as_str())),
            ];
            let other = PodName::from(b.as_str());
            for n in &made {
                prop_assert_eq!(n.text_hash(), text_hash(&a));
                prop_assert_eq!(&**n, a.as_str());
                prop_assert_eq!(n.to_string(), a.clone());
                prop_assert_eq!(format!("{n:?}"), format!("{a:?}"));
                prop_assert_eq!(n == &other, a == b);
                prop_assert_eq!(n.cmp(&other), a.cmp(&b));
                prop_assert_eq!(
                    FxBuildHasher.hash_one(n),
                    FxBuildHasher.hash_one(a.as_str())
                );
                prop_assert_eq!(&*Arc::<str>::from(n.clone()), a.as_str());
            }
            let set: HashSet<PodName> = made.iter().cloned().collect();
            prop_assert_eq!(set.len(), 1);
            prop_assert!(set.contains(a.as_str()));
        }
    }
}
