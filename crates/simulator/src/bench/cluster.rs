//! The synthetic cluster `bench` measures: nodes, running pods, pending pods and node groups
//! generated in memory from a [`Shape`], deterministically (no randomness: the same shape always
//! gives the same objects in the same order).
//!
//! Each node and pod is written as a Kubernetes API object and turned into the core's model by
//! the same conversion (`Node::from_k8s`, `Pod::from_k8s`) that objects from a live cluster or a
//! snapshot file take, so `bench` measures the objects the product really builds. It only builds
//! objects; it never decides or measures anything.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use autoscaler_model::ModelError;
use autoscaler_model::Node;
use autoscaler_model::Pod;
use autoscaler_model::StaticProvider;
use autoscaler_model::{Instance, InstanceState, NodeGroup};
use k8s_openapi::api::core::v1 as api;

use super::phases::thread_cpu;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

/// One GiB in bytes.
const GI: i64 = 1 << 30;
/// One MiB in bytes.
const MI: i64 = 1 << 20;

/// Node allocatable CPU, in millicores.
pub const NODE_CPU_MILLI: i64 = 16_000;
/// Node allocatable memory, in bytes.
pub const NODE_MEMORY: i64 = 64 * GI;
/// Node pod slots.
pub const NODE_PODS: i64 = 110;
/// Node allocatable ephemeral storage, in bytes.
const NODE_EPHEMERAL_STORAGE: i64 = 100 * GI;
/// The label naming a node's group (informational: the provider maps nodes by provider id).
const GROUP_LABEL: &str = "node.cluster.x-k8s.io/group";
/// Namespace of every generated pod.
const NAMESPACE: &str = "default";

/// What to generate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shape {
    /// Ready nodes of 16 CPU / 64 GiB / 110 pods.
    pub nodes: usize,
    /// Node groups; node `i` belongs to group `i % groups`.
    pub groups: usize,
    /// Running pods; pod `i` runs on node `i % nodes`.
    pub pods: usize,
    /// Unschedulable pods.
    pub pending: usize,
    /// CPU request of each pending pod, in millicores.
    pub pending_cpu_milli: i64,
    /// Memory request of each pending pod, in bytes.
    pub pending_memory: i64,
    /// ReplicaSets owning the pending pods (round-robin); 0: the pods have no owner.
    pub pending_owners: usize,
}

/// The generated objects.
pub struct Cluster {
    /// Every node, in name order `node-0`, `node-1`, ...
    pub nodes: Vec<Arc<Node>>,
    /// Running pods first (bound), then pending ones (unbound, `PodScheduled=False`).
    pub pods: Vec<Arc<Pod>>,
    /// The node groups with their instances.
    pub provider: StaticProvider,
    /// Wall and CPU time spent converting the API objects to the model (`Node::from_k8s`,
    /// `Pod::from_k8s`): what an informer spends as objects arrive, before any loop.
    pub conversion: (Duration, Duration),
    /// Claims, volumes and CSINodes (empty unless `--pvc-fraction` adds them).
    pub storage: Arc<autoscaler_model::Storage>,
}

/// The id of group `g` (a Cluster API MachineDeployment, as the `run` provider names it).
pub fn group_id(g: usize) -> String {
    format!("MachineDeployment/default/ng-{g}")
}

/// Whether the pods of node `n` are the small ones (every fifth node: 100m / 256 MiB).
pub fn is_light_node(n: usize) -> bool {
    n.is_multiple_of(5)
}

