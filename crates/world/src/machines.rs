//! The Cluster API machine controller (`cluster.x-k8s.io/v1beta1`), as strict as the real one: a
//! MachineDeployment owns one MachineSet, which owns Machines up to `spec.replicas`; a Machine
//! becomes a Ready Node after a provisioning delay drawn from its group's distribution, unless an
//! injected fault says otherwise.
//!
//! It decides which Machines to create and which to delete when the replicas drop, by the set's
//! delete policy as Cluster API ranks them (`Random` by default, `Newest`, `Oldest`): Machines
//! already being deleted first, then marked (`cluster.x-k8s.io/delete-machine`) and unhealthy ones
//! (no node, failed, node not Ready), then the rest, ties by name. An unmarked healthy Machine
//! picked this way is recorded ([`World::unmarked_healthy_deletions`]): that is what a careless
//! target decrease costs on a real cluster. Deleting a Machine takes time: it gets a
//! `deletionTimestamp`, its Node is cordoned and drained through the Eviction API (a
//! PodDisruptionBudget holds the drain, as Cluster API's does), and only then do the Node and the
//! Machine go. Machines being deleted still count against the replicas until they are gone. A
//! configurable delay lets the set react late to a change of replicas, as a busy or restarting
//! controller does. It never talks to a cloud.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::objects::key;
use crate::time::SimTime;
use crate::world::{FaultKind, NsName, World, WorldError};

/// The API group of Cluster API.
pub const CAPI_GROUP: &str = "cluster.x-k8s.io";
/// The annotation that marks a Machine to be deleted first when its set shrinks.
pub const DELETE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/delete-machine";
/// Prefix of the scale-from-zero capacity annotations on a MachineDeployment.
pub const CAPACITY_PREFIX: &str = "capacity.cluster-autoscaler.kubernetes.io/";
/// Annotation giving a group's minimum size to the autoscaler.
pub const MIN_SIZE_ANNOTATION: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";
/// Annotation giving a group's maximum size to the autoscaler.
pub const MAX_SIZE_ANNOTATION: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";

/// The world's record of a MachineDeployment it reconciles.
#[derive(Clone, Debug)]
pub(crate) struct GroupState {
    /// The MachineSet's name.
    pub ms_name: String,
}

/// The world's record of a Machine.
#[derive(Clone, Debug)]
pub(crate) struct MachineState {
    /// The MachineDeployment.
    pub group: NsName,
    /// Creation order.
    pub seq: u64,
    /// The machine's uid (stale provisioning events are ignored).
    pub uid: String,
    /// The Node, once registered.
    pub node: Option<String>,
    /// Whether it failed to provision.
    pub failed: bool,
    /// Whether it is being deleted (has a `deletionTimestamp`).
    pub deleting: bool,
    /// Creation time.
    pub created: SimTime,
}

/// A Machine the set deleted although it was healthy and carried no delete-machine annotation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnmarkedDeletion {
    /// When the set picked it.
    pub at: SimTime,
    /// The MachineDeployment.
    pub group: String,
    /// The Machine.
    pub machine: String,
    /// Its Node.
    pub node: String,
}

/// Cluster API's MachineSet delete policies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DeletePolicy {
    /// Unhealthy and marked Machines first, then any (ties by name). Cluster API's default.
    #[default]
    Random,
    /// Unhealthy and marked Machines first, then the newest.
    Newest,
    /// Unhealthy and marked Machines first, then the oldest.
    Oldest,
}

impl DeletePolicy {
    /// Reads `Random`, `Newest` or `Oldest` (empty: `Random`).
    pub fn parse(s: &str) -> Option<DeletePolicy> {
        match s {
            "" | "Random" => Some(DeletePolicy::Random),
            "Newest" => Some(DeletePolicy::Newest),
            "Oldest" => Some(DeletePolicy::Oldest),
            _ => None,
        }
    }

    /// Cluster API's delete priority (higher goes first) of a Machine `age_ms` old.
    fn priority(self, deleting: bool, marked: bool, healthy: bool, age_ms: SimTime) -> f64 {
        const MUST: f64 = 100.0;
        if deleting {
            return MUST;
        }
        // Creation time mapped onto 0..100 over about ten days, as Cluster API does.
        let oldest = MUST * (1.0 - (-(age_ms as f64 / 1000.0) / 864_000.0).exp());
        match self {
            DeletePolicy::Random if marked || !healthy => 50.0,
            DeletePolicy::Random => 20.0,
            _ if marked || !healthy => MUST,
            DeletePolicy::Newest => MUST - oldest,
            DeletePolicy::Oldest => oldest,
        }
    }
}

