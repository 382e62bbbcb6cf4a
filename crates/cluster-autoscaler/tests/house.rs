//! The shape of the house, checked on the workspace's sources: every library crate keeps its
//! modules private and names its API in one `pub use` list at its root, and no crate reaches
//! into another through a deep path (`autoscaler_core::scale_up::pending::select`). A crate's
//! inside can then change without touching its users, and its root reads as its API.
//!
//! Only a module gated on the `test-util` feature (the test builders) may be public: it never
//! ships, and its users are tests and benches.
//!
//! The option and limit structs of the core and the model that other crates build keep their
//! fields private too: the way in is their accessors and validated setters or constructors.
//!
//! It reads files only; it builds nothing.

use std::fs;
use std::path::{Path, PathBuf};

/// The workspace root: this crate lives in `crates/cluster-autoscaler`.
fn workspace_root() -> PathBuf {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    Path::new(&manifest)
        .ancestors()
        .nth(2)
        .expect("crates/cluster-autoscaler has a grandparent")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, depth first, in name order.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The public module declarations of a crate root's text that are not gated on `test-util`
/// (or on tests): `pub mod name;` lines, with their line numbers.
fn open_modules(root: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut gated = false;
    for (i, line) in root.lines().enumerate() {
        let line = line.trim();
        if line.starts_with("#[") {
            // Attributes stack above the item they apply to.
            gated |= line.contains("test-util") || line.contains("cfg(test)");
            continue;
        }
        let declared = line
            .strip_prefix("pub mod ")
            .map(|rest| rest.trim_end_matches([';', '{', ' ']).to_string());
        if let Some(name) = declared
            && !gated
        {
            out.push((i + 1, name));
        }
        if !line.is_empty() && !line.starts_with("//") {
            gated = false;
        }
    }
    out
}

/// The deep paths into our crates in `text`: a crate name (`autoscaler_*`) followed by a module
/// segment (lower case) and more path, also inside `use` groups, over several lines
/// (`use autoscaler_core::{Action, scale_up::Foo}`). `testing::` (the test builders) is allowed.
/// Each with its line number.
fn deep_paths(text: &str) -> Vec<(usize, String)> {
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    let ident_len = |s: &str| {
        s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(s.len())
    };
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find("autoscaler_") {
        let at = from + found;
        let crate_name = &text[at..at + ident_len(&text[at..])];
        from = at + crate_name.len();
        let Some(path) = text[from..].strip_prefix("::") else {
            continue;
        };
        // The first segment of each path that follows: one, or each item of a group (one level
        // is enough: a nested group starts with a module name, which is what is looked for).
        let heads: Vec<(usize, &str)> = match path.strip_prefix('{') {
            Some(group) => {
                let start = from + 3;
                let end = group.find('}').unwrap_or(group.len());
                let mut items = Vec::new();
                let mut offset = 0;
                for item in group[..end].split(',') {
                    let lead = item.len() - item.trim_start().len();
                    items.push((start + offset + lead, item.trim()));
                    offset += item.len() + 1;
                }
                items
            }
            None => vec![(from + 2, path)],
        };
        for (offset, head) in heads {
            let (segment, more) = head.split_at(ident_len(head));
            let module = segment.starts_with(|c: char| c.is_ascii_lowercase());
            // `typed::<T>` is a function with a turbofish, not a module.
            let deeper = more.strip_prefix("::").is_some_and(|m| {
                m.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_' || c == '{')
            });
            if module && deeper && segment != "testing" {
                out.push((line_of(offset), format!("{crate_name}::{segment}::")));
            }
        }
    }
    out
}

/// What is wrong with the house under `root`, one line per finding, naming the file and line.
fn findings(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(crates) = fs::read_dir(root.join("crates")) else {
        return vec![format!("{}: no crates/ directory", root.display())];
    };
    let mut dirs: Vec<PathBuf> = crates.filter_map(|e| e.ok().map(|e| e.path())).collect();
    dirs.sort();
    for dir in dirs {
        let lib = dir.join("src/lib.rs");
        if let Ok(text) = fs::read_to_string(&lib) {
            for (line, name) in open_modules(&text) {
                out.push(format!(
                    "{}:{line}: `pub mod {name}`: keep modules private and re-export the API at the root",
                    lib.display()
                ));
            }
        }
        let mut files = Vec::new();
        rust_files(&dir, &mut files);
        // This file spells deep paths on purpose, in the test of the check itself.
        let this_file = Path::new(file!());
        for file in files.into_iter().filter(|f| !f.ends_with(this_file)) {
            let Ok(text) = fs::read_to_string(&file) else {
                continue;
            };
            for (line, path) in deep_paths(&text) {
                out.push(format!(
                    "{}:{line}: deep path `{path}`: import from the crate's root",
                    file.display()
                ));
            }
        }
    }
    out
}

#[test]
fn library_roots_are_closed_and_no_crate_reaches_into_another() {
    let root = workspace_root();
    let found = findings(&root);
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_check_sees_open_modules_and_deep_paths() {
    let root = "//! Docs.\npub mod open;\n#[cfg(any(test, feature = \"test-util\"))]\npub mod testing;\nmod closed;\npub use closed::Thing;\n";
    assert_eq!(open_modules(root), [(2, "open".to_string())]);
    let text = "use autoscaler_core::scale_up::pending::select;\n\
                use autoscaler_core::{Action, scale_down::Waiting};\n\
                use autoscaler_model::{ObjectKey, Pod};\n\
                let p = autoscaler_model::Pod::from_k8s(&pod);\n\
                let t = autoscaler_model::typed::<Pod>(&value);\n\
                use autoscaler_model::testing::{GI, NodeBuilder};\n\
                let k = autoscaler_model::model::store::ObjectKey::new();\n\
                use autoscaler_kube::{\n    Metrics,\n    plan::explain,\n};\n";
    assert_eq!(
        deep_paths(text),
        [
            (1, "autoscaler_core::scale_up::".to_string()),
            (2, "autoscaler_core::scale_down::".to_string()),
            (7, "autoscaler_model::model::".to_string()),
            (10, "autoscaler_kube::plan::".to_string()),
        ]
    );
}

/// The option and limit structs of the core and the model that other crates build, whose fields
/// are private: the way in is their accessors and validated setters or constructors, so no shell
/// can skip a rule. An option group held by another (the drain rules in the scale-down options)
/// is reached through its holder's accessors, never a public field.
const CLOSED_OPTIONS: &[&str] = &[
    "ScaleDownOptions",
    "ScaleUpOptions",
    "BackoffOptions",
    "ClusterStateOptions",
    "DrainOptions",
    "BalancingOptions",
    "UtilizationOptions",
    "PendingOptions",
    "TemplateOptions",
    "ConsolidationOptions",
    "EstimatorLimits",
    "CapacityOptions",
    "RequestOptions",
    "TaintConfig",
];

/// The crates whose sources hold the closed structs.
const CLOSED_CRATES: &[&str] = &["crates/core/src", "crates/model/src"];

/// The `pub` fields (not `pub(crate)`) of the struct `name` declared in `text`, with their line
/// numbers.
fn public_fields(text: &str, name: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if !inside {
            inside = declares(line, name);
            continue;
        }
        if line == "}" {
            break;
        }
        if let Some(rest) = line.strip_prefix("pub ") {
            let field = rest.split(':').next().unwrap_or(rest).trim();
            out.push((i + 1, field.to_string()));
        }
    }
    out
}

/// Whether `line` opens the declaration of the struct `name` with named fields (generic or
/// not: `pub struct EstimatorLimits<B = Unlimited> {`).
fn declares(line: &str, name: &str) -> bool {
    line.strip_prefix("pub struct ")
        .and_then(|rest| rest.strip_prefix(name))
        .is_some_and(|rest| rest == " {" || (rest.starts_with('<') && rest.ends_with("> {")))
}

/// The public fields of the closed structs under `root`'s core and model, one line per finding.
fn open_options(root: &Path) -> Vec<String> {
    let mut files = Vec::new();
    for dir in CLOSED_CRATES {
        rust_files(&root.join(dir), &mut files);
    }
    let mut out = Vec::new();
    let mut seen = Vec::new();
    for file in files {
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        for name in CLOSED_OPTIONS {
            if !text.lines().any(|line| declares(line.trim(), name)) {
                continue;
            }
            seen.push(*name);
            for (line, field) in public_fields(&text, name) {
                out.push(format!(
                    "{}:{line}: `pub {field}` of {name}: keep it private, behind an accessor and a validated setter",
                    file.display()
                ));
            }
        }
    }
    for name in CLOSED_OPTIONS {
        if !seen.contains(name) {
            out.push(format!(
                "{}: no `pub struct {name} {{` found",
                CLOSED_CRATES.join(", ")
            ));
        }
    }
    out
}

#[test]
fn the_options_other_crates_build_have_private_fields() {
    let found = open_options(&workspace_root());
    assert!(found.is_empty(), "{}", found.join("\n"));
}

#[test]
fn the_check_sees_public_fields() {
    let text = "/// Doc.\npub struct ScaleUpOptions {\n    /// A.\n    pub(crate) a: usize,\n    pub b: bool,\n    pub balancing: X,\n}\npub struct Other {\n    pub c: u8,\n}\n";
    assert_eq!(
        public_fields(text, "ScaleUpOptions"),
        [(5, "b".to_string()), (6, "balancing".to_string())]
    );
    assert!(public_fields(text, "Missing").is_empty());
    let generic = "pub struct EstimatorLimits<B = Unlimited> {\n    pub max_nodes: Option<usize>,\n    pub(crate) budget: B,\n}\npub struct EstimatorLimitsMore {\n    pub x: u8,\n}\n";
    assert_eq!(
        public_fields(generic, "EstimatorLimits"),
        [(2, "max_nodes".to_string())]
    );
    assert!(!declares(
        "pub struct EstimatorLimitsMore {",
        "EstimatorLimits"
    ));
}
