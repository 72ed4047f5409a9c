//! The initial events of a watch-list, held apart until the bookmark that ends them: client-go
//! v1.36's `Reflector.watchList` collects them in a temporary store through `handleListWatch`
//! (`handleAnyWatch` with `exitOnWatchListBookmarkReceived`), and only then replaces the
//! informer's store with them.
//!
//! The objects stay JSON until that replace, which decodes them one at a time as a list's are
//! (see `reflector::Page`): a cluster's worth of Pods is never held decoded at once. Only each
//! object's name, namespace and resourceVersion are read on arrival, to key it.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::value::RawValue;

use super::store::object_key;
use crate::client::watch::{INITIAL_EVENTS_END_ANNOTATION, RawEvent, decode_event};
use crate::client::{Error, Result};

/// How often a watch-list still waiting for its end bookmark may warn (client-go's
/// `initialEventsEndBookmarkTicker` interval).
const BOOKMARK_WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// The part of an event's object that keys it.
#[derive(Deserialize)]
struct ObjectHead {
    #[serde(default)]
    metadata: HeadMetadata,
}

#[derive(Deserialize, Default)]
struct HeadMetadata {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    #[serde(rename = "resourceVersion", default)]
    resource_version: Option<String>,
}

/// The part of a BOOKMARK's object the reflector reads.
#[derive(Deserialize)]
struct BookmarkHead {
    #[serde(default)]
    metadata: BookmarkMetadata,
}

#[derive(Deserialize, Default)]
struct BookmarkMetadata {
    #[serde(rename = "resourceVersion", default)]
    resource_version: Option<String>,
    #[serde(default)]
    annotations: Option<BTreeMap<String, String>>,
}

fn parse<T: serde::de::DeserializeOwned>(raw: &RawEvent) -> Result<T> {
    crate::apimachinery::json::from_bytes(raw.object.get().as_bytes())
        .map_err(|e| Error::Decode(format!("watch {} event: {e}", raw.event_type)))
}

/// Whether a BOOKMARK carries `k8s.io/initial-events-end: "true"`.
fn ends_initial_events(annotations: Option<&BTreeMap<String, String>>) -> bool {
    annotations.and_then(|a| a.get(INITIAL_EVENTS_END_ANNOTATION)).is_some_and(|v| v == "true")
}

/// The temporary store of one watch-list attempt and what `handleAnyWatch` tracks meanwhile.
pub(super) struct InitialEvents {
    /// The objects in the order they first arrived; `None` where one was deleted since.
    objects: Vec<Option<Box<RawValue>>>,
    /// Each live object's place in `objects`, by key.
    slots: HashMap<String, usize>,
    /// The resourceVersion to sync to: set only once an event other than ADDED came (the
    /// initial ADDED events are not in resourceVersion order), as `watchList`'s callback.
    resource_version: String,
    /// An event other than ADDED came (`eventReceivedBesidesAdded`).
    past_added: bool,
    /// Events received, bookmarks included (`eventCount`).
    events: usize,
    started: Instant,
    last_event: Option<Instant>,
    next_warning: Instant,
}

impl InitialEvents {
    /// An empty temporary store for a watch-list opened at `started`.
    pub(super) fn new(started: Instant) -> Self {
        InitialEvents {
            objects: Vec::new(),
            slots: HashMap::new(),
            resource_version: String::new(),
            past_added: false,
            events: 0,
            started,
            last_event: None,
            next_warning: started + BOOKMARK_WARNING_INTERVAL,
        }
    }

    /// Takes one event of the stream (`handleAnyWatch`'s switch, into the temporary store):
    /// `Ok(true)` for the bookmark that ends the initial events, `Err` for an ERROR event or
    /// one that does not decode.
    pub(super) fn receive(&mut self, raw: RawEvent, now: Instant) -> Result<bool> {
        let (version, ended) = match raw.event_type.as_str() {
            kind @ ("ADDED" | "MODIFIED" | "DELETED") => {
                let head: ObjectHead = parse(&raw)?;
                let meta = ObjectMeta {
                    name: head.metadata.name,
                    namespace: head.metadata.namespace,
                    ..ObjectMeta::default()
                };
                let key = object_key(&meta);
                match kind {
                    "ADDED" => self.put(key, raw.object),
                    "MODIFIED" => {
                        self.past_added = true;
                        self.put(key, raw.object);
                    }
                    _ => {
                        self.past_added = true;
                        self.remove(&key);
                    }
                }
                (head.metadata.resource_version, false)
            }
            "BOOKMARK" => {
                let head: BookmarkHead = parse(&raw)?;
                self.past_added = true;
                (head.metadata.resource_version, ends_initial_events(head.metadata.annotations.as_ref()))
            }
            // An ERROR's Status becomes its API error (e.g. 410 Expired); any other type is
            // not a watch event.
            _ => {
                return Err(decode_event::<IgnoredAny>(raw)
                    .err()
                    .unwrap_or_else(|| Error::Decode("watch event".into())));
            }
        };
        if self.past_added
            && let Some(version) = version.filter(|v| !v.is_empty())
        {
            self.resource_version = version;
        }
        self.events += 1;
        self.last_event = Some(now);
        Ok(ended)
    }

    fn put(&mut self, key: String, object: Box<RawValue>) {
        match self.slots.get(&key) {
            Some(&slot) => self.objects[slot] = Some(object),
            None => {
                self.slots.insert(key, self.objects.len());
                self.objects.push(Some(object));
            }
        }
    }

    fn remove(&mut self, key: &str) {
        if let Some(slot) = self.slots.remove(key) {
            self.objects[slot] = None;
        }
    }

    /// How many objects the temporary store holds.
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// How many events came, bookmarks included.
    pub(super) fn events(&self) -> usize {
        self.events
    }

