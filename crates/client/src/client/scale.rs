//! The scale client (client-go's `scale` package) and the REST mapper it needs: the `/scale`
//! subresource of any kind, built in or custom, found through discovery.
//!
//! Controllers that act on "whatever owns these pods" or "whatever this HPA targets" know a
//! kind, not a resource: [`ScaleClient::mappings`] maps a group and kind to the resources
//! serving it (upstream's `RESTMapper.RESTMappings`, preferred version first), and
//! [`ScaleClient::get`] / [`ScaleClient::update`] read and write `autoscaling/v1` Scales there.
//!
//! Discovery is cached as the controller manager's deferred discovery REST mapper is: reset
//! every 30 s (`ctx.RESTMapper.Reset()` in `cmd/kube-controller-manager`), and read again at
//! once when a kind is not found, so a CRD created a moment ago is mapped.

use std::time::{Duration, Instant};

use k8s_openapi::api::autoscaling::v1::Scale;
use parking_lot::Mutex;

use super::discovery::{self, ApiResource, Discovery};
use super::{Body, Client, Error, Result, decode};

/// How long discovery is trusted before it is read again.
const MAPPER_RESET_PERIOD: Duration = Duration::from_secs(30);

/// Reads and writes `/scale` subresources, mapping kinds to resources through discovery.
pub struct ScaleClient {
    client: Client,
    mapper: Mutex<Option<(Instant, Discovery)>>,
}

impl ScaleClient {
    /// A scale client sending through `client` (its identity and rate limits).
    pub fn new(client: Client) -> ScaleClient {
        ScaleClient { client, mapper: Mutex::new(None) }
    }

    /// Every resource serving `kind` in `group` (empty for the core group), the group's
    /// preferred version first: upstream's `RESTMappings(GroupKind)`. An unknown kind is
    /// client-go's `NoKindMatchError` (`no matches for kind "K" in group "G"`).
    pub fn mappings(&self, group: &str, kind: &str) -> Result<Vec<ApiResource>> {
        let mut cached = self.mapper.lock();
        let fresh =
            |c: &Option<(Instant, Discovery)>| c.as_ref().is_some_and(|(at, _)| at.elapsed() < MAPPER_RESET_PERIOD);
        if !fresh(&cached) {
            *cached = Some((Instant::now(), discovery::server_resources(&self.client)?));
        }
        let find = |d: &Discovery| -> Vec<ApiResource> {
            d.all.iter().filter(|r| r.group == group && r.kind == kind).cloned().collect()
        };
        let mut found = find(&cached.as_ref().expect("discovery was just read").1);
        if found.is_empty() && cached.as_ref().is_some_and(|(at, _)| at.elapsed() > Duration::from_millis(100)) {
            // A kind the cache does not know may be new: read discovery again, once.
            let discovery = discovery::server_resources(&self.client)?;
            found = find(&discovery);
            *cached = Some((Instant::now(), discovery));
        }
        if found.is_empty() {
            return Err(Error::Request(format!("no matches for kind \"{kind}\" in group \"{group}\"")));
        }
        Ok(found)
    }

    /// GETs the Scale of `name` in `namespace` from `resource`.
    pub fn get(&self, resource: &ApiResource, namespace: &str, name: &str) -> Result<Scale> {
        let path = scale_path(resource, namespace, name)?;
        decode(&self.client.send(ureq::http::Method::GET, &path, None)?)
    }

    /// PUTs `scale` to the `/scale` subresource of `name` (its `resourceVersion`, when set, is
    /// a precondition as for any update).
    pub fn update(&self, resource: &ApiResource, namespace: &str, name: &str, scale: &Scale) -> Result<Scale> {
        let path = scale_path(resource, namespace, name)?;
        decode(&self.client.send(ureq::http::Method::PUT, &path, Some(Body::json(scale)?))?)
    }

    /// Whether `resource` serves a `/scale` subresource of a Scale kind this client reads, from
    /// its group-version's discovery document (client-go's `ServerResourcesForGroupVersion`): a
    /// 404 from `get` means either a missing object or no such subresource, and this tells which.
    pub fn implements_scale(&self, resource: &ApiResource) -> Result<bool> {
        let root = if resource.group.is_empty() { "/api" } else { "/apis" };
        let list: serde_json::Value = self.client.get_json(&format!("{root}/{}", resource.api_version()))?;
        Ok(has_scale_subresource(&list, &resource.plural))
    }
}

/// The group-versions of the Scale kinds the scale client reads (client-go's
/// `ScaleConverter.ScaleVersions`).
const SCALE_VERSIONS: &[(&str, &str)] =
    &[("autoscaling", "v1"), ("extensions", "v1beta1"), ("apps", "v1beta1"), ("apps", "v1beta2")];

/// Whether an `APIResourceList` lists `<plural>/scale` as a known Scale kind.
fn has_scale_subresource(list: &serde_json::Value, plural: &str) -> bool {
    let name = format!("{plural}/scale");
    list["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["name"] == name.as_str())
        .any(|r| r["kind"] == "Scale" && SCALE_VERSIONS.iter().any(|(g, v)| r["group"] == *g && r["version"] == *v))
}

/// `/apis/apps/v1/namespaces/ns/deployments/web/scale`.
fn scale_path(resource: &ApiResource, namespace: &str, name: &str) -> Result<String> {
    if name.is_empty() || name.contains('/') {
        return Err(Error::Request(format!("scale of {}: invalid name {name:?}", resource.group_resource())));
    }
    Ok(format!("{}/{name}/scale", resource.collection_path(Some(namespace))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_paths_name_the_subresource() {
        let deployments = ApiResource {
            group: "apps".into(),
            version: "v1".into(),
            kind: "Deployment".into(),
            plural: "deployments".into(),
            namespaced: true,
            verbs: vec![],
        };
        assert_eq!(scale_path(&deployments, "ns", "web").unwrap(), "/apis/apps/v1/namespaces/ns/deployments/web/scale");
        assert!(scale_path(&deployments, "ns", "a/b").is_err());
        assert!(scale_path(&deployments, "ns", "").is_err());
    }

    #[test]
    fn a_scale_subresource_is_one_of_a_known_scale_kind() {
        let list = serde_json::json!({"resources": [
            {"name": "deployments", "kind": "Deployment"},
            {"name": "deployments/scale", "group": "autoscaling", "version": "v1", "kind": "Scale"},
            {"name": "jobs/status", "kind": "Job"},
            {"name": "widgets/scale", "group": "example.com", "version": "v1", "kind": "Scale"},
        ]});
        assert!(has_scale_subresource(&list, "deployments"));
        assert!(!has_scale_subresource(&list, "jobs"));
        assert!(!has_scale_subresource(&list, "widgets"), "not a Scale kind the client reads");
    }
}
