//! Why each node group would not help each pending pod, kept compactly while a scale-up is
//! decided: one small number per (group, pod), each naming a text of a shared table.
//!
//! A decision at scale judges every pending pod against every group (50,000 pods and 100 groups
//! make 5,000,000 verdicts), and nearly all verdicts repeat a handful of texts, so each text is
//! stored once and pods whose verdicts are all alike share one list. It decides nothing: it
//! records what the decision says, in the order of the groups' ids.

use std::sync::Arc;

use rustc_hash::FxHashMap;

use crate::scheduling::predicates::Unfit;
use autoscaler_model::NodeGroupId;

const NONE: u32 = u32::MAX;

/// Per group id (in id order), why that group would not help a pod: e.g. `Insufficient cpu`,
/// `max node group size reached`, `in backoff after failed scale-up`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupReasons(Arc<[(NodeGroupId, Arc<str>)]>);

impl GroupReasons {
    /// The (group, reason) pairs in group id order.
    pub fn iter(&self) -> std::slice::Iter<'_, (NodeGroupId, Arc<str>)> {
        self.0.iter()
    }

    /// The reason `group` gave.
    pub fn get(&self, group: &NodeGroupId) -> Option<&str> {
        let i = self.0.binary_search_by(|(g, _)| g.cmp(group)).ok()?;
        Some(&self.0[i].1)
    }

    /// Whether `group` gave a reason.
    pub fn contains_key(&self, group: &NodeGroupId) -> bool {
        self.get(group).is_some()
    }

    /// The reasons, in group id order.
    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|(_, r)| &**r)
    }

    /// How many groups gave a reason.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no group gave a reason.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// An identity shared by the reasons of pods the decision gave the same reasons at once
    /// (equal reasons may still have different identities): a caller formatting the reasons of
    /// many pods formats each identity once.
    pub fn identity(&self) -> usize {
        Arc::as_ptr(&self.0).cast::<u8>() as usize
    }
}

impl std::ops::Index<&NodeGroupId> for GroupReasons {
    type Output = str;

    /// The reason `group` gave; panics when it gave none (as a map's index does).
    fn index(&self, group: &NodeGroupId) -> &str {
        self.get(group)
            .unwrap_or_else(|| panic!("no reason from {group}"))
    }
}

impl<'a> IntoIterator for &'a GroupReasons {
    type Item = &'a (NodeGroupId, Arc<str>);
    type IntoIter = std::slice::Iter<'a, (NodeGroupId, Arc<str>)>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// The verdicts of one decision: per group, per input pod, an index into the texts.
pub(crate) struct Verdicts {
    ids: Vec<NodeGroupId>,
    /// Group indices in id order.
    order: Vec<usize>,
    pods: usize,
    /// Per group, per pod (allocated when the group first judges a pod).
    per_group: Vec<Vec<u32>>,
    texts: Vec<Arc<str>>,
    by_text: FxHashMap<Arc<str>, u32>,
    /// Unfit verdicts seen, with their text (few distinct ones per decision).
    by_unfit: Vec<(Unfit, u32)>,
}

impl Verdicts {
    /// No verdict yet for `pods` pods and the groups `ids` (in the decision's group order).
    pub(crate) fn new(ids: Vec<NodeGroupId>, pods: usize) -> Verdicts {
        let mut order: Vec<usize> = (0..ids.len()).collect();
        order.sort_by(|&a, &b| ids[a].cmp(&ids[b]));
        Verdicts {
            per_group: vec![Vec::new(); ids.len()],
            ids,
            order,
            pods,
            texts: Vec::new(),
            by_text: FxHashMap::default(),
            by_unfit: Vec::new(),
        }
    }

    /// The index of `text`, added when new.
    pub(crate) fn text(&mut self, text: &str) -> u32 {
        if let Some(&i) = self.by_text.get(text) {
            return i;
        }
        let i = u32::try_from(self.texts.len()).unwrap_or(NONE - 1);
        let text: Arc<str> = Arc::from(text);
        self.texts.push(text.clone());
        self.by_text.insert(text, i);
        i
    }

