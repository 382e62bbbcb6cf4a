//! The Cluster API provider over stores built from `kubectl get -o yaml`-style fixtures.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use autoscaler_clusterapi::{ARCH_LABEL, OS_LABEL};
use autoscaler_clusterapi::{
    BoundsSource, ClusterApiConfig, ClusterApiProvider, DiscoveryCache, MachineInfo, ObjectChange,
    ProviderError, apply, placeholder_id,
};
use autoscaler_model::Node;
use autoscaler_model::ObjectKey;
use autoscaler_model::ObjectStore;
use autoscaler_model::ResourceName;
use autoscaler_model::TaintEffect;
use autoscaler_model::{
    CloudProvider, InstanceErrorClass, InstanceState, NodeGroup, NodeGroupOptions,
};

const CAPI: &str = include_str!("fixtures/capi.yaml");
const OPENSHIFT: &str = include_str!("fixtures/openshift.yaml");
const OPENSHIFT_TWO_APIS: &str = include_str!("fixtures/openshift-two-apis.yaml");

fn store(text: &str) -> ObjectStore {
    let mut s = ObjectStore::new();
    s.load_yaml(text).expect("fixture loads");
    s
}

fn ids(p: &ClusterApiProvider) -> Vec<&str> {
    p.node_groups().iter().map(|g| g.id().as_str()).collect()
}

fn group<'a>(p: &'a ClusterApiProvider, id: &str) -> &'a NodeGroup {
    &p.node_groups()[p.group_index(id).expect("group exists")]
}

fn node(name: &str, provider_id: Option<&str>) -> Node {
    let mut n = Node::new(name);
    n.provider_id = provider_id.map(Arc::from);
    n
}

#[test]
fn discovery_finds_annotated_resources_and_warns_about_malformed_ones() {
    let (p, warnings) = ClusterApiProvider::discover(&store(CAPI), &ClusterApiConfig::default());
    assert_eq!(
        ids(&p),
        [
            "MachineDeployment/default/md-gpu",
            "MachineDeployment/default/md-workers",
            "MachineSet/other/ms-standalone",
        ]
    );
    let find = |needle: &str| warnings.iter().find(|w| w.contains(needle));
    let bad = find("md-bad").expect("warning for md-bad");
    assert!(
        bad.contains("cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"),
        "{bad}"
    );
    assert!(bad.contains("\"two\""), "{bad}");
    let inv = find("md-inverted").expect("warning for md-inverted");
    assert!(
        inv.contains("min size 5") && inv.contains("max size 3"),
        "{inv}"
    );
    let zero = find("md-zero").expect("warning for md-zero");
    assert!(zero.contains("cannot scale from zero"), "{zero}");
    assert!(
        find("md-plain").is_none(),
        "an object without annotations is not a candidate"
    );
    assert!(
        find("md-workers-7d9f8").is_none(),
        "owned MachineSets are skipped quietly"
    );
    // The API version is the one found on each object.
    assert_eq!(
        p.resource("MachineDeployment/default/md-gpu")
            .unwrap()
            .api_version,
        "cluster.x-k8s.io/v1beta2"
    );
    assert_eq!(
        p.resource("MachineDeployment/default/md-workers")
            .unwrap()
            .api_version,
        "cluster.x-k8s.io/v1beta1"
    );
}

#[test]
fn auto_discovery_filters_by_namespace_cluster_and_labels_ored() {
    let s = store(CAPI);
    let with = |specs: &[&str]| {
        let c = ClusterApiConfig::default()
            .with_auto_discovery(specs)
            .unwrap();
        let (p, _) = ClusterApiProvider::discover(&s, &c);
        ids(&p).into_iter().map(str::to_string).collect::<Vec<_>>()
    };
    assert_eq!(
        with(&["clusterapi:namespace=other"]),
        ["MachineSet/other/ms-standalone"]
    );
    assert_eq!(
        with(&["clusterapi:clusterName=prod"]),
        [
            "MachineDeployment/default/md-gpu",
            "MachineDeployment/default/md-workers"
        ]
    );
    assert_eq!(
        with(&["clusterapi:namespace=default,team=a"]),
        ["MachineDeployment/default/md-workers"]
    );
    assert_eq!(
        with(&["clusterapi:namespace=default,clusterName=staging"]),
        Vec::<String>::new()
    );
    assert_eq!(
        with(&["clusterapi:team=a", "clusterapi:clusterName=staging"]),
        [
            "MachineDeployment/default/md-workers",
            "MachineSet/other/ms-standalone"
        ]
    );
}

