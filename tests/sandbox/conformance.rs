//! The sandbox against the real kube-apiserver v1.36.2: the same requests to both, as a cluster
//! admin (and a user without rights), and the answers compared by shape — status code, kind,
//! apiVersion, the top-level and metadata keys, `items` null or [] or how many, watch event
//! types, and for errors the Status reason, code, message and details. Every difference is a
//! sandbox bug, or one of [`KNOWN`] with its reason.
//!
//! Each test starts one server of each backend (the sandbox with RBAC, as kubeadm's server) and
//! is skipped, loudly, where the real server's binaries are missing.

use std::io::{BufReader, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use kcm::client::RestConfig;
use kcm_envtest::envtest::{Backend, TestServer};
use serde_json::{Value, json};

use crate::support::http;

/// Differences that are understood and accepted: (check, the start of the JSON path, reason).
const KNOWN: &[(&str, &str, &str)] = &[
    (
        "watch with bookmarks, the kind quiet",
        ".bookmark",
        "kube-apiserver's watch cache sends a bookmark only when it has seen a change to the kind after \
         the watch's start (its resourceVersion is the kind's latest); the sandbox sends one every \
         --bookmark-interval and 2 s before the timeout, at the store's latest revision, whatever \
         changed. Kept: the sandbox has one change history for all kinds, so without those bookmarks a \
         quiet informer would be sent back to relist after a compaction, which kube-apiserver's \
         per-kind watch cache does not do.",
    ),
    (
        "watch with sendInitialEvents (WatchList on since 1.34): the state, then a bookmark",
        ".events",
        "the test bed's etcd (Debian's 3.4) has no RequestWatchProgress, without which kube-apiserver \
         answers such a watch with a 500 (\"the required storage feature RequestWatchProgress is \
         disabled\"); with etcd 3.5.13 or later it sends the state, then the bookmark that ends the \
         initial events, as the sandbox does.",
    ),
];

/// Keys left out of the compared key sets. `managedFields`: the sandbox does not track field
/// managers (server-side apply is out of its scope); no controller reads them.
const IGNORED_KEYS: &[&str] = &["managedFields"];

/// How long a request (or a watch) may take on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(30);
/// How long a watch is asked again while kube-apiserver's watch cache is behind etcd (see
/// `Server::watch`): each answer takes up to 3 s, and a loaded machine's kube-apiserver may
/// write something else between the ConfigMap that moves the cache on and the watch.
const WATCH_CACHE_PATIENCE: Duration = Duration::from_secs(120);
const NS: &str = "conf";

// ---------------------------------------------------------------------------------------------
// Both servers
// ---------------------------------------------------------------------------------------------

struct Server {
    server: TestServer,
    addr: SocketAddr,
}

impl Server {
    fn start(backend: Backend) -> Server {
        let server = crate::rbac_server(backend);
        let url = server.url();
        let addr = url.trim_start_matches("https://").parse().expect("https://IP:port");
        let server = Server { server, addr };
        let created = server.admin("POST", "/api/v1/namespaces", &[], &json!({"metadata": {"name": NS}}));
        assert_eq!(created.code, 201, "{}", created.text());
        server
    }

    fn name(&self) -> &'static str {
        self.server.backend().name()
    }

    fn admin(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &Value) -> Answer {
        self.request(&self.server.admin_config(), method, path, headers, body)
    }

    fn get(&self, path: &str) -> Answer {
        self.admin("GET", path, &[], &Value::Null)
    }

    /// A watch from the latest state, asked again while kube-apiserver answers that its watch
    /// cache has not caught up with etcd yet (an ERROR event, 504 "Too large resource
    /// version", `retryAfterSeconds` 1), as a reflector retries it.
    ///
    /// Since WatchList (1.34) such a watch waits for the kind's cache to reach etcd's current
    /// revision. With etcd 3.5.13 or later kube-apiserver asks etcd for a progress
    /// notification and the cache is there at once; the test bed's etcd (Debian's 3.4.23) has
    /// no such request, so the cache moves only on the kind's next write (or etcd's
    /// ten-minute progress notification). Any write of another kind since the kind's last
    /// one, such as kube-apiserver renewing its identity Lease, leaves it behind. A real
    /// cluster writes ConfigMaps and claims all the time; here nothing does, so before asking
    /// again this creates `nudge` (an object of the kind with a `generateName`) in the
    /// `default` collection `nudge_collection`, outside every compared answer.
    fn watch(&self, path: &str, nudge_collection: &str, nudge: &Value) -> Answer {
        let deadline = Instant::now() + WATCH_CACHE_PATIENCE;
        loop {
            let answer = self.get(path);
            let first = answer.events().into_iter().next().unwrap_or_default();
            let cache_behind = first["type"] == "ERROR"
                && first["object"]["details"]["causes"][0]["reason"] == "ResourceVersionTooLarge";
            if !cache_behind || Instant::now() >= deadline {
                return answer;
            }
            let written = self.admin("POST", nudge_collection, &[], nudge);
            assert_eq!(written.code, 201, "{nudge_collection}: a write to move the watch cache on: {}", written.text());
        }
    }

    fn request(&self, config: &RestConfig, method: &str, path: &str, headers: &[(&str, &str)], body: &Value) -> Answer {
        let body = if body.is_null() { Vec::new() } else { body.to_string().into_bytes() };
        let mut stream = http::connect(self.addr, config, PATIENCE);
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\nContent-Length: {}\r\n",
            self.addr,
            body.len()
        );
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("Accept")) {
            head.push_str("Accept: application/json\r\n");
        }
        if !body.is_empty() && !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("Content-Type")) {
            head.push_str("Content-Type: application/json\r\n");
        }
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(&body).unwrap();
        stream.flush().unwrap();
        let response = http::read_response(&mut BufReader::new(stream));
        Answer { code: response.code, body: response.body }
    }
}

struct Answer {
    code: u16,
    body: Vec<u8>,
}

impl Answer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|_| Value::String(self.text()))
    }

    /// The events of a watch's body, one JSON document per line.
    fn events(&self) -> Vec<Value> {
        let text = self.text();
        serde_json::Deserializer::from_str(&text).into_iter::<Value>().map(|e| e.expect("a watch event")).collect()
    }

    /// The answer's shape: code and [`shape`] of the body.
    fn shape(&self) -> Value {
        json!({"code": self.code, "body": shape(&self.json())})
    }
}

/// What is compared of a body: for a Status its fields (message normalised); for a list its
/// kind, apiVersion, keys, metadata keys, `items` (null, or how many) and the first item's keys;
/// for an object its kind, apiVersion, keys and metadata keys.
fn shape(body: &Value) -> Value {
    let Some(map) = body.as_object() else { return json!({"text": normalise(body.as_str().unwrap_or_default())}) };
    let keys = |v: &Value| -> Vec<String> {
        let keys = v.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()).unwrap_or_default();
        keys.into_iter().filter(|k| !IGNORED_KEYS.contains(&k.as_str())).collect()
    };
    if body["kind"] == "Status" {
        let mut status = body.clone();
        status["message"] = json!(normalise(body["message"].as_str().unwrap_or_default()));
        if let Some(uid) = status["details"].get_mut("uid") {
            *uid = json!("<uid>");
        }
        if let Some(causes) = status["details"]["causes"].as_array_mut() {
            for cause in causes {
                cause["message"] = json!(normalise(cause["message"].as_str().unwrap_or_default()));
            }
        }
        return status;
    }
    let mut out = json!({"kind": body["kind"], "apiVersion": body["apiVersion"], "keys": keys(body),
                         "metadata": keys(&body["metadata"])});
    if map.contains_key("items") {
        out["items"] = match &body["items"] {
            Value::Array(items) => json!(items.len()),
            other => other.clone(),
        };
        if let Some(first) = body["items"].get(0) {
            out["item"] = json!({"kind": first["kind"], "apiVersion": first["apiVersion"], "keys": keys(first),
                                 "metadata": keys(&first["metadata"])});
        }
    }
    out
}

/// The sandbox's stand-ins for the internal pod types it does not render (see
/// [`INTERNAL_POD_JSON`]), already elided: `core.PodTemplateSpec{...}`.
const GO_STRUCT_DUMPS: &[&str] = &["core.PodTemplateSpec{", "core.PodSpec{"];

