//! The per-zone queue of nodes waiting for their NoExecute taint, after upstream's
//! `pkg/controller/nodelifecycle/scheduler/rate_limited_queue.go`: a unique priority queue by
//! time of processing, drained at the pace of a token bucket (burst 1) that the zone states
//! swap for a slower one, or for one that never accepts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::apimachinery::clock::Clock;
use crate::apimachinery::flowcontrol::TokenBucket;

/// `EvictionRateLimiterBurst`.
pub const EVICTION_RATE_LIMITER_BURST: u32 = 1;

/// A queued node name (`TimedValue`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimedValue {
    /// The node name.
    pub value: String,
    /// The node's uid.
    pub uid: String,
    /// When the value was added.
    pub added_at: Instant,
    /// When the value is due (again).
    pub process_at: Instant,
}

/// What a processing function says of a value: done, or retry after a wait.
pub type Outcome = (bool, Duration);

/// `flowcontrol.RateLimiter` as the queue uses it: a token bucket, or `NewFakeNeverRateLimiter`
/// for a QPS of zero.
enum Limiter {
    Bucket(TokenBucket),
    Never,
}

impl Limiter {
    fn new(qps: f32, now: Instant) -> Limiter {
        if qps <= 0.0 {
            Limiter::Never
        } else {
            Limiter::Bucket(TokenBucket::new(f64::from(qps), EVICTION_RATE_LIMITER_BURST, now))
        }
    }

    fn qps(&self) -> f32 {
        match self {
            Limiter::Bucket(bucket) => bucket.qps() as f32,
            Limiter::Never => 0.0,
        }
    }

    fn try_accept(&self, now: Instant) -> bool {
        match self {
            Limiter::Bucket(bucket) => bucket.try_accept(now),
            Limiter::Never => false,
        }
    }
}

/// `UniqueQueue`: values ordered by `process_at`; a value is added once until it is removed
/// with [`RateLimitedTimedQueue::remove`] (processing it keeps it in the set).
#[derive(Default)]
struct UniqueQueue {
    /// Sorted by `process_at`, earliest first; equal times keep insertion order.
    queue: Vec<TimedValue>,
    set: std::collections::HashSet<String>,
}

impl UniqueQueue {
    fn push(&mut self, value: TimedValue) {
        let at = self.queue.partition_point(|v| v.process_at <= value.process_at);
        self.queue.insert(at, value);
    }

    fn take(&mut self, value: &str) -> Option<TimedValue> {
        let at = self.queue.iter().position(|v| v.value == value)?;
        Some(self.queue.remove(at))
    }
}

/// `RateLimitedTimedQueue`.
pub struct RateLimitedTimedQueue {
    clock: Arc<dyn Clock>,
    queue: Mutex<UniqueQueue>,
    limiter: Mutex<Limiter>,
}

impl RateLimitedTimedQueue {
    /// A queue drained at `qps` (`NewTokenBucketRateLimiter(qps, EvictionRateLimiterBurst)`).
    pub fn new(qps: f32, clock: Arc<dyn Clock>) -> Self {
        let limiter = Limiter::new(qps, clock.now());
        RateLimitedTimedQueue { clock, queue: Mutex::new(UniqueQueue::default()), limiter: Mutex::new(limiter) }
    }

    /// `Add`: queues `value` for now unless it was added before and not removed since.
    pub fn add(&self, value: &str, uid: &str) -> bool {
        let now = self.clock.now();
        let mut queue = self.queue.lock();
        if !queue.set.insert(value.to_string()) {
            return false;
        }
        queue.push(TimedValue { value: value.into(), uid: uid.into(), added_at: now, process_at: now });
        true
    }

    /// `Remove`: drops `value` so that it can be added again; false if it was not there.
    pub fn remove(&self, value: &str) -> bool {
        let mut queue = self.queue.lock();
        if !queue.set.remove(value) {
            return false;
        }
        queue.take(value);
        true
    }

