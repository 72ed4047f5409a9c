//! Runtime figures, printed (not asserted), for 10,000 realistic Pods:
//!
//! - the *pipeline* rate, informer → handler → workqueue → no-op worker: the initial list of
//!   Pods created beforehand, then the delivery of 10,000 watch events for updates written
//!   while the handler was held (so the sandbox's write path is outside the timed section);
//! - the *producer* rate: how fast 4 threads create and update Pods in the in-process sandbox
//!   (what bounds any figure timed while writing);
//! - the memory of the Pod cache, measured in a child process that runs nothing but one Pod
//!   informer against the sandbox: its resident set before the informer starts and after the
//!   cache has synced (with the allocator's free pages returned), and its peak.
//!
//! Run with `cargo bench --bench runtime` (release profile). The child is this same binary,
//! started with `KCM_RUNTIME_BENCH_CHILD=<kubeconfig>`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kcm::client::{Api, Client, ClientOptions, Patch, PostParams};
use kcm::runtime::informer::{Event, SharedInformerFactory, object_key};
use kcm::runtime::workqueue::WorkQueue;
use serde_json::json;

#[allow(dead_code)] // the child-process helpers serve the controller benchmarks.
mod common;
use common::{create_default_account, realistic_pod, resident_bytes, sandbox_and_admin};

const PODS: usize = 10_000;
const WRITERS: usize = 4;
/// Set in the child: the kubeconfig to reach the parent's sandbox with.
const CHILD_ENV: &str = "KCM_RUNTIME_BENCH_CHILD";
const MIB: f64 = 1024.0 * 1024.0;

