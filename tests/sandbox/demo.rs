//! The README's run command: `kcm-sandbox demo` with the real controller manager binary
//! converges (steps whose controllers are not built yet are skipped, saying so), on the sandbox
//! and with `--real-server` on etcd + kube-apiserver v1.36.2.

use std::process::Command;

use kcm_envtest::envtest::Backend;

#[test]
fn the_demo_converges_on_the_sandbox() {
    the_demo_converges(&[]);
}

#[test]
fn the_demo_converges_on_the_real_server() {
    if Backend::Real.selected() && Backend::Real.available() {
        the_demo_converges(&["--real-server"]);
    }
}

fn the_demo_converges(extra: &[&str]) {
    let sandbox = kcm_envtest::envtest::built_beside(env!("CARGO_BIN_EXE_kube-controller-manager"), "kcm-sandbox")
        .unwrap_or_else(|e| panic!("{e}"));
    let controller_manager = env!("CARGO_BIN_EXE_kube-controller-manager");
    let output = Command::new(sandbox)
        .args(["demo", "--controller-manager", controller_manager])
        .args(extra)
        .output()
        .expect("run kcm-sandbox demo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "demo failed:\n{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    assert!(stdout.contains("demo converged"), "{stdout}");
    assert!(stdout.contains("pod hello is Running"), "{stdout}");
    assert!(stdout.contains("is no longer renewed"), "{stdout}");
    assert!(stdout.contains("replicaset-controller replaced them on healthy nodes"), "{stdout}");
    assert!(stdout.contains("unable to create new content in namespace demo"), "{stdout}");
    // Steps whose controllers this build has.
    let built = |names: &[&str]| names.iter().all(|n| kcm::app::controllers::is_implemented(n));
    if built(&["garbage-collector-controller", "deployment-controller", "replicaset-controller"]) {
        assert!(stdout.contains("garbage-collector-controller deleted the ReplicaSet, then its pods"), "{stdout}");
        assert!(stdout.contains("keep running with no owner"), "{stdout}");
    }
    if built(&["endpoints-controller", "endpointslice-controller", "deployment-controller", "replicaset-controller"]) {
        assert!(stdout.contains("now list 4 addresses"), "{stdout}");
    }
    if built(&["namespace-controller", "deployment-controller", "replicaset-controller"]) {
        assert!(stdout.contains("namespace shop is Terminating"), "{stdout}");
        assert!(stdout.contains("removed through /finalize and the namespace is gone"), "{stdout}");
    }
    if built(&["daemonset-controller", "pod-garbage-collector-controller"]) {
        assert!(stdout.contains("daemonset-controller placed"), "{stdout}");
        assert!(stdout.contains("pod-garbage-collector deleted its pod"), "{stdout}");
    }
    if built(&["statefulset-controller"]) {
        assert!(stdout.contains("db-0 → db-1 → db-2: each created once the one before was Ready"), "{stdout}");
        assert!(stdout.contains("the claims are kept: data-db-0, data-db-1, data-db-2"), "{stdout}");
    }
    if built(&[
        "statefulset-controller",
        "persistentvolume-binder-controller",
        "persistentvolume-attach-detach-controller",
    ]) {
        assert!(stdout.contains("attached to its pod's node: db-0: pvc-"), "{stdout}");
    }
    if built(&[
        "bootstrap-signer-controller",
        "certificatesigningrequest-approving-controller",
        "certificatesigningrequest-signing-controller",
    ]) {
        assert!(stdout.contains("signed kube-public/cluster-info for the token"), "{stdout}");
        assert!(stdout.contains("the kubelet reads its own Node as system:node:node-9"), "{stdout}");
    }
    if built(&["disruption-controller", "deployment-controller", "replicaset-controller"]) {
        assert!(stdout.contains("would violate the pod's disruption budget"), "{stdout}");
        assert!(stdout.contains("the drain went on, one eviction at a time"), "{stdout}");
    }
    if built(&["horizontal-pod-autoscaler-controller", "deployment-controller", "replicaset-controller"]) {
        assert!(stdout.contains("scaled up to 5"), "{stdout}");
        assert!(stdout.contains("scaled back down to 2"), "{stdout}");
    }
}
