//! The real `kube-controller-manager` binary: it reads a kubeconfig, reaches the API server
//! over mutual TLS, reports configuration errors clearly and stops cleanly on SIGTERM.

use crate::support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use support::{Reply, TestCa, TestServer};

const BINARY: &str = env!("CARGO_BIN_EXE_kube-controller-manager");

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kcm-binary-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write_kubeconfig(dir: &Path, server: &str, ca: &TestCa, client: &support::CertAndKey) -> PathBuf {
    std::fs::write(dir.join("ca.crt"), &ca.cert_pem).unwrap();
    std::fs::write(dir.join("client.crt"), &client.cert_pem).unwrap();
    std::fs::write(dir.join("client.key"), &client.key_pem).unwrap();
    let path = dir.join("controller-manager.conf");
    // Relative paths, as kubeadm's files under /etc/kubernetes are often written.
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: k\n  cluster:\n    server: {server}\n    certificate-authority: ca.crt\n\
         users:\n- name: kcm\n  user:\n    client-certificate: client.crt\n    client-key: client.key\n\
         contexts:\n- name: kcm@k\n  context:\n    cluster: k\n    user: kcm\ncurrent-context: kcm@k\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

/// Lines of the child's stderr, delivered as they come.
fn stderr_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

fn wait_for_line(lines: &mpsc::Receiver<String>, needle: &str) -> Vec<String> {
    let mut seen = Vec::new();
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(60)) {
        let found = line.contains(needle);
        seen.push(line);
        if found {
            return seen;
        }
    }
    panic!("no line containing {needle:?}; saw:\n{}", seen.join("\n"));
}

#[test]
fn connects_with_a_kubeconfig_and_stops_on_sigterm() {
    let ca = TestCa::new("kubernetes");
    let serving = ca.server_cert(&["localhost", "127.0.0.1"]);
    let server = TestServer::https(&serving, Some(&ca), |_| {
        Reply::json(200, r#"{"major":"1","minor":"33","gitVersion":"v1.33.2"}"#)
    });
    let dir = temp_dir("sigterm");
    let client = ca.client_cert("system:kube-controller-manager", "");
    let kubeconfig = write_kubeconfig(&dir, &server.url("https"), &ca, &client);
    let mut child = Command::new(BINARY)
        .args([
            "--kubeconfig",
            kubeconfig.to_str().unwrap(),
            "--leader-elect=false",
            "--secure-port=0",
            "--cloud-config=/etc/kubernetes/cloud.conf",
        ])
        // This scripted server only answers /version: run no controller that would list.
        .arg("--controllers=")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines = stderr_lines(&mut child);
    let seen = wait_for_line(&lines, "workers of 0 controllers running");
    let log = seen.join("\n");
    assert!(log.contains("connected to https://127.0.0.1"), "{log}");
    assert!(log.contains("Kubernetes v1.33.2"), "{log}");
    assert!(log.contains("--cloud-config"), "a flag without effect is named in a warning:\n{log}");
    assert!(seen.iter().all(|l| l.starts_with(['I', 'W', 'E'])), "klog format:\n{log}");
    let request = &server.requests()[0];
    assert_eq!(request.target, "/version");
    assert!(request.header("User-Agent").unwrap().starts_with("kube-controller-manager/"));

    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "exit after SIGTERM: {exit:?}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_bad_kubeconfig_is_a_clear_error() {
    let dir = temp_dir("bad");
    let path = dir.join("broken.conf");
    std::fs::write(&path, "apiVersion: v1\nclusters: [\n").unwrap();
    let output = Command::new(BINARY).args(["--kubeconfig", path.to_str().unwrap()]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("kubeconfig {}", path.display())), "{stderr}");
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_unreachable_server_is_a_clear_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let output = Command::new(BINARY).args(["--master", &format!("http://{addr}")]).output().unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&format!("cannot reach the API server at http://{addr}")), "{stderr}");
}