/// Builds the cluster of `shape`. Group `g` has min 0, max `4 × nodes / groups + 1000` and a
/// target equal to its node count (every instance registered and running). Fails only if a
/// generated object is refused by the conversion (a request no quantity can express).
pub fn generate(shape: &Shape) -> Result<Cluster, ModelError> {
    let groups_n = shape.groups.max(1);
    let max = 4 * shape.nodes / groups_n + 1000;
    let mut groups: Vec<NodeGroup> = (0..groups_n)
        .map(|g| {
            let id = group_id(g);
            NodeGroup::try_new(&id, 0, max, 0).map_err(|e| ModelError::Invalid {
                object: format!("node group {id}"),
                field: "maxSize".into(),
                value: max.to_string(),
                why: e.to_string(),
            })
        })
        .collect::<Result<_, _>>()?;
    let mut nodes = Vec::with_capacity(shape.nodes);
    let mut conversion = (Duration::ZERO, Duration::ZERO);
    let mut convert_pod = |pod: &api::Pod| -> Result<Arc<Pod>, ModelError> {
        let (start, cpu) = (Instant::now(), thread_cpu());
        let pod = Pod::from_k8s(pod).map(Arc::new);
        conversion.0 += start.elapsed();
        conversion.1 += thread_cpu().saturating_sub(cpu);
        pod
    };
    let mut node_conversion = (Duration::ZERO, Duration::ZERO);
    for n in 0..shape.nodes {
        let api = api_node(n, n % groups_n);
        let (start, cpu) = (Instant::now(), thread_cpu());
        let node = Node::from_k8s(&api)?;
        node_conversion.0 += start.elapsed();
        node_conversion.1 += thread_cpu().saturating_sub(cpu);
        let group = &mut groups[n % groups_n];
        group.push_instance(Instance {
            id: node.provider_id.clone().unwrap_or_default(),
            state: InstanceState::Running,
            error: None,
        });
        group.set_target_size(group.target_size() + 1);
        nodes.push(Arc::new(node));
    }
    let mut pods = Vec::with_capacity(shape.pods + shape.pending);
    if shape.nodes > 0 {
        // Pods of one kind differ only in name and node: one API object per kind is renamed
        // for each pod, so generating allocates little besides the model itself.
        let mut light = api_pod(100, 256 * MI, Some("running"));
        let mut heavy = api_pod(500, 2 * GI, Some("running"));
        for i in 0..shape.pods {
            let n = i % shape.nodes;
            let pod = if is_light_node(n) {
                &mut light
            } else {
                &mut heavy
            };
            set_name(pod, format!("run-{i}"));
            if let Some(spec) = pod.spec.as_mut() {
                spec.node_name = Some(format!("node-{n}"));
            }
            pods.push(convert_pod(pod)?);
        }
    }
    let mut pending = pending_pod(shape);
    for i in 0..shape.pending {
        set_name(&mut pending, format!("pending-{i}"));
        if shape.pending_owners > 0 {
            set_owner(
                &mut pending,
                &format!("pending-{}", i % shape.pending_owners),
            );
        }
        pods.push(convert_pod(&pending)?);
    }
    Ok(Cluster {
        nodes,
        pods,
        provider: StaticProvider::new(groups),
        conversion: (
            conversion.0 + node_conversion.0,
            conversion.1 + node_conversion.1,
        ),
        storage: Arc::default(),
    })
}

