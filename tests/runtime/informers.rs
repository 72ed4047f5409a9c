//! Shared informers against both backends over HTTPS: list and watch convergence, bookmarks,
//! handler event order and replay, indexes, cut watches, a forced relist after 410 Gone,
//! server errors, resyncs and shutdown; the watch-list sync and its fallback to a list.
//!
//! Every test waits for what it expects with a generous deadline and never asserts on timing,
//! so that it holds on a loaded machine. Each test runs its own API server: cutting watches cuts
//! every connection of a sandbox, and on the real server means killing kube-apiserver and
//! starting it again (whose fresh watch cache then answers older resourceVersions with 410).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kcm::client::{Api, Client, ClientOptions, DeleteParams, ListParams, Patch, PostParams, RestConfig};
use kcm::runtime::informer::{Event, Informer, InformerOptions, SharedInformerFactory, object_key, split_key};
use kcm_sandbox::sandbox::server::{Sandbox, SandboxOptions};
use parking_lot::Mutex;
use serde_json::json;

use crate::harness;

use harness::{Backend, TestServer};

/// The longest any expected change may take.
const DEADLINE: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(50);
/// No resyncs unless a test asks for them.
const NO_RESYNC: Duration = Duration::ZERO;

fn sandbox_with(options: SandboxOptions) -> Sandbox {
    let listen = "127.0.0.1:0".parse().expect("an address");
    Sandbox::start(SandboxOptions { listen, ..options }).expect("the sandbox starts")
}

fn sandbox() -> Sandbox {
    sandbox_with(SandboxOptions::default())
}

/// A sandbox started with `options`, or a real control plane (whose options are kubeadm's).
fn server_with(backend: Backend, options: SandboxOptions) -> TestServer {
    match backend {
        Backend::Sandbox => TestServer::Sandbox(sandbox_with(options)),
        Backend::Real => TestServer::start(backend).expect("the control plane starts"),
    }
}

fn server(backend: Backend) -> TestServer {
    server_with(backend, SandboxOptions::default())
}

fn client(config: RestConfig) -> Client {
    let options = ClientOptions { qps: -1.0, burst: 1, timeout: Duration::from_secs(30) };
    Client::new(config, options).expect("a client")
}

/// Cuts every watch (and every other connection): the sandbox drops them; kube-apiserver is
/// killed and started again. Call it from the test's own thread (the control plane's processes
/// die with the thread that started them).
fn cut_watches(server: &mut TestServer) {
    match server {
        TestServer::Sandbox(sandbox) => sandbox.close_watches(),
        TestServer::Real(plane) => {
            plane.apiserver().signal(libc::SIGKILL);
            plane.restart_apiserver().expect("kube-apiserver starts again");
        }
    }
}

/// Polls `check` until it holds, failing the test with `what` after [`DEADLINE`].
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    harness::poll_until(DEADLINE, POLL, what, || check().then_some(()));
}

/// Retries a write cut by [`cut_watches`] (which drops every connection) until the server
/// answers it, through a restarting kube-apiserver's refusals (429 while its storage
/// initializes, 5xx) too.
fn retry<T>(mut call: impl FnMut() -> kcm::client::Result<T>) -> kcm::client::Result<T> {
    let deadline = Instant::now() + DEADLINE;
    loop {
        match call() {
            Err(e)
                if (e.is_transport() || e.code().is_some_and(|c| c == 429 || c >= 500))
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(POLL)
            }
            other => return other,
        }
    }
}

fn config_maps(client: &Client) -> Api<ConfigMap> {
    Api::namespaced(client, "default")
}

fn config_map(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let labels = labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    ConfigMap {
        metadata: ObjectMeta { name: Some(name.into()), labels: Some(labels), ..ObjectMeta::default() },
        data: Some([("value".to_string(), "0".to_string())].into()),
        ..ConfigMap::default()
    }
}

/// Creates a ConfigMap in `default`; a create whose answer was cut but which went through is fine.
fn create(client: &Client, object: &ConfigMap) {
    match retry(|| config_maps(client).create(object, &PostParams::default())) {
        Ok(_) => {}
        Err(e) if e.is_already_exists() => {}
        Err(e) => panic!("creating {:?}: {e}", object.metadata.name),
    }
}

