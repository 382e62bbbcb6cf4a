//! The facade driven by the real kube-rs client over loopback HTTP: lists, watches, writes with
//! conflicts, patches, evictions against budgets, the scale subresource of a MachineDeployment
//! turning into Machines and Nodes, relists after `410 Gone`, discovery, and injected faults.

use std::time::Duration;

use autoscaler_facade::{Facade, FacadeHandle, FacadeOptions, FaultAction, FaultRule, Verb};
use autoscaler_world::{NodeGroupSpec, World, WorldConfig};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Node, Pod};
use kube::api::{
    Api, DeleteParams, DynamicObject, EvictParams, ListParams, Patch, PatchParams, PostParams,
    WatchEvent, WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::{ApiResource, GroupVersionKind};
use kube::runtime::watcher;
use kube::{Client, Config};
use serde_json::json;

fn node(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "pool": "static"}},
        "spec": {},
        "status": {
            "capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "allocatable": {"cpu": "4", "memory": "16Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    })
}

fn pod(name: &str, node: Option<&str>) -> serde_json::Value {
    let mut p = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}]},
    });
    if let Some(n) = node {
        p["spec"]["nodeName"] = json!(n);
    }
    p
}

fn group() -> NodeGroupSpec {
    NodeGroupSpec {
        namespace: "capi".into(),
        name: "md-a".into(),
        replicas: 0,
        min_size: 0,
        max_size: 5,
        cpu: "4".into(),
        memory: "16Gi".into(),
        max_pods: 110,
        ..Default::default()
    }
}

/// A world with two static nodes and one empty node group, served at `speed`.
async fn start(speed: f64, options: FacadeOptions) -> (FacadeHandle, Client) {
    let mut w = World::new(WorldConfig::default());
    w.apply(node("n1")).unwrap();
    w.apply(node("n2")).unwrap();
    w.add_node_group(&group()).unwrap();
    let h = Facade::start(w, FacadeOptions { speed, ..options })
        .await
        .unwrap();
    let kc = Kubeconfig::read_from(h.kubeconfig_path()).unwrap();
    let mut cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    // kube-rs retries 429s (a budget-refused eviction) up to 15 times with growing backoff
    // by default; these tests want to see the answer.
    cfg.default_retry = false;
    assert_eq!(cfg.cluster_url.to_string(), format!("{}/", h.url()));
    (h, Client::try_from(cfg).unwrap())
}

fn api_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

fn md_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "MachineDeployment"),
        "machinedeployments",
    )
}

