//! The Cluster API machine controller (`cluster.x-k8s.io/v1beta1`), as strict as the real one: a
//! MachineDeployment owns its MachineSets, numbered by revision; the newest owns Machines up to
//! `spec.replicas`, and a new template (a rollout) replaces the older sets' Machines one by one
//! (RollingUpdate, maxSurge 1, maxUnavailable 0); a Machine
//! becomes a Ready Node after a provisioning delay drawn from its group's distribution, unless an
//! injected fault says otherwise.
//!
//! It decides which Machines to create and which to delete when the replicas drop, by the set's
//! delete policy as Cluster API ranks them (`Random` by default, `Newest`, `Oldest`): Machines
//! already being deleted first, then marked (`cluster.x-k8s.io/delete-machine`) and unhealthy ones
//! (no node, failed, node not Ready), then the rest, ties by name. An unmarked healthy Machine
//! picked this way is recorded ([`crate::World::unmarked_healthy_deletions`]): that is what a careless
//! target decrease costs on a real cluster. Deleting a Machine takes time: it gets a
//! `deletionTimestamp`, its Node is cordoned and drained through the Eviction API (a
//! PodDisruptionBudget holds the drain, as Cluster API's does), and only then do the Node and the
//! Machine go. Machines being deleted still count against the replicas until they are gone. A
//! configurable delay lets the set react late to a change of replicas, as a busy or restarting
//! controller does. It owns the Machines, the sets, the provisioning delays and the faults that
//! concern provisioning and scaling. It never talks to a cloud, never binds or replaces a pod
//! (a drain goes through the Eviction API it is given) and never marks a node NotReady.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::cluster::{Cluster, WorldError};
use crate::faults::{Fault, FaultKind, ProvisioningDelay};
use crate::objects::key;
use crate::queue::{Event, NsName};
use crate::time::SimTime;

/// The API group of Cluster API.
pub const CAPI_GROUP: &str = "cluster.x-k8s.io";
/// The annotation that marks a Machine to be deleted first when its set shrinks.
pub const DELETE_MACHINE_ANNOTATION: &str = "cluster.x-k8s.io/delete-machine";
/// Prefix of the scale-from-zero capacity annotations on a MachineDeployment.
pub const CAPACITY_PREFIX: &str = "capacity.cluster-autoscaler.kubernetes.io/";
/// Annotation giving a group's minimum size to the autoscaler.
pub const MIN_SIZE_ANNOTATION: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size";
/// Annotation with which a MachineDeployment numbers its MachineSets (and itself) by revision.
pub const REVISION_ANNOTATION: &str = "machinedeployment.clusters.x-k8s.io/revision";
/// Annotation giving a group's maximum size to the autoscaler.
pub const MAX_SIZE_ANNOTATION: &str = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size";

/// What the machine controller is told at construction.
#[derive(Clone, Debug)]
pub(crate) struct MachineSettings {
    /// `spec.clusterName` of the objects it creates.
    pub cluster_name: String,
    /// Provisioning delay of groups without their own.
    pub default_delay: ProvisioningDelay,
    /// How long the MachineSet controller takes to act on a change of replicas (0: at once).
    pub sync_ms: SimTime,
    /// How long a Machine being deleted lingers after its drain.
    pub deletion_ms: SimTime,
    /// How long after a node joins its device plugins advertise its extended resources.
    pub device_plugin_ms: SimTime,
}

/// The machine controller's own state.
#[derive(Debug)]
pub(crate) struct Machines {
    settings: MachineSettings,
    machines: BTreeMap<NsName, MachineState>,
    machine_seq: u64,
    groups: BTreeMap<NsName, GroupState>,
    delays: BTreeMap<String, ProvisioningDelay>,
    /// Faults other than `NodesNotReady`, in the order injected.
    faults: Vec<Fault>,
    /// Healthy unmarked Machines the sets deleted.
    unmarked_deletions: Vec<UnmarkedDeletion>,
}

/// What the other controllers do while the machine controller acts: react to the objects it
/// changed (workloads catch up), or evict a pod through the Eviction API (`true`: evicted).
pub(crate) trait Peers {
    /// The other controllers catch up with a change.
    fn react(&mut self, c: &mut Cluster);
    /// Evicts a pod; `false` when a disruption budget refuses.
    fn evict(&mut self, c: &mut Cluster, pod: &NsName) -> bool;
}

/// The world's record of a MachineDeployment it reconciles.
#[derive(Clone, Debug)]
pub(crate) struct GroupState {
    /// The newest MachineSet's name.
    pub ms_name: String,
    /// The newest MachineSet's revision.
    pub revision: u64,
    /// Older MachineSets with their revisions (kept at 0 replicas once emptied, as Cluster
    /// API keeps its revision history).
    pub old_sets: Vec<(String, u64)>,
}

/// The world's record of a Machine.
#[derive(Clone, Debug)]
pub(crate) struct MachineState {
    /// The MachineDeployment.
    pub group: NsName,
    /// The MachineSet that owns it.
    pub set: String,
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

/// Setup, the scale subresource, and what others read.
impl Machines {
    /// A controller with no groups yet.
    pub(crate) fn new(settings: MachineSettings) -> Machines {
        Machines {
            settings,
            machines: BTreeMap::new(),
            machine_seq: 0,
            groups: BTreeMap::new(),
            delays: BTreeMap::new(),
            faults: Vec::new(),
            unmarked_deletions: Vec::new(),
        }
    }

    /// `spec.clusterName` of the objects it creates.
    pub(crate) fn cluster_name(&self) -> &str {
        &self.settings.cluster_name
    }

    /// Sets the provisioning delay of a group (MachineDeployment name).
    pub(crate) fn set_provisioning_delay(&mut self, group: &str, delay: ProvisioningDelay) {
        self.delays.insert(group.to_string(), delay);
    }

    /// Takes a fault (not `NodesNotReady`); a `ReplicasChanged` or `Rollout` one is queued for
    /// its start.
    pub(crate) fn inject(&mut self, c: &mut Cluster, fault: Fault) {
        if matches!(
            fault.kind,
            FaultKind::ReplicasChanged { .. } | FaultKind::Rollout
        ) {
            let index = self.faults.len();
            c.schedule(fault.from_ms, Event::ExternalScale { fault: index });
        }
        self.faults.push(fault);
    }

