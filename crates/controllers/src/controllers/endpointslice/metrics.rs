//! Upstream's staging `k8s.io/endpointslice/metrics` (v1.36: six families BETA): the
//! controller's families and the cache that turns each Service's last reconciliation into the
//! desired/actual gauges.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use crate::metrics::{CounterVec, DEFAULT_BUCKETS, GaugeVec, HistogramVec, exponential_buckets, global};

/// The families `RegisterMetrics` registers (besides `syncs`, kept with the controller).
pub struct Families {
    /// `EndpointsAddedPerSync`.
    pub endpoints_added_per_sync: Arc<HistogramVec>,
    /// `EndpointsRemovedPerSync`.
    pub endpoints_removed_per_sync: Arc<HistogramVec>,
    /// `EndpointsDesired`.
    pub endpoints_desired: Arc<GaugeVec>,
    /// `NumEndpointSlices`.
    pub num_endpoint_slices: Arc<GaugeVec>,
    /// `DesiredEndpointSlices`.
    pub desired_endpoint_slices: Arc<GaugeVec>,
    /// `EndpointSliceChanges`.
    pub changes: Arc<CounterVec>,
    /// `EndpointSlicesChangedPerSync`.
    pub endpointslices_changed_per_sync: Arc<HistogramVec>,
    /// `ServicesCountByTrafficDistribution`.
    pub services_count_by_traffic_distribution: Arc<GaugeVec>,
}

/// The families, registered on first use.
pub fn families() -> &'static Families {
    static FAMILIES: OnceLock<Families> = OnceLock::new();
    FAMILIES.get_or_init(|| {
        let per_sync = |name, help| Arc::new(HistogramVec::new(name, help, &[], &exponential_buckets(2.0, 2.0, 15)));
        let gauge = |name, help, labels| Arc::new(GaugeVec::gauge(name, help, labels));
        let f = Families {
            endpoints_added_per_sync: per_sync(
                "endpoint_slice_controller_endpoints_added_per_sync",
                "[BETA] Number of endpoints added on each Service sync",
            ),
            endpoints_removed_per_sync: per_sync(
                "endpoint_slice_controller_endpoints_removed_per_sync",
                "[BETA] Number of endpoints removed on each Service sync",
            ),
            endpoints_desired: gauge(
                "endpoint_slice_controller_endpoints_desired",
                "[BETA] Number of endpoints desired",
                &[],
            ),
            num_endpoint_slices: gauge(
                "endpoint_slice_controller_num_endpoint_slices",
                "[BETA] Number of EndpointSlices",
                &[],
            ),
            desired_endpoint_slices: gauge(
                "endpoint_slice_controller_desired_endpoint_slices",
                "[BETA] Number of EndpointSlices that would exist with perfect endpoint allocation",
                &[],
            ),
            changes: Arc::new(CounterVec::counter(
                "endpoint_slice_controller_changes",
                "[ALPHA] Number of EndpointSlice changes",
                &["operation"],
            )),
            // No stability level upstream: ALPHA by default.
            endpointslices_changed_per_sync: Arc::new(HistogramVec::new(
                "endpoint_slice_controller_endpointslices_changed_per_sync",
                "[ALPHA] Number of EndpointSlices changed on each Service sync",
                &["topology", "traffic_distribution"],
                &DEFAULT_BUCKETS,
            )),
            services_count_by_traffic_distribution: gauge(
                "endpoint_slice_controller_services_count_by_traffic_distribution",
                "[BETA] Number of Services using some specific trafficDistribution",
                &["traffic_distribution"],
            ),
        };
        global().register(f.endpoints_added_per_sync.clone());
        global().register(f.endpoints_removed_per_sync.clone());
        global().register(f.endpoints_desired.clone());
        global().register(f.num_endpoint_slices.clone());
        global().register(f.desired_endpoint_slices.clone());
        global().register(f.changes.clone());
        global().register(f.endpointslices_changed_per_sync.clone());
        global().register(f.services_count_by_traffic_distribution.clone());
        f
    })
}

/// `EfficiencyInfo`: one port set's desired endpoints and the slices it will have.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Efficiency {
    /// Desired endpoints.
    pub endpoints: usize,
    /// Slices once the plan is written.
    pub slices: usize,
}

/// `ServicePortCache`: a Service's efficiency per port map key (of one address type).
pub type PortCache = BTreeMap<String, Efficiency>;

/// `numDesiredSlices`.
fn num_desired_slices(endpoints: usize, max: usize) -> usize {
    match endpoints {
        0 => 0,
        n if n <= max => 1,
        n => n.div_ceil(max),
    }
}

/// `ServicePortCache.totals`: actual slices, desired slices (at least 1), endpoints.
fn totals(cache: &PortCache, max: usize) -> (i64, i64, i64) {
    let (mut actual, mut desired, mut endpoints) = (0, 0, 0);
    for info in cache.values() {
        endpoints += info.endpoints as i64;
        actual += info.slices as i64;
        desired += num_desired_slices(info.endpoints, max) as i64;
    }
    (actual, desired.max(1), endpoints)
}

#[derive(Default)]
struct State {
    num_endpoints: i64,
    num_slices_actual: i64,
    num_slices_desired: i64,
    cache: BTreeMap<String, PortCache>,
    by_traffic_distribution: BTreeMap<String, BTreeSet<String>>,
}

