//! client-go's `util/retry`: `RetryOnConflict` with `DefaultBackoff` or `DefaultRetry`.

use std::time::Duration;

use super::Error;

/// A `wait.Backoff` with jitter 0.1: at most `steps` attempts, the first wait `first`, each
/// next one `factor` times longer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    /// Attempts.
    pub steps: u32,
    /// The wait after the first attempt.
    pub first: Duration,
    /// How much longer each next wait is.
    pub factor: u32,
}

/// `retry.DefaultBackoff`: 4 steps, the first after 10 ms, each 5 times longer, jitter 0.1.
pub const DEFAULT_BACKOFF: Backoff = Backoff { steps: 4, first: Duration::from_millis(10), factor: 5 };
/// `retry.DefaultRetry`: 5 steps 10 ms apart, jitter 0.1.
pub const DEFAULT_RETRY: Backoff = Backoff { steps: 5, first: Duration::from_millis(10), factor: 1 };

/// `retry.RetryOnConflict(retry.DefaultBackoff, attempt)`: runs `attempt` until it does not
/// answer a conflict, at most four times; the last conflict is returned.
pub fn on_conflict<T>(attempt: impl FnMut() -> Result<T, Error>) -> Result<T, Error> {
    on_conflict_with(DEFAULT_BACKOFF, attempt)
}

/// `retry.RetryOnConflict(backoff, attempt)`: runs `attempt` until it does not answer a
/// conflict, at most `backoff.steps` times; the last conflict is returned.
pub fn on_conflict_with<T>(backoff: Backoff, mut attempt: impl FnMut() -> Result<T, Error>) -> Result<T, Error> {
    let mut delay = backoff.first;
    let mut step = 1;
    loop {
        match attempt() {
            Err(e) if e.is_conflict() && step < backoff.steps => {
                std::thread::sleep(delay.mul_f64(1.0 + 0.1 * crate::random::unit()));
                delay *= backoff.factor;
                step += 1;
            }
            other => return other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::ApiError;

    fn conflict() -> Error {
        Error::Api(Box::new(ApiError::from_response(409, b"not a Status", None)))
    }

    #[test]
    fn conflicts_are_retried_four_times_at_most() {
        let mut calls = 0;
        let result: Result<(), Error> = on_conflict(|| {
            calls += 1;
            Err(conflict())
        });
        assert!(result.unwrap_err().is_conflict());
        assert_eq!(calls, 4);
    }

    #[test]
    fn the_default_retry_tries_five_times() {
        let mut calls = 0;
        let result: Result<(), Error> = on_conflict_with(DEFAULT_RETRY, || {
            calls += 1;
            Err(conflict())
        });
        assert!(result.unwrap_err().is_conflict());
        assert_eq!(calls, 5);
    }

    #[test]
    fn other_outcomes_end_at_once() {
        let mut calls = 0;
        let result = on_conflict(|| {
            calls += 1;
            if calls == 2 { Ok(7) } else { Err(conflict()) }
        });
        assert_eq!((result.unwrap(), calls), (7, 2));
    }
}
