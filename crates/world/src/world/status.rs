//! The status subresource of the capacity-on-request kinds (ProvisioningRequest and
//! CapacityBuffer, CRDs served with `subresources.status`), as the API server keeps it: a create
//! or an update of the object itself never sets `status` (a create drops it, an update keeps the
//! stored one); only a write to `/status` changes it, and that write changes nothing else. A
//! write carrying a `resourceVersion` the object no longer has is a 409 Conflict.
//!
//! It decides nothing about the status' content: the autoscaler writes it.

use autoscaler_model::ObjectKey;
use serde_json::Value;

use super::World;
use crate::cluster::WorldError;

/// The API group of the kinds with a status subresource here.
const GROUP: &str = "autoscaling.x-k8s.io";

/// Whether objects of `key`'s kind have a status subresource in the world.
pub(super) fn has_status_subresource(key: &ObjectKey) -> bool {
    key.group.as_str() == GROUP
        && matches!(key.kind.as_str(), "ProvisioningRequest" | "CapacityBuffer")
}

impl World {
    /// `obj` (of a kind with a status subresource) as a write to the object itself stores it:
    /// with the stored status, or none for a new object.
    pub(super) fn without_status_write(&self, key: &ObjectKey, mut obj: Value) -> Value {
        let stored = self
            .cluster
            .store
            .get(key)
            .and_then(|o| o.get("status").cloned());
        if let Some(map) = obj.as_object_mut() {
            match stored {
                Some(s) => {
                    map.insert("status".into(), s);
                }
                None => {
                    map.remove("status");
                }
            }
        }
        obj
    }

    /// Writes `status` through the status subresource of the object `key` (a
    /// ProvisioningRequest or CapacityBuffer), on the condition that it is still at
    /// `resource_version`: only `status` changes (and the object's version).
    pub fn write_status(
        &mut self,
        key: &ObjectKey,
        status: Value,
        resource_version: &str,
    ) -> Result<(), WorldError> {
        if !has_status_subresource(key) {
            return Err(WorldError::NotFound(format!("{key}/status")));
        }
        let mut obj = self
            .cluster
            .get_owned(key)
            .ok_or_else(|| WorldError::NotFound(key.to_string()))?;
        let stored = obj
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if stored != resource_version {
            return Err(WorldError::Conflict {
                object: key.to_string(),
                wanted: resource_version.to_string(),
                stored,
            });
        }
        obj["status"] = status;
        self.cluster.put(obj)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::{World, WorldConfig, WorldError, object_key};

    fn request(status: serde_json::Value) -> serde_json::Value {
        json!({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
               "metadata": {"name": "train", "namespace": "batch"},
               "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                        "podSets": [{"podTemplateRef": {"name": "w"}, "count": 1}]},
               "status": status})
    }

    #[test]
    fn only_a_status_write_changes_a_requests_status_and_a_stale_one_conflicts() {
        let mut w = World::new(WorldConfig::default());
        let forged = json!({"conditions": [{"type": "Provisioned", "status": "True"}]});
        let k = w.apply(request(forged.clone())).unwrap();
        assert_eq!(w.objects().get(&k).unwrap().get("status"), None);
        let rv = |w: &World| {
            w.objects().get(&k).unwrap()["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_string()
        };
        let first = rv(&w);
        let ours = json!({"conditions": [{"type": "Accepted", "status": "True"}]});
        w.write_status(&k, ours.clone(), &first).unwrap();
        assert_eq!(w.objects().get(&k).unwrap()["status"], ours);
        // An update of the object keeps the stored status whatever it carries.
        w.replace_object(request(forged.clone())).unwrap();
        assert_eq!(w.objects().get(&k).unwrap()["status"], ours);
        // A write against the first version is refused and changes nothing.
        let e = w.write_status(&k, forged, &first).unwrap_err();
        assert!(matches!(e, WorldError::Conflict { .. }), "{e}");
        assert_eq!(w.objects().get(&k).unwrap()["status"], ours);
        // Other kinds have no status subresource here.
        let cm = object_key("", "ConfigMap", "batch", "x");
        assert!(w.write_status(&cm, json!({}), "1").is_err());
    }
}
