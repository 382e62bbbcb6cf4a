//! The changes the provider asks for when the core resizes a group: new replica counts and
//! delete-machine annotations, as data for the shell to apply (through the scale subresource in
//! the live cluster, by editing objects in the simulated world).
//!
//! It decides whether a resize is allowed (within min and max, nodes of this group only, no
//! existing node removed by a target decrease) and which objects change. It never applies a
//! change to a cluster; [`apply`] only edits an in-memory store.

use autoscaler_model::Node;
use autoscaler_model::ObjectKey;
use autoscaler_model::ObjectStore;
use serde_json::{Map, Value};

use crate::config::ClusterApiConfig;
use crate::provider::{ClusterApiProvider, MachineInfo, ScalableResource};

/// Value written into the delete-machine annotation (Cluster API and OpenShift only look at its
/// presence; upstream writes a timestamp, which this crate cannot read).
pub const DELETE_MACHINE_VALUE: &str = "cluster-autoscaler";

/// One change to one object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ObjectChange {
    /// Set `spec.replicas` of a scalable resource (the live shell patches its scale subresource),
    /// on the condition that the resource is still the version the count was decided from.
    SetReplicas {
        /// The MachineDeployment, MachineSet or MachinePool.
        key: ObjectKey,
        /// Its `apiVersion` as found.
        api_version: String,
        /// New replica count.
        replicas: i64,
        /// What the count was decided from: the precondition, and how to decide again on a
        /// conflict.
        base: ReplicasBase,
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

/// What a new replica count was decided from. The write carries `resource_version` as a
/// precondition (as client-go's scale client sends the Scale it read), so a change someone else
/// made in between is never overwritten: the API server answers 409 Conflict, and the writer
/// reads the resource again and asks [`ReplicasBase::rebase`] what to write now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicasBase {
    /// `metadata.resourceVersion` of the resource as seen; `None` (no precondition) only when
    /// the object seen had none.
    pub resource_version: Option<String>,
    /// `spec.replicas` as seen.
    pub replicas: i64,
    /// The group's min size as seen.
    pub min: i64,
    /// The group's max size as seen.
    pub max: i64,
}

/// Why a replica count decided from an older version of its resource is not written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RebaseError {
    /// A decrease whose replicas someone else changed: it went with delete-machine marks (or
    /// no Machine may go), which the other change may already have used up.
    #[error(
        "replicas changed from {seen} to {now} since the decrease to {target} was decided; it is decided again from the new count"
    )]
    Decrease {
        /// Replicas the decision saw.
        seen: i64,
        /// Replicas now.
        now: i64,
        /// The count decided.
        target: i64,
    },
    /// An increase that on the new count would leave min..max.
    #[error(
        "replicas changed from {seen} to {now} since the increase by {delta} was decided, which would now make {target}, outside {min}..{max}"
    )]
    OutOfBounds {
        /// Replicas the decision saw.
        seen: i64,
        /// Replicas now.
        now: i64,
        /// The increase decided.
        delta: i64,
        /// What it would make now.
        target: i64,
        /// Min size.
        min: i64,
        /// Max size.
        max: i64,
    },
}

