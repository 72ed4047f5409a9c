//! Sandbox figures, printed (not asserted), against `kcm-sandbox serve` run as a child process
//! over HTTPS on loopback:
//!
//! - create: Pods created per second by 4 writing threads;
//! - memory: the server's resident set (VmRSS, and its peak VmHWM) before and after storing
//!   10,000 Pods of the size a Deployment's Pod has after admission; the clients live in this
//!   process, so the figure is the server's alone;
//! - watch fan-out: with the Pods stored and 10 watchers connected, a burst of Pod updates; each
//!   watcher's delivery rate runs from the first update it receives to the last, the total from
//!   the first delivery at any watcher to the last at all of them, and the writers' own rate is
//!   reported beside it (deliveries cannot outrun writes).
//!
//! Run with `cargo bench --bench sandbox` (release profile).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kcm::client::{Api, Client, ListParams, Patch, PostParams, WatchEvent, WatchParams};
use serde_json::json;

#[allow(dead_code)] // the other helpers serve the other benchmarks.
mod common;
use common::{
    admin_client, create_default_account, peak_resident_bytes_of, realistic_pod, resident_bytes_of,
    start_sandbox_server, stop,
};

const PODS: usize = 10_000;
const WRITERS: usize = 4;
const WATCHERS: usize = 10;
const UPDATES: usize = 4_000;
const MIB: f64 = 1024.0 * 1024.0;

fn main() {
    let binary = kcm_envtest::envtest::built_beside(env!("CARGO_BIN_EXE_kube-controller-manager"), "kcm-sandbox")
        .unwrap_or_else(|e| panic!("{e}"));
    let dir = std::env::temp_dir().join(format!("kcm-sandbox-bench-{}", std::process::id()));
    let (mut server, kubeconfig) = start_sandbox_server(&binary, &dir, &[]).expect("kcm-sandbox serve");
    let outcome = admin_client(&kubeconfig, Duration::from_secs(60)).and_then(|client| run(&client, server.id()));
    stop(&mut server);
    let _ = std::fs::remove_dir_all(&dir);
    if let Err(e) = outcome {
        println!("sandbox benchmark FAILED: {e}");
    }
}

fn run(client: &Client, server_pid: u32) -> Result<(), String> {
    create_default_account(client, "default")?;
    println!("sandbox benchmark (kcm-sandbox serve as a child process, HTTPS on loopback)");

    let rss_before = resident_bytes_of(server_pid);
    let create_time = create_pods(client)?;
    let (rss_after, peak) = (resident_bytes_of(server_pid), peak_resident_bytes_of(server_pid));
    let stored = Api::<Pod>::namespaced(client, "default").get("web-00000").map_err(|e| e.to_string())?;
    let stored_json = serde_json::to_vec(&stored).map_or(0, |bytes| bytes.len());
    println!(
        "  create:   {:>8.0} Pods/s ({PODS} Pods by {WRITERS} threads in {create_time:.2?})",
        PODS as f64 / create_time.as_secs_f64()
    );
    let grown = rss_after.saturating_sub(rss_before) as f64;
    println!(
        "  memory:   {:>8.1} MiB more resident for {PODS} stored Pods = {:.1} KiB per Pod \
         (a Pod is {stored_json} bytes of JSON after admission; server RSS {:.1} -> {:.1} MiB, peak {:.1} MiB)",
        grown / MIB,
        grown / 1024.0 / PODS as f64,
        rss_before as f64 / MIB,
        rss_after as f64 / MIB,
        peak as f64 / MIB,
    );

    let fan_out = watch_fan_out(client)?;
    println!(
        "  fan-out:  {:>8.0} events/s per watcher (slowest {:.0}), {:.0} events/s in total to {WATCHERS} watchers \
         ({UPDATES} updates, {} deliveries in {:.2?}); writers: {:.0} updates/s ({WRITERS} threads)",
        fan_out.mean_per_watcher,
        fan_out.slowest_watcher,
        (UPDATES * WATCHERS) as f64 / fan_out.span.as_secs_f64(),
        UPDATES * WATCHERS,
        fan_out.span,
        UPDATES as f64 / fan_out.write_time.as_secs_f64(),
    );
    Ok(())
}