/// Node `node-<n>` of group `ng-<group>`: Ready, 16 CPU / 64 GiB / 110 pods, capacity equal to
/// allocatable, provider id `bench:///node-<n>`.
fn api_node(n: usize, group: usize) -> api::Node {
    let name = format!("node-{n}");
    let resources = BTreeMap::from([
        ("cpu".to_string(), Quantity(format!("{NODE_CPU_MILLI}m"))),
        ("memory".to_string(), Quantity(NODE_MEMORY.to_string())),
        (
            "ephemeral-storage".to_string(),
            Quantity(NODE_EPHEMERAL_STORAGE.to_string()),
        ),
        ("pods".to_string(), Quantity(NODE_PODS.to_string())),
    ]);
    api::Node {
        metadata: ObjectMeta {
            labels: Some(BTreeMap::from([
                ("kubernetes.io/hostname".to_string(), name.clone()),
                (GROUP_LABEL.to_string(), format!("ng-{group}")),
            ])),
            name: Some(name.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(api::NodeSpec {
            provider_id: Some(format!("bench:///{name}")),
            ..api::NodeSpec::default()
        }),
        status: Some(api::NodeStatus {
            capacity: Some(resources.clone()),
            allocatable: Some(resources),
            conditions: Some(vec![api::NodeCondition {
                type_: "Ready".to_string(),
                status: "True".to_string(),
                ..api::NodeCondition::default()
            }]),
            ..api::NodeStatus::default()
        }),
    }
}

/// An unnamed pending pod of the shape's request, marked `PodScheduled=False` /
/// `Unschedulable` as kube-scheduler leaves it, owned by a ReplicaSet if the shape has owners
/// (named by [`set_owner`]).
fn pending_pod(shape: &Shape) -> api::Pod {
    let owner = (shape.pending_owners > 0).then_some("");
    let mut pod = api_pod(shape.pending_cpu_milli, shape.pending_memory, owner);
    pod.status = Some(api::PodStatus {
        conditions: Some(vec![api::PodCondition {
            type_: "PodScheduled".to_string(),
            status: "False".to_string(),
            reason: Some("Unschedulable".to_string()),
            ..api::PodCondition::default()
        }]),
        ..api::PodStatus::default()
    });
    pod
}

/// An unnamed pod in `default` with one container requesting `cpu_milli` and `memory` bytes,
/// controlled by ReplicaSet `owner` if given.
fn api_pod(cpu_milli: i64, memory: i64, owner: Option<&str>) -> api::Pod {
    let mut pod = api::Pod {
        metadata: ObjectMeta {
            namespace: Some(NAMESPACE.to_string()),
            ..ObjectMeta::default()
        },
        spec: Some(api::PodSpec {
            containers: vec![api::Container {
                name: "app".to_string(),
                resources: Some(api::ResourceRequirements {
                    requests: Some(BTreeMap::from([
                        ("cpu".to_string(), Quantity(format!("{cpu_milli}m"))),
                        ("memory".to_string(), Quantity(memory.to_string())),
                    ])),
                    ..api::ResourceRequirements::default()
                }),
                ..api::Container::default()
            }],
            ..api::PodSpec::default()
        }),
        status: None,
    };
    if let Some(rs) = owner {
        set_owner(&mut pod, rs);
    }
    pod
}

/// Names the pod `name`, with uid `uid-<name>`.
fn set_name(pod: &mut api::Pod, name: String) {
    pod.metadata.uid = Some(format!("uid-{name}"));
    pod.metadata.name = Some(name);
}

/// Makes ReplicaSet `rs` (uid `ReplicaSet-<rs>`) the pod's controller.
fn set_owner(pod: &mut api::Pod, rs: &str) {
    pod.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "apps/v1".to_string(),
        kind: "ReplicaSet".to_string(),
        name: rs.to_string(),
        uid: format!("ReplicaSet-{rs}"),
        controller: Some(true),
        ..OwnerReference::default()
    }]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_core::is_unschedulable;
    use autoscaler_model::CloudProvider;

    fn shape() -> Shape {
        Shape {
            nodes: 20,
            groups: 3,
            pods: 600,
            pending: 10,
            pending_cpu_milli: 1000,
            pending_memory: 2 * GI,
            pending_owners: 4,
        }
    }

    /// The model objects the core's test builders make for `shape`: what `bench` generated
    /// before it wrote API objects, so its decisions are unchanged.
    fn built_with_test_builders(shape: &Shape) -> (Vec<Node>, Vec<Pod>) {
        use autoscaler_model::testing::{NodeBuilder, PodBuilder};
        let nodes = (0..shape.nodes)
            .map(|n| {
                let name = format!("node-{n}");
                NodeBuilder::new(&name, NODE_CPU_MILLI, NODE_MEMORY)
                    .pods(NODE_PODS)
                    .label(GROUP_LABEL, &format!("ng-{}", n % shape.groups))
                    .with_provider_id(&format!("bench:///{name}"))
                    .build()
            })
            .collect();
        let mut pods: Vec<Pod> = (0..shape.pods)
            .map(|i| {
                let n = i % shape.nodes;
                let (cpu, memory) = if is_light_node(n) {
                    (100, 256 * MI)
                } else {
                    (500, 2 * GI)
                };
                PodBuilder::new(&format!("run-{i}"), cpu, memory)
                    .owner("ReplicaSet", "running")
                    .node_name(&format!("node-{n}"))
                    .build()
            })
            .collect();
        for i in 0..shape.pending {
            let mut pod = PodBuilder::new(
                &format!("pending-{i}"),
                shape.pending_cpu_milli,
                shape.pending_memory,
            )
            .unschedulable();
            if shape.pending_owners > 0 {
                let owner = format!("pending-{}", i % shape.pending_owners);
                pod = pod.owner("ReplicaSet", &owner);
            }
            pods.push(pod.build());
        }
        (nodes, pods)
    }

    #[test]
    fn api_objects_convert_to_the_same_model_as_the_test_builders() {
        let shapes = [
            shape(),
            Shape {
                pending_owners: 0,
                pending_cpu_milli: 1,
                pending_memory: 3 * MI + 7,
                ..shape()
            },
            Shape {
                pending_cpu_milli: 0,
                pending_memory: 0,
                ..shape()
            },
        ];
        for shape in shapes {
            let (nodes, pods) = built_with_test_builders(&shape);
            let c = generate(&shape).unwrap();
            assert_eq!(c.nodes.len(), nodes.len());
            for (got, want) in c.nodes.iter().zip(&nodes) {
                assert_eq!(**got, *want);
            }
            assert_eq!(c.pods.len(), pods.len());
            for (got, want) in c.pods.iter().zip(&pods) {
                assert_eq!(**got, *want);
            }
        }
    }

    #[test]
    fn nodes_spread_round_robin_over_groups_with_upstream_bounds() {
        let c = generate(&shape()).unwrap();
        assert_eq!(c.nodes.len(), 20);
        let groups = c.provider.node_groups();
        assert_eq!(groups.len(), 3);
        // 20 nodes over 3 groups: 7, 7, 6.
        let targets: Vec<usize> = groups.iter().map(|g| g.target_size()).collect();
        assert_eq!(targets, vec![7, 7, 6]);
        for g in groups {
            assert_eq!(g.min_size(), 0);
            assert_eq!(g.max_size(), 4 * 20 / 3 + 1000);
            assert_eq!(g.instances().len(), g.target_size());
        }
        for (n, node) in c.nodes.iter().enumerate() {
            assert_eq!(c.provider.node_group_of(node), Some(n % 3));
            assert!(node.is_ready());
            assert_eq!(node.allocatable.cpu, 16_000);
            assert_eq!(node.allocatable.memory, 64 * GI);
            assert_eq!(node.allocatable.pods, 110);
        }
    }

    #[test]
    fn every_fifth_node_is_lightly_loaded_the_rest_nearly_full() {
        let c = generate(&shape()).unwrap();
        let mut cpu = [0i64; 20];
        let mut count = [0usize; 20];
        for p in c.pods.iter().filter(|p| p.node_name.is_some()) {
            let n: usize = p.node_name.unwrap().as_str()[5..].parse().unwrap();
            cpu[n] += p.requests.cpu;
            count[n] += 1;
            assert_eq!(p.owner.as_ref().map(|o| &*o.name), Some("running"));
        }
        assert!(count.iter().all(|&c| c == 30));
        for (n, &used) in cpu.iter().enumerate() {
            let pct = used * 100 / 16_000;
            if n % 5 == 0 {
                assert_eq!(pct, 18, "node {n}: 3 CPU of 16");
            } else {
                assert_eq!(pct, 93, "node {n}: 15 CPU of 16");
            }
        }
    }

    #[test]
    fn pending_pods_are_unschedulable_and_spread_over_owners() {
        let c = generate(&shape()).unwrap();
        let pending: Vec<_> = c.pods.iter().filter(|p| p.node_name.is_none()).collect();
        assert_eq!(pending.len(), 10);
        assert!(pending.iter().all(|p| is_unschedulable(p)));
        let owners: std::collections::BTreeSet<_> = pending
            .iter()
            .map(|p| p.owner.as_ref().unwrap().name.to_string())
            .collect();
        assert_eq!(owners.len(), 4);
        // Same owner and spec: one equivalence group per owner.
        let classes: std::collections::BTreeSet<_> =
            pending.iter().map(|p| p.equivalence).collect();
        assert_eq!(classes.len(), 4);

        let lone = generate(&Shape {
            pending_owners: 0,
            ..shape()
        })
        .unwrap();
        assert!(
            lone.pods
                .iter()
                .filter(|p| p.node_name.is_none())
                .all(|p| p.owner.is_none())
        );
    }
}
