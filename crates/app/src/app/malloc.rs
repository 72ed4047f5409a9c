//! How the process's allocator is set up: glibc's malloc (the release binary links glibc
//! statically), with two limits chosen for a long-running process with many short bursts.
//!
//! - **Arenas: at most two.** glibc gives threads that contend for malloc arenas of their own,
//!   up to 8 per core, and memory freed in one arena never serves another. Our threads come and
//!   go with the work (workers on demand, list threads, event sinks), so unlimited arenas would
//!   scatter the heap over up to 16 arenas of 1–3 MiB each that stay resident. Two keep a
//!   little concurrency for the informers' and workers' allocations and bound that waste.
//! - **A fixed mmap threshold of 128 KiB.** glibc raises the threshold each time a large block
//!   is freed, after which large buffers (list pages of a few MiB, JSON bodies) come from the
//!   heap and stay there after the burst. A fixed threshold keeps them in their own mappings,
//!   returned to the system when freed, and fixes the trim threshold so the heap top is given
//!   back too.
//!
//! - **Freed memory handed back.** glibc returns only the top of a heap by itself; a burst of
//!   work (a thousand pods decoded at once, then dropped) leaves free pages in the middle that
//!   stay resident. A `malloc-trim` thread looks every [`TRIM_PERIOD`] and, when more than
//!   [`TRIM_SLACK`] is free, calls `malloc_trim(0)`, which gives those pages back
//!   (`madvise(MADV_DONTNEED)`), as Go's scavenger does for upstream's binary.
//!
//! A dedicated allocator crate (mimalloc, jemalloc) would add a C build to the static binary
//! for a problem these two settings already solve (docs/footprint.md has the figures).
//! mimalloc was measured on the scale bench at 3,000 pods: the same CPU, and four to seven
//! times the resident memory, with our hundred threads (docs/scale-history.md).
//! `MALLOC_ARENA_MAX`, `MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_` or `GLIBC_TUNABLES`
//! in the environment take precedence: these defaults are skipped then.

/// Applies the limits above; call first thing, before any thread starts.
pub fn configure() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let overridden = ["MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"]
            .iter()
            .any(|name| std::env::var_os(name).is_some());
        if overridden {
            return;
        }
        // SAFETY: mallopt only changes allocator parameters; called before other threads exist.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, MAX_ARENAS);
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        }
        let trimmer = std::thread::Builder::new().name("malloc-trim".into()).spawn(trim_forever);
        if let Err(e) = trimmer {
            log::warn!("cannot start the malloc-trim thread: {e}; freed memory stays resident");
        }
    }
}

/// How often the heap is looked at.
const TRIM_PERIOD: std::time::Duration = std::time::Duration::from_secs(10);
/// Free heap bytes tolerated before a trim.
const TRIM_SLACK: usize = 2 * 1024 * 1024;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_forever() {
    loop {
        std::thread::sleep(TRIM_PERIOD);
        // SAFETY: mallinfo2 and malloc_trim only read and release the allocator's own free memory.
        unsafe {
            if libc::mallinfo2().fordblks > TRIM_SLACK {
                libc::malloc_trim(0);
            }
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MAX_ARENAS: libc::c_int = 2;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 128 * 1024;
