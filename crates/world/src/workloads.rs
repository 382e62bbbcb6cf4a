//! Workload controllers: ReplicaSets (optionally under a Deployment) keeping a replica count
//! that follows a schedule, Jobs running a number of pods to completion, DaemonSets placing one
//! pod on each matching node.
//!
//! They decide which pods exist and own their workloads' state (the pods each has, a Job's
//! successes); they learn of pods that left from the cluster's removal log. They never place
//! pods (the scheduler does), never evict and never look at resources. Pod lifetime counts from when a pod starts running: a ReplicaSet's pod whose
//! lifetime ends is deleted (and replaced), a Job's or bare pod's succeeds. A terminating pod is
//! no longer active for its controller, which replaces it at once; a ReplicaSet scaling in
//! deletes its bound pods gracefully (they terminate on their node).

use std::collections::{BTreeMap, BTreeSet};

use autoscaler_core::check_node_static;
use autoscaler_model::Pod;
use k8s_openapi::api::core::v1 as api;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::cluster::{Cluster, Owner, RemovedPod, WorldError};
use crate::objects::key;
use crate::queue::{Event, NsName};
use crate::time::SimTime;

/// A pod template: labels plus a pod spec, built with the helpers or given as JSON.
#[derive(Clone, Debug, PartialEq)]
pub struct PodTemplate {
    /// Pod labels.
    pub labels: BTreeMap<String, String>,
    /// Pod annotations (e.g. a ProvisioningRequest's consume annotation).
    pub annotations: BTreeMap<String, String>,
    /// The pod spec (`spec` of a Pod), as JSON.
    pub spec: Value,
}

impl Default for PodTemplate {
    fn default() -> Self {
        PodTemplate::new()
    }
}

impl PodTemplate {
    /// One container `app` with no requests.
    pub fn new() -> PodTemplate {
        PodTemplate {
            labels: BTreeMap::new(),
            annotations: BTreeMap::new(),
            spec: json!({"containers": [{"name": "app", "image": "sim/app"}]}),
        }
    }

    /// A template from an arbitrary pod spec.
    pub fn from_spec(labels: BTreeMap<String, String>, spec: Value) -> PodTemplate {
        PodTemplate {
            labels,
            annotations: BTreeMap::new(),
            spec,
        }
    }

    /// Sets the first container's requests.
    pub fn requests(mut self, cpu: &str, memory: &str) -> PodTemplate {
        self.spec["containers"][0]["resources"]["requests"] = json!({"cpu": cpu, "memory": memory});
        self
    }

    /// Adds a request of another resource (e.g. `nvidia.com/gpu`) to the first container.
    pub fn request(mut self, resource: &str, quantity: &str) -> PodTemplate {
        self.spec["containers"][0]["resources"]["requests"][resource] = json!(quantity);
        if resource.contains('/') {
            self.spec["containers"][0]["resources"]["limits"][resource] = json!(quantity);
        }
        self
    }

    /// Adds a label.
    pub fn label(mut self, k: &str, v: &str) -> PodTemplate {
        self.labels.insert(k.to_string(), v.to_string());
        self
    }

    /// Adds an annotation.
    pub fn annotation(mut self, k: &str, v: &str) -> PodTemplate {
        self.annotations.insert(k.to_string(), v.to_string());
        self
    }

    /// Sets the priority.
    pub fn priority(mut self, p: i32) -> PodTemplate {
        self.spec["priority"] = json!(p);
        self
    }

    /// Adds a node selector pair.
    pub fn node_selector(mut self, k: &str, v: &str) -> PodTemplate {
        self.spec["nodeSelector"][k] = json!(v);
        self
    }

    /// Adds a toleration (`operator` `Equal` or `Exists`; empty effect tolerates all).
    pub fn toleration(mut self, k: &str, operator: &str, value: &str, effect: &str) -> PodTemplate {
        let mut t = json!({"key": k, "operator": operator});
        if !value.is_empty() {
            t["value"] = json!(value);
        }
        if !effect.is_empty() {
            t["effect"] = json!(effect);
        }
        match self.spec["tolerations"].as_array_mut() {
            Some(ts) => ts.push(t),
            None => self.spec["tolerations"] = json!([t]),
        }
        self
    }

