//! kubectl's typed-client commands (`kubectl create <generator>`, `kubectl run`, `kubectl create token`)
//! write protobuf bodies (`application/vnd.kubernetes.protobuf`); the sandbox decodes them like
//! kube-apiserver and answers JSON. Each command must succeed and the object read back as JSON must hold
//! what the command asked for. Skipped (with a note) where kubectl is not installed.

use crate::kubectl;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use base64::Engine;
use kcm_sandbox::sandbox::server::{Sandbox, SandboxOptions};
use kubectl::{Bed, PATIENCE};
use rustls::{ClientConnection, StreamOwned};
use serde_json::{Value, json};

/// The stored objects as kubectl reads them back.
trait BedExt {
    /// The stored object, read back as JSON.
    fn get(&self, args: &[&str]) -> Value;
}

impl BedExt for Bed {
    fn get(&self, args: &[&str]) -> Value {
        let args: Vec<&str> = ["get"].iter().chain(args).chain(&["-o", "json"]).copied().collect();
        self.kubectl.json(&args)
    }
}

fn decoded(data: &Value, key: &str) -> String {
    let bytes = base64::engine::general_purpose::STANDARD.decode(data[key].as_str().expect("base64 value")).unwrap();
    String::from_utf8(bytes).unwrap()
}

