//! Watch streams: the API server's chunked stream of JSON watch events, decoded into typed
//! [`WatchEvent`]s, as a blocking iterator ([`WatchStream`]) or from a dedicated OS thread over
//! a channel ([`WatchReceiver`]).
//!
//! Each watch runs on its own connection so that dropping the stream (or the receiver) can cut
//! it at once, even while a read is blocked.

use std::io::BufReader;
use std::marker::PhantomData;
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Status;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use super::url::query;
use super::{ApiError, Client, Error, Result};

/// The annotation of the BOOKMARK that ends the initial events of a watch with
/// `sendInitialEvents=true` (`metav1.InitialEventsAnnotationKey`).
pub const INITIAL_EVENTS_END_ANNOTATION: &str = "k8s.io/initial-events-end";

/// How long a watch connection may stay silent before it is taken for dead when the caller
/// sets no `timeout_seconds` (the server sends bookmarks about once a minute).
const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Grace beyond the server-side `timeoutSeconds` before a silent connection is taken for dead.
const IDLE_GRACE: Duration = Duration::from_secs(30);

/// One change to the watched collection.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchEvent<K> {
    /// The object was created (or was already there when the watch started without a resourceVersion).
    Added(K),
    /// The object changed; its new state.
    Modified(K),
    /// The object was deleted; its last state.
    Deleted(K),
    /// Nothing changed, but the collection is known to be at least at this resourceVersion.
    Bookmark {
        /// The resourceVersion the collection has reached.
        resource_version: String,
    },
}

/// Options of watch requests.
#[derive(Debug, Clone, Default)]
pub struct WatchParams {
    /// `labelSelector`: only objects whose labels match.
    pub label_selector: Option<String>,
    /// `fieldSelector`: only objects whose fields match (`metadata.name=foo`).
    pub field_selector: Option<String>,
    /// Start after this resourceVersion (usually the one a list returned).
    pub resource_version: Option<String>,
    /// `resourceVersionMatch`: with `send_initial_events`, `NotOlderThan` (the initial state
    /// is at least as new as `resource_version`).
    pub resource_version_match: Option<String>,
    /// `sendInitialEvents`: begin with the current state as ADDED events, ended (with
    /// `allow_bookmarks`) by a BOOKMARK annotated [`INITIAL_EVENTS_END_ANNOTATION`] (a
    /// "watch-list", the server's `WatchList` feature).
    pub send_initial_events: Option<bool>,
    /// `allowWatchBookmarks`: ask for [`WatchEvent::Bookmark`] events.
    pub allow_bookmarks: bool,
    /// The server ends the watch after this many seconds.
    pub timeout_seconds: Option<u32>,
    /// The longest silence tolerated between two reads; by default `timeout_seconds` + 30 s,
    /// or 5 minutes.
    pub idle_timeout: Option<Duration>,
}

impl WatchParams {
    /// The watch's query string (`?watch=true&…`).
    pub fn query(&self) -> String {
        query(&[
            ("watch", Some("true".to_string())),
            ("labelSelector", self.label_selector.clone()),
            ("fieldSelector", self.field_selector.clone()),
            ("resourceVersion", self.resource_version.clone()),
            ("resourceVersionMatch", self.resource_version_match.clone()),
            ("sendInitialEvents", self.send_initial_events.map(|s| s.to_string())),
            ("allowWatchBookmarks", self.allow_bookmarks.then(|| "true".to_string())),
            ("timeoutSeconds", self.timeout_seconds.map(|t| t.to_string())),
        ])
    }

    /// How long the watch may go without a byte before it is taken for dead: the asked
    /// `timeoutSeconds` and a grace, or the default.
    pub fn idle_timeout(&self) -> Duration {
        self.idle_timeout.unwrap_or_else(|| match self.timeout_seconds {
            Some(t) => Duration::from_secs(t.into()) + IDLE_GRACE,
            None => DEFAULT_IDLE_TIMEOUT,
        })
    }
}

/// A watch event as it is on the wire; the object is decoded once its type is known.
#[derive(Deserialize)]
pub struct RawEvent {
    /// `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` or `ERROR`.
    #[serde(rename = "type")]
    pub event_type: String,
    /// The object (or the ERROR's `Status`), still encoded.
    pub object: Box<RawValue>,
}