    /// The Pod object of this template (for the storage controllers' StatefulSets).
    pub(crate) fn pod_object(&self, ns: &str, name: &str, owner: Value, restart: &str) -> Value {
        self.pod(ns, name, owner, restart)
    }

    fn pod(&self, ns: &str, name: &str, owner: Value, restart: &str) -> Value {
        let mut spec = self.spec.clone();
        spec["restartPolicy"] = json!(restart);
        if spec.get("schedulerName").is_none() {
            spec["schedulerName"] = json!("default-scheduler");
        }
        let mut pod = json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": self.labels, "ownerReferences": [owner]},
            "spec": spec,
            "status": {"phase": "Pending"},
        });
        if !self.annotations.is_empty() {
            pod["metadata"]["annotations"] = json!(self.annotations);
        }
        pod
    }

    fn as_object(&self) -> Value {
        json!({"metadata": {"labels": self.labels}, "spec": self.spec})
    }
}

/// A ReplicaSet (optionally owned by a Deployment of the same name) whose replica count follows
/// a schedule.
#[derive(Clone, Debug, PartialEq)]
pub struct ReplicaSetSpec {
    /// Namespace.
    pub namespace: String,
    /// Name (of the Deployment too).
    pub name: String,
    /// Pod template.
    pub template: PodTemplate,
    /// Replicas at creation.
    pub replicas: u32,
    /// Later replica counts: `(virtual time, replicas)`.
    pub schedule: Vec<(SimTime, u32)>,
    /// How long each pod runs once started before it ends and is replaced; `None` forever.
    pub pod_lifetime_ms: Option<SimTime>,
    /// Whether a Deployment owns the ReplicaSet.
    pub deployment: bool,
}

/// A Job: `completions` pods, at most `parallelism` at once, each running `duration_ms`.
#[derive(Clone, Debug, PartialEq)]
pub struct JobSpec {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Pod template.
    pub template: PodTemplate,
    /// Successful pods needed.
    pub completions: u32,
    /// Pods at once.
    pub parallelism: u32,
    /// How long each pod runs once started.
    pub duration_ms: SimTime,
}

/// A DaemonSet: one pod on each node its template's selector, affinity and tolerations allow.
#[derive(Clone, Debug, PartialEq)]
pub struct DaemonSetSpec {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Pod template.
    pub template: PodTemplate,
}

/// The workload controllers' own state.
#[derive(Debug, Default)]
pub(crate) struct Workloads {
    replica_sets: BTreeMap<NsName, ReplicaSetState>,
    jobs: BTreeMap<NsName, JobState>,
    daemon_sets: BTreeMap<NsName, DaemonSetState>,
}

/// How many of a workload's pods (by name, in `id`'s namespace) exist, and how many are bound.
fn count_ready(c: &Cluster, id: &NsName, names: &BTreeSet<String>) -> (usize, usize) {
    let ready = names
        .iter()
        .filter(|n| {
            c.pods
                .get(&(id.0.clone(), (*n).clone()))
                .is_some_and(|p| p.node.is_some())
        })
        .count();
    (names.len(), ready)
}

#[derive(Clone, Debug)]
struct ReplicaSetState {
    spec: ReplicaSetSpec,
    uid: String,
    replicas: u32,
    pods: BTreeSet<String>,
    /// The scheduling epoch and the resourceVersions of the ReplicaSet (and Deployment)
    /// objects when their status was last written: while neither moved, the status is the
    /// same and counting the pods again (O(pods) per reconcile) is skipped.
    status_at: Option<(u64, Vec<Option<String>>)>,
}

#[derive(Clone, Debug)]
struct JobState {
    spec: JobSpec,
    uid: String,
    active: BTreeSet<String>,
    succeeded: u32,
}

