//! The world's API server storage: objects as JSON in an [`ObjectStore`], a global
//! `resourceVersion` bumped on every write, `uid` and `creationTimestamp` assigned on creation,
//! and a change log that plays the role of watch streams.
//!
//! It decides object identity and versioning only; it never interprets an object's spec or
//! status (controllers do) and never reads the real clock (timestamps come from virtual time).

use std::sync::Arc;

use autoscaler_model::ObjectStore;
use autoscaler_model::{ObjectKey, StoreError};
use serde_json::{Value, json};

use crate::time::{SimTime, rfc3339};

/// What happened to an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WatchEventKind {
    /// The object was created.
    Added,
    /// The object was replaced by a newer version.
    Modified,
    /// The object was removed; the event carries its last version.
    Deleted,
}

/// One entry of the change log, as a watch stream would deliver it.
#[derive(Clone, Debug, PartialEq)]
pub struct WatchEvent {
    /// The `resourceVersion` this change produced (for deletions, a fresh version too).
    pub rv: u64,
    /// Virtual time of the change.
    pub at: SimTime,
    /// Added, modified or deleted.
    pub kind: WatchEventKind,
    /// The object's identity.
    pub key: ObjectKey,
    /// The object after the change (before it, for deletions).
    pub object: Arc<Value>,
}

/// The versioned store.
#[derive(Clone, Debug)]
pub struct VersionedStore {
    store: ObjectStore,
    rv: u64,
    uids: u64,
    epoch_ms: i64,
    log: Vec<WatchEvent>,
    /// Whether an edit may let go of the logged version it supersedes (see
    /// [`VersionedStore::set_latest_only`]).
    latest_only: bool,
    /// What a log entry holds while its version is edited in place.
    blank: Arc<Value>,
}

impl VersionedStore {
    /// An empty store whose virtual time 0 is `epoch_ms` milliseconds after the Unix epoch.
    pub fn new(epoch_ms: i64) -> VersionedStore {
        VersionedStore {
            store: ObjectStore::new(),
            rv: 0,
            uids: 0,
            epoch_ms,
            log: Vec::new(),
            latest_only: false,
            blank: Arc::new(Value::Null),
        }
    }

    /// For a log whose one reader applies only each object's latest state (and forgets what
    /// it read): an [`VersionedStore::edit`] of an object whose current version is still in
    /// the log edits that version in place instead of copying it, and the entry of that
    /// version, superseded, then carries `null` instead of an object. Each entry keeps its
    /// `rv`, kind and key, and a later entry of the same object follows every superseded one,
    /// so a reader that skips `null` entries gets the same objects; a reader of every version
    /// (a watch stream) must leave this off, the default.
    pub fn set_latest_only(&mut self, on: bool) {
        self.latest_only = on;
    }

    /// The current (latest) `resourceVersion`.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// The store's objects, for readers (cheap to clone: objects are shared).
    pub fn objects(&self) -> &ObjectStore {
        &self.store
    }

    /// The object with this identity.
    pub fn get(&self, key: &ObjectKey) -> Option<&Arc<Value>> {
        self.store.get(key)
    }

    /// Every change with a `resourceVersion` greater than `rv`, oldest first.
    pub fn events_since(&self, rv: u64) -> &[WatchEvent] {
        let at = self.log.partition_point(|e| e.rv <= rv);
        &self.log[at..]
    }

    /// Drops the change log up to and including `rv` (a consumer that has read it lets the
    /// store forget it, so that long runs do not keep every version of every object).
    pub fn forget_upto(&mut self, rv: u64) {
        let at = self.log.partition_point(|e| e.rv <= rv);
        self.log.drain(..at);
    }

    /// The whole change log.
    pub fn log(&self) -> &[WatchEvent] {
        &self.log
    }

    /// The API timestamp of virtual time `t`.
    pub fn timestamp(&self, t: SimTime) -> String {
        rfc3339(
            self.epoch_ms
                .saturating_add(i64::try_from(t).unwrap_or(i64::MAX)),
        )
    }

    /// A fresh, deterministic uid.
    pub fn new_uid(&mut self) -> String {
        self.uids += 1;
        format!("00000000-0000-4000-8000-{:012x}", self.uids)
    }

