//! The simulation's informer: the autoscaler's view of the world's objects, kept up to date
//! from the world's watch log. A thin adapter: the converted objects live in the actuation crate's
//! [`autoscaler_actuation::Informer`]; this feeds it the world's changes and remembers the
//! last `resourceVersion` applied.
//!
//! It decides nothing and never writes to the world.

use std::sync::Arc;

use autoscaler_actuation::Informer as Objects;
use autoscaler_world::{WatchEventKind, World};

/// The converted objects, kept in step with the world's watch log.
#[derive(Debug, Default)]
pub struct Informer {
    /// The last `resourceVersion` seen.
    rv: u64,
    /// The objects, converted.
    objects: Objects,
}

impl Informer {
    /// An informer that has seen nothing yet.
    pub fn new() -> Informer {
        Informer::default()
    }

    /// Applies every change the world logged since the last sync.
    pub fn sync(&mut self, world: &World) {
        for e in world.events_since(self.rv) {
            self.rv = e.rv;
            let object = (e.kind != WatchEventKind::Deleted).then(|| Arc::clone(&e.object));
            self.objects.apply(e.key.clone(), object);
        }
    }

    /// The last `resourceVersion` applied.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }
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
    use autoscaler_core::Node;
    use autoscaler_core::Pod;
    use autoscaler_core::model::objects::read_objects;
    use autoscaler_world::{NodeGroupSpec, WorldConfig};
    use serde_json::json;

    #[test]
    fn the_informer_reads_what_read_objects_reads() {
        let mut w = World::new(WorldConfig::default());
        let spec = NodeGroupSpec {
            namespace: "default".into(),
            name: "g".into(),
            replicas: 2,
            min_size: 0,
            max_size: 5,
            cpu: "4".into(),
            memory: "16Gi".into(),
            max_pods: 110,
            gpu: None,
            labels: Default::default(),
            taints: Vec::new(),
            delete_policy: Default::default(),
        };
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
