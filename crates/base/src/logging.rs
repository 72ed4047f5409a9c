//! A `log` backend that writes klog's text format to stderr, so that log tooling built for the
//! upstream controller manager keeps working:
//!
//! ```text
//! I1122 03:33:51.123456    1234 leader.rs:42] successfully acquired lease kube-system/kube-controller-manager
//! ```
//!
//! Severity letters are klog's (`I`, `W`, `E`). klog's `-v` verbosity maps onto `log` levels:
//! `info!` is always shown (V(0)–V(3)), `debug!` from `-v=4`, `trace!` (API requests, as
//! client-go logs them at V(6)) from `-v=6`. Messages from dependencies (ureq, rustls) are shown
//! only when they are warnings or errors, or from `-v=9`. Times are local, as klog's (the zone from
//! `TZ` or `/etc/localtime`; UTC when neither says).

use std::io::Write;

use log::{Level, LevelFilter, Log, Metadata, Record};

/// Verbosity from which `debug!` lines are shown.
pub const DEBUG_VERBOSITY: u32 = 4;
/// Verbosity from which `trace!` lines are shown.
pub const TRACE_VERBOSITY: u32 = 6;
/// Verbosity from which dependencies' own debug output is shown.
const DEPENDENCY_VERBOSITY: u32 = 9;

/// The klog-format logger.
pub struct KlogLogger {
    verbosity: u32,
    pid: u32,
    /// The local time zone, read once at start.
    time_zone: jiff::tz::TimeZone,
}

impl KlogLogger {
    /// A logger that shows messages up to klog verbosity `verbosity` (`-v`).
    pub fn new(verbosity: u32) -> KlogLogger {
        let time_zone = jiff::tz::TimeZone::try_system().unwrap_or(jiff::tz::TimeZone::UTC);
        KlogLogger { verbosity, pid: std::process::id(), time_zone }
    }

    fn max_level(&self) -> LevelFilter {
        if self.verbosity >= TRACE_VERBOSITY {
            LevelFilter::Trace
        } else if self.verbosity >= DEBUG_VERBOSITY {
            LevelFilter::Debug
        } else {
            LevelFilter::Info
        }
    }

    /// Renders one record as a klog line, without the trailing newline.
    pub fn format(&self, record: &Record, now: jiff::Timestamp) -> String {
        let severity = match record.level() {
            Level::Error => 'E',
            Level::Warn => 'W',
            Level::Info | Level::Debug | Level::Trace => 'I',
        };
        let file = record.file().unwrap_or("???");
        let file = file.rsplit(['/', '\\']).next().unwrap_or(file);
        format!(
            "{severity}{} {:>7} {file}:{}] {}",
            now.to_zoned(self.time_zone.clone()).strftime("%m%d %H:%M:%S%.6f"),
            self.pid,
            record.line().unwrap_or(0),
            record.args()
        )
    }
}

fn is_ours(target: &str) -> bool {
    target.starts_with("kcm") || target.starts_with("kube_controller_manager")
}

impl Log for KlogLogger {
    fn enabled(&self, metadata: &Metadata) -> bool {
        if metadata.level() > self.max_level() {
            return false;
        }
        is_ours(metadata.target()) || metadata.level() <= Level::Warn || self.verbosity >= DEPENDENCY_VERBOSITY
    }

    fn log(&self, record: &Record) {
        if !self.enabled(record.metadata()) {
            return;
        }
        let mut line = self.format(record, jiff::Timestamp::now());
        line.push('\n');
        // One write per line so that lines from different threads never interleave.
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }

    fn flush(&self) {
        let _ = std::io::stderr().flush();
    }
}

/// Installs the klog logger for the process. Fails only if a logger was installed already.
pub fn init(verbosity: u32) -> Result<(), log::SetLoggerError> {
    let logger = KlogLogger::new(verbosity);
    let max_level = if verbosity >= DEPENDENCY_VERBOSITY { LevelFilter::Trace } else { logger.max_level() };
    log::set_boxed_logger(Box::new(logger))?;
    log::set_max_level(max_level);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(logger: &KlogLogger, level: Level, target: &str) -> Option<String> {
        let args = format_args!("synced {} objects", 3);
        let record = Record::builder()
            .args(args)
            .level(level)
            .target(target)
            .file(Some("src/runtime/informer.rs"))
            .line(Some(42))
            .build();
        let now: jiff::Timestamp = "2026-11-22T03:33:51.123456789Z".parse().unwrap();
        logger.enabled(record.metadata()).then(|| logger.format(&record, now))
    }

    #[test]
    fn formats_like_klog() {
        let logger = KlogLogger { verbosity: 0, pid: 1234, time_zone: jiff::tz::TimeZone::UTC };
        assert_eq!(
            line(&logger, Level::Info, "kcm::runtime").unwrap(),
            "I1122 03:33:51.123456    1234 informer.rs:42] synced 3 objects"
        );
        assert!(line(&logger, Level::Warn, "kcm").unwrap().starts_with("W1122 "));
        assert!(line(&logger, Level::Error, "kcm").unwrap().starts_with("E1122 "));
        // In the local zone, as klog: 03:33 UTC is 12:33 in Tokyo (UTC+9, no DST).
        let tokyo = jiff::tz::TimeZone::fixed(jiff::tz::offset(9));
        let local = KlogLogger { verbosity: 0, pid: 1234, time_zone: tokyo };
        assert!(line(&local, Level::Info, "kcm").unwrap().starts_with("I1122 12:33:51.123456 "));
    }

    #[test]
    fn verbosity_gates_debug_and_trace() {
        let quiet = KlogLogger { verbosity: 2, pid: 1, time_zone: jiff::tz::TimeZone::UTC };
        assert!(line(&quiet, Level::Debug, "kcm").is_none());
        let debug = KlogLogger { verbosity: 4, pid: 1, time_zone: jiff::tz::TimeZone::UTC };
        assert!(line(&debug, Level::Debug, "kcm").unwrap().starts_with("I1122 "));
        assert!(line(&debug, Level::Trace, "kcm").is_none());
        let trace = KlogLogger { verbosity: 6, pid: 1, time_zone: jiff::tz::TimeZone::UTC };
        assert!(line(&trace, Level::Trace, "kcm").is_some());
    }

    #[test]
    fn dependency_chatter_needs_high_verbosity() {
        let logger = KlogLogger { verbosity: 6, pid: 1, time_zone: jiff::tz::TimeZone::UTC };
        assert!(line(&logger, Level::Debug, "ureq::run").is_none());
        assert!(line(&logger, Level::Warn, "rustls::conn").is_some());
        let loud = KlogLogger { verbosity: 9, pid: 1, time_zone: jiff::tz::TimeZone::UTC };
        assert!(line(&loud, Level::Debug, "ureq::run").is_some());
    }
}