/// Polls `check` every 50 ms until it holds or `timeout` passes.
async fn eventually<F, Fut>(timeout: Duration, mut check: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = tokio::time::Instant::now() + timeout;
    while tokio::time::Instant::now() < end {
        if check().await {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

#[tokio::test]
async fn nodes_list_get_and_missing_ones_are_404() {
    let (h, client) = start(1.0, FacadeOptions::default()).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let list = nodes.list(&ListParams::default()).await.unwrap();
    let names: Vec<_> = list
        .items
        .iter()
        .filter_map(|n| n.metadata.name.clone())
        .collect();
    assert_eq!(names, ["n1", "n2"]);
    assert!(
        list.metadata
            .resource_version
            .is_some_and(|rv| rv.parse::<u64>().unwrap() > 0)
    );
    let selected = nodes
        .list(&ListParams::default().labels("kubernetes.io/hostname in (n2,n9),pool=static"))
        .await
        .unwrap();
    assert_eq!(selected.items.len(), 1);
    let by_field = nodes
        .list(&ListParams::default().fields("metadata.name=n1"))
        .await
        .unwrap();
    assert_eq!(by_field.items[0].metadata.name.as_deref(), Some("n1"));
    let n1 = nodes.get("n1").await.unwrap();
    assert!(n1.metadata.uid.is_some() && n1.metadata.resource_version.is_some());
    let err = nodes.get("nope").await.unwrap_err();
    assert_eq!(api_code(&err), Some(404));
    let err = nodes
        .delete("nope", &DeleteParams::default())
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(404));
    let info = client.apiserver_version().await.unwrap();
    assert_eq!(info.major, "1");
    h.shutdown().await;
}

#[tokio::test]
async fn created_pod_is_scheduled_and_watched() {
    let (h, client) = start(10.0, FacadeOptions::default()).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let mut events = watcher(pods.clone(), watcher::Config::default()).boxed();
    // Wait for the initial list to finish.
    loop {
        match tokio::time::timeout(Duration::from_secs(5), events.try_next()).await {
            Ok(Ok(Some(watcher::Event::InitDone))) => break,
            Ok(Ok(Some(_))) => {}
            other => panic!("no initial list: {other:?}"),
        }
    }
    let created = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod("p1", None)).unwrap(),
        )
        .await
        .unwrap();
    assert!(created.spec.as_ref().unwrap().node_name.is_none());
    let again = pods
        .create(
            &PostParams::default(),
            &serde_json::from_value(pod("p1", None)).unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(api_code(&again), Some(409));
    let mut seen_unbound = false;
    let bound = loop {
        match tokio::time::timeout(Duration::from_secs(5), events.try_next()).await {
            Ok(Ok(Some(watcher::Event::Apply(p)))) if p.metadata.name.as_deref() == Some("p1") => {
                match p.spec.as_ref().and_then(|s| s.node_name.clone()) {
                    None => seen_unbound = true,
                    Some(n) => break n,
                }
            }
            Ok(Ok(Some(_))) => {}
            other => panic!("pod never scheduled: {other:?}"),
        }
    };
    assert!(
        seen_unbound,
        "ADDED (unbound) comes before MODIFIED (bound)"
    );
    assert!(bound == "n1" || bound == "n2");
    let live = h.with_world(|w| w.live_pods());
    assert_eq!(
        live,
        [("default".to_string(), "p1".to_string(), Some(bound))]
    );
    // Deleting through the API goes through the world.
    pods.delete("p1", &DeleteParams::default()).await.unwrap();
    assert!(h.with_world(|w| w.live_pods()).is_empty());
    h.shutdown().await;
}

#[tokio::test]
async fn stale_update_conflicts_and_taint_patch_reaches_the_scheduler() {
    let (h, client) = start(10.0, FacadeOptions::default()).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let old = nodes.get("n1").await.unwrap();
    let fresh = nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"x": "1"}}})),
        )
        .await
        .unwrap();
    assert_ne!(
        fresh.metadata.resource_version,
        old.metadata.resource_version
    );
    let err = nodes
        .replace("n1", &PostParams::default(), &old)
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(409));
    let mut updated = fresh.clone();
    updated
        .metadata
        .labels
        .get_or_insert_default()
        .insert("y".into(), "2".into());
    let replaced = nodes
        .replace("n1", &PostParams::default(), &updated)
        .await
        .unwrap();
    assert_eq!(
        replaced
            .metadata
            .labels
            .unwrap()
            .get("y")
            .map(String::as_str),
        Some("2")
    );

    // Taint both nodes through merge and JSON patches: a new pod then stays pending.
    let taint =
        json!({"spec": {"taints": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}});
    nodes
        .patch("n1", &PatchParams::default(), &Patch::Merge(&taint))
        .await
        .unwrap();
    let json_patch = json!([
        {"op": "add", "path": "/spec/taints", "value": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]}
    ]);
    let req = http::Request::patch("/api/v1/nodes/n2")
        .header("Content-Type", "application/json-patch+json")
        .body(serde_json::to_vec(&json_patch).unwrap())
        .unwrap();
    let n2: Node = client.request(req).await.unwrap();
    assert_eq!(n2.spec.unwrap().taints.unwrap().len(), 1);
    let n1 = nodes.get("n1").await.unwrap();
    assert_eq!(n1.spec.unwrap().taints.unwrap()[0].key, "dedicated");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod("p", None)).unwrap(),
    )
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await; // 5 s of world time: 5 scheduler runs
    assert_eq!(
        h.with_world(|w| w.pending_count()),
        1,
        "tainted nodes take no pod"
    );
    // Removing the taint lets the scheduler place it.
    nodes
        .patch(
            "n1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"taints": null}})),
        )
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(3), || async {
            h.with_world(|w| w.pending_count()) == 0
        })
        .await
    );
    h.shutdown().await;
}

