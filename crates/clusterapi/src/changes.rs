//! The changes the provider asks for when the core resizes a group: new replica counts and
//! delete-machine annotations, as data for the shell to apply (through the scale subresource in
//! the live cluster, by editing objects in the simulated world).
//!
//! It decides whether a resize is allowed (within min and max, nodes of this group only, no
//! existing node removed by a target decrease) and which objects change. It never applies a
//! change to a cluster; [`apply`] only edits an in-memory store.

use autoscaler_core::Node;
use autoscaler_core::ObjectStore;
use autoscaler_core::model::store::ObjectKey;
use serde_json::{Map, Value};

use crate::config::ClusterApiConfig;
use crate::provider::{ClusterApiProvider, MachineInfo, ScalableResource};

/// Value written into the delete-machine annotation (Cluster API and OpenShift only look at its
/// presence; upstream writes a timestamp, which this crate cannot read).
pub const DELETE_MACHINE_VALUE: &str = "cluster-autoscaler";

/// One change to one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObjectChange {
    /// Set `spec.replicas` of a scalable resource (the live shell patches its scale subresource).
    SetReplicas {
        /// The MachineDeployment, MachineSet or MachinePool.
        key: ObjectKey,
        /// Its `apiVersion` as found.
        api_version: String,
        /// New replica count.
        replicas: i64,
    },
    /// Set an annotation on a Machine.
    AnnotateMachine {
        /// The Machine.
        key: ObjectKey,
        /// Its `apiVersion` as found.
        api_version: String,
        /// Annotation key.
        annotation: String,
        /// Annotation value.
        value: String,
    },
    /// Delete a Machine object: its owner replaces it. Used for a broken instance (failed or
    /// never registered) of a group at its min size, where lowering the replicas is not allowed.
    DeleteMachine {
        /// The Machine.
        key: ObjectKey,
        /// Its `apiVersion` as found.
        api_version: String,
    },
    /// Remove an annotation from a Machine (to roll back a deletion mark when lowering the
    /// replicas failed).
    RemoveMachineAnnotation {
        /// The Machine.
        key: ObjectKey,
        /// Its `apiVersion` as found.
        api_version: String,
        /// Annotation key.
        annotation: String,
    },
}

/// Why a resize was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// No discovered group has this id.
    #[error("no node group {group}")]
    UnknownGroup {
        /// The id asked for.
        group: String,
    },
    /// A resize by zero.
    #[error("node group {group}: a size change must be positive")]
    ZeroDelta {
        /// Group.
        group: String,
    },
    /// The new size would exceed the max.
    #[error("node group {group}: size {target} would exceed the max size {max}")]
    AboveMax {
        /// Group.
        group: String,
        /// Size asked for.
        target: i64,
        /// Max size.
        max: usize,
    },
    /// The new size would go below the min.
    #[error("node group {group}: size {target} would go below the min size {min}")]
    BelowMin {
        /// Group.
        group: String,
        /// Size asked for.
        target: i64,
        /// Min size.
        min: usize,
    },
    /// A node to delete is not in this group.
    #[error("node {node} does not belong to node group {group}{}", other.as_ref().map(|o| format!(" (it is in {o})")).unwrap_or_default())]
    NotInGroup {
        /// Group.
        group: String,
        /// Node name.
        node: String,
        /// The group it is in, if any.
        other: Option<String>,
    },
    /// A target decrease would go below the Machines that exist.
    #[error(
        "node group {group}: lowering replicas from {replicas} by {delta} would delete existing machines ({machines} exist and are not being deleted)"
    )]
    WouldDeleteMachines {
        /// Group.
        group: String,
        /// Current replicas.
        replicas: i64,
        /// Decrease asked for.
        delta: usize,
        /// Machines that exist and are not being deleted.
        machines: usize,
    },
}

/// Why [`apply`] could not apply a change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The object is not in the store.
    #[error("{key} is not in the store")]
    NotFound {
        /// The object.
        key: ObjectKey,
    },
    /// The object's `metadata` or `spec` is not a JSON object.
    #[error("{key}: field {field} is not an object")]
    Malformed {
        /// The object.
        key: ObjectKey,
        /// The field.
        field: &'static str,
    },
}

