//! API discovery, after client-go's `discovery` package: which resources the server serves, in
//! which group-versions, with which verbs and scope.
//!
//! [`server_resources`] asks `/api` and `/apis` for aggregated discovery
//! (`apidiscovery.k8s.io/v2`, every group, version and resource in two documents), as
//! client-go's `ServerGroupsAndResources` does; a server without it answers with the legacy
//! group lists, and then each group-version's document (`/api/v1`, `/apis/<group>/<version>`)
//! is read. A group-version that cannot be read (an aggregated API whose server is down: `Stale`
//! in aggregated discovery, a 503 in legacy) does not fail the whole discovery: its error is kept
//! in [`Discovery::failed`] and the other groups are still returned (upstream's
//! `ErrGroupDiscoveryFailed`), so callers can keep what they knew about the failed groups.
//!
//! [`Discovery::preferred`] is client-go's `ServerPreferredResources`: each group's resources
//! in its preferred version, plus resources that only exist in another version of the group.

use std::collections::{BTreeMap, HashSet};
use std::fmt;

use serde_json::Value;

use super::{Client, Error, Result};

/// One resource the server serves in one group-version (client-go's `metav1.APIResource`
/// with its group and version filled in).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ApiResource {
    /// Empty for the core group.
    pub group: String,
    /// The version within the group: `v1`, `v2`.
    pub version: String,
    /// The kind of its objects: `Pod`, `ReplicaSet`.
    pub kind: String,
    /// The resource name in URLs: `pods`, `replicasets`.
    pub plural: String,
    /// Whether its objects live in a namespace.
    pub namespaced: bool,
    /// The verbs it serves (`get`, `list`, `watch`, ...); empty when unknown.
    pub verbs: Vec<String>,
}

impl ApiResource {
    /// `group/version/plural`: what monitors of discovered resources are keyed by (upstream's
    /// GroupVersionResource).
    pub fn monitor_key(&self) -> String {
        format!("{}/{}/{}", self.group, self.version, self.plural)
    }

    /// The resource of a `k8s_openapi` kind (its verbs are unknown, hence empty).
    pub fn of<K: k8s_openapi::Resource>(namespaced: bool) -> ApiResource {
        ApiResource {
            group: K::GROUP.to_string(),
            version: K::VERSION.to_string(),
            kind: K::KIND.to_string(),
            plural: K::URL_PATH_SEGMENT.to_string(),
            namespaced,
            verbs: Vec::new(),
        }
    }

    /// `v1`, `apps/v1`: the `apiVersion` of its objects.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// `pods`, `replicasets.apps`: schema.GroupResource's string form.
    pub fn group_resource(&self) -> String {
        if self.group.is_empty() { self.plural.clone() } else { format!("{}.{}", self.plural, self.group) }
    }

    /// Whether every one of `verbs` is supported (client-go's `SupportsAllVerbs`).
    pub fn supports_all(&self, verbs: &[&str]) -> bool {
        verbs.iter().all(|verb| self.verbs.iter().any(|v| v == verb))
    }

    /// `/api/v1/namespaces/ns/pods`, `/apis/apps/v1/replicasets`; the namespace is ignored for
    /// cluster-scoped resources, and `None` means across all namespaces.
    pub fn collection_path(&self, namespace: Option<&str>) -> String {
        let root = if self.group.is_empty() {
            format!("/api/{}", self.version)
        } else {
            format!("/apis/{}/{}", self.group, self.version)
        };
        match namespace.filter(|_| self.namespaced) {
            Some(ns) => format!("{root}/namespaces/{ns}/{}", self.plural),
            None => format!("{root}/{}", self.plural),
        }
    }
}

impl fmt::Display for ApiResource {
    /// schema.GroupVersionResource's `%v`-ish form: `apps/v1, Resource=replicasets`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, Resource={}", self.api_version(), self.plural)
    }
}

/// What discovery found.
#[derive(Debug, Default)]
pub struct Discovery {
    /// Every resource of every group-version that could be read, preferred versions first.
    pub all: Vec<ApiResource>,
    /// Group-versions (`apps/v1`, `v1`) whose discovery document could not be read, with why
    /// (upstream's `ErrGroupDiscoveryFailed.Groups`).
    pub failed: BTreeMap<String, Error>,
}

impl Discovery {
    /// client-go's `ServerPreferredResources`: for each group and resource, the entry of the
    /// first version that has it, versions in the group's preference order.
    pub fn preferred(&self) -> Vec<ApiResource> {
        let mut seen = HashSet::new();
        self.all.iter().filter(|r| seen.insert((r.group.clone(), r.plural.clone()))).cloned().collect()
    }

    /// The resource serving `kind` objects of `api_version` (a REST mapping): that exact
    /// version if served, else the group's first (preferred) version serving the kind.
    pub fn resource_for(&self, api_version: &str, kind: &str) -> Option<&ApiResource> {
        let (group, version) = split_api_version(api_version);
        let of_kind = |r: &&ApiResource| r.group == group && r.kind == kind;
        self.all.iter().filter(of_kind).find(|r| r.version == version).or_else(|| self.all.iter().find(of_kind))
    }