fn update(client: &Client, name: &str, value: &str) {
    let patch = Patch::Merge(json!({"data": {"value": value}}));
    retry(|| config_maps(client).patch(name, &patch, &PostParams::default()))
        .unwrap_or_else(|e| panic!("updating {name}: {e}"));
}

fn delete(client: &Client, name: &str) {
    match retry(|| config_maps(client).delete(name, &DeleteParams::default())) {
        Ok(_) => {}
        Err(e) if e.is_not_found() => {}
        Err(e) => panic!("deleting {name}: {e}"),
    }
}

/// Creates `count` ConfigMaps `prefix-N` from a few threads.
fn create_many(client: &Client, prefix: &str, count: usize) {
    const THREADS: usize = 4;
    std::thread::scope(|scope| {
        for thread in 0..THREADS {
            scope.spawn(move || {
                for i in (thread..count).step_by(THREADS) {
                    create(client, &config_map(&format!("{prefix}-{i}"), &[]));
                }
            });
        }
    });
}

/// Every ConfigMap on the server: key → resourceVersion.
fn server_config_maps(client: &Client) -> BTreeMap<String, String> {
    let (items, _) = retry(|| Api::<ConfigMap>::all(client).list_all(&ListParams::default())).expect("a list");
    items.iter().map(|o| (object_key(&o.metadata), o.metadata.resource_version.clone().unwrap_or_default())).collect()
}

fn cached(informer: &Informer<ConfigMap>) -> BTreeMap<String, String> {
    let objects = informer.store().list();
    objects.iter().map(|o| (object_key(&o.metadata), o.metadata.resource_version.clone().unwrap_or_default())).collect()
}

/// Waits until the cache holds exactly the server's ConfigMaps, at the same resourceVersions.
fn assert_converges(informer: &Informer<ConfigMap>, client: &Client) {
    let deadline = Instant::now() + DEADLINE;
    loop {
        let (server, cache) = (server_config_maps(client), cached(informer));
        if server == cache {
            return;
        }
        if Instant::now() >= deadline {
            let missing: Vec<_> = server.iter().filter(|(k, v)| cache.get(*k) != Some(v)).take(5).collect();
            let extra: Vec<_> = cache.iter().filter(|(k, v)| server.get(*k) != Some(v)).take(5).collect();
            panic!("the cache never matched the server: stale or missing {missing:?}, phantom or stale {extra:?}");
        }
        std::thread::sleep(POLL);
    }
}

/// What a handler saw, by key and resourceVersion.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Added { key: String, version: String },
    Updated { key: String, old: String, new: String, same_arc: bool },
    Deleted { key: String, version: String, final_state_unknown: bool },
}

impl Seen {
    fn of(event: &Event<ConfigMap>) -> Seen {
        let key = |o: &ConfigMap| object_key(&o.metadata);
        let version = |o: &ConfigMap| o.metadata.resource_version.clone().unwrap_or_default();
        match event {
            Event::Added(o) => Seen::Added { key: key(o), version: version(o) },
            Event::Updated { old, new } => {
                Seen::Updated { key: key(new), old: version(old), new: version(new), same_arc: Arc::ptr_eq(old, new) }
            }
            Event::Deleted { object, final_state_unknown } => {
                Seen::Deleted { key: key(object), version: version(object), final_state_unknown: *final_state_unknown }
            }
        }
    }

    fn key(&self) -> &str {
        match self {
            Seen::Added { key, .. } | Seen::Updated { key, .. } | Seen::Deleted { key, .. } => key,
        }
    }
}

/// Records every event a handler receives.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<Seen>>>);

impl Recorder {
    fn attach(informer: &Informer<ConfigMap>) -> Recorder {
        let recorder = Recorder::default();
        let seen = recorder.0.clone();
        informer.add_handler(move |event| seen.lock().push(Seen::of(event)));
        recorder
    }

    fn all(&self) -> Vec<Seen> {
        self.0.lock().clone()
    }

    fn of(&self, key: &str) -> Vec<Seen> {
        self.all().into_iter().filter(|s| s.key() == key).collect()
    }
}

