//! Watch streams: chunked JSON watch events from a resourceVersion, filtered by namespace and
//! selectors, with bookmarks and kube-apiserver's 410 answer for a too-old resourceVersion.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError};
use serde_json::{Value, json};

use super::list::{ObjectFilter, too_large, validate_list_options};
use crate::sandbox::apiserver::convert;
use crate::sandbox::apiserver::metadata::{self, Rendering};
use crate::sandbox::apiserver::responses::send_error;
use crate::sandbox::apiserver::status::ApiError;
use crate::sandbox::apiserver::table::{TableRequest, WatchTable};
use crate::sandbox::apiserver::{ApiServer, Target};
use crate::sandbox::storage::objects::namespace_of;
use crate::sandbox::storage::resources::ResourceType;
use crate::sandbox::storage::store::{Change, ChangeKind};
use crate::server::http::{Request, ResponseWriter};

/// How often a watch loop wakes to check that it should still run.
const TICK: Duration = Duration::from_millis(250);
/// How often a watch whose events are held (`Faults::hold_watch_events`) looks again.
const HOLD_POLL: Duration = Duration::from_millis(20);

/// The parameters of one watch request.
struct WatchRequest {
    /// How event objects are represented (metadata only for the metadata client).
    rendering: Rendering,
    /// With `as=Table`: each event's object as a one-row Table.
    table: Option<(&'static ResourceType, WatchTable)>,
    filter: ObjectFilter,
    namespace: Option<String>,
    bookmarks: bool,
    deadline: Instant,
    start: Start,
}

enum Start {
    /// Existing objects as ADDED events, then changes (`resourceVersion` unset or "0"). With
    /// `sendInitialEvents=true` and bookmarks, a bookmark marks the end of the initial events.
    Snapshot { initial_events_end: bool },
    /// Changes after this revision.
    After(u64),
    /// Changes from now on (`sendInitialEvents=false` without a resourceVersion).
    Now,
}

/// Serves a watch; `rendering`: the negotiated representation of event objects.
pub fn serve(
    api: &ApiServer,
    request: &Request,
    target: &Target,
    rendering: Rendering,
    response: &mut ResponseWriter<'_>,
) -> io::Result<()> {
    let watch = match parse(request, target, api.options.watch_list, rendering) {
        Ok(watch) => watch,
        Err(e) => return send_error(response, &e),
    };
    let storage = target.resource.storage_key();
    let epoch = api.faults.watch_epoch();
    let (initial, backlog, mut last_revision, changes) = match watch.start {
        Start::Snapshot { .. } => {
            let (objects, revision, rx) = api.store.snapshot_and_subscribe(storage);
            (objects, Vec::new(), revision, rx)
        }
        Start::Now => {
            let (_, revision, rx) = api.store.snapshot_and_subscribe(storage);
            (Vec::new(), Vec::new(), revision, rx)
        }
        Start::After(from) if from > api.store.revision() => {
            // The watch cache waits a moment for a future revision, then gives up.
            return send_error(response, &too_large(from, api.store.revision()));
        }
        Start::After(from) => match api.store.subscribe(storage, Some(from)) {
            Ok(sub) => (Vec::new(), sub.backlog, from, sub.changes),
            Err(too_old) => {
                response.start_stream(200, &[("Content-Type", "application/json")])?;
                let error = ApiError::expired(format!("too old resource version: {from} ({})", too_old.oldest));
                write_event(response, "ERROR", &error.status)?;
                return response.finish();
            }
        },
    };
    // As the watch cache, a bookmark only ever moves the client past where it started.
    let start = last_revision;
    response.start_stream(200, &[("Content-Type", "application/json"), ("Cache-Control", "no-cache, private")])?;
    let resource = target.resource;
    for object in &initial {
        if watch.in_scope(object) {
            write_event(response, "ADDED", &watch.render(convert::to_external(resource, object)))?;
        }
    }
    for change in &backlog {
        deliver(api, epoch, resource, &watch, change, &mut last_revision, response)?;
    }
    if let Start::Snapshot { initial_events_end: true } = watch.start {
        let mut bookmark = bookmark(resource, last_revision);
        bookmark["metadata"]["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        write_event(response, "BOOKMARK", &watch.render(bookmark))?;
    }
    stream_changes(api, resource, &watch, &changes, (start, &mut last_revision), epoch, response)
}

fn stream_changes(
    api: &ApiServer,
    resource: &ResourceType,
    watch: &WatchRequest,
    changes: &Receiver<Arc<Change>>,
    (start, last_revision): (u64, &mut u64),
    epoch: u64,
    response: &mut ResponseWriter<'_>,
) -> io::Result<()> {
    let interval = api.options.bookmark_interval;
    let mut next_bookmark = next_bookmark_time(Instant::now(), interval, watch.deadline);
    loop {
        if api.faults.watch_epoch() != epoch {
            // Cut, not finished: the client sees a broken stream, as when a server goes away.
            return Err(cut());
        }
        let now = Instant::now();
        // A bookmark due before the deadline goes out even if this thread woke up late.
        if watch.bookmarks && next_bookmark.is_some_and(|at| now >= at) {
            // Every change up to the store's revision is already in our channel: deliver them,
            // then the bookmark can claim that revision.
            let revision = api.store.revision();
            for change in changes.try_iter() {
                deliver(api, epoch, resource, watch, &change, last_revision, response)?;
            }
            *last_revision = (*last_revision).max(revision);
            if *last_revision > start {
                write_event(response, "BOOKMARK", &watch.render(bookmark(resource, *last_revision)))?;
            }
            next_bookmark = next_bookmark_time(now, interval, watch.deadline);
        }
        if now >= watch.deadline {
            return response.finish();
        }
        match changes.recv_timeout(TICK) {
            Ok(change) => deliver(api, epoch, resource, watch, &change, last_revision, response)?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return response.finish(),
        }
    }
}

/// The error that ends a watch cut by fault injection.
fn cut() -> io::Error {
    io::Error::new(io::ErrorKind::ConnectionAborted, "watch closed by fault injection")
}

/// Waits while the watches' events are held; a cut ends the watch.
fn wait_while_held(api: &ApiServer, epoch: u64) -> io::Result<()> {
    while api.faults.watch_events_held() {
        if api.faults.watch_epoch() != epoch {
            return Err(cut());
        }
        std::thread::sleep(HOLD_POLL);
    }
    Ok(())
}

/// When the next bookmark is due, as the watch cache's `nextBookmarkTime`: one interval from
/// now, or 2 s before the watch's deadline if that is sooner (so that a client resuming after
/// the timeout starts from a recent resourceVersion); none once that moment has passed.
fn next_bookmark_time(now: Instant, interval: Duration, deadline: Instant) -> Option<Instant> {
    let heartbeat = now + interval;
    let at = match deadline.checked_sub(Duration::from_secs(2)) {
        Some(pre_timeout) if pre_timeout < heartbeat => pre_timeout,
        _ => heartbeat,
    };
    (at > now).then_some(at)
}

/// Writes a change as the event this watcher sees: an object entering the selection is
/// ADDED, one leaving it is DELETED, as kube-apiserver's watch cache does. Waits first while
/// the events are held (`Faults::hold_watch_events`).
fn deliver(
    api: &ApiServer,
    epoch: u64,
    resource: &ResourceType,
    watch: &WatchRequest,
    change: &Change,
    last_revision: &mut u64,
    response: &mut ResponseWriter<'_>,
) -> io::Result<()> {
    wait_while_held(api, epoch)?;
    if change.revision <= *last_revision {
        return Ok(());
    }
    *last_revision = change.revision;
    let now_in = watch.in_scope(&change.object);
    let was_in = change.previous.as_ref().is_some_and(|p| watch.in_scope(p));
    let event = match (change.kind, was_in, now_in) {
        (ChangeKind::Added, _, true) => "ADDED",
        (ChangeKind::Modified, true, true) => "MODIFIED",
        (ChangeKind::Modified, false, true) => "ADDED",
        (ChangeKind::Modified, true, false) => "DELETED",
        (ChangeKind::Deleted, true, _) => "DELETED",
        _ => return Ok(()),
    };
    write_event(response, event, &watch.render(convert::to_external(resource, &change.object)))
}

impl WatchRequest {
    /// An event's object in the negotiated representation.
    fn render(&self, object: Value) -> Value {
        match &self.table {
            Some((resource, table)) => table.render(resource, object),
            None => metadata::render(self.rendering, object),
        }
    }

    fn in_scope(&self, object: &Value) -> bool {
        self.namespace.as_deref().is_none_or(|ns| namespace_of(object) == ns) && self.filter.matches(object)
    }
}

fn parse(request: &Request, target: &Target, watch_list: bool, rendering: Rendering) -> Result<WatchRequest, ApiError> {
    validate_list_options(request, true, watch_list)?;
    let filter = ObjectFilter::from_request(request, target.resource)?;
    let bookmarks = request.query_param("allowWatchBookmarks").is_some_and(|v| v == "true" || v == "1");
    let requested_timeout = match request.query_param("timeoutSeconds") {
        Some(t) => t.parse::<u64>().map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds {t:?}")))?,
        None => 0,
    };
    // 0 means the default: a random time between --min-request-timeout (30 min) and twice that.
    let seconds = if requested_timeout == 0 { 1800 + crate::random::below(1800) } else { requested_timeout };
    // A year is "forever" for a watch; it also keeps the deadline arithmetic in range.
    let timeout = Duration::from_secs(seconds.min(365 * 24 * 3600));
    // Validated above: `sendInitialEvents` only comes with the WatchList gate on.
    let initial_events = request.query_param("sendInitialEvents").map(|v| matches!(v, "true" | "1" | "True"));
    let requested = request.query_param("resourceVersion").filter(|v| !v.is_empty() && *v != "0");
    let revision =
        |v: &str| v.parse::<u64>().map_err(|_| ApiError::bad_request(format!("invalid resource version: {v:?}")));
    let start = match (initial_events, requested) {
        (Some(true), _) => Start::Snapshot { initial_events_end: bookmarks },
        (Some(false), None) => Start::Now,
        (None, None) => Start::Snapshot { initial_events_end: false },
        (_, Some(v)) => Start::After(revision(v)?),
    };
    let table = match rendering {
        Rendering::Table { v1beta1 } => {
            Some((target.resource, WatchTable::new(TableRequest::from_request(request, v1beta1)?)))
        }
        _ => None,
    };
    Ok(WatchRequest {
        rendering,
        table,
        filter,
        namespace: target.namespace.clone(),
        bookmarks,
        deadline: Instant::now() + timeout,
        start,
    })
}

fn bookmark(resource: &ResourceType, revision: u64) -> Value {
    json!({
        "kind": resource.kind,
        "apiVersion": resource.group_version(),
        "metadata": {"resourceVersion": revision.to_string()},
    })
}

fn write_event(response: &mut ResponseWriter<'_>, event_type: &str, object: &Value) -> io::Result<()> {
    let mut line = serde_json::to_vec(&json!({"type": event_type, "object": object})).unwrap_or_default();
    line.push(b'\n');
    response.chunk(&line)
}
