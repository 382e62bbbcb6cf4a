//! How the cluster autoscaler's actions are carried out, as pure data shared by every shell:
//! the informer's view of the cluster, the bookkeeping of what is in flight, each action turned
//! into effects (provider object changes, taints, evictions, deletions), the drain state
//! machine (evict, wait until the pods are gone, delete; or untaint at the deadline), and typed
//! reports fed back to the core as outcomes.
//!
//! It is synchronous and does no I/O: no clock, no client, no world. The live shell interprets
//! the effects over the Kubernetes API (asynchronously, drains concurrently), the simulator over
//! its world (synchronously), and `plan` builds its view with the same informer; all of them
//! carry actions out through the same code.
#![warn(missing_docs)]

mod atomic;
mod drain;
mod effect;
mod hold;
mod inflight;
mod informer;
mod stale_mark;
mod status_write;

pub use effect::{Correction, Effect, EffectKind, Purpose, Reply, Report, Ticket, provider_error};
pub use inflight::{Actuation, ActuationOptions};
pub use informer::{
    ClusterLookup, Informer, InformerLookup, blocking_pods, lock as lock_informer, pod_view,
};
pub use stale_mark::STALE_MARK_GRACE_MS;
pub use status_write::{
    StaleObject, StatusUpdate, buffer_key, buffer_update, request_key, request_update,
};
