//! The API client against real HTTPS servers started in the test: mutual TLS, error decoding,
//! watch streams, pagination and request shapes.

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kcm::client::config::{Auth, ClientIdentity, RestConfig, TlsSettings};
use kcm::client::{
    Api, Client, ClientOptions, DeleteParams, Deleted, ListParams, Patch, PostParams, Preconditions, PropagationPolicy,
    WatchEvent, WatchParams,
};
use support::{CertAndKey, Reply, StreamEnd, TestCa, TestServer, certs, key, status};

struct Pki {
    ca: TestCa,
    serving: CertAndKey,
    client: CertAndKey,
}

fn pki() -> Pki {
    let ca = TestCa::new("kubernetes");
    let serving = ca.server_cert(&["localhost", "127.0.0.1"]);
    let client = ca.client_cert("system:kube-controller-manager", "");
    Pki { ca, serving, client }
}

fn rest_config(server: String, ca_pem: &str, identity: Option<&CertAndKey>, auth: Auth) -> RestConfig {
    RestConfig {
        server,
        tls: TlsSettings {
            ca_certs: Some(certs(ca_pem)),
            client_identity: identity
                .map(|id| ClientIdentity { cert_chain: certs(&id.cert_pem), key: key(&id.key_pem) }),
            ..TlsSettings::default()
        },
        auth,
        source: "test".into(),
    }
}

fn client(config: RestConfig) -> Client {
    Client::new(config, ClientOptions { qps: -1.0, burst: 1, timeout: Duration::from_secs(20) }).expect("client")
}

const VERSION: &str = r#"{"major":"1","minor":"33","gitVersion":"v1.33.0"}"#;

fn pod_json(name: &str, rv: &str) -> String {
    serde_json::json!({"apiVersion":"v1","kind":"Pod","metadata":{"name":name,"namespace":"default","resourceVersion":rv}})
        .to_string()
}

fn event(kind: &str, object: &str) -> String {
    format!("{{\"type\":\"{kind}\",\"object\":{object}}}\n")
}

#[test]
fn mutual_tls_with_the_right_client_certificate_succeeds() {
    let pki = pki();
    let server = TestServer::https(&pki.serving, Some(&pki.ca), |_| Reply::json(200, VERSION));
    let c = client(rest_config(server.url("https"), &pki.ca.cert_pem, Some(&pki.client), Auth::None));
    let version: serde_json::Value = c.get_json("/version").expect("GET /version over mTLS");
    assert_eq!(version["gitVersion"], "v1.33.0");
    let request = &server.requests()[0];
    assert_eq!(request.target, "/version");
    assert_eq!(request.header("Accept"), Some("application/json"));
    assert!(request.header("User-Agent").unwrap().starts_with("kube-controller-manager/v"));
    assert_eq!(request.header("Authorization"), None);
}

#[test]
fn mutual_tls_with_a_foreign_client_certificate_fails_clearly() {
    let pki = pki();
    let rogue = TestCa::new("rogue").client_cert("intruder", "");
    let server = TestServer::https(&pki.serving, Some(&pki.ca), |_| Reply::json(200, VERSION));
    let c = client(rest_config(server.url("https"), &pki.ca.cert_pem, Some(&rogue), Auth::None));
    let err = c.get_json::<serde_json::Value>("/version").unwrap_err();
    assert!(err.is_transport(), "{err}");
    assert!(err.to_string().contains("alert") || err.to_string().contains("certificate"), "{err}");

    let none = client(rest_config(server.url("https"), &pki.ca.cert_pem, None, Auth::None));
    assert!(none.get_json::<serde_json::Value>("/version").unwrap_err().is_transport());
    assert!(server.requests().is_empty(), "no request may pass the TLS check");
}

#[test]
fn a_server_certificate_from_another_ca_is_refused() {
    let pki = pki();
    let server = TestServer::https(&pki.serving, None, |_| Reply::json(200, VERSION));
    let other = TestCa::new("other");
    let c = client(rest_config(server.url("https"), &other.cert_pem, None, Auth::None));
    let err = c.get_json::<serde_json::Value>("/version").unwrap_err();
    assert!(err.is_transport() && err.to_string().contains("UnknownIssuer"), "{err}");

    let mut insecure = rest_config(server.url("https"), &other.cert_pem, None, Auth::None);
    insecure.tls.ca_certs = None;
    insecure.tls.insecure_skip_verify = true;
    client(insecure).get_json::<serde_json::Value>("/version").expect("insecure-skip-tls-verify");
}

