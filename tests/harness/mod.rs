//! Harness shared by the controller integration tests: an API server (the in-process sandbox or a
//! real etcd + kube-apiserver, see [`Backend`]), simulated nodes (a kubelet and scheduler), and a
//! `ControllerSet` running the controllers under test.
//!
//! A test written once runs on both backends with [`on_both_backends!`]: `on_both_backends!(name)`
//! beside `fn name(backend: Backend)` makes the tests `name::sandbox` and `name::real_server`.
//!
//! The order of `Builder::start_with` is fixed: API server, namespaces with their default
//! ServiceAccount, nodes, the test's `prepare` hook, then the controllers. What `prepare` creates
//! is therefore in the controllers' first list rather than racing their watches.

use std::path::PathBuf;
use std::time::{Duration, Instant};

#[allow(dead_code)] // Used by the controllers binary only.
pub mod widgets;

use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Event, Namespace, ReplicationController, ServiceAccount};
use kcm::app::controllers::ControllerDescriptor;
use kcm::app::flags::Options;
use kcm::client::{Api, Client, ClientOptions, Patch, PostParams};
use kcm::runtime::controller::ControllerSet;
use kcm_envtest::envtest::ControlPlane;
pub use kcm_envtest::envtest::{Backend, TestServer};
use kcm_sandbox::sandbox::nodes::{NodeOptions, SimulatedNodes};
use kcm_sandbox::sandbox::server::Sandbox;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Makes `name::sandbox` and `name::real_server`, two tests that call `fn name(backend: Backend)`
/// with each backend. The real-server test passes without running where the real binaries are
/// missing, after one loud line naming what is missing (see `Backend::available`).
#[macro_export]
macro_rules! on_both_backends {
    ($($name:ident),+ $(,)?) => {$(
        mod $name {
            #[test]
            fn sandbox() {
                $crate::harness::run_on($crate::harness::Backend::Sandbox, super::$name);
            }

            #[test]
            fn real_server() {
                $crate::harness::run_on($crate::harness::Backend::Real, super::$name);
            }
        }
    )+};
}

/// Runs `test` on `backend` when `KCM_TEST_BACKENDS` selects it and it is available here.
pub fn run_on(backend: Backend, test: fn(Backend)) {
    if backend.selected() && backend.available() {
        test(backend);
    }
}

/// Generous: the machine may be loaded (two busy cores beside the other tests have made a step
/// that takes seconds alone take over a minute). It bounds only a wait that fails.
pub const DEADLINE: Duration = Duration::from_secs(180);

/// Deserializes a test object written as JSON.
pub fn from<T: DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

/// Merges `patch` into `target`: objects key by key, anything else replaced (not RFC 7386: a
/// null is written, not a deletion).
pub fn merge_json(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(target), Value::Object(patch)) => {
            for (key, value) in patch {
                merge_json(target.entry(key).or_insert(Value::Null), value);
            }
        }
        (target, patch) => *target = patch,
    }
}

/// The value of `series` (a metric name with its labels, `name{a="b"}`) in this process's
/// registry (the harness runs the controllers in-process); `None` before it is first written.
pub fn metric_sample(series: &str) -> Option<f64> {
    let text = kcm::metrics::global().render();
    let value = text.lines().find_map(|line| line.strip_prefix(series)?.strip_prefix(' '));
    value.map(|v| v.trim().parse().expect("a number"))
}

/// Removes every finalizer of `name` (a merge patch setting them to null).
pub fn drop_finalizers<K>(api: &Api<K>, name: &str)
where
    K: k8s_openapi::Resource + DeserializeOwned + serde::Serialize + Clone + std::fmt::Debug,
    K::Scope: kcm::client::Scope,
{
    api.patch(name, &Patch::Merge(json!({"metadata": {"finalizers": null}})), &PostParams::default())
        .expect("finalizers dropped");
}

/// Polls `check` until it gives a value, or fails with `what` after `DEADLINE`.
pub fn eventually<T>(what: &str, check: impl FnMut() -> Option<T>) -> T {
    eventually_within(DEADLINE, what, check)
}

/// Polls `check` every 100 ms until it gives a value, or fails with `what` after `deadline`.
pub fn eventually_within<T>(deadline: Duration, what: &str, check: impl FnMut() -> Option<T>) -> T {
    poll_until(deadline, Duration::from_millis(100), what, check)
}

/// Polls `check` every `every` until it gives a value, or fails with `timed out waiting for
/// {what}` after `deadline`.
pub fn poll_until<T>(deadline: Duration, every: Duration, what: &str, check: impl FnMut() -> Option<T>) -> T {
    poll_until_explained(deadline, every, what, String::new, check)
}

