//! Objects decoded one by one: [`Decoded`] wraps a watched kind so that a list page or a watch
//! event holding one object that does not decode still decodes, that object becoming an
//! [`Undecodable`] naming its identity and the field path of the error, instead of failing the
//! whole list (which kept a kind from ever syncing, and so every loop from running).
//!
//! The object's text is kept only while it is decoded: the typed decode runs on it first (the
//! hot path, one extra scan and copy of the text), and only when that fails is it read again
//! for the field path and the identity. It decides nothing and never logs.
//!
//! In a watch event the object is read this way when `type` comes before `object`, as the API
//! server writes every event; an event written the other way round is buffered by serde first
//! and fails as a whole (a watch error, logged and retried, as before).

use std::borrow::Cow;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// The longest error text kept: a serde message quotes the offending value, which a hostile
/// server can make megabytes long.
pub const MAX_ERROR_CHARS: usize = 300;

/// One listed or watched object: decoded as `K`, or why it is not.
#[derive(Clone, Debug)]
pub enum Decoded<K> {
    /// The object.
    Object(K),
    /// An object that does not decode as `K`.
    Undecodable(Box<Undecodable>),
}

/// An object that does not decode: its identity (as far as its `metadata` says) and why.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Undecodable {
    /// `name`, `namespace`, `uid` and `resourceVersion` when they are strings; the rest unset.
    pub meta: ObjectMeta,
    /// The field path of the error (`status.allocatable.cpu`), `.` for the object itself.
    pub path: String,
    /// The decoder's message, at most [`MAX_ERROR_CHARS`] characters.
    pub error: String,
}

impl<K: DeserializeOwned> Decoded<K> {
    /// Decodes the JSON `text` of one object.
    pub fn from_text(text: &str) -> Decoded<K> {
        match serde_json::from_str::<K>(text) {
            Ok(k) => Decoded::Object(k),
            Err(_) => Decoded::Undecodable(Box::new(Undecodable::of::<K>(text))),
        }
    }
}

impl Undecodable {
    /// Why `text` does not decode as `K`, and whose it is.
    fn of<K: DeserializeOwned>(text: &str) -> Undecodable {
        let mut de = serde_json::Deserializer::from_str(text);
        let (path, error) = match serde_path_to_error::deserialize::<_, K>(&mut de) {
            Err(e) => (e.path().to_string(), e.into_inner().to_string()),
            // Decodes alone but not before (trailing text after the object, say).
            Ok(_) => (".".to_string(), "not one JSON object".to_string()),
        };
        Undecodable {
            meta: identity(text),
            path,
            error: truncate(&error, MAX_ERROR_CHARS),
        }
    }

    /// The field path and the error, as a warning says them (`status: invalid type: ...`).
    pub fn reason(&self) -> String {
        if self.path == "." || self.path.is_empty() {
            self.error.clone()
        } else {
            format!("{}: {}", self.path, self.error)
        }
    }
}

/// The identity fields of an object's `metadata` that are strings; unset when the text is not
/// an object or its `metadata` is not one.
fn identity(text: &str) -> ObjectMeta {
    #[derive(Deserialize)]
    struct Outer {
        #[serde(default)]
        metadata: Value,
    }
    let Ok(Outer { metadata }) = serde_json::from_str::<Outer>(text) else {
        return ObjectMeta::default();
    };
    let field = |name: &str| {
        metadata
            .get(name)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    ObjectMeta {
        name: field("name"),
        namespace: field("namespace"),
        uid: field("uid"),
        resource_version: field("resourceVersion"),
        ..ObjectMeta::default()
    }
}

/// `s` cut to at most `max` characters, marked with `…` when cut.
pub fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

impl<'de, K: DeserializeOwned> Deserialize<'de> for Decoded<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // Only text that is not JSON at all fails here (and then the whole page is unreadable).
        // Borrowed: kube decodes lists and watch lines from a `str`, so the text is not copied.
        let raw = <&RawValue>::deserialize(d)?;
        Ok(Decoded::from_text(raw.get()))
    }
}