fn version(informer: &Informer<ConfigMap>, key: &str) -> Option<String> {
    informer.store().get(key).and_then(|o| o.metadata.resource_version.clone())
}

on_both_backends!(caches_converge_after_list_and_watch);
fn caches_converge_after_list_and_watch(backend: Backend) {
    // Bookmarks every second on the sandbox, so that watches see them.
    let options = SandboxOptions { bookmark_interval: Duration::from_secs(1), ..SandboxOptions::default() };
    let server = server_with(backend, options);
    let client = client(server.admin_config());
    create_many(&client, "before", 1200);
    let factory = SharedInformerFactory::new(client.clone(), NO_RESYNC);
    let informer = factory.informer::<ConfigMap>();
    assert!(Arc::ptr_eq(&informer, &factory.informer::<ConfigMap>()), "one informer per kind");
    factory.start();
    assert!(factory.wait_for_sync(DEADLINE), "the ConfigMap informer syncs");
    assert!(informer.has_synced());
    // The API server keeps ConfigMaps of its own in kube-system.
    assert_eq!(informer.store().list_namespace("default").len(), 1200, "the list is complete");

    create_many(&client, "after", 30);
    for i in 0..10 {
        update(&client, &format!("before-{i}"), "changed");
        delete(&client, &format!("before-{}", 100 + i));
    }
    assert_converges(&informer, &client);
    assert_eq!(
        informer.store().get_by_name("default", "after-7").map(|o| object_key(&o.metadata)),
        Some("default/after-7".into())
    );

    // An informer requested after start runs once start is called again.
    let secret =
        Secret { metadata: ObjectMeta { name: Some("token".into()), ..ObjectMeta::default() }, ..Secret::default() };
    Api::<Secret>::namespaced(&client, "default").create(&secret, &PostParams::default()).expect("a Secret");
    let secrets = factory.informer::<Secret>();
    factory.start();
    assert!(factory.wait_for_sync(DEADLINE), "the Secret informer syncs");
    assert!(secrets.store().get("default/token").is_some());
    factory.shutdown();
}

on_both_backends!(handler_sees_added_updated_deleted_in_order);
fn handler_sees_added_updated_deleted_in_order(backend: Backend) {
    let server = server(backend);
    let client = client(server.admin_config());
    let factory = SharedInformerFactory::new(client.clone(), NO_RESYNC);
    let informer = factory.informer::<ConfigMap>();
    let recorder = Recorder::attach(&informer);
    factory.start();
    assert!(factory.wait_for_sync(DEADLINE));

    create(&client, &config_map("one", &[]));
    update(&client, "one", "1");
    update(&client, "one", "2");
    delete(&client, "one");
    eventually("the deletion of one", || matches!(recorder.of("default/one").last(), Some(Seen::Deleted { .. })));

    let seen = recorder.of("default/one");
    assert_eq!(seen.len(), 4, "{seen:?}");
    let Seen::Added { version: v1, .. } = &seen[0] else { panic!("{seen:?}") };
    let Seen::Updated { old: o2, new: v2, same_arc: false, .. } = &seen[1] else { panic!("{seen:?}") };
    let Seen::Updated { old: o3, new: v3, same_arc: false, .. } = &seen[2] else { panic!("{seen:?}") };
    let Seen::Deleted { version: v4, final_state_unknown: false, .. } = &seen[3] else { panic!("{seen:?}") };
    assert_eq!((o2, o3), (v1, v2), "each update starts from the previous state");
    let numbers: Vec<u64> = [v1, v2, v3, v4].iter().map(|v| v.parse().expect("a numeric resourceVersion")).collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
    assert!(informer.store().get("default/one").is_none());
    factory.shutdown();
}