/// The shape of a node group as the MachineDeployment describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeGroupSpec {
    /// Namespace of the Cluster API objects.
    pub namespace: String,
    /// MachineDeployment name (also the group's name for faults and delays).
    pub name: String,
    /// Initial `spec.replicas`.
    pub replicas: u32,
    /// Minimum size annotation for the autoscaler.
    pub min_size: u32,
    /// Maximum size annotation for the autoscaler.
    pub max_size: u32,
    /// CPU capacity of a node (quantity, e.g. `"4"`).
    pub cpu: String,
    /// Memory capacity of a node (quantity, e.g. `"16Gi"`).
    pub memory: String,
    /// Maximum pods per node.
    pub max_pods: u32,
    /// GPU resource name and count, if the nodes have GPUs.
    pub gpu: Option<(String, u32)>,
    /// Labels of the machine template (and so of the nodes).
    pub labels: BTreeMap<String, String>,
    /// Taints of the nodes as `(key, value, effect)`.
    pub taints: Vec<(String, String, String)>,
    /// The MachineSet's delete policy.
    pub delete_policy: DeletePolicy,
}

impl NodeGroupSpec {
    /// The MachineDeployment object.
    pub fn to_object(&self, cluster: &str) -> Value {
        let mut ann = serde_json::Map::new();
        ann.insert(MIN_SIZE_ANNOTATION.into(), json!(self.min_size.to_string()));
        ann.insert(MAX_SIZE_ANNOTATION.into(), json!(self.max_size.to_string()));
        ann.insert(format!("{CAPACITY_PREFIX}cpu"), json!(self.cpu));
        ann.insert(format!("{CAPACITY_PREFIX}memory"), json!(self.memory));
        ann.insert(
            format!("{CAPACITY_PREFIX}maxPods"),
            json!(self.max_pods.to_string()),
        );
        if let Some((ty, n)) = &self.gpu {
            ann.insert(format!("{CAPACITY_PREFIX}gpu-type"), json!(ty));
            ann.insert(format!("{CAPACITY_PREFIX}gpu-count"), json!(n.to_string()));
        }
        let taints: Vec<Value> = self
            .taints
            .iter()
            .map(|(k, v, e)| json!({"key": k, "value": v, "effect": e}))
            .collect();
        let mut spec = json!({
            "clusterName": cluster,
            "bootstrap": {"dataSecretName": format!("{}-bootstrap", self.name)},
            "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1beta1", "kind": "SimMachineTemplate", "name": self.name},
        });
        if !taints.is_empty() {
            spec["taints"] = Value::Array(taints);
        }
        let policy = match self.delete_policy {
            DeletePolicy::Random => "Random",
            DeletePolicy::Newest => "Newest",
            DeletePolicy::Oldest => "Oldest",
        };
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachineDeployment",
            "metadata": {"name": self.name, "namespace": self.namespace, "annotations": ann},
            "spec": {
                "clusterName": cluster,
                "replicas": self.replicas,
                "strategy": {"type": "RollingUpdate", "rollingUpdate": {"deletePolicy": policy}},
                "selector": {"matchLabels": {"cluster.x-k8s.io/deployment-name": self.name}},
                "template": {
                    "metadata": {"labels": self.labels},
                    "spec": spec,
                },
            },
        })
    }
}

/// How soon a drain held by a PodDisruptionBudget is tried again.
const DRAIN_RETRY_MS: SimTime = 5_000;

fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

impl World {
    /// Adds a node group: its MachineDeployment, reconciled at once.
    pub fn add_node_group(&mut self, spec: &NodeGroupSpec) -> Result<(), WorldError> {
        let obj = spec.to_object(&self.cfg.cluster_name.clone());
        self.apply(obj)?;
        Ok(())
    }

