//! The `process_*` metrics of Prometheus' process collector (which upstream registers in
//! component-base's legacy registry), read from `/proc` on each scrape.

use std::fmt::Write;
use std::sync::{Arc, Once};

use crate::metrics::Collector;

/// Clock ticks per second in `/proc/<pid>/stat` (`USER_HZ`, 100 on every Linux ABI; the
/// Prometheus procfs library assumes the same).
const USER_HZ: f64 = 100.0;

/// Adds the process collector to the global registry, once per process.
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| crate::metrics::global().register(Arc::new(ProcessCollector)));
}

/// Writes the process metrics that can be read; a metric whose source is missing is left out.
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn write_to(&self, out: &mut String) {
        let stat = std::fs::read_to_string("/proc/self/stat").ok().and_then(|s| Stat::parse(&s));
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
        if let Some(stat) = &stat {
            let cpu = (stat.utime + stat.stime) as f64 / USER_HZ;
            sample(
                out,
                "process_cpu_seconds_total",
                "Total user and system CPU time spent in seconds.",
                "counter",
                cpu,
            );
        }
        if let Some(open) = open_fds() {
            sample(out, "process_open_fds", "Number of open file descriptors.", "gauge", open as f64);
        }
        if let Some(max) = limit(&limits, "Max open files") {
            sample(out, "process_max_fds", "Maximum number of open file descriptors.", "gauge", max);
        }
        if let Some(size) = status_kib(&status, "VmSize:") {
            sample(out, "process_virtual_memory_bytes", "Virtual memory size in bytes.", "gauge", size * 1024.0);
        }
        if let Some(max) = limit(&limits, "Max address space") {
            let help = "Maximum amount of virtual memory available in bytes.";
            sample(out, "process_virtual_memory_max_bytes", help, "gauge", max);
        }
        if let Some(rss) = status_kib(&status, "VmRSS:") {
            sample(out, "process_resident_memory_bytes", "Resident memory size in bytes.", "gauge", rss * 1024.0);
        }
        if let Some(start) = stat.as_ref().and_then(start_time) {
            let help = "Start time of the process since unix epoch in seconds.";
            sample(out, "process_start_time_seconds", help, "gauge", start);
        }
        let net_dev = std::fs::read_to_string("/proc/self/net/dev").ok().and_then(|t| net_dev_totals(&t));
        if let Some((received, sent)) = net_dev {
            let help = "Number of bytes received by the process over the network.";
            sample(out, "process_network_receive_bytes_total", help, "counter", received);
            let help = "Number of bytes sent by the process over the network.";
            sample(out, "process_network_transmit_bytes_total", help, "counter", sent);
        }
    }
}

/// Bytes received and sent over every interface of the process's network namespace
/// (`/proc/self/net/dev`), summed as procfs' `NetDev.Total` sums them.
fn net_dev_totals(text: &str) -> Option<(f64, f64)> {
    let mut totals = None;
    // Two header lines, then `iface: rx_bytes rx_packets ... (8 receive fields) tx_bytes ...`.
    for line in text.lines().skip(2) {
        let (_, counters) = line.split_once(':')?;
        let fields: Vec<u64> = counters.split_whitespace().filter_map(|f| f.parse().ok()).collect();
        let (rx, tx) = (*fields.first()?, *fields.get(8)?);
        let (r, t) = totals.unwrap_or((0.0, 0.0));
        totals = Some((r + rx as f64, t + tx as f64));
    }
    totals
}

/// When this process started, in Unix seconds (component-base's `GetProcessStart`).
pub fn start_time_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok().and_then(|s| Stat::parse(&s))?;
    start_time(&stat)
}

fn start_time(stat: &Stat) -> Option<f64> {
    Some(boot_time()? + stat.start_ticks as f64 / USER_HZ)
}

