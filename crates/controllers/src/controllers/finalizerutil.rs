//! What the controllers that guard an object with a finalizer share (the PV, PVC,
//! VolumeAttributesClass and PodGroup protection controllers, and the `has_finalizer` test of
//! others): upstream's `pkg/controller/volume/protectionutil` (`IsDeletionCandidate`,
//! `NeedToAddFinalizer`), `slice.RemoveString`, and the `Update` their `addFinalizer` and
//! `removeFinalizer` send. The log lines around a write are each controller's.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::{Metadata, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::client::{self, Api, PostParams, Scope};
use crate::runtime::informer::Informer;

/// Whether the object holds `finalizer`.
pub fn has_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.finalizers.iter().flatten().any(|f| f == finalizer)
}

/// `IsDeletionCandidate`: being deleted and still holding `finalizer`.
pub fn is_deletion_candidate(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.deletion_timestamp.is_some() && has_finalizer(meta, finalizer)
}

/// `NeedToAddFinalizer`: not being deleted and lacking `finalizer`.
pub fn need_to_add_finalizer(meta: &ObjectMeta, finalizer: &str) -> bool {
    meta.deletion_timestamp.is_none() && !has_finalizer(meta, finalizer)
}

/// The finalizers without `finalizer` (`slice.RemoveString`), `None` when none are left.
pub fn without_finalizer(meta: &ObjectMeta, finalizer: &str) -> Option<Vec<String>> {
    let rest: Vec<String> = meta.finalizers.iter().flatten().filter(|f| *f != finalizer).cloned().collect();
    (!rest.is_empty()).then_some(rest)
}

/// `addFinalizer` (`add`) or `removeFinalizer` without their logs: an `Update` through `api` of
/// the cached `object` with `finalizer` appended to its finalizers or taken out of them. What
/// the server returned goes to `informer` (`MutationCache.Mutation`), so that the next sync of
/// the object reads it.
pub fn update_finalizer<K>(
    api: &Api<K>,
    informer: &Informer<K>,
    object: &K,
    finalizer: &str,
    add: bool,
) -> Result<(), client::Error>
where
    K: Resource + Metadata<Ty = ObjectMeta> + Clone + Serialize + DeserializeOwned + 'static,
    K::Scope: Scope,
{
    let mut updated = object.clone();
    let meta = updated.metadata_mut();
    if add {
        meta.finalizers.get_or_insert_with(Vec::new).push(finalizer.to_string());
    } else {
        meta.finalizers = without_finalizer(object.metadata(), finalizer);
    }
    let name = object.metadata().name.as_deref().unwrap_or_default();
    informer.mutation(api.replace(name, &updated, &PostParams::default())?);
    Ok(())
}