impl ReplicasBase {
    /// The count to write for a decided `target` now that the resource has `now` replicas (read
    /// again after a conflict). Only the version moved (`now` is what the decision saw): the
    /// same `target`. An increase whose base someone else changed is the same increase on the
    /// new count, whole or not at all (never part of an atomic scale-up), within min..max. A
    /// decrease is never re-applied on another count: the Machines its marks chose may already
    /// be gone with the other change, so a further decrease would take one more.
    pub fn rebase(&self, target: i64, now: i64) -> Result<i64, RebaseError> {
        if now == self.replicas {
            return Ok(target);
        }
        let delta = target.saturating_sub(self.replicas);
        if delta <= 0 {
            return Err(RebaseError::Decrease {
                seen: self.replicas,
                now,
                target,
            });
        }
        let rebased = now.saturating_add(delta);
        if rebased > self.max || rebased < self.min {
            return Err(RebaseError::OutOfBounds {
                seen: self.replicas,
                now,
                delta,
                target: rebased,
                min: self.min,
                max: self.max,
            });
        }
        Ok(rebased)
    }
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
    /// A replica count decided from another version of its resource.
    #[error("{key}: the object has changed since version {wanted} the change was decided from")]
    Conflict {
        /// The object.
        key: ObjectKey,
        /// The version the change was decided from.
        wanted: String,
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
            base: ReplicasBase {
                resource_version: r.resource_version.clone(),
                replicas: r.replicas,
                min: delta_i64(r.min_size),
                max: delta_i64(r.max_size),
            },
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
                Some(m) if m.state == autoscaler_model::InstanceState::Deleting => {}
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
            if m.state == autoscaler_model::InstanceState::Deleting {
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
            .filter(|m| m.state != autoscaler_model::InstanceState::Deleting)
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
        if let ObjectChange::SetReplicas {
            base:
                ReplicasBase {
                    resource_version: Some(wanted),
                    ..
                },
            ..
        } = c
        {
            let stored = obj
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str);
            if stored.is_some_and(|rv| rv != wanted) {
                return Err(ApplyError::Conflict {
                    key: key.clone(),
                    wanted: wanted.clone(),
                });
            }
        }
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

    fn base(replicas: i64) -> ReplicasBase {
        ReplicasBase {
            resource_version: Some("7".into()),
            replicas,
            min: 1,
            max: 5,
        }
    }

    #[test]
    fn a_conflict_keeps_a_count_whose_base_did_not_move() {
        assert_eq!(base(2).rebase(4, 2), Ok(4));
        assert_eq!(base(3).rebase(1, 3), Ok(1));
    }

    #[test]
    fn an_increase_is_reapplied_whole_on_the_new_count_within_the_bounds() {
        // +2 decided on 2; someone else made it 3: +2 on 3.
        assert_eq!(base(2).rebase(4, 3), Ok(5));
        // ... made it 1 (a scale-down of theirs): still +2.
        assert_eq!(base(2).rebase(4, 1), Ok(3));
        // +2 on 4 would be 6 > max 5: nothing, not +1.
        assert_eq!(
            base(2).rebase(4, 4),
            Err(RebaseError::OutOfBounds {
                seen: 2,
                now: 4,
                delta: 2,
                target: 6,
                min: 1,
                max: 5
            })
        );
    }

    #[test]
    fn a_decrease_is_never_reapplied_on_another_count() {
        let e = base(3).rebase(2, 2).unwrap_err();
        assert_eq!(
            e,
            RebaseError::Decrease {
                seen: 3,
                now: 2,
                target: 2
            }
        );
        assert!(e.to_string().contains("from 3 to 2"), "{e}");
        assert!(base(3).rebase(2, 4).is_err());
    }

    #[test]
    fn apply_refuses_a_count_decided_from_another_version() {
        let mut s = ObjectStore::new();
        let key = s
            .insert(
                json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
                       "metadata": {"name": "md", "namespace": "ns", "resourceVersion": "8"},
                       "spec": {"replicas": 2}}),
                "t",
            )
            .unwrap();
        let set = |rv: &str| ObjectChange::SetReplicas {
            key: key.clone(),
            api_version: String::new(),
            replicas: 3,
            base: ReplicasBase {
                resource_version: Some(rv.into()),
                ..base(2)
            },
        };
        let e = apply(&mut s, &[set("7")]).unwrap_err();
        assert!(matches!(e, ApplyError::Conflict { .. }), "{e}");
        assert_eq!(
            s.get(&key).unwrap().pointer("/spec/replicas"),
            Some(&json!(2))
        );
        apply(&mut s, &[set("8")]).unwrap();
        assert_eq!(
            s.get(&key).unwrap().pointer("/spec/replicas"),
            Some(&json!(3))
        );
    }

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
            base: ReplicasBase {
                resource_version: None,
                ..base(3)
            },
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
                base: base(2),
            }],
        )
        .unwrap_err();
        assert_eq!(e.to_string(), "Machine ns/gone is not in the store");
    }
}
