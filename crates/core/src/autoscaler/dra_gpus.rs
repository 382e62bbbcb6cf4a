//! Scale-up decisions on groups whose GPUs are DRA devices: `--gpu-total`, the expanders and the
//! similarity of groups count them as they count extended-resource GPUs (ours beyond upstream,
//! whose DRA processor gives no resource target).

use std::sync::Arc;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::{ClusterView, ScaleUpConfig, ScaleUpDecision, decide_scale_up};
use crate::scale_up::estimator::Unlimited;
use crate::scale_up::expander::ExpanderChain;
use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
use autoscaler_model::{
    Instance, InstanceState, Node, NodeGroup, ObjectStore, Pod, PodClaim, PodClaimSource,
    StaticProvider, Storage, parse_gpu_limit,
};

/// A GPU class of driver `gpu.example.com`, a claim template asking `count` GPUs, and for each
/// `(node, gpus)` a slice of that many `type: gpu` devices, all allocated to a claim (the node is
/// busy).
fn storage(count: u32, nodes: &[(&str, usize)]) -> Arc<Storage> {
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
             pool: {{name: {node}, generation: 1, resourceSliceCount: 1}}, devices: [{}]}}\n\
             ---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n\
             metadata: {{name: busy-{node}, namespace: default}}\n\
             spec: {{devices: {{requests: [{{name: gpu, exactly: {{deviceClassName: gpu, allocationMode: All}}}}]}}}}\n\
             status: {{allocation: {{devices: {{results: [{}]}}, nodeSelector: {{nodeSelectorTerms: \
             [{{matchFields: [{{key: metadata.name, operator: In, values: [{node}]}}]}}]}}}}}}\n",
            devices.join(", "),
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
