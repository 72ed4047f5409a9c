//! The selinux-warning-controller (off by default; its gate SELinuxChangePolicy is GA) on the
//! real server: pods sharing a volume that can be mounted with an SELinux context (an inline
//! iSCSI volume here, which no node needs to run) get a Normal Event for each conflicting label
//! or change policy, and the conflicts are exported as
//! `selinux_warning_controller_selinux_volume_conflict` until one of the pods goes.

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::CSIDriver;
use kcm::app::controllers::named;
use kcm::client::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, eventually, from};

const NAMESPACE: &str = "other";
const IQN: &str = "iqn.2026-01.example:disk";
const METRIC: &str = "selinux_warning_controller_selinux_volume_conflict";

mod conflicting_labels_and_policies_are_reported_on_both_pods {
    #[test]
    fn real_server() {
        crate::harness::run_on(
            crate::harness::Backend::Real,
            super::conflicting_labels_and_policies_are_reported_on_both_pods,
        );
    }
}

/// A pending pod mounting the shared iSCSI volume with `security_context` for the pod.
fn pod(name: &str, security_context: Value) -> Pod {
    from(json!({
        "metadata": {"name": name},
        "spec": {
            "securityContext": security_context,
            "containers": [{"name": "c", "image": "busybox", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "iscsi": {"targetPortal": "10.0.0.1:3260", "iqn": IQN, "lun": 0}}]
        }
    }))
}

fn create(cluster: &Cluster, namespace: &str, pod: &Pod) {
    Api::<Pod>::namespaced(&cluster.client, namespace).create(pod, &PostParams::default()).expect("pod created");
}

fn events(cluster: &Cluster, namespace: &str, name: &str, reason: &str) -> Vec<String> {
    cluster.event_messages(namespace, name, reason)
}

/// The metric's samples naming `pod`.
fn samples_of(pod: &str) -> Vec<String> {
    let rendered = kcm::metrics::global().render();
    let needle = format!("_name=\"{pod}\"");
    rendered.lines().filter(|l| l.starts_with(METRIC) && l.contains(&needle)).map(str::to_string).collect()
}

fn conflicting_labels_and_policies_are_reported_on_both_pods(backend: Backend) {
    let cluster = harness::with(&[named("selinux-warning-controller")])
        .on(backend)
        .without_nodes()
        .namespaces(&[NAMESPACE])
        .flags(&["--controllers=*,selinux-warning-controller"])
        .names(&["selinux-warning-controller"])
        .start();
    create(&cluster, "default", &pod("first", json!({"seLinuxOptions": {"level": "s0:c1,c2"}})));
    create(&cluster, "default", &pod("second", json!({"seLinuxOptions": {"level": "s0:c3,c4"}})));

    let on_second = eventually("the label conflict reported on the second pod", || {
        Some(events(&cluster, "default", "second", "SELinuxLabelConflict")).filter(|m| !m.is_empty())
    });
    assert_eq!(
        on_second,
        ["SELinuxLabel \":::s0:c3,c4\" conflicts with pod first that uses the same volume as this pod with \
             SELinuxLabel \":::s0:c1,c2\". If both pods land on the same node, only one of them may access the volume."]
    );
    let on_first = eventually("the label conflict reported on the first pod", || {
        Some(events(&cluster, "default", "first", "SELinuxLabelConflict")).filter(|m| !m.is_empty())
    });
    assert_eq!(
        on_first,
        ["SELinuxLabel \":::s0:c1,c2\" conflicts with pod second that uses the same volume as this pod with \
             SELinuxLabel \":::s0:c3,c4\". If both pods land on the same node, only one of them may access the volume."]
    );
    assert!(events(&cluster, "default", "first", "SELinuxChangePolicyConflict").is_empty());

    // Another namespace's pod relabelling recursively: its policy conflicts with both, and
    // the messages do not name pods of other namespaces.
    let recursive = json!({"seLinuxOptions": {"level": "s0:c1,c2"}, "seLinuxChangePolicy": "Recursive"});
    create(&cluster, NAMESPACE, &pod("third", recursive));
    let on_third = eventually("the policy conflicts reported on the third pod", || {
        Some(events(&cluster, NAMESPACE, "third", "SELinuxChangePolicyConflict")).filter(|m| !m.is_empty())
    });
    assert_eq!(
        on_third,
        ["SELinuxChangePolicy\"Recursive\" conflicts with another pod that uses the same volume as this pod with a \
          different SELinuxChangePolicy. If both pods land on the same node, only one of them may access the volume."],
        "one Event, counted twice: the same message for both other pods"
    );
    eventually("the policy conflict reported on the first pod", || {
        Some(events(&cluster, "default", "first", "SELinuxChangePolicyConflict")).filter(|m| !m.is_empty())
    });
    // A recursively relabelled volume has no mount label: "" conflicts with the others' levels.
    let label_on_third = eventually("the label conflicts reported on the third pod", || {
        Some(events(&cluster, NAMESPACE, "third", "SELinuxLabelConflict")).filter(|m| !m.is_empty())
    });
    assert!(label_on_third[0].starts_with("SELinuxLabel\"\" conflicts with another pod"), "{label_on_third:?}");

    let second_samples = samples_of("second");
    let label_conflict = |s: &String| s.contains("property=\"SELinuxLabel\"") && s.contains("pod2_name=\"first\"");
    assert!(
        second_samples.iter().any(|s| s.contains("pod1_name=\"second\"") && label_conflict(s)),
        "{second_samples:?}"
    );

    // The second pod goes: its conflicts with it go from the metric.
    Api::<Pod>::namespaced(&cluster.client, "default")
        .delete("second", &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() })
        .expect("pod deleted");
    eventually("the second pod's conflicts forgotten", || samples_of("second").is_empty().then_some(()));
    assert!(!samples_of("third").is_empty(), "the third pod still conflicts with the first");
}

