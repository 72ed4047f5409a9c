//! Resolving the API server's host name without the C library's NSS modules, so that a fully
//! static binary (which cannot load them) still follows the node's configuration: `/etc/hosts`
//! first, then DNS A/AAAA questions to the `/etc/resolv.conf` nameservers with its
//! `search`/`ndots`/`timeout`/`attempts`, as glibc's `files dns` would. IP literals never reach
//! it. Plugged into ureq as its resolver (ureq's `unversioned::resolver::Resolver` hook).
//!
//! Both files are read at each look-up (a new connection, not a request), so edits apply
//! without a restart, as with glibc.

mod dns;
mod files;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Instant;

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

use dns::{Answer, RecordType};
pub use files::{ResolvConf, hosts_lookup};

/// The port of DNS servers.
const DNS_PORT: u16 = 53;

/// Looks host names up in a hosts file, then over DNS. Cheap to clone.
#[derive(Debug, Clone)]
pub struct NameResolver {
    hosts: PathBuf,
    resolv_conf: PathBuf,
    dns_port: u16,
}

impl Default for NameResolver {
    fn default() -> Self {
        NameResolver::with_files("/etc/hosts", "/etc/resolv.conf")
    }
}

impl NameResolver {
    /// A resolver that reads these files instead of the system's.
    pub fn with_files(hosts: impl Into<PathBuf>, resolv_conf: impl Into<PathBuf>) -> NameResolver {
        NameResolver { hosts: hosts.into(), resolv_conf: resolv_conf.into(), dns_port: DNS_PORT }
    }

    /// Asks the nameservers on this port instead of 53 (a test's responder).
    pub fn with_dns_port(self, dns_port: u16) -> NameResolver {
        NameResolver { dns_port, ..self }
    }

    /// The addresses of `host` (an IP literal, possibly in brackets, or a name), IPv4 first.
    /// Gives up at `deadline`. The error names the host and everything that was tried.
    pub fn lookup(&self, host: &str, deadline: Option<Instant>) -> Result<Vec<IpAddr>, String> {
        let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host);
        if let Ok(ip) = literal.parse::<IpAddr>() {
            return Ok(vec![ip]);
        }
        let mut tried = Vec::new();
        match std::fs::read_to_string(&self.hosts) {
            Ok(text) => {
                let found = hosts_lookup(&text, host);
                if !found.is_empty() {
                    return Ok(found);
                }
                tried.push(format!("not in {}", self.hosts.display()));
            }
            Err(e) => tried.push(format!("cannot read {}: {e}", self.hosts.display())),
        }
        if is_localhost(host) {
            return Ok(vec![IpAddr::from([127, 0, 0, 1]), IpAddr::from(std::net::Ipv6Addr::LOCALHOST)]);
        }
        let conf = match std::fs::read_to_string(&self.resolv_conf) {
            Ok(text) => ResolvConf::parse(&text),
            Err(e) => {
                tried.push(format!("cannot read {} ({e}): asking 127.0.0.1", self.resolv_conf.display()));
                ResolvConf::parse("")
            }
        };
        for name in conf.candidates(host) {
            match self.ask_servers(&conf, &name, deadline) {
                Ok(Some(found)) if !found.is_empty() => return Ok(found),
                Ok(Some(_)) => tried.push(format!("{name}: no A or AAAA records")),
                Ok(None) => tried.push(format!("{name}: no such name (NXDOMAIN)")),
                Err(e) => tried.push(format!("{name}: {e}")),
            }
        }
        Err(format!("cannot resolve host {host:?}: {}", tried.join("; ")))
    }

    /// The A, then AAAA addresses of one fully qualified name; `None` when it does not exist, an
    /// error when no server answered. A name with IPv4 addresses is usable even if its AAAA
    /// question goes unanswered (some servers drop those).
    fn ask_servers(
        &self,
        conf: &ResolvConf,
        name: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<Vec<IpAddr>>, String> {
        let mut addresses = match self.ask_one_type(conf, name, RecordType::A, deadline)? {
            Answer::NoSuchName => return Ok(None),
            Answer::Addresses(v4) => v4,
        };
        match self.ask_one_type(conf, name, RecordType::Aaaa, deadline) {
            Ok(Answer::Addresses(v6)) => addresses.extend(v6),
            Ok(Answer::NoSuchName) => {}
            Err(e) if !addresses.is_empty() => log::debug!("{name}: no AAAA answer ({e}); using its A records"),
            Err(e) => return Err(e),
        }
        Ok(Some(addresses))
    }

    /// glibc's retry scheme: `attempts` rounds over the servers in order, each waiting `timeout`.
    fn ask_one_type(
        &self,
        conf: &ResolvConf,
        name: &str,
        record: RecordType,
        deadline: Option<Instant>,
    ) -> Result<Answer, String> {
        let mut failures = Vec::new();
        for _ in 0..conf.attempts {
            for server in &conf.nameservers {
                let server = SocketAddr::new(*server, self.dns_port);
                match dns::ask(server, name, record, conf.timeout, deadline) {
                    Ok(answer) => return Ok(answer),
                    Err(e) => {
                        let failure = format!("{server}: {e}");
                        if !failures.contains(&failure) {
                            failures.push(failure);
                        }
                        if deadline.is_some_and(|d| Instant::now() >= d) {
                            return Err(failures.join(", "));
                        }
                    }
                }
            }
        }
        Err(format!("{} (after {} attempts)", failures.join(", "), conf.attempts))
    }
}

/// `localhost` and names under it are the loopback addresses even when the hosts file does not
/// say so (RFC 6761 §6.3; glibc gets this from `nss-myhostname`, which a static binary lacks).
fn is_localhost(host: &str) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    host == "localhost" || host.ends_with(".localhost")
}

impl Resolver for NameResolver {
    fn resolve(&self, uri: &Uri, config: &Config, timeout: NextTimeout) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let bad = || ureq::Error::BadUri(format!("{uri} has no host"));
        let authority = uri.authority().ok_or_else(bad)?;
        let port = match (authority.port_u16(), uri.scheme_str()) {
            (Some(port), _) => port,
            (None, Some("https")) => 443,
            (None, Some("http")) => 80,
            (None, scheme) => return Err(ureq::Error::BadUri(format!("unknown scheme: {scheme:?}"))),
        };
        let deadline = (!timeout.after.is_not_happening()).then(|| Instant::now() + *timeout.after);
        let found = self
            .lookup(authority.host(), deadline)
            .map_err(|e| ureq::Error::Io(std::io::Error::new(std::io::ErrorKind::NotFound, e)))?;
        let mut addresses = self.empty();
        let family = config.ip_family();
        let wanted = family.keep_wanted(found.into_iter().map(|ip| SocketAddr::new(ip, port)));
        for address in wanted {
            if addresses.try_push(address).is_err() {
                break;
            }
        }
        if addresses.is_empty() {
            let message = format!("host {:?} has no address of the wanted IP family", authority.host());
            return Err(ureq::Error::Io(std::io::Error::new(std::io::ErrorKind::NotFound, message)));
        }
        Ok(addresses)
    }
}

#[cfg(test)]
mod tests;
