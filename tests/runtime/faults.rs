//! Our client and informers against the real kube-apiserver through `envtest::faultproxy`, one
//! fault at a time: each must end in a clear error or be ridden out, and everything converges
//! once the fault clears.
//!
//! Real server only: the sandbox has its own fault injection (`SandboxOptions`' faults, tested
//! in `tests/sandbox`), and the proxy's point is kube-apiserver's real answers around the faults.
//! Bounds on time are lower bounds (a wait the client must have honoured) or generous deadlines.
#![cfg(feature = "sandbox")]

use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm::client::config::Auth;
use kcm::client::{Api, Client, ClientOptions, ListParams, PostParams, RestConfig};
use kcm::envtest::ControlPlane;
use kcm::envtest::faultproxy::{Fault, FaultProxy, Rule};
use kcm::runtime::informer::SharedInformerFactory;

use crate::harness::Backend;

/// The longest any expected recovery may take.
const DEADLINE: Duration = Duration::from_secs(45);
const POLL: Duration = Duration::from_millis(50);

fn real(test: fn(ControlPlane, FaultProxy)) {
    if Backend::Real.selected() && Backend::Real.available() {
        let plane = ControlPlane::start().expect("the control plane starts");
        let proxy = FaultProxy::start(&plane).expect("the proxy starts");
        test(plane, proxy)
    }
}

fn client(config: RestConfig, timeout: Duration) -> Client {
    Client::new(config, ClientOptions { qps: -1.0, burst: 1, timeout }).expect("a client")
}

fn admin(plane: &ControlPlane, proxy: &FaultProxy) -> Client {
    client(proxy.rest_config(plane.admin_config()), Duration::from_secs(30))
}

fn config_map(name: &str) -> ConfigMap {
    ConfigMap { metadata: ObjectMeta { name: Some(name.into()), ..Default::default() }, ..Default::default() }
}

fn whoami(client: &Client) -> (String, Vec<String>) {
    let review = Api::<SelfSubjectReview>::cluster(client)
        .create(&SelfSubjectReview::default(), &PostParams::default())
        .expect("a SelfSubjectReview");
    let user = review.status.and_then(|s| s.user_info).expect("user info");
    (user.username.unwrap_or_default(), user.groups.unwrap_or_default())
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + DEADLINE;
    while !done() {
        assert!(Instant::now() < deadline, "{what} not within {DEADLINE:?}");
        std::thread::sleep(POLL);
    }
}

#[test]
fn callers_are_forwarded_as_themselves_by_certificate_or_token() {
    real(|plane, proxy| {
        let alice = || plane.user_config("alice", &["team-a"]).unwrap();
        let through = whoami(&client(proxy.rest_config(alice()), DEADLINE));
        assert_eq!(through, ("alice".to_string(), vec!["team-a".to_string(), "system:authenticated".to_string()]));
        assert_eq!(through, whoami(&client(alice(), DEADLINE)), "as seen without the proxy");

        // A service account's token, without a client certificate: kube-apiserver's union
        // authenticator finds no X-Remote-User on the front-proxy connection and reads the token.
        let admin = admin(&plane, &proxy);
        let accounts = Api::<ServiceAccount>::namespaced(&admin, "default");
        let account = ServiceAccount {
            metadata: ObjectMeta { name: Some("robot".into()), ..Default::default() },
            ..Default::default()
        };
        accounts.create(&account, &PostParams::default()).expect("a ServiceAccount");
        let request =
            TokenRequest { spec: TokenRequestSpec { audiences: vec![], ..Default::default() }, ..Default::default() };
        let token: TokenRequest =
            accounts.create_subresource("token", "robot", &request, &PostParams::default()).expect("a token");
        let mut config = proxy.rest_config(plane.admin_config());
        config.tls.client_identity = None;
        config.auth = Auth::Token(token.status.expect("a token").token);
        let (user, groups) = whoami(&client(config, DEADLINE));
        assert_eq!(user, "system:serviceaccount:default:robot");
        assert!(groups.contains(&"system:serviceaccounts:default".to_string()), "{groups:?}");
        assert!(proxy.counts().forwarded >= 4);
    });
}

#[test]
fn too_many_requests_are_retried_after_retry_after() {
    real(|plane, proxy| {
        let admin = admin(&plane, &proxy);
        let maps = Api::<ConfigMap>::namespaced(&admin, "default");
        proxy.inject(Rule::new(Fault::TooManyRequests { retry_after_seconds: 1 }).path("/configmaps").times(3));
        let started = Instant::now();
        maps.create(&config_map("throttled"), &PostParams::default()).expect("created after three 429s");
        assert!(started.elapsed() >= Duration::from_millis(2900), "Retry-After honoured: {:?}", started.elapsed());
        assert_eq!(proxy.counts().injected("too_many_requests"), 3);

        // More 429s than client-go's maxRetries (10): the 429 itself, with APF's message.
        proxy.inject(Rule::new(Fault::TooManyRequests { retry_after_seconds: 0 }).path("/configmaps").times(20));
        let error = maps.get("throttled").expect_err("throttled past the retries");
        assert!(error.is_too_many_requests(), "{error}");
        assert!(error.to_string().contains("Too many requests, please try again later."), "{error}");
        proxy.clear();
        maps.get("throttled").expect("served once the throttling ends");
    });
}

#[test]
fn server_errors_are_reported_and_an_informer_lists_again() {
    real(|plane, proxy| {
        let admin = admin(&plane, &proxy);
        let maps = Api::<ConfigMap>::namespaced(&admin, "default");
        for (code, check) in [
            (500, kcm::client::Error::is_internal_error as fn(&kcm::client::Error) -> bool),
            (503, kcm::client::Error::is_service_unavailable),
            (504, kcm::client::Error::is_server_timeout),
        ] {
            proxy.inject(Rule::new(Fault::ServerError(code)).verb("GET").times(1));
            let error = maps.list(&ListParams::default()).expect_err("a 5xx without Retry-After is not retried");
            assert!(check(&error), "{code}: {error}");
        }
        assert_eq!(proxy.counts().injected("server_error"), 3);

        // Lists fail for a while: the informer backs off and syncs once they succeed.
        maps.create(&config_map("before"), &PostParams::default()).unwrap();
        proxy.inject(Rule::new(Fault::ServerError(503)).verb("GET").watch(false).path("/configmaps").times(3));
        let factory = SharedInformerFactory::new(admin.clone(), Duration::ZERO);
        let informer = factory.informer::<ConfigMap>();
        factory.start();
        assert!(factory.wait_for_sync(DEADLINE), "synced after the 503s");
        assert!(informer.store().get("default/before").is_some());
        assert_eq!(proxy.counts().injected("server_error"), 6);
        maps.create(&config_map("after"), &PostParams::default()).unwrap();
        wait_for("the watch delivers a new object", || informer.store().get("default/after").is_some());
        factory.shutdown();
    });
}