#[test]
fn sizes_come_from_annotations_and_replicas() {
    let (p, _) = ClusterApiProvider::discover(&store(CAPI), &ClusterApiConfig::default());
    let g = group(&p, "MachineDeployment/default/md-workers");
    assert_eq!((g.min_size(), g.max_size(), g.target_size()), (1, 5, 3));
    let g = group(&p, "MachineDeployment/default/md-gpu");
    assert_eq!((g.min_size(), g.max_size(), g.target_size()), (0, 4, 0));
    let g = group(&p, "MachineSet/other/ms-standalone");
    assert_eq!((g.min_size(), g.max_size(), g.target_size()), (2, 3, 2));
}

#[test]
fn instances_carry_state_and_failures() {
    let (p, _) = ClusterApiProvider::discover(&store(CAPI), &ClusterApiConfig::default());
    let g = group(&p, "MachineDeployment/default/md-workers");
    let inst: Vec<(&str, InstanceState)> =
        g.instances().iter().map(|i| (&*i.id, i.state)).collect();
    assert_eq!(
        inst,
        [
            ("aws:///us-east-1a/i-0001", InstanceState::Running),
            ("aws:///us-east-1a/i-0002", InstanceState::Creating),
            (
                "clusterapi://default/md-workers-7d9f8-ccccc",
                InstanceState::Creating
            ),
        ]
    );
    assert_eq!(
        placeholder_id("default", "md-workers-7d9f8-ccccc"),
        &*g.instances()[2].id
    );
    assert!(g.instances()[0].error.is_none() && g.instances()[1].error.is_none());
    let e = g.instances()[2]
        .error
        .as_ref()
        .expect("failed machine reports an error");
    assert_eq!(e.class, InstanceErrorClass::OutOfResources);
    assert_eq!(e.code, "InsufficientResourcesError");
    assert!(e.message.contains("InsufficientInstanceCapacity"));

    let g = group(&p, "MachineSet/other/ms-standalone");
    let inst: Vec<(&str, InstanceState)> =
        g.instances().iter().map(|i| (&*i.id, i.state)).collect();
    // The second Machine has no providerID: the one of its Node is used.
    assert_eq!(
        inst,
        [
            ("aws:///us-east-1b/i-0004", InstanceState::Deleting),
            ("aws:///us-east-1b/i-0005", InstanceState::Running),
        ]
    );

    assert_eq!(
        p.node_group_of(&node("ip-10-0-0-1", Some("aws:///us-east-1a/i-0001"))),
        p.group_index("MachineDeployment/default/md-workers")
    );
    assert_eq!(
        p.node_group_of(&node("ip-10-0-0-5", Some("aws:///us-east-1b/i-0005"))),
        p.group_index("MachineSet/other/ms-standalone")
    );
    assert_eq!(
        p.node_group_of(&node("control-plane-1", Some("aws:///us-east-1a/i-cp01"))),
        None
    );
    assert_eq!(p.gpu_label(), Some("cluster-api/accelerator"));
}