fn sample(out: &mut String, name: &str, help: &str, kind: &str, value: f64) {
    // As Go writes it: `process_virtual_memory_max_bytes 1.8446744073709552e+19`.
    let value = crate::metrics::go_float(value);
    let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}\n");
}

/// The fields of `/proc/self/stat` we use.
#[derive(Debug, PartialEq, Eq)]
struct Stat {
    utime: u64,
    stime: u64,
    /// Clock ticks after boot at which the process started.
    start_ticks: u64,
}

impl Stat {
    /// Parses after the command name, which is in parentheses and may itself contain spaces
    /// and parentheses: field 3 (state) is the first after the last `)`.
    fn parse(text: &str) -> Option<Stat> {
        let rest = &text[text.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // Field n of proc(5) is fields[n - 3].
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        Some(Stat { utime: field(14)?, stime: field(15)?, start_ticks: field(22)? })
    }
}

/// A `kB` value of `/proc/self/status`, such as `VmRSS:`.
fn status_kib(status: &str, key: &str) -> Option<f64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// The soft limit of a `/proc/self/limits` row; `unlimited` is the largest `u64`, as Go reports it.
fn limit(limits: &str, row: &str) -> Option<f64> {
    let line = limits.lines().find(|l| l.starts_with(row))?;
    match line[row.len()..].split_whitespace().next()? {
        "unlimited" => Some(u64::MAX as f64),
        value => value.parse().ok(),
    }
}

/// How many file descriptors are open (the directory listing's own one included, as Go's).
fn open_fds() -> Option<usize> {
    Some(std::fs::read_dir("/proc/self/fd").ok()?.count())
}

/// When the machine booted, in Unix seconds (`btime` of `/proc/stat`).
fn boot_time() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines().find_map(|l| l.strip_prefix("btime "))?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_is_read_after_a_tricky_command_name() {
        let line =
            "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 8 0 12345 1000 200 18446744073709551615";
        assert_eq!(Stat::parse(line), Some(Stat { utime: 250, stime: 50, start_ticks: 12345 }));
        assert_eq!(Stat::parse("garbage"), None);
    }

    #[test]
    fn limits_and_status_rows_are_parsed() {
        let limits = "Limit  Soft Limit  Hard Limit  Units\nMax open files            1024                 4096                 files\n\
                      Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(limit(limits, "Max open files"), Some(1024.0));
        assert_eq!(limit(limits, "Max address space"), Some(u64::MAX as f64));
        assert_eq!(status_kib("Name:\tx\nVmRSS:\t    2172 kB\n", "VmRSS:"), Some(2172.0));
    }

    #[test]
    fn network_bytes_are_summed_over_interfaces() {
        let text = "Inter-|   Receive                                                |  Transmit\n \
                    face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
                    lo: 1000 10 0 0 0 0 0 0 2000 20 0 0 0 0 0 0\n  \
                    eth0: 300 3 0 0 0 0 0 0 40 4 0 0 0 0 0 0\n";
        assert_eq!(net_dev_totals(text), Some((1300.0, 2040.0)));
    }

    #[test]
    fn samples_are_written_as_go_writes_floats() {
        let mut out = String::new();
        sample(&mut out, "m", "H.", "gauge", u64::MAX as f64);
        assert_eq!(out, "# HELP m H.\n# TYPE m gauge\nm 1.8446744073709552e+19\n");
    }

    #[test]
    fn this_process_has_every_metric() {
        let mut out = String::new();
        ProcessCollector.write_to(&mut out);
        for name in [
            "process_cpu_seconds_total",
            "process_open_fds",
            "process_max_fds",
            "process_virtual_memory_bytes",
            "process_virtual_memory_max_bytes",
            "process_resident_memory_bytes",
            "process_start_time_seconds",
            "process_network_receive_bytes_total",
            "process_network_transmit_bytes_total",
        ] {
            assert!(out.contains(&format!("# TYPE {name} ")), "{name} missing from:\n{out}");
        }
    }
}