on_both_backends!(a_handler_added_after_sync_gets_the_replay);
fn a_handler_added_after_sync_gets_the_replay(backend: Backend) {
    let server = server(backend);
    let client = client(server.admin_config());
    create_many(&client, "early", 5);
    let factory = SharedInformerFactory::new(client.clone(), NO_RESYNC);
    let informer = factory.informer::<ConfigMap>();
    factory.start();
    assert!(factory.wait_for_sync(DEADLINE));

    let recorder = Recorder::attach(&informer);
    // Only ours: the API server keeps ConfigMaps of its own in kube-system.
    let ours = |seen: &[Seen]| seen.iter().filter(|s| s.key().starts_with("default/")).count();
    let mut replayed: Vec<String> =
        recorder.all().iter().map(|s| s.key().to_string()).filter(|k| k.starts_with("default/")).collect();
    replayed.sort();
    assert_eq!(replayed, (0..5).map(|i| format!("default/early-{i}")).collect::<Vec<_>>());
    assert!(recorder.all().iter().all(|s| matches!(s, Seen::Added { .. })));

    create(&client, &config_map("late", &[]));
    eventually("the late object", || recorder.of("default/late").len() == 1);
    assert_eq!(ours(&recorder.all()), 6);
    factory.shutdown();
}

on_both_backends!(custom_and_built_in_indexes);
fn custom_and_built_in_indexes(backend: Backend) {
    let server = server(backend);
    let client = client(server.admin_config());
    let other = Namespace {
        metadata: ObjectMeta { name: Some("other".into()), ..ObjectMeta::default() },
        ..Namespace::default()
    };
    Api::<Namespace>::cluster(&client).create(&other, &PostParams::default()).expect("a namespace");
    let factory = SharedInformerFactory::new(client.clone(), NO_RESYNC);
    let informer = factory.informer::<ConfigMap>();
    informer.add_index("team", |cm: &ConfigMap| {
        cm.metadata.labels.iter().flatten().filter(|(k, _)| *k == "team").map(|(_, v)| v.clone()).collect()
    });
    create(&client, &config_map("a1", &[("team", "a")]));
    create(&client, &config_map("b1", &[("team", "b")]));
    factory.start();
    assert!(factory.wait_for_sync(DEADLINE));

    let mut owned = config_map("a2", &[("team", "a")]);
    owned.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: "a1".into(),
        uid: "owner-uid-1".into(),
        ..OwnerReference::default()
    }]);
    create(&client, &owned);
    let mut elsewhere = config_map("c1", &[("team", "c")]);
    elsewhere.metadata.namespace = Some("other".into());
    Api::<ConfigMap>::namespaced(&client, "other").create(&elsewhere, &PostParams::default()).expect("c1");

    let keys = |objects: Vec<Arc<ConfigMap>>| {
        let mut keys: Vec<String> = objects.iter().map(|o| object_key(&o.metadata)).collect();
        keys.sort();
        keys
    };
    eventually("team a indexed", || keys(informer.store().by_index("team", "a")) == ["default/a1", "default/a2"]);
    assert_eq!(keys(informer.store().by_index("owner-uid", "owner-uid-1")), ["default/a2"]);
    eventually("namespace other indexed", || keys(informer.store().list_namespace("other")) == ["other/c1"]);
    assert_eq!(keys(informer.store().by_index("namespace", "default")).len(), 3);

    // A relabelled object moves between index values.
    let patch = Patch::Merge(json!({"metadata": {"labels": {"team": "b"}}}));
    config_maps(&client).patch("a1", &patch, &PostParams::default()).expect("relabel");
    eventually("a1 moved to team b", || keys(informer.store().by_index("team", "b")) == ["default/a1", "default/b1"]);
    assert_eq!(keys(informer.store().by_index("team", "a")), ["default/a2"]);
    assert_eq!(split_key("other/c1"), ("other", "c1"));
    factory.shutdown();
}