#[test]
fn scale_from_zero_template_from_capacity_annotations() {
    let (p, _) = ClusterApiProvider::discover(&store(CAPI), &ClusterApiConfig::default());
    let t = group(&p, "MachineDeployment/default/md-gpu")
        .template()
        .cloned()
        .expect("template");
    assert_eq!(t.capacity.cpu, 8000);
    assert_eq!(t.capacity.memory, 32 << 30);
    assert_eq!(t.capacity.ephemeral_storage, 100 << 30);
    assert_eq!(t.capacity.pods, 58);
    assert_eq!(t.allocatable.get(ResourceName::parse("nvidia.com/gpu")), 2);
    assert_eq!(t.allocatable, t.capacity);
    assert_eq!(t.labels.get_str("accelerator"), Some("a10g"));
    assert_eq!(t.labels.get_str("pool"), Some("gpu"));
    assert_eq!(t.labels.get_str("node-role.kubernetes.io/gpu"), Some(""));
    assert_eq!(t.labels.get_str(OS_LABEL), Some("linux"));
    assert_eq!(t.labels.get_str(ARCH_LABEL), Some("amd64"));
    assert!(t.labels.get_str("kubernetes.io/hostname").is_some());
    assert_eq!(t.labels.get_str("cluster.x-k8s.io/deployment-name"), None);
    let taints: Vec<(&str, &str, TaintEffect)> = t
        .taints
        .iter()
        .map(|x| (x.key.as_str(), x.value.as_str(), x.effect))
        .collect();
    assert_eq!(
        taints,
        [
            ("dedicated", "gpu-override", TaintEffect::NoSchedule),
            ("node-setup", "true", TaintEffect::NoSchedule),
            ("nvidia.com/gpu", "present", TaintEffect::NoSchedule),
        ]
    );
    assert!(t.is_ready());
    // A group with nodes and no capacity annotations has no provider template.
    assert!(
        group(&p, "MachineDeployment/default/md-workers")
            .template()
            .is_none()
    );
}

#[test]
fn per_group_options_override_globals() {
    let (p, w) = ClusterApiProvider::discover(&store(CAPI), &ClusterApiConfig::default());
    let o = &group(&p, "MachineDeployment/default/md-workers").options();
    assert_eq!(o.scale_down_utilization_threshold(), Some(0.4));
    assert_eq!(o.scale_down_gpu_utilization_threshold(), Some(0.2));
    assert_eq!(o.scale_down_unneeded_time(), Some(Duration::from_secs(900)));
    assert_eq!(o.scale_down_unready_time(), Some(Duration::from_secs(1500)));
    assert_eq!(o.max_node_provision_time(), Some(Duration::from_secs(3600)));
    assert!(
        !w.iter().any(|w| w.contains("autoscaling-options")),
        "{w:?}"
    );
    assert_eq!(
        group(&p, "MachineDeployment/default/md-gpu").options(),
        &NodeGroupOptions::default()
    );
}

#[test]
fn delete_nodes_marks_machines_then_lowers_replicas() {
    let mut s = store(CAPI);
    let config = ClusterApiConfig::default();
    let (p, _) = ClusterApiProvider::discover(&s, &config);
    let id = "MachineDeployment/default/md-workers";
    let n1 = node("ip-10-0-0-1", Some("aws:///us-east-1a/i-0001"));
    let changes = p.delete_nodes(id, &[&n1, &n1]).unwrap();
    assert_eq!(
        changes.len(),
        2,
        "one mark (duplicates ignored), one resize: {changes:?}"
    );
    match &changes[0] {
        ObjectChange::AnnotateMachine {
            key,
            api_version,
            annotation,
            ..
        } => {
            assert_eq!(key.name, "md-workers-7d9f8-aaaaa");
            assert_eq!(api_version, "cluster.x-k8s.io/v1beta1");
            assert_eq!(annotation, "cluster.x-k8s.io/delete-machine");
        }
        c => panic!("expected a mark first, got {c:?}"),
    }
    match &changes[1] {
        ObjectChange::SetReplicas { key, replicas, .. } => {
            assert_eq!(
                (key.kind.as_str(), key.name.as_str(), *replicas),
                ("MachineDeployment", "md-workers", 2)
            );
        }
        c => panic!("expected a resize, got {c:?}"),
    }
    apply(&mut s, &changes).unwrap();
    let (p2, _) = ClusterApiProvider::discover(&s, &config);
    let r = p2.resource(id).unwrap();
    assert_eq!(r.replicas, 2);
    assert!(r.machines[0].marked_for_deletion);
    assert!(!r.machines[1].marked_for_deletion);
    assert_eq!(group(&p2, id).target_size(), 2);
}

