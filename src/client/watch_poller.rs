//! The process's one watch poller: a thread that waits on every open watch connection at once
//! with `poll(2)` and hands each decoded event to the watch's [`WatchHandler`], so that open
//! watches cost a socket each and no thread.
//!
//! A handler runs on the poller's thread and must not block: the informers' handlers update
//! their cache and enqueue keys. A watch ends when its stream ends or breaks, when it stays
//! silent past its idle timeout, when its handler declines an event, or when its handler says
//! its owner stopped (checked on every wake; owners call [`wake`] after stopping). The ended
//! watch's handler is given back through [`WatchHandler::ended`], except after a stop.

use std::os::fd::RawFd;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use super::watch::RawEvent;
use super::watch_connection::WatchConnection;
use super::{Error, Result};

/// Bytes read from one connection before the others get their turn.
const READ_BUDGET: usize = 256 * 1024;
/// The longest the poller sleeps without looking at its deadlines.
const MAX_SLEEP: Duration = Duration::from_secs(10);

/// What a watch's owner does with its events.
pub(crate) trait WatchHandler: Send {
    /// One event, or the reason it could not be decoded; false ends the watch (its handler
    /// then learns of the end through [`WatchHandler::ended`] with no error).
    fn event(&mut self, event: Result<RawEvent>) -> bool;
    /// The watch is over: the stream ended cleanly (`None`) or broke.
    fn ended(self: Box<Self>, error: Option<Error>);
    /// When the handler next wants [`WatchHandler::tick`] (a periodic resync).
    fn next_tick(&self) -> Option<Instant>;
    /// A tick fell due.
    fn tick(&mut self, now: Instant);
    /// The owner stopped: the watch is closed and the handler dropped without `ended`.
    fn stopped(&self) -> bool;
}

/// Hands an open watch to the poller; it is read from now on.
pub(crate) fn register(connection: WatchConnection, idle_timeout: Duration, handler: Box<dyn WatchHandler>) {
    let poller = poller();
    poller.incoming.lock().push(Watch::new(connection, idle_timeout, handler));
    poller.wake();
}

/// Makes the poller look at its watches' owners now (e.g. right after a stop).
pub(crate) fn wake() {
    if let Some(poller) = POLLER.get() {
        poller.wake();
    }
}

static POLLER: OnceLock<Poller> = OnceLock::new();

fn poller() -> &'static Poller {
    static STARTED: std::sync::Once = std::sync::Once::new();
    let poller = POLLER.get_or_init(|| Poller::new().unwrap_or_else(|e| panic!("cannot set up the watch poller: {e}")));
    STARTED.call_once(|| {
        std::thread::Builder::new()
            .name("watch-poller".into())
            .spawn(|| poller.run())
            .unwrap_or_else(|e| panic!("cannot start the watch poller thread: {e}"));
    });
    poller
}

struct Poller {
    /// Watches registered since the thread last looked.
    incoming: Mutex<Vec<Watch>>,
    /// A pipe whose read end is polled with the connections: a byte written wakes the thread.
    wake_read: RawFd,
    wake_write: RawFd,
}

struct Watch {
    connection: WatchConnection,
    handler: Option<Box<dyn WatchHandler>>,
    idle_timeout: Duration,
    /// The last time the connection delivered anything.
    last_read: Instant,
    /// The connection must be read once before waiting on it: its TLS layer may hold
    /// plaintext read along with the answer's head.
    fresh: bool,
}

/// Why a watch is over.
enum End {
    /// The stream ended, or the handler declined an event.
    Closed,
    Broken(Error),
    Stopped,
}

impl Watch {
    fn new(connection: WatchConnection, idle_timeout: Duration, handler: Box<dyn WatchHandler>) -> Watch {
        Watch { connection, handler: Some(handler), idle_timeout, last_read: Instant::now(), fresh: true }
    }

    fn handler(&mut self) -> &mut dyn WatchHandler {
        self.handler.as_deref_mut().expect("a live watch has its handler")
    }

    /// Reads what the connection has and delivers its complete events.
    fn read(&mut self) -> Option<End> {
        self.fresh = false;
        let ended = match self.connection.read_available(READ_BUDGET) {
            Ok(ended) => ended,
            Err(e) => return Some(End::Broken(Error::Transport(format!("watch stream broken: {e}")))),
        };
        self.last_read = Instant::now();
        while let Some(event) = self.connection.next_event() {
            let failed = event.is_err();
            if !self.handler().event(event) || failed {
                return Some(End::Closed);
            }
        }
        ended.then_some(End::Closed)
    }