    /// Creates or replaces `obj`. On creation a missing `uid` and `creationTimestamp` are
    /// filled in; on replacement they are carried over from the stored version. Sets
    /// `metadata.resourceVersion`. A write that changes nothing but the version is skipped and
    /// returns `Ok(None)`.
    pub fn put(&mut self, mut obj: Value, now: SimTime) -> Result<Option<ObjectKey>, StoreError> {
        let key = ObjectStore::key_of(&obj, "world")?;
        if !obj.get("metadata").is_some_and(Value::is_object) {
            obj["metadata"] = json!({});
        }
        let old = self.store.get(&key).cloned();
        let kind = match &old {
            Some(old) => {
                for field in ["uid", "creationTimestamp", "resourceVersion"] {
                    if let Some(v) = old.pointer(&format!("/metadata/{field}")) {
                        obj["metadata"][field] = v.clone();
                    }
                }
                if **old == obj {
                    return Ok(None);
                }
                WatchEventKind::Modified
            }
            None => {
                if obj.pointer("/metadata/uid").is_none() {
                    obj["metadata"]["uid"] = Value::String(self.new_uid());
                }
                if obj.pointer("/metadata/creationTimestamp").is_none() {
                    obj["metadata"]["creationTimestamp"] = Value::String(self.timestamp(now));
                }
                WatchEventKind::Added
            }
        };
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = Value::String(self.rv.to_string());
        let obj = Arc::new(obj);
        self.store.insert_shared(key.clone(), obj.clone());
        self.log.push(WatchEvent {
            rv: self.rv,
            at: now,
            kind,
            key: key.clone(),
            object: obj,
        });
        Ok(Some(key))
    }

    /// Edits a stored object in place and logs the change as [`VersionedStore::put`] does,
    /// without the copy and the whole-object comparison of a read, modify and `put`: the
    /// object is copied only while another holder (the change log, a reader) shares it, the
    /// log's entry of the current version excepted when [`VersionedStore::set_latest_only`].
    /// `edit` returns whether it changed the object; an edit that changed nothing writes
    /// nothing, as a no-op `put` does. Returns whether a change was written.
    pub fn edit(
        &mut self,
        key: &ObjectKey,
        now: SimTime,
        edit: impl FnOnce(&mut Value) -> bool,
    ) -> bool {
        let Some(slot) = self.store.get_mut(key) else {
            return false;
        };
        // The log's entry of the current version lets go of it, so that it is not copied.
        let entry = if self.latest_only {
            logged_entry(&self.log, slot)
        } else {
            None
        };
        if let Some(i) = entry {
            self.log[i].object = self.blank.clone();
        }
        let obj = Arc::make_mut(slot);
        if !edit(obj) {
            // Nothing superseded: the entry keeps its version.
            if let Some(i) = entry {
                self.log[i].object = slot.clone();
            }
            return false;
        }
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = Value::String(self.rv.to_string());
        let object = slot.clone();
        self.log.push(WatchEvent {
            rv: self.rv,
            at: now,
            kind: WatchEventKind::Modified,
            key: key.clone(),
            object,
        });
        true
    }

    /// Removes an object, logging a deletion. Returns its last version.
    pub fn delete(&mut self, key: &ObjectKey, now: SimTime) -> Option<Arc<Value>> {
        let old = self.store.remove(key)?;
        self.rv += 1;
        self.log.push(WatchEvent {
            rv: self.rv,
            at: now,
            kind: WatchEventKind::Deleted,
            key: key.clone(),
            object: old.clone(),
        });
        Some(old)
    }
}

/// The index of the log entry holding `obj` (the entry of the version its metadata names),
/// if that entry and the store are its only holders.
fn logged_entry(log: &[WatchEvent], obj: &Arc<Value>) -> Option<usize> {
    if Arc::strong_count(obj) != 2 {
        return None;
    }
    let rv: u64 = obj
        .get("metadata")?
        .get("resourceVersion")?
        .as_str()?
        .parse()
        .ok()?;
    let i = log.partition_point(|e| e.rv < rv);
    log.get(i)
        .filter(|e| e.rv == rv && Arc::ptr_eq(&e.object, obj))
        .map(|_| i)
}

