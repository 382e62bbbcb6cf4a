//! The DRA parts of a scenario: a group's DRA driver (`node_groups[].dra`), the claims of a
//! workload's pods (`pod.claims`) and the `resource.k8s.io/v1` objects of `objects:` (device
//! classes, claim templates, claims, slices).
//!
//! It decides how those map onto the world (the devices a node publishes, the pod spec's
//! `resourceClaims`) and refuses what the API server or the DRA model would refuse, naming the
//! field. It never runs anything.

use serde_json::{Value, json};

use super::{
    DraDriverSpec, DraFile, NameRule, PodClaimFile, ScenarioError, WorkloadFile, check_name,
    invalid, ms, typed,
};

/// Most devices of one slice (the API server's limit).
const MAX_DEVICES: u32 = 128;

/// Most claims of one pod (the API server's limit).
const MAX_POD_CLAIMS: usize = 32;

/// A validated DRA driver of a group at `field`.
pub(super) fn driver(field: &str, d: &DraFile) -> Result<DraDriverSpec, ScenarioError> {
    check_name(
        &format!("{field}.driver"),
        &d.driver,
        NameRule::ShortSubdomain,
    )?;
    if !(1..=MAX_DEVICES).contains(&d.devices) {
        return Err(invalid(
            format!("{field}.devices"),
            format!("{} is not between 1 and {MAX_DEVICES}", d.devices),
        ));
    }
    for (k, v) in &d.capacity {
        autoscaler_model::parse_quantity(v)
            .map_err(|e| invalid(format!("{field}.capacity.{k}"), e.to_string()))?;
    }
    let prefix = d.device_prefix.as_deref().unwrap_or("gpu");
    check_name(&format!("{field}.device_prefix"), prefix, NameRule::Label)?;
    let devices: Vec<Value> = (0..d.devices)
        .map(|i| {
            let mut dev = json!({"name": format!("{prefix}-{i}")});
            if !d.attributes.is_empty() {
                dev["attributes"] = Value::Object(d.attributes.clone());
            }
            if !d.capacity.is_empty() {
                let caps: serde_json::Map<String, Value> = (d.capacity.iter())
                    .map(|(k, v)| (k.clone(), json!({"value": v})))
                    .collect();
                dev["capacity"] = Value::Object(caps);
            }
            dev
        })
        .collect();
    // The slice a node would publish must be one the API server and the model take: checked on
    // one device, errors pointing at the scenario's fields.
    let sample = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": "sample"},
        "spec": {"driver": d.driver, "nodeName": "sample",
            "pool": {"name": "sample", "generation": 1, "resourceSliceCount": 1},
            "devices": [devices[0].clone()]}});
    typed::<k8s_openapi::api::resource::v1::ResourceSlice>("", &sample).map_err(|e| match e {
        ScenarioError::Invalid { field: at, message } => {
            let at = at.trim_start_matches(".spec.devices[0]");
            invalid(format!("{field}{}", scenario_path(at)), message)
        }
        other => other,
    })?;
    model_errors(&format!("{field}.attributes"), &sample)?;
    Ok(DraDriverSpec {
        driver: d.driver.clone(),
        delay_ms: match &d.delay {
            Some(t) => ms(&format!("{field}.delay"), t)?,
            None => 0,
        },
        devices,
    })
}

/// Where a field of a device (`.attributes.x.int`) is written in the scenario.
fn scenario_path(at: &str) -> String {
    match at.strip_prefix(".capacity.") {
        Some(rest) => format!(".capacity.{}", rest.trim_end_matches(".value")),
        None => at.to_string(),
    }
}

/// The errors the DRA model finds in object `o`, as an error at `field`.
fn model_errors(field: &str, o: &Value) -> Result<(), ScenarioError> {
    let mut store = autoscaler_model::ObjectStore::new();
    store
        .insert(o.clone(), field)
        .map_err(|e| invalid(field, e.to_string()))?;
    let (_, errors) = autoscaler_model::Dra::from_store(&store);
    match errors.first() {
        Some(e) => Err(invalid(field, e.error.clone())),
        None => Ok(()),
    }
}