#[test]
fn resizes_are_refused_at_the_limits_and_for_foreign_nodes() {
    // The count goes with the version it was decided from.
    let mut s = store(CAPI);
    let md_key = s
        .iter()
        .map(|(k, _)| k.clone())
        .find(|k| k.kind == "MachineDeployment" && k.name == "md-workers")
        .expect("md-workers");
    let mut versioned = (**s.get(&md_key).unwrap()).clone();
    versioned["metadata"]["resourceVersion"] = json!("41");
    s.insert(versioned, "t").unwrap();
    let (p, _) = ClusterApiProvider::discover(&s, &ClusterApiConfig::default());
    let md = "MachineDeployment/default/md-workers";
    let ms = "MachineSet/other/ms-standalone";
    assert_eq!(
        p.increase_size(md, 2).unwrap(),
        [ObjectChange::SetReplicas {
            key: p.resource(md).unwrap().key.clone(),
            api_version: "cluster.x-k8s.io/v1beta1".into(),
            replicas: 5,
            base: autoscaler_clusterapi::ReplicasBase {
                resource_version: Some("41".into()),
                replicas: 3,
                min: 1,
                max: 5,
            },
        }]
    );
    let e = p.increase_size(md, 3).unwrap_err();
    assert_eq!(
        e,
        ProviderError::AboveMax {
            group: md.into(),
            target: 6,
            max: 5
        }
    );
    assert!(e.to_string().contains(md) && e.to_string().contains("max size 5"));
    assert!(matches!(
        p.increase_size(md, 0),
        Err(ProviderError::ZeroDelta { .. })
    ));
    assert!(matches!(
        p.increase_size("MachineSet/x/y", 1),
        Err(ProviderError::UnknownGroup { .. })
    ));

    // ms-standalone is at its min (2 of 2).
    let n5 = node("ip-10-0-0-5", Some("aws:///us-east-1b/i-0005"));
    let e = p.delete_nodes(ms, &[&n5]).unwrap_err();
    assert!(matches!(e, ProviderError::BelowMin { min: 2, .. }), "{e}");
    // A node of another group, and a node of no group.
    let e = p.delete_nodes(md, &[&n5]).unwrap_err();
    assert!(
        e.to_string()
            .contains("(it is in MachineSet/other/ms-standalone)"),
        "{e}"
    );
    let cp = node("control-plane-1", Some("aws:///us-east-1a/i-cp01"));
    assert!(matches!(
        p.delete_nodes(md, &[&cp]),
        Err(ProviderError::NotInGroup { other: None, .. })
    ));

    // md-workers: 3 replicas and 3 Machines (one with a node, one provisioning, one failed):
    // as upstream, the target may not drop below the Machines that exist, whatever their state,
    // because the set, not the autoscaler, picks which Machine goes.
    let e = p.decrease_target_size(md, 1).unwrap_err();
    assert_eq!(
        e,
        ProviderError::WouldDeleteMachines {
            group: md.into(),
            replicas: 3,
            delta: 1,
            machines: 3
        }
    );
}

#[test]
fn marked_machines_are_on_their_way_out_and_never_decremented_twice() {
    let mut s = store(CAPI);
    let md = "MachineDeployment/default/md-workers";
    let (p, _) = ClusterApiProvider::discover(&s, &ClusterApiConfig::default());
    let failed = "clusterapi://default/md-workers-7d9f8-ccccc";
    let changes = p.delete_instances(md, &[failed]).unwrap();
    apply(&mut s, &changes).unwrap();
    let (p, _) = ClusterApiProvider::discover(&s, &ClusterApiConfig::default());
    let g = group(&p, md);
    assert_eq!(g.target_size(), 2);
    let marked = g.instances().iter().find(|i| &*i.id == failed).unwrap();
    assert_eq!(marked.state, InstanceState::Deleting);
    // Asked again (a re-issued deletion), the marked Machine is not decremented a second time.
    assert_eq!(p.delete_instances(md, &[failed]).unwrap(), vec![]);
    // Two live Machines for a target of 2: no decrease is allowed.
    assert!(matches!(
        p.decrease_target_size(md, 1),
        Err(ProviderError::WouldDeleteMachines { machines: 2, .. })
    ));
}

