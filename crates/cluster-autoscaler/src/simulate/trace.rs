//! Trace replay: rows of a workload trace CSV
//! (`name,arrival_s,duration_s,cpu_milli,memory_mib,gpu,gpu_model,priority`) become pods
//! created at their (scaled) arrival time, owned by the trace's controller (a Job or a
//! ReplicaSet named after the workload) or bare, and annotated `safe-to-evict` if asked.
//!
//! It decides which rows are kept (sampling, start, limit, horizon) and what each pod looks like.
//! A pod runs for its (scaled) duration counted from when it starts running, not from its
//! creation: a pod that waits for a node still gets its full run. It never touches the world.

use serde_json::{Value, json};

use super::scenario::TimedPod;
use autoscaler_core::names::SAFE_TO_EVICT_ANNOTATION;
use autoscaler_world::SimTime;

/// How rows are turned into pods.
#[derive(Clone, Debug)]
pub struct ReplayOptions {
    /// Namespace of the pods.
    pub namespace: String,
    /// Multiplies arrival times and durations.
    pub time_scale: f64,
    /// Keep every Nth row.
    pub sample: usize,
    /// Skip rows arriving before this trace time (ms, before scaling); later arrivals are
    /// shifted so this time is virtual time 0.
    pub start_ms: SimTime,
    /// Keep at most this many rows.
    pub limit: usize,
    /// Drop rows arriving at or after this virtual time.
    pub horizon_ms: SimTime,
    /// GPU resource name.
    pub gpu_resource: String,
    /// Node label selecting the GPU model, if models are honoured.
    pub gpu_model_label: Option<String>,
    /// Tolerations of every pod.
    pub tolerations: Vec<Value>,
    /// Who owns the pods.
    pub owner: TraceOwner,
    /// The `cluster-autoscaler.kubernetes.io/safe-to-evict` annotation of every pod, if any.
    pub safe_to_evict: Option<bool>,
}

/// The controller of a trace's pods.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TraceOwner {
    /// Bare pods: scale-down never moves them.
    None,
    /// The Job of this name: an evicted pod's replacement starts over.
    Job(String),
    /// The ReplicaSet of this name: an evicted pod's replacement runs the time it had left.
    ReplicaSet(String),
}

impl TraceOwner {
    /// The `ownerReferences` of a pod of this owner (`None` for bare pods).
    fn reference(&self) -> Option<Value> {
        let (api_version, kind, name) = match self {
            TraceOwner::None => return None,
            TraceOwner::Job(n) => ("batch/v1", "Job", n),
            TraceOwner::ReplicaSet(n) => ("apps/v1", "ReplicaSet", n),
        };
        Some(
            json!([{"apiVersion": api_version, "kind": kind, "name": name,
            "uid": format!("trace-{name}"), "controller": true, "blockOwnerDeletion": true}]),
        )
    }
}

const HEADER: &str = "name,arrival_s,duration_s,cpu_milli,memory_mib,gpu,gpu_model,priority";

/// A DNS-1123 name from a trace name.
fn pod_name(raw: &str) -> String {
    let mut s: String = raw
        .chars()
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() { c } else { '-' }
        })
        .collect();
    s = s.trim_matches('-').to_string();
    if s.is_empty() {
        s = "pod".into();
    }
    s.truncate(63);
    s
}