#[tokio::test]
async fn evictions_honour_budgets() {
    let (h, client) = start(1.0, FacadeOptions::default()).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for (p, n) in [("a", "n1"), ("b", "n2")] {
        pods.create(
            &PostParams::default(),
            &serde_json::from_value(pod(p, Some(n))).unwrap(),
        )
        .await
        .unwrap();
    }
    let pdbs: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("policy", "v1", "PodDisruptionBudget"),
            "poddisruptionbudgets",
        ),
    );
    let pdb: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
    }))
    .unwrap();
    pdbs.create(&PostParams::default(), &pdb).await.unwrap();
    // The Eviction body as the API defines it (kube-rs' EvictParams writes `delete_options`,
    // which an API server ignores): the grace of its deleteOptions applies.
    let body = json!({
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "a", "namespace": "default"},
        "deleteOptions": {"gracePeriodSeconds": 5},
    });
    let req = kube::core::Request::new("/api/v1/namespaces/default/pods")
        .create_subresource(
            "eviction",
            "a",
            &PostParams::default(),
            serde_json::to_vec(&body).unwrap(),
        )
        .unwrap();
    client.request_text(req).await.unwrap();
    // Terminating over the grace the eviction asked for: still there, bound, marked.
    let a = pods.get("a").await.unwrap();
    assert_eq!(a.metadata.deletion_grace_period_seconds, Some(5));
    assert!(a.metadata.deletion_timestamp.is_some());
    let err = pods.evict("b", &EvictParams::default()).await.unwrap_err();
    assert_eq!(api_code(&err), Some(429));
    if let kube::Error::Api(s) = &err {
        assert_eq!(s.reason, "TooManyRequests");
    }
    // Evicting a terminating pod again succeeds without a new effect.
    let status = pods.evict("a", &EvictParams::default()).await.unwrap();
    assert_eq!(status.code, 201);
    h.with_world(|w| w.advance(5_000));
    let err = pods.evict("a", &EvictParams::default()).await.unwrap_err();
    assert_eq!(api_code(&err), Some(404));
    let live: Vec<String> = h
        .with_world(|w| w.live_pods())
        .into_iter()
        .map(|p| p.1)
        .collect();
    assert_eq!(live, ["b"]);
    h.shutdown().await;
}

#[tokio::test]
async fn scale_subresource_makes_machines_then_nodes() {
    let (h, client) = start(50.0, FacadeOptions::default()).await;
    let mds: Api<DynamicObject> = Api::namespaced_with(client.clone(), "capi", &md_resource());
    let scale = mds.get_scale("md-a").await.unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(0));
    let scale = mds
        .patch_scale(
            "md-a",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(scale.spec.unwrap().replicas, Some(1));
    let md = mds.get("md-a").await.unwrap();
    assert_eq!(md.data["spec"]["replicas"], 1);
    let machines: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "capi",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "Machine"),
            "machines",
        ),
    );
    assert_eq!(
        machines
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        1
    );
    // 60-120 s of provisioning at speed 50: 1.2-2.4 s.
    let nodes: Api<Node> = Api::all(client.clone());
    assert!(
        eventually(Duration::from_secs(6), || async {
            nodes
                .list(&ListParams::default())
                .await
                .is_ok_and(|l| l.items.len() == 3)
        })
        .await,
        "the new Machine's Node never appeared"
    );
    // Deleting the Machine through the API drains and removes its Node too, as Cluster API's
    // controller does: soon, not within the request.
    let m = machines.list(&ListParams::default()).await.unwrap().items[0].clone();
    machines
        .delete(
            m.metadata.name.as_deref().unwrap(),
            &DeleteParams::default(),
        )
        .await
        .unwrap();
    assert!(
        eventually(Duration::from_secs(6), || async {
            nodes
                .list(&ListParams::default())
                .await
                .is_ok_and(|l| l.items.len() == 2)
        })
        .await,
        "the deleted Machine's Node stayed"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn too_old_watch_versions_are_gone_and_watchers_relist() {
    let opts = FacadeOptions {
        bookmark_interval: Duration::from_secs(30),
        ..FacadeOptions::default()
    };
    let (h, client) = start(1.0, opts).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "c1"}, "data": {"a": "1"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    h.compact_watch_log();
    h.with_world(|w| {
        w.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "other"}}))
    })
    .unwrap();
    h.compact_watch_log();
    // A raw watch from version 1 gets a 410 ERROR event.
    let mut raw = cms
        .watch(&WatchParams::default(), "1")
        .await
        .unwrap()
        .boxed();
    match tokio::time::timeout(Duration::from_secs(5), raw.try_next()).await {
        Ok(Ok(Some(WatchEvent::Error(s)))) => assert_eq!(s.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }
    // A watcher whose stream ends (timeoutSeconds=1) and whose version got compacted relists.
    let mut events = watcher(cms.clone(), watcher::Config::default().timeout(1)).boxed();
    let mut inits = 0;
    let mut gone = 0;
    let mut compacted = false;
    let end = tokio::time::Instant::now() + Duration::from_secs(10);
    while inits < 2 {
        let ev = tokio::time::timeout_at(end, events.try_next()).await;
        match ev {
            Ok(Ok(Some(watcher::Event::Init))) => inits += 1,
            Ok(Ok(Some(watcher::Event::InitDone))) if !compacted => {
                compacted = true;
                h.with_world(|w| {
                    w.apply(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "third"}}))
                })
                .unwrap();
                h.compact_watch_log();
            }
            Ok(Ok(Some(_))) => {}
            // The watcher reports the 410 once, then relists.
            Ok(Err(e)) if e.to_string().contains("Expired") => gone += 1,
            Ok(Err(e)) => panic!("watcher error: {e}"),
            other => panic!("no relist: {other:?}"),
        }
    }
    assert_eq!(gone, 1, "one 410 between the two lists");
    h.shutdown().await;
}

