//! Job arrivals through a ProvisioningRequest, as Kueue's ProvisioningRequest admission check
//! makes them: at its time, a PodTemplate and a ProvisioningRequest for the job's pods are
//! created; the job waits, unadmitted, until the request says `Provisioned=True`, then its pods
//! are created with the consume annotation (the job then runs as a Job). A request that gets
//! `Failed=True` leaves its job unadmitted (Kueue would retry it or give up; nothing more is
//! created here).
//!
//! The workload kind `provisioning-request` of a scenario reads into a [`RequestArrival`]; the
//! driver creates its objects ([`RequestArrival::objects`]) and, after each loop's status
//! writes, lets [`RequestArrival::react`] admit it. Only the autoscaler writes the request's
//! status; this reads it from the world as Kueue's watch would, and records the times for the
//! report ([`RequestLog`]).

use autoscaler_model::{
    CLASS_BEST_EFFORT_ATOMIC, CONSUME_ANNOTATION, ConditionStatus, ConditionType,
    ProvisioningRequest,
};
use autoscaler_world::{JobSpec, PodTemplate, SimTime, World};
use serde::Deserialize;
use serde_json::{Value, json};

use super::scenario::PodFile;

/// A job arriving through a ProvisioningRequest, as written in a scenario.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RequestFile {
    /// Name of the request, its PodTemplate and its job.
    pub name: String,
    /// Namespace (default `default`).
    #[serde(default = "default_ns")]
    pub namespace: String,
    /// Arrival time (default 0).
    #[serde(default)]
    pub at: Option<String>,
    /// `provisioningClassName` (default best-effort-atomic).
    #[serde(default)]
    pub class: Option<String>,
    /// The request's `parameters` (e.g. `noRetry: "true"`).
    #[serde(default)]
    pub parameters: std::collections::BTreeMap<String, String>,
    /// Pods of the job (the request's `count`).
    pub count: u32,
    /// How long each pod runs once started.
    pub duration: String,
    /// The pods.
    #[serde(default)]
    pub pod: PodFile,
}

fn default_ns() -> String {
    "default".into()
}

/// A validated arrival.
#[derive(Clone, Debug)]
pub struct RequestArrival {
    /// When the request is created.
    pub at: SimTime,
    /// Namespace.
    pub namespace: String,
    /// Name of the request, its PodTemplate and its job.
    pub name: String,
    /// `provisioningClassName`.
    pub class: String,
    /// The request's parameters.
    pub parameters: std::collections::BTreeMap<String, String>,
    /// Pods.
    pub count: u32,
    /// How long each pod runs once started.
    pub duration_ms: SimTime,
    /// The pods' template.
    pub template: PodTemplate,
}

/// What became of one request, in virtual time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestLog {
    /// `namespace/name`.
    pub key: String,
    /// `provisioningClassName`.
    pub class: String,
    /// Pods asked for.
    pub pods: u32,
    /// When the request was created.
    pub created_ms: SimTime,
    /// When the autoscaler first answered it (`Provisioned` or `Failed` written).
    pub answered_ms: Option<SimTime>,
    /// When it became `Provisioned=True` (its job's pods are created then).
    pub provisioned_ms: Option<SimTime>,
    /// When it became `Failed=True`, with the reason and message.
    pub failed: Option<(SimTime, String)>,
}

impl RequestArrival {
    /// Reads `f`, with its pods' template made by the scenario.
    pub fn read(
        f: &RequestFile,
        at: SimTime,
        duration_ms: SimTime,
        template: PodTemplate,
    ) -> Result<RequestArrival, String> {
        if f.count == 0 {
            return Err("must be at least 1".into());
        }
        Ok(RequestArrival {
            at,
            namespace: f.namespace.clone(),
            name: f.name.clone(),
            class: f
                .class
                .clone()
                .unwrap_or_else(|| CLASS_BEST_EFFORT_ATOMIC.into()),
            parameters: f.parameters.clone(),
            count: f.count,
            duration_ms,
            template,
        })
    }

    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// The PodTemplate and the ProvisioningRequest Kueue creates for the job.
    pub fn objects(&self) -> [Value; 2] {
        let template = json!({
            "apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "template": {"metadata": {"labels": self.template.labels}, "spec": self.template.spec},
        });
        let mut request = json!({
            "apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": {"provisioningClassName": self.class,
                     "podSets": [{"podTemplateRef": {"name": self.name}, "count": self.count}]},
        });
        if !self.parameters.is_empty() {
            request["spec"]["parameters"] = json!(self.parameters);
        }
        [template, request]
    }

    /// A new log of this arrival, created now.
    pub fn log(&self, now: SimTime) -> RequestLog {
        RequestLog {
            key: self.key(),
            class: self.class.clone(),
            pods: self.count,
            created_ms: now,
            answered_ms: None,
            provisioned_ms: None,
            failed: None,
        }
    }

    /// Reads the request's status in `world` as Kueue's watch would and acts on it: on
    /// `Provisioned=True` the job's pods are created (once), with the consume annotation.
    /// Returns an error text when the job could not be created.
    pub fn react(&self, world: &mut World, log: &mut RequestLog) -> Result<(), String> {
        if log.provisioned_ms.is_some() || log.failed.is_some() {
            return Ok(());
        }
        let key = autoscaler_world::object_key(
            "autoscaling.x-k8s.io",
            "ProvisioningRequest",
            &self.namespace,
            &self.name,
        );
        let Some(obj) = world.objects().get(&key) else {
            return Ok(());
        };
        let request = ProvisioningRequest::from_value(obj).map_err(|e| e.to_string())?;
        let now = world.now();
        let is = |t: ConditionType, s: ConditionStatus| {
            request
                .condition(t)
                .filter(|c| c.status == s)
                .map(|c| format!("{}: {}", c.reason, c.message))
        };
        if log.answered_ms.is_none()
            && (request.condition(ConditionType::Provisioned).is_some()
                || request.condition(ConditionType::Failed).is_some())
        {
            log.answered_ms = Some(now);
        }
        if let Some(reason) = is(ConditionType::Failed, ConditionStatus::True) {
            log.failed = Some((now, reason));
            return Ok(());
        }
        if is(ConditionType::Provisioned, ConditionStatus::True).is_some() {
            log.provisioned_ms = Some(now);
            let template = self
                .template
                .clone()
                .annotation(CONSUME_ANNOTATION, &self.name);
            world
                .add_job(JobSpec {
                    namespace: self.namespace.clone(),
                    name: self.name.clone(),
                    template,
                    completions: self.count,
                    parallelism: self.count,
                    duration_ms: self.duration_ms,
                })
                .map_err(|e| format!("job {}: {e}", self.key()))?;
        }
        Ok(())
    }
}
