//! The secure port's debug endpoints (`/metrics/slis`, `/configz`, `/flagz`, `/statusz`) of
//! upstream's kube-controller-manager (v1.36.2 with `KCM_K8S_ASSETS` pointing at it) and ours,
//! side by side against a real API server:
//! both started as kubeadm starts them, with the same flags, then asked the same requests.
//! `KCM_DEBUG_ENDPOINTS_DUMP=<dir>` keeps both answers there, for a closer look.

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kcm_envtest::envtest::process::OwnedProcess;
use kcm_envtest::envtest::sidebyside::{Side, start_controller_manager};
use kcm_envtest::envtest::{Assets, ControlPlane};
use kcm_sandbox::sandbox::nodes::{NodeOptions, SimulatedNodes};
use rustls::{ClientConfig, ClientConnection, StreamOwned};
use rustls_pki_types::ServerName;
use serde_json::Value;

const OURS: &str = env!("CARGO_BIN_EXE_kube-controller-manager");
const DEADLINE: Duration = Duration::from_secs(40);
const ALWAYS_ALLOW: &str =
    "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics,/metrics/slis,/configz,/flagz,/statusz";
/// On by default since 1.36 (beta); named so that the page shows a `--feature-gates` value.
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
    flagz_structured: Answer,
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
        flagz_structured: request(
            manager.port,
            "GET",
            "/flagz",
            Some("application/json;as=Flagz;g=config.k8s.io;v=v1beta1"),
        )
        .unwrap(),
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
        ("flagz-structured", &answers.flagz_structured),
        ("statusz-no-accept", &answers.statusz_no_accept),
        ("statusz", &answers.statusz),
    ];
    for (name, answer) in all {
        let text = format!("{} {}\n{}", answer.code, answer.content_type, answer.body);
        std::fs::write(dir.join(format!("{side}-{name}.txt")), text).unwrap();
    }
}