#[tokio::test]
async fn discovery_finds_cluster_api() {
    let (h, client) = start(1.0, FacadeOptions::default()).await;
    let d = kube::discovery::Discovery::new(client.clone())
        .filter(&["cluster.x-k8s.io", "apps", ""])
        .run()
        .await
        .unwrap();
    let capi = d
        .get("cluster.x-k8s.io")
        .expect("cluster.x-k8s.io discovered");
    let (ar, caps) = capi.recommended_kind("MachineDeployment").unwrap();
    assert_eq!(ar.plural, "machinedeployments");
    assert!(caps.subresources.iter().any(|(s, _)| s.plural == "scale"));
    assert!(
        d.get("apps")
            .is_some_and(|g| g.recommended_kind("Deployment").is_some())
    );
    let group = kube::discovery::group(&client, "cluster.x-k8s.io")
        .await
        .unwrap();
    assert_eq!(group.preferred_version_or_latest(), "v1beta1");
    let (pinned, _) = kube::discovery::pinned_kind(
        &client,
        &GroupVersionKind::gvk("cluster.x-k8s.io", "v1beta1", "MachineSet"),
    )
    .await
    .unwrap();
    assert_eq!(pinned.plural, "machinesets");
    let agg = kube::discovery::Discovery::new(client.clone())
        .filter(&["cluster.x-k8s.io"])
        .run_aggregated()
        .await
        .unwrap();
    assert!(
        agg.get("cluster.x-k8s.io")
            .is_some_and(|g| g.recommended_kind("Machine").is_some())
    );
    h.shutdown().await;
}

#[tokio::test]
async fn withheld_groups_are_404_until_installed_and_the_version_is_configurable() {
    let options = FacadeOptions {
        withheld: vec!["cluster.x-k8s.io/v1beta1".into(), "policy/v1".into()],
        version: autoscaler_facade::ServerVersion {
            major: 1,
            minor: 20,
        },
        ..FacadeOptions::default()
    };
    let (h, client) = start(1.0, options).await;
    let info = client.apiserver_version().await.unwrap();
    assert_eq!((info.major.as_str(), info.minor.as_str()), ("1", "20"));
    // Not in discovery, and 404 on discovery, list and watch, as a server without them.
    assert!(matches!(
        kube::discovery::group(&client, "cluster.x-k8s.io").await,
        Err(kube::Error::Discovery(_))
    ));
    let e = client
        .list_api_group_resources("policy/v1")
        .await
        .unwrap_err();
    assert_eq!(api_code(&e), Some(404));
    let mds: Api<DynamicObject> = Api::all_with(client.clone(), &md_resource());
    let e = mds.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_code(&e), Some(404));
    let e = mds.watch(&WatchParams::default(), "0").await.err();
    assert_eq!(e.as_ref().and_then(api_code), Some(404), "{e:?}");

    // Installed: discovered, listed and watched.
    h.install("cluster.x-k8s.io/v1beta1");
    let group = kube::discovery::group(&client, "cluster.x-k8s.io")
        .await
        .unwrap();
    assert!(group.recommended_kind("MachineDeployment").is_some());
    let list = mds.list(&ListParams::default()).await.unwrap();
    assert_eq!(list.items.len(), 1);
    let rv = list.metadata.resource_version.clone().unwrap();
    let mut stream = mds
        .watch(&WatchParams::default().timeout(60), &rv)
        .await
        .unwrap()
        .boxed();
    // Removed again: the open watch ends and requests are 404 once more.
    h.withhold("cluster.x-k8s.io/v1beta1");
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(ev) = stream.next().await {
            if ev.is_err() {
                break;
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the watch of a removed group ends");
    let e = mds.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_code(&e), Some(404));
    h.shutdown().await;
}

