//! The secure port's debug endpoints (`/metrics/slis`, `/configz`, `/flagz`, `/statusz`) of
//! upstream's kube-controller-manager v1.33.5 and ours, side by side against a real API server:
//! both started as kubeadm starts them, with the same flags, then asked the same requests.
//! `KCM_DEBUG_ENDPOINTS_DUMP=<dir>` keeps both answers there, for a closer look.

#![cfg(feature = "sandbox")]

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kcm::envtest::process::OwnedProcess;
use kcm::envtest::sidebyside::{Side, start_controller_manager};
use kcm::envtest::{Assets, ControlPlane};
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use rustls_pki_types::ServerName;
use serde_json::Value;

const OURS: &str = env!("CARGO_BIN_EXE_kube-controller-manager");
const DEADLINE: Duration = Duration::from_secs(40);
const ALWAYS_ALLOW: &str =
    "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/metrics/slis,/configz,/flagz,/statusz";
const GATES: &str = "--feature-gates=ComponentFlagz=true,ComponentStatusz=true";

/// One HTTP answer.
#[derive(Debug)]
struct Answer {
    code: u16,
    content_type: String,
    body: String,
}

/// `method path` over a fresh TLS connection, anonymously, trusting any server certificate.
fn request(port: u16, method: &str, path: &str, accept: Option<&str>) -> Result<Answer, String> {
    let provider = kcm::client::tls::crypto_provider();
    let config = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(kcm::client::tls::AcceptAnyServerCert(provider)))
        .with_no_client_auth();
    let conn = ClientConnection::new(Arc::new(config), ServerName::try_from("localhost").unwrap())
        .map_err(|e| e.to_string())?;
    let tcp = TcpStream::connect(SocketAddr::from(([127, 0, 0, 1], port))).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(20))).map_err(|e| e.to_string())?;
    let mut stream = StreamOwned::new(conn, tcp);
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n");
    if let Some(accept) = accept {
        head.push_str(&format!("Accept: {accept}\r\n"));
    }
    head.push_str("\r\n");
    stream.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
    read_answer(BufReader::new(stream)).map_err(|e| e.to_string())
}

/// Reads a `Connection: close` answer, with a `Content-Length` or chunked body.
fn read_answer(mut reader: impl BufRead) -> std::io::Result<Answer> {
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let code = line.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let (mut content_type, mut chunked) = (String::new(), false);
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        let Some((name, value)) = line.trim_end().split_once(':') else { break };
        if name.eq_ignore_ascii_case("content-type") {
            content_type = value.trim().to_string();
        }
        chunked |= name.eq_ignore_ascii_case("transfer-encoding") && value.trim() == "chunked";
    }
    let mut body = Vec::new();
    if chunked {
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let size = usize::from_str_radix(line.trim(), 16).unwrap_or(0);
            if size == 0 {
                break;
            }
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk)?;
            body.extend_from_slice(&chunk[..size]);
        }
    } else {
        // A TLS peer that closes without close_notify (Go does not send it) ends the read.
        let _ = reader.read_to_end(&mut body);
    }
    Ok(Answer { code, content_type, body: String::from_utf8_lossy(&body).into_owned() })
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A controller manager serving on its own port.
struct Manager {
    process: OwnedProcess,
    port: u16,
}

impl Manager {
    fn start(side: Side, binary: &Path, kubeconfig: &Path, log: &Path) -> Manager {
        let port = free_port();
        let secure = format!("--secure-port={port}");
        let process = start_controller_manager(side, binary, kubeconfig, &[&secure, ALWAYS_ALLOW, GATES], log)
            .unwrap_or_else(|e| panic!("{}: {e}", side.name()));
        let mut manager = Manager { process, port };
        manager.wait_healthy();
        manager
    }

    fn wait_healthy(&mut self) {
        let started = Instant::now();
        loop {
            if let Ok(answer) = request(self.port, "GET", "/healthz", None)
                && answer.code == 200
            {
                return;
            }
            assert!(self.process.exited().is_none(), "{} exited:\n{}", self.process.name(), self.process.log_tail(30));
            assert!(started.elapsed() < DEADLINE, "{} never became healthy", self.process.name());
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// GETs `path` as curl does (`Accept: */*`).
    fn get(&self, path: &str) -> Answer {
        request(self.port, "GET", path, Some("*/*")).unwrap_or_else(|e| panic!("GET {path}: {e}"))
    }
}

/// What one side answered.
struct Answers {
    slis: Answer,
    slis_reset: Answer,
    slis_after_reset: Answer,
    configz: Answer,
    flagz: Answer,
    flagz_json: Answer,
    statusz_no_accept: Answer,
    statusz: Answer,
}

fn ask(manager: &Manager) -> Answers {
    // One /healthz call has been observed at least (the wait); one more, known.
    manager.get("/healthz");
    let slis = manager.get("/metrics/slis");
    let slis_reset = request(manager.port, "DELETE", "/metrics/slis", None).unwrap();
    let slis_after_reset = manager.get("/metrics/slis");
    Answers {
        slis,
        slis_reset,
        slis_after_reset,
        configz: manager.get("/configz"),
        flagz: manager.get("/flagz"),
        flagz_json: request(manager.port, "GET", "/flagz", Some("application/json")).unwrap(),
        statusz_no_accept: request(manager.port, "GET", "/statusz", None).unwrap(),
        statusz: manager.get("/statusz"),
    }
}

fn dump(side: &str, answers: &Answers) {
    let Some(dir) = std::env::var_os("KCM_DEBUG_ENDPOINTS_DUMP") else { return };
    let dir = Path::new(&dir);
    std::fs::create_dir_all(dir).unwrap();
    let all = [
        ("slis", &answers.slis),
        ("slis-reset", &answers.slis_reset),
        ("slis-after-reset", &answers.slis_after_reset),
        ("configz", &answers.configz),
        ("flagz", &answers.flagz),
        ("flagz-json", &answers.flagz_json),
        ("statusz-no-accept", &answers.statusz_no_accept),
        ("statusz", &answers.statusz),
    ];
    for (name, answer) in all {
        let text = format!("{} {}\n{}", answer.code, answer.content_type, answer.body);
        std::fs::write(dir.join(format!("{side}-{name}.txt")), text).unwrap();
    }
}

#[test]
fn debug_endpoints_answer_as_upstreams() {
    let assets = match Assets::locate() {
        Ok(assets) => assets,
        Err(e) => panic!("the real-server test needs the envtest assets: {e}"),
    };
    let plane = ControlPlane::start().unwrap();
    let (_, kubeconfig) = plane.write_kubeconfigs(&plane.dir().join("kubeadm").join("admin.conf")).unwrap();
    let mut upstream =
        Manager::start(Side::Upstream, &assets.kube_controller_manager, &kubeconfig, &plane.dir().join("upstream.log"));
    let theirs = ask(&upstream);
    dump("upstream", &theirs);
    upstream.process.stop(Duration::from_secs(10));
    let mut ours = Manager::start(Side::Ours, Path::new(OURS), &kubeconfig, &plane.dir().join("ours.log"));
    let mine = ask(&ours);
    dump("ours", &mine);
    ours.process.stop(Duration::from_secs(10));
    let _: Value = serde_json::from_str(&theirs.configz.body).unwrap();
}
