//! Scenario tests of the simulated world.

use std::collections::BTreeMap;

use autoscaler_world::machines::DELETE_MACHINE_ANNOTATION;
use autoscaler_world::{
    DaemonSetSpec, DeletePolicy, EvictionError, Fault, FaultKind, JobSpec, NodeGroupSpec,
    PodTemplate, ProvisioningDelay, ReplicaSetSpec, World, WorldConfig, WorldError,
};
use serde_json::{Value, json};

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

fn get(w: &World, group: &str, kind: &str, ns: &str, name: &str) -> Option<Value> {
    w.objects()
        .list(group, kind)
        .find(|(k, _)| k.namespace == ns && k.name == name)
        .map(|(_, v)| (**v).clone())
}

fn machine(w: &World, name: &str) -> Value {
    get(w, "cluster.x-k8s.io", "Machine", "capi", name).expect("machine exists")
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

#[test]
fn replicas_become_machines_then_ready_nodes_after_the_delay() {
    let mut w = world(1);
    w.add_node_group(&group("workers", 3)).unwrap();
    let machines = w.machines_of("capi", "workers");
    assert_eq!(machines.len(), 3);
    assert!(w.node_names().is_empty());
    for m in &machines {
        let obj = machine(&w, m);
        assert_eq!(obj["spec"]["providerID"], format!("sim:///{m}"));
        assert_eq!(obj["status"]["phase"], "Provisioned");
        assert!(obj["status"].get("nodeRef").is_none());
    }
    let ms: Vec<_> = w.objects().list("cluster.x-k8s.io", "MachineSet").collect();
    assert_eq!(ms.len(), 1);
    assert_eq!(ms[0].1["spec"]["replicas"], 3);

    w.step_until(29_999);
    assert!(
        w.node_names().is_empty(),
        "no node before the minimum delay"
    );
    w.step_until(60_000);
    assert_eq!(w.node_names().len(), 3);
    for m in &machines {
        let obj = machine(&w, m);
        assert_eq!(obj["status"]["phase"], "Running");
        assert_eq!(obj["status"]["nodeRef"]["name"], m.as_str());
        let node = get(&w, "", "Node", "", m).unwrap();
        assert_eq!(node["metadata"]["labels"]["pool"], "workers");
        assert_eq!(node["status"]["capacity"]["cpu"], "4");
        assert_eq!(node["status"]["conditions"][0]["type"], "Ready");
        assert_eq!(node["spec"]["providerID"], format!("sim:///{m}"));
        assert_eq!(w.machine_of_node(m), Some(("capi".into(), m.clone())));
    }
    let md = get(
        &w,
        "cluster.x-k8s.io",
        "MachineDeployment",
        "capi",
        "workers",
    )
    .unwrap();
    assert_eq!(md["status"]["readyReplicas"], 3);
    let sample = w.metrics().samples.last().unwrap();
    assert_eq!(sample.machines_per_group["capi/workers"], 3);
}

#[test]
fn pending_pods_are_unschedulable_then_bind_when_nodes_appear() {
    let mut w = world(2);
    w.add_node_group(&group("workers", 0)).unwrap();
    w.add_replica_set(rs("web", 6, "1500m")).unwrap();
    w.advance(1_000);
    assert_eq!(w.pending_count(), 6);
    let pods: Vec<Value> = w
        .objects()
        .list("", "Pod")
        .map(|(_, v)| (**v).clone())
        .collect();
    for p in &pods {
        let c = &p["status"]["conditions"][0];
        assert_eq!(c["type"], "PodScheduled");
        assert_eq!(c["status"], "False");
        assert_eq!(c["reason"], "Unschedulable");
        assert_eq!(c["message"], "no nodes available to schedule pods");
    }
    w.set_replicas("capi", "workers", 1).unwrap();
    w.advance(61_000);
    // One 4-cpu node takes two 1.5-cpu pods.
    assert_eq!(w.pending_count(), 4);
    let msg = w
        .objects()
        .list("", "Pod")
        .filter_map(|(_, p)| {
            p["status"]["conditions"][0]["message"]
                .as_str()
                .map(str::to_string)
        })
        .find(|m| m.starts_with("0/"))
        .unwrap();
    assert_eq!(msg, "0/1 nodes are available: 1 Insufficient cpu.");
    w.set_replicas("capi", "workers", 3).unwrap();
    w.advance(61_000);
    assert_eq!(w.pending_count(), 0);
    let bound = w.live_pods().iter().filter(|p| p.2.is_some()).count();
    assert_eq!(bound, 6);
    let p = w.objects().list("", "Pod").next().unwrap().1.clone();
    assert_eq!(p["status"]["phase"], "Running");
    assert_eq!(p["status"]["conditions"][0]["status"], "True");
    assert_eq!(w.metrics().waits.len(), 6);
    assert!(w.metrics().waits.iter().all(|wt| wt.wait_ms() > 30_000));
    let deployment = get(&w, "apps", "Deployment", "default", "web").unwrap();
    assert_eq!(deployment["status"]["readyReplicas"], 6);
}

#[test]
fn taints_are_honoured_by_the_scheduler() {
    let mut w = world(3);
    let mut g = group("workers", 1);
    g.taints = vec![("dedicated".into(), "gpu".into(), "NoSchedule".into())];
    w.add_node_group(&g).unwrap();
    w.add_replica_set(rs("web", 1, "100m")).unwrap();
    w.advance(61_000);
    assert_eq!(w.pending_count(), 1);
    let p = w.objects().list("", "Pod").next().unwrap().1.clone();
    assert_eq!(
        p["status"]["conditions"][0]["message"],
        "0/1 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}."
    );
    let node = w.node_names()[0].clone();
    w.untaint_node(&node, "dedicated").unwrap();
    w.advance(1_000);
    assert_eq!(w.pending_count(), 0);
    w.taint_node(&node, "ToBeDeletedByClusterAutoscaler", "1", "NoSchedule")
        .unwrap();
    w.scale_replica_set("default", "web", 2).unwrap();
    w.advance(1_000);
    assert_eq!(
        w.pending_count(),
        1,
        "the new pod does not tolerate the taint"
    );
}

#[test]
fn scale_down_deletes_the_annotated_machine_first() {
    let mut w = world(4);
    w.add_node_group(&group("workers", 3)).unwrap();
    w.advance(61_000);
    let machines = w.machines_of("capi", "workers");
    // Not the first by name: an unmarked choice would never pick it.
    let victim = machines[2].clone();
    w.annotate_machine("capi", &victim, DELETE_MACHINE_ANNOTATION, "yes")
        .unwrap();
    w.set_replicas("capi", "workers", 2).unwrap();
    // Being deleted: a deletionTimestamp, still counted, its node cordoned and drained.
    assert!(machine(&w, &victim)["metadata"]["deletionTimestamp"].is_string());
    w.advance(1);
    let left = w.machines_of("capi", "workers");
    assert_eq!(left.len(), 2);
    assert!(!left.contains(&victim));
    assert!(!w.node_names().contains(&victim), "its node went with it");
    assert!(w.unmarked_healthy_deletions().is_empty());
    // Without annotation, the default Random policy takes a healthy Machine by name: a
    // careless decrement removes a healthy node, and the world records it.
    let mut by_name = left.clone();
    by_name.sort();
    w.set_replicas("capi", "workers", 1).unwrap();
    w.advance(1);
    assert_eq!(w.machines_of("capi", "workers"), vec![by_name[1].clone()]);
    let careless = w.unmarked_healthy_deletions();
    assert_eq!(careless.len(), 1);
    assert_eq!(careless[0].machine, by_name[0]);
}

#[test]
fn unhealthy_machines_go_before_healthy_ones_and_policies_order_the_rest() {
    for (policy, expect_oldest_left) in
        [(DeletePolicy::Newest, true), (DeletePolicy::Oldest, false)]
    {
        let mut w = world(11);
        let mut spec = group("workers", 1);
        spec.delete_policy = policy;
        w.add_node_group(&spec).unwrap();
        w.advance(61_000);
        w.set_replicas("capi", "workers", 2).unwrap();
        w.advance(61_000);
        let oldest_first = w.machines_of("capi", "workers");
        assert_eq!(w.node_names().len(), 2);
        // A third Machine without a node yet: unhealthy, so it goes first.
        w.set_replicas("capi", "workers", 3).unwrap();
        let young = w.machines_of("capi", "workers")[2].clone();
        w.set_replicas("capi", "workers", 2).unwrap();
        w.advance(1);
        assert!(
            !w.machines_of("capi", "workers").contains(&young),
            "{policy:?}"
        );
        w.set_replicas("capi", "workers", 1).unwrap();
        w.advance(1);
        let kept = if expect_oldest_left {
            &oldest_first[0]
        } else {
            &oldest_first[1]
        };
        assert_eq!(
            &w.machines_of("capi", "workers"),
            &vec![kept.clone()],
            "{policy:?}"
        );
    }
}

#[test]
fn a_deleting_machine_keeps_its_node_until_the_budget_lets_the_drain_finish() {
    let mut w = World::new(WorldConfig {
        seed: 3,
        machine_deletion_ms: 20_000,
        ..WorldConfig::default()
    });
    w.add_node_group(&group("workers", 1)).unwrap();
    w.advance(121_000);
    w.add_replica_set(rs("web", 1, "100m")).unwrap();
    w.apply(pdb("web", "web", 1)).unwrap();
    w.advance(2_000);
    let m = w.machines_of("capi", "workers")[0].clone();
    w.remove_machine("capi", &m).unwrap();
    w.advance(60_000);
    // The only pod is protected: the node stays, cordoned, and so does the Machine.
    assert_eq!(w.node_names(), vec![m.clone()]);
    let node = get(&w, "", "Node", "", &m).unwrap();
    assert_eq!(node["spec"]["unschedulable"], true);
    assert_eq!(machine(&w, &m)["status"]["phase"], "Deleting");
    // The budget relaxed: the drain finishes, then the instance terminates.
    w.apply(pdb("web", "web", 0)).unwrap();
    w.advance(6_000);
    assert_eq!(w.node_names(), vec![m.clone()], "terminating for 20s");
    w.advance(20_000);
    assert!(!w.node_names().contains(&m));
    assert!(!w.machines_of("capi", "workers").contains(&m));
}

#[test]
fn a_slow_machine_set_controller_acts_late_on_new_replicas() {
    let mut w = World::new(WorldConfig {
        seed: 3,
        machine_set_sync_ms: 30_000,
        ..WorldConfig::default()
    });
    w.add_node_group(&group("workers", 1)).unwrap();
    w.set_replicas("capi", "workers", 3).unwrap();
    assert_eq!(w.machines_of("capi", "workers").len(), 1);
    w.advance(30_000);
    assert_eq!(w.machines_of("capi", "workers").len(), 3);
}

#[test]
fn stockout_fails_machines_with_a_reason_and_scale_errors_are_injected() {
    let mut w = world(5);
    w.add_node_group(&group("workers", 0)).unwrap();
    w.inject_fault(Fault {
        group: "workers".into(),
        from_ms: 0,
        to_ms: 100_000,
        kind: FaultKind::Stockout {
            reason: "InsufficientInstanceCapacity".into(),
        },
    });
    w.inject_fault(Fault {
        group: "workers".into(),
        from_ms: 400_000,
        to_ms: 500_000,
        kind: FaultKind::ScaleApiError,
    });
    w.set_replicas("capi", "workers", 2).unwrap();
    w.advance(150_000);
    assert!(w.node_names().is_empty());
    for m in w.machines_of("capi", "workers") {
        let obj = machine(&w, &m);
        assert_eq!(obj["status"]["phase"], "Failed");
        assert_eq!(
            obj["status"]["failureReason"],
            "InsufficientInstanceCapacity"
        );
        assert!(obj["status"]["failureMessage"].is_string());
        let conditions = obj["status"]["v1beta2"]["conditions"].as_array().unwrap();
        assert!(
            conditions
                .iter()
                .any(|c| c["type"] == "Ready" && c["status"] == "False")
        );
    }
    // After the window, a new machine provisions; failed ones are deleted first on shrink.
    w.set_replicas("capi", "workers", 3).unwrap();
    w.step_until(300_000);
    w.set_replicas("capi", "workers", 1).unwrap();
    w.advance(1);
    let left = w.machines_of("capi", "workers");
    assert_eq!(left.len(), 1);
    assert_eq!(machine(&w, &left[0])["status"]["phase"], "Running");
    assert_eq!(w.node_names().len(), 1);
    w.step_until(400_000);
    assert_eq!(
        w.set_replicas("capi", "workers", 2),
        Err(WorldError::ScaleApi {
            group: "capi/workers".into()
        })
    );
    w.step_until(500_000);
    w.set_replicas("capi", "workers", 2).unwrap();
}

#[test]
fn never_registering_and_slow_machines() {
    let mut w = world(6);
    w.add_node_group(&group("workers", 0)).unwrap();
    w.inject_fault(Fault {
        group: "workers".into(),
        from_ms: 0,
        to_ms: 10,
        kind: FaultKind::NeverRegisters,
    });
    w.set_replicas("capi", "workers", 1).unwrap();
    w.step_until(20);
    w.inject_fault(Fault {
        group: "workers".into(),
        from_ms: 20,
        to_ms: 30,
        kind: FaultKind::Slow { delay_ms: 900_000 },
    });
    w.set_replicas("capi", "workers", 2).unwrap();
    w.step_until(900_000);
    assert!(w.node_names().is_empty());
    let ms = w.machines_of("capi", "workers");
    assert!(machine(&w, &ms[0])["spec"]["providerID"].is_string());
    w.step_until(900_020);
    assert_eq!(w.node_names(), vec![ms[1].clone()]);
}

fn pdb(name: &str, app: &str, min_available: i64) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minAvailable": min_available, "selector": {"matchLabels": {"app": app}}},
    })
}