/// `/metrics` once the controllers run: the node lifecycle controller has seen the node and a
/// work queue has been used.
fn scrape_when_ready(manager: &Manager) -> String {
    let started = Instant::now();
    loop {
        let text = manager.get("/metrics").body;
        // Upstream sets the zone's size, health and unhealthy nodes one after the other
        // (`handleDisruption`): a scrape can fall between them, so wait for the last one.
        let zone_families = ["node_collector_zone_size{", "node_collector_unhealthy_nodes_in_zone{"];
        if zone_families.iter().all(|family| text.contains(family))
            && text.contains("workqueue_queue_duration_seconds_bucket{")
        {
            return text;
        }
        assert!(started.elapsed() < DEADLINE, "/metrics never showed the node and work queue families:\n{text}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The `# HELP`/`# TYPE` lines and the label-less names of the samples of a text exposition.
fn shape(text: &str) -> BTreeSet<String> {
    text.lines()
        .map(|l| {
            if l.starts_with('#') { l.to_string() } else { l.split(['{', ' ']).next().unwrap_or_default().to_string() }
        })
        .collect()
}

/// The series of a text exposition, each as its name and labels without `name` and `status`
/// (which checks had been registered and run, and whether they passed: timing, as each side
/// adds its controllers' checks once it leads), values left out.
fn series(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let name_and_labels = l.rsplit_once(' ').map_or(l, |(series, _)| series);
            let Some((name, labels)) = name_and_labels.split_once('{') else { return name_and_labels.to_string() };
            let kept: Vec<&str> = labels
                .trim_end_matches('}')
                .split(',')
                .filter(|label| !label.starts_with("status=") && !label.starts_with("name="))
                .collect();
            format!("{name}{{{}}}", kept.join(","))
        })
        .collect()
}

/// Asserts two sets equal, naming what only one side has.
fn assert_same_set(what: &str, ours: &BTreeSet<String>, upstream: &BTreeSet<String>) {
    let only_ours: Vec<&String> = ours.difference(upstream).collect();
    let only_upstream: Vec<&String> = upstream.difference(ours).collect();
    assert!(
        only_ours.is_empty() && only_upstream.is_empty(),
        "{what} differ:\nonly ours: {only_ours:#?}\nonly upstream's: {only_upstream:#?}"
    );
}

/// `/configz`'s JSON with the lists upstream builds from a Go map (in random order) sorted.
fn sorted_configz(mut config: Value) -> Value {
    let ignored =
        &mut config["kubecontrollermanager.config.k8s.io"]["GarbageCollectorController"]["GCIgnoredResources"];
    if let Some(list) = ignored.as_array_mut() {
        list.sort_by_key(|item| item.to_string());
    }
    config
}

/// A zpage's `name<delimiter>value` lines, the delimiter (random per answer) taken out.
fn zpage_lines(body: &str) -> Vec<(String, String)> {
    body.lines()
        .skip(4)
        .filter(|l| !l.is_empty())
        .map(|l| {
            let at = l.find([':', '=', ' ']).unwrap_or(l.len());
            // Exactly one delimiter: a value may itself start with `:` (`--feature-gates`).
            let rest = &l[at..];
            let value = rest.strip_prefix(": ").unwrap_or_else(|| rest.get(1..).unwrap_or_default());
            (l[..at].to_string(), value.to_string())
        })
        .collect()
}

/// Upstream's `/configz` with what differs by design taken out: the OpenShift-only
/// controller the side-by-side runs name off for upstream.
fn upstream_configz(body: &str) -> Value {
    let mut config: Value = serde_json::from_str(body).unwrap();
    let controllers = &mut config["kubecontrollermanager.config.k8s.io"]["Generic"]["Controllers"];
    controllers.as_array_mut().unwrap().retain(|c| c != "-service-ca-certificate-publisher-controller");
    config
}

fn compare(theirs: &Answers, mine: &Answers) {
    let status = |a: &Answer| (a.code, a.content_type.clone());
    // /metrics/slis: the same families and series (which checks ran and passed before the
    // scrape is timing), the leader's check passing, and the same reset.
    assert_eq!(status(&mine.slis), status(&theirs.slis));
    assert_same_set("/metrics/slis families", &shape(&mine.slis.body), &shape(&theirs.slis.body));
    assert_same_set("/metrics/slis series", &series(&mine.slis.body), &series(&theirs.slis.body));
    let leader = "kubernetes_healthcheck{name=\"leaderElection\",type=\"healthz\"} 1\n";
    assert!(
        theirs.slis.body.contains(leader) && mine.slis.body.contains(leader),
        "both pass the leader check:\nours:\n{}\nupstream's:\n{}",
        mine.slis.body,
        theirs.slis.body
    );
    assert_eq!(
        (status(&mine.slis_reset), &mine.slis_reset.body),
        (status(&theirs.slis_reset), &theirs.slis_reset.body),
        "DELETE /metrics/slis: ours, then upstream's"
    );
    assert_eq!(status(&mine.slis_after_reset), status(&theirs.slis_after_reset));
    assert_same_set(
        "/metrics/slis families after the reset",
        &shape(&mine.slis_after_reset.body),
        &shape(&theirs.slis_after_reset.body),
    );
    // /configz: the same JSON, lists from Go maps compared as sets.
    assert_eq!(status(&mine.configz), status(&theirs.configz));
    let ours = sorted_configz(serde_json::from_str(&mine.configz.body).unwrap());
    let upstream = sorted_configz(upstream_configz(&theirs.configz.body));
    assert_eq!(ours, upstream, "/configz: ours, then upstream's");
    // /flagz: the same header and values, but for the flags only one side has.
    assert_eq!(status(&mine.flagz), status(&theirs.flagz));
    assert_eq!(
        mine.flagz.body.lines().take(3).collect::<Vec<_>>(),
        theirs.flagz.body.lines().take(3).collect::<Vec<_>>()
    );
    let upstream_flags: std::collections::BTreeMap<_, _> = zpage_lines(&theirs.flagz.body).into_iter().collect();
    let mut compared = 0;
    for (name, value) in zpage_lines(&mine.flagz.body) {
        let Some(expected) = upstream_flags.get(&name) else { continue };
        if matches!(name.as_str(), "secure-port" | "controllers") {
            continue; // a port of each; upstream's names the OpenShift controller off
        }
        assert_eq!(&value, expected, "--{name}");
        compared += 1;
    }
    assert!(compared > 100, "only {compared} flags in common");
    // /statusz: the same lines (values differ: times and the Go version), with or without Accept.
    let labels = |a: &Answer| zpage_lines(&a.body).into_iter().map(|(k, _)| k).collect::<Vec<_>>();
    for (a, b) in [(&mine.statusz, &theirs.statusz), (&mine.statusz_no_accept, &theirs.statusz_no_accept)] {
        assert_eq!(status(a), status(b));
        assert_eq!(labels(a), labels(b));
    }
    let value = |a: &Answer, key: &str| {
        a.body
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|rest| rest.trim_start_matches([':', '=', ' ']).to_string())
    };
    for key in ["Binary version", "Emulation version", "Paths"] {
        assert_eq!(value(&mine.statusz, key), value(&theirs.statusz, key), "/statusz {key}");
    }
    // Plain JSON: 406 with the same Status.
    let (a, b) = (&mine.flagz_json, &theirs.flagz_json);
    assert_eq!((a.code, &a.content_type, &a.body), (b.code, &b.content_type, &b.body));
    // The structured Flagz: the same kind, and the same values for the flags both sides have.
    assert_eq!(status(&mine.flagz_structured), status(&theirs.flagz_structured));
    let flags = |a: &Answer| serde_json::from_str::<Value>(&a.body).unwrap();
    let (ours, upstream) = (flags(&mine.flagz_structured), flags(&theirs.flagz_structured));
    assert_eq!((&ours["kind"], &ours["apiVersion"]), (&upstream["kind"], &upstream["apiVersion"]));
    assert_eq!(ours["flags"]["leader-elect-lease-duration"], upstream["flags"]["leader-elect-lease-duration"]);
}