    /// Whether a `ScaleApiError` fault refuses scaling the group named `md` now.
    pub(crate) fn scale_refused(&self, md: &str, now: SimTime) -> bool {
        self.faults
            .iter()
            .any(|f| f.active(md, now) && f.kind == FaultKind::ScaleApiError)
    }

    /// Whether the controller made this Machine and it is not gone yet.
    pub(crate) fn contains(&self, k: &NsName) -> bool {
        self.machines.contains_key(k)
    }

    /// The MachineDeployment of a Machine.
    pub(crate) fn group_of(&self, k: &NsName) -> Option<&NsName> {
        self.machines.get(k).map(|m| &m.group)
    }

    /// The MachineDeployments reconciled.
    pub(crate) fn groups(&self) -> impl Iterator<Item = &NsName> {
        self.groups.keys()
    }

    /// Per Machine: its MachineDeployment and whether its Node registered.
    pub(crate) fn members(&self) -> impl Iterator<Item = (&NsName, bool)> {
        self.machines.values().map(|m| (&m.group, m.node.is_some()))
    }

    /// Per registered Machine: its MachineDeployment and its Node's name.
    pub(crate) fn registered(&self) -> impl Iterator<Item = (&NsName, &str)> {
        self.machines
            .values()
            .filter_map(|m| Some((&m.group, m.node.as_deref()?)))
    }

    /// Machines the set deleted although they were healthy and unmarked, oldest first.
    pub(crate) fn unmarked_healthy_deletions(&self) -> &[UnmarkedDeletion] {
        &self.unmarked_deletions
    }

    /// Names of a group's Machines, oldest first.
    pub(crate) fn machines_of(&self, namespace: &str, md: &str) -> Vec<String> {
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

    /// Sets a MachineDeployment's `spec.replicas` (the scale subresource) and reconciles it.
    /// Fails when the MachineDeployment does not exist or a `ScaleApiError` fault is active.
    pub(crate) fn set_replicas(
        &mut self,
        c: &mut Cluster,
        peers: &mut dyn Peers,
        (namespace, md): (&str, &str),
        n: u32,
    ) -> Result<(), WorldError> {
        if self.scale_refused(md, c.now) {
            return Err(WorldError::ScaleApi {
                group: format!("{namespace}/{md}"),
            });
        }
        let k = key(CAPI_GROUP, "MachineDeployment", namespace, md);
        let Some(mut obj) = c.get_owned(&k) else {
            return Err(WorldError::NotFound(k.to_string()));
        };
        obj["spec"]["replicas"] = json!(n);
        let generation = obj
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        obj["metadata"]["generation"] = json!(generation + 1);
        c.put(obj)?;
        self.sync_group_later(c, peers, &(namespace.to_string(), md.to_string()));
        Ok(())
    }

    /// Lets the MachineSet controller act on a change of replicas: at once, or after the
    /// configured sync delay (a busy controller).
    fn sync_group_later(&mut self, c: &mut Cluster, peers: &mut dyn Peers, g: &NsName) {
        if self.settings.sync_ms == 0 {
            self.reconcile_group(c, g);
            peers.react(c);
        } else {
            let at = c.now.saturating_add(self.settings.sync_ms);
            c.schedule(at, Event::SyncGroup { group: g.clone() });
        }
    }

    /// A `ReplicasChanged` fault: the replicas of every MachineDeployment named by the fault
    /// change by its delta, as `kubectl scale` would do. A `Rollout` fault: their template
    /// changes.
    pub(crate) fn external_scale(&mut self, c: &mut Cluster, peers: &mut dyn Peers, index: usize) {
        let Some(fault) = self.faults.get(index).cloned() else {
            return;
        };
        let targets: Vec<NsName> = self
            .groups
            .keys()
            .filter(|g| g.1 == fault.group)
            .cloned()
            .collect();
        let delta = match fault.kind {
            FaultKind::ReplicasChanged { delta } => delta,
            FaultKind::Rollout => {
                for g in targets {
                    self.start_rollout(c, peers, &g);
                }
                return;
            }
            _ => return,
        };
        for g in targets {
            let k = key(CAPI_GROUP, "MachineDeployment", &g.0, &g.1);
            let Some(mut obj) = c.get_owned(&k) else {
                continue;
            };
            let now = obj
                .pointer("/spec/replicas")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            obj["spec"]["replicas"] = json!(now.saturating_add(delta).max(0));
            if c.put(obj).is_ok() {
                self.sync_group_later(c, peers, &g);
            }
        }
    }
}

/// Rollouts: a new template, a MachineSet of the next revision, Machines replaced one by one.
impl Machines {
    /// The MachineDeployment's template changes (a new infrastructure template, as an upgrade
    /// does): a MachineSet of the next revision takes over from the current one.
    pub(crate) fn start_rollout(&mut self, c: &mut Cluster, peers: &mut dyn Peers, g: &NsName) {
        let k = key(CAPI_GROUP, "MachineDeployment", &g.0, &g.1);
        let (Some(mut md), Some(state)) = (c.get_owned(&k), self.groups.get_mut(g)) else {
            return;
        };
        state.old_sets.push((state.ms_name.clone(), state.revision));
        state.revision += 1;
        state.ms_name = format!("{}-{}", g.1, c.suffix());
        let template = format!("{}-r{}", g.1, state.revision);
        md["spec"]["template"]["spec"]["infrastructureRef"]["name"] = json!(template);
        let generation = md
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        md["metadata"]["generation"] = json!(generation + 1);
        if c.put(md).is_ok() {
            self.sync_group_later(c, peers, g);
        }
    }

    /// Whether some Machine of the group still belongs to an older MachineSet.
    fn rolling(&self, g: &NsName, newest: &str) -> bool {
        self.machines
            .values()
            .any(|m| m.group == *g && m.set != newest)
    }

