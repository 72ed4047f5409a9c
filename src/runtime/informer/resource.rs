//! Informers addressed by a resource found at run time ([`ApiResource`]) for handlers that
//! only need object metadata, as upstream's `informerfactory.ForResource` (the typed factory
//! for built-in kinds, the metadata informer factory for the rest).
//!
//! A built-in kind listed in [`typed_for_resource`] is served by the factory's typed informer
//! of that kind, so that the garbage collector and a controller reading the same kind share one
//! list and one watch; any other resource gets a metadata-only informer. Either way handlers
//! receive [`PartialObjectMetadata`] events.

use std::any::Any;
use std::sync::Arc;

use k8s_openapi::api::{admissionregistration, apiserverinternal, autoscaling, certificates, node, scheduling};
use k8s_openapi::api::{apps, batch, coordination, core, discovery, networking, policy, rbac, storage};

use super::{Cached, Event, Informable, Informer, SharedInformerFactory};
use crate::client::discovery::ApiResource;
use crate::client::metadata::PartialObjectMetadata;

/// A handler of metadata events.
pub type MetadataHandler = Box<dyn Fn(&Event<PartialObjectMetadata>) + Send + Sync>;

/// An informer seen through the metadata of its objects.
pub trait ResourceInformer: Send + Sync {
    /// Whether the first full list has been delivered.
    fn has_synced(&self) -> bool;

    /// Registers a handler of every change, as [`Informer::add_handler`] (same rules: it
    /// must not block; cached objects are replayed first as `Added`).
    fn add_metadata_handler(&self, handler: MetadataHandler);

    /// The metadata of every cached object.
    fn list_metadata(&self) -> Vec<Arc<PartialObjectMetadata>>;

    /// The resourceVersion its reflector last synced to (client-go's `LastSyncResourceVersion`).
    fn last_sync_resource_version(&self) -> String;
}

impl<K: Cached> ResourceInformer for Informer<K> {
    fn has_synced(&self) -> bool {
        Informer::has_synced(self)
    }

    fn add_metadata_handler(&self, handler: MetadataHandler) {
        self.add_handler(move |event: &Event<K>| handler(&metadata_event(event)));
    }

    fn list_metadata(&self) -> Vec<Arc<PartialObjectMetadata>> {
        self.store().list().iter().map(as_metadata).collect()
    }

    fn last_sync_resource_version(&self) -> String {
        Informer::last_sync_resource_version(self)
    }
}

/// The metadata view of an object: the object itself if it is metadata-only already.
fn as_metadata<K: Cached>(object: &Arc<K>) -> Arc<PartialObjectMetadata> {
    let any: Arc<dyn Any + Send + Sync> = object.clone();
    match any.downcast::<PartialObjectMetadata>() {
        Ok(partial) => partial,
        Err(_) => Arc::new(PartialObjectMetadata::from_metadata(object.metadata().clone())),
    }
}

fn metadata_event<K: Cached>(event: &Event<K>) -> Event<PartialObjectMetadata> {
    match event {
        Event::Added(o) => Event::Added(as_metadata(o)),
        // A resync keeps `old` and `new` the same object.
        Event::Updated { old, new } if Arc::ptr_eq(old, new) => {
            let same = as_metadata(new);
            Event::Updated { old: same.clone(), new: same }
        }
        Event::Updated { old, new } => Event::Updated { old: as_metadata(old), new: as_metadata(new) },
        Event::Deleted { object, final_state_unknown } => {
            Event::Deleted { object: as_metadata(object), final_state_unknown: *final_state_unknown }
        }
    }
}

/// What to do with the built-in kind a resource names (a generic closure).
pub(super) trait KindVisitor {
    type Out;
    fn visit<K: Informable>(self) -> Self::Out;
}

/// Calls `visitor` with the built-in kind whose `group/version/plural` is the resource's.
macro_rules! typed_table {
    ($visitor:expr, $resource:expr, $( $t:ty ),* $(,)?) => {{
        use k8s_openapi::Resource as _;
        let r = $resource;
        $(
            if r.group == <$t>::GROUP && r.version == <$t>::VERSION && r.plural == <$t>::URL_PATH_SEGMENT {
                return Some($visitor.visit::<$t>());
            }
        )*
        None
    }};
}

/// The typed informer serving `resource`, if it is one of the built-in kinds the controllers
/// of this process read (upstream's typed factory knows every built-in kind; kinds not listed
/// here fall back to a metadata-only informer, which only costs a second watch if a controller
/// also asks for the typed informer of that kind).
pub(super) fn typed_for_resource(
    factory: &SharedInformerFactory,
    resource: &ApiResource,
) -> Option<Arc<dyn ResourceInformer>> {
    struct Create<'a>(&'a SharedInformerFactory);
    impl KindVisitor for Create<'_> {
        type Out = Arc<dyn ResourceInformer>;
        fn visit<K: Informable>(self) -> Self::Out {
            self.0.informer::<K>()
        }
    }
    visit_builtin_kind(resource, Create(factory))
}

