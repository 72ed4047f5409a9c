//! `kcm-sandbox serve` as a process: it prints one line when ready, writes the kubeconfigs,
//! applies the fault-injection flags and stops cleanly on SIGTERM.
#![cfg(feature = "sandbox")]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kcm::client::{Api, Client, ClientOptions, WatchParams, config};

#[test]
fn serve_flags_and_sigterm() {
    let dir = std::env::temp_dir().join(format!("kcm-sandbox-cli-{}", std::process::id()));
    let kubeconfig = dir.join("admin.conf");
    let mut child = Command::new(env!("CARGO_BIN_EXE_kcm-sandbox"))
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
    let mut stream = nodes.watch(&WatchParams { timeout_seconds: Some(60), ..WatchParams::default() }).unwrap();
    while stream.next().is_some_and(|event| event.is_ok()) {
        assert!(started.elapsed() < Duration::from_secs(30), "the watch was never cut");
    }
    assert!(nodes.get("node-1").is_ok());

    assert!(Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap().success());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let _ = std::fs::remove_dir_all(dir);
}