/// `message` with each of [`GO_STRUCT_DUMPS`] cut to `Type{...}`.
fn elide_go_structs(message: &str) -> String {
    let mut out = String::new();
    let mut rest = message;
    while let Some((at, prefix)) =
        GO_STRUCT_DUMPS.iter().filter_map(|p| rest.find(p).map(|at| (at, *p))).min_by_key(|(at, _)| *at)
    {
        out.push_str(&rest[..at + prefix.len()]);
        out.push_str("...}");
        let mut depth = 1;
        let body = &rest[at + prefix.len()..];
        let end = body
            .char_indices()
            .find(|(_, c)| {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .map_or(body.len(), |(i, _)| i + 1);
        rest = &body[end..];
    }
    out.push_str(rest);
    out
}

/// The JSON of the internal pod types a field error shows since v1.34 (hundreds of Go-named
/// fields, which the sandbox does not render): a pod template (its embedded metadata, then
/// `Spec`), a pod spec. Each is cut to the `Type{...}` the sandbox shows instead.
const INTERNAL_POD_JSON: &[(&str, &str)] =
    &[("\"Spec\":{\"Volumes\":", "core.PodTemplateSpec{...}"), ("{\"Volumes\":", "core.PodSpec{...}")];

/// The end (exclusive) of the JSON object starting at `text[0]` (`{`), strings skipped.
fn json_object_end(text: &str) -> usize {
    let (mut depth, mut in_string, mut escaped) = (0, false, false);
    for (i, c) in text.char_indices() {
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (true, false, '"') => in_string = false,
            (true, false, _) => {}
            (false, _, '"') => in_string = true,
            (false, _, '{') => depth += 1,
            (false, _, '}') => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    text.len()
}

/// `message` with each `Invalid value: {…}` that is one of [`INTERNAL_POD_JSON`] elided.
fn elide_internal_pod_json(message: &str) -> String {
    const VALUE: &str = "Invalid value: {";
    let mut out = String::new();
    let mut rest = message;
    while let Some(at) = rest.find(VALUE) {
        let start = at + VALUE.len() - 1;
        out.push_str(&rest[..start]);
        let end = start + json_object_end(&rest[start..]);
        let object = &rest[start..end];
        let elided = INTERNAL_POD_JSON.iter().find(|(marker, _)| {
            if marker.starts_with('{') { object.starts_with(marker) } else { object.contains(marker) }
        });
        out.push_str(elided.map_or(object, |(_, short)| short));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// A message with uids and numbers (resourceVersions) replaced, and Go struct dumps elided.
fn normalise(message: &str) -> String {
    // go-cmp writes its diffs with a non-breaking space here and there, at random, on purpose.
    let message = elide_internal_pod_json(&elide_go_structs(&message.replace('\u{a0}', " ")));
    let mut out = String::new();
    let mut rest = message.as_str();
    while !rest.is_empty() {
        let uuid = rest.len() >= 36
            && rest.is_char_boundary(36)
            && rest[..36]
                .char_indices()
                .all(|(i, c)| if [8, 13, 18, 23].contains(&i) { c == '-' } else { c.is_ascii_hexdigit() });
        if uuid {
            out.push_str("<uid>");
            rest = &rest[36..];
            continue;
        }
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 {
            out.push('N');
            rest = &rest[digits..];
            continue;
        }
        let c = rest.chars().next().unwrap();
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

/// Both servers and the differences found so far.
struct Pair {
    sandbox: Server,
    real: Server,
    differences: Vec<String>,
}

impl Pair {
    /// `None` (after one loud line) where the real server cannot run.
    fn start() -> Option<Pair> {
        if !Backend::Real.available() {
            return None;
        }
        Some(Pair {
            sandbox: Server::start(Backend::Sandbox),
            real: Server::start(Backend::Real),
            differences: Vec::new(),
        })
    }

    /// Runs `steps` on both servers and records where the values they give differ.
    fn check(&mut self, name: &str, steps: impl Fn(&Server) -> Value) {
        let sandbox = steps(&self.sandbox);
        let real = steps(&self.real);
        let mut paths = Vec::new();
        diff("", &real, &sandbox, &mut paths);
        for (path, real, sandbox) in paths {
            let known = KNOWN.iter().any(|(check, prefix, _)| *check == name && path.starts_with(prefix));
            if !known {
                self.differences.push(format!(
                    "{name}{path}: {} {real} | {} {sandbox}",
                    self.real.name(),
                    self.sandbox.name()
                ));
            }
        }
    }

    fn assert_conforms(self) {
        assert!(
            self.differences.is_empty(),
            "the sandbox differs from kube-apiserver:\n{}",
            self.differences.join("\n")
        );
    }
}

fn diff(path: &str, a: &Value, b: &Value, out: &mut Vec<(String, String, String)>) {
    if a == b {
        return;
    }
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for key in keys {
                diff(
                    &format!("{path}.{key}"),
                    x.get(key).unwrap_or(&Value::Null),
                    y.get(key).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                diff(&format!("{path}[{i}]"), p, q, out);
            }
        }
        _ => out.push((path.to_string(), a.to_string(), b.to_string())),
    }
}

fn config_map(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}, "data": {"k": "v"}})
}

fn configmaps() -> String {
    format!("/api/v1/namespaces/{NS}/configmaps")
}

const METADATA_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const METADATA: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";

/// Creates a ConfigMap as the admin and returns its answer.
fn create(s: &Server, name: &str, labels: Value) -> Answer {
    s.admin("POST", &configmaps(), &[], &config_map(name, labels))
}

// ---------------------------------------------------------------------------------------------
// Lists and reads
// ---------------------------------------------------------------------------------------------

#[test]
fn lists_and_reads_answer_as_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    for s in [&pair.sandbox, &pair.real] {
        for name in ["alpha", "beta", "gamma"] {
            assert_eq!(create(s, name, json!({"set": "abc"})).code, 201);
        }
    }
    pair.check("typed list", |s| s.get(&configmaps()).shape());
    pair.check("empty typed list", |s| s.get(&format!("{}?labelSelector=set%3Dnone", configmaps())).shape());
    pair.check("list of an empty namespace-less collection", |s| {
        s.get("/apis/apps/v1/namespaces/conf/deployments").shape()
    });
    pair.check("metadata list", |s| {
        s.admin("GET", &format!("{}?labelSelector=set%3Dabc", configmaps()), &[("Accept", METADATA_LIST)], &Value::Null)
            .shape()
    });
    pair.check("empty metadata list", |s| {
        s.admin(
            "GET",
            &format!("{}?labelSelector=set%3Dnone", configmaps()),
            &[("Accept", METADATA_LIST)],
            &Value::Null,
        )
        .shape()
    });
    pair.check("metadata object", |s| {
        s.admin("GET", &format!("{}/alpha", configmaps()), &[("Accept", METADATA)], &Value::Null).shape()
    });
    pair.check("object", |s| s.get(&format!("{}/alpha", configmaps())).shape());
    pair.check("paged list", |s| {
        let first = s.get(&format!("{}?labelSelector=set%3Dabc&limit=2", configmaps()));
        let token = first.json()["metadata"]["continue"].as_str().unwrap_or_default().to_string();
        let second = s.get(&format!("{}?labelSelector=set%3Dabc&limit=2&continue={token}", configmaps()));
        json!({"first": first.shape(), "remaining": first.json()["metadata"]["remainingItemCount"],
               "second": second.shape()})
    });
    pair.check("paged metadata list", |s| {
        let accept = [("Accept", METADATA_LIST)];
        let first = s.admin("GET", &format!("{}?labelSelector=set%3Dabc&limit=2", configmaps()), &accept, &Value::Null);
        json!({"first": first.shape(), "remaining": first.json()["metadata"]["remainingItemCount"]})
    });
    pair.check("bad continue token", |s| s.get(&format!("{}?limit=1&continue=nonsense", configmaps())).shape());
    pair.check("not found", |s| s.get(&format!("{}/missing", configmaps())).shape());
    pair.check("not found in a missing namespace", |s| s.get("/api/v1/namespaces/nowhere/configmaps/missing").shape());
    pair.check("unknown resource", |s| s.get("/api/v1/namespaces/conf/widgets").shape());
    pair.assert_conforms();
}

// ---------------------------------------------------------------------------------------------
// Watches
// ---------------------------------------------------------------------------------------------

/// A watch's events as (type, object kind, object keys, metadata keys).
fn event_shapes(answer: &Answer) -> Value {
    let events: Vec<Value> = answer
        .events()
        .iter()
        .map(|event| {
            let object = &event["object"];
            let mut shaped = json!({"type": event["type"], "object": shape(object)});
            if event["type"] == "BOOKMARK" {
                shaped["object"]["annotations"] = object["metadata"]["annotations"].clone();
            }
            shaped
        })
        .collect();
    json!({"code": answer.code, "events": events})
}

/// A 4-second watch from the list's resourceVersion with bookmarks: how many events, and the
/// first bookmark's shape. With `other_change`, a ConfigMap the watch does not select is
/// created meanwhile.
fn bookmarks(s: &Server, other_change: bool) -> Value {
    let list = s.get(&format!("{}?labelSelector=set%3Dab", configmaps()));
    let rv = list.json()["metadata"]["resourceVersion"].as_str().unwrap_or_default().to_string();
    let path = format!(
        "{}?watch=true&labelSelector=set%3Dab&resourceVersion={rv}&allowWatchBookmarks=true&timeoutSeconds=4",
        configmaps()
    );
    let answer = std::thread::scope(|scope| {
        if other_change {
            scope.spawn(|| {
                std::thread::sleep(Duration::from_millis(500));
                let name = format!("other-{rv}");
                assert_eq!(
                    s.admin("POST", "/api/v1/namespaces/default/configmaps", &[], &config_map(&name, json!({}))).code,
                    201
                );
            });
        }
        s.get(&path)
    });
    let events = answer.events();
    let bookmark = events.iter().find(|e| e["type"] == "BOOKMARK").map(|e| shape(&e["object"]));
    let newer = events.iter().filter(|e| e["type"] == "BOOKMARK").all(|e| {
        e["object"]["metadata"]["resourceVersion"].as_str().and_then(|v| v.parse::<u64>().ok()) > rv.parse().ok()
    });
    json!({"code": answer.code, "others": events.iter().filter(|e| e["type"] != "BOOKMARK").count(),
           "bookmark": bookmark, "newer than the start": newer})
}

#[test]
fn watches_answer_as_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    for s in [&pair.sandbox, &pair.real] {
        for name in ["alpha", "beta"] {
            assert_eq!(create(s, name, json!({"set": "ab"})).code, 201);
        }
    }
    pair.check("watch without a resourceVersion: initial ADDED events", |s| {
        let path = format!("{}?watch=true&labelSelector=set%3Dab&timeoutSeconds=1", configmaps());
        let nudge = json!({"metadata": {"generateName": "watch-cache-nudge-"}});
        event_shapes(&s.watch(&path, "/api/v1/namespaces/default/configmaps", &nudge))
    });
    pair.check("watch from resourceVersion 0: initial ADDED events", |s| {
        let path = format!("{}?watch=true&labelSelector=set%3Dab&resourceVersion=0&timeoutSeconds=1", configmaps());
        event_shapes(&s.get(&path))
    });
    pair.check("watch with bookmarks, the kind quiet", |s| bookmarks(s, false));
    pair.check("watch with bookmarks, another object of the kind changing", |s| bookmarks(s, true));
    pair.check("watch from a too old resourceVersion", |s| {
        event_shapes(&s.get(&format!("{}?watch=true&resourceVersion=1&timeoutSeconds=2", configmaps())))
    });
    pair.check("watch with sendInitialEvents (WatchList on since 1.34): the state, then a bookmark", |s| {
        let path = format!("{}?watch=true&labelSelector=set%3Dab&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1", configmaps());
        event_shapes(&s.get(&path))
    });
    pair.check("sendInitialEvents without resourceVersionMatch: 422", |s| {
        let path =
            format!("{}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&timeoutSeconds=1", configmaps());
        s.get(&path).shape()
    });
    pair.check("metadata watch", |s| {
        // From resourceVersion 0 (the cache's state): without one, kube-apiserver first waits for
        // its cache to reach etcd's revision, which the test bed's etcd 3.4 makes slow.
        let path = format!("{}?watch=true&labelSelector=set%3Dab&resourceVersion=0&timeoutSeconds=1", configmaps());
        event_shapes(&s.admin("GET", &path, &[("Accept", METADATA)], &Value::Null))
    });
    pair.check("list at a too old resourceVersion with Exact", |s| {
        s.get(&format!("{}?resourceVersion=1&resourceVersionMatch=Exact", configmaps())).shape()
    });
    pair.assert_conforms();
}

// ---------------------------------------------------------------------------------------------
// Writes and their errors
// ---------------------------------------------------------------------------------------------

#[test]
fn write_errors_answer_as_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    pair.check("create", |s| create(s, "first", json!({})).shape());
    pair.check("create an existing name: 409 AlreadyExists", |s| create(s, "first", json!({})).shape());
    pair.check("update at a stale resourceVersion: 409 Conflict", |s| {
        let current = s.get(&format!("{}/first", configmaps())).json();
        let mut stale = current.clone();
        let mut newer = current;
        newer["data"]["k"] = json!("newer");
        let path = format!("{}/first", configmaps());
        assert_eq!(s.admin("PUT", &path, &[], &newer).code, 200);
        stale["data"]["k"] = json!("stale");
        s.admin("PUT", &path, &[], &stale).shape()
    });
    pair.check("update without a resourceVersion", |s| {
        let path = format!("{}/first", configmaps());
        s.admin("PUT", &path, &[], &config_map("first", json!({"updated": "yes"}))).shape()
    });
    pair.check("update of a missing object", |s| {
        let mut object = config_map("absent", json!({}));
        object["metadata"]["resourceVersion"] = json!("5");
        s.admin("PUT", &format!("{}/absent", configmaps()), &[], &object).shape()
    });
    pair.check("update with a mismatched name", |s| {
        s.admin("PUT", &format!("{}/first", configmaps()), &[], &config_map("second", json!({}))).shape()
    });
    pair.check("invalid name: 422", |s| create(s, "Not_Valid", json!({})).shape());
    pair.check("invalid label: 422", |s| create(s, "labelled", json!({"bad key!": "x"})).shape());
    pair.check("invalid pod: 422 with every cause", |s| {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "empty"}, "spec": {"containers": []}});
        s.admin("POST", &format!("/api/v1/namespaces/{NS}/pods"), &[], &pod).shape()
    });
    pair.check("invalid deployment selector: 422", |s| {
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "other"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}}}});
        s.admin("POST", &format!("/apis/apps/v1/namespaces/{NS}/deployments"), &[], &deployment).shape()
    });
    pair.check("wrong kind in the body: 400", |s| {
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
        s.admin("POST", &configmaps(), &[], &secret).shape()
    });
    pair.check("namespace mismatch: 400", |s| {
        let mut object = config_map("elsewhere", json!({}));
        object["metadata"]["namespace"] = json!("default");
        s.admin("POST", &configmaps(), &[], &object).shape()
    });
    pair.check("create in a missing namespace: 404", |s| {
        s.admin("POST", "/api/v1/namespaces/nowhere/configmaps", &[], &config_map("x", json!({}))).shape()
    });
    pair.check("merge patch", |s| {
        let path = format!("{}/first", configmaps());
        let headers = [("Content-Type", "application/merge-patch+json")];
        s.admin("PATCH", &path, &headers, &json!({"metadata": {"labels": {"patched": "yes"}}})).shape()
    });
    pair.check("strategic delete from an absent list: 422 (a release of an object with no owner)", |s| {
        let headers = [("Content-Type", "application/strategic-merge-patch+json")];
        let patch = json!({"metadata": {"ownerReferences": [{"$patch": "delete", "uid": "4f6c4b5e-0000-4000-8000-000000000000"}]}});
        s.admin("PATCH", &format!("{}/first", configmaps()), &headers, &patch).shape()
    });
    pair.check("patch of a missing object: 404", |s| {
        let headers = [("Content-Type", "application/merge-patch+json")];
        s.admin("PATCH", &format!("{}/absent", configmaps()), &headers, &json!({"data": {"k": "x"}})).shape()
    });
    pair.check("patch with a stale resourceVersion: 409", |s| {
        let headers = [("Content-Type", "application/merge-patch+json")];
        let patch = json!({"metadata": {"resourceVersion": "2"}, "data": {"k": "x"}});
        s.admin("PATCH", &format!("{}/first", configmaps()), &headers, &patch).shape()
    });
    pair.check("forbidden for a user without RBAC rights: 403", |s| {
        let user = s.server.user_config("alice", &["developers"]).expect("user credentials");
        let list = s.request(&user, "GET", &format!("/api/v1/namespaces/{NS}/pods"), &[], &Value::Null);
        let get = s.request(&user, "GET", &format!("{}/first", configmaps()), &[], &Value::Null);
        let create = s.request(&user, "POST", &configmaps(), &[], &config_map("mine", json!({})));
        let cluster = s.request(&user, "GET", "/api/v1/nodes", &[], &Value::Null);
        let watch = s.request(&user, "GET", "/api/v1/pods?watch=true", &[], &Value::Null);
        json!({"list": list.shape(), "get": get.shape(), "create": create.shape(), "cluster": cluster.shape(),
               "watch": watch.shape()})
    });
    pair.assert_conforms();
}

// ---------------------------------------------------------------------------------------------
// Deletion
// ---------------------------------------------------------------------------------------------

fn delete_options(options: Value) -> Value {
    let mut body = json!({"kind": "DeleteOptions", "apiVersion": "v1"});
    body.as_object_mut().unwrap().extend(options.as_object().cloned().unwrap_or_default());
    body
}

