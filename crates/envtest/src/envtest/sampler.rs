//! What a benchmark measures of a running process, from `/proc`: resident memory (now and the
//! kernel's high-water mark), threads and CPU seconds, sampled by a thread that keeps each
//! phase's peaks; and a line naming the machine the figures come from. Shared by the footprint
//! and scale benches, so that both read the same fields the same way.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;

/// One reading of the process: at a phase's end, `cpu` is that phase's CPU seconds.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sample {
    /// VmRSS, bytes.
    pub rss: u64,
    /// VmHWM (the peak VmRSS since the process started), bytes.
    pub hwm: u64,
    /// Threads of the process.
    pub threads: u64,
    /// utime + stime since the process started, in seconds.
    pub total_cpu: f64,
    /// The CPU seconds of the phase that this sample ends (see [`Sampler::phase_end`]).
    pub cpu: f64,
}

/// The highest values sampled within a phase.
#[derive(Debug, Clone, Copy, Default)]
pub struct Peaks {
    /// Bytes.
    pub rss: u64,
    /// Threads of the process.
    pub threads: u64,
}

/// A thread reading `/proc/<pid>` every `every`, keeping the current phase's peaks.
pub struct Sampler {
    pid: u32,
    stop: Arc<AtomicBool>,
    /// The current phase's peaks, and the process's CPU seconds when the phase began.
    state: Arc<Mutex<(Peaks, f64)>>,
    thread: Option<JoinHandle<()>>,
}

impl Sampler {
    /// Starts sampling process `pid`; its first phase starts now.
    pub fn start(pid: u32, every: Duration) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let start_cpu = read_proc(pid).map_or(0.0, |s| s.total_cpu);
        let state = Arc::new(Mutex::new((Peaks::default(), start_cpu)));
        let thread = {
            let (stop, state) = (stop.clone(), state.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if let Some(sample) = read_proc(pid) {
                        let mut state = state.lock();
                        state.0.rss = state.0.rss.max(sample.rss);
                        state.0.threads = state.0.threads.max(sample.threads);
                    }
                    std::thread::sleep(every);
                }
            })
        };
        Sampler { pid, stop, state, thread: Some(thread) }
    }

    /// Ends the current phase and starts the next: the process now, with the phase's CPU
    /// seconds, and the phase's peaks.
    pub fn phase_end(&self) -> (Sample, Peaks) {
        let mut now = read_proc(self.pid).unwrap_or_default();
        let mut state = self.state.lock();
        let peaks = Peaks { rss: state.0.rss.max(now.rss), threads: state.0.threads.max(now.threads) };
        now.cpu = now.total_cpu - state.1;
        *state = (Peaks::default(), now.total_cpu);
        (now, peaks)
    }

    /// Stops the sampling thread.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.halt();
    }
}

/// VmRSS, VmHWM and Threads from `/proc/<pid>/status`, utime + stime from `/proc/<pid>/stat`;
/// `None` once the process is gone.
pub fn read_proc(pid: u32) -> Option<Sample> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
    };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
    let rest: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks = rest.get(11)?.parse::<u64>().ok()? + rest.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf has no memory effects.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    Some(Sample {
        rss: field("VmRSS:")? * 1024,
        hwm: field("VmHWM:")? * 1024,
        threads: field("Threads:")?,
        total_cpu: ticks as f64 / per_second,
        cpu: 0.0,
    })
}

/// One line naming the machine: CPUs, model, memory, kernel and the load average now.
pub fn machine() -> String {
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    let cpuinfo = read("/proc/cpuinfo");
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|v| v.split_once(':')).map(|(_, v)| v.trim().to_string()))
        .unwrap_or_else(|| "unknown CPU".into());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let memory = read("/proc/meminfo")
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or("?".into(), |kb| format!("{:.1} GiB", kb as f64 / 1024.0 / 1024.0));
    let load = read("/proc/loadavg");
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!(
        "Machine: {cpus} CPUs (nproc), {model}, {memory} RAM, Linux {}, load average now {}",
        read("/proc/sys/kernel/osrelease").trim(),
        load.join(" ")
    )
}

/// Bytes in MiB.
pub fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1024.0 / 1024.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_read_and_a_phase_counts_its_own_cpu() {
        let me = read_proc(std::process::id()).expect("this process's /proc");
        assert!(me.rss > 0 && me.hwm >= me.rss && me.threads >= 1, "{me:?}");
        let sampler = Sampler::start(std::process::id(), Duration::from_millis(10));
        let (end, peaks) = sampler.phase_end();
        assert!(end.cpu >= 0.0 && end.cpu <= end.total_cpu, "{end:?}");
        assert!(peaks.rss >= end.rss.min(1), "{peaks:?}");
        sampler.stop();
        assert!(read_proc(u32::MAX).is_none(), "no such process");
        assert!(machine().starts_with("Machine: "));
    }
}
