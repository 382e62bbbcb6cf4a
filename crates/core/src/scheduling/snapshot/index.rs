//! The snapshot's pod indices: by name, for duplicate checks and lookups, and by namespace and
//! label, for selectors.
//!
//! The name index holds no pod and no name: an entry is 32 bits of the hash of a pod's
//! namespace and name with the node the pod is on (8 bytes), and the pod itself is found in that
//! node's list. Growing the table rehashes stored hashes, never names, and entries need no
//! reference counting. The
//! selector index is only built when a selector first asks (many loops never do) and is kept
//! up to date from then on. These indices decide nothing; they must always answer exactly
//! what a scan of the nodes' pod lists would.

use std::hash::BuildHasher;
use std::sync::Arc;

use hashbrown::HashTable;
use rustc_hash::{FxBuildHasher, FxHashMap};

use super::NodeId;
use crate::model::intern::Sym;
use crate::model::pod::Pod;

/// The name index's key for a pod of `namespace` whose name's text hashes to `name_hash`
/// ([`PodName::text_hash`](crate::model::pod::PodName::text_hash), stored in the pod: the key
/// is computed without reading the name's text).
pub(super) fn key_hash(namespace: Sym, name_hash: u64) -> u64 {
    FxBuildHasher.hash_one((namespace, name_hash))
}

/// Pods by the hash of their namespace and name: (tag, node) per pod, where the tag is 32 bits
/// of the hash; several entries per tag when tags collide (which [`NameIndex::insert_new`]'s
/// caller settles by comparing names). Entries are 8 bytes, so that the table, which every
/// loaded pod writes to at a random place, takes half the cache it would with full hashes.
#[derive(Debug, Default)]
pub(super) struct NameIndex {
    table: HashTable<(u32, NodeId)>,
}

/// The tag kept for a pod whose key is `hash`.
#[inline]
fn tag(hash: u64) -> u32 {
    (hash >> 32) as u32
}

/// The table's hash of an entry with `tag`: computed from the tag alone, so that growing the
/// table can rehash entries; a multiply spreads its bits to the top ones the table also uses.
#[inline]
fn tag_hash(tag: u32) -> u64 {
    u64::from(tag).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

impl NameIndex {
    /// Room for `additional` more pods without growing.
    pub(super) fn reserve(&mut self, additional: usize) {
        self.table.reserve(additional, |e| tag_hash(e.0));
    }

    /// Pods the table has room for without growing.
    #[cfg(test)]
    pub(super) fn capacity(&self) -> usize {
        self.table.capacity()
    }

    /// Number of pods indexed.
    pub(super) fn len(&self) -> usize {
        self.table.len()
    }

    /// Adds a pod on `node` whose key is `hash`, unless `holds` says one of the nodes already
    /// indexed under the same tag holds a pod of the same namespace and name (then nothing
    /// changes and this returns false).
    pub(super) fn insert_new(
        &mut self,
        hash: u64,
        node: NodeId,
        holds: impl Fn(NodeId) -> bool,
    ) -> bool {
        let t = tag(hash);
        match self
            .table
            .entry(tag_hash(t), |e| e.0 == t && holds(e.1), |e| tag_hash(e.0))
        {
            hashbrown::hash_table::Entry::Occupied(_) => false,
            hashbrown::hash_table::Entry::Vacant(v) => {
                v.insert((t, node));
                true
            }
        }
    }

    /// Adds a pod known not to be indexed yet.
    pub(super) fn insert(&mut self, hash: u64, node: NodeId) {
        let t = tag(hash);
        self.table
            .insert_unique(tag_hash(t), (t, node), |e| tag_hash(e.0));
    }

    /// Removes one pod with key `hash` on `node` (two such pods, tags colliding on one node,
    /// have equal entries: either may go).
    pub(super) fn remove(&mut self, hash: u64, node: NodeId) {
        let t = tag(hash);
        if let Ok(e) = self.table.find_entry(tag_hash(t), |e| *e == (t, node)) {
            e.remove();
        }
    }

    /// The nodes of the pods whose key's tag is `hash`'s (the pod sought is on one of them, if
    /// indexed).
    pub(super) fn nodes(&self, hash: u64) -> impl Iterator<Item = NodeId> + '_ {
        let t = tag(hash);
        self.table
            .iter_hash(tag_hash(t))
            .filter(move |e| e.0 == t)
            .map(|e| e.1)
    }
}

/// Pods by identity (see [`pod_identity`]), with their node.
pub(super) type PodsById = FxHashMap<usize, (NodeId, Arc<Pod>)>;

