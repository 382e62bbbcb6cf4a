//! The driver's part of capacity on request: the arrivals of jobs through ProvisioningRequests
//! (their objects created at their time, their pods once provisioned, as Kueue does), and the
//! status writes of a loop's capacity decision carried out through the world's status
//! subresource, as the live shell writes them (whole conditions, with the version read as a
//! precondition; a conflict is an error of the run, never retried blindly).
//!
//! It decides nothing: the decisions are the core's, the reactions are the arrivals'.

use autoscaler_core::{CapacityDecision, ResolvedBuffer, format_time_ms};
use autoscaler_model::{CapacityObjects, ObjectStore, RequestCondition};
use autoscaler_world::{SimTime, object_key};
use serde_json::{Value, json};

use super::Driver;

/// The API group of the capacity kinds.
const GROUP: &str = "autoscaling.x-k8s.io";

/// The capacity objects the informer holds, with the objects that do not convert named (they
/// are skipped, as the live shell skips them).
pub(super) fn objects_of(store: &ObjectStore) -> (CapacityObjects, Vec<String>) {
    let (objects, errors) = CapacityObjects::from_store(store);
    (objects, errors.iter().map(|e| e.to_string()).collect())
}

/// `conditions` as the API holds them.
fn conditions_json(conditions: &[RequestCondition]) -> Value {
    Value::Array(
        conditions
            .iter()
            .map(|c| {
                json!({"type": c.type_.as_str(), "status": c.status.as_str(),
                       "reason": c.reason, "message": c.message,
                       "lastTransitionTime": format_time_ms(c.last_transition_ms),
                       "observedGeneration": c.observed_generation})
            })
            .collect(),
    )
}

/// The status the buffer controller writes on `b`, at `now_ms` unless the stored condition
/// already says the same (its transition time is then kept).
fn buffer_status_json(b: &ResolvedBuffer, stored: Option<&Value>, now_ms: i64) -> Value {
    let s = &b.status;
    let status = if s.ready { "True" } else { "False" };
    let same = stored
        .and_then(|v| v.pointer("/conditions/0"))
        .filter(|c| {
            c["type"] == s.condition
                && c["status"] == status
                && c["reason"] == s.reason
                && c["message"] == s.message.as_str()
        })
        .and_then(|c| c.get("lastTransitionTime").cloned());
    let mut out = json!({
        "provisioningStrategy": &*s.strategy,
        "conditions": [{"type": s.condition, "status": status, "reason": s.reason,
                        "message": s.message,
                        "lastTransitionTime": same.unwrap_or_else(|| json!(format_time_ms(now_ms)))}],
    });
    if let Some(t) = &s.pod_template {
        out["podTemplateRef"] = json!({"name": &**t});
    }
    if let Some(r) = s.replicas {
        out["replicas"] = json!(r);
    }
    out
}

