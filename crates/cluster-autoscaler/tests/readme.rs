//! The outputs the README shows are the binary's: every `cargo run --release -p
//! cluster-autoscaler -- ARGS` command in README.md is run (a debug build prints the same) and
//! its standard output must equal the first ```` ```text ```` block after the command, byte for
//! byte. A change to what `simulate` or `plan` prints fails here until the README shows it.

use std::path::{Path, PathBuf};
use std::process::Command;

const COMMAND: &str = "cargo run --release -p cluster-autoscaler -- ";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One command the README shows, with the output it shows after it.
#[derive(Debug)]
struct Shown {
    /// The README's line number of the command (1-based).
    line: usize,
    args: Vec<String>,
    output: String,
}

/// Every `cargo run ... -- ARGS` line of `readme` (a trailing `# comment` dropped) with the
/// next ```` ```text ```` block.
fn shown(readme: &str) -> Vec<Shown> {
    let lines: Vec<&str> = readme.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(rest) = line.strip_prefix(COMMAND) else {
            continue;
        };
        let rest = rest.split_once('#').map_or(rest, |(args, _)| args);
        let args = rest.split_whitespace().map(str::to_string).collect();
        let open = (i + 1..lines.len())
            .find(|&j| lines[j] == "```text")
            .unwrap_or_else(|| panic!("README.md:{}: no ```text block after it", i + 1));
        let close = (open + 1..lines.len())
            .find(|&j| lines[j] == "```")
            .unwrap_or_else(|| panic!("README.md:{}: the ```text block is not closed", open + 1));
        let mut output = lines[open + 1..close].join("\n");
        output.push('\n');
        out.push(Shown {
            line: i + 1,
            args,
            output,
        });
    }
    out
}

/// The lines where `shown` and `printed` differ, for the failure message.
fn diff(shown: &str, printed: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (shown.lines().collect(), printed.lines().collect());
    let mut out = String::new();
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (a.get(i), b.get(i));
        if x != y {
            out.push_str(&format!(
                "line {}:\n  README: {}\n  binary: {}\n",
                i + 1,
                x.unwrap_or(&"(none)"),
                y.unwrap_or(&"(none)")
            ));
        }
    }
    out
}

#[test]
fn the_readme_shows_what_the_binary_prints() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let shown = shown(&readme);
    // The set-up's `simulate` and the `plan` example: a README that lost one must fail too.
    let subcommands: Vec<&str> = shown
        .iter()
        .filter_map(|s| s.args.first().map(String::as_str))
        .collect();
    assert_eq!(subcommands, ["simulate", "plan"], "{shown:#?}");
    for s in &shown {
        let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
            .args(&s.args)
            .current_dir(repo())
            .output()
            .expect("run the binary");
        assert!(
            out.status.success(),
            "README.md:{}: {:?} failed: {}",
            s.line,
            s.args,
            String::from_utf8_lossy(&out.stderr)
        );
        let printed = String::from_utf8(out.stdout).expect("UTF-8 output");
        assert!(
            printed == s.output,
            "README.md:{}: {:?} prints something else than the README shows:\n{}",
            s.line,
            s.args,
            diff(&s.output, &printed)
        );
    }
}

#[test]
fn a_changed_line_is_caught() {
    let readme = "x\n```sh\ncargo run --release -p cluster-autoscaler -- plan --a b   # c\n```\n\
                  text\n```text\none\ntwo\n```\n";
    let shown = shown(readme);
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].line, 3);
    assert_eq!(shown[0].args, ["plan", "--a", "b"]);
    assert_eq!(shown[0].output, "one\ntwo\n");
    assert_eq!(
        diff(&shown[0].output, "one\nthree\n"),
        "line 2:\n  README: two\n  binary: three\n"
    );
    assert_eq!(diff("one\n", "one\n"), "");
}
