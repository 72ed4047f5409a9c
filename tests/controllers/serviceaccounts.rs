//! The service-account controllers and the root CA publisher on both backends: the `default`
//! ServiceAccount and `kube-root-ca.crt` in every active namespace, legacy token Secrets filled
//! with a JWT the API server accepts and deleted with their account, unused legacy tokens
//! invalidated, and controllers acting as their own service accounts with
//! `--use-service-account-credentials`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::authorization::v1::SubjectAccessReview;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, ServiceAccount};
use kcm::app::controllers::ControllerDescriptor;
use kcm::app::controllers::named;
use kcm::client::config::{Auth, RestConfig, TlsSettings};
use kcm::client::{Api, Client, ClientOptions, DeleteParams, Deleted, ListParams, Patch, PostParams};
use kcm::controllers::root_ca_publisher::{self};
use kcm::jwt;
use kcm_sandbox::sandbox::server::CONTROLLER_MANAGER_USER;
use serde_json::{Value, json};

use crate::harness;

use harness::{Backend, Cluster, TestServer, eventually, from};

/// An API server with `descriptors` running under `flags`; the server's service-account key is
/// passed as `--service-account-private-key-file`.
fn start(
    backend: Backend,
    test: &str,
    descriptors: &[ControllerDescriptor],
    flags: &[&str],
    prepare: impl FnOnce(&Client, &TestServer),
) -> Cluster {
    let key_file = std::env::temp_dir().join(format!("kcm-sa-{}-{test}-{backend:?}.key", std::process::id()));
    let key_flag = format!("--service-account-private-key-file={}", key_file.display());
    // The server's CA signs CSRs (kubeadm's ca.crt/ca.key), so the signing controller starts.
    let (ca_cert, ca_key) = (key_file.with_extension("ca.crt"), key_file.with_extension("ca.key"));
    let ca_cert_flag = format!("--cluster-signing-cert-file={}", ca_cert.display());
    let ca_key_flag = format!("--cluster-signing-key-file={}", ca_key.display());
    harness::with(descriptors)
        .on(backend)
        .without_default_account()
        .without_nodes()
        .flags(&[key_flag.as_str(), ca_cert_flag.as_str(), ca_key_flag.as_str()])
        .flags(flags)
        .remove_on_drop(key_file.clone())
        .remove_on_drop(ca_cert.clone())
        .remove_on_drop(ca_key.clone())
        .start_with(|client, server| {
            std::fs::write(&key_file, server.service_account_key_pem()).expect("key written");
            std::fs::write(&ca_cert, server.ca_pem()).expect("ca.crt written");
            std::fs::write(&ca_key, server.ca_key_pem()).expect("ca.key written");
            prepare(client, server);
        })
}

/// This module's helpers on the harness's `Cluster`. A trait rather than an inherent `impl`: the
/// controller modules share one test binary, where two modules' inherent methods of one name
/// would collide.
trait ClusterExt {
    fn accounts(&self, ns: &str) -> Api<ServiceAccount>;
    fn config_maps(&self, ns: &str) -> Api<ConfigMap>;
    fn create_namespace(&self, name: &str);
    fn wait_account(&self, ns: &str, name: &str, not_uid: Option<&str>) -> String;
    fn wait_root_ca(&self, ns: &str, not_version: Option<&str>) -> ConfigMap;
}

impl ClusterExt for Cluster {
    fn accounts(&self, ns: &str) -> Api<ServiceAccount> {
        Api::namespaced(&self.client, ns)
    }

    fn config_maps(&self, ns: &str) -> Api<ConfigMap> {
        Api::namespaced(&self.client, ns)
    }

    fn create_namespace(&self, name: &str) {
        let ns: Namespace = from(json!({"metadata": {"name": name}}));
        Api::<Namespace>::cluster(&self.client).create(&ns, &PostParams::default()).expect("namespace created");
    }

    /// Waits for `ns/name` to exist with a uid other than `not_uid`; returns its uid.
    fn wait_account(&self, ns: &str, name: &str, not_uid: Option<&str>) -> String {
        eventually(&format!("service account {ns}/{name}"), || {
            let account = self.accounts(ns).get_opt(name).expect("get")?;
            let uid = account.metadata.uid.unwrap_or_default();
            (Some(uid.as_str()) != not_uid).then_some(uid)
        })
    }

