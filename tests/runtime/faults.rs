//! Our client and informers against the real kube-apiserver through `envtest::faultproxy`, one
//! fault at a time: each must end in a clear error or be ridden out, and everything converges
//! once the fault clears.
//!
//! Real server only: the sandbox has its own fault injection (`SandboxOptions`' faults, tested
//! in `tests/sandbox`), and the proxy's point is kube-apiserver's real answers around the faults.
//! Bounds on time are lower bounds (a wait the client must have honoured) or generous deadlines.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kcm::client::Patch;
use kcm_sandbox::sandbox::nodes::{NodeOptions, SimulatedNodes};
use serde_json::json;

use k8s_openapi::api::authentication::v1::{SelfSubjectReview, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kcm::client::config::Auth;
use kcm::client::{Api, Client, ClientOptions, ListParams, PostParams, RestConfig};
use kcm::runtime::informer::SharedInformerFactory;
use kcm_envtest::envtest::ControlPlane;
use kcm_envtest::envtest::faultproxy::{Fault, FaultProxy, Rule};

use crate::harness::{self, Backend};

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
        let request = TokenRequest {
            spec: Some(TokenRequestSpec { audiences: Some(vec![]), ..Default::default() }),
            ..Default::default()
        };
        let token: TokenRequest =
            accounts.create_subresource("token", "robot", &request, &PostParams::default()).expect("a token");
        let mut config = proxy.rest_config(plane.admin_config());
        config.tls.client_identity = None;
        config.auth = Auth::Token(token.status.and_then(|s| s.token).expect("a token"));
        let (user, groups) = whoami(&client(config, DEADLINE));
        assert_eq!(user, "system:serviceaccount:default:robot");
        assert!(groups.contains(&"system:serviceaccounts:default".to_string()), "{groups:?}");
        assert!(proxy.counts().forwarded >= 4);

        // The audit log (which records Deployment updates) shows the proxy's source address.
        let deployments = Api::<Deployment>::namespaced(&admin, "default");
        let created = deployments.create(&deployment(0), &PostParams::default()).unwrap();
        deployments.replace("web", &created, &PostParams::default()).unwrap();
        let source = proxy.source_ip().to_string();
        wait_for("the update in the audit log", || {
            let log = std::fs::read_to_string(plane.audit_log()).unwrap_or_default();
            log.lines()
                .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
                .any(|entry| entry["objectRef"]["name"] == "web" && entry["sourceIPs"][0] == source.as_str())
        });
    });
}