fn main() {
    if let Ok(kubeconfig) = std::env::var(CHILD_ENV) {
        cache_memory_child(Path::new(&kubeconfig));
        return;
    }
    let (sandbox, client) = sandbox_and_admin(Duration::from_secs(60)).expect("sandbox");
    create_default_account(&client, "default").expect("service account");
    let create_time = timed(|| {
        parallel(&client, |pods, i| {
            pods.create(&realistic_pod(i), &PostParams::default()).expect("create");
        })
    });

    let dir = std::env::temp_dir().join(format!("kcm-bench-runtime-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let (kubeconfig, _) = sandbox.write_kubeconfigs(&dir.join("admin.conf")).expect("kubeconfigs");
    let memory = cache_memory(&kubeconfig);
    let _ = std::fs::remove_dir_all(&dir);

    let pipeline = pipeline(&client);

    println!("runtime benchmark ({PODS} realistic pods, sandbox over HTTPS on loopback)");
    println!("  pipeline: informer → handler → workqueue → no-op worker");
    println!(
        "    initial list:   {:>8.0} events/s ({PODS} events in {:.2?}; one list at resourceVersion 0, \
         served unpaged as kube-apiserver's watch cache does)",
        rate(pipeline.list_time),
        pipeline.list_time
    );
    println!(
        "    watch delivery: {:>8.0} events/s ({PODS} update events, written beforehand, delivered in {:.2?})",
        rate(pipeline.watch_time),
        pipeline.watch_time
    );
    println!("    worker:         {} keys processed (deduplicated by the queue)", pipeline.processed);
    println!("  producer: {WRITERS} threads writing to the in-process sandbox");
    println!("    creates:        {:>8.0} /s ({PODS} in {create_time:.2?})", rate(create_time));
    println!("    updates:        {:>8.0} /s ({PODS} in {:.2?})", rate(pipeline.update_time), pipeline.update_time);
    match memory {
        Ok(m) => {
            let growth = m.after.saturating_sub(m.before) as f64 / MIB;
            println!("  memory: a child process running only a Pod informer");
            println!(
                "    cache:          {:>8.1} MiB resident per 1,000 pods ({growth:.1} MiB for {PODS}; {:.1} MiB before \
                 the informer started)",
                growth / (PODS as f64 / 1000.0),
                m.before as f64 / MIB
            );
            println!("    peak:           {:>8.1} MiB (VmHWM, with the list being decoded)", m.peak as f64 / MIB);
        }
        Err(e) => println!("  memory: FAILED: {e}"),
    }
}

/// What the pipeline run measured.
struct Pipeline {
    list_time: Duration,
    update_time: Duration,
    watch_time: Duration,
    processed: usize,
}

/// Runs a Pod informer whose handler feeds a workqueue drained by a no-op worker: times the
/// initial list, then holds the handler while 10,000 updates are written and times their
/// delivery once released.
fn pipeline(client: &Client) -> Pipeline {
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
    // Armed: the next update event blocks the handler (and so the reflector) until released.
    let hold = Arc::new(AtomicBool::new(false));
    let (held_tx, held) = crossbeam_channel::bounded::<()>(1);
    let (release, release_rx) = crossbeam_channel::bounded::<()>(1);
    let factory = SharedInformerFactory::new(client.clone(), Duration::from_secs(12 * 3600));
    let informer = factory.informer::<Pod>();
    {
        let (queue, delivered, hold) = (queue.clone(), delivered.clone(), hold.clone());
        informer.add_handler(move |event: &Event<Pod>| {
            if matches!(event, Event::Updated { .. }) && hold.swap(false, Ordering::SeqCst) {
                let _ = held_tx.send(());
                let _ = release_rx.recv();
            }
            delivered.fetch_add(1, Ordering::Relaxed);
            queue.add(object_key(&event.object().metadata));
        });
    }
    let list_time = timed(|| {
        factory.start();
        assert!(factory.wait_for_sync(Duration::from_secs(300)), "informer synced");
        wait_for(|| delivered.load(Ordering::Relaxed) >= PODS && queue.is_empty());
    });

    hold.store(true, Ordering::SeqCst);
    let update_time = timed(|| {
        parallel(client, |pods, i| {
            let patch = Patch::Merge(json!({"metadata": {"labels": {"generation": "2"}}}));
            pods.patch(&format!("web-{i:05}"), &patch, &PostParams::default()).expect("patch");
        })
    });
    held.recv_timeout(Duration::from_secs(300)).expect("the handler held the first update");
    let watch_time = timed(|| {
        release.send(()).expect("release the handler");
        wait_for(|| delivered.load(Ordering::Relaxed) >= 2 * PODS && queue.is_empty());
    });

    factory.shutdown();
    queue.shut_down();
    worker.join().expect("the worker");
    Pipeline { list_time, update_time, watch_time, processed: processed.load(Ordering::Relaxed) }
}

/// Resident memory of the child, in bytes.
struct Memory {
    before: u64,
    after: u64,
    peak: u64,
}

/// Runs this binary as a child that only caches Pods, and reads the figures it prints.
fn cache_memory(kubeconfig: &Path) -> Result<Memory, String> {
    let binary = std::env::current_exe().map_err(|e| e.to_string())?;
    let output = std::process::Command::new(binary)
        .env(CHILD_ENV, kubeconfig)
        .output()
        .map_err(|e| format!("cannot start the child: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().find_map(|l| l.strip_prefix("memory ")).ok_or_else(|| {
        format!("the child printed no figures ({}): {}", output.status, String::from_utf8_lossy(&output.stderr))
    })?;
    let numbers: Vec<u64> = line.split_whitespace().filter_map(|n| n.parse().ok()).collect();
    match numbers[..] {
        [before, after, peak] => Ok(Memory { before, after, peak }),
        _ => Err(format!("unexpected child output {line:?}")),
    }
}

/// The child: one Pod informer, no handler; prints `memory <before> <after> <peak>` in bytes.
fn cache_memory_child(kubeconfig: &Path) {
    let config = kcm::client::config::load(Some(kubeconfig), None).expect("the kubeconfig");
    let options = ClientOptions { qps: -1.0, burst: 1, timeout: Duration::from_secs(60) };
    let client = Client::new(config, options).expect("a client");
    let factory = SharedInformerFactory::new(client, Duration::from_secs(12 * 3600));
    let informer = factory.informer::<Pod>();
    let before = settled_resident_bytes();
    factory.start();
    assert!(factory.wait_for_sync(Duration::from_secs(300)), "informer synced");
    assert_eq!(informer.store().len(), PODS);
    let after = settled_resident_bytes();
    let peak = common::peak_resident_bytes_of(std::process::id());
    println!("memory {before} {after} {peak}");
    factory.shutdown();
}

/// VmRSS once the allocator has handed its free pages back, so that buffers freed after the
/// list was decoded do not count as cache.
fn settled_resident_bytes() -> u64 {
    // SAFETY: malloc_trim only releases free heap memory; it takes no pointers.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::malloc_trim(0);
    }
    resident_bytes()
}

fn rate(time: Duration) -> f64 {
    PODS as f64 / time.as_secs_f64()
}

fn timed(work: impl FnOnce()) -> Duration {
    let started = Instant::now();
    work();
    started.elapsed()
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
        std::thread::sleep(Duration::from_millis(1));
    }
}
