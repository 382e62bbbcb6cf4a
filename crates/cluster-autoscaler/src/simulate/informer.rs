//! The simulation's informer: the autoscaler's view of the world's objects, kept up to date
//! from the world's watch log. A thin adapter: the converted objects live in the actuation crate's
//! [`autoscaler_actuation::Informer`]; this feeds it the world's changes and remembers the
//! last `resourceVersion` applied.
//!
//! With a watch lag (the scenario's `watch_lag`), each change reaches the view a random delay
//! after it happened, one object's changes in their order, as a live informer's watches of
//! different kinds deliver late and independently: the view then mixes objects of different
//! ages, and the autoscaler decides and writes on it.
//!
//! It decides nothing and never writes to the world.

use std::sync::Arc;

use autoscaler_actuation::Informer as Objects;
use autoscaler_model::ObjectKey;
use autoscaler_world::{SimTime, WatchEvent, WatchEventKind, World};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rustc_hash::FxHashMap;
use serde_json::Value;

/// The converted objects, kept in step with the world's watch log.
#[derive(Debug, Default)]
pub struct Informer {
    /// The last `resourceVersion` seen.
    rv: u64,
    /// The objects, converted.
    objects: Objects,
    /// Late delivery of the changes, if any.
    lag: Option<Lag>,
}

/// Changes read from the world and not delivered yet.
#[derive(Debug)]
struct Lag {
    /// The longest delay of a change.
    max_ms: SimTime,
    rng: ChaCha8Rng,
    /// (due, resourceVersion, object, its new state or `None` when deleted).
    pending: Vec<(SimTime, u64, ObjectKey, Option<Arc<Value>>)>,
    /// When each object's last pending change is due: a later one is never due before it.
    due: FxHashMap<ObjectKey, SimTime>,
}

impl Informer {
    /// An informer that has seen nothing yet, without lag.
    #[cfg(test)]
    pub fn new() -> Informer {
        Informer::default()
    }

    /// An informer whose changes each arrive a delay drawn uniformly from 0 to `max_ms` after
    /// they happened (with `seed`); `max_ms` 0 is [`Informer::new`].
    pub fn lagging(max_ms: SimTime, seed: u64) -> Informer {
        let lag = (max_ms > 0).then(|| Lag {
            max_ms,
            rng: ChaCha8Rng::seed_from_u64(seed),
            pending: Vec::new(),
            due: FxHashMap::default(),
        });
        Informer {
            lag,
            ..Informer::default()
        }
    }

    /// Reads every change the world logged since the last sync and delivers those due by the
    /// world's time, in the order they fall due.
    fn sync_late(&mut self, world: &World) {
        let Some(lag) = &mut self.lag else {
            return;
        };
        for e in world.events_since(self.rv) {
            self.rv = e.rv;
            if e.kind != WatchEventKind::Deleted && e.object.is_null() {
                continue;
            }
            let delay = lag.rng.random_range(0..=lag.max_ms);
            let after = lag.due.get(&e.key).copied().unwrap_or(SimTime::MIN);
            let due = e.at.saturating_add(delay).max(after);
            lag.due.insert(e.key.clone(), due);
            let object = (e.kind != WatchEventKind::Deleted).then(|| Arc::clone(&e.object));
            lag.pending.push((due, e.rv, e.key.clone(), object));
        }
        let now = world.now();
        lag.pending.sort_by_key(|p| (p.0, p.1));
        let ready = lag.pending.partition_point(|p| p.0 <= now);
        for (_, _, key, object) in lag.pending.drain(..ready) {
            self.objects.apply(key, object);
        }
        lag.due.retain(|_, due| *due > now);
    }

    /// Applies every change the world logged since the last sync. A Pod changed more than once
    /// since then is converted once, at its last change: the converted objects are the same
    /// either way (they hold each object's latest state), and converting a Pod is the
    /// informer's main cost (a pending pod is created and marked unschedulable in one
    /// scheduler pass, and marked again whenever its message changes).
    pub fn sync(&mut self, world: &World) {
        if self.lag.is_some() {
            self.sync_late(world);
            return;
        }
        let events = world.events_since(self.rv);
        let last = last_pod_changes(events);
        for e in events {
            self.rv = e.rv;
            if e.key.is_pod() && last.get(&e.key) != Some(&e.rv) {
                continue;
            }
            // A version a later edit superseded in a latest-only log: that edit's entry follows.
            if e.kind != WatchEventKind::Deleted && e.object.is_null() {
                continue;
            }
            let object = (e.kind != WatchEventKind::Deleted).then(|| Arc::clone(&e.object));
            self.objects.apply(e.key.clone(), object);
        }
    }

    /// The last `resourceVersion` applied.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }
}

/// The `resourceVersion` of each Pod's last change among `events`.
fn last_pod_changes(events: &[WatchEvent]) -> FxHashMap<&ObjectKey, u64> {
    let pods = events.iter().filter(|e| e.key.is_pod());
    pods.map(|e| (&e.key, e.rv)).collect()
}

impl std::ops::Deref for Informer {
    type Target = Objects;

    fn deref(&self) -> &Objects {
        &self.objects
    }
}

