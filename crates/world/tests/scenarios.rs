//! Scenario tests of the whole simulated world: every controller together replays identically
//! from a seed, and a watch resumes from a resourceVersion. Each controller's own scenarios are
//! next to it (`src/machines.rs`, `src/scheduler.rs`, `src/workloads.rs`, `src/eviction.rs`).

use std::collections::BTreeMap;

use autoscaler_world::{
    NodeGroupSpec, PodTemplate, ProvisioningDelay, ReplicaSetSpec, World, WorldConfig,
};

fn group(name: &str, replicas: u32) -> NodeGroupSpec {
    NodeGroupSpec {
        namespace: "capi".into(),
        name: name.into(),
        replicas,
        min_size: 0,
        max_size: 10,
        cpu: "4".into(),
        memory: "16Gi".into(),
        max_pods: 110,
        gpu: None,
        labels: BTreeMap::from([("pool".to_string(), name.to_string())]),
        taints: Vec::new(),
        delete_policy: Default::default(),
    }
}

fn world(seed: u64) -> World {
    let mut w = World::new(WorldConfig {
        seed,
        ..WorldConfig::default()
    });
    w.set_provisioning_delay(
        "workers",
        ProvisioningDelay {
            min_ms: 30_000,
            max_ms: 60_000,
        },
    );
    w
}

fn rs(name: &str, replicas: u32, cpu: &str) -> ReplicaSetSpec {
    ReplicaSetSpec {
        namespace: "default".into(),
        name: name.into(),
        template: PodTemplate::new().requests(cpu, "1Gi").label("app", name),
        replicas,
        schedule: Vec::new(),
        pod_lifetime_ms: None,
        deployment: true,
    }
}

fn scenario(seed: u64) -> World {
    let mut w = world(seed);
    w.add_node_group(&group("workers", 2)).unwrap();
    let mut spec = rs("web", 3, "500m");
    spec.schedule = vec![(100_000, 12), (200_000, 2)];
    spec.pod_lifetime_ms = Some(45_000);
    w.add_replica_set(spec).unwrap();
    w.step_until(120_000);
    w.set_replicas("capi", "workers", 4).unwrap();
    w.step_until(400_000);
    w
}

#[test]
fn same_seed_same_event_log() {
    let a = scenario(42);
    let b = scenario(42);
    assert!(a.resource_version() > 50);
    assert_eq!(a.events_since(0), b.events_since(0));
    assert_eq!(a.metrics(), b.metrics());
    let c = scenario(43);
    assert_ne!(a.events_since(0), c.events_since(0));
}

#[test]
fn watch_resumes_from_a_resource_version() {
    let mut w = world(10);
    w.add_node_group(&group("workers", 1)).unwrap();
    let rv = w.resource_version();
    w.advance(61_000);
    let events = w.events_since(rv);
    assert!(events.iter().all(|e| e.rv > rv));
    assert!(events.iter().any(|e| e.key.kind == "Node"));
    let node = w.node_names()[0].clone();
    w.delete_node(&node).unwrap();
    assert_eq!(
        w.events_since(w.resource_version() - 1)[0].kind,
        autoscaler_world::WatchEventKind::Deleted
    );
}
