//! `/metrics` parity with upstream v1.36.2: one real control plane, upstream's binary and ours
//! side by side with kubeadm's flags (each its own Lease), both scraped once they lead and their
//! families stopped changing; family names, types, label names and help must match but for the
//! differences in [`ALLOWED`], each with its reason. Real server only: the comparison needs
//! upstream's binary. Skipped, loudly, where it is missing.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Endpoints, Service};
use kcm::client::{Api, Client, ClientOptions, PostParams, RestConfig};
use kcm_envtest::envtest::process::OwnedProcess;
use kcm_envtest::envtest::sidebyside::{Side, start_controller_manager};
use kcm_envtest::envtest::{Backend, ControlPlane};

use crate::support::http;

/// What may differ, and why.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Allowed {
    /// Only upstream has the family.
    UpstreamOnly,
    /// Only we have the family.
    OursOnly,
    /// Both have it, with another type, help or label names.
    Differs,
}

/// Families that may differ: an exact name or a prefix ending in `*`, and the reason.
const ALLOWED: &[(&str, Allowed, &str)] = &[(
    "go_*",
    Allowed::UpstreamOnly,
    "Go runtime (GC, goroutines, memstats, scheduler): no meaning for a Rust process",
)];

/// One family as scraped.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Family {
    kind: String,
    help: String,
    /// Label names over all samples, without the histogram's `le` and the summary's `quantile`.
    labels: BTreeSet<String>,
}

/// Families by name from a Prometheus text exposition.
fn parse(text: &str) -> BTreeMap<String, Family> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            current = name.to_string();
            let empty = Family { kind: String::new(), help: String::new(), labels: BTreeSet::new() };
            families.entry(current.clone()).or_insert(empty).help = help.to_string();
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            if let Some(family) = families.get_mut(name) {
                family.kind = kind.to_string();
            }
        } else if !line.starts_with('#') && !line.is_empty() {
            let Some(family) = families.get_mut(&current) else { continue };
            let Some((_, labels)) = line.split_once('{') else { continue };
            let labels = labels.rsplit_once('}').map_or("", |(l, _)| l);
            for name in label_names(labels) {
                if name != "le" && name != "quantile" {
                    family.labels.insert(name);
                }
            }
        }
    }
    families
}

/// The names in `a="x",b="y"` (values may hold escaped quotes and commas).
fn label_names(labels: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = labels;
    while let Some((name, after)) = rest.split_once("=\"") {
        names.push(name.trim_start_matches(',').to_string());
        let mut escaped = false;
        let end = after
            .char_indices()
            .find(|&(_, c)| {
                let close = c == '"' && !escaped;
                escaped = c == '\\' && !escaped;
                close
            })
            .map_or(after.len(), |(i, _)| i + 1);
        rest = &after[end..];
    }
    names
}

fn allowance(name: &str) -> Option<(usize, Allowed)> {
    ALLOWED.iter().enumerate().find_map(|(i, (pattern, kind, _))| {
        let matches = match pattern.strip_suffix('*') {
            Some(prefix) => name.starts_with(prefix),
            None => name == *pattern,
        };
        matches.then_some((i, *kind))
    })
}

/// The differences not allowed, and which entries of [`ALLOWED`] were used.
fn compare(upstream: &BTreeMap<String, Family>, ours: &BTreeMap<String, Family>) -> (Vec<String>, BTreeSet<usize>) {
    let mut unexpected = Vec::new();
    let mut used = BTreeSet::new();
    let mut check = |name: &str, kind: Allowed, what: String| match allowance(name) {
        Some((i, k)) if k == kind => {
            used.insert(i);
        }
        _ => unexpected.push(what),
    };
    for (name, theirs) in upstream {
        match ours.get(name) {
            None => check(
                name,
                Allowed::UpstreamOnly,
                format!("missing: {name} {} {:?} {:?}", theirs.kind, theirs.labels, theirs.help),
            ),
            Some(mine) if mine != theirs => {
                check(name, Allowed::Differs, format!("differs: {name}\n  upstream: {theirs:?}\n  ours:     {mine:?}"))
            }
            Some(_) => {}
        }
    }
    for (name, mine) in ours {
        if !upstream.contains_key(name) {
            check(name, Allowed::OursOnly, format!("extra: {name} {} {:?} {:?}", mine.kind, mine.labels, mine.help));
        }
    }
    (unexpected, used)
}

