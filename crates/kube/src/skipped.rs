//! The objects left out of the view: those the watches could not decode, and those that
//! decode but that the model or the Cluster API provider cannot use (allocatable `cpu: abc`,
//! a MachineDeployment whose minimum exceeds its maximum, ...). Each is named in a warning
//! (kind, namespace/name, the field and why), counted in
//! `cluster_autoscaler_skipped_objects_total{kind}` and listed in the status ConfigMap while it
//! stays left out.
//!
//! A warning is given once per object version, and again at most every [`REWARN_AFTER`] while
//! the object stays as it is (a relist sees it again each time; it is counted only when
//! warned). It decides nothing about the cluster: the rest of the list and the loop go on.
//! Its memory is bounded ([`MAX_REMEMBERED`] objects).

use std::collections::BTreeMap;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use lru::LruCache;
use serde::Serialize;
use tokio::time::Instant;

use crate::lenient::truncate;
use crate::metrics::Metrics;

/// How long a warning for an object that stays as it is holds before it is given again.
pub const REWARN_AFTER: Duration = Duration::from_secs(10 * 60);

/// How many skipped objects are remembered (for rate-limiting and the status); beyond, the
/// least recently seen are forgotten (and may be warned about again).
pub const MAX_REMEMBERED: usize = 4_096;

/// How many skipped objects the status ConfigMap names (it has etcd's size limit).
pub const MAX_IN_STATUS: usize = 20;

/// The longest object name or reason said in a warning or the status.
const MAX_TEXT: usize = 300;

/// The lock on [`Inner`], which updates the count of objects left out when released.
struct Guard<'a> {
    inner: MutexGuard<'a, Inner>,
    count: &'a AtomicUsize,
}

impl std::ops::Deref for Guard<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.inner
    }
}

impl std::ops::DerefMut for Guard<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.inner
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        self.count
            .store(self.inner.current.len(), Ordering::Relaxed);
    }
}

/// The objects left out now and when each was last warned about; shared by the watches and
/// the loop.
#[derive(Debug)]
pub struct SkippedObjects {
    inner: Mutex<Inner>,
    /// How many objects are left out now: the watches' hot path only looks at this.
    count: AtomicUsize,
    metrics: Option<Arc<Metrics>>,
}

#[derive(Debug)]
struct Inner {
    /// (kind, object) to (version or reason warned about, when).
    warned: LruCache<(String, String), (String, Instant)>,
    /// (kind, object) to why it is left out now.
    current: LruCache<(String, String), String>,
    /// The objects each source of conversion warnings named last.
    by_source: BTreeMap<String, Vec<(String, String)>>,
    /// Warnings about objects used in part, to when each was last given.
    noted: LruCache<String, Instant>,
}

impl Default for SkippedObjects {
    fn default() -> Self {
        SkippedObjects::new(None)
    }
}

impl SkippedObjects {
    /// Empty; counting in `metrics` when given.
    pub fn new(metrics: Option<Arc<Metrics>>) -> SkippedObjects {
        let cap = NonZeroUsize::new(MAX_REMEMBERED).unwrap_or(NonZeroUsize::MIN);
        SkippedObjects {
            inner: Mutex::new(Inner {
                warned: LruCache::new(cap),
                current: LruCache::new(cap),
                by_source: BTreeMap::new(),
                noted: LruCache::new(cap),
            }),
            count: AtomicUsize::new(0),
            metrics,
        }
    }