/// [`poll_until`] whose failure adds `explain()` (what was seen by then) to its message.
pub fn poll_until_explained<T>(
    deadline: Duration,
    every: Duration,
    what: &str,
    explain: impl Fn() -> String,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + deadline;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}{}", explain());
        std::thread::sleep(every);
    }
}

/// Polls `check` every 100 ms until it gives `Ok`, or fails after `DEADLINE` with `what` and
/// what came instead (the last `Err`): for waits whose failure should say what was seen.
pub fn eventually_seen<T>(what: &str, check: impl FnMut() -> Result<T, String>) -> T {
    eventually_seen_within(DEADLINE, what, check)
}

/// [`eventually_seen`] with its own deadline.
pub fn eventually_seen_within<T>(deadline: Duration, what: &str, mut check: impl FnMut() -> Result<T, String>) -> T {
    let until = Instant::now() + deadline;
    loop {
        match check() {
            Ok(value) => return value,
            Err(came) if Instant::now() >= until => {
                panic!("timed out after {deadline:?} waiting for {what}; came instead: {came}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

/// An object as the API server stored it, read beside its HTTP API, so that it can be read while
/// the API is down or stalled: the sandbox's store, or kube-apiserver's etcd key
/// `/registry/<resource>/[<namespace>/]<name>` (most kinds' key; nodes and services differ)
/// through etcd's JSON gateway, decoded from protobuf.
#[allow(dead_code)] // Read by the runtime's leader-election and HA tests only.
pub fn stored_object(server: &TestServer, resource: &str, namespace: &str, name: &str) -> Option<Value> {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD as BASE64;
    match server {
        TestServer::Sandbox(sandbox) => sandbox.store().get(resource, namespace, name).map(|o| (*o).clone()),
        TestServer::Real(plane) => {
            let key = match namespace {
                "" => format!("/registry/{resource}/{name}"),
                namespace => format!("/registry/{resource}/{namespace}/{name}"),
            };
            let request = json!({"key": BASE64.encode(&key)}).to_string();
            let url = format!("{}/v3/kv/range", plane.etcd_url());
            let response = ureq::post(&url).send(&request).unwrap_or_else(|e| panic!("etcd at {url}: {e}"));
            let text = response.into_body().read_to_string().expect("etcd's answer");
            let answer: Value = serde_json::from_str(&text).expect("etcd answers JSON");
            let value = answer["kvs"][0]["value"].as_str()?;
            let bytes = BASE64.decode(value).expect("base64 from etcd");
            Some(
                kcm_sandbox::sandbox::apiserver::protobuf::decode_body(&bytes).unwrap_or_else(|e| panic!("{key}: {e}")),
            )
        }
    }
}

/// A namespaced kind the typed client can read and write.
pub trait Namespaced:
    k8s_openapi::Resource<Scope = k8s_openapi::NamespaceResourceScope>
    + serde::Serialize
    + DeserializeOwned
    + Clone
    + std::fmt::Debug
{
}

impl<K> Namespaced for K where
    K: k8s_openapi::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + serde::Serialize
        + DeserializeOwned
        + Clone
        + std::fmt::Debug
{
}

/// Creates `object` (JSON of a `K`) in `namespace`; returns what the server stored.
pub fn create<K: Namespaced>(client: &Client, namespace: &str, object: Value) -> K {
    let object: K = from(object);
    Api::<K>::namespaced(client, namespace).create(&object, &PostParams::default()).expect("created")
}

/// The spec of a ReplicaSet or Deployment of `replicas` nginx pods labelled app=`name`.
fn nginx_workload_spec(name: &str, replicas: i32) -> Value {
    json!({
        "replicas": replicas,
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
        },
    })
}

/// A ReplicaSet `name` of `replicas` nginx pods labelled app=`name`.
pub fn nginx_replica_set(name: &str, replicas: i32) -> ReplicaSet {
    from(json!({"metadata": {"name": name}, "spec": nginx_workload_spec(name, replicas)}))
}

/// A Deployment `name` of `replicas` nginx pods labelled app=`name`.
pub fn nginx_deployment(name: &str, replicas: i32) -> k8s_openapi::api::apps::v1::Deployment {
    from(json!({"metadata": {"name": name}, "spec": nginx_workload_spec(name, replicas)}))
}

/// A ReplicationController `name` of `replicas` nginx pods labelled app=`name`.
pub fn nginx_replication_controller(name: &str, replicas: i32) -> ReplicationController {
    from(json!({
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"app": name},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]},
            },
        },
    }))
}

