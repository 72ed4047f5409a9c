//! The command line of the real binary: help, version and the errors that stop it before it
//! talks to any API server.

use std::process::{Command, Output};

fn kcm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kube-controller-manager"))
        .args(args)
        .output()
        .expect("run kube-controller-manager")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Upstream's usage text as it prints it before a flag error: `--help` from `Usage:` on.
fn usage_text() -> String {
    let help = stdout(&kcm(&["--help"]));
    help[help.find("Usage:").expect("--help has a Usage: line")..].to_string()
}

/// Asserts exit status 1, as upstream's, and returns the `Error: …` line that ends stderr.
/// Before it stands upstream's usage and a blank line where pflag refused the line
/// (`usage: true`), and nothing where the line parsed but was refused after.
fn refused(args: &[&str], usage: bool) -> String {
    let output = kcm(args);
    assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
    assert!(output.stdout.is_empty(), "{args:?} wrote to stdout");
    let err = stderr(&output);
    let error = err.lines().last().unwrap_or_default().to_string();
    let expected_usage = if usage { format!("{}\n", usage_text()) } else { String::new() };
    assert_eq!(
        err.strip_suffix(&format!("{error}\n")),
        Some(expected_usage.as_str()),
        "{args:?}: stderr before its last line is not {}",
        if usage { "the usage text and a blank line" } else { "empty" }
    );
    error
}

/// A line pflag refuses: usage, then the error.
fn usage_error(args: &[&str]) -> String {
    refused(args, true)
}

/// Positional arguments: the error alone, as cobra's argument check prints it.
fn plain_error(args: &[&str]) -> String {
    refused(args, false)
}

/// A line refused after parsing: one klog error line, `"command failed" err="…"`, as upstream
/// logs it once logging is set up. Returns `Error: <the error>` for the callers to compare.
fn invalid(args: &[&str]) -> String {
    let output = kcm(args);
    assert_eq!(output.status.code(), Some(1), "{args:?}: {output:?}");
    assert!(output.stdout.is_empty(), "{args:?} wrote to stdout");
    let err = stderr(&output);
    let error = kcm::app::flags::parse(args.iter().map(std::ffi::OsString::from)).expect_err("refused");
    let kcm::app::flags::Refusal::Logged(message) = kcm::app::flags::refusal(&error) else {
        panic!("{args:?}: {error} is refused before validation")
    };
    let klog = err.starts_with('E') && err.contains("] ") && err.lines().count() == 1;
    assert!(
        klog && err.ends_with(&format!("] {message}\n")),
        "{args:?}: expected one klog line ending in {message}, got {err}"
    );
    format!("Error: {error}")
}

#[test]
fn help_lists_groups_and_defaults() {
    for flag in ["--help", "-h"] {
        let output = kcm(&[flag]);
        assert_eq!(output.status.code(), Some(0));
        assert!(output.stderr.is_empty());
        let help = stdout(&output);
        assert!(help.contains("Usage:\n  kube-controller-manager [flags]\n"));
        for section in [
            "Generic flags:",
            "Device-taint-eviction-controller flags:",
            "Resourceclaim-controller flags:",
            "Secure serving flags:",
            "Authentication flags:",
            "Authorization flags:",
            "Node-lifecycle-controller flags:",
            "Logs flags:",
            "Misc flags:",
            "Global flags:",
        ] {
            assert!(help.contains(&format!("\n{section}\n")), "{section}");
        }
        for line in [
            "--leader-elect-lease-duration duration",
            "(default 15s)",
            "--secure-port int",
            "(default 10257)",
            "--node-monitor-grace-period duration",
            "(default 50s)",
            "(default [/healthz,/readyz,/livez])",
            "(default \"kube-controller-manager\")",
            "--kubeconfig string",
            "-v, --v Level",
            "--controller-shutdown-timeout duration",
            "--min-compatibility-version strings",
            "--tls-curve-preferences int32Slice",
        ] {
            assert!(help.contains(line), "{line}");
        }
    }
}

#[test]
fn version_prints_and_exits() {
    let output = kcm(&["--version"]);
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(stdout(&output), "Kubernetes v1.36.2\n");
}

#[test]
fn unknown_flag() {
    assert_eq!(usage_error(&["--foo"]), "Error: unknown flag: --foo");
}

#[test]
fn malformed_values_name_the_flag() {
    assert_eq!(
        usage_error(&["--kube-api-qps=abc"]),
        r#"Error: invalid argument "abc" for "--kube-api-qps" flag: not a number"#
    );
    assert_eq!(
        usage_error(&["--leader-elect-retry-period", "2"]),
        r#"Error: invalid argument "2" for "--leader-elect-retry-period" flag: time: missing unit in duration "2""#
    );
    assert_eq!(usage_error(&["--kubeconfig"]), "Error: flag needs an argument: --kubeconfig");
}