#[test]
fn deletion_answers_as_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    pair.check("delete", |s| {
        create(s, "plain", json!({}));
        s.admin("DELETE", &format!("{}/plain", configmaps()), &[], &Value::Null).shape()
    });
    pair.check("delete of a missing object: 404", |s| {
        s.admin("DELETE", &format!("{}/plain", configmaps()), &[], &Value::Null).shape()
    });
    pair.check("delete with a wrong uid precondition: 409", |s| {
        create(s, "guarded", json!({}));
        let options = delete_options(json!({"preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}));
        s.admin("DELETE", &format!("{}/guarded", configmaps()), &[], &options).shape()
    });
    pair.check("delete with a stale resourceVersion precondition: 409", |s| {
        let options = delete_options(json!({"preconditions": {"resourceVersion": "2"}}));
        s.admin("DELETE", &format!("{}/guarded", configmaps()), &[], &options).shape()
    });
    pair.check("delete with matching preconditions", |s| {
        let current = s.get(&format!("{}/guarded", configmaps())).json();
        let preconditions =
            json!({"uid": current["metadata"]["uid"], "resourceVersion": current["metadata"]["resourceVersion"]});
        let options = delete_options(json!({"preconditions": preconditions}));
        s.admin("DELETE", &format!("{}/guarded", configmaps()), &[], &options).shape()
    });
    pair.check("delete with a finalizer: the object stays, marked", |s| {
        let mut object = config_map("held", json!({}));
        object["metadata"]["finalizers"] = json!(["example.com/hold"]);
        s.admin("POST", &configmaps(), &[], &object);
        let path = format!("{}/held", configmaps());
        let deleted = s.admin("DELETE", &path, &[], &Value::Null);
        let read = s.get(&path).json();
        let again = s.admin("DELETE", &path, &[], &Value::Null);
        json!({"delete": deleted.shape(), "marked": read["metadata"]["deletionTimestamp"].is_string(),
               "grace": read["metadata"]["deletionGracePeriodSeconds"], "finalizers": read["metadata"]["finalizers"],
               "again": again.shape(), "again_marked": again.json()["metadata"]["deletionTimestamp"].is_string()})
    });
    pair.check("adding a finalizer while deleting: 422", |s| {
        let headers = [("Content-Type", "application/merge-patch+json")];
        let patch = json!({"metadata": {"finalizers": ["example.com/hold", "example.com/more"]}});
        s.admin("PATCH", &format!("{}/held", configmaps()), &headers, &patch).shape()
    });
    pair.check("removing the last finalizer deletes the object", |s| {
        let headers = [("Content-Type", "application/merge-patch+json")];
        let path = format!("{}/held", configmaps());
        let patched = s.admin("PATCH", &path, &headers, &json!({"metadata": {"finalizers": null}}));
        json!({"patch": patched.shape(), "after": s.get(&path).code})
    });
    pair.check("orphan propagation adds the orphan finalizer", |s| {
        create(s, "orphaning", json!({}));
        let path = format!("{}/orphaning", configmaps());
        let deleted = s.admin("DELETE", &path, &[], &delete_options(json!({"propagationPolicy": "Orphan"})));
        let answer = deleted.json();
        json!({"delete": deleted.shape(), "finalizers": answer["metadata"]["finalizers"]})
    });
    pair.check("foreground propagation adds the foregroundDeletion finalizer", |s| {
        create(s, "foreground", json!({}));
        let path = format!("{}/foreground", configmaps());
        let deleted = s.admin("DELETE", &path, &[], &delete_options(json!({"propagationPolicy": "Foreground"})));
        let answer = deleted.json();
        json!({"delete": deleted.shape(), "finalizers": answer["metadata"]["finalizers"]})
    });
    pair.check("invalid propagation policy: 400", |s| {
        s.admin(
            "DELETE",
            &format!("{}/foreground", configmaps()),
            &[],
            &delete_options(json!({"propagationPolicy": "Sideways"})),
        )
        .shape()
    });
    pair.check("delete collection", |s| {
        for name in ["one", "two"] {
            create(s, name, json!({"batch": "x"}));
        }
        let deleted = s.admin("DELETE", &format!("{}?labelSelector=batch%3Dx", configmaps()), &[], &Value::Null);
        let left = s.get(&format!("{}?labelSelector=batch%3Dx", configmaps())).json();
        json!({"delete": deleted.shape(), "left": left["items"]})
    });
    pair.check("delete collection of nothing", |s| {
        s.admin("DELETE", &format!("{}?labelSelector=batch%3Dnone", configmaps()), &[], &Value::Null).shape()
    });
    pair.check("pod deleted with a grace period", |s| {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "graceful"},
                         "spec": {"nodeName": "node-x", "containers": [{"name": "c", "image": "i"}]}});
        // Pods need the namespace's default ServiceAccount, which no controller creates here.
        s.admin("POST", &format!("/api/v1/namespaces/{NS}/serviceaccounts"), &[], &json!({"metadata": {"name": "default"}}));
        let created = s.admin("POST", &format!("/api/v1/namespaces/{NS}/pods"), &[], &pod);
        let deleted = s.admin("DELETE", &format!("/api/v1/namespaces/{NS}/pods/graceful"), &[], &Value::Null);
        let answer = deleted.json();
        json!({"create": created.code, "delete": deleted.shape(), "grace": answer["metadata"]["deletionGracePeriodSeconds"],
               "marked": answer["metadata"]["deletionTimestamp"].is_string()})
    });
    pair.assert_conforms();
}

#[test]
fn namespaces_terminate_and_finalize_as_in_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    pair.check("delete a namespace: Terminating", |s| {
        s.admin("POST", "/api/v1/namespaces", &[], &json!({"metadata": {"name": "doomed"}}));
        create_in(s, "doomed", "content");
        let deleted = s.admin("DELETE", "/api/v1/namespaces/doomed", &[], &Value::Null);
        let answer = deleted.json();
        json!({"delete": deleted.shape(), "phase": answer["status"]["phase"], "finalizers": answer["spec"]["finalizers"],
               "marked": answer["metadata"]["deletionTimestamp"].is_string()})
    });
    pair.check("create in a terminating namespace: 403", |s| {
        s.admin("POST", "/api/v1/namespaces/doomed/configmaps", &[], &config_map("late", json!({}))).shape()
    });
    pair.check("delete a terminating namespace again", |s| {
        let again = s.admin("DELETE", "/api/v1/namespaces/doomed", &[], &Value::Null);
        json!({"delete": again.shape(), "phase": again.json()["status"]["phase"]})
    });
    pair.check("finalize a namespace with content left", |s| {
        let namespace = s.get("/api/v1/namespaces/doomed").json();
        let mut finalized = namespace.clone();
        finalized["spec"]["finalizers"] = json!([]);
        let answer = s.admin("PUT", "/api/v1/namespaces/doomed/finalize", &[], &finalized);
        // kube-apiserver deletes the namespace once its finalizers are gone, whatever is left in it.
        json!({"finalize": answer.shape(), "after": s.get("/api/v1/namespaces/doomed").code})
    });
    pair.check("finalize with a stale resourceVersion: 409", |s| {
        s.admin("POST", "/api/v1/namespaces", &[], &json!({"metadata": {"name": "stale"}}));
        let namespace = s.get("/api/v1/namespaces/stale").json();
        let mut labelled = namespace.clone();
        labelled["metadata"]["labels"] = json!({"changed": "yes"});
        s.admin("PUT", "/api/v1/namespaces/stale", &[], &labelled);
        let mut finalized = namespace;
        finalized["spec"]["finalizers"] = json!([]);
        s.admin("PUT", "/api/v1/namespaces/stale/finalize", &[], &finalized).shape()
    });
    pair.check("finalize a live namespace", |s| {
        let namespace = s.get("/api/v1/namespaces/stale").json();
        let mut finalized = namespace;
        finalized["spec"]["finalizers"] = json!([]);
        let answer = s.admin("PUT", "/api/v1/namespaces/stale/finalize", &[], &finalized);
        let after = s.get("/api/v1/namespaces/stale").json();
        json!({"finalize": answer.shape(), "finalizers": answer.json()["spec"]["finalizers"], "phase": after["status"]["phase"],
               "after_finalizers": after["spec"]["finalizers"]})
    });
    pair.check("namespace deletecollection: 405", |s| {
        s.admin("DELETE", "/api/v1/namespaces", &[], &Value::Null).shape()
    });
    pair.check("delete a system namespace: 403", |s| {
        s.admin("DELETE", "/api/v1/namespaces/kube-system", &[], &Value::Null).shape()
    });
    pair.assert_conforms();
}

fn create_in(s: &Server, ns: &str, name: &str) -> Answer {
    s.admin("POST", &format!("/api/v1/namespaces/{ns}/configmaps"), &[], &config_map(name, json!({})))
}

// ---------------------------------------------------------------------------------------------
// Jobs and CronJobs: defaults, selector generation, spec and status validation
// ---------------------------------------------------------------------------------------------

fn jobs() -> String {
    format!("/apis/batch/v1/namespaces/{NS}/jobs")
}

/// A Job as `kubectl create job NAME --image=busybox` sends it, with `spec` merged in.
fn job(name: &str, spec: Value) -> Value {
    let mut job = json!({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"template": {"metadata": {}, "spec": {"restartPolicy": "Never",
            "containers": [{"name": name, "image": "busybox"}]}}}});
    for (key, value) in spec.as_object().expect("a spec object") {
        job["spec"][key] = value.clone();
    }
    job
}

/// What a created (or updated) object says, its uid and times replaced, or its Status.
fn stored(answer: &Answer, part: &str) -> Value {
    let body = answer.json();
    if body["kind"] == "Status" || !(200..300).contains(&answer.code) {
        return answer.shape();
    }
    let mut text = body[part].to_string();
    if let Some(uid) = body["metadata"]["uid"].as_str() {
        text = text.replace(uid, "<uid>");
    }
    json!({"code": answer.code, part: serde_json::from_str::<Value>(&text).expect("JSON")})
}

/// Creates Job `name` and writes `status` to it; the status write's answer.
fn job_status_write(s: &Server, name: &str, spec: Value, old_status: Value, status: Value) -> Value {
    let created = s.admin("POST", &jobs(), &[], &job(name, spec));
    assert_eq!(created.code, 201, "{}", created.text());
    let path = format!("{}/{name}/status", jobs());
    let mut object = created.json();
    if !old_status.is_null() {
        object["status"] = old_status;
        let answer = s.admin("PUT", &path, &[], &object);
        assert_eq!(answer.code, 200, "{}", answer.text());
        object = answer.json();
    }
    object["status"] = status;
    stored(&s.admin("PUT", &path, &[], &object), "status")
}

/// The object at `path` as stored.
fn read(s: &Server, path: &str) -> Value {
    s.get(path).json()
}

