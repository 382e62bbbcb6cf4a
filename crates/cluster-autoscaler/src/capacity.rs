//! Capacity on request in `plan`: the ProvisioningRequests, CapacityBuffers and PodTemplates of
//! a snapshot read for the loop, and the loop's decisions on them as `plan` prints them.
//!
//! Input and output only: the core decides them within the loop
//! (`Autoscaler::run_once` given the objects, as `run` gives them), so `plan` shows what `run`
//! would decide. An object that does not convert is an error naming it and the field (a
//! snapshot file is fixed, not skipped).

use anyhow::anyhow;
use autoscaler_core::CapacityDecision;
use autoscaler_model::{CapacityObjects, ObjectStore};

/// The capacity-on-request objects of `store`, every one converted.
pub fn objects(store: &ObjectStore) -> anyhow::Result<CapacityObjects> {
    let (objects, errors) = CapacityObjects::from_store(store);
    if let Some(e) = errors.first() {
        return Err(anyhow!("{e}"));
    }
    Ok(objects)
}

/// The section `plan` prints after the loop's report.
pub fn text(c: &CapacityDecision) -> String {
    let lines = c.lines();
    let mut out = String::from("\nCapacity on request:\n");
    if lines.is_empty() {
        out.push_str("  no ProvisioningRequest or CapacityBuffer\n");
    }
    for l in lines {
        out.push_str(&format!("  {l}\n"));
    }
    out
}

/// The same, for `plan --output json`: one string per request and buffer.
pub fn json(c: &CapacityDecision) -> serde_json::Value {
    serde_json::Value::from(c.lines())
}

#[cfg(test)]
mod tests {
    use autoscaler_clusterapi::ClusterApiConfig;
    use autoscaler_core::AutoscalerOptions;

    const NOW_MS: i64 = 1_767_225_600_000;

    fn snapshot_with(extra: &str) -> String {
        let base = include_str!("../examples/snapshot.yaml");
        format!("{base}\n---\n{extra}")
    }

    const REQUESTS: &str = "\
apiVersion: v1
kind: PodTemplate
metadata: {name: worker, namespace: batch}
template:
  spec:
    containers: [{name: c, image: i, resources: {requests: {cpu: \"1\", memory: 1Gi}}}]
---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: small, namespace: batch, creationTimestamp: \"2025-12-31T23:59:00Z\"}
spec:
  provisioningClassName: check-capacity.autoscaling.x-k8s.io
  podSets: [{podTemplateRef: {name: worker}, count: 1}]
---
apiVersion: autoscaling.x-k8s.io/v1beta1
kind: CapacityBuffer
metadata: {name: headroom, namespace: batch}
spec: {podTemplateRef: {name: worker}, replicas: 2}
";

    fn options(on: bool) -> AutoscalerOptions {
        let mut o = AutoscalerOptions::default();
        o.capacity.requests_mut().set_enabled(on);
        o.capacity.set_buffer_controller(on);
        o.capacity.set_buffer_pods(on);
        o
    }

    fn plan(text: &str, on: bool) -> anyhow::Result<String> {
        crate::plan::plan_text(
            text,
            &ClusterApiConfig::default(),
            &options(on),
            "kube-system",
            NOW_MS,
            3,
        )
    }

    #[test]
    fn plan_shows_each_request_and_buffer_decision_and_the_conditions_it_would_write() {
        // The snapshot's pending pods not marked Unschedulable (yet): no ordinary pod waits for
        // a scale-up, so this loop is the requests' (see the next test).
        let quiet =
            snapshot_with(REQUESTS).replace("reason: Unschedulable}", "reason: SchedulingGated}");
        let out = plan(&quiet, true).unwrap();
        assert!(out.contains("\nCapacity on request:\n"), "{out}");
        assert!(
            out.contains(
                "  ProvisioningRequest batch/small (check-capacity.autoscaling.x-k8s.io): all its \
                 pods fit the cluster; writes Accepted=True (Accepted: ProvisioningRequest is \
                 accepted by ClusterAutoscaler), Provisioned=True (CapacityIsFound: Capacity is \
                 found in the cluster)\n"
            ),
            "{out}"
        );
        assert!(
            out.contains(
                "  CapacityBuffer batch/headroom: 2 virtual pods join the pending pods; writes \
                 ReadyForProvisioning=True (AttributesSetSuccessfully: ready), replicas 2, \
                 Provisioning=True (FakePodsInjected)\n"
            ),
            "{out}"
        );
    }

    #[test]
    fn plan_shows_the_loop_run_would_decide_requests_waiting_while_ordinary_pods_have_their_turn() {
        // `run`'s first loop with ordinary pods waiting is theirs (upstream's wrapper
        // orchestrator starts there): the request waits and writes nothing, the buffer's pods
        // join the loop all the same.
        let out = plan(&snapshot_with(REQUESTS), true).unwrap();
        assert!(
            out.contains(
                "  ProvisioningRequest batch/small (check-capacity.autoscaling.x-k8s.io): waiting \
                 for its turn or its retry backoff\n"
            ),
            "{out}"
        );
        assert!(
            out.contains("  CapacityBuffer batch/headroom: 2 virtual pods join the pending pods"),
            "{out}"
        );
    }

    #[test]
    fn without_the_flags_plan_leaves_requests_and_buffers_alone() {
        let out = plan(&snapshot_with(REQUESTS), false).unwrap();
        assert!(!out.contains("Capacity on request"), "{out}");
        assert_eq!(
            out,
            plan(include_str!("../examples/snapshot.yaml"), false).unwrap()
        );
    }

    #[test]
    fn a_malformed_request_is_an_error_naming_it_and_the_field() {
        let bad = "apiVersion: autoscaling.x-k8s.io/v1\nkind: ProvisioningRequest\n\
                   metadata: {name: bad, namespace: batch}\n\
                   spec: {provisioningClassName: check-capacity.autoscaling.x-k8s.io,\n\
                   podSets: [{podTemplateRef: {name: worker}, count: 0}]}\n";
        let e = plan(&snapshot_with(bad), true).unwrap_err().to_string();
        assert!(
            e.contains("ProvisioningRequest batch/bad") && e.contains("spec.podSets[0].count"),
            "{e}"
        );
    }
}