/// Objects that give the EndpointSlice controllers' families samples on both sides: a selected
/// Service with a traffic distribution (its placeholder slice), and a selector-less Service whose
/// hand-written Endpoints are mirrored. Each side gets its own (`side` in the names) and runs
/// alone, since the first controller to write a slice leaves the other nothing to change.
fn seed(admin: RestConfig, side: &str) {
    let client = Client::new(admin, ClientOptions::default()).expect("a client");
    let port = serde_json::json!([{"name": "http", "port": 80, "protocol": "TCP"}]);
    let services = Api::<Service>::namespaced(&client, "default");
    let selected: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("parity-selected-{side}")},
        "spec": {"selector": {"app": "parity"}, "ports": port, "trafficDistribution": "PreferClose"},
    }))
    .unwrap();
    let mirrored: Service = serde_json::from_value(
        serde_json::json!({"metadata": {"name": format!("parity-mirrored-{side}")}, "spec": {"ports": port}}),
    )
    .unwrap();
    let endpoints: Endpoints = serde_json::from_value(serde_json::json!({
        "metadata": {"name": format!("parity-mirrored-{side}")},
        "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]}],
    }))
    .unwrap();
    services.create(&selected, &PostParams::default()).expect("selected Service created");
    services.create(&mirrored, &PostParams::default()).expect("selector-less Service created");
    Api::<Endpoints>::namespaced(&client, "default")
        .create(&endpoints, &PostParams::default())
        .expect("Endpoints created");
}

fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap().local_addr().unwrap().port()
}

/// GET `path` on `port` over TLS as the cluster admin (a client certificate, `system:masters`):
/// authenticated as Prometheus is on kubeadm clusters, authorized by a SubjectAccessReview.
fn get(port: u16, admin: &RestConfig, path: &str) -> Result<(u16, String), String> {
    request(port, admin, path, "")
}

/// GET `path` on `port` with `headers` (each ending in CRLF), as `config` connects.
fn request(port: u16, config: &RestConfig, path: &str, headers: &str) -> Result<(u16, String), String> {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    let mut stream = http::connect(addr, config, Duration::from_secs(20));
    let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{headers}Connection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let response = http::read_response(&mut BufReader::new(stream));
    Ok((response.code, response.text()))
}

/// A request with a bearer token and no client certificate, so the binary asks the API server
/// with a TokenReview (the token is refused: 401), giving the delegated authentication
/// families a sample.
fn token_request(port: u16) {
    let tls = kcm::client::config::TlsSettings { insecure_skip_verify: true, ..Default::default() };
    let config = RestConfig {
        server: format!("https://127.0.0.1:{port}"),
        tls,
        auth: kcm::client::config::Auth::None,
        source: "token".into(),
    };
    let answer = request(port, &config, "/metrics", "Authorization: Bearer not-a-token\r\n");
    assert!(matches!(answer, Ok((401, _))), "a refused token: {answer:?}");
}