fn delta_i64(delta: usize) -> i64 {
    i64::try_from(delta).unwrap_or(i64::MAX)
}

impl ClusterApiProvider {
    fn find(&self, group: &str) -> Result<&ScalableResource, ProviderError> {
        self.resource(group)
            .ok_or_else(|| ProviderError::UnknownGroup {
                group: group.to_string(),
            })
    }

    fn set_replicas(r: &ScalableResource, replicas: i64) -> ObjectChange {
        ObjectChange::SetReplicas {
            key: r.key.clone(),
            api_version: r.api_version.clone(),
            replicas,
        }
    }

    /// Grows `group` by `delta` nodes: one `SetReplicas`; refused beyond the max.
    pub fn increase_size(
        &self,
        group: &str,
        delta: usize,
    ) -> Result<Vec<ObjectChange>, ProviderError> {
        let r = self.find(group)?;
        if delta == 0 {
            return Err(ProviderError::ZeroDelta {
                group: group.into(),
            });
        }
        let target = r.replicas.saturating_add(delta_i64(delta));
        if target > delta_i64(r.max_size) {
            return Err(ProviderError::AboveMax {
                group: group.into(),
                target,
                max: r.max_size,
            });
        }
        Ok(vec![Self::set_replicas(r, target)])
    }

    /// Deletes `nodes` of `group`: marks each one's Machine with `<group>/delete-machine`, then
    /// lowers the replicas by the number marked (Machines already being deleted are neither
    /// marked nor counted). Refused when a node is of another group or the size would go below
    /// the min.
    pub fn delete_nodes(
        &self,
        group: &str,
        nodes: &[&Node],
    ) -> Result<Vec<ObjectChange>, ProviderError> {
        let r = self.find(group)?;
        let min = delta_i64(r.min_size);
        if r.replicas <= min {
            return Err(ProviderError::BelowMin {
                group: group.into(),
                target: r.replicas - delta_i64(nodes.len()),
                min: r.min_size,
            });
        }
        let mut picked: Vec<&MachineInfo> = Vec::new();
        let mut pool_only = 0usize;
        for node in nodes {
            let in_group = self.group_id_of(node).map(|id| id.as_str().to_string());
            if in_group.as_deref() != Some(group) {
                return Err(ProviderError::NotInGroup {
                    group: group.into(),
                    node: node.name.as_str().to_string(),
                    other: in_group,
                });
            }
            let machine = r.machines.iter().find(|m| {
                (node.provider_id.is_some() && m.provider_id == node.provider_id)
                    || m.node_name.as_deref() == Some(node.name.as_str())
            });
            match machine {
                Some(m) if picked.iter().any(|p| std::ptr::eq(*p, &**m)) => {}
                Some(m)
                    if m.state == autoscaler_core::model::node_group::InstanceState::Deleting => {}
                Some(m) => picked.push(m),
                None => pool_only += 1,
            }
        }
        let remove = delta_i64(picked.len() + pool_only);
        let target = r.replicas - remove;
        if target < min {
            return Err(ProviderError::BelowMin {
                group: group.into(),
                target,
                min: r.min_size,
            });
        }
        let key = ClusterApiConfig::for_group(&r.key.group).delete_machine_key();
        let mut out: Vec<ObjectChange> = picked
            .iter()
            .filter_map(|m| {
                Some(ObjectChange::AnnotateMachine {
                    key: m.key.clone()?,
                    api_version: m.api_version.clone(),
                    annotation: key.clone(),
                    value: DELETE_MACHINE_VALUE.to_string(),
                })
            })
            .collect();
        if remove > 0 {
            out.push(Self::set_replicas(r, target));
        }
        Ok(out)
    }

