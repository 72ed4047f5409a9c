//! The systemd notification protocol (`sd_notify(3)`), without libsystemd: state lines sent as
//! one datagram to the Unix socket named by `$NOTIFY_SOCKET` (a path, or `@name` for the
//! abstract namespace). [`run`](super::run) says `READY=1` once the secure port listens and
//! leader election has started, `WATCHDOG=1` every half `$WATCHDOG_USEC` while the health
//! checks pass (so systemd restarts a wedged process), and `STOPPING=1` on shutdown.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::Arc;
use std::time::Duration;

use crossbeam_channel::{Sender, bounded};

use crate::server::HealthChecks;

/// Why systemd cannot be notified.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `$NOTIFY_SOCKET` is neither an absolute path nor an abstract name.
    #[error("NOTIFY_SOCKET={socket:?} is neither a path nor an @abstract name")]
    NotASocketName {
        /// The variable's value.
        socket: String,
    },
    /// `$NOTIFY_SOCKET` is not a usable socket address (too long, say).
    #[error("NOTIFY_SOCKET={socket:?}: {source}")]
    SocketAddress {
        /// The variable's value.
        socket: String,
        /// Why not.
        #[source]
        source: std::io::Error,
    },
    /// No datagram socket could be opened.
    #[error("cannot open a Unix datagram socket: {0}")]
    Socket(#[source] std::io::Error),
    /// `$WATCHDOG_USEC` is not a number.
    #[error("WATCHDOG_USEC={usec:?} is not a number of microseconds")]
    WatchdogUsec {
        /// The variable's value.
        usec: String,
    },
    /// The watchdog thread could not be started.
    #[error("cannot start the watchdog thread: {0}")]
    WatchdogThread(#[source] std::io::Error),
}

/// Where to send notifications, and how often systemd wants to hear that all is well.
pub struct Notifier {
    socket: UnixDatagram,
    target: SocketAddr,
    watchdog: Option<Duration>,
}

impl Notifier {
    /// The notifier systemd asked for through the environment; `None` when not run by systemd
    /// with `Type=notify` (or the socket cannot be used, which is logged).
    pub fn from_env() -> Option<Notifier> {
        let socket = std::env::var("NOTIFY_SOCKET").ok()?;
        let usec = std::env::var("WATCHDOG_USEC").ok();
        let pid = std::env::var("WATCHDOG_PID").ok();
        Notifier::new(&socket, usec.as_deref(), pid.as_deref(), std::process::id())
            .inspect_err(|e| log::warn!("cannot notify systemd: {e}"))
            .ok()
            .flatten()
    }

    /// A notifier for `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID` (as `sd_watchdog_enabled`:
    /// the watchdog is ours only when `WATCHDOG_PID` is unset or names `pid`).
    pub fn new(
        notify_socket: &str,
        watchdog_usec: Option<&str>,
        watchdog_pid: Option<&str>,
        pid: u32,
    ) -> Result<Option<Notifier>, Error> {
        if notify_socket.is_empty() {
            return Ok(None);
        }
        let target = if let Some(name) = notify_socket.strip_prefix('@') {
            SocketAddr::from_abstract_name(name.as_bytes())
        } else if notify_socket.starts_with('/') {
            SocketAddr::from_pathname(notify_socket)
        } else {
            return Err(Error::NotASocketName { socket: notify_socket.to_string() });
        }
        .map_err(|source| Error::SocketAddress { socket: notify_socket.to_string(), source })?;
        let socket = UnixDatagram::unbound().map_err(Error::Socket)?;
        let ours = watchdog_pid.is_none_or(|p| p.trim().parse::<u32>() == Ok(pid));
        let watchdog = match watchdog_usec.filter(|_| ours) {
            None => None,
            Some(text) => match text.trim().parse::<u64>() {
                Ok(0) => None,
                Ok(usec) => Some(Duration::from_micros(usec) / 2),
                Err(_) => return Err(Error::WatchdogUsec { usec: text.to_string() }),
            },
        };
        Ok(Some(Notifier { socket, target, watchdog }))
    }

    /// How often to send `WATCHDOG=1`: half the watchdog timeout, as `sd_watchdog_enabled` advises.
    pub fn watchdog_interval(&self) -> Option<Duration> {
        self.watchdog
    }

    /// Sends newline-separated `KEY=value` assignments. A failure is logged, never fatal: the
    /// service works without its supervisor hearing about it.
    pub fn notify(&self, state: &str) {
        if let Err(e) = self.socket.send_to_addr(state.as_bytes(), &self.target) {
            log::warn!("cannot notify systemd ({state:?}): {e}");
        }
    }

    /// One watchdog beat: `WATCHDOG=1` when every health check passes. Returns whether it was sent.
    pub fn beat(&self, checks: &HealthChecks) -> bool {
        let healthy = checks.healthz(&[]).code == 200;
        if healthy {
            self.notify("WATCHDOG=1");
        } else {
            log::warn!("health checks fail: not sending the systemd watchdog keep-alive");
        }
        healthy
    }
}

/// The thread that sends watchdog beats; stops when dropped.
pub struct Watchdog {
    stop: Option<Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    /// Starts beating when systemd asked for a watchdog; `None` otherwise.
    pub fn start(notifier: Arc<Notifier>, checks: Arc<HealthChecks>) -> Result<Option<Watchdog>, Error> {
        let Some(interval) = notifier.watchdog_interval() else { return Ok(None) };
        let (stop, stopped) = bounded::<()>(0);
        let thread = std::thread::Builder::new()
            .name("sd-watchdog".into())
            .spawn(move || {
                loop {
                    notifier.beat(&checks);
                    if stopped.recv_timeout(interval) != Err(crossbeam_channel::RecvTimeoutError::Timeout) {
                        return;
                    }
                }
            })
            .map_err(Error::WatchdogThread)?;
        Ok(Some(Watchdog { stop: Some(stop), thread: Some(thread) }))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn receiver() -> (UnixDatagram, String) {
        let name = format!("kcm-notify-test-{}-{}", std::process::id(), crate::random::u64());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let socket = UnixDatagram::bind_addr(&addr).unwrap();
        socket.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        (socket, format!("@{name}"))
    }

    fn received(socket: &UnixDatagram) -> String {
        let mut buffer = [0; 256];
        let n = socket.recv(&mut buffer).unwrap();
        String::from_utf8_lossy(&buffer[..n]).into_owned()
    }

    #[test]
    fn sends_to_an_abstract_socket() {
        let (socket, name) = receiver();
        let notifier = Notifier::new(&name, None, None, 1).unwrap().unwrap();
        notifier.notify("READY=1\nSTATUS=serving");
        assert_eq!(received(&socket), "READY=1\nSTATUS=serving");
        assert_eq!(notifier.watchdog_interval(), None);
    }

    #[test]
    fn sends_to_a_path() {
        let dir = std::env::temp_dir().join(format!("kcm-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let socket = UnixDatagram::bind(&path).unwrap();
        let notifier = Notifier::new(path.to_str().unwrap(), Some("3000000"), None, 1).unwrap().unwrap();
        notifier.notify("STOPPING=1");
        assert_eq!(received(&socket), "STOPPING=1");
        assert_eq!(notifier.watchdog_interval(), Some(Duration::from_millis(1500)));
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn reads_the_environment_like_sd_watchdog_enabled() {
        assert!(Notifier::new("", None, None, 1).unwrap().is_none());
        let other_pid = Notifier::new("@x", Some("1000"), Some("7"), 8).unwrap().unwrap();
        assert_eq!(other_pid.watchdog_interval(), None, "the watchdog belongs to another process");
        let ours = Notifier::new("@x", Some("1000"), Some("8"), 8).unwrap().unwrap();
        assert_eq!(ours.watchdog_interval(), Some(Duration::from_micros(500)));
        assert_eq!(Notifier::new("@x", Some("0"), None, 8).unwrap().unwrap().watchdog_interval(), None);
        let bad = Notifier::new("@x", Some("soon"), None, 8).err().unwrap().to_string();
        assert_eq!(bad, "WATCHDOG_USEC=\"soon\" is not a number of microseconds");
        let relative = Notifier::new("run/notify", None, None, 8).err().unwrap().to_string();
        assert!(relative.contains("neither a path nor an @abstract name"), "{relative}");
    }

    #[test]
    fn beats_only_while_healthy() {
        let (socket, name) = receiver();
        socket.set_nonblocking(true).unwrap();
        let notifier = Notifier::new(&name, Some("2000000"), None, 1).unwrap().unwrap();
        let checks = HealthChecks::new();
        let healthy = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = healthy.clone();
        checks.add("leaderElection", move || {
            if flag.load(std::sync::atomic::Ordering::SeqCst) { Ok(()) } else { Err("lease not renewed".into()) }
        });
        assert!(!notifier.beat(&checks));
        assert!(socket.recv(&mut [0; 64]).is_err(), "nothing sent while a check fails");
        healthy.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(notifier.beat(&checks));
        socket.set_nonblocking(false).unwrap();
        assert_eq!(received(&socket), "WATCHDOG=1");
    }

    #[test]
    fn the_watchdog_thread_beats_and_stops() {
        let (socket, name) = receiver();
        let notifier = Arc::new(Notifier::new(&name, Some("100000"), None, 1).unwrap().unwrap());
        let watchdog = Watchdog::start(notifier, HealthChecks::new()).unwrap().expect("a watchdog was asked for");
        assert_eq!(received(&socket), "WATCHDOG=1");
        assert_eq!(received(&socket), "WATCHDOG=1");
        drop(watchdog);
        let without = Arc::new(Notifier::new(&name, None, None, 1).unwrap().unwrap());
        assert!(Watchdog::start(without, HealthChecks::new()).unwrap().is_none());
    }
}