#[test]
fn locked_and_dependent_feature_gates_are_refused() {
    // Upstream's --feature-gates takes any text and refuses it once the command line is read:
    // no usage. (An unknown gate is only warned about, as upstream v1.36.)
    assert_eq!(
        invalid(&["--feature-gates", "SidecarContainers=false"]),
        "Error: cannot set feature gate SidecarContainers to false, feature is locked to true"
    );
    assert_eq!(
        invalid(&["--feature-gates=ClusterTrustBundleProjection=true"]),
        "Error: ClusterTrustBundleProjection is enabled, but depends on features that are disabled: [ClusterTrustBundle]"
    );
    assert_eq!(
        invalid(&["--emulated-version=1.33", "--feature-gates=GenericWorkload=true"]),
        "Error: cannot set feature gate GenericWorkload to true, feature is PreAlpha at emulated version 1.33, min \
         compatibility version 1.33"
    );
}

#[test]
fn emulated_version_must_be_within_three_minors() {
    assert_eq!(invalid(&["--emulated-version=1.37"]), "Error: emulation version 1.37 is not between [1.33, 1.36.0]");
    assert_eq!(
        invalid(&["--emulated-version=1.32"]),
        "Error: [emulation version 1.32 is not between [1.33, 1.36.0], minCompatibilityVersion version 1.33 is not \
         between [1.33, 1.32]]"
    );
}

#[test]
fn lease_must_outlast_renew_deadline() {
    assert_eq!(
        invalid(&["--leader-elect-lease-duration=10s", "--leader-elect-renew-deadline=10s"]),
        "Error: --leader-elect-lease-duration (10s) must be greater than \
         --leader-elect-renew-deadline (10s)"
    );
}

#[test]
fn unknown_controller() {
    assert_eq!(invalid(&["--controllers=nope"]), r#"Error: "nope" is not in the list of known controllers"#);
}

#[test]
fn positional_arguments_are_refused() {
    assert_eq!(
        plain_error(&["--leader-elect", "false"]),
        r#"Error: "kube-controller-manager" does not take any arguments, got ["false"]"#
    );
}

#[test]
fn node_cidr_mask_must_fit_the_cluster_cidr() {
    assert_eq!(
        invalid(&["--allocate-node-cidrs", "--cluster-cidr=10.244.0.0/16", "--node-cidr-mask-size=8"]),
        "Error: --node-cidr-mask-size (8) must not be smaller than the prefix length of --cluster-cidr 10.244.0.0/16"
    );
}

/// Generated command lines (docs/reliability.md, "Fuzzing"), each refused by one bad argument among valid
/// flags in either syntax (no `--help`: it wins over a positional argument): the binary exits 1,
/// as upstream's, with exactly the parser's message (after the usage text where pflag refused
/// the line), whatever the bytes (non-UTF-8 included). Few cases: each spawns the binary.
#[test]
fn generated_bad_command_lines_exit_1_with_the_parsers_message() {
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;

    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

    let good = proptest::sample::select(vec![
        vec!["--kube-api-qps=50"],
        vec!["--kube-api-burst", "100"],
        vec!["--leader-elect=false"],
        vec!["--controllers", "*,-ttl"],
        vec!["-v", "4"],
        vec!["--v=2"],
        vec!["--concurrent_deployment_syncs=3"],
        vec!["--feature-gates", "AllAlpha=false"],
        vec![""],
    ]);
    let bad = prop_oneof![
        "[a-z]{1,12}".prop_map(|n| vec![OsString::from(format!("--no-such-{n}"))]),
        any::<String>().prop_map(|v| vec![OsString::from(format!("--kube-api-qps={v}x"))]),
        proptest::collection::vec(128u8.., 1..8)
            .prop_map(|b| vec![OsString::from("--kubeconfig"), OsString::from_vec(b)]),
        "[^-][a-z\n\t]{0,8}".prop_map(|p| vec![OsString::from(p)]),
        Just(vec![OsString::from("--node-monitor-grace-period")]),
        "-[a-gi-uw-z]{1,3}".prop_map(|s| vec![OsString::from(s)]),
    ];
    let line = (proptest::collection::vec(good, 0..5), bad, any::<prop::sample::Index>());
    let config = Config { cases: 8, failure_persistence: None, ..Config::default() };
    let mut runner = TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha));
    let result = runner.run(&line, |(good, bad, at)| {
        let mut args: Vec<OsString> = good.concat().into_iter().map(OsString::from).collect();
        let at = at.index(args.len() + 1);
        args.splice(at..at, bad);
        let refusal = match kcm::app::flags::parse(args.clone()) {
            Err(error) => kcm::app::flags::refusal(&error),
            Ok(_) => panic!("{args:?} parsed"),
        };
        let output = Command::new(env!("CARGO_BIN_EXE_kube-controller-manager")).args(&args).output().unwrap();
        prop_assert_eq!(output.status.code(), Some(1), "{:?}: {:?}", args, output);
        prop_assert!(output.stdout.is_empty());
        match refusal {
            kcm::app::flags::Refusal::Printed(text) => prop_assert_eq!(stderr(&output), text, "{:?}", args),
            // A klog line: its time and pid vary.
            kcm::app::flags::Refusal::Logged(message) => {
                prop_assert!(stderr(&output).ends_with(&format!("] {message}\n")), "{:?}: {:?}", args, output)
            }
        }
        Ok(())
    });
    result.unwrap();
}