on_both_backends!(cut_watches_lose_no_update_and_leave_no_phantom);
fn cut_watches_lose_no_update_and_leave_no_phantom(backend: Backend) {
    let mut server = server(backend);
    let client = client(server.admin_config());
    let factory = SharedInformerFactory::new(client.clone(), NO_RESYNC);
    let informer = factory.informer::<ConfigMap>();
    let recorder = Recorder::attach(&informer);
    factory.start();
    assert!(factory.wait_for_sync(DEADLINE));

    let writing = AtomicBool::new(true);
    std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut round = 0;
            while writing.load(Ordering::Relaxed) || round < 20 {
                let name = format!("w-{}", round % 15);
                create(&client, &config_map(&name, &[]));
                update(&client, &name, &round.to_string());
                if round % 3 == 0 {
                    delete(&client, &format!("w-{}", (round + 7) % 15));
                }
                round += 1;
            }
        });
        // A kube-apiserver restart takes seconds: fewer cuts there, each a longer gap.
        let cuts = if backend == Backend::Real { 3 } else { 8 };
        for _ in 0..cuts {
            std::thread::sleep(Duration::from_millis(300));
            cut_watches(&mut server);
        }
        writing.store(false, Ordering::Relaxed);
    });
    assert_converges(&informer, &client);

    // Per object, the events chain: each one starts where the previous ended.
    let seen = recorder.all();
    let mut last: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    for event in &seen {
        let previous = last.get(event.key()).copied().flatten();
        match event {
            Seen::Added { key, version } => {
                assert_eq!(previous, None, "{key} added twice");
                last.insert(key, Some(version));
            }
            Seen::Updated { key, old, new, .. } => {
                assert_eq!(previous, Some(old.as_str()), "{key}: an update from an unseen state");
                last.insert(key, Some(new));
            }
            Seen::Deleted { key, .. } => {
                assert!(previous.is_some(), "{key}: deleted but never added");
                last.insert(key, None);
            }
        }
    }
    factory.shutdown();
}

/// Requests of `verb` on ConfigMaps the sandbox has served so far (its audit log).
fn config_map_requests(sandbox: &Sandbox, verb: &str) -> usize {
    sandbox.audit().entries().iter().filter(|e| e.resource == "configmaps" && e.verb == verb).count()
}

/// client-go v1.36's informers sync with a watch-list (its WatchListClient gate, on by
/// default): one watch with `sendInitialEvents`, no list, and that same watch carries the
/// changes after the sync. A server that refuses it (its WatchList gate off: 422) gets a list
/// instead, in the same ListAndWatch; with the client's gate off, the informer lists first.
// Sandbox only: it switches the server's WatchList gate and counts requests in its audit log.
#[test]
fn informers_sync_with_a_watch_list_or_fall_back_to_a_list() {
    // (the server's WatchList gate, the client's WatchListClient gate, lists, watches): a
    // refused watch-list counts as a watch.
    for (server_gate, client_gate, lists, watches) in [(true, true, 0, 1), (false, true, 1, 2), (true, false, 1, 1)] {
        let case = format!("server WatchList {server_gate}, client WatchListClient {client_gate}");
        let sandbox = sandbox_with(SandboxOptions { watch_list: server_gate, ..SandboxOptions::default() });
        let client = client(sandbox.admin_config());
        create_many(&client, "cm", 20);
        let options = InformerOptions { watch_list: client_gate, ..InformerOptions::new(NO_RESYNC) };
        let factory = SharedInformerFactory::with_options(client.clone(), options);
        let informer = factory.informer::<ConfigMap>();
        let recorder = Recorder::attach(&informer);
        factory.start();
        assert!(factory.wait_for_sync(DEADLINE), "{case}: synced");
        assert_eq!(informer.store().list_namespace("default").len(), 20, "{case}");
        let synced_at = informer.last_sync_resource_version();
        assert_eq!(informer.store().last_store_sync_resource_version(), synced_at, "{case}");

        update(&client, "cm-3", "changed");
        eventually("the update", || recorder.of("default/cm-3").len() == 2);
        assert!(matches!(recorder.of("default/cm-3").as_slice(), [Seen::Added { .. }, Seen::Updated { .. }]));
        for i in 0..20 {
            assert!(matches!(recorder.of(&format!("default/cm-{i}")).first(), Some(Seen::Added { .. })), "{case}");
        }
        assert_eq!(config_map_requests(&sandbox, "list"), lists, "{case}: lists");
        assert_eq!(config_map_requests(&sandbox, "watch"), watches, "{case}: one watch carries on after the sync");
        assert_converges(&informer, &client);
        factory.shutdown();
    }
}