#[derive(Deserialize)]
struct BookmarkObject {
    metadata: BookmarkMetadata,
}

#[derive(Deserialize)]
struct BookmarkMetadata {
    #[serde(rename = "resourceVersion", default)]
    resource_version: String,
}

/// serde_json reads its input a byte at a time and does not buffer it: without a buffer every
/// byte of an event would be one call down through the body, chunk and TLS readers, which makes
/// decoding (and so the informers) lag behind the server. A `BufReader` returns what the
/// connection has as soon as it has it, so it adds no latency.
type EventReader =
    serde_json::StreamDeserializer<'static, serde_json::de::IoRead<BufReader<ureq::BodyReader<'static>>>, RawEvent>;

/// Bytes read from the connection at once (a large watch event is a few tens of KiB).
const READ_BUFFER: usize = 64 * 1024;

/// A blocking iterator over the events of one watch request. It ends when the server closes
/// the stream cleanly; a broken connection or an undecodable event yields one `Err` and ends
/// it. An `ERROR` event yields `Err(Error::Api)` (e.g. 410 Gone: relist).
pub struct WatchStream<K> {
    agent: Option<ureq::Agent>,
    events: EventReader,
    finished: bool,
    kind: PhantomData<fn() -> K>,
}

impl<K: DeserializeOwned> WatchStream<K> {
    pub(crate) fn open(client: &Client, path_and_query: &str, idle_timeout: Duration) -> Result<WatchStream<K>> {
        Self::open_accepting(client, path_and_query, idle_timeout, super::ACCEPT_JSON)
    }

    /// Opens a watch asking for another representation of the objects (`Accept`).
    pub(crate) fn open_accepting(
        client: &Client,
        path_and_query: &str,
        idle_timeout: Duration,
        accept: &str,
    ) -> Result<WatchStream<K>> {
        let (agent, reader) = client.open_stream(path_and_query, idle_timeout, accept)?;
        let events = serde_json::Deserializer::from_reader(BufReader::with_capacity(READ_BUFFER, reader))
            .into_iter::<RawEvent>();
        Ok(WatchStream { agent: Some(agent), events, finished: false, kind: PhantomData })
    }

    /// A handle that cuts the connection from another thread.
    pub(crate) fn stopper(&self) -> Option<ureq::Agent> {
        self.agent.clone()
    }
}

/// Decodes one wire event: its object as `K`, a BOOKMARK's resourceVersion, an ERROR's
/// `Status` as [`Error::Api`] (e.g. 410 Gone: relist).
pub fn decode_event<K: DeserializeOwned>(raw: RawEvent) -> Result<WatchEvent<K>> {
    decode_event_with(raw, crate::apimachinery::json::from_bytes::<K>)
}

/// [`decode_event`], with the object decoded by `decode` (the informers' passes over
/// `managedFields`).
pub fn decode_event_with<K>(raw: RawEvent, decode: fn(&[u8]) -> serde_json::Result<K>) -> Result<WatchEvent<K>> {
    let object = raw.object.get();
    let typed =
        |o: &str| decode(o.as_bytes()).map_err(|e| Error::Decode(format!("watch {} event: {e}", raw.event_type)));
    match raw.event_type.as_str() {
        "ADDED" => Ok(WatchEvent::Added(typed(object)?)),
        "MODIFIED" => Ok(WatchEvent::Modified(typed(object)?)),
        "DELETED" => Ok(WatchEvent::Deleted(typed(object)?)),
        "BOOKMARK" => {
            let bookmark: BookmarkObject = crate::apimachinery::json::from_bytes(object.as_bytes())
                .map_err(|e| Error::Decode(format!("watch BOOKMARK event: {e}")))?;
            Ok(WatchEvent::Bookmark { resource_version: bookmark.metadata.resource_version })
        }
        "ERROR" => {
            let status: Status = crate::apimachinery::json::from_bytes(object.as_bytes())
                .map_err(|e| Error::Decode(format!("watch ERROR event: {e}")))?;
            Err(ApiError::from_status(status, 500, None).into())
        }
        other => Err(Error::Decode(format!("unknown watch event type {other:?}"))),
    }
}

