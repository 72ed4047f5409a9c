//! client-go's `EventCorrelator` (tools/record/events_cache.go): before an event is written, it
//!
//! 1. goes through the [`Aggregator`]: once 10 events that differ only in their message were
//!    seen for one object within 10 minutes, they are written as one event whose message is
//!    prefixed with `(combined from similar events): `;
//! 2. is counted by the [`Observations`] (upstream's `eventLogger`): an event seen before (same
//!    key) becomes a strategic merge patch of the Event already written (count + 1, new
//!    lastTimestamp and message) instead of a new Event;
//! 3. goes through the [`SpamFilter`]: a token bucket per source and object (burst 25, then one
//!    event every 5 minutes); events over it are dropped.
//!
//! Every cache is an LRU of 4096 entries, as upstream's. The keys are upstream's: the fields
//! concatenated without a separator.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use serde_json::{Map, Value};

use crate::apimachinery::clock::Clock;
use crate::apimachinery::flowcontrol::TokenBucket;
use crate::lru::Lru;

/// Entries of each correlator cache (upstream's `maxLruCacheEntries`).
pub const MAX_LRU_CACHE_ENTRIES: usize = 4096;
/// Distinct messages of similar events before they are aggregated (`defaultAggregateMaxEvents`).
pub const DEFAULT_AGGREGATE_MAX_EVENTS: usize = 10;
/// Silence after which similar events are counted afresh (`defaultAggregateIntervalInSeconds`).
pub const DEFAULT_AGGREGATE_INTERVAL: Duration = Duration::from_secs(600);
/// Events a source may send about one object at once (`defaultSpamBurst`).
pub const DEFAULT_SPAM_BURST: u32 = 25;
/// Refill of the spam filter's buckets: one event every 5 minutes (`defaultSpamQPS`).
pub const DEFAULT_SPAM_QPS: f64 = 1.0 / 300.0;
/// The prefix of an aggregated event's message (`EventAggregatorByReasonMessageFunc`).
pub const AGGREGATE_MESSAGE_PREFIX: &str = "(combined from similar events): ";

/// The correlator's settings, upstream's `CorrelatorOptions`.
#[derive(Debug, Clone)]
pub struct CorrelatorOptions {
    /// Entries of each LRU cache.
    pub lru_cache_size: usize,
    /// The spam filter's burst per source and object.
    pub spam_burst: u32,
    /// The spam filter's refill, in events per second.
    pub spam_qps: f64,
    /// Distinct messages of similar events from which they are aggregated.
    pub aggregate_max_events: usize,
    /// Silence after which similar events are counted afresh.
    pub aggregate_interval: Duration,
}

impl Default for CorrelatorOptions {
    fn default() -> Self {
        CorrelatorOptions {
            lru_cache_size: MAX_LRU_CACHE_ENTRIES,
            spam_burst: DEFAULT_SPAM_BURST,
            spam_qps: DEFAULT_SPAM_QPS,
            aggregate_max_events: DEFAULT_AGGREGATE_MAX_EVENTS,
            aggregate_interval: DEFAULT_AGGREGATE_INTERVAL,
        }
    }
}

fn text(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or("")
}

fn source_fields(event: &Event) -> [&str; 2] {
    let source = event.source.as_ref();
    [source.and_then(|s| s.component.as_deref()).unwrap_or(""), source.and_then(|s| s.host.as_deref()).unwrap_or("")]
}

/// Upstream's `getEventKey`: source, involved object (with field path), type, reason, message.
pub fn event_key(event: &Event) -> String {
    let object = &event.involved_object;
    let [component, host] = source_fields(event);
    [
        component,
        host,
        text(&object.kind),
        text(&object.namespace),
        text(&object.name),
        text(&object.field_path),
        text(&object.uid),
        text(&object.api_version),
        text(&event.type_),
        text(&event.reason),
        text(&event.message),
    ]
    .concat()
}