/// client-go does not rate limit watches (`Request.Watch`): an informer's watch opens as soon
/// as its list is done, however many requests the client's limiter holds back. A watch behind
/// the limiter left a synced cache blind for seconds at start-up, so a controller could see a
/// pod before the volume written before it.
// Sandbox only: it counts the watch in its audit log.
#[test]
fn an_informer_watches_right_after_its_list_whatever_the_rate_limiter_holds() {
    let sandbox = sandbox();
    let admin = client(sandbox.admin_config());
    create(&admin, &config_map("before", &[]));
    // One request a quarter of an hour once the burst is spent: the list takes the burst.
    let options = ClientOptions { qps: 1.0 / 900.0, burst: 1, timeout: Duration::from_secs(30) };
    let limited = Client::new(sandbox.admin_config(), options).expect("a client");
    let options = InformerOptions { watch_list: false, ..InformerOptions::new(NO_RESYNC) };
    let factory = SharedInformerFactory::with_options(limited, options);
    let informer = factory.informer::<ConfigMap>();
    factory.start();
    assert!(factory.wait_for_sync(DEADLINE), "synced");
    eventually("the watch", || config_map_requests(&sandbox, "watch") == 1);
    create(&admin, &config_map("after", &[]));
    eventually("the new ConfigMap in the cache", || informer.store().get("default/after").is_some());
    assert_eq!(config_map_requests(&sandbox, "list"), 1);
    factory.shutdown();
}

/// Bookmarks carry the revision of writes to other kinds: after the history is compacted past
/// the last ConfigMap change and the watch is cut, the reflector watches again from the
/// bookmark's resourceVersion, which the server still has, instead of relisting.
// Sandbox only: kube-apiserver sends bookmarks about once a minute, keeps no request log a test
// can read, and compacts on its own schedule; restarting it resets its watch cache, after which
// every older resourceVersion is Gone.
#[test]
fn bookmarks_let_a_quiet_informer_rewatch_after_compaction_without_relisting() {
    let sandbox =
        sandbox_with(SandboxOptions { bookmark_interval: Duration::from_secs(1), ..SandboxOptions::default() });
    let client = client(sandbox.admin_config());
    create(&client, &config_map("quiet", &[]));
    let factory = SharedInformerFactory::new(client.clone(), NO_RESYNC);
    let informer = factory.informer::<ConfigMap>();
    factory.start();
    assert!(factory.wait_for_sync(DEADLINE));
    let revision = |v: String| v.parse::<u64>().expect("a numeric resourceVersion");
    let last_config_map_change = revision(version(&informer, "default/quiet").expect("cached"));

    // Other kinds move the revision on; the ConfigMap watch only learns of it from bookmarks.
    let secrets = Api::<Secret>::namespaced(&client, "default");
    for i in 0..5 {
        let secret = Secret {
            metadata: ObjectMeta { name: Some(format!("s-{i}")), ..ObjectMeta::default() },
            ..Secret::default()
        };
        secrets.create(&secret, &PostParams::default()).expect("a Secret");
    }
    let written = sandbox.store().revision();
    assert!(written > last_config_map_change);
    eventually("a bookmark at the latest revision", || revision(informer.last_sync_resource_version()) >= written);

    let lists = config_map_requests(&sandbox, "list");
    let watches = config_map_requests(&sandbox, "watch");
    sandbox.compact();
    sandbox.close_watches();
    update(&client, "quiet", "changed");
    eventually("the update after the cut", || {
        informer.store().get("default/quiet").is_some_and(|o| o.data.as_ref().is_some_and(|d| d["value"] == "changed"))
    });
    assert!(config_map_requests(&sandbox, "watch") > watches, "the informer watched again");
    assert_eq!(config_map_requests(&sandbox, "list"), lists, "no relist: the bookmark's resourceVersion was kept");
    factory.shutdown();
}