    fn wait_root_ca(&self, ns: &str, not_version: Option<&str>) -> ConfigMap {
        eventually(&format!("kube-root-ca.crt in {ns}"), || {
            let cm = self.config_maps(ns).get_opt(root_ca_publisher::CONFIG_MAP_NAME).expect("get")?;
            let current = cm.data.as_ref().and_then(|d| d.get("ca.crt")) == Some(&self.server.ca_pem().to_string());
            (current && cm.metadata.resource_version.as_deref() != not_version).then_some(cm)
        })
    }
}

fn data(secret: &Secret, key: &str) -> Option<String> {
    secret.data.as_ref()?.get(key).map(|b| String::from_utf8_lossy(&b.0).into_owned())
}

on_both_backends!(default_service_account_and_root_ca_follow_namespaces);
fn default_service_account_and_root_ca_follow_namespaces(backend: Backend) {
    // Without a private key the token controller is skipped, as upstream.
    let descriptors = [
        named("serviceaccount-token-controller"),
        named("serviceaccount-controller"),
        named("root-ca-certificate-publisher-controller"),
    ];
    let cluster = start(backend, "defaults", &descriptors, &["--service-account-private-key-file="], |_, _| ());
    let names = cluster.controller_names();
    assert_eq!(names, ["serviceaccount-controller", "root-ca-certificate-publisher-controller"]);
    cluster.create_namespace("team");
    let first = cluster.wait_account("team", "default", None);
    cluster.accounts("team").delete("default", &DeleteParams::default()).expect("deleted");
    cluster.wait_account("team", "default", Some(&first));
    // The system namespaces that existed before the controllers started have theirs too.
    cluster.wait_account("kube-system", "default", None);

    let cm = cluster.wait_root_ca("team", None);
    let annotations = cm.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get("kubernetes.io/description").map(String::as_str), Some(root_ca_publisher::DESCRIPTION));
    let edit = Patch::Merge(json!({"data": {"ca.crt": "tampered", "extra": "x"}}));
    let edited = cluster.config_maps("team").patch("kube-root-ca.crt", &edit, &PostParams::default()).expect("edited");
    let restored = cluster.wait_root_ca("team", edited.metadata.resource_version.as_deref());
    assert_eq!(restored.data.unwrap().len(), 1, "only ca.crt");
    cluster.config_maps("team").delete("kube-root-ca.crt", &DeleteParams::default()).expect("deleted");
    cluster.wait_root_ca("team", None);

    // A terminating namespace gets nothing back. Deletions are queued in order on one worker,
    // so once "team" has its account again, "doomed" has been handled.
    cluster.create_namespace("doomed");
    cluster.wait_account("doomed", "default", None);
    let Deleted::Object(_) =
        Api::<Namespace>::cluster(&cluster.client).delete("doomed", &DeleteParams::default()).unwrap()
    else {
        panic!("the namespace is kept while it terminates");
    };
    cluster.accounts("doomed").delete("default", &DeleteParams::default()).expect("deleted");
    let uid = cluster.wait_account("team", "default", None);
    cluster.accounts("team").delete("default", &DeleteParams::default()).expect("deleted");
    cluster.wait_account("team", "default", Some(&uid));
    assert!(cluster.accounts("doomed").get_opt("default").unwrap().is_none(), "not recreated while terminating");
}

