//! Client-side rate limiting: the token bucket client-go puts in front of every request
//! (`flowcontrol.NewTokenBucketRateLimiter(qps, burst)`), sized by `--kube-api-qps` and
//! `--kube-api-burst`.

use std::time::{Duration, Instant};

use crate::apimachinery::flowcontrol::TokenBucket;

/// A client's request limiter. As `rest.RESTClientFor`, a non-positive `qps` means no limiter
/// at all; the burst is at least 1.
#[derive(Debug)]
pub struct RequestLimiter {
    bucket: Option<TokenBucket>,
}

impl RequestLimiter {
    /// A limiter of `qps` requests per second with bursts of `burst` (no limit when `qps` <= 0).
    pub fn new(qps: f32, burst: u32) -> RequestLimiter {
        let bucket = (qps > 0.0).then(|| TokenBucket::new(f64::from(qps), burst.max(1), Instant::now()));
        RequestLimiter { bucket }
    }

    /// Blocks until a token is available.
    pub fn acquire(&self) {
        if let Some(bucket) = &self.bucket {
            bucket.accept();
        }
    }

    /// Takes a token at `now` and says how long the caller must wait before using it.
    pub fn reserve(&self, now: Instant) -> Duration {
        self.bucket.as_ref().map_or(Duration::ZERO, |bucket| bucket.reserve(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_passes_then_callers_are_spaced_by_qps() {
        let bucket = RequestLimiter::new(10.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(bucket.reserve(t0), Duration::ZERO);
        }
        assert_eq!(bucket.reserve(t0), Duration::from_millis(100));
        assert_eq!(bucket.reserve(t0), Duration::from_millis(200));
    }

    #[test]
    fn non_positive_qps_is_unlimited() {
        let bucket = RequestLimiter::new(-1.0, 1);
        let t0 = Instant::now();
        for _ in 0..1000 {
            assert_eq!(bucket.reserve(t0), Duration::ZERO);
        }
        assert_eq!(RequestLimiter::new(0.0, 1).reserve(t0), Duration::ZERO);
        assert_eq!(RequestLimiter::new(0.0, 1).reserve(t0), Duration::ZERO);
    }

    #[test]
    fn a_zero_burst_counts_as_one() {
        let bucket = RequestLimiter::new(10.0, 0);
        let t0 = Instant::now();
        assert_eq!(bucket.reserve(t0), Duration::ZERO);
        assert_eq!(bucket.reserve(t0), Duration::from_millis(100));
    }
}
