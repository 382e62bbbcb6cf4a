//! Decides, for each event the autoscaler wants to publish, whether it becomes a new Event
//! object, a count update of one already published, or nothing, with the semantics of
//! client-go's event recorder (`tools/record`):
//!
//! - identical events (same object, reason, type and message) are one Event whose `count` grows;
//! - similar events (same object, reason and type, different messages) are published as they
//!   are until 10 distinct messages were seen within 10 minutes; from then on they are combined
//!   into one Event "(combined from similar events): <latest message>" whose count grows;
//! - a per-object spam filter (a token bucket: burst 25, one token back every 5 minutes) stops
//!   one object from flooding the API. As upstream cluster-autoscaler does, events on the status
//!   ConfigMap are keyed by their message instead, so every distinct cluster-level event goes;
//! - a global token bucket (burst 25, 5 per second) bounds the rate of API writes.
//!
//! It is pure: the caller passes the time (milliseconds, any epoch); it performs no I/O and
//! never reads a clock. Its memory is bounded (least recently used keys are forgotten).

use std::collections::HashSet;
use std::hash::Hash;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::Duration;

use lru::LruCache;

use crate::events::{EventSpec, Target};

/// Prefix of a combined event's message (client-go's wording).
pub const COMBINED_PREFIX: &str = "(combined from similar events): ";

/// Tuning, with client-go's defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct CorrelatorOptions {
    /// Distinct messages of similar events seen before they are combined (10).
    pub max_similar: usize,
    /// How long similar messages are remembered after the last one (10 minutes).
    pub similar_window: Duration,
    /// Events an object may get at once (25).
    pub spam_burst: u32,
    /// Tokens an object gets back per second (one per 5 minutes).
    pub spam_refill_per_second: f64,
    /// API writes that may go at once, all objects together (25).
    pub global_burst: u32,
    /// API writes per second after the burst (5).
    pub global_per_second: f64,
    /// Keys remembered per cache (4096).
    pub cache_size: usize,
}

impl Default for CorrelatorOptions {
    fn default() -> Self {
        CorrelatorOptions {
            max_similar: 10,
            similar_window: Duration::from_secs(600),
            spam_burst: 25,
            spam_refill_per_second: 1.0 / 300.0,
            global_burst: 25,
            global_per_second: 5.0,
            cache_size: 4096,
        }
    }
}

/// Why an event was not published.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Its object had no token left.
    SpamFilter,
    /// The global write rate was exceeded.
    RateLimit,
}

impl DropReason {
    /// The label value of the drop metric.
    pub fn as_str(self) -> &'static str {
        match self {
            DropReason::SpamFilter => "spam_filter",
            DropReason::RateLimit => "rate_limit",
        }
    }
}

/// Identity of one published Event: object, reason, type and message (`None` for the combined
/// event of similar ones).
pub type EventKey = (Target, &'static str, bool, Option<Arc<str>>);

/// What to write to the API.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publish {
    /// The cache key, to [`Correlator::forget`] it when the write fails.
    pub key: EventKey,
    /// The Event object's name.
    pub name: String,
    /// The message to show.
    pub message: String,
    /// Occurrences so far, this one included.
    pub count: u32,
    /// When the first occurrence was published (ms).
    pub first_ms: i64,
    /// Whether this is a new Event (else the count of `name` is updated).
    pub create: bool,
}

/// The verdict on one event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Write it.
    Publish(Publish),
    /// Drop it (counted).
    Drop(DropReason),
}

#[derive(Clone, Copy, Debug)]
struct Bucket {
    tokens: f64,
    last_ms: i64,
}

impl Bucket {
    fn full(burst: u32, now_ms: i64) -> Bucket {
        Bucket {
            tokens: f64::from(burst),
            last_ms: now_ms,
        }
    }

    /// Refills for the time since the last call (never for time going backwards) and takes a
    /// token if there is one.
    fn try_take(&mut self, burst: u32, per_second: f64, now_ms: i64) -> bool {
        let elapsed = now_ms.saturating_sub(self.last_ms).max(0);
        self.last_ms = self.last_ms.max(now_ms);
        self.tokens = (self.tokens + elapsed as f64 / 1000.0 * per_second).min(f64::from(burst));
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }
}

/// A map that forgets its least recently used key beyond `cap` entries, in constant time per
/// use (a first loop may publish an event for each of tens of thousands of pending pods).
#[derive(Clone, Debug)]
struct Bounded<K: Hash + Eq, V> {
    map: LruCache<K, V>,
}

impl<K: Hash + Eq + Clone, V> Bounded<K, V> {
    fn new(cap: usize) -> Self {
        Bounded {
            map: LruCache::new(NonZeroUsize::new(cap).unwrap_or(NonZeroUsize::MIN)),
        }
    }

