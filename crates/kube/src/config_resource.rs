//! Watches the cluster's `ClusterAutoscaler` singleton (`autoscaling.openshift.io/v1`,
//! cluster-scoped, named `default`) and hands every version of it to the caller.
//!
//! It decides only whether the cluster serves the kind and when the object changed (a new
//! `spec`, or deleted). It never interprets the object: what its fields mean, and whether a
//! change is valid, is the caller's to decide (the binary maps it onto its flags).

use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use serde_json::Value;
use tokio::task::JoinHandle;

/// API group of the `ClusterAutoscaler` resource.
pub const GROUP: &str = "autoscaling.openshift.io";
/// Its kind.
pub const KIND: &str = "ClusterAutoscaler";
/// The name of the singleton the autoscaler reads.
pub const NAME: &str = "default";

/// The served version of the `ClusterAutoscaler` kind, `None` when the cluster does not serve
/// it (most clusters outside OpenShift).
pub async fn served(client: &kube::Client) -> Result<Option<ApiResource>, kube::Error> {
    match kube::discovery::group(client, GROUP).await {
        Ok(g) => Ok(g.recommended_kind(KIND).map(|(ar, _)| ar)),
        Err(kube::Error::Discovery(kube::error::DiscoveryError::MissingApiGroup(_))) => Ok(None),
        Err(e) => Err(e),
    }
}

/// What the watch last told the caller, to call it only on a real change.
#[derive(Debug, Default, PartialEq)]
enum Seen {
    /// Nothing yet.
    #[default]
    Unknown,
    /// The object is absent.
    Absent,
    /// The object, with this `spec`.
    Spec(Value),
}

/// Spawns a task that watches the singleton and calls `on_change` with the object (as JSON)
/// whenever its `spec` changes, and with `None` when it is absent (at start) or deleted.
/// Metadata-only updates (status, labels, resourceVersion) do not call it. Must be called
/// within a tokio runtime; a watch error is logged and retried with backoff.
pub fn spawn(
    client: kube::Client,
    resource: ApiResource,
    mut on_change: impl FnMut(Option<Value>) + Send + 'static,
) -> JoinHandle<()> {
    let api: Api<DynamicObject> = Api::all_with(client, &resource);
    let config = watcher::Config::default().fields(&format!("metadata.name={NAME}"));
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(watcher(api, config).default_backoff());
        let mut seen = Seen::Unknown;
        let mut listed: Option<Value> = None;
        while let Some(event) = stream.next().await {
            let now = match event {
                Ok(Event::Apply(o)) => Some(to_json(&o)),
                Ok(Event::Delete(_)) => None,
                Ok(Event::Init) => {
                    listed = None;
                    continue;
                }
                Ok(Event::InitApply(o)) => {
                    listed = Some(to_json(&o));
                    continue;
                }
                Ok(Event::InitDone) => listed.take(),
                Err(e) => {
                    tracing::warn!(error = %e, "watching ClusterAutoscaler {NAME}: retrying");
                    continue;
                }
            };
            let next = match &now {
                Some(o) => Seen::Spec(o.get("spec").cloned().unwrap_or(Value::Null)),
                None => Seen::Absent,
            };
            if next != seen {
                seen = next;
                on_change(now);
            }
        }
    })
}

fn to_json(o: &DynamicObject) -> Value {
    serde_json::to_value(o).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_api::{client, next, respond};
    use serde_json::json;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    fn ca(rv: &str, spec: Value) -> Value {
        json!({"apiVersion": "autoscaling.openshift.io/v1", "kind": "ClusterAutoscaler",
            "metadata": {"name": "default", "resourceVersion": rv}, "spec": spec})
    }

    #[tokio::test]
    async fn each_new_spec_and_the_deletion_reach_the_caller_once() {
        let (client, mut api) = client();
        let server = tokio::spawn(async move {
            let mut held = Vec::new();
            let mut watches = 0;
            while let Some((seen, send)) = next(&mut api).await {
                assert!(
                    seen.uri
                        .starts_with("/apis/autoscaling.openshift.io/v1/clusterautoscalers?")
                        && seen.uri.contains("fieldSelector=metadata.name%3Ddefault"),
                    "{}",
                    seen.uri
                );
                if !seen.uri.contains("watch=true") {
                    let list = json!({"apiVersion": "autoscaling.openshift.io/v1",
                        "kind": "ClusterAutoscalerList", "metadata": {"resourceVersion": "1"},
                        "items": [ca("1", json!({"maxPodGracePeriod": 60}))]});
                    respond(send, 200, &list);
                    continue;
                }
                watches += 1;
                if watches > 1 {
                    held.push(send);
                    continue;
                }
                let events = [
                    // A status or label change: the spec is the same.
                    json!({"type": "MODIFIED", "object": ca("2", json!({"maxPodGracePeriod": 60}))}),
                    json!({"type": "MODIFIED", "object": ca("3", json!({"maxPodGracePeriod": 30}))}),
                    json!({"type": "DELETED", "object": ca("4", json!({"maxPodGracePeriod": 30}))}),
                ];
                let body: String = events.iter().map(|e| format!("{e}\n")).collect();
                let resp = http::Response::builder()
                    .status(200)
                    .body(kube::client::Body::from(body.into_bytes()))
                    .expect("response");
                send.send_response(resp);
            }
        });
        let got: Arc<Mutex<Vec<Option<Value>>>> = Arc::default();
        let sink = got.clone();
        let ar = ApiResource {
            group: GROUP.into(),
            version: "v1".into(),
            api_version: "autoscaling.openshift.io/v1".into(),
            kind: KIND.into(),
            plural: "clusterautoscalers".into(),
        };
        let task = spawn(client, ar, move |o| sink.lock().expect("lock").push(o));
        for _ in 0..100 {
            if got.lock().expect("lock").len() >= 3 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let got = got.lock().expect("lock").clone();
        let specs: Vec<Option<Value>> = (got.iter())
            .map(|o| o.as_ref().map(|o| o["spec"]["maxPodGracePeriod"].clone()))
            .collect();
        assert_eq!(specs, [Some(json!(60)), Some(json!(30)), None]);
        task.abort();
        server.abort();
    }
}