/// Upstream's metrics `Cache`: running totals over every Service's last reconciliation.
pub struct Cache {
    max_endpoints_per_slice: usize,
    state: Mutex<State>,
}

impl Cache {
    /// `NewCache`.
    pub fn new(max_endpoints_per_slice: usize) -> Self {
        Cache { max_endpoints_per_slice, state: Mutex::new(State::default()) }
    }

    /// `UpdateServicePortCache`: replaces the Service's entry. As upstream, the entry is per
    /// Service, so a dual-stack Service's second address type replaces its first.
    pub fn update_service_port_cache(&self, service: &str, ports: PortCache) {
        let mut s = self.state.lock();
        let (prev_actual, prev_desired, prev_endpoints) =
            s.cache.get(service).map_or((0, 0, 0), |c| totals(c, self.max_endpoints_per_slice));
        let (actual, desired, endpoints) = totals(&ports, self.max_endpoints_per_slice);
        s.num_endpoints += endpoints - prev_endpoints;
        s.num_slices_desired += desired - prev_desired;
        s.num_slices_actual += actual - prev_actual;
        s.cache.insert(service.to_string(), ports);
        update_metrics(&s);
    }

    /// `UpdateTrafficDistributionForService`: `None` counts the Service under no value.
    pub fn update_traffic_distribution(&self, service: &str, distribution: Option<&str>) {
        let mut s = self.state.lock();
        s.by_traffic_distribution.values_mut().for_each(|set| {
            set.remove(service);
        });
        if let Some(value) = distribution {
            s.by_traffic_distribution.entry(value.to_string()).or_default().insert(service.to_string());
        }
        update_metrics(&s);
    }

    /// `DeleteService`.
    pub fn delete_service(&self, service: &str) {
        let mut s = self.state.lock();
        s.by_traffic_distribution.values_mut().for_each(|set| {
            set.remove(service);
        });
        if let Some(ports) = s.cache.remove(service) {
            let (actual, desired, endpoints) = totals(&ports, self.max_endpoints_per_slice);
            s.num_endpoints -= endpoints;
            s.num_slices_desired -= desired;
            s.num_slices_actual -= actual;
            update_metrics(&s);
        }
    }
}

/// `updateMetrics`; a value once seen keeps its (possibly 0) series, as Go's map keeps the
/// emptied set.
fn update_metrics(s: &State) {
    let f = families();
    f.num_endpoint_slices.set(&[], s.num_slices_actual as f64);
    f.desired_endpoint_slices.set(&[], s.num_slices_desired as f64);
    f.endpoints_desired.set(&[], s.num_endpoints as f64);
    f.services_count_by_traffic_distribution.reset();
    for (value, services) in &s.by_traffic_distribution {
        f.services_count_by_traffic_distribution.set(&[value], services.len() as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ports(entries: &[(&str, usize, usize)]) -> PortCache {
        entries.iter().map(|(k, e, s)| (k.to_string(), Efficiency { endpoints: *e, slices: *s })).collect()
    }

    #[test]
    fn desired_slices_round_up_and_count_at_least_one() {
        assert_eq!(num_desired_slices(0, 100), 0);
        assert_eq!(num_desired_slices(100, 100), 1);
        assert_eq!(num_desired_slices(101, 100), 2);
        assert_eq!(totals(&PortCache::new(), 100), (0, 1, 0));
        assert_eq!(totals(&ports(&[("a", 150, 3), ("b", 0, 1)]), 100), (4, 2, 150));
    }

    #[test]
    fn cache_keeps_running_totals_per_service() {
        let cache = Cache::new(10);
        let totals = |c: &Cache| {
            let s = c.state.lock();
            (s.num_endpoints, s.num_slices_actual, s.num_slices_desired)
        };
        cache.update_service_port_cache("ns/a", ports(&[("p", 25, 4)]));
        cache.update_service_port_cache("ns/b", ports(&[("p", 5, 1)]));
        assert_eq!(totals(&cache), (30, 5, 4));
        cache.update_service_port_cache("ns/a", ports(&[("p", 10, 1)]));
        assert_eq!(totals(&cache), (15, 2, 2));
        cache.delete_service("ns/a");
        assert_eq!(totals(&cache), (5, 1, 1));
    }

    #[test]
    fn services_are_counted_under_one_traffic_distribution() {
        let cache = Cache::new(10);
        cache.update_traffic_distribution("ns/a", Some("PreferClose"));
        cache.update_traffic_distribution("ns/b", Some("PreferClose"));
        cache.update_traffic_distribution("ns/a", None);
        let s = cache.state.lock();
        assert_eq!(s.by_traffic_distribution["PreferClose"].len(), 1);
    }

    #[test]
    fn six_families_are_beta_since_v1_36() {
        let f = families();
        f.endpoints_added_per_sync.observe(&[], 1.0);
        f.endpoints_desired.set(&[], 1.0);
        f.changes.inc(&["create"]);
        let text = global().render();
        let help = |name: &str| {
            let prefix = format!("# HELP endpoint_slice_controller_{name} ");
            text.lines()
                .find_map(|l| l.strip_prefix(prefix.as_str()))
                .map(|h| h.split(' ').next().unwrap_or("").to_string())
        };
        assert_eq!(help("endpoints_added_per_sync").as_deref(), Some("[BETA]"));
        assert_eq!(help("endpoints_desired").as_deref(), Some("[BETA]"));
        assert_eq!(help("changes").as_deref(), Some("[ALPHA]"), "unchanged");
    }
}
