//! The capacity-on-request objects of an [`ObjectStore`]: ProvisioningRequests, CapacityBuffers,
//! PodTemplates, and the workloads a buffer's `scalableRef` may name (Deployments, ReplicaSets,
//! StatefulSets, Jobs).
//!
//! It converts each object once and reports every one that does not convert, with its identity
//! and the field at fault; the caller decides whether that is fatal (`plan` on a file) or a
//! warning (a live cluster). Objects of API versions it does not know are reported, not guessed
//! at. It reads only.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::batch::v1 as batch;
use k8s_openapi::api::core::v1 as api;
use serde_json::Value;

use crate::capacity_buffer::{self, CapacityBuffer};
use crate::provisioning_request::{self, GROUP, ProvisioningRequest};
use crate::store::{ObjectError, ObjectStore, typed};

/// What a workload (a buffer's `scalableRef`) gives a buffer: its pod template and replicas.
pub struct Workload {
    /// The workload's pod template.
    pub template: api::PodTemplateSpec,
    /// Its desired replicas, if it says.
    pub replicas: Option<u32>,
}

/// A workload's identity: namespace, API group, kind, name.
pub type WorkloadKey = (String, String, String, String);

/// The capacity-on-request objects of a store.
#[derive(Clone, Debug, Default)]
pub struct CapacityObjects {
    /// ProvisioningRequests.
    pub requests: Vec<ProvisioningRequest>,
    /// CapacityBuffers.
    pub buffers: Vec<CapacityBuffer>,
    /// PodTemplates by (namespace, name).
    pub templates: BTreeMap<(String, String), api::PodTemplate>,
    /// Pod templates and replicas of workloads, by (namespace, apiGroup, kind, name).
    pub workloads: BTreeMap<WorkloadKey, (api::PodTemplateSpec, Option<u32>)>,
}

impl CapacityObjects {
    /// The PodTemplate `namespace/name`.
    pub fn template(&self, namespace: &str, name: &str) -> Option<&api::PodTemplate> {
        self.templates
            .get(&(namespace.to_string(), name.to_string()))
    }

    /// The workload a `scalableRef` names.
    pub fn workload(
        &self,
        namespace: &str,
        group: &str,
        kind: &str,
        name: &str,
    ) -> Option<Workload> {
        let key = (namespace.into(), group.into(), kind.into(), name.into());
        self.workloads.get(&key).map(|(t, r)| Workload {
            template: t.clone(),
            replicas: *r,
        })
    }