    /// Removes broken instances of `group` (failed, or never registered), by instance id as the
    /// core sees them ([`MachineInfo::instance_id`]). While the group stays at or above its min
    /// size, each Machine is marked with `<group>/delete-machine` and the replicas are lowered by
    /// that many; an instance whose removal would go below the min is deleted outright instead,
    /// so its owner replaces it and the group keeps its size. Unknown ids and Machines already
    /// being deleted are skipped.
    pub fn delete_instances(
        &self,
        group: &str,
        instance_ids: &[&str],
    ) -> Result<Vec<ObjectChange>, ProviderError> {
        let r = self.find(group)?;
        let key = ClusterApiConfig::for_group(&r.key.group).delete_machine_key();
        let min = delta_i64(r.min_size);
        let mut target = r.replicas;
        let mut marks = Vec::new();
        let mut deletes = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        for id in instance_ids {
            if seen.contains(id) {
                continue;
            }
            seen.push(id);
            let Some(m) = r.machines.iter().find(|m| &*m.instance_id == *id) else {
                continue;
            };
            if m.state == autoscaler_core::model::node_group::InstanceState::Deleting {
                continue;
            }
            let Some(machine) = m.key.clone() else {
                continue;
            };
            if target > min {
                target -= 1;
                marks.push(ObjectChange::AnnotateMachine {
                    key: machine,
                    api_version: m.api_version.clone(),
                    annotation: key.clone(),
                    value: DELETE_MACHINE_VALUE.to_string(),
                });
            } else {
                deletes.push(ObjectChange::DeleteMachine {
                    key: machine,
                    api_version: m.api_version.clone(),
                });
            }
        }
        let mut out = marks;
        if target != r.replicas {
            out.push(Self::set_replicas(r, target));
        }
        out.extend(deletes);
        Ok(out)
    }

    /// Removes this autoscaler's delete-machine mark from `machine` of `group` (one of
    /// [`ScalableResource::stale_marks`]); refused for a Machine not in the group.
    pub fn unmark(
        &self,
        group: &str,
        machine: &ObjectKey,
    ) -> Result<Vec<ObjectChange>, ProviderError> {
        let r = self.find(group)?;
        let m = r
            .machines
            .iter()
            .find(|m| m.key.as_ref() == Some(machine))
            .ok_or_else(|| ProviderError::NotInGroup {
                group: group.into(),
                node: machine.name.clone(),
                other: None,
            })?;
        Ok(vec![ObjectChange::RemoveMachineAnnotation {
            key: machine.clone(),
            api_version: m.api_version.clone(),
            annotation: ClusterApiConfig::for_group(&r.key.group).delete_machine_key(),
        }])
    }

    /// Lowers the target of `group` by `delta` without removing any existing machine: refused
    /// below the number of Machines that exist and are not being deleted (with or without a
    /// node: a set picks which Machine goes, and it may pick a healthy one), or below the min.
    pub fn decrease_target_size(
        &self,
        group: &str,
        delta: usize,
    ) -> Result<Vec<ObjectChange>, ProviderError> {
        let r = self.find(group)?;
        if delta == 0 {
            return Err(ProviderError::ZeroDelta {
                group: group.into(),
            });
        }
        let live = r
            .machines
            .iter()
            .filter(|m| m.state != autoscaler_core::model::node_group::InstanceState::Deleting)
            .count();
        let target = r.replicas - delta_i64(delta);
        if target < delta_i64(live) {
            return Err(ProviderError::WouldDeleteMachines {
                group: group.into(),
                replicas: r.replicas,
                delta,
                machines: live,
            });
        }
        if target < delta_i64(r.min_size) {
            return Err(ProviderError::BelowMin {
                group: group.into(),
                target,
                min: r.min_size,
            });
        }
        Ok(vec![Self::set_replicas(r, target)])
    }
}

