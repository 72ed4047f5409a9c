//! client-go's leader election metrics, `leader_election_master_status{name}` and
//! `leader_election_slowpath_total{name}`, with component-base's names and help texts
//! (k8s.io/component-base/metrics/prometheus/clientgo/leaderelection/metrics.go).

use std::sync::{Arc, OnceLock};

use crate::metrics::{self, CounterVec, GaugeVec};

/// The leader election metrics of the process.
pub struct LeaderMetrics {
    master_status: Arc<GaugeVec>,
    slowpath: Arc<CounterVec>,
}

impl LeaderMetrics {
    /// The process-wide instance, registered in [`metrics::global`] on first use.
    pub fn global() -> &'static LeaderMetrics {
        static GLOBAL: OnceLock<LeaderMetrics> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let master_status = Arc::new(GaugeVec::gauge(
                "leader_election_master_status",
                "[ALPHA] Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates \
                 master. 'name' is the string used to identify the lease. Please make sure to group by name.",
                &["name"],
            ));
            let slowpath = Arc::new(CounterVec::counter(
                "leader_election_slowpath_total",
                "[ALPHA] Total number of slow path exercised in renewing leader leases. 'name' is the string used to \
                 identify the lease. Please make sure to group by name.",
                &["name"],
            ));
            metrics::global().register(master_status.clone());
            metrics::global().register(slowpath.clone());
            LeaderMetrics { master_status, slowpath }
        })
    }

    /// We lead through the lock `name`.
    pub fn leader_on(&self, name: &str) {
        self.master_status.set(&[name], 1.0);
    }

    /// We do not (or no longer) lead through the lock `name`.
    pub fn leader_off(&self, name: &str) {
        self.master_status.set(&[name], 0.0);
    }

    /// The holder renewed the lock `name` after reading it again (client-go's
    /// `slowpathExercised`).
    pub fn slowpath_exercised(&self, name: &str) {
        self.slowpath.inc(&[name]);
    }

    /// How often the holder of `name` renewed on the slow path.
    #[cfg(test)]
    pub fn slowpath_count(&self, name: &str) -> f64 {
        self.slowpath.get(&[name])
    }
}