    /// `Try`: processes due values in order while the limiter gives tokens. A value `f` is
    /// done with leaves the queue but stays in the set; one to retry comes back after its wait.
    pub fn try_process(&self, mut f: impl FnMut(&TimedValue) -> Outcome) {
        let limiter = self.limiter.lock();
        let mut head = self.head();
        while let Some(value) = head {
            let now = self.clock.now();
            // The token is taken before the time is checked, as upstream.
            if !limiter.try_accept(now) {
                log::trace!("try rate limited for value {}", value.value);
                break;
            }
            if now < value.process_at {
                break;
            }
            let (done, wait) = f(&value);
            let mut queue = self.queue.lock();
            // Done: off the queue (still in the set). Not done: back for later.
            if let Some(mut queued) = queue.take(&value.value)
                && !done
            {
                queued.process_at = now + wait + Duration::from_nanos(1);
                queue.push(queued);
            }
            drop(queue);
            head = self.head();
        }
    }

    fn head(&self) -> Option<TimedValue> {
        self.queue.lock().queue.first().cloned()
    }

    /// `SwapLimiter`: a new limiter for `qps` unless it is the current rate; a bucket that was
    /// empty makes the new one start empty too.
    pub fn swap_limiter(&self, qps: f32) {
        let mut limiter = self.limiter.lock();
        if limiter.qps() == qps {
            return;
        }
        let now = self.clock.now();
        let replacement = Limiter::new(qps, now);
        if let Limiter::Bucket(bucket) = &replacement
            && !limiter.try_accept(now)
        {
            bucket.try_accept(now);
        }
        *limiter = replacement;
    }

    /// The values waiting, earliest first.
    #[cfg(test)]
    pub fn values(&self) -> Vec<String> {
        self.queue.lock().queue.iter().map(|v| v.value.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::clock::FakeClock;

    fn queue(qps: f32) -> (Arc<FakeClock>, RateLimitedTimedQueue) {
        let clock = Arc::new(FakeClock::new());
        (clock.clone(), RateLimitedTimedQueue::new(qps, clock))
    }

    fn drain(queue: &RateLimitedTimedQueue) -> Vec<String> {
        let mut seen = Vec::new();
        queue.try_process(|v| {
            seen.push(v.value.clone());
            (true, Duration::ZERO)
        });
        seen
    }

    #[test]
    fn values_are_unique_until_removed() {
        let (_, q) = queue(10.0);
        assert!(q.add("a", "1"));
        assert!(!q.add("a", "1"));
        assert_eq!(drain(&q), ["a"]);
        assert!(!q.add("a", "1"), "processed values stay in the set");
        assert!(q.remove("a"));
        assert!(!q.remove("a"));
        assert!(q.add("a", "1"));
    }

    #[test]
    fn the_token_bucket_paces_processing() {
        let (clock, q) = queue(0.1);
        for name in ["a", "b", "c"] {
            q.add(name, "");
        }
        assert_eq!(drain(&q), ["a"], "burst 1: one value at once");
        clock.advance(Duration::from_secs(5));
        assert!(drain(&q).is_empty());
        clock.advance(Duration::from_secs(5));
        assert_eq!(drain(&q), ["b"]);
        clock.advance(Duration::from_secs(10));
        assert_eq!(drain(&q), ["c"]);
        assert!(q.values().is_empty());
    }

    #[test]
    fn a_retried_value_waits() {
        let (clock, q) = queue(1000.0);
        q.add("a", "");
        let mut tries = 0;
        q.try_process(|_| {
            tries += 1;
            (false, Duration::from_millis(50))
        });
        assert_eq!(tries, 1);
        assert_eq!(q.values(), ["a"]);
        clock.advance(Duration::from_millis(51));
        assert_eq!(drain(&q), ["a"]);
    }

    #[test]
    fn a_zero_rate_never_processes_and_swapping_keeps_an_empty_bucket_empty() {
        let (clock, q) = queue(0.1);
        q.add("a", "");
        q.add("b", "");
        q.swap_limiter(0.0);
        clock.advance(Duration::from_secs(3600));
        assert!(drain(&q).is_empty());
        q.swap_limiter(0.1);
        assert!(drain(&q).is_empty(), "the never-limiter refuses, so its replacement starts empty");
        clock.advance(Duration::from_secs(10));
        assert_eq!(drain(&q), ["a"]);
        q.swap_limiter(1.0);
        assert!(drain(&q).is_empty(), "an empty bucket's replacement starts empty");
        clock.advance(Duration::from_secs(1));
        assert_eq!(drain(&q), ["b"]);
    }
}
