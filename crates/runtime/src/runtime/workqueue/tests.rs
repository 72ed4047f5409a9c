//! Queue behaviour, driven by a fake clock. Where the timer thread has to act, the tests advance
//! the clock and then wait (bounded) for its result, never for a fixed time.

use super::*;
use crate::apimachinery::clock::FakeClock;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;

/// A generous bound for waits that end as soon as the awaited thing happens.
const LONG: Duration = Duration::from_secs(10);

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A queue with the default controller rate limiter on a fake clock.
fn fake_queue<T: QueueItem>(name: &str) -> (WorkQueue<T>, Arc<FakeClock>) {
    let clock = Arc::new(FakeClock::new());
    let limiter = default_controller_rate_limiter(clock.clone() as Arc<dyn Clock>);
    (WorkQueue::with_parts(name, Box::new(limiter), clock.clone()), clock)
}

/// Polls `condition` until it holds, for at most [`LONG`].
fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + LONG;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        thread::sleep(ms(1));
    }
    condition()
}

fn next<T: QueueItem>(q: &WorkQueue<T>) -> Option<T> {
    q.get_timeout(LONG).expect("an item or the shutdown within the bound")
}

#[test]
fn hands_items_out_first_in_first_out() {
    let (q, _clock) = fake_queue("");
    for item in ["a", "b", "c"] {
        q.add(item);
    }
    assert_eq!(q.len(), 3);
    assert_eq!([q.get(), q.get(), q.get()], [Some("a"), Some("b"), Some("c")]);
    assert!(q.is_empty());
}

#[test]
fn adding_a_waiting_item_again_does_nothing() {
    let (q, _clock) = fake_queue("wq_test_dedup");
    q.add("a");
    q.add("b");
    q.add("a");
    assert_eq!(q.len(), 2);
    assert_eq!([q.get(), q.get()], [Some("a"), Some("b")]);
    let families = metrics::families();
    assert_eq!(families.adds.get(&["wq_test_dedup"]), 2.0);
}

#[test]
fn an_item_being_processed_is_not_handed_out_twice_and_requeues_on_done() {
    let (q, _clock) = fake_queue("");
    q.add("a");
    q.add("b");
    assert_eq!(q.get(), Some("a"));
    q.add("a");
    q.add("a");
    // "a" is dirty but processing: only "b" can be taken.
    assert_eq!(q.len(), 1);
    assert_eq!(q.get(), Some("b"));
    assert!(q.is_empty());
    q.done(&"a");
    assert_eq!(q.len(), 1);
    assert_eq!(q.get(), Some("a"));
    q.done(&"a");
    q.done(&"b");
    assert!(q.is_empty());
}

#[test]
fn done_for_an_item_nobody_holds_changes_nothing() {
    let (q, _clock) = fake_queue("");
    q.add("a");
    q.done(&"a");
    q.done(&"b");
    assert_eq!(q.len(), 1);
    assert_eq!(q.get(), Some("a"));
    q.done(&"a");
    q.done(&"a");
    assert!(q.is_empty());
}

#[test]
fn delayed_items_come_due_in_time_order() {
    let (q, clock) = fake_queue("");
    q.add_after("late", secs(2));
    q.add_after("early", secs(1));
    q.add("now");
    assert_eq!(next(&q), Some("now"));
    assert_eq!(q.waiting_len(), 2);
    clock.advance(secs(1));
    assert_eq!(next(&q), Some("early"));
    // "late" is not due before the clock reaches it, however long one waits.
    assert_eq!((q.len(), q.waiting_len()), (0, 1));
    clock.advance(secs(1));
    assert_eq!(next(&q), Some("late"));
    assert_eq!(q.waiting_len(), 0);
}

#[test]
fn a_waiting_item_keeps_its_earlier_time() {
    let (q, clock) = fake_queue("");
    q.add_after("x", secs(10));
    q.add_after("x", secs(1));
    q.add_after("y", secs(1));
    q.add_after("y", secs(10));
    assert_eq!(q.waiting_len(), 2);
    clock.advance(secs(1));
    assert_eq!([next(&q), next(&q)], [Some("x"), Some("y")]);
    q.done(&"x");
    q.done(&"y");
    // Nothing is left of the 10s requests: a sentinel due after them arrives alone.
    q.add_after("sentinel", secs(9));
    clock.advance(secs(9));
    assert_eq!(next(&q), Some("sentinel"));
    assert!(q.is_empty());
    assert_eq!(q.waiting_len(), 0);
}