/// Parses the CSV and returns the kept pods, in file order. Errors name the line and column.
pub fn replay(text: &str, o: &ReplayOptions) -> Result<Vec<TimedPod>, String> {
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, h)) if h.trim() == HEADER => {}
        Some((_, h)) => return Err(format!("line 1: header {h:?}, expected {HEADER:?}")),
        None => return Err("empty file".into()),
    }
    let mut out = Vec::new();
    let mut kept_rows = 0usize;
    for (row, (i, line)) in lines.filter(|(_, l)| !l.trim().is_empty()).enumerate() {
        let n = i + 1;
        let cols: Vec<&str> = line.split(',').collect();
        if cols.len() != 8 {
            return Err(format!("line {n}: {} columns, expected 8", cols.len()));
        }
        let num = |idx: usize, what: &str| -> Result<u64, String> {
            cols[idx]
                .trim()
                .parse::<u64>()
                .map_err(|e| format!("line {n}: column {what}: {:?}: {e}", cols[idx]))
        };
        let arrival_s = num(1, "arrival_s")?;
        let duration_s = num(2, "duration_s")?;
        let cpu = num(3, "cpu_milli")?;
        let mem = num(4, "memory_mib")?;
        let gpu = num(5, "gpu")?;
        let priority: i32 = cols[7]
            .trim()
            .parse()
            .map_err(|e| format!("line {n}: column priority: {:?}: {e}", cols[7]))?;
        if row % o.sample != 0 {
            continue;
        }
        let arrival_ms = arrival_s.saturating_mul(1000);
        if arrival_ms < o.start_ms {
            continue;
        }
        let at = ((arrival_ms - o.start_ms) as f64 * o.time_scale).round() as SimTime;
        if at >= o.horizon_ms {
            continue;
        }
        if kept_rows >= o.limit {
            break;
        }
        kept_rows += 1;
        let lifetime = ((duration_s.saturating_mul(1000)) as f64 * o.time_scale)
            .round()
            .max(1000.0) as SimTime;
        let mut requests = json!({"cpu": format!("{cpu}m"), "memory": format!("{mem}Mi")});
        let mut limits = json!({});
        if gpu > 0 {
            requests[&o.gpu_resource] = json!(gpu.to_string());
            limits[&o.gpu_resource] = json!(gpu.to_string());
        }
        // A ReplicaSet's pods must restart always; a task's never.
        let restart = match o.owner {
            TraceOwner::ReplicaSet(_) => "Always",
            _ => "Never",
        };
        let mut spec = json!({
            "containers": [{"name": "app", "image": "sim/trace", "resources": {"requests": requests, "limits": limits}}],
            "priority": priority,
            "restartPolicy": restart,
            "schedulerName": "default-scheduler",
        });
        let model = cols[6].trim();
        if let (Some(label), false) = (&o.gpu_model_label, model.is_empty()) {
            spec["nodeSelector"] = json!({label.as_str(): model});
        }
        if !o.tolerations.is_empty() {
            spec["tolerations"] = Value::Array(o.tolerations.clone());
        }
        let mut metadata = json!({"name": pod_name(cols[0]), "namespace": o.namespace, "labels": {"trace": "replay"}});
        if let Some(refs) = o.owner.reference() {
            metadata["ownerReferences"] = refs;
        }
        if let Some(safe) = o.safe_to_evict {
            metadata["annotations"] = json!({SAFE_TO_EVICT_ANNOTATION: safe.to_string()});
        }
        out.push(TimedPod {
            at,
            object: json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": metadata,
                "spec": spec,
                "status": {"phase": "Pending"},
            }),
            lifetime: Some(lifetime),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts() -> ReplayOptions {
        ReplayOptions {
            namespace: "default".into(),
            time_scale: 1.0,
            sample: 1,
            start_ms: 0,
            limit: usize::MAX,
            horizon_ms: u64::MAX,
            gpu_resource: "nvidia.com/gpu".into(),
            gpu_model_label: Some("gpu-model".into()),
            tolerations: Vec::new(),
            owner: TraceOwner::None,
            safe_to_evict: None,
        }
    }

    const CSV: &str = "name,arrival_s,duration_s,cpu_milli,memory_mib,gpu,gpu_model,priority\n\
        Pod_A,0,100,1500,2048,1,T4,100\n\
        pod-b,10,50,500,512,0,,0\n\
        pod-c,20,5,500,512,0,,50\n";

    #[test]
    fn rows_become_pods_at_their_arrival() {
        let pods = replay(CSV, &opts()).unwrap();
        assert_eq!(pods.len(), 3);
        assert_eq!(pods[0].object["metadata"]["name"], "pod-a");
        assert_eq!(pods[0].at, 0);
        assert_eq!(pods[0].lifetime, Some(100_000));
        let c = &pods[0].object["spec"]["containers"][0]["resources"];
        assert_eq!(c["requests"]["cpu"], "1500m");
        assert_eq!(c["requests"]["memory"], "2048Mi");
        assert_eq!(c["limits"]["nvidia.com/gpu"], "1");
        assert_eq!(pods[0].object["spec"]["nodeSelector"]["gpu-model"], "T4");
        assert_eq!(pods[1].at, 10_000);
        assert!(pods[1].object["spec"].get("nodeSelector").is_none());
        assert_eq!(pods[2].object["spec"]["priority"], 50);
    }

    #[test]
    fn pods_name_their_owner_and_say_whether_they_are_safe_to_evict() {
        let pods = replay(CSV, &opts()).unwrap();
        let md = &pods[0].object["metadata"];
        assert!(md.get("ownerReferences").is_none() && md.get("annotations").is_none());
        let o = ReplayOptions {
            owner: TraceOwner::Job("batch".into()),
            safe_to_evict: Some(false),
            ..opts()
        };
        let pod = &replay(CSV, &o).unwrap()[0].object;
        let r = &pod["metadata"]["ownerReferences"][0];
        assert_eq!(
            (&r["kind"], &r["name"], &r["controller"]),
            (&json!("Job"), &json!("batch"), &json!(true))
        );
        assert_eq!(
            pod["metadata"]["annotations"][SAFE_TO_EVICT_ANNOTATION],
            "false"
        );
        assert_eq!(pod["spec"]["restartPolicy"], "Never");
        let o = ReplayOptions {
            owner: TraceOwner::ReplicaSet("vms".into()),
            ..opts()
        };
        let pod = &replay(CSV, &o).unwrap()[0].object;
        assert_eq!(pod["metadata"]["ownerReferences"][0]["kind"], "ReplicaSet");
        assert_eq!(
            pod["metadata"]["ownerReferences"][0]["apiVersion"],
            "apps/v1"
        );
        assert_eq!(pod["spec"]["restartPolicy"], "Always");
    }

    #[test]
    fn scaling_sampling_start_and_horizon() {
        let o = ReplayOptions {
            time_scale: 0.5,
            sample: 2,
            ..opts()
        };
        let pods = replay(CSV, &o).unwrap();
        assert_eq!(pods.len(), 2);
        assert_eq!(pods[1].at, 10_000);
        assert_eq!(pods[1].lifetime, Some(2_500));
        let o = ReplayOptions {
            start_ms: 10_000,
            horizon_ms: 10_000,
            ..opts()
        };
        let pods = replay(CSV, &o).unwrap();
        assert_eq!(
            pods.len(),
            1,
            "pod-b at 0, pod-c at 10 s is past the horizon"
        );
        assert_eq!(pods[0].at, 0);
    }

    #[test]
    fn malformed_rows_name_line_and_column() {
        let bad = "name,arrival_s,duration_s,cpu_milli,memory_mib,gpu,gpu_model,priority\nx,1,2,three,4,0,,0\n";
        let e = replay(bad, &opts()).unwrap_err();
        assert!(e.starts_with("line 2: column cpu_milli"), "{e}");
        assert!(replay("a,b\n", &opts()).unwrap_err().contains("header"));
    }
}