#[tokio::test]
async fn injected_errors_last_their_window() {
    let (h, client) = start(1.0, FacadeOptions::default()).await;
    let nodes: Api<Node> = Api::all(client.clone());
    let now = h.elapsed();
    h.add_fault(
        FaultRule::new(FaultAction::InternalError)
            .verb(Verb::List)
            .resource("nodes")
            .during(now, now + Duration::from_millis(800)),
    );
    let conflict = h.add_fault(
        FaultRule::new(FaultAction::Conflict)
            .verb(Verb::Patch)
            .at_most(1),
    );
    h.add_fault(
        FaultRule::new(FaultAction::Delay(Duration::from_millis(300)))
            .verb(Verb::Get)
            .name("n2"),
    );
    let err = nodes.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_code(&err), Some(500));
    assert!(nodes.get("n1").await.is_ok(), "other verbs unaffected");
    let started = std::time::Instant::now();
    nodes.get("n2").await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300));
    let patch = Patch::Merge(json!({"metadata": {"labels": {"z": "1"}}}));
    let err = nodes
        .patch("n1", &PatchParams::default(), &patch)
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(409));
    nodes
        .patch("n1", &PatchParams::default(), &patch)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert_eq!(
        nodes
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .len(),
        2
    );
    let counts = h.fault_counts();
    assert_eq!(
        (counts.internal_errors, counts.conflicts, counts.delays),
        (1, 1, 1)
    );
    assert_eq!(counts.per_rule[conflict], 1);
    h.shutdown().await;
}

#[tokio::test]
async fn cut_watch_streams_are_counted_and_resumed() {
    let opts = FacadeOptions {
        faults: vec![
            FaultRule::new(FaultAction::DropWatchAfterEvents(1))
                .verb(Verb::Watch)
                .resource("configmaps")
                .at_most(2),
        ],
        ..FacadeOptions::default()
    };
    let (h, client) = start(1.0, opts).await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut events = watcher(cms.clone(), watcher::Config::default()).boxed();
    let mut seen = std::collections::BTreeSet::new();
    let mut created = false;
    let end = tokio::time::Instant::now() + Duration::from_secs(15);
    while seen.len() < 3 {
        match tokio::time::timeout_at(end, events.try_next()).await {
            Ok(Ok(Some(watcher::Event::InitDone))) if !created => {
                created = true;
                for n in ["a", "b", "c"] {
                    let cm: ConfigMap =
                        serde_json::from_value(json!({"metadata": {"name": n}})).unwrap();
                    cms.create(&PostParams::default(), &cm).await.unwrap();
                }
            }
            Ok(Ok(Some(watcher::Event::Apply(cm)))) => {
                seen.insert(cm.metadata.name.unwrap_or_default());
            }
            Ok(Ok(Some(_))) => {}
            Ok(Err(e)) => panic!("watcher error: {e}"),
            other => panic!("missed changes: {other:?} (seen {seen:?})"),
        }
    }
    assert_eq!(h.fault_counts().dropped_watches, 2);
    h.shutdown().await;
}

