//! `kcm-sandbox serve` as a process: it prints one line when ready, writes the kubeconfigs,
//! applies the fault-injection flags and signals (SIGUSR1 closes watches, SIGUSR2 restarts on the
//! same port with the state kept), spares the health probes and stops cleanly on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Node};
use kcm::client::{Api, Client, ClientOptions, PostParams, WatchEvent, WatchParams, config};

use crate::support::http;

#[test]
fn serve_flags_and_sigterm() {
    let dir = std::env::temp_dir().join(format!("kcm-sandbox-cli-{}", std::process::id()));
    let kubeconfig = dir.join("admin.conf");
    let mut child = Command::new(kcm_sandbox_binary())
        .args(["serve", "--listen", "127.0.0.1:0", "--nodes", "1", "--fail-next", "1:503:1"])
        .args(["--close-watches-every", "700ms", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut ready = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut ready).unwrap();
    assert!(ready.starts_with("kcm-sandbox: serving https://127.0.0.1:"), "{ready}");
    assert!(dir.join("controller-manager.conf").exists());

    let client = Client::new(config::load(Some(&kubeconfig), None).unwrap(), ClientOptions::default()).unwrap();
    // The first request meets the injected 503 with Retry-After: 1; the client waits and retries.
    let version: serde_json::Value = client.get_json("/version").unwrap();
    assert_eq!(version["major"], "1");

    // The simulated node registers; watches are cut periodically.
    let nodes = Api::<Node>::all(&client);
    let started = Instant::now();
    let params = WatchParams { timeout_seconds: Some(60), ..WatchParams::default() };
    // The server cuts watches every 700 ms, at times while one is being opened (a broken pipe
    // as the request is written): an informer opens it again, so does this test.
    let mut stream = loop {
        match nodes.watch(&params) {
            Ok(stream) => break stream,
            Err(e) => assert!(started.elapsed() < Duration::from_secs(30), "no watch opened: {e}"),
        }
    };
    while stream.next().is_some_and(|event| event.is_ok()) {
        assert!(started.elapsed() < Duration::from_secs(30), "the watch was never cut");
    }
    assert!(nodes.get("node-1").is_ok());

    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let _ = std::fs::remove_dir_all(dir);
}

/// A `kcm-sandbox serve` child: its URL, its kubeconfig and its log lines (stderr); stopped with
/// SIGTERM when dropped.
struct Served {
    child: std::process::Child,
    url: String,
    dir: std::path::PathBuf,
    log: std::sync::mpsc::Receiver<String>,
}

impl Served {
    fn start(name: &str, flags: &[&str]) -> Served {
        let dir = std::env::temp_dir().join(format!("kcm-sandbox-cli-{name}-{}", std::process::id()));
        let mut child = Command::new(kcm_sandbox_binary())
            .args(["serve", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
            .arg(dir.join("admin.conf"))
            .args(flags)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (sender, log) = std::sync::mpsc::channel();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        let mut ready = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut ready).unwrap();
        let url = ready.strip_prefix("kcm-sandbox: serving ").and_then(|r| r.split(' ').next()).unwrap_or_default();
        assert!(url.starts_with("http"), "not ready: {ready:?}");
        Served { url: url.to_string(), child, dir, log }
    }

    fn client(&self) -> Client {
        let config = config::load(Some(&self.dir.join("admin.conf")), None).unwrap();
        Client::new(config, ClientOptions::default()).unwrap()
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill").args([signal, &self.child.id().to_string()]).status().unwrap();
        assert!(status.success());
    }

    /// Waits (60 s at most) for a log line containing `needle` and returns it.
    fn log_line(&self, needle: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.log.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        panic!("no log line with {needle:?}");
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.signal("-TERM");
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Retries `f` for up to 60 s (the server may be between a restart's stop and start).
fn eventually<T, E: std::fmt::Debug>(mut f: impl FnMut() -> Result<T, E>) -> T {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match f() {
            Ok(value) => return value,
            Err(e) if Instant::now() > deadline => panic!("still failing: {e:?}"),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(serde_json::json!({"metadata": {"name": name}, "data": {"kept": "yes"}})).unwrap()
}

#[test]
fn sigusr2_restarts_on_the_same_port_with_the_state_kept() {
    let served = Served::start("sigusr2", &["--restart-downtime", "2s"]);
    let client = served.client();
    let maps = Api::<ConfigMap>::namespaced(&client, "default");
    let created = maps.create(&config_map("before-restart"), &PostParams::default()).unwrap();
    let mut watch = maps.watch(&WatchParams { timeout_seconds: Some(300), ..WatchParams::default() }).unwrap();

    served.signal("-USR2");
    served.log_line("restarting: the server stops for 2s");
    // The restart ends the open watch, as a kube-apiserver going down does.
    while watch.next().is_some_and(|event| event.is_ok()) {}
    let restarted = served.log_line("restarted: serving");
    assert!(restarted.contains(&format!("serving {} again", served.url)), "{restarted}");

    // Same port (the kubeconfig still points at it), same objects, same resourceVersion.
    let kept = eventually(|| maps.get("before-restart"));
    assert_eq!(kept.metadata.resource_version, created.metadata.resource_version);
    assert_eq!(kept.data.unwrap()["kept"], "yes");
    eventually(|| maps.create(&config_map("after-restart"), &PostParams::default()));
}

#[test]
fn restart_every_restarts_periodically() {
    let served = Served::start("restart-every", &["--restart-every", "500ms", "--restart-downtime", "100ms"]);
    let client = served.client();
    let maps = Api::<ConfigMap>::namespaced(&client, "default");
    eventually(|| maps.create(&config_map("kept"), &PostParams::default()));
    served.log_line("restarted: serving");
    served.log_line("restarted: serving");
    assert_eq!(eventually(|| maps.get("kept")).metadata.name.as_deref(), Some("kept"));
}

#[test]
fn sigusr1_closes_open_watches() {
    let served = Served::start("sigusr1", &[]);
    let client = served.client();
    let maps = Api::<ConfigMap>::namespaced(&client, "default");
    let started = Instant::now();
    let mut watch = maps.watch(&WatchParams { timeout_seconds: Some(300), ..WatchParams::default() }).unwrap();
    maps.create(&config_map("seen"), &PostParams::default()).unwrap();
    assert!(matches!(watch.next(), Some(Ok(WatchEvent::Added(_)))));

    served.signal("-USR1");
    served.log_line("SIGUSR1: closing every open watch");
    while watch.next().is_some_and(|event| event.is_ok()) {}
    // Ended by the signal, long before the server's own 300 s timeout.
    assert!(started.elapsed() < Duration::from_secs(200));
    // The server itself goes on serving.
    assert!(maps.get("seen").is_ok());
}

/// One plain-HTTP request: the status code, the `Retry-After` header and the body.
fn plain_get(url: &str, path: &str) -> (u16, Option<String>, String) {
    use std::io::Write;
    let mut stream = std::net::TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(stream, "GET {path} HTTP/1.1\r\nHost: sandbox\r\nConnection: close\r\n\r\n").unwrap();
    let response = http::read_response(&mut BufReader::new(stream));
    (response.code, response.header("Retry-After").map(str::to_string), response.text())
}

#[test]
fn health_probes_are_spared_injected_errors() {
    let served = Served::start("readyz", &["--plain-http", "--fail-next", "1:429:7"]);
    for probe in ["/readyz", "/livez", "/healthz", "/readyz"] {
        assert_eq!(plain_get(&served.url, probe), (200, None, "ok".to_string()), "{probe}");
    }
    // The armed error still waits for the next API request.
    let (code, retry_after, body) = plain_get(&served.url, "/api/v1/namespaces");
    assert_eq!((code, retry_after.as_deref()), (429, Some("7")), "{body}");
    assert!(body.contains("injected fault"), "{body}");
    assert_eq!(plain_get(&served.url, "/api/v1/namespaces").0, 200);
}

/// The `kcm-sandbox` command, a package of its own, built beside our controller manager.
fn kcm_sandbox_binary() -> std::path::PathBuf {
    kcm_envtest::envtest::built_beside(env!("CARGO_BIN_EXE_kube-controller-manager"), "kcm-sandbox")
        .unwrap_or_else(|e| panic!("{e}"))
}