on_both_backends!(token_secrets_get_a_verifiable_jwt_and_go_with_their_account);
fn token_secrets_get_a_verifiable_jwt_and_go_with_their_account(backend: Backend) {
    let cluster = start(
        backend,
        "tokens",
        &[
            named("serviceaccount-token-controller"),
            named("serviceaccount-controller"),
            named("legacy-serviceaccount-token-cleaner-controller"),
        ],
        &[],
        |_, _| (),
    );
    cluster.create_namespace("builds");
    let account: ServiceAccount = from(json!({"metadata": {"name": "builder"}}));
    let account = cluster.accounts("builds").create(&account, &PostParams::default()).expect("account");
    let account_uid = account.metadata.uid.clone().unwrap();
    let secrets = Api::<Secret>::namespaced(&cluster.client, "builds");
    let secret: Secret = from(json!({"metadata": {"name": "builder-token",
        "annotations": {"kubernetes.io/service-account.name": "builder"}},
        "type": "kubernetes.io/service-account-token"}));
    secrets.create(&secret, &PostParams::default()).expect("secret");

    let filled = eventually("the token Secret filled", || {
        let secret = secrets.get("builder-token").expect("get");
        data(&secret, "token").is_some().then_some(secret)
    });
    assert_eq!(data(&filled, "namespace").as_deref(), Some("builds"));
    assert_eq!(data(&filled, "ca.crt").as_deref(), Some(cluster.server.ca_pem()), "the kubeconfig's CA");
    let annotations = filled.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(annotations.get("kubernetes.io/service-account.uid"), Some(&account_uid));

    let token = data(&filled, "token").unwrap();
    let key = jwt::SigningKey::from_pem(cluster.server.service_account_key_pem().as_bytes()).expect("key");
    let verified = jwt::verify(&token, key.public_key()).expect("signed with the service-account key");
    assert_eq!(verified.header["alg"], "ES256");
    assert_eq!(verified.header["kid"], key.public_key().key_id.as_str());
    let claims: BTreeMap<String, Value> = verified.claims.into_iter().collect();
    let expected: BTreeMap<String, Value> = from(json!({
        "iss": "kubernetes/serviceaccount",
        "sub": "system:serviceaccount:builds:builder",
        "kubernetes.io/serviceaccount/namespace": "builds",
        "kubernetes.io/serviceaccount/secret.name": "builder-token",
        "kubernetes.io/serviceaccount/service-account.name": "builder",
        "kubernetes.io/serviceaccount/service-account.uid": account_uid,
    }));
    assert_eq!(claims, expected);

    // The API server (kube-apiserver with --service-account-key-file) accepts it.
    // Retried: kube-apiserver's authenticator reads the Secret from its own cache, which may
    // not have the filled Secret yet (it caches successes only).
    let as_builder = token_client(&cluster, &token);
    let user = eventually("the token accepted", || whoami(&as_builder).ok());
    assert_eq!(user, "system:serviceaccount:builds:builder");
    // Legacy token tracking labels the Secret with the day of use.
    let used = secrets.get("builder-token").expect("get");
    let labels = used.metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("kubernetes.io/legacy-token-last-used"), Some(&today()));

    cluster.accounts("builds").delete("builder", &DeleteParams::default()).expect("account deleted");
    eventually("the token Secret deleted", || secrets.get_opt("builder-token").expect("get").is_none().then_some(()));
    // A deleted token no longer authenticates: at once on the sandbox; on kube-apiserver once
    // its cache of successful token authentications (10 s) forgets it.
    eventually("the deleted token refused", || whoami(&as_builder).is_err_and(|e| e.is_unauthorized()).then_some(()));

    // A token of an account that was deleted and recreated under the same name goes too.
    let deployer: ServiceAccount = from(json!({"metadata": {"name": "deployer"}}));
    cluster.accounts("builds").create(&deployer, &PostParams::default()).expect("account");
    let secret: Secret = from(json!({"metadata": {"name": "deployer-token",
        "annotations": {"kubernetes.io/service-account.name": "deployer"}},
        "type": "kubernetes.io/service-account-token"}));
    secrets.create(&secret, &PostParams::default()).expect("secret");
    eventually("the deployer token filled", || data(&secrets.get("deployer-token").expect("get"), "token"));
    cluster.accounts("builds").delete("deployer", &DeleteParams::default()).expect("account deleted");
    cluster.accounts("builds").create(&deployer, &PostParams::default()).expect("account recreated");
    eventually("the old deployer token deleted", || {
        secrets.get_opt("deployer-token").expect("get").is_none().then_some(())
    });
}

/// Today's date in UTC, as token labels carry it.
fn today() -> String {
    jiff::Timestamp::now().to_zoned(jiff::tz::TimeZone::UTC).date().strftime("%Y-%m-%d").to_string()
}