#[tokio::test]
async fn leases_events_and_selective_watches() {
    use k8s_openapi::api::coordination::v1::Lease;
    let opts = FacadeOptions {
        faults: vec![
            FaultRule::new(FaultAction::TooManyRequests)
                .verb(Verb::Create)
                .resource("pods/eviction")
                .name("b"),
        ],
        ..FacadeOptions::default()
    };
    let (h, client) = start(1.0, opts).await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-system");
    // Server-side apply creates, then updates.
    let pp = PatchParams::apply("test").force();
    let body = json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "ca", "namespace": "kube-system"}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}});
    leases.patch("ca", &pp, &Patch::Apply(&body)).await.unwrap();
    let mut body2 = body.clone();
    body2["spec"]["holderIdentity"] = json!("b");
    let l = leases
        .patch("ca", &pp, &Patch::Apply(&body2))
        .await
        .unwrap();
    assert_eq!(
        l.spec.as_ref().unwrap().holder_identity.as_deref(),
        Some("b")
    );
    assert_eq!(l.spec.as_ref().unwrap().lease_duration_seconds, Some(15));
    // Replace with the current version works; with the previous one it conflicts.
    let mut next = l.clone();
    next.spec.as_mut().unwrap().holder_identity = Some("c".into());
    leases
        .replace("ca", &PostParams::default(), &next)
        .await
        .unwrap();
    let err = leases
        .replace("ca", &PostParams::default(), &next)
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(409));

    // events.k8s.io and core events are separate collections.
    let events: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        "default",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("events.k8s.io", "v1", "Event"),
            "events",
        ),
    );
    let ev: DynamicObject = serde_json::from_value(json!({"apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"generateName": "ca-"}, "reason": "ScaledUp", "note": "x", "action": "ScaleUp",
        "eventTime": "2025-01-01T00:00:00.000000Z", "reportingController": "ca", "reportingInstance": "ca-1"}))
    .unwrap();
    let made = events.create(&PostParams::default(), &ev).await.unwrap();
    assert!(made.metadata.name.unwrap().starts_with("ca-"));
    let core: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(client.clone(), "default");
    assert!(
        core.list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );

    // A watch with a label selector sees only matching pods, deletions included.
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let rv = pods
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = pods
        .watch(&WatchParams::default().labels("app=web"), &rv)
        .await
        .unwrap()
        .boxed();
    let mut other = pod("other", Some("n1"));
    other["metadata"]["labels"] = json!({"app": "db"});
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(other).unwrap(),
    )
    .await
    .unwrap();
    pods.create(
        &PostParams::default(),
        &serde_json::from_value(pod("b", Some("n1"))).unwrap(),
    )
    .await
    .unwrap();
    // An injected 429 on this pod's eviction, whatever the budgets say.
    let err = pods.evict("b", &EvictParams::default()).await.unwrap_err();
    assert_eq!(api_code(&err), Some(429));
    pods.delete("b", &DeleteParams::default()).await.unwrap();
    let mut kinds = Vec::new();
    while kinds
        .last()
        .is_none_or(|k: &(&str, String)| k.0 != "DELETED")
    {
        match tokio::time::timeout(Duration::from_secs(5), stream.try_next()).await {
            Ok(Ok(Some(WatchEvent::Added(p)))) => kinds.push(("ADDED", p.metadata.name.unwrap())),
            Ok(Ok(Some(WatchEvent::Modified(p)))) => {
                kinds.push(("MODIFIED", p.metadata.name.unwrap()))
            }
            Ok(Ok(Some(WatchEvent::Deleted(p)))) => {
                kinds.push(("DELETED", p.metadata.name.unwrap()))
            }
            Ok(Ok(Some(_))) => {}
            other => panic!("watch ended: {other:?}"),
        }
    }
    assert_eq!(kinds.first(), Some(&("ADDED", "b".to_string())));
    assert!(
        kinds.iter().all(|k| k.1 == "b"),
        "only app=web pods: {kinds:?}"
    );
    assert_eq!(h.fault_counts().too_many_requests, 1);
    h.shutdown().await;
}

/// OpenShift's `ClusterAutoscaler` is discovered as a cluster-scoped kind, and a watch sees its
/// creation, an update and its deletion, each with a newer `resourceVersion`.
#[tokio::test]
async fn cluster_autoscaler_is_cluster_scoped_and_watched() {
    let (h, client) = start(1.0, FacadeOptions::default()).await;
    let group = kube::discovery::group(&client, "autoscaling.openshift.io")
        .await
        .unwrap();
    let (ar, caps) = group.recommended_kind("ClusterAutoscaler").unwrap();
    assert_eq!(ar.plural, "clusterautoscalers");
    assert_eq!(caps.scope, kube::discovery::Scope::Cluster);
    let cas: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let mut events = cas
        .watch(&WatchParams::default().fields("metadata.name=default"), "0")
        .await
        .unwrap()
        .boxed();
    let ca: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "autoscaling.openshift.io/v1", "kind": "ClusterAutoscaler",
        "metadata": {"name": "default"},
        "spec": {"resourceLimits": {"maxNodesTotal": 3}},
    }))
    .unwrap();
    let created = cas.create(&PostParams::default(), &ca).await.unwrap();
    assert_eq!(created.metadata.namespace, None);
    let mut changed = created.clone();
    changed.data["spec"]["resourceLimits"]["maxNodesTotal"] = json!(5);
    let updated = cas
        .replace("default", &PostParams::default(), &changed)
        .await
        .unwrap();
    cas.delete("default", &DeleteParams::default())
        .await
        .unwrap();
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let next = tokio::time::timeout(Duration::from_secs(5), events.try_next()).await;
        let (what, o) = match next {
            Ok(Ok(Some(WatchEvent::Added(o)))) => ("added", o),
            Ok(Ok(Some(WatchEvent::Modified(o)))) => ("modified", o),
            Ok(Ok(Some(WatchEvent::Deleted(o)))) => ("deleted", o),
            Ok(Ok(Some(_))) => continue,
            other => panic!("watch ended early: {other:?}"),
        };
        let rv: u64 = o.metadata.resource_version.unwrap().parse().unwrap();
        seen.push((
            what,
            o.data["spec"]["resourceLimits"]["maxNodesTotal"].clone(),
            rv,
        ));
    }
    assert_eq!(
        seen.iter()
            .map(|(w, n, _)| (*w, n.clone()))
            .collect::<Vec<_>>(),
        [
            ("added", json!(3)),
            ("modified", json!(5)),
            ("deleted", json!(5))
        ]
    );
    assert!(seen.windows(2).all(|p| p[0].2 < p[1].2), "{seen:?}");
    assert_eq!(
        updated
            .metadata
            .resource_version
            .map(|v| v.parse::<u64>().unwrap()),
        Some(seen[1].2)
    );
    assert!(cas.get_opt("default").await.unwrap().is_none());
    h.shutdown().await;
}