    /// One step of a RollingUpdate with maxSurge 1 and maxUnavailable 0: an old Machine goes
    /// only while the new set's Ready Machines keep `replicas` available, and a new one is
    /// created only while all Machines (those being deleted included) stay within
    /// `replicas + 1`. These deletions are the rollout's, not a careless scale-down's: they
    /// are not recorded as unmarked.
    fn rollout_step(
        &mut self,
        c: &mut Cluster,
        g: &NsName,
        md: &Value,
        newest: &str,
        replicas: u64,
    ) {
        let mine = |m: &&MachineState| m.group == *g;
        let new_total = self
            .machines
            .values()
            .filter(mine)
            .filter(|m| m.set == newest && !m.deleting)
            .count() as u64;
        let new_ready = self
            .machines
            .values()
            .filter(mine)
            .filter(|m| m.set == newest && !m.deleting)
            .filter(|m| m.node.as_deref().is_some_and(|n| c.node_ready(n)))
            .count() as u64;
        let mut old: Vec<(u64, NsName)> = self
            .machines
            .iter()
            .filter(|(_, m)| m.group == *g && m.set != newest && !m.deleting)
            .map(|(k, m)| (m.seq, k.clone()))
            .collect();
        old.sort();
        let old_all = self
            .machines
            .values()
            .filter(mine)
            .filter(|m| m.set != newest)
            .count() as u64;
        let mut old_alive = old.len() as u64;
        for (_, k) in old {
            if new_ready + old_alive <= replicas {
                break;
            }
            self.begin_machine_deletion(c, &k);
            old_alive -= 1;
        }
        if new_total < replicas && new_total + old_all < replicas + 1 {
            self.create_machine(c, g, md, newest);
        }
    }
}

/// The MachineSet controller: Machines in line with the replicas, statuses written.
impl Machines {
    /// Makes the MachineSet and Machines of a MachineDeployment match its `spec.replicas`,
    /// and writes their statuses.
    pub(crate) fn reconcile_group(&mut self, c: &mut Cluster, g: &NsName) {
        let md_key = key(CAPI_GROUP, "MachineDeployment", &g.0, &g.1);
        let Some(md) = c.store.get(&md_key).cloned() else {
            return;
        };
        let replicas = md
            .pointer("/spec/replicas")
            .and_then(Value::as_u64)
            .unwrap_or(1);
        let ms_name = match self.groups.get(g) {
            Some(s) => s.ms_name.clone(),
            None => {
                let name = format!("{}-{}", g.1, c.suffix());
                let state = GroupState {
                    ms_name: name.clone(),
                    revision: 1,
                    old_sets: Vec::new(),
                };
                self.groups.insert(g.clone(), state);
                name
            }
        };
        if self.rolling(g, &ms_name) {
            self.rollout_step(c, g, &md, &ms_name, replicas);
            self.write_group_status(c, g, &md, replicas);
            return;
        }
        let policy = md
            .pointer("/spec/strategy/rollingUpdate/deletePolicy")
            .and_then(Value::as_str)
            .and_then(DeletePolicy::parse)
            .unwrap_or_default();
        // Machines being deleted still count until they are gone, as in Cluster API.
        let have = self.machines.values().filter(|m| m.group == *g).count() as u64;
        if have < replicas {
            for _ in have..replicas {
                self.create_machine(c, g, &md, &ms_name);
            }
        } else if have > replicas {
            // Ranked only when some must go: ranking reads every member's object.
            let members = self.ranked_members(c, g, policy);
            let excess = (have - replicas) as usize;
            for (k, _, marked, healthy) in members.into_iter().take(excess) {
                // A Machine already on its way out is picked first and costs nothing new: a
                // drain blocked by a budget keeps it here across later decreases.
                let deleting = self.machines.get(&k).is_some_and(|m| m.deleting);
                if healthy && !marked && !deleting {
                    self.record_unmarked(c.now, g, &k);
                }
                self.begin_machine_deletion(c, &k);
            }
        }
        self.write_group_status(c, g, &md, replicas);
    }

    /// A group's Machines with their delete priority, whether marked and whether healthy,
    /// in deletion order (highest priority first, ties by name).
    fn ranked_members(
        &self,
        c: &Cluster,
        g: &NsName,
        policy: DeletePolicy,
    ) -> Vec<(NsName, f64, bool, bool)> {
        let mut members: Vec<(NsName, f64, bool, bool)> = self
            .machines
            .iter()
            .filter(|(_, m)| m.group == *g)
            .map(|(k, m)| {
                let marked = c
                    .store
                    .get(&key(CAPI_GROUP, "Machine", &k.0, &k.1))
                    .and_then(|o| o.pointer("/metadata/annotations"))
                    .and_then(|a| a.get(DELETE_MACHINE_ANNOTATION))
                    .is_some();
                let healthy = !m.failed && m.node.as_deref().is_some_and(|n| c.node_ready(n));
                let age = c.now.saturating_sub(m.created);
                let priority = policy.priority(m.deleting, marked, healthy, age);
                (k.clone(), priority, marked, healthy)
            })
            .collect();
        members.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.1.cmp(&b.0.1)));
        members
    }

    fn record_unmarked(&mut self, now: SimTime, g: &NsName, k: &NsName) {
        let node = self
            .machines
            .get(k)
            .and_then(|m| m.node.clone())
            .unwrap_or_default();
        self.unmarked_deletions.push(UnmarkedDeletion {
            at: now,
            group: g.1.clone(),
            machine: k.1.clone(),
            node,
        });
    }

