//! The token bucket of client-go's `flowcontrol.NewTokenBucketRateLimiter`, which is
//! golang.org/x/time/rate's `Limiter`: it starts full with `burst` tokens and refills at `qps`
//! tokens a second. The client paces its requests with it, the workqueue spaces retries,
//! node-lifecycle paces evictions and the Event recorder filters spam.
//!
//! Every method takes the time it acts at (from the caller's [`Clock`](super::clock::Clock)),
//! so that tests drive it with a fake clock.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The delay standing for "never" (golang.org/x/time/rate's `InfDuration`, the largest Go
/// duration).
pub const INFINITE_DELAY: Duration = Duration::from_nanos(i64::MAX as u64);

/// A token bucket with x/time/rate's semantics: `reserve` always takes a token (callers queue
/// up for tokens not yet produced), `try_accept` takes one only if it is there now. An infinite
/// `qps` never limits; a `qps` of zero or less never refills.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: u32,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Tokens at `last`; negative when reservations are waiting for tokens not yet produced.
    tokens: f64,
    /// When the tokens were last counted.
    last: Instant,
}

impl TokenBucket {
    /// A full bucket of `burst` tokens at `now`, refilled at `qps` tokens a second.
    pub fn new(qps: f64, burst: u32, now: Instant) -> TokenBucket {
        TokenBucket { qps, burst, state: Mutex::new(State { tokens: f64::from(burst), last: now }) }
    }

    /// `Reserve().Delay()`: takes a token at `now` and says how long the caller must wait
    /// before using it ([`INFINITE_DELAY`] when none will ever come). Each reservation pushes
    /// the next one a further `1/qps` out.
    pub fn reserve(&self, now: Instant) -> Duration {
        if self.qps == f64::INFINITY {
            return Duration::ZERO;
        }
        if self.burst == 0 {
            return INFINITE_DELAY;
        }
        let mut state = self.state.lock();
        let tokens = self.advance(&state, now) - 1.0;
        state.tokens = tokens;
        state.last = now;
        if tokens < 0.0 { self.duration_from(-tokens) } else { Duration::ZERO }
    }

    /// `TryAccept` (`AllowN(now, 1)`): takes a token at `now` if one is there, without
    /// waiting. A refusal changes nothing.
    pub fn try_accept(&self, now: Instant) -> bool {
        if self.qps == f64::INFINITY {
            return true;
        }
        if self.burst == 0 {
            return false;
        }
        let mut state = self.state.lock();
        let tokens = self.advance(&state, now) - 1.0;
        if tokens < 0.0 && !self.duration_from(-tokens).is_zero() {
            return false;
        }
        state.tokens = tokens;
        state.last = now;
        true
    }

    /// `Accept`: waits (sleeps) until a token is available.
    pub fn accept(&self) {
        let wait = self.reserve(Instant::now());
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
    }

    /// The refill rate in tokens per second.
    pub fn qps(&self) -> f64 {
        self.qps
    }

    /// `advance`: the tokens at `now`, refilled since the last count and capped at the burst. A
    /// `now` before the last count refills nothing.
    fn advance(&self, state: &State, now: Instant) -> f64 {
        let elapsed = now.saturating_duration_since(state.last);
        (state.tokens + self.tokens_from(elapsed)).min(f64::from(self.burst))
    }

    /// The tokens produced in `elapsed`.
    fn tokens_from(&self, elapsed: Duration) -> f64 {
        if self.qps <= 0.0 { 0.0 } else { elapsed.as_secs_f64() * self.qps }
    }

    /// The time it takes to produce `tokens` (truncated to nanoseconds, as Go does).
    fn duration_from(&self, tokens: f64) -> Duration {
        if self.qps <= 0.0 {
            return INFINITE_DELAY;
        }
        let nanos = tokens / self.qps * 1e9;
        if nanos > i64::MAX as f64 { INFINITE_DELAY } else { Duration::from_nanos(nanos as u64) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn burst_passes_then_callers_are_spaced_by_qps() {
        let t0 = Instant::now();
        let bucket = TokenBucket::new(10.0, 3, t0);
        for _ in 0..3 {
            assert_eq!(bucket.reserve(t0), Duration::ZERO);
        }
        assert_eq!(bucket.reserve(t0), ms(100));
        assert_eq!(bucket.reserve(t0), ms(200));
    }

    #[test]
    fn tokens_refill_up_to_burst() {
        let t0 = Instant::now();
        let bucket = TokenBucket::new(10.0, 2, t0);
        bucket.reserve(t0);
        bucket.reserve(t0);
        // A long pause refills only up to the burst size.
        let later = t0 + Duration::from_secs(60);
        assert_eq!(bucket.reserve(later), Duration::ZERO);
        assert_eq!(bucket.reserve(later), Duration::ZERO);
        assert_eq!(bucket.reserve(later), ms(100));
        // Half a period later the reserved token is half refilled.
        assert_eq!(bucket.reserve(later + ms(50)), ms(150));
    }

    #[test]
    fn try_accept_takes_a_token_only_when_one_is_there() {
        let t0 = Instant::now();
        let bucket = TokenBucket::new(0.1, 1, t0);
        assert!(bucket.try_accept(t0), "the bucket starts full");
        assert!(!bucket.try_accept(t0));
        assert!(!bucket.try_accept(t0 + Duration::from_secs(9)), "a refused try takes nothing");
        assert!(bucket.try_accept(t0 + ms(10_500)));
        assert!(!bucket.try_accept(t0 + ms(10_500)));
        assert!(TokenBucket::new(0.0, 1, t0).try_accept(t0));
    }

    #[test]
    fn edge_rates_and_bursts() {
        let t0 = Instant::now();
        let unlimited = TokenBucket::new(f64::INFINITY, 0, t0);
        assert_eq!(unlimited.reserve(t0), Duration::ZERO);
        assert!(unlimited.try_accept(t0));
        let empty = TokenBucket::new(10.0, 0, t0);
        assert_eq!(empty.reserve(t0), INFINITE_DELAY);
        assert!(!empty.try_accept(t0));
        let frozen = TokenBucket::new(0.0, 1, t0);
        assert_eq!(frozen.reserve(t0), Duration::ZERO);
        assert_eq!(frozen.reserve(t0 + Duration::from_secs(3600)), INFINITE_DELAY);
        assert!(!frozen.try_accept(t0 + Duration::from_secs(3600)));
    }

    #[test]
    fn a_time_before_the_last_count_refills_nothing() {
        let t0 = Instant::now();
        let bucket = TokenBucket::new(1.0, 1, t0 + Duration::from_secs(5));
        assert!(bucket.try_accept(t0));
        assert!(!bucket.try_accept(t0 + ms(999)));
        assert!(bucket.try_accept(t0 + Duration::from_secs(1)));
    }
}
