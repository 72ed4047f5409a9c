//! `/etc/hosts` and `/etc/resolv.conf`, read the way glibc's resolver reads them (`resolv(5)`,
//! `hosts(5)`), as far as a client that only looks up the API server's host needs.

use std::net::IpAddr;
use std::time::Duration;

/// glibc's `RES_MAXNDOTS`, `RES_MAXRETRANS` (in seconds) and `RES_MAXRETRY`.
const MAX_NDOTS: usize = 15;
const MAX_TIMEOUT_SECS: u64 = 30;
const MAX_ATTEMPTS: u32 = 5;
/// glibc reads at most this many nameservers (`MAXNS`).
const MAX_NAMESERVERS: usize = 3;

/// The settings of `/etc/resolv.conf` the lookup uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvConf {
    /// `nameserver` lines (at most three); `127.0.0.1` when there are none, as glibc.
    pub nameservers: Vec<IpAddr>,
    /// `search` (or `domain`: the last of the two wins).
    pub search: Vec<String>,
    /// `options ndots:n` (default 1): names with fewer dots are tried with the search domains first.
    pub ndots: usize,
    /// `options timeout:n` (default 5 s): how long one query waits for one server.
    pub timeout: Duration,
    /// `options attempts:n` (default 2): rounds over all servers.
    pub attempts: u32,
}

impl Default for ResolvConf {
    fn default() -> Self {
        ResolvConf {
            nameservers: Vec::new(),
            search: Vec::new(),
            ndots: 1,
            timeout: Duration::from_secs(5),
            attempts: 2,
        }
    }
}

impl ResolvConf {
    /// Parses the text of a resolv.conf. Unknown keywords and options are ignored and malformed
    /// values skipped, as glibc does, so that a file other resolvers accept never stops us.
    pub fn parse(text: &str) -> ResolvConf {
        let mut conf = ResolvConf::default();
        for line in text.lines() {
            let mut words = strip_comment(line, &['#', ';']).split_whitespace();
            match words.next() {
                Some("nameserver") => {
                    // Link-local servers with a zone (`fe80::1%eth0`) need an interface index: skipped.
                    if let Some(ip) = words.next().and_then(|w| w.parse().ok())
                        && conf.nameservers.len() < MAX_NAMESERVERS
                    {
                        conf.nameservers.push(ip);
                    }
                }
                Some("domain") => conf.search = words.next().map(normalize).into_iter().collect(),
                Some("search") => conf.search = words.map(normalize).filter(|d| !d.is_empty()).collect(),
                Some("options") => words.for_each(|option| conf.apply_option(option)),
                _ => {}
            }
        }
        if conf.nameservers.is_empty() {
            conf.nameservers.push(IpAddr::from([127, 0, 0, 1]));
        }
        conf
    }

    fn apply_option(&mut self, option: &str) {
        let Some((name, value)) = option.split_once(':') else { return };
        let Ok(value) = value.parse::<u64>() else { return };
        match name {
            "ndots" => self.ndots = value.min(MAX_NDOTS as u64) as usize,
            "timeout" => self.timeout = Duration::from_secs(value.clamp(1, MAX_TIMEOUT_SECS)),
            "attempts" => self.attempts = value.clamp(1, MAX_ATTEMPTS as u64) as u32,
            _ => {}
        }
    }

    /// The fully qualified names to try for `name`, in order (glibc's `res_search`): a name
    /// ending in a dot is tried alone; one with at least `ndots` dots is tried as given first,
    /// then with each search domain; a shorter one with the search domains first.
    pub fn candidates(&self, name: &str) -> Vec<String> {
        if let Some(absolute) = name.strip_suffix('.') {
            return vec![absolute.to_string()];
        }
        let searched = self.search.iter().map(|domain| format!("{name}.{domain}"));
        if name.matches('.').count() >= self.ndots {
            std::iter::once(name.to_string()).chain(searched).collect()
        } else {
            searched.chain(std::iter::once(name.to_string())).collect()
        }
    }
}

/// The addresses `/etc/hosts` (its text) gives `name`, in file order; names match without
/// regard to case or a trailing dot.
pub fn hosts_lookup(text: &str, name: &str) -> Vec<IpAddr> {
    let name = normalize(name);
    let mut found = Vec::new();
    for line in text.lines() {
        let mut words = strip_comment(line, &['#']).split_whitespace();
        let Some(address) = words.next() else { continue };
        if !words.any(|alias| normalize(alias) == name) {
            continue;
        }
        // Scoped addresses (`fe80::1%eth0`) cannot be used without an interface index.
        if let Ok(ip) = address.parse::<IpAddr>()
            && !found.contains(&ip)
        {
            found.push(ip);
        }
    }
    found
}

fn strip_comment<'a>(line: &'a str, markers: &[char]) -> &'a str {
    line.split(markers).next().unwrap_or_default()
}

fn normalize(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_servers_search_and_options() {
        let conf = ResolvConf::parse(
            "# generated\nnameserver 10.96.0.10\nnameserver fe80::1%eth0\nnameserver 2001:db8::53 ; v6\n\
             domain ignored.example\nsearch svc.cluster.local cluster.local.\n\
             options ndots:5 timeout:2 attempts:3 rotate edns0\nnameserver 1.1.1.1\nnameserver 8.8.8.8\n",
        );
        let servers: Vec<IpAddr> =
            ["10.96.0.10", "2001:db8::53", "1.1.1.1"].iter().map(|s| s.parse().unwrap()).collect();
        assert_eq!(conf.nameservers, servers, "at most three, zoned ones skipped");
        assert_eq!(conf.search, ["svc.cluster.local", "cluster.local"]);
        assert_eq!((conf.ndots, conf.timeout, conf.attempts), (5, Duration::from_secs(2), 3));
    }

    #[test]
    fn defaults_and_limits() {
        let conf = ResolvConf::parse("options ndots:99 timeout:0 attempts:50 ndots:x\n");
        assert_eq!(conf.nameservers, [IpAddr::from([127, 0, 0, 1])]);
        assert_eq!((conf.ndots, conf.timeout, conf.attempts), (15, Duration::from_secs(1), 5));
        let empty = ResolvConf::parse("");
        assert_eq!((empty.ndots, empty.timeout, empty.attempts), (1, Duration::from_secs(5), 2));
    }

    #[test]
    fn search_order_follows_ndots() {
        let conf = ResolvConf { search: vec!["a.example".into(), "b.example".into()], ndots: 2, ..Default::default() };
        assert_eq!(conf.candidates("api"), ["api.a.example", "api.b.example", "api"]);
        assert_eq!(conf.candidates("api.x.y"), ["api.x.y", "api.x.y.a.example", "api.x.y.b.example"]);
        assert_eq!(conf.candidates("api.x.y."), ["api.x.y"]);
    }

    #[test]
    fn hosts_file_matches_any_alias_without_case() {
        let text = "127.0.0.1 localhost\n# 10.0.0.9 api\n10.0.0.1\tAPI.example api # control plane\n\
                    fe80::1%eth0 api\n2001:db8::1 api.example.\n10.0.0.1 api\n";
        let found = hosts_lookup(text, "api.Example.");
        assert_eq!(found, ["10.0.0.1".parse::<IpAddr>().unwrap(), "2001:db8::1".parse().unwrap()]);
        assert_eq!(hosts_lookup(text, "api"), ["10.0.0.1".parse::<IpAddr>().unwrap()]);
        assert!(hosts_lookup(text, "missing").is_empty());
    }
}
