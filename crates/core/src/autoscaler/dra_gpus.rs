//! Decisions on groups whose GPUs are DRA devices: `--gpu-total` (scale-up's max, scale-down's
//! and consolidation's min), the expanders and the similarity of groups count them as they count
//! extended-resource GPUs (ours beyond upstream, whose DRA processor gives no resource target).

use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{
    Autoscaler, AutoscalerOptions, ClusterView, LoopInput, LoopOutcome, ScaleUpConfig,
    ScaleUpDecision, decide_scale_up,
};
use crate::Action;
use crate::scale_down::Unremovable;
use crate::scale_down::consolidation::{ConsolidationMode, ConsolidationOptions};
use crate::scale_up::estimator::Unlimited;
use crate::scale_up::expander::ExpanderChain;
use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
use autoscaler_model::{
    Instance, InstanceState, LimitReached, Node, NodeGroup, ObjectStore, Pod, PodClaim,
    PodClaimSource, ResourceName, StaticProvider, Storage, Sym, parse_gpu_limit,
};

/// A GPU class of driver `gpu.example.com`, a claim template asking `count` GPUs, and for each
/// `(node, gpus)` a slice of that many `type: gpu` devices, all allocated to a claim (the node is
/// busy).
fn storage(count: u32, nodes: &[(&str, usize)]) -> Arc<Storage> {
    storage_with(count, nodes, true)
}

