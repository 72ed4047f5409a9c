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

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Instant;

use ureq::config::Config;
use ureq::http::Uri;
use ureq::unversioned::resolver::{ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

pub use dns::Error as DnsError;
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
    pub fn lookup(&self, host: &str, deadline: Option<Instant>) -> Result<Vec<IpAddr>, LookupError> {
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
                tried.push(Attempt::NotInHosts(self.hosts.clone()));
            }
            Err(source) => tried.push(Attempt::Hosts { path: self.hosts.clone(), source }),
        }
        if is_localhost(host) {
            return Ok(vec![IpAddr::from([127, 0, 0, 1]), IpAddr::from(std::net::Ipv6Addr::LOCALHOST)]);
        }
        let conf = match std::fs::read_to_string(&self.resolv_conf) {
            Ok(text) => ResolvConf::parse(&text),
            Err(source) => {
                tried.push(Attempt::ResolvConf { path: self.resolv_conf.clone(), source });
                ResolvConf::parse("")
            }
        };
        for name in conf.candidates(host) {
            match self.ask_servers(&conf, &name, deadline) {
                Ok(Some(found)) if !found.is_empty() => return Ok(found),
                Ok(Some(_)) => tried.push(Attempt::NoAddresses(name)),
                Ok(None) => tried.push(Attempt::NoSuchName(name)),
                Err(source) => tried.push(Attempt::Unanswered { name, source }),
            }
        }
        Err(LookupError { host: host.to_string(), tried })
    }

    /// The A, then AAAA addresses of one fully qualified name; `None` when it does not exist, an
    /// error when no server answered. A name with IPv4 addresses is usable even if its AAAA
    /// question goes unanswered (some servers drop those).
    fn ask_servers(
        &self,
        conf: &ResolvConf,
        name: &str,
        deadline: Option<Instant>,
    ) -> Result<Option<Vec<IpAddr>>, NoAnswer> {
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
    ) -> Result<Answer, NoAnswer> {
        let mut failures: Vec<ServerFailure> = Vec::new();
        for _ in 0..conf.attempts {
            for server in &conf.nameservers {
                let server = SocketAddr::new(*server, self.dns_port);
                match dns::ask(server, name, record, conf.timeout, deadline) {
                    Ok(answer) => return Ok(answer),
                    Err(error) => {
                        // The same failure of the same server is listed once, whatever the round.
                        let failure = ServerFailure { server, error };
                        let text = failure.to_string();
                        if !failures.iter().any(|seen| seen.to_string() == text) {
                            failures.push(failure);
                        }
                        if deadline.is_some_and(|d| Instant::now() >= d) {
                            return Err(NoAnswer { failures, attempts: None });
                        }
                    }
                }
            }
        }
        Err(NoAnswer { failures, attempts: Some(conf.attempts) })
    }
}

/// Why a host name could not be resolved: the host and everything that was tried, in order
/// (`cannot resolve host "api": not in /etc/hosts; api.corp: no such name (NXDOMAIN); …`).
#[derive(Debug)]
pub struct LookupError {
    host: String,
    tried: Vec<Attempt>,
}

impl LookupError {
    /// The host that was looked up.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// What was tried, in order.
    pub fn tried(&self) -> &[Attempt] {
        &self.tried
    }
}

impl fmt::Display for LookupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cannot resolve host {:?}: ", self.host)?;
        join(f, &self.tried, "; ")
    }
}

/// The last attempt is the source: the one that left the host unresolved.
impl std::error::Error for LookupError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.tried.last().map(|attempt| attempt as &(dyn std::error::Error + 'static))
    }
}

/// One step of a failed look-up.
#[derive(Debug, thiserror::Error)]
pub enum Attempt {
    /// The hosts file does not list the name.
    #[error("not in {}", .0.display())]
    NotInHosts(PathBuf),
    /// The hosts file cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Hosts {
        /// The hosts file.
        path: PathBuf,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// `resolv.conf` cannot be read, so 127.0.0.1 was asked.
    #[error("cannot read {} ({source}): asking 127.0.0.1", path.display())]
    ResolvConf {
        /// The `resolv.conf` file.
        path: PathBuf,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// The name exists but has no address.
    #[error("{0}: no A or AAAA records")]
    NoAddresses(String),
    /// NXDOMAIN.
    #[error("{0}: no such name (NXDOMAIN)")]
    NoSuchName(String),
    /// No server answered about the name.
    #[error("{name}: {source}")]
    Unanswered {
        /// The fully qualified name asked about.
        name: String,
        /// What each server did.
        #[source]
        source: NoAnswer,
    },
}

/// No nameserver answered one question: each server's failure, once, and the number of rounds
/// when they all ran (none when the deadline cut them short).
#[derive(Debug)]
pub struct NoAnswer {
    failures: Vec<ServerFailure>,
    attempts: Option<u32>,
}

impl fmt::Display for NoAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        join(f, &self.failures, ", ")?;
        match self.attempts {
            Some(attempts) => write!(f, " (after {attempts} attempts)"),
            None => Ok(()),
        }
    }
}

/// The last server's failure is the source.
impl std::error::Error for NoAnswer {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.failures.last().map(|failure| failure as &(dyn std::error::Error + 'static))
    }
}

/// One server's failure to answer.
#[derive(Debug, thiserror::Error)]
#[error("{server}: {error}")]
pub struct ServerFailure {
    /// The server.
    pub server: SocketAddr,
    /// What went wrong.
    #[source]
    pub error: DnsError,
}

fn join(f: &mut fmt::Formatter<'_>, items: &[impl fmt::Display], separator: &str) -> fmt::Result {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(separator)?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
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
