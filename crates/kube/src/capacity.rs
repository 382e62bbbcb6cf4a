//! Capacity on request in `run`: what comes of the core's capacity decision
//! (`LoopOutcome::capacity`, decided with the loop by `Autoscaler::run_once`)
//! carried out: the requests' conditions and the buffers' statuses, built as status-subresource
//! writes against the watches' cached objects.
//!
//! It never decides (the core does, best-effort-atomic scale-up included) and never writes
//! itself: the writes are effects carried out by the executor (a write decided on an object
//! that changed since is dropped: the next loop decides again).

use autoscaler_actuation::{StatusUpdate, buffer_update, request_update};
use autoscaler_actuation::{buffer_key, request_key};
use autoscaler_core::CapacityDecision;
use autoscaler_model::ObjectStore;

/// The status writes of `decision` against the cached objects of `store`: each request's
/// conditions, and (with `--capacity-buffer-controller-enabled`) each buffer's status that
/// changed (its `Provisioning` condition too with `--capacity-buffer-pod-injection-enabled`). A write whose object changed or left since the decision is dropped, said at
/// debug level: the next loop decides on the fresh object. (An atomic scale-up that failed is
/// said in the decision first: `RequestsDecision::scale_up_failed`.)
pub(crate) fn status_updates(
    decision: &CapacityDecision,
    store: &ObjectStore,
    now_ms: i64,
) -> Vec<StatusUpdate> {
    let mut out = Vec::new();
    for w in &decision.requests.writes {
        let name = format!("{}/{}", w.namespace, w.name);
        let key = request_key(&w.namespace, &w.name);
        let Some(cached) = store.get(&key) else {
            tracing::debug!(request = %name, "request gone before its status write");
            continue;
        };
        match request_update(cached, w) {
            Ok(u) => out.push(u),
            Err(e) => tracing::debug!(error = %e, "status write dropped; decided again next loop"),
        }
    }
    if decision.write_buffer_status {
        for b in &decision.buffers {
            let s = &b.status;
            let Some(cached) = store.get(&buffer_key(&s.namespace, &s.name)) else {
                continue;
            };
            match buffer_update(cached, s, decision.inject_buffer_pods, now_ms) {
                Ok(Some(u)) => out.push(u),
                Ok(None) => {}
                Err(e) => {
                    tracing::debug!(error = %e, "status write dropped; decided again next loop")
                }
            }
        }
    }
    out
}