#[test]
fn eviction_honours_budgets_and_the_replica_set_recreates_the_pod() {
    let mut w = world(7);
    w.add_node_group(&group("workers", 2)).unwrap();
    w.add_replica_set(rs("web", 2, "100m")).unwrap();
    w.apply(pdb("web", "web", 2)).unwrap();
    w.advance(61_000);
    assert_eq!(w.pending_count(), 0);
    let status =
        get(&w, "policy", "PodDisruptionBudget", "default", "web").unwrap()["status"].clone();
    assert_eq!(status["disruptionsAllowed"], 0);
    assert_eq!(status["currentHealthy"], 2);
    let (ns, name, _) = w.live_pods()[0].clone();
    let err = w.evict(&ns, &name).unwrap_err();
    assert!(matches!(err, EvictionError::PdbViolation { ref pdb, .. } if pdb == "default/web"));
    assert!(
        w.live_pods().iter().any(|p| p.1 == name),
        "refused: pod stays"
    );

    w.apply(pdb("web", "web", 1)).unwrap();
    let status =
        get(&w, "policy", "PodDisruptionBudget", "default", "web").unwrap()["status"].clone();
    assert_eq!(status["disruptionsAllowed"], 1);
    w.evict(&ns, &name).unwrap();
    let pods = w.live_pods();
    assert_eq!(pods.len(), 2, "the ReplicaSet replaced it");
    assert!(!pods.iter().any(|p| p.1 == name));
    assert_eq!(pods.iter().filter(|p| p.2.is_none()).count(), 1);
    // A second eviction before the replacement runs is refused.
    let other = pods.iter().find(|p| p.2.is_some()).unwrap().1.clone();
    assert!(matches!(
        w.evict("default", &other),
        Err(EvictionError::PdbViolation { .. })
    ));
    w.advance(1_000);
    assert_eq!(w.pending_count(), 0);
    assert_eq!(
        w.evict("default", "nope"),
        Err(EvictionError::NotFound("default/nope".into()))
    );
}

