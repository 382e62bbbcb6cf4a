//! The watches of the capacity-on-request kinds: ProvisioningRequests
//! (`autoscaling.x-k8s.io/v1`) with `--enable-provisioning-requests`, CapacityBuffers
//! (`autoscaling.x-k8s.io/v1beta1`, else `v1alpha1`) with either buffer flag, and the
//! PodTemplates (and, for buffers, the Deployments a `scalableRef` may name) they read.
//!
//! All are optional: a cluster without the CRDs (`404`) or an identity not allowed to read them
//! (`403`) leaves the kind empty and synced, said once, and the watcher keeps trying with the
//! optional kinds' backoff, so CRDs installed later are picked up. An object the model refuses
//! is cached (the status write needs it whole) but named as skipped, and left out of the
//! decisions. Nothing here decides or writes.

use std::sync::Arc;

use k8s_openapi::api::apps::v1 as apps;
use k8s_openapi::api::core::v1 as api;
use kube::api::{Api, ApiResource, DynamicObject, TypeMeta};
use kube::runtime::watcher;
use serde_json::Value;
use tokio::task::JoinHandle;

use super::{Entry, Invalid, OnNotFound, Shared, encode, keep, spawn_kind, spawn_typed_with};
use autoscaler_model::{
    CAPACITY_API_GROUP, CAPACITY_BUFFER_KIND, CAPACITY_BUFFER_VERSIONS, CapacityBuffer,
    PROVISIONING_REQUEST_KIND, PROVISIONING_REQUEST_VERSIONS, ProvisioningRequest,
};

/// Which capacity-on-request kinds are watched, and at which versions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapacityWatch {
    /// Watch ProvisioningRequests (`--enable-provisioning-requests`).
    pub requests: bool,
    /// Watch CapacityBuffers (`--capacity-buffer-controller-enabled` or
    /// `--capacity-buffer-pod-injection-enabled`).
    pub buffers: bool,
    /// The version ProvisioningRequests are read at ([`capacity_versions`]).
    pub request_version: String,
    /// The version CapacityBuffers are read at ([`capacity_versions`]).
    pub buffer_version: String,
}

impl Default for CapacityWatch {
    /// Nothing watched; the newest versions the model reads.
    fn default() -> Self {
        CapacityWatch {
            requests: false,
            buffers: false,
            request_version: PROVISIONING_REQUEST_VERSIONS[0].into(),
            buffer_version: CAPACITY_BUFFER_VERSIONS[0].into(),
        }
    }
}

impl CapacityWatch {
    /// Whether any kind is watched.
    pub fn any(&self) -> bool {
        self.requests || self.buffers
    }
}

/// The versions of `autoscaling.x-k8s.io` the two kinds are read at: the first version the
/// model reads that the server serves; the model's newest when neither is served (or discovery
/// fails): the kind is optional and its watch retried until the CRD appears.
pub async fn capacity_versions(client: &kube::Client) -> (String, String) {
    let group = kube::discovery::group(client, CAPACITY_API_GROUP)
        .await
        .ok();
    let pick = |kind: &str, versions: &[&str]| {
        let served = |v: &str| {
            group.as_ref().is_some_and(|g| {
                g.versioned_resources(v)
                    .iter()
                    .any(|(ar, _)| ar.kind == kind)
            })
        };
        versions
            .iter()
            .find(|v| served(v))
            .copied()
            .unwrap_or(versions[0])
            .to_string()
    };
    let requests = pick(PROVISIONING_REQUEST_KIND, &PROVISIONING_REQUEST_VERSIONS);
    let buffers = pick(CAPACITY_BUFFER_KIND, &CAPACITY_BUFFER_VERSIONS);
    if group.is_none() {
        tracing::info!(
            group = CAPACITY_API_GROUP,
            "API group not served (the ProvisioningRequest and CapacityBuffer CRDs are not installed); watched anyway, picked up once installed"
        );
    }
    (requests, buffers)
}