/// One binary's scrape once it leads its Lease and its families stopped changing for 5 s.
fn settled_scrape(process: &mut OwnedProcess, port: u16, admin: &RestConfig, lease: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(120);
    let leading = format!("leader_election_master_status{{name=\"{lease}\"}} 1");
    let mut last: Option<(BTreeMap<String, Family>, Instant)> = None;
    loop {
        assert!(process.exited().is_none(), "{} exited:\n{}", process.name(), process.log_tail(40));
        assert!(Instant::now() < deadline, "{} did not settle:\n{}", process.name(), process.log_tail(40));
        if let Ok((200, text)) = get(port, admin, "/metrics")
            && text.contains(&leading)
        {
            if last.is_none() {
                token_request(port);
            }
            let families = parse(&text);
            match &last {
                Some((previous, since)) if *previous == families => {
                    if since.elapsed() >= Duration::from_secs(5) {
                        return text;
                    }
                }
                _ => last = Some((families, Instant::now())),
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// kubeadm's flags beside `kubeconfig` (delegated authentication and authorization included),
/// every controller, serving on `port`, leading `lease`.
fn flags(kubeconfig: &Path, port: u16, lease: &str) -> Vec<String> {
    let beside = |name: &str| kubeconfig.with_file_name(name).display().to_string();
    vec![
        format!("--authentication-kubeconfig={}", kubeconfig.display()),
        format!("--authorization-kubeconfig={}", kubeconfig.display()),
        format!("--client-ca-file={}", beside("ca.crt")),
        format!("--secure-port={port}"),
        format!("--leader-elect-resource-name={lease}"),
        "--controllers=*,bootstrapsigner,tokencleaner".into(),
    ]
}

fn start(side: Side, binary: &Path, kubeconfig: &Path, dir: &Path) -> (OwnedProcess, u16, String) {
    let port = free_port();
    let lease = format!("kcm-metrics-{}", side.name());
    let flags = flags(kubeconfig, port, &lease);
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let log = dir.join(format!("{}.log", side.name()));
    let process = start_controller_manager(side, binary, kubeconfig, &flags, &log).expect("the binary starts");
    (process, port, lease)
}

#[test]
fn metric_families_match_upstreams() {
    if !Backend::Real.available() {
        return;
    }
    let plane = ControlPlane::start().expect("the control plane starts");
    let (_, kubeconfig) = plane.write_kubeconfigs(&plane.dir().join("kubeadm").join("admin.conf")).unwrap();
    let mut admin = plane.admin_config();
    // Both serve a self-signed certificate, as kubeadm leaves them.
    admin.tls.insecure_skip_verify = true;
    let upstream_binary = plane.assets().kube_controller_manager.clone();
    let ours_binary = PathBuf::from(env!("CARGO_BIN_EXE_kube-controller-manager"));
    seed(plane.admin_config(), "upstream");
    let (mut upstream, upstream_port, upstream_lease) =
        start(Side::Upstream, &upstream_binary, &kubeconfig, plane.dir());
    let upstream_text = settled_scrape(&mut upstream, upstream_port, &admin, &upstream_lease);
    upstream.stop(Duration::from_secs(10));
    seed(plane.admin_config(), "ours");
    let (mut ours, ours_port, ours_lease) = start(Side::Ours, &ours_binary, &kubeconfig, plane.dir());
    let ours_text = settled_scrape(&mut ours, ours_port, &admin, &ours_lease);
    ours.stop(Duration::from_secs(10));
    if let Ok(dir) = std::env::var("KCM_METRICS_PARITY_DUMP") {
        let _ = std::fs::write(Path::new(&dir).join("upstream.txt"), &upstream_text);
        let _ = std::fs::write(Path::new(&dir).join("ours.txt"), &ours_text);
    }
    let (theirs, mine) = (parse(&upstream_text), parse(&ours_text));
    let (unexpected, used) = compare(&theirs, &mine);
    let allowed = theirs.keys().chain(mine.keys()).filter(|n| allowance(n).is_some()).collect::<BTreeSet<_>>();
    eprintln!("upstream {} families, ours {}, allowed differences {}", theirs.len(), mine.len(), allowed.len());
    let stale: Vec<&str> = (0..ALLOWED.len()).filter(|i| !used.contains(i)).map(|i| ALLOWED[i].0).collect();
    assert!(
        unexpected.is_empty() && stale.is_empty(),
        "{} unexpected differences:\n{}\nallowed but not seen: {stale:?}",
        unexpected.len(),
        unexpected.join("\n")
    );
}

#[test]
fn label_names_are_read_past_escaped_values() {
    assert_eq!(label_names(r#"a="x,\"y=\"",b_c="",le="+Inf""#), ["a", "b_c", "le"]);
}