/// packaging/monitoring/check.py: the dashboard's and alert rules' metrics are in both scrapes.
fn check_monitoring(dir: &Path, upstream: &str, ours: &str) {
    let (theirs, mine) = (dir.join("upstream-metrics.txt"), dir.join("ours-metrics.txt"));
    std::fs::write(&theirs, upstream).unwrap();
    std::fs::write(&mine, ours).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/monitoring/check.py");
    let output = std::process::Command::new("python3").arg(script).arg(&theirs).arg(&mine).output().unwrap();
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "check.py: {text}{}", String::from_utf8_lossy(&output.stderr));
}

#[test]
fn debug_endpoints_answer_as_upstreams() {
    let assets = match Assets::locate() {
        Ok(assets) => assets,
        Err(e) => panic!("the real-server test needs the envtest assets: {e}"),
    };
    let plane = ControlPlane::start().unwrap();
    let (_, kubeconfig) = plane.write_kubeconfigs(&plane.dir().join("kubeadm").join("admin.conf")).unwrap();
    let nodes = SimulatedNodes::start(plane.admin_config(), vec!["node-1".into()], NodeOptions::default()).unwrap();
    let mut upstream =
        Manager::start(Side::Upstream, &assets.kube_controller_manager, &kubeconfig, &plane.dir().join("upstream.log"));
    let theirs = ask(&upstream);
    dump("upstream", &theirs);
    let upstream_metrics = scrape_when_ready(&upstream);
    upstream.process.stop(Duration::from_secs(10));
    let mut ours = Manager::start(Side::Ours, Path::new(OURS), &kubeconfig, &plane.dir().join("ours.log"));
    let mine = ask(&ours);
    dump("ours", &mine);
    let our_metrics = scrape_when_ready(&ours);
    ours.process.stop(Duration::from_secs(10));
    nodes.stop();
    compare(&theirs, &mine);
    check_monitoring(plane.dir(), &upstream_metrics, &our_metrics);
}