impl Driver<'_> {
    /// Creates the PodTemplates and ProvisioningRequests of the arrivals due by `t`, each at its
    /// own instant.
    pub(super) fn create_arrivals(&mut self, t: SimTime) {
        let s = self.scenario;
        while let Some(a) = s.requests.get(self.log.requests.len()) {
            if a.at > t {
                break;
            }
            self.world.step_until(a.at);
            let log = a.log(self.world.now());
            self.log.requests.push(log);
            for o in a.objects() {
                if let Err(e) = self.world.apply(o) {
                    self.error(format!("ProvisioningRequest {}: {e}", a.key()));
                }
            }
        }
    }

    /// The world's replicas of each group of `decision`'s atomic scale-up before the loop's
    /// actions (to tell after them whether it was applied whole or not at all).
    pub(super) fn atomic_replicas(
        &mut self,
        decision: Option<&CapacityDecision>,
    ) -> Vec<(String, Option<i64>)> {
        let Some(up) = decision.and_then(|d| d.requests.scale_up.as_ref()) else {
            return Vec::new();
        };
        let groups: Vec<String> = (up.result.increases.iter())
            .map(|i| i.group.as_str().to_string())
            .collect();
        groups
            .into_iter()
            .map(|g| {
                let r = self.replicas_of(&g);
                (g, r)
            })
            .collect()
    }

    /// `spec.replicas` of the group `id` in the world itself.
    fn replicas_of(&mut self, id: &str) -> Option<i64> {
        let provider = self.provider();
        let i = provider.group_index(id)?;
        let key = &provider.resources().get(i)?.key;
        self.world
            .objects()
            .get(key)
            .and_then(|o| o.pointer("/spec/replicas"))
            .and_then(Value::as_i64)
    }

    /// Records a violation when the loop's atomic scale-up (its groups' replicas `before` the
    /// actions) left some of its groups grown and others not: whole or not at all, a failed
    /// group's partners set back. Returns which groups did not grow, if any (the scale-up was
    /// then not carried out).
    pub(super) fn check_atomic(
        &mut self,
        t: SimTime,
        before: &[(String, Option<i64>)],
    ) -> Option<String> {
        let (mut grown, mut kept) = (Vec::new(), Vec::new());
        for (g, was) in before {
            let now = self.replicas_of(g);
            let name = super::short(g);
            if now > *was {
                grown.push(name)
            } else {
                kept.push(name)
            }
        }
        if !grown.is_empty() && !kept.is_empty() {
            self.log.safety.violation(
                t,
                format!(
                    "an atomic scale-up was half-applied: {} grown, {} not",
                    grown.join(", "),
                    kept.join(", ")
                ),
            );
        }
        (!kept.is_empty()).then(|| format!("{} not grown", kept.join(", ")))
    }

    /// Records a violation for every request still booked (`Provisioned=True` without
    /// `BookingExpired`) past the booking time plus one loop: a booking must never hold its
    /// room (and block scale-down) longer.
    pub(super) fn check_bookings(&mut self, t: SimTime) {
        let booking = u64::try_from(self.options.capacity.requests().booking_ms()).unwrap_or(0);
        let limit = booking.saturating_add(self.scenario.scan_interval);
        let mut late = Vec::new();
        for r in &self.log.requests {
            let Some(p) = r.provisioned_ms else { continue };
            if t.saturating_sub(p) <= limit {
                continue;
            }
            let (ns, name) = r.key.split_once('/').unwrap_or_default();
            let key = object_key(GROUP, "ProvisioningRequest", ns, name);
            let expired = self
                .world
                .objects()
                .get(&key)
                .and_then(|o| o.pointer("/status/conditions"))
                .and_then(Value::as_array)
                .is_some_and(|cs| {
                    cs.iter().any(|c| {
                        c["status"] == "True"
                            && (c["type"] == "BookingExpired" || c["type"] == "Failed")
                    })
                });
            if !expired {
                late.push(r.key.clone());
            }
        }
        for key in late {
            self.log
                .safety
                .violation(t, format!("the booking of {key} outlived the booking time"));
        }
    }

    /// Carries out the status writes of `decision` on the world, then lets every arrival read
    /// its request's status and react.
    pub(super) fn write_capacity(&mut self, decision: Option<CapacityDecision>) {
        let now = self.now_ms();
        if let Some(d) = decision {
            for w in &d.requests.writes {
                let key = object_key(GROUP, "ProvisioningRequest", &w.namespace, &w.name);
                let status = json!({"conditions": conditions_json(&w.conditions)});
                if let Err(e) = self.world.write_status(&key, status, &w.resource_version) {
                    self.error(format!("status of {key}: {e}"));
                }
            }
            for b in &d.buffers {
                if let Some(r) = b.status.replicas.filter(|_| b.status.ready) {
                    self.log.buffers.insert(b.key.clone(), r);
                }
                if !d.write_buffer_status {
                    continue;
                }
                let s = &b.status;
                let key = object_key(GROUP, "CapacityBuffer", &s.namespace, &s.name);
                let stored = self.world.objects().get(&key).and_then(|o| o.get("status"));
                let status = buffer_status_json(b, stored, now);
                if stored == Some(&status) {
                    continue;
                }
                if let Err(e) = self.world.write_status(&key, status, &s.resource_version) {
                    self.error(format!("status of {key}: {e}"));
                }
            }
        }
        let s = self.scenario;
        for (a, log) in s.requests.iter().zip(self.log.requests.iter_mut()) {
            if let Err(e) = a.react(&mut self.world, log) {
                self.log.error_count += 1;
                if self.log.errors.len() < 50 {
                    self.log.errors.push(e);
                }
            }
        }
    }
}
