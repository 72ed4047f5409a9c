//! The scale bench's CI-sized check (issue 35): `kcm_envtest::envtest::scale`'s steps with ours on
//! the real server at a small size, so that the bench (`cargo bench --bench scale`, upstream's
//! binary and ours at 1,000 nodes) keeps working. Each step must converge; the figures are
//! printed. The node failure takes one of zone-a's two nodes out: the node lifecycle
//! controller taints it and the pods there are replaced elsewhere.

use std::path::PathBuf;

use kcm_envtest::envtest::Backend;
use kcm_envtest::envtest::scale::{self, ScaleOptions};
use kcm_envtest::envtest::sidebyside::Side;

#[test]
fn every_step_of_the_scale_run_converges_with_ours() {
    if !Backend::Real.available() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("kcm-scale-test-{}", std::process::id()));
    let options = ScaleOptions {
        nodes: 6,
        deployments: 4,
        replicas: 6,
        failed_fraction: 0.5,
        qps: 500,
        burst: 1000,
        toleration_seconds: 5,
        dir: dir.clone(),
    };
    let binary = PathBuf::from(env!("CARGO_BIN_EXE_kube-controller-manager"));
    let run = scale::run(Side::Ours, &binary, &options).unwrap_or_else(|e| panic!("the scale run: {e}"));
    eprintln!("{}", scale::table(&options, std::slice::from_ref(&run)));
    let steps: Vec<&str> = run.steps.iter().map(|s| s.name).collect();
    assert_eq!(steps, ["start", "create", "rollout", "relist", "scale down", "node failure", "delete"]);
    assert_eq!(run.taint_offsets.len(), 1, "the failed node was tainted for eviction");
    assert!(run.steps.iter().all(|s| s.requests > 0.0 && s.end_rss > 0), "every step measured: {run:?}");
    assert_eq!(run.queue_wait.len(), 2);
    let _ = std::fs::remove_dir_all(&dir);
}