#[derive(Clone, Debug)]
struct DaemonSetState {
    spec: DaemonSetSpec,
    uid: String,
    /// The model view of the template, for node matching.
    view: Pod,
    by_node: BTreeMap<String, String>,
}

fn owner_ref(api_version: &str, kind: &str, name: &str, uid: &str) -> Value {
    json!({"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": true, "blockOwnerDeletion": true})
}

/// Tolerations the DaemonSet controller adds to its pods.
fn daemon_tolerations() -> Vec<Value> {
    let mut v = Vec::new();
    for (k, effect) in [
        ("node.kubernetes.io/not-ready", "NoExecute"),
        ("node.kubernetes.io/unreachable", "NoExecute"),
        ("node.kubernetes.io/disk-pressure", "NoSchedule"),
        ("node.kubernetes.io/memory-pressure", "NoSchedule"),
        ("node.kubernetes.io/pid-pressure", "NoSchedule"),
        ("node.kubernetes.io/unschedulable", "NoSchedule"),
    ] {
        v.push(json!({"key": k, "operator": "Exists", "effect": effect}));
    }
    v
}

/// How the controller of a replayed pod (one the world does not run) replaces the pod when it
/// is evicted or deleted before its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    /// A Job's: the replacement runs the whole time again (the task starts over).
    Rerun,
    /// A ReplicaSet's: the replacement runs the time the pod had left (the service goes on).
    Resume,
}

/// The annotation a replacement of a replayed pod carries: the first pod's name, the base of
/// every replacement's name.
const REPLAY_OF: &str = "simulate.cluster-autoscaler/replay-of";

/// The task a replayed pod that starts over belongs to (`namespace/first pod`), for the metrics
/// of lost work; `None` for other pods.
pub(crate) fn task_of(st: &crate::cluster::PodState, (ns, name): &NsName) -> Option<String> {
    if st.owner != Owner::Replayed(Restart::Rerun) {
        return None;
    }
    let first = st.view.annotation(REPLAY_OF).unwrap_or(name);
    Some(format!("{ns}/{first}"))
}

/// Creates at once the replacement of a replayed pod whose object was `obj`, to run `left` ms:
/// the same labels, annotations, owner references and spec, unbound, named after the first pod.
fn replace_replayed(c: &mut Cluster, obj: &Value, left: SimTime, restart: Restart) {
    let md = &obj["metadata"];
    let ns = md["namespace"].as_str().unwrap_or("default");
    let first = md["annotations"][REPLAY_OF]
        .as_str()
        .or(md["name"].as_str())
        .unwrap_or("pod")
        .to_string();
    // Room for the `-xxxxx` suffix within a pod name's 63 characters.
    let base: String = first.chars().take(57).collect();
    let name = c.fresh_pod_name(ns, base.trim_end_matches('-'));
    let mut annotations = md["annotations"].as_object().cloned().unwrap_or_default();
    annotations.insert(REPLAY_OF.into(), json!(first));
    let mut spec = obj["spec"].clone();
    if let Some(s) = spec.as_object_mut() {
        s.remove("nodeName");
    }
    let pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": md["labels"].clone(),
            "annotations": annotations, "ownerReferences": md["ownerReferences"].clone()},
        "spec": spec,
        "status": {"phase": "Pending"},
    });
    // The object was valid as the first pod; a failure here would be the world's own bug.
    let _ = c.create_pod(pod, Owner::Replayed(restart), Some(left));
}