/// The controller manager's options for `--controllers=*` followed by `flags`.
pub fn options(flags: &[&str]) -> Box<Options> {
    let args = std::iter::once("--controllers=*").chain(flags.iter().copied());
    match kcm::app::flags::parse(args.map(Into::into)) {
        Ok(kcm::app::flags::Command::Run(options)) => options,
        other => panic!("unexpected {other:?}"),
    }
}

/// The options for `--controllers=*` followed by `flags`, and on the real server
/// `--use-service-account-credentials=true`: as kubeadm, with RBAC on, each controller acts as
/// its own ServiceAccount.
pub fn options_on(backend: Backend, flags: &[&str]) -> Box<Options> {
    let mut flags = flags.to_vec();
    if backend == Backend::Real {
        flags.push("--use-service-account-credentials=true");
    }
    options(&flags)
}

/// Nodes whose pods start after 200 ms, ticking every 50 ms.
pub fn fast_nodes() -> NodeOptions {
    NodeOptions {
        pod_start_delay: Duration::from_millis(200),
        tick: Duration::from_millis(50),
        ..NodeOptions::default()
    }
}

/// An API server with its nodes and controllers; stops them when dropped.
pub struct Cluster {
    /// The admin's client.
    pub client: Client,
    /// The controller manager's client.
    pub kcm: Client,
    pub set: Option<ControllerSet>,
    pub nodes: Option<SimulatedNodes>,
    pub server: TestServer,
    descriptors: Vec<ControllerDescriptor>,
    expected_names: Option<Vec<&'static str>>,
    options: Box<Options>,
    deadline: Duration,
    temp_files: Vec<PathBuf>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(set) = self.set.take() {
            set.stop(Duration::from_secs(5));
        }
        if let Some(nodes) = self.nodes.take() {
            nodes.stop();
        }
        for file in &self.temp_files {
            let _ = std::fs::remove_file(file);
        }
    }
}

impl Cluster {
    /// The sandbox, for tests of what only it offers (faults, audit log); panics on a real server.
    pub fn sandbox(&self) -> &Sandbox {
        self.server.sandbox().expect("this test needs the sandbox")
    }

    /// The names of the running controllers.
    pub fn controller_names(&self) -> Vec<&'static str> {
        self.set.as_ref().map(ControllerSet::names).unwrap_or_default()
    }

    /// The admin's API for `K` in the `default` namespace.
    pub fn api<K: Namespaced>(&self) -> Api<K> {
        Api::namespaced(&self.client, "default")
    }

    /// The messages of the Events with `reason` about `name` in `namespace`.
    pub fn event_messages(&self, namespace: &str, name: &str, reason: &str) -> Vec<String> {
        let events = Api::<Event>::namespaced(&self.client, namespace).list(&Default::default()).expect("events");
        events
            .items
            .into_iter()
            .filter(|e| e.involved_object.name.as_deref() == Some(name) && e.reason.as_deref() == Some(reason))
            .filter_map(|e| e.message)
            .collect()
    }

    pub fn simulated(&self) -> &SimulatedNodes {
        self.nodes.as_ref().expect("the nodes run")
    }

    /// Stops the controllers and starts them again with the same descriptors and flags.
    pub fn restart_controllers(&mut self) {
        if let Some(set) = self.set.take() {
            set.stop(Duration::from_secs(5));
        }
        self.start_controllers();
    }

    fn start_controllers(&mut self) {
        let mut set = kcm::app::start_controllers(&self.kcm, &self.options, &self.descriptors).expect("controllers");
        if let Some(names) = &self.expected_names {
            assert_eq!(&set.names(), names);
        }
        assert!(set.wait_for_sync(self.deadline), "caches sync");
        set.run_workers().expect("the controllers start");
        self.set = Some(set);
    }
}

/// How to start a `Cluster`; see [`with`].
pub struct Builder {
    backend: Backend,
    descriptors: Vec<ControllerDescriptor>,
    expected_names: Option<Vec<&'static str>>,
    flags: Vec<String>,
    apiserver_flags: Vec<String>,
    namespaces: Vec<String>,
    default_account: bool,
    node_names: Option<Vec<String>>,
    node_options: NodeOptions,
    deadline: Duration,
    temp_files: Vec<PathBuf>,
}

