//! The resolver against a tiny DNS responder on 127.0.0.1 (UDP and TCP on one random port)
//! and temporary hosts/resolv.conf files.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{IpAddr, TcpListener, TcpStream, UdpSocket};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use ureq::unversioned::transport::{Connector, TcpConnector};

use super::NameResolver;
use super::dns::tests::reply;

/// A question the responder was asked: name, record type, and whether it came over TCP.
type Asked = (String, u16, bool);

/// Answers from a table; names not in it are NXDOMAIN. Names in `truncated` get an empty,
/// truncated UDP answer and their records over TCP only; AAAA questions about names in
/// `unanswered_aaaa` get no answer at all.
struct Responder {
    port: u16,
    asked: Arc<Mutex<Vec<Asked>>>,
    stop: Arc<AtomicBool>,
}

type Table = HashMap<(String, u16), Vec<IpAddr>>;

impl Responder {
    fn start(records: &[(&str, &str)], truncated: &[&str]) -> Responder {
        Responder::start_with(records, truncated, &[])
    }

    fn start_with(records: &[(&str, &str)], truncated: &[&str], unanswered_aaaa: &[&str]) -> Responder {
        let mut table: Table = HashMap::new();
        for (name, ip) in records {
            // "none": the name exists without addresses (its A and AAAA answers are empty).
            if *ip == "none" {
                table.insert((name.to_string(), 0), Vec::new());
                continue;
            }
            let ip: IpAddr = ip.parse().unwrap();
            let kind = if ip.is_ipv4() { 1 } else { 28 };
            table.entry((name.to_string(), kind)).or_default().push(ip);
        }
        let table = Arc::new(table);
        let owned = |names: &[&str]| -> Vec<String> { names.iter().map(|s| s.to_string()).collect() };
        let (truncated, unanswered) = (Arc::new(owned(truncated)), owned(unanswered_aaaa));
        let (udp, tcp) = bind_pair();
        let port = udp.local_addr().unwrap().port();
        let asked = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, tr, a, s) = (table.clone(), truncated.clone(), asked.clone(), stop.clone());
        std::thread::spawn(move || serve_udp(udp, &t, (&tr, &unanswered), &a, &s));
        let (a, s) = (asked.clone(), stop.clone());
        std::thread::spawn(move || serve_tcp(tcp, &table, &a, &s));
        Responder { port, asked, stop }
    }

    fn asked(&self) -> Vec<Asked> {
        self.asked.lock().clone()
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accepting thread.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// A UDP socket and a TCP listener on the same free port.
fn bind_pair() -> (UdpSocket, TcpListener) {
    for _ in 0..50 {
        let tcp = TcpListener::bind("127.0.0.1:0").unwrap();
        if let Ok(udp) = UdpSocket::bind(tcp.local_addr().unwrap()) {
            return (udp, tcp);
        }
    }
    panic!("no port free for both UDP and TCP");
}

/// The question of a query: its name and type.
fn question(query: &[u8]) -> (String, u16) {
    let (name, end) = super::dns::read_name(query, 12).unwrap();
    (name, u16::from_be_bytes([query[end], query[end + 1]]))
}

fn answer(query: &[u8], table: &Table, truncate: bool) -> Vec<u8> {
    let (name, kind) = question(query);
    let exists = table.keys().any(|(n, _)| *n == name);
    if !exists {
        return reply(query, 3, false, &[]);
    }
    if truncate {
        return reply(query, 0, true, &[]);
    }
    let records: Vec<(u16, Vec<u8>)> = table
        .get(&(name, kind))
        .into_iter()
        .flatten()
        .map(|ip| match ip {
            IpAddr::V4(v4) => (1, v4.octets().to_vec()),
            IpAddr::V6(v6) => (28, v6.octets().to_vec()),
        })
        .collect();
    reply(query, 0, false, &records)
}

fn serve_udp(
    socket: UdpSocket,
    table: &Table,
    (truncated, unanswered_aaaa): (&[String], &[String]),
    asked: &Mutex<Vec<Asked>>,
    stop: &AtomicBool,
) {
    socket.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut buffer = [0; 512];
    while !stop.load(Ordering::SeqCst) {
        let Ok((n, from)) = socket.recv_from(&mut buffer) else { continue };
        let query = &buffer[..n];
        let (name, kind) = question(query);
        let truncate = truncated.contains(&name);
        let silent = kind == 28 && unanswered_aaaa.contains(&name);
        asked.lock().push((name, kind, false));
        if !silent {
            let _ = socket.send_to(&answer(query, table, truncate), from);
        }
    }
}

fn serve_tcp(listener: TcpListener, table: &Table, asked: &Mutex<Vec<Asked>>, stop: &AtomicBool) {
    for stream in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(mut stream) = stream else { continue };
        let mut length = [0; 2];
        if stream.read_exact(&mut length).is_err() {
            continue;
        }
        let mut query = vec![0; u16::from_be_bytes(length) as usize];
        stream.read_exact(&mut query).unwrap();
        let (name, kind) = question(&query);
        asked.lock().push((name, kind, true));
        let message = answer(&query, table, false);
        let mut framed = (message.len() as u16).to_be_bytes().to_vec();
        framed.extend_from_slice(&message);
        stream.write_all(&framed).unwrap();
    }
}