#[test]
fn a_zero_delay_adds_at_once_and_a_delayed_item_dedups_when_due() {
    let (q, clock) = fake_queue("");
    q.add_after("a", Duration::ZERO);
    assert_eq!(q.len(), 1);
    q.add_after("a", secs(1));
    clock.advance(secs(1));
    assert!(eventually(|| q.waiting_len() == 0));
    // Due while still queued: deduplicated.
    assert_eq!(q.len(), 1);
    assert_eq!(q.get(), Some("a"));
    assert!(q.is_empty());
}

#[test]
fn rate_limited_adds_back_off_and_forget_resets() {
    let (q, clock) = fake_queue("");
    q.add_rate_limited("a");
    assert_eq!(q.num_requeues(&"a"), 1);
    assert_eq!((q.len(), q.waiting_len()), (0, 1));
    clock.advance(ms(5));
    assert_eq!(next(&q), Some("a"));
    q.done(&"a");

    q.add_rate_limited("a");
    assert_eq!(q.num_requeues(&"a"), 2);
    clock.advance(ms(9));
    assert_eq!((q.len(), q.waiting_len()), (0, 1), "10ms backoff is not over after 9ms");
    clock.advance(ms(1));
    assert_eq!(next(&q), Some("a"));
    q.done(&"a");

    q.forget(&"a");
    assert_eq!(q.num_requeues(&"a"), 0);
    q.add_rate_limited("a");
    clock.advance(ms(5));
    assert_eq!(next(&q), Some("a"));
}

#[test]
fn shut_down_ignores_adds_and_hands_out_what_is_left() {
    let (q, _clock) = fake_queue("");
    q.add("a");
    q.add("b");
    assert_eq!(q.get(), Some("a"));
    q.add("a");
    q.shut_down();
    assert!(q.is_shutting_down());
    q.add("c");
    q.add_after("d", Duration::ZERO);
    q.add_rate_limited("e");
    assert_eq!(q.get(), Some("b"));
    // "a" was added again while processing: done still queues it, as upstream.
    q.done(&"a");
    assert_eq!(q.get(), Some("a"));
    assert_eq!(q.get(), None);
    assert_eq!(q.get_timeout(LONG), Ok(None));
}

#[test]
fn shut_down_wakes_every_waiting_getter() {
    let q: WorkQueue<u32> = WorkQueue::new("");
    let getters: Vec<_> = (0..3)
        .map(|_| {
            let q = q.clone();
            thread::spawn(move || q.get())
        })
        .collect();
    q.shut_down();
    for getter in getters {
        assert_eq!(getter.join().unwrap(), None);
    }
}

#[test]
fn get_timeout_times_out_then_returns_items() {
    let q: WorkQueue<u32> = WorkQueue::new("");
    assert_eq!(q.get_timeout(ms(1)), Err(Timeout));
    q.add(7);
    assert_eq!(q.get_timeout(LONG), Ok(Some(7)));
    let getter = {
        let q = q.clone();
        thread::spawn(move || q.get_timeout(LONG))
    };
    q.add(8);
    assert_eq!(getter.join().unwrap(), Ok(Some(8)));
}

#[test]
fn delayed_items_are_dropped_at_shutdown_and_the_timer_thread_ends() {
    let (q, clock) = fake_queue("");
    q.add_after("x", secs(1));
    assert_eq!(Arc::strong_count(q.shared()), 2, "the timer thread holds the queue");
    q.shut_down();
    assert_eq!(Arc::strong_count(q.shared()), 1, "the timer thread has ended");
    assert_eq!(q.waiting_len(), 0);
    clock.advance(secs(2));
    q.add_after("y", secs(1));
    assert_eq!(q.waiting_len(), 0);
    assert_eq!(q.get(), None);
}

