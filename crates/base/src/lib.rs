//! The bottom layer of kube-controller-manager (Rust): ports of upstream's apimachinery
//! helpers (labels, selectors, quantities, intstr, node affinity, pod helpers, cron), the
//! metrics registry and its text format, logging, the random source, JWTs, X.509 and HTTP/1.1
//! framing — the modules every other layer may use and that use nothing else of ours. A crate of its own, so
//! that the compiler holds the rule: nothing here can name the API client, the runtime, a
//! controller or the development tools (docs/architecture.md, "Architecture").
//!
//! The `kcm` library re-exports each module under its own name (`kcm::apimachinery`, …), so
//! paths are the same on either side of the crate boundary.

#![warn(missing_docs)]

pub mod apimachinery;
#[cfg(any(test, feature = "fixtures"))]
pub mod fuzz;
pub mod http1;
pub mod jwt;
pub mod logging;
pub mod lru;
pub mod metrics;
pub mod quantity;
pub mod random;
pub mod x509;

/// This machine's host name, from `/proc/sys/kernel/hostname` or `$HOSTNAME` (as Go's
/// `os.Hostname`), or `None` when neither gives one.
pub fn hostname() -> Option<String> {
    let from_kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    [from_kernel, std::env::var("HOSTNAME").ok()]
        .into_iter()
        .flatten()
        .map(|name| name.trim().to_string())
        .find(|name| !name.is_empty())
}