    /// The objects, in arrival order, and the resourceVersion to sync to.
    pub(super) fn into_parts(self) -> (Vec<Box<RawValue>>, String) {
        (self.objects.into_iter().flatten().collect(), self.resource_version)
    }

    /// When [`InitialEvents::warning`] is next due.
    pub(super) fn next_warning(&self) -> Instant {
        self.next_warning
    }

    /// client-go's `produceWarningIfExpired`, on each tick of its 10 s ticker: why the end
    /// bookmark is overdue (nothing came since the watch began, or nothing for 10 s), if it
    /// is. `name` is the reflector's.
    pub(super) fn warning(&mut self, name: &str, now: Instant) -> Option<String> {
        if now < self.next_warning {
            return None;
        }
        // A ticker drops the ticks it could not deliver.
        while self.next_warning <= now {
            self.next_warning += BOOKMARK_WARNING_INTERVAL;
        }
        match self.last_event {
            None => Some(format!(
                "{name}: awaiting required bookmark event for initial events stream, no events received for {:?}",
                now.duration_since(self.started)
            )),
            Some(last) if now.duration_since(last) >= BOOKMARK_WARNING_INTERVAL => Some(format!(
                "{name}: hasn't received required bookmark event marking the end of initial events stream, received last event {:?} ago",
                now.duration_since(last)
            )),
            Some(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(event_type: &str, object: serde_json::Value) -> RawEvent {
        RawEvent { event_type: event_type.into(), object: serde_json::value::to_raw_value(&object).unwrap() }
    }

    fn object(name: &str, version: &str) -> serde_json::Value {
        json!({"metadata": {"namespace": "default", "name": name, "resourceVersion": version}})
    }

    fn names(initial: InitialEvents) -> (Vec<String>, String) {
        let (objects, version) = initial.into_parts();
        let names = objects
            .iter()
            .map(|o| serde_json::from_str::<serde_json::Value>(o.get()).unwrap()["metadata"]["name"].to_string())
            .map(|n| n.trim_matches('"').to_string())
            .collect();
        (names, version)
    }

    #[test]
    fn events_are_held_until_the_bookmark_that_ends_them() {
        let now = Instant::now();
        let mut initial = InitialEvents::new(now);
        for (name, version) in [("b", "7"), ("a", "9"), ("c", "8")] {
            assert!(!initial.receive(raw("ADDED", object(name, version)), now).unwrap());
        }
        assert_eq!(initial.resource_version, "", "ADDED events are not in resourceVersion order");
        // A plain bookmark moves the version on but does not end the initial events.
        let plain = json!({"metadata": {"resourceVersion": "10"}});
        assert!(!initial.receive(raw("BOOKMARK", plain), now).unwrap());
        assert_eq!(initial.resource_version, "10");
        assert!(!initial.receive(raw("MODIFIED", object("a", "11")), now).unwrap());
        assert!(!initial.receive(raw("DELETED", object("c", "12")), now).unwrap());
        assert_eq!(initial.len(), 2);
        let end = json!({"metadata": {"resourceVersion": "12", "annotations": {"k8s.io/initial-events-end": "true"}}});
        assert!(initial.receive(raw("BOOKMARK", end), now).unwrap());
        assert_eq!(initial.events(), 7);
        assert_eq!(names(initial), (vec!["b".to_string(), "a".to_string()], "12".to_string()));
    }

    #[test]
    fn only_a_true_annotation_ends_the_initial_events() {
        let now = Instant::now();
        let mut initial = InitialEvents::new(now);
        let not_true =
            json!({"metadata": {"resourceVersion": "3", "annotations": {"k8s.io/initial-events-end": "false"}}});
        assert!(!initial.receive(raw("BOOKMARK", not_true), now).unwrap());
        // Cluster-scoped keys are bare names; a re-added key keeps its place.
        let node = |version: &str| json!({"metadata": {"name": "n", "resourceVersion": version}});
        initial.receive(raw("ADDED", node("4")), now).unwrap();
        initial.receive(raw("ADDED", node("5")), now).unwrap();
        assert_eq!(initial.slots.keys().collect::<Vec<_>>(), ["n"]);
        assert_eq!(initial.resource_version, "5", "past the first bookmark, ADDED events count");
    }

    #[test]
    fn error_events_and_garbage_fail() {
        let now = Instant::now();
        let mut initial = InitialEvents::new(now);
        let status =
            json!({"kind": "Status", "status": "Failure", "reason": "Expired", "code": 410, "message": "too old"});
        let error = initial.receive(raw("ERROR", status), now).unwrap_err();
        assert!(error.is_gone(), "{error}");
        assert!(matches!(initial.receive(raw("ADDED", json!({"metadata": 7})), now), Err(Error::Decode(_))));
        assert!(matches!(initial.receive(raw("SURPRISE", json!({})), now), Err(Error::Decode(_))));
        assert_eq!(initial.events(), 0);
    }

    #[test]
    fn warnings_every_ten_seconds_while_the_end_bookmark_is_overdue() {
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        let mut initial = InitialEvents::new(start);
        assert_eq!(initial.warning("r", at(5)), None, "not due yet");
        let silent = initial.warning("r", at(10)).expect("a warning");
        assert!(silent.starts_with("r: awaiting required bookmark event"), "{silent}");
        assert_eq!(initial.next_warning(), at(20));
        initial.receive(raw("ADDED", object("a", "1")), at(15)).unwrap();
        assert_eq!(initial.warning("r", at(20)), None, "an event came within the interval");
        let stalled = initial.warning("r", at(31)).expect("a warning");
        assert!(stalled.starts_with("r: hasn't received required bookmark event"), "{stalled}");
        assert_eq!(initial.next_warning(), at(40), "missed ticks are dropped");
    }
}