/// Infrastructure machine templates are served as their provider's CRD serves them:
/// discovered (namespaced, at `v1beta1`), listed with their status, and watched through a
/// status change; a kind of the group no provider installed answers `404`.
#[tokio::test]
async fn infrastructure_templates_are_discovered_listed_and_watched() {
    let (h, client) = start(1.0, FacadeOptions::default()).await;
    let template = |gpus: &str| {
        json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1",
            "kind": "DockerMachineTemplate",
            "metadata": {"name": "gpu", "namespace": "capi"},
            "spec": {"template": {"spec": {}}},
            "status": {"capacity": {"cpu": "8", "nvidia.com/gpu": gpus}}})
    };
    h.with_world(|w| w.apply(template("1")).map(drop)).unwrap();
    let group = kube::discovery::group(&client, "infrastructure.cluster.x-k8s.io")
        .await
        .unwrap();
    let (ar, caps) = group.recommended_kind("DockerMachineTemplate").unwrap();
    assert_eq!(
        (ar.api_version.as_str(), ar.plural.as_str()),
        (
            "infrastructure.cluster.x-k8s.io/v1beta1",
            "dockermachinetemplates"
        )
    );
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    assert!(group.recommended_kind("AWSMachineTemplate").is_none());
    let templates: Api<DynamicObject> = Api::namespaced_with(client.clone(), "capi", &ar);
    let listed = templates.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items.len(), 1);
    assert_eq!(
        listed.items[0].data["status"]["capacity"]["nvidia.com/gpu"],
        "1"
    );
    let rv = listed.metadata.resource_version.unwrap();
    let mut events = templates
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();
    h.with_world(|w| w.replace_object(template("2")).map(drop))
        .unwrap();
    let seen = loop {
        match tokio::time::timeout(Duration::from_secs(5), events.try_next()).await {
            Ok(Ok(Some(WatchEvent::Modified(o)))) => break o,
            Ok(Ok(Some(_))) => continue,
            other => panic!("watch ended early: {other:?}"),
        }
    };
    assert_eq!(seen.data["status"]["capacity"]["nvidia.com/gpu"], "2");
    // A kind of the group that is not installed, as on the real server.
    let aws = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(
            "infrastructure.cluster.x-k8s.io",
            "v1beta1",
            "AWSMachineTemplate",
        ),
        "awsmachinetemplates",
    );
    let aws: Api<DynamicObject> = Api::namespaced_with(client.clone(), "capi", &aws);
    let err = aws.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_code(&err), Some(404), "{err}");
    h.shutdown().await;
}

