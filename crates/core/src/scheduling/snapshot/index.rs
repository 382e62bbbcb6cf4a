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
use autoscaler_model::Pod;
use autoscaler_model::Sym;

/// The name index's key for a pod of `namespace` whose name's text hashes to `name_hash`
/// ([`PodName::text_hash`](autoscaler_model::PodName::text_hash), stored in the pod: the key
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

/// Stretches of the table a batch's writes are grouped by (see [`NameIndex::filled`]):
/// with a million buckets (a cluster of half a million pods), each is 4,096 buckets, 36 KiB of
/// entries and control bytes.
const STRETCHES: usize = 256;

/// Batches shorter than this are written in their own order.
const SMALL_BATCH: usize = 4096;

/// The tag kept for a pod whose key is `hash`.
#[inline]
pub(super) fn tag(hash: u64) -> u32 {
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

    /// An index of the pods `tags` (the [`tag`] of each one's key, and its node), with room for
    /// `capacity` pods, and the positions, ascending, of those refused as duplicates: pod `i`
    /// is refused when `same(i, j)` says an earlier pod `j` has its namespace and name. The
    /// same pods are refused and the same entries made as by [`NameIndex::insert_new`] for
    /// each pod in turn on an empty index (there, the pod refused is the one that finds an
    /// earlier one held).
    ///
    /// The entries are written in the order of the table's buckets, not of `tags`: the table
    /// of a large cluster outgrows the caches, and each write in list order would wait for
    /// memory at a random place in it. Grouping the writes by stretch of the table (a stable
    /// counting sort on the upper bits of each entry's home bucket) keeps each stretch cached
    /// while it is written, and keeps the pods of one tag, which share a stretch, in their
    /// order: an earlier duplicate is always met first.
    pub(super) fn filled(
        capacity: usize,
        tags: &[(u32, NodeId)],
        same: impl Fn(usize, usize) -> bool,
    ) -> (NameIndex, Vec<usize>) {
        let mut index = NameIndex::default();
        index.reserve(capacity.max(tags.len()));
        let mut refused = Vec::new();
        let (order, stretches) = index.bucket_order(tags);
        for range in stretches.windows(2) {
            let within = &order[range[0]..range[1]];
            for (k, &(i, t, node)) in within.iter().enumerate() {
                let h = tag_hash(t);
                // A tag already held is a duplicate only if an earlier pod of this stretch
                // (all earlier pods of the tag are there) has the same namespace and name.
                let duplicate = index.table.find(h, |e| e.0 == t).is_some()
                    && within[..k]
                        .iter()
                        .rev()
                        .any(|&(j, u, _)| u == t && same(i, j));
                if duplicate {
                    refused.push(i);
                } else {
                    index.table.insert_unique(h, (t, node), |e| tag_hash(e.0));
                }
            }
        }
        refused.sort_unstable();
        (index, refused)
    }

    /// Each of `tags` as (position, tag, node), grouped by the stretch of the table (one of
    /// up to [`STRETCHES`]) its home bucket lies in, in their order within each stretch; and
    /// where each stretch starts in that list, with its end last. Copied, so that the writes
    /// read them in turn. Small batches, whose writes stay cached anyway, are one stretch.
    fn bucket_order(&self, tags: &[(u32, NodeId)]) -> (Vec<(usize, u32, NodeId)>, Vec<usize>) {
        let entry = |i: usize| (i, tags[i].0, tags[i].1);
        // hashbrown's table has a power-of-two number of buckets and holds up to 7/8 of them;
        // an entry's home bucket is the low bits of its hash. Were the count guessed wrong,
        // writes would only be less local, never different.
        let buckets = (self.table.capacity() / 7 * 8).next_power_of_two().max(1);
        if tags.len() < SMALL_BATCH || buckets <= STRETCHES {
            return ((0..tags.len()).map(entry).collect(), vec![0, tags.len()]);
        }
        let shift = buckets.trailing_zeros() - STRETCHES.trailing_zeros();
        // The home bucket's upper bits (truncating the hash to usize keeps its low bits).
        let stretch = |t: u32| ((tag_hash(t) as usize) & (buckets - 1)) >> shift;
        let mut starts = vec![0usize; STRETCHES + 1];
        for &(t, _) in tags {
            starts[stretch(t) + 1] += 1;
        }
        for s in 1..starts.len() {
            starts[s] += starts[s - 1];
        }
        let mut next = starts.clone();
        let mut order = vec![(0, 0, NodeId(0)); tags.len()];
        for (i, &(t, _)) in tags.iter().enumerate() {
            let at = &mut next[stretch(t)];
            order[*at] = entry(i);
            *at += 1;
        }
        (order, starts)
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

    /// An index filled at once holds the entries, and refuses the pods, that inserting each
    /// pod in turn does, whether the batch is written in its order (small) or stretch by
    /// stretch (large); tags collide (keys drawn from few tags), and so do keys.
    #[test]
    fn filled_at_once_as_inserted_in_turn() {
        for (pods, tags) in [(50, 20u64), (10_000, 3_000), (20_000, 50_000)] {
            // Pod i's key: a tag from few, low bits from its name (`i % 7_000`, so names
            // repeat); its node from its position.
            let name = |i: usize| (i % 7_000) as u64;
            let key = |i: usize| ((name(i) * 2_654_435_761 % tags) << 32) | name(i);
            let keys: Vec<(u64, NodeId)> = (0..pods)
                .map(|i| (key(i), NodeId((i % 13) as u32)))
                .collect();
            let same = |i: usize, j: usize| name(i) == name(j);
            let tags: Vec<(u32, NodeId)> = keys.iter().map(|&(k, n)| (tag(k), n)).collect();
            let (filled, refused) = NameIndex::filled(0, &tags, same);
            let mut one = NameIndex::default();
            let mut refused_one = Vec::new();
            for (i, &(k, node)) in keys.iter().enumerate() {
                // Node n holds an earlier pod of i's name.
                let holds = |n: NodeId| {
                    keys[..i]
                        .iter()
                        .enumerate()
                        .any(|(j, e)| e.1 == n && same(i, j) && e.0 == k)
                };
                if !one.insert_new(k, node, holds) {
                    refused_one.push(i);
                }
            }
            assert_eq!(refused, refused_one, "{pods} pods");
            assert_eq!(filled.len(), one.len());
            for &(k, _) in &keys {
                let nodes = |index: &NameIndex| {
                    let mut v: Vec<NodeId> = index.nodes(k).collect();
                    v.sort();
                    v
                };
                assert_eq!(nodes(&filled), nodes(&one));
            }
        }
    }

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
