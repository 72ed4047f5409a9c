//! Upstream's `UIDTrackingControllerExpectations` (`pkg/controller/controller_utils.go`): what a
//! controller expects to see in its informer after its own writes, so that it does not act
//! again on a stale cache. Creations are counted; deletions are tracked by pod key, so that a
//! deletion is only counted once whoever deleted the pod.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// `ExpectationsTimeout`: expectations older than this are considered satisfied, in case a
/// watch event was missed.
pub const EXPECTATIONS_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// One controller's outstanding expectations (`ControlleeExpectations`).
#[derive(Debug)]
struct Expectation {
    add: i64,
    del: i64,
    timestamp: Instant,
    /// Keys (`namespace/name`) of the pods whose deletion is awaited.
    deleting: HashSet<String>,
}

/// Expectations of every controller object, by its key.
#[derive(Debug, Default)]
pub struct Expectations {
    entries: Mutex<HashMap<String, Expectation>>,
}

impl Expectations {
    /// `SatisfiedExpectations`: true when nothing is awaited, when what was awaited has been
    /// seen, or when the expectations expired.
    pub fn satisfied(&self, key: &str) -> bool {
        match self.entries.lock().get(key) {
            Some(e) => (e.add <= 0 && e.del <= 0) || e.timestamp.elapsed() > EXPECTATIONS_TIMEOUT,
            None => true,
        }
    }

    /// `ExpectCreations`: awaits `count` pod creations (replacing earlier expectations).
    pub fn expect_creations(&self, key: &str, count: usize) {
        let entry = Expectation { add: count as i64, del: 0, timestamp: Instant::now(), deleting: HashSet::new() };
        self.entries.lock().insert(key.to_string(), entry);
    }

    /// `ExpectDeletions` of the UID-tracking variant: awaits the deletion of these pods.
    pub fn expect_deletions(&self, key: &str, pod_keys: Vec<String>) {
        let del = pod_keys.len() as i64;
        let entry = Expectation { add: 0, del, timestamp: Instant::now(), deleting: pod_keys.into_iter().collect() };
        self.entries.lock().insert(key.to_string(), entry);
    }

    /// `SetExpectations`: awaits `count` creations and the deletion of these pods at once
    /// (replacing earlier expectations).
    pub fn expect(&self, key: &str, count: usize, pod_keys: Vec<String>) {
        let del = pod_keys.len() as i64;
        let deleting = pod_keys.into_iter().collect();
        let entry = Expectation { add: count as i64, del, timestamp: Instant::now(), deleting };
        self.entries.lock().insert(key.to_string(), entry);
    }

    /// `CreationObserved`: one awaited creation was seen (or will never happen).
    pub fn creation_observed(&self, key: &str) {
        if let Some(e) = self.entries.lock().get_mut(key) {
            e.add -= 1;
        }
    }

    /// `DeletionObserved`: the pod is gone (or its deletion failed); counted only once.
    pub fn deletion_observed(&self, key: &str, pod_key: &str) {
        if let Some(e) = self.entries.lock().get_mut(key)
            && e.deleting.remove(pod_key)
        {
            e.del -= 1;
        }
    }

    /// `DeleteExpectations`: the controller object is gone.
    pub fn delete(&self, key: &str) {
        self.entries.lock().remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creations_and_tracked_deletions_are_counted_down() {
        let expectations = Expectations::default();
        assert!(expectations.satisfied("ns/rs"));
        expectations.expect_creations("ns/rs", 2);
        assert!(!expectations.satisfied("ns/rs"));
        expectations.creation_observed("ns/rs");
        assert!(!expectations.satisfied("ns/rs"));
        expectations.creation_observed("ns/rs");
        assert!(expectations.satisfied("ns/rs"));

        expectations.expect_deletions("ns/rs", vec!["ns/a".into(), "ns/b".into()]);
        expectations.deletion_observed("ns/rs", "ns/a");
        expectations.deletion_observed("ns/rs", "ns/a");
        expectations.deletion_observed("ns/rs", "ns/other");
        assert!(!expectations.satisfied("ns/rs"), "each pod counts once");
        expectations.deletion_observed("ns/rs", "ns/b");
        assert!(expectations.satisfied("ns/rs"));
        expectations.expect_creations("ns/rs", 1);
        expectations.delete("ns/rs");
        assert!(expectations.satisfied("ns/rs"));

        // Creations and deletions awaited at once (the DaemonSet controller's syncNodes).
        expectations.expect("ns/ds", 1, vec!["ns/old".into()]);
        expectations.creation_observed("ns/ds");
        assert!(!expectations.satisfied("ns/ds"));
        expectations.deletion_observed("ns/ds", "ns/old");
        assert!(expectations.satisfied("ns/ds"));
    }
}
