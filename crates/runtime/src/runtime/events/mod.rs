//! Recording core/v1 Events the way client-go's `tools/record` does for the upstream
//! controllers: an [`EventRecorder`] per controller (upstream's recorder and its broadcaster)
//! builds each Event, logs it at info level like upstream's `StartStructuredLogging`, and
//! queues it, without ever blocking, for its sink thread, which correlates events (aggregation,
//! counting of repeats, the spam filter: see `correlator.rs`) and writes them to the API
//! server, retrying while the server cannot be reached (see `sink.rs`).
//!
//! The sink thread is started when an event is queued and none runs, and ends once its queue
//! has been empty for a moment (see [`crate::runtime::pool`]), so an idle process has no event
//! thread; what it must remember (the correlator's state) lives in the recorder. Each recorder
//! has its own thread, so one controller's unwritable Events never hold up another's. The queue
//! holds at most 1000 events (upstream's `maxQueuedEvents`); when it is full the event is
//! dropped with an error logged, as upstream's `ActionOrDrop`.
//!
//! Fidelity notes: as in the upstream controller manager, the event source names only the
//! component, so `source.host` is unset and `reportingInstance` is empty (set
//! [`RecorderOptions::host`] to fill both, e.g. with [`host_name`]). client-go does not shorten
//! messages and the API server puts no limit on core/v1 Event messages, so neither do we.
//! Unlike upstream, which abandons queued events on shutdown, [`EventRecorder::shutdown`]
//! writes them first, one try each and within a time bound.

mod correlator;
mod sink;

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::{Metadata, Resource};
use parking_lot::Mutex;

use crate::client::Client;
use correlator::{EventCorrelator, event_name};

use crate::apimachinery::clock::{Clock, RealClock};
use crate::runtime::pool::{Backlog, Jobs, LINGER, Pool, Take, Workers};
use sink::{ApiSink, EventSink, Progress, SinkWorker, describe};

pub use correlator::CorrelatorOptions;

/// Events queued per recorder before new ones are dropped (upstream's `maxQueuedEvents`).
pub const MAX_QUEUED_EVENTS: usize = 1000;
/// The namespace of Events about cluster-scoped objects (`metav1.NamespaceDefault`).
const DEFAULT_NAMESPACE: &str = "default";

/// The type of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Everything is going as expected.
    Normal,
    /// Something may need attention.
    Warning,
}

impl EventType {
    /// The type as the Event's `type` field spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        }
    }
}

/// How a recorder writes events.
#[derive(Debug, Clone)]
pub struct RecorderOptions {
    /// The sleep between tries of an event the API server could not be reached for; the
    /// first sleep is a random part of it. Upstream: 10 s.
    pub retry_interval: Duration,
    /// `source.host` and `reportingInstance`; the upstream controller manager sets neither.
    pub host: Option<String>,
    /// How long [`EventRecorder::shutdown`] may spend writing the events still queued.
    pub shutdown_timeout: Duration,
    /// Aggregation and spam filter settings.
    pub correlator: CorrelatorOptions,
}

impl Default for RecorderOptions {
    fn default() -> Self {
        RecorderOptions {
            retry_interval: Duration::from_secs(10),
            host: None,
            shutdown_timeout: Duration::from_secs(10),
            correlator: CorrelatorOptions::default(),
        }
    }
}

/// Records events about objects for one component (a controller); cheap to clone.
#[derive(Clone)]
pub struct EventRecorder {
    inner: Arc<Inner>,
}

struct Inner {
    source: EventSource,
    clock: Arc<dyn Clock>,
    /// The sink's queue and state, served by at most one thread at a time.
    sink: Pool<SinkJobs>,
    progress: Arc<Progress>,
    /// Never sent on: dropped at close, which wakes the sink from a retry sleep.
    stop: Mutex<Option<Sender<()>>>,
    shutdown_timeout: Duration,
}

/// The events waiting for the sink, and what the sink remembers between them.
struct SinkJobs {
    queue: Mutex<SinkQueue>,
    /// Locked by the one sink thread while it writes an event.
    worker: Mutex<SinkWorker>,
}

