//! The help a newcomer reads first: every subcommand listed at the top, and no help text that
//! points outside the product (design notes, unreleased "later versions").

use std::process::Command;

fn help(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_cluster-autoscaler"))
        .args(args)
        .output()
        .expect("the binary runs");
    assert!(out.status.success(), "{args:?}");
    String::from_utf8(out.stdout).expect("utf-8 help")
}

#[test]
fn top_level_help_lists_every_subcommand() {
    let text = help(&["--help"]);
    let first = text.lines().next().unwrap_or_default();
    for sub in ["run", "plan", "simulate", "bench"] {
        assert!(first.contains(sub), "{sub} missing from {first:?}");
        assert!(
            text.lines()
                .any(|l| l.trim_start().starts_with(&format!("{sub} "))),
            "{sub} missing from the commands in:\n{text}"
        );
    }
}

#[test]
fn no_help_text_mentions_design_notes_or_later_versions() {
    for sub in ["run", "plan", "simulate", "bench"] {
        let text = help(&[sub, "--help"]).to_lowercase();
        for banned in ["seed 0", "seed's", "later version", "issue #"] {
            assert!(
                !text.contains(banned),
                "`{sub} --help` says {banned:?}:\n{text}"
            );
        }
    }
}