/// Upstream's `getSpamKey`: source and involved object.
pub fn spam_key(event: &Event) -> String {
    let object = &event.involved_object;
    let [component, host] = source_fields(event);
    [
        component,
        host,
        text(&object.kind),
        text(&object.namespace),
        text(&object.name),
        text(&object.uid),
        text(&object.api_version),
    ]
    .concat()
}

/// Upstream's `EventAggregatorByReasonFunc`: the key of the group of similar events (all but the
/// message) and the key of the event within it (its message).
pub fn aggregate_keys(event: &Event) -> (String, String) {
    let object = &event.involved_object;
    let [component, host] = source_fields(event);
    let group = [
        component,
        host,
        text(&object.kind),
        text(&object.namespace),
        text(&object.name),
        text(&object.uid),
        text(&object.api_version),
        text(&event.type_),
        text(&event.reason),
        text(&event.reporting_component),
        text(&event.reporting_instance),
    ]
    .concat();
    (group, text(&event.message).to_string())
}

/// `<name>.<unix nanoseconds in hex>`, the name of a new Event (Go's `%v.%x`).
pub fn event_name(object_name: &str, now: Timestamp) -> String {
    let nanos = now.as_nanosecond();
    if nanos < 0 { format!("{object_name}.-{:x}", nanos.unsigned_abs()) } else { format!("{object_name}.{nanos:x}") }
}

/// Seconds from `earlier` to `later`, never negative (the wall clock may step back).
fn seconds_between(earlier: Timestamp, later: Timestamp) -> f64 {
    later.duration_since(earlier).as_secs_f64().max(0.0)
}

/// Upstream's `EventSourceObjectSpamFilter`: limits the events one source sends about one object.
pub struct SpamFilter {
    cache: Lru<String, TokenBucket>,
    burst: u32,
    qps: f64,
}

impl SpamFilter {
    pub fn new(options: &CorrelatorOptions) -> SpamFilter {
        SpamFilter { cache: Lru::new(options.lru_cache_size), burst: options.spam_burst, qps: options.spam_qps }
    }

    /// Whether the event must be dropped: its source and object's bucket (created full at
    /// `now`, a monotonic time) has no token left.
    pub fn filter(&mut self, event: &Event, now: Instant) -> bool {
        let (burst, qps) = (self.burst, self.qps);
        let bucket = self.cache.entry(&spam_key(event), || TokenBucket::new(qps, burst, now));
        !bucket.try_accept(now)
    }
}

/// What the aggregator remembers of a group of similar events.
struct AggregateRecord {
    /// The distinct messages seen, at most `max_events - 1` once the group is aggregated.
    messages: HashSet<String>,
    /// When an event of the group was last seen.
    last: Timestamp,
}

/// Upstream's `EventAggregator`, grouping by `EventAggregatorByReasonFunc`.
pub struct Aggregator {
    cache: Lru<String, AggregateRecord>,
    max_events: usize,
    interval: Duration,
}

impl Aggregator {
    pub fn new(options: &CorrelatorOptions) -> Aggregator {
        Aggregator {
            cache: Lru::new(options.lru_cache_size),
            max_events: options.aggregate_max_events,
            interval: options.aggregate_interval,
        }
    }

    /// The event to write (the event itself, or a new aggregate event) and the key under which
    /// it is counted: the event's full key, or the group's key for an aggregate.
    pub fn aggregate(&mut self, event: &Event, now: Timestamp) -> (Event, String) {
        let (group, message) = aggregate_keys(event);
        let interval = self.interval.as_secs_f64();
        let fresh = || AggregateRecord { messages: HashSet::new(), last: now };
        let record = self.cache.entry(&group, fresh);
        if seconds_between(record.last, now) > interval {
            *record = fresh();
        }
        record.messages.insert(message);
        record.last = now;
        if record.messages.len() < self.max_events {
            return (event.clone(), event_key(event));
        }
        // Upstream's `PopAny`: the group never grows past the threshold.
        if let Some(any) = record.messages.iter().next().cloned() {
            record.messages.remove(&any);
        }
        (aggregate_event(event, now), group)
    }
}

