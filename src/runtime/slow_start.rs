//! Many similar writes at once. `slowStartBatch` (`pkg/controller/replicaset`, and the Job
//! controller's copy of it) sends pod creations in batches of 1, 2, 4, … so that a request
//! bound to fail (quota, admission) fails once, not a thousand times; [`map_concurrently`] runs
//! the writes of a batch, or a ReplicaSet's pod deletions, side by side.
//!
//! Upstream starts a goroutine for every write. A thread each would be 500 threads for a burst
//! of 500 pods (275 at the scale bench's peak), so the writes share at most
//! [`MAX_CONCURRENT_WRITES`] threads: the client's rate limiter, not the thread count, is what
//! bounds their rate.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `SlowStartInitialBatchSize`.
pub const SLOW_START_INITIAL_BATCH: usize = 1;

/// The most threads one batch of writes runs on. At the latency of a loaded API server
/// (10–50 ms a write) 32 threads keep 600–3,000 writes a second in flight, above any client
/// rate limit a controller manager is given.
pub const MAX_CONCURRENT_WRITES: usize = 32;

/// `slowStartBatch`: calls `call` `count` times in batches of 1, 2, 4, … running each batch
/// concurrently, and stops after the first batch with a failure. Returns how many calls
/// succeeded and the first error.
pub fn slow_start_batch<E: Send>(count: usize, call: impl Fn() -> Result<(), E> + Sync) -> (usize, Option<E>) {
    let mut remaining = count;
    let mut successes = 0;
    let mut batch = remaining.min(SLOW_START_INITIAL_BATCH);
    while batch > 0 {
        let results = map_concurrently(&vec![(); batch], MAX_CONCURRENT_WRITES, |()| call());
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

/// Calls `call` on every item, concurrently on at most `max_threads` threads (writes:
/// [`MAX_CONCURRENT_WRITES`]), and returns the results in the items' order. One item, or one
/// thread, runs on the calling thread.
pub fn map_concurrently<T: Sync, R: Send>(items: &[T], max_threads: usize, call: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let threads = items.len().min(max_threads);
    if threads <= 1 {
        return items.iter().map(call).collect();
    }
    let next = AtomicUsize::new(0);
    let take_items = || {
        let mut done = Vec::new();
        loop {
            let index = next.fetch_add(1, Ordering::Relaxed);
            let Some(item) = items.get(index) else { return done };
            done.push((index, call(item)));
        }
    };
    let mut results: Vec<(usize, R)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads).map(|_| scope.spawn(take_items)).collect();
        workers.into_iter().filter_map(|worker| worker.join().ok()).flatten().collect()
    });
    results.sort_unstable_by_key(|(index, _)| *index);
    results.into_iter().map(|(_, result)| result).collect()
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

    #[test]
    fn writes_run_on_a_bounded_number_of_threads_and_answer_in_order() {
        let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let items: Vec<usize> = (0..200).collect();
        let results = map_concurrently(&items, MAX_CONCURRENT_WRITES, |n| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::yield_now();
            running.fetch_sub(1, Ordering::SeqCst);
            n * 2
        });
        assert_eq!(results, (0..200).map(|n| n * 2).collect::<Vec<_>>(), "every item once, in order");
        let most = most.load(Ordering::SeqCst);
        assert!((1..=MAX_CONCURRENT_WRITES).contains(&most), "{most} at once");
        assert_eq!(map_concurrently(&[7], MAX_CONCURRENT_WRITES, |n| n + 1), [8]);
        assert_eq!(map_concurrently(&[1, 2, 3], 1, |n| n + 1), [2, 3, 4], "one thread: the caller's");
        assert!(map_concurrently(&[] as &[u8], MAX_CONCURRENT_WRITES, |n| *n).is_empty());
    }
}
