//! Rate limiters deciding how long a failed item waits before it is retried
//! (client-go's default_rate_limiters.go).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::apimachinery::clock::Clock;
use crate::apimachinery::flowcontrol::TokenBucket;

/// Decides how long an item waits before it is added again.
pub trait RateLimiter<T>: Send + Sync {
    /// How long `item` should wait now; records one more requeue of it.
    fn when(&self, item: &T) -> Duration;
    /// Stops tracking `item` (it succeeded, or was given up on).
    fn forget(&self, item: &T);
    /// How many times `item` has been requeued since it was last forgotten.
    fn num_requeues(&self, item: &T) -> u32;
}

/// client-go's `DefaultControllerRateLimiter`: the larger of a per-item exponential backoff
/// (5ms doubling up to 1000s) and an overall token bucket (10 qps, burst 100) that only bounds
/// the speed of retries.
pub fn default_controller_rate_limiter<T>(clock: Arc<dyn Clock>) -> MaxOfRateLimiter<T>
where
    T: Clone + Eq + Hash + Send + Sync + 'static,
{
    MaxOfRateLimiter::new(vec![
        Box::new(ItemExponentialFailureRateLimiter::new(Duration::from_millis(5), Duration::from_secs(1000))),
        Box::new(BucketRateLimiter::new(10.0, 100, clock)),
    ])
}

/// Waits `base * 2^failures` for an item that has failed `failures` times, never more than `max`.
pub struct ItemExponentialFailureRateLimiter<T> {
    base: Duration,
    max: Duration,
    failures: Mutex<HashMap<T, u32>>,
}

impl<T: Clone + Eq + Hash> ItemExponentialFailureRateLimiter<T> {
    /// A limiter starting at `base` and doubling per failure up to `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        ItemExponentialFailureRateLimiter { base, max, failures: Mutex::new(HashMap::new()) }
    }

    /// `base * 2^exponent`, or `max` when that is larger or does not fit.
    fn backoff(&self, exponent: u32) -> Duration {
        let exponent = i32::try_from(exponent).unwrap_or(i32::MAX);
        let nanos = self.base.as_nanos() as f64 * 2f64.powi(exponent);
        if nanos > i64::MAX as f64 {
            return self.max;
        }
        Duration::from_nanos(nanos as u64).min(self.max)
    }
}

impl<T: Clone + Eq + Hash + Send + Sync> RateLimiter<T> for ItemExponentialFailureRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        let exponent = {
            let mut failures = self.failures.lock();
            match failures.get_mut(item) {
                Some(count) => {
                    let exponent = *count;
                    *count = count.saturating_add(1);
                    exponent
                }
                None => {
                    failures.insert(item.clone(), 1);
                    0
                }
            }
        };
        self.backoff(exponent)
    }

    fn forget(&self, item: &T) {
        self.failures.lock().remove(item);
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.failures.lock().get(item).copied().unwrap_or(0)
    }
}

/// A token bucket shared by all items: `burst` retries go at once, then one every `1/qps`.
///
/// Like golang.org/x/time/rate's `Limiter.Reserve().Delay()`, every call reserves a token even if
/// it has to wait for it, so successive calls are spaced further and further apart. It counts
/// no requeues and forgets nothing.
pub struct BucketRateLimiter {
    clock: Arc<dyn Clock>,
    bucket: TokenBucket,
}

impl BucketRateLimiter {
    /// A full bucket of `burst` tokens, refilled at `qps` tokens a second.
    pub fn new(qps: f64, burst: u32, clock: Arc<dyn Clock>) -> Self {
        let bucket = TokenBucket::new(qps, burst, clock.now());
        BucketRateLimiter { clock, bucket }
    }

    /// Reserves one token, returning how long to wait until it exists.
    fn reserve(&self) -> Duration {
        self.bucket.reserve(self.clock.now())
    }
}

impl<T> RateLimiter<T> for BucketRateLimiter {
    fn when(&self, _item: &T) -> Duration {
        self.reserve()
    }

    fn forget(&self, _item: &T) {}

    fn num_requeues(&self, _item: &T) -> u32 {
        0
    }
}

/// Asks every limiter and keeps the worst answer. Every limiter records the requeue, and
/// `forget` forgets in all of them.
pub struct MaxOfRateLimiter<T> {
    limiters: Vec<Box<dyn RateLimiter<T>>>,
}

impl<T> MaxOfRateLimiter<T> {
    /// A limiter that answers the longest delay of `limiters`.
    pub fn new(limiters: Vec<Box<dyn RateLimiter<T>>>) -> Self {
        MaxOfRateLimiter { limiters }
    }
}

impl<T> RateLimiter<T> for MaxOfRateLimiter<T> {
    fn when(&self, item: &T) -> Duration {
        // Every limiter must see the call (each records it), so no short-circuiting here.
        self.limiters.iter().map(|l| l.when(item)).fold(Duration::ZERO, Duration::max)
    }

    fn forget(&self, item: &T) {
        for limiter in &self.limiters {
            limiter.forget(item);
        }
    }

