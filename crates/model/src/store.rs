//! An in-memory store of Kubernetes objects as the API returns them (untyped JSON), keyed by
//! API group, kind, namespace and name.
//!
//! It is what the three worlds share: the live shell's reflectors fill it from watches, `plan`
//! fills it from a YAML snapshot, the simulated world owns one. Providers and view builders
//! read from it. Objects of any API version are kept as they come, so readers can handle every
//! version a cluster serves (Cluster API's `v1beta1` and `v1beta2`, OpenShift's
//! `machine.openshift.io/v1beta1`). The store never talks to anything and never interprets an
//! object beyond its identity.

use std::collections::BTreeSet;
use std::sync::Arc;

use rustc_hash::FxHashMap;

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Most entries kept of a list inside one object read from the store (a storage object's access
/// modes, topology terms, CSI drivers): real objects have a handful; a larger list is refused as
/// malformed.
pub(crate) const MAX_LIST: usize = 256;

/// An object that could not be read, with why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectError {
    /// Which object.
    pub key: ObjectKey,
    /// What is wrong (names the field).
    pub error: String,
}

impl std::fmt::Display for ObjectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.error)
    }
}

/// Decodes an object into its API type; an error names the field path
/// (`status.conditions[0].lastTransitionTime: ...`).
pub fn typed<T: serde::de::DeserializeOwned>(value: &Value) -> Result<T, String> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        if path == "." {
            e.into_inner().to_string()
        } else {
            format!("{path}: {}", e.into_inner())
        }
    })
}

/// Why an object could not be stored or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The object lacks `apiVersion`, `kind` or `metadata.name`.
    #[error("{place}: object has no {field}")]
    MissingField {
        /// Where the object came from (document number, list item).
        place: String,
        /// The missing field.
        field: &'static str,
    },
    /// Not valid YAML.
    #[error("{place}: not valid YAML: {message}")]
    Yaml {
        /// Where.
        place: String,
        /// The parser's message.
        message: String,
    },
    /// Nested too deep to parse (refused before parsing).
    #[error("not valid YAML: {0}")]
    TooDeep(#[from] crate::yaml_depth::TooDeep),
    /// `items` of a List is not a list.
    #[error("{place}: field items of a {kind} is not a list")]
    BadList {
        /// Where.
        place: String,
        /// The list kind.
        kind: String,
    },
}

/// Identity of an object.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// API group (`""` for the core group, `apps`, `cluster.x-k8s.io`).
    pub group: String,
    /// Kind (`Pod`, `MachineDeployment`).
    pub kind: String,
    /// Namespace (`""` for cluster-scoped objects).
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl ObjectKey {
    /// Whether this is a core-group Pod.
    pub fn is_pod(&self) -> bool {
        self.group.is_empty() && self.kind == "Pod"
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}

/// The API group of an `apiVersion` (`v1` → `""`, `apps/v1` → `apps`).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// The version of an `apiVersion` (`apps/v1` → `v1`).
pub fn version_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or(api_version, |(_, v)| v)
}

/// The store.
///
/// Point reads and replacements go through a hash index (no string ordering comparisons);
/// the ordered key set is touched only when an identity appears or disappears, and gives
/// iteration and listing their group, kind, namespace, name order.
#[derive(Clone, Debug, Default)]
pub struct ObjectStore {
    objects: FxHashMap<ObjectKey, Arc<Value>>,
    order: BTreeSet<ObjectKey>,
}

impl ObjectStore {
    /// An empty store.
    pub fn new() -> ObjectStore {
        ObjectStore::default()
    }