    /// Runs a due tick, ends an idle watch, and says when this watch next needs a look.
    fn check_time(&mut self, now: Instant) -> (Option<End>, Instant) {
        if self.handler().stopped() {
            return (Some(End::Stopped), now);
        }
        if self.handler().next_tick().is_some_and(|at| at <= now) {
            self.handler().tick(now);
        }
        let idle_deadline = self.last_read + self.idle_timeout;
        if now >= idle_deadline {
            let message = format!("watch stream broken: no data for {:?}", self.idle_timeout);
            return (Some(End::Broken(Error::Transport(message))), now);
        }
        let next = self.handler().next_tick().map_or(idle_deadline, |tick| tick.min(idle_deadline));
        (None, next)
    }

    fn finish(mut self, end: End) {
        let Some(handler) = self.handler.take() else { return };
        drop(self.connection);
        match end {
            End::Closed => handler.ended(None),
            End::Broken(e) => handler.ended(Some(e)),
            End::Stopped => drop(handler),
        }
    }
}

impl Poller {
    fn new() -> std::io::Result<Poller> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: `fds` has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Poller { incoming: Mutex::new(Vec::new()), wake_read: fds[0], wake_write: fds[1] })
    }

    fn wake(&self) {
        // SAFETY: writes one byte from a valid buffer to our pipe; a full pipe (EAGAIN) already
        // holds a wake-up, so the result does not matter.
        unsafe { libc::write(self.wake_write, [1u8].as_ptr().cast(), 1) };
    }

    fn drain_wakes(&self) {
        let mut buffer = [0u8; 64];
        // SAFETY: reads into a valid buffer of its length from our non-blocking pipe.
        while unsafe { libc::read(self.wake_read, buffer.as_mut_ptr().cast(), buffer.len()) } > 0 {}
    }

    fn run(&self) {
        let mut watches: Vec<Watch> = Vec::new();
        let mut fds: Vec<libc::pollfd> = Vec::new();
        loop {
            watches.append(&mut self.incoming.lock());
            let now = Instant::now();
            let mut sleep_until = now + MAX_SLEEP;
            let mut index = 0;
            while index < watches.len() {
                let watch = &mut watches[index];
                let (mut end, next) = watch.check_time(now);
                if end.is_none() && watch.fresh {
                    end = watch.read();
                }
                match end {
                    Some(end) => watches.swap_remove(index).finish(end),
                    None => {
                        sleep_until = sleep_until.min(next);
                        index += 1;
                    }
                }
            }
            fds.clear();
            fds.push(libc::pollfd { fd: self.wake_read, events: libc::POLLIN, revents: 0 });
            for watch in &watches {
                let write = if watch.connection.wants_write() { libc::POLLOUT } else { 0 };
                fds.push(libc::pollfd { fd: watch.connection.raw_fd(), events: libc::POLLIN | write, revents: 0 });
            }
            let timeout = sleep_until.saturating_duration_since(Instant::now());
            let millis = timeout.as_millis().clamp(1, MAX_SLEEP.as_millis()) as libc::c_int;
            // SAFETY: `fds` is a valid array of `fds.len()` pollfd structs for the whole call.
            let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, millis) };
            if ready < 0 {
                let e = std::io::Error::last_os_error();
                if e.kind() != std::io::ErrorKind::Interrupted {
                    log::error!("watch poller: poll: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                }
                continue;
            }
            if fds[0].revents != 0 {
                self.drain_wakes();
            }
            // Back to front, so that removing a watch leaves the indices still to visit alone.
            for index in (0..watches.len()).rev() {
                if fds[index + 1].revents == 0 {
                    continue;
                }
                if let Some(end) = watches[index].read() {
                    watches.swap_remove(index).finish(end);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::watch_connection::WatchRequest;
    use crossbeam_channel::{Receiver, Sender};
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    const WAIT: Duration = Duration::from_secs(30);

    /// What the test handler saw.
    #[derive(Debug, PartialEq)]
    enum Seen {
        Event(String),
        Ended(Option<String>),
    }

    struct Recorder {
        seen: Sender<Seen>,
        stop: Arc<AtomicBool>,
    }

    impl WatchHandler for Recorder {
        fn event(&mut self, event: Result<RawEvent>) -> bool {
            let ok = event.is_ok();
            let text = event.map_or_else(|e| format!("error: {e}"), |e| e.event_type);
            let _ = self.seen.send(Seen::Event(text));
            ok
        }

        fn ended(self: Box<Self>, error: Option<Error>) {
            let _ = self.seen.send(Seen::Ended(error.map(|e| e.to_string())));
        }

        fn next_tick(&self) -> Option<Instant> {
            None
        }

        fn tick(&mut self, _: Instant) {}

        fn stopped(&self) -> bool {
            self.stop.load(Ordering::SeqCst)
        }
    }

    /// A server that answers one request with a chunked watch head and hands the test the socket.
    fn watch_server() -> (String, Receiver<TcpStream>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (tx, rx) = crossbeam_channel::bounded(1);
        std::thread::spawn(move || {
            let (mut socket, _) = listener.accept().unwrap();
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && socket.read(&mut byte).unwrap() == 1 {
                head.push(byte[0]);
            }
            socket.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n").unwrap();
            let _ = tx.send(socket);
        });
        (url, rx)
    }

    fn chunk(socket: &mut TcpStream, data: &[u8]) {
        socket.write_all(format!("{:x}\r\n", data.len()).as_bytes()).unwrap();
        socket.write_all(data).unwrap();
        socket.write_all(b"\r\n").unwrap();
    }

    fn open(url: &str, idle: Duration) -> (Receiver<Seen>, Arc<AtomicBool>) {
        let request = WatchRequest {
            server: url,
            path_and_query: "/api/v1/pods?watch=true",
            headers: Vec::new(),
            connect_timeout: WAIT,
        };
        let connection = WatchConnection::open(&request, None).unwrap().ok().expect("a 200");
        let (seen, rx) = crossbeam_channel::unbounded();
        let stop = Arc::new(AtomicBool::new(false));
        register(connection, idle, Box::new(Recorder { seen, stop: stop.clone() }));
        (rx, stop)
    }

    #[test]
    fn events_split_across_chunks_arrive_in_order_and_the_end_is_reported() {
        let (url, sockets) = watch_server();
        let (seen, _stop) = open(&url, WAIT);
        let mut socket = sockets.recv().unwrap();
        chunk(&mut socket, br#"{"type":"ADDED","object":{}}"#);
        chunk(&mut socket, b"\n{\"type\":\"MODI");
        chunk(&mut socket, b"FIED\",\"object\":{}}\n");
        assert_eq!(seen.recv_timeout(WAIT).unwrap(), Seen::Event("ADDED".into()));
        assert_eq!(seen.recv_timeout(WAIT).unwrap(), Seen::Event("MODIFIED".into()));
        socket.write_all(b"0\r\n\r\n").unwrap();
        assert_eq!(seen.recv_timeout(WAIT).unwrap(), Seen::Ended(None), "a clean end");
    }

    #[test]
    fn a_silent_watch_ends_after_its_idle_timeout_and_a_stopped_one_quietly() {
        let (url, sockets) = watch_server();
        let (seen, _stop) = open(&url, Duration::from_millis(50));
        let _socket = sockets.recv().unwrap();
        match seen.recv_timeout(WAIT).unwrap() {
            Seen::Ended(Some(e)) => assert!(e.contains("no data for"), "{e}"),
            other => panic!("{other:?}"),
        }

        let (url, sockets) = watch_server();
        let (seen, stop) = open(&url, WAIT);
        let mut socket = sockets.recv().unwrap();
        stop.store(true, Ordering::SeqCst);
        wake();
        // The poller closes the connection without telling the handler.
        let mut rest = Vec::new();
        socket.set_read_timeout(Some(WAIT)).unwrap();
        assert_eq!(socket.read_to_end(&mut rest).unwrap(), 0);
        assert!(seen.try_recv().is_err(), "no `ended` after a stop");
    }

    #[test]
    fn an_undecodable_event_ends_the_watch() {
        let (url, sockets) = watch_server();
        let (seen, _stop) = open(&url, WAIT);
        let mut socket = sockets.recv().unwrap();
        chunk(&mut socket, b"this is not json\n");
        assert!(matches!(seen.recv_timeout(WAIT).unwrap(), Seen::Event(e) if e.starts_with("error: ")));
        assert_eq!(seen.recv_timeout(WAIT).unwrap(), Seen::Ended(None));
    }
}