/// Starts the watches `config` asks for.
pub(super) fn spawn_capacity(
    tasks: &mut Vec<JoinHandle<()>>,
    shared: &Shared,
    c: &kube::Client,
    config: &CapacityWatch,
) {
    if !config.any() {
        return;
    }
    let all = watcher::Config::default;
    spawn_typed_with::<api::PodTemplate>(
        tasks,
        shared,
        Api::all(c.clone()),
        all(),
        keep,
        super::any,
        OnNotFound::Optional,
    );
    if config.requests {
        tasks.push(spawn_crd(
            shared,
            c,
            PROVISIONING_REQUEST_KIND,
            "provisioningrequests",
            &config.request_version,
            |v| ProvisioningRequest::from_value(v).map(drop),
        ));
    }
    if config.buffers {
        tasks.push(spawn_crd(
            shared,
            c,
            CAPACITY_BUFFER_KIND,
            "capacitybuffers",
            &config.buffer_version,
            |v| CapacityBuffer::from_value(v).map(drop),
        ));
        // A buffer's `scalableRef` may name a Deployment; the other workloads are watched
        // for the drain rules already.
        spawn_typed_with::<apps::Deployment>(
            tasks,
            shared,
            Api::all(c.clone()),
            all(),
            keep,
            super::any,
            OnNotFound::Optional,
        );
    }
}

/// One CRD kind of `autoscaling.x-k8s.io` at `version`, cached as JSON and checked by the
/// model (`check`).
fn spawn_crd(
    shared: &Shared,
    c: &kube::Client,
    kind: &'static str,
    plural: &str,
    version: &str,
    check: fn(&Value) -> Result<(), autoscaler_model::ModelError>,
) -> JoinHandle<()> {
    let group = CAPACITY_API_GROUP;
    let ar = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: format!("{group}/{version}"),
        kind: kind.into(),
        plural: plural.into(),
    };
    let types = TypeMeta {
        api_version: ar.api_version.clone(),
        kind: kind.into(),
    };
    spawn_kind(
        shared,
        Api::<crate::lenient::Decoded<DynamicObject>>::all_with(c.clone(), &ar),
        watcher::Config::default(),
        group.into(),
        kind.into(),
        OnNotFound::Optional,
        move |mut o: DynamicObject| {
            // List items may come without their type; the store keys objects by it.
            o.types = Some(types.clone());
            let (key, value): (_, Arc<Value>) = encode(&o)?;
            let invalid = check(&value).err().map(|e| Invalid {
                version: o.metadata.resource_version.clone().unwrap_or_default(),
                reason: e.detail(),
            });
            Some(Entry {
                key,
                value,
                invalid,
            })
        },
    )
}

#[cfg(test)]
mod tests {
    use super::super::{WatchConfig, start_with};
    use super::*;
    use crate::Clients;
    use crate::skipped::SkippedObjects;
    use autoscaler_clusterapi::ClusterApiConfig;
    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::json;

    type Respond = tower_test::mock::SendResponse<Response<Body>>;

    fn send(r: Respond, code: u16, v: &Value) {
        r.send_response(
            Response::builder()
                .status(code)
                .body(Body::from(serde_json::to_vec(v).expect("json")))
                .expect("response"),
        );
    }