/// A hosts file and a resolv.conf in a fresh directory.
fn files(name: &str, hosts: &str, resolv_conf: &str) -> (PathBuf, PathBuf) {
    let dir = std::env::temp_dir().join(format!("kcm-resolve-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("hosts"), hosts).unwrap();
    std::fs::write(dir.join("resolv.conf"), resolv_conf).unwrap();
    (dir.join("hosts"), dir.join("resolv.conf"))
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

fn asked(list: &[(&str, u16, bool)]) -> Vec<Asked> {
    list.iter().map(|(n, k, t)| (n.to_string(), *k, *t)).collect()
}

#[test]
fn ip_literals_need_no_files() {
    let resolver = NameResolver::with_files("/nonexistent/hosts", "/nonexistent/resolv.conf");
    assert_eq!(resolver.lookup("10.0.0.1", None).unwrap(), ips(&["10.0.0.1"]));
    assert_eq!(resolver.lookup("[2001:db8::1]", None).unwrap(), ips(&["2001:db8::1"]));
    assert_eq!(resolver.lookup("LocalHost.", None).unwrap(), ips(&["127.0.0.1", "::1"]));
}

#[test]
fn the_hosts_file_comes_first() {
    let dns = Responder::start(&[("api.test", "10.9.9.9")], &[]);
    let (hosts, conf) = files("hosts", "10.1.2.3 api.test\n", "nameserver 127.0.0.1\n");
    let resolver = NameResolver::with_files(hosts, conf).with_dns_port(dns.port);
    assert_eq!(resolver.lookup("API.test", None).unwrap(), ips(&["10.1.2.3"]));
    assert!(dns.asked().is_empty());
}

#[test]
fn dns_with_search_domains_first_below_ndots() {
    let dns = Responder::start(&[("api.cluster.example", "10.0.0.7"), ("api.cluster.example", "fd00::7")], &[]);
    let conf = "nameserver 127.0.0.1\nsearch cluster.example\noptions ndots:2 attempts:1\n";
    let (hosts, conf) = files("search", "127.0.0.1 localhost\n", conf);
    let resolver = NameResolver::with_files(hosts, conf).with_dns_port(dns.port);
    assert_eq!(resolver.lookup("api", None).unwrap(), ips(&["10.0.0.7", "fd00::7"]));
    assert_eq!(dns.asked(), asked(&[("api.cluster.example", 1, false), ("api.cluster.example", 28, false)]));
}

#[test]
fn nxdomain_moves_on_to_the_next_candidate() {
    let dns = Responder::start(&[("api.internal", "10.0.0.8")], &[]);
    let conf = "nameserver 127.0.0.1\nsearch cluster.example\noptions ndots:5\n";
    let (hosts, conf) = files("nxdomain", "", conf);
    let resolver = NameResolver::with_files(hosts, conf).with_dns_port(dns.port);
    assert_eq!(resolver.lookup("api.internal", None).unwrap(), ips(&["10.0.0.8"]));
    let expected =
        asked(&[("api.internal.cluster.example", 1, false), ("api.internal", 1, false), ("api.internal", 28, false)]);
    assert_eq!(dns.asked(), expected, "no AAAA question for a name that does not exist");
}

#[test]
fn a_truncated_answer_is_asked_again_over_tcp() {
    let records = [("big.example", "10.0.1.1"), ("big.example", "10.0.1.2"), ("big.example", "10.0.1.3")];
    let dns = Responder::start(&records, &["big.example"]);
    let (hosts, conf) = files("tcp", "", "nameserver 127.0.0.1\n");
    let resolver = NameResolver::with_files(hosts, conf).with_dns_port(dns.port);
    assert_eq!(resolver.lookup("big.example", None).unwrap(), ips(&["10.0.1.1", "10.0.1.2", "10.0.1.3"]));
    let expected = asked(&[
        ("big.example", 1, false),
        ("big.example", 1, true),
        ("big.example", 28, false),
        ("big.example", 28, true),
    ]);
    assert_eq!(dns.asked(), expected);
}

#[test]
fn an_unanswered_aaaa_question_keeps_the_a_records() {
    let dns = Responder::start_with(&[("v4only.example", "10.0.2.1")], &[], &["v4only.example"]);
    let (hosts, conf) = files("aaaa", "", "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n");
    let resolver = NameResolver::with_files(hosts, conf).with_dns_port(dns.port);
    assert_eq!(resolver.lookup("v4only.example", None).unwrap(), ips(&["10.0.2.1"]));
    assert_eq!(dns.asked(), asked(&[("v4only.example", 1, false), ("v4only.example", 28, false)]));
}

#[test]
fn failure_names_the_host_and_what_was_tried() {
    let dns = Responder::start(&[("nowhere", "none")], &[]);
    let (hosts, conf) = files("missing", "", "nameserver 127.0.0.1\nsearch corp.example\noptions ndots:1\n");
    let resolver = NameResolver::with_files(&hosts, conf).with_dns_port(dns.port);
    let error = resolver.lookup("nowhere", None).unwrap_err().to_string();
    let expected = format!(
        "cannot resolve host \"nowhere\": not in {}; nowhere.corp.example: no such name (NXDOMAIN); nowhere: no A or AAAA records",
        hosts.display()
    );
    assert_eq!(error, expected);

    // No server listens on this port: the error names the server and the transport.
    let closed = UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let (hosts, conf) = files("down", "", "nameserver 127.0.0.1\noptions timeout:1 attempts:2\n");
    let error =
        NameResolver::with_files(hosts, conf).with_dns_port(port).lookup("api.example", None).unwrap_err().to_string();
    assert!(error.starts_with("cannot resolve host \"api.example\": not in "), "{error}");
    assert!(error.contains(&format!("api.example: 127.0.0.1:{port}: UDP: ")), "{error}");
    assert!(error.ends_with("(after 2 attempts)"), "{error}");
}

#[test]
fn ureq_connects_through_the_resolver() {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let (mut stream, _) = server.accept().unwrap();
        let mut request = [0; 1024];
        let _ = stream.read(&mut request).unwrap();
        stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok").unwrap();
    });
    let dns = Responder::start(&[], &[]);
    let (hosts, conf) = files("ureq", "127.0.0.1 kube-apiserver.test\n", "nameserver 127.0.0.1\noptions attempts:1\n");
    let resolver = NameResolver::with_files(hosts, conf).with_dns_port(dns.port);
    let agent = super::super::agent_with(resolver, ().chain(TcpConnector::default()));
    let mut response = agent.get(&format!("http://kube-apiserver.test:{port}/version")).call().unwrap();
    assert_eq!(response.body_mut().read_to_string().unwrap(), "ok");
    let error = agent.get(&format!("http://unknown.test:{port}/")).call().unwrap_err().to_string();
    assert!(error.contains("cannot resolve host \"unknown.test\""), "{error}");
}
