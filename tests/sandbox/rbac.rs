//! The sandbox with `--authorization-mode=RBAC`: requests are authorized with upstream's
//! bootstrap policy, denials read as kube-apiserver's, and the real `kube-controller-manager`,
//! run as kubeadm runs it (controller-manager.conf, `--use-service-account-credentials=true`),
//! does its work without a single 403.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{
    ConfigMap, Endpoints, Namespace, Node, Pod, ReplicationController, ResourceQuota, Secret, Service, ServiceAccount,
};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
use kcm::client::{Api, Client, ClientOptions, DeleteParams, Error, ListParams, Patch, PostParams};
use kcm_sandbox::sandbox::nodes::SimulatedNodes;
use kcm_sandbox::sandbox::server::{AuthorizationMode, Sandbox, SandboxOptions};
use serde_json::json;

use crate::harness;

use harness::{fast_nodes, from};

const BINARY: &str = env!("CARGO_BIN_EXE_kube-controller-manager");
/// Generous: the controller manager is a separate process on a loaded 2-core machine.
const DEADLINE: Duration = Duration::from_secs(120);

fn rbac_sandbox() -> Sandbox {
    Sandbox::start(SandboxOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        authorization_mode: AuthorizationMode::Rbac,
        ..SandboxOptions::default()
    })
    .expect("the sandbox starts")
}

fn client_for(sandbox: &Sandbox, user: &str, groups: &[&str]) -> Client {
    Client::new(sandbox.user_config(user, groups).unwrap(), ClientOptions::default()).unwrap()
}

fn admin(sandbox: &Sandbox) -> Client {
    Client::new(sandbox.admin_config(), ClientOptions::default()).unwrap()
}