    fn get_or_insert_with(&mut self, key: &K, make: impl FnOnce() -> V) -> &mut V {
        self.map.get_or_insert_mut(key.clone(), make)
    }

    fn get(&self, key: &K) -> Option<&V> {
        self.map.peek(key)
    }

    fn remove(&mut self, key: &K) {
        self.map.pop(key);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.len()
    }
}

#[derive(Clone, Debug)]
struct Similar {
    messages: HashSet<Arc<str>>,
    last_ms: i64,
}

#[derive(Clone, Debug)]
struct Logged {
    name: String,
    count: u32,
    first_ms: i64,
}

/// The correlator: caches of similar messages, published events and per-object buckets.
#[derive(Clone, Debug)]
pub struct Correlator {
    options: CorrelatorOptions,
    similar: Bounded<(Target, &'static str, bool), Similar>,
    logged: Bounded<EventKey, Logged>,
    spam: Bounded<SpamKey, Bucket>,
    global: Option<Bucket>,
    /// Makes names unique within one millisecond.
    seq: u64,
}

/// What the spam filter counts per: an object, or a status ConfigMap message.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum SpamKey {
    Object(Target),
    StatusMessage(Arc<str>),
}

impl Correlator {
    /// Empty caches.
    pub fn new(options: CorrelatorOptions) -> Correlator {
        let cap = options.cache_size;
        Correlator {
            options,
            similar: Bounded::new(cap),
            logged: Bounded::new(cap),
            spam: Bounded::new(cap),
            global: None,
            seq: 0,
        }
    }

    /// The verdict on `event` at `now_ms`.
    pub fn correlate(&mut self, event: &EventSpec, now_ms: i64) -> Decision {
        let (message, key) = self.aggregate(event, now_ms);
        let o = &self.options;
        let spam_key = match &event.target {
            Target::StatusConfigMap => SpamKey::StatusMessage(event.message.clone()),
            t => SpamKey::Object(t.clone()),
        };
        let (burst, refill) = (o.spam_burst, o.spam_refill_per_second);
        let bucket = self
            .spam
            .get_or_insert_with(&spam_key, || Bucket::full(burst, now_ms));
        if !bucket.try_take(burst, refill, now_ms) {
            return Decision::Drop(DropReason::SpamFilter);
        }
        let (burst, rate) = (o.global_burst, o.global_per_second);
        let global = self.global.get_or_insert(Bucket::full(burst, now_ms));
        if !global.try_take(burst, rate, now_ms) {
            return Decision::Drop(DropReason::RateLimit);
        }
        Decision::Publish(self.observe(event, key, message, now_ms))
    }

    /// Forgets a published key whose write failed, so its next occurrence creates it anew.
    pub fn forget(&mut self, key: &EventKey) {
        self.logged.remove(key);
    }

    /// The message to show and the key to count under: the event's own until
    /// `max_similar` distinct messages of the same object, reason and type were seen within the
    /// window, then the combined one.
    fn aggregate(&mut self, event: &EventSpec, now_ms: i64) -> (Arc<str>, EventKey) {
        let window = i64::try_from(self.options.similar_window.as_millis()).unwrap_or(i64::MAX);
        let max = self.options.max_similar;
        let agg = (event.target.clone(), event.reason, event.warning);
        let rec = self.similar.get_or_insert_with(&agg, || Similar {
            messages: HashSet::new(),
            last_ms: now_ms,
        });
        if now_ms.saturating_sub(rec.last_ms) > window {
            rec.messages.clear();
        }
        rec.last_ms = now_ms;
        let known = rec.messages.contains(&event.message);
        if !known && rec.messages.len() >= max {
            // Bounded: the set never grows past `max`; further messages are combined.
            return (
                format!("{COMBINED_PREFIX}{}", event.message).into(),
                (agg.0, agg.1, agg.2, None),
            );
        }
        rec.messages.insert(event.message.clone());
        (
            event.message.clone(),
            (agg.0, agg.1, agg.2, Some(event.message.clone())),
        )
    }

    fn observe(
        &mut self,
        event: &EventSpec,
        key: EventKey,
        message: Arc<str>,
        now_ms: i64,
    ) -> Publish {
        if let Some(l) = self.logged.get(&key).cloned() {
            let count = l.count.saturating_add(1);
            self.logged.get_or_insert_with(&key, || l.clone()).count = count;
            return Publish {
                key,
                name: l.name,
                message: message.to_string(),
                count,
                first_ms: l.first_ms,
                create: false,
            };
        }
        self.seq = self.seq.wrapping_add(1);
        let name = event_name(&event.target, now_ms, self.seq);
        self.logged.get_or_insert_with(&key, || Logged {
            name: name.clone(),
            count: 1,
            first_ms: now_ms,
        });
        Publish {
            key,
            name,
            message: message.to_string(),
            count: 1,
            first_ms: now_ms,
            create: true,
        }
    }