    fn lock(&self) -> Guard<'_> {
        // Maps of texts only: a panic elsewhere cannot leave them inconsistent.
        Guard {
            inner: self.inner.lock().unwrap_or_else(|e| e.into_inner()),
            count: &self.count,
        }
    }

    /// Whether no object is left out now (cheap: no lock).
    pub fn is_empty(&self) -> bool {
        self.count.load(Ordering::Relaxed) == 0
    }

    /// `object` (`namespace/name`, or `name`) of `kind` at `version` is left out because of
    /// `reason`: warns unless it was warned about at this version within [`REWARN_AFTER`].
    /// Returns whether it warned.
    pub fn skipped(&self, kind: &str, object: &str, version: &str, reason: &str) -> bool {
        let object = truncate(object, MAX_TEXT);
        let reason = truncate(reason, MAX_TEXT);
        let key = (kind.to_string(), object);
        let now = Instant::now();
        let warn = {
            let mut inner = self.lock();
            inner.current.put(key.clone(), reason.clone());
            let fresh = matches!(inner.warned.get(&key),
                Some((v, at)) if v == version && now.duration_since(*at) < REWARN_AFTER);
            if !fresh {
                inner.warned.put(key.clone(), (version.to_string(), now));
            }
            !fresh
        };
        let (kind, object) = (&key.0, &key.1);
        if warn {
            tracing::warn!(%kind, %object, %reason, "object skipped: it is left out of the view until it changes; the rest goes on");
            if let Some(m) = &self.metrics {
                m.skipped_object(kind);
            }
        } else {
            tracing::debug!(%kind, %object, %reason, "object still skipped");
        }
        warn
    }

    /// `object` of `kind` is no longer left out (it decoded, or was deleted).
    pub fn cleared(&self, kind: &str, object: &str) {
        if self.is_empty() {
            return;
        }
        let key = (kind.to_string(), truncate(object, MAX_TEXT));
        let mut inner = self.lock();
        inner.current.pop(&key);
        inner.warned.pop(&key);
    }

    /// A relist of `kind` completed, in which `still` were skipped: every other object of the
    /// kind is no longer left out.
    pub fn relisted(&self, kind: &str, still: &[String]) {
        let still: std::collections::BTreeSet<String> =
            still.iter().map(|o| truncate(o, MAX_TEXT)).collect();
        let mut inner = self.lock();
        let gone: Vec<(String, String)> = (inner.current.iter())
            .filter(|((k, o), _)| k == kind && !still.contains(o))
            .map(|(key, _)| key.clone())
            .collect();
        for key in gone {
            inner.current.pop(&key);
            inner.warned.pop(&key);
        }
    }

    /// The warnings of one reading of the objects by the model or the provider (each
    /// `Kind namespace/name: why`, as [`autoscaler_model::ObjectKey`] shows), in
    /// place of the last ones `source` gave: new ones are warned about as
    /// [`SkippedObjects::skipped`] does; objects no longer named are cleared.
    pub fn conversion_warnings(&self, source: &str, warnings: &[String]) {
        let mut named = Vec::with_capacity(warnings.len());
        for w in warnings {
            let (who, why) = w.split_once(": ").unwrap_or((w.as_str(), ""));
            let (kind, object) = who.split_once(' ').unwrap_or((source, who));
            // The reason stands for the version: an object changed but wrong in the same way
            // is not warned about again before REWARN_AFTER.
            self.skipped(kind, object, why, why);
            named.push((kind.to_string(), truncate(object, MAX_TEXT)));
        }
        let mut inner = self.lock();
        let before = inner.by_source.insert(source.to_string(), named.clone());
        for key in before.into_iter().flatten() {
            if !named.contains(&key) {
                inner.current.pop(&key);
                inner.warned.pop(&key);
            }
        }
    }

    /// Warns `text` (about an object used in part: an annotation ignored, ...) unless it was
    /// given within [`REWARN_AFTER`]. Returns whether it warned.
    pub fn noted(&self, source: &str, text: &str) -> bool {
        let text = truncate(text, 2 * MAX_TEXT);
        let now = Instant::now();
        let warn = {
            let mut inner = self.lock();
            let fresh = matches!(inner.noted.get(&text), Some(at) if now.duration_since(*at) < REWARN_AFTER);
            if !fresh {
                inner.noted.put(text.clone(), now);
            }
            !fresh
        };
        if warn {
            tracing::warn!(%source, warning = %text, "object used in part");
        }
        warn
    }

    /// How many objects are left out now, and (at most [`MAX_IN_STATUS`], sorted) which.
    pub fn summary(&self) -> (usize, Vec<String>) {
        let inner = self.lock();
        let mut all: Vec<String> = (inner.current.iter())
            .map(|((kind, object), why)| format!("{kind} {object}: {why}"))
            .collect();
        all.sort();
        let count = all.len();
        all.truncate(MAX_IN_STATUS);
        (count, all)
    }

    /// `yaml` (the status) with a `skippedObjects:` section appended while objects are left
    /// out (ours; upstream's fields are unchanged).
    pub fn with_status_section(&self, mut yaml: String) -> String {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Section {
            skipped_objects: Skipped,
        }
        #[derive(Serialize)]
        struct Skipped {
            count: usize,
            objects: Vec<String>,
        }
        let (count, objects) = self.summary();
        if count == 0 {
            return yaml;
        }
        let section = Section {
            skipped_objects: Skipped { count, objects },
        };
        if !yaml.is_empty() && !yaml.ends_with('\n') {
            yaml.push('\n');
        }
        yaml.push_str(&serde_yaml_ng::to_string(&section).unwrap_or_default());
        yaml
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_object_is_warned_about_once_per_version_and_again_after_a_while() {
        let metrics = Arc::new(Metrics::new());
        let s = SkippedObjects::new(Some(metrics.clone()));
        assert!(s.skipped("Node", "bad", "5", "status: invalid type"));
        // Each relist sees it again: no new warning, no new count.
        for _ in 0..10 {
            assert!(!s.skipped("Node", "bad", "5", "status: invalid type"));
        }
        assert!(s.skipped("Node", "bad", "6", "status: invalid type"));
        tokio::time::advance(REWARN_AFTER).await;
        assert!(s.skipped("Node", "bad", "6", "status: invalid type"));
        let text = metrics.encode();
        assert!(
            text.contains("cluster_autoscaler_skipped_objects_total{kind=\"Node\"} 3"),
            "{text}"
        );
        assert_eq!(
            s.summary(),
            (1, vec!["Node bad: status: invalid type".to_string()])
        );
    }

    #[test]
    fn objects_fixed_or_gone_leave_the_summary() {
        let s = SkippedObjects::default();
        s.skipped("Pod", "ns/a", "1", "x");
        s.skipped("Pod", "ns/b", "1", "y");
        s.skipped("Node", "n", "1", "z");
        s.cleared("Pod", "ns/a");
        assert_eq!(s.summary().0, 2);
        s.relisted("Pod", &[]);
        assert_eq!(s.summary(), (1, vec!["Node n: z".to_string()]));
        // Warned again once it is skipped again after being cleared.
        s.relisted("Node", &[]);
        assert!(s.skipped("Node", "n", "1", "z"));
    }

    #[test]
    fn conversion_warnings_replace_the_last_ones_and_are_not_repeated() {
        let s = SkippedObjects::default();
        let w = vec!["MachineDeployment ns/md: min 5 above max 2; not autoscaled".to_string()];
        s.conversion_warnings("provider", &w);
        s.conversion_warnings("provider", &w);
        assert_eq!(
            s.summary(),
            (
                1,
                vec![format!(
                    "MachineDeployment ns/md: min 5 above max 2; not autoscaled"
                )]
            )
        );
        assert!(!s.skipped(
            "MachineDeployment",
            "ns/md",
            "min 5 above max 2; not autoscaled",
            ""
        ));
        s.conversion_warnings("model", &["Node n: bad".to_string()]);
        s.conversion_warnings("provider", &[]);
        assert_eq!(s.summary(), (1, vec!["Node n: bad".to_string()]));
    }

    #[test]
    fn a_note_is_warned_once() {
        let s = SkippedObjects::default();
        assert!(s.noted("provider", "MachineSet ns/ms: annotation x ignored"));
        assert!(!s.noted("provider", "MachineSet ns/ms: annotation x ignored"));
        assert_eq!(s.summary().0, 0);
    }

    #[test]
    fn memory_and_status_are_bounded() {
        let s = SkippedObjects::default();
        for i in 0..(MAX_REMEMBERED + 100) {
            s.skipped("Pod", &format!("ns/p{i}"), "1", &"r".repeat(10_000));
        }
        let (count, objects) = s.summary();
        assert_eq!(count, MAX_REMEMBERED);
        assert_eq!(objects.len(), MAX_IN_STATUS);
        assert!(
            objects.iter().all(|o| o.len() < 2 * MAX_TEXT),
            "{}",
            objects[0].len()
        );
        let yaml = s.with_status_section("time: now\n".to_string());
        assert!(
            yaml.starts_with("time: now\nskippedObjects:\n  count: 4096\n"),
            "{yaml}"
        );
    }
}