on_both_backends!(gone_relists_and_delivers_the_difference);
/// Blocks the informer's handlers (and so its reflector) at the first update of `gate` until
/// released: the informer sits on an old resourceVersion while the test writes, compacts the
/// history and cuts the watch, which forces a 410 and a relist. On the real server the watch is
/// cut by restarting kube-apiserver, whose new watch cache starts past the informer's
/// resourceVersion (a Secret written first moves the revision on): the same 410.
fn gone_relists_and_delivers_the_difference(backend: Backend) {
    // No bookmarks: they would move the informer's resourceVersion past the compaction.
    let options = SandboxOptions { bookmark_interval: Duration::from_secs(3600), ..SandboxOptions::default() };
    let mut server = server_with(backend, options);
    let client = client(server.admin_config());
    for name in ["keep", "doomed-1", "doomed-2", "doomed-3", "changed", "reborn", "gate"] {
        create(&client, &config_map(name, &[]));
    }
    let factory = SharedInformerFactory::new(client.clone(), NO_RESYNC);
    let informer = factory.informer::<ConfigMap>();
    let recorder = Recorder::attach(&informer);
    // Declared after the factory, so dropped before it on a failure: the gate then opens.
    let (blocked_tx, blocked) = crossbeam_channel::bounded::<()>(1);
    let (release, release_rx) = crossbeam_channel::bounded::<()>(1);
    let armed = AtomicBool::new(true);
    informer.add_handler(move |event| {
        let is_gate = event.object().metadata.name.as_deref() == Some("gate");
        if is_gate && matches!(event, Event::Updated { .. }) && armed.swap(false, Ordering::SeqCst) {
            let _ = blocked_tx.send(());
            let _ = release_rx.recv_timeout(DEADLINE);
        }
    });
    factory.start();
    assert!(factory.wait_for_sync(DEADLINE));

    update(&client, "gate", "closed");
    blocked.recv_timeout(DEADLINE).expect("the handler blocks on the gate");
    let gate_version = version(&informer, "default/gate");
    if backend == Backend::Real {
        let secret = Secret {
            metadata: ObjectMeta { name: Some("elsewhere".into()), ..ObjectMeta::default() },
            ..Secret::default()
        };
        Api::<Secret>::namespaced(&client, "default").create(&secret, &PostParams::default()).expect("a Secret");
    }
    cut_watches(&mut server);
    for name in ["doomed-1", "doomed-2", "doomed-3", "reborn"] {
        delete(&client, name);
    }
    update(&client, "changed", "1");
    create(&client, &config_map("new", &[]));
    create(&client, &config_map("reborn", &[]));
    if let Some(sandbox) = server.sandbox() {
        sandbox.compact();
    }
    let _ = release.send(());

    eventually("the relist", || recorder.of("default/new").len() == 1);
    assert_converges(&informer, &client);
    assert_ne!(version(&informer, "default/gate"), None);
    assert_eq!(version(&informer, "default/gate"), gate_version, "the gate did not change");
    for doomed in ["default/doomed-1", "default/doomed-2", "default/doomed-3"] {
        let seen = recorder.of(doomed);
        assert!(
            matches!(seen.last(), Some(Seen::Deleted { final_state_unknown: true, .. })),
            "{doomed} was deleted while the watch was away: {seen:?}"
        );
    }
    assert!(matches!(recorder.of("default/new").as_slice(), [Seen::Added { .. }]));
    assert!(matches!(recorder.of("default/changed").last(), Some(Seen::Updated { same_arc: false, .. })));
    // Deleted and created again while away: one update to the new incarnation.
    assert!(matches!(recorder.of("default/reborn").last(), Some(Seen::Updated { .. })));
    let unchanged = recorder.of("default/keep");
    assert_eq!(unchanged.len(), 1, "an unchanged object gets no event from the relist: {unchanged:?}");
    factory.shutdown();
}

// Sandbox only: it needs injected 500 and 429 answers.
#[test]
fn server_errors_are_retried_until_the_caches_sync() {
    let sandbox = sandbox();
    let client = client(sandbox.admin_config());
    create(&client, &config_map("there", &[]));
    sandbox.faults().fail_next(5, 500, None).expect("a fault");
    let factory = SharedInformerFactory::new(client.clone(), NO_RESYNC);
    let informer = factory.informer::<ConfigMap>();
    let secrets = factory.informer::<Secret>();
    let namespaces = factory.informer::<Namespace>();
    factory.start();
    assert!(factory.wait_for_sync(DEADLINE), "the informers sync despite the 500s");
    assert!(informer.store().get("default/there").is_some());
    assert!(secrets.has_synced());
    assert!(namespaces.store().get("kube-system").is_some(), "cluster-scoped keys are bare names");

    // Throttled with Retry-After while the watches re-open: they wait and come back.
    sandbox.faults().fail_next(4, 429, Some(1)).expect("a fault");
    sandbox.close_watches();
    create(&client, &config_map("later", &[]));
    assert_converges(&informer, &client);
    factory.shutdown();
}