#[test]
fn tls_server_name_overrides_the_checked_name() {
    let pki = pki();
    let serving = pki.ca.server_cert(&["kubernetes.default.svc"]);
    let server = TestServer::https(&serving, None, |_| Reply::json(200, VERSION));
    let plain = client(rest_config(server.url("https"), &pki.ca.cert_pem, None, Auth::None));
    assert!(plain.get_json::<serde_json::Value>("/version").unwrap_err().is_transport());
    let mut named = rest_config(server.url("https"), &pki.ca.cert_pem, None, Auth::None);
    named.tls.server_name = Some("kubernetes.default.svc".into());
    client(named).get_json::<serde_json::Value>("/version").expect("tls-server-name");
}

#[test]
fn bearer_token_and_controller_user_agent_are_sent() {
    let pki = pki();
    let server = TestServer::https(&pki.serving, None, |_| Reply::json(200, VERSION));
    let c = client(rest_config(server.url("https"), &pki.ca.cert_pem, None, Auth::Token("s3cret".into())));
    let rs = c.for_controller("replicaset-controller");
    rs.get_json::<serde_json::Value>("/version").unwrap();
    let request = &server.requests()[0];
    assert_eq!(request.header("Authorization"), Some("Bearer s3cret"));
    assert!(request.header("User-Agent").unwrap().ends_with(") replicaset-controller"));
}

fn error_server() -> (TestServer, Client) {
    let pki = pki();
    let server = TestServer::https(&pki.serving, None, |r| {
        let name = r.path().rsplit('/').next().unwrap_or_default().to_string();
        match name.as_str() {
            "missing" => Reply::json(404, status(404, "NotFound", "configmaps \"missing\" not found")),
            "exists" => Reply::json(409, status(409, "AlreadyExists", "configmaps \"exists\" already exists")),
            "stale" => Reply::json(409, status(409, "Conflict", "the object has been modified")),
            "gone" => Reply::json(410, status(410, "Expired", "too old resource version")),
            "forbidden" => Reply::json(403, status(403, "Forbidden", "configmaps is forbidden")),
            "unauthorized" => Reply::json(401, status(401, "Unauthorized", "Unauthorized")),
            "slow" => Reply::json(504, status(504, "Timeout", "request timed out")),
            "busy" => Reply::json(429, status(429, "TooManyRequests", "too many requests")),
            "broken" => Reply::json(500, "<html>oops</html>"),
            _ => Reply::json(
                422,
                serde_json::json!({"kind":"Status","status":"Failure","reason":"Invalid","code":422,
                    "message":"ConfigMap \"bad\" is invalid",
                    "details":{"causes":[{"field":"metadata.name","message":"Invalid value"}]}})
                .to_string(),
            ),
        }
    });
    let c = client(rest_config(server.url("https"), &pki.ca.cert_pem, None, Auth::None));
    (server, c)
}

#[test]
fn each_api_error_kind_decodes() {
    let (_server, c) = error_server();
    let api: Api<ConfigMap> = Api::namespaced(&c, "default");
    let get = |name: &str| api.get(name).unwrap_err();
    assert!(get("missing").is_not_found());
    assert!(api.get_opt("missing").unwrap().is_none());
    assert!(get("exists").is_already_exists());
    assert!(get("stale").is_conflict());
    assert!(get("gone").is_gone());
    assert!(get("forbidden").is_forbidden());
    assert!(get("unauthorized").is_unauthorized());
    assert!(get("slow").is_server_timeout());
    assert!(get("busy").is_too_many_requests());
    let broken = get("broken");
    assert!(broken.is_internal_error());
    assert!(broken.to_string().contains("oops"), "{broken}");
    let invalid = get("bad");
    assert!(invalid.is_invalid());
    assert!(invalid.to_string().contains("metadata.name: Invalid value"), "{invalid}");
}