/// The error `Status` of a refused call.
fn refusal<T: std::fmt::Debug>(result: Result<T, Error>) -> kcm::client::ApiError {
    match result {
        Err(Error::Api(e)) => *e,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn create_namespace(client: &Client, name: &str) {
    let ns: Namespace = from(json!({"metadata": {"name": name}}));
    Api::<Namespace>::cluster(client).create(&ns, &PostParams::default()).unwrap();
}

#[test]
fn roles_grant_in_their_namespace_and_denials_read_as_upstreams() {
    let sandbox = rbac_sandbox();
    let admin = admin(&sandbox);
    for ns in ["team-a", "team-b"] {
        create_namespace(&admin, ns);
    }
    let role: Role = from(json!({"metadata": {"name": "pod-reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}]}));
    Api::<Role>::namespaced(&admin, "team-a").create(&role, &PostParams::default()).unwrap();
    let binding: RoleBinding = from(json!({"metadata": {"name": "alice-reads-pods"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}));
    Api::<RoleBinding>::namespaced(&admin, "team-a").create(&binding, &PostParams::default()).unwrap();

    let alice = client_for(&sandbox, "alice", &[]);
    Api::<Pod>::namespaced(&alice, "team-a").list(&ListParams::default()).expect("alice lists pods in team-a");
    let denied = refusal(Api::<Pod>::namespaced(&alice, "team-b").list(&ListParams::default()));
    assert_eq!(denied.code, 403);
    assert_eq!(denied.reason, "Forbidden");
    assert_eq!(
        denied.message,
        "pods is forbidden: User \"alice\" cannot list resource \"pods\" in API group \"\" in the namespace \"team-b\""
    );
    let denied = refusal(Api::<Pod>::namespaced(&alice, "team-a").delete("web", &DeleteParams::default()));
    assert_eq!(
        denied.message,
        "pods \"web\" is forbidden: User \"alice\" cannot delete resource \"pods\" in API group \"\" in the namespace \"team-a\""
    );
    let details = denied.status.details.expect("details");
    assert_eq!(
        (details.name.as_deref(), details.group.as_deref(), details.kind.as_deref()),
        (Some("web"), None, Some("pods"))
    );
    let denied = refusal(Api::<Namespace>::cluster(&alice).list(&ListParams::default()));
    assert_eq!(
        denied.message,
        "namespaces is forbidden: User \"alice\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
    );

    // A ClusterRole through a RoleBinding, for a ServiceAccount subject.
    let view: RoleBinding = from(json!({"metadata": {"name": "reader-views"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:aggregate-to-view"},
        "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": "team-a"}]}));
    Api::<RoleBinding>::namespaced(&admin, "team-a").create(&view, &PostParams::default()).unwrap();
    let reader = client_for(&sandbox, "system:serviceaccount:team-a:reader", &["system:serviceaccounts"]);
    Api::<Deployment>::namespaced(&reader, "team-a").list(&ListParams::default()).expect("view covers deployments");
    let denied = refusal(Api::<Deployment>::namespaced(&reader, "team-b").list(&ListParams::default()));
    assert_eq!(
        denied.message,
        "deployments.apps is forbidden: User \"system:serviceaccount:team-a:reader\" cannot list resource \"deployments\" in API group \"apps\" in the namespace \"team-b\""
    );
    let patch = Patch::Merge(json!({"spec": {"replicas": 2}}));
    let denied = refusal(Api::<Deployment>::namespaced(&reader, "team-a").patch_subresource::<serde_json::Value>(
        "scale",
        "web",
        &patch,
        &PostParams::default(),
    ));
    assert_eq!(
        denied.message,
        "deployments.apps \"web\" is forbidden: User \"system:serviceaccount:team-a:reader\" cannot patch resource \"deployments/scale\" in API group \"apps\" in the namespace \"team-a\""
    );

    // Non-resource URLs: discovery for every authenticated user, /metrics only with a grant.
    alice.get_text("/apis").expect("system:discovery");
    alice.get_text("/healthz").expect("system:public-info-viewer");
    let denied = refusal(alice.get_text("/metrics"));
    assert_eq!((denied.code, denied.message.as_str()), (403, "forbidden: User \"alice\" cannot get path \"/metrics\""));
    let monitoring: ClusterRoleBinding = from(json!({"metadata": {"name": "alice-monitors"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:monitoring"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}));
    Api::<ClusterRoleBinding>::cluster(&admin).create(&monitoring, &PostParams::default()).unwrap();
    let after = alice.get_text("/metrics").map(|_| 200).unwrap_or_else(|e| match e {
        Error::Api(e) => e.code,
        other => panic!("{other:?}"),
    });
    assert_ne!(after, 403, "system:monitoring grants /metrics");

    // The superuser shortcut: system:masters needs no binding.
    let root = client_for(&sandbox, "root", &["system:masters"]);
    Api::<Pod>::namespaced(&root, "team-b").list(&ListParams::default()).expect("system:masters may do anything");

    let refused: Vec<_> = sandbox.audit().entries().into_iter().filter(|e| e.forbidden).collect();
    assert!(refused.iter().any(|e| e.user == "alice" && e.verb == "list" && e.namespace == "team-b"));
}

#[test]
fn the_bootstrap_policy_is_upstreams() {
    let sandbox = rbac_sandbox();
    let store = sandbox.store();
    let role = store.get("clusterroles", "", "system:controller:deployment-controller").expect("controller role");
    assert_eq!(role["metadata"]["labels"]["kubernetes.io/bootstrapping"], "rbac-defaults");
    assert_eq!(role["metadata"]["annotations"]["rbac.authorization.kubernetes.io/autoupdate"], "true");
    assert!(role["metadata"]["uid"].is_string() && role["metadata"]["creationTimestamp"].is_string());
    let binding = store.get("clusterrolebindings", "", "system:controller:deployment-controller").unwrap();
    assert_eq!(
        binding["subjects"][0],
        json!({"kind": "ServiceAccount", "name": "deployment-controller", "namespace": "kube-system"})
    );
    for (ns, name) in [
        ("kube-system", "system::leader-locking-kube-controller-manager"),
        ("kube-system", "extension-apiserver-authentication-reader"),
        ("kube-system", "system:controller:bootstrap-signer"),
        ("kube-system", "system:controller:token-cleaner"),
        ("kube-system", "system:controller:cloud-provider"),
        ("kube-public", "system:controller:bootstrap-signer"),
    ] {
        assert!(store.get("roles", ns, name).is_some(), "Role {ns}/{name}");
    }
    for name in ["cluster-admin", "system:discovery", "system:basic-user", "system:public-info-viewer", "system:node"] {
        assert!(store.get("clusterrolebindings", "", name).is_some(), "ClusterRoleBinding {name}");
    }
    // As kube-apiserver: the aggregated roles wait for the clusterrole-aggregation-controller.
    let admin = store.get("clusterroles", "", "admin").unwrap();
    assert!(admin["rules"].as_array().is_none_or(Vec::is_empty), "admin is not pre-aggregated");
    // As kube-apiserver, whose rbac/bootstrap-roles hook runs whatever the authorization mode:
    // the default mode (AlwaysAllow) has the same policy.
    let plain =
        Sandbox::start(SandboxOptions { listen: "127.0.0.1:0".parse().unwrap(), ..SandboxOptions::default() }).unwrap();
    assert_eq!(plain.store().list("clusterroles", None).0.len(), store.list("clusterroles", None).0.len());
    assert!(plain.store().get("clusterrolebindings", "", "system:controller:deployment-controller").is_some());
}

/// The real kube-controller-manager process.
struct ControllerManager {
    child: Child,
    log: PathBuf,
    dir: PathBuf,
}

impl ControllerManager {
    /// Started as kubeadm starts it: controller-manager.conf (user
    /// system:kube-controller-manager), service-account credentials, every controller.
    fn start(sandbox: &Sandbox) -> ControllerManager {
        let dir = std::env::temp_dir().join(format!("kcm-rbac-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (_, kubeconfig) = sandbox.write_kubeconfigs(&dir.join("admin.conf")).unwrap();
        let ca = dir.join("ca.crt");
        std::fs::write(&ca, sandbox.ca_pem()).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let log = dir.join("kcm.log");
        let child = Command::new(BINARY)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--authentication-kubeconfig={}", kubeconfig.display()))
            .arg(format!("--authorization-kubeconfig={}", kubeconfig.display()))
            .arg(format!("--service-account-private-key-file={}", dir.join("sa.key").display()))
            .arg(format!("--root-ca-file={}", ca.display()))
            .arg(format!("--client-ca-file={}", ca.display()))
            .args(["--use-service-account-credentials=true", "--controllers=*", "--leader-elect=true"])
            // kubeadm with a pod subnet: the node IPAM controller runs.
            .args(["--allocate-node-cidrs=true", "--cluster-cidr=10.244.0.0/16"])
            .args(["--bind-address=127.0.0.1", "-v=2"])
            .arg(format!("--secure-port={port}"))
            .stderr(std::fs::File::create(&log).unwrap())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        ControllerManager { child, log, dir }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ControllerManager {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("the controller manager's log is kept in {}", self.log.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The requests the sandbox refused with 403, one line each.
fn refused(sandbox: &Sandbox) -> Vec<String> {
    sandbox
        .audit()
        .entries()
        .iter()
        .filter(|e| e.forbidden)
        .map(|e| format!("{} {} {}/{} {}/{}", e.user, e.verb, e.resource, e.subresource, e.namespace, e.name))
        .collect()
}

/// Polls `check` until [`DEADLINE`]; a timeout names the requests refused so far, the usual cause.
fn eventually<T>(sandbox: &Sandbox, what: &str, check: impl FnMut() -> Option<T>) -> T {
    let refused = || format!("; requests refused with 403:\n{}", refused(sandbox).join("\n"));
    harness::poll_until_explained(DEADLINE, Duration::from_millis(100), what, refused, check)
}

#[test]
fn kubeadms_controller_manager_needs_nothing_upstreams_roles_do_not_grant() {
    let sandbox = rbac_sandbox();
    let admin = admin(&sandbox);
    // The simulated kubelets and scheduler act as the admin (they also schedule pods).
    let names = (1..=3).map(|i| format!("node-{i}")).collect();
    let nodes = SimulatedNodes::start(sandbox.admin_config(), names, fast_nodes()).expect("the nodes start");
    let kcm = ControllerManager::start(&sandbox);

    // A new namespace gets its ServiceAccount and the root CA ConfigMap.
    create_namespace(&admin, "shop");
    eventually(&sandbox, "the default ServiceAccount in shop", || {
        Api::<ServiceAccount>::namespaced(&admin, "shop").get_opt("default").unwrap()
    });
    eventually(&sandbox, "kube-root-ca.crt in shop", || {
        Api::<ConfigMap>::namespaced(&admin, "shop").get_opt("kube-root-ca.crt").unwrap()
    });

    // A Deployment reaches its replicas, then scales.
    let deployments = Api::<Deployment>::namespaced(&admin, "shop");
    let deployment: Deployment = from(json!({"metadata": {"name": "web"}, "spec": {"replicas": 2,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]}}}}));
    deployments.create(&deployment, &PostParams::default()).unwrap();
    let available = |n: i32| {
        let d = deployments.get("web").unwrap();
        (d.status.and_then(|s| s.available_replicas) == Some(n)).then_some(())
    };
    eventually(&sandbox, "2 available replicas", || available(2));
    deployments.patch("web", &Patch::Merge(json!({"spec": {"replicas": 3}})), &PostParams::default()).unwrap();
    eventually(&sandbox, "3 available replicas", || available(3));

    // A Service gets its Endpoints and EndpointSlice.
    let service: Service = from(json!({"metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 80}]}}));
    Api::<Service>::namespaced(&admin, "shop").create(&service, &PostParams::default()).unwrap();
    eventually(&sandbox, "3 endpoint addresses", || {
        let endpoints = Api::<Endpoints>::namespaced(&admin, "shop").get_opt("web").unwrap()?;
        let count: usize = endpoints.subsets?.iter().map(|s| s.addresses.as_ref().map_or(0, Vec::len)).sum();
        (count == 3).then_some(())
    });
    eventually(&sandbox, "an EndpointSlice with 3 endpoints", || {
        let params =
            ListParams { label_selector: Some("kubernetes.io/service-name=web".into()), ..ListParams::default() };
        let slices = Api::<EndpointSlice>::namespaced(&admin, "shop").list(&params).unwrap().items;
        (slices.iter().map(|s| s.endpoints.as_ref().map_or(0, Vec::len)).sum::<usize>() == 3).then_some(())
    });

    // A ReplicationController, a quota's usage, a selector-less Service's mirrored slice, a
    // legacy token Secret filled in.
    let controller: ReplicationController = from(json!({"metadata": {"name": "legacy"}, "spec": {"replicas": 1,
        "selector": {"app": "legacy"},
        "template": {"metadata": {"labels": {"app": "legacy"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}}));
    let controllers = Api::<ReplicationController>::namespaced(&admin, "shop");
    controllers.create(&controller, &PostParams::default()).unwrap();
    eventually(&sandbox, "the ReplicationController ready", || {
        (controllers.get("legacy").unwrap().status?.ready_replicas == Some(1)).then_some(())
    });
    let quota: ResourceQuota = from(json!({"metadata": {"name": "pods"}, "spec": {"hard": {"pods": "20"}}}));
    let quotas = Api::<ResourceQuota>::namespaced(&admin, "shop");
    quotas.create(&quota, &PostParams::default()).unwrap();
    eventually(&sandbox, "the quota's usage", || {
        let used = quotas.get("pods").unwrap().status?.used?;
        (used.get("pods")?.0 == "4").then_some(())
    });
    let external: Service = from(json!({"metadata": {"name": "external"}, "spec": {"ports": [{"port": 443}]}}));
    Api::<Service>::namespaced(&admin, "shop").create(&external, &PostParams::default()).unwrap();
    let endpoints: Endpoints = from(json!({"metadata": {"name": "external"},
        "subsets": [{"addresses": [{"ip": "192.0.2.10"}], "ports": [{"port": 443}]}]}));
    Api::<Endpoints>::namespaced(&admin, "shop").create(&endpoints, &PostParams::default()).unwrap();
    eventually(&sandbox, "the mirrored EndpointSlice", || {
        let params =
            ListParams { label_selector: Some("kubernetes.io/service-name=external".into()), ..ListParams::default() };
        let slices = Api::<EndpointSlice>::namespaced(&admin, "shop").list(&params).unwrap().items;
        (!slices.is_empty()).then_some(())
    });
    let token: Secret = from(json!({"metadata": {"name": "default-token",
        "annotations": {"kubernetes.io/service-account.name": "default"}}, "type": "kubernetes.io/service-account-token"}));
    let secrets = Api::<Secret>::namespaced(&admin, "shop");
    secrets.create(&token, &PostParams::default()).unwrap();
    eventually(&sandbox, "the token Secret filled", || {
        secrets.get("default-token").unwrap().data?.contains_key("token").then_some(())
    });
    // Node IPAM gave the nodes their pod CIDRs; the TTL controller annotated them.
    eventually(&sandbox, "pod CIDRs and TTL annotations on the nodes", || {
        let nodes = Api::<Node>::cluster(&admin).list(&ListParams::default()).unwrap().items;
        let done = |n: &Node| {
            let annotated =
                n.metadata.annotations.as_ref().is_some_and(|a| a.contains_key("node.alpha.kubernetes.io/ttl"));
            annotated && n.spec.as_ref().and_then(|s| s.pod_cidr.as_ref()).is_some()
        };
        (nodes.len() == 3 && nodes.iter().all(done)).then_some(())
    });

    // Deleting the Deployment cascades to its ReplicaSets and Pods (garbage collector).
    deployments.delete("web", &DeleteParams::default()).unwrap();
    eventually(&sandbox, "the ReplicaSets and Pods collected", || {
        let sets = Api::<ReplicaSet>::namespaced(&admin, "shop").list(&ListParams::default()).unwrap().items;
        let web = ListParams { label_selector: Some("app=web".into()), ..ListParams::default() };
        let pods = Api::<Pod>::namespaced(&admin, "shop").list(&web).unwrap().items;
        (sets.is_empty() && pods.is_empty()).then_some(())
    });

    // A namespace deletion completes (namespace controller).
    Api::<Namespace>::cluster(&admin).delete("shop", &DeleteParams::default()).unwrap();
    eventually(&sandbox, "the namespace gone", || {
        Api::<Namespace>::cluster(&admin).get_opt("shop").unwrap().is_none().then_some(())
    });

    let entries = sandbox.audit().entries();
    assert!(
        entries.iter().any(|e| e.user == "system:serviceaccount:kube-system:deployment-controller"),
        "the controllers act as their own service accounts"
    );
    let refused = refused(&sandbox);
    assert!(refused.is_empty(), "requests refused with 403:\n{}", refused.join("\n"));
    let log = kcm.log_text();
    let forbidden: Vec<&str> = log.lines().filter(|l| l.to_lowercase().contains("forbidden")).collect();
    assert!(forbidden.is_empty(), "the controller manager logged:\n{}", forbidden.join("\n"));
    nodes.stop();
}
