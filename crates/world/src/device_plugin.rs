//! Device plugins: the extended resources of a new node (GPUs) appear some time after the node
//! joins Ready, as they do when the kubelet's device plugin (or a driver installer) starts after
//! the node has registered.
//!
//! It decides which resources a device plugin advertises (every extended resource, a name with a
//! domain such as `nvidia.com/gpu`) and how the node looks meanwhile (without them in
//! `status.capacity` and `status.allocatable`), and puts them back when the delay is over. It
//! never touches CPU, memory, pods or ephemeral storage, and never a node replaced meanwhile (a
//! new node of the same name has another uid).

use serde_json::Value;

use crate::cluster::Cluster;

/// Whether the node resource `name` is one a device plugin advertises (an extended resource).
pub fn is_device_resource(name: &str) -> bool {
    name.contains('/')
}

/// Removes the device resources from `node`'s capacity and allocatable, returning them (name
/// and quantity text) for [`advertise`].
pub(crate) fn withhold(node: &mut Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for field in ["capacity", "allocatable"] {
        let Some(Value::Object(m)) = node.pointer_mut(&format!("/status/{field}")) else {
            continue;
        };
        let names: Vec<String> = m
            .keys()
            .filter(|k| is_device_resource(k))
            .cloned()
            .collect();
        for name in names {
            if let Some(v) = m.remove(&name)
                && field == "capacity"
            {
                out.push((
                    name,
                    v.as_str().map_or_else(|| v.to_string(), str::to_string),
                ));
            }
        }
    }
    out
}

/// The device plugin of node `name` (uid `uid`) has started: its resources join the node's
/// capacity and allocatable. Nothing happens if the node is gone or replaced.
pub(crate) fn advertise(c: &mut Cluster, name: &str, uid: &str, resources: &[(String, String)]) {
    if c.uid_of(&crate::objects::key("", "Node", "", name)) != uid {
        return;
    }
    let _ = c.edit_node(name, |obj| {
        for field in ["capacity", "allocatable"] {
            if !obj["status"][field].is_object() {
                obj["status"][field] = serde_json::json!({});
            }
            for (k, v) in resources {
                obj["status"][field][k] = Value::String(v.clone());
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_extended_resources_are_withheld() {
        let mut node = json!({"status": {
            "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "2",
                         "hugepages-2Mi": "0"},
            "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110", "nvidia.com/gpu": "2"}}});
        let held = withhold(&mut node);
        assert_eq!(held, vec![("nvidia.com/gpu".to_string(), "2".to_string())]);
        assert!(
            node.pointer("/status/allocatable/nvidia.com~1gpu")
                .is_none()
        );
        assert!(node.pointer("/status/capacity/nvidia.com~1gpu").is_none());
        assert_eq!(node["status"]["allocatable"]["cpu"], "8");
        assert_eq!(node["status"]["capacity"]["hugepages-2Mi"], "0");
    }

    /// A GPU node of a world with a 30 s device-plugin delay joins Ready without its GPUs and
    /// advertises them 30 s later; without the delay it has them at once.
    #[test]
    fn a_new_node_advertises_its_gpus_after_the_delay() {
        use crate::testkit::group;
        use crate::{ProvisioningDelay, World, WorldConfig};
        let gpus_of = |w: &World| -> Vec<Option<String>> {
            w.objects()
                .list("", "Node")
                .map(|(_, n)| {
                    n.pointer("/status/allocatable/nvidia.com~1gpu")
                        .and_then(|v| v.as_str())
                        .map(str::to_string)
                })
                .collect()
        };
        for (delay, at_join) in [(30_000, None), (0, Some("2".to_string()))] {
            let mut w = World::new(WorldConfig {
                device_plugin_delay_ms: delay,
                default_delay: ProvisioningDelay {
                    min_ms: 10_000,
                    max_ms: 10_000,
                },
                ..WorldConfig::default()
            });
            let mut g = group("gpu", 1);
            g.gpu = Some(("nvidia.com/gpu".into(), 2));
            w.add_node_group(&g).unwrap();
            w.step_until(11_000);
            assert_eq!(gpus_of(&w), vec![at_join], "delay {delay}");
            w.step_until(41_000);
            assert_eq!(gpus_of(&w), vec![Some("2".to_string())], "delay {delay}");
        }
    }
}
