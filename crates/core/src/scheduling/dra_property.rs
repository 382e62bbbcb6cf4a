//! Random walks over a snapshot with DRA devices: pods with claims of their own and pods sharing
//! one claim are placed, removed, and whole forks reverted, in random order. After every step
//! each node's allocated devices are exactly what a plain count of its placed claims says: never
//! a device allocated twice, never more than the node has, a shared claim allocated once (on the
//! node of its users), every allocation undone by the revert of the fork that made it; and the
//! filter says a pod fits exactly when a device is free for it (or its shared claim is there).
//!
//! And the whole loop on random GPU nodes whose pods hold allocated claims: a node is removed
//! only if each of its pods with a claim moves to a kept node with a device free for it.

use std::sync::Arc;

use proptest::prelude::*;

use crate::scheduling::snapshot::ClusterSnapshot;
use autoscaler_model::testing::{GI, NodeBuilder, PodBuilder};
use autoscaler_model::{ObjectStore, Pod, PodClaim, PodClaimSource, Storage, Sym};

const OBJECTS: &str = "\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors: [{cel: {expression: \"device.driver == 'gpu.example.com'\"}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: default}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: shared, namespace: default}
spec:
  devices:
    requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]
";

/// One step of a walk.
#[derive(Clone, Debug)]
enum Step {
    Place(usize, usize),
    Remove(usize),
    Fork,
    Revert,
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0usize..10, 0usize..4).prop_map(|(p, n)| Step::Place(p, n)),
        2 => (0usize..10).prop_map(Step::Remove),
        1 => Just(Step::Fork),
        1 => Just(Step::Revert),
    ]
}

/// A snapshot of nodes `n0`, `n1`... with `devices[i]` GPUs each.
fn snapshot(devices: &[usize]) -> ClusterSnapshot {
    let mut yaml = OBJECTS.to_string();
    for (i, d) in devices.iter().enumerate() {
        let list: Vec<String> = (0..*d).map(|k| format!("{{name: gpu-{k}}}")).collect();
        yaml.push_str(&format!(
            "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: n{i}}}\n\
             spec:\n  driver: gpu.example.com\n  nodeName: n{i}\n  \
             pool: {{name: n{i}, generation: 1, resourceSliceCount: 1}}\n  devices: [{}]\n",
            list.join(", ")
        ));
    }
    let mut store = ObjectStore::new();
    store.load_yaml(&yaml).expect("objects");
    let (storage, errors) = Storage::from_store(&store);
    assert!(errors.is_empty(), "{errors:?}");
    let mut s = ClusterSnapshot::new();
    s.set_storage(Arc::new(storage));
    for i in 0..devices.len() {
        s.add_node(NodeBuilder::new(&format!("n{i}"), 64_000, 256 * GI).arc())
            .expect("node");
    }
    s
}

/// Pod `i`: the first `shared` pods use the claim `shared`, the others a claim of their own.
fn pod(i: usize, shared: usize) -> Arc<Pod> {
    let source = if i < shared {
        PodClaimSource::Claim(Arc::from("shared"))
    } else {
        PodClaimSource::Template {
            template: Arc::from("one-gpu"),
            generated: None,
        }
    };
    PodBuilder::new(&format!("p{i}"), 100, GI)
        .with(|p| {
            p.resource_claims.push(PodClaim {
                name: Arc::from("gpu"),
                source,
            })
        })
        .arc()
}

/// Where each pod is (node index), as the walk placed them.
type Placement = Vec<Option<usize>>;

/// Devices node `n` must have allocated: one per own-claim pod on it, one for the shared claim
/// if its users are there.
fn expected_used(at: &Placement, shared: usize, n: usize) -> usize {
    let own = (shared..at.len()).filter(|&i| at[i] == Some(n)).count();
    let shared_here = (0..shared).any(|i| at[i] == Some(n));
    own + usize::from(shared_here)
}

