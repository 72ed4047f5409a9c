//! What the process does when it runs out of something, so that it ends with a clear message
//! and a non-zero status that systemd (`Restart=always`) or the kubelet restarts, instead of
//! living on half-broken:
//!
//! - **A panic in any thread ends the process** (status 2, as a Go panic), after the usual
//!   message. Without this, a thread that could not be spawned (`RLIMIT_AS`, `RLIMIT_NPROC`)
//!   panicked alone and left the process running without its watch poller or a controller's
//!   monitor: stuck, and still answering `/healthz`. Upstream gets this from Go, where a panic
//!   in any goroutine ends the process.
//! - **A failed allocation ends the process** (status 2, as Go's "fatal error: out of memory"),
//!   with one line naming the size: [`ExitOnAllocationFailure`] is the binary's global
//!   allocator. Rust's own handler would abort (SIGABRT, a core dump) instead.
//! - **Running out of file descriptors ends the process** (status 1) once it has lasted
//!   [`FD_EXHAUSTION_LIMIT`]: [`FdWatch`] probes every [`FD_PROBE_PERIOD`] whether one more
//!   descriptor can be opened. Every connection, watch and accepted client needs one, so a
//!   process at its `RLIMIT_NOFILE` only logs failed watches and cannot act; a restart closes
//!   whatever leaked. A short burst at the limit is survived.

use std::alloc::{GlobalAlloc, Layout, System};
use std::time::{Duration, Instant};

/// The exit status of a panic or a failed allocation: Go's for a panic or a fatal error.
const FATAL_STATUS: i32 = 2;

/// Makes a panic in any thread end the process with [`FATAL_STATUS`], after the default
/// message (thread name, location, payload). Call once, first thing in `main`.
pub fn exit_on_panic() {
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        eprintln!("kube-controller-manager: a thread panicked; exiting with status {FATAL_STATUS}");
        log::logger().flush();
        std::process::exit(FATAL_STATUS);
    }));
}

/// The system allocator, but an allocation that fails ends the process at once with one line
/// on stderr, written without allocating. Installed by the binary (`#[global_allocator]`).
pub struct ExitOnAllocationFailure;

// SAFETY: every call is forwarded unchanged to `System`; only a null result is acted upon.
unsafe impl GlobalAlloc for ExitOnAllocationFailure {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is `System::alloc`'s.
        checked(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        checked(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        checked(unsafe { System.realloc(ptr, layout, new_size) }, new_size)
    }
}

fn checked(ptr: *mut u8, size: usize) -> *mut u8 {
    if ptr.is_null() {
        out_of_memory(size);
    }
    ptr
}

/// Writes "out of memory" with the size and `_exit`s: formatting or unwinding could allocate.
#[cold]
fn out_of_memory(size: usize) -> ! {
    let mut line = [0u8; 160];
    let mut len = 0;
    for part in [
        &b"kube-controller-manager: out of memory: allocating "[..],
        decimal(size, &mut [0; 20]),
        b" bytes failed; exiting with status 2\n",
    ] {
        line[len..len + part.len()].copy_from_slice(part);
        len += part.len();
    }
    // SAFETY: writes a valid buffer to stderr, then ends the process without running anything.
    unsafe {
        libc::write(2, line.as_ptr().cast(), len);
        libc::_exit(FATAL_STATUS)
    }
}

fn decimal(mut n: usize, buffer: &mut [u8; 20]) -> &[u8] {
    let mut start = buffer.len();
    loop {
        start -= 1;
        buffer[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buffer[start..];
        }
    }
}

/// How often [`FdWatch`] probes for a free file descriptor.
pub const FD_PROBE_PERIOD: Duration = Duration::from_secs(5);
/// How long the process may stay unable to open a file descriptor before it exits: three
/// failed probes in a row at least, so that a burst of connections is not mistaken for a leak.
pub const FD_EXHAUSTION_LIMIT: Duration = Duration::from_secs(15);

/// Follows whether the process can still open file descriptors (see the module docs).
#[derive(Debug, Default)]
pub struct FdWatch {
    last_probe: Option<Instant>,
    /// When the current run of failed probes began.
    exhausted_since: Option<Instant>,
}

impl FdWatch {
    /// Probes when a probe is due; `Err` with the reason to exit once the process has been
    /// unable to open a descriptor for [`FD_EXHAUSTION_LIMIT`].
    pub fn check(&mut self, now: Instant) -> Result<(), FdExhausted> {
        if self.last_probe.is_some_and(|last| now.duration_since(last) < FD_PROBE_PERIOD) {
            return Ok(());
        }
        self.last_probe = Some(now);
        self.record(now, can_open_descriptor())
    }

