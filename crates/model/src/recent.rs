//! A small table of the texts a thread converted last, one per slot chosen by the text's hash,
//! for conversions that meet the same few texts again and again (label keys, condition types,
//! the owner of a workload's replicas). It decides nothing: it only remembers, and a text whose
//! slot holds another simply takes the slot.

use std::hash::BuildHasher;

/// The last entry per slot; `T` carries its own text (see [`RecentTable::get_or_insert`]).
pub(crate) struct RecentTable<T> {
    slots: Vec<Option<T>>,
}

impl<T: Clone> RecentTable<T> {
    /// A table of `slots` empty slots.
    pub(crate) fn new(slots: usize) -> RecentTable<T> {
        RecentTable {
            slots: vec![None; slots.max(1)],
        }
    }

    /// The entry whose text (`text_of`) is `text` if its slot holds it; otherwise `make`'s,
    /// which takes the slot.
    pub(crate) fn get_or_insert(
        &mut self,
        text: &str,
        text_of: impl Fn(&T) -> &str,
        make: impl FnOnce() -> T,
    ) -> T {
        // Not seeded: crafted texts colliding here only take turns in a slot.
        let at = rustc_hash::FxBuildHasher.hash_one(text) as usize % self.slots.len();
        let slot = &mut self.slots[at];
        match slot {
            Some(held) if text_of(held) == text => held.clone(),
            _ => slot.insert(make()).clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Held texts are returned without `make`; other texts are made and take the slot.
    #[test]
    fn returns_what_it_holds_and_makes_the_rest() {
        let made = std::cell::Cell::new(0);
        let mut t: RecentTable<String> = RecentTable::new(1);
        let mut get = |s: &str| {
            t.get_or_insert(s, String::as_str, || {
                made.set(made.get() + 1);
                s.to_string()
            })
        };
        let seen: Vec<String> = ["a", "a", "b", "b", "a"].iter().map(|s| get(s)).collect();
        assert_eq!(seen, ["a", "a", "b", "b", "a"]);
        // One slot: "a" made, held; "b" made, held; "a" made again.
        assert_eq!(made.get(), 3);
    }
}
