//! Typed access to one kind of object: [`Api<K>`] for any `k8s_openapi` resource, namespaced or
//! cluster-scoped, with its subresources.

use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, ListMeta, Status};
use k8s_openapi::{ClusterResourceScope, List, ListableResource, NamespaceResourceScope, Resource};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use ureq::http::Method;

use super::url::query;
use super::{Body, Client, Error, Result, decode, decode_without_managed_fields};

/// Operations on one kind `K`, in one namespace, across all namespaces, or cluster-wide.
pub struct Api<K> {
    client: Client,
    /// `None`: a cluster-scoped kind, or a namespaced kind across all namespaces (list/watch only).
    namespace: Option<String>,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for Api<K> {
    fn clone(&self) -> Self {
        Api { client: self.client.clone(), namespace: self.namespace.clone(), kind: PhantomData }
    }
}

/// Whether a `k8s_openapi` scope is namespaced.
pub trait Scope {
    /// Whether objects of this scope live in a namespace (and their paths name it).
    const NAMESPACED: bool;
}

impl Scope for NamespaceResourceScope {
    const NAMESPACED: bool = true;
}

impl Scope for ClusterResourceScope {
    const NAMESPACED: bool = false;
}

impl<K: Resource<Scope = NamespaceResourceScope>> Api<K> {
    /// Objects of a namespaced kind in one namespace.
    pub fn namespaced(client: &Client, namespace: &str) -> Api<K> {
        Api { client: client.clone(), namespace: Some(namespace.to_string()), kind: PhantomData }
    }
}

impl<K: Resource<Scope = ClusterResourceScope>> Api<K> {
    /// Objects of a cluster-scoped kind.
    pub fn cluster(client: &Client) -> Api<K> {
        Api { client: client.clone(), namespace: None, kind: PhantomData }
    }
}

/// A page of a list whose items are still JSON: a reader that keeps objects in another form
/// (the informers' packed Pods) decodes them one at a time instead of all at once.
#[derive(Debug, Default, Deserialize)]
pub struct RawList {
    /// The list's metadata: resourceVersion and continue token (`null` as absent, as the typed
    /// and metadata-only lists read it).
    #[serde(default, deserialize_with = "super::null_as_default")]
    pub metadata: ListMeta,
    /// The objects, each as the server wrote it.
    #[serde(default, deserialize_with = "super::null_as_default")]
    pub items: Vec<Box<RawValue>>,
}

/// Options of list requests.
#[derive(Debug, Clone, Default)]
pub struct ListParams {
    /// `labelSelector`, e.g. `app=web,tier!=cache`.
    pub label_selector: Option<String>,
    /// `fieldSelector`, e.g. `metadata.name=foo`.
    pub field_selector: Option<String>,
    /// Page size; `None` asks for everything at once.
    pub limit: Option<u32>,
    /// `continue`: the token of the previous page's list metadata, to get the next page.
    pub continue_token: Option<String>,
    /// `resourceVersion`: how fresh the list must be (`0` allows the API server's cache).
    pub resource_version: Option<String>,
    /// `NotOlderThan` or `Exact`, with `resource_version`.
    pub resource_version_match: Option<String>,
}

impl ListParams {
    pub(crate) fn query(&self) -> String {
        query(&[
            ("labelSelector", self.label_selector.clone()),
            ("fieldSelector", self.field_selector.clone()),
            ("limit", self.limit.map(|l| l.to_string())),
            ("continue", self.continue_token.clone()),
            ("resourceVersion", self.resource_version.clone()),
            ("resourceVersionMatch", self.resource_version_match.clone()),
        ])
    }
}

/// Options of create, replace and patch requests.
#[derive(Debug, Clone, Default)]
pub struct PostParams {
    /// Validate and admit the request without persisting it.
    pub dry_run: bool,
    /// `fieldManager`: the manager recorded in `managedFields` for this write.
    pub field_manager: Option<String>,
    /// `force`: an apply patch takes over the fields other managers own (apply patches only).
    pub force: bool,
}

impl PostParams {
    pub(crate) fn query(&self) -> String {
        query(&[
            ("dryRun", self.dry_run.then(|| "All".to_string())),
            ("fieldManager", self.field_manager.clone()),
            ("force", self.force.then(|| "true".to_string())),
        ])
    }
}

/// A patch document and its type.
#[derive(Debug, Clone)]
pub enum Patch {
    /// RFC 7386 JSON merge patch.
    Merge(serde_json::Value),
    /// Kubernetes strategic merge patch (lists merged by their merge keys).
    Strategic(serde_json::Value),
    /// RFC 6902 JSON patch: an array of operations.
    Json(serde_json::Value),
    /// Server-side apply: the fields the manager (`fieldManager`, required) wants, as JSON
    /// (a subset of YAML).
    Apply(serde_json::Value),
}

impl Patch {
    pub(crate) fn body(&self) -> Result<Body> {
        let (content_type, value) = match self {
            Patch::Merge(v) => ("application/merge-patch+json", v),
            Patch::Strategic(v) => ("application/strategic-merge-patch+json", v),
            Patch::Json(v) => ("application/json-patch+json", v),
            Patch::Apply(v) => ("application/apply-patch+yaml", v),
        };
        Ok(Body { content_type, ..Body::json(value)? })
    }
}

/// How dependents are handled when their owner is deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PropagationPolicy {
    /// Delete the object and leave its dependents, removing their owner references.
    Orphan,
    /// Delete the object now; the garbage collector deletes the dependents afterwards.
    Background,
    /// Delete the dependents first; the object stays (with the `foregroundDeletion` finalizer) until they are gone.
    Foreground,
}

