//! Named health checks and the `/healthz` answer, worded exactly as upstream's
//! `k8s.io/apiserver/pkg/server/healthz` words it. Upstream's controller manager serves
//! `/healthz` alone: its mux routes only that exact path to the checks, so `/healthz/<check>`,
//! `/livez` and `/readyz` are 404 there, and here.

use std::collections::BTreeSet;
use std::fmt::Write;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::apimachinery::errors::BoxError;

/// A check: `Ok` when healthy, else why not (logged, never shown to callers of the root path),
/// as any error (upstream's `HealthChecker.Check` returns an `error`).
type Check = Arc<dyn Fn() -> Result<(), BoxError> + Send + Sync>;

/// The one health path, and the `type` of its SLIs.
const HEALTHZ: &str = "healthz";

/// The name of the check that stands in while none is registered (upstream's `PingHealthz`).
const PING: &str = "ping";

/// The process's named health checks, shared by the runtime (which adds them) and the server.
#[derive(Default)]
pub struct HealthChecks {
    checks: RwLock<Vec<(String, Check)>>,
}

/// An answer: status code and plain-text body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthAnswer {
    /// The HTTP status: 200 when the checks passed, 500 otherwise.
    pub code: u16,
    /// The plain-text body: `ok`, or the per-check listing (with `?verbose`, or on failure).
    pub body: String,
}

impl HealthChecks {
    /// An empty set of checks, to share.
    pub fn new() -> Arc<Self> {
        Arc::new(HealthChecks::default())
    }

    /// Adds a check, or replaces the one of the same name. Checks run on every request to a
    /// health path, in the order they were added, so they must be quick.
    pub fn add(&self, name: &str, check: impl Fn() -> Result<(), BoxError> + Send + Sync + 'static) {
        let mut checks = self.checks.write();
        let check: Check = Arc::new(check);
        match checks.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = check,
            None => checks.push((name.to_string(), check)),
        }
    }

    /// The checks as they are now; `ping` alone while none is registered.
    fn snapshot(&self) -> Vec<(String, Check)> {
        let checks = self.checks.read();
        if checks.is_empty() {
            return vec![(PING.to_string(), Arc::new(|| Ok(())))];
        }
        checks.clone()
    }

    /// The answer of `/healthz`: `?exclude=<check>` skips checks, `?verbose` lists every
    /// check. Failures are always listed, their reasons withheld (they are logged instead).
    pub fn healthz(&self, query: &[(String, String)]) -> HealthAnswer {
        let name = HEALTHZ;
        let mut excluded: BTreeSet<&str> =
            query.iter().filter(|(k, _)| k == "exclude").map(|(_, v)| v.as_str()).collect();
        let mut listing = String::new();
        let mut failures = Vec::new();
        for (check_name, check) in self.snapshot() {
            if excluded.remove(check_name.as_str()) {
                let _ = writeln!(listing, "[+]{check_name} excluded: ok");
                continue;
            }
            let result = check();
            // As upstream's root handler, each run is an SLI (`/metrics/slis`).
            super::slis::global().observe(&check_name, name, result.is_ok());
            match result {
                Ok(()) => {
                    let _ = writeln!(listing, "[+]{check_name} ok");
                }
                Err(reason) => {
                    let _ = writeln!(listing, "[-]{check_name} failed: reason withheld");
                    failures.push(format!("[-]{check_name} failed: {reason}"));
                }
            }
        }
        if !excluded.is_empty() {
            let names = quoted(&excluded);
            let _ = writeln!(listing, "warn: some health checks cannot be excluded: no matches for {names}");
            log::debug!("cannot exclude some health checks, no health checks are installed matching {names}");
        }
        if !failures.is_empty() {
            log::debug!("{name} check failed:\n{}", failures.join("\n"));
            return HealthAnswer { code: 500, body: format!("{listing}{name} check failed\n") };
        }
        if query.iter().any(|(k, _)| k == "verbose") {
            return HealthAnswer { code: 200, body: format!("{listing}{name} check passed\n") };
        }
        HealthAnswer { code: 200, body: "ok".into() }
    }
}

/// `"a","b"`, as upstream's `formatQuoted`.
fn quoted(names: &BTreeSet<&str>) -> String {
    names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn checks() -> Arc<HealthChecks> {
        let checks = HealthChecks::new();
        checks.add("leaderElection", || Ok(()));
        checks.add("deployment", || Err("informers not synced".into()));
        checks
    }

    #[test]
    fn ping_stands_in_while_there_are_no_checks() {
        let checks = HealthChecks::new();
        assert_eq!(checks.healthz(&[]), HealthAnswer { code: 200, body: "ok".into() });
        let verbose = checks.healthz(&query(&[("verbose", "")]));
        assert_eq!(verbose.body, "[+]ping ok\nhealthz check passed\n");
    }

    #[test]
    fn failures_are_listed_with_reasons_withheld() {
        let answer = checks().healthz(&[]);
        assert_eq!(answer.code, 500);
        assert_eq!(answer.body, "[+]leaderElection ok\n[-]deployment failed: reason withheld\nhealthz check failed\n");
    }

    #[test]
    fn exclusions_skip_checks_and_unknown_ones_are_warned_about() {
        let answer = checks().healthz(&query(&[("exclude", "deployment"), ("exclude", "nope"), ("verbose", "")]));
        assert_eq!(answer.code, 200);
        assert_eq!(
            answer.body,
            "[+]leaderElection ok\n[+]deployment excluded: ok\n\
             warn: some health checks cannot be excluded: no matches for \"nope\"\nhealthz check passed\n"
        );
    }

    #[test]
    fn adding_a_check_again_replaces_it() {
        let checks = checks();
        checks.add("deployment", || Ok(()));
        assert_eq!(checks.healthz(&[]).code, 200);
    }
}