/// The address of a pod held by the snapshot: unique among its pods (one `Arc` each, names are
/// unique) and cheaper to hash than the name. Only for pods reached through the snapshot's own
/// `Arc`s.
pub(super) fn pod_identity(pod: &Pod) -> usize {
    std::ptr::from_ref(pod) as usize
}

/// Pods by namespace and by (namespace, label key, value), for selectors.
#[derive(Debug, Default)]
pub(super) struct SelectorIndex {
    namespaces: FxHashMap<Sym, PodsById>,
    labels: FxHashMap<(Sym, Sym, Sym), PodsById>,
}

impl SelectorIndex {
    /// The index of `pods`.
    pub(super) fn of<'a>(pods: impl Iterator<Item = (NodeId, &'a Arc<Pod>)>) -> SelectorIndex {
        let mut index = SelectorIndex::default();
        for (node, pod) in pods {
            index.insert(node, pod);
        }
        index
    }

    /// Adds `pod`, on `node`.
    pub(super) fn insert(&mut self, node: NodeId, pod: &Arc<Pod>) {
        let id = pod_identity(pod);
        self.namespaces
            .entry(pod.namespace)
            .or_default()
            .insert(id, (node, pod.clone()));
        for (k, v) in pod.labels.iter() {
            self.labels
                .entry((pod.namespace, k, v))
                .or_default()
                .insert(id, (node, pod.clone()));
        }
    }

    /// Removes `pod` (one of the snapshot's own).
    pub(super) fn remove(&mut self, pod: &Pod) {
        let id = pod_identity(pod);
        remove_from(&mut self.namespaces, pod.namespace, id);
        for (k, v) in pod.labels.iter() {
            remove_from(&mut self.labels, (pod.namespace, k, v), id);
        }
    }

    /// Pods of `namespace`.
    pub(super) fn in_namespace(&self, namespace: Sym) -> Option<&PodsById> {
        self.namespaces.get(&namespace)
    }

    /// Pods of `namespace` labelled `key=value`.
    pub(super) fn with_label(&self, namespace: Sym, key: Sym, value: Sym) -> Option<&PodsById> {
        self.labels.get(&(namespace, key, value))
    }

    /// Every (namespace, key, value, pod, node) indexed, sorted: for comparing indices.
    #[cfg(test)]
    pub(super) fn label_entries(&self) -> Vec<(Sym, Sym, Sym, String, u32)> {
        let mut v: Vec<_> = self
            .labels
            .iter()
            .flat_map(|(&(ns, k, val), m)| m.values().map(move |(n, p)| (ns, k, val, p.key(), n.0)))
            .collect();
        v.sort();
        v
    }

    /// Every (namespace, pod, node) indexed, sorted.
    #[cfg(test)]
    pub(super) fn namespace_entries(&self) -> Vec<(Sym, String, u32)> {
        let mut v: Vec<_> = self
            .namespaces
            .iter()
            .flat_map(|(&ns, m)| m.values().map(move |(n, p)| (ns, p.key(), n.0)))
            .collect();
        v.sort();
        v
    }
}

/// Removes `id` from the set under `key`, and the set once empty.
fn remove_from<K: std::hash::Hash + Eq>(map: &mut FxHashMap<K, PodsById>, key: K, id: usize) {
    if let Some(m) = map.get_mut(&key) {
        m.remove(&id);
        if m.is_empty() {
            map.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Colliding keys stay apart: each is found on its own node only, and removing one leaves
    /// the other.
    #[test]
    fn colliding_hashes_keep_separate_entries() {
        let mut index = NameIndex::default();
        // Keys that differ but share their tag (the upper 32 bits) collide like equal ones.
        let h = 42 << 32;
        let other = (42 << 32) | 7;
        // Two different pods whose keys collide, on nodes 1 and 2.
        assert!(index.insert_new(h, NodeId(1), |_| false));
        assert!(index.insert_new(other, NodeId(2), |_| false));
        assert_eq!(index.len(), 2);
        let mut nodes: Vec<NodeId> = index.nodes(h).collect();
        nodes.sort();
        assert_eq!(nodes, [NodeId(1), NodeId(2)]);
        // A duplicate of the pod on node 2 is refused.
        assert!(!index.insert_new(h, NodeId(3), |n| n == NodeId(2)));
        index.remove(h, NodeId(1));
        assert_eq!(index.nodes(h).collect::<Vec<_>>(), [NodeId(2)]);
        assert_eq!(index.nodes(7).count(), 0);
        index.remove(h, NodeId(2));
        assert_eq!(index.len(), 0);
    }
}
