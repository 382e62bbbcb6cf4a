//! The model: what the core knows about a cluster, reduced from the API objects to what the
//! decisions read.
//!
//! Bottom up: [`quantity`] (exact Kubernetes quantities), [`intern`] and [`labels`] (compact
//! interned strings and selectors), [`resources`] (resource vectors), [`node`], [`pod`],
//! [`taints`], PodDisruptionBudgets ([`pdb`]), DaemonSets ([`daemonset`]), node groups and the
//! provider view ([`node_group`]), cluster-wide [`limits`], Go-style [`duration`]s, and the
//! objects as the API returns them ([`store`]), the storage objects the volume filters read
//! ([`storage`]) with their conversion into the model ([`convert`],
//! [`objects`]).
//!
//! Nothing here decides what to do; it never performs I/O and never reads a clock.

pub mod capacity_buffer;
pub mod capacity_objects;
pub mod convert;
pub mod daemonset;
pub mod duration;
pub mod intern;
pub mod labels;
pub mod limits;
pub mod node;
pub mod node_group;
pub mod objects;
pub mod pdb;
pub mod pod;
pub mod provisioning_request;
pub mod quantity;
pub(crate) mod recent;
pub mod resources;
pub mod storage;
pub mod store;
pub mod taints;

use std::sync::Arc;

/// The value of the annotation `key` among an object's `annotations` (node or pod). A scan that
/// reads a key's text only when its length matches: objects have few annotations, and a binary
/// search reads the text of every key it compares, each its own allocation (a cache miss apiece
/// on a large cluster's objects).
pub(crate) fn annotation<'a>(
    annotations: &'a [(Arc<str>, Arc<str>)],
    key: &str,
) -> Option<&'a str> {
    annotations
        .iter()
        .find(|(k, _)| k.len() == key.len() && k.as_ref() == key)
        .map(|(_, v)| v.as_ref())
}