#[test]
fn jobs_answer_as_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    // Defaults and the generated selector and labels.
    pair.check("kubectl create job: defaults, selector, labels", |s| {
        let created = s.admin("POST", &jobs(), &[], &job("pi", json!({})));
        json!({"spec": stored(&created, "spec"), "metadata": stored(&created, "metadata")["metadata"]["labels"]})
    });
    pair.check("an Indexed Job with a pod failure policy and per-index limits: defaults", |s| {
        let spec = json!({"completionMode": "Indexed", "completions": 4, "parallelism": 2, "backoffLimitPerIndex": 1,
            "maxFailedIndexes": 2, "podFailurePolicy": {"rules": [
                {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [42]}},
                {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]},
            "successPolicy": {"rules": [{"succeededIndexes": "0-2", "succeededCount": 2}]}});
        stored(&s.admin("POST", &jobs(), &[], &job("indexed", spec)), "spec")
    });
    pair.check("a CronJob: defaults", |s| {
        let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "nightly"},
            "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": {"spec": {"restartPolicy": "OnFailure",
                "containers": [{"name": "c", "image": "busybox"}]}}}}}});
        stored(&s.admin("POST", &format!("/apis/batch/v1/namespaces/{NS}/cronjobs"), &[], &cron), "spec")
    });
    pair.check("CronJob time zones", |s| {
        let answers: Vec<Value> = ["Europe/Berlin", "UTC", "Mars/Phobos", "local", "Local", "-x", "", "europe/berlin"]
            .iter()
            .enumerate()
            .map(|(i, zone)| {
                let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": format!("tz-{i}")},
                    "spec": {"schedule": "0 3 * * *", "timeZone": zone, "jobTemplate": {"spec": {"template": {"spec": {
                        "restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox"}]}}}}}});
                s.admin("POST", &format!("/apis/batch/v1/namespaces/{NS}/cronjobs"), &[], &cron).shape()
            })
            .collect();
        json!(answers)
    });
    // Create-time refusals.
    pair.check("manual selector not matching the template: 422", |s| {
        let spec = json!({"manualSelector": true, "selector": {"matchLabels": {"a": "b"}},
            "template": {"metadata": {"labels": {"a": "c"}}, "spec": {"restartPolicy": "Never",
                "containers": [{"name": "c", "image": "busybox"}]}}});
        s.admin("POST", &jobs(), &[], &job("manual", spec)).shape()
    });
    pair.check("generated labels overridden: 422", |s| {
        let spec = json!({"template": {"metadata": {"labels": {"controller-uid": "mine", "batch.kubernetes.io/job-name": "x"}},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}}});
        s.admin("POST", &jobs(), &[], &job("relabelled", spec)).shape()
    });
    pair.check("a bad pod failure policy: 422", |s| {
        let spec = json!({"podFailurePolicy": {"rules": [
            {"action": "FailIndex", "onExitCodes": {"operator": "In", "values": [3, 0, 3], "containerName": "x"}},
            {"action": "Restart", "onPodConditions": [{"type": "DisruptionTarget", "status": "Maybe"}]},
            {"action": "Ignore"},
            {"action": "Count", "onExitCodes": {"operator": "NotIn", "values": []}, "onPodConditions": [{"type": "Ready"}]}]},
            "podReplacementPolicy": "TerminatingOrFailed"});
        s.admin("POST", &jobs(), &[], &job("policy", spec)).shape()
    });
    pair.check("a pod failure policy with OnFailure: 422", |s| {
        let mut object = job(
            "restarts",
            json!({"podFailurePolicy": {"rules": [
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}}]}}),
        );
        object["spec"]["template"]["spec"]["restartPolicy"] = json!("OnFailure");
        s.admin("POST", &jobs(), &[], &object).shape()
    });
    pair.check("bad per-index limits, success policy and managedBy: 422", |s| {
        let spec = json!({"completionMode": "Indexed", "completions": 4, "maxFailedIndexes": 5,
            "managedBy": "nodomain", "successPolicy": {"rules": [{"succeededIndexes": "0-5", "succeededCount": 5}, {}]}});
        let indexed = s.admin("POST", &jobs(), &[], &job("limits", spec)).shape();
        let spec = json!({"backoffLimitPerIndex": 1, "successPolicy": {"rules": [{"succeededCount": 1}]},
            "managedBy": "example.com/a/b"});
        let non_indexed = s.admin("POST", &jobs(), &[], &job("nonindexed", spec)).shape();
        let spec = json!({"completionMode": "Indexed", "completions": 200000, "parallelism": 20000,
            "backoffLimitPerIndex": 1});
        let high = s.admin("POST", &jobs(), &[], &job("high", spec)).shape();
        let long_name = "a".repeat(60);
        let hostname = s.admin("POST", &jobs(), &[], &job(&long_name, json!({"completionMode": "Indexed", "completions": 1000}))).shape();
        json!({"indexed": indexed, "non_indexed": non_indexed, "high": high, "hostname": hostname})
    });
    pair.check("too many rules, bad condition types, a CronJob's bad job template: 422", |s| {
        let rule = json!({"action": "Count", "onPodConditions": [{"type": "bad type!", "status": "True"}]});
        let many = json!({"podFailurePolicy": {"rules": vec![rule; 21]}, "podReplacementPolicy": "Sometimes"});
        let many = s.admin("POST", &jobs(), &[], &job("many", many)).shape();
        let values: Vec<i64> = (1..=256).collect();
        let codes = json!({"podFailurePolicy": {"rules": [{"action": "FailJob",
            "onExitCodes": {"operator": "Between", "values": values}}]}});
        let codes = s.admin("POST", &jobs(), &[], &job("codes", codes)).shape();
        let cron = json!({"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "bad-template"},
            "spec": {"schedule": "@hourly", "concurrencyPolicy": "Sometimes", "jobTemplate": {"spec": {
                "manualSelector": true, "selector": {"matchLabels": {"a": "b"}}, "backoffLimitPerIndex": 2,
                "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [1]}}]},
                "template": {"metadata": {"labels": {"a": "b"}}, "spec": {"restartPolicy": "OnFailure",
                    "containers": [{"name": "c", "image": "busybox"}]}}}}}});
        let cron = s.admin("POST", &format!("/apis/batch/v1/namespaces/{NS}/cronjobs"), &[], &cron).shape();
        json!({"many": many, "codes": codes, "cron": cron})
    });
    // Updates.
    pair.check("updates of fixed fields: 422", |s| {
        let created = s.admin("POST", &jobs(), &[], &job("fixed", json!({"completions": 2}))).json();
        let path = format!("{}/fixed", jobs());
        let mut object = created.clone();
        object["spec"]["completions"] = json!(3);
        object["spec"]["completionMode"] = json!("Indexed");
        object["spec"]["backoffLimitPerIndex"] = json!(1);
        object["spec"]["managedBy"] = json!("example.com/other");
        object["spec"]["template"]["spec"]["containers"][0]["image"] = json!("busybox:2");
        let fixed = s.admin("PUT", &path, &[], &object).shape();
        let mut object = created.clone();
        object["spec"]["parallelism"] = json!(5);
        object["spec"]["suspend"] = json!(true);
        let scaled = stored(&s.admin("PUT", &path, &[], &object), "spec");
        let mut object = read(s, &path);
        object["spec"]["selector"]["matchLabels"]["x"] = json!("y");
        let selector = s.admin("PUT", &path, &[], &object).shape();
        json!({"fixed": fixed, "scaled": scaled, "selector": selector})
    });
    pair.check("an Indexed Job scales completions with parallelism", |s| {
        let created = s
            .admin(
                "POST",
                &jobs(),
                &[],
                &job(
                    "elastic",
                    json!({"completionMode": "Indexed",
            "completions": 2, "parallelism": 2}),
                ),
            )
            .json();
        let path = format!("{}/elastic", jobs());
        let mut object = created.clone();
        object["spec"]["completions"] = json!(3);
        let alone = s.admin("PUT", &path, &[], &object).shape();
        object["spec"]["parallelism"] = json!(3);
        let tandem = stored(&s.admin("PUT", &path, &[], &object), "spec");
        json!({"alone": alone, "tandem": tandem})
    });
    pair.check("a suspended Job that never ran may change its scheduling directives", |s| {
        let created = s.admin("POST", &jobs(), &[], &job("queued", json!({"suspend": true}))).json();
        let path = format!("{}/queued", jobs());
        let mut object = created.clone();
        object["spec"]["template"]["spec"]["nodeSelector"] = json!({"zone": "a"});
        object["spec"]["template"]["metadata"]["annotations"] = json!({"queue": "q1"});
        let allowed = s.admin("PUT", &path, &[], &object);
        assert_eq!(allowed.code, 200, "{}", allowed.text());
        let mut object = allowed.json();
        object["spec"]["template"]["spec"]["affinity"] = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"a": "b"}}, "topologyKey": "zone"}]}});
        s.admin("PUT", &path, &[], &object).shape()
    });
    pair.check("an evicted pod gets DisruptionTarget before it goes (pod failure policies match it)", |s| {
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
        s.admin("POST", &format!("/api/v1/namespaces/{NS}/serviceaccounts"), &[], &account);
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "evictee", "finalizers": ["example.com/hold"]},
            "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}});
        let pods = format!("/api/v1/namespaces/{NS}/pods");
        let created = s.admin("POST", &pods, &[], &pod);
        assert_eq!(created.code, 201, "{}", created.text());
        let eviction = |uid: &str| json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "evictee"},
            "deleteOptions": {"preconditions": {"uid": uid}}});
        let path = format!("{pods}/evictee/eviction");
        let wrong = s.admin("POST", &path, &[], &eviction("6b1b2d0e-0000-4000-8000-000000000000")).shape();
        let uid = created.json()["metadata"]["uid"].as_str().unwrap().to_string();
        let evicted = s.admin("POST", &path, &[], &eviction(&uid)).shape();
        let pod = s.get(&format!("{pods}/evictee")).json();
        let mut conditions = pod["status"]["conditions"].clone();
        for condition in conditions.as_array_mut().into_iter().flatten() {
            condition["lastTransitionTime"] = json!("<time>");
        }
        let release = json!({"metadata": {"finalizers": null}});
        s.admin("PATCH", &format!("{pods}/evictee"), &[("Content-Type", "application/merge-patch+json")], &release);
        json!({"wrong uid": wrong, "evicted": evicted, "conditions": conditions,
            "deleting": pod["metadata"]["deletionTimestamp"].is_string()})
    });
    // Status writes, as the job controller makes them.
    let start = json!("2030-01-01T00:00:00Z");
    pair.check("status: a condition without times, zero counters", |s| {
        let status = json!({"startTime": start, "active": 0, "failed": 0, "succeeded": 0, "completedIndexes": "",
            "conditions": [{"type": "Suspended", "status": "True", "reason": "JobSuspended"}],
            "uncountedTerminatedPods": {"succeeded": [], "failed": []}});
        job_status_write(s, "untimed", json!({"suspend": true}), Value::Null, status)
    });
    pair.check("status: a running Job", |s| {
        let status = json!({"startTime": start, "active": 1, "ready": 0, "terminating": 0,
            "uncountedTerminatedPods": {}});
        job_status_write(s, "running", json!({}), Value::Null, status)
    });
    pair.check("status: complete, as the job controller finishes a Job", |s| {
        let running = json!({"startTime": start, "active": 1, "ready": 1, "uncountedTerminatedPods": {"succeeded": ["p1"]}});
        let done = json!({"startTime": start, "completionTime": "2030-01-01T00:00:10Z", "succeeded": 1, "active": 0,
            "ready": 0, "terminating": 0, "uncountedTerminatedPods": {},
            "conditions": [{"type": "SuccessCriteriaMet", "status": "True", "reason": "CompletionsReached",
                "message": "Reached expected number of succeeded pods", "lastProbeTime": start, "lastTransitionTime": start},
                {"type": "Complete", "status": "True", "reason": "CompletionsReached",
                "message": "Reached expected number of succeeded pods", "lastProbeTime": start, "lastTransitionTime": start}]});
        job_status_write(s, "done", json!({}), running, done)
    });
    pair.check("status: Complete without SuccessCriteriaMet, Failed without FailureTarget: 422", |s| {
        let complete = json!({"startTime": start, "completionTime": "2029-01-01T00:00:10Z", "active": 1, "ready": 2,
            "uncountedTerminatedPods": {"succeeded": ["a", "a", ""]}, "completedIndexes": "0",
            "conditions": [{"type": "Complete", "status": "True"}, {"type": "Failed", "status": "True"}]});
        let both = job_status_write(s, "bad-complete", json!({}), Value::Null, complete);
        let failed = json!({"startTime": start, "failed": 1, "terminating": 1,
            "conditions": [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]});
        let failed = job_status_write(s, "bad-failed", json!({}), Value::Null, failed);
        let finished =
            json!({"conditions": [{"type": "FailureTarget", "status": "True"}, {"type": "Failed", "status": "True"}]});
        let no_start = job_status_write(s, "no-start", json!({}), Value::Null, finished);
        json!({"both": both, "failed": failed, "no_start": no_start})
    });
    pair.check("status: negative counts, SuccessCriteriaMet with FailureTarget: 422", |s| {
        let status = json!({"startTime": start, "active": -1, "ready": -1, "terminating": -2, "failed": -3,
            "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "FailureTarget", "status": "True"},
                {"type": "Complete", "status": "True"}],
            "completionTime": "2030-01-01T00:00:10Z"});
        job_status_write(s, "negative", json!({}), Value::Null, status)
    });
    pair.check("status: counters and terminal conditions never go back: 422", |s| {
        let old = json!({"startTime": start, "failed": 2, "succeeded": 1, "completionTime": "2030-01-01T00:00:10Z",
            "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]});
        let new = json!({"failed": 1, "succeeded": 0, "completionTime": "2030-01-01T00:00:20Z"});
        job_status_write(s, "backwards", json!({}), old, new)
    });
    pair.check("status: indexes of an Indexed Job", |s| {
        let spec = json!({"completionMode": "Indexed", "completions": 3, "parallelism": 3, "backoffLimitPerIndex": 1});
        let bad = json!({"startTime": start, "completedIndexes": "0,2-1", "failedIndexes": "0,3"});
        let bad = job_status_write(s, "indexes", spec.clone(), Value::Null, bad);
        let overlap = json!({"startTime": start, "completedIndexes": "0-1", "failedIndexes": "1"});
        let overlap = job_status_write(s, "overlap", spec.clone(), Value::Null, overlap);
        let good =
            json!({"startTime": start, "completedIndexes": "0,2", "failedIndexes": "1", "succeeded": 2, "failed": 1});
        let good = job_status_write(s, "good-indexes", spec, Value::Null, good);
        json!({"bad": bad, "overlap": overlap, "good": good})
    });
    pair.assert_conforms();
}

// ---------------------------------------------------------------------------------------------
// apps/v1: ControllerRevisions, DaemonSet and StatefulSet defaults
// ---------------------------------------------------------------------------------------------

fn revisions() -> String {
    format!("/apis/apps/v1/namespaces/{NS}/controllerrevisions")
}

fn revision(name: &str, data: Value, number: i64) -> Value {
    let mut revision = json!({"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": {"name": name},
        "revision": number});
    if !data.is_null() {
        revision["data"] = data;
    }
    revision
}

#[test]
fn controller_revisions_answer_as_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    let data = json!({"spec": {"template": {"$patch": "replace", "metadata": {"creationTimestamp": null}}}});
    pair.check("create", |s| {
        let created = s.admin("POST", &revisions(), &[], &revision("web-1", data.clone(), 1));
        json!({"data": stored(&created, "data"), "revision": stored(&created, "revision")})
    });
    pair.check("a negative revision and data that is no object: 422", |s| {
        let negative = s.admin("POST", &revisions(), &[], &revision("web-2", data.clone(), -1)).shape();
        let string = s.admin("POST", &revisions(), &[], &revision("web-3", json!("x"), 1)).shape();
        let missing = s.admin("POST", &revisions(), &[], &revision("web-4", Value::Null, 1)).shape();
        json!({"negative": negative, "string": string, "missing": missing})
    });
    pair.check("a new revision number is an update; new data is refused", |s| {
        let path = format!("{}/web-1", revisions());
        let mut current = s.get(&path).json();
        current["revision"] = json!(5);
        let renumbered = s.admin("PUT", &path, &[], &current);
        let mut changed = renumbered.json();
        changed["data"] = json!({"spec": {"template": {"$patch": "replace"}}});
        let refused = s.admin("PUT", &path, &[], &changed).shape();
        json!({"renumbered": stored(&renumbered, "revision"), "refused": refused})
    });
    pair.check("DaemonSet and StatefulSet defaults", |s| {
        let template =
            json!({"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let ds = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "template": template}});
        let sts = json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "a"}}, "serviceName": "web", "template": template,
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "1Gi"}}}}]}});
        let ds = s.admin("POST", &format!("/apis/apps/v1/namespaces/{NS}/daemonsets"), &[], &ds);
        let sts = s.admin("POST", &format!("/apis/apps/v1/namespaces/{NS}/statefulsets"), &[], &sts);
        json!({"daemonset": stored(&ds, "spec"), "statefulset": stored(&sts, "spec")})
    });
    pair.assert_conforms();
}

// ---------------------------------------------------------------------------------------------
// Evictions and PodDisruptionBudgets
// ---------------------------------------------------------------------------------------------

fn pods_path() -> String {
    format!("/api/v1/namespaces/{NS}/pods")
}

fn budgets_path() -> String {
    format!("/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets")
}

/// A pod labelled `app: <app>` on a node, its status then set as a kubelet would (`phase`,
/// `Ready` as `ready`).
fn bound_pod(s: &Server, name: &str, app: &str, phase: &str, ready: bool) {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "busybox"}]}});
    let created = s.admin("POST", &pods_path(), &[], &pod);
    assert_eq!(created.code, 201, "{}", created.text());
    let mut pod = created.json();
    pod["status"]["phase"] = json!(phase);
    pod["status"]["conditions"] = json!([{"type": "Ready", "status": if ready { "True" } else { "False" }}]);
    let updated = s.admin("PUT", &format!("{}/{name}/status", pods_path()), &[], &pod);
    assert_eq!(updated.code, 200, "{}", updated.text());
}

/// A budget over `app: <app>` whose status is written as the disruption controller would.
fn budget(s: &Server, name: &str, app: &str, policy: Option<&str>, status: Value) {
    let mut spec = json!({"minAvailable": 1, "selector": {"matchLabels": {"app": app}}});
    if let Some(policy) = policy {
        spec["unhealthyPodEvictionPolicy"] = json!(policy);
    }
    let pdb =
        json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name}, "spec": spec});
    let created = s.admin("POST", &budgets_path(), &[], &pdb);
    assert_eq!(created.code, 201, "{}", created.text());
    let mut pdb = created.json();
    pdb["status"] = status;
    let updated = s.admin("PUT", &format!("{}/{name}/status", budgets_path()), &[], &pdb);
    assert_eq!(updated.code, 200, "{}", updated.text());
}

