//! Patches: JSON merge patch (RFC 7386, also used for strategic-merge and server-side-apply
//! bodies, so lists are replaced whole) and JSON patch (RFC 6902).
//!
//! It decides what an object looks like after a patch. It never stores anything, and a patch
//! that cannot apply is an error (the caller answers 422), never a partial result.

use serde_json::Value;

/// How a PATCH body is to be read, from its content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchKind {
    /// `application/merge-patch+json`.
    Merge,
    /// `application/json-patch+json`.
    Json,
    /// `application/strategic-merge-patch+json` (applied as a merge patch).
    Strategic,
    /// `application/apply-patch+yaml` (server-side apply, applied as a merge of the body;
    /// creates the object when it is missing).
    Apply,
}

impl PatchKind {
    /// The kind of patch a `Content-Type` names.
    pub fn from_content_type(ct: &str) -> Option<PatchKind> {
        let base = ct.split(';').next().unwrap_or("").trim();
        match base {
            "application/merge-patch+json" => Some(PatchKind::Merge),
            "application/json-patch+json" => Some(PatchKind::Json),
            "application/strategic-merge-patch+json" => Some(PatchKind::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => {
                Some(PatchKind::Apply)
            }
            _ => None,
        }
    }
}

/// Applies a merge patch in place: objects merge key by key, `null` removes a key, anything
/// else (lists included) replaces.
pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(p) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(t) = target {
        for (k, v) in p {
            if v.is_null() {
                t.remove(k);
            } else {
                merge(t.entry(k.clone()).or_insert(Value::Null), v);
            }
        }
    }
}

/// Unescapes one JSON pointer token.
fn unescape(tok: &str) -> String {
    tok.replace("~1", "/").replace("~0", "~")
}

/// Splits a pointer into its parent pointer and last token.
fn split(path: &str) -> Result<(&str, String), String> {
    let i = path
        .rfind('/')
        .ok_or_else(|| format!("invalid JSON pointer {path:?}"))?;
    Ok((&path[..i], unescape(&path[i + 1..])))
}

fn add(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    if path.is_empty() {
        *doc = value;
        return Ok(());
    }
    let (parent, last) = split(path)?;
    match doc.pointer_mut(parent) {
        Some(Value::Object(m)) => {
            m.insert(last, value);
            Ok(())
        }
        Some(Value::Array(a)) => {
            let i = if last == "-" {
                a.len()
            } else {
                last.parse::<usize>()
                    .map_err(|_| format!("invalid array index {last:?}"))?
            };
            if i > a.len() {
                return Err(format!("index {i} out of bounds at {path:?}"));
            }
            a.insert(i, value);
            Ok(())
        }
        _ => Err(format!("missing parent of {path:?}")),
    }
}

fn remove(doc: &mut Value, path: &str) -> Result<Value, String> {
    let (parent, last) = split(path)?;
    match doc.pointer_mut(parent) {
        Some(Value::Object(m)) => m
            .remove(&last)
            .ok_or_else(|| format!("nothing to remove at {path:?}")),
        Some(Value::Array(a)) => {
            let i = last
                .parse::<usize>()
                .map_err(|_| format!("invalid array index {last:?}"))?;
            if i >= a.len() {
                return Err(format!("index {i} out of bounds at {path:?}"));
            }
            Ok(a.remove(i))
        }
        _ => Err(format!("missing parent of {path:?}")),
    }
}

/// Applies a JSON patch (a list of operations) to a copy of `doc`.
pub fn json_patch(doc: &Value, ops: &Value) -> Result<Value, String> {
    let ops = ops
        .as_array()
        .ok_or_else(|| "a JSON patch must be a list of operations".to_string())?;
    let mut out = doc.clone();
    for op in ops {
        let name = op["op"].as_str().unwrap_or("");
        let path = op["path"]
            .as_str()
            .ok_or_else(|| format!("operation without a path: {op}"))?;
        let from = || {
            op["from"]
                .as_str()
                .ok_or_else(|| format!("operation without from: {op}"))
        };
        match name {
            "add" => add(&mut out, path, op["value"].clone())?,
            "remove" => {
                remove(&mut out, path)?;
            }
            "replace" => {
                if out.pointer(path).is_none() {
                    return Err(format!("nothing to replace at {path:?}"));
                }
                if let Some(slot) = out.pointer_mut(path) {
                    *slot = op["value"].clone();
                }
            }
            "test" => {
                if out.pointer(path) != Some(&op["value"]) {
                    return Err(format!("test failed at {path:?}"));
                }
            }
            "move" => {
                let v = remove(&mut out, from()?)?;
                add(&mut out, path, v)?;
            }
            "copy" => {
                let v = out
                    .pointer(from()?)
                    .cloned()
                    .ok_or_else(|| format!("nothing to copy at {op}"))?;
                add(&mut out, path, v)?;
            }
            other => return Err(format!("unknown JSON patch operation {other:?}")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_patches_merge_objects_and_replace_lists() {
        let mut node = json!({"metadata": {"name": "n", "labels": {"a": "1", "b": "2"}}, "spec": {"taints": [{"key": "x", "effect": "NoSchedule"}]}});
        merge(
            &mut node,
            &json!({"metadata": {"labels": {"a": null, "c": "3"}}, "spec": {"taints": [{"key": "y", "effect": "NoExecute"}]}}),
        );
        assert_eq!(node["metadata"]["labels"], json!({"b": "2", "c": "3"}));
        assert_eq!(
            node["spec"]["taints"],
            json!([{"key": "y", "effect": "NoExecute"}])
        );
        assert_eq!(node["metadata"]["name"], "n");
    }

    #[test]
    fn json_patches_apply_in_order_or_fail_whole() {
        let doc =
            json!({"spec": {"taints": [{"key": "a"}]}, "metadata": {"annotations": {"x/y": "1"}}});
        let out = json_patch(
            &doc,
            &json!([
                {"op": "add", "path": "/spec/taints/-", "value": {"key": "b"}},
                {"op": "test", "path": "/spec/taints/0/key", "value": "a"},
                {"op": "remove", "path": "/spec/taints/0"},
                {"op": "replace", "path": "/metadata/annotations/x~1y", "value": "2"},
                {"op": "copy", "from": "/metadata/annotations", "path": "/metadata/labels"},
                {"op": "move", "from": "/metadata/labels", "path": "/metadata/other"},
            ]),
        )
        .unwrap();
        assert_eq!(out["spec"]["taints"], json!([{"key": "b"}]));
        assert_eq!(out["metadata"]["annotations"]["x/y"], "2");
        assert_eq!(out["metadata"]["other"]["x/y"], "2");
        assert!(out["metadata"].get("labels").is_none());
        assert!(json_patch(&doc, &json!([{"op": "test", "path": "/spec", "value": 1}])).is_err());
        assert!(
            json_patch(
                &doc,
                &json!([{"op": "replace", "path": "/nope", "value": 1}])
            )
            .is_err()
        );
        assert!(json_patch(&doc, &json!({"op": "add"})).is_err());
        assert!(json_patch(&doc, &json!([{"op": "add", "path": "/a/b", "value": 1}])).is_err());
    }

    #[test]
    fn content_types_name_patch_kinds() {
        assert_eq!(
            PatchKind::from_content_type("application/merge-patch+json; charset=utf-8"),
            Some(PatchKind::Merge)
        );
        assert_eq!(
            PatchKind::from_content_type("application/apply-patch+yaml"),
            Some(PatchKind::Apply)
        );
        assert_eq!(PatchKind::from_content_type("text/plain"), None);
    }
}