    /// Sets a MachineDeployment's `spec.replicas` (the scale subresource) and reconciles it.
    /// Fails when the MachineDeployment does not exist or a `ScaleApiError` fault is active.
    pub fn set_replicas(&mut self, namespace: &str, md: &str, n: u32) -> Result<(), WorldError> {
        if self
            .faults
            .iter()
            .any(|f| f.active(md, self.now) && f.kind == FaultKind::ScaleApiError)
        {
            return Err(WorldError::ScaleApi {
                group: format!("{namespace}/{md}"),
            });
        }
        let k = key(CAPI_GROUP, "MachineDeployment", namespace, md);
        let Some(mut obj) = self.get_owned(&k) else {
            return Err(WorldError::NotFound(k.to_string()));
        };
        obj["spec"]["replicas"] = json!(n);
        let generation = obj
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        obj["metadata"]["generation"] = json!(generation + 1);
        self.put(obj)?;
        self.sync_group_later(&(namespace.to_string(), md.to_string()));
        Ok(())
    }

    /// Lets the MachineSet controller act on a change of replicas: at once, or after the
    /// configured sync delay (a busy controller).
    pub(crate) fn sync_group_later(&mut self, g: &NsName) {
        if self.cfg.machine_set_sync_ms == 0 {
            self.reconcile_group(g);
            self.reconcile();
        } else {
            let at = self.now.saturating_add(self.cfg.machine_set_sync_ms);
            self.schedule(at, crate::world::Event::SyncGroup { group: g.clone() });
        }
    }

    /// A `ReplicasChanged` fault: the replicas of every MachineDeployment named by the fault
    /// change by its delta, as `kubectl scale` would do.
    pub(crate) fn external_scale(&mut self, index: usize) {
        let Some(fault) = self.faults.get(index).cloned() else {
            return;
        };
        let FaultKind::ReplicasChanged { delta } = fault.kind else {
            return;
        };
        let targets: Vec<NsName> = self
            .groups
            .keys()
            .filter(|g| g.1 == fault.group)
            .cloned()
            .collect();
        for g in targets {
            let k = key(CAPI_GROUP, "MachineDeployment", &g.0, &g.1);
            let Some(mut obj) = self.get_owned(&k) else {
                continue;
            };
            let now = obj
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            obj["spec"]["replicas"] = json!(now.saturating_add(delta).max(0));
            if self.put(obj).is_ok() {
                self.sync_group_later(&g);
            }
        }
    }

    /// Machines the set deleted although they were healthy and unmarked, oldest first.
    pub fn unmarked_healthy_deletions(&self) -> &[UnmarkedDeletion] {
        &self.unmarked_deletions
    }

    /// Sets an annotation on a Machine (the autoscaler marks machines to delete this way).
    pub fn annotate_machine(
        &mut self,
        namespace: &str,
        machine: &str,
        annotation: &str,
        value: &str,
    ) -> Result<(), WorldError> {
        let k = key(CAPI_GROUP, "Machine", namespace, machine);
        let Some(mut obj) = self.get_owned(&k) else {
            return Err(WorldError::NotFound(k.to_string()));
        };
        if !obj["metadata"]["annotations"].is_object() {
            obj["metadata"]["annotations"] = json!({});
        }
        obj["metadata"]["annotations"][annotation] = json!(value);
        self.put(obj)?;
        Ok(())
    }

    /// Names of a group's Machines, oldest first.
    pub fn machines_of(&self, namespace: &str, md: &str) -> Vec<String> {
        let g = (namespace.to_string(), md.to_string());
        let mut v: Vec<(u64, String)> = self
            .machines
            .iter()
            .filter(|(_, m)| m.group == g)
            .map(|(k, m)| (m.seq, k.1.clone()))
            .collect();
        v.sort();
        v.into_iter().map(|(_, n)| n).collect()
    }

