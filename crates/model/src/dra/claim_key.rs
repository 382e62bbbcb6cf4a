//! A ResourceClaim's identity, namespace and name, as a hash-map key. The claim a pod's template
//! entry stands for before the controller creates it is named `<pod>-<entry>`; its key keeps the
//! two parts apart instead of joining them into a new string, because the DRA filter asks for
//! that key on every node it tries and on every place and revert of the pod. Equality and the
//! hash are those of the joined name, so a key made from the parts and one made from the whole
//! name (a claim named so by the pod or the cluster) are one key.
//!
//! It decides nothing; building a key never allocates.

use std::fmt;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::Arc;

use rustc_hash::FxBuildHasher;

use crate::intern::Sym;

/// A claim by namespace and name (see the module documentation).
#[derive(Clone)]
pub struct ClaimKey {
    namespace: Sym,
    /// The hash of the name's bytes (see [`name_hash`]), computed once.
    hash: u64,
    name: Name,
}

/// A claim's name, whole or as `<pod>-<entry>`.
#[derive(Clone)]
enum Name {
    Whole(Arc<str>),
    Joined(Arc<str>, Arc<str>),
}

/// Names up to this many bytes are joined on the stack to be hashed (a pod's name is at most
/// 253 bytes, an entry's 63); longer ones, which the API refuses, are joined on the heap.
const STACK_NAME: usize = 320;

/// Most generated names (a pod's name and a short entry) fit this many bytes: a smaller
/// buffer to clear than [`STACK_NAME`]'s, on every check, place and remove of a pod.
const SHORT_NAME: usize = 64;

/// The hash of a name's bytes, whichever way the name is held.
fn name_hash(bytes: &[u8]) -> u64 {
    FxBuildHasher.hash_one(bytes)
}

/// [`name_hash`] of `<pod>-<entry>`, joined in a buffer of `N` bytes on the stack (the caller
/// checked that the name fits).
fn joined_hash<const N: usize>(pod: &str, entry: &str) -> u64 {
    let len = pod.len() + 1 + entry.len();
    let mut buf = [0u8; N];
    buf[..pod.len()].copy_from_slice(pod.as_bytes());
    buf[pod.len()] = b'-';
    buf[pod.len() + 1..len].copy_from_slice(entry.as_bytes());
    name_hash(&buf[..len])
}

impl ClaimKey {
    /// The claim `namespace/name`.
    pub fn new(namespace: Sym, name: Arc<str>) -> ClaimKey {
        ClaimKey {
            namespace,
            hash: name_hash(name.as_bytes()),
            name: Name::Whole(name),
        }
    }

    /// The claim `namespace/<pod>-<entry>`, its name not joined.
    pub fn generated(namespace: Sym, pod: Arc<str>, entry: Arc<str>) -> ClaimKey {
        let len = pod.len() + 1 + entry.len();
        let hash = if len <= SHORT_NAME {
            joined_hash::<SHORT_NAME>(&pod, &entry)
        } else if len <= STACK_NAME {
            joined_hash::<STACK_NAME>(&pod, &entry)
        } else {
            name_hash(format!("{pod}-{entry}").as_bytes())
        };
        ClaimKey {
            namespace,
            hash,
            name: Name::Joined(pod, entry),
        }
    }

    /// The namespace.
    pub fn namespace(&self) -> Sym {
        self.namespace
    }

    /// The name, joined (a new string for a generated name).
    pub fn name(&self) -> Arc<str> {
        match &self.name {
            Name::Whole(n) => n.clone(),
            Name::Joined(pod, entry) => Arc::from(format!("{pod}-{entry}")),
        }
    }

    /// The name's length in bytes.
    fn len(&self) -> usize {
        match &self.name {
            Name::Whole(n) => n.len(),
            Name::Joined(pod, entry) => pod.len() + 1 + entry.len(),
        }
    }