#[tokio::test]
async fn storage_kinds_are_listed_got_and_watched_and_claims_get_volumes() {
    use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
    use k8s_openapi::api::storage::v1::{CSINode, CSIStorageCapacity, StorageClass};
    let mut w = World::new(WorldConfig::default());
    let mut n1 = node("n1");
    n1["metadata"]["labels"]["topology.kubernetes.io/zone"] = json!("zone-a");
    w.apply(n1).unwrap();
    w.apply(
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "fast"}, "provisioner": "disk.csi.example.com",
        "volumeBindingMode": "Immediate", "reclaimPolicy": "Delete"}),
    )
    .unwrap();
    w.apply(json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
        "metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "disk.csi.example.com",
            "nodeID": "n1", "allocatable": {"count": 8}}]}}))
        .unwrap();
    let h = Facade::start(w, FacadeOptions::default()).await.unwrap();
    let kc = Kubeconfig::read_from(h.kubeconfig_path()).unwrap();
    let cfg = Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default())
        .await
        .unwrap();
    let client = Client::try_from(cfg).unwrap();

    let classes: Api<StorageClass> = Api::all(client.clone());
    let fast = classes.get("fast").await.unwrap();
    assert_eq!(fast.volume_binding_mode.as_deref(), Some("Immediate"));
    let csi: Api<CSINode> = Api::all(client.clone());
    let n1 = csi.get("n1").await.unwrap();
    let count = n1.spec.drivers[0]
        .allocatable
        .as_ref()
        .and_then(|a| a.count);
    assert_eq!(count, Some(8));
    let capacities: Api<CSIStorageCapacity> = Api::all(client.clone());
    assert!(
        capacities
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
    );
    let volumes: Api<PersistentVolume> = Api::all(client.clone());
    let err = volumes.get("nope").await.unwrap_err();
    assert_eq!(api_code(&err), Some(404));
    let rv = volumes
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = volumes
        .watch(&WatchParams::default(), &rv)
        .await
        .unwrap()
        .boxed();

    // A claim created through the API is provisioned in the node's zone and bound.
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data", "namespace": "default"},
        "spec": {"storageClassName": "fast", "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}}}}))
    .unwrap();
    claims.create(&PostParams::default(), &claim).await.unwrap();
    let added = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
        .await
        .expect("a volume event")
        .unwrap()
        .expect("an event");
    let WatchEvent::Added(pv) = added else {
        panic!("expected Added, got {added:?}");
    };
    let pv_name = pv.metadata.name.clone().unwrap();
    let spec = pv.spec.unwrap();
    assert_eq!(spec.claim_ref.unwrap().name.as_deref(), Some("data"));
    let zone = spec
        .node_affinity
        .unwrap()
        .required
        .unwrap()
        .node_selector_terms[0]
        .match_expressions
        .clone()
        .unwrap()[0]
        .values
        .clone();
    assert_eq!(zone, Some(vec!["zone-a".to_string()]));
    let bound = claims.get("data").await.unwrap();
    assert_eq!(
        bound.spec.unwrap().volume_name.as_deref(),
        Some(pv_name.as_str())
    );
    // Deleting the claim deletes its volume (reclaimPolicy Delete).
    claims
        .delete("data", &DeleteParams::default())
        .await
        .unwrap();
    let gone = eventually(Duration::from_secs(10), || {
        let volumes = volumes.clone();
        let name = pv_name.clone();
        async move { volumes.get(&name).await.is_err() }
    })
    .await;
    assert!(gone, "the volume goes with its claim");
    h.shutdown().await;
}

/// The ProvisioningRequest CRD: `404` until installed; then served as a CRD with
/// `subresources.status` serves it: a write to the object keeps the stored status, a write to
/// `/status` changes only the status, and a stale `resourceVersion` is a `409`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_provisioning_request_crd_is_served_once_installed_with_its_status_subresource() {
    let (h, client) = start(1.0, FacadeOptions::default()).await;
    let gvk = GroupVersionKind::gvk("autoscaling.x-k8s.io", "v1", "ProvisioningRequest");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "provisioningrequests");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), "batch", &ar);
    let err = api.list(&ListParams::default()).await.unwrap_err();
    assert_eq!(api_code(&err), Some(404), "{err}");

    for gv in autoscaler_facade::CAPACITY_CRDS {
        h.install(gv);
    }
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": "job", "namespace": "batch"},
        "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                 "podSets": [{"podTemplateRef": {"name": "w"}, "count": 1}]},
        "status": {"conditions": [{"type": "Accepted", "status": "True"}]}
    }))
    .unwrap();
    let created = api.create(&PostParams::default(), &obj).await.unwrap();
    assert!(
        created.data.get("status").is_none(),
        "a create ignores status: {:?}",
        created.data
    );

    // /status: only the status changes, even when the body changes the spec too.
    let mut with_status = created.clone();
    with_status.data["status"] = json!({"conditions": [{"type": "Provisioned", "status": "True"}]});
    with_status.data["spec"]["podSets"][0]["count"] = json!(5);
    let written = api
        .replace_status("job", &PostParams::default(), &with_status)
        .await
        .unwrap();
    assert_eq!(
        written.data["status"]["conditions"][0]["type"],
        "Provisioned"
    );
    assert_eq!(written.data["spec"]["podSets"][0]["count"], 1);

    // The object: the status stays as stored.
    let mut spec_change = written.clone();
    spec_change.data["status"] = json!({});
    spec_change.data["spec"]["podSets"][0]["count"] = json!(2);
    let replaced = api
        .replace("job", &PostParams::default(), &spec_change)
        .await
        .unwrap();
    assert_eq!(replaced.data["spec"]["podSets"][0]["count"], 2);
    assert_eq!(
        replaced.data["status"]["conditions"][0]["type"],
        "Provisioned"
    );

    // The version the status write read is stale now.
    let err = api
        .replace_status("job", &PostParams::default(), &with_status)
        .await
        .unwrap_err();
    assert_eq!(api_code(&err), Some(409), "{err}");
}
