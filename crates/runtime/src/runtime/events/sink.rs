//! Writing events to the API server: upstream's `recordToSink` and `recordEvent`
//! (client-go tools/record/event.go), run by the recorder's sink thread.
//!
//! An event is correlated first (see [`super::correlator`]), then created, or patched when it
//! repeats an Event already written; a patch answered with NotFound (the Event expired or was
//! deleted) falls back to a create. Transport failures are retried up to 12 times, sleeping
//! the retry interval between tries (the first sleep randomised so that clients do not retry in
//! step after an API server outage); an error answer from the server is final.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, TryRecvError};
use k8s_openapi::api::core::v1::Event;
use parking_lot::{Condvar, Mutex};
use serde_json::Value;

use super::correlator::{Correlated, EventCorrelator};
use crate::client::{Api, ApiError, Client, Error, Patch, PostParams, Result};

/// Tries per event before it is given up (upstream's `maxTriesPerEvent`).
pub const MAX_TRIES_PER_EVENT: u32 = 12;

/// The status cause the API server gives when a namespace is being deleted.
const NAMESPACE_TERMINATING_CAUSE: &str = "NamespaceTerminating";

/// Where events are written (upstream's `EventSink`).
pub trait EventSink: Send {
    fn create(&self, event: &Event) -> Result<Event>;
    /// Applies a strategic merge patch to the Event named like `event`, in its namespace.
    fn patch(&self, event: &Event, patch: &Value) -> Result<Event>;
}

/// The API server's core/v1 Events, in each event's own namespace.
pub struct ApiSink(pub Client);

impl ApiSink {
    fn api(&self, event: &Event) -> Api<Event> {
        Api::namespaced(&self.0, event.metadata.namespace.as_deref().unwrap_or_default())
    }
}

impl EventSink for ApiSink {
    fn create(&self, event: &Event) -> Result<Event> {
        self.api(event).create(event, &PostParams::default())
    }

    fn patch(&self, event: &Event, patch: &Value) -> Result<Event> {
        let name = event.metadata.name.as_deref().unwrap_or_default();
        self.api(event).patch(name, &Patch::Strategic(patch.clone()), &PostParams::default())
    }
}

/// Counts of events handed to the sink thread and of those it is done with, for `flush`.
#[derive(Default)]
pub struct Progress {
    counts: Mutex<Counts>,
    changed: Condvar,
}

#[derive(Default)]
struct Counts {
    accepted: u64,
    finished: u64,
}

impl Progress {
    /// An event was queued for the sink thread.
    pub fn accept(&self) {
        self.counts.lock().accepted += 1;
    }

    /// The sink thread is done with an event: written, dropped or given up.
    pub fn finish(&self) {
        self.counts.lock().finished += 1;
        self.changed.notify_all();
    }

    /// Waits until every event accepted so far is finished; false on timeout.
    pub fn wait(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut counts = self.counts.lock();
        let target = counts.accepted;
        while counts.finished < target {
            if self.changed.wait_until(&mut counts, deadline).timed_out() {
                return counts.finished >= target;
            }
        }
        true
    }
}

/// What the sink remembers between events, whichever thread writes them.
pub struct SinkWorker {
    pub sink: Box<dyn EventSink>,
    pub correlator: EventCorrelator,
    pub retry_interval: Duration,
    /// Never sent on: it disconnects when the recorder shuts down, which ends retry sleeps.
    pub stop: Receiver<()>,
    pub progress: Arc<Progress>,
    /// After shutdown each queued event gets one try, for at most this long; the rest are
    /// dropped.
    pub drain_timeout: Duration,
    /// When the drain after shutdown ends, from the first event written after it.
    pub drain_deadline: Option<Instant>,
    /// Events dropped at the end of the drain, not yet reported.
    pub abandoned: u64,
}

impl SinkWorker {
    /// Writes one event (or drops it, past the drain after shutdown) and counts it finished.
    pub fn handle(&mut self, event: &Event) {
        if self.stopped() {
            let drain_timeout = self.drain_timeout;
            let deadline = *self.drain_deadline.get_or_insert_with(|| Instant::now() + drain_timeout);
            if Instant::now() > deadline {
                self.abandoned += 1;
                self.progress.finish();
                return;
            }
        }
        self.record_to_sink(event);
        self.progress.finish();
    }

    /// Logs the events dropped at the end of the drain, once the queue is closed and empty.
    pub fn report_abandoned(&mut self) {
        let abandoned = std::mem::take(&mut self.abandoned);
        if abandoned > 0 {
            log::error!("Unable to write {abandoned} queued events: the recorder was shut down");
        }
    }

    fn stopped(&self) -> bool {
        matches!(self.stop.try_recv(), Err(TryRecvError::Disconnected))
    }

