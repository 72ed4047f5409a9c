//! A metadata-only client for any resource known at run time, after client-go's `metadata`
//! package: objects come back as [`PartialObjectMetadata`] (kind `PartialObjectMetadata`,
//! apiVersion `meta.k8s.io/v1`, only `metadata`), which the server produces when asked with
//! `Accept: application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1` (lists:
//! `as=PartialObjectMetadataList`). The garbage collector and the namespace controller use it
//! to read, watch, patch and delete objects of kinds they have no types for.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ListMeta, ObjectMeta};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use ureq::http::Method;

use super::api::{DeleteParams, Deleted, ListParams, Patch, PostParams, RawList, deleted};
use super::discovery::ApiResource;
use super::watch::{WatchParams, WatchReceiver, WatchStream};
use super::{Client, Error, Result, decode, decode_without_managed_fields};

/// `Accept` for one object (and watch events) as metadata only.
pub const ACCEPT_OBJECT: &str = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
/// `Accept` for a list as metadata only.
pub const ACCEPT_LIST: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

/// `metav1.PartialObjectMetadata`: an object of any kind, metadata only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PartialObjectMetadata {
    /// `meta.k8s.io/v1`, as the server sends it.
    #[serde(rename = "apiVersion", default, deserialize_with = "crate::client::null_as_default")]
    pub api_version: String,
    /// `PartialObjectMetadata`, as the server sends it.
    #[serde(default, deserialize_with = "crate::client::null_as_default")]
    pub kind: String,
    /// The object's metadata: name, UID, owner references, finalizers, ...
    #[serde(default, deserialize_with = "crate::client::null_as_default")]
    pub metadata: ObjectMeta,
}

impl PartialObjectMetadata {
    /// The metadata of an object, as `meta.AsPartialObjectMetadata` builds it.
    pub fn from_metadata(metadata: ObjectMeta) -> PartialObjectMetadata {
        PartialObjectMetadata {
            api_version: "meta.k8s.io/v1".to_string(),
            kind: "PartialObjectMetadata".to_string(),
            metadata,
        }
    }
}

/// The type of objects of no particular kind. Implemented so that informers and stores (which
/// are generic over `k8s_openapi::Metadata`) hold them; it serves no URL of its own, and
/// `SubResourceScope` keeps [`super::Api`] from being built for it.
impl k8s_openapi::Resource for PartialObjectMetadata {
    const API_VERSION: &'static str = "meta.k8s.io/v1";
    const GROUP: &'static str = "meta.k8s.io";
    const KIND: &'static str = "PartialObjectMetadata";
    const VERSION: &'static str = "v1";
    const URL_PATH_SEGMENT: &'static str = "";
    type Scope = k8s_openapi::SubResourceScope;
}

impl k8s_openapi::Metadata for PartialObjectMetadata {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// `metav1.PartialObjectMetadataList`.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct PartialObjectMetadataList {
    /// The list's resourceVersion and continue token.
    #[serde(default, deserialize_with = "crate::client::null_as_default")]
    pub metadata: ListMeta,
    /// kube-apiserver sends `null` for an empty metadata-only list.
    #[serde(default, deserialize_with = "crate::client::null_as_default")]
    pub items: Vec<PartialObjectMetadata>,
}

/// Metadata-only access to one resource, in one namespace or across all of them (or
/// cluster-wide): client-go's `metadata.Interface.Resource(gvr).Namespace(ns)`.
#[derive(Clone)]
pub struct MetadataApi {
    client: Client,
    resource: ApiResource,
    /// Ignored for cluster-scoped resources; `None`: all namespaces (list, watch, delete-collection only).
    namespace: Option<String>,
}

impl MetadataApi {
    /// Objects of `resource` in `namespace` (`None`: all namespaces, or a cluster-scoped resource).
    pub fn new(client: &Client, resource: &ApiResource, namespace: Option<&str>) -> MetadataApi {
        let namespace = namespace.filter(|ns| resource.namespaced && !ns.is_empty()).map(str::to_string);
        MetadataApi { client: client.clone(), resource: resource.clone(), namespace }
    }

    /// The resource this accesses.
    pub fn resource(&self) -> &ApiResource {
        &self.resource
    }

    fn collection_path(&self) -> String {
        self.resource.collection_path(self.namespace.as_deref())
    }

