//! Many similar writes at once. `slowStartBatch` (`pkg/controller/replicaset`, and the Job
//! controller's copy of it) sends pod creations in batches of 1, 2, 4, … so that a request
//! bound to fail (quota, admission) fails once, not a thousand times; [`WriteThreads::map`]
//! runs the writes of a batch, or a ReplicaSet's pod deletions, side by side.
//!
//! Upstream starts a goroutine for every write. A thread each would be 500 threads for a burst
//! of 500 pods (275 at the scale bench's peak), so a controller's writes share at most
//! [`MAX_CONCURRENT_WRITES`] threads besides its workers' own, whichever of its workers needs
//! them ([`WriteThreads`]): the client's rate limiter and the API server, not the thread count,
//! are what bound their rate.

use std::sync::atomic::{AtomicUsize, Ordering};

/// `SlowStartInitialBatchSize`.
pub const SLOW_START_INITIAL_BATCH: usize = 1;

/// The most threads a controller's writes run on besides its workers. At the latency of a
/// loaded API server (10–50 ms a write) 32 threads keep 600–3,000 writes a second in flight,
/// above any client rate limit a controller manager is given.
pub const MAX_CONCURRENT_WRITES: usize = 32;

/// A controller's spare threads for concurrent writes, shared by its workers. Five workers
/// deleting pods at once (a rollout's scale-downs) ran 32 threads each, 160 threads with a
/// connection and a stack each; they now lend from one allowance. A worker always has its own
/// thread, so it never waits for another's writes: it runs on fewer threads instead.
pub struct WriteThreads {
    spare: AtomicUsize,
}

impl Default for WriteThreads {
    fn default() -> Self {
        WriteThreads::new(MAX_CONCURRENT_WRITES)
    }
}

impl WriteThreads {
    /// An allowance of `spare` threads.
    pub fn new(spare: usize) -> Self {
        WriteThreads { spare: AtomicUsize::new(spare) }
    }

    /// Calls `call` on every item, on the calling thread and as many spare threads as are free
    /// (at most one for each item but the first), and returns the results in the items' order.
    pub fn map<T: Sync, R: Send>(&self, items: &[T], call: impl Fn(&T) -> R + Sync) -> Vec<R> {
        let lent = Lent::take(self, items.len().saturating_sub(1));
        run_on_threads(items, lent.threads, call)
    }

    /// Takes up to `wanted` spare threads; answers how many it got.
    fn take(&self, wanted: usize) -> usize {
        let taken =
            self.spare.fetch_update(Ordering::AcqRel, Ordering::Acquire, |spare| Some(spare - spare.min(wanted)));
        let before = taken.unwrap_or_else(|spare| spare);
        before.min(wanted)
    }
}

/// Spare threads taken from a [`WriteThreads`], given back when dropped (a panicking write
/// included).
struct Lent<'a> {
    from: &'a WriteThreads,
    threads: usize,
}

impl<'a> Lent<'a> {
    fn take(from: &'a WriteThreads, wanted: usize) -> Self {
        Lent { from, threads: from.take(wanted) }
    }
}

impl Drop for Lent<'_> {
    fn drop(&mut self) {
        self.from.spare.fetch_add(self.threads, Ordering::AcqRel);
    }
}

/// `slowStartBatch`: calls `call` `count` times in batches of 1, 2, 4, … running each batch
/// concurrently on `threads`, and stops after the first batch with a failure. Returns how many
/// calls succeeded and the first error.
pub fn slow_start_batch<E: Send>(
    count: usize,
    threads: &WriteThreads,
    call: impl Fn() -> Result<(), E> + Sync,
) -> (usize, Option<E>) {
    let mut remaining = count;
    let mut successes = 0;
    let mut batch = remaining.min(SLOW_START_INITIAL_BATCH);
    while batch > 0 {
        let results = threads.map(&vec![(); batch], |()| call());
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

/// Calls `call` on every item, concurrently on at most `max_threads` threads (the calling one
/// among them), and returns the results in the items' order.
pub fn map_concurrently<T: Sync, R: Send>(items: &[T], max_threads: usize, call: impl Fn(&T) -> R + Sync) -> Vec<R> {
    run_on_threads(items, items.len().min(max_threads).saturating_sub(1), call)
}

/// Calls `call` on every item, on the calling thread and `extra` more, and returns the results
/// in the items' order.
fn run_on_threads<T: Sync, R: Send>(items: &[T], extra: usize, call: impl Fn(&T) -> R + Sync) -> Vec<R> {
    if extra == 0 {
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
        let helpers: Vec<_> = (0..extra).map(|_| scope.spawn(take_items)).collect();
        let mine = take_items();
        let theirs = helpers.into_iter().filter_map(|helper| helper.join().ok()).flatten();
        mine.into_iter().chain(theirs).collect()
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
        let threads = WriteThreads::default();
        let (ok, err) = slow_start_batch(10, &threads, || {
            let n = calls.fetch_add(1, Ordering::SeqCst);
            if n >= 4 { Err("quota") } else { Ok(()) }
        });
        // Batches 1, 2, 4: the third batch has one success and three failures.
        assert_eq!(calls.load(Ordering::SeqCst), 7);
        assert_eq!((ok, err), (4, Some("quota")));
        assert_eq!(slow_start_batch::<()>(5, &threads, || Ok(())), (5, None));
        assert_eq!(slow_start_batch::<()>(0, &threads, || Ok(())), (0, None));
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

    #[test]
    fn workers_share_one_allowance_of_spare_threads_and_give_it_back() {
        let threads = WriteThreads::new(3);
        let (running, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let write = |n: &usize| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            std::thread::yield_now();
            running.fetch_sub(1, Ordering::SeqCst);
            n + 1
        };
        let items: Vec<usize> = (0..50).collect();
        std::thread::scope(|scope| {
            let workers: Vec<_> = (0..4).map(|_| scope.spawn(|| threads.map(&items, write))).collect();
            for worker in workers {
                assert_eq!(worker.join().unwrap(), (1..51).collect::<Vec<_>>());
            }
        });
        let most = most.load(Ordering::SeqCst);
        assert!(most <= 4 + 3, "{most} writes at once: more than the 4 workers and 3 spare threads");
        assert_eq!(threads.spare.load(Ordering::SeqCst), 3, "every lent thread given back");

        // With every spare thread lent, a worker still writes, on its own thread alone.
        let all = Lent::take(&threads, 10);
        assert_eq!(all.threads, 3);
        let caller = std::thread::current().id();
        assert!(threads.map(&items, |_| std::thread::current().id() == caller).into_iter().all(|mine| mine));
        drop(all);
        let panicked = std::panic::catch_unwind(|| threads.map(&[1, 2], |_| panic!("a write panicked")));
        assert!(panicked.is_err());
        assert_eq!(threads.spare.load(Ordering::SeqCst), 3, "given back after a panic too");
    }
}