#[test]
fn replicas_beyond_int32_are_refused_with_a_warning() {
    let text = CAPI.replacen("replicas: 3", "replicas: 2147483648", 1);
    assert_ne!(text, CAPI, "the fixture has a group of 3 replicas");
    let (p, warnings) = ClusterApiProvider::discover(&store(&text), &ClusterApiConfig::default());
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("spec.replicas is 2147483648: above 2147483647")),
        "{warnings:?}"
    );
    assert!(p.resource("MachineDeployment/default/md-workers").is_none());
}

#[test]
fn openshift_machine_sets_and_machine_autoscalers() {
    let s = store(OPENSHIFT);
    let config = ClusterApiConfig::from_env_and_flag(None, Some("machine.openshift.io")).unwrap();
    let (p, warnings) = ClusterApiProvider::discover(&s, &config);
    assert_eq!(
        ids(&p),
        [
            "MachineSet/openshift-machine-api/ocp-worker-us-east-1a",
            "MachineSet/openshift-machine-api/ocp-worker-us-east-1b",
        ]
    );
    assert!(
        warnings.iter().any(
            |w| w.contains("MachineAutoscaler openshift-machine-api/broken")
                && w.contains("min size 3")
        ),
        "{warnings:?}"
    );

    let a = group(&p, "MachineSet/openshift-machine-api/ocp-worker-us-east-1a");
    assert_eq!((a.min_size(), a.max_size(), a.target_size()), (1, 4, 2));
    assert_eq!(a.instances().len(), 2);
    assert_eq!(a.instances()[0].state, InstanceState::Running);
    let failed = &a.instances()[1];
    assert_eq!(failed.state, InstanceState::Creating);
    let e = failed.error.as_ref().unwrap();
    assert_eq!(
        (e.class, e.code.as_str()),
        (InstanceErrorClass::Other, "InvalidConfiguration")
    );

    let b = group(&p, "MachineSet/openshift-machine-api/ocp-worker-us-east-1b");
    assert_eq!((b.min_size(), b.max_size()), (1, 6));
    let r = p
        .resource("MachineSet/openshift-machine-api/ocp-worker-us-east-1b")
        .unwrap();
    assert!(
        matches!(&r.bounds_from, BoundsSource::MachineAutoscaler(k) if k.name == "worker-us-east-1b")
    );

    let n = node("ip-10-1-0-1.ec2.internal", Some("aws:///us-east-1a/i-0a"));
    let c = p
        .delete_nodes(
            "MachineSet/openshift-machine-api/ocp-worker-us-east-1a",
            &[&n],
        )
        .unwrap();
    assert!(
        matches!(&c[0], ObjectChange::AnnotateMachine { annotation, api_version, .. }
        if annotation == "machine.openshift.io/delete-machine" && api_version == "machine.openshift.io/v1beta1")
    );
    assert!(matches!(
        &c[1],
        ObjectChange::SetReplicas { replicas: 1, .. }
    ));

    // With the default group nothing of OpenShift's is seen.
    let (p, _) = ClusterApiProvider::discover(&s, &ClusterApiConfig::default());
    assert!(p.node_groups().is_empty());
}

/// `--cloud-provider=openshift` with the operator's
/// `--node-group-auto-discovery=clusterapi:namespace=openshift-cluster-api`.
fn openshift_mode() -> ClusterApiConfig {
    ClusterApiConfig {
        openshift: true,
        ..ClusterApiConfig::default()
    }
    .with_auto_discovery(&["clusterapi:namespace=openshift-cluster-api"])
    .unwrap()
}