/// `observedGeneration` 1 (the budget's generation) unless `stale`.
fn budget_status(allowed: i64, current: i64, desired: i64, stale: bool) -> Value {
    json!({"observedGeneration": if stale { 0 } else { 1 }, "disruptionsAllowed": allowed,
        "currentHealthy": current, "desiredHealthy": desired, "expectedPods": current})
}

fn evict_pod(s: &Server, name: &str, query: &str, delete_options: Value) -> Answer {
    let mut eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}});
    if !delete_options.is_null() {
        eviction["deleteOptions"] = delete_options;
    }
    s.admin("POST", &format!("{}/{name}/eviction{query}", pods_path()), &[], &eviction)
}

/// What an eviction left behind: the pod going or not, its DisruptionTarget condition, and the
/// budget's allowance, disrupted pods and conditions (times left out).
fn after_eviction(s: &Server, pod: &str, pdb: &str) -> Value {
    let pod = s.get(&format!("{}/{pod}", pods_path())).json();
    let target = pod["status"]["conditions"].as_array().into_iter().flatten().find(|c| c["type"] == "DisruptionTarget");
    let target = target.map(|c| json!({"status": c["status"], "reason": c["reason"], "message": c["message"]}));
    let pdb = s.get(&format!("{}/{pdb}", budgets_path())).json();
    let disrupted: Vec<&String> =
        pdb["status"]["disruptedPods"].as_object().map(|m| m.keys().collect()).unwrap_or_default();
    let conditions: Vec<Value> = pdb["status"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            json!({"type": c["type"], "status": c["status"], "reason": c["reason"], "message": c["message"],
            "observedGeneration": c["observedGeneration"], "timed": c["lastTransitionTime"].is_string()})
        })
        .collect();
    json!({"deleting": pod["metadata"]["deletionTimestamp"].is_string(), "disruptionTarget": target,
        "disruptionsAllowed": pdb["status"]["disruptionsAllowed"], "disruptedPods": disrupted, "conditions": conditions})
}

#[test]
fn evictions_answer_as_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    for s in [&pair.sandbox, &pair.real] {
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
        assert_eq!(s.admin("POST", &format!("/api/v1/namespaces/{NS}/serviceaccounts"), &[], &account).code, 201);
    }
    pair.check("no disruption left: 429 with the DisruptionBudget cause", |s| {
        bound_pod(s, "full-1", "full", "Running", true);
        budget(s, "full", "full", None, budget_status(0, 1, 1, false));
        let refused = evict_pod(s, "full-1", "", Value::Null).shape();
        json!({"refused": refused, "after": after_eviction(s, "full-1", "full")})
    });
    pair.check("a budget not yet observed: 429, still being processed", |s| {
        bound_pod(s, "stale-1", "stale", "Running", true);
        budget(s, "stale", "stale", None, budget_status(1, 2, 1, true));
        json!({"refused": evict_pod(s, "stale-1", "", Value::Null).shape(), "after": after_eviction(s, "stale-1", "stale")})
    });
    pair.check("an allowed eviction: 201, the pod recorded as disrupted, the last disruption spent", |s| {
        bound_pod(s, "ok-1", "ok", "Running", true);
        budget(s, "ok", "ok", None, budget_status(1, 2, 1, false));
        json!({"evicted": evict_pod(s, "ok-1", "", Value::Null).shape(), "after": after_eviction(s, "ok-1", "ok")})
    });
    pair.check("dry run: 201, nothing written", |s| {
        bound_pod(s, "dry-1", "dry", "Running", true);
        budget(s, "dry", "dry", None, budget_status(1, 2, 1, false));
        let query = evict_pod(s, "dry-1", "?dryRun=All", Value::Null).shape();
        let body = evict_pod(s, "dry-1", "", json!({"dryRun": ["All"]})).shape();
        let mismatched = evict_pod(s, "dry-1", "?dryRun=All", json!({"dryRun": ["Other"]})).shape();
        json!({"query": query, "body": body, "mismatched": mismatched, "after": after_eviction(s, "dry-1", "dry")})
    });
    pair.check("unready pods: evicted while the budget is healthy or AlwaysAllow, else 429", |s| {
        bound_pod(s, "sick-1", "sick", "Running", false);
        budget(s, "sick", "sick", None, budget_status(0, 1, 1, false));
        let healthy_budget = evict_pod(s, "sick-1", "", Value::Null).shape();
        bound_pod(s, "weak-1", "weak", "Running", false);
        budget(s, "weak", "weak", Some("IfHealthyBudget"), budget_status(0, 0, 1, false));
        let unhealthy_budget = evict_pod(s, "weak-1", "", Value::Null).shape();
        bound_pod(s, "any-1", "any", "Running", false);
        budget(s, "any", "any", Some("AlwaysAllow"), budget_status(0, 0, 1, false));
        let always = evict_pod(s, "any-1", "", Value::Null).shape();
        json!({"healthy budget": healthy_budget, "after healthy": after_eviction(s, "sick-1", "sick"),
            "unhealthy budget": unhealthy_budget, "always allow": always, "after always": after_eviction(s, "any-1", "any")})
    });
    pair.check("terminal and pending pods need no budget", |s| {
        bound_pod(s, "done-1", "done", "Succeeded", false);
        bound_pod(s, "wait-1", "done", "Pending", false);
        budget(s, "done", "done", None, budget_status(0, 0, 1, false));
        let succeeded = evict_pod(s, "done-1", "", Value::Null).shape();
        let pending = evict_pod(s, "wait-1", "", Value::Null).shape();
        json!({"succeeded": succeeded, "pending": pending, "after": after_eviction(s, "wait-1", "done")})
    });
    pair.check("two budgets over one pod: 500", |s| {
        bound_pod(s, "twice-1", "twice", "Running", true);
        budget(s, "twice-a", "twice", None, budget_status(1, 1, 0, false));
        budget(s, "twice-b", "twice", None, budget_status(1, 1, 0, false));
        json!({"refused": evict_pod(s, "twice-1", "", Value::Null).shape(), "after": after_eviction(s, "twice-1", "twice-a")})
    });
    pair.check("bad requests: another name, a stale resourceVersion, the store-read override", |s| {
        bound_pod(s, "bad-1", "bad", "Running", true);
        budget(s, "bad", "bad", None, budget_status(1, 2, 1, false));
        let mut eviction = json!({"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "other"}});
        let renamed = s.admin("POST", &format!("{}/bad-1/eviction", pods_path()), &[], &eviction).shape();
        eviction["metadata"]["name"] = json!("bad-1");
        let stale = evict_pod(s, "bad-1", "", json!({"preconditions": {"resourceVersion": "1"}})).shape();
        let unsafe_read =
            evict_pod(s, "bad-1", "", json!({"ignoreStoreReadErrorWithClusterBreakingPotential": true})).shape();
        let missing = evict_pod(s, "nobody", "", Value::Null).shape();
        json!({"renamed": renamed, "stale": stale, "unsafe": unsafe_read, "missing": missing,
            "after": after_eviction(s, "bad-1", "bad")})
    });
    pair.assert_conforms();
}

/// A PEM PKCS#10 request, base64 for `spec.request`.
fn csr_request() -> String {
    csr_request_for("system:nodes")
}

/// A PEM PKCS#10 request with `organization` in its subject, base64.
fn csr_request_for(organization: &str) -> String {
    use base64::Engine;
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(rcgen::DnType::CommonName, "system:node:conf");
    params.distinguished_name.push(rcgen::DnType::OrganizationName, organization);
    let pem = params.serialize_request(&key).unwrap().pem().unwrap();
    base64::engine::general_purpose::STANDARD.encode(pem)
}

/// Lets `user` read, create and update CSRs with their approval and status, but neither approve
/// nor sign for any signer.
fn grant_csr_updates(s: &Server, user: &str) {
    let role = json!({"metadata": {"name": "csr-updater"}, "rules": [{"apiGroups": ["certificates.k8s.io"],
        "resources": ["certificatesigningrequests", "certificatesigningrequests/approval", "certificatesigningrequests/status"],
        "verbs": ["get", "create", "update"]}]});
    let binding = json!({"metadata": {"name": "csr-updater"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "csr-updater"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]});
    for (path, body) in [("clusterroles", role), ("clusterrolebindings", binding)] {
        let created = s.admin("POST", &format!("/apis/rbac.authorization.k8s.io/v1/{path}"), &[], &body);
        assert_eq!(created.code, 201, "{}", created.text());
    }
}

#[test]
fn csrs_answer_as_kube_apiserver() {
    const CSRS: &str = "/apis/certificates.k8s.io/v1/certificatesigningrequests";
    let Some(mut pair) = Pair::start() else { return };
    let request = csr_request();
    let csr = |name: &str, signer: &str, usages: Value, expiration: Value| {
        json!({"apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest", "metadata": {"name": name},
            "spec": {"request": request, "signerName": signer, "usages": usages, "expirationSeconds": expiration}})
    };
    pair.check("an invalid CSR: unknown and repeated usages, the legacy signer, 599 seconds", |s| {
        let bad = csr("bad", "kubernetes.io/legacy-unknown", json!(["client auth", "bogus", "client auth"]), json!(599));
        let no_usages = csr("none", "example.com/signer", json!([]), Value::Null);
        json!({"bad": s.admin("POST", CSRS, &[], &bad).shape(), "no usages": s.admin("POST", CSRS, &[], &no_usages).shape()})
    });
    pair.check("approval changes only the conditions; status only the status", |s| {
        let good = csr("good", "kubernetes.io/kube-apiserver-client-kubelet", json!(["digital signature", "client auth"]), json!(600));
        let created = s.admin("POST", CSRS, &[], &good);
        let mut object = created.json();
        object["status"]["conditions"] = json!([{"type": "Approved", "status": "True", "reason": "Test", "message": "ok"}]);
        object["spec"]["usages"] = json!(["client auth"]);
        let approved = s.admin("PUT", &format!("{CSRS}/good/approval"), &[], &object);
        let after = approved.json();
        let conditions: Vec<Value> = after["status"]["conditions"].as_array().cloned().unwrap_or_default().iter()
            .map(|c| json!({"type": c["type"], "status": c["status"], "reason": c["reason"], "times": c["lastUpdateTime"].is_string() && c["lastTransitionTime"].is_string()}))
            .collect();
        json!({"created": created.shape(), "spec": {"username": created.json()["spec"]["username"], "usages": after["spec"]["usages"]},
            "approved": approved.code, "conditions": conditions})
    });
    pair.check("approving and signing need approve and sign on the signer: 403 for a CSR updater", |s| {
        grant_csr_updates(s, "carol");
        let user = s.server.user_config("carol", &[]).expect("user credentials");
        let mut object = s
            .admin("POST", CSRS, &[], &csr("carols", "example.com/signer", json!(["client auth"]), Value::Null))
            .json();
        object["status"]["conditions"] =
            json!([{"type": "Approved", "status": "True", "reason": "Test", "message": "ok"}]);
        let approve = s.request(&user, "PUT", &format!("{CSRS}/carols/approval"), &[], &object);
        object["status"]["conditions"] =
            json!([{"type": "Failed", "status": "True", "reason": "Test", "message": "no"}]);
        let fail = s.request(&user, "PUT", &format!("{CSRS}/carols/status"), &[], &object);
        let unchanged =
            s.request(&user, "PUT", &format!("{CSRS}/carols/status"), &[], &s.get(&format!("{CSRS}/carols")).json());
        json!({"approve": approve.shape(), "fail": fail.shape(), "unchanged status": unchanged.code})
    });
    pair.check("a node asks a kubelet signer for its own name only (NodeRestriction)", |s| {
        let usages = json!(["digital signature", "client auth"]);
        let binding = json!({"metadata": {"name": "node-csr-requesters"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node-bootstrapper"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}]});
        let bound = s.admin("POST", "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", &[], &binding);
        assert_eq!(bound.code, 201, "{}", bound.text());
        let mut shapes = Vec::new();
        for (node, name) in [("system:node:conf", "own"), ("system:node:other", "another")] {
            let user = s.server.user_config(node, &["system:nodes"]).expect("node credentials");
            let object = csr(name, "kubernetes.io/kube-apiserver-client-kubelet", usages.clone(), Value::Null);
            shapes.push(s.request(&user, "POST", CSRS, &[], &object).shape());
        }
        let user = s.server.user_config("system:node:other", &["system:nodes"]).expect("node credentials");
        let other_signer = csr("other-signer", "example.com/signer", usages, Value::Null);
        shapes.push(s.request(&user, "POST", CSRS, &[], &other_signer).shape());
        json!(shapes)
    });
    pair.check("a request that is not a PEM CERTIFICATE REQUEST: 422", |s| {
        use base64::Engine;
        let mut object = csr("junk", "example.com/signer", json!(["client auth"]), Value::Null);
        object["spec"]["request"] = json!(
            base64::engine::general_purpose::STANDARD
                .encode("-----BEGIN CERTIFICATE-----\naGk=\n-----END CERTIFICATE-----\n")
        );
        let wrong_type = s.admin("POST", CSRS, &[], &object).shape();
        object["spec"]["request"] = json!("aGk=");
        let not_pem = s.admin("POST", CSRS, &[], &object).shape();
        object["spec"].as_object_mut().unwrap().remove("request");
        json!({"wrong type": wrong_type, "not pem": not_pem, "missing": s.admin("POST", CSRS, &[], &object).shape()})
    });
    pair.check("condition rules on approval and status: 422", |s| {
        let mut object = s.admin("POST", CSRS, &[], &csr("rules", "example.com/signer", json!(["client auth"]), Value::Null)).json();
        let condition = |t: &str, status: &str| json!({"type": t, "status": status, "reason": "Test", "message": "m"});
        let mut put = |sub: &str, conditions: Value| {
            object["status"]["conditions"] = conditions;
            s.admin("PUT", &format!("{CSRS}/rules/{sub}"), &[], &object).shape()
        };
        json!({
            "both": put("approval", json!([condition("Approved", "True"), condition("Denied", "True")])),
            "twice": put("approval", json!([condition("Approved", "True"), condition("Approved", "True")])),
            "statuses": put("approval", json!([condition("Approved", "False"), condition("Custom", "Maybe"), condition("", "")])),
            "approved by status": put("status", json!([condition("Approved", "True")])),
            "approved": put("approval", json!([condition("Approved", "True")]))["code"],
            "removed": put("status", json!([])),
        })
    });
    pair.check("a bad signature, malformed signer names: 422", |s| {
        use base64::Engine;
        let engine = base64::engine::general_purpose::STANDARD;
        let pem = engine.decode(&request).unwrap();
        let (_, mut der) = kcm::x509::pem_blocks(&pem).remove(0);
        let last = der.len() - 1;
        der[last] ^= 1; // the signature's last byte
        let mut object = csr("tampered", "example.com/signer", json!(["client auth"]), Value::Null);
        object["spec"]["request"] = json!(engine.encode(kcm::x509::pem_encode("CERTIFICATE REQUEST", &der)));
        let tampered = s.admin("POST", CSRS, &[], &object).shape();
        let signers: Vec<Value> = ["", "example.com", "example/x", "Example.com/x_y", "a.b/c/d"]
            .iter()
            .map(|signer| {
                s.admin("POST", CSRS, &[], &csr("signer", signer, json!(["client auth"]), Value::Null)).shape()
            })
            .collect();
        json!({"tampered": tampered, "signers": signers})
    });
    pair.check("status: only CERTIFICATE PEM (422); Approved kept as stored", |s| {
        use base64::Engine;
        let engine = base64::engine::general_purpose::STANDARD;
        let mut object =
            s.admin("POST", CSRS, &[], &csr("form", "example.com/signer", json!(["client auth"]), Value::Null)).json();
        object["status"]["conditions"] =
            json!([{"type": "Approved", "status": "True", "reason": "Test", "message": "m"}]);
        object = s.admin("PUT", &format!("{CSRS}/form/approval"), &[], &object).json();
        let key = rcgen::KeyPair::generate().unwrap();
        let mut certificates = Vec::new();
        for pem in [key.serialize_pem(), "not pem".to_string(), kcm::x509::pem_encode("CERTIFICATE", b"junk")] {
            let mut update = object.clone();
            update["status"]["certificate"] = json!(engine.encode(pem));
            certificates.push(s.admin("PUT", &format!("{CSRS}/form/status"), &[], &update).shape());
        }
        // The status strategy keeps the stored Approved condition over a changed one.
        object["status"]["conditions"][0]["reason"] = json!("Changed");
        let modified = s.admin("PUT", &format!("{CSRS}/form/status"), &[], &object);
        json!({"certificates": certificates, "modified": {"code": modified.code,
            "reason": modified.json()["status"]["conditions"][0]["reason"]}})
    });
    pair.check("a kube-apiserver-client CSR for system:masters: 403, even for an admin", |s| {
        let masters = csr_request_for("system:masters");
        let mut object = csr("masters", "kubernetes.io/kube-apiserver-client", json!(["client auth"]), Value::Null);
        object["spec"]["request"] = json!(masters);
        let refused = s.admin("POST", CSRS, &[], &object).shape();
        object["spec"]["signerName"] = json!("example.com/signer");
        json!({"refused": refused, "other signer": s.admin("POST", CSRS, &[], &object).code})
    });
    pair.assert_conforms();
}

// ---------------------------------------------------------------------------------------------
// ServiceCIDRs and IPAddresses
// ---------------------------------------------------------------------------------------------

const SERVICE_CIDRS: &str = "/apis/networking.k8s.io/v1/servicecidrs";
const IP_ADDRESSES: &str = "/apis/networking.k8s.io/v1/ipaddresses";

fn service_cidr(name: &str, cidrs: Value) -> Value {
    json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": name},
        "spec": {"cidrs": cidrs}})
}

/// An object's `part`s, its shape and its Ready condition without its time.
fn cidr_or_address(answer: &Answer) -> Value {
    let body = answer.json();
    if !(200..300).contains(&answer.code) {
        return answer.shape();
    }
    let mut conditions = body["status"]["conditions"].clone();
    for condition in conditions.as_array_mut().into_iter().flatten() {
        condition["lastTransitionTime"] = json!("<time>");
    }
    json!({"code": answer.code, "shape": answer.shape(), "labels": body["metadata"]["labels"],
        "finalizers": body["metadata"]["finalizers"], "spec": body["spec"], "conditions": conditions})
}

fn service_with_ip(s: &Server, name: &str, ip: &str) -> Answer {
    let service = json!({"metadata": {"name": name}, "spec": {"clusterIP": ip, "ports": [{"port": 80}]}});
    s.admin("POST", &format!("/api/v1/namespaces/{NS}/services"), &[], &service)
}

#[test]
fn service_cidrs_and_ip_addresses_answer_as_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    pair.check("the default ServiceCIDR and the kubernetes Service's IPAddress", |s| {
        // kube-apiserver creates both (and marks the ServiceCIDR Ready) shortly after it starts.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let cidr = s.get(&format!("{SERVICE_CIDRS}/kubernetes"));
            let address = s.get(&format!("{IP_ADDRESSES}/10.96.0.1"));
            let ready = cidr.code == 200 && cidr.json()["status"]["conditions"].is_array() && address.code == 200;
            if ready || std::time::Instant::now() > deadline {
                break json!({"cidr": cidr_or_address(&cidr), "address": cidr_or_address(&address)});
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    });
    pair.check("a Service's IPAddress", |s| {
        let created = service_with_ip(s, "web", "10.96.0.50");
        assert_eq!(created.code, 201, "{}", created.text());
        cidr_or_address(&s.get(&format!("{IP_ADDRESSES}/10.96.0.50")))
    });
    pair.check("ServiceCIDR validation", |s| {
        let refuse = |name: &str, cidrs: Value| s.admin("POST", SERVICE_CIDRS, &[], &service_cidr(name, cidrs)).shape();
        json!({
            "none": refuse("none", json!([])),
            "same family": refuse("twice", json!(["10.200.0.0/24", "10.201.0.0/24"])),
            "bits set": refuse("bits", json!(["10.200.0.1/24"])),
            "not a CIDR": refuse("junk", json!(["junk"])),
        })
    });
    pair.check("a new ServiceCIDR, immutable", |s| {
        let created = s.admin("POST", SERVICE_CIDRS, &[], &service_cidr("extra", json!(["10.200.0.0/24"])));
        let mut changed = created.json();
        changed["spec"]["cidrs"] = json!(["10.201.0.0/24"]);
        let refused = s.admin("PUT", &format!("{SERVICE_CIDRS}/extra"), &[], &changed).shape();
        json!({"created": cidr_or_address(&created), "refused": refused})
    });
    pair.check("Service IPs from the new range, and from none", |s| {
        let inside = service_with_ip(s, "db", "10.200.0.7");
        let outside = service_with_ip(s, "lost", "10.250.0.1").shape();
        json!({"inside": inside.code, "address": cidr_or_address(&s.get(&format!("{IP_ADDRESSES}/10.200.0.7"))),
            "outside": outside})
    });
    pair.check("a status applied", |s| {
        let apply = json!({"apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR", "metadata": {"name": "extra"},
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Checked", "message": "ok",
                "lastTransitionTime": "2026-11-26T10:00:00Z"}]}});
        let headers = [("Content-Type", "application/apply-patch+yaml")];
        let path = format!("{SERVICE_CIDRS}/extra/status");
        let applied = s.admin("PATCH", &format!("{path}?fieldManager=conformance&force=true"), &headers, &apply);
        let unmanaged = s.admin("PATCH", &path, &headers, &apply).shape();
        json!({"applied": cidr_or_address(&applied), "without a field manager": unmanaged})
    });
    pair.check("deleted Services release their IPs; a ServiceCIDR without finalizer goes", |s| {
        let deleted = s.admin("DELETE", &format!("/api/v1/namespaces/{NS}/services/db"), &[], &Value::Null).code;
        let released = s.get(&format!("{IP_ADDRESSES}/10.200.0.7")).code;
        let cidr = s.admin("DELETE", &format!("{SERVICE_CIDRS}/extra"), &[], &Value::Null).shape();
        let gone = s.get(&format!("{SERVICE_CIDRS}/extra")).code;
        json!({"service": deleted, "address": released, "cidr": cidr, "gone": gone})
    });
    pair.assert_conforms();
}