#[test]
fn kubectl_typed_commands_write_protobuf_and_the_sandbox_stores_their_objects() {
    if !kubectl::available("the kubectl protobuf test") {
        return;
    }
    let bed = Bed::start("protobuf");

    // The body really is protobuf: kubectl logs its request headers at -v=8.
    let output = bed.run(&["create", "namespace", "team-a", "-v=8"]);
    let log = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "kubectl create namespace failed: {log}");
    assert!(log.contains("Content-Type: application/vnd.kubernetes.protobuf"), "no protobuf request in: {log}");
    let namespace = bed.get(&["namespace", "team-a"]);
    assert_eq!(namespace["metadata"]["name"], "team-a");
    assert!(namespace["metadata"]["uid"].as_str().is_some_and(|uid| !uid.is_empty()));

    bed.ok(&["create", "serviceaccount", "builder", "-n", "team-a"]);
    assert_eq!(bed.get(&["serviceaccount", "builder", "-n", "team-a"])["metadata"]["namespace"], "team-a");

    bed.ok(&["create", "deployment", "web", "--image=nginx", "--replicas=2", "--port=8080", "-n", "team-a"]);
    let deployment = bed.get(&["deployment", "web", "-n", "team-a"]);
    assert_eq!(deployment["spec"]["replicas"], 2);
    assert_eq!(deployment["spec"]["selector"], json!({"matchLabels": {"app": "web"}}));
    assert_eq!(deployment["metadata"]["labels"], json!({"app": "web"}));
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!((&container["name"], &container["image"]), (&json!("nginx"), &json!("nginx")));
    assert_eq!(container["ports"], json!([{"containerPort": 8080, "protocol": "TCP"}]));
    assert_eq!(container["resources"], json!({}));

    bed.ok(&["create", "configmap", "settings", "--from-literal=mode=fast", "--from-literal=level=3", "-n", "team-a"]);
    let config_map = bed.get(&["configmap", "settings", "-n", "team-a"]);
    assert_eq!(config_map["data"], json!({"mode": "fast", "level": "3"}));

    bed.ok(&[
        "create",
        "secret",
        "generic",
        "creds",
        "--from-literal=user=admin",
        "--from-literal=pass=p@ss w0rd!",
        "-n",
        "team-a",
    ]);
    let secret = bed.get(&["secret", "creds", "-n", "team-a"]);
    assert_eq!(secret["type"], "Opaque");
    assert_eq!(
        (decoded(&secret["data"], "user"), decoded(&secret["data"], "pass")),
        ("admin".into(), "p@ss w0rd!".into())
    );

    bed.ok(&["create", "service", "clusterip", "web", "--tcp=80:8080", "-n", "team-a"]);
    let service = bed.get(&["service", "web", "-n", "team-a"]);
    assert_eq!(service["spec"]["type"], "ClusterIP");
    assert_eq!(service["spec"]["ports"][0]["port"], 80);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], 8080);
    assert_eq!(service["spec"]["selector"], json!({"app": "web"}));
    assert!(service["spec"]["clusterIP"].as_str().is_some_and(|ip| !ip.is_empty()), "{service}");

    bed.ok(&["create", "job", "migrate", "--image=busybox", "-n", "team-a", "--", "echo", "done"]);
    let job = bed.get(&["job", "migrate", "-n", "team-a"]);
    let container = &job["spec"]["template"]["spec"]["containers"][0];
    assert_eq!((&container["image"], &container["command"]), (&json!("busybox"), &json!(["echo", "done"])));
    assert_eq!(job["spec"]["template"]["spec"]["restartPolicy"], "Never");

    // Pods need their namespace's `default` account (ServiceAccount admission); no controller runs here.
    bed.ok(&["create", "serviceaccount", "default", "-n", "team-a"]);
    bed.ok(&["run", "shell", "--image=busybox", "--labels=tier=debug", "--env=MODE=x", "-n", "team-a"]);
    let pod = bed.get(&["pod", "shell", "-n", "team-a"]);
    assert_eq!(pod["metadata"]["labels"], json!({"tier": "debug"}));
    assert_eq!(pod["spec"]["containers"][0]["env"], json!([{"name": "MODE", "value": "x"}]));

    let token = bed.ok(&["create", "token", "builder", "-n", "team-a", "--duration=2h"]);
    assert!(!token.trim().is_empty() && !token.trim().contains(char::is_whitespace), "no token printed: {token:?}");

    bed.ok(&["create", "quota", "small", "--hard=pods=10,requests.cpu=500m,requests.memory=1Gi", "-n", "team-a"]);
    let quota = bed.get(&["resourcequota", "small", "-n", "team-a"]);
    assert_eq!(quota["spec"]["hard"], json!({"pods": "10", "requests.cpu": "500m", "requests.memory": "1Gi"}));

    bed.ok(&["create", "role", "reader", "--verb=get,list", "--resource=pods,configmaps", "-n", "team-a"]);
    let role = bed.get(&["role", "reader", "-n", "team-a"]);
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": [""], "resources": ["pods", "configmaps"], "verbs": ["get", "list"]}])
    );

    bed.ok(&["create", "cronjob", "nightly", "--image=busybox", "--schedule=0 3 * * *", "-n", "team-a"]);
    let cron_job = bed.get(&["cronjob", "nightly", "-n", "team-a"]);
    assert_eq!(cron_job["spec"]["schedule"], "0 3 * * *");
    assert_eq!(cron_job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"], "busybox");

    bed.ok(&["create", "poddisruptionbudget", "web", "--selector=app=web", "--min-available=50%", "-n", "team-a"]);
    let budget = bed.get(&["poddisruptionbudget", "web", "-n", "team-a"]);
    assert_eq!(budget["spec"]["minAvailable"], "50%");
    assert_eq!(budget["spec"]["selector"], json!({"matchLabels": {"app": "web"}}));

    bed.ok(&["create", "priorityclass", "urgent", "--value=1000", "--description=first"]);
    let class = bed.get(&["priorityclass", "urgent"]);
    assert_eq!((&class["value"], &class["description"]), (&json!(1000), &json!("first")));

    bed.ok(&["expose", "deployment", "web", "--name=web-public", "--port=443", "--target-port=8080", "-n", "team-a"]);
    let exposed = bed.get(&["service", "web-public", "-n", "team-a"]);
    assert_eq!(exposed["spec"]["ports"][0]["port"], 443);
    assert_eq!(exposed["spec"]["ports"][0]["targetPort"], 8080);
    assert_eq!(exposed["spec"]["selector"], json!({"app": "web"}));

    // SelfSubjectAccessReview, a create-only review resource.
    assert_eq!(bed.ok(&["auth", "can-i", "delete", "deployments", "-n", "team-a"]).trim(), "yes");

    bed.ok(&["create", "ingress", "web", "--rule=example.com/*=web:80", "-n", "team-a"]);
    let ingress = bed.get(&["ingress", "web", "-n", "team-a"]);
    let path = &ingress["spec"]["rules"][0]["http"]["paths"][0];
    assert_eq!(ingress["spec"]["rules"][0]["host"], "example.com");
    assert_eq!((&path["path"], &path["pathType"]), (&json!("/"), &json!("Prefix")));
    assert_eq!(path["backend"], json!({"service": {"name": "web", "port": {"number": 80}}}));

    bed.ok(&["create", "clusterrole", "node-reader", "--verb=get", "--resource=nodes"]);
    bed.ok(&["create", "clusterrolebinding", "node-readers", "--clusterrole=node-reader", "--group=ops"]);
    let binding = bed.get(&["clusterrolebinding", "node-readers"]);
    assert_eq!(binding["subjects"], json!([{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "ops"}]));

    bed.ok(&["create", "rolebinding", "read", "--role=reader", "--serviceaccount=team-a:builder", "-n", "team-a"]);
    let binding = bed.get(&["rolebinding", "read", "-n", "team-a"]);
    assert_eq!(binding["roleRef"], json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}));
    assert_eq!(binding["subjects"], json!([{"kind": "ServiceAccount", "name": "builder", "namespace": "team-a"}]));
}