/// Creates the Pods `web-00000`.. with `WRITERS` threads; returns the time taken.
fn create_pods(client: &Client) -> Result<Duration, String> {
    let started = Instant::now();
    in_parallel(PODS, |i| {
        Api::<Pod>::namespaced(client, "default").create(&realistic_pod(i), &PostParams::default()).map(drop)
    })?;
    Ok(started.elapsed())
}

/// Runs `task(0..count)` split over `WRITERS` threads.
fn in_parallel<E: std::fmt::Display>(count: usize, task: impl Fn(usize) -> Result<(), E> + Sync) -> Result<(), String> {
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..WRITERS)
            .map(|t| {
                let task = &task;
                scope.spawn(move || (t..count).step_by(WRITERS).try_for_each(task).map_err(|e| e.to_string()))
            })
            .collect();
        threads.into_iter().try_for_each(|thread| thread.join().map_err(|_| "a writer panicked".to_string())?)
    })
}

struct FanOut {
    mean_per_watcher: f64,
    slowest_watcher: f64,
    /// From the first delivery at any watcher to the last at all of them.
    span: Duration,
    write_time: Duration,
}

/// Connects the watchers at the current resourceVersion, then updates `UPDATES` stored Pods.
fn watch_fan_out(client: &Client) -> Result<FanOut, String> {
    let pods = Api::<Pod>::namespaced(client, "default");
    let listed = pods.list(&ListParams { limit: Some(1), ..ListParams::default() }).map_err(|e| e.to_string())?;
    let params = WatchParams { resource_version: listed.metadata.resource_version, ..WatchParams::default() };
    let receivers = (0..WATCHERS)
        .map(|_| pods.watch_channel(&params, 1024).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?;
    let watchers: Vec<_> = receivers
        .into_iter()
        .map(|receiver| {
            std::thread::spawn(move || -> Result<(Instant, Instant), String> {
                let mut first = None;
                let mut seen = 0;
                while seen < UPDATES {
                    match receiver.recv() {
                        Some(Ok(WatchEvent::Modified(_))) => {
                            first.get_or_insert_with(Instant::now);
                            seen += 1;
                        }
                        Some(Ok(_)) => {}
                        Some(Err(e)) => return Err(format!("watch failed: {e}")),
                        None => return Err(format!("watch ended after {seen} of {UPDATES} updates")),
                    }
                }
                Ok((first.unwrap_or_else(Instant::now), Instant::now()))
            })
        })
        .collect();

    let started = Instant::now();
    in_parallel(UPDATES, |i| {
        let patch = Patch::Merge(json!({"metadata": {"labels": {"bench-update": i.to_string()}}}));
        pods.patch(&format!("web-{i:05}"), &patch, &PostParams::default()).map(drop)
    })?;
    let write_time = started.elapsed();

    let mut spans = Vec::new();
    for watcher in watchers {
        spans.push(watcher.join().map_err(|_| "a watcher panicked".to_string())??);
    }
    let first = spans.iter().map(|(first, _)| *first).min().unwrap_or(started);
    let last = spans.iter().map(|(_, last)| *last).max().unwrap_or(started);
    let rates: Vec<f64> =
        spans.iter().map(|(first, last)| UPDATES as f64 / last.duration_since(*first).as_secs_f64()).collect();
    Ok(FanOut {
        mean_per_watcher: rates.iter().sum::<f64>() / rates.len() as f64,
        slowest_watcher: rates.iter().copied().fold(f64::INFINITY, f64::min),
        span: last.duration_since(first),
        write_time,
    })
}