#[test]
fn openshift_mode_reads_machine_api_and_cluster_api_in_one_provider() {
    let s = store(OPENSHIFT_TWO_APIS);
    let (p, warnings) = ClusterApiProvider::discover(&s, &openshift_mode());
    assert_eq!(
        ids(&p),
        [
            "MachineSet/openshift-machine-api/ocp-gpu-us-east-1a",
            "MachineSet/openshift-machine-api/ocp-worker-us-east-1a",
            "MachineSet/openshift-cluster-api/ocp-migrated-us-east-1b",
        ],
        "{warnings:?}"
    );
    // Scale from zero from OpenShift's annotations.
    let gpu = group(&p, "MachineSet/openshift-machine-api/ocp-gpu-us-east-1a");
    let t = gpu
        .template()
        .expect("a template from machine.openshift.io/*");
    assert_eq!(t.capacity.cpu, 8_000);
    assert_eq!(t.capacity.memory, 32_768 << 20);
    assert_eq!(t.capacity.pods, 250);
    assert_eq!(t.capacity.get(ResourceName::parse("nvidia.com/gpu")), 1);
    assert_eq!(
        t.labels.get_str("cluster-api/accelerator"),
        Some("nvidia-t4")
    );
    // Nodes map to the group of their own API.
    let mapi_node = node("ip-10-1-0-1.ec2.internal", Some("aws:///us-east-1a/i-0a"));
    let capi_node = node("ip-10-1-1-1.ec2.internal", Some("aws:///us-east-1b/i-0c"));
    assert_eq!(
        p.group_id_of(&mapi_node).map(|g| g.as_str()),
        Some("MachineSet/openshift-machine-api/ocp-worker-us-east-1a")
    );
    assert_eq!(
        p.group_id_of(&capi_node).map(|g| g.as_str()),
        Some("MachineSet/openshift-cluster-api/ocp-migrated-us-east-1b")
    );
    // The same store under plain `clusterapi` sees only Cluster API objects.
    let (plain, _) = ClusterApiProvider::discover(
        &s,
        &ClusterApiConfig::default()
            .with_auto_discovery(&["clusterapi:namespace=openshift-cluster-api"])
            .unwrap(),
    );
    assert_eq!(plain.node_groups().len(), 2);
}

#[test]
fn openshift_mode_scales_each_group_through_its_own_api() {
    let mut s = store(OPENSHIFT_TWO_APIS);
    let config = openshift_mode();
    let (p, _) = ClusterApiProvider::discover(&s, &config);
    let gpu = "MachineSet/openshift-machine-api/ocp-gpu-us-east-1a";
    let worker = "MachineSet/openshift-machine-api/ocp-worker-us-east-1a";
    let migrated = "MachineSet/openshift-cluster-api/ocp-migrated-us-east-1b";

    // Up from zero, on the Machine API MachineSet.
    let up = p.increase_size(gpu, 2).unwrap();
    assert!(
        matches!(&up[..], [ObjectChange::SetReplicas { key, replicas: 2, .. }]
            if key.group == "machine.openshift.io"),
        "{up:?}"
    );
    apply(&mut s, &up).unwrap();

    // Down: each Machine is marked with its own API's delete annotation.
    let n = node("ip-10-1-0-2.ec2.internal", Some("aws:///us-east-1a/i-0b"));
    let down = p.delete_nodes(worker, &[&n]).unwrap();
    assert!(
        matches!(&down[0], ObjectChange::AnnotateMachine { annotation, key, .. }
            if annotation == "machine.openshift.io/delete-machine" && key.name == "ocp-worker-us-east-1a-bbbbb"),
        "{down:?}"
    );
    apply(&mut s, &down).unwrap();
    let grow = p.increase_size(migrated, 1).unwrap();
    assert!(
        matches!(&grow[..], [ObjectChange::SetReplicas { key, replicas: 2, .. }]
            if key.group == "cluster.x-k8s.io"),
        "{grow:?}"
    );
    apply(&mut s, &grow).unwrap();
    let (p2, _) = ClusterApiProvider::discover(&s, &config);
    let capi_node = node("ip-10-1-1-1.ec2.internal", Some("aws:///us-east-1b/i-0c"));
    let shrink = p2.delete_nodes(migrated, &[&capi_node]).unwrap();
    assert!(
        matches!(&shrink[0], ObjectChange::AnnotateMachine { annotation, .. }
            if annotation == "cluster.x-k8s.io/delete-machine"),
        "{shrink:?}"
    );
    apply(&mut s, &shrink).unwrap();

    let (p3, _) = ClusterApiProvider::discover(&s, &config);
    assert_eq!(group(&p3, gpu).target_size(), 2);
    assert_eq!(group(&p3, worker).target_size(), 1);
    assert!(p3.resource(worker).unwrap().machines[1].marked_for_deletion);
    assert_eq!(group(&p3, migrated).target_size(), 1);
    assert!(p3.resource(migrated).unwrap().machines[0].marked_for_deletion);
}

