//! Runtime figures, printed (not asserted): events/s through informer → handler → workqueue →
//! no-op worker for 10,000 Pods (initial list, then a watch burst of updates), and the
//! resident memory of the informer cache per 1,000 realistic Pods.
//!
//! Run with `cargo bench --bench runtime` (release profile).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kcm::client::{Api, Client, Patch, PostParams};
use kcm::runtime::informer::{Event, SharedInformerFactory, object_key};
use kcm::runtime::workqueue::WorkQueue;
use serde_json::json;

#[allow(dead_code)] // the child-process helpers serve the controller benchmarks.
mod common;
use common::{create_default_account, realistic_pod, resident_bytes, sandbox_and_admin};

const PODS: usize = 10_000;
const WRITERS: usize = 4;

fn main() {
    let (_sandbox, client) = sandbox_and_admin(Duration::from_secs(60)).expect("sandbox");
    create_default_account(&client, "default").expect("service account");
    parallel(&client, |pods, i| {
        pods.create(&realistic_pod(i), &PostParams::default()).expect("create");
    });

    let queue: WorkQueue<String> = WorkQueue::new("bench");
    let processed = Arc::new(AtomicUsize::new(0));
    let worker = {
        let (queue, processed) = (queue.clone(), processed.clone());
        std::thread::spawn(move || {
            while let Some(key) = queue.get() {
                processed.fetch_add(1, Ordering::Relaxed);
                queue.done(&key);
            }
        })
    };
    let delivered = Arc::new(AtomicUsize::new(0));
    let rss_before = resident_bytes();
    let factory = SharedInformerFactory::new(client.clone(), Duration::from_secs(12 * 3600));
    let informer = factory.informer::<Pod>();
    {
        let (queue, delivered) = (queue.clone(), delivered.clone());
        informer.add_handler(move |event: &Event<Pod>| {
            delivered.fetch_add(1, Ordering::Relaxed);
            queue.add(object_key(&event.object().metadata));
        });
    }
    let started = Instant::now();
    factory.start();
    assert!(factory.wait_for_sync(Duration::from_secs(300)), "informer synced");
    wait_for(|| delivered.load(Ordering::Relaxed) >= PODS);
    let list_time = started.elapsed();
    let rss_after = resident_bytes();

    let burst_start = Instant::now();
    parallel(&client, |pods, i| {
        let patch = Patch::Merge(json!({"metadata": {"labels": {"generation": "2"}}}));
        pods.patch(&format!("web-{i:05}"), &patch, &PostParams::default()).expect("patch");
    });
    wait_for(|| delivered.load(Ordering::Relaxed) >= 2 * PODS);
    let burst_time = burst_start.elapsed();
    wait_for(|| queue.is_empty());

    factory.shutdown();
    queue.shut_down();
    worker.join().unwrap();

    println!("runtime benchmark ({PODS} pods, HTTPS on loopback, informer → handler → workqueue → no-op worker)");
    println!(
        "  initial list:  {:>10.0} events/s ({PODS} events in {list_time:.2?}, paged by 500)",
        PODS as f64 / list_time.as_secs_f64()
    );
    println!(
        "  watch burst:   {:>10.0} events/s ({PODS} updates written by {WRITERS} threads and delivered in {burst_time:.2?})",
        PODS as f64 / burst_time.as_secs_f64()
    );
    println!("  worker:        {} keys processed (deduplicated by the queue)", processed.load(Ordering::Relaxed));
    println!(
        "  memory:        {:>10.1} MiB resident per 1,000 cached pods ({:.1} MiB for {PODS})",
        rss_after.saturating_sub(rss_before) as f64 / (1024.0 * 1024.0) / (PODS as f64 / 1000.0),
        rss_after.saturating_sub(rss_before) as f64 / (1024.0 * 1024.0)
    );
}

fn parallel(client: &Client, op: impl Fn(&Api<Pod>, usize) + Send + Sync + Copy + 'static) {
    let per_thread = PODS / WRITERS;
    let threads: Vec<_> = (0..WRITERS)
        .map(|t| {
            let pods = Api::<Pod>::namespaced(client, "default");
            std::thread::spawn(move || (t * per_thread..(t + 1) * per_thread).for_each(|i| op(&pods, i)))
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
}

fn wait_for(done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(300);
    while !done() {
        assert!(Instant::now() < deadline, "timed out");
        std::thread::sleep(Duration::from_millis(5));
    }
}
