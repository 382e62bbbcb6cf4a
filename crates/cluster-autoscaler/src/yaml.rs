//! Typed reading of the binary's own YAML files (scenarios, the `ClusterAutoscaler` config):
//! nesting refused before parsing, and errors that start with the path of the field at fault
//! (`workloads[2].replicas: invalid value: integer -1, expected u32 at line 33 column 5`).
//! It reads text only and never touches files.

use serde::de::DeserializeOwned;

/// Parses `text` as `T`; the error names the field path when there is one.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    autoscaler_model::check_depth(text).map_err(|e| e.to_string())?;
    let de = serde_yaml_ng::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        if path == "." {
            return inner;
        }
        // The YAML reader prefixes its own, sometimes shorter, path: keep one.
        let rest = match inner.split_once(": ") {
            Some((p, rest)) if !p.contains(' ') && path.starts_with(p) => rest,
            _ => inner.as_str(),
        };
        if rest.starts_with('.') {
            // A nested reader gave the rest of the path (`.replicas: ...`).
            format!("{path}{rest}")
        } else {
            format!("{path}: {rest}")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Item {
        count: u32,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct File {
        items: Vec<Item>,
    }

    #[test]
    fn errors_start_with_the_field_path() {
        let e = from_str::<File>("items:\n- count: 1\n- count: -1\n").unwrap_err();
        assert!(e.starts_with("items[1].count: invalid type"), "{e}");
        let e = from_str::<File>("[").unwrap_err();
        assert!(!e.starts_with('.'), "{e}");
        let e = from_str::<File>(&"[".repeat(1000)).unwrap_err();
        assert!(e.contains("nested more than"), "{e}");
    }
}