/// Conditions the object must still meet for a delete to proceed.
#[derive(Debug, Clone, Default)]
pub struct Preconditions {
    /// Delete only the object with this UID (not a recreated one of the same name).
    pub uid: Option<String>,
    /// Delete only if the object is still at this resourceVersion.
    pub resource_version: Option<String>,
}

/// Options of delete requests, sent as a `DeleteOptions` body.
#[derive(Debug, Clone, Default)]
pub struct DeleteParams {
    /// `gracePeriodSeconds`: how long the object may take to terminate; `0` deletes at once.
    pub grace_period_seconds: Option<i64>,
    /// `propagationPolicy`; `None` leaves it to the kind's default.
    pub propagation_policy: Option<PropagationPolicy>,
    /// `preconditions`: what the object must still be for the delete to proceed.
    pub preconditions: Option<Preconditions>,
    /// `dryRun=All`: validate and admit the delete without doing it.
    pub dry_run: bool,
}

impl DeleteParams {
    pub(crate) fn body(&self) -> Result<Option<Body>> {
        let options = DeleteOptions {
            grace_period_seconds: self.grace_period_seconds,
            propagation_policy: self.propagation_policy.map(|p| format!("{p:?}")),
            preconditions: self.preconditions.as_ref().map(|p| {
                k8s_openapi::apimachinery::pkg::apis::meta::v1::Preconditions {
                    uid: p.uid.clone(),
                    resource_version: p.resource_version.clone(),
                }
            }),
            dry_run: self.dry_run.then(|| vec!["All".to_string()]),
            ..DeleteOptions::default()
        };
        if options == DeleteOptions::default() {
            return Ok(None);
        }
        let mut value = crate::apimachinery::json::to_value(&options).map_err(|e| Error::Request(e.to_string()))?;
        value["kind"] = "DeleteOptions".into();
        value["apiVersion"] = "v1".into();
        Body::json(&value).map(Some)
    }
}

/// What a delete answered: an object (still there while finalizers or a grace period hold it,
/// or its last state for kinds whose registry returns the deleted object, such as pods), or a
/// `Status` for kinds that answer with one once the object is gone.
#[derive(Debug)]
pub enum Deleted<K> {
    /// The object as the delete left it.
    Object(K),
    /// The object is gone; the `Status` the API server answered with.
    Gone(Box<Status>),
}

/// The answer to a DELETE: a `Status` once the object is gone, else the object (held by
/// finalizers or a grace period), decoded without its managedFields. The kind is read without
/// decoding the answer, which is then decoded once.
pub(super) fn deleted<K: DeserializeOwned>(body: &[u8]) -> Result<Deleted<K>> {
    if crate::apimachinery::json::raw_field(body, "kind") == Some("\"Status\"") {
        Ok(Deleted::Gone(decode(body)?))
    } else {
        Ok(Deleted::Object(decode_without_managed_fields(body)?))
    }
}

