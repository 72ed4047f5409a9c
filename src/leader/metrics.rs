//! client-go's leader election metric, `leader_election_master_status{name}`, with
//! component-base's name and help text.

use std::sync::{Arc, OnceLock};

use crate::metrics::{self, GaugeVec};

/// The leader election metrics of the process.
pub struct LeaderMetrics {
    master_status: Arc<GaugeVec>,
}

impl LeaderMetrics {
    /// The process-wide instance, registered in [`metrics::global`] on first use.
    pub fn global() -> &'static LeaderMetrics {
        static GLOBAL: OnceLock<LeaderMetrics> = OnceLock::new();
        GLOBAL.get_or_init(|| {
            let master_status = Arc::new(GaugeVec::gauge(
                "leader_election_master_status",
                "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates \
                 master. 'name' is the string used to identify the lease. Please make sure to group by name.",
                &["name"],
            ));
            metrics::global().register(master_status.clone());
            LeaderMetrics { master_status }
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
}