/// The new event standing for a group of similar events (upstream sets no reporting fields).
fn aggregate_event(event: &Event, now: Timestamp) -> Event {
    let object_name = text(&event.involved_object.name);
    Event {
        metadata: ObjectMeta {
            name: Some(event_name(object_name, now)),
            namespace: event.metadata.namespace.clone(),
            ..ObjectMeta::default()
        },
        count: Some(1),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        involved_object: event.involved_object.clone(),
        message: Some(format!("{AGGREGATE_MESSAGE_PREFIX}{}", text(&event.message))),
        type_: event.type_.clone(),
        reason: event.reason.clone(),
        source: event.source.clone(),
        ..Event::default()
    }
}

/// What is known of an Event already written (upstream's `eventLog`).
#[derive(Debug, Clone, PartialEq)]
struct Observation {
    count: i32,
    first_timestamp: Option<Time>,
    name: Option<String>,
    resource_version: Option<String>,
}

impl Observation {
    fn of(event: &Event) -> Observation {
        Observation {
            count: event.count.unwrap_or(0),
            first_timestamp: event.first_timestamp.clone(),
            name: event.metadata.name.clone(),
            resource_version: event.metadata.resource_version.clone(),
        }
    }
}

/// Upstream's `eventLogger`: counts occurrences of each event to turn repeats into patches.
pub struct Observations {
    cache: Lru<String, Observation>,
}

impl Observations {
    pub fn new(options: &CorrelatorOptions) -> Observations {
        Observations { cache: Lru::new(options.lru_cache_size) }
    }

    /// Records an occurrence of the event counted under `key`. A repeat takes the name, first
    /// timestamp and resourceVersion of the Event written before, with count + 1, and comes
    /// with the strategic merge patch that updates that Event.
    pub fn observe(&mut self, mut event: Event, key: String) -> (Event, Option<Value>) {
        let last = self.cache.get_mut(&key).filter(|last| last.count > 0).cloned();
        let patch = last.map(|last| {
            event.metadata.name = last.name;
            event.metadata.resource_version = last.resource_version;
            event.first_timestamp = last.first_timestamp;
            event.count = Some(last.count + 1);
            repeat_patch(&event)
        });
        self.cache.insert(key, Observation::of(&event));
        (event, patch)
    }

    /// Remembers what the server returned for a written Event, under the Event's own key.
    pub fn update_state(&mut self, event: &Event) {
        self.cache.insert(event_key(event), Observation::of(event));
    }
}

/// The patch `strategicpatch.CreateTwoWayMergePatch` makes upstream between the repeated event
/// and a copy without count, message and with a zero lastTimestamp: those three fields.
fn repeat_patch(event: &Event) -> Value {
    let mut patch = Map::new();
    patch.insert("count".into(), event.count.into());
    if let Some(last) = &event.last_timestamp {
        patch.insert("lastTimestamp".into(), serde_json::to_value(last).unwrap_or(Value::Null));
    }
    if let Some(message) = event.message.as_ref().filter(|m| !m.is_empty()) {
        patch.insert("message".into(), message.clone().into());
    }
    Value::Object(patch)
}

/// An event ready to be written: created, or (with a patch) merged into an existing Event.
#[derive(Debug, Clone)]
pub struct Correlated {
    pub event: Event,
    pub patch: Option<Value>,
}

/// Upstream's `EventCorrelator`: aggregation, counting and the spam filter, in that order.
pub struct EventCorrelator {
    clock: Arc<dyn Clock>,
    aggregator: Aggregator,
    observations: Observations,
    spam_filter: SpamFilter,
}

impl EventCorrelator {
    pub fn new(options: &CorrelatorOptions, clock: Arc<dyn Clock>) -> EventCorrelator {
        EventCorrelator {
            clock,
            aggregator: Aggregator::new(options),
            observations: Observations::new(options),
            spam_filter: SpamFilter::new(options),
        }
    }