    /// Sleeps between tries; false when the recorder shut down meanwhile.
    fn sleep(&self, delay: Duration) -> bool {
        matches!(self.stop.recv_timeout(delay), Err(RecvTimeoutError::Timeout))
    }

    /// Upstream's `recordToSink`: correlates the event and writes it, retrying transport errors.
    pub fn record_to_sink(&mut self, event: &Event) {
        let Some(mut correlated) = self.correlator.correlate(event) else {
            return;
        };
        let mut tries = 0;
        while !self.record_event(&mut correlated) {
            tries += 1;
            if tries >= MAX_TRIES_PER_EVENT {
                log::error!("Unable to write event (retry limit exceeded!) event={}", describe(&correlated.event));
                return;
            }
            if !self.sleep(self.retry_delay(tries)) {
                log::error!("Unable to write event (broadcaster is shut down) event={}", describe(&correlated.event));
                return;
            }
        }
    }

    /// The sleep before the next try: the first one randomised, as upstream.
    fn retry_delay(&self, tries: u32) -> Duration {
        if tries == 1 { self.retry_interval.mul_f64(crate::random::unit()) } else { self.retry_interval }
    }

    /// Upstream's `recordEvent`: one try. True when the event was written or must be given up.
    fn record_event(&mut self, correlated: &mut Correlated) -> bool {
        let event = &mut correlated.event;
        let update_existing = event.count.unwrap_or(0) > 1;
        let result = match (&correlated.patch, update_existing) {
            (Some(patch), true) => match self.sink.patch(event, patch) {
                Err(e) if e.code() == Some(404) => create(self.sink.as_ref(), event),
                other => other,
            },
            _ => create(self.sink.as_ref(), event),
        };
        match result {
            Ok(written) => {
                self.correlator.update_state(&written);
                true
            }
            Err(error) => is_final(&error, event),
        }
    }
}

/// Creates the Event, never with a resourceVersion.
fn create(sink: &dyn EventSink, event: &mut Event) -> Result<Event> {
    event.metadata.resource_version = None;
    sink.create(event)
}

/// Whether a failed write is given up (logging why): everything but transport failures and
/// answers we could not decode, which are retried.
fn is_final(error: &Error, event: &Event) -> bool {
    match error {
        Error::Request(_) => {
            log::error!("Unable to construct event (will not retry!) event={}: {error}", describe(event));
            true
        }
        Error::Api(api) if api.reason == "AlreadyExists" || is_namespace_terminating(api) => {
            log::debug!("Server rejected event (will not retry!) event={}: {error}", describe(event));
            true
        }
        Error::Api(_) => {
            log::error!("Server rejected event (will not retry!) event={}: {error}", describe(event));
            true
        }
        Error::Transport(_) | Error::Decode(_) | Error::StaleGroupVersion(_) => {
            log::error!("Unable to write event (may retry after sleeping) event={}: {error}", describe(event));
            false
        }
    }
}

/// Go's `StatusCause.Type` is the `reason` field in JSON.
fn is_namespace_terminating(error: &ApiError) -> bool {
    let causes = error.status.details.as_ref().and_then(|d| d.causes.as_ref());
    causes.into_iter().flatten().any(|c| c.reason.as_deref() == Some(NAMESPACE_TERMINATING_CAUSE))
}

