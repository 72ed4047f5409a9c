//! The work queues of every built controller carry upstream v1.33's names, so that dashboards
//! built on `workqueue_*{name=...}` keep working: every controller of `DESCRIPTORS` starts
//! against each backend and `/metrics` lists exactly upstream's queue names, each from its
//! queue's creation (depth 0 before the first add is fine).
//!
//! A test binary of its own: it checks the exact set of queue names in the process-wide metric
//! registry, to which any other test's queues would add theirs.

use std::collections::BTreeSet;

// Only `harness::with` and the backends.
#[allow(dead_code)]
mod harness;

use harness::Backend;

/// Upstream's names (`workqueue.*QueueWithConfig{Name: ...}` in `pkg/controller/...`).
const UPSTREAM_QUEUES: &[&str] = &[
    "ClusterRoleAggregator",
    "bootstrap_signer_queue",
    "ca_cert_publisher_cluster_trust_bundles",
    "certificate",
    "cidrallocator_node",
    "claims",
    "cronjob",
    "daemonset",
    "daemonset-node-updates",
    "deployment",
    "device-taint-eviction-controller",
    "disruption",
    "disruption_recheck",
    "endpoint",
    "endpoint_slice",
    "endpoint_slice_mirroring",
    "ephemeral_volume",
    "garbage_collector_attempt_to_delete",
    "garbage_collector_attempt_to_orphan",
    "garbage_collector_graph_changes",
    "horizontalpodautoscaler",
    "ipaddresses",
    "job",
    "job_orphan_pod",
    "namespace",
    "node_lifecycle_controller",
    "node_lifecycle_controller_pods",
    "noexec_taint_node",
    "noexec_taint_pod",
    "orphaned_pods_nodes",
    "pvcprotection",
    "pvcs",
    "pvprotection",
    "replicaset",
    "replicationmanager",
    "resource_claim",
    "resource_quota_controller_resource_changes",
    "resourcequota_primary",
    "resourcequota_priority",
    "root_ca_cert_publisher",
    "selinux_warning",
    "serviceaccount",
    "serviceaccount_tokens_secret",
    "serviceaccount_tokens_service",
    "stale_pod_disruption",
    "statefulset",
    "token_cleaner",
    "ttl_jobs_to_delete",
    "ttlcontroller",
    "vacprotection",
    "validatingadmissionpolicy-status",
    "volume_expand",
    "volumes",
];

/// Upstream's plain (not delaying) queues: no `workqueue_retries_total` series (the binder's
/// `claims` and `volumes` are rate-limited since 1.35).
const PLAIN_QUEUES: &[&str] = &["noexec_taint_node", "noexec_taint_pod", "node_lifecycle_controller"];

/// The `name` label of every series of `metric` in `text`.
fn names_of(text: &str, metric: &str) -> BTreeSet<String> {
    let prefix = format!("{metric}{{name=\"");
    text.lines()
        .filter_map(|line| line.strip_prefix(&prefix))
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_string)
        .collect()
}

on_both_backends!(every_built_controller_names_its_queues_as_upstream);
fn every_built_controller_names_its_queues_as_upstream(backend: Backend) {
    // The metrics are the process's: both backends' runs register the same queue names.
    let key_file = std::env::temp_dir().join(format!("kcm-wq-names-{}-{backend:?}.key", std::process::id()));
    let key_flag = format!("--service-account-private-key-file={}", key_file.display());
    let (ca_cert, ca_key) = (key_file.with_extension("ca.crt"), key_file.with_extension("ca.key"));
    let ca_cert_flag = format!("--cluster-signing-cert-file={}", ca_cert.display());
    let ca_key_flag = format!("--cluster-signing-key-file={}", ca_key.display());
    let selection = [
        "--allocate-node-cidrs",
        "--cluster-cidr=10.244.0.0/16",
        "--controllers=*,bootstrapsigner,tokencleaner,selinux-warning-controller",
        // The publisher's gate; its queue exists whether or not the API is served.
        "--feature-gates=ClusterTrustBundle=true",
    ];
    let cluster = harness::with(&kcm::app::controllers::built())
        .on(backend)
        .without_nodes()
        .flags(&[key_flag.as_str()])
        .flags(&selection)
        .flags(&[ca_cert_flag.as_str(), ca_key_flag.as_str()])
        .remove_on_drop(key_file.clone())
        .remove_on_drop(ca_cert.clone())
        .remove_on_drop(ca_key.clone())
        .start_with(|_, server| {
            std::fs::write(&key_file, server.service_account_key_pem()).expect("key written");
            std::fs::write(&ca_cert, server.ca_pem()).expect("ca.crt written");
            std::fs::write(&ca_key, server.ca_key_pem()).expect("ca.key written");
        });
    // Those whose feature gates stay off (e.g. `podgroup-protection-controller`) do not start.
    let startable = harness::options(&selection);
    let expected_count = kcm::app::controllers::built().iter().filter(|d| startable.starts_controller(d.name)).count();
    assert_eq!(cluster.controller_names().len(), expected_count, "every built controller the gates allow started");

    let text = kcm::metrics::global().render();
    let expected: BTreeSet<String> = UPSTREAM_QUEUES.iter().map(|n| n.to_string()).collect();
    assert_eq!(names_of(&text, "workqueue_depth"), expected);
    assert_eq!(names_of(&text, "workqueue_adds_total"), expected);
    assert_eq!(names_of(&text, "workqueue_work_duration_seconds_count"), expected);
    let delaying: BTreeSet<String> = expected.iter().filter(|n| !PLAIN_QUEUES.contains(&n.as_str())).cloned().collect();
    assert_eq!(names_of(&text, "workqueue_retries_total"), delaying);
}
