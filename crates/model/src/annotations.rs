//! Reading an object's annotations (nodes and pods keep them as a list of pairs).
//!
//! It only looks values up; what an annotation means is decided where it is read.

use std::sync::Arc;

/// The value of the annotation `key` among an object's `annotations` (node or pod). A scan that
/// reads a key's text only when its length matches: objects have few annotations, and a binary
/// search reads the text of every key it compares, each its own allocation (a cache miss apiece
/// on a large cluster's objects).
#[inline]
pub(crate) fn annotation<'a>(
    annotations: &'a [(Arc<str>, Arc<str>)],
    key: &str,
) -> Option<&'a str> {
    annotations
        .iter()
        .find(|(k, _)| k.len() == key.len() && k.as_ref() == key)
        .map(|(_, v)| v.as_ref())
}