    /// The key an object would be stored under.
    pub fn key_of(obj: &Value, place: &str) -> Result<ObjectKey, StoreError> {
        let missing = |field| StoreError::MissingField {
            place: place.to_string(),
            field,
        };
        let api_version = obj
            .get("apiVersion")
            .and_then(Value::as_str)
            .ok_or_else(|| missing("apiVersion"))?;
        let kind = obj
            .get("kind")
            .and_then(Value::as_str)
            .ok_or_else(|| missing("kind"))?;
        let name = obj
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .ok_or_else(|| missing("metadata.name"))?;
        let namespace = obj
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        Ok(ObjectKey {
            group: group_of(api_version).to_string(),
            kind: kind.to_string(),
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }

    /// Stores `obj` (replacing an object with the same identity), returning its key.
    pub fn insert(&mut self, obj: Value, place: &str) -> Result<ObjectKey, StoreError> {
        let key = ObjectStore::key_of(&obj, place)?;
        self.insert_shared(key.clone(), Arc::new(obj));
        Ok(key)
    }

    /// Stores an already shared object under `key` (the caller vouches that `key` is the
    /// object's identity). Lets a writer that keeps its own log share one allocation.
    pub fn insert_shared(&mut self, key: ObjectKey, obj: Arc<Value>) {
        if let Some(slot) = self.objects.get_mut(&key) {
            *slot = obj;
        } else {
            self.order.insert(key.clone());
            self.objects.insert(key, obj);
        }
    }

    /// The stored object of a key taken from the ordered set.
    fn entry<'a>(&'a self, key: &'a ObjectKey) -> (&'a ObjectKey, &'a Arc<Value>) {
        let obj = self
            .objects
            .get(key)
            .expect("the ordered key set and the index hold the same keys");
        (key, obj)
    }

    /// Every object, ordered by group, kind, namespace and name.
    pub fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &Arc<Value>)> {
        self.order.iter().map(|k| self.entry(k))
    }

    /// Removes an object.
    pub fn remove(&mut self, key: &ObjectKey) -> Option<Arc<Value>> {
        let old = self.objects.remove(key)?;
        self.order.remove(key);
        Some(old)
    }

    /// The object with this identity.
    pub fn get(&self, key: &ObjectKey) -> Option<&Arc<Value>> {
        self.objects.get(key)
    }

    /// The stored `Arc` of the object with this identity, for a writer that edits it in
    /// place (`Arc::make_mut` copies it only while another holder shares it).
    pub fn get_mut(&mut self, key: &ObjectKey) -> Option<&mut Arc<Value>> {
        self.objects.get_mut(key)
    }