// ---------------------------------------------------------------------------------------------
// PersistentVolumeClaim resizing
// ---------------------------------------------------------------------------------------------

fn claims_path() -> String {
    format!("/api/v1/namespaces/{NS}/persistentvolumeclaims")
}

/// A claim of `class` for 1Gi, Bound with that capacity unless `pending`.
fn resizable_claim(s: &Server, name: &str, class: &str, pending: bool) {
    let claim = json!({"metadata": {"name": name}, "spec": {"accessModes": ["ReadWriteOnce"],
        "storageClassName": class, "resources": {"requests": {"storage": "1Gi"}}}});
    let created = s.admin("POST", &claims_path(), &[], &claim);
    assert_eq!(created.code, 201, "{}", created.text());
    if !pending {
        let status = json!({"status": {"phase": "Bound", "capacity": {"storage": "1Gi"}}});
        let path = format!("{}/{name}/status", claims_path());
        let bound = s.admin("PATCH", &path, &[("Content-Type", "application/merge-patch+json")], &status);
        assert_eq!(bound.code, 200, "{}", bound.text());
    }
}

fn request_storage(s: &Server, name: &str, size: &str) -> Answer {
    let patch = json!({"spec": {"resources": {"requests": {"storage": size}}}});
    let path = format!("{}/{name}", claims_path());
    s.admin("PATCH", &path, &[("Content-Type", "application/merge-patch+json")], &patch)
}

#[test]
fn claims_resize_as_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    for s in [&pair.sandbox, &pair.real] {
        for (name, expandable) in [("grow", true), ("fixed", false)] {
            let class = json!({"metadata": {"name": name}, "provisioner": "csi.kcm-sandbox.dev",
                "allowVolumeExpansion": expandable});
            let created = s.admin("POST", "/apis/storage.k8s.io/v1/storageclasses", &[], &class);
            assert_eq!(created.code, 201, "{}", created.text());
        }
        resizable_claim(s, "a", "grow", false);
        resizable_claim(s, "b", "fixed", false);
        resizable_claim(s, "c", "grow", true);
    }
    pair.check("a bound claim of an expandable class grows", |s| {
        let grown = request_storage(s, "a", "3Gi");
        json!({"code": grown.code, "spec": stored(&grown, "spec")})
    });
    pair.check(
        "a class without expansion, a pending claim: forbidden",
        |s| json!({"fixed": request_storage(s, "b", "2Gi").shape(), "pending": request_storage(s, "c", "2Gi").shape()}),
    );
    pair.check("shrinking: down to above the capacity (recovery), not to it", |s| {
        let recovered = request_storage(s, "a", "2Gi");
        let refused = request_storage(s, "a", "1Gi").shape();
        json!({"recovered": {"code": recovered.code, "spec": stored(&recovered, "spec")}, "refused": refused})
    });
    pair.check("other spec fields of a bound claim are immutable", |s| {
        let patch = json!({"spec": {"accessModes": ["ReadWriteMany"]}});
        let path = format!("{}/a", claims_path());
        s.admin("PATCH", &path, &[("Content-Type", "application/merge-patch+json")], &patch).shape()
    });
    pair.check("a status update writes annotations", |s| {
        let patch = json!({"metadata": {"annotations": {"volume.kubernetes.io/storage-resizer": "x"}}});
        let path = format!("{}/a/status", claims_path());
        let patched = s.admin("PATCH", &path, &[("Content-Type", "application/merge-patch+json")], &patch);
        json!({"code": patched.code, "annotations": patched.json()["metadata"]["annotations"]})
    });
    pair.assert_conforms();
}

const CSI_DRIVERS: &str = "/apis/storage.k8s.io/v1/csidrivers";
const CSI_NODES: &str = "/apis/storage.k8s.io/v1/csinodes";
const VOLUME_ATTACHMENTS: &str = "/apis/storage.k8s.io/v1/volumeattachments";

fn attachment(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": {"name": name}, "spec": spec})
}

/// An object's spec (and status) as stored, or the shape of the refusal.
fn spec_or_refusal(answer: &Answer) -> Value {
    if !(200..300).contains(&answer.code) {
        return answer.shape();
    }
    let body = answer.json();
    json!({"code": answer.code, "spec": body["spec"], "status": body["status"]})
}