/// Applies `changes` to an in-memory store, in order, editing the objects' JSON. Stops at the
/// first change that cannot be applied; earlier ones stay applied.
pub fn apply(store: &mut ObjectStore, changes: &[ObjectChange]) -> Result<(), ApplyError> {
    for c in changes {
        if let ObjectChange::DeleteMachine { key, .. } = c {
            store
                .remove(key)
                .ok_or_else(|| ApplyError::NotFound { key: key.clone() })?;
            continue;
        }
        let (key, path, field): (&ObjectKey, [&str; 2], &'static str) = match c {
            ObjectChange::DeleteMachine { .. } => continue,
            ObjectChange::SetReplicas { key, .. } => (key, ["spec", "replicas"], "spec"),
            ObjectChange::AnnotateMachine {
                key, annotation, ..
            }
            | ObjectChange::RemoveMachineAnnotation {
                key, annotation, ..
            } => (
                key,
                ["metadata", annotation.as_str()],
                "metadata.annotations",
            ),
        };
        let mut obj = store
            .get(key)
            .map(|o| (**o).clone())
            .ok_or_else(|| ApplyError::NotFound { key: key.clone() })?;
        let malformed = || ApplyError::Malformed {
            key: key.clone(),
            field,
        };
        let root = obj.as_object_mut().ok_or_else(malformed)?;
        let outer = root
            .entry(path[0])
            .or_insert_with(|| Value::Object(Map::new()));
        if outer.is_null() {
            *outer = Value::Object(Map::new());
        }
        let outer = outer.as_object_mut().ok_or_else(malformed)?;
        match c {
            ObjectChange::SetReplicas { replicas, .. } => {
                outer.insert("replicas".into(), Value::from(*replicas));
            }
            ObjectChange::AnnotateMachine { value, .. } => {
                let ann = outer
                    .entry("annotations")
                    .or_insert_with(|| Value::Object(Map::new()));
                if ann.is_null() {
                    *ann = Value::Object(Map::new());
                }
                ann.as_object_mut()
                    .ok_or_else(malformed)?
                    .insert(path[1].to_string(), Value::from(value.as_str()));
            }
            ObjectChange::DeleteMachine { .. } => {}
            ObjectChange::RemoveMachineAnnotation { .. } => {
                if let Some(ann) = outer.get_mut("annotations").and_then(Value::as_object_mut) {
                    ann.remove(path[1]);
                }
            }
        }
        // The identity did not change, so the key is the same and insertion cannot fail on it.
        store
            .insert(obj, "apply")
            .map_err(|_| ApplyError::Malformed {
                key: key.clone(),
                field: "metadata",
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn apply_edits_json_and_names_missing_objects() {
        let mut s = ObjectStore::new();
        let key = s
            .insert(
                json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
                       "metadata": {"name": "m", "namespace": "ns", "annotations": null}}),
                "t",
            )
            .unwrap();
        let annotate = ObjectChange::AnnotateMachine {
            key: key.clone(),
            api_version: "cluster.x-k8s.io/v1beta1".into(),
            annotation: "cluster.x-k8s.io/delete-machine".into(),
            value: DELETE_MACHINE_VALUE.into(),
        };
        let resize = ObjectChange::SetReplicas {
            key: key.clone(),
            api_version: String::new(),
            replicas: 4,
        };
        apply(&mut s, &[annotate, resize]).unwrap();
        let obj = s.get(&key).unwrap();
        assert_eq!(
            obj.pointer("/metadata/annotations/cluster.x-k8s.io~1delete-machine"),
            Some(&json!("cluster-autoscaler"))
        );
        assert_eq!(obj.pointer("/spec/replicas"), Some(&json!(4)));
        let remove = ObjectChange::RemoveMachineAnnotation {
            key: key.clone(),
            api_version: String::new(),
            annotation: "cluster.x-k8s.io/delete-machine".into(),
        };
        apply(&mut s, &[remove]).unwrap();
        assert_eq!(
            s.get(&key).unwrap().pointer("/metadata/annotations"),
            Some(&json!({}))
        );
        let mut missing = key.clone();
        missing.name = "gone".into();
        let e = apply(
            &mut s,
            &[ObjectChange::SetReplicas {
                key: missing,
                api_version: String::new(),
                replicas: 1,
            }],
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "Machine ns/gone is not in the store");
    }
}