    /// The name's bytes, in order.
    fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        let (head, tail): (&[u8], Option<&[u8]>) = match &self.name {
            Name::Whole(n) => (n.as_bytes(), None),
            Name::Joined(pod, entry) => (pod.as_bytes(), Some(entry.as_bytes())),
        };
        let dash = tail.map(|_| b'-');
        (head.iter().copied())
            .chain(dash)
            .chain(tail.into_iter().flatten().copied())
    }
}

impl PartialEq for ClaimKey {
    fn eq(&self, other: &ClaimKey) -> bool {
        if self.namespace != other.namespace || self.hash != other.hash {
            return false;
        }
        match (&self.name, &other.name) {
            (Name::Whole(a), Name::Whole(b)) => a == b,
            (Name::Joined(p, e), Name::Joined(q, f)) if p.len() == q.len() => p == q && e == f,
            _ => self.len() == other.len() && self.bytes().eq(other.bytes()),
        }
    }
}

impl Eq for ClaimKey {}

impl Hash for ClaimKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.namespace.hash(state);
        state.write_u64(self.hash);
    }
}

impl fmt::Display for ClaimKey {
    /// `namespace/name`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name {
            Name::Whole(n) => write!(f, "{}/{n}", self.namespace),
            Name::Joined(pod, entry) => write!(f, "{}/{pod}-{entry}", self.namespace),
        }
    }
}

impl fmt::Debug for ClaimKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ClaimKey({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustc_hash::FxHashMap;

    fn ns() -> Sym {
        Sym::new("default")
    }

    #[test]
    fn a_generated_key_is_the_key_of_its_joined_name() {
        let whole = ClaimKey::new(ns(), Arc::from("train-0-gpu"));
        let parts = ClaimKey::generated(ns(), Arc::from("train-0"), Arc::from("gpu"));
        // The same joined name split elsewhere is the same key too.
        let other_split = ClaimKey::generated(ns(), Arc::from("train"), Arc::from("0-gpu"));
        assert_eq!(whole, parts);
        assert_eq!(parts, other_split);
        let mut map = FxHashMap::default();
        map.insert(whole.clone(), 1);
        assert_eq!(map.get(&parts), Some(&1));
        assert_eq!(map.get(&other_split), Some(&1));
        assert_eq!(parts.name(), whole.name());
        assert_eq!(parts.to_string(), "default/train-0-gpu");
    }

    #[test]
    fn keys_differ_by_name_or_namespace() {
        let a = ClaimKey::generated(ns(), Arc::from("train-0"), Arc::from("gpu"));
        let b = ClaimKey::generated(ns(), Arc::from("train-1"), Arc::from("gpu"));
        let c = ClaimKey::generated(Sym::new("ml"), Arc::from("train-0"), Arc::from("gpu"));
        let d = ClaimKey::new(ns(), Arc::from("train-0gpu"));
        let e = ClaimKey::new(ns(), Arc::from("train-0-gpu-"));
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
        assert_ne!(a, e);
    }

    #[test]
    fn names_at_each_buffer_bound_are_the_keys_of_their_joined_names() {
        // `<pod>-gpu` of every length around both buffers' sizes: 4 bytes are `-gpu`.
        for len in [
            SHORT_NAME - 1,
            SHORT_NAME,
            SHORT_NAME + 1,
            STACK_NAME,
            STACK_NAME + 1,
        ] {
            let pod: Arc<str> = Arc::from("p".repeat(len - 4));
            let joined = ClaimKey::new(ns(), Arc::from(format!("{pod}-gpu")));
            let parts = ClaimKey::generated(ns(), pod, Arc::from("gpu"));
            assert_eq!(joined, parts, "{len} bytes");
            assert_eq!(joined.hash, parts.hash, "{len} bytes");
        }
    }

    #[test]
    fn a_name_longer_than_the_stack_buffer_is_still_one_key() {
        let pod: Arc<str> = Arc::from("p".repeat(STACK_NAME + 10));
        let joined = ClaimKey::new(ns(), Arc::from(format!("{pod}-gpu")));
        let parts = ClaimKey::generated(ns(), pod, Arc::from("gpu"));
        assert_eq!(joined, parts);
        assert_eq!(joined.hash, parts.hash);
    }
}
