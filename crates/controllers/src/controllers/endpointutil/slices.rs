//! What the EndpointSlice controllers share about slices: address types, ownership, naming,
//! the labels that tie a slice to its Service and its managing controller.

use std::sync::Arc;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::{LABEL_MANAGED_BY, LABEL_SERVICE_NAME};
use crate::apimachinery::labels::Selector;
use crate::runtime::informer::Informer;

/// `discovery.AddressTypeIPv4`.
pub const IPV4: &str = "IPv4";
/// `discovery.AddressTypeIPv6`.
pub const IPV6: &str = "IPv6";

/// How many endpoints a slice holds; `endpoints` is optional since v1.36's API types.
pub fn endpoint_count(slice: &EndpointSlice) -> usize {
    slice.endpoints.as_ref().map_or(0, Vec::len)
}

/// `metav1.NewControllerRef` of an object of core `v1`.
pub fn controller_ref(meta: &ObjectMeta, kind: &str) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: kind.into(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// `getEndpointSlicePrefix`: `<name>-`, or the bare name when the dash would make it too long.
pub fn endpoint_slice_prefix(name: &str) -> String {
    if name.len() < 253 { format!("{name}-") } else { name.to_string() }
}

/// `ServiceControllerKey`: the key of the Service a slice belongs to, by its label.
pub fn service_key_of(slice: &EndpointSlice) -> Option<String> {
    let name = slice.metadata.labels.as_ref().and_then(|l| l.get(LABEL_SERVICE_NAME)).filter(|n| !n.is_empty())?;
    Some(format!("{}/{name}", slice.metadata.namespace.as_deref().unwrap_or("")))
}

/// Whether the slice is managed by the controller named `controller_name`.
pub fn managed_by(slice: &EndpointSlice, controller_name: &str) -> bool {
    slice.metadata.labels.as_ref().and_then(|l| l.get(LABEL_MANAGED_BY)).map(String::as_str) == Some(controller_name)
}

/// The slices of a Service managed by `controller_name` in a slice cache.
pub fn slices_of(
    slices: &Informer<EndpointSlice>,
    namespace: &str,
    service: &str,
    controller_name: &str,
) -> Vec<Arc<EndpointSlice>> {
    let selector = Selector::from_map(
        &[
            (LABEL_SERVICE_NAME.to_string(), service.to_string()),
            (LABEL_MANAGED_BY.to_string(), controller_name.into()),
        ]
        .into(),
    );
    let mut found: Vec<Arc<EndpointSlice>> = (slices.store().list_namespace(namespace).into_iter())
        .filter(|s| selector.matches(s.metadata.labels.as_ref()))
        .collect();
    found.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    found
}