/// [`update_finalizer`] logged as the PV and VAC protection controllers log it (upstream's
/// V(3), at info here): `Added protection finalizer to PV PV="name"`, or the failure with
/// `err="…"`; `kind` is `PV` or `VAC`, the log key theirs use.
pub fn update_protection_finalizer<K>(
    api: &Api<K>,
    informer: &Informer<K>,
    object: &K,
    finalizer: &str,
    add: bool,
    kind: &str,
) -> Result<(), client::Error>
where
    K: Resource + Metadata<Ty = ObjectMeta> + Clone + Serialize + DeserializeOwned + 'static,
    K::Scope: Scope,
{
    let name = object.metadata().name.as_deref().unwrap_or_default();
    let (done, failed) = if add {
        ("Added protection finalizer to", "Error adding protection finalizer to")
    } else {
        ("Removed protection finalizer from", "Error removing protection finalizer from")
    };
    let result = update_finalizer(api, informer, object, finalizer, add);
    match &result {
        Ok(()) => log::info!("{done} {kind} {kind}=\"{name}\""),
        Err(e) => log::info!("{failed} {kind} {kind}=\"{name}\" err=\"{e}\""),
    }
    result
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use k8s_openapi::api::core::v1::PersistentVolumeClaim;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use serde_json::{Value, json};

    use super::*;
    use crate::controllers::podutil::testing::ErrorServer;
    use crate::runtime::informer::SharedInformerFactory;

    #[test]
    fn a_deleted_object_with_the_finalizer_is_a_candidate_and_a_live_one_without_it_needs_it() {
        let mut meta = ObjectMeta { finalizers: Some(vec!["a".into(), "f".into()]), ..ObjectMeta::default() };
        assert!(has_finalizer(&meta, "f"));
        assert!(!has_finalizer(&meta, "g"));
        assert!(!need_to_add_finalizer(&meta, "f"));
        assert!(!is_deletion_candidate(&meta, "f"));
        assert!(need_to_add_finalizer(&meta, "g"));
        meta.deletion_timestamp = Some(Time("2026-11-26T10:00:00Z".parse().expect("time")));
        assert!(is_deletion_candidate(&meta, "f"));
        assert!(!need_to_add_finalizer(&meta, "g"), "never added while deleting");
        assert_eq!(without_finalizer(&meta, "f"), Some(vec!["a".to_string()]));
        meta.finalizers = Some(vec!["f".into()]);
        assert_eq!(without_finalizer(&meta, "f"), None);
    }

    fn claim(finalizers: &[&str], version: &str) -> PersistentVolumeClaim {
        serde_json::from_value(json!({
            "metadata": {"name": "data", "namespace": "ns", "resourceVersion": version, "finalizers": finalizers},
        }))
        .expect("a claim")
    }

    /// An informer of claims holding `cached`.
    fn informer_of(cached: &PersistentVolumeClaim) -> Arc<Informer<PersistentVolumeClaim>> {
        let factory = SharedInformerFactory::new(crate::client::unreachable_client(), Duration::ZERO);
        let informer = factory.informer::<PersistentVolumeClaim>();
        informer.apply_for_test(cached.clone());
        informer
    }

    /// [`update_finalizer`] of `f` through `server`.
    fn update(
        server: &ErrorServer,
        informer: &Informer<PersistentVolumeClaim>,
        claim: &PersistentVolumeClaim,
        add: bool,
    ) -> Result<(), client::Error> {
        update_finalizer(&Api::namespaced(&server.client, "ns"), informer, claim, "f", add)
    }

    /// The resourceVersion of the claim the informer gives for reading.
    fn newest_version(informer: &Informer<PersistentVolumeClaim>) -> Option<String> {
        informer.get_newest("ns/data").and_then(|claim| claim.metadata.resource_version.clone())
    }

    /// The request line and the finalizers of the one object `server` was sent.
    fn sent_finalizers(server: &ErrorServer) -> (String, Value) {
        let received = server.received();
        let [(line, body)] = received.as_slice() else { panic!("one request: {received:?}") };
        let body: Value = serde_json::from_str(body).expect("a JSON body");
        (line.clone(), body["metadata"]["finalizers"].clone())
    }

    #[test]
    fn the_update_adds_or_removes_the_finalizer_and_the_informer_reads_what_was_written() {
        let cached = claim(&["a"], "1");
        let informer = informer_of(&cached);
        let server = ErrorServer::returning(serde_json::to_value(claim(&["a", "f"], "2")).expect("JSON"));
        update(&server, &informer, &cached, true).expect("added");
        let (line, finalizers) = sent_finalizers(&server);
        assert!(line.starts_with("PUT /api/v1/namespaces/ns/persistentvolumeclaims/data "), "{line}");
        assert_eq!(finalizers, json!(["a", "f"]));
        assert_eq!(newest_version(&informer).as_deref(), Some("2"), "the write is read back");

        let server = ErrorServer::returning(serde_json::to_value(claim(&[], "3")).expect("JSON"));
        update(&server, &informer, &claim(&["f"], "2"), false).expect("removed");
        assert_eq!(sent_finalizers(&server).1, Value::Null, "no finalizer left: none sent");
        assert_eq!(newest_version(&informer).as_deref(), Some("3"));
    }

    #[test]
    fn a_failed_update_keeps_the_api_error_and_the_cache() {
        let cached = claim(&["f"], "1");
        let informer = informer_of(&cached);
        let error = update(&ErrorServer::conflict(), &informer, &cached, false).expect_err("a conflict");
        assert!(error.is_conflict());
        assert_eq!(newest_version(&informer).as_deref(), Some("1"));
    }
}