/// A cluster running `descriptors` under `--controllers=*`, with the `default` ServiceAccount in
/// `default` and simulated nodes node-a and node-b with `fast_nodes()` options.
pub fn with(descriptors: &[ControllerDescriptor]) -> Builder {
    Builder {
        backend: Backend::Sandbox,
        descriptors: descriptors.to_vec(),
        expected_names: None,
        flags: Vec::new(),
        apiserver_flags: Vec::new(),
        namespaces: Vec::new(),
        default_account: true,
        node_names: Some(vec!["node-a".into(), "node-b".into()]),
        node_options: fast_nodes(),
        deadline: DEADLINE,
        temp_files: Vec::new(),
    }
}

impl Builder {
    /// The API server to run on (default: the sandbox).
    pub fn on(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// Asserts that the controllers start under these names (at every start).
    pub fn names(mut self, names: &[&'static str]) -> Self {
        self.expected_names = Some(names.to_vec());
        self
    }

    /// Flags after `--controllers=*`.
    pub fn flags(mut self, flags: &[&str]) -> Self {
        self.flags.extend(flags.iter().map(|f| f.to_string()));
        self
    }

    /// Flags for the real kube-apiserver after kubeadm's (`--feature-gates=...`,
    /// `--runtime-config=...`), for a gated controller whose alpha or beta API is off by
    /// default; the sandbox has no such flags and ignores them.
    pub fn apiserver_flags(mut self, flags: &[&str]) -> Self {
        self.apiserver_flags.extend(flags.iter().map(|f| f.to_string()));
        self
    }

    /// Namespaces created first, each with its `default` ServiceAccount.
    pub fn namespaces(mut self, names: &[&str]) -> Self {
        self.namespaces.extend(names.iter().map(|n| n.to_string()));
        self
    }

    /// No `default` ServiceAccount in `default` (pods there cannot be admitted until one exists).
    pub fn without_default_account(mut self) -> Self {
        self.default_account = false;
        self
    }

    /// The simulated nodes' names (none is an empty set of nodes, still running).
    pub fn nodes(mut self, names: &[&str]) -> Self {
        self.node_names = Some(names.iter().map(|n| n.to_string()).collect());
        self
    }

    /// No simulated nodes at all.
    pub fn without_nodes(mut self) -> Self {
        self.node_names = None;
        self
    }

    pub fn node_options(mut self, options: NodeOptions) -> Self {
        self.node_options = options;
        self
    }

    /// How long the controllers' caches may take to sync.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// A file the cluster removes when dropped, after stopping the controllers.
    pub fn remove_on_drop(mut self, file: PathBuf) -> Self {
        self.temp_files.push(file);
        self
    }

    pub fn start(self) -> Cluster {
        self.start_with(|_, _| ())
    }

    /// Starts the cluster, with `prepare` run against the API before the controllers start.
    pub fn start_with(self, prepare: impl FnOnce(&Client, &TestServer)) -> Cluster {
        let server = match self.backend {
            Backend::Real if !self.apiserver_flags.is_empty() => {
                let flags: Vec<&str> = self.apiserver_flags.iter().map(String::as_str).collect();
                TestServer::Real(ControlPlane::start_with_apiserver_flags(&flags).expect("the API server starts"))
            }
            backend => TestServer::start(backend).expect("the API server starts"),
        };
        let client = Client::new(server.admin_config(), ClientOptions::default()).expect("a client");
        // Pod admission needs the namespace's default ServiceAccount.
        if self.default_account {
            create_default_account(&client, "default");
        }
        for namespace in &self.namespaces {
            let ns: Namespace = from(json!({"metadata": {"name": namespace}}));
            Api::<Namespace>::cluster(&client).create(&ns, &PostParams::default()).expect("namespace");
            create_default_account(&client, namespace);
        }
        let nodes = self.node_names.map(|names| {
            SimulatedNodes::start(server.admin_config(), names, self.node_options).expect("the nodes start")
        });
        prepare(&client, &server);
        let kcm = Client::new(server.controller_manager_config(), ClientOptions::default()).expect("a client");
        let flags: Vec<&str> = self.flags.iter().map(String::as_str).collect();
        let options = options_on(server.backend(), &flags);
        let mut cluster = Cluster {
            client,
            kcm,
            set: None,
            nodes,
            server,
            descriptors: self.descriptors,
            expected_names: self.expected_names,
            options,
            deadline: self.deadline,
            temp_files: self.temp_files,
        };
        cluster.start_controllers();
        cluster
    }
}

fn create_default_account(client: &Client, namespace: &str) {
    let account: ServiceAccount = from(json!({"metadata": {"name": "default"}}));
    Api::<ServiceAccount>::namespaced(client, namespace).create(&account, &PostParams::default()).expect("account");
}