/// Adds a workload's claims to its pod spec: `spec.resourceClaims`, and each claimed by the
/// first container (`resources.claims`).
pub(super) fn pod_claims(
    field: &str,
    claims: &[PodClaimFile],
    spec: &mut Value,
) -> Result<(), ScenarioError> {
    if claims.is_empty() {
        return Ok(());
    }
    if claims.len() > MAX_POD_CLAIMS {
        return Err(invalid(
            field,
            format!(
                "{} claims are more than the {MAX_POD_CLAIMS} a pod may have",
                claims.len()
            ),
        ));
    }
    let mut entries = Vec::new();
    let mut uses = Vec::new();
    for (i, c) in claims.iter().enumerate() {
        let at = format!("{field}[{i}]");
        check_name(&format!("{at}.name"), &c.name, NameRule::Label)?;
        if claims[..i].iter().any(|o| o.name == c.name) {
            return Err(invalid(
                format!("{at}.name"),
                format!("{} is given twice", c.name),
            ));
        }
        let entry = match (&c.template, &c.claim) {
            (Some(t), None) => {
                check_name(&format!("{at}.template"), t, NameRule::Subdomain)?;
                json!({"name": c.name, "resourceClaimTemplateName": t})
            }
            (None, Some(n)) => {
                check_name(&format!("{at}.claim"), n, NameRule::Subdomain)?;
                json!({"name": c.name, "resourceClaimName": n})
            }
            _ => {
                return Err(invalid(
                    at,
                    "exactly one of template and claim must be given",
                ));
            }
        };
        entries.push(entry);
        uses.push(json!({"name": c.name}));
    }
    spec["resourceClaims"] = Value::Array(entries);
    if let Some(first) = spec.pointer_mut("/containers/0").filter(|c| c.is_object()) {
        first["resources"]["claims"] = Value::Array(uses);
    }
    Ok(())
}

/// Checks a `resource.k8s.io/v1` object of `objects:` as the API server and the DRA model read
/// it.
pub(super) fn check_object(field: &str, kind: &str, o: &Value) -> Result<(), ScenarioError> {
    use k8s_openapi::api::resource::v1 as resource;
    match kind {
        "DeviceClass" => typed::<resource::DeviceClass>(field, o).map(drop)?,
        "ResourceClaimTemplate" => typed::<resource::ResourceClaimTemplate>(field, o).map(drop)?,
        "ResourceClaim" => typed::<resource::ResourceClaim>(field, o).map(drop)?,
        "ResourceSlice" => typed::<resource::ResourceSlice>(field, o).map(drop)?,
        other => {
            return Err(invalid(
                format!("{field}.kind"),
                format!(
                    "{other} is not a kind of resource.k8s.io/v1 the simulation knows \
                     (DeviceClass, ResourceClaimTemplate, ResourceClaim, ResourceSlice)"
                ),
            ));
        }
    }
    model_errors(field, o)
}