/// POSTs `body` as `application/vnd.kubernetes.protobuf` with the admin's credentials; the answer's
/// status code and JSON body.
fn post_protobuf(sandbox: &Sandbox, path: &str, body: &[u8]) -> (u16, Value) {
    let config = sandbox.admin_config();
    let tls = kcm::client::tls::client_config(&config.tls).expect("TLS config");
    let name = rustls_pki_types::ServerName::IpAddress(sandbox.addr().ip().into());
    let connection = ClientConnection::new(Arc::new(tls), name).expect("TLS client");
    let tcp = TcpStream::connect(sandbox.addr()).expect("connect");
    tcp.set_read_timeout(Some(PATIENCE)).unwrap();
    let mut stream = StreamOwned::new(connection, tcp);
    let token = config.auth.bearer_token().map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n{token}Content-Type: application/vnd.kubernetes.protobuf\r\nAccept: application/json\r\nContent-Length: {}\r\n\r\n",
        sandbox.addr(),
        body.len()
    );
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(body).unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let code = answer.split_whitespace().nth(1).and_then(|c| c.parse().ok()).expect("status line");
    let (_, body) = answer.split_once("\r\n\r\n").expect("head and body");
    (code, serde_json::from_str(body).unwrap_or_else(|e| panic!("answer is not JSON ({e}): {body}")))
}

/// A length-delimited protobuf field (numbers and lengths below 128).
fn field(number: u8, bytes: &[u8]) -> Vec<u8> {
    [vec![number << 3 | 2, bytes.len() as u8], bytes.to_vec()].concat()
}

/// The `k8s\0` + `runtime.Unknown` envelope of a ConfigMap named `name` with `data: {k: v}`.
fn config_map_body(api_version: &str, kind: &str, name: &str) -> Vec<u8> {
    let metadata = field(1, name.as_bytes());
    let entry = [field(1, b"k"), field(2, b"v")].concat();
    let object = [field(1, &metadata), field(2, &entry)].concat();
    let type_meta = [field(1, api_version.as_bytes()), field(2, kind.as_bytes())].concat();
    [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &object)].concat()
}

#[test]
fn protobuf_bodies_are_checked_against_the_endpoint_and_answered_in_json() {
    let sandbox =
        Sandbox::start(SandboxOptions { listen: "127.0.0.1:0".parse().unwrap(), ..SandboxOptions::default() })
            .expect("sandbox starts");
    let path = "/api/v1/namespaces/default/configmaps";

    let (code, created) = post_protobuf(&sandbox, path, &config_map_body("v1", "ConfigMap", "plain"));
    assert_eq!(code, 201, "{created}");
    assert_eq!((&created["kind"], &created["metadata"]["name"]), (&json!("ConfigMap"), &json!("plain")));
    assert_eq!(created["data"], json!({"k": "v"}));

    // The envelope names the type; one that is not the endpoint's is refused as a JSON body would be.
    let (code, status) = post_protobuf(&sandbox, path, &config_map_body("v1", "Secret", "other"));
    assert_eq!((code, &status["reason"]), (400, &json!("BadRequest")), "{status}");
    // kube-apiserver v1.33.5's words for this very body (checked against it).
    assert!(
        status["message"].as_str().unwrap().contains("Secret in version \"v1\" cannot be handled as a ConfigMap"),
        "{status}"
    );
    let (code, status) = post_protobuf(&sandbox, path, &config_map_body("v1", "Widget", "other"));
    assert_eq!(code, 400, "{status}");
    assert!(status["message"].as_str().unwrap().contains("no kind \"Widget\" is registered"), "{status}");

    let (code, status) = post_protobuf(&sandbox, path, b"{\"kind\":\"ConfigMap\"}");
    assert_eq!(code, 400, "{status}");
    assert!(status["message"].as_str().unwrap().contains("does not appear to be a protobuf message"), "{status}");
}