struct SinkQueue {
    /// Boxed: a queue grows by doubling, and an `Event` is large.
    events: VecDeque<Box<Event>>,
    /// Set at close: later events are dropped, and the sink ends when the queue is empty.
    closed: bool,
}

impl Jobs for SinkJobs {
    type Job = Box<Event>;

    fn take(&self) -> Take<Box<Event>> {
        let mut queue = self.queue.lock();
        match queue.events.pop_front() {
            Some(event) => Take::Job(event),
            None if queue.closed => Take::Closed,
            None => Take::Empty,
        }
    }

    fn backlog(&self) -> Backlog {
        let queue = self.queue.lock();
        Backlog { ready: queue.events.len(), closed: queue.closed }
    }

    fn run(&self, event: Box<Event>) {
        let mut worker = self.worker.lock();
        worker.handle(&event);
        let queue = self.queue.lock();
        if queue.closed && queue.events.is_empty() {
            worker.report_abandoned();
        }
    }
}

impl EventRecorder {
    /// A recorder for `component` (e.g. `replicaset-controller`) writing through `client`, with
    /// upstream's settings.
    pub fn new(client: Client, component: &str) -> EventRecorder {
        EventRecorder::with_options(client, component, RecorderOptions::default())
    }

    /// A recorder with other settings (a short retry interval for tests, a host).
    pub fn with_options(client: Client, component: &str, options: RecorderOptions) -> EventRecorder {
        EventRecorder::start(Box::new(ApiSink(client)), component, options, Arc::new(RealClock), LINGER)
    }

    /// A recorder whose sink thread ends after `linger` without an event.
    fn start(
        sink: Box<dyn EventSink>,
        component: &str,
        options: RecorderOptions,
        clock: Arc<dyn Clock>,
        linger: Duration,
    ) -> Self {
        let (stop_tx, stop_rx) = crossbeam_channel::bounded(0);
        let progress = Arc::new(Progress::default());
        let worker = SinkWorker {
            sink,
            correlator: EventCorrelator::new(&options.correlator, clock.clone()),
            retry_interval: options.retry_interval,
            stop: stop_rx,
            progress: progress.clone(),
            drain_timeout: options.shutdown_timeout,
            drain_deadline: None,
            abandoned: 0,
        };
        let jobs = SinkJobs {
            queue: Mutex::new(SinkQueue { events: VecDeque::new(), closed: false }),
            worker: Mutex::new(worker),
        };
        let source = EventSource { component: Some(component.to_string()), host: options.host };
        let inner = Inner {
            source,
            clock,
            sink: Pool::new(format!("events-{component}"), 1, linger, jobs),
            progress,
            stop: Mutex::new(Some(stop_tx)),
            shutdown_timeout: options.shutdown_timeout,
        };
        EventRecorder { inner: Arc::new(inner) }
    }

    /// Records an event about the referenced object. Never blocks: when the queue is full the
    /// event is dropped and an error logged.
    pub fn event(&self, object: &ObjectReference, event_type: EventType, reason: &str, message: &str) {
        let event = Box::new(self.make_event(object, event_type, reason, message));
        // Logged here rather than by a thread of its own: a log line costs less than a handoff.
        let line = log::log_enabled!(log::Level::Info).then(|| log_line(&event));
        {
            let mut queue = self.inner.sink.jobs().queue.lock();
            if queue.closed {
                drop(queue);
                log::error!(
                    "Unable to record event (will not retry!): the recorder is shut down; event={}",
                    describe(&event)
                );
                return;
            }
            if queue.events.len() >= MAX_QUEUED_EVENTS {
                drop(queue);
                log::error!("Unable to record event: too many queued events, dropped event {}", describe(&event));
                return;
            }
            queue.events.push_back(event);
            // Counted before the sink can take it, so that a flush never sees it finished first.
            self.inner.progress.accept();
        }
        self.inner.sink.notify();
        if let Some(line) = line {
            log::info!("{line}");
        }
    }

    /// Records an event about an object, referenced like upstream's `ref.GetReference`.
    pub fn event_for<K: Resource + Metadata<Ty = ObjectMeta>>(
        &self,
        object: &K,
        event_type: EventType,
        reason: &str,
        message: &str,
    ) {
        self.event(&object_reference(object), event_type, reason, message);
    }