    /// Writes the status of every MachineSet of the group and of the MachineDeployment. The
    /// newest set wants `replicas` (during a rollout: the new Machines not being deleted);
    /// an older one wants its Machines not being deleted, 0 once emptied.
    fn write_group_status(&self, c: &mut Cluster, g: &NsName, md: &Value, replicas: u64) {
        let Some(state) = self.groups.get(g) else {
            return;
        };
        let rolling = self.rolling(g, &state.ms_name);
        let (mut total, mut ready, mut updated) = (0u64, 0u64, 0u64);
        for m in self.machines.values().filter(|m| m.group == *g) {
            total += 1;
            ready += u64::from(m.node.is_some());
            updated += u64::from(m.set == state.ms_name);
        }
        let mut sets = state.old_sets.clone();
        sets.push((state.ms_name.clone(), state.revision));
        for (name, revision) in &sets {
            let alive = self.set_members(g, name).filter(|m| !m.deleting).count() as u64;
            let wanted = if *name == state.ms_name && !rolling {
                replicas
            } else {
                alive
            };
            let ms = self.set_object(c, g, md, (name, *revision), wanted);
            let _ = c.put(ms);
        }
        let mut md = (*md).clone();
        md["metadata"]["annotations"][REVISION_ANNOTATION] = json!(state.revision.to_string());
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
            "updatedReplicas": updated,
            "unavailableReplicas": total.saturating_sub(ready),
            "observedGeneration": md.pointer("/metadata/generation").cloned().unwrap_or(json!(1)),
            "phase": phase,
            "selector": format!("cluster.x-k8s.io/deployment-name={}", g.1),
        });
        let _ = c.put(md);
    }

    fn set_members<'a>(
        &'a self,
        g: &'a NsName,
        set: &'a str,
    ) -> impl Iterator<Item = &'a MachineState> {
        self.machines
            .values()
            .filter(move |m| m.group == *g && m.set == set)
    }

    /// The MachineSet `name` of revision `revision`, wanting `wanted` replicas, with the
    /// status of the Machines it owns.
    fn set_object(
        &self,
        c: &Cluster,
        g: &NsName,
        md: &Value,
        (name, revision): (&str, u64),
        wanted: u64,
    ) -> Value {
        let (mut total, mut ready) = (0u64, 0u64);
        for m in self.set_members(g, name) {
            total += 1;
            ready += u64::from(m.node.is_some());
        }
        let md_uid = str_at(md, "/metadata/uid").unwrap_or("").to_string();
        let cluster = self.settings.cluster_name.clone();
        // An older set keeps the template it was made from.
        let mut template = c
            .store
            .get(&key(CAPI_GROUP, "MachineSet", &g.0, name))
            .and_then(|o| o.pointer("/spec/template").cloned())
            .or_else(|| md.pointer("/spec/template").cloned())
            .unwrap_or_else(|| json!({}));
        if !template["metadata"]["labels"].is_object() {
            template["metadata"]["labels"] = json!({});
        }
        template["metadata"]["labels"]["cluster.x-k8s.io/deployment-name"] = json!(g.1);
        template["metadata"]["labels"]["cluster.x-k8s.io/set-name"] = json!(name);
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachineSet",
            "metadata": {
                "name": name,
                "namespace": g.0,
                "labels": {"cluster.x-k8s.io/deployment-name": g.1, "cluster.x-k8s.io/cluster-name": cluster},
                "annotations": {REVISION_ANNOTATION: revision.to_string()},
                "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment", "name": g.1, "uid": md_uid, "controller": true, "blockOwnerDeletion": true}],
            },
            "spec": {
                "clusterName": cluster,
                "replicas": wanted,
                "selector": {"matchLabels": {"cluster.x-k8s.io/deployment-name": g.1, "cluster.x-k8s.io/set-name": name}},
                "template": template,
            },
            "status": {
                "replicas": total,
                "readyReplicas": ready,
                "availableReplicas": ready,
                "fullyLabeledReplicas": total,
                "observedGeneration": 1,
            },
        })
    }

    fn create_machine(&mut self, c: &mut Cluster, g: &NsName, md: &Value, ms_name: &str) {
        let name = loop {
            let n = format!("{ms_name}-{}", c.suffix());
            if !self.machines.contains_key(&(g.0.clone(), n.clone())) {
                break n;
            }
        };
        let fault = self
            .faults
            .iter()
            .find(|f| f.active(&g.1, c.now) && f.affects_provisioning())
            .map(|f| f.kind.clone());
        let obj = self.machine_object(c, g, md, ms_name, &name, fault.as_ref());
        if c.put(obj).is_err() {
            return;
        }
        let uid = c
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
                set: ms_name.to_string(),
                seq: self.machine_seq,
                uid: uid.clone(),
                node: None,
                failed,
                deleting: false,
                created: c.now,
            },
        );
        let delay = match fault {
            Some(FaultKind::Stockout { .. }) | Some(FaultKind::NeverRegisters) => None,
            Some(FaultKind::Slow { delay_ms }) => Some(delay_ms),
            _ => Some(self.draw_delay(c, &g.1)),
        };
        if let Some(d) = delay {
            let at = c.now.saturating_add(d);
            c.schedule(
                at,
                Event::MachineReady {
                    machine: (g.0.clone(), name),
                    uid,
                },
            );
        }
    }

    /// A new Machine of set `ms_name`: template labels and spec, and the status a provisioning
    /// fault gives it (a stockout fails it with its reason; otherwise it has an instance).
    fn machine_object(
        &self,
        c: &Cluster,
        g: &NsName,
        md: &Value,
        ms_name: &str,
        name: &str,
        fault: Option<&FaultKind>,
    ) -> Value {
        let ms_uid = c
            .store
            .get(&key(CAPI_GROUP, "MachineSet", &g.0, ms_name))
            .and_then(|o| str_at(o, "/metadata/uid").map(str::to_string))
            .unwrap_or_default();
        let mut labels = md
            .pointer("/spec/template/metadata/labels")
            .cloned()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        labels["cluster.x-k8s.io/cluster-name"] = json!(self.settings.cluster_name);
        labels["cluster.x-k8s.io/deployment-name"] = json!(g.1);
        labels["cluster.x-k8s.io/set-name"] = json!(ms_name);
        let mut spec = md
            .pointer("/spec/template/spec")
            .cloned()
            .filter(Value::is_object)
            .unwrap_or_else(|| json!({}));
        spec["clusterName"] = json!(self.settings.cluster_name);
        let status = match fault {
            Some(FaultKind::Stockout { reason }) => {
                let message = format!("instance could not be created: {reason}");
                let ts = c.timestamp();
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
        json!({
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
        })
    }

    fn draw_delay(&mut self, c: &mut Cluster, group: &str) -> SimTime {
        let d = self
            .delays
            .get(group)
            .copied()
            .unwrap_or(self.settings.default_delay);
        c.draw(d.min_ms, d.max_ms)
    }
}

/// Deleting Machines: cordon, drain through the Eviction API, then the Node and Machine go.
impl Machines {
    /// Starts deleting a Machine as Cluster API does: `deletionTimestamp` set, its Node (if any)
    /// cordoned and drained; the Machine and Node go once the drain is done (after the
    /// configured deletion delay).
    pub(crate) fn begin_machine_deletion(&mut self, c: &mut Cluster, k: &NsName) {
        let Some(m) = self.machines.get_mut(k) else {
            return;
        };
        if m.deleting {
            return;
        }
        m.deleting = true;
        let (uid, node) = (m.uid.clone(), m.node.clone());
        let mk = key(CAPI_GROUP, "Machine", &k.0, &k.1);
        if let Some(mut obj) = c.get_owned(&mk) {
            obj["metadata"]["deletionTimestamp"] = json!(c.timestamp());
            obj["status"]["phase"] = json!("Deleting");
            let _ = c.put(obj);
        }
        let machine = k.clone();
        match &node {
            Some(n) => {
                let _ = c.set_unschedulable(n, true);
                c.schedule(c.now, Event::DrainMachine { machine, uid });
            }
            None => {
                let at = c.now.saturating_add(self.settings.deletion_ms);
                c.schedule(at, Event::MachineGone { machine, uid });
            }
        }
    }

    /// Drains the Node of a Machine being deleted: every pod but DaemonSet pods is evicted; a
    /// PodDisruptionBudget that refuses holds the drain, retried a few seconds later. As Cluster
    /// API does, the drain is done only once the evicted pods have terminated and are gone: it
    /// looks again when the last of them ends.
    pub(crate) fn drain_machine(
        &mut self,
        c: &mut Cluster,
        peers: &mut dyn Peers,
        k: &NsName,
        uid: &str,
    ) {
        let Some(m) = self.machines.get(k).filter(|m| m.uid == uid) else {
            return;
        };
        let (machine, uid) = (k.clone(), uid.to_string());
        let Some(node) = m.node.clone() else {
            let at = c.now.saturating_add(self.settings.deletion_ms);
            c.schedule(at, Event::MachineGone { machine, uid });
            return;
        };
        let mut held = false;
        for pod in c.non_daemon_pods_on(&node) {
            if !peers.evict(c, &pod) {
                held = true;
            }
        }
        let last_gone = c
            .non_daemon_pods_on(&node)
            .iter()
            .filter_map(|p| c.pods.get(p).and_then(|st| st.terminating))
            .max();
        if held {
            let at = c.now.saturating_add(DRAIN_RETRY_MS);
            c.schedule(at, Event::DrainMachine { machine, uid });
        } else if let Some(at) = last_gone {
            // Their PodTerminated events were queued first, so they run before this look.
            c.schedule(at, Event::DrainMachine { machine, uid });
        } else {
            let at = c.now.saturating_add(self.settings.deletion_ms);
            c.schedule(at, Event::MachineGone { machine, uid });
        }
    }

    /// A Machine being deleted is gone: its Node (with what is left on it) and the Machine go,
    /// and its set may replace it.
    pub(crate) fn machine_gone(
        &mut self,
        c: &mut Cluster,
        peers: &mut dyn Peers,
        k: &NsName,
        uid: &str,
    ) {
        let Some(group) = self
            .machines
            .get(k)
            .filter(|m| m.uid == uid)
            .map(|m| m.group.clone())
        else {
            return;
        };
        self.delete_machine(c, k);
        self.reconcile_group(c, &group);
        peers.react(c);
    }

    /// Deletes a Machine with its Node and the Node's pods at once.
    fn delete_machine(&mut self, c: &mut Cluster, k: &NsName) {
        let Some(m) = self.machines.remove(k) else {
            return;
        };
        if let Some(node) = &m.node {
            let _ = c.remove_node(node);
        }
        c.store
            .delete(&key(CAPI_GROUP, "Machine", &k.0, &k.1), c.now);
    }

    /// Deletes a MachineDeployment at once with its Machines (and their Nodes) and its
    /// MachineSet.
    pub(crate) fn delete_deployment(&mut self, c: &mut Cluster, id: &NsName) {
        let members: Vec<NsName> = self
            .machines
            .iter()
            .filter(|(_, m)| m.group == *id)
            .map(|(mk, _)| mk.clone())
            .collect();
        for m in members {
            self.delete_machine(c, &m);
        }
        if let Some(g) = self.groups.remove(id) {
            for (name, _) in g.old_sets.iter().chain([&(g.ms_name.clone(), 0)]) {
                let ms = key(CAPI_GROUP, "MachineSet", &id.0, name);
                c.store.delete(&ms, c.now);
            }
        }
        c.store
            .delete(&key(CAPI_GROUP, "MachineDeployment", &id.0, &id.1), c.now);
    }

    /// Deletes a Machine object, as `kubectl delete machine` does: it drains and goes (see
    /// [`Machines::begin_machine_deletion`]); its MachineSet then replaces it if the replicas
    /// still ask for it.
    pub(crate) fn remove_machine(&mut self, c: &mut Cluster, k: &NsName) -> Result<(), WorldError> {
        if !self.machines.contains_key(k) {
            return Err(WorldError::NotFound(format!("Machine {}/{}", k.0, k.1)));
        }
        self.begin_machine_deletion(c, k);
        Ok(())
    }
}

/// A Machine becomes a Node.
impl Machines {
    /// A Machine's provisioning delay has elapsed: register its Node.
    pub(crate) fn machine_ready(&mut self, c: &mut Cluster, k: &NsName, uid: &str) {
        let Some(m) = self.machines.get(k).cloned() else {
            return;
        };
        if m.uid != uid || m.failed || m.deleting || m.node.is_some() {
            return;
        }
        let md_key = key(CAPI_GROUP, "MachineDeployment", &m.group.0, &m.group.1);
        let Some(md) = c.store.get(&md_key).cloned() else {
            return;
        };
        let mut node = self.node_object(c, &k.1, &md, k);
        let held = if self.settings.device_plugin_ms > 0 {
            crate::device_plugin::withhold(&mut node)
        } else {
            Vec::new()
        };
        let Ok(name) = c.register_node(node, Some(k.clone())) else {
            return;
        };
        let node_uid = c.uid_of(&key("", "Node", "", &name));
        if !held.is_empty() {
            let at = c.now + self.settings.device_plugin_ms;
            c.schedule(
                at,
                Event::DevicePlugin {
                    node: name.clone(),
                    uid: node_uid.clone(),
                    resources: held,
                },
            );
        }
        let mk = key(CAPI_GROUP, "Machine", &k.0, &k.1);
        if let Some(mut obj) = c.get_owned(&mk) {
            obj["status"]["phase"] = json!("Running");
            obj["status"]["nodeRef"] =
                json!({"apiVersion": "v1", "kind": "Node", "name": name, "uid": node_uid});
            let _ = c.put(obj);
        }
        if let Some(m) = self.machines.get_mut(k) {
            m.node = Some(name);
        }
        self.reconcile_group(c, &m.group);
    }

    /// The Node of a Machine of `md`: labels from the template and the labels annotation,
    /// capacity from the capacity annotations, else from the infrastructure template it names
    /// (`status.capacity`, and `status.nodeInfo` for the OS and architecture labels), taints
    /// from the template and the taints annotation.
    fn node_object(&self, c: &Cluster, name: &str, md: &Value, machine: &NsName) -> Value {
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
        // The machine the infrastructure template describes, where the annotations say nothing.
        let infra = crate::infrastructure::template_of(c, md).unwrap_or_default();
        let os = infra.operating_system.as_deref().unwrap_or("linux");
        let arch = infra.architecture.as_deref().unwrap_or("amd64");
        labels.insert("kubernetes.io/hostname".into(), json!(name));
        labels.insert("kubernetes.io/os".into(), json!(os));
        labels.insert("kubernetes.io/arch".into(), json!(arch));
        let resource = |annotation: &str, resource: &str, default: &str| -> Value {
            cap(annotation)
                .map(str::to_string)
                .or_else(|| infra.quantity(resource))
                .map_or_else(|| json!(default), Value::String)
        };
        let mut capacity = serde_json::Map::new();
        capacity.insert("cpu".into(), resource("cpu", "cpu", "4"));
        capacity.insert("memory".into(), resource("memory", "memory", "16Gi"));
        capacity.insert("pods".into(), json!(cap("maxPods").unwrap_or("110")));
        if let Some(disk) = cap("ephemeral-disk")
            .map(str::to_string)
            .or_else(|| infra.quantity("ephemeral-storage"))
        {
            capacity.insert("ephemeral-storage".into(), json!(disk));
        }
        if let (Some(ty), Some(n)) = (cap("gpu-type"), cap("gpu-count")) {
            capacity.insert(ty.into(), json!(n));
        }
        for (name, quantity) in infra.extended() {
            capacity
                .entry(name.to_string())
                .or_insert_with(|| json!(quantity));
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
        let ts = c.timestamp();
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
                    "cluster.x-k8s.io/cluster-name": self.settings.cluster_name,
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

/// Sets an annotation on a Machine (the autoscaler marks machines to delete this way).
pub(crate) fn annotate_machine(
    c: &mut Cluster,
    namespace: &str,
    machine: &str,
    annotation: &str,
    value: &str,
) -> Result<(), WorldError> {
    let k = key(CAPI_GROUP, "Machine", namespace, machine);
    let Some(mut obj) = c.get_owned(&k) else {
        return Err(WorldError::NotFound(k.to_string()));
    };
    if !obj["metadata"]["annotations"].is_object() {
        obj["metadata"]["annotations"] = json!({});
    }
    obj["metadata"]["annotations"][annotation] = json!(value);
    c.put(obj)?;
    Ok(())
}

/// Removes an annotation from a Machine (no-op if it is absent).
pub(crate) fn remove_machine_annotation(
    c: &mut Cluster,
    namespace: &str,
    machine: &str,
    annotation: &str,
) -> Result<(), WorldError> {
    let k = key(CAPI_GROUP, "Machine", namespace, machine);
    let Some(mut obj) = c.get_owned(&k) else {
        return Err(WorldError::NotFound(k.to_string()));
    };
    if let Some(a) = obj
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(annotation);
    }
    c.put(obj)?;
    Ok(())
}

#[cfg(test)]
mod scenario_tests {
    //! Scenarios through the world that exercise this controller.
    use crate::testkit::*;

    #[test]
    fn replicas_become_machines_then_ready_nodes_after_the_delay() {
        let mut w = world(1);
        w.add_node_group(&group("workers", 3)).unwrap();
        let machines = w.machines_of("capi", "workers");
        assert_eq!(machines.len(), 3);
        assert!(w.node_names().is_empty());
        for m in &machines {
            let obj = machine(&w, m);
            assert_eq!(obj["spec"]["providerID"], format!("sim:///{m}"));
            assert_eq!(obj["status"]["phase"], "Provisioned");
            assert!(obj["status"].get("nodeRef").is_none());
        }
        let ms: Vec<_> = w.objects().list("cluster.x-k8s.io", "MachineSet").collect();
        assert_eq!(ms.len(), 1);
        assert_eq!(ms[0].1["spec"]["replicas"], 3);

        w.step_until(29_999);
        assert!(
            w.node_names().is_empty(),
            "no node before the minimum delay"
        );
        w.step_until(60_000);
        assert_eq!(w.node_names().len(), 3);
        for m in &machines {
            let obj = machine(&w, m);
            assert_eq!(obj["status"]["phase"], "Running");
            assert_eq!(obj["status"]["nodeRef"]["name"], m.as_str());
            let node = get(&w, "", "Node", "", m).unwrap();
            assert_eq!(node["metadata"]["labels"]["pool"], "workers");
            assert_eq!(node["status"]["capacity"]["cpu"], "4");
            assert_eq!(node["status"]["conditions"][0]["type"], "Ready");
            assert_eq!(node["spec"]["providerID"], format!("sim:///{m}"));
            assert_eq!(w.machine_of_node(m), Some(("capi".into(), m.clone())));
        }
        let md = get(
            &w,
            "cluster.x-k8s.io",
            "MachineDeployment",
            "capi",
            "workers",
        )
        .unwrap();
        assert_eq!(md["status"]["readyReplicas"], 3);
        let sample = w.metrics().samples.last().unwrap();
        assert_eq!(sample.machines_per_group["capi/workers"], 3);
    }

    #[test]
    fn scale_down_deletes_the_annotated_machine_first() {
        let mut w = world(4);
        w.add_node_group(&group("workers", 3)).unwrap();
        w.advance(61_000);
        let machines = w.machines_of("capi", "workers");
        // Not the first by name: an unmarked choice would never pick it.
        let victim = machines[2].clone();
        w.annotate_machine("capi", &victim, DELETE_MACHINE_ANNOTATION, "yes")
            .unwrap();
        w.set_replicas("capi", "workers", 2).unwrap();
        // Being deleted: a deletionTimestamp, still counted, its node cordoned and drained.
        assert!(machine(&w, &victim)["metadata"]["deletionTimestamp"].is_string());
        w.advance(1);
        let left = w.machines_of("capi", "workers");
        assert_eq!(left.len(), 2);
        assert!(!left.contains(&victim));
        assert!(!w.node_names().contains(&victim), "its node went with it");
        assert!(w.unmarked_healthy_deletions().is_empty());
        // Without annotation, the default Random policy takes a healthy Machine by name: a
        // careless decrement removes a healthy node, and the world records it.
        let mut by_name = left.clone();
        by_name.sort();
        w.set_replicas("capi", "workers", 1).unwrap();
        w.advance(1);
        assert_eq!(w.machines_of("capi", "workers"), vec![by_name[1].clone()]);
        let careless = w.unmarked_healthy_deletions();
        assert_eq!(careless.len(), 1);
        assert_eq!(careless[0].machine, by_name[0]);
    }

    #[test]
    fn unhealthy_machines_go_before_healthy_ones_and_policies_order_the_rest() {
        for (policy, expect_oldest_left) in
            [(DeletePolicy::Newest, true), (DeletePolicy::Oldest, false)]
        {
            let mut w = world(11);
            let mut spec = group("workers", 1);
            spec.delete_policy = policy;
            w.add_node_group(&spec).unwrap();
            w.advance(61_000);
            w.set_replicas("capi", "workers", 2).unwrap();
            w.advance(61_000);
            let oldest_first = w.machines_of("capi", "workers");
            assert_eq!(w.node_names().len(), 2);
            // A third Machine without a node yet: unhealthy, so it goes first.
            w.set_replicas("capi", "workers", 3).unwrap();
            let young = w.machines_of("capi", "workers")[2].clone();
            w.set_replicas("capi", "workers", 2).unwrap();
            w.advance(1);
            assert!(
                !w.machines_of("capi", "workers").contains(&young),
                "{policy:?}"
            );
            w.set_replicas("capi", "workers", 1).unwrap();
            w.advance(1);
            let kept = if expect_oldest_left {
                &oldest_first[0]
            } else {
                &oldest_first[1]
            };
            assert_eq!(
                &w.machines_of("capi", "workers"),
                &vec![kept.clone()],
                "{policy:?}"
            );
        }
    }

    #[test]
    fn a_deleting_machine_keeps_its_node_until_the_budget_lets_the_drain_finish() {
        let mut w = World::new(WorldConfig {
            seed: 3,
            machine_deletion_ms: 20_000,
            ..WorldConfig::default()
        });
        w.add_node_group(&group("workers", 1)).unwrap();
        w.advance(121_000);
        w.add_replica_set(rs("web", 1, "100m")).unwrap();
        w.apply(pdb("web", "web", 1)).unwrap();
        w.advance(2_000);
        let m = w.machines_of("capi", "workers")[0].clone();
        w.remove_machine("capi", &m).unwrap();
        w.advance(60_000);
        // The only pod is protected: the node stays, cordoned, and so does the Machine.
        assert_eq!(w.node_names(), vec![m.clone()]);
        let node = get(&w, "", "Node", "", &m).unwrap();
        assert_eq!(node["spec"]["unschedulable"], true);
        assert_eq!(machine(&w, &m)["status"]["phase"], "Deleting");
        // The budget relaxed: the pod is evicted at the next retry and terminates over its 30 s
        // grace; the drain waits for it, then the instance terminates for 20 s.
        w.apply(pdb("web", "web", 0)).unwrap();
        w.advance(6_000);
        let evicted = w
            .live_pods()
            .into_iter()
            .find(|p| p.2.as_deref() == Some(m.as_str()))
            .expect("the evicted pod still runs on the node");
        let gone_at = w
            .terminating_until(&evicted.0, &evicted.1)
            .expect("terminating");
        w.step_until(gone_at - 1);
        assert_eq!(w.non_daemon_pods_on(&m), 1, "still terminating");
        w.step_until(gone_at);
        assert_eq!(w.non_daemon_pods_on(&m), 0);
        w.advance(19_999);
        assert_eq!(
            w.node_names(),
            vec![m.clone()],
            "instance terminating for 20s"
        );
        w.advance(1);
        assert!(!w.node_names().contains(&m));
        assert!(!w.machines_of("capi", "workers").contains(&m));
    }

    #[test]
    fn a_machine_whose_drain_is_blocked_is_not_deleted_again_by_a_later_decrease() {
        let mut w = world(7);
        w.add_node_group(&group("workers", 2)).unwrap();
        w.advance(61_000);
        w.add_replica_set(rs("web", 2, "3")).unwrap();
        w.apply(pdb("web", "web", 2)).unwrap();
        w.advance(2_000);
        let machines = w.machines_of("capi", "workers");
        // The unready one goes first; its drain is refused by the budget, so it stays.
        let stuck = machines[1].clone();
        w.set_node_ready(&stuck, false).unwrap();
        w.set_replicas("capi", "workers", 1).unwrap();
        w.set_node_ready(&stuck, true).unwrap();
        w.advance(60_000);
        assert_eq!(machine(&w, &stuck)["status"]["phase"], "Deleting");
        assert!(w.unmarked_healthy_deletions().is_empty());
        // Up and down again: the set still counts the stuck Machine, so it creates nothing,
        // then picks the stuck one again. That is no new deletion of a healthy Machine.
        w.set_replicas("capi", "workers", 2).unwrap();
        w.set_replicas("capi", "workers", 1).unwrap();
        w.advance(1);
        assert_eq!(w.machines_of("capi", "workers").len(), 2);
        assert!(machine(&w, &machines[0])["metadata"]["deletionTimestamp"].is_null());
        assert!(w.unmarked_healthy_deletions().is_empty());
    }

    #[test]
    fn a_slow_machine_set_controller_acts_late_on_new_replicas() {
        let mut w = World::new(WorldConfig {
            seed: 3,
            machine_set_sync_ms: 30_000,
            ..WorldConfig::default()
        });
        w.add_node_group(&group("workers", 1)).unwrap();
        w.set_replicas("capi", "workers", 3).unwrap();
        assert_eq!(w.machines_of("capi", "workers").len(), 1);
        w.advance(30_000);
        assert_eq!(w.machines_of("capi", "workers").len(), 3);
    }

    #[test]
    fn stockout_fails_machines_with_a_reason_and_scale_errors_are_injected() {
        let mut w = world(5);
        w.add_node_group(&group("workers", 0)).unwrap();
        w.inject_fault(Fault {
            group: "workers".into(),
            from_ms: 0,
            to_ms: 100_000,
            kind: FaultKind::Stockout {
                reason: "InsufficientInstanceCapacity".into(),
            },
        });
        w.inject_fault(Fault {
            group: "workers".into(),
            from_ms: 400_000,
            to_ms: 500_000,
            kind: FaultKind::ScaleApiError,
        });
        w.set_replicas("capi", "workers", 2).unwrap();
        w.advance(150_000);
        assert!(w.node_names().is_empty());
        for m in w.machines_of("capi", "workers") {
            let obj = machine(&w, &m);
            assert_eq!(obj["status"]["phase"], "Failed");
            assert_eq!(
                obj["status"]["failureReason"],
                "InsufficientInstanceCapacity"
            );
            assert!(obj["status"]["failureMessage"].is_string());
            let conditions = obj["status"]["v1beta2"]["conditions"].as_array().unwrap();
            assert!(
                conditions
                    .iter()
                    .any(|c| c["type"] == "Ready" && c["status"] == "False")
            );
        }
        // After the window, a new machine provisions; failed ones are deleted first on shrink.
        w.set_replicas("capi", "workers", 3).unwrap();
        w.step_until(300_000);
        w.set_replicas("capi", "workers", 1).unwrap();
        w.advance(1);
        let left = w.machines_of("capi", "workers");
        assert_eq!(left.len(), 1);
        assert_eq!(machine(&w, &left[0])["status"]["phase"], "Running");
        assert_eq!(w.node_names().len(), 1);
        w.step_until(400_000);
        assert_eq!(
            w.set_replicas("capi", "workers", 2),
            Err(WorldError::ScaleApi {
                group: "capi/workers".into()
            })
        );
        w.step_until(500_000);
        w.set_replicas("capi", "workers", 2).unwrap();
    }

    #[test]
    fn never_registering_and_slow_machines() {
        let mut w = world(6);
        w.add_node_group(&group("workers", 0)).unwrap();
        w.inject_fault(Fault {
            group: "workers".into(),
            from_ms: 0,
            to_ms: 10,
            kind: FaultKind::NeverRegisters,
        });
        w.set_replicas("capi", "workers", 1).unwrap();
        w.step_until(20);
        w.inject_fault(Fault {
            group: "workers".into(),
            from_ms: 20,
            to_ms: 30,
            kind: FaultKind::Slow { delay_ms: 900_000 },
        });
        w.set_replicas("capi", "workers", 2).unwrap();
        w.step_until(900_000);
        assert!(w.node_names().is_empty());
        let ms = w.machines_of("capi", "workers");
        assert!(machine(&w, &ms[0])["spec"]["providerID"].is_string());
        w.step_until(900_020);
        assert_eq!(w.node_names(), vec![ms[1].clone()]);
    }

    fn sets(w: &World) -> Vec<(String, String, i64, i64)> {
        w.objects()
            .list("cluster.x-k8s.io", "MachineSet")
            .map(|(k, o)| {
                let rev = o["metadata"]["annotations"][crate::machines::REVISION_ANNOTATION]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                let spec = o["spec"]["replicas"].as_i64().unwrap_or(-1);
                let status = o["status"]["replicas"].as_i64().unwrap_or(-1);
                (k.name.clone(), rev, spec, status)
            })
            .collect()
    }

    /// A rollout replaces every Machine through a MachineSet of the next revision, one at a
    /// time: never more than replicas + 1 Machines, never fewer than `replicas` Ready nodes, and
    /// none of its deletions counted as careless.
    #[test]
    fn a_rollout_replaces_machines_one_by_one_through_a_new_revision() {
        let mut w = world(7);
        w.add_node_group(&group("workers", 3)).unwrap();
        w.step_until(60_000);
        let before = w.node_names();
        assert_eq!(before.len(), 3);
        assert_eq!(sets(&w).len(), 1);
        assert_eq!(sets(&w)[0].1, "1");
        w.inject_fault(Fault {
            group: "workers".into(),
            from_ms: 100_000,
            to_ms: 100_001,
            kind: FaultKind::Rollout,
        });
        let (mut saw_old_with_replicas, mut t) = (false, 60_000);
        while t < 900_000 {
            t += 1_000;
            w.step_until(t);
            let machines = w.machines_of("capi", "workers");
            assert!(machines.len() <= 4, "maxSurge 1 at {t}: {machines:?}");
            let ready = w.node_names().len();
            assert!(ready >= 3, "maxUnavailable 0 at {t}: {ready} nodes");
            saw_old_with_replicas |= sets(&w).iter().any(|s| s.1 == "1" && s.2 > 0) && t > 100_000;
        }
        assert!(
            saw_old_with_replicas,
            "the old set kept replicas for a while"
        );
        let after = w.node_names();
        assert_eq!(after.len(), 3);
        assert!(
            after.iter().all(|n| !before.contains(n)),
            "{after:?} vs {before:?}"
        );
        let mut sets = sets(&w);
        sets.sort_by(|a, b| a.1.cmp(&b.1));
        assert_eq!(sets.len(), 2);
        assert_eq!((sets[0].1.as_str(), sets[0].2, sets[0].3), ("1", 0, 0));
        assert_eq!((sets[1].1.as_str(), sets[1].2, sets[1].3), ("2", 3, 3));
        for m in w.machines_of("capi", "workers") {
            assert_eq!(
                machine(&w, &m)["metadata"]["labels"]["cluster.x-k8s.io/set-name"],
                sets[1].0.as_str()
            );
        }
        let md = get(
            &w,
            "cluster.x-k8s.io",
            "MachineDeployment",
            "capi",
            "workers",
        )
        .unwrap();
        assert_eq!(
            md["metadata"]["annotations"][crate::machines::REVISION_ANNOTATION],
            "2"
        );
        assert_eq!(
            md["spec"]["template"]["spec"]["infrastructureRef"]["name"],
            "workers-r2"
        );
        assert!(w.unmarked_healthy_deletions().is_empty());
    }

    /// After a rollout the group scales as before, within its newest set.
    #[test]
    fn after_a_rollout_the_group_scales_down_in_its_new_set() {
        let mut w = world(8);
        w.add_node_group(&group("workers", 2)).unwrap();
        w.inject_fault(Fault {
            group: "workers".into(),
            from_ms: 70_000,
            to_ms: 70_001,
            kind: FaultKind::Rollout,
        });
        w.step_until(900_000);
        w.set_replicas("capi", "workers", 1).unwrap();
        w.step_until(1_000_000);
        assert_eq!(w.node_names().len(), 1);
        let live: Vec<_> = sets(&w).into_iter().filter(|s| s.2 > 0).collect();
        assert_eq!(live.len(), 1);
        assert_eq!((live[0].1.as_str(), live[0].2), ("2", 1));
    }
}
