//! Upstream's own e2e suite as the judge, CI's share of it: the short list of fast controller
//! specs (`kcm_envtest::envtest::e2e::CI_SPECS`) that pass with upstream's binary, run through ginkgo
//! against our kube-controller-manager on a real kube-apiserver with simulated kubelets. The full
//! selection, both binaries, is `kcm-sandbox e2e --both` (docs/testing.md, "Upstream's e2e suite").

use std::path::PathBuf;
use std::time::Duration;

use kcm_envtest::envtest::Backend;
use kcm_envtest::envtest::e2e::{self, RunOptions, Selection, Suite};
use kcm_envtest::envtest::sidebyside::Side;

/// The suite's binaries, or why the test cannot run: a skip said out loud, and a failure under
/// `CI=true` (CI installs everything it needs).
fn suite() -> Option<Suite> {
    if !Backend::Real.selected() || !Backend::Real.available() {
        return None;
    }
    match Suite::locate() {
        Ok(suite) => Some(suite),
        Err(missing) if std::env::var_os("CI").is_some_and(|v| v == "true") => {
            panic!("CI=true and upstream's e2e suite cannot run: {missing}")
        }
        Err(missing) => {
            eprintln!("\n*** E2E SPECS SKIPPED: {missing} ***\n");
            None
        }
    }
}

#[test]
fn the_ci_specs_of_upstreams_e2e_suite_pass_with_ours() {
    let Some(suite) = suite() else { return };
    let out = std::env::temp_dir().join(format!("kcm-e2e-ci-{}", std::process::id()));
    let options = RunOptions {
        side: Side::Ours,
        binary: PathBuf::from(env!("CARGO_BIN_EXE_kube-controller-manager")),
        selection: Selection::Ci,
        procs: 2,
        nodes: 3,
        timeout: Duration::from_secs(20 * 60),
        out: out.clone(),
    };
    let report = e2e::run(&suite, &options).expect("the suite ran");
    println!("{report}");
    let (passed, failed, skipped) = report.counts();
    assert_eq!(
        (passed, failed, skipped, report.suite_failure.as_deref()),
        (e2e::CI_SPECS.len(), 0, 0, None),
        "every CI spec passes (it does with upstream's binary):\n{report}"
    );
    let _ = std::fs::remove_dir_all(out);
}