    /// The index of `unfit`'s text.
    pub(crate) fn unfit(&mut self, unfit: &Unfit) -> u32 {
        if let Some((_, i)) = self.by_unfit.iter().find(|(u, _)| u == unfit) {
            return *i;
        }
        let i = self.text(&unfit.to_string());
        self.by_unfit.push((unfit.clone(), i));
        i
    }

    fn column(&mut self, group: usize) -> &mut Vec<u32> {
        let pods = self.pods;
        let col = &mut self.per_group[group];
        if col.is_empty() {
            col.resize(pods, NONE);
        }
        col
    }

    /// Group `group` says `text` for pod `pod` (replacing what it said before).
    pub(crate) fn set(&mut self, group: usize, pod: usize, text: u32) {
        if let Some(v) = self.column(group).get_mut(pod) {
            *v = text;
        }
    }

    /// Group `group` says `text` for pod `pod` unless it said something already.
    pub(crate) fn set_if_absent(&mut self, group: usize, pod: usize, text: u32) {
        if let Some(v) = self.column(group).get_mut(pod).filter(|v| **v == NONE) {
            *v = text;
        }
    }

    /// The reasons of each pod of `pods`, in order; pods with the same verdicts share a list.
    pub(crate) fn finish(&self, pods: &[usize]) -> Vec<GroupReasons> {
        let mut shared: FxHashMap<Vec<u32>, GroupReasons> = FxHashMap::default();
        let mut out = Vec::with_capacity(pods.len());
        for &p in pods {
            let key: Vec<u32> = self
                .order
                .iter()
                .map(|&g| self.per_group[g].get(p).copied().unwrap_or(NONE))
                .collect();
            let reasons = shared.entry(key).or_insert_with_key(|key| {
                let pairs: Vec<(NodeGroupId, Arc<str>)> = key
                    .iter()
                    .zip(&self.order)
                    .filter(|(t, _)| **t != NONE)
                    .map(|(&t, &g)| (self.ids[g].clone(), self.texts[t as usize].clone()))
                    .collect();
                GroupReasons(pairs.into())
            });
            out.push(reasons.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_come_out_in_id_order_replaced_kept_and_shared() {
        let ids: Vec<NodeGroupId> = ["b", "a", "c"].into_iter().map(NodeGroupId::from).collect();
        let mut v = Verdicts::new(ids, 3);
        let full = v.text("max node group size reached");
        let cpu = v.unfit(&Unfit::NodeAffinity);
        let again = v.unfit(&Unfit::NodeAffinity);
        assert_eq!(cpu, again, "one text per distinct verdict");
        for p in 0..3 {
            v.set(0, p, full);
            v.set(1, p, cpu);
        }
        v.set(0, 2, cpu); // replaced
        let grown = v.text("grown");
        v.set_if_absent(1, 0, grown); // kept
        v.set_if_absent(2, 0, grown);
        v.set_if_absent(2, 1, grown);
        let r = v.finish(&[0, 1, 2]);
        let pairs = |g: &GroupReasons| -> Vec<(String, String)> {
            g.iter()
                .map(|(g, r)| (g.to_string(), r.to_string()))
                .collect()
        };
        let affinity = Unfit::NodeAffinity.to_string();
        let want = vec![
            ("a".to_string(), affinity.clone()),
            ("b".into(), "max node group size reached".into()),
            ("c".into(), "grown".into()),
        ];
        assert_eq!(pairs(&r[0]), want);
        assert_eq!(r[0], r[1]);
        assert!(Arc::ptr_eq(&r[0].0, &r[1].0), "alike pods share one list");
        assert_eq!(r[2].get(&NodeGroupId::from("b")), Some(affinity.as_str()));
        assert!(!r[2].contains_key(&NodeGroupId::from("c")));
        assert_eq!(r[2].len(), 2);
    }
}
