//! Query strings and selectors: percent-decoding of query parameters, label selectors
//! (`=`, `==`, `!=`, `in`, `notin`, existence and `!key`) and field selectors (`=`, `==`, `!=` on
//! any dotted field path, e.g. `metadata.name`, `spec.nodeName`, `status.phase`).
//!
//! It decides whether an object matches what a list or watch asked for. It never changes an
//! object; a selector it cannot parse is an error for the caller to report (400).

use std::collections::BTreeMap;

use serde_json::Value;

/// Decodes `application/x-www-form-urlencoded` text (`+` is a space).
pub fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 2;
                    }
                    None => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The query parameters, decoded (the last value of a repeated name wins).
pub fn parse_query(query: Option<&str>) -> BTreeMap<String, String> {
    query
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.split_once('=') {
            Some((k, v)) => (decode(k), decode(v)),
            None => (decode(p), String::new()),
        })
        .collect()
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelReq {
    Eq(String, String),
    Ne(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector (all requirements must hold).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<LabelReq>);

/// Splits on commas outside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&s[start..]);
    out
}

fn set_values(s: &str) -> Result<Vec<String>, String> {
    let inner = s
        .trim()
        .strip_prefix('(')
        .and_then(|x| x.strip_suffix(')'))
        .ok_or_else(|| format!("expected a parenthesized set, got {s:?}"))?;
    Ok(inner
        .split(',')
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses `a=b,c!=d,e in (x,y),f notin (z),g,!h`.
    pub fn parse(s: &str) -> Result<LabelSelector, String> {
        let mut reqs = Vec::new();
        for part in split_top(s) {
            let p = part.trim();
            if p.is_empty() {
                continue;
            }
            let req = if let Some((k, v)) = p.split_once("!=") {
                LabelReq::Ne(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = p.split_once("==") {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = p.split_once('=') {
                LabelReq::Eq(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = p.split_once(" notin ") {
                LabelReq::NotIn(k.trim().into(), set_values(v)?)
            } else if let Some((k, v)) = p.split_once(" in ") {
                LabelReq::In(k.trim().into(), set_values(v)?)
            } else if let Some(k) = p.strip_prefix('!') {
                LabelReq::NotExists(k.trim().into())
            } else if p.contains(char::is_whitespace) || p.contains(['(', ')']) {
                return Err(format!("unable to parse requirement: {p:?}"));
            } else {
                LabelReq::Exists(p.into())
            };
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Whether an object's `metadata.labels` satisfy every requirement.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            LabelReq::Eq(k, v) => get(k) == Some(v.as_str()),
            LabelReq::Ne(k, v) => get(k) != Some(v.as_str()),
            LabelReq::In(k, vs) => get(k).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelReq::NotIn(k, vs) => get(k).is_none_or(|x| vs.iter().all(|v| v != x)),
            LabelReq::Exists(k) => get(k).is_some(),
            LabelReq::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector: `(path, value, equal)` requirements.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, String, bool)>);

impl FieldSelector {
    /// Parses `metadata.name=a,spec.nodeName!=`.
    pub fn parse(s: &str) -> Result<FieldSelector, String> {
        let mut reqs = Vec::new();
        for part in s.split(',') {
            let p = part.trim();
            if p.is_empty() {
                continue;
            }
            let (k, v, eq) = if let Some((k, v)) = p.split_once("!=") {
                (k, v, false)
            } else if let Some((k, v)) = p.split_once("==") {
                (k, v, true)
            } else if let Some((k, v)) = p.split_once('=') {
                (k, v, true)
            } else {
                return Err(format!("invalid field selector requirement: {p:?}"));
            };
            let pointer = format!("/{}", k.trim().replace('.', "/"));
            reqs.push((pointer, v.trim().to_string(), eq));
        }
        Ok(FieldSelector(reqs))
    }

    /// Whether the object's fields satisfy every requirement (a missing field reads as `""`).
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(ptr, want, eq)| {
            let have = match obj.pointer(ptr) {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(v) => v.to_string(),
            };
            (have == *want) == *eq
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn queries_decode() {
        let q = parse_query(Some(
            "labelSelector=app%3Dweb%2Ctier+in+%28a%2Cb%29&watch=true&x",
        ));
        assert_eq!(q["labelSelector"], "app=web,tier in (a,b)");
        assert_eq!(q["watch"], "true");
        assert_eq!(q["x"], "");
        assert_eq!(decode("100%"), "100%");
        assert_eq!(decode("%zz"), "%zz");
    }

    #[test]
    fn label_selectors_match() {
        let obj = json!({"metadata": {"labels": {"app": "web", "tier": "a"}}});
        let yes = [
            "app=web",
            "app==web",
            "app!=db",
            "tier in (a, b)",
            "tier notin (c)",
            "app",
            "!zone",
            "app=web,tier in (a,b),!zone",
            "",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(&obj), "{s}");
        }
        let no = [
            "app=db",
            "app!=web",
            "tier in (b)",
            "tier notin (a)",
            "zone",
            "!app",
            "zone notin (x),app=db",
        ];
        for s in no {
            assert!(!LabelSelector::parse(s).unwrap().matches(&obj), "{s}");
        }
        assert!(
            LabelSelector::parse("zone notin (x)")
                .unwrap()
                .matches(&obj)
        );
        assert!(LabelSelector::parse("a b").is_err());
        assert!(LabelSelector::parse("a in b").is_err());
    }

    #[test]
    fn field_selectors_match() {
        let pod = json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}});
        let f = |s: &str| FieldSelector::parse(s).unwrap().matches(&pod);
        assert!(f("metadata.name=p,metadata.namespace==ns"));
        assert!(f("spec.nodeName=n1,status.phase!=Succeeded"));
        assert!(!f("spec.nodeName="));
        let pending = json!({"metadata": {"name": "q"}, "spec": {}});
        assert!(
            FieldSelector::parse("spec.nodeName=")
                .unwrap()
                .matches(&pending)
        );
        assert!(FieldSelector::parse("nonsense").is_err());
    }
}