/// `namespace/name reason="..." message="..."` of an event, for log lines.
pub fn describe(event: &Event) -> String {
    format!(
        "{}/{} reason={:?} message={:?}",
        event.metadata.namespace.as_deref().unwrap_or_default(),
        event.metadata.name.as_deref().unwrap_or_default(),
        event.reason.as_deref().unwrap_or_default(),
        event.message.as_deref().unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::events::correlator::CorrelatorOptions;
    use crate::runtime::events::correlator::tests::fake_clock;
    use k8s_openapi::api::core::v1::{EventSource, ObjectReference};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Status, StatusCause, StatusDetails};
    use std::collections::VecDeque;

    /// What the fake sink was asked to do.
    #[derive(Debug, PartialEq)]
    enum Call {
        Create(String),
        Patch(String, Value),
    }

    /// A sink answering from a script (success when the script is empty).
    #[derive(Clone, Default)]
    struct FakeSink {
        calls: Arc<Mutex<Vec<Call>>>,
        answers: Arc<Mutex<VecDeque<Error>>>,
    }

    impl FakeSink {
        fn fail_next(&self, error: Error) {
            self.answers.lock().push_back(error);
        }

        fn answer(&self, event: &Event) -> Result<Event> {
            match self.answers.lock().pop_front() {
                Some(error) => Err(error),
                None => {
                    let mut stored = event.clone();
                    stored.metadata.resource_version = Some("7".into());
                    Ok(stored)
                }
            }
        }

        fn calls(&self) -> Vec<Call> {
            std::mem::take(&mut *self.calls.lock())
        }
    }

    impl EventSink for FakeSink {
        fn create(&self, event: &Event) -> Result<Event> {
            self.calls.lock().push(Call::Create(event.metadata.name.clone().unwrap()));
            self.answer(event)
        }

        fn patch(&self, event: &Event, patch: &Value) -> Result<Event> {
            self.calls.lock().push(Call::Patch(event.metadata.name.clone().unwrap(), patch.clone()));
            let mut patched = event.clone();
            patched.count = patch["count"].as_i64().map(|c| c as i32);
            self.answer(&patched)
        }
    }

    fn api_error(code: u16, reason: &str, cause: Option<&str>) -> Error {
        let details = cause.map(|c| StatusDetails {
            causes: Some(vec![StatusCause { reason: Some(c.into()), ..StatusCause::default() }]),
            ..StatusDetails::default()
        });
        let status = Status { code: Some(code.into()), reason: Some(reason.into()), details, ..Status::default() };
        ApiError::from_status(status, code, None).into()
    }

    fn worker(sink: &FakeSink) -> (SinkWorker, crossbeam_channel::Sender<()>) {
        let (stop_tx, stop) = crossbeam_channel::bounded(0);
        let worker = SinkWorker {
            sink: Box::new(sink.clone()),
            correlator: EventCorrelator::new(&CorrelatorOptions::default(), fake_clock()),
            retry_interval: Duration::from_millis(1),
            stop,
            progress: Arc::default(),
            drain_timeout: Duration::from_secs(10),
            drain_deadline: None,
            abandoned: 0,
        };
        (worker, stop_tx)
    }

    fn event(message: &str) -> Event {
        Event {
            metadata: ObjectMeta { name: Some("web.1".into()), namespace: Some("ns".into()), ..ObjectMeta::default() },
            involved_object: ObjectReference { name: Some("web".into()), ..ObjectReference::default() },
            reason: Some("Created".into()),
            message: Some(message.into()),
            type_: Some("Normal".into()),
            count: Some(1),
            source: Some(EventSource { component: Some("c".into()), host: None }),
            ..Event::default()
        }
    }

    #[test]
    fn a_repeat_is_patched_and_a_missing_event_recreated() {
        let sink = FakeSink::default();
        let (mut worker, _stop) = worker(&sink);
        worker.record_to_sink(&event("hello"));
        assert_eq!(sink.calls(), vec![Call::Create("web.1".into())]);
        let mut again = event("hello");
        again.metadata.name = Some("web.2".into());
        worker.record_to_sink(&again);
        let calls = sink.calls();
        assert!(matches!(&calls[..], [Call::Patch(name, patch)] if name == "web.1" && patch["count"] == 2));
        sink.fail_next(api_error(404, "NotFound", None));
        worker.record_to_sink(&again);
        let calls = sink.calls();
        assert!(matches!(&calls[..], [Call::Patch(_, p), Call::Create(name)] if p["count"] == 3 && name == "web.1"));
    }

    #[test]
    fn transport_errors_are_retried_up_to_twelve_tries() {
        let sink = FakeSink::default();
        let (mut worker, _stop) = worker(&sink);
        for _ in 0..2 {
            sink.fail_next(Error::Transport("connection refused".into()));
        }
        worker.record_to_sink(&event("a"));
        assert_eq!(sink.calls().len(), 3);
        for _ in 0..20 {
            sink.fail_next(Error::Transport("connection refused".into()));
        }
        worker.record_to_sink(&event("b"));
        assert_eq!(sink.calls().len(), MAX_TRIES_PER_EVENT as usize);
    }

    #[test]
    fn server_rejections_are_final() {
        let sink = FakeSink::default();
        let (mut worker, _stop) = worker(&sink);
        sink.fail_next(api_error(422, "Invalid", None));
        worker.record_to_sink(&event("a"));
        sink.fail_next(api_error(403, "Forbidden", Some(NAMESPACE_TERMINATING_CAUSE)));
        worker.record_to_sink(&event("b"));
        sink.fail_next(Error::Request("bad name".into()));
        worker.record_to_sink(&event("c"));
        assert_eq!(sink.calls().len(), 3);
    }

    #[test]
    fn after_shutdown_an_event_gets_one_try() {
        let sink = FakeSink::default();
        let (mut worker, stop) = worker(&sink);
        worker.retry_interval = Duration::from_secs(3600);
        drop(stop);
        sink.fail_next(Error::Transport("connection refused".into()));
        worker.record_to_sink(&event("a"));
        assert_eq!(sink.calls().len(), 1);
    }

    #[test]
    fn progress_waits_for_accepted_events() {
        let progress = Progress::default();
        assert!(progress.wait(Duration::ZERO));
        progress.accept();
        assert!(!progress.wait(Duration::from_millis(1)));
        progress.finish();
        assert!(progress.wait(Duration::ZERO));
    }
}
