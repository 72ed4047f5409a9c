//! The standby's watch on its Lease (beyond client-go, which only polls): every change of the
//! record reaches the election thread as it happens, so that a released Lease is taken at once
//! and an abandoned one at the instant it expires by our clock, instead of up to a jittered
//! retry period later. The watch only moves attempts earlier: acquiring is still a read and a
//! conditional update, and the periodic attempts go on whether the watch works or not.
//!
//! The open watch costs no thread: the process's watch poller reads it. Opening it blocks (up
//! to the client's connect timeout when the API server does not answer), so it runs on a
//! short-lived thread of its own rather than on the election thread or the Lease's worker,
//! whose attempts must not wait for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};

use super::record::Record;
use crate::client::watch::{RawEvent, decode_event};
use crate::client::watch_poller::{self, WatchHandler};
use crate::client::{Api, Client, Error, ListParams, WatchEvent, WatchParams};

/// The pause before reopening a watch that failed, doubled on each failure in a row.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The server ends a watch after 5 to 10 minutes (client-go's reflector `minWatchTimeout`).
const MIN_WATCH_TIMEOUT_SECONDS: f64 = 300.0;

/// What the watch tells the election thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// The Lease's record as it now is; `None` once it was deleted.
    Record(Option<Record>),
    /// The watch numbered `generation` is over (or could not be opened) after delivering
    /// `events` events.
    Ended { generation: u64, events: usize },
}

/// The election thread's side: opens, reopens with backoff, and stops the watch.
pub struct LeaseWatch {
    client: Client,
    namespace: String,
    name: String,
    sender: Sender<Seen>,
    receiver: Receiver<Seen>,
    /// The open (or opening) watch: its number and the flag that stops it.
    current: Option<(u64, Arc<AtomicBool>)>,
    generation: u64,
    /// When to open the watch again, while none is open.
    reopen_at: Option<Instant>,
    /// Failed watches in a row, for the backoff.
    failures: u32,
}

impl LeaseWatch {
    pub fn new(client: Client, namespace: &str, name: &str) -> LeaseWatch {
        let (sender, receiver) = crossbeam_channel::unbounded();
        LeaseWatch {
            client,
            namespace: namespace.to_string(),
            name: name.to_string(),
            sender,
            receiver,
            current: None,
            generation: 0,
            reopen_at: Some(Instant::now()),
            failures: 0,
        }
    }

    /// Where the watch's news arrive.
    pub fn news(&self) -> &Receiver<Seen> {
        &self.receiver
    }

    /// When [`LeaseWatch::open_if_due`] next has something to do, if ever.
    pub fn reopen_at(&self) -> Option<Instant> {
        self.reopen_at.filter(|_| self.current.is_none())
    }

    /// Opens the watch if none is open and its backoff has passed.
    pub fn open_if_due(&mut self, now: Instant) {
        if self.reopen_at().is_none_or(|at| at > now) {
            return;
        }
        self.generation += 1;
        let stop = Arc::new(AtomicBool::new(false));
        self.current = Some((self.generation, stop.clone()));
        self.reopen_at = None;
        let handler = Handler { generation: self.generation, events: 0, sender: self.sender.clone(), stop };
        let leases = Api::<Lease>::namespaced(&self.client, &self.namespace);
        let selector = format!("metadata.name={}", self.name);
        let spawned = std::thread::Builder::new().name("leader-election-watch".into()).spawn(move || {
            // Dropping the handler on an error reports the end, which schedules the next try.
            let Some(resource_version) = handler.list_first(&leases, &selector) else { return };
            let params = WatchParams {
                field_selector: Some(selector),
                resource_version: Some(resource_version),
                allow_bookmarks: true,
                timeout_seconds: Some(watch_timeout_seconds()),
                ..WatchParams::default()
            };
            match leases.open_polled_watch(&params) {
                Ok(connection) => watch_poller::register(connection, params.idle_timeout(), Box::new(handler)),
                Err(e) => log::info!("cannot watch the leader lease: {e}; retrying with backoff"),
            }
        });
        if let Err(e) = spawned {
            log::warn!("cannot start a thread to watch the leader lease: {e}");
            self.ended(self.generation, 0, now);
        }
    }

