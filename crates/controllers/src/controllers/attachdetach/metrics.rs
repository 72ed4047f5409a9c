//! The controller's metrics (upstream's `attachdetach/metrics`): the state collector's
//! `attachdetach_controller_total_volumes` and `storage_count_attachable_volumes_in_use`,
//! computed at each scrape, and the forced-detach counter.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use k8s_openapi::api::core::v1::Pod;
use parking_lot::Mutex;

use super::actual::ActualState;
use super::desired::DesiredState;
use super::volumes::{Lookups, node_of, plugin_name, pod_volumes};
use crate::controllers::volumeutil::POD_PVC_INDEX;
use crate::metrics::{Collector, CounterVec, GaugeVec, registered};
use crate::runtime::informer::Informer;

/// `ForceDetachReasonTimeout`.
pub const FORCE_DETACH_REASON_TIMEOUT: &str = "timeout";
/// `ForceDetachReasonOutOfService`.
pub const FORCE_DETACH_REASON_OUT_OF_SERVICE: &str = "out-of-service";

/// `ForceDetachMetricCounter` (subsystem `attach_detach_controller`).
pub fn forced_detaches() -> &'static CounterVec {
    static METRIC: OnceLock<Arc<CounterVec>> = OnceLock::new();
    registered(&METRIC, || {
        CounterVec::counter(
            "attach_detach_controller_attachdetach_controller_forced_detaches",
            "[ALPHA] Number of times the A/D Controller performed a forced detach",
            &["reason"],
        )
    })
}

/// What the state collector reads: the running controller's state.
pub struct StateSources {
    pub desired: Arc<DesiredState>,
    pub actual: Arc<ActualState>,
    pub pods: Arc<Informer<Pod>>,
    pub lookups: Arc<Lookups>,
}

/// The collector registered once per process (`metrics.Register`'s `sync.Once`); it reads the
/// state of the controller started last.
struct StateCollector {
    sources: Mutex<Option<Arc<StateSources>>>,
}

fn collector() -> &'static StateCollector {
    static COLLECTOR: OnceLock<Arc<StateCollector>> = OnceLock::new();
    registered(&COLLECTOR, || StateCollector { sources: Mutex::new(None) })
}

/// `metrics.Register`.
pub fn register(sources: StateSources) {
    *collector().sources.lock() = Some(Arc::new(sources));
    forced_detaches();
}

impl Collector for StateCollector {
    fn write_to(&self, out: &mut String) {
        let Some(sources) = self.sources.lock().clone() else { return };
        let in_use = GaugeVec::gauge(
            "storage_count_attachable_volumes_in_use",
            "[ALPHA] Measure number of volumes in use",
            &["node", "volume_plugin"],
        );
        for ((node, plugin), count) in volumes_in_use(&sources) {
            in_use.set(&[&node, &plugin], count as f64);
        }
        in_use.write_to(out);
        let total = GaugeVec::gauge(
            "attachdetach_controller_total_volumes",
            "[ALPHA] Number of volumes in A/D Controller",
            &["plugin_name", "state"],
        );
        for ((plugin, state), count) in total_volumes(&sources) {
            total.set(&[&plugin, state], count as f64);
        }
        total.write_to(out);
    }
}

/// `getVolumeInUseCount`: attachable volumes of scheduled pods, per node and plugin.
fn volumes_in_use(sources: &StateSources) -> BTreeMap<(String, String), u64> {
    let mut counts = BTreeMap::new();
    // One pod unpacked at a time (a scrape must not decode the whole cache at once), and only
    // those naming a claim, as only they can have an attachable volume.
    sources.pods.store().for_each_indexed(POD_PVC_INDEX, |pod| {
        if node_of(&pod).is_empty() {
            return;
        }
        for volume in pod_volumes(&pod) {
            if let Ok(Some(spec)) = sources.lookups.attachable(&pod, volume) {
                *counts.entry((node_of(&pod).to_string(), plugin_name(&spec.driver))).or_insert(0) += 1;
            }
        }
    });
    counts
}

/// `getTotalVolumesCount`: volumes in each state of the world, per plugin.
fn total_volumes(sources: &StateSources) -> BTreeMap<(String, &'static str), u64> {
    let mut counts = BTreeMap::new();
    for volume in sources.desired.volumes_to_attach() {
        *counts.entry((plugin_name(&volume.spec.driver), "desired_state_of_world")).or_insert(0) += 1;
    }
    // A volume known only from a node's status has no spec: upstream's plugin lookup fails
    // for it and it is not counted.
    for spec in sources.actual.specs().into_iter().flatten() {
        *counts.entry((plugin_name(&spec.driver), "actual_state_of_world")).or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controllers::attachdetach::desired::PodRef;
    use crate::controllers::attachdetach::volumes::VolumeSpec;
    use crate::runtime::informer::SharedInformerFactory;

    #[test]
    fn the_state_collector_counts_each_state_per_plugin() {
        let client = crate::client::unreachable_client();
        let informers = SharedInformerFactory::new(client, std::time::Duration::ZERO);
        let sources = StateSources {
            desired: Arc::new(DesiredState::default()),
            actual: Arc::new(ActualState::default()),
            pods: informers.informer::<Pod>(),
            lookups: Arc::new(Lookups {
                claims: informers.informer(),
                volumes: informers.informer(),
                drivers: informers.informer(),
            }),
        };
        let spec =
            VolumeSpec { name: "pv1".into(), driver: "d.example".into(), handle: "h".into(), multi_attach: false };
        sources.desired.add_node("n1");
        let pod = PodRef { namespace: "default".into(), name: "p".into(), uid: "u".into() };
        sources.desired.add_pod(pod, &spec, "n1").expect("added");
        sources.actual.mark_attached(&spec.unique_name(), Some(spec.clone()), "n1", "");
        sources.actual.mark_attached("kubernetes.io/csi/d.example^old", None, "n1", "");
        let collector = StateCollector { sources: Mutex::new(Some(Arc::new(sources))) };
        let mut out = String::new();
        collector.write_to(&mut out);
        assert!(out.contains(
            "attachdetach_controller_total_volumes{plugin_name=\"kubernetes.io/csi:d.example\",state=\"actual_state_of_world\"} 1"
        ), "{out}");
        assert!(out.contains(
            "attachdetach_controller_total_volumes{plugin_name=\"kubernetes.io/csi:d.example\",state=\"desired_state_of_world\"} 1"
        ), "{out}");
    }
}