    fn list(items: Vec<Value>) -> Value {
        json!({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "1"},
               "items": items})
    }

    /// A server without the CRDs (`crds: false`: `404` for the group) or with one valid and one
    /// malformed request; every other list is empty, watches are held open.
    fn server(crds: bool) -> (kube::Client, JoinHandle<Vec<String>>) {
        let (svc, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        let client = kube::Client::new(svc, "default");
        let task = tokio::spawn(async move {
            let mut open = Vec::new();
            let mut seen = Vec::new();
            while let Some((req, r)) = handle.next_request().await {
                let uri = req.uri().to_string();
                assert!(
                    crate::api_calls::is_declared(req.method(), &uri),
                    "undeclared {uri}"
                );
                seen.push(uri.clone());
                let crd = uri.starts_with("/apis/autoscaling.x-k8s.io/");
                if crd && !crds {
                    send(
                        r,
                        404,
                        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                "reason": "NotFound", "code": 404, "message": "not found"}),
                    );
                } else if uri.contains("sendInitialEvents=true") {
                    send(
                        r,
                        422,
                        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                "reason": "Invalid", "code": 422}),
                    );
                } else if uri.contains("watch=true") {
                    open.push(r);
                } else if uri.starts_with("/apis/autoscaling.x-k8s.io/v1/provisioningrequests") {
                    let spec = |count: i64| {
                        json!({"provisioningClassName": "check-capacity.autoscaling.x-k8s.io",
                               "podSets": [{"podTemplateRef": {"name": "w"}, "count": count}]})
                    };
                    send(
                        r,
                        200,
                        &list(vec![
                            json!({"metadata": {"name": "good", "namespace": "batch",
                                                "resourceVersion": "5"}, "spec": spec(2)}),
                            json!({"metadata": {"name": "bad", "namespace": "batch",
                                                "resourceVersion": "6"}, "spec": spec(0)}),
                        ]),
                    );
                } else {
                    send(r, 200, &list(Vec::new()));
                }
            }
            seen
        });
        (client, task)
    }

    async fn until(what: &str, mut cond: impl FnMut() -> bool) {
        for _ in 0..1000 {
            if cond() {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        panic!("timed out waiting for {what}");
    }

    fn config(skipped: Arc<SkippedObjects>) -> WatchConfig {
        WatchConfig {
            skipped,
            capacity: CapacityWatch {
                requests: true,
                buffers: true,
                ..CapacityWatch::default()
            },
            ..WatchConfig::new("kube-system", ClusterApiConfig::default())
        }
    }

    #[tokio::test]
    async fn without_the_crds_the_kinds_count_as_synced_and_empty() {
        let (client, server) = server(false);
        let config = config(Arc::new(SkippedObjects::default()));
        let watches = start_with(&Clients::joined(client), &config, Vec::new());
        until("synced without the CRDs", || watches.is_synced()).await;
        {
            let inf = autoscaler_actuation::lock_informer(watches.informer());
            assert_eq!(
                inf.store()
                    .list(CAPACITY_API_GROUP, PROVISIONING_REQUEST_KIND)
                    .count(),
                0
            );
        }
        drop(watches);
        server.abort();
    }

    #[tokio::test]
    async fn requests_templates_and_deployments_are_watched_and_a_malformed_request_named() {
        let (client, server) = server(true);
        let skipped = Arc::new(SkippedObjects::default());
        let watches = start_with(
            &Clients::joined(client),
            &config(skipped.clone()),
            Vec::new(),
        );
        until("synced", || watches.is_synced()).await;
        {
            let inf = autoscaler_actuation::lock_informer(watches.informer());
            let names: Vec<String> = inf
                .store()
                .list(CAPACITY_API_GROUP, PROVISIONING_REQUEST_KIND)
                .map(|(k, _)| k.name.clone())
                .collect();
            // Both cached (a status write needs the object whole); the bad one is named.
            assert_eq!(names, ["bad", "good"]);
            let (objects, errors) = autoscaler_model::CapacityObjects::from_store(inf.store());
            assert_eq!(objects.requests.len(), 1);
            assert_eq!(errors.len(), 1);
        }
        let (count, objects) = skipped.summary();
        assert_eq!(count, 1, "{objects:?}");
        assert!(
            objects[0].starts_with("ProvisioningRequest batch/bad: ")
                && objects[0].contains("spec.podSets[0].count"),
            "{objects:?}"
        );
        drop(watches);
        server.abort();
    }
}