    /// Reads the objects of `store`; those that do not convert are returned as errors (and left
    /// out).
    pub fn from_store(store: &ObjectStore) -> (CapacityObjects, Vec<ObjectError>) {
        let mut out = CapacityObjects::default();
        let mut errors = Vec::new();
        let known = |v: &Value, versions: &[&str]| -> Result<(), String> {
            let api_version = v.get("apiVersion").and_then(Value::as_str).unwrap_or("");
            let version = api_version.rsplit('/').next().unwrap_or("");
            if versions.contains(&version) {
                Ok(())
            } else {
                Err(format!(
                    "field apiVersion: {api_version:?} is not a version this autoscaler reads ({})",
                    versions.join(", ")
                ))
            }
        };
        for (key, v) in store.list(GROUP, provisioning_request::KIND) {
            match known(v, &provisioning_request::VERSIONS)
                .and_then(|()| ProvisioningRequest::from_value(v).map_err(|e| e.detail()))
            {
                Ok(r) => out.requests.push(r),
                Err(error) => errors.push(ObjectError {
                    key: key.clone(),
                    error,
                }),
            }
        }
        for (key, v) in store.list(GROUP, capacity_buffer::KIND) {
            match known(v, &capacity_buffer::VERSIONS)
                .and_then(|()| CapacityBuffer::from_value(v).map_err(|e| e.detail()))
            {
                Ok(b) => out.buffers.push(b),
                Err(error) => errors.push(ObjectError {
                    key: key.clone(),
                    error,
                }),
            }
        }
        for (key, v) in store.list("", "PodTemplate") {
            match typed::<api::PodTemplate>(v) {
                Ok(t) => {
                    out.templates
                        .insert((key.namespace.clone(), key.name.clone()), t);
                }
                Err(error) => errors.push(ObjectError {
                    key: key.clone(),
                    error,
                }),
            }
        }
        let mut workload = |key: &crate::store::ObjectKey,
                            template: Option<api::PodTemplateSpec>,
                            replicas: Option<i32>| {
            let replicas = replicas.and_then(|r| u32::try_from(r).ok());
            out.workloads.insert(
                (
                    key.namespace.clone(),
                    key.group.clone(),
                    key.kind.clone(),
                    key.name.clone(),
                ),
                (template.unwrap_or_default(), replicas),
            );
        };
        // Workloads are read only for their pod template and replicas; one that does not
        // decode is simply not a buffer's workload (the drain rules report it elsewhere).
        for (key, v) in store.list("apps", "Deployment") {
            if let Ok(d) = typed::<apps::Deployment>(v) {
                let spec = d.spec.unwrap_or_default();
                workload(key, Some(spec.template), Some(spec.replicas.unwrap_or(1)));
            }
        }
        for (key, v) in store.list("apps", "ReplicaSet") {
            if let Ok(d) = typed::<apps::ReplicaSet>(v) {
                let spec = d.spec.unwrap_or_default();
                workload(key, spec.template, Some(spec.replicas.unwrap_or(1)));
            }
        }
        for (key, v) in store.list("apps", "StatefulSet") {
            if let Ok(d) = typed::<apps::StatefulSet>(v) {
                let spec = d.spec.unwrap_or_default();
                workload(key, Some(spec.template), Some(spec.replicas.unwrap_or(1)));
            }
        }
        for (key, v) in store.list("batch", "Job") {
            if let Ok(d) = typed::<batch::Job>(v) {
                let spec = d.spec.unwrap_or_default();
                workload(
                    key,
                    Some(spec.template),
                    Some(spec.parallelism.unwrap_or(1)),
                );
            }
        }
        (out, errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_s_requests_buffers_templates_and_workloads_are_read_and_bad_ones_named() {
        let mut store = ObjectStore::new();
        store
            .load_yaml(
                "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\n\
                 metadata: {name: job, namespace: batch}\n\
                 spec: {provisioningClassName: check-capacity.autoscaling.x-k8s.io,\n\
                 podSets: [{podTemplateRef: {name: worker}, count: 2}]}\n---\n\
                 apiVersion: autoscaling.x-k8s.io/v2\nkind: ProvisioningRequest\n\
                 metadata: {name: future, namespace: batch}\nspec: {}\n---\n\
                 apiVersion: autoscaling.x-k8s.io/v1beta1\nkind: CapacityBuffer\n\
                 metadata: {name: headroom, namespace: web}\n\
                 spec: {scalableRef: {apiGroup: apps, kind: Deployment, name: web}, percentage: 10}\n---\n\
                 apiVersion: v1\nkind: PodTemplate\nmetadata: {name: worker, namespace: batch}\n\
                 template: {spec: {containers: [{name: c, image: i}]}}\n---\n\
                 apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: web}\n\
                 spec: {replicas: 30, selector: {}, template: {spec: {containers: [{name: c, image: i}]}}}\n",
            )
            .unwrap();
        let (o, errors) = CapacityObjects::from_store(&store);
        assert_eq!(o.requests.len(), 1);
        assert_eq!(o.buffers.len(), 1);
        assert!(o.template("batch", "worker").is_some());
        assert_eq!(
            o.workload("web", "apps", "Deployment", "web")
                .unwrap()
                .replicas,
            Some(30)
        );
        assert_eq!(errors.len(), 1, "{errors:?}");
        let e = errors[0].to_string();
        assert!(
            e.contains("future") && e.contains("field apiVersion"),
            "{e}"
        );
    }
}