    /// Whether discovery of some group-versions failed.
    pub fn is_partial(&self) -> bool {
        !self.failed.is_empty()
    }
}

/// `apps/v1` → (`apps`, `v1`); `v1` → (``, `v1`).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

/// What client-go asks `/api` and `/apis` for: aggregated discovery, else the legacy lists.
const ACCEPT_DISCOVERY: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,\
                                application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,\
                                application/json";

/// Reads the server's discovery documents (see the module docs). Fails only when the group
/// lists themselves (`/api`, `/apis`) cannot be read.
pub fn server_resources(client: &Client) -> Result<Discovery> {
    let mut discovery = Discovery::default();
    for root in ["/api", "/apis"] {
        let body = client.send_accepting(ureq::http::Method::GET, root, None, ACCEPT_DISCOVERY)?;
        let document: Value = serde_json::from_slice(&body).map_err(|e| Error::Decode(format!("{root}: {e}")))?;
        if document["kind"] == "APIGroupDiscoveryList" {
            add_aggregated(&mut discovery, &document);
        } else {
            add_legacy(client, &mut discovery, root, &document);
        }
    }
    Ok(discovery)
}

/// The resources of an `APIGroupDiscoveryList` (client-go's `SplitGroupsAndResources`): every
/// version of every group, preferred first; a `Stale` version fails.
fn add_aggregated(discovery: &mut Discovery, list: &Value) {
    for group in list["items"].as_array().into_iter().flatten() {
        let name = group["metadata"]["name"].as_str().unwrap_or_default();
        for version in group["versions"].as_array().into_iter().flatten() {
            let version_name = version["version"].as_str().unwrap_or_default();
            let group_version =
                if name.is_empty() { version_name.to_string() } else { format!("{name}/{version_name}") };
            if version["freshness"] == "Stale" {
                discovery.failed.insert(group_version.clone(), Error::StaleGroupVersion(group_version));
                continue;
            }
            let resources = version["resources"].as_array().into_iter().flatten();
            // A resource without its kind is only the parent of its subresources (dropped here).
            discovery.all.extend(resources.filter_map(|r| {
                let kind = r["responseKind"]["kind"].as_str().filter(|k| !k.is_empty())?;
                Some(ApiResource {
                    group: name.to_string(),
                    version: version_name.to_string(),
                    kind: kind.to_string(),
                    plural: r["resource"].as_str()?.to_string(),
                    namespaced: r["scope"] == "Namespaced",
                    verbs: r["verbs"].as_array().into_iter().flatten().filter_map(as_string).collect(),
                })
            }));
        }
    }
}

/// The resources of each group-version of a legacy `APIVersions` (`/api`) or `APIGroupList`
/// (`/apis`), each read from its own document.
fn add_legacy(client: &Client, discovery: &mut Discovery, root: &str, list: &Value) {
    for group_version in group_versions(list) {
        let path = format!("{root}/{group_version}");
        match client.get_json::<Value>(&path).and_then(|list| resources_of(&group_version, &list)) {
            Ok(resources) => discovery.all.extend(resources),
            Err(e) => {
                discovery.failed.insert(group_version, e);
            }
        }
    }
}

/// Every group-version of `/api` (`versions`) or `/apis` (`groups`), each group's preferred
/// version before its others.
fn group_versions(list: &Value) -> Vec<String> {
    let mut out: Vec<String> = list["versions"].as_array().into_iter().flatten().filter_map(as_string).collect();
    for group in list["groups"].as_array().into_iter().flatten() {
        let preferred = group["preferredVersion"]["groupVersion"].as_str().map(str::to_string);
        out.extend(preferred.clone());
        let versions = group["versions"].as_array().into_iter().flatten();
        let others = versions.filter_map(|v| v["groupVersion"].as_str()).filter(|gv| Some(*gv) != preferred.as_deref());
        out.extend(others.map(str::to_string));
    }
    out
}

fn as_string(value: &Value) -> Option<String> {
    value.as_str().map(str::to_string)
}