/// The key of a namespaced or cluster-scoped object.
pub fn key(group: &str, kind: &str, namespace: &str, name: &str) -> ObjectKey {
    ObjectKey {
        group: group.to_string(),
        kind: kind.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_bump_versions_and_are_logged() {
        let mut s = VersionedStore::new(1_735_689_600_000);
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}, "data": {"x": "1"}});
        let k = s.put(cm.clone(), 5_000).unwrap().unwrap();
        let stored = s.get(&k).unwrap().clone();
        assert_eq!(stored["metadata"]["resourceVersion"], "1");
        assert_eq!(
            stored["metadata"]["creationTimestamp"],
            "2025-01-01T00:00:05Z"
        );
        let uid = stored["metadata"]["uid"].clone();
        assert_eq!(
            s.put(cm.clone(), 6_000).unwrap(),
            None,
            "no-op write skipped"
        );
        let mut cm2 = cm;
        cm2["data"]["x"] = json!("2");
        s.put(cm2, 7_000).unwrap();
        assert_eq!(s.get(&k).unwrap()["metadata"]["uid"], uid);
        assert_eq!(s.get(&k).unwrap()["metadata"]["resourceVersion"], "2");
        s.delete(&k, 8_000);
        let kinds: Vec<_> = s.events_since(0).iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                WatchEventKind::Added,
                WatchEventKind::Modified,
                WatchEventKind::Deleted
            ]
        );
        assert_eq!(s.events_since(2).len(), 1);
        assert!(s.objects().is_empty());
    }

    #[test]
    fn an_edit_writes_what_a_put_of_the_edited_copy_writes_and_keeps_earlier_versions() {
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": "ns"}, "data": {"x": "1"}});
        let (mut by_put, mut by_edit) = (VersionedStore::new(0), VersionedStore::new(0));
        let k = by_put.put(cm.clone(), 1_000).unwrap().unwrap();
        by_edit.put(cm, 1_000).unwrap();
        let first = by_edit.get(&k).unwrap().clone();
        let mut edited = (**by_put.get(&k).unwrap()).clone();
        edited["data"]["x"] = json!("2");
        by_put.put(edited, 2_000).unwrap();
        assert!(by_edit.edit(&k, 2_000, |o| {
            o["data"]["x"] = json!("2");
            true
        }));
        assert_eq!(by_edit.get(&k), by_put.get(&k));
        assert_eq!(by_edit.log(), by_put.log());
        assert_eq!(
            first["data"]["x"], "1",
            "a shared earlier version is not changed"
        );
        assert!(
            !by_edit.edit(&k, 3_000, |_| false),
            "an edit that changed nothing"
        );
        assert_eq!(by_edit.resource_version(), 2);
        let missing = key("", "ConfigMap", "ns", "b");
        assert!(!by_edit.edit(&missing, 3_000, |_| true));
    }

    /// With `latest_only`, edits of a version still in the log are made in place; the log keeps
    /// the same entries (versions, kinds, keys, times), the superseded ones carrying `null`,
    /// and the store is the one plain edits give.
    #[test]
    fn latest_only_edits_in_place_and_logs_the_same_changes() {
        let (mut plain, mut latest) = (VersionedStore::new(0), VersionedStore::new(0));
        latest.set_latest_only(true);
        let cm = |name: &str| {
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": "ns"}, "data": {"x": "0"}})
        };
        let (a, b) = (
            key("", "ConfigMap", "ns", "a"),
            key("", "ConfigMap", "ns", "b"),
        );
        for s in [&mut plain, &mut latest] {
            s.put(cm("a"), 1_000).unwrap();
            s.put(cm("b"), 1_000).unwrap();
        }
        let created = Arc::as_ptr(latest.get(&a).unwrap());
        let set = |v: &'static str| {
            move |o: &mut Value| {
                let changed = o["data"]["x"] != v;
                o["data"]["x"] = json!(v);
                changed
            }
        };
        let writes = [(&a, "1"), (&a, "1"), (&b, "1"), (&a, "2")];
        for (t, (k, v)) in writes.into_iter().enumerate() {
            let at = 2_000 + t as u64;
            assert_eq!(plain.edit(k, at, set(v)), latest.edit(k, at, set(v)));
        }
        assert_eq!(
            Arc::as_ptr(latest.get(&a).unwrap()),
            created,
            "never copied"
        );
        let objects = |s: &VersionedStore| {
            let all = s.objects().iter();
            all.map(|(k, o)| (k.clone(), (**o).clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(objects(&plain), objects(&latest));
        let entry = |e: &WatchEvent| (e.rv, e.at, e.kind, e.key.clone());
        let entries = |s: &VersionedStore| s.log().iter().map(entry).collect::<Vec<_>>();
        assert_eq!(entries(&plain), entries(&latest));
        // rv 1 and 3 (a), 2 (b) were superseded; 4 (b) and 5 (a) hold the objects as stored.
        let log = latest.log();
        let superseded: Vec<bool> = log.iter().map(|e| e.object.is_null()).collect();
        assert_eq!(superseded, [true, true, true, false, false]);
        for e in &log[3..] {
            assert!(Arc::ptr_eq(&e.object, latest.get(&e.key).unwrap()));
        }
        // Once the log forgot a version (its reader read it), the next edit is the plain one;
        // a version another holder shares is copied.
        latest.forget_upto(latest.resource_version());
        let held = latest.get(&b).unwrap().clone();
        assert!(latest.edit(&b, 9_000, set("3")));
        assert_eq!(held["data"]["x"], "1", "a shared version is not changed");
        assert_eq!(latest.log().len(), 1);
    }
}