    fn num_requeues(&self, item: &T) -> u32 {
        self.limiters.iter().map(|l| l.num_requeues(item)).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::apimachinery::clock::FakeClock;
    use crate::apimachinery::flowcontrol::INFINITE_DELAY;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn exponential_doubles_from_base_and_caps_at_max() {
        let limiter = ItemExponentialFailureRateLimiter::new(ms(5), Duration::from_secs(1000));
        let delays: Vec<Duration> = (0..5).map(|_| limiter.when(&"a")).collect();
        assert_eq!(delays, vec![ms(5), ms(10), ms(20), ms(40), ms(80)]);
        assert_eq!(limiter.num_requeues(&"a"), 5);
        // 5ms * 2^18 = 1310.72s, over the cap.
        for _ in 5..18 {
            limiter.when(&"a");
        }
        assert_eq!(limiter.when(&"a"), Duration::from_secs(1000));
    }

    #[test]
    fn exponential_survives_huge_exponents() {
        let limiter = ItemExponentialFailureRateLimiter::new(ms(1), Duration::from_secs(60));
        limiter.failures.lock().insert("a", u32::MAX);
        assert_eq!(limiter.when(&"a"), Duration::from_secs(60));
        assert_eq!(limiter.num_requeues(&"a"), u32::MAX);
    }

    #[test]
    fn exponential_tracks_items_separately_and_forgets() {
        let limiter = ItemExponentialFailureRateLimiter::new(ms(1), ms(1000));
        assert_eq!(limiter.when(&"a"), ms(1));
        assert_eq!(limiter.when(&"a"), ms(2));
        assert_eq!(limiter.when(&"b"), ms(1));
        assert_eq!(limiter.num_requeues(&"a"), 2);
        limiter.forget(&"a");
        assert_eq!(limiter.num_requeues(&"a"), 0);
        assert_eq!(limiter.when(&"a"), ms(1));
        assert_eq!(limiter.num_requeues(&"b"), 1);
    }

    #[test]
    fn bucket_allows_burst_then_spaces_by_one_over_qps() {
        let clock = Arc::new(FakeClock::new());
        let limiter = BucketRateLimiter::new(10.0, 3, clock.clone());
        let when = |l: &BucketRateLimiter| RateLimiter::<&str>::when(l, &"x");
        assert_eq!([when(&limiter), when(&limiter), when(&limiter)], [Duration::ZERO; 3]);
        assert_eq!(when(&limiter), ms(100));
        assert_eq!(when(&limiter), ms(200));
        // One second later the two reservations are paid and 8 tokens are back, capped at 3.
        clock.advance(Duration::from_secs(1));
        assert_eq!([when(&limiter), when(&limiter), when(&limiter)], [Duration::ZERO; 3]);
        assert_eq!(when(&limiter), ms(100));
        clock.advance(ms(50));
        assert_eq!(when(&limiter), ms(150));
    }

    #[test]
    fn bucket_edge_cases() {
        let clock: Arc<dyn Clock> = Arc::new(FakeClock::new());
        let unlimited = BucketRateLimiter::new(f64::INFINITY, 0, clock.clone());
        assert_eq!(RateLimiter::<u8>::when(&unlimited, &0), Duration::ZERO);
        let empty = BucketRateLimiter::new(10.0, 0, clock.clone());
        assert_eq!(RateLimiter::<u8>::when(&empty, &0), INFINITE_DELAY);
        let frozen = BucketRateLimiter::new(0.0, 1, clock);
        assert_eq!(RateLimiter::<u8>::when(&frozen, &0), Duration::ZERO);
        assert_eq!(RateLimiter::<u8>::when(&frozen, &0), INFINITE_DELAY);
        assert_eq!(RateLimiter::<u8>::num_requeues(&frozen, &0), 0);
    }

    #[test]
    fn max_of_takes_the_worst_and_forgets_everywhere() {
        let clock = Arc::new(FakeClock::new());
        let limiter: MaxOfRateLimiter<&str> = MaxOfRateLimiter::new(vec![
            Box::new(ItemExponentialFailureRateLimiter::new(ms(5), ms(1000))),
            Box::new(ItemExponentialFailureRateLimiter::new(ms(1), ms(1000))),
            Box::new(BucketRateLimiter::new(1.0, 1, clock)),
        ]);
        assert_eq!(limiter.when(&"a"), ms(5));
        assert_eq!(limiter.when(&"a"), Duration::from_secs(1));
        assert_eq!(limiter.when(&"a"), Duration::from_secs(2));
        assert_eq!(limiter.num_requeues(&"a"), 3);
        limiter.forget(&"a");
        assert_eq!(limiter.num_requeues(&"a"), 0);
    }

    #[test]
    fn default_controller_limiter_is_exponential_within_the_burst() {
        let limiter = default_controller_rate_limiter::<String>(Arc::new(FakeClock::new()));
        let item = "ns/name".to_string();
        assert_eq!(limiter.when(&item), ms(5));
        assert_eq!(limiter.when(&item), ms(10));
        assert_eq!(limiter.num_requeues(&item), 2);
        for i in 0..98 {
            limiter.when(&i.to_string());
        }
        // The bucket's 100 tokens are gone: the next retry of a fresh item waits 1/10s.
        assert_eq!(limiter.when(&"fresh".to_string()), ms(100));
    }
}
