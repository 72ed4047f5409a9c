//! Upstream's `EndpointSliceTracker` (`k8s.io/endpointslice/util/endpointslice_tracker.go`):
//! the generation of every EndpointSlice a controller wrote, by Service, so that it notices a
//! stale informer cache (and does not create duplicate slices from it) and ignores the watch
//! events of its own writes.

use std::collections::HashMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use parking_lot::Mutex;

use super::LABEL_SERVICE_NAME;

/// The generation recorded for a slice the controller deleted.
const DELETION_EXPECTED: i64 = -1;

/// Generations by slice UID, by Service key.
#[derive(Debug, Default)]
pub struct EndpointSliceTracker {
    generations: Mutex<HashMap<String, HashMap<String, i64>>>,
}

/// The key of the Service a slice belongs to (`getServiceNN`: its service-name label).
fn service_key(slice: &EndpointSlice) -> String {
    let name = slice.metadata.labels.as_ref().and_then(|l| l.get(LABEL_SERVICE_NAME)).map_or("", String::as_str);
    format!("{}/{name}", slice.metadata.namespace.as_deref().unwrap_or(""))
}

fn uid(slice: &EndpointSlice) -> String {
    slice.metadata.uid.clone().unwrap_or_default()
}

fn generation(slice: &EndpointSlice) -> i64 {
    slice.metadata.generation.unwrap_or(0)
}

impl EndpointSliceTracker {
    /// `Has`: the slice is tracked.
    pub fn has(&self, slice: &EndpointSlice) -> bool {
        self.generations.lock().get(&service_key(slice)).is_some_and(|g| g.contains_key(&uid(slice)))
    }

    /// `ShouldSync`: the slice is untracked or newer than what the controller wrote.
    pub fn should_sync(&self, slice: &EndpointSlice) -> bool {
        let generations = self.generations.lock();
        match generations.get(&service_key(slice)).and_then(|g| g.get(&uid(slice))) {
            None => true,
            Some(tracked) => generation(slice) > *tracked,
        }
    }

    /// `StaleSlices`: the cached slices of the Service are older than what the controller
    /// wrote, include one it deleted, or miss one it created.
    pub fn stale_slices(&self, service: &Service, slices: &[std::sync::Arc<EndpointSlice>]) -> bool {
        let key = crate::runtime::informer::object_key(&service.metadata);
        let generations = self.generations.lock();
        let Some(tracked) = generations.get(&key) else { return false };
        let mut provided = std::collections::HashSet::new();
        for slice in slices {
            let uid = uid(slice);
            if let Some(g) = tracked.get(&uid)
                && (*g == DELETION_EXPECTED || *g > generation(slice))
            {
                return true;
            }
            provided.insert(uid);
        }
        tracked.iter().any(|(uid, g)| *g != DELETION_EXPECTED && !provided.contains(uid))
    }

    /// `Update`: the controller wrote the slice (as returned by the server).
    pub fn update(&self, slice: &EndpointSlice) {
        self.generations.lock().entry(service_key(slice)).or_default().insert(uid(slice), generation(slice));
    }

    /// `ExpectDeletion`: the controller deleted the slice.
    pub fn expect_deletion(&self, slice: &EndpointSlice) {
        self.generations.lock().entry(service_key(slice)).or_default().insert(uid(slice), DELETION_EXPECTED);
    }

    /// `HandleDeletion`: forgets a deleted slice; false if the deletion was not the
    /// controller's (so the Service needs a sync).
    pub fn handle_deletion(&self, slice: &EndpointSlice) -> bool {
        let mut generations = self.generations.lock();
        let Some(tracked) = generations.get_mut(&service_key(slice)) else { return true };
        !matches!(tracked.remove(&uid(slice)), Some(g) if g != DELETION_EXPECTED)
    }

    /// `DeleteService`.
    pub fn delete_service(&self, namespace: &str, name: &str) {
        self.generations.lock().remove(&format!("{namespace}/{name}"));
    }
}
