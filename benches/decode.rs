//! How long the informers take to decode a Pod as kube-apiserver v1.36.2 serves it (the
//! fixture `common/served-pod.json`, a running pod of the scale bench with the managedFields
//! of its two writers: 4.7 KB, a third of it managedFields), printed (not asserted): decoded
//! in full then trimmed, as the informers did, and with the value of `managedFields` cut out
//! of the bytes before the same decoder (`json::from_bytes_without_managed_fields`), as they
//! do now.
//!
//! `cargo bench --bench decode` (release profile).

use std::hint::black_box;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kcm::apimachinery::json::{from_bytes, from_bytes_without_managed_fields};

const SERVED_POD: &[u8] = include_bytes!("common/served-pod.json");
const ROUNDS: u32 = 20_000;

fn main() {
    let full = || {
        let mut pod: Pod = from_bytes(black_box(SERVED_POD)).expect("the fixture decodes");
        pod.metadata.managed_fields = None;
        pod
    };
    let passed_over = || from_bytes_without_managed_fields::<Pod>(black_box(SERVED_POD)).expect("the fixture decodes");
    assert_eq!(full(), passed_over(), "both ways decode the same pod");
    // Warm up the allocator and caches, then time each way twice, interleaved.
    let _ = (time(full), time(passed_over));
    let (full_1, passed_1, full_2, passed_2) = (time(full), time(passed_over), time(full), time(passed_over));
    let per_pod = |a: Duration, b: Duration| (a + b).as_secs_f64() * 1e6 / f64::from(2 * ROUNDS);
    let (full, passed) = (per_pod(full_1, full_2), per_pod(passed_1, passed_2));
    println!("decode benchmark: one served Pod ({} bytes), {ROUNDS} decodes each way, twice", SERVED_POD.len());
    println!("  decoded in full, managedFields then dropped: {full:>6.2} µs per pod");
    println!("  managedFields cut out before decoding:       {passed:>6.2} µs per pod ({:.2}×)", passed / full);
}

fn time(decode: impl Fn() -> Pod) -> Duration {
    let started = Instant::now();
    for _ in 0..ROUNDS {
        black_box(decode());
    }
    started.elapsed()
}