/// The user name the API server authenticates the client as (`kubectl auth whoami`).
fn whoami(client: &Client) -> Result<String, kcm::client::Error> {
    let review: SelfSubjectReview = from(json!({"metadata": {}}));
    let review = Api::<SelfSubjectReview>::cluster(client).create(&review, &PostParams::default())?;
    Ok(review.status.and_then(|s| s.user_info).and_then(|u| u.username).unwrap_or_default())
}

/// A client authenticating with `token` only.
fn token_client(cluster: &Cluster, token: &str) -> Client {
    let config = RestConfig {
        server: cluster.server.url(),
        tls: TlsSettings { ca_certs: cluster.client.config().tls.ca_certs.clone(), ..TlsSettings::default() },
        auth: Auth::Token(token.to_string()),
        source: "legacy token".into(),
    };
    Client::new(config, ClientOptions::default()).expect("a client")
}

on_both_backends!(unused_legacy_tokens_are_invalidated_once_use_was_tracked_for_a_period);
fn unused_legacy_tokens_are_invalidated_once_use_was_tracked_for_a_period(backend: Backend) {
    let mut token = String::new();
    let prepare = |c: &Client, server: &TestServer| {
        // Tracking began long ago; an account lists a token Secret nobody used since. (The API
        // server writes the ConfigMap soon after it starts, and keeps any valid date.)
        let tracking = Patch::Merge(json!({"data": {"since": "2020-01-01"}}));
        let config_maps = Api::<ConfigMap>::namespaced(c, "kube-system");
        eventually("the legacy token tracking ConfigMap", || {
            match config_maps.patch(TRACKING_CONFIG_MAP, &tracking, &PostParams::default()) {
                Ok(_) => Some(()),
                Err(e) if e.is_not_found() => None,
                Err(e) => panic!("patching the tracking ConfigMap: {e}"),
            }
        });
        let ns: Namespace = from(json!({"metadata": {"name": "legacy"}}));
        Api::<Namespace>::cluster(c).create(&ns, &PostParams::default()).expect("namespace");
        let accounts = Api::<ServiceAccount>::namespaced(c, "legacy");
        let robot: ServiceAccount = from(json!({"metadata": {"name": "robot"}, "secrets": [{"name": "robot-token"}]}));
        let uid = accounts.create(&robot, &PostParams::default()).expect("account").metadata.uid.unwrap();
        token = sign_legacy_token(server, "legacy", "robot", &uid, "robot-token");
        let secret: Secret = from(json!({"metadata": {"name": "robot-token",
            "annotations": {"kubernetes.io/service-account.name": "robot", "kubernetes.io/service-account.uid": uid}},
            "type": "kubernetes.io/service-account-token", "stringData": {"token": token}}));
        Api::<Secret>::namespaced(c, "legacy").create(&secret, &PostParams::default()).expect("secret");
        // Older than the one-second period when the cleaner first looks.
        std::thread::sleep(Duration::from_millis(2100));
    };
    let flags = ["--legacy-service-account-token-clean-up-period=1s"];
    let cluster =
        start(backend, "cleaner", &[named("legacy-serviceaccount-token-cleaner-controller")], &flags, prepare);
    let secrets = Api::<Secret>::namespaced(&cluster.client, "legacy");
    let invalid_since = eventually("the invalid-since label", || {
        let labels = secrets.get("robot-token").expect("get").metadata.labels.unwrap_or_default();
        labels.get("kubernetes.io/legacy-token-invalid-since").cloned()
    });
    assert_eq!(invalid_since, today());
    // kube-apiserver refuses an invalidated token, but records the attempt.
    let refused = Api::<Secret>::namespaced(&token_client(&cluster, &token), "legacy").list(&ListParams::default());
    assert!(refused.is_err_and(|e| e.is_unauthorized()));
    let labels = secrets.get("robot-token").expect("get").metadata.labels.unwrap_or_default();
    assert_eq!(labels.get("kubernetes.io/legacy-token-last-used"), Some(&today()));
}

/// Where kube-apiserver records since when it tracks the use of legacy tokens.
const TRACKING_CONFIG_MAP: &str = "kube-apiserver-legacy-service-account-token-tracking";

/// A legacy token for `namespace/account` signed with the sandbox's service-account key.
fn sign_legacy_token(server: &TestServer, namespace: &str, account: &str, uid: &str, secret: &str) -> String {
    let key = jwt::SigningKey::from_pem(server.service_account_key_pem().as_bytes()).expect("key");
    jwt::sign(&key, &jwt::legacy_claims(namespace, account, uid, secret)).expect("signed")
}