#[test]
fn retry_after_is_honoured_on_429() {
    let pki = pki();
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let server = TestServer::https(&pki.serving, None, move |_| {
        if counter.fetch_add(1, Ordering::SeqCst) == 0 {
            Reply::Json {
                code: 429,
                body: status(429, "TooManyRequests", "slow down"),
                headers: vec![("Retry-After".into(), "1".into())],
            }
        } else {
            Reply::json(200, VERSION)
        }
    });
    let c = client(rest_config(server.url("https"), &pki.ca.cert_pem, None, Auth::None));
    c.get_json::<serde_json::Value>("/version").expect("retried after Retry-After");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[test]
fn a_refused_connection_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let pki = pki();
    let c = client(rest_config(format!("https://{addr}"), &pki.ca.cert_pem, None, Auth::None));
    assert!(c.get_json::<serde_json::Value>("/version").unwrap_err().is_transport());
}

#[test]
fn watch_decodes_events_bookmarks_and_a_410_error() {
    let pki = pki();
    let server = TestServer::https(&pki.serving, None, |_| Reply::Stream {
        chunks: vec![
            event("ADDED", &pod_json("a", "10")),
            event("MODIFIED", &pod_json("a", "11")),
            event("BOOKMARK", r#"{"kind":"Pod","apiVersion":"v1","metadata":{"resourceVersion":"12"}}"#),
            // One event split across two chunks, and two events in one chunk.
            event("DELETED", &pod_json("a", "13"))[..20].to_string(),
            format!("{}{}", &event("DELETED", &pod_json("a", "13"))[20..], event("ADDED", &pod_json("b", "14"))),
            event("ERROR", &status(410, "Expired", "too old resource version: 5 (12)")),
        ],
        end: StreamEnd::Clean,
    });
    let c = client(rest_config(server.url("https"), &pki.ca.cert_pem, None, Auth::None));
    let pods: Api<Pod> = Api::namespaced(&c, "default");
    let params = WatchParams {
        resource_version: Some("9".into()),
        allow_bookmarks: true,
        timeout_seconds: Some(300),
        ..WatchParams::default()
    };
    let events: Vec<_> = pods.watch(&params).expect("watch").collect();
    let rv = |e: &WatchEvent<Pod>| match e {
        WatchEvent::Added(p) | WatchEvent::Modified(p) | WatchEvent::Deleted(p) => {
            p.metadata.resource_version.clone().unwrap()
        }
        WatchEvent::Bookmark { resource_version } => resource_version.clone(),
    };
    assert_eq!(events.len(), 6);
    let ok: Vec<_> = events[..5].iter().map(|e| e.as_ref().expect("event")).collect();
    assert!(matches!(ok[0], WatchEvent::Added(_)) && rv(ok[0]) == "10");
    assert!(matches!(ok[1], WatchEvent::Modified(_)) && rv(ok[1]) == "11");
    assert_eq!(ok[2], &WatchEvent::Bookmark { resource_version: "12".into() });
    assert!(matches!(ok[3], WatchEvent::Deleted(_)) && rv(ok[3]) == "13");
    assert!(matches!(ok[4], WatchEvent::Added(_)) && rv(ok[4]) == "14");
    let gone = events[5].as_ref().unwrap_err();
    assert!(gone.is_gone(), "{gone}");
    assert_eq!(
        server.requests()[0].target,
        "/api/v1/namespaces/default/pods?watch=true&resourceVersion=9&allowWatchBookmarks=true&timeoutSeconds=300"
    );
}

/// As client-go's `Request.Watch`, a watch does not wait for the rate limiter; every other
/// request does.
#[test]
fn a_watch_opens_whatever_the_rate_limiter_holds() {
    let pki = pki();
    let server = TestServer::https(&pki.serving, None, |r| match r.target.contains("watch=true") {
        true => Reply::Stream { chunks: vec![event("ADDED", &pod_json("a", "10"))], end: StreamEnd::Clean },
        false => Reply::json(200, VERSION),
    });
    let config = rest_config(server.url("https"), &pki.ca.cert_pem, None, Auth::None);
    // One request a quarter of an hour once the burst is spent.
    let options = ClientOptions { qps: 1.0 / 900.0, burst: 1, timeout: Duration::from_secs(20) };
    let c = Client::new(config, options).expect("client");
    c.get_json::<serde_json::Value>("/version").expect("the burst");
    let (opened, receiver) = std::sync::mpsc::channel();
    let watcher = c.clone();
    std::thread::spawn(move || {
        let events: Vec<_> =
            Api::<Pod>::all(&watcher).watch(&WatchParams::default()).map(|w| w.count()).into_iter().collect();
        let _ = opened.send(events);
    });
    // Generous: a throttled watch would wait 15 minutes.
    let events = receiver.recv_timeout(Duration::from_secs(120)).expect("the watch opened without waiting");
    assert_eq!(events, [1], "one event, then the end of the stream");
}

#[test]
fn a_dropped_watch_connection_is_an_error_not_a_hang() {
    let pki = pki();
    let server = TestServer::https(&pki.serving, None, |_| Reply::Stream {
        chunks: vec![event("ADDED", &pod_json("a", "10"))],
        end: StreamEnd::Cut,
    });
    let c = client(rest_config(server.url("https"), &pki.ca.cert_pem, None, Auth::None));
    let mut stream = Api::<Pod>::all(&c).watch(&WatchParams::default()).unwrap();
    assert!(matches!(stream.next(), Some(Ok(WatchEvent::Added(_)))));
    let err = stream.next().expect("an error item").unwrap_err();
    assert!(err.is_transport(), "{err}");
    assert!(stream.next().is_none());
}

#[test]
fn a_silent_watch_connection_times_out_as_idle() {
    let pki = pki();
    let server = TestServer::https(&pki.serving, None, |_| Reply::Stream { chunks: vec![], end: StreamEnd::Silent });
    let c = client(rest_config(server.url("https"), &pki.ca.cert_pem, None, Auth::None));
    let params = WatchParams { idle_timeout: Some(Duration::from_millis(300)), ..WatchParams::default() };
    let mut stream = Api::<Pod>::all(&c).watch(&params).unwrap();
    let err = stream.next().expect("an error item").unwrap_err();
    assert!(err.is_transport(), "{err}");
}

#[test]
fn dropping_a_watch_receiver_closes_the_connection() {
    let pki = pki();
    let server = TestServer::https(&pki.serving, None, |_| Reply::Stream {
        chunks: vec![event("ADDED", &pod_json("a", "10"))],
        end: StreamEnd::Silent,
    });
    let c = client(rest_config(server.url("https"), &pki.ca.cert_pem, None, Auth::None));
    let receiver = Api::<Pod>::all(&c).watch_channel(&WatchParams::default(), 16).unwrap();
    assert!(matches!(receiver.recv(), Some(Ok(WatchEvent::Added(_)))));
    assert!(receiver.recv_timeout(Duration::from_millis(50)).is_err(), "nothing more arrives");
    drop(receiver);
    // Generous bound: the connection must close because of the drop, not after an idle timeout (5 min).
    assert!(server.wait_silent_stream_closed(Duration::from_secs(30)), "the watch connection stayed open");
}

#[test]
fn list_all_follows_continue_tokens() {
    let pki = pki();
    let server = TestServer::https(&pki.serving, None, |r| {
        let page = |items: &[&str], cont: &str, rv: &str| {
            let items: Vec<serde_json::Value> =
                items.iter().map(|n| serde_json::from_str(&pod_json(n, "1")).unwrap()).collect();
            Reply::json(
                200,
                serde_json::json!({"kind":"PodList","apiVersion":"v1","metadata":{"continue":cont,"resourceVersion":rv},"items":items})
                    .to_string(),
            )
        };
        if r.target.contains("continue=") { page(&["c"], "", "77") } else { page(&["a", "b"], "tok/en=", "76") }
    });
    let c = client(rest_config(server.url("https"), &pki.ca.cert_pem, None, Auth::None));
    let params = ListParams { label_selector: Some("app=web".into()), limit: Some(2), ..ListParams::default() };
    let (pods, rv) = Api::<Pod>::all(&c).list_all(&params).unwrap();
    let names: Vec<_> = pods.iter().map(|p| p.metadata.name.clone().unwrap()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert_eq!(rv, "77");
    let targets: Vec<_> = server.requests().iter().map(|r| r.target.clone()).collect();
    assert_eq!(
        targets,
        [
            "/api/v1/pods?labelSelector=app%3Dweb&limit=2",
            "/api/v1/pods?labelSelector=app%3Dweb&limit=2&continue=tok%2Fen%3D"
        ]
    );
}

#[test]
fn writes_have_the_right_method_path_content_type_and_body() {
    let pki = pki();
    let server = TestServer::https(&pki.serving, None, |r| match (r.method.as_str(), r.path()) {
        ("DELETE", "/api/v1/namespaces/default/configmaps/kept") => {
            Reply::json(200, r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kept","finalizers":["x"]}}"#)
        }
        ("DELETE", _) => Reply::json(200, r#"{"kind":"Status","apiVersion":"v1","status":"Success"}"#),
        (_, path) if path.starts_with("/api/v1/namespaces/default/configmaps") => {
            Reply::json(200, r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"}}"#)
        }
        _ => Reply::json(200, r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"ns"}}"#),
    });
    let c = client(rest_config(server.url("https"), &pki.ca.cert_pem, None, Auth::None));
    let cms: Api<ConfigMap> = Api::namespaced(&c, "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("cm".into());
    let post = PostParams { field_manager: Some("kcm".into()), ..PostParams::default() };
    cms.create(&cm, &post).unwrap();
    cms.replace("cm", &cm, &PostParams::default()).unwrap();
    cms.patch("cm", &Patch::Merge(serde_json::json!({"data":{"a":"b"}})), &PostParams::default()).unwrap();
    cms.patch("cm", &Patch::Strategic(serde_json::json!({"data":{"a":"b"}})), &PostParams::default()).unwrap();
    cms.patch("cm", &Patch::Json(serde_json::json!([{"op":"remove","path":"/data/a"}])), &PostParams::default())
        .unwrap();
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        preconditions: Some(Preconditions { uid: Some("u1".into()), resource_version: None }),
        ..DeleteParams::default()
    };
    assert!(matches!(cms.delete("cm", &dp).unwrap(), Deleted::Gone(_)));
    assert!(matches!(cms.delete("kept", &DeleteParams::default()).unwrap(), Deleted::Object(_)));
    cms.delete_collection(
        &ListParams { label_selector: Some("x=y".into()), ..ListParams::default() },
        &DeleteParams::default(),
    )
    .unwrap();
    let namespaces: Api<Namespace> = Api::cluster(&c);
    let ns: Namespace = serde_json::from_str(r#"{"metadata":{"name":"ns"}}"#).unwrap();
    namespaces.replace_subresource::<_, Namespace>("finalize", "ns", &ns, &PostParams::default()).unwrap();
    assert!(cms.get("a/b").unwrap_err().to_string().contains("not a valid object name"));
    assert!(Api::<ConfigMap>::all(&c).get("x").unwrap_err().to_string().contains("needs a namespace"));

    let seen: Vec<(String, String, Option<String>)> = server
        .requests()
        .iter()
        .map(|r| (r.method.clone(), r.target.clone(), r.header("Content-Type").map(str::to_string)))
        .collect();
    let cm_path = "/api/v1/namespaces/default/configmaps";
    let expect = |m: &str, t: &str, ct: Option<&str>| (m.to_string(), t.to_string(), ct.map(str::to_string));
    assert_eq!(
        seen,
        [
            expect("POST", &format!("{cm_path}?fieldManager=kcm"), Some("application/json")),
            expect("PUT", &format!("{cm_path}/cm"), Some("application/json")),
            expect("PATCH", &format!("{cm_path}/cm"), Some("application/merge-patch+json")),
            expect("PATCH", &format!("{cm_path}/cm"), Some("application/strategic-merge-patch+json")),
            expect("PATCH", &format!("{cm_path}/cm"), Some("application/json-patch+json")),
            expect("DELETE", &format!("{cm_path}/cm"), Some("application/json")),
            expect("DELETE", &format!("{cm_path}/kept"), None),
            expect("DELETE", &format!("{cm_path}?labelSelector=x%3Dy"), None),
            expect("PUT", "/api/v1/namespaces/ns/finalize", Some("application/json")),
        ]
    );
    let delete_body: serde_json::Value = serde_json::from_slice(&server.requests()[5].body).unwrap();
    assert_eq!(
        delete_body,
        serde_json::json!({"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Foreground","preconditions":{"uid":"u1"}})
    );
}

#[test]
fn scale_and_eviction_subresources_and_a_grace_period_reach_the_server() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::autoscaling::v1::Scale;
    use k8s_openapi::api::policy::v1::Eviction;
    let pki = pki();
    let scale = r#"{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"web"},"spec":{"replicas":3}}"#;
    let server = TestServer::https(&pki.serving, None, move |r| match r.method.as_str() {
        "DELETE" => Reply::json(200, r#"{"kind":"Status","apiVersion":"v1","status":"Success"}"#),
        "POST" => Reply::json(201, r#"{"kind":"Status","apiVersion":"v1","status":"Success"}"#),
        _ => Reply::json(200, scale),
    });
    let c = client(rest_config(server.url("https"), &pki.ca.cert_pem, None, Auth::None));
    let deployments: Api<Deployment> = Api::namespaced(&c, "default");
    let mut got: Scale = deployments.get_subresource("scale", "web").unwrap();
    assert_eq!(got.spec.as_ref().and_then(|s| s.replicas), Some(3));
    got.spec.as_mut().unwrap().replicas = Some(5);
    let _: Scale = deployments.replace_subresource("scale", "web", &got, &PostParams::default()).unwrap();
    let pods: Api<Pod> = Api::namespaced(&c, "default");
    let mut eviction = Eviction::default();
    eviction.metadata.name = Some("p".into());
    let _: serde_json::Value = pods.create_subresource("eviction", "p", &eviction, &PostParams::default()).unwrap();
    pods.delete("p", &DeleteParams { grace_period_seconds: Some(0), ..DeleteParams::default() }).unwrap();

    let requests = server.requests();
    let seen: Vec<(&str, &str)> = requests.iter().map(|r| (r.method.as_str(), r.target.as_str())).collect();
    assert_eq!(
        seen,
        [
            ("GET", "/apis/apps/v1/namespaces/default/deployments/web/scale"),
            ("PUT", "/apis/apps/v1/namespaces/default/deployments/web/scale"),
            ("POST", "/api/v1/namespaces/default/pods/p/eviction"),
            ("DELETE", "/api/v1/namespaces/default/pods/p"),
        ]
    );
    let body = |i: usize| serde_json::from_slice::<serde_json::Value>(&requests[i].body).unwrap();
    assert_eq!(body(1)["spec"]["replicas"], 5);
    assert_eq!(body(2)["metadata"]["name"], "p");
    assert_eq!(body(3), serde_json::json!({"kind":"DeleteOptions","apiVersion":"v1","gracePeriodSeconds":0}));
}

#[test]
fn requests_are_counted_in_the_client_metrics() {
    let pki = pki();
    let server = TestServer::https(&pki.serving, None, |_| Reply::json(200, VERSION));
    let c = client(rest_config(server.url("https"), &pki.ca.cert_pem, None, Auth::None));
    c.get_json::<serde_json::Value>("/version").unwrap();
    let host = server.addr.to_string();
    let metrics = kcm::client::ClientMetrics::global();
    assert_eq!(metrics.requests.get(&["200", "GET", &host]), 1.0);
    assert_eq!(metrics.duration.count(&["GET", &host]), 1);
    let text = kcm::metrics::global().render();
    // Labels sorted by name, as Go's client writes them.
    assert!(text.contains(&format!("rest_client_requests_total{{code=\"200\",host=\"{host}\",method=\"GET\"}} 1")));
}

#[test]
fn plain_http_works_for_an_explicit_master() {
    let server = TestServer::http(|_| Reply::json(200, VERSION));
    let config = RestConfig {
        server: server.url("http"),
        tls: TlsSettings::default(),
        auth: Auth::None,
        source: "--master".into(),
    };
    client(config).get_json::<serde_json::Value>("/version").expect("plain HTTP");
}