impl<K> Api<K>
where
    K: Resource + DeserializeOwned,
    K::Scope: Scope,
{
    /// Objects of a kind in every namespace (or cluster-wide): for list and watch.
    pub fn all(client: &Client) -> Api<K> {
        Api { client: client.clone(), namespace: None, kind: PhantomData }
    }

    /// The client the requests go through.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The namespace this `Api` is bound to; `None` for cluster-scoped kinds and all namespaces.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// `/api/v1/namespaces/ns/pods`, `/apis/apps/v1/deployments`, …
    pub fn collection_path(&self) -> String {
        let group_version = if K::GROUP.is_empty() {
            format!("/api/{}", K::VERSION)
        } else {
            format!("/apis/{}/{}", K::GROUP, K::VERSION)
        };
        match (&self.namespace, K::Scope::NAMESPACED) {
            (Some(ns), true) => format!("{group_version}/namespaces/{ns}/{}", K::URL_PATH_SEGMENT),
            _ => format!("{group_version}/{}", K::URL_PATH_SEGMENT),
        }
    }

    fn object_path(&self, name: &str, subresource: Option<&str>) -> Result<String> {
        if K::Scope::NAMESPACED && self.namespace.is_none() {
            return Err(Error::Request(format!("{} {name:?}: a namespaced kind needs a namespace", K::KIND)));
        }
        if name.is_empty() || name == "." || name == ".." || name.contains(['/', '%', '?', '#']) {
            return Err(Error::Request(format!("{} name {name:?} is not a valid object name", K::KIND)));
        }
        let mut path = format!("{}/{name}", self.collection_path());
        if let Some(sub) = subresource {
            path.push('/');
            path.push_str(sub);
        }
        Ok(path)
    }

    /// GETs the object; a missing one is a NotFound error (see [`Api::get_opt`]).
    pub fn get(&self, name: &str) -> Result<K> {
        self.get_subresource_at(name, None)
    }

    /// The object, or `None` when it does not exist.
    pub fn get_opt(&self, name: &str) -> Result<Option<K>> {
        match self.get(name) {
            Ok(object) => Ok(Some(object)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// GETs a subresource such as `scale`.
    pub fn get_subresource<T: DeserializeOwned>(&self, subresource: &str, name: &str) -> Result<T> {
        self.get_subresource_at(name, Some(subresource))
    }

    fn get_subresource_at<T: DeserializeOwned>(&self, name: &str, subresource: Option<&str>) -> Result<T> {
        let path = self.object_path(name, subresource)?;
        decode(&self.client.send(Method::GET, &path, None)?)
    }

    /// POSTs a new object to the collection (needs a namespace for namespaced kinds).
    pub fn create(&self, object: &K, params: &PostParams) -> Result<K>
    where
        K: Serialize,
    {
        if K::Scope::NAMESPACED && self.namespace.is_none() {
            return Err(Error::Request(format!("creating a {}: a namespaced kind needs a namespace", K::KIND)));
        }
        let path = format!("{}{}", self.collection_path(), params.query());
        decode_without_managed_fields(&self.client.send(Method::POST, &path, Some(Body::json(object)?))?)
    }

    /// PUTs the whole object; fails with Conflict if its resourceVersion is stale.
    pub fn replace(&self, name: &str, object: &K, params: &PostParams) -> Result<K>
    where
        K: Serialize,
    {
        self.replace_subresource_at(name, None, object, params)
    }

    /// PUTs the object to its `status` subresource.
    pub fn replace_status(&self, name: &str, object: &K, params: &PostParams) -> Result<K>
    where
        K: Serialize,
    {
        self.replace_subresource_at(name, Some("status"), object, params)
    }

    /// PUTs a body to a subresource (`scale`, `finalize`, `approval`).
    pub fn replace_subresource<B: Serialize, T: DeserializeOwned>(
        &self,
        subresource: &str,
        name: &str,
        body: &B,
        params: &PostParams,
    ) -> Result<T> {
        self.replace_subresource_at(name, Some(subresource), body, params)
    }

    fn replace_subresource_at<B: Serialize, T: DeserializeOwned>(
        &self,
        name: &str,
        subresource: Option<&str>,
        body: &B,
        params: &PostParams,
    ) -> Result<T> {
        let path = format!("{}{}", self.object_path(name, subresource)?, params.query());
        decode_without_managed_fields(&self.client.send(Method::PUT, &path, Some(Body::json(body)?))?)
    }

    /// POSTs a body to a subresource (`token`, `eviction`, `binding`).
    pub fn create_subresource<B: Serialize, T: DeserializeOwned>(
        &self,
        subresource: &str,
        name: &str,
        body: &B,
        params: &PostParams,
    ) -> Result<T> {
        let path = format!("{}{}", self.object_path(name, Some(subresource))?, params.query());
        decode_without_managed_fields(&self.client.send(Method::POST, &path, Some(Body::json(body)?))?)
    }

    /// PATCHes the object.
    pub fn patch(&self, name: &str, patch: &Patch, params: &PostParams) -> Result<K> {
        self.patch_at(name, None, patch, params)
    }

    /// PATCHes the object's `status` subresource.
    pub fn patch_status(&self, name: &str, patch: &Patch, params: &PostParams) -> Result<K> {
        self.patch_at(name, Some("status"), patch, params)
    }

    /// PATCHes a subresource (`scale`).
    pub fn patch_subresource<T: DeserializeOwned>(
        &self,
        subresource: &str,
        name: &str,
        patch: &Patch,
        params: &PostParams,
    ) -> Result<T> {
        self.patch_at(name, Some(subresource), patch, params)
    }

    fn patch_at<T: DeserializeOwned>(
        &self,
        name: &str,
        subresource: Option<&str>,
        patch: &Patch,
        params: &PostParams,
    ) -> Result<T> {
        let path = format!("{}{}", self.object_path(name, subresource)?, params.query());
        decode_without_managed_fields(&self.client.send(Method::PATCH, &path, Some(patch.body()?))?)
    }

    /// DELETEs the object: see [`Deleted`] for what comes back.
    pub fn delete(&self, name: &str, params: &DeleteParams) -> Result<Deleted<K>> {
        let path = self.object_path(name, None)?;
        deleted(&self.client.send(Method::DELETE, &path, params.body()?)?)
    }

    /// Deletes every object in the namespace (or cluster) that the selectors match.
    pub fn delete_collection(&self, list: &ListParams, params: &DeleteParams) -> Result<()> {
        let path = format!("{}{}", self.collection_path(), list.query());
        self.client.send(Method::DELETE, &path, params.body()?)?;
        Ok(())
    }

    /// Watches the collection; see [`super::watch`].
    pub fn watch(&self, params: &super::WatchParams) -> Result<super::WatchStream<K>> {
        let path = format!("{}{}", self.collection_path(), params.query());
        super::WatchStream::open(&self.client, &path, params.idle_timeout())
    }

    /// Watches the collection from a dedicated thread that hands events over a channel.
    pub fn watch_channel(&self, params: &super::WatchParams, capacity: usize) -> Result<super::WatchReceiver<K>>
    where
        K: Send + 'static,
    {
        Ok(super::WatchReceiver::spawn(self.watch(params)?, capacity, K::KIND))
    }

    /// Opens a watch of the collection for the watch poller (no thread of its own).
    pub fn open_polled_watch(&self, params: &super::WatchParams) -> Result<super::watch_connection::WatchConnection> {
        let path = format!("{}{}", self.collection_path(), params.query());
        self.client.open_watch_connection(&path, super::ACCEPT_JSON)
    }
}

impl<K> Api<K>
where
    K: ListableResource + DeserializeOwned,
    K::Scope: Scope,
{
    /// One page of the collection.
    pub fn list(&self, params: &ListParams) -> Result<List<K>> {
        let path = format!("{}{}", self.collection_path(), params.query());
        decode(&self.client.send(Method::GET, &path, None)?)
    }

    /// One page of the collection with its items left as JSON, to be decoded one at a time.
    pub fn list_raw(&self, params: &ListParams) -> Result<RawList> {
        let path = format!("{}{}", self.collection_path(), params.query());
        decode(&self.client.send(Method::GET, &path, None)?)
    }

    /// The whole collection, page by page (`limit` per page), and the resourceVersion to
    /// watch from. If a continue token expires between pages, the list starts over without
    /// paging, as client-go's pager does.
    pub fn list_all(&self, params: &ListParams) -> Result<(Vec<K>, String)> {
        let original = params;
        let mut params = params.clone();
        let mut items = Vec::new();
        loop {
            let page = match self.list(&params) {
                Ok(page) => page,
                Err(e) if e.is_gone() && params.continue_token.is_some() => {
                    log::info!("{}: continue token expired while paging; listing everything at once", K::KIND);
                    items.clear();
                    // As client-go's pager: the original request (its resourceVersion too), unpaged.
                    params = ListParams { limit: None, continue_token: None, ..original.clone() };
                    continue;
                }
                Err(e) => return Err(e),
            };
            items.extend(page.items);
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => {
                    // Later pages are read at the first page's revision, which the token carries.
                    params.continue_token = Some(token);
                    params.resource_version = None;
                    params.resource_version_match = None;
                }
                None => return Ok((items, page.metadata.resource_version.unwrap_or_default())),
            }
        }
    }
}