#[test]
fn csi_drivers_nodes_and_volume_attachments_answer_as_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    pair.check("a CSIDriver defaulted, attachRequired immutable", |s| {
        let driver = json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "d.example.dev"},
            "spec": {}});
        let created = s.admin("POST", CSI_DRIVERS, &[], &driver);
        let mut changed = created.json();
        changed["spec"]["attachRequired"] = json!(false);
        changed["spec"]["volumeLifecycleModes"] = json!(["Persistent", "Ephemeral"]);
        let refused = s.admin("PUT", &format!("{CSI_DRIVERS}/d.example.dev"), &[], &changed).shape();
        let bad = json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": "bad.example.dev"},
            "spec": {"fsGroupPolicy": "Sometimes", "volumeLifecycleModes": ["Forever"]}});
        json!({"created": spec_or_refusal(&created), "refused": refused,
            "invalid": s.admin("POST", CSI_DRIVERS, &[], &bad).shape()})
    });
    pair.check("CSINode validation", |s| {
        let node = |name: &str, drivers: Value| {
            json!({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode", "metadata": {"name": name}, "spec": {"drivers": drivers}})
        };
        let good = node("n1", json!([{"name": "d.example.dev", "nodeID": "n1", "topologyKeys": ["topology.kubernetes.io/zone"]}]));
        let created = s.admin("POST", CSI_NODES, &[], &good);
        let mut moved = created.json();
        moved["spec"]["drivers"][0]["nodeID"] = json!("n2");
        let refused = s.admin("PUT", &format!("{CSI_NODES}/n1"), &[], &moved).shape();
        let twice = node("n2", json!([{"name": "d", "nodeID": "n2"}, {"name": "d", "nodeID": ""}]));
        let bad_key = node("n3", json!([{"name": "d", "nodeID": "n3", "topologyKeys": ["a/b/c"]}]));
        json!({"created": spec_or_refusal(&created), "refused": refused,
            "twice": s.admin("POST", CSI_NODES, &[], &twice).shape(),
            "bad key": s.admin("POST", CSI_NODES, &[], &bad_key).shape()})
    });
    pair.check("VolumeAttachment validation, spec immutable, status written", |s| {
        let spec =
            json!({"attacher": "d.example.dev", "nodeName": "node-a", "source": {"persistentVolumeName": "pv1"}});
        let created = s.admin("POST", VOLUME_ATTACHMENTS, &[], &attachment("va1", spec));
        let mut moved = created.json();
        moved["spec"]["nodeName"] = json!("node-b");
        let refused = s.admin("PUT", &format!("{VOLUME_ATTACHMENTS}/va1"), &[], &moved).shape();
        let headers = [("Content-Type", "application/merge-patch+json")];
        let attached = json!({"status": {"attached": true}});
        let status = s.admin("PATCH", &format!("{VOLUME_ATTACHMENTS}/va1/status"), &headers, &attached);
        let invalid =
            |name: &str, spec: Value| s.admin("POST", VOLUME_ATTACHMENTS, &[], &attachment(name, spec)).shape();
        json!({"created": spec_or_refusal(&created), "refused": refused, "status": spec_or_refusal(&status),
            "empty": invalid("empty", json!({"attacher": "", "nodeName": "", "source": {}})),
            "bad names": invalid("names", json!({"attacher": "Bad_Driver", "nodeName": "Node_A",
                "source": {"persistentVolumeName": ""}}))})
    });
    pair.assert_conforms();
}

const POLICIES: &str = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies";

fn admission_policy(name: &str, validations: Value) -> Value {
    json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {"matchConstraints": {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"],
            "operations": ["CREATE"], "resources": ["deployments"]}]}, "validations": validations}})
}

/// A policy's answer: its shape, generation, spec (defaulted) and status.
fn policy_answer(answer: &Answer) -> Value {
    if !(200..300).contains(&answer.code) {
        return answer.shape();
    }
    let body = answer.json();
    json!({"code": answer.code, "shape": answer.shape(), "generation": body["metadata"]["generation"],
        "spec": body["spec"], "status": body["status"]})
}

#[test]
fn admission_policies_answer_as_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    pair.check("a policy created, defaulted", |s| {
        policy_answer(&s.admin("POST", POLICIES, &[], &admission_policy("p", json!([{"expression": "true"}]))))
    });
    pair.check("expressions that do not compile", |s| {
        let refuse = |name: &str, validations: Value| {
            s.admin("POST", POLICIES, &[], &admission_policy(name, validations)).shape()
        };
        json!({
            "params without paramKind": refuse("a", json!([{"expression": "params.x > 1"}])),
            "undeclared function": refuse("b", json!([{"expression": "nosuch(object)"}])),
            "message expression": refuse("c", json!([{"expression": "true", "messageExpression": "foo"}])),
            "no validations": refuse("d", json!([])),
        })
    });
    pair.check("a status applied, then a spec change", |s| {
        let apply = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "p"}, "status": {"observedGeneration": 1, "typeChecking": {"expressionWarnings": [
                {"fieldRef": "spec.validations[0].expression", "warning": "w"}]}}});
        let headers = [("Content-Type", "application/apply-patch+yaml")];
        let path = format!("{POLICIES}/p/status?fieldManager=conformance&force=true");
        let applied = policy_answer(&s.admin("PATCH", &path, &headers, &apply));
        let merge = [("Content-Type", "application/merge-patch+json")];
        let spec = json!({"spec": {"validations": [{"expression": "false"}]}});
        let changed = policy_answer(&s.admin("PATCH", &format!("{POLICIES}/p"), &merge, &spec));
        json!({"applied": applied, "changed": changed})
    });
    pair.assert_conforms();
}

// ---------------------------------------------------------------------------------------------
// Discovery, /version and the bootstrap RBAC policy
// ---------------------------------------------------------------------------------------------

/// The aggregated APIs the sandbox serves itself (a real cluster gets them from metrics-server
/// and the metrics adapters, which the test's kube-apiserver has not).
const AGGREGATED_GROUPS: &[&str] = &["metrics.k8s.io", "custom.metrics.k8s.io", "external.metrics.k8s.io"];

/// The group versions the sandbox serves (`v1` for the core group), in its discovery's order.
fn served_group_versions(sandbox: &Server) -> Vec<String> {
    let groups = sandbox.get("/apis").json();
    let mut served = vec!["v1".to_string()];
    for group in groups["groups"].as_array().into_iter().flatten() {
        if AGGREGATED_GROUPS.contains(&group["name"].as_str().unwrap_or_default()) {
            continue;
        }
        for version in group["versions"].as_array().into_iter().flatten() {
            served.push(version["groupVersion"].as_str().unwrap_or_default().to_string());
        }
    }
    served
}

fn discovery_path(group_version: &str) -> String {
    if group_version.contains('/') { format!("/apis/{group_version}") } else { format!("/api/{group_version}") }
}

/// An `APIResourceList`'s entries (resources and subresources) named in `names`, without the
/// storage version hash (the sandbox stores no versions).
fn resources_named(list: &Value, names: &[String]) -> Value {
    let entries: Vec<Value> = list["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| names.iter().any(|n| r["name"] == n.as_str()))
        .map(|r| {
            let mut r = r.clone();
            r.as_object_mut().map(|m| m.remove("storageVersionHash"));
            r
        })
        .collect();
    json!({"groupVersion": list["groupVersion"], "resources": entries})
}

/// An aggregated discovery resource, its subresources limited to those in `names`.
fn aggregated_resource_named(resource: &Value, names: &[String]) -> Value {
    let mut resource = resource.clone();
    let plural = resource["resource"].as_str().unwrap_or_default().to_string();
    if let Some(subresources) = resource["subresources"].as_array_mut() {
        subresources.retain(|s| names.contains(&format!("{plural}/{}", s["subresource"].as_str().unwrap_or_default())));
    }
    resource
}

/// An aggregated discovery document's entry for `group`, only its `version`, its resources
/// limited to those in `names`.
fn aggregated_group_named(list: &Value, group: &str, version: &str, names: &[String]) -> Value {
    let Some(item) = list["items"].as_array().into_iter().flatten().find(|i| i["metadata"]["name"] == group) else {
        return Value::Null;
    };
    let mut item = item.clone();
    if let Some(versions) = item["versions"].as_array_mut() {
        versions.retain(|v| v["version"] == version);
        for version in versions {
            if let Some(resources) = version["resources"].as_array_mut() {
                resources.retain(|r| names.iter().any(|n| r["resource"] == n.as_str()));
                for resource in resources.iter_mut() {
                    *resource = aggregated_resource_named(resource, names);
                }
            }
        }
    }
    item
}

#[test]
fn discovery_answers_as_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    pair.check("/version", |s| {
        let version = s.get("/version").json();
        let keys: Vec<&String> = version.as_object().map(|m| m.keys().collect()).unwrap_or_default();
        json!({"keys": keys, "major": version["major"], "minor": version["minor"],
            "emulation": [version["emulationMajor"], version["emulationMinor"]],
            "minCompatibility": [version["minCompatibilityMajor"], version["minCompatibilityMinor"]],
            "gitVersion": version["gitVersion"]})
    });
    let served = served_group_versions(&pair.sandbox);
    let aggregated = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    for group_version in &served {
        let path = discovery_path(group_version);
        // What the sandbox serves, subresources included; kube-apiserver serves more (the
        // kubelet's streaming subresources, pods/resize, autoscaling/v1, ...), which are not
        // compared.
        let names: Vec<String> = pair.sandbox.get(&path).json()["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str().map(str::to_string))
            .collect();
        pair.check(&format!("discovery of {group_version}"), |s| resources_named(&s.get(&path).json(), &names));
        let (group, version, root) = match group_version.split_once('/') {
            Some((group, version)) => (group.to_string(), version.to_string(), "/apis"),
            None => (String::new(), group_version.clone(), "/api"),
        };
        pair.check(&format!("aggregated discovery of {group_version}"), |s| {
            let list = s.admin("GET", root, &[("Accept", aggregated)], &Value::Null).json();
            if group.is_empty() {
                let resources: Vec<Value> = list["items"][0]["versions"][0]["resources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter(|r| names.iter().any(|n| r["resource"] == n.as_str()))
                    .map(|r| aggregated_resource_named(r, &names))
                    .collect();
                json!({"metadata": list["items"][0]["metadata"], "resources": resources})
            } else {
                aggregated_group_named(&list, &group, &version, &names)
            }
        });
    }
    pair.assert_conforms();
}

#[test]
fn table_columns_answer_as_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    let table = [("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")];
    for group_version in served_group_versions(&pair.sandbox) {
        let root = discovery_path(&group_version);
        let listed: Vec<(String, bool)> = pair.sandbox.get(&root).json()["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|r| r["verbs"].as_array().is_some_and(|v| v.iter().any(|v| v == "list")))
            .map(|r| (r["name"].as_str().unwrap_or_default().to_string(), r["namespaced"] == true))
            .collect();
        for (plural, namespaced) in listed {
            let path = if namespaced { format!("{root}/namespaces/{NS}/{plural}") } else { format!("{root}/{plural}") };
            pair.check(&format!("table columns of {group_version} {plural}"), |s| {
                s.admin("GET", &path, &table, &Value::Null).json()["columnDefinitions"].clone()
            });
        }
    }
    pair.assert_conforms();
}

/// OpenShift's own additions to the bootstrap policy of its kube-apiserver build, which
/// upstream's has not.
fn is_openshift_addition(name: &str) -> bool {
    name.starts_with("system:openshift:") || name == "system:controller:service-ca-cert-publisher"
}

/// The names of the bootstrap objects (label `kubernetes.io/bootstrapping: rbac-defaults`) of
/// an RBAC collection, sorted.
fn bootstrap_names(s: &Server, plural: &str) -> Vec<String> {
    let list = s.get(&format!(
        "/apis/rbac.authorization.k8s.io/v1/{plural}?labelSelector=kubernetes.io%2Fbootstrapping%3Drbac-defaults"
    ));
    let mut names: Vec<String> = list.json()["items"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| {
            let ns = o["metadata"]["namespace"].as_str().map(|ns| format!("{ns}/")).unwrap_or_default();
            format!("{ns}{}", o["metadata"]["name"].as_str().unwrap_or_default())
        })
        .filter(|name| !is_openshift_addition(name))
        .collect();
    names.sort();
    names
}

#[test]
fn bootstrap_policy_is_kube_apiservers() {
    let Some(mut pair) = Pair::start() else { return };
    for plural in ["clusterroles", "clusterrolebindings", "roles", "rolebindings"] {
        pair.check(&format!("bootstrap {plural}"), |s| json!(bootstrap_names(s, plural)));
    }
    pair.check("the roles of the controllers on by default since v1.34", |s| {
        let role = |name: &str| {
            let role = s.get(&format!("/apis/rbac.authorization.k8s.io/v1/clusterroles/system:controller:{name}")).json();
            json!({"rules": role["rules"], "labels": role["metadata"]["labels"], "annotations": role["metadata"]["annotations"]})
        };
        json!({
            "resource-claim-controller": role("resource-claim-controller"),
            "device-taint-eviction-controller": role("device-taint-eviction-controller"),
            "volumeattributesclass-protection-controller": role("volumeattributesclass-protection-controller"),
            "system:kube-scheduler": s.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/system:kube-scheduler").json()["rules"],
        })
    });
    pair.assert_conforms();
}

// ---------------------------------------------------------------------------------------------
// resource.k8s.io/v1 (Dynamic Resource Allocation) and storage.k8s.io/v1 VolumeAttributesClass
// ---------------------------------------------------------------------------------------------

const DEVICE_CLASSES: &str = "/apis/resource.k8s.io/v1/deviceclasses";
const RESOURCE_SLICES: &str = "/apis/resource.k8s.io/v1/resourceslices";
const VOLUME_ATTRIBUTES_CLASSES: &str = "/apis/storage.k8s.io/v1/volumeattributesclasses";

fn resource_claims() -> String {
    format!("/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaims")
}

fn resource_claim_templates() -> String {
    format!("/apis/resource.k8s.io/v1/namespaces/{NS}/resourceclaimtemplates")
}

fn dra_object(kind: &str, name: &str, labels: Value, spec: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": name, "labels": labels}, "spec": spec})
}

/// A claim spec asking for one device of class `gpu.example.com`, said as briefly as allowed.
fn gpu_claim_spec() -> Value {
    json!({"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com",
        "tolerations": [{"key": "example.com/broken", "effect": "NoExecute", "tolerationSeconds": 30}]}}]}})
}

/// What a written object says: its shape, generation, spec and status (uids and times
/// replaced), or the shape of the refusal.
fn written(answer: &Answer) -> Value {
    if !(200..300).contains(&answer.code) {
        return answer.shape();
    }
    let body = answer.json();
    json!({"code": answer.code, "shape": answer.shape(), "generation": body["metadata"]["generation"],
        "spec": stored(answer, "spec")["spec"], "status": stored(answer, "status")["status"],
        "driverName": body["driverName"], "parameters": body["parameters"]})
}