#[test]
fn broken_instances_are_removed_and_replaced_at_min_size() {
    let mut s = store(CAPI);
    let (p, _) = ClusterApiProvider::discover(&s, &ClusterApiConfig::default());
    let failed = "clusterapi://default/md-workers-7d9f8-ccccc";
    let changes = p
        .delete_instances(
            "MachineDeployment/default/md-workers",
            &[failed, "aws:///us-east-1a/i-0002", failed, "unknown"],
        )
        .unwrap();
    let kinds: Vec<&str> = changes
        .iter()
        .map(|c| match c {
            ObjectChange::AnnotateMachine { key, .. } => key.name.as_str(),
            ObjectChange::SetReplicas { replicas, .. } => {
                assert_eq!(*replicas, 1);
                "replicas"
            }
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "md-workers-7d9f8-ccccc",
            "md-workers-7d9f8-bbbbb",
            "replicas"
        ]
    );
    apply(&mut s, &changes).unwrap();
    // At min size (1): the last instance is deleted outright, for its owner to replace it.
    let (p, _) = ClusterApiProvider::discover(&s, &ClusterApiConfig::default());
    let changes = p
        .delete_instances(
            "MachineDeployment/default/md-workers",
            &["aws:///us-east-1a/i-0001"],
        )
        .unwrap();
    assert!(
        matches!(&changes[..], [ObjectChange::DeleteMachine { key, .. }] if key.name == "md-workers-7d9f8-aaaaa"),
        "{changes:?}"
    );
    apply(&mut s, &changes).unwrap();
    assert_eq!(
        s.list("cluster.x-k8s.io", "Machine")
            .filter(|(k, _)| k.name == "md-workers-7d9f8-aaaaa")
            .count(),
        0
    );
    assert!(matches!(
        p.delete_instances("nope", &[]),
        Err(ProviderError::UnknownGroup { .. })
    ));
}

/// Discovers `s` with `cache` and without, asserting the same outcome (groups, resources,
/// warnings, node mapping); returns the cached discovery.
fn cached_as_fresh(
    s: &ObjectStore,
    config: &ClusterApiConfig,
    cache: &mut DiscoveryCache,
) -> ClusterApiProvider {
    let (cached, cached_warnings) = ClusterApiProvider::discover_cached(s, config, cache);
    let (fresh, fresh_warnings) = ClusterApiProvider::discover(s, config);
    assert_eq!(cached.node_groups(), fresh.node_groups());
    assert_eq!(cached.resources(), fresh.resources());
    assert_eq!(cached_warnings, fresh_warnings);
    for (k, o) in s.list("", "Node") {
        let n = node(
            &k.name,
            o.pointer("/spec/providerID").and_then(|v| v.as_str()),
        );
        assert_eq!(
            cached.node_group_of(&n),
            fresh.node_group_of(&n),
            "{}",
            k.name
        );
    }
    cached
}

/// The Machine `name`'s info in `p`, with the group it is in.
fn machine_info<'a>(p: &'a ClusterApiProvider, name: &str) -> &'a Arc<MachineInfo> {
    p.resources()
        .iter()
        .flat_map(|r| &r.machines)
        .find(|m| m.key.as_ref().is_some_and(|k| k.name == name))
        .unwrap_or_else(|| panic!("machine {name} in a group"))
}

fn machine_key(namespace: &str, name: &str) -> ObjectKey {
    ObjectKey {
        group: "cluster.x-k8s.io".into(),
        kind: "Machine".into(),
        namespace: namespace.into(),
        name: name.into(),
    }
}