    /// Notes the end of watch `generation`: reopen at once after a watch that worked, after a
    /// growing backoff after one that failed. Ends of watches already replaced are ignored.
    pub fn ended(&mut self, generation: u64, events: usize, now: Instant) {
        if self.current.as_ref().is_none_or(|(current, _)| *current != generation) {
            return;
        }
        self.current = None;
        if events > 0 {
            self.failures = 0;
            self.reopen_at = Some(now);
            return;
        }
        self.failures = self.failures.saturating_add(1);
        self.reopen_at = Some(now + backoff(self.failures));
    }

    /// Closes the watch: the leader renews and needs none (and a process that loses the lease
    /// exits, so it never watches again).
    pub fn stop(&mut self) {
        if let Some((_, stop)) = self.current.take() {
            stop.store(true, Ordering::SeqCst);
            watch_poller::wake();
        }
        self.reopen_at = None;
        while self.receiver.try_recv().is_ok() {}
    }
}

impl Drop for LeaseWatch {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The pause after `failures` failed watches in a row.
fn backoff(failures: u32) -> Duration {
    FIRST_BACKOFF.saturating_mul(1 << failures.saturating_sub(1).min(16)).min(MAX_BACKOFF)
}

fn watch_timeout_seconds() -> u32 {
    (MIN_WATCH_TIMEOUT_SECONDS * (1.0 + crate::random::unit())) as u32
}

/// The watch poller's handler of one watch: hands every record over; reports its end when
/// dropped, however it ends (closed, broken, or never opened).
struct Handler {
    generation: u64,
    events: usize,
    sender: Sender<Seen>,
    stop: Arc<AtomicBool>,
}

impl Handler {
    /// Reads the Lease as a list, hands its record over, and returns the list's
    /// resourceVersion to watch from. A watch from no resourceVersion would do both in one
    /// request, but kube-apiserver (1.34+, WatchList on) serves that as a watch-list stream
    /// (`sendInitialEvents`), which it refuses when etcd lacks `RequestWatchProgress`; client-go's
    /// reflector lists first too.
    fn list_first(&self, leases: &Api<Lease>, selector: &str) -> Option<String> {
        let params = ListParams { field_selector: Some(selector.to_string()), ..ListParams::default() };
        let list = match leases.list(&params) {
            Ok(list) => list,
            Err(e) => {
                log::info!("cannot read the leader lease to watch it: {e}; retrying with backoff");
                return None;
            }
        };
        // Not counted in `events`: only a watch that delivered something resets the backoff.
        self.sender.send(Seen::Record(list.items.first().map(record_of))).ok()?;
        Some(list.metadata.resource_version.unwrap_or_default())
    }
}

impl WatchHandler for Handler {
    fn event(&mut self, event: crate::client::Result<RawEvent>) -> bool {
        let record = match event.and_then(decode_event::<Lease>) {
            Ok(WatchEvent::Added(lease) | WatchEvent::Modified(lease)) => Some(record_of(&lease)),
            Ok(WatchEvent::Deleted(_)) => None,
            Ok(WatchEvent::Bookmark { .. }) => return true,
            Err(e) => {
                log::info!("the watch of the leader lease ended: {e}");
                return false;
            }
        };
        self.events += 1;
        self.sender.send(Seen::Record(record)).is_ok()
    }

    fn ended(self: Box<Self>, error: Option<Error>) {
        if let Some(e) = error {
            log::info!("the watch of the leader lease broke: {e}");
        }
    }

    fn next_tick(&self) -> Option<Instant> {
        None
    }

    fn tick(&mut self, _: Instant) {}

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::SeqCst)
    }
}

impl Drop for Handler {
    fn drop(&mut self) {
        let _ = self.sender.send(Seen::Ended { generation: self.generation, events: self.events });
    }
}

fn record_of(lease: &Lease) -> Record {
    Record::from_spec(lease.spec.as_ref().unwrap_or(&LeaseSpec::default()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(5), Duration::from_secs(16));
        assert_eq!(backoff(6), MAX_BACKOFF);
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }

    #[test]
    fn watch_timeouts_are_five_to_ten_minutes() {
        for _ in 0..100 {
            assert!((300..600).contains(&watch_timeout_seconds()));
        }
    }
}