    /// What to write for `event`, or `None` when the spam filter drops it.
    pub fn correlate(&mut self, event: &Event) -> Option<Correlated> {
        let (aggregated, key) = self.aggregator.aggregate(event, self.clock.wall());
        let (event, patch) = self.observations.observe(aggregated, key);
        if self.spam_filter.filter(&event, self.clock.now()) {
            return None;
        }
        Some(Correlated { event, patch })
    }

    /// Remembers the server's copy of a written Event (its name and resourceVersion).
    pub fn update_state(&mut self, event: &Event) {
        self.observations.update_state(event);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{EventSource, ObjectReference};

    use crate::apimachinery::clock::FakeClock;

    /// A fake clock at a fixed wall time.
    pub(crate) fn fake_clock() -> Arc<FakeClock> {
        Arc::new(FakeClock::at("2026-01-02T03:04:05.123456789Z".parse().unwrap()))
    }

    fn pod_event(name: &str, reason: &str, message: &str) -> Event {
        Event {
            metadata: ObjectMeta {
                name: Some(format!("{name}.abc")),
                namespace: Some("ns".into()),
                ..ObjectMeta::default()
            },
            involved_object: ObjectReference {
                kind: Some("Pod".into()),
                api_version: Some("v1".into()),
                namespace: Some("ns".into()),
                name: Some(name.into()),
                uid: Some("u-1".into()),
                ..ObjectReference::default()
            },
            reason: Some(reason.into()),
            message: Some(message.into()),
            type_: Some("Normal".into()),
            count: Some(1),
            source: Some(EventSource { component: Some("test-controller".into()), host: None }),
            reporting_component: Some("test-controller".into()),
            reporting_instance: Some(String::new()),
            ..Event::default()
        }
    }

    #[test]
    fn names_are_the_object_name_and_hex_nanoseconds() {
        let at: Timestamp = "2026-01-02T03:04:05.123456789Z".parse().unwrap();
        let nanos = at.as_nanosecond();
        assert_eq!(event_name("web-1", at), format!("web-1.{nanos:x}"));
        assert_eq!(event_name("x", Timestamp::from_nanosecond(255).unwrap()), "x.ff");
    }

    #[test]
    fn keys_concatenate_upstream_fields() {
        let event = pod_event("web", "Created", "hello");
        assert_eq!(event_key(&event), "test-controllerPodnswebu-1v1NormalCreatedhello");
        assert_eq!(spam_key(&event), "test-controllerPodnswebu-1v1");
        let (group, local) = aggregate_keys(&event);
        assert_eq!(group, "test-controllerPodnswebu-1v1NormalCreatedtest-controller");
        assert_eq!(local, "hello");
        let mut other = pod_event("web", "Created", "bye");
        assert_eq!(aggregate_keys(&other).0, group);
        other.involved_object.field_path = Some("spec.containers{app}".into());
        assert_ne!(event_key(&other), event_key(&pod_event("web", "Created", "bye")));
    }

    #[test]
    fn repeats_become_patches_of_the_first_event() {
        let clock = fake_clock();
        let mut correlator = EventCorrelator::new(&CorrelatorOptions::default(), clock.clone());
        let first = correlator.correlate(&pod_event("web", "Created", "hello")).unwrap();
        assert!(first.patch.is_none());
        assert_eq!(first.event.count, Some(1));
        clock.advance(Duration::from_secs(5));
        let mut again = pod_event("web", "Created", "hello");
        again.metadata.name = Some("web.def".into());
        again.last_timestamp = Some(Time(clock.wall()));
        let second = correlator.correlate(&again).unwrap();
        assert_eq!(second.event.metadata.name.as_deref(), Some("web.abc"));
        assert_eq!(second.event.count, Some(2));
        let patch = second.patch.unwrap();
        assert_eq!(patch["count"], 2);
        assert_eq!(patch["message"], "hello");
        assert_eq!(patch["lastTimestamp"], serde_json::to_value(Time(clock.wall())).unwrap());
        assert_eq!(patch.as_object().unwrap().len(), 3);
    }

    #[test]
    fn server_state_replaces_the_observation() {
        let mut correlator = EventCorrelator::new(&CorrelatorOptions::default(), fake_clock());
        let first = correlator.correlate(&pod_event("web", "Created", "hello")).unwrap();
        let mut stored = first.event.clone();
        stored.metadata.resource_version = Some("42".into());
        stored.count = Some(7);
        correlator.update_state(&stored);
        let next = correlator.correlate(&pod_event("web", "Created", "hello")).unwrap();
        assert_eq!(next.event.count, Some(8));
        assert_eq!(next.event.metadata.resource_version.as_deref(), Some("42"));
    }

    #[test]
    fn the_tenth_distinct_message_is_aggregated() {
        let clock = fake_clock();
        let mut correlator = EventCorrelator::new(&CorrelatorOptions::default(), clock.clone());
        for i in 0..9 {
            let out = correlator.correlate(&pod_event("web", "Failed", &format!("try {i}"))).unwrap();
            assert_eq!(out.event.message.as_deref(), Some(format!("try {i}").as_str()));
        }
        let tenth = correlator.correlate(&pod_event("web", "Failed", "try 9")).unwrap();
        assert_eq!(tenth.event.message.as_deref(), Some("(combined from similar events): try 9"));
        assert_eq!(tenth.event.count, Some(1));
        assert!(tenth.patch.is_none());
        assert!(tenth.event.reporting_component.is_none());
        assert_eq!(tenth.event.metadata.name.unwrap(), event_name("web", clock.wall()));
        // Further distinct messages patch the aggregate event.
        let eleventh = correlator.correlate(&pod_event("web", "Failed", "try 10")).unwrap();
        assert_eq!(eleventh.event.count, Some(2));
        assert_eq!(eleventh.patch.unwrap()["message"], "(combined from similar events): try 10");
    }

    #[test]
    fn aggregation_restarts_after_the_interval() {
        let clock = fake_clock();
        let mut aggregator = Aggregator::new(&CorrelatorOptions::default());
        for i in 0..9 {
            aggregator.aggregate(&pod_event("web", "Failed", &format!("m{i}")), clock.wall());
        }
        clock.advance(DEFAULT_AGGREGATE_INTERVAL + Duration::from_secs(1));
        let (event, key) = aggregator.aggregate(&pod_event("web", "Failed", "m9"), clock.wall());
        assert_eq!(event.message.as_deref(), Some("m9"));
        assert_eq!(key, event_key(&event));
        // Other reasons and other objects are other groups.
        let (event, _) = aggregator.aggregate(&pod_event("web", "Other", "m9"), clock.wall());
        assert_eq!(event.message.as_deref(), Some("m9"));
    }

    #[test]
    fn spam_filter_allows_a_burst_then_one_event_per_five_minutes() {
        let clock = fake_clock();
        let mut filter = SpamFilter::new(&CorrelatorOptions::default());
        let event = pod_event("web", "Created", "hello");
        for _ in 0..25 {
            assert!(!filter.filter(&event, clock.now()));
        }
        assert!(filter.filter(&event, clock.now()));
        assert!(!filter.filter(&pod_event("other", "Created", "hello"), clock.now()), "per object");
        clock.advance(Duration::from_secs(299));
        assert!(filter.filter(&event, clock.now()));
        clock.advance(Duration::from_secs(1));
        assert!(!filter.filter(&event, clock.now()));
        assert!(filter.filter(&event, clock.now()));
        clock.advance(Duration::from_secs(3600));
        for _ in 0..12 {
            assert!(!filter.filter(&event, clock.now()));
        }
        assert!(filter.filter(&event, clock.now()));
    }

    #[test]
    fn the_correlator_drops_spam_after_counting_it() {
        let mut correlator = EventCorrelator::new(&CorrelatorOptions::default(), fake_clock());
        let event = pod_event("web", "Created", "hello");
        for _ in 0..25 {
            assert!(correlator.correlate(&event).is_some());
        }
        assert!(correlator.correlate(&event).is_none());
    }
}