    fn record(&mut self, now: Instant, can_open: bool) -> Result<(), FdExhausted> {
        if can_open {
            if self.exhausted_since.take().is_some() {
                log::info!("file descriptors are available again");
            }
            return Ok(());
        }
        let since = *self.exhausted_since.get_or_insert_with(|| {
            log::warn!("out of file descriptors ({}); exiting if it lasts {FD_EXHAUSTION_LIMIT:?}", nofile_limit());
            now
        });
        if now.duration_since(since) < FD_EXHAUSTION_LIMIT {
            return Ok(());
        }
        Err(FdExhausted { seconds: now.duration_since(since).as_secs(), limit: nofile_limit() })
    }
}

/// The process has been unable to open a file descriptor for [`FD_EXHAUSTION_LIMIT`] or
/// longer: the reason it exits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "out of file descriptors for {seconds} s ({limit}): no connection or watch can be opened; exiting so that \
     the supervisor restarts the process (raise LimitNOFILE if the limit is too low)"
)]
pub struct FdExhausted {
    /// How long it has lasted, in whole seconds.
    pub seconds: u64,
    /// The process's `RLIMIT_NOFILE`.
    pub limit: NofileLimit,
}

/// `RLIMIT_NOFILE`'s soft limit, when it can be read; shown as `RLIMIT_NOFILE N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NofileLimit(pub Option<u64>);

impl std::fmt::Display for NofileLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(limit) => write!(f, "RLIMIT_NOFILE {limit}"),
            None => f.write_str("limit unknown"),
        }
    }
}

/// Whether one more descriptor can be opened now (an eventfd, closed at once).
fn can_open_descriptor() -> bool {
    // SAFETY: eventfd has no memory arguments; the descriptor is closed right away.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if fd >= 0 {
        // SAFETY: `fd` was just opened and is owned here.
        unsafe { libc::close(fd) };
        return true;
    }
    let error = std::io::Error::last_os_error().raw_os_error();
    // Only running out counts; any other failure says nothing about descriptors.
    !matches!(error, Some(libc::EMFILE | libc::ENFILE))
}

/// `RLIMIT_NOFILE`'s soft limit now, for the messages.
fn nofile_limit() -> NofileLimit {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return NofileLimit(None);
    }
    NofileLimit(Some(limit.rlim_cur))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exhaustion_ends_the_process_only_once_it_lasted() {
        let start = Instant::now();
        let mut watch = FdWatch::default();
        assert!(watch.record(start, false).is_ok());
        assert!(watch.record(start + Duration::from_secs(10), false).is_ok());
        let error = watch.record(start + FD_EXHAUSTION_LIMIT, false).unwrap_err().to_string();
        assert!(error.contains("out of file descriptors for 15 s"), "{error}");
        assert!(error.contains("RLIMIT_NOFILE"), "{error}");
    }

    #[test]
    fn a_free_descriptor_starts_the_count_again() {
        let start = Instant::now();
        let mut watch = FdWatch::default();
        assert!(watch.record(start, false).is_ok());
        assert!(watch.record(start + Duration::from_secs(10), true).is_ok());
        assert!(watch.record(start + Duration::from_secs(20), false).is_ok());
        assert!(watch.record(start + Duration::from_secs(30), false).is_ok());
        assert!(watch.record(start + Duration::from_secs(35), false).is_err());
    }

    #[test]
    fn probes_are_spaced_by_the_period() {
        let start = Instant::now();
        let mut watch = FdWatch::default();
        assert!(watch.check(start).is_ok());
        assert_eq!(watch.last_probe, Some(start));
        assert!(watch.check(start + Duration::from_secs(1)).is_ok());
        assert_eq!(watch.last_probe, Some(start), "no probe before the period passed");
        assert!(watch.check(start + FD_PROBE_PERIOD).is_ok());
        assert_eq!(watch.last_probe, Some(start + FD_PROBE_PERIOD));
    }

    #[test]
    fn this_process_can_open_a_descriptor() {
        assert!(can_open_descriptor());
    }

    #[test]
    fn sizes_are_written_in_decimal() {
        assert_eq!(decimal(0, &mut [0; 20]), b"0");
        assert_eq!(decimal(1_048_576, &mut [0; 20]), b"1048576");
        assert_eq!(decimal(usize::MAX, &mut [0; 20]), usize::MAX.to_string().as_bytes());
    }
}