on_both_backends!(resync_delivers_updates_with_the_same_object);
fn resync_delivers_updates_with_the_same_object(backend: Backend) {
    let server = server(backend);
    let client = client(server.admin_config());
    create(&client, &config_map("steady", &[]));
    let factory = SharedInformerFactory::new(client.clone(), Duration::from_millis(200));
    let informer = factory.informer::<ConfigMap>();
    let period = informer.resync_period().expect("a resync period");
    assert!(period >= Duration::from_millis(200) && period <= Duration::from_millis(400), "{period:?}");
    let recorder = Recorder::attach(&informer);
    factory.start();
    assert!(factory.wait_for_sync(DEADLINE));
    let resyncs =
        || recorder.of("default/steady").iter().filter(|s| matches!(s, Seen::Updated { same_arc: true, .. })).count();
    eventually("two resyncs", || resyncs() >= 2);
    let seen = recorder.of("default/steady");
    assert!(matches!(seen.first(), Some(Seen::Added { .. })));
    assert!(seen[1..].iter().all(|s| matches!(s, Seen::Updated { old, new, same_arc: true, .. } if old == new)));
    factory.shutdown();
}

/// Names of this process's threads (Linux), to see reflector threads come and go.
#[cfg(target_os = "linux")]
fn threads_named(prefix: &str) -> usize {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .filter(|name| name.trim_end().starts_with(prefix))
        .count()
}

/// Shuts the factory down on another thread; fails if that does not return in time.
fn shutdown_within_deadline(factory: SharedInformerFactory) {
    let (done, finished) = crossbeam_channel::bounded(1);
    std::thread::spawn(move || {
        factory.shutdown();
        let _ = done.send(());
    });
    finished.recv_timeout(DEADLINE).expect("shutdown returns");
}

/// Held by the one test that counts this process's reflector threads, which its runs on either
/// backend would otherwise both start.
static THREAD_COUNTING: Mutex<()> = Mutex::new(());

// PriorityClass informers (cluster-scoped) appear in this test only, so that their thread
// names identify them.
on_both_backends!(shutdown_stops_the_threads_promptly);
fn shutdown_stops_the_threads_promptly(backend: Backend) {
    let _serial = THREAD_COUNTING.lock();
    let mut server = server(backend);
    let client = client(server.admin_config());
    let factory = SharedInformerFactory::new(client.clone(), NO_RESYNC);
    let informer = factory.informer::<PriorityClass>();
    let events = Arc::new(AtomicUsize::new(0));
    let counter = events.clone();
    informer.add_handler(move |_: &Event<PriorityClass>| {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    factory.start();
    assert!(factory.wait_for_sync(DEADLINE));
    assert!(informer.store().get("system-node-critical").is_some());
    // Once its watch is open, an informer has no thread of its own: the watch poller reads it.
    #[cfg(target_os = "linux")]
    eventually("the reflector's list thread to end", || threads_named("informer-priori") == 0);
    shutdown_within_deadline(factory);

    // The informer no longer follows the server.
    let before = events.load(Ordering::SeqCst);
    let class = PriorityClass {
        metadata: ObjectMeta { name: Some("late".into()), ..ObjectMeta::default() },
        value: Some(10),
        ..PriorityClass::default()
    };
    Api::<PriorityClass>::cluster(&client).create(&class, &PostParams::default()).expect("a PriorityClass");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(events.load(Ordering::SeqCst), before);
    assert!(informer.store().get("late").is_none());

    // A reflector backing off from an unreachable server stops promptly too.
    match &mut server {
        TestServer::Sandbox(sandbox) => sandbox.pause(),
        TestServer::Real(plane) => {
            plane.apiserver().stop(Duration::from_secs(5));
        }
    }
    let factory = SharedInformerFactory::new(client, NO_RESYNC);
    let unsynced = factory.informer::<PriorityClass>();
    factory.start();
    assert!(!factory.wait_for_sync(Duration::from_millis(300)));
    assert!(!unsynced.has_synced());
    shutdown_within_deadline(factory);
    #[cfg(target_os = "linux")]
    eventually("the reflector thread to end", || threads_named("informer-priori") == 0);
}