impl Workloads {
    /// Adds a ReplicaSet (and its Deployment) and queues its replica schedule.
    pub(crate) fn add_replica_set(
        &mut self,
        c: &mut Cluster,
        spec: ReplicaSetSpec,
    ) -> Result<(), WorldError> {
        let id = (spec.namespace.clone(), spec.name.clone());
        if self.replica_sets.contains_key(&id) {
            return Err(WorldError::AlreadyExists(format!(
                "ReplicaSet {}/{}",
                id.0, id.1
            )));
        }
        let selector = json!({"matchLabels": spec.template.labels});
        let mut owners = Vec::new();
        if spec.deployment {
            c.put(json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": spec.name, "namespace": spec.namespace, "generation": 1},
                "spec": {"replicas": spec.replicas, "selector": selector, "template": spec.template.as_object()},
            }))?;
            let uid = c.uid_of(&key("apps", "Deployment", &id.0, &id.1));
            owners.push(owner_ref("apps/v1", "Deployment", &spec.name, &uid));
        }
        c.put(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": spec.name, "namespace": spec.namespace, "generation": 1, "ownerReferences": owners},
            "spec": {"replicas": spec.replicas, "selector": selector, "template": spec.template.as_object()},
        }))?;
        let uid = c.uid_of(&key("apps", "ReplicaSet", &id.0, &id.1));
        for (t, n) in &spec.schedule {
            c.schedule(
                *t,
                Event::Replicas {
                    rs: id.clone(),
                    replicas: *n,
                },
            );
        }
        self.replica_sets.insert(
            id,
            ReplicaSetState {
                replicas: spec.replicas,
                spec,
                uid,
                pods: BTreeSet::new(),
                status_at: None,
            },
        );
        self.reconcile(c);
        Ok(())
    }

    /// Changes a ReplicaSet's (and its Deployment's) replica count now.
    pub(crate) fn scale_replica_set(
        &mut self,
        c: &mut Cluster,
        namespace: &str,
        name: &str,
        replicas: u32,
    ) -> Result<(), WorldError> {
        let id = (namespace.to_string(), name.to_string());
        if !self.replica_sets.contains_key(&id) {
            return Err(WorldError::NotFound(format!(
                "ReplicaSet {namespace}/{name}"
            )));
        }
        self.set_rs_replicas(c, &id, replicas);
        self.reconcile(c);
        Ok(())
    }

    pub(crate) fn set_rs_replicas(&mut self, c: &mut Cluster, id: &NsName, replicas: u32) {
        let Some(rs) = self.replica_sets.get_mut(id) else {
            return;
        };
        rs.replicas = replicas;
        let deployment = rs.spec.deployment;
        let mut kinds = vec!["ReplicaSet"];
        if deployment {
            kinds.push("Deployment");
        }
        for kind in kinds {
            if let Some(mut obj) = c.get_owned(&key("apps", kind, &id.0, &id.1)) {
                obj["spec"]["replicas"] = json!(replicas);
                let g = obj["metadata"]["generation"].as_i64().unwrap_or(1);
                obj["metadata"]["generation"] = json!(g + 1);
                let _ = c.put(obj);
            }
        }
    }

    /// Adds a Job.
    pub(crate) fn add_job(&mut self, c: &mut Cluster, spec: JobSpec) -> Result<(), WorldError> {
        let id = (spec.namespace.clone(), spec.name.clone());
        if self.jobs.contains_key(&id) {
            return Err(WorldError::AlreadyExists(format!("Job {}/{}", id.0, id.1)));
        }
        c.put(json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": spec.name, "namespace": spec.namespace},
            "spec": {"completions": spec.completions, "parallelism": spec.parallelism, "template": spec.template.as_object()},
            "status": {"startTime": c.store.timestamp(c.now)},
        }))?;
        let uid = c.uid_of(&key("batch", "Job", &id.0, &id.1));
        self.jobs.insert(
            id,
            JobState {
                spec,
                uid,
                active: BTreeSet::new(),
                succeeded: 0,
            },
        );
        self.reconcile(c);
        Ok(())
    }

    /// Adds a DaemonSet.
    pub(crate) fn add_daemon_set(
        &mut self,
        c: &mut Cluster,
        spec: DaemonSetSpec,
    ) -> Result<(), WorldError> {
        let id = (spec.namespace.clone(), spec.name.clone());
        if self.daemon_sets.contains_key(&id) {
            return Err(WorldError::AlreadyExists(format!(
                "DaemonSet {}/{}",
                id.0, id.1
            )));
        }
        let mut template = spec.template.clone();
        let mut tol = template.spec["tolerations"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        tol.extend(daemon_tolerations());
        template.spec["tolerations"] = Value::Array(tol);
        let probe = template.pod(&id.0, &id.1, json!({}), "Always");
        let view = api::Pod::deserialize(&probe)
            .map_err(|e| e.to_string())
            .and_then(|p| Pod::from_k8s(&p).map_err(|e| e.to_string()))
            .map_err(|message| WorldError::Invalid {
                object: format!("DaemonSet {}/{}", id.0, id.1),
                message,
            })?;
        c.put(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": spec.name, "namespace": spec.namespace, "generation": 1},
            "spec": {"selector": {"matchLabels": spec.template.labels}, "template": template.as_object()},
        }))?;
        let uid = c.uid_of(&key("apps", "DaemonSet", &id.0, &id.1));
        self.daemon_sets.insert(
            id,
            DaemonSetState {
                spec: DaemonSetSpec { template, ..spec },
                uid,
                view,
                by_node: BTreeMap::new(),
            },
        );
        self.reconcile(c);
        Ok(())
    }

    /// Takes in the controllers' pods that left (deleted or finished) since the last look.
    fn absorb(&mut self, c: &mut Cluster) {
        for removed in c.take_removed() {
            match (&removed.owner, &removed.replay) {
                (Owner::Replayed(restart), Some((obj, left))) => {
                    replace_replayed(c, obj, *left, *restart)
                }
                _ => self.pod_removed(&removed),
            }
        }
    }

    /// A controller's pod left.
    fn pod_removed(
        &mut self,
        RemovedPod {
            id,
            owner,
            succeeded,
            ..
        }: &RemovedPod,
    ) {
        match owner {
            Owner::None | Owner::Replayed(_) | Owner::StatefulSet(_) => {}
            Owner::ReplicaSet(rs) => {
                if let Some(r) = self.replica_sets.get_mut(rs) {
                    r.pods.remove(&id.1);
                }
            }
            Owner::Job(j) => {
                if let Some(j) = self.jobs.get_mut(j) {
                    j.active.remove(&id.1);
                    if *succeeded {
                        j.succeeded += 1;
                    }
                }
            }
            Owner::DaemonSet(ds, node) => {
                if let Some(d) = self.daemon_sets.get_mut(ds)
                    && d.by_node.get(node) == Some(&id.1)
                {
                    d.by_node.remove(node);
                }
            }
        }
    }

    /// Brings every workload's pods in line with its spec and writes the statuses.
    pub(crate) fn reconcile(&mut self, c: &mut Cluster) {
        self.absorb(c);
        let ids: Vec<NsName> = self.replica_sets.keys().cloned().collect();
        for id in ids {
            self.reconcile_rs(c, &id);
        }
        let ids: Vec<NsName> = self.jobs.keys().cloned().collect();
        for id in ids {
            self.reconcile_job(c, &id);
        }
        let ids: Vec<NsName> = self.daemon_sets.keys().cloned().collect();
        for id in ids {
            self.reconcile_ds(c, &id);
        }
    }

    fn reconcile_rs(&mut self, c: &mut Cluster, id: &NsName) {
        let Some(rs) = self.replica_sets.get(id) else {
            return;
        };
        let want = rs.replicas as usize;
        let have = rs.pods.len();
        let (template, uid, lifetime) = (
            rs.spec.template.clone(),
            rs.uid.clone(),
            rs.spec.pod_lifetime_ms,
        );
        if have < want {
            for _ in have..want {
                let name = c.fresh_pod_name(&id.0, &id.1);
                let obj = template.pod(
                    &id.0,
                    &name,
                    owner_ref("apps/v1", "ReplicaSet", &id.1, &uid),
                    "Always",
                );
                if c.create_pod(obj, Owner::ReplicaSet(id.clone()), lifetime)
                    .is_ok()
                    && let Some(rs) = self.replica_sets.get_mut(id)
                {
                    rs.pods.insert(name);
                }
            }
        } else if have > want {
            // Unscheduled pods go first, then the newest.
            let mut victims: Vec<(bool, std::cmp::Reverse<u64>, String)> = rs
                .pods
                .iter()
                .filter_map(|n| {
                    c.pods
                        .get(&(id.0.clone(), n.clone()))
                        .map(|p| (p.node.is_some(), std::cmp::Reverse(p.seq), n.clone()))
                })
                .collect();
            victims.sort();
            // Deleted as the ReplicaSet controller deletes them: gracefully, a bound one
            // terminating over its grace period on its node.
            for (_, _, n) in victims.into_iter().take(have - want) {
                c.delete_pod_gracefully(&(id.0.clone(), n), None);
            }
            self.absorb(c);
        }
        // Pods are created, bound and removed only with the epoch moving, and the objects
        // only with their resourceVersion moving.
        let seen = (c.sched_epoch, self.rs_versions(c, id));
        if self
            .replica_sets
            .get(id)
            .is_some_and(|r| r.status_at.as_ref() == Some(&seen))
        {
            return;
        }
        let (total, ready) = self
            .replica_sets
            .get(id)
            .map_or((0, 0), |r| count_ready(c, id, &r.pods));
        let mut kinds = vec!["ReplicaSet"];
        if self.replica_sets.get(id).is_some_and(|r| r.spec.deployment) {
            kinds.push("Deployment");
        }
        for kind in kinds {
            if let Some(mut obj) = c.get_owned(&key("apps", kind, &id.0, &id.1)) {
                let generation = obj["metadata"]["generation"].clone();
                obj["status"] = json!({
                    "replicas": total, "readyReplicas": ready, "availableReplicas": ready,
                    "observedGeneration": generation,
                });
                let _ = c.put(obj);
            }
        }
        let seen = (c.sched_epoch, self.rs_versions(c, id));
        if let Some(rs) = self.replica_sets.get_mut(id) {
            rs.status_at = Some(seen);
        }
    }

    /// The resourceVersions of a ReplicaSet's object and of its Deployment's.
    fn rs_versions(&self, c: &Cluster, id: &NsName) -> Vec<Option<String>> {
        ["ReplicaSet", "Deployment"]
            .iter()
            .map(|kind| {
                c.store
                    .get(&key("apps", kind, &id.0, &id.1))
                    .and_then(|o| o.pointer("/metadata/resourceVersion"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect()
    }

    fn reconcile_job(&mut self, c: &mut Cluster, id: &NsName) {
        let Some(j) = self.jobs.get(id) else {
            return;
        };
        let done = j.succeeded + j.active.len() as u32;
        let room = j.spec.parallelism.saturating_sub(j.active.len() as u32);
        let todo = j.spec.completions.saturating_sub(done).min(room);
        let (template, uid, duration) =
            (j.spec.template.clone(), j.uid.clone(), j.spec.duration_ms);
        let template = template.label("job-name", &id.1);
        for _ in 0..todo {
            let name = c.fresh_pod_name(&id.0, &id.1);
            let obj = template.pod(
                &id.0,
                &name,
                owner_ref("batch/v1", "Job", &id.1, &uid),
                "Never",
            );
            if c.create_pod(obj, Owner::Job(id.clone()), Some(duration))
                .is_ok()
                && let Some(j) = self.jobs.get_mut(id)
            {
                j.active.insert(name);
            }
        }
        let Some(j) = self.jobs.get(id) else {
            return;
        };
        let (active, succeeded, complete) = (
            j.active.len(),
            j.succeeded,
            j.succeeded >= j.spec.completions,
        );
        if let Some(mut obj) = c.get_owned(&key("batch", "Job", &id.0, &id.1)) {
            obj["status"]["active"] = json!(active);
            obj["status"]["succeeded"] = json!(succeeded);
            if complete && obj["status"].get("completionTime").is_none() {
                let ts = c.store.timestamp(c.now);
                obj["status"]["completionTime"] = json!(ts);
                obj["status"]["conditions"] =
                    json!([{"type": "Complete", "status": "True", "lastTransitionTime": ts}]);
            }
            let _ = c.put(obj);
        }
    }

    fn reconcile_ds(&mut self, c: &mut Cluster, id: &NsName) {
        let Some(ds) = self.daemon_sets.get(id) else {
            return;
        };
        let mut missing = Vec::new();
        for (name, st) in &c.nodes {
            if ds.by_node.contains_key(name) {
                continue;
            }
            let Some(info) = c.snapshot.node(st.id) else {
                continue;
            };
            let mut probe = ds.view.clone();
            probe.node_name = None;
            if check_node_static(&probe, &info.node).is_ok() {
                missing.push(name.clone());
            }
        }
        let gone: Vec<String> = ds
            .by_node
            .keys()
            .filter(|n| !c.nodes.contains_key(*n))
            .cloned()
            .collect();
        let (template, uid) = (ds.spec.template.clone(), ds.uid.clone());
        for node in missing {
            let name = c.fresh_pod_name(&id.0, &id.1);
            let mut t = template.clone();
            t.spec["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}});
            let obj = t.pod(
                &id.0,
                &name,
                owner_ref("apps/v1", "DaemonSet", &id.1, &uid),
                "Always",
            );
            if c.create_pod(obj, Owner::DaemonSet(id.clone(), node.clone()), None)
                .is_ok()
                && let Some(d) = self.daemon_sets.get_mut(id)
            {
                d.by_node.insert(node, name);
            }
        }
        if let Some(d) = self.daemon_sets.get_mut(id) {
            for n in gone {
                d.by_node.remove(&n);
            }
        }
        let Some(d) = self.daemon_sets.get(id) else {
            return;
        };
        let desired = d.by_node.len();
        let ready = d
            .by_node
            .values()
            .filter(|n| {
                c.pods
                    .get(&(id.0.clone(), (*n).clone()))
                    .is_some_and(|p| p.node.is_some())
            })
            .count();
        if let Some(mut obj) = c.get_owned(&key("apps", "DaemonSet", &id.0, &id.1)) {
            obj["status"] = json!({
                "desiredNumberScheduled": desired, "currentNumberScheduled": desired,
                "numberReady": ready, "numberAvailable": ready, "numberMisscheduled": 0,
                "observedGeneration": 1,
            });
            let _ = c.put(obj);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machines::NodeGroupSpec;
    use crate::world::{World, WorldConfig};

    fn status(w: &World, kind: &str) -> Value {
        w.objects()
            .get(&key("apps", kind, "default", "web"))
            .map(|o| o["status"].clone())
            .unwrap_or_default()
    }

    #[test]
    fn replica_set_status_follows_pods_and_generation_though_unchanged_ones_are_not_recounted() {
        let mut w = World::new(WorldConfig::default());
        w.add_node_group(&NodeGroupSpec {
            namespace: "capi".into(),
            name: "workers".into(),
            replicas: 1,
            max_size: 3,
            cpu: "4".into(),
            memory: "16Gi".into(),
            max_pods: 110,
            ..Default::default()
        })
        .expect("group");
        w.add_replica_set(ReplicaSetSpec {
            namespace: "default".into(),
            name: "web".into(),
            template: PodTemplate::new().requests("1", "1Gi").label("app", "web"),
            replicas: 3,
            schedule: Vec::new(),
            pod_lifetime_ms: None,
            deployment: true,
        })
        .expect("rs");
        assert_eq!(status(&w, "ReplicaSet")["readyReplicas"], 0);
        w.advance(200_000);
        for kind in ["ReplicaSet", "Deployment"] {
            assert_eq!(status(&w, kind)["readyReplicas"], 3, "{kind}");
        }
        // Nothing changed: the status is not rewritten.
        let rv = w.resource_version();
        w.advance(5_000);
        let rs_rv = |w: &World| {
            w.objects()
                .get(&key("apps", "ReplicaSet", "default", "web"))
                .and_then(|o| o.pointer("/metadata/resourceVersion").cloned())
        };
        let before = rs_rv(&w);
        assert!(w.resource_version() >= rv);
        assert_eq!(rs_rv(&w), before);
        // A pod removed is replaced: the counts move through it and back.
        let name = w
            .live_pods()
            .into_iter()
            .find(|(ns, _, _)| ns == "default")
            .map(|(_, n, _)| n)
            .expect("a pod");
        w.delete_pod("default", &name).expect("delete");
        assert_eq!(status(&w, "ReplicaSet")["readyReplicas"], 2);
        w.advance(2_000);
        assert_eq!(status(&w, "ReplicaSet")["readyReplicas"], 3);
        // A new generation written from outside is observed.
        let mut rs = w
            .objects()
            .get(&key("apps", "ReplicaSet", "default", "web"))
            .map(|o| (**o).clone())
            .expect("rs object");
        rs["metadata"]["generation"] = serde_json::json!(7);
        w.replace_object(rs).expect("replace");
        w.advance(1_000);
        assert_eq!(status(&w, "ReplicaSet")["observedGeneration"], 7);
    }
}

#[cfg(test)]
mod scenario_tests {
    //! Scenarios through the world that exercise this controller.
    use crate::testkit::*;

    #[test]
    fn daemon_set_pods_land_on_new_nodes() {
        let mut w = world(8);
        w.add_node_group(&group("workers", 1)).unwrap();
        let mut tainted = group("gpu", 0);
        tainted.taints = vec![("dedicated".into(), "gpu".into(), "NoSchedule".into())];
        w.add_node_group(&tainted).unwrap();
        w.add_daemon_set(DaemonSetSpec {
            namespace: "kube-system".into(),
            name: "agent".into(),
            template: PodTemplate::new()
                .requests("50m", "64Mi")
                .label("app", "agent"),
        })
        .unwrap();
        w.advance(121_000);
        assert_eq!(w.live_pods().len(), 1);
        w.set_replicas("capi", "workers", 3).unwrap();
        w.set_replicas("capi", "gpu", 1).unwrap();
        w.advance(121_000);
        let pods = w.live_pods();
        assert_eq!(
            pods.len(),
            3,
            "one per untainted node, none on the tainted one"
        );
        let mut nodes: Vec<String> = pods.iter().filter_map(|p| p.2.clone()).collect();
        nodes.sort();
        assert_eq!(
            nodes,
            w.machines_of("capi", "workers")
                .into_iter()
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
        );
        let ds = get(&w, "apps", "DaemonSet", "kube-system", "agent").unwrap();
        assert_eq!(ds["status"]["numberReady"], 3);
    }

    #[test]
    fn jobs_run_to_completion() {
        let mut w = world(9);
        w.add_node_group(&group("workers", 1)).unwrap();
        w.add_job(JobSpec {
            namespace: "default".into(),
            name: "batch".into(),
            template: PodTemplate::new().requests("1", "1Gi"),
            completions: 4,
            parallelism: 2,
            duration_ms: 10_000,
        })
        .unwrap();
        w.advance(29_000);
        assert_eq!(
            w.live_pods().len(),
            2,
            "parallelism 2, waiting for the node"
        );
        w.advance(92_000);
        let job = get(&w, "batch", "Job", "default", "batch").unwrap();
        assert_eq!(job["status"]["succeeded"], 4);
        assert_eq!(job["status"]["conditions"][0]["type"], "Complete");
        assert!(w.live_pods().is_empty());
        let succeeded = w
            .objects()
            .list("", "Pod")
            .filter(|(_, p)| p["status"]["phase"] == "Succeeded")
            .count();
        assert_eq!(succeeded, 4);
    }
}