/// [`storage`], the devices allocated to a claim when `busy`, else free.
fn storage_with(count: u32, nodes: &[(&str, usize)], busy: bool) -> Arc<Storage> {
    let mut yaml = format!(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {{name: gpu}}\n\
         spec: {{selectors: [{{cel: {{expression: \"device.driver == 'gpu.example.com'\"}}}}]}}\n---\n\
         apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n\
         metadata: {{name: gpus, namespace: default}}\n\
         spec: {{spec: {{devices: {{requests: [{{name: gpu, exactly: {{deviceClassName: gpu, count: {count}}}}}]}}}}}}\n"
    );
    for (node, gpus) in nodes {
        let devices: Vec<String> = (0..*gpus)
            .map(|i| format!("{{name: gpu-{i}, attributes: {{type: {{string: gpu}}}}}}"))
            .collect();
        let results: Vec<String> = (0..*gpus)
            .map(|i| {
                format!("{{request: gpu, driver: gpu.example.com, pool: {node}, device: gpu-{i}}}")
            })
            .collect();
        yaml.push_str(&format!(
            "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: {node}}}\n\
             spec: {{driver: gpu.example.com, nodeName: {node}, \
             pool: {{name: {node}, generation: 1, resourceSliceCount: 1}}, devices: [{}]}}\n",
            devices.join(", "),
        ));
        if !busy {
            continue;
        }
        yaml.push_str(&format!(
            "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n\
             metadata: {{name: busy-{node}, namespace: default}}\n\
             spec: {{devices: {{requests: [{{name: gpu, exactly: {{deviceClassName: gpu, allocationMode: All}}}}]}}}}\n\
             status: {{allocation: {{devices: {{results: [{}]}}, nodeSelector: {{nodeSelectorTerms: \
             [{{matchFields: [{{key: metadata.name, operator: In, values: [{node}]}}]}}]}}}}}}\n",
            results.join(", "),
        ));
    }
    let mut store = ObjectStore::new();
    store.load_yaml(&yaml).unwrap();
    let (storage, errors) = Storage::from_store(&store);
    assert!(errors.is_empty(), "{errors:?}");
    Arc::new(storage)
}

fn node(name: &str) -> Arc<Node> {
    let mut n = NodeBuilder::new(name, 8000, 32 * GI).build();
    n.provider_id = Some(Arc::from(format!("test:///{name}")));
    Arc::new(n)
}

/// A group `id` of size 1 holding `node`, growing up to 10.
fn group(id: &str, node: &str) -> NodeGroup {
    NodeGroup::new(id, 0, 10, 1).with_instances(vec![Instance {
        id: Arc::from(format!("test:///{node}")),
        state: InstanceState::Running,
        error: None,
    }])
}

/// Pending pods asking GPUs through the claim template.
fn gpu_pods(n: usize) -> Vec<Arc<Pod>> {
    (0..n)
        .map(|i| {
            PodBuilder::new(&format!("p{i}"), 500, GI)
                .owner("Job", "train")
                .unschedulable()
                .with(|p| {
                    p.resource_claims.push(PodClaim {
                        name: Arc::from("gpu"),
                        source: PodClaimSource::Template {
                            template: Arc::from("gpus"),
                            generated: None,
                        },
                    })
                })
                .arc()
        })
        .collect()
}

fn decide(
    nodes: &[Arc<Node>],
    pods: &[Arc<Pod>],
    provider: &StaticProvider,
    storage: &Arc<Storage>,
    config: &ScaleUpConfig,
) -> ScaleUpDecision {
    let view = ClusterView {
        nodes,
        pods,
        daemonsets: &[],
        namespaces: &[],
        provider,
        pdbs: &[],
        storage,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    decide_scale_up(&view, config, 0, &|_, _| None, &mut rng, &mut Unlimited)
}

fn increases(d: &ScaleUpDecision) -> Vec<(String, usize)> {
    d.result
        .increases
        .iter()
        .map(|i| (i.group.as_str().to_string(), i.delta))
        .collect()
}

/// `--gpu-total=gpu.example.com:0:12` with one busy 4-GPU node: two more 4-GPU nodes fit under
/// the max, so three pods asking 4 GPUs each get two nodes, not three.
#[test]
fn gpu_total_caps_a_scale_up_of_dra_gpu_nodes() {
    let storage = storage(4, &[("g1", 4)]);
    let nodes = vec![node("g1")];
    let pods = gpu_pods(3);
    let provider = StaticProvider::new(vec![group("gpu", "g1")]);
    let mut config = ScaleUpConfig::default();
    let free = decide(&nodes, &pods, &provider, &storage, &config);
    assert_eq!(increases(&free), vec![("gpu".to_string(), 3)], "{free:?}");
    config.limits.gpus = vec![parse_gpu_limit("gpu.example.com:0:12").unwrap()];
    let capped = decide(&nodes, &pods, &provider, &storage, &config);
    assert_eq!(
        increases(&capped),
        vec![("gpu".to_string(), 2)],
        "{capped:?}"
    );
    assert!(
        capped
            .result
            .notes
            .iter()
            .any(|n| n.contains("gpu.example.com"))
            || capped
                .result
                .no_scale_up
                .iter()
                .flat_map(|n| n.reasons.iter())
                .any(|(_, why)| why.contains("exceeded quota: cluster-wide gpu.example.com")),
        "{capped:?}"
    );
}

/// Least-waste picks the 8-GPU group for four pods asking 4 GPUs each (2 nodes rather than 4),
/// and with balancing on, the 4-GPU group is not similar to it: it gets no share.
#[test]
fn balancing_refuses_a_4_gpu_group_as_similar_to_an_8_gpu_one() {
    let storage = storage(4, &[("big", 8), ("small", 4)]);
    let nodes = vec![node("big"), node("small")];
    let pods = gpu_pods(4);
    let provider = StaticProvider::new(vec![group("gpu-8", "big"), group("gpu-4", "small")]);
    let mut config = ScaleUpConfig::default();
    config.scale_up.set_balance_similar_node_groups(true);
    let d = decide(&nodes, &pods, &provider, &storage, &config);
    assert_eq!(increases(&d), vec![("gpu-8".to_string(), 2)], "{d:?}");
}

/// The price expander keeps GPU nodes for the pods nothing else takes: a CPU pod goes to the
/// CPU group even when the DRA GPU group's node is cheaper.
#[test]
fn price_keeps_dra_gpu_nodes_for_gpu_pods() {
    let storage = storage(4, &[("g1", 4)]);
    let nodes = vec![node("g1"), node("c1")];
    let busy = PodBuilder::new("busy", 8000, GI).node_name("c1").arc();
    let pods = vec![
        busy,
        PodBuilder::new("web", 1000, GI)
            .owner("ReplicaSet", "web")
            .unschedulable()
            .arc(),
    ];
    // The GPU node also has no free CPU for the web pod.
    let gpu_busy = PodBuilder::new("gpu-busy", 8000, GI).node_name("g1").arc();
    let pods = [pods, vec![gpu_busy]].concat();
    let provider = StaticProvider::new(vec![
        group("gpu", "g1")
            .with_node_price_per_hour(Some(0.5))
            .unwrap(),
        group("cpu", "c1")
            .with_node_price_per_hour(Some(1.0))
            .unwrap(),
    ]);
    let config = ScaleUpConfig {
        expander: ExpanderChain::parse("price").unwrap(),
        ..ScaleUpConfig::default()
    };
    let d = decide(&nodes, &pods, &provider, &storage, &config);
    assert_eq!(increases(&d), vec![("cpu".to_string(), 1)], "{d:?}");
}

/// The nodes of a group `gpu` of size `names.len()` (min 0), one free 4-GPU DRA slice each; each
/// node holds `pods` pods of 275m (of its 1000m CPU).
fn idle_gpu_cluster(names: &[&str], pods: usize) -> (Vec<Arc<Node>>, Vec<Arc<Pod>>, NodeGroup) {
    let nodes: Vec<Arc<Node>> = (names.iter())
        .map(|n| {
            NodeBuilder::new(n, 1000, 16 * GI)
                .with_provider_id(&format!("test:///{n}"))
                .arc()
        })
        .collect();
    let pods = (names.iter())
        .flat_map(|n| {
            (0..pods).map(move |i| {
                PodBuilder::new(&format!("{n}-p{i}"), 275, GI)
                    .owner("ReplicaSet", "rs")
                    .node_name(n)
                    .arc()
            })
        })
        .collect();
    let group = NodeGroup::new("gpu", 0, 10, names.len()).with_instances(
        (names.iter())
            .map(|n| Instance {
                id: Arc::from(format!("test:///{n}")),
                state: InstanceState::Running,
                error: None,
            })
            .collect(),
    );
    (nodes, pods, group)
}

fn run_loop(
    a: &mut Autoscaler,
    nodes: &[Arc<Node>],
    pods: &[Arc<Pod>],
    provider: &StaticProvider,
    storage: &Arc<Storage>,
    now_ms: i64,
) -> LoopOutcome {
    let view = ClusterView {
        nodes,
        pods,
        daemonsets: &[],
        namespaces: &[],
        provider,
        pdbs: &[],
        storage,
    };
    a.run_once(LoopInput::new(&view, now_ms))
}

fn with_gpu_min(mut options: AutoscalerOptions, limit: Option<&str>) -> Autoscaler {
    options.scale_up.limits.gpus = limit
        .map(|l| parse_gpu_limit(l).unwrap())
        .into_iter()
        .collect();
    Autoscaler::new(options)
}

/// `--gpu-total=gpu.example.com:4:16` with two idle 4-GPU DRA nodes: scale-down deletes one
/// and keeps the other for the minimum, as it would keep an extended-resource GPU node.
#[test]
fn scale_down_keeps_the_dra_gpus_of_the_gpu_minimum() {
    let storage = storage_with(1, &[("g1", 4), ("g2", 4)], false);
    let (nodes, pods, group) = idle_gpu_cluster(&["g1", "g2"], 0);
    let provider = StaticProvider::new(vec![group]);
    let deletions = |limit: Option<&str>| {
        let mut a = with_gpu_min(AutoscalerOptions::default(), limit);
        run_loop(&mut a, &nodes, &pods, &provider, &storage, 0);
        run_loop(&mut a, &nodes, &pods, &provider, &storage, 11 * 60_000).scale_down
    };
    assert_eq!(deletions(None).deletions.len(), 2);
    let kept = deletions(Some("gpu.example.com:4:16"));
    assert_eq!(kept.deletions.len(), 1, "{kept:?}");
    let gpu = LimitReached::Gpu(ResourceName::parse("gpu.example.com"));
    assert_eq!(
        kept.unremovable,
        vec![(Sym::new("g2"), Unremovable::MinimalResourceLimit(gpu))],
        "{kept:?}"
    );
}

/// Consolidation (ours) counts DRA GPUs against the minimum too: three 4-GPU nodes at 55% CPU,
/// one of which it would drain, are all kept under `--gpu-total=gpu.example.com:12:16`.
#[test]
fn consolidation_keeps_the_dra_gpus_of_the_gpu_minimum() {
    let storage = storage_with(1, &[("g1", 4), ("g2", 4), ("g3", 4)], false);
    let (nodes, pods, group) = idle_gpu_cluster(&["g1", "g2", "g3"], 2);
    let provider = StaticProvider::new(vec![group]);
    let drained = |limit: Option<&str>| {
        let options = AutoscalerOptions {
            consolidation: ConsolidationOptions {
                mode: ConsolidationMode::Delete,
                consolidate_after: Duration::ZERO,
                ..ConsolidationOptions::default()
            },
            ..AutoscalerOptions::default()
        };
        let mut a = with_gpu_min(options, limit);
        let out = run_loop(&mut a, &nodes, &pods, &provider, &storage, 1_000_000_000);
        (out.actions.iter())
            .filter(|a| matches!(a, Action::DrainAndDelete { .. }))
            .count()
    };
    assert_eq!(drained(None), 1);
    assert_eq!(drained(Some("gpu.example.com:12:16")), 0);
}

/// `--expander=unit-price` prices DRA GPUs per GPU as it prices extended GPUs: one pod asking
/// one GPU and 8 cores goes to the 8-GPU node at 24/h (3 per GPU), not to the 2-GPU node at 7/h
/// (3.5 per GPU) whose cores are cheaper.
#[test]
fn unit_price_prices_dra_gpus_per_gpu() {
    let storage = storage(1, &[("big", 8), ("small", 2)]);
    let shaped = |name: &str, cpu: i64, mem: i64| {
        NodeBuilder::new(name, cpu, mem * GI)
            .with_provider_id(&format!("test:///{name}"))
            .arc()
    };
    let nodes = vec![shaped("big", 96_000, 384), shaped("small", 104_000, 512)];
    let pods: Vec<Arc<Pod>> = gpu_pods(1)
        .into_iter()
        .map(|p| {
            let mut p = (*p).clone();
            p.requests.cpu = 8000;
            Arc::new(p)
        })
        .collect();
    let provider = StaticProvider::new(vec![
        group("gpu-8", "big")
            .with_node_price_per_hour(Some(24.0))
            .unwrap(),
        group("gpu-2", "small")
            .with_node_price_per_hour(Some(7.0))
            .unwrap(),
    ]);
    let config = ScaleUpConfig {
        expander: ExpanderChain::parse("unit-price").unwrap(),
        ..ScaleUpConfig::default()
    };
    let d = decide(&nodes, &pods, &provider, &storage, &config);
    assert_eq!(increases(&d), vec![("gpu-8".to_string(), 1)], "{d:?}");
}

/// A node of the group that joined a minute ago and whose driver has not published its slices
/// yet counts toward `--gpu-total` with the GPUs its group's template promises (as upstream
/// counts a starting GPU node by its template): with one busy 4-GPU node, one starting and a
/// max of 12, three pods asking 4 GPUs each get one more node (the starting one takes a pod).
#[test]
fn a_starting_dra_node_counts_its_promised_gpus_toward_the_max() {
    let storage = storage(4, &[("g1", 4)]);
    let now = 3_600_000;
    let g2 = NodeBuilder::new("g2", 8000, 32 * GI)
        .with_provider_id("test:///g2")
        .with(|n| n.creation_ms = Some(now - 60_000))
        .arc();
    let nodes = vec![node("g1"), g2];
    let pods = gpu_pods(3);
    let provider = StaticProvider::new(vec![
        NodeGroup::new("gpu", 0, 10, 2).with_instances(
            ["g1", "g2"]
                .iter()
                .map(|n| Instance {
                    id: Arc::from(format!("test:///{n}")),
                    state: InstanceState::Running,
                    error: None,
                })
                .collect(),
        ),
    ]);
    let grown = |limit: Option<&str>| {
        let mut a = with_gpu_min(AutoscalerOptions::default(), limit);
        let out = run_loop(&mut a, &nodes, &pods, &provider, &storage, now);
        assert_eq!(out.status.groups[0].upcoming, 1, "{:?}", out.status);
        increases(&out.scale_up)
    };
    assert_eq!(grown(None), vec![("gpu".to_string(), 2)]);
    assert_eq!(
        grown(Some("gpu.example.com:0:12")),
        vec![("gpu".to_string(), 1)]
    );
}