#[test]
fn daemon_set_pods_land_on_new_nodes() {
    let mut w = world(8);
    w.add_node_group(&group("workers", 1)).unwrap();
    let mut tainted = group("gpu", 0);
    tainted.taints = vec![("dedicated".into(), "gpu".into(), "NoSchedule".into())];
    w.add_node_group(&tainted).unwrap();
    w.add_daemon_set(DaemonSetSpec {
        namespace: "kube-system".into(),
        name: "agent".into(),
        template: PodTemplate::new()
            .requests("50m", "64Mi")
            .label("app", "agent"),
    })
    .unwrap();
    w.advance(121_000);
    assert_eq!(w.live_pods().len(), 1);
    w.set_replicas("capi", "workers", 3).unwrap();
    w.set_replicas("capi", "gpu", 1).unwrap();
    w.advance(121_000);
    let pods = w.live_pods();
    assert_eq!(
        pods.len(),
        3,
        "one per untainted node, none on the tainted one"
    );
    let mut nodes: Vec<String> = pods.iter().filter_map(|p| p.2.clone()).collect();
    nodes.sort();
    assert_eq!(
        nodes,
        w.machines_of("capi", "workers")
            .into_iter()
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect::<Vec<_>>()
    );
    let ds = get(&w, "apps", "DaemonSet", "kube-system", "agent").unwrap();
    assert_eq!(ds["status"]["numberReady"], 3);
}