/// Every claim template a workload's pods name exists in `objects` (in the workload's
/// namespace): a missing one would leave its pods pending for a reason the scenario did not
/// mean.
pub(super) fn check_references(
    workloads: &[WorkloadFile],
    objects: &[Value],
) -> Result<(), ScenarioError> {
    for (i, w) in workloads.iter().enumerate() {
        let (namespace, pod) = match w {
            WorkloadFile::Deployment(d) => (&d.namespace, &d.pod),
            WorkloadFile::Job(j) => (&j.namespace, &j.pod),
            WorkloadFile::DaemonSet(d) => (&d.namespace, &d.pod),
            WorkloadFile::StatefulSet(s) => (&s.namespace, &s.pod),
            WorkloadFile::ProvisioningRequest(r) => (&r.namespace, &r.pod),
            WorkloadFile::Trace(_) => continue,
        };
        for (j, c) in pod.claims.iter().enumerate() {
            let Some(t) = &c.template else { continue };
            let found = objects.iter().any(|o| {
                o["apiVersion"] == "resource.k8s.io/v1"
                    && o["kind"] == "ResourceClaimTemplate"
                    && o["metadata"]["name"] == t.as_str()
                    && o["metadata"]["namespace"].as_str().unwrap_or("default") == namespace
            });
            if !found {
                return Err(invalid(
                    format!("workloads[{i}].pod.claims[{j}].template"),
                    format!("no ResourceClaimTemplate {namespace}/{t} in objects"),
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::Scenario;
    use std::path::Path;

    const BASE: &str = "\
name: t
duration: 10m
node_groups:
  - name: gpu
    min: 1
    max: 3
    cpu: '8'
    memory: 32Gi
    dra: {driver: gpu.example.com, delay: 30s, devices: 2, attributes: {model: {string: h100}}, capacity: {memory: 80Gi}}
objects:
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: gpu.example.com}
    spec: {selectors: [{cel: {expression: \"device.driver == 'gpu.example.com'\"}}]}
  - apiVersion: resource.k8s.io/v1
    kind: ResourceClaimTemplate
    metadata: {name: one-gpu, namespace: default}
    spec: {spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: gpu.example.com}}]}}}
workloads:
  - kind: job
    name: j
    completions: 2
    duration: 1m
    pod: {claims: [{name: gpu, template: one-gpu}]}
";

    fn error(from: &str, to: &str) -> String {
        assert!(BASE.contains(from), "{from}");
        match Scenario::parse(&BASE.replace(from, to), Path::new(".")) {
            Ok(_) => panic!("{to:?} was accepted"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn a_dra_scenario_reads_into_the_driver_and_the_pod_spec() {
        let s = Scenario::parse(BASE, Path::new(".")).unwrap();
        let d = s.groups[0].dra.as_ref().unwrap();
        assert_eq!(d.driver, "gpu.example.com");
        assert_eq!(d.delay_ms, 30_000);
        assert_eq!(d.devices.len(), 2);
        assert_eq!(d.devices[1]["name"], "gpu-1");
        assert_eq!(d.devices[1]["attributes"]["model"]["string"], "h100");
        assert_eq!(d.devices[1]["capacity"]["memory"]["value"], "80Gi");
        let spec = &s.jobs[0].1.template.spec;
        assert_eq!(
            spec["resourceClaims"],
            serde_json::json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}])
        );
        assert_eq!(
            spec["containers"][0]["resources"]["claims"][0]["name"],
            "gpu"
        );
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            ("devices: 2", "devices: 0", "node_groups[0].dra.devices"),
            (
                "driver: gpu.example.com,",
                "driver: GPU!,",
                "node_groups[0].dra.driver",
            ),
            ("delay: 30s", "delay: soon", "node_groups[0].dra.delay"),
            (
                "{model: {string: h100}}",
                "{model: {string: h100, int: 3}}",
                "node_groups[0].dra.attributes",
            ),
            ("80Gi", "lots", "node_groups[0].dra.capacity.memory"),
            (
                "template: one-gpu}",
                "template: one-gpu, claim: c}",
                "workloads[0].pod.claims[0]",
            ),
            (
                "template: one-gpu}",
                "template: two-gpus}",
                "workloads[0].pod.claims[0].template",
            ),
            (
                "{name: gpu, template",
                "{name: GPU, template",
                "workloads[0].pod.claims[0].name",
            ),
            (
                "deviceClassName: gpu.example.com}",
                "deviceClassName: gpu.example.com, count: 0}",
                "objects[1]",
            ),
            (
                "kind: DeviceClass",
                "kind: DeviceTaintRule",
                "objects[0].kind",
            ),
        ];
        for (from, to, field) in cases {
            let e = error(from, to);
            assert!(e.contains(&format!("`{field}")), "{to}: {e}");
        }
        let e = error(
            "deviceClassName: gpu.example.com}",
            "deviceClassName: gpu.example.com, count: 0}",
        );
        assert!(
            e.contains("spec.spec.devices.requests[0].exactly.count"),
            "{e}"
        );
    }
}
