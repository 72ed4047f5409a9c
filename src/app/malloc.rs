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
//! A dedicated allocator crate (mimalloc, jemalloc) would add a C build to the static binary
//! for a problem these two settings already solve (README, "Footprint", has the figures).
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
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MAX_ARENAS: libc::c_int = 2;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 128 * 1024;