/// `path` patched with a JSON merge patch.
fn merge_patch(s: &Server, path: &str, patch: Value) -> Answer {
    s.admin("PATCH", path, &[("Content-Type", "application/merge-patch+json")], &patch)
}

#[test]
fn dynamic_resource_allocation_answers_as_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    pair.check("a DeviceClass: created, its generation bumped by spec changes only", |s| {
        let spec = json!({"selectors": [{"cel": {"expression": "device.driver == \"gpu.example.com\""}}]});
        let created =
            s.admin("POST", DEVICE_CLASSES, &[], &dra_object("DeviceClass", "gpu.example.com", json!({}), spec));
        let path = format!("{DEVICE_CLASSES}/gpu.example.com");
        let config =
            json!({"spec": {"config": [{"opaque": {"driver": "gpu.example.com", "parameters": {"mode": "fast"}}}]}});
        let configured = merge_patch(s, &path, config);
        let labelled = merge_patch(s, &path, json!({"metadata": {"labels": {"tier": "a"}}}));
        json!({"created": written(&created), "configured": written(&configured), "labelled": written(&labelled)})
    });
    pair.check("a ResourceClaimTemplate: defaults, spec immutable", |s| {
        let spec = json!({"metadata": {"labels": {"app": "web"}}, "spec": {"devices": {"requests": [
            {"name": "any", "firstAvailable": [{"name": "big", "deviceClassName": "gpu.example.com"},
                {"name": "two", "deviceClassName": "gpu.example.com", "allocationMode": "ExactCount", "count": 2}]},
            {"name": "all", "exactly": {"deviceClassName": "gpu.example.com", "allocationMode": "All"}}]}}});
        let template = dra_object("ResourceClaimTemplate", "gpus", json!({}), spec);
        let created = s.admin("POST", &resource_claim_templates(), &[], &template);
        let changed = merge_patch(
            s,
            &format!("{}/gpus", resource_claim_templates()),
            json!({"spec": {"metadata": {"labels": {"app": "db"}}}}),
        );
        json!({"created": written(&created), "changed": changed.shape()})
    });
    pair.check("a ResourceClaim: created with defaults and an empty status, read, listed", |s| {
        let claim = dra_object("ResourceClaim", "gpu", json!({"set": "dra"}), gpu_claim_spec());
        let created = s.admin("POST", &resource_claims(), &[], &claim);
        let read = s.get(&format!("{}/gpu", resource_claims()));
        let list = s.get(&format!("{}?labelSelector=set%3Ddra", resource_claims()));
        json!({"created": written(&created), "read": written(&read), "list": list.shape()})
    });
    pair.check("a ResourceClaim's spec is immutable; its status is not written by the main resource", |s| {
        let path = format!("{}/gpu", resource_claims());
        let changed = merge_patch(s, &path, json!({"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "other.example.com"}}]}}}));
        let status = merge_patch(s, &path, json!({"metadata": {"labels": {"seen": "yes"}}, "status": {"reservedFor": [{"resource": "pods", "name": "p", "uid": "4f6c4b5e-0000-4000-8000-000000000001"}]}}));
        json!({"changed": changed.shape(), "status ignored": written(&status)})
    });
    pair.check("claim validation", |s| {
        let refuse = |name: &str, requests: Value, extra: Value| {
            let mut spec = json!({"devices": {"requests": requests}});
            for (key, value) in extra.as_object().into_iter().flatten() {
                spec["devices"][key] = value.clone();
            }
            s.admin("POST", &resource_claims(), &[], &dra_object("ResourceClaim", name, json!({}), spec)).shape()
        };
        let class = |name: &str| json!({"name": name, "exactly": {"deviceClassName": "gpu.example.com"}});
        json!({
            "no shape": refuse("a", json!([{"name": "gpu"}]), json!({})),
            "both shapes": refuse("b", json!([{"name": "gpu", "exactly": {"deviceClassName": "c"},
                "firstAvailable": [{"name": "x", "deviceClassName": "c"}]}]), json!({})),
            "names": refuse("c", json!([class("gpu"), class("gpu"), class("Bad_Name")]), json!({})),
            "count with All": refuse("d", json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com",
                "allocationMode": "All", "count": 2}}]), json!({})),
            "no class": refuse("e", json!([{"name": "gpu", "exactly": {}}]), json!({})),
            "tolerations": refuse("f", json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com",
                "tolerations": [{"operator": "Exists", "value": "x"}, {"key": "k", "operator": "Sometimes", "effect": "Never"}]}}]), json!({})),
            "references": refuse("g", json!([class("gpu")]), json!({
                "constraints": [{"requests": ["gpu", "missing"], "matchAttribute": "example.com/numa"}, {"requests": ["gpu"]}],
                "config": [{"requests": ["gpu/sub"], "opaque": {"driver": "gpu.example.com", "parameters": [1]}}]})),
        })
    });
    pair.check("a claim's status: reservations need an allocation, which never changes once made", |s| {
        let path = format!("{}/gpu/status", resource_claims());
        let reserved = json!({"resource": "pods", "name": "p", "uid": "4f6c4b5e-0000-4000-8000-000000000001"});
        let unallocated = merge_patch(s, &path, json!({"status": {"reservedFor": [reserved]}})).shape();
        let allocation = json!({"devices": {"results": [{"request": "gpu", "driver": "gpu.example.com",
            "pool": "node-1", "device": "gpu-0", "tolerations": [{"key": "example.com/broken", "effect": "NoExecute"}]}]}});
        let allocated = merge_patch(s, &path, json!({"status": {"allocation": allocation}}));
        let with_reservation = merge_patch(s, &path, json!({"status": {"reservedFor": [reserved]}}));
        let moved = merge_patch(s, &path, json!({"status": {"allocation": {"devices": {"results": [{"request": "gpu",
            "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-1"}]}}}})).shape();
        let bad = json!({"devices": {"results": [{"request": "nothing", "driver": "", "pool": "", "device": "Gpu_0"}]}});
        let other = dra_object("ResourceClaim", "other", json!({}), gpu_claim_spec());
        assert_eq!(s.admin("POST", &resource_claims(), &[], &other).code, 201);
        let invalid = merge_patch(s, &format!("{}/other/status", resource_claims()), json!({"status": {"allocation": bad}})).shape();
        json!({"unallocated": unallocated, "allocated": written(&allocated), "reserved": written(&with_reservation),
            "moved": moved, "invalid allocation": invalid})
    });
    pair.check("a watch of claims", |s| {
        let path = format!("{}?watch=true&labelSelector=set%3Ddra&timeoutSeconds=1", resource_claims());
        let mut nudge = dra_object("ResourceClaim", "", json!({}), gpu_claim_spec());
        nudge["metadata"] = json!({"generateName": "watch-cache-nudge-"});
        event_shapes(&s.watch(&path, "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims", &nudge))
    });
    pair.check("ResourceSlices: created, selected by node and driver, driver immutable", |s| {
        let spec = json!({"driver": "gpu.example.com", "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "nodeName": "node-1", "devices": [{"name": "gpu-0", "taints": [{"key": "example.com/broken", "effect": "NoExecute"}]},
                {"name": "gpu-1"}]});
        let created = s.admin("POST", RESOURCE_SLICES, &[], &dra_object("ResourceSlice", "node-1-gpus", json!({}), spec));
        let body = created.json();
        let added = body["spec"]["devices"][0]["taints"][0]["timeAdded"].is_string();
        let selected = s.get(&format!("{RESOURCE_SLICES}?fieldSelector=spec.nodeName%3Dnode-1,spec.driver%3Dgpu.example.com")).shape();
        let elsewhere = s.get(&format!("{RESOURCE_SLICES}?fieldSelector=spec.nodeName%3Dnode-2")).shape();
        let unknown = s.get(&format!("{RESOURCE_SLICES}?fieldSelector=spec.pool.name%3Dnode-1")).shape();
        let moved = merge_patch(s, &format!("{RESOURCE_SLICES}/node-1-gpus"), json!({"spec": {"driver": "other.example.com"}})).shape();
        let mut spec = body["spec"].clone();
        spec["devices"][0]["taints"][0]["timeAdded"] = json!("<time>");
        json!({"code": created.code, "generation": body["metadata"]["generation"], "spec": spec, "time added": added,
            "selected": selected, "elsewhere": elsewhere, "unknown field": unknown, "driver changed": moved})
    });
    pair.check("ResourceSlice validation", |s| {
        let refuse = |name: &str, spec: Value| {
            s.admin("POST", RESOURCE_SLICES, &[], &dra_object("ResourceSlice", name, json!({}), spec)).shape()
        };
        json!({
            "nowhere": refuse("a", json!({"driver": "gpu.example.com", "pool": {"name": "p", "resourceSliceCount": 1}})),
            "twice": refuse("b", json!({"driver": "gpu.example.com", "pool": {"name": "p", "resourceSliceCount": 1},
                "nodeName": "n", "allNodes": true})),
            "pool": refuse("c", json!({"driver": "", "pool": {"name": "", "generation": -1}, "allNodes": true})),
            "devices": refuse("d", json!({"driver": "gpu.example.com", "pool": {"name": "p", "resourceSliceCount": 1},
                "allNodes": true, "devices": [{"name": "x", "taints": [{"key": "k", "effect": "Sometimes"}]}, {"name": "x"}]})),
        })
    });
    pair.assert_conforms();
}

#[test]
fn volume_attributes_classes_answer_as_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    let class = |name: &str, driver: &str, parameters: Value| {
        json!({"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttributesClass", "metadata": {"name": name},
            "driverName": driver, "parameters": parameters})
    };
    pair.check("a VolumeAttributesClass: created, its driver and parameters fixed", |s| {
        let created =
            s.admin("POST", VOLUME_ATTRIBUTES_CLASSES, &[], &class("fast", "csi.example.com", json!({"iops": "3000"})));
        let path = format!("{VOLUME_ATTRIBUTES_CLASSES}/fast");
        let changed =
            merge_patch(s, &path, json!({"driverName": "other.example.com", "parameters": {"iops": "9000"}})).shape();
        let labelled = merge_patch(s, &path, json!({"metadata": {"labels": {"tier": "gold"}}}));
        json!({"created": written(&created), "changed": changed, "labelled": written(&labelled)})
    });
    pair.check("VolumeAttributesClass validation", |s| {
        let refuse = |name: &str, driver: &str, parameters: Value| {
            s.admin("POST", VOLUME_ATTRIBUTES_CLASSES, &[], &class(name, driver, parameters)).shape()
        };
        json!({"nothing": refuse("a", "", Value::Null), "bad driver": refuse("b", "Bad_Driver!", json!({"k": "v"}))})
    });
    pair.assert_conforms();
}

#[test]
fn workload_fields_new_since_1_33_answer_as_kube_apiserver() {
    let Some(mut pair) = Pair::start() else { return };
    for s in [&pair.sandbox, &pair.real] {
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default"}});
        assert_eq!(s.admin("POST", &format!("/api/v1/namespaces/{NS}/serviceaccounts"), &[], &account).code, 201);
    }
    // A pod template with fields that are on by default since v1.34: pod-level resources, an
    // image volume, a topology spread constraint with matchLabelKeys.
    let template = json!({"metadata": {"labels": {"app": "web"}}, "spec": {
        "resources": {"limits": {"cpu": "2", "memory": "1Gi"}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}, "matchLabelKeys": ["pod-template-hash"]}],
        "volumes": [{"name": "data", "image": {"reference": "registry.example.com/data:v1"}}],
        "containers": [{"name": "c", "image": "busybox", "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]}});
    pair.check("a Deployment's template with v1.36 pod fields: defaulted as stored", |s| {
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
            "spec": {"selector": {"matchLabels": {"app": "web"}}, "template": template}});
        let created = s.admin("POST", &format!("/apis/apps/v1/namespaces/{NS}/deployments"), &[], &deployment);
        stored(&created, "spec")
    });
    pair.check("a pod with v1.36 pod fields: defaulted as stored", |s| {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "labels": {"app": "web",
            "pod-template-hash": "abc"}}, "spec": template["spec"]});
        pod["spec"]["nodeName"] = json!("node-1");
        let mut stored = stored(&s.admin("POST", &pods_path(), &[], &pod), "spec");
        // The service account token volume: its name has a random suffix, and the OpenShift
        // build of kube-apiserver projects one more ConfigMap into it.
        let generated = |v: &Value| v["name"].as_str().is_some_and(|n| n.starts_with("kube-api-access-"));
        if let Some(volumes) = stored["spec"]["volumes"].as_array_mut() {
            volumes.retain(|v| !generated(v));
        }
        for container in stored["spec"]["containers"].as_array_mut().into_iter().flatten() {
            if let Some(mounts) = container["volumeMounts"].as_array_mut() {
                mounts.retain(|m| !generated(m));
            }
        }
        stored
    });
    pair.check("ReplicaSet and Deployment status.terminatingReplicas: kept (on by default since v1.35)", |s| {
        let rs = json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "web"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "rs"}},
                "template": {"metadata": {"labels": {"app": "rs"}}, "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}});
        let path = format!("/apis/apps/v1/namespaces/{NS}/replicasets");
        let created = s.admin("POST", &path, &[], &rs);
        assert_eq!(created.code, 201, "{}", created.text());
        let mut rs = created.json();
        rs["status"] = json!({"replicas": 0, "terminatingReplicas": 2, "observedGeneration": 1});
        let rs_status = stored(&s.admin("PUT", &format!("{path}/web/status"), &[], &rs), "status");
        let deployment_path = format!("/apis/apps/v1/namespaces/{NS}/deployments/web");
        let mut deployment = s.get(&deployment_path).json();
        deployment["status"] = json!({"replicas": 1, "terminatingReplicas": 1, "observedGeneration": 1});
        let deployment_status = stored(&s.admin("PUT", &format!("{deployment_path}/status"), &[], &deployment), "status");
        json!({"replicaset": rs_status, "deployment": deployment_status})
    });
    pair.assert_conforms();
}