#[test]
fn the_timer_thread_ends_when_nothing_waits_and_comes_back_when_needed() {
    let (q, clock) = fake_queue("");
    q.add_after("x", secs(1));
    assert_eq!(Arc::strong_count(q.shared()), 2, "the timer thread holds the queue");
    clock.advance(secs(1));
    assert_eq!(next(&q), Some("x"));
    q.done(&"x");
    assert!(eventually(|| Arc::strong_count(q.shared()) == 1), "no item waits: the timer thread ends");
    q.add_after("y", secs(1));
    assert_eq!(Arc::strong_count(q.shared()), 2, "a delayed add starts another");
    clock.advance(secs(1));
    assert_eq!(next(&q), Some("y"));
}

#[test]
fn dropping_the_last_handle_shuts_the_queue_down() {
    let (q, _clock) = fake_queue::<&str>("");
    q.add_after("x", secs(1));
    let shared = Arc::downgrade(q.shared());
    let clone = q.clone();
    drop(q);
    assert!(!clone.is_shutting_down());
    drop(clone);
    assert!(shared.upgrade().is_none());
}

#[test]
fn shut_down_with_drain_waits_for_items_in_flight() {
    let (q, _clock) = fake_queue("");
    q.add("a");
    q.add("b");
    let a = q.get().unwrap();
    let finished = Arc::new(AtomicBool::new(false));
    let drainer = {
        let (q, finished) = (q.clone(), finished.clone());
        thread::spawn(move || {
            let drained = q.shut_down_with_drain(LONG * 3);
            (drained, finished.load(Ordering::SeqCst))
        })
    };
    assert!(eventually(|| q.is_shutting_down()));
    // Queued items still go out during the drain, and must be done too.
    let b = q.get().unwrap();
    q.done(&b);
    finished.store(true, Ordering::SeqCst);
    q.done(&a);
    assert_eq!(drainer.join().unwrap(), (true, true), "returned only after the last done");
    assert_eq!(q.get(), None);
}

#[test]
fn shut_down_with_drain_gives_up_after_its_timeout() {
    let (q, _clock) = fake_queue("");
    q.add("a");
    let a = q.get().unwrap();
    assert!(!q.shut_down_with_drain(ms(20)));
    q.done(&a);
    assert_eq!(q.get(), None);
    assert!(q.shut_down_with_drain(Duration::ZERO), "nothing in flight: drained at once");
}

#[test]
fn shut_down_ends_a_waiting_drain() {
    let (q, _clock) = fake_queue("");
    q.add("a");
    let _a = q.get().unwrap();
    let drainer = {
        let q = q.clone();
        thread::spawn(move || q.shut_down_with_drain(LONG * 3))
    };
    assert!(eventually(|| q.is_shutting_down()));
    q.shut_down();
    assert!(!drainer.join().unwrap());
}

