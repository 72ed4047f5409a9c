//! The `kcm-sandbox` command's own answers to its command line, without serving anything: the
//! usage on `--help`, and a usage error (exit status 2, the problem named first) on a command
//! or option it does not know. Its subcommands' runs are tested from the root package
//! (`tests/sandbox/cli.rs`, `tests/sandbox/demo.rs`), which finds this binary beside ours; this
//! file also makes `cargo test` build it there.

use std::process::{Command, Output};

fn kcm_sandbox(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kcm-sandbox")).args(args).output().expect("run kcm-sandbox")
}

#[test]
fn help_prints_the_usage_of_every_command() {
    let output = kcm_sandbox(&["--help"]);
    assert!(output.status.success());
    let usage = String::from_utf8_lossy(&output.stdout);
    for command in ["serve", "demo", "nodes", "side-by-side", "e2e"] {
        assert!(usage.contains(&format!("kcm-sandbox {command}")), "{command} missing from:\n{usage}");
    }
}

#[test]
fn an_unknown_command_is_a_usage_error_naming_it() {
    let output = kcm_sandbox(&["frobnicate"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.starts_with("kcm-sandbox: unknown command \"frobnicate\"\n"), "{stderr}");
}

#[test]
fn an_unknown_option_is_a_usage_error_naming_it() {
    let output = kcm_sandbox(&["serve", "--no-such-option"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--no-such-option"), "{stderr}");
}
