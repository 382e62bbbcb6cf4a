//! The report's capacity-on-request section: for each job that arrived through a
//! ProvisioningRequest, how long the autoscaler took to answer it and to make it
//! `Provisioned=True` (or when it failed, and why); for CapacityBuffers, how long the first pods
//! of each burst waited, with the buffers and, from a second run of the same scenario without
//! their pods, without them.
//!
//! A burst is the pods created at one instant after the start in a namespace that holds a ready
//! buffer; its first N pods are the ones a buffer of N pods is there for (N: the namespace's
//! buffers' replicas). Waits are creation to running, as the report's other waits. It measures
//! only; it decides nothing.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use autoscaler_world::SimTime;
use serde::Serialize;

use super::driver::RunLog;
use super::report::clock;

/// One request's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestReport {
    /// `namespace/name`.
    pub request: String,
    /// `provisioningClassName`.
    pub class: String,
    /// Pods asked for.
    pub pods: u32,
    /// Creation time, seconds.
    pub created_s: f64,
    /// Seconds from creation to the first answer (`Provisioned` or `Failed` written).
    pub answered_after_s: Option<f64>,
    /// Seconds from creation to `Provisioned=True`: how long its job waited for admission.
    pub provisioned_after_s: Option<f64>,
    /// `Failed=True`: its reason and message.
    pub failed: Option<String>,
    /// Seconds from creation to `Failed=True`.
    pub failed_after_s: Option<f64>,
}

/// How long the first pods of the bursts waited, seconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct BurstWaits {
    /// Pods counted (the first N of each burst).
    pub pods: usize,
    /// Median wait.
    pub p50_s: Option<f64>,
    /// Longest wait.
    pub max_s: Option<f64>,
}

/// The buffers' figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BufferReport {
    /// Each ready buffer (`namespace/name`) with its replicas.
    pub buffers: BTreeMap<String, u32>,
    /// With the buffers.
    pub with_buffers: BurstWaits,
    /// The same scenario run again without the buffers' pods (none when not run).
    pub without_buffers: Option<BurstWaits>,
}

/// The section.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CapacityReport {
    /// Per request, in arrival order.
    pub requests: Vec<RequestReport>,
    /// The buffers', when any was ready.
    pub buffers: Option<BufferReport>,
}

fn secs(ms: SimTime) -> f64 {
    ms as f64 / 1000.0
}

/// The waits of the first pods of each burst in `log`, `per_namespace` pods a burst (sorted).
fn burst_wait_ms(log: &RunLog, per_namespace: &BTreeMap<String, u32>) -> Vec<SimTime> {
    let mut bursts: BTreeMap<(&str, SimTime), Vec<SimTime>> = BTreeMap::new();
    for w in &log.metrics.waits {
        let ns = w.pod.split('/').next().unwrap_or_default();
        if w.created_ms == 0 || !per_namespace.contains_key(ns) {
            continue;
        }
        bursts
            .entry((ns, w.created_ms))
            .or_default()
            .push(w.wait_ms());
    }
    let mut out = Vec::new();
    for ((ns, _), mut waits) in bursts {
        // The pods of one instant are alike: the first N to start are the ones held for.
        waits.sort_unstable();
        let n = per_namespace.get(ns).copied().unwrap_or(0) as usize;
        out.extend(waits.into_iter().take(n));
    }
    out.sort_unstable();
    out
}

/// The figures of `sorted` waits.
fn figures(sorted: &[SimTime]) -> BurstWaits {
    let p50 = (!sorted.is_empty()).then(|| {
        let rank = (sorted.len() as f64 * 0.5).ceil() as usize;
        secs(sorted[rank.clamp(1, sorted.len()) - 1])
    });
    BurstWaits {
        pods: sorted.len(),
        p50_s: p50,
        max_s: sorted.last().map(|m| secs(*m)),
    }
}

/// Replicas of the ready buffers per namespace.
fn per_namespace(buffers: &BTreeMap<String, u32>) -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    for (key, n) in buffers {
        let ns = key.split('/').next().unwrap_or_default().to_string();
        *out.entry(ns).or_insert(0) += n;
    }
    out
}

impl CapacityReport {
    /// The section of a run, none when it had neither requests nor ready buffers.
    pub fn new(log: &RunLog) -> Option<CapacityReport> {
        if log.requests.is_empty() && log.buffers.is_empty() {
            return None;
        }
        let after = |at: Option<SimTime>, from: SimTime| at.map(|t| secs(t.saturating_sub(from)));
        let requests = log
            .requests
            .iter()
            .map(|r| RequestReport {
                request: r.key.clone(),
                class: r.class.clone(),
                pods: r.pods,
                created_s: secs(r.created_ms),
                answered_after_s: after(r.answered_ms, r.created_ms),
                provisioned_after_s: after(r.provisioned_ms, r.created_ms),
                failed: r.failed.as_ref().map(|(_, why)| why.clone()),
                failed_after_s: after(r.failed.as_ref().map(|f| f.0), r.created_ms),
            })
            .collect();
        let buffers = (!log.buffers.is_empty()).then(|| BufferReport {
            buffers: log.buffers.clone(),
            with_buffers: figures(&burst_wait_ms(log, &per_namespace(&log.buffers))),
            without_buffers: None,
        });
        Some(CapacityReport { requests, buffers })
    }

    /// Adds the figures of `log`, a run of the same scenario without the buffers' pods.
    pub fn set_without_buffers(&mut self, log: &RunLog) {
        if let Some(b) = &mut self.buffers {
            let ns = per_namespace(&b.buffers);
            b.without_buffers = Some(figures(&burst_wait_ms(log, &ns)));
        }
    }

    /// The section as the summary prints it.
    pub fn text(&self) -> String {
        let mut o = String::from("Capacity on request:\n");
        let s = |x: Option<f64>| x.map_or("n/a".to_string(), |x| clock((x * 1000.0) as SimTime));
        for r in &self.requests {
            let mut line = format!(
                "  ProvisioningRequest {} ({}, {} pods) at {}:",
                r.request,
                r.class,
                r.pods,
                clock((r.created_s * 1000.0) as SimTime)
            );
            match (&r.failed, r.provisioned_after_s) {
                (Some(why), _) => {
                    let _ = write!(line, " Failed after {} ({why})", s(r.failed_after_s));
                }
                (None, Some(p)) => {
                    let _ = write!(
                        line,
                        " answered after {}, Provisioned after {}",
                        s(r.answered_after_s),
                        s(Some(p))
                    );
                }
                (None, None) => {
                    let _ = write!(
                        line,
                        " answered after {}, never Provisioned",
                        s(r.answered_after_s)
                    );
                }
            }
            let _ = writeln!(o, "{line}");
        }
        if let Some(b) = &self.buffers {
            let names: Vec<String> = b
                .buffers
                .iter()
                .map(|(k, n)| format!("{k} ({n})"))
                .collect();
            let w = |f: &BurstWaits| {
                format!(
                    "p50 {}, max {} over {} pods",
                    s(f.p50_s),
                    s(f.max_s),
                    f.pods
                )
            };
            let _ = writeln!(
                o,
                "  CapacityBuffers {}: wait of each burst's first pods: {}",
                names.join(", "),
                w(&b.with_buffers)
            );
            if let Some(without) = &b.without_buffers {
                let _ = writeln!(o, "    without the buffers (same scenario): {}", w(without));
            }
        }
        o
    }
}