#[test]
fn concurrent_producers_and_consumers_process_every_item_once() {
    const PRODUCERS: u32 = 4;
    const ITEMS: u32 = 1000;
    let q: WorkQueue<u32> = WorkQueue::new("wq_test_stress");
    let seen = Arc::new(Mutex::new(HashMap::<u32, u32>::new()));
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let (q, seen) = (q.clone(), seen.clone());
            thread::spawn(move || {
                while let Some(item) = q.get() {
                    *seen.lock().entry(item).or_insert(0) += 1;
                    q.done(&item);
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..PRODUCERS)
        .map(|p| {
            let q = q.clone();
            thread::spawn(move || (0..ITEMS).for_each(|i| q.add(p * ITEMS + i)))
        })
        .collect();
    producers.into_iter().for_each(|p| p.join().unwrap());
    q.shut_down();
    consumers.into_iter().for_each(|c| c.join().unwrap());
    let seen = seen.lock();
    assert_eq!(seen.len(), (PRODUCERS * ITEMS) as usize);
    assert!(seen.values().all(|&n| n == 1));
    assert_eq!(metrics::families().depth.get(&["wq_test_stress"]), 0.0);
}

#[test]
fn concurrent_adds_of_the_same_keys_are_never_processed_in_parallel_nor_lost() {
    const KEYS: usize = 8;
    let q: WorkQueue<usize> = WorkQueue::new("");
    let added: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let seen: Arc<Vec<AtomicU64>> = Arc::new((0..KEYS).map(|_| AtomicU64::new(0)).collect());
    let in_flight = Arc::new(Mutex::new(HashSet::new()));
    let consumers: Vec<_> = (0..4)
        .map(|_| {
            let (q, added, seen, in_flight) = (q.clone(), added.clone(), seen.clone(), in_flight.clone());
            thread::spawn(move || {
                while let Some(key) = q.get() {
                    assert!(in_flight.lock().insert(key), "key {key} handed to two workers");
                    seen[key].fetch_max(added[key].load(Ordering::SeqCst), Ordering::SeqCst);
                    thread::yield_now();
                    in_flight.lock().remove(&key);
                    q.done(&key);
                }
            })
        })
        .collect();
    let producers: Vec<_> = (0..4)
        .map(|p| {
            let (q, added) = (q.clone(), added.clone());
            thread::spawn(move || {
                for i in 0..1000 {
                    let key = (p + i) % KEYS;
                    added[key].fetch_add(1, Ordering::SeqCst);
                    q.add(key);
                }
            })
        })
        .collect();
    producers.into_iter().for_each(|p| p.join().unwrap());
    q.shut_down();
    consumers.into_iter().for_each(|c| c.join().unwrap());
    for key in 0..KEYS {
        let last_add = added[key].load(Ordering::SeqCst);
        assert_eq!(seen[key].load(Ordering::SeqCst), last_add, "key {key}'s last add was processed");
    }
}

#[test]
fn metrics_count_depth_adds_retries_and_durations() {
    let name = "wq_test_metrics";
    let (q, clock) = fake_queue(name);
    let families = metrics::families();
    q.add("a");
    q.add("a");
    q.add("b");
    assert_eq!(families.adds.get(&[name]), 2.0);
    assert_eq!(families.depth.get(&[name]), 2.0);
    clock.advance(secs(2));
    assert_eq!(q.get(), Some("a"));
    assert_eq!(families.depth.get(&[name]), 1.0);
    assert_eq!(families.queue_duration.count(&[name]), 1);
    clock.advance(secs(1));
    q.done(&"a");
    assert_eq!(families.work_duration.count(&[name]), 1);

    q.add_rate_limited("c");
    q.add_after("d", Duration::ZERO);
    assert_eq!(families.retries.get(&[name]), 2.0);
    assert_eq!(families.depth.get(&[name]), 2.0, "b and d");

    let rendered = crate::metrics::global().render();
    let line = |metric: &str, value: &str| format!("{metric}{{name=\"{name}\"}} {value}\n");
    assert!(rendered.contains(&line("workqueue_queue_duration_seconds_sum", "2")), "{rendered}");
    assert!(rendered.contains(&line("workqueue_work_duration_seconds_sum", "1")));
    assert!(rendered.contains(&line("workqueue_adds_total", "3")));
}

#[test]
fn in_flight_gauges_are_computed_at_scrape_time() {
    let name = "wq_test_in_flight";
    let (q, clock) = fake_queue(name);
    let line = |metric: &str, value: &str| format!("{metric}{{name=\"{name}\"}} {value}\n");
    q.add("a");
    q.add("b");
    let rendered = crate::metrics::global().render();
    assert!(rendered.contains(&line("workqueue_unfinished_work_seconds", "0")));
    assert_eq!(q.get(), Some("a"));
    clock.advance(secs(3));
    assert_eq!(q.get(), Some("b"));
    clock.advance(secs(1));
    let rendered = crate::metrics::global().render();
    assert!(rendered.contains(&line("workqueue_unfinished_work_seconds", "5")), "{rendered}");
    assert!(rendered.contains(&line("workqueue_longest_running_processor_seconds", "4")));
    q.done(&"a");
    q.done(&"b");
    let rendered = crate::metrics::global().render();
    assert!(rendered.contains(&line("workqueue_unfinished_work_seconds", "0")));
    drop(q);
    let rendered = crate::metrics::global().render();
    assert!(!rendered.contains(&line("workqueue_unfinished_work_seconds", "0")), "a dropped queue is not asked");
}

#[test]
fn queues_sharing_a_name_share_series() {
    let name = "wq_test_shared_name";
    let (first, _) = fake_queue(name);
    let (second, _) = fake_queue(name);
    first.add(1);
    second.add(1);
    let families = metrics::families();
    assert_eq!(families.depth.get(&[name]), 2.0);
    assert_eq!(families.adds.get(&[name]), 2.0);
    assert_eq!(first.get(), Some(1));
    assert_eq!(families.depth.get(&[name]), 1.0);
}

#[test]
fn unnamed_queues_report_no_metrics() {
    let (q, _clock) = fake_queue("");
    q.add(1);
    q.add_after(2, Duration::ZERO);
    let families = metrics::families();
    assert_eq!(families.adds.get(&[""]), 0.0);
    assert_eq!(families.retries.get(&[""]), 0.0);
}

#[test]
fn the_registry_renders_every_workqueue_metric() {
    let (_q, _clock) = fake_queue::<u8>("wq_test_render");
    let rendered = crate::metrics::global().render();
    for metric in [
        "workqueue_depth",
        "workqueue_adds_total",
        "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
        "workqueue_retries_total",
    ] {
        assert_eq!(rendered.matches(&format!("# TYPE {metric} ")).count(), 1, "{metric} registered once");
    }
}

#[test]
fn debug_shows_the_queue_shape() {
    let (q, _clock) = fake_queue("wq_test_debug");
    q.add(1);
    let shown = format!("{q:?}");
    assert!(shown.contains("name: \"wq_test_debug\"") && shown.contains("len: 1"), "{shown}");
}

#[test]
fn every_series_exists_from_the_queue_creation() {
    let name = "wq_test_created";
    let (_q, _clock) = fake_queue::<u8>(name);
    let rendered = crate::metrics::global().render();
    let line = |metric: &str, value: &str| format!("{metric}{{name=\"{name}\"}} {value}\n");
    for metric in [
        "workqueue_depth",
        "workqueue_adds_total",
        "workqueue_retries_total",
        "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds",
        "workqueue_queue_duration_seconds_count",
        "workqueue_work_duration_seconds_count",
    ] {
        assert!(rendered.contains(&line(metric, "0")), "{metric} at creation:\n{rendered}");
    }
    let first_bucket = format!("workqueue_queue_duration_seconds_bucket{{name=\"{name}\",le=\"1e-08\"}} 0\n");
    assert!(rendered.contains(&first_bucket), "{rendered}");
}

#[test]
fn plain_queues_have_no_retries_series_at_creation() {
    let name = "wq_test_plain";
    let _q = WorkQueue::<u8>::plain(name);
    let rendered = crate::metrics::global().render();
    assert!(rendered.contains(&format!("workqueue_depth{{name=\"{name}\"}} 0\n")), "{rendered}");
    assert!(!rendered.contains(&format!("workqueue_retries_total{{name=\"{name}\"}}")), "{rendered}");
}

#[test]
fn try_get_takes_without_waiting() {
    let (q, _clock) = fake_queue("");
    assert_eq!(q.try_get(), TryGet::Empty);
    q.add(1);
    assert_eq!(q.try_get(), TryGet::Item(1));
    q.add(1);
    assert_eq!(q.try_get(), TryGet::Empty, "processing: not handed out twice");
    q.shut_down();
    assert_eq!(q.try_get(), TryGet::ShutDown, "as get: shut down and empty");
    q.done(&1);
    assert_eq!(q.try_get(), TryGet::Item(1), "the dirty item comes back with done");
    q.done(&1);
    assert_eq!(q.try_get(), TryGet::ShutDown);
}

#[test]
fn ready_hooks_hear_of_every_item_queued_and_the_shutdown() {
    let (q, clock) = fake_queue("");
    let calls = Arc::new(AtomicU64::new(0));
    let counted = calls.clone();
    q.on_ready(move || _ = counted.fetch_add(1, Ordering::SeqCst));
    let calls = move || calls.load(Ordering::SeqCst);
    q.add("a");
    assert_eq!(calls(), 1);
    q.add("a");
    assert_eq!(calls(), 1, "already queued");
    assert_eq!(q.try_get(), TryGet::Item("a"));
    q.add("a");
    assert_eq!(calls(), 1, "processing: queued only when done");
    q.done(&"a");
    assert_eq!(calls(), 2);
    q.add_after("b", secs(5));
    assert_eq!(calls(), 2);
    clock.advance(secs(5));
    assert!(eventually(|| calls() == 3), "the timer thread queued it");
    q.shut_down();
    assert_eq!(calls(), 4);
}
