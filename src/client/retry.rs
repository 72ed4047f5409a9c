//! client-go's `util/retry`: `RetryOnConflict` with `DefaultBackoff`.

use std::time::Duration;

use super::Error;

/// `retry.DefaultBackoff`: 4 steps, the first after 10 ms, each 5 times longer, jitter 0.1.
const STEPS: u32 = 4;
const FIRST: Duration = Duration::from_millis(10);
const FACTOR: u32 = 5;

/// `retry.RetryOnConflict(retry.DefaultBackoff, attempt)`: runs `attempt` until it does not
/// answer a conflict, at most four times; the last conflict is returned.
pub fn on_conflict<T>(mut attempt: impl FnMut() -> Result<T, Error>) -> Result<T, Error> {
    let mut delay = FIRST;
    let mut step = 1;
    loop {
        match attempt() {
            Err(e) if e.is_conflict() && step < STEPS => {
                std::thread::sleep(delay.mul_f64(1.0 + 0.1 * crate::random::unit()));
                delay *= FACTOR;
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
    fn other_outcomes_end_at_once() {
        let mut calls = 0;
        let result = on_conflict(|| {
            calls += 1;
            if calls == 2 { Ok(7) } else { Err(conflict()) }
        });
        assert_eq!((result.unwrap(), calls), (7, 2));
    }
}
