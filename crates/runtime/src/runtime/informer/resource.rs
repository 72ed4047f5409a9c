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

    /// The metadata of the cached objects of one namespace (empty: cluster-scoped objects),
    /// through the namespace index: what upstream's listers' `ByNamespace` reads.
    fn namespace_metadata(&self, namespace: &str) -> Vec<Arc<PartialObjectMetadata>>;

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
        // From the metadata alone: a packed kind is not unpacked, all of it at once, for this.
        let metadata = self.store().all_metadata().into_iter();
        metadata.map(|meta| Arc::new(PartialObjectMetadata::from_metadata(meta))).collect()
    }

    fn namespace_metadata(&self, namespace: &str) -> Vec<Arc<PartialObjectMetadata>> {
        let metadata = self.store().namespace_metadata(namespace).into_iter();
        metadata.map(|meta| Arc::new(PartialObjectMetadata::from_metadata(meta))).collect()
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

/// Every resource upstream's typed informer factory serves (client-go v1.36's
/// `informers/generic.go`, `ForResource`), as (group, version, plural).
const CLIENT_GO_TYPED_RESOURCES: &[(&str, &str, &str)] = &[
    ("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "v1", "mutatingadmissionpolicybindings"),
    ("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings"),
    ("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "v1alpha1", "mutatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "v1alpha1", "mutatingadmissionpolicybindings"),
    ("admissionregistration.k8s.io", "v1alpha1", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "v1alpha1", "validatingadmissionpolicybindings"),
    ("admissionregistration.k8s.io", "v1beta1", "mutatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "v1beta1", "mutatingadmissionpolicybindings"),
    ("admissionregistration.k8s.io", "v1beta1", "mutatingwebhookconfigurations"),
    ("admissionregistration.k8s.io", "v1beta1", "validatingadmissionpolicies"),
    ("admissionregistration.k8s.io", "v1beta1", "validatingadmissionpolicybindings"),
    ("admissionregistration.k8s.io", "v1beta1", "validatingwebhookconfigurations"),
    ("apps", "v1", "controllerrevisions"),
    ("apps", "v1", "daemonsets"),
    ("apps", "v1", "deployments"),
    ("apps", "v1", "replicasets"),
    ("apps", "v1", "statefulsets"),
    ("apps", "v1beta1", "controllerrevisions"),
    ("apps", "v1beta1", "deployments"),
    ("apps", "v1beta1", "statefulsets"),
    ("apps", "v1beta2", "controllerrevisions"),
    ("apps", "v1beta2", "daemonsets"),
    ("apps", "v1beta2", "deployments"),
    ("apps", "v1beta2", "replicasets"),
    ("apps", "v1beta2", "statefulsets"),
    ("autoscaling", "v1", "horizontalpodautoscalers"),
    ("autoscaling", "v2", "horizontalpodautoscalers"),
    ("batch", "v1", "cronjobs"),
    ("batch", "v1", "jobs"),
    ("batch", "v1beta1", "cronjobs"),
    ("certificates.k8s.io", "v1", "certificatesigningrequests"),
    ("certificates.k8s.io", "v1alpha1", "clustertrustbundles"),
    ("certificates.k8s.io", "v1beta1", "certificatesigningrequests"),
    ("certificates.k8s.io", "v1beta1", "clustertrustbundles"),
    ("certificates.k8s.io", "v1beta1", "podcertificaterequests"),
    ("coordination.k8s.io", "v1", "leases"),
    ("coordination.k8s.io", "v1alpha2", "leasecandidates"),
    ("coordination.k8s.io", "v1beta1", "leases"),
    ("coordination.k8s.io", "v1beta1", "leasecandidates"),
    ("", "v1", "componentstatuses"),
    ("", "v1", "configmaps"),
    ("", "v1", "endpoints"),
    ("", "v1", "events"),
    ("", "v1", "limitranges"),
    ("", "v1", "namespaces"),
    ("", "v1", "nodes"),
    ("", "v1", "persistentvolumes"),
    ("", "v1", "persistentvolumeclaims"),
    ("", "v1", "pods"),
    ("", "v1", "podtemplates"),
    ("", "v1", "replicationcontrollers"),
    ("", "v1", "resourcequotas"),
    ("", "v1", "secrets"),
    ("", "v1", "services"),
    ("", "v1", "serviceaccounts"),
    ("discovery.k8s.io", "v1", "endpointslices"),
    ("discovery.k8s.io", "v1beta1", "endpointslices"),
    ("events.k8s.io", "v1", "events"),
    ("events.k8s.io", "v1beta1", "events"),
    ("extensions", "v1beta1", "daemonsets"),
    ("extensions", "v1beta1", "deployments"),
    ("extensions", "v1beta1", "ingresses"),
    ("extensions", "v1beta1", "networkpolicies"),
    ("extensions", "v1beta1", "replicasets"),
    ("flowcontrol.apiserver.k8s.io", "v1", "flowschemas"),
    ("flowcontrol.apiserver.k8s.io", "v1", "prioritylevelconfigurations"),
    ("flowcontrol.apiserver.k8s.io", "v1beta1", "flowschemas"),
    ("flowcontrol.apiserver.k8s.io", "v1beta1", "prioritylevelconfigurations"),
    ("flowcontrol.apiserver.k8s.io", "v1beta2", "flowschemas"),
    ("flowcontrol.apiserver.k8s.io", "v1beta2", "prioritylevelconfigurations"),
    ("flowcontrol.apiserver.k8s.io", "v1beta3", "flowschemas"),
    ("flowcontrol.apiserver.k8s.io", "v1beta3", "prioritylevelconfigurations"),
    ("internal.apiserver.k8s.io", "v1alpha1", "storageversions"),
    ("networking.k8s.io", "v1", "ipaddresses"),
    ("networking.k8s.io", "v1", "ingresses"),
    ("networking.k8s.io", "v1", "ingressclasses"),
    ("networking.k8s.io", "v1", "networkpolicies"),
    ("networking.k8s.io", "v1", "servicecidrs"),
    ("networking.k8s.io", "v1beta1", "ipaddresses"),
    ("networking.k8s.io", "v1beta1", "ingresses"),
    ("networking.k8s.io", "v1beta1", "ingressclasses"),
    ("networking.k8s.io", "v1beta1", "servicecidrs"),
    ("node.k8s.io", "v1", "runtimeclasses"),
    ("node.k8s.io", "v1alpha1", "runtimeclasses"),
    ("node.k8s.io", "v1beta1", "runtimeclasses"),
    ("policy", "v1", "poddisruptionbudgets"),
    ("policy", "v1beta1", "poddisruptionbudgets"),
    ("rbac.authorization.k8s.io", "v1", "clusterroles"),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings"),
    ("rbac.authorization.k8s.io", "v1", "roles"),
    ("rbac.authorization.k8s.io", "v1", "rolebindings"),
    ("rbac.authorization.k8s.io", "v1alpha1", "clusterroles"),
    ("rbac.authorization.k8s.io", "v1alpha1", "clusterrolebindings"),
    ("rbac.authorization.k8s.io", "v1alpha1", "roles"),
    ("rbac.authorization.k8s.io", "v1alpha1", "rolebindings"),
    ("rbac.authorization.k8s.io", "v1beta1", "clusterroles"),
    ("rbac.authorization.k8s.io", "v1beta1", "clusterrolebindings"),
    ("rbac.authorization.k8s.io", "v1beta1", "roles"),
    ("rbac.authorization.k8s.io", "v1beta1", "rolebindings"),
    ("resource.k8s.io", "v1", "deviceclasses"),
    ("resource.k8s.io", "v1", "resourceclaims"),
    ("resource.k8s.io", "v1", "resourceclaimtemplates"),
    ("resource.k8s.io", "v1", "resourceslices"),
    ("resource.k8s.io", "v1alpha3", "devicetaintrules"),
    ("resource.k8s.io", "v1alpha3", "resourcepoolstatusrequests"),
    ("resource.k8s.io", "v1beta1", "deviceclasses"),
    ("resource.k8s.io", "v1beta1", "resourceclaims"),
    ("resource.k8s.io", "v1beta1", "resourceclaimtemplates"),
    ("resource.k8s.io", "v1beta1", "resourceslices"),
    ("resource.k8s.io", "v1beta2", "deviceclasses"),
    ("resource.k8s.io", "v1beta2", "devicetaintrules"),
    ("resource.k8s.io", "v1beta2", "resourceclaims"),
    ("resource.k8s.io", "v1beta2", "resourceclaimtemplates"),
    ("resource.k8s.io", "v1beta2", "resourceslices"),
    ("scheduling.k8s.io", "v1", "priorityclasses"),
    ("scheduling.k8s.io", "v1alpha2", "podgroups"),
    ("scheduling.k8s.io", "v1alpha2", "workloads"),
    ("scheduling.k8s.io", "v1beta1", "priorityclasses"),
    ("storage.k8s.io", "v1", "csidrivers"),
    ("storage.k8s.io", "v1", "csinodes"),
    ("storage.k8s.io", "v1", "csistoragecapacities"),
    ("storage.k8s.io", "v1", "storageclasses"),
    ("storage.k8s.io", "v1", "volumeattachments"),
    ("storage.k8s.io", "v1", "volumeattributesclasses"),
    ("storage.k8s.io", "v1alpha1", "csistoragecapacities"),
    ("storage.k8s.io", "v1alpha1", "volumeattachments"),
    ("storage.k8s.io", "v1alpha1", "volumeattributesclasses"),
    ("storage.k8s.io", "v1beta1", "csidrivers"),
    ("storage.k8s.io", "v1beta1", "csinodes"),
    ("storage.k8s.io", "v1beta1", "csistoragecapacities"),
    ("storage.k8s.io", "v1beta1", "storageclasses"),
    ("storage.k8s.io", "v1beta1", "volumeattachments"),
    ("storage.k8s.io", "v1beta1", "volumeattributesclasses"),
    ("storagemigration.k8s.io", "v1beta1", "storageversionmigrations"),
];

/// Whether upstream's typed factory (client-go's `informers.SharedInformerFactory`) has an
/// informer of `resource`, so that upstream's `informerfactory.ForResource` hands out a typed
/// informer for it rather than a metadata-only one.
pub(super) fn client_go_typed_factory_knows(resource: &ApiResource) -> bool {
    CLIENT_GO_TYPED_RESOURCES.iter().any(|&(group, version, plural)| {
        resource.group == group && resource.version == version && resource.plural == plural
    })
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
        let client = crate::client::unreachable_client();
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
        let client = crate::client::unreachable_client();
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
