//! Upstream's `TriggerTimeTracker` (`k8s.io/endpointslice/util/trigger_time_tracker.go`): the
//! value of the `endpoints.kubernetes.io/last-change-trigger-time` annotation, i.e. when the
//! earliest change not yet reflected in a Service's endpoints happened.

use std::collections::HashMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, Service};
use parking_lot::Mutex;

/// What the last sync of one Service saw.
#[derive(Debug, Default)]
struct ServiceState {
    last_service_trigger_time: Option<Timestamp>,
    /// The Ready condition's last transition of each pod, by pod name.
    last_pod_trigger_times: HashMap<String, Timestamp>,
}

/// Trigger times by Service key (`namespace/name`).
#[derive(Debug, Default)]
pub struct TriggerTimeTracker {
    states: Mutex<HashMap<String, ServiceState>>,
}

/// `getPodTriggerTime`: when the pod's Ready condition last changed.
fn pod_trigger_time(pod: &Pod) -> Option<Timestamp> {
    let conditions = pod.status.as_ref().and_then(|s| s.conditions.as_ref());
    let ready = conditions.into_iter().flatten().find(|c| c.type_ == "Ready")?;
    ready.last_transition_time.as_ref().map(|t| t.0)
}

fn creation_time(service: &Service) -> Option<Timestamp> {
    service.metadata.creation_timestamp.as_ref().map(|t| t.0)
}

impl TriggerTimeTracker {
    /// `ComputeEndpointLastChangeTriggerTime`: the Service's creation time on its first sync;
    /// later, the earliest of the pod Ready transitions (and the Service's creation) newer
    /// than at the previous sync; `None` when nothing newer happened.
    pub fn compute(&self, service: &Service, pods: &[std::sync::Arc<Pod>]) -> Option<Timestamp> {
        let key = crate::runtime::informer::object_key(&service.metadata);
        let mut states = self.states.lock();
        let was_known = states.contains_key(&key);
        let state = states.entry(key).or_default();
        let mut trigger_times = Vec::new();
        let mut pod_times = HashMap::new();
        for pod in pods {
            let Some(time) = pod_trigger_time(pod) else { continue };
            let name = pod.metadata.name.clone().unwrap_or_default();
            if state.last_pod_trigger_times.get(&name).is_none_or(|last| time > *last) {
                trigger_times.push(time);
            }
            pod_times.insert(name, time);
        }
        let service_time = creation_time(service);
        if let Some(time) = service_time
            && state.last_service_trigger_time.is_none_or(|last| time > last)
        {
            trigger_times.push(time);
        }
        state.last_pod_trigger_times = pod_times;
        state.last_service_trigger_time = service_time;
        if !was_known {
            return service_time;
        }
        trigger_times.into_iter().min()
    }

    /// `DeleteService`.
    pub fn delete_service(&self, namespace: &str, name: &str) {
        self.states.lock().remove(&format!("{namespace}/{name}"));
    }
}
