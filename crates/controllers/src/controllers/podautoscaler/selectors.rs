//! Which HPAs select a pod (upstream's `hpaSelectors` BiMultimap): an HPA is registered with
//! a selector that selects nothing when first queued, and with its target's selector once a
//! reconciliation read it, so that two HPAs over the same pods are found out.

use std::collections::{BTreeSet, HashMap};

use k8s_openapi::api::core::v1::Pod;
use parking_lot::Mutex;

use crate::apimachinery::labels::Selector;

/// HPA keys to their selectors (`None`: `labels.Nothing()`).
#[derive(Default)]
pub struct HpaSelectors {
    selectors: Mutex<HashMap<String, Option<Selector>>>,
}

fn namespace_of(key: &str) -> &str {
    key.split_once('/').map_or("", |(ns, _)| ns)
}

impl HpaSelectors {
    /// Registers an HPA, selecting nothing, unless it is known; true when it was not.
    pub fn register(&self, key: &str) -> bool {
        let mut selectors = self.selectors.lock();
        if selectors.contains_key(key) {
            return false;
        }
        selectors.insert(key.to_string(), None);
        true
    }

    /// Forgets a deleted HPA.
    pub fn delete(&self, key: &str) {
        self.selectors.lock().remove(key);
    }

    /// Records a registered HPA's selector (an unregistered one, deleted meanwhile, stays out).
    pub fn put(&self, key: &str, selector: &Selector) {
        if let Some(entry) = self.selectors.lock().get_mut(key) {
            *entry = Some(selector.clone());
        }
    }

    /// `hpasControllingPodsUnderSelector`: the HPAs (sorted keys) selecting any of `pods`.
    pub fn controlling(&self, pods: &[std::sync::Arc<Pod>]) -> Vec<String> {
        let selectors = self.selectors.lock();
        let mut found = BTreeSet::new();
        for pod in pods {
            let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
            for (key, selector) in selectors.iter() {
                let Some(selector) = selector else { continue };
                if namespace_of(key) == namespace && selector.matches(pod.metadata.labels.as_ref()) {
                    found.insert(key.clone());
                }
            }
        }
        found.into_iter().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn pod(namespace: &str, app: &str) -> Arc<Pod> {
        let mut pod = Pod::default();
        pod.metadata.namespace = Some(namespace.into());
        pod.metadata.labels = Some([("app".to_string(), app.to_string())].into());
        Arc::new(pod)
    }

    #[test]
    fn finds_every_hpa_selecting_the_pods_in_their_namespace() {
        let s = HpaSelectors::default();
        s.register("ns/a");
        s.register("ns/b");
        s.register("other/c");
        let web = Selector::parse("app=web").unwrap();
        s.put("ns/a", &web);
        assert_eq!(s.controlling(&[pod("ns", "web")]), vec!["ns/a"]);
        s.put("ns/b", &web);
        s.put("other/c", &web);
        s.put("ns/unregistered", &web);
        assert_eq!(s.controlling(&[pod("ns", "web")]), vec!["ns/a", "ns/b"]);
        s.delete("ns/b");
        assert_eq!(s.controlling(&[pod("ns", "web"), pod("ns", "db")]), vec!["ns/a"]);
    }
}