#[test]
fn cached_discovery_equals_a_fresh_one_and_reads_only_changed_machines() {
    let mut s = store(CAPI);
    let config = ClusterApiConfig::default();
    let mut cache = DiscoveryCache::new();
    let p1 = cached_as_fresh(&s, &config, &mut cache);
    let machines = s.list("cluster.x-k8s.io", "Machine").count();
    assert_eq!(cache.len(), machines);
    // Nothing changed: every Machine's read is reused.
    let p2 = cached_as_fresh(&s, &config, &mut cache);
    for r in p1.resources() {
        for m in r.machines.iter().filter(|m| m.key.is_some()) {
            let name = &m.key.as_ref().expect("a Machine").name;
            assert!(Arc::ptr_eq(m, machine_info(&p2, name)), "{name} read again");
        }
    }
    // One Machine marked for deletion: read again, the others reused.
    let marked = machine_key("default", "md-workers-7d9f8-aaaaa");
    let mut obj = (**s.get(&marked).expect("machine")).clone();
    obj["metadata"]["annotations"] = json!({"cluster.x-k8s.io/delete-machine": "yes"});
    s.insert(obj, "test").expect("stored");
    let p3 = cached_as_fresh(&s, &config, &mut cache);
    assert_eq!(
        machine_info(&p3, "md-workers-7d9f8-aaaaa").state,
        InstanceState::Deleting
    );
    assert!(!Arc::ptr_eq(
        machine_info(&p2, "md-workers-7d9f8-aaaaa"),
        machine_info(&p3, "md-workers-7d9f8-aaaaa")
    ));
    assert!(Arc::ptr_eq(
        machine_info(&p2, "md-workers-7d9f8-bbbbb"),
        machine_info(&p3, "md-workers-7d9f8-bbbbb")
    ));
    // ms-standalone-x2 has no spec.providerID: its Node's changes reach it.
    let node_key = ObjectKey {
        group: String::new(),
        kind: "Node".into(),
        namespace: String::new(),
        name: "ip-10-0-0-5".into(),
    };
    let mut node_obj = (**s.get(&node_key).expect("node")).clone();
    node_obj["spec"]["providerID"] = json!("aws:///us-east-1b/i-0099");
    s.insert(node_obj, "test").expect("stored");
    let p4 = cached_as_fresh(&s, &config, &mut cache);
    assert_eq!(
        machine_info(&p4, "ms-standalone-x2").provider_id.as_deref(),
        Some("aws:///us-east-1b/i-0099")
    );
    s.remove(&node_key);
    let p5 = cached_as_fresh(&s, &config, &mut cache);
    assert_eq!(machine_info(&p5, "ms-standalone-x2").provider_id, None);
    // A Machine removed is forgotten; one added is read.
    s.remove(&machine_key("default", "md-workers-7d9f8-bbbbb"));
    cached_as_fresh(&s, &config, &mut cache);
    assert_eq!(cache.len(), machines - 1);
    let mut added = (**s.get(&marked).expect("machine")).clone();
    added["metadata"]["name"] = json!("md-workers-7d9f8-ddddd");
    added["metadata"]["annotations"] = json!({});
    added["spec"]["providerID"] = json!("aws:///us-east-1a/i-0042");
    s.insert(added, "test").expect("stored");
    let p6 = cached_as_fresh(&s, &config, &mut cache);
    assert_eq!(cache.len(), machines);
    assert_eq!(
        machine_info(&p6, "md-workers-7d9f8-ddddd")
            .provider_id
            .as_deref(),
        Some("aws:///us-east-1a/i-0042")
    );
    // Another configuration reads everything again, with its own annotation keys.
    let other = ClusterApiConfig::default()
        .with_auto_discovery(&["clusterapi:namespace=default"])
        .expect("valid");
    let p7 = cached_as_fresh(&s, &other, &mut cache);
    assert!(!Arc::ptr_eq(
        machine_info(&p6, "md-workers-7d9f8-ccccc"),
        machine_info(&p7, "md-workers-7d9f8-ccccc")
    ));
}

#[test]
fn cached_discovery_in_openshift_mode_equals_a_fresh_one() {
    let mut s = store(OPENSHIFT_TWO_APIS);
    let mut cache = DiscoveryCache::new();
    cached_as_fresh(&s, &openshift_mode(), &mut cache);
    cached_as_fresh(&s, &openshift_mode(), &mut cache);
    let machines: Vec<ObjectKey> = s
        .iter()
        .filter(|(k, _)| k.kind == "Machine")
        .map(|(k, _)| k.clone())
        .collect();
    assert!(!machines.is_empty());
    for k in machines {
        s.remove(&k);
        cached_as_fresh(&s, &openshift_mode(), &mut cache);
    }
    assert!(cache.is_empty());
}