impl<K: Resource> Resource for Decoded<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }
    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }
    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }
    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }
    fn meta(&self) -> &ObjectMeta {
        match self {
            Decoded::Object(k) => k.meta(),
            Decoded::Undecodable(u) => &u.meta,
        }
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Decoded::Object(k) => k.meta_mut(),
            Decoded::Undecodable(u) => &mut u.meta,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::slim::SlimPod;
    use k8s_openapi::api::core::v1 as api;
    use kube::core::{ObjectList, WatchEvent};
    use serde_json::json;

    fn node(name: &str, status: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "resourceVersion": "5", "uid": "u"},
            "status": status})
    }

    #[test]
    fn one_bad_node_in_a_list_leaves_the_others_decoded() {
        let list = json!({"apiVersion": "v1", "kind": "NodeList",
            "metadata": {"resourceVersion": "9"},
            "items": [node("a", json!({})), node("bad", json!("x")), node("c", json!({}))]});
        let text = list.to_string();
        // The typed list fails as a whole, which kept the kind from syncing.
        assert!(serde_json::from_str::<ObjectList<api::Node>>(&text).is_err());
        let decoded: ObjectList<Decoded<api::Node>> =
            serde_json::from_str(&text).expect("the list decodes");
        assert_eq!(decoded.items.len(), 3);
        let names: Vec<_> = (decoded.items.iter())
            .map(|o| o.meta().name.clone())
            .collect();
        assert_eq!(
            names,
            [Some("a".into()), Some("bad".into()), Some("c".into())]
        );
        match &decoded.items[1] {
            Decoded::Undecodable(u) => {
                assert_eq!(u.path, "status");
                assert!(u.error.contains("invalid type"), "{}", u.error);
                assert_eq!(u.meta.resource_version.as_deref(), Some("5"));
                assert_eq!(u.reason(), format!("status: {}", u.error));
            }
            Decoded::Object(_) => panic!("the bad node decoded"),
        }
        assert!(matches!(decoded.items[0], Decoded::Object(_)));
        assert!(matches!(decoded.items[2], Decoded::Object(_)));
    }

    #[test]
    fn a_bad_pod_in_a_watch_event_is_named_with_its_field_path() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "resourceVersion": "3"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": []}}}]}});
        // As the API server writes it: `type` first.
        let line = format!("{{\"type\":\"MODIFIED\",\"object\":{pod}}}");
        assert!(serde_json::from_str::<WatchEvent<SlimPod>>(&line).is_err());
        match serde_json::from_str::<WatchEvent<Decoded<SlimPod>>>(&line) {
            Ok(WatchEvent::Modified(Decoded::Undecodable(u))) => {
                assert_eq!(u.meta.name.as_deref(), Some("p"));
                assert_eq!(u.meta.namespace.as_deref(), Some("ns"));
                assert_eq!(u.path, "spec.containers[0].resources.requests.cpu");
            }
            other => panic!("not an undecodable pod: {other:?}"),
        }
    }

    #[test]
    fn an_object_without_usable_metadata_has_no_identity_and_a_huge_value_is_cut() {
        let long = "y".repeat(100_000);
        let d = Decoded::<api::Node>::from_text(&json!({"metadata": 5, "spec": long}).to_string());
        let Decoded::Undecodable(u) = d else {
            panic!("decoded")
        };
        assert_eq!(u.meta, ObjectMeta::default());
        assert!(
            u.error.chars().count() <= MAX_ERROR_CHARS + 1,
            "{}",
            u.error.len()
        );
        let d = Decoded::<api::Node>::from_text("[1, 2]");
        assert!(matches!(d, Decoded::Undecodable(u) if u.meta.name.is_none()));
    }

    #[test]
    fn a_good_object_decodes_as_the_typed_one() {
        let text = node("a", json!({"allocatable": {"cpu": "4"}})).to_string();
        let typed: api::Node = serde_json::from_str(&text).expect("valid");
        match Decoded::<api::Node>::from_text(&text) {
            Decoded::Object(n) => assert_eq!(n, typed),
            Decoded::Undecodable(u) => panic!("{u:?}"),
        }
    }
}