#[test]
fn jobs_run_to_completion() {
    let mut w = world(9);
    w.add_node_group(&group("workers", 1)).unwrap();
    w.add_job(JobSpec {
        namespace: "default".into(),
        name: "batch".into(),
        template: PodTemplate::new().requests("1", "1Gi"),
        completions: 4,
        parallelism: 2,
        duration_ms: 10_000,
    })
    .unwrap();
    w.advance(29_000);
    assert_eq!(
        w.live_pods().len(),
        2,
        "parallelism 2, waiting for the node"
    );
    w.advance(92_000);
    let job = get(&w, "batch", "Job", "default", "batch").unwrap();
    assert_eq!(job["status"]["succeeded"], 4);
    assert_eq!(job["status"]["conditions"][0]["type"], "Complete");
    assert!(w.live_pods().is_empty());
    let succeeded = w
        .objects()
        .list("", "Pod")
        .filter(|(_, p)| p["status"]["phase"] == "Succeeded")
        .count();
    assert_eq!(succeeded, 4);
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

#[test]
fn five_thousand_pods_onto_two_hundred_nodes_quickly() {
    let mut w = World::new(WorldConfig {
        default_delay: ProvisioningDelay {
            min_ms: 1_000,
            max_ms: 1_000,
        },
        ..WorldConfig::default()
    });
    let mut g = group("big", 200);
    g.cpu = "26".into();
    g.memory = "64Gi".into();
    w.add_node_group(&g).unwrap();
    w.advance(1_000);
    assert_eq!(w.node_names().len(), 200);
    let start = std::time::Instant::now();
    for i in 0..10 {
        w.add_replica_set(rs(&format!("app{i}"), 500, "1")).unwrap();
    }
    w.advance(1_000);
    let took = start.elapsed();
    assert_eq!(w.pending_count(), 0);
    assert_eq!(w.live_pods().len(), 5_000);
    // Debug builds are slow; the bound still catches quadratic behaviour.
    assert!(took.as_secs_f64() < 5.0, "took {took:?}");
    eprintln!("scheduled 5000 pods in {took:?}");
}

#[test]
fn applied_objects_and_priority_order() {
    let mut w = world(11);
    w.apply(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "static-1", "labels": {"kubernetes.io/hostname": "static-1"}},
        "status": {"capacity": {"cpu": "2", "memory": "4Gi", "pods": "10"},
                   "conditions": [{"type": "Ready", "status": "True"}]},
    }))
    .unwrap();
    // Pre-bound pod takes one cpu at once.
    w.add_pod(
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pinned", "namespace": "default"},
               "spec": {"nodeName": "static-1", "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}),
        None,
    )
    .unwrap();
    assert_eq!(w.pending_count(), 0);
    let mk = |name: &str, prio: i32| {
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
               "spec": {"priority": prio, "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}})
    };
    w.add_pod(mk("low", 0), None).unwrap();
    w.add_pod(mk("high", 1000), None).unwrap();
    w.advance(1_000);
    let pods = w.live_pods();
    let node_of = |n: &str| pods.iter().find(|p| p.1 == n).and_then(|p| p.2.clone());
    assert_eq!(node_of("high").as_deref(), Some("static-1"));
    assert_eq!(node_of("low"), None, "the higher priority pod goes first");
    assert!(matches!(
        w.add_pod(mk("low", 0), None),
        Err(WorldError::AlreadyExists(_))
    ));
}