    /// Makes the MachineSet and Machines of a MachineDeployment match its `spec.replicas`,
    /// and writes their statuses.
    pub(crate) fn reconcile_group(&mut self, g: &NsName) {
        let md_key = key(CAPI_GROUP, "MachineDeployment", &g.0, &g.1);
        let Some(md) = self.store.get(&md_key).cloned() else {
            return;
        };
        let replicas = md
            .pointer("/spec/replicas")
            .and_then(Value::as_u64)
            .unwrap_or(1);
        let ms_name = match self.groups.get(g) {
            Some(s) => s.ms_name.clone(),
            None => {
                let name = format!("{}-{}", g.1, self.suffix());
                self.groups.insert(
                    g.clone(),
                    GroupState {
                        ms_name: name.clone(),
                    },
                );
                name
            }
        };
        let policy = md
            .pointer("/spec/strategy/rollingUpdate/deletePolicy")
            .and_then(Value::as_str)
            .and_then(DeletePolicy::parse)
            .unwrap_or_default();
        let members: Vec<(NsName, f64, bool, bool)> = self
            .machines
            .iter()
            .filter(|(_, m)| m.group == *g)
            .map(|(k, m)| {
                let marked = self
                    .store
                    .get(&key(CAPI_GROUP, "Machine", &k.0, &k.1))
                    .and_then(|o| o.pointer("/metadata/annotations"))
                    .and_then(|a| a.get(DELETE_MACHINE_ANNOTATION))
                    .is_some();
                let healthy = !m.failed && m.node.as_deref().is_some_and(|n| self.node_ready(n));
                let age = self.now.saturating_sub(m.created);
                let priority = policy.priority(m.deleting, marked, healthy, age);
                (k.clone(), priority, marked, healthy)
            })
            .collect();
        // Machines being deleted still count until they are gone, as in Cluster API.
        let have = members.len() as u64;
        if have < replicas {
            for _ in have..replicas {
                self.create_machine(g, &md, &ms_name);
            }
        } else if have > replicas {
            let mut ranked = members;
            ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.1.cmp(&b.0.1)));
            let excess = (have - replicas) as usize;
            for (k, _, marked, healthy) in ranked.into_iter().take(excess) {
                if healthy && !marked {
                    let node = self
                        .machines
                        .get(&k)
                        .and_then(|m| m.node.clone())
                        .unwrap_or_default();
                    self.unmarked_deletions.push(UnmarkedDeletion {
                        at: self.now,
                        group: g.1.clone(),
                        machine: k.1.clone(),
                        node,
                    });
                }
                self.begin_machine_deletion(&k);
            }
        }
        self.write_group_status(g, &md, &ms_name, replicas);
    }

    fn write_group_status(&mut self, g: &NsName, md: &Value, ms_name: &str, replicas: u64) {
        let (mut total, mut ready) = (0u64, 0u64);
        for m in self.machines.values().filter(|m| m.group == *g) {
            total += 1;
            if m.node.is_some() {
                ready += 1;
            }
        }
        let md_uid = str_at(md, "/metadata/uid").unwrap_or("").to_string();
        let cluster = self.cfg.cluster_name.clone();
        let mut template = md
            .pointer("/spec/template")
            .cloned()
            .unwrap_or_else(|| json!({}));
        if !template["metadata"]["labels"].is_object() {
            template["metadata"]["labels"] = json!({});
        }
        template["metadata"]["labels"]["cluster.x-k8s.io/deployment-name"] = json!(g.1);
        template["metadata"]["labels"]["cluster.x-k8s.io/set-name"] = json!(ms_name);
        let status = json!({
            "replicas": total,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "fullyLabeledReplicas": total,
            "observedGeneration": 1,
        });
        let ms = json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachineSet",
            "metadata": {
                "name": ms_name,
                "namespace": g.0,
                "labels": {"cluster.x-k8s.io/deployment-name": g.1, "cluster.x-k8s.io/cluster-name": cluster},
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment", "name": g.1, "uid": md_uid, "controller": true, "blockOwnerDeletion": true}],
            },
            "spec": {
                "clusterName": cluster,
                "replicas": replicas,
                "selector": {"matchLabels": {"cluster.x-k8s.io/deployment-name": g.1, "cluster.x-k8s.io/set-name": ms_name}},
                "template": template,
            },
            "status": status,
        });
        let _ = self.put(ms);
        let mut md = (*md).clone();
        let phase = if total < replicas || ready < replicas {
            "ScalingUp"
        } else if total > replicas {
            "ScalingDown"
        } else {
            "Running"
        };
        md["status"] = json!({
            "replicas": total,
            "readyReplicas": ready,
            "availableReplicas": ready,
            "updatedReplicas": total,
            "unavailableReplicas": total.saturating_sub(ready),
            "observedGeneration": md.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
            "phase": phase,
            "selector": format!("cluster.x-k8s.io/deployment-name={}", g.1),
        });
        let _ = self.put(md);
    }

    fn create_machine(&mut self, g: &NsName, md: &Value, ms_name: &str) {
        let name = loop {
            let n = format!("{ms_name}-{}", self.suffix());
            if !self.machines.contains_key(&(g.0.clone(), n.clone())) {
                break n;
            }
        };
        let fault = self
            .faults
            .iter()
            .find(|f| f.active(&g.1, self.now) && f.affects_provisioning())
            .map(|f| f.kind.clone());
        let ms_uid = self
            .store
            .get(&key(CAPI_GROUP, "MachineSet", &g.0, ms_name))
            .and_then(|o| str_at(o, "/metadata/uid").map(str::to_string))
            .unwrap_or_default();
        let mut labels = md
            .pointer("/spec/template/metadata/labels")
            .cloned()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        labels["cluster.x-k8s.io/cluster-name"] = json!(self.cfg.cluster_name);
        labels["cluster.x-k8s.io/deployment-name"] = json!(g.1);
        labels["cluster.x-k8s.io/set-name"] = json!(ms_name);
        let mut spec = md
            .pointer("/spec/template/spec")
            .cloned()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        spec["clusterName"] = json!(self.cfg.cluster_name);
        let status = match &fault {
            Some(FaultKind::Stockout { reason }) => {
                let message = format!("instance could not be created: {reason}");
                let ts = self.store.timestamp(self.now);
                json!({
                    "phase": "Failed",
                    "failureReason": reason,
                    "failureMessage": message,
                    "bootstrapReady": true,
                    "infrastructureReady": false,
                    "v1beta2": {"conditions": [
                        {"type": "InfrastructureReady", "status": "False", "reason": reason, "message": message, "lastTransitionTime": ts},
                        {"type": "Ready", "status": "False", "reason": "NotReady", "message": message, "lastTransitionTime": ts},
                    ]},
                })
            }
            _ => {
                spec["providerID"] = json!(format!("sim:///{name}"));
                json!({"phase": "Provisioned", "bootstrapReady": true, "infrastructureReady": true})
            }
        };
        let obj = json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "Machine",
            "metadata": {
                "name": name,
                "namespace": g.0,
                "labels": labels,
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineSet", "name": ms_name, "uid": ms_uid, "controller": true, "blockOwnerDeletion": true}],
            },
            "spec": spec,
            "status": status,
        });
        if self.put(obj).is_err() {
            return;
        }
        let uid = self
            .store
            .get(&key(CAPI_GROUP, "Machine", &g.0, &name))
            .and_then(|o| str_at(o, "/metadata/uid").map(str::to_string))
            .unwrap_or_default();
        self.machine_seq += 1;
        let failed = matches!(fault, Some(FaultKind::Stockout { .. }));
        self.machines.insert(
            (g.0.clone(), name.clone()),
            MachineState {
                group: g.clone(),
                seq: self.machine_seq,
                uid: uid.clone(),
                node: None,
                failed,
                deleting: false,
                created: self.now,
            },
        );
        let delay = match fault {
            Some(FaultKind::Stockout { .. }) | Some(FaultKind::NeverRegisters) => None,
            Some(FaultKind::Slow { delay_ms }) => Some(delay_ms),
            _ => Some(self.draw_delay(&g.1)),
        };
        if let Some(d) = delay {
            let at = self.now.saturating_add(d);
            self.schedule(
                at,
                crate::world::Event::MachineReady {
                    machine: (g.0.clone(), name),
                    uid,
                },
            );
        }
    }

    fn draw_delay(&mut self, group: &str) -> SimTime {
        use rand::Rng;
        let d = self
            .delays
            .get(group)
            .copied()
            .unwrap_or(self.cfg.default_delay);
        if d.max_ms <= d.min_ms {
            d.min_ms
        } else {
            self.rng.random_range(d.min_ms..=d.max_ms)
        }
    }

    /// Starts deleting a Machine as Cluster API does: `deletionTimestamp` set, its Node (if any)
    /// cordoned and drained; the Machine and Node go once the drain is done (after the
    /// configured deletion delay).
    pub(crate) fn begin_machine_deletion(&mut self, k: &NsName) {
        let Some(m) = self.machines.get_mut(k) else {
            return;
        };
        if m.deleting {
            return;
        }
        m.deleting = true;
        let (uid, node) = (m.uid.clone(), m.node.clone());
        let mk = key(CAPI_GROUP, "Machine", &k.0, &k.1);
        if let Some(mut obj) = self.get_owned(&mk) {
            obj["metadata"]["deletionTimestamp"] = json!(self.store.timestamp(self.now));
            obj["status"]["phase"] = json!("Deleting");
            let _ = self.put(obj);
        }
        let event = match &node {
            Some(n) => {
                let _ = self.set_unschedulable(n, true);
                crate::world::Event::DrainMachine {
                    machine: k.clone(),
                    uid,
                }
            }
            None => crate::world::Event::MachineGone {
                machine: k.clone(),
                uid,
            },
        };
        let at = if node.is_some() {
            self.now
        } else {
            self.now.saturating_add(self.cfg.machine_deletion_ms)
        };
        self.schedule(at, event);
    }

    /// Drains the Node of a Machine being deleted: every pod but DaemonSet pods is evicted; a
    /// PodDisruptionBudget that refuses holds the drain, retried a few seconds later.
    pub(crate) fn drain_machine(&mut self, k: &NsName, uid: &str) {
        let Some(m) = self.machines.get(k).filter(|m| m.uid == uid) else {
            return;
        };
        let Some(node) = m.node.clone() else {
            let at = self.now.saturating_add(self.cfg.machine_deletion_ms);
            let (machine, uid) = (k.clone(), uid.to_string());
            self.schedule(at, crate::world::Event::MachineGone { machine, uid });
            return;
        };
        let mut on: Vec<NsName> = self
            .pods
            .iter()
            .filter(|(_, p)| {
                p.node.as_deref() == Some(node.as_str())
                    && !matches!(p.owner, crate::world::Owner::DaemonSet(..))
            })
            .map(|(id, _)| id.clone())
            .collect();
        on.sort();
        let mut held = false;
        for (ns, name) in on {
            if self.evict(&ns, &name).is_err() {
                held = true;
            }
        }
        let (machine, uid) = (k.clone(), uid.to_string());
        if held {
            let at = self.now.saturating_add(DRAIN_RETRY_MS);
            self.schedule(at, crate::world::Event::DrainMachine { machine, uid });
        } else {
            let at = self.now.saturating_add(self.cfg.machine_deletion_ms);
            self.schedule(at, crate::world::Event::MachineGone { machine, uid });
        }
    }

    /// A Machine being deleted is gone: its Node (with what is left on it) and the Machine go,
    /// and its set may replace it.
    pub(crate) fn machine_gone(&mut self, k: &NsName, uid: &str) {
        let Some(group) = self
            .machines
            .get(k)
            .filter(|m| m.uid == uid)
            .map(|m| m.group.clone())
        else {
            return;
        };
        self.delete_machine(k);
        self.reconcile_group(&group);
        self.reconcile();
    }

    /// Deletes a Machine with its Node and the Node's pods at once.
    pub(crate) fn delete_machine(&mut self, k: &NsName) {
        let Some(m) = self.machines.remove(k) else {
            return;
        };
        if let Some(node) = &m.node {
            let _ = self.remove_node(node);
        }
        self.store
            .delete(&key(CAPI_GROUP, "Machine", &k.0, &k.1), self.now);
    }

    /// A Machine's provisioning delay has elapsed: register its Node.
    pub(crate) fn machine_ready(&mut self, k: &NsName, uid: &str) {
        let Some(m) = self.machines.get(k).cloned() else {
            return;
        };
        if m.uid != uid || m.failed || m.deleting || m.node.is_some() {
            return;
        }
        let md_key = key(CAPI_GROUP, "MachineDeployment", &m.group.0, &m.group.1);
        let Some(md) = self.store.get(&md_key).cloned() else {
            return;
        };
        let node = self.node_object(&k.1, &md, k);
        let Ok(name) = self.register_node(node, Some(k.clone())) else {
            return;
        };
        let node_uid = self
            .store
            .get(&key("", "Node", "", &name))
            .and_then(|o| str_at(o, "/metadata/uid").map(str::to_string))
            .unwrap_or_default();
        let mk = key(CAPI_GROUP, "Machine", &k.0, &k.1);
        if let Some(mut obj) = self.get_owned(&mk) {
            obj["status"]["phase"] = json!("Running");
            obj["status"]["nodeRef"] =
                json!({"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid});
            let _ = self.put(obj);
        }
        if let Some(m) = self.machines.get_mut(k) {
            m.node = Some(name);
        }
        let g = m.group.clone();
        self.reconcile_group(&g);
    }

    /// The Node of a Machine of `md`: labels from the template and the labels annotation,
    /// capacity from the capacity annotations, taints from the template and the taints
    /// annotation.
    fn node_object(&self, name: &str, md: &Value, machine: &NsName) -> Value {
        let ann = |k: &str| {
            str_at(
                md,
                &format!("/metadata/annotations/{}", k.replace('/', "~1")),
            )
        };
        let cap = |k: &str| ann(&format!("{CAPACITY_PREFIX}{k}"));
        let mut labels = serde_json::Map::new();
        if let Some(extra) = cap("labels") {
            for kv in extra.split(',') {
                if let Some((k, v)) = kv.split_once('=') {
                    labels.insert(k.trim().into(), json!(v.trim()));
                }
            }
        }
        if let Some(Value::Object(t)) = md.pointer("/spec/template/metadata/labels") {
            for (k, v) in t {
                labels.insert(k.clone(), v.clone());
            }
        }
        labels.insert("kubernetes.io/hostname".into(), json!(name));
        labels.insert("kubernetes.io/os".into(), json!("linux"));
        labels.insert("kubernetes.io/arch".into(), json!("amd64"));
        let mut capacity = serde_json::Map::new();
        capacity.insert("cpu".into(), json!(cap("cpu").unwrap_or("4")));
        capacity.insert("memory".into(), json!(cap("memory").unwrap_or("16Gi")));
        capacity.insert("pods".into(), json!(cap("maxPods").unwrap_or("110")));
        if let Some(disk) = cap("ephemeral-disk") {
            capacity.insert("ephemeral-storage".into(), json!(disk));
        }
        if let (Some(ty), Some(n)) = (cap("gpu-type"), cap("gpu-count")) {
            capacity.insert(ty.into(), json!(n));
        }
        let mut taints: Vec<Value> = md
            .pointer("/spec/template/spec/taints")
            .and_then(Value::as_array)
            .map(|ts| {
                ts.iter()
                    .map(|t| json!({"key": t["key"], "value": t.get("value").cloned().unwrap_or(json!("")), "effect": t["effect"]}))
                    .collect()
            })
            .unwrap_or_default();
        if let Some(extra) = cap("taints") {
            for t in extra.split(',') {
                let Some((kv, effect)) = t.split_once(':') else {
                    continue;
                };
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                taints.push(json!({"key": k.trim(), "value": v.trim(), "effect": effect.trim()}));
            }
        }
        let ts = self.store.timestamp(self.now);
        let mut spec = json!({"providerID": format!("sim:///{name}")});
        if !taints.is_empty() {
            spec["taints"] = Value::Array(taints);
        }
        let owner_set = self
            .groups
            .get(
                &self
                    .machines
                    .get(machine)
                    .map(|m| m.group.clone())
                    .unwrap_or_default(),
            )
            .map(|g| g.ms_name.clone())
            .unwrap_or_default();
        json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": name,
                "labels": labels,
                "annotations": {
                    "cluster.x-k8s.io/machine": machine.1,
                    "cluster.x-k8s.io/cluster-namespace": machine.0,
                    "cluster.x-k8s.io/cluster-name": self.cfg.cluster_name,
                    "cluster.x-k8s.io/owner-kind": "MachineSet",
                    "cluster.x-k8s.io/owner-name": owner_set,
                },
            },
            "spec": spec,
            "status": {
                "capacity": capacity.clone(),
                "allocatable": capacity,
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status", "lastHeartbeatTime": ts, "lastTransitionTime": ts}],
            },
        })
    }
}

impl World {
    /// Deletes a Machine object, as `kubectl delete machine` does: it drains and goes (see
    /// [`World::begin_machine_deletion`]); its MachineSet then replaces it if the replicas still
    /// ask for it.
    pub fn remove_machine(&mut self, namespace: &str, name: &str) -> Result<(), WorldError> {
        let k = (namespace.to_string(), name.to_string());
        if !self.machines.contains_key(&k) {
            return Err(WorldError::NotFound(format!("Machine {namespace}/{name}")));
        }
        self.begin_machine_deletion(&k);
        self.reconcile();
        Ok(())
    }

    /// Removes an annotation from a Machine (no-op if it is absent).
    pub fn remove_machine_annotation(
        &mut self,
        namespace: &str,
        machine: &str,
        annotation: &str,
    ) -> Result<(), WorldError> {
        let k = key(CAPI_GROUP, "Machine", namespace, machine);
        let Some(mut obj) = self.get_owned(&k) else {
            return Err(WorldError::NotFound(k.to_string()));
        };
        if let Some(a) = obj
            .pointer_mut("/metadata/annotations")
            .and_then(Value::as_object_mut)
        {
            a.remove(annotation);
        }
        self.put(obj)?;
        Ok(())
    }
}