mod a_csi_drivers_selinux_mount_decides_whether_claims_conflict {
    #[test]
    fn real_server() {
        crate::harness::run_on(
            crate::harness::Backend::Real,
            super::a_csi_drivers_selinux_mount_decides_whether_claims_conflict,
        );
    }
}

const DRIVER: &str = "csi.selinux.example.com";

/// A claim bound to a CSI volume of [`DRIVER`], bound as the binder would leave them.
fn create_bound_claim(cluster: &Cluster, name: &str) {
    let claim: PersistentVolumeClaim = from(json!({
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "", "volumeName": name,
                 "resources": {"requests": {"storage": "1Gi"}}}
    }));
    let claims = Api::<PersistentVolumeClaim>::namespaced(&cluster.client, "default");
    let mut claim = claims.create(&claim, &PostParams::default()).expect("claim created");
    let volume: PersistentVolume = from(json!({
        "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}, "storageClassName": "",
                 "csi": {"driver": DRIVER, "volumeHandle": format!("handle-{name}")},
                 "claimRef": {"namespace": "default", "name": name, "uid": claim.metadata.uid}}
    }));
    Api::<PersistentVolume>::cluster(&cluster.client).create(&volume, &PostParams::default()).expect("volume created");
    claim.status =
        Some(from(json!({"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}})));
    claims.replace_status(name, &claim, &PostParams::default()).expect("claim bound");
}

fn claim_pod(name: &str, claim: &str, level: &str) -> Pod {
    from(json!({
        "metadata": {"name": name},
        "spec": {
            "securityContext": {"seLinuxOptions": {"level": level}},
            "containers": [{"name": "c", "image": "busybox", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}]
        }
    }))
}

fn set_selinux_mount(cluster: &Cluster, enabled: bool) {
    let drivers = Api::<CSIDriver>::cluster(&cluster.client);
    match drivers.get_opt(DRIVER).expect("driver read") {
        None => {
            let driver: CSIDriver = from(json!({"metadata": {"name": DRIVER}, "spec": {"seLinuxMount": enabled}}));
            drivers.create(&driver, &PostParams::default()).expect("driver created");
        }
        Some(mut driver) => {
            driver.spec.se_linux_mount = Some(enabled);
            drivers.replace(DRIVER, &driver, &PostParams::default()).expect("driver updated");
        }
    }
}

fn a_csi_drivers_selinux_mount_decides_whether_claims_conflict(backend: Backend) {
    let cluster = harness::with(&[named("selinux-warning-controller")])
        .on(backend)
        .without_nodes()
        .flags(&["--controllers=*,selinux-warning-controller"])
        .start_with(|_, _| ());
    create_bound_claim(&cluster, "shared");
    create(&cluster, "default", &claim_pod("left", "shared", "s0:c1,c2"));
    create(&cluster, "default", &claim_pod("right", "shared", "s0:c3,c4"));
    // Two conflicting pods queued after them: once these are reported, the claim pods were
    // synced (one worker, in order) without a CSIDriver, i.e. relabelled recursively with no
    // mount label: no conflict.
    create(&cluster, "default", &pod("probe-a", json!({"seLinuxOptions": {"level": "s0:c1"}})));
    create(&cluster, "default", &pod("probe-b", json!({"seLinuxOptions": {"level": "s0:c2"}})));
    eventually("the probes' conflict reported", || {
        Some(()).filter(|_| !events(&cluster, "default", "probe-b", "SELinuxLabelConflict").is_empty())
    });
    assert!(events(&cluster, "default", "left", "SELinuxLabelConflict").is_empty());
    assert!(samples_of("left").is_empty());

    // The driver mounts with a context: the pods using its volumes are looked at again.
    set_selinux_mount(&cluster, true);
    // The left pod may first be compared with the right one as still relabelled recursively:
    // what counts is the conflict of both mounting with their labels.
    let expected = "SELinuxLabel \":::s0:c1,c2\" conflicts with pod right that uses the same volume as this pod with \
                    SELinuxLabel \":::s0:c3,c4\". If both pods land on the same node, only one of them may access the \
                    volume.";
    eventually("the label conflict reported on the left pod", || {
        events(&cluster, "default", "left", "SELinuxLabelConflict").iter().any(|m| m == expected).then_some(())
    });
    eventually("the conflict exported", || {
        samples_of("left").iter().any(|s| s.contains("pod2_name=\"right\"")).then_some(())
    });

    // Not any more: both relabel recursively again and the conflict is gone.
    set_selinux_mount(&cluster, false);
    eventually("the conflict resolved", || samples_of("left").is_empty().then_some(()));
}