    /// Waits until the events recorded so far were written (or given up or dropped); false if
    /// `timeout` passed first.
    pub fn flush(&self, timeout: Duration) -> bool {
        self.inner.progress.wait(timeout)
    }

    /// Stops recording: later events are dropped, queued ones get one try each within the
    /// shutdown timeout, then the sink thread ends. Waits for it, within a bound.
    pub fn shutdown(&self) {
        self.close();
        // The drain may end with one request in flight: allow for the client's own timeout.
        self.wait_stopped(self.inner.shutdown_timeout + Duration::from_secs(5));
    }

    /// The first half of [`EventRecorder::shutdown`]: later events are dropped and the sink
    /// thread drains what is queued. Lets a caller close many recorders, then wait for all
    /// of them against one deadline.
    pub fn close(&self) {
        self.inner.sink.jobs().queue.lock().closed = true;
        drop(self.inner.stop.lock().take());
        self.inner.sink.notify();
    }

    /// Waits up to `timeout` for the sink thread of a closed recorder to end; false (leaving
    /// the thread behind) when it did not.
    pub fn wait_stopped(&self, timeout: Duration) -> bool {
        const YEAR: Duration = Duration::from_secs(365 * 24 * 3600);
        let deadline = Instant::now().checked_add(timeout).unwrap_or_else(|| Instant::now() + YEAR);
        let stopped = self.inner.sink.wait_stopped(deadline);
        if !stopped {
            log::warn!("the event sink thread did not stop in time; leaving it behind");
        }
        stopped
    }

    /// Upstream's `makeEvent` with the recorder's source: a new Event, count 1, in the object's
    /// namespace (`default` for cluster-scoped objects).
    fn make_event(&self, object: &ObjectReference, event_type: EventType, reason: &str, message: &str) -> Event {
        let now = self.inner.clock.wall();
        let namespace = object.namespace.as_deref().filter(|ns| !ns.is_empty()).unwrap_or(DEFAULT_NAMESPACE);
        let source = &self.inner.source;
        Event {
            metadata: ObjectMeta {
                name: Some(event_name(object.name.as_deref().unwrap_or_default(), now)),
                namespace: Some(namespace.to_string()),
                ..ObjectMeta::default()
            },
            involved_object: object.clone(),
            reason: Some(reason.to_string()),
            message: Some(message.to_string()),
            first_timestamp: Some(Time(now)),
            last_timestamp: Some(Time(now)),
            count: Some(1),
            type_: Some(event_type.as_str().to_string()),
            source: Some(source.clone()),
            reporting_component: source.component.clone(),
            reporting_instance: Some(source.host.clone().unwrap_or_default()),
            ..Event::default()
        }
    }
}

/// Upstream's structured "Event occurred" line, in klog's key=value form.
fn log_line(event: &Event) -> String {
    let object = &event.involved_object;
    let name = object.name.as_deref().unwrap_or_default();
    let reference = match object.namespace.as_deref().filter(|ns| !ns.is_empty()) {
        Some(namespace) => format!("{namespace}/{name}"),
        None => name.to_string(),
    };
    let field = |value: &Option<String>| format!("{:?}", value.as_deref().unwrap_or_default());
    format!(
        "\"Event occurred\" object={reference:?} fieldPath={} kind={} apiVersion={} type={} reason={} message={}",
        field(&object.field_path),
        field(&object.kind),
        field(&object.api_version),
        field(&event.type_),
        field(&event.reason),
        field(&event.message)
    )
}

/// A reference to an object, like upstream's `ref.GetReference`: kind, apiVersion, namespace,
/// name, uid and resourceVersion.
pub fn object_reference<K: Resource + Metadata<Ty = ObjectMeta>>(object: &K) -> ObjectReference {
    let meta = object.metadata();
    let present = |value: &Option<String>| value.clone().filter(|v| !v.is_empty());
    ObjectReference {
        kind: Some(K::KIND.to_string()),
        api_version: Some(K::API_VERSION.to_string()),
        namespace: present(&meta.namespace),
        name: present(&meta.name),
        uid: present(&meta.uid),
        resource_version: present(&meta.resource_version),
        field_path: None,
    }
}

