//! The client name each controller asks upstream's client builder for
//! (`controllerContext.ClientBuilder.ClientOrDie("<name>")` in
//! `cmd/kube-controller-manager/app/*.go`). With `--use-service-account-credentials` it is the
//! name of the controller's ServiceAccount in kube-system, which RBAC's `system:controller:*`
//! bindings name; several controllers share one (the node controllers, the CSR controllers).

/// The namespace of the controllers' service accounts (`metav1.NamespaceSystem`).
pub const SERVICE_ACCOUNT_NAMESPACE: &str = "kube-system";

/// The ServiceAccount a controller runs as, by canonical controller name. `None` for the
/// token controller, which always uses the root credentials (it must run before the others can
/// get tokens), and for names upstream does not know.
pub fn service_account_for(controller: &str) -> Option<&'static str> {
    let name = match controller {
        "bootstrap-signer-controller" => "bootstrap-signer",
        "certificatesigningrequest-approving-controller"
        | "certificatesigningrequest-cleaner-controller"
        | "certificatesigningrequest-signing-controller" => "certificate-controller",
        "clusterrole-aggregation-controller" => "clusterrole-aggregation-controller",
        "cronjob-controller" => "cronjob-controller",
        "daemonset-controller" => "daemon-set-controller",
        "deployment-controller" => "deployment-controller",
        "device-taint-eviction-controller" => "device-taint-eviction-controller",
        "disruption-controller" => "disruption-controller",
        "endpoints-controller" => "endpoint-controller",
        "endpointslice-controller" => "endpointslice-controller",
        "endpointslice-mirroring-controller" => "endpointslicemirroring-controller",
        "ephemeral-volume-controller" => "ephemeral-volume-controller",
        "garbage-collector-controller" => "generic-garbage-collector",
        "horizontal-pod-autoscaler-controller" => "horizontal-pod-autoscaler",
        "job-controller" => "job-controller",
        "kube-apiserver-serving-clustertrustbundle-publisher-controller" => {
            "kube-apiserver-serving-clustertrustbundle-publisher"
        }
        "legacy-serviceaccount-token-cleaner-controller" => "legacy-service-account-token-cleaner",
        "namespace-controller" => "namespace-controller",
        "node-ipam-controller" | "node-lifecycle-controller" | "taint-eviction-controller" => "node-controller",
        "persistentvolume-attach-detach-controller" => "attachdetach-controller",
        "persistentvolume-binder-controller" => "persistent-volume-binder",
        "persistentvolume-expander-controller" => "expand-controller",
        "persistentvolume-protection-controller" => "pv-protection-controller",
        "persistentvolumeclaim-protection-controller" => "pvc-protection-controller",
        "pod-garbage-collector-controller" => "pod-garbage-collector",
        "replicaset-controller" => "replicaset-controller",
        "replicationcontroller-controller" => "replication-controller",
        "resourceclaim-controller" => "resource-claim-controller",
        "resourcequota-controller" => "resourcequota-controller",
        "root-ca-certificate-publisher-controller" => "root-ca-cert-publisher",
        "selinux-warning-controller" => "selinux-warning-controller",
        "service-cidr-controller" => "service-cidrs-controller",
        "serviceaccount-controller" => "service-account-controller",
        "statefulset-controller" => "statefulset-controller",
        "storage-version-migrator-controller" => "storage-version-migrator-controller",
        "storageversion-garbage-collector-controller" => "storage-version-garbage-collector",
        "token-cleaner-controller" => "token-cleaner",
        "ttl-after-finished-controller" => "ttl-after-finished-controller",
        "ttl-controller" => "ttl-controller",
        "validatingadmissionpolicy-status-controller" => "validatingadmissionpolicy-status-controller",
        "volumeattributesclass-protection-controller" => "volumeattributesclass-protection-controller",
        _ => return None,
    };
    Some(name)
}

/// The name a controller's client is built under (`ClientOrDie("<name>")`), which its
/// User-Agent ends with: the service-account name, else the controller's own name.
pub fn client_name_for(controller: &'static str) -> &'static str {
    service_account_for(controller).unwrap_or(controller)
}

/// The `source.component` of a controller's Events, as its upstream constructor names its
/// recorder (`EventSource{Component: ...}`); most use the controller's canonical name.
pub fn event_component_for(controller: &'static str) -> &'static str {
    match controller {
        "replicationcontroller-controller" => "replication-controller",
        "endpoints-controller" => "endpoint-controller",
        "endpointslice-controller" => "endpoint-slice-controller",
        "endpointslice-mirroring-controller" => "endpoint-slice-mirroring-controller",
        "node-lifecycle-controller" => "node-controller",
        "node-ipam-controller" => "cidrAllocator",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::KNOWN_CONTROLLERS;

    #[test]
    fn every_runnable_controller_but_the_token_controller_has_an_account() {
        for controller in KNOWN_CONTROLLERS.iter().filter(|c| !c.cloud_provider) {
            let account = service_account_for(controller.name);
            if controller.name == "serviceaccount-token-controller" {
                assert_eq!(account, None);
            } else {
                assert!(account.is_some(), "{} has no service account", controller.name);
            }
        }
        assert_eq!(service_account_for("node-lifecycle-controller"), Some("node-controller"));
        assert_eq!(service_account_for("garbage-collector-controller"), Some("generic-garbage-collector"));
        assert_eq!(service_account_for("nope"), None);
    }

    #[test]
    fn client_names_and_event_components_follow_upstream() {
        assert_eq!(client_name_for("node-lifecycle-controller"), "node-controller");
        assert_eq!(client_name_for("serviceaccount-token-controller"), "serviceaccount-token-controller");
        assert_eq!(event_component_for("endpointslice-controller"), "endpoint-slice-controller");
        assert_eq!(event_component_for("deployment-controller"), "deployment-controller");
    }
}
