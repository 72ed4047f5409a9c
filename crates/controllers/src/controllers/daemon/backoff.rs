//! client-go's `flowcontrol.Backoff` as the DaemonSet controller uses it for failed daemon
//! pods (`NewBackOff(1s, 15m)`, no jitter): per key, the delay doubles at each `next` up to the
//! maximum; an entry untouched for twice the maximum starts over and is collected by `gc`.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// `failedPodsBackoff`'s initial delay (kube-controller-manager's `startDaemonSetController`).
pub const INITIAL: Duration = Duration::from_secs(1);
/// Its maximum delay.
pub const MAX: Duration = Duration::from_secs(15 * 60);

#[derive(Debug, Clone, Copy)]
struct Entry {
    backoff: Duration,
    last_update: Instant,
}

#[derive(Debug)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
    entries: Mutex<HashMap<String, Entry>>,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff::new(INITIAL, MAX)
    }
}

impl Backoff {
    pub fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff { initial, max, entries: Mutex::new(HashMap::new()) }
    }

    fn expired(&self, entry: &Entry, now: Instant) -> bool {
        now.saturating_duration_since(entry.last_update) > 2 * self.max
    }

    /// `Get`: the key's current delay (zero when unknown).
    pub fn get(&self, key: &str) -> Duration {
        self.entries.lock().get(key).map_or(Duration::ZERO, |e| e.backoff)
    }

    /// `Next`: the first delay for a new or expired key, else the doubled one (capped).
    pub fn next(&self, key: &str, now: Instant) {
        let mut entries = self.entries.lock();
        let backoff = match entries.get(key) {
            Some(entry) if !self.expired(entry, now) => (entry.backoff * 2).min(self.max),
            _ => self.initial,
        };
        entries.insert(key.to_string(), Entry { backoff, last_update: now });
    }

    /// `IsInBackOffSinceUpdate`: less than the key's delay passed since its last `next`.
    pub fn in_backoff_since_update(&self, key: &str, now: Instant) -> bool {
        let entries = self.entries.lock();
        let Some(entry) = entries.get(key) else { return false };
        !self.expired(entry, now) && now.saturating_duration_since(entry.last_update) < entry.backoff
    }

    /// `GC`: forgets expired keys.
    pub fn gc(&self, now: Instant) {
        let mut entries = self.entries.lock();
        entries.retain(|_, entry| now.saturating_duration_since(entry.last_update) <= 2 * self.max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_up_to_the_maximum_and_expire() {
        let backoff = Backoff::new(Duration::from_secs(1), Duration::from_secs(4));
        let t0 = Instant::now();
        assert!(!backoff.in_backoff_since_update("k", t0));
        backoff.next("k", t0);
        assert!(backoff.in_backoff_since_update("k", t0 + Duration::from_millis(500)));
        assert!(!backoff.in_backoff_since_update("k", t0 + Duration::from_secs(1)));
        for _ in 0..4 {
            backoff.next("k", t0);
        }
        assert_eq!(backoff.get("k"), Duration::from_secs(4));
        let later = t0 + Duration::from_secs(9);
        backoff.next("k", later);
        assert_eq!(backoff.get("k"), Duration::from_secs(1), "an expired entry starts over");
        backoff.gc(later + Duration::from_secs(9));
        assert_eq!(backoff.get("k"), Duration::ZERO);
    }
}