    fn object_path(&self, name: &str) -> Result<String> {
        if self.resource.namespaced && self.namespace.is_none() {
            return Err(Error::Request(format!("{} {name:?}: a namespaced resource needs a namespace", self.resource)));
        }
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '%', '?', '#']) {
            return Err(Error::Request(format!("{} name {name:?} is not a valid object name", self.resource)));
        }
        Ok(format!("{}/{name}", self.collection_path()))
    }

    /// GETs one object's metadata, without its managedFields (which no controller reads, as
    /// the informers' caches drop them): the garbage collector reads every dependent it
    /// deletes this way, and their managedFields are most of their metadata.
    pub fn get(&self, name: &str) -> Result<PartialObjectMetadata> {
        let body = self.client.send_accepting(Method::GET, &self.object_path(name)?, None, ACCEPT_OBJECT)?;
        decode_without_managed_fields(&body)
    }

    /// One page of the collection.
    pub fn list(&self, params: &ListParams) -> Result<PartialObjectMetadataList> {
        self.list_as(params)
    }

    /// One page of the collection decoded as `T`: a caller that reads a few fields of each
    /// item declares only those, and the rest of each item (its managedFields above all) is
    /// passed over instead of decoded.
    pub fn list_as<T: DeserializeOwned>(&self, params: &ListParams) -> Result<T> {
        let path = format!("{}{}", self.collection_path(), params.query());
        decode(&self.client.send_accepting(Method::GET, &path, None, ACCEPT_LIST)?)
    }

    /// One page of the collection with its items left as JSON (see [`RawList`]).
    pub fn list_raw(&self, params: &ListParams) -> Result<RawList> {
        let path = format!("{}{}", self.collection_path(), params.query());
        decode(&self.client.send_accepting(Method::GET, &path, None, ACCEPT_LIST)?)
    }

    /// Watches the collection; events carry [`PartialObjectMetadata`].
    pub fn watch(&self, params: &WatchParams) -> Result<WatchStream<PartialObjectMetadata>> {
        let path = format!("{}{}", self.collection_path(), params.query());
        WatchStream::open_accepting(&self.client, &path, params.idle_timeout(), ACCEPT_OBJECT)
    }

    /// Watches the collection from a dedicated thread that hands events over a channel.
    pub fn watch_channel(&self, params: &WatchParams, capacity: usize) -> Result<WatchReceiver<PartialObjectMetadata>> {
        Ok(WatchReceiver::spawn(self.watch(params)?, capacity, &self.resource.plural))
    }

    /// Opens a watch of the collection for the watch poller (no thread of its own).
    pub fn open_polled_watch(&self, params: &WatchParams) -> Result<super::watch_connection::WatchConnection> {
        let path = format!("{}{}", self.collection_path(), params.query());
        self.client.open_watch_connection(&path, ACCEPT_OBJECT)
    }

    /// PATCHes one object (e.g. its owner references or finalizers); returns its metadata.
    pub fn patch(&self, name: &str, patch: &Patch, params: &PostParams) -> Result<PartialObjectMetadata> {
        let path = format!("{}{}", self.object_path(name)?, params.query());
        let body = self.client.send_accepting(Method::PATCH, &path, Some(patch.body()?), ACCEPT_OBJECT)?;
        decode_without_managed_fields(&body)
    }

    /// Deletes one object: its remaining metadata while finalizers or a grace period hold it,
    /// or the server's `Status` once it is gone.
    pub fn delete(&self, name: &str, params: &DeleteParams) -> Result<Deleted<PartialObjectMetadata>> {
        let body =
            self.client.send_accepting(Method::DELETE, &self.object_path(name)?, params.body()?, ACCEPT_OBJECT)?;
        deleted(&body)
    }

    /// Deletes every object of the namespace (or cluster) that `list`'s selectors match.
    pub fn delete_collection(&self, list: &ListParams, params: &DeleteParams) -> Result<()> {
        let path = format!("{}{}", self.collection_path(), list.query());
        self.client.send_accepting(Method::DELETE, &path, params.body()?, ACCEPT_LIST)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partial_objects_decode_from_any_kind() {
        let object: PartialObjectMetadata = serde_json::from_str(
            r#"{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",
                "metadata":{"name":"a","namespace":"ns","uid":"u1","ownerReferences":[
                  {"apiVersion":"apps/v1","kind":"ReplicaSet","name":"rs","uid":"u0"}]}}"#,
        )
        .expect("decodes");
        assert_eq!(object.metadata.owner_references.as_ref().map(Vec::len), Some(1));
        let built = PartialObjectMetadata::from_metadata(object.metadata.clone());
        assert_eq!(built, object);
    }

    #[test]
    fn an_empty_list_decodes_as_kube_apiserver_sends_it() {
        // Byte for byte what kube-apiserver v1.33 answers for an empty metadata-only list.
        let list: PartialObjectMetadataList = serde_json::from_str(
            r#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1",
                "metadata":{"resourceVersion":"205"},"items":null}"#,
        )
        .expect("decodes");
        assert!(list.items.is_empty());
        assert_eq!(list.metadata.resource_version.as_deref(), Some("205"));
        let bare: PartialObjectMetadataList =
            serde_json::from_str(r#"{"metadata":null,"items":[{"metadata":null,"kind":null}],"extra":1}"#)
                .expect("decodes");
        assert_eq!(bare.items, vec![PartialObjectMetadata::default()]);
    }

    #[test]
    fn typed_lists_accept_null_items_and_unknown_fields_too() {
        // What `Api::<K>::list` decodes (k8s-openapi's `List`): a Go nil slice, fields a newer
        // server adds, and objects whose optional fields are null or absent.
        let list: k8s_openapi::List<k8s_openapi::api::core::v1::Pod> = serde_json::from_str(
            r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7","remainingItemCount":null},
                "items":null,"futureField":{"a":1}}"#,
        )
        .expect("decodes");
        assert!(list.items.is_empty());
        let list: k8s_openapi::List<k8s_openapi::api::core::v1::Pod> = serde_json::from_str(
            r#"{"metadata":{},"items":[{"metadata":{"name":"p","labels":null},"spec":null,"status":{}}]}"#,
        )
        .expect("decodes");
        assert_eq!(list.items[0].metadata.name.as_deref(), Some("p"));
    }
}