impl std::ops::DerefMut for Informer {
    fn deref_mut(&mut self) -> &mut Objects {
        &mut self.objects
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_model::Node;
    use autoscaler_model::Pod;
    use autoscaler_model::read_objects;
    use autoscaler_world::{NodeGroupSpec, WorldConfig};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use serde_json::json;

    /// With a lag, a change is seen only once its delay passed, one object's changes in order,
    /// and every change is seen once the longest delay passed.
    #[test]
    fn a_lagging_informer_sees_each_change_late_and_in_order() {
        let mut w = World::new(WorldConfig::default());
        w.apply(group_spec(1, 3).to_object("sim")).expect("group");
        let mut late = Informer::lagging(20_000, 7);
        let mut now = Informer::new();
        let md = |i: &Informer| {
            i.store()
                .list("cluster.x-k8s.io", "MachineDeployment")
                .map(|(_, o)| o["spec"]["replicas"].as_i64())
                .collect::<Vec<_>>()
        };
        late.sync(&w);
        now.sync(&w);
        let mut seen = Vec::new();
        w.set_replicas("default", "g", 2).expect("scale");
        w.set_replicas("default", "g", 3).expect("scale");
        for t in (0..=25_000).step_by(1_000) {
            w.step_until(t);
            late.sync(&w);
            now.sync(&w);
            let r = md(&late);
            if seen.last() != Some(&r) {
                seen.push(r);
            }
        }
        assert_eq!(md(&now), [Some(3)]);
        assert_eq!(md(&late), [Some(3)], "every change arrives within the lag");
        // Seen in order: never 3 then 2.
        let counts: Vec<i64> = seen
            .iter()
            .filter_map(|r| r.first().copied().flatten())
            .collect();
        assert!(counts.windows(2).all(|p| p[0] <= p[1]), "{counts:?}");
        let mut never = Informer::lagging(0, 7);
        never.sync(&w);
        assert_eq!(md(&never), [Some(3)], "no lag: at once");
    }

    /// Syncing converts each Pod once per batch of changes, at its last one, from a world whose
    /// log keeps only the latest versions (as the driver's does) and forgets what was read; the
    /// objects are those of applying every change of a full log one by one, whatever the batches.
    #[test]
    fn a_batch_of_changes_gives_the_objects_of_every_change_applied() {
        let world = |latest_only: bool| {
            let mut w = World::new(WorldConfig::default());
            w.set_latest_only_log(latest_only);
            w.apply(group_spec(1, 3).to_object("sim")).expect("group");
            w
        };
        let (mut w, mut full) = (world(true), world(false));
        let (mut batched, mut each) = (Informer::new(), Objects::new());
        let mut rv = 0;
        let mut rng = ChaCha8Rng::seed_from_u64(0x2545_F491_4F6C_DD1D);
        let mut next = |n: u64| rng.random_range(0..n);
        for step in 0..120 {
            match next(4) {
                0 | 1 => {
                    let cpu = ["1", "3", "9"][next(3) as usize];
                    let pod = json!({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": format!("p{step}"), "namespace": "default"},
                        "spec": {"containers": [{"name": "c",
                            "resources": {"requests": {"cpu": cpu}}}]}});
                    let runs = (next(2) == 0).then(|| 30_000 + next(5) * 60_000);
                    w.add_pod(pod.clone(), runs).expect("pod");
                    full.add_pod(pod, runs).expect("pod");
                }
                2 => {
                    w.gc_terminal_pods();
                    full.gc_terminal_pods();
                }
                _ => {
                    let dt = next(4) * 20_000;
                    w.advance(dt);
                    full.advance(dt);
                }
            }
            for e in full.events_since(rv) {
                rv = e.rv;
                let object = (e.kind != WatchEventKind::Deleted).then(|| Arc::clone(&e.object));
                each.apply(e.key.clone(), object);
            }
            if next(3) == 0 {
                continue;
            }
            batched.sync(&w);
            w.forget_events_upto(batched.resource_version());
            let (a, b) = (batched.objects(), each.objects());
            assert_eq!(a.pods.len(), b.pods.len(), "step {step}");
            assert!(
                a.pods.iter().zip(&b.pods).all(|(a, b)| a == b),
                "step {step}"
            );
            assert_eq!(a.nodes, b.nodes, "step {step}");
            assert_eq!(batched.resource_version(), rv);
        }
        assert!(each.objects().pods.len() > 3, "the test makes pods");
    }

    fn group_spec(replicas: u32, max_size: u32) -> NodeGroupSpec {
        NodeGroupSpec {
            namespace: "default".into(),
            name: "g".into(),
            replicas,
            min_size: 0,
            max_size,
            cpu: "4".into(),
            memory: "16Gi".into(),
            max_pods: 110,
            gpu: None,
            labels: Default::default(),
            taints: Vec::new(),
            delete_policy: Default::default(),
        }
    }

    #[test]
    fn the_informer_reads_what_read_objects_reads() {
        let mut w = World::new(WorldConfig::default());
        let spec = group_spec(2, 5);
        w.apply(spec.to_object("sim")).expect("group");
        let mut inf = Informer::new();
        for i in 0..5 {
            let pod = json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("p{i}"), "namespace": "default"},
                "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}});
            w.add_pod(pod, Some(200_000 + i * 10_000)).expect("pod");
            w.advance(60_000);
            inf.sync(&w);
            let listed: Vec<_> = inf.pods().to_vec();
            assert_eq!(listed.len(), inf.objects().pods.len());
            assert!(
                listed
                    .iter()
                    .zip(&inf.objects().pods)
                    .all(|(a, b)| Arc::ptr_eq(a, b))
            );
        }
        w.advance(600_000);
        w.gc_terminal_pods();
        inf.sync(&w);
        let (want, _) = read_objects(w.objects());
        let got = inf.objects();
        let names = |v: &[Arc<Pod>]| {
            v.iter()
                .map(|p| (p.name.clone(), p.node_name, p.phase))
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&got.pods), names(&want.pods));
        assert_eq!(names(inf.pods()), names(&want.pods));
        let nn = |v: &[Arc<Node>]| v.iter().map(|n| n.name).collect::<Vec<_>>();
        assert_eq!(nn(&got.nodes), nn(&want.nodes));
        assert!(!want.nodes.is_empty());
        assert_eq!(inf.resource_version(), w.resource_version());
    }
}
