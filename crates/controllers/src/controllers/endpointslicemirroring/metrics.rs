//! Upstream's `pkg/controller/endpointslicemirroring/metrics`: the families besides the sync
//! duration, and the cache that turns each Endpoints' last reconciliation into the gauges.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::metrics::{CounterVec, GaugeVec, HistogramVec, exponential_buckets, global};

/// The families `RegisterMetrics` registers besides `endpoints_sync_duration`.
pub struct Families {
    /// `EndpointsAddedPerSync`.
    pub endpoints_added_per_sync: Arc<HistogramVec>,
    /// `EndpointsUpdatedPerSync`.
    pub endpoints_updated_per_sync: Arc<HistogramVec>,
    /// `EndpointsRemovedPerSync`.
    pub endpoints_removed_per_sync: Arc<HistogramVec>,
    /// `AddressesSkippedPerSync`.
    pub addresses_skipped_per_sync: Arc<HistogramVec>,
    /// `EndpointsDesired`.
    pub endpoints_desired: Arc<GaugeVec>,
    /// `NumEndpointSlices`.
    pub num_endpoint_slices: Arc<GaugeVec>,
    /// `DesiredEndpointSlices`.
    pub desired_endpoint_slices: Arc<GaugeVec>,
    /// `EndpointSliceChanges`.
    pub changes: Arc<CounterVec>,
}

/// The families, registered on first use.
pub fn families() -> &'static Families {
    static FAMILIES: OnceLock<Families> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        let per_sync = |name, help| Arc::new(HistogramVec::new(name, help, &[], &exponential_buckets(2.0, 2.0, 15)));
        let gauge = |name, help| Arc::new(GaugeVec::gauge(name, help, &[]));
        let f = Families {
            endpoints_added_per_sync: per_sync(
                "endpoint_slice_mirroring_controller_endpoints_added_per_sync",
                "[ALPHA] Number of endpoints added on each Endpoints sync",
            ),
            endpoints_updated_per_sync: per_sync(
                "endpoint_slice_mirroring_controller_endpoints_updated_per_sync",
                "[ALPHA] Number of endpoints updated on each Endpoints sync",
            ),
            endpoints_removed_per_sync: per_sync(
                "endpoint_slice_mirroring_controller_endpoints_removed_per_sync",
                "[ALPHA] Number of endpoints removed on each Endpoints sync",
            ),
            addresses_skipped_per_sync: per_sync(
                "endpoint_slice_mirroring_controller_addresses_skipped_per_sync",
                "[ALPHA] Number of addresses skipped on each Endpoints sync due to being invalid or exceeding MaxEndpointsPerSubset",
            ),
            endpoints_desired: gauge("endpoint_slice_mirroring_controller_endpoints_desired", "[ALPHA] Number of endpoints desired"),
            num_endpoint_slices: gauge("endpoint_slice_mirroring_controller_num_endpoint_slices", "[ALPHA] Number of EndpointSlices"),
            desired_endpoint_slices: gauge(
                "endpoint_slice_mirroring_controller_desired_endpoint_slices",
                "[ALPHA] Number of EndpointSlices that would exist with perfect endpoint allocation",
            ),
            changes: Arc::new(CounterVec::counter(
                "endpoint_slice_mirroring_controller_changes",
                "[ALPHA] Number of EndpointSlice changes",
                &["operation"],
            )),
        };
        global().register(f.endpoints_added_per_sync.clone());
        global().register(f.endpoints_updated_per_sync.clone());
        global().register(f.endpoints_removed_per_sync.clone());
        global().register(f.addresses_skipped_per_sync.clone());
        global().register(f.endpoints_desired.clone());
        global().register(f.num_endpoint_slices.clone());
        global().register(f.desired_endpoint_slices.clone());
        global().register(f.changes.clone());
        f
    })
}

/// `EfficiencyInfo`: one (address type, ports) key's desired endpoints and its slices.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Efficiency {
    /// Desired endpoints.
    pub endpoints: usize,
    /// Slices once the plan is written.
    pub slices: usize,
}

/// `EndpointPortCache`: an Endpoints' efficiency per key.
pub type PortCache = BTreeMap<String, Efficiency>;

fn num_endpoints(cache: &PortCache) -> i64 {
    cache.values().map(|e| e.endpoints as i64).sum()
}

/// Upstream's mirroring metrics `Cache`.
pub struct Cache {
    max_endpoints_per_slice: usize,
    state: Mutex<(i64, BTreeMap<String, PortCache>)>,
}

impl Cache {
    /// `NewCache`.
    pub fn new(max_endpoints_per_slice: usize) -> Self {
        Cache { max_endpoints_per_slice, state: Mutex::new((0, BTreeMap::new())) }
    }

    /// `UpdateEndpointPortCache`.
    pub fn update_endpoint_port_cache(&self, endpoints: &str, ports: PortCache) {
        let mut s = self.state.lock();
        let previous = s.1.get(endpoints).map_or(0, num_endpoints);
        s.0 += num_endpoints(&ports) - previous;
        s.1.insert(endpoints.to_string(), ports);
        self.update_metrics(&s);
    }

    /// `DeleteEndpoints`.
    pub fn delete_endpoints(&self, endpoints: &str) {
        let mut s = self.state.lock();
        if let Some(ports) = s.1.remove(endpoints) {
            s.0 -= num_endpoints(&ports);
            self.update_metrics(&s);
        }
    }

    /// `desiredAndActualSlices`: recounted over every Endpoints, as upstream does.
    fn desired_and_actual(&self, caches: &BTreeMap<String, PortCache>) -> (usize, usize) {
        let infos = caches.values().flat_map(|c| c.values());
        infos.fold((0, 0), |(desired, actual), e| {
            (desired + e.endpoints.div_ceil(self.max_endpoints_per_slice.max(1)), actual + e.slices)
        })
    }

    /// `updateMetrics`.
    fn update_metrics(&self, s: &(i64, BTreeMap<String, PortCache>)) {
        let (desired, actual) = self.desired_and_actual(&s.1);
        let f = families();
        f.num_endpoint_slices.set(&[], actual as f64);
        f.desired_endpoint_slices.set(&[], desired as f64);
        f.endpoints_desired.set(&[], s.0 as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ports(entries: &[(&str, usize, usize)]) -> PortCache {
        entries.iter().map(|(k, e, s)| (k.to_string(), Efficiency { endpoints: *e, slices: *s })).collect()
    }

    #[test]
    fn cache_counts_endpoints_and_slices_over_all_endpoints() {
        let cache = Cache::new(10);
        cache.update_endpoint_port_cache("ns/a", ports(&[("IPv4-p", 25, 1), ("IPv6-p", 0, 0)]));
        cache.update_endpoint_port_cache("ns/b", ports(&[("IPv4-p", 5, 2)]));
        let snapshot = |c: &Cache| {
            let s = c.state.lock();
            (s.0, c.desired_and_actual(&s.1))
        };
        assert_eq!(snapshot(&cache), (30, (4, 3)));
        cache.update_endpoint_port_cache("ns/a", ports(&[("IPv4-p", 10, 1)]));
        assert_eq!(snapshot(&cache), (15, (2, 3)));
        cache.delete_endpoints("ns/b");
        assert_eq!(snapshot(&cache), (10, (1, 1)));
    }
}