/// This machine's host name, from `/proc/sys/kernel/hostname` or `$HOSTNAME`, for
/// [`RecorderOptions::host`].
pub fn host_name() -> Option<String> {
    crate::hostname()
}

#[cfg(test)]
mod tests {
    use super::correlator::tests::fake_clock;
    use super::*;
    use k8s_openapi::api::core::v1::{Node, Pod};
    use serde_json::Value;

    /// A sink that keeps what it was asked to create, counts patches, and, when `hold` is given,
    /// reports each create on `started` and waits for a release.
    #[derive(Clone, Default)]
    struct Recording(Arc<Mutex<Vec<Event>>>, Arc<Mutex<usize>>, Option<(Sender<()>, crossbeam_channel::Receiver<()>)>);

    impl EventSink for Recording {
        fn create(&self, event: &Event) -> crate::client::Result<Event> {
            if let Some((started, hold)) = &self.2 {
                started.send(()).unwrap();
                hold.recv_timeout(LONG).unwrap();
            }
            self.0.lock().push(event.clone());
            Ok(event.clone())
        }

        fn patch(&self, event: &Event, _patch: &Value) -> crate::client::Result<Event> {
            *self.1.lock() += 1;
            Ok(event.clone())
        }
    }

    /// A bound that only a broken recorder reaches.
    const LONG: Duration = Duration::from_secs(60);

    fn far() -> Instant {
        Instant::now() + LONG
    }