on_both_backends!(controllers_act_as_their_own_service_accounts);
fn controllers_act_as_their_own_service_accounts(backend: Backend) {
    let cluster = start(
        backend,
        "credentials",
        &[named("replicaset-controller"), named("serviceaccount-controller")],
        &["--use-service-account-credentials=true"],
        |c, _| {
            // Pod admission needs the namespace's default ServiceAccount before the controllers run.
            let account: ServiceAccount = from(json!({"metadata": {"name": "default"}}));
            Api::<ServiceAccount>::namespaced(c, "default").create(&account, &PostParams::default()).expect("account");
        },
    );
    let rs: ReplicaSet = from(json!({"metadata": {"name": "web"}, "spec": {"replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}));
    Api::<ReplicaSet>::namespaced(&cluster.client, "default").create(&rs, &PostParams::default()).expect("rs");
    let pods = Api::<Pod>::namespaced(&cluster.client, "default");
    eventually("the ReplicaSet's pod", || {
        (!pods.list(&ListParams::default()).expect("pods").items.is_empty()).then_some(())
    });
    cluster.create_namespace("fresh");
    cluster.wait_account("fresh", "default", None);
    // Each account was created (with the root credentials) for its controller's first token.
    for name in ["replicaset-controller", "service-account-controller"] {
        cluster.wait_account("kube-system", name, None);
    }

    let Some(sandbox) = cluster.server.sandbox() else {
        // No audit log on kube-apiserver here; RBAC tells instead: the controller manager's own
        // user may not create pods, so the ReplicaSet's pod was created with its controller's
        // service account.
        assert!(!may_create_pods(&cluster, CONTROLLER_MANAGER_USER, &[]));
        let groups = ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"];
        assert!(may_create_pods(&cluster, "system:serviceaccount:kube-system:replicaset-controller", &groups));
        return;
    };
    let audit = sandbox.audit().entries();
    let did = |user: &str, verb: &str, resource: &str| {
        audit.iter().any(|e| e.user == user && e.verb == verb && e.resource == resource && e.subresource.is_empty())
    };
    assert!(did("system:serviceaccount:kube-system:replicaset-controller", "create", "pods"));
    assert!(did("system:serviceaccount:kube-system:service-account-controller", "create", "serviceaccounts"));
    assert!(!did(CONTROLLER_MANAGER_USER, "create", "pods"), "no pod created with the root credentials");
    // The shared informers and the service-account set-up use the root credentials (an informer
    // starts with a watch-list stream where the server serves one, as client-go v1.36's do, else a
    // list, then a watch either way).
    assert!(did(CONTROLLER_MANAGER_USER, "watch", "replicasets"));
    assert!(audit.iter().any(|e| e.user == CONTROLLER_MANAGER_USER && e.subresource == "token"));
}

/// Whether the API server's authorizer lets `user` (in `groups`) create pods in `default`.
fn may_create_pods(cluster: &Cluster, user: &str, groups: &[&str]) -> bool {
    let review: SubjectAccessReview = from(json!({"spec": {"user": user, "groups": groups,
        "resourceAttributes": {"namespace": "default", "verb": "create", "resource": "pods"}}}));
    let review = Api::<SubjectAccessReview>::cluster(&cluster.client)
        .create(&review, &PostParams::default())
        .expect("a SubjectAccessReview");
    review.status.is_some_and(|s| s.allowed)
}

/// The ServiceAccounts upstream v1.36's `kube-controller-manager --use-service-account-credentials`
/// creates in kube-system for the controllers built here (`ClientOrDie("<name>")` as it starts
/// each; the token controller uses the root credentials). Checked against the upstream binary on
/// a real kube-apiserver with the same `--controllers` selection.
const UPSTREAM_CONTROLLER_ACCOUNTS: [&str; 37] = [
    "attachdetach-controller",
    "bootstrap-signer",
    "certificate-controller",
    "clusterrole-aggregation-controller",
    "cronjob-controller",
    "daemon-set-controller",
    "deployment-controller",
    "device-taint-eviction-controller",
    "disruption-controller",
    "endpoint-controller",
    "endpointslice-controller",
    "endpointslicemirroring-controller",
    "ephemeral-volume-controller",
    "expand-controller",
    "generic-garbage-collector",
    "horizontal-pod-autoscaler",
    "job-controller",
    "legacy-service-account-token-cleaner",
    "namespace-controller",
    "node-controller",
    "persistent-volume-binder",
    "pod-garbage-collector",
    "pv-protection-controller",
    "pvc-protection-controller",
    "replicaset-controller",
    "replication-controller",
    "resource-claim-controller",
    "resourcequota-controller",
    "root-ca-cert-publisher",
    "service-account-controller",
    "service-cidrs-controller",
    "statefulset-controller",
    "token-cleaner",
    "ttl-after-finished-controller",
    "ttl-controller",
    "validatingadmissionpolicy-status-controller",
    "volumeattributesclass-protection-controller",
];

on_both_backends!(every_started_controllers_account_exists_once_the_controllers_start);
/// Issue 13: every started controller's ServiceAccount exists as soon as the controllers start,
/// before any of them has had work (there are no nodes, workloads or quotas here), not only
/// those of the controllers that have written something.
fn every_started_controllers_account_exists_once_the_controllers_start(backend: Backend) {
    let flags = [
        "--use-service-account-credentials=true",
        "--allocate-node-cidrs",
        "--cluster-cidr=10.244.0.0/16",
        "--controllers=*,bootstrapsigner,tokencleaner",
    ];
    let test = format!("at-start-{}", backend.name().replace(' ', "-"));
    let cluster = start(backend, &test, &kcm::app::controllers::built(), &flags, |_, _| ());
    let started = cluster.controller_names();
    // Those whose feature gates are off by default (e.g. `podgroup-protection-controller`) stay off.
    let startable = harness::options(&flags);
    let expected_count = kcm::app::controllers::built().iter().filter(|d| startable.starts_controller(d.name)).count();
    assert_eq!(started.len(), expected_count, "every built controller the gates allow starts: {started:?}");
    let listed = cluster.accounts("kube-system").list(&ListParams::default()).expect("accounts").items;
    // The service-account controller may have added kube-system's `default` meanwhile.
    let accounts: BTreeSet<String> =
        listed.into_iter().filter_map(|a| a.metadata.name).filter(|name| name != "default").collect();
    let expected: BTreeSet<String> = UPSTREAM_CONTROLLER_ACCOUNTS.iter().map(|a| a.to_string()).collect();
    assert_eq!(accounts, expected);
    let Some(sandbox) = cluster.server.sandbox() else { return };
    // Created with the root credentials.
    let audit = sandbox.audit().entries();
    let created = audit
        .iter()
        .filter(|e| e.verb == "create" && e.resource == "serviceaccounts" && e.subresource.is_empty())
        .filter(|e| e.namespace == "kube-system" && e.user == CONTROLLER_MANAGER_USER)
        .count();
    assert_eq!(created, expected.len());
}

#[test]
fn a_bad_private_key_file_is_an_error_naming_it() {
    let path = std::env::temp_dir().join(format!("kcm-sa-{}-bad.key", std::process::id()));
    std::fs::write(&path, "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n").expect("written");
    let args = ["--controllers=*".to_string(), format!("--service-account-private-key-file={}", path.display())];
    let Ok(kcm::app::flags::Command::Run(options)) = kcm::app::flags::parse(args.into_iter().map(Into::into)) else {
        panic!("flags parse");
    };
    let config = RestConfig {
        server: "https://127.0.0.1:1".into(),
        tls: TlsSettings::default(),
        auth: Auth::None,
        source: "test".into(),
    };
    let client = Client::new(config, ClientOptions::default()).expect("a client");
    let error = kcm::app::start_controllers(&client, &options, &[named("serviceaccount-token-controller")])
        .err()
        .expect("refused")
        .to_string();
    let _ = std::fs::remove_file(&path);
    assert_eq!(
        error,
        format!(
            "starting serviceaccount-token-controller: error reading key for service account token controller: \
             private key file {}: data does not contain a valid RSA or ECDSA private key",
            path.display()
        )
    );
}