/// Logs each decision at debug level (`--v=2`), one line per request and buffer, as `plan`
/// prints them.
pub(crate) fn log(decision: &CapacityDecision) {
    for line in decision.lines() {
        tracing::debug!(decision = %line, "capacity on request");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use autoscaler_clusterapi::{ClusterApiConfig, ClusterApiProvider};
    use autoscaler_core::{AutoscalerOptions, ClusterView, Requests, Unlimited, decide_capacity};
    use autoscaler_model::{CapacityObjects, NodeGroup, Pod};
    use rand::SeedableRng;
    use std::sync::Arc;

    const NOW_MS: i64 = 1_767_225_600_000;

    /// One node of 4 CPUs in a Cluster API group of max 5, a PodTemplate of 1 CPU, and
    /// `requests`.
    fn store(requests: &str) -> ObjectStore {
        let mut s = ObjectStore::new();
        s.load_yaml(&format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: n1, labels: {{kubernetes.io/hostname: n1}}}}\n\
             spec: {{providerID: 'test:///n1'}}\n\
             status: {{allocatable: {{cpu: '4', memory: 16Gi, pods: '110'}},\n\
             capacity: {{cpu: '4', memory: 16Gi, pods: '110'}},\n\
             conditions: [{{type: Ready, status: 'True'}}]}}\n---\n\
             apiVersion: v1\nkind: PodTemplate\nmetadata: {{name: worker, namespace: batch}}\n\
             template: {{spec: {{containers: [{{name: c, image: i, resources: {{requests: {{cpu: '1', memory: 1Gi}}}}}}]}}}}\n---\n\
             {requests}"
        ))
        .unwrap();
        s
    }

    fn request(name: &str, class: &str, count: u32, rv: &str) -> String {
        format!(
            "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\n\
             metadata: {{name: {name}, namespace: batch, resourceVersion: '{rv}', generation: 1,\n\
             creationTimestamp: '2025-12-31T23:59:00Z'}}\n\
             spec: {{provisioningClassName: {class},\n\
             podSets: [{{podTemplateRef: {{name: worker}}, count: {count}}}]}}\n"
        )
    }

    fn decide(store: &ObjectStore, pods: &[Arc<Pod>]) -> CapacityDecision {
        let (objects, errors) = CapacityObjects::from_store(store);
        assert!(errors.is_empty(), "{errors:?}");
        let (cluster, errors) = autoscaler_model::read_objects(store);
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(cluster.nodes.len(), 1);
        let (provider, _) = ClusterApiProvider::discover(store, &ClusterApiConfig::default());
        let view = ClusterView::of_objects(&cluster, pods, &provider);
        let mut options = AutoscalerOptions::default();
        options.capacity.requests_mut().set_enabled(true);
        let none = |_: usize, _: &NodeGroup| None;
        decide_capacity(
            &mut Requests::default(),
            &objects,
            &view,
            &options.scale_up,
            &options.capacity,
            NOW_MS,
            &none,
            &mut rand_chacha::ChaCha8Rng::seed_from_u64(1),
            &mut Unlimited,
        )
    }

    #[test]
    fn a_check_capacity_request_that_fits_gets_its_conditions_written_with_its_version() {
        let s = store(&request(
            "small",
            "check-capacity.autoscaling.x-k8s.io",
            2,
            "41",
        ));
        let d = decide(&s, &[]);
        let updates = status_updates(&d, &s, NOW_MS);
        assert_eq!(updates.len(), 1);
        let o = &updates[0].object;
        assert_eq!(o["metadata"]["resourceVersion"], "41");
        let types: Vec<(&str, &str, &str)> = o["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["type"].as_str().unwrap(),
                    c["status"].as_str().unwrap(),
                    c["reason"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            types,
            [
                ("Accepted", "True", "Accepted"),
                ("Provisioned", "True", "CapacityIsFound")
            ]
        );
        assert_eq!(d.requests.booked.len(), 2, "the booking holds both pods");
    }

    /// Upstream's pods filter: every pending pod that consumes a request, whichever, is left out
    /// of the scale-up and gets a `Normal` event with an empty reason naming the request.
    #[test]
    fn pending_consumer_pods_get_upstreams_event() {
        use crate::events::{CONSUMES_PROVISIONING_REQUEST, Target, events_of};
        use autoscaler_core::LoopOutcome;
        use autoscaler_model::testing::PodBuilder;

        let s = store(&request(
            "job",
            "check-capacity.autoscaling.x-k8s.io",
            1,
            "41",
        ));
        let consumer = PodBuilder::new("w-0", 1000, 1 << 30)
            .namespace("batch")
            .owner("Job", "train")
            .unschedulable()
            .with(|p| {
                p.annotations = vec![(
                    "autoscaling.x-k8s.io/consume-provisioning-request".into(),
                    "nowhere".into(),
                )]
            })
            .arc();
        let pods = [consumer];
        let d = decide(&s, &pods);
        let (cluster, _) = autoscaler_model::read_objects(&s);
        let (provider, _) = ClusterApiProvider::discover(&s, &ClusterApiConfig::default());
        let view = ClusterView::of_objects(&cluster, &pods, &provider);
        let outcome = LoopOutcome {
            capacity: Some(d),
            ..LoopOutcome::default()
        };
        let events: Vec<_> = events_of(&view, &outcome)
            .into_iter()
            .filter(|e| matches!(&e.target, Target::Pod { name, .. } if name == "w-0"))
            .collect();
        assert_eq!(events.len(), 1, "{events:?}");
        assert_eq!(events[0].reason, CONSUMES_PROVISIONING_REQUEST);
        assert!(!events[0].warning);
        assert_eq!(
            &*events[0].message,
            "Unschedulable pod didn't trigger scale-up, because it's consuming \
             ProvisioningRequest batch/nowhere"
        );
    }

    #[test]
    fn a_write_on_an_object_that_changed_since_is_dropped() {
        let s = store(&request(
            "small",
            "check-capacity.autoscaling.x-k8s.io",
            1,
            "41",
        ));
        let d = decide(&s, &[]);
        let newer = store(&request(
            "small",
            "check-capacity.autoscaling.x-k8s.io",
            1,
            "42",
        ));
        assert!(status_updates(&d, &newer, NOW_MS).is_empty());
    }

    /// The writes go as `PUT .../status` with the version decided on; a `409` is a conflict,
    /// reported, not retried.
    #[tokio::test]
    async fn status_writes_go_through_the_status_subresource_with_their_version() {
        use crate::test_api::{client, next, respond};
        use autoscaler_actuation::{ActuationOptions, Informer, Report};
        use autoscaler_core::ErrorClass;
        use http::Method;
        use serde_json::json;
        use std::sync::Mutex;

        let s = store(&format!(
            "{}---\n{}",
            request("a", "check-capacity.autoscaling.x-k8s.io", 1, "41"),
            request("b", "check-capacity.autoscaling.x-k8s.io", 100, "52")
        ));
        let d = decide(&s, &[]);
        let updates = status_updates(&d, &s, NOW_MS);
        assert_eq!(updates.len(), 1, "one request taken up per loop");
        let (c, mut mock) = client();
        let server = tokio::spawn(async move {
            let mut seen = Vec::new();
            for code in [200, 409] {
                let Some((req, send)) = next(&mut mock).await else {
                    break;
                };
                seen.push((req.method.clone(), req.uri.clone(), req.body.clone()));
                if code == 200 {
                    // Stored, at the next version.
                    let mut stored = req.body.clone();
                    stored["metadata"]["resourceVersion"] = json!("42");
                    respond(send, 200, &stored);
                } else {
                    respond(
                        send,
                        409,
                        &json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                "reason": "Conflict", "code": 409,
                                "message": "the object has been modified"}),
                    );
                }
            }
            seen
        });
        let informer = Arc::new(Mutex::new(Informer::from_store(&s)));
        let mut executor = crate::execute::Executor::new(
            Arc::new(crate::actuator::Actuator::new(c)),
            informer.clone(),
            ClusterApiConfig::default(),
            ActuationOptions::default(),
        );
        let twice = vec![updates[0].clone(), updates[0].clone()];
        let reports = executor.write_statuses(twice).await;
        drop(executor);
        let seen = server.await.unwrap();
        assert_eq!(seen.len(), 2);
        let (method, uri, body) = &seen[0];
        assert_eq!(*method, Method::PUT);
        assert!(
            uri.starts_with(
                "/apis/autoscaling.x-k8s.io/v1/namespaces/batch/provisioningrequests/a/status"
            ),
            "{uri}"
        );
        assert_eq!(body["metadata"]["resourceVersion"], "41");
        assert_eq!(body["status"]["conditions"][1]["reason"], "CapacityIsFound");
        assert_eq!(
            reports[0],
            Report::StatusWritten {
                object: "ProvisioningRequest batch/a".into()
            }
        );
        match &reports[1] {
            Report::StatusWriteFailed { object, error } => {
                assert_eq!(object, "ProvisioningRequest batch/a");
                assert_eq!(error.class, ErrorClass::Conflict);
            }
            other => panic!("{other:?}"),
        }
        // What was written is cached at once (the watch event may come later).
        let inf = informer.lock().unwrap();
        let cached = inf
            .store()
            .get(&autoscaler_actuation::request_key("batch", "a"))
            .unwrap();
        assert_eq!(cached["metadata"]["resourceVersion"], "42");
        assert_eq!(cached["status"]["conditions"][1]["type"], "Provisioned");
    }
}