    fn pod() -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("web-1".into()),
                namespace: Some("shop".into()),
                uid: Some("u-1".into()),
                resource_version: Some("12".into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    fn node() -> Node {
        Node { metadata: ObjectMeta { name: Some("n1".into()), ..ObjectMeta::default() }, ..Node::default() }
    }

    #[test]
    fn references_name_the_object() {
        let reference = object_reference(&pod());
        assert_eq!(reference.kind.as_deref(), Some("Pod"));
        assert_eq!(reference.api_version.as_deref(), Some("v1"));
        assert_eq!(reference.namespace.as_deref(), Some("shop"));
        assert_eq!(reference.name.as_deref(), Some("web-1"));
        assert_eq!(reference.uid.as_deref(), Some("u-1"));
        assert_eq!(reference.resource_version.as_deref(), Some("12"));
        assert_eq!(object_reference(&node()).namespace, None);
    }

    #[test]
    fn events_are_built_like_upstream() {
        let clock = fake_clock();
        let sink = Recording::default();
        let recorder = EventRecorder::start(
            Box::new(sink.clone()),
            "test-controller",
            RecorderOptions::default(),
            clock.clone(),
            LINGER,
        );
        let long = "x".repeat(5000);
        recorder.event_for(&pod(), EventType::Warning, "Failed", &long);
        recorder.event_for(&node(), EventType::Normal, "Ready", "ok");
        assert!(recorder.flush(Duration::from_secs(30)));
        let events = sink.0.lock().clone();
        let [pod_event, node_event] = &events[..] else { panic!("{events:?}") };
        assert_eq!(pod_event.metadata.name, Some(event_name("web-1", clock.wall())));
        assert_eq!(pod_event.metadata.namespace.as_deref(), Some("shop"));
        assert_eq!(pod_event.message.as_deref(), Some(long.as_str()), "messages are not shortened");
        assert_eq!(pod_event.type_.as_deref(), Some("Warning"));
        assert_eq!(pod_event.count, Some(1));
        assert_eq!(pod_event.first_timestamp, Some(Time(clock.wall())));
        assert_eq!(pod_event.source.as_ref().unwrap().component.as_deref(), Some("test-controller"));
        assert_eq!(pod_event.source.as_ref().unwrap().host, None);
        assert_eq!(pod_event.reporting_component.as_deref(), Some("test-controller"));
        assert_eq!(pod_event.reporting_instance.as_deref(), Some(""));
        assert_eq!(node_event.metadata.namespace.as_deref(), Some("default"));
        recorder.shutdown();
    }

    #[test]
    fn shut_down_recorders_drop_events() {
        let sink = Recording::default();
        let options = RecorderOptions { host: Some("node-a".into()), ..RecorderOptions::default() };
        let recorder = EventRecorder::start(Box::new(sink.clone()), "c", options, fake_clock(), LINGER);
        recorder.event_for(&pod(), EventType::Normal, "Before", "m");
        recorder.shutdown();
        recorder.event_for(&pod(), EventType::Normal, "After", "m");
        assert!(recorder.flush(Duration::from_secs(5)));
        recorder.shutdown();
        let events = sink.0.lock().clone();
        assert_eq!(events.len(), 1, "queued events are written on shutdown, later ones dropped");
        assert_eq!(events[0].reporting_instance.as_deref(), Some("node-a"));
        assert_eq!(events[0].source.as_ref().unwrap().host.as_deref(), Some("node-a"));
    }

    #[test]
    fn log_lines_are_upstreams_structured_line() {
        let recorder =
            EventRecorder::start(Box::new(Recording::default()), "c", RecorderOptions::default(), fake_clock(), LINGER);
        let event = recorder.make_event(&object_reference(&pod()), EventType::Normal, "Created", "made \"it\"");
        assert_eq!(
            log_line(&event),
            r#""Event occurred" object="shop/web-1" fieldPath="" kind="Pod" apiVersion="v1" type="Normal" reason="Created" message="made \"it\"""#
        );
    }

    #[test]
    fn the_sink_thread_runs_only_while_there_are_events_and_keeps_no_state() {
        let sink = Recording::default();
        let options = RecorderOptions::default();
        // No linger: the sink thread ends as soon as its queue is empty.
        let recorder = EventRecorder::start(Box::new(sink.clone()), "c", options, fake_clock(), Duration::ZERO);
        assert_eq!(recorder.inner.sink.live(), 0, "no event, no thread");
        recorder.event_for(&pod(), EventType::Normal, "Pulled", "same");
        assert!(recorder.flush(LONG));
        assert!(recorder.inner.sink.wait_stopped(far()), "the thread ends with its queue");
        recorder.event_for(&pod(), EventType::Normal, "Pulled", "same");
        assert!(recorder.flush(LONG));
        assert_eq!(sink.0.lock().len(), 1, "one Event created");
        assert_eq!(*sink.1.lock(), 1, "the repeat, written by another thread, is a patch of it");
        recorder.shutdown();
        assert_eq!(recorder.inner.sink.live(), 0);
    }

    #[test]
    fn at_most_a_thousand_events_wait() {
        let (started, starts) = crossbeam_channel::unbounded();
        let (release, hold) = crossbeam_channel::unbounded();
        let sink = Recording(Arc::default(), Arc::default(), Some((started, hold)));
        let recorder =
            EventRecorder::start(Box::new(sink.clone()), "c", RecorderOptions::default(), fake_clock(), LINGER);
        let reference = |n: usize| ObjectReference { name: Some(format!("p{n}")), ..object_reference(&pod()) };
        recorder.event(&reference(0), EventType::Normal, "Made", "m");
        starts.recv_timeout(LONG).unwrap();
        // The sink holds the first event: the next thousand wait, the one after is dropped.
        for n in 1..=MAX_QUEUED_EVENTS + 1 {
            recorder.event(&reference(n), EventType::Normal, "Made", "m");
        }
        assert_eq!(recorder.inner.sink.jobs().queue.lock().events.len(), MAX_QUEUED_EVENTS);
        for _ in 0..=MAX_QUEUED_EVENTS {
            release.send(()).unwrap();
        }
        assert!(recorder.flush(LONG));
        assert_eq!(sink.0.lock().len(), MAX_QUEUED_EVENTS + 1);
        recorder.close();
        assert!(recorder.wait_stopped(LONG), "a lingering sink thread ends at close");
    }

    #[test]
    fn host_names_are_trimmed() {
        if let Some(name) = host_name() {
            assert_eq!(name, name.trim());
            assert!(!name.is_empty());
        }
    }
}