    /// Every object of `group` and `kind`, ordered by namespace then name.
    pub fn list<'a>(
        &'a self,
        group: &'a str,
        kind: &'a str,
    ) -> impl Iterator<Item = (&'a ObjectKey, &'a Arc<Value>)> + 'a {
        let start = ObjectKey {
            group: group.to_string(),
            kind: kind.to_string(),
            namespace: String::new(),
            name: String::new(),
        };
        self.order
            .range(start..)
            .take_while(move |k| k.group == group && k.kind == kind)
            .map(|k| self.entry(k))
    }

    /// Every object of `group` and `kind`, decoded as `T`; objects that do not decode are
    /// returned as errors naming the object (callers skip them with a warning).
    pub fn typed<T: DeserializeOwned>(
        &self,
        group: &str,
        kind: &str,
    ) -> Vec<Result<T, (ObjectKey, String)>> {
        self.list(group, kind)
            .map(|(k, v)| typed(v).map_err(|e| (k.clone(), e)))
            .collect()
    }

    /// The API versions present for `group` and `kind` (as found on the objects).
    pub fn versions(&self, group: &str, kind: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .list(group, kind)
            .filter_map(|(_, o)| {
                o.get("apiVersion")
                    .and_then(Value::as_str)
                    .map(|a| version_of(a).to_string())
            })
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.objects.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Adds every object of a YAML text: documents separated by `---`, `kind: List` (and
    /// `*List`) objects expanded. Empty documents are skipped. The first malformed document or
    /// object stops the load with an error naming it; objects read before it stay stored.
    pub fn load_yaml(&mut self, text: &str) -> Result<usize, StoreError> {
        crate::yaml_depth::check_depth(text)?;
        let mut n = 0;
        for (i, doc) in serde_yaml_ng::Deserializer::from_str(text).enumerate() {
            let place = format!("document {}", i + 1);
            let value = <Strict as serde::Deserialize>::deserialize(doc)
                .map_err(|e| StoreError::Yaml {
                    place: place.clone(),
                    message: e.to_string(),
                })?
                .0;
            n += self.add_value(value, &place)?;
        }
        Ok(n)
    }

    fn add_value(&mut self, value: Value, place: &str) -> Result<usize, StoreError> {
        if value.is_null() {
            return Ok(0);
        }
        let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind == "List" || (kind.ends_with("List") && value.get("items").is_some()) {
            let kind = kind.to_string();
            let items = match value.get("items") {
                Some(Value::Array(items)) => items.clone(),
                Some(Value::Null) | None => Vec::new(),
                Some(_) => {
                    return Err(StoreError::BadList {
                        place: place.to_string(),
                        kind,
                    });
                }
            };
            let mut n = 0;
            for (j, item) in items.into_iter().enumerate() {
                n += self.add_value(item, &format!("{place}, items[{j}]"))?;
            }
            return Ok(n);
        }
        self.insert(value, place)?;
        Ok(1)
    }
}

/// For `#[serde(deserialize_with = ...)]`: a list of objects that refuses a key written twice
/// in one mapping, as snapshots do.
pub fn strict_values<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Value>, D::Error> {
    let values: Vec<Strict> = serde::Deserialize::deserialize(d)?;
    Ok(values.into_iter().map(|Strict(v)| v).collect())
}

/// A JSON value read from YAML that refuses a key written twice in one mapping (plain
/// `Value` keeps the last one silently, so a snapshot would mean something else than it says).
struct Strict(Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Strict, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> serde::de::Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a YAML value")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let Strict(value) = map.next_value()?;
            if out.contains_key(&key) {
                return Err(serde::de::Error::custom(format!(
                    "duplicate key {key:?} in one mapping"
                )));
            }
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_are_keyed_by_group_kind_namespace_name() {
        let mut s = ObjectStore::new();
        let n = s
            .load_yaml(
                "apiVersion: cluster.x-k8s.io/v1beta1\nkind: MachineDeployment\nmetadata: {name: md-b, namespace: ns}\n---\n\
                 apiVersion: cluster.x-k8s.io/v1beta2\nkind: MachineDeployment\nmetadata: {name: md-a, namespace: ns}\n---\n\
                 apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node, metadata: {name: n1}}\n---\n",
            )
            .unwrap();
        assert_eq!(n, 3);
        let names: Vec<&str> = s
            .list("cluster.x-k8s.io", "MachineDeployment")
            .map(|(k, _)| k.name.as_str())
            .collect();
        assert_eq!(names, ["md-a", "md-b"]);
        assert_eq!(
            s.versions("cluster.x-k8s.io", "MachineDeployment"),
            ["v1beta1", "v1beta2"]
        );
        assert_eq!(s.list("", "Node").count(), 1);
        assert_eq!(s.list("", "Pod").count(), 0);
        let key = ObjectKey {
            group: String::new(),
            kind: "Node".into(),
            namespace: String::new(),
            name: "n1".into(),
        };
        assert_eq!(key.to_string(), "Node n1");
        assert!(s.remove(&key).is_some());
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn malformed_input_is_a_named_error() {
        let mut s = ObjectStore::new();
        let e = s.load_yaml("kind: Pod\nmetadata: {name: p}\n").unwrap_err();
        assert_eq!(e.to_string(), "document 1: object has no apiVersion");
        let e = s
            .load_yaml("apiVersion: v1\nkind: List\nitems: 3\n")
            .unwrap_err();
        assert!(e.to_string().contains("items of a List is not a list"));
        let e = s
            .load_yaml("apiVersion: v1\nkind: Node\nmetadata: {name: a}\nmetadata: {name: b}\n")
            .unwrap_err();
        assert!(e.to_string().contains("duplicate key \"metadata\""), "{e}");
        let e = s.load_yaml("a: [b\n").unwrap_err();
        assert!(matches!(e, StoreError::Yaml { .. }));
        let e = s
            .load_yaml("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Node}\n")
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "document 1, items[0]: object has no metadata.name"
        );
    }

    #[test]
    fn typed_reads_report_objects_that_do_not_decode() {
        let mut s = ObjectStore::new();
        s.load_yaml("apiVersion: v1\nkind: Node\nmetadata: {name: good}\n---\napiVersion: v1\nkind: Node\nmetadata: {name: bad}\nspec: {unschedulable: maybe}\n").unwrap();
        let nodes = s.typed::<k8s_openapi::api::core::v1::Node>("", "Node");
        assert_eq!(nodes.len(), 2);
        assert!(
            nodes[0].is_err() && nodes[1].is_ok(),
            "bad sorts before good"
        );
        assert_eq!(nodes[0].as_ref().unwrap_err().0.name, "bad");
    }
}