impl<K: DeserializeOwned> Iterator for WatchStream<K> {
    type Item = Result<WatchEvent<K>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.finished {
            return None;
        }
        let item = match self.events.next()? {
            Ok(raw) => decode_event(raw),
            Err(e) if e.is_io() || e.is_eof() => Err(Error::Transport(format!("watch stream broken: {e}"))),
            Err(e) => Err(Error::Decode(format!("watch stream: {e}"))),
        };
        // After a transport or framing error the stream cannot be resynchronised.
        self.finished = matches!(item, Err(Error::Transport(_) | Error::Decode(_)));
        Some(item)
    }
}

impl<K> Drop for WatchStream<K> {
    fn drop(&mut self) {
        if let Some(agent) = self.agent.take() {
            agent.shutdown();
        }
    }
}

/// The receiving end of a watch run by a dedicated OS thread. Events arrive in order; the
/// channel disconnects when the watch ends. Dropping the receiver closes the connection and
/// the thread exits promptly, even if it was blocked reading.
pub struct WatchReceiver<K> {
    events: Receiver<Result<WatchEvent<K>>>,
    stopper: Option<ureq::Agent>,
}

impl<K: DeserializeOwned + Send + 'static> WatchReceiver<K> {
    /// Moves `stream` to a new thread; `capacity` bounds the events waiting in the channel (the
    /// thread stops reading while it is full).
    pub(crate) fn spawn(stream: WatchStream<K>, capacity: usize, kind: &str) -> WatchReceiver<K> {
        let (tx, rx) = crossbeam_channel::bounded(capacity);
        let stopper = stream.stopper();
        let spawned = std::thread::Builder::new().name(format!("watch-{}", kind.to_lowercase())).spawn(move || {
            for event in stream {
                if tx.send(event).is_err() {
                    break;
                }
            }
        });
        let events = match spawned {
            Ok(_) => rx,
            Err(e) => {
                // No thread: hand the failure to the reader instead of dropping it.
                let (tx, rx) = crossbeam_channel::bounded(1);
                let _ = tx.send(Err(Error::Transport(format!("cannot start a watch thread: {e}"))));
                rx
            }
        };
        WatchReceiver { events, stopper }
    }
}

impl<K> WatchReceiver<K> {
    /// The next event; `None` once the watch has ended.
    pub fn recv(&self) -> Option<Result<WatchEvent<K>>> {
        self.events.recv().ok()
    }

    /// The next event if one comes within `timeout`: `Ok(None)` once the watch has ended,
    /// `Err(())` on timeout.
    #[allow(clippy::result_unit_err)]
    pub fn recv_timeout(&self, timeout: Duration) -> std::result::Result<Option<Result<WatchEvent<K>>>, ()> {
        match self.events.recv_timeout(timeout) {
            Ok(event) => Ok(Some(event)),
            Err(RecvTimeoutError::Disconnected) => Ok(None),
            Err(RecvTimeoutError::Timeout) => Err(()),
        }
    }

    /// The channel itself, for `crossbeam_channel::select!`.
    pub fn channel(&self) -> &Receiver<Result<WatchEvent<K>>> {
        &self.events
    }
}

impl<K> Drop for WatchReceiver<K> {
    fn drop(&mut self) {
        if let Some(agent) = self.stopper.take() {
            agent.shutdown();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_and_idle_timeout() {
        let params = WatchParams {
            label_selector: Some("app=web".into()),
            resource_version: Some("42".into()),
            allow_bookmarks: true,
            timeout_seconds: Some(300),
            ..WatchParams::default()
        };
        assert_eq!(
            params.query(),
            "?watch=true&labelSelector=app%3Dweb&resourceVersion=42&allowWatchBookmarks=true&timeoutSeconds=300"
        );
        assert_eq!(params.idle_timeout(), Duration::from_secs(330));
        let watch_list = WatchParams {
            resource_version_match: Some("NotOlderThan".into()),
            send_initial_events: Some(true),
            allow_bookmarks: true,
            ..WatchParams::default()
        };
        assert_eq!(
            watch_list.query(),
            "?watch=true&resourceVersionMatch=NotOlderThan&sendInitialEvents=true&allowWatchBookmarks=true"
        );
        assert_eq!(WatchParams::default().idle_timeout(), DEFAULT_IDLE_TIMEOUT);
    }
}
