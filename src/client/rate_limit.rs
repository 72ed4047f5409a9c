//! Client-side rate limiting: the token bucket client-go puts in front of every request
//! (`flowcontrol.NewTokenBucketRateLimiter(qps, burst)`), sized by `--kube-api-qps` and
//! `--kube-api-burst`.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A token bucket refilled at `qps` tokens per second and holding at most `burst` tokens.
/// A non-positive `qps` disables limiting.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<BucketState>,
}

#[derive(Debug)]
struct BucketState {
    /// Tokens available at `at`; negative when callers have reserved tokens not yet refilled.
    tokens: f64,
    at: Instant,
}

impl TokenBucket {
    pub fn new(qps: f32, burst: u32) -> TokenBucket {
        TokenBucket::starting_at(qps, burst, Instant::now())
    }

    /// A full bucket at `now` (of the caller's clock, e.g. a fake one in tests).
    pub fn starting_at(qps: f32, burst: u32, now: Instant) -> TokenBucket {
        let burst = f64::from(burst.max(1));
        TokenBucket { qps: f64::from(qps), burst, state: Mutex::new(BucketState { tokens: burst, at: now }) }
    }

    /// Blocks until a token is available.
    pub fn acquire(&self) {
        let wait = self.reserve(Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }

    /// Takes a token at `now` and says how long the caller must wait before using it. Waiting
    /// callers queue up in order: each reservation pushes the next one a further `1/qps` out.
    pub fn reserve(&self, now: Instant) -> Duration {
        if self.qps <= 0.0 {
            return Duration::ZERO;
        }
        let mut state = self.state.lock();
        let elapsed = now.saturating_duration_since(state.at).as_secs_f64();
        state.tokens = (state.tokens + elapsed * self.qps).min(self.burst);
        state.at = now.max(state.at);
        state.tokens -= 1.0;
        if state.tokens >= 0.0 { Duration::ZERO } else { Duration::from_secs_f64(-state.tokens / self.qps) }
    }

    /// client-go's `TryAccept`: takes a token at `now` if one is available, without waiting.
    /// A non-positive `qps` accepts everything, as [`TokenBucket::reserve`] does.
    pub fn try_accept(&self, now: Instant) -> bool {
        if self.qps <= 0.0 {
            return true;
        }
        let mut state = self.state.lock();
        let elapsed = now.saturating_duration_since(state.at).as_secs_f64();
        let tokens = (state.tokens + elapsed * self.qps).min(self.burst);
        state.at = now.max(state.at);
        state.tokens = tokens;
        if tokens < 1.0 {
            return false;
        }
        state.tokens -= 1.0;
        true
    }

    /// The refill rate in tokens per second.
    pub fn qps(&self) -> f64 {
        self.qps
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_passes_then_callers_are_spaced_by_qps() {
        let bucket = TokenBucket::new(10.0, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert_eq!(bucket.reserve(t0), Duration::ZERO);
        }
        assert_eq!(bucket.reserve(t0), Duration::from_millis(100));
        assert_eq!(bucket.reserve(t0), Duration::from_millis(200));
    }

    #[test]
    fn tokens_refill_up_to_burst() {
        let bucket = TokenBucket::new(10.0, 2);
        let t0 = Instant::now();
        bucket.reserve(t0);
        bucket.reserve(t0);
        // A long pause refills only up to the burst size.
        let later = t0 + Duration::from_secs(60);
        assert_eq!(bucket.reserve(later), Duration::ZERO);
        assert_eq!(bucket.reserve(later), Duration::ZERO);
        assert_eq!(bucket.reserve(later), Duration::from_millis(100));
        // Half a period later the reserved token is half refilled.
        assert_eq!(bucket.reserve(later + Duration::from_millis(50)), Duration::from_millis(150));
    }

    #[test]
    fn try_accept_takes_a_token_only_when_one_is_there() {
        let bucket = TokenBucket::new(0.1, 1);
        let t0 = Instant::now();
        assert!(bucket.try_accept(t0), "the bucket starts full");
        assert!(!bucket.try_accept(t0));
        assert!(!bucket.try_accept(t0 + Duration::from_secs(9)), "a refused try takes nothing");
        assert!(bucket.try_accept(t0 + Duration::from_millis(10_500)));
        assert!(!bucket.try_accept(t0 + Duration::from_millis(10_500)));
        assert!(TokenBucket::new(0.0, 1).try_accept(t0));
    }

    #[test]
    fn non_positive_qps_is_unlimited() {
        let bucket = TokenBucket::new(-1.0, 1);
        let t0 = Instant::now();
        for _ in 0..1000 {
            assert_eq!(bucket.reserve(t0), Duration::ZERO);
        }
    }
}