fn run(devices: &[usize], shared: usize, steps: &[Step]) -> Result<(), TestCaseError> {
    let nodes = devices.len();
    let pods: Vec<Arc<Pod>> = (0..10).map(|i| pod(i, shared)).collect();
    let mut s = snapshot(devices);
    // Simulations run in a fork (outside any, the snapshot follows the view's allocations).
    s.fork();
    let mut at: Placement = vec![None; pods.len()];
    let mut forks: Vec<Placement> = Vec::new();
    let id = |s: &ClusterSnapshot, n: usize| s.node_id(Sym::new(&format!("n{n}"))).expect("node");
    for step in steps {
        match *step {
            Step::Place(p, n) => {
                let n = n % nodes;
                if at[p].is_some() {
                    continue;
                }
                let node = id(&s, n);
                let fits = s.check_pod(&pods[p], node).is_ok();
                let shared_on = (0..shared).find_map(|i| at[i]);
                let expect = if p < shared && shared_on.is_some() {
                    shared_on == Some(n)
                } else {
                    expected_used(&at, shared, n) < devices[n]
                };
                prop_assert_eq!(fits, expect, "pod p{} on n{} after {:?}", p, n, at);
                if fits {
                    s.add_pod(pods[p].clone(), node).expect("placed");
                    at[p] = Some(n);
                }
            }
            Step::Remove(p) => {
                if let Some(n) = at[p] {
                    let node = id(&s, n);
                    s.remove_pod(node, Sym::new("default"), &format!("p{p}"))
                        .expect("removed");
                    at[p] = None;
                }
            }
            Step::Fork => {
                s.fork();
                forks.push(at.clone());
            }
            Step::Revert => {
                if let Some(before) = forks.pop() {
                    s.revert().expect("reverted");
                    at = before;
                }
            }
        }
        for (n, &total) in devices.iter().enumerate() {
            let got = s.node_devices_in_use(id(&s, n));
            prop_assert_eq!(
                got,
                (expected_used(&at, shared, n), total),
                "n{} after {:?} with {:?}",
                n,
                step,
                at
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn devices_are_never_allocated_twice_and_reverts_free_them(
        devices in prop::collection::vec(1usize..=3, 1..=4),
        shared in 0usize..=3,
        steps in prop::collection::vec(step(), 1..40),
    ) {
        run(&devices, shared, &steps)?;
    }
}

/// The whole loop on random GPU nodes whose pods hold allocated claims: a node the scale-down
/// removes has each pod with a claim moved to a kept node with a device free for it (counting
/// the devices already allocated there and those the other moved pods take).
mod removal {
    use super::*;
    use crate::{Autoscaler, AutoscalerOptions, ClusterView, LoopInput};
    use autoscaler_model::{Instance, InstanceState, NodeGroup, StaticProvider};
    use std::fmt::Write as _;

    const MIN: i64 = 60 * 1000;

    /// Nodes `n<i>` with `devices[i]` GPUs, `busy[i]` of them allocated to a pod `p<i>-<k>`
    /// running there; the view and the provider's one group.
    fn cluster(
        devices: &[usize],
        busy: &[usize],
    ) -> (
        Vec<Arc<autoscaler_model::Node>>,
        Vec<Arc<Pod>>,
        Storage,
        StaticProvider,
    ) {
        let mut yaml = OBJECTS.to_string();
        let mut nodes = Vec::new();
        let mut pods = Vec::new();
        let mut group = NodeGroup::new("gpu", 0, 10, devices.len());
        for (i, (&d, &b)) in devices.iter().zip(busy).enumerate() {
            let list: Vec<String> = (0..d).map(|k| format!("{{name: gpu-{k}}}")).collect();
            let _ = write!(
                yaml,
                "---\napiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {{name: n{i}}}\n\
                 spec:\n  driver: gpu.example.com\n  nodeName: n{i}\n  \
                 pool: {{name: n{i}, generation: 1, resourceSliceCount: 1}}\n  devices: [{}]\n",
                list.join(", ")
            );
            for k in 0..b.min(d) {
                let _ = write!(
                    yaml,
                    "---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n\
                     metadata: {{name: c{i}-{k}, namespace: default}}\n\
                     spec: {{devices: {{requests: [{{name: gpu, exactly: {{deviceClassName: gpu.example.com}}}}]}}}}\n\
                     status:\n  allocation:\n    devices: {{results: [{{request: gpu, driver: gpu.example.com, pool: n{i}, device: gpu-{k}}}]}}\n    \
                     nodeSelector: {{nodeSelectorTerms: [{{matchFields: [{{key: metadata.name, operator: In, values: [n{i}]}}]}}]}}\n  \
                     reservedFor: [{{resource: pods, name: p{i}-{k}, uid: u{i}-{k}}}]\n"
                );
                let claim = PodClaimSource::Claim(Arc::from(format!("c{i}-{k}")));
                pods.push(
                    PodBuilder::new(&format!("p{i}-{k}"), 100, GI)
                        .owner("ReplicaSet", "train")
                        .node_name(&format!("n{i}"))
                        .with(|p| {
                            p.resource_claims.push(PodClaim {
                                name: Arc::from("gpu"),
                                source: claim,
                            })
                        })
                        .arc(),
                );
            }
            let name = format!("n{i}");
            nodes.push(
                NodeBuilder::new(&name, 8000, 32 * GI)
                    .with_provider_id(&format!("test:///{name}"))
                    .with(|n| n.creation_ms = Some(0))
                    .arc(),
            );
            group.push_instance(Instance {
                id: Arc::from(format!("test:///{name}")),
                state: InstanceState::Running,
                error: None,
            });
        }
        let mut store = ObjectStore::new();
        store.load_yaml(&yaml).expect("objects");
        let (storage, errors) = Storage::from_store(&store);
        assert!(errors.is_empty(), "{errors:?}");
        (nodes, pods, storage, StaticProvider::new(vec![group]))
    }

    fn check(devices: &[usize], busy: &[usize]) -> Result<(), TestCaseError> {
        let (nodes, pods, storage, provider) = cluster(devices, busy);
        let storage = Arc::new(storage);
        let view = ClusterView {
            storage: &storage,
            ..ClusterView::of(&nodes, &pods, &provider)
        };
        let mut ca = Autoscaler::new(AutoscalerOptions::default());
        let mut deletions = Vec::new();
        for now in [60 * MIN, 71 * MIN] {
            let out = ca.run_once(LoopInput::new(&view, now));
            deletions.extend(out.scale_down.deletions);
        }
        let index = |name: Sym| name.as_str()[1..].parse::<usize>().expect("n<i>");
        let deleted: Vec<usize> = deletions.iter().map(|d| index(d.node)).collect();
        let mut taken: Vec<usize> = (0..devices.len())
            .map(|i| busy[i].min(devices[i]))
            .collect();
        for d in &deletions {
            let here = index(d.node);
            let claimed = busy[here].min(devices[here]);
            let moved: Vec<usize> = d
                .destinations
                .iter()
                .filter(|(p, _)| !p.resource_claims.is_empty())
                .map(|(_, to)| index(*to))
                .collect();
            prop_assert_eq!(moved.len(), claimed, "every claim pod of n{} moves", here);
            for to in moved {
                prop_assert!(
                    !deleted.contains(&to),
                    "n{} moved a pod to n{}, also removed",
                    here,
                    to
                );
                taken[to] += 1;
                prop_assert!(
                    taken[to] <= devices[to],
                    "n{} has {} devices, {} taken",
                    to,
                    devices[to],
                    taken[to]
                );
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn a_node_is_removed_only_if_its_claims_fit_elsewhere(
            shape in prop::collection::vec((1usize..=3, 0usize..=3), 1..=4),
        ) {
            let (devices, busy): (Vec<usize>, Vec<usize>) = shape.into_iter().unzip();
            check(&devices, &busy)?;
        }
    }

    /// The property holds for the right reason: of two nodes each with one of four GPUs taken,
    /// one goes and its claim pod moves to the other.
    #[test]
    fn a_lone_claim_moves_to_a_free_device() {
        let (nodes, pods, storage, provider) = cluster(&[4, 4], &[1, 1]);
        let storage = Arc::new(storage);
        let view = ClusterView {
            storage: &storage,
            ..ClusterView::of(&nodes, &pods, &provider)
        };
        let mut ca = Autoscaler::new(AutoscalerOptions::default());
        let mut moved = Vec::new();
        for now in [60 * MIN, 71 * MIN] {
            let out = ca.run_once(LoopInput::new(&view, now));
            for d in out.scale_down.deletions {
                moved.extend(
                    d.destinations
                        .iter()
                        .map(|(p, to)| (d.node, p.name.clone(), *to)),
                );
            }
        }
        assert_eq!(moved.len(), 1, "{moved:?}");
        assert_ne!(moved[0].0, moved[0].2);
        check(&[4, 4], &[1, 1]).expect("the property");
    }
}