/// `visitor`'s answer for the built-in kind `resource` names, if it names one of them.
pub(super) fn visit_builtin_kind<V: KindVisitor>(resource: &ApiResource, visitor: V) -> Option<V::Out> {
    typed_table!(
        visitor,
        resource,
        core::v1::Pod,
        core::v1::ReplicationController,
        core::v1::Service,
        core::v1::Endpoints,
        core::v1::ConfigMap,
        core::v1::Secret,
        core::v1::ServiceAccount,
        core::v1::Namespace,
        core::v1::Node,
        core::v1::PersistentVolume,
        core::v1::PersistentVolumeClaim,
        core::v1::ResourceQuota,
        core::v1::LimitRange,
        core::v1::PodTemplate,
        apps::v1::ReplicaSet,
        apps::v1::Deployment,
        apps::v1::StatefulSet,
        apps::v1::DaemonSet,
        apps::v1::ControllerRevision,
        batch::v1::Job,
        batch::v1::CronJob,
        coordination::v1::Lease,
        discovery::v1::EndpointSlice,
        networking::v1::Ingress,
        networking::v1::NetworkPolicy,
        policy::v1::PodDisruptionBudget,
        rbac::v1::Role,
        rbac::v1::RoleBinding,
        rbac::v1::ClusterRole,
        rbac::v1::ClusterRoleBinding,
        storage::v1::StorageClass,
        storage::v1::VolumeAttachment,
        storage::v1::CSINode,
        storage::v1::CSIDriver,
        autoscaling::v2::HorizontalPodAutoscaler,
        certificates::v1::CertificateSigningRequest,
        admissionregistration::v1::ValidatingWebhookConfiguration,
        admissionregistration::v1::MutatingWebhookConfiguration,
        node::v1::RuntimeClass,
        scheduling::v1::PriorityClass,
        // Read by the feature-gated controllers.
        certificates::v1beta1::PodCertificateRequest,
        scheduling::v1alpha2::PodGroup,
        apiserverinternal::v1alpha1::StorageVersion,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    #[test]
    fn typed_events_become_metadata_events_and_resyncs_stay_resyncs() {
        let config_map = Arc::new(ConfigMap {
            metadata: ObjectMeta { name: Some("a".into()), uid: Some("u1".into()), ..ObjectMeta::default() },
            ..ConfigMap::default()
        });
        let resync = metadata_event(&Event::Updated { old: config_map.clone(), new: config_map.clone() });
        let Event::Updated { old, new } = resync else { panic!("an update") };
        assert!(Arc::ptr_eq(&old, &new));
        assert_eq!(new.metadata.uid.as_deref(), Some("u1"));
        assert_eq!(new.kind, "PartialObjectMetadata");

        let partial = Arc::new(PartialObjectMetadata::from_metadata(config_map.metadata.clone()));
        let Event::Added(same) = metadata_event(&Event::Added(partial.clone())) else { panic!("an add") };
        assert!(Arc::ptr_eq(&same, &partial), "metadata objects are not copied");
    }

    #[test]
    fn built_in_kinds_map_to_typed_informers() {
        let config = crate::client::RestConfig {
            server: "https://127.0.0.1:1".into(),
            tls: Default::default(),
            auth: crate::client::config::Auth::None,
            source: "test".into(),
        };
        let client = crate::client::Client::new(config, crate::client::ClientOptions::default()).expect("a client");
        let factory = SharedInformerFactory::new(client, std::time::Duration::ZERO);
        let pods = ApiResource::of::<core::v1::Pod>(true);
        assert!(typed_for_resource(&factory, &pods).is_some());
        let typed = factory.informer::<core::v1::Pod>();
        let via_resource = factory.for_resource(&pods);
        let typed_dyn: Arc<dyn ResourceInformer> = typed;
        assert!(std::ptr::addr_eq(Arc::as_ptr(&typed_dyn), Arc::as_ptr(&via_resource)), "one shared informer");
        let widgets = ApiResource { group: "example.com".into(), plural: "widgets".into(), ..pods };
        assert!(typed_for_resource(&factory, &widgets).is_none());
        let first = factory.metadata_informer(&widgets);
        assert!(Arc::ptr_eq(&first, &factory.metadata_informer(&widgets)));
    }

    #[test]
    fn only_started_informers_are_found_and_none_is_created() {
        let config = crate::client::RestConfig {
            server: "https://127.0.0.1:1".into(),
            tls: Default::default(),
            auth: crate::client::config::Auth::None,
            source: "test".into(),
        };
        let client = crate::client::Client::new(config, crate::client::ClientOptions::default()).expect("a client");
        let factory = SharedInformerFactory::new(client, std::time::Duration::ZERO);
        let pods = ApiResource::of::<core::v1::Pod>(true);
        let widgets = ApiResource { group: "example.com".into(), plural: "widgets".into(), ..pods.clone() };
        assert!(factory.started_for_resource(&pods).is_none());
        assert!(factory.started_for_resource(&widgets).is_none());
        let (_, created) = factory.recording(|| factory.started_for_resource(&pods));
        assert!(created.0.is_empty(), "a lookup creates no informer");
        let typed = factory.informer::<core::v1::Pod>();
        let metadata = factory.metadata_informer(&widgets);
        assert!(factory.started_for_resource(&pods).is_none(), "not started yet");
        factory.start();
        let found = factory.started_for_resource(&pods).expect("the started pod informer");
        let typed_dyn: Arc<dyn ResourceInformer> = typed;
        assert!(std::ptr::addr_eq(Arc::as_ptr(&typed_dyn), Arc::as_ptr(&found)));
        let found = factory.started_for_resource(&widgets).expect("the started metadata informer");
        let metadata_dyn: Arc<dyn ResourceInformer> = metadata;
        assert!(std::ptr::addr_eq(Arc::as_ptr(&metadata_dyn), Arc::as_ptr(&found)));
        factory.shutdown();
    }
}