    #[cfg(test)]
    fn cache_sizes(&self) -> (usize, usize, usize) {
        (self.similar.len(), self.logged.len(), self.spam.len())
    }
}

/// client-go's naming: the object's name, a dot, a hexadecimal time; `seq` keeps names of one
/// millisecond apart.
fn event_name(target: &Target, now_ms: i64, seq: u64) -> String {
    let object = match target {
        Target::Pod { name, .. }
        | Target::Node { name, .. }
        | Target::ClusterAutoscaler { name, .. } => name.as_str(),
        Target::StatusConfigMap => "cluster-autoscaler-status",
    };
    let nanos = (now_ms as i128 * 1_000_000 + i128::from(seq % 1_000_000)).max(0);
    format!("{object}.{nanos:x}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{NOT_TRIGGER_SCALE_UP, SCALE_DOWN, TRIGGERED_SCALE_UP};

    fn on(target: Target, reason: &'static str, message: &str) -> EventSpec {
        EventSpec {
            target,
            reason,
            message: message.into(),
            warning: false,
        }
    }

    fn pod(name: &str) -> Target {
        Target::Pod {
            namespace: "default".into(),
            name: name.into(),
            uid: String::new(),
        }
    }

    fn publish(d: Decision) -> Publish {
        match d {
            Decision::Publish(p) => p,
            Decision::Drop(r) => panic!("dropped: {r:?}"),
        }
    }

    /// Only the per-object rules: a global bucket that never runs dry.
    fn unthrottled() -> CorrelatorOptions {
        CorrelatorOptions {
            global_burst: 1_000_000,
            ..CorrelatorOptions::default()
        }
    }

    #[test]
    fn identical_events_are_one_event_whose_count_grows() {
        let mut c = Correlator::new(unthrottled());
        let e = on(pod("p"), NOT_TRIGGER_SCALE_UP, "no group fits");
        let first = publish(c.correlate(&e, 1_000));
        assert!(first.create);
        assert_eq!((first.count, first.first_ms), (1, 1_000));
        let second = publish(c.correlate(&e, 11_000));
        assert!(!second.create);
        assert_eq!(second.name, first.name);
        assert_eq!((second.count, second.first_ms), (2, 1_000));
        assert_eq!(second.message, "no group fits");
        let third = publish(c.correlate(&e, 21_000));
        assert_eq!(third.count, 3);
    }

    #[test]
    fn a_different_message_is_its_own_event_and_is_not_lost() {
        let mut c = Correlator::new(unthrottled());
        let cm = Target::StatusConfigMap;
        let a = publish(c.correlate(&on(cm.clone(), "ScaledUpGroup", "size to 1 (+1)"), 0));
        let b = publish(c.correlate(&on(cm, "ScaledUpGroup", "size to 2 (+2)"), 10_000));
        assert!(a.create && b.create);
        assert_ne!(a.name, b.name);
        assert_eq!(b.message, "size to 2 (+2)");
    }

    #[test]
    fn similar_events_are_combined_after_ten_messages_within_ten_minutes() {
        let mut c = Correlator::new(unthrottled());
        let node = Target::Node {
            name: "n1".into(),
            uid: String::new(),
        };
        for i in 0..10 {
            let p = publish(c.correlate(&on(node.clone(), SCALE_DOWN, &format!("m{i}")), i));
            assert!(p.create, "{i}");
            assert_eq!(p.message, format!("m{i}"));
        }
        let combined = publish(c.correlate(&on(node.clone(), SCALE_DOWN, "m10"), 20));
        assert!(combined.create);
        assert_eq!(combined.message, "(combined from similar events): m10");
        let again = publish(c.correlate(&on(node.clone(), SCALE_DOWN, "m11"), 30));
        assert!(!again.create);
        assert_eq!(again.name, combined.name);
        assert_eq!(again.count, 2);
        assert_eq!(again.message, "(combined from similar events): m11");
        // A message seen before still counts on its own event.
        let known = publish(c.correlate(&on(node.clone(), SCALE_DOWN, "m3"), 40));
        assert_eq!((known.count, known.message.as_str()), (2, "m3"));
        // Another reason is not similar.
        assert!(publish(c.correlate(&on(node.clone(), TRIGGERED_SCALE_UP, "x"), 50)).create);
        // After ten quiet minutes, messages stand alone again.
        let later = publish(c.correlate(&on(node, SCALE_DOWN, "m12"), 50 + 600_001));
        assert_eq!(later.message, "m12");
    }

    #[test]
    fn the_spam_filter_allows_a_burst_of_25_per_object_then_one_per_five_minutes() {
        let mut c = Correlator::new(unthrottled());
        let e = on(pod("p"), NOT_TRIGGER_SCALE_UP, "no group fits");
        let sent = (0..40)
            .filter(|i| matches!(c.correlate(&e, i * 10_000), Decision::Publish(_)))
            .count();
        // 25 at once, and one more token back after 300 s (at 300 s and 310 s..390 s: one).
        assert_eq!(sent, 26);
        assert_eq!(
            c.correlate(&e, 400_000),
            Decision::Drop(DropReason::SpamFilter)
        );
        // Another object has its own bucket.
        assert!(matches!(
            c.correlate(&on(pod("q"), NOT_TRIGGER_SCALE_UP, "x"), 400_000),
            Decision::Publish(_)
        ));
        // Five minutes after the last token: one more, counted on the same event.
        let p = publish(c.correlate(&e, 600_000));
        assert_eq!(p.count, 27);
    }

    #[test]
    fn status_configmap_events_are_filtered_per_message_not_per_object() {
        let mut c = Correlator::new(unthrottled());
        for i in 0..60 {
            let e = on(
                Target::StatusConfigMap,
                "ScaledUpGroup",
                &format!("size to {i}"),
            );
            assert!(matches!(c.correlate(&e, i), Decision::Publish(_)), "{i}");
        }
    }

    #[test]
    fn the_global_bucket_bounds_writes_per_second() {
        let mut c = Correlator::new(CorrelatorOptions::default());
        let drops: Vec<Decision> = (0..30)
            .map(|i| c.correlate(&on(pod(&format!("p{i}")), NOT_TRIGGER_SCALE_UP, "x"), 0))
            .filter(|d| matches!(d, Decision::Drop(_)))
            .collect();
        assert_eq!(drops.len(), 5);
        assert!(
            drops
                .iter()
                .all(|d| *d == Decision::Drop(DropReason::RateLimit))
        );
        // One second later: five more.
        let sent = (30..40)
            .filter(|i| {
                matches!(
                    c.correlate(&on(pod(&format!("p{i}")), NOT_TRIGGER_SCALE_UP, "x"), 1_000),
                    Decision::Publish(_)
                )
            })
            .count();
        assert_eq!(sent, 5);
        // Time going backwards refills nothing.
        assert!(matches!(
            c.correlate(&on(pod("z"), NOT_TRIGGER_SCALE_UP, "x"), 500),
            Decision::Drop(DropReason::RateLimit)
        ));
    }

    #[test]
    fn a_forgotten_key_is_created_again() {
        let mut c = Correlator::new(unthrottled());
        let e = on(pod("p"), SCALE_DOWN, "m");
        let first = publish(c.correlate(&e, 0));
        c.forget(&first.key);
        let again = publish(c.correlate(&e, 1));
        assert!(again.create);
        assert_eq!(again.count, 1);
        assert_ne!(again.name, first.name);
    }

    /// The key forgotten beyond the cap is the one least recently used, not the oldest
    /// inserted; reading with `get` does not count as a use.
    #[test]
    fn the_least_recently_used_key_is_forgotten() {
        let mut b: Bounded<&str, u32> = Bounded::new(2);
        *b.get_or_insert_with(&"a", || 1) += 0;
        b.get_or_insert_with(&"b", || 2);
        assert_eq!(*b.get_or_insert_with(&"a", || 9), 1, "a is kept and used");
        assert_eq!(b.get(&"b"), Some(&2));
        b.get_or_insert_with(&"c", || 3);
        assert_eq!(
            (b.get(&"a"), b.get(&"b"), b.get(&"c")),
            (Some(&1), None, Some(&3))
        );
        b.remove(&"a");
        assert_eq!(b.len(), 1);
        assert_eq!(
            Bounded::<u8, u8>::new(0).map.cap().get(),
            1,
            "a cap of 0 keeps one"
        );
    }

    #[test]
    fn memory_is_bounded_by_the_cache_size() {
        let mut c = Correlator::new(CorrelatorOptions {
            cache_size: 100,
            ..unthrottled()
        });
        for i in 0..1_000 {
            c.correlate(&on(pod(&format!("p{i}")), SCALE_DOWN, "m"), i);
        }
        let (similar, logged, spam) = c.cache_sizes();
        assert!(similar <= 100 && logged <= 100 && spam <= 100);
        // The most recent key is still known.
        let p = publish(c.correlate(&on(pod("p999"), SCALE_DOWN, "m"), 2_000));
        assert_eq!(p.count, 2);
    }

    #[test]
    fn names_follow_client_go_and_are_unique() {
        let a = event_name(&pod("web-1"), 1_700_000_000_000, 1);
        let b = event_name(&pod("web-1"), 1_700_000_000_000, 2);
        assert!(a.starts_with("web-1."), "{a}");
        assert_ne!(a, b);
        assert!(
            event_name(&Target::StatusConfigMap, 0, 1).starts_with("cluster-autoscaler-status.")
        );
    }
}
