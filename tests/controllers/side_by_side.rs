//! Our kube-controller-manager beside upstream's v1.36.2 on a real kube-apiserver: the same
//! scripted steps (see `kcm_envtest::envtest::sidebyside`) with each binary, and the resulting objects and
//! Events compared. Only the differences in `KNOWN_DIFFERENCES` (each with its reason) may
//! appear. Skipped, loudly, where the real server's binaries are missing.

use std::path::PathBuf;

use kcm_envtest::envtest::Backend;
use kcm_envtest::envtest::sidebyside::{self, RunOptions};

fn run(scenario: &str) {
    if !Backend::Real.available() {
        return;
    }
    let scenario = sidebyside::scenario(scenario).expect("a known scenario");
    let log_dir = std::env::temp_dir().join(format!("kcm-side-by-side-test-{}-{}", std::process::id(), scenario.name));
    let options = RunOptions {
        ours: PathBuf::from(env!("CARGO_BIN_EXE_kube-controller-manager")),
        upstream: None,
        log_dir: log_dir.clone(),
    };
    let outcome = sidebyside::compare(scenario, &options).expect("both runs start");
    let unexpected = outcome.unexpected();
    assert!(
        outcome.upstream.error.is_none() && outcome.ours.error.is_none() && unexpected.is_empty(),
        "{outcome}\nunexpected differences:\n{}",
        unexpected.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("\n")
    );
    // The logs are kept (in the temp folder) only when the comparison failed.
    let _ = std::fs::remove_dir_all(&log_dir);
}

#[test]
fn bootstrap_tokens_sign_cluster_info_and_expire_as_upstream_does() {
    run("bootstrap");
}

#[test]
fn an_aggregated_role_follows_its_sources_as_upstream_does() {
    run("clusterrole-aggregation");
}

#[test]
fn a_deployment_rolls_out_as_upstream_rolls_it_out() {
    run("deployment-create");
}

#[test]
fn a_custom_resource_is_counted_by_its_quota_as_upstream_counts_it() {
    run("resourcequota-custom");
}

#[test]
fn a_new_namespace_is_furnished_as_upstream_furnishes_it() {
    run("serviceaccounts-rootca");
}

#[test]
fn a_finished_job_is_deleted_after_its_ttl_as_upstream_deletes_it() {
    run("job-ttl");
}

#[test]
fn jobs_complete_as_upstream_completes_them() {
    run("job-completions");
}

#[test]
fn failed_pods_and_indexes_are_handled_as_upstream_handles_them() {
    run("job-failures");
}

#[test]
fn a_job_is_suspended_and_resumed_as_upstream_does() {
    run("job-suspend");
}

#[test]
fn cron_jobs_run_their_ticks_as_upstream_runs_them() {
    run("cronjob");
}

#[test]
fn a_daemon_set_follows_nodes_and_rolls_as_upstream_does() {
    run("daemonset");
}

#[test]
fn a_stateful_set_scales_and_rolls_out_as_upstream_does() {
    run("statefulset");
}

#[test]
fn claims_bind_and_volumes_are_provisioned_as_upstream_does() {
    run("persistentvolume");
}

#[test]
fn a_budget_guards_evictions_as_upstream_does() {
    run("disruption");
}

#[test]
fn a_horizontal_pod_autoscaler_scales_as_upstream_scales() {
    run("hpa");
}

#[test]
fn csrs_are_approved_signed_and_refused_as_upstream_does() {
    run("certificates");
}

#[test]
fn hostile_csrs_are_decided_as_upstream_decides_them() {
    run("certificates-hostile");
}

#[test]
fn a_service_cidr_is_guarded_and_released_as_upstream_does() {
    run("servicecidr");
}

#[test]
fn expand_claims_grow_as_upstream_lets_them_grow() {
    run("expand");
}

#[test]
fn ephemeral_volumes_get_claims_as_upstream_creates_them() {
    run("ephemeral");
}

#[test]
fn attachdetach_a_csi_volume_is_attached_and_detached_as_upstream_does() {
    run("attachdetach");
}

#[test]
fn admission_policies_are_type_checked_as_upstream_does() {
    run("vap");
}

#[test]
fn a_claim_in_use_is_protected_as_upstream_protects_it() {
    run("protection");
}

#[test]
fn pods_get_and_release_their_resource_claims_as_upstream_does() {
    run("resourceclaim");
}

#[test]
fn a_pod_on_a_tainted_device_is_evicted_as_upstream_evicts_it() {
    run("devicetaint");
}

#[test]
fn a_volume_attributes_class_in_use_is_protected_as_upstream_protects_it() {
    run("vacprotection");
}