/// The resources of an `APIResourceList`, without subresources (`pods/status`).
fn resources_of(group_version: &str, list: &Value) -> Result<Vec<ApiResource>> {
    let resources = list["resources"]
        .as_array()
        .ok_or_else(|| Error::Decode(format!("discovery document of {group_version} has no resources")))?;
    let (group, version) = split_api_version(group_version);
    let parsed = resources.iter().filter_map(|r| {
        let plural = r["name"].as_str().filter(|name| !name.contains('/'))?;
        Some(ApiResource {
            group: r["group"].as_str().filter(|g| !g.is_empty()).unwrap_or(group).to_string(),
            version: r["version"].as_str().filter(|v| !v.is_empty()).unwrap_or(version).to_string(),
            kind: r["kind"].as_str().unwrap_or_default().to_string(),
            plural: plural.to_string(),
            namespaced: r["namespaced"].as_bool().unwrap_or(false),
            verbs: r["verbs"].as_array().into_iter().flatten().filter_map(as_string).collect(),
        })
    });
    Ok(parsed.collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn resource(group: &str, version: &str, plural: &str, kind: &str) -> ApiResource {
        ApiResource {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            namespaced: true,
            verbs: vec!["list".into(), "watch".into()],
        }
    }

    #[test]
    fn group_versions_put_preferred_versions_first() {
        let core = json!({"versions": ["v1"]});
        let groups = json!({"groups": [
            {"name": "autoscaling", "versions": [{"groupVersion": "autoscaling/v1"}, {"groupVersion": "autoscaling/v2"}],
             "preferredVersion": {"groupVersion": "autoscaling/v2"}},
            {"name": "apps", "versions": [{"groupVersion": "apps/v1"}], "preferredVersion": {"groupVersion": "apps/v1"}},
        ]});
        assert_eq!(group_versions(&core), ["v1"]);
        assert_eq!(group_versions(&groups), ["autoscaling/v2", "autoscaling/v1", "apps/v1"]);
    }

    #[test]
    fn aggregated_discovery_drops_subresources_and_fails_stale_versions() {
        let list = json!({"kind": "APIGroupDiscoveryList", "items": [
            {"metadata": {"name": ""}, "versions": [{"version": "v1", "freshness": "Current", "resources": [
                {"resource": "pods", "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
                 "scope": "Namespaced", "verbs": ["list", "watch"],
                 "subresources": [{"subresource": "status", "responseKind": {"kind": "Pod"}, "verbs": ["get"]}]},
                {"resource": "nodes", "responseKind": {"group": "", "version": "v1", "kind": "Node"},
                 "scope": "Cluster", "verbs": ["list"]},
                {"resource": "parents", "scope": "Cluster", "verbs": []},
            ]}]},
            {"metadata": {"name": "metrics.k8s.io"}, "versions": [{"version": "v1beta1", "freshness": "Stale"}]},
        ]});
        let mut discovery = Discovery::default();
        add_aggregated(&mut discovery, &list);
        let names: Vec<String> = discovery.all.iter().map(|r| r.to_string()).collect();
        assert_eq!(names, ["v1, Resource=pods", "v1, Resource=nodes"]);
        assert!(discovery.all[0].namespaced && !discovery.all[1].namespaced);
        assert_eq!(discovery.all[0].kind, "Pod");
        let failed: Vec<String> = discovery.failed.iter().map(|(gv, e)| format!("{gv}: {}", e.message())).collect();
        assert_eq!(failed, ["metrics.k8s.io/v1beta1: stale GroupVersion discovery: metrics.k8s.io/v1beta1"]);
    }

    #[test]
    fn resource_lists_drop_subresources() {
        let list = json!({"groupVersion": "v1", "resources": [
            {"name": "pods", "namespaced": true, "kind": "Pod", "verbs": ["get", "list", "watch", "delete"]},
            {"name": "pods/status", "namespaced": true, "kind": "Pod", "verbs": ["get"]},
            {"name": "nodes", "namespaced": false, "kind": "Node", "verbs": ["list"]},
        ]});
        let resources = resources_of("v1", &list).expect("a list");
        assert_eq!(resources.len(), 2);
        assert!(resources[0].supports_all(&["list", "watch", "delete"]));
        assert!(!resources[1].supports_all(&["list", "watch"]));
        assert_eq!(resources[1].collection_path(Some("ns")), "/api/v1/nodes");
        assert_eq!(resources[0].collection_path(Some("ns")), "/api/v1/namespaces/ns/pods");
        assert!(resources_of("v1", &json!({})).is_err());
    }

    #[test]
    fn preferred_keeps_the_first_version_of_each_resource_and_mapping_finds_kinds() {
        let discovery = Discovery {
            all: vec![
                resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
                resource("autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
                resource("autoscaling", "v1", "only-v1", "OnlyV1"),
                resource("apps", "v1", "replicasets", "ReplicaSet"),
            ],
            failed: BTreeMap::new(),
        };
        let preferred: Vec<String> = discovery.preferred().iter().map(|r| r.to_string()).collect();
        assert_eq!(
            preferred,
            [
                "autoscaling/v2, Resource=horizontalpodautoscalers",
                "autoscaling/v1, Resource=only-v1",
                "apps/v1, Resource=replicasets"
            ]
        );
        let found = |v: &str, k: &str| discovery.resource_for(v, k).map(|r| r.api_version());
        assert_eq!(found("autoscaling/v1", "HorizontalPodAutoscaler").as_deref(), Some("autoscaling/v1"));
        // An unserved version maps to the preferred one, as a REST mapper does.
        assert_eq!(found("apps/v1beta2", "ReplicaSet").as_deref(), Some("apps/v1"));
        assert_eq!(found("v1", "ReplicaSet"), None);
        assert_eq!(resource("apps", "v1", "replicasets", "ReplicaSet").group_resource(), "replicasets.apps");
    }
}
