//! Sandbox figures, printed (not asserted): create throughput over HTTPS, watch fan-out to 10
//! watchers, and the resident memory of 10,000 stored Pods.
//!
//! Run with `cargo bench --bench sandbox` (release profile).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kcm::client::{Api, PostParams, WatchEvent, WatchParams};

#[allow(dead_code)] // the child-process helpers serve the controller benchmarks.
mod common;
use common::{create_default_account, realistic_pod, resident_bytes, sandbox_and_admin};

const PODS: usize = 10_000;
const WATCHERS: usize = 10;
const CREATE_THREADS: usize = 4;

fn main() {
    let (_sandbox, client) = sandbox_and_admin(Duration::from_secs(60)).expect("sandbox");
    create_default_account(&client, "default").expect("service account");

    let rss_before = resident_bytes();
    let watchers: Vec<_> = (0..WATCHERS)
        .map(|_| {
            let receiver = Api::<Pod>::all(&client).watch_channel(&WatchParams::default(), 1024).expect("watch");
            std::thread::spawn(move || {
                let mut seen = 0;
                while seen < PODS {
                    match receiver.recv() {
                        Some(Ok(WatchEvent::Added(_))) => seen += 1,
                        Some(Ok(_)) => {}
                        Some(Err(e)) => panic!("watch failed: {e}"),
                        None => break,
                    }
                }
                (seen, Instant::now())
            })
        })
        .collect();

    let started = Instant::now();
    let per_thread = PODS / CREATE_THREADS;
    let creators: Vec<_> = (0..CREATE_THREADS)
        .map(|t| {
            let pods = Api::<Pod>::namespaced(&client, "default");
            std::thread::spawn(move || {
                for i in 0..per_thread {
                    pods.create(&realistic_pod(t * per_thread + i), &PostParams::default()).expect("create");
                }
            })
        })
        .collect();
    for creator in creators {
        creator.join().unwrap();
    }
    let create_time = started.elapsed();
    let mut delivered = 0;
    let mut last = started;
    for watcher in watchers {
        let (seen, at) = watcher.join().unwrap();
        delivered += seen;
        last = last.max(at);
    }
    let fan_out_time = last.duration_since(started);
    let rss_after = resident_bytes();

    println!(
        "sandbox benchmark ({PODS} pods, {CREATE_THREADS} creating threads, {WATCHERS} watchers, HTTPS on loopback)"
    );
    println!("  create:        {:>10.0} objects/s ({create_time:.2?})", PODS as f64 / create_time.as_secs_f64());
    println!(
        "  watch fan-out: {:>10.0} events/s delivered to {WATCHERS} watchers ({delivered} events in {fan_out_time:.2?})",
        delivered as f64 / fan_out_time.as_secs_f64()
    );
    println!(
        "  memory:        {:>10.1} MiB resident for {PODS} stored pods ({:.1} KiB per pod; process total {:.1} MiB)",
        rss_after.saturating_sub(rss_before) as f64 / (1024.0 * 1024.0),
        rss_after.saturating_sub(rss_before) as f64 / 1024.0 / PODS as f64,
        rss_after as f64 / (1024.0 * 1024.0)
    );
}