#[test]
fn latency_delays_only_the_matching_requests() {
    real(|plane, proxy| {
        let admin = admin(&plane, &proxy);
        let maps = Api::<ConfigMap>::namespaced(&admin, "default");
        maps.create(&config_map("slow"), &PostParams::default()).unwrap();
        proxy.inject(Rule::new(Fault::Latency(Duration::from_secs(2))).verb("GET").path("/configmaps/slow"));
        let started = Instant::now();
        maps.get("slow").expect("a delayed answer");
        assert!(started.elapsed() >= Duration::from_secs(2), "{:?}", started.elapsed());
        // A 1 s timeout ends a request delayed 2 s.
        let short = Api::<ConfigMap>::namespaced(&admin.with_request_timeout(Duration::from_secs(1)), "default");
        assert!(short.get("slow").expect_err("delayed past the timeout").is_timeout());
        short.list(&ListParams::default()).expect("other requests are not delayed");
        assert_eq!(proxy.counts().injected("latency"), 2);
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

/// An informer of ConfigMaps through `client`, started and synced.
fn synced_informer(
    client: &Client,
) -> (SharedInformerFactory, std::sync::Arc<kcm::runtime::informer::Informer<ConfigMap>>) {
    let factory = SharedInformerFactory::new(client.clone(), Duration::ZERO);
    let informer = factory.informer::<ConfigMap>();
    factory.start();
    assert!(factory.wait_for_sync(DEADLINE), "the informer syncs");
    (factory, informer)
}

#[test]
fn resets_fail_clearly_and_reads_are_sent_again() {
    real(|plane, proxy| {
        let admin = admin(&plane, &proxy);
        let maps = Api::<ConfigMap>::namespaced(&admin, "default");
        maps.create(&config_map("reset"), &PostParams::default()).unwrap();
        // A GET is sent again after resets, as client-go does: at once, then a second apart.
        proxy.inject(Rule::new(Fault::ResetBeforeResponse).verb("GET").times(3));
        let started = Instant::now();
        maps.get("reset").expect("a GET retried after resets");
        assert!(started.elapsed() >= Duration::from_secs(2), "{:?}", started.elapsed());
        assert_eq!(proxy.counts().injected("reset_before_response"), 3);
        // A write is not sent again: a clear transport error.
        proxy.inject(Rule::new(Fault::ResetBeforeResponse).verb("POST").times(1));
        let error = maps.create(&config_map("written"), &PostParams::default()).expect_err("a reset write");
        assert!(error.is_transport(), "{error}");
        maps.create(&config_map("written"), &PostParams::default()).expect("created once the resets stop");
        // A reset in the middle of a body: an error naming the broken connection.
        // Not sent again (nor by client-go, which retries only on errors before the response).
        proxy.inject(Rule::new(Fault::ResetMidResponse).verb("GET").watch(false).times(1));
        let error = maps.list(&ListParams::default()).expect_err("a list reset mid-body");
        assert!(error.is_transport(), "{error}");
        assert_eq!(proxy.counts().injected("reset_mid_response"), 1);
        maps.list(&ListParams::default()).expect("listed once the resets stop");

        // An informer whose lists and watches are reset a few times converges.
        proxy.inject(Rule::new(Fault::ResetMidResponse).path("/configmaps").times(4));
        let (factory, informer) = synced_informer(&admin);
        maps.create(&config_map("later"), &PostParams::default()).unwrap();
        wait_for("the informer sees a new object", || informer.store().get("default/later").is_some());
        factory.shutdown();
    });
}

#[test]
fn truncated_bodies_fail_clearly_and_informers_recover() {
    real(|plane, proxy| {
        let admin = admin(&plane, &proxy);
        let maps = Api::<ConfigMap>::namespaced(&admin, "default");
        maps.create(&config_map("whole"), &PostParams::default()).unwrap();
        proxy.inject(Rule::new(Fault::TruncateBody).verb("GET").watch(false).times(1));
        let error = maps.list(&ListParams::default()).expect_err("a truncated list");
        assert!(error.is_transport() || error.to_string().contains("decod"), "{error}");
        assert_eq!(proxy.counts().injected("truncate_body"), 1);

        // Truncated lists and watch streams: the informer lists and watches again, and its cache
        // holds exactly what the server has.
        proxy.inject(Rule::new(Fault::TruncateBody).path("/configmaps").times(3));
        let (factory, informer) = synced_informer(&admin);
        for name in ["one", "two", "three"] {
            maps.create(&config_map(name), &PostParams::default()).unwrap();
        }
        let expected = |names: Vec<String>| {
            let mut sorted = names;
            sorted.sort();
            sorted
        };
        let server_names = || {
            expected(
                maps.list(&ListParams::default()).unwrap().items.into_iter().filter_map(|m| m.metadata.name).collect(),
            )
        };
        wait_for("the cache matches the server", || {
            let cached =
                informer.store().list().into_iter().filter(|m| m.metadata.namespace.as_deref() == Some("default"));
            expected(cached.filter_map(|m| m.metadata.name.clone()).collect()) == server_names()
        });
        factory.shutdown();
    });
}

#[test]
fn half_open_requests_time_out() {
    real(|plane, proxy| {
        let short = client(proxy.rest_config(plane.admin_config()), Duration::from_secs(2));
        let maps = Api::<ConfigMap>::namespaced(&short, "default");
        // An answer that never comes on a kept-alive connection.
        maps.list(&ListParams::default()).unwrap();
        proxy.inject(Rule::new(Fault::HalfOpen).verb("GET").times(1));
        let started = Instant::now();
        let error = maps.list(&ListParams::default()).expect_err("no answer");
        assert!(error.is_timeout(), "{error}");
        assert!(started.elapsed() >= Duration::from_secs(2), "{:?}", started.elapsed());
        maps.list(&ListParams::default()).expect("answered on another connection");
        // A new connection that is accepted and never answered (not even the TLS handshake).
        proxy.drop_connections();
        proxy.inject(Rule::new(Fault::HalfOpen).times(1));
        let error = maps.list(&ListParams::default()).expect_err("no handshake");
        assert!(error.is_timeout() || error.is_transport(), "{error}");
        assert_eq!(proxy.counts().injected("half_open"), 2);
        maps.list(&ListParams::default()).expect("answered once the network is back");
    });
}

#[test]
fn a_stalled_watch_is_noticed_and_watched_again() {
    real(|plane, proxy| {
        let admin = admin(&plane, &proxy);
        let maps = Api::<ConfigMap>::namespaced(&admin, "default");
        // The idle limit shortened from its default so that the test is short.
        let informers = admin.with_watch_idle_timeout(Duration::from_secs(3));
        proxy.inject(Rule::new(Fault::StallWatch).watch(true).path("/configmaps").times(1));
        let (factory, informer) = synced_informer(&informers);
        wait_for("the watch stalls", || proxy.counts().injected("stall_watch") == 1);
        maps.create(&config_map("unseen"), &PostParams::default()).unwrap();
        wait_for("a new watch delivers the object", || informer.store().get("default/unseen").is_some());
        factory.shutdown();
    });
}

#[test]
fn a_cut_fails_requests_and_informers_catch_up_after_it() {
    real(|plane, proxy| {
        let admin = admin(&plane, &proxy);
        let maps = Api::<ConfigMap>::namespaced(&admin, "default");
        let (factory, informer) = synced_informer(&admin);
        proxy.cut();
        let started = Instant::now();
        let error = maps.list(&ListParams::default()).expect_err("cut off");
        assert!(error.is_transport(), "{error}");
        // Ten GET retries a second apart (client-go's), then the reset: no waiting for a timeout.
        assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
        // Written past the proxy while the informer is cut off.
        let direct = client(plane.admin_config(), DEADLINE);
        Api::<ConfigMap>::namespaced(&direct, "default")
            .create(&config_map("meanwhile"), &PostParams::default())
            .unwrap();
        wait_for("the watch was cut", || proxy.counts().injected("cut") >= 2);
        proxy.restore();
        wait_for("the informer catches up", || informer.store().get("default/meanwhile").is_some());
        factory.shutdown();
    });
}

/// The real binary (deployment, replicaset, endpointslice and serviceaccount controllers) keeps a Deployment
/// converging while the proxy throttles it, fails its requests, resets its connections and
/// stalls a watch, one after another. Nodes and the test itself talk to kube-apiserver
/// directly. The stalled watch takes the binary's [`kcm::client::WATCH_IDLE_TIMEOUT`] (90 s) to
/// be noticed: this test is the suite's longest.
#[test]
fn the_binary_keeps_a_deployment_converging_through_each_fault() {
    real(|plane, proxy| {
        let dir = std::env::temp_dir().join(format!("kcm-faults-binary-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (_, kubeconfig) = proxy.write_kubeconfigs(&plane, &dir.join("admin.conf")).unwrap();
        let admin = client(plane.admin_config(), DEADLINE);
        let nodes =
            SimulatedNodes::start(plane.admin_config(), vec!["node-1".into(), "node-2".into()], NodeOptions::default())
                .expect("the nodes start");
        let log = dir.join("kcm.log");
        let child = Command::new(BINARY)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--controllers=deployment-controller,replicaset-controller,endpointslice-controller,serviceaccount-controller")
            .args(["--use-service-account-credentials=true", "--leader-elect=false", "--secure-port=0", "-v=2"])
            .stderr(std::fs::File::create(&log).unwrap())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut binary = Process(child);
        let deployments = Api::<Deployment>::namespaced(&admin, "default");
        deployments.create(&deployment(2), &PostParams::default()).unwrap();
        Api::<Service>::namespaced(&admin, "default").create(&service(), &PostParams::default()).unwrap();
        converge(&admin, &mut binary, 2, &log);

        let phases: [(&str, Rule, i32); 4] = [
            ("too_many_requests", Rule::new(Fault::TooManyRequests { retry_after_seconds: 1 }).lasting(secs(4)), 3),
            ("server_error", Rule::new(Fault::ServerError(503)).watch(false).lasting(secs(4)), 1),
            ("reset_mid_response", Rule::new(Fault::ResetMidResponse).times(10), 4),
            ("stall_watch", Rule::new(Fault::StallWatch).watch(true).path("/replicasets").times(1), 2),
        ];
        for (fault, rule, replicas) in phases {
            let started = Instant::now();
            if fault == "stall_watch" {
                // Only new watches stall: every watch opens again after its connection drops.
                proxy.drop_connections();
            }
            proxy.inject(rule);
            scale(&deployments, replicas);
            converge(&admin, &mut binary, replicas, &log);
            proxy.clear();
            assert!(proxy.counts().injected(fault) > 0, "{fault} was injected: {:?}", proxy.counts());
            eprintln!("{fault}: converged to {replicas} replicas in {:?}", started.elapsed());
        }
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(!text.contains("panicked"), "the binary panicked:\n{text}");
        nodes.stop();
        let _ = std::fs::remove_dir_all(&dir);
    });
}

const BINARY: &str = env!("CARGO_BIN_EXE_kube-controller-manager");

const fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn deployment(replicas: i32) -> Deployment {
    harness::from(json!({"metadata": {"name": "web"}, "spec": {"replicas": replicas,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx", "ports": [{"containerPort": 80}]}]}}}}))
}

fn service() -> Service {
    harness::from(json!({"metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 80}]}}))
}

fn scale(deployments: &Api<Deployment>, replicas: i32) {
    let patch = Patch::Merge(json!({"spec": {"replicas": replicas}}));
    deployments.patch("web", &patch, &PostParams::default()).unwrap();
}

/// Waits until the Deployment has `replicas` updated, ready and available pods of its latest
/// generation and the Service's EndpointSlices list exactly that many ready endpoints; fails
/// at once if the binary exits.
fn converge(admin: &Client, binary: &mut Process, replicas: i32, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(150);
    let deployments = Api::<Deployment>::namespaced(admin, "default");
    let slices = Api::<EndpointSlice>::namespaced(admin, "default");
    let selector = ListParams { label_selector: Some("kubernetes.io/service-name=web".into()), ..Default::default() };
    loop {
        if let Some(status) = binary.0.try_wait().unwrap() {
            panic!("the binary exited ({status}):\n{}", std::fs::read_to_string(log).unwrap_or_default());
        }
        let deployment = deployments.get("web").unwrap();
        let status = deployment.status.clone().unwrap_or_default();
        let rolled = status.observed_generation == deployment.metadata.generation
            && [status.replicas, status.updated_replicas, status.ready_replicas, status.available_replicas]
                .iter()
                .all(|n| n.unwrap_or(0) == replicas);
        let ready = slices
            .list(&selector)
            .unwrap()
            .items
            .iter()
            .flat_map(|s| s.endpoints.iter().flatten())
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(false))
            .count();
        if rolled && ready == replicas as usize {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "no convergence to {replicas} replicas: {status:?}, {ready} ready endpoints"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
