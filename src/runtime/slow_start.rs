//! `slowStartBatch` (`pkg/controller/replicaset`, and the Job controller's copy of it): many
//! similar writes (pod creations) in batches of 1, 2, 4, … so that a request bound to fail
//! (quota, admission) fails once, not a thousand times.

/// `SlowStartInitialBatchSize`.
pub const SLOW_START_INITIAL_BATCH: usize = 1;

/// `slowStartBatch`: calls `call` `count` times in batches of 1, 2, 4, … running each batch
/// concurrently, and stops after the first batch with a failure. Returns how many calls
/// succeeded and the first error.
pub fn slow_start_batch<E: Send>(count: usize, call: impl Fn() -> Result<(), E> + Sync) -> (usize, Option<E>) {
    let mut remaining = count;
    let mut successes = 0;
    let mut batch = remaining.min(SLOW_START_INITIAL_BATCH);
    while batch > 0 {
        let results: Vec<Result<(), E>> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..batch).map(|_| scope.spawn(&call)).collect();
            threads.into_iter().filter_map(|t| t.join().ok()).collect()
        });
        let failed = batch - results.iter().filter(|r| r.is_ok()).count();
        successes += batch - failed;
        if failed > 0 {
            return (successes, results.into_iter().find_map(Result::err));
        }
        remaining -= batch;
        batch = (2 * batch).min(remaining);
    }
    (successes, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn slow_start_stops_after_the_first_failing_batch() {
        let calls = AtomicUsize::new(0);
        let (ok, err) = slow_start_batch(10, || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            if n >= 4 { Err("quota") } else { Ok(()) }
        });
        // Batches 1, 2, 4: the third batch has one success and three failures.
        assert_eq!(calls.load(Ordering::SeqCst), 7);
        assert_eq!((ok, err), (4, Some("quota")));
        assert_eq!(slow_start_batch::<()>(5, || Ok(())), (5, None));
        assert_eq!(slow_start_batch::<()>(0, || Ok(())), (0, None));
    }
}
