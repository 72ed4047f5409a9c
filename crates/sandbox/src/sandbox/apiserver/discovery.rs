//! The non-resource paths: discovery (legacy and aggregated, as kubectl asks for them),
//! `/version`, and the health endpoints.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::sandbox::apiserver::status::{ApiError, ApiResult};
use crate::sandbox::metrics_api;
use crate::sandbox::storage::resources::{self, RESOURCES, ResourceType};
use crate::server::http::Request;

/// The Kubernetes version the sandbox speaks: (major, minor).
pub const VERSION: (&str, &str) = ("1", "36");
/// Its full release, as `/version` reports it.
pub const GIT_VERSION: &str = "v1.36.2";
/// The oldest minor version it stays compatible with (`--min-compatibility-version`, by
/// default the previous minor).
const MIN_COMPATIBILITY: (&str, &str) = ("1", "35");

const AGGREGATED_V2: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
const AGGREGATED_V2BETA1: &str = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";

/// Answers a non-resource request: `(content type, body)`, or `None` for resource paths.
/// Aggregated discovery marks the group versions in `stale` `Stale`, without resources, as
/// kube-apiserver does for an APIService it cannot reach.
pub fn answer(request: &Request, stale: &BTreeSet<String>) -> Option<ApiResult<(&'static str, String)>> {
    let path = request.path.trim_end_matches('/');
    let json_answer = |v: Value| Some(Ok(("application/json", v.to_string())));
    if request.method != "GET" && !matches!(path, "/healthz" | "/livez" | "/readyz") {
        return None;
    }
    match path {
        "/healthz" | "/livez" | "/readyz" => Some(Ok(("text/plain; charset=utf-8", health(path, request)))),
        "/version" => json_answer(version()),
        "/api" => match aggregated_format(request) {
            Some(content_type) => Some(Ok((content_type, aggregated(true, content_type, stale).to_string()))),
            None => json_answer(json!({
                "kind": "APIVersions",
                "versions": ["v1"],
                "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": request.header("Host").unwrap_or_default()}],
            })),
        },
        "/apis" => match aggregated_format(request) {
            Some(content_type) => Some(Ok((content_type, aggregated(false, content_type, stale).to_string()))),
            None => json_answer(group_list()),
        },
        "/openapi/v2" => Some(Err(ApiError::page_not_found())),
        "/openapi/v3" => json_answer(openapi_root()),
        _ => {
            let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
            match segments.as_slice() {
                ["api", version] => json_answer(resource_list("", version)?),
                ["apis", group, version] => json_answer(resource_list(group, version)?),
                ["apis", group] => json_answer(group_entry(group)?),
                ["openapi", "v3", "api", version] => json_answer(openapi_document("", version)?),
                ["openapi", "v3", "apis", group, version] => json_answer(openapi_document(group, version)?),
                _ => None,
            }
        }
    }
}

fn health(path: &str, request: &Request) -> String {
    if request.query_param("verbose").is_none() {
        return "ok".into();
    }
    let checks = ["ping", "log", "etcd", "poststarthook/start-apiextensions-controllers"];
    let mut text: String = checks.iter().map(|c| format!("[+]{c} ok\n")).collect();
    text.push_str(&format!("{} check passed\n", path.trim_start_matches('/')));
    text
}

/// `version.Info` as kube-apiserver serves it, with the emulation and compatibility versions
/// of its component-base registry (not emulating an older version).
fn version() -> Value {
    json!({
        "major": VERSION.0,
        "minor": VERSION.1,
        "emulationMajor": VERSION.0,
        "emulationMinor": VERSION.1,
        "minCompatibilityMajor": MIN_COMPATIBILITY.0,
        "minCompatibilityMinor": MIN_COMPATIBILITY.1,
        "gitVersion": GIT_VERSION,
        "gitCommit": "kcm-sandbox",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "n/a (kcm-sandbox, Rust)",
        "compiler": "rustc",
        "platform": format!("{}/{}", std::env::consts::OS, if cfg!(target_arch = "x86_64") { "amd64" } else { std::env::consts::ARCH }),
    })
}

/// `/openapi/v3`: where each group/version's document is.
fn openapi_root() -> Value {
    let mut paths = serde_json::Map::new();
    for (group, version) in resources::groups() {
        let key = if group.is_empty() { format!("api/{version}") } else { format!("apis/{group}/{version}") };
        paths.insert(key.clone(), json!({"serverRelativeURL": format!("/openapi/v3/{key}?hash=kcm-sandbox")}));
    }
    json!({"paths": paths})
}

/// A group/version's OpenAPI v3 document. It describes the operations and their parameters
/// (kubectl reads it to learn that the server validates fields itself, `fieldValidation`), and
/// the object schemas of the kinds in `openapi_schemas.json` (see [`object_schemas`]).
fn openapi_document(group: &str, version: &str) -> Option<Value> {
    let served: Vec<&ResourceType> = RESOURCES.iter().filter(|r| r.group == group && r.version == version).collect();
    if served.is_empty() {
        return None;
    }
    let prefix = if group.is_empty() { format!("/api/{version}") } else { format!("/apis/{group}/{version}") };
    let mut paths = serde_json::Map::new();
    for r in served {
        let gvk = json!({"group": r.group, "version": r.version, "kind": r.kind});
        let collection = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", r.plural)
        } else {
            format!("{prefix}/{}", r.plural)
        };
        let operation = |verb: &str| {
            json!({
                "operationId": format!("{verb}{}", r.kind),
                "x-kubernetes-action": verb,
                "x-kubernetes-group-version-kind": gvk,
                "parameters": [
                    {"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                    {"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}},
                ],
                "responses": {"200": {"description": "OK"}},
            })
        };
        if r.verbs.names().contains(&"create") {
            paths.insert(collection.clone(), json!({"post": operation("post")}));
        }
        if r.verbs.names().contains(&"update") {
            paths.insert(
                format!("{collection}/{{name}}"),
                json!({"put": operation("put"), "patch": operation("patch")}),
            );
        }
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("{}.{}", VERSION.0, VERSION.1)},
        "paths": paths,
        "components": {"schemas": object_schemas(&resources::ResourceType::group_version_of(group, version))},
    }))
}

/// The object schemas served for a group/version: kube-apiserver v1.36.2's own, trimmed to the
/// kinds a ValidatingAdmissionPolicy is likely to match (core/v1 Pod, ConfigMap, Service,
/// Secret, Namespace, ServiceAccount, PersistentVolumeClaim; apps/v1 workloads; batch/v1 Job
/// and CronJob; the resource.k8s.io/v1 kinds) and what they reference, without descriptions.
/// Made by `scripts/gen-sandbox-openapi.py` from the documents the real server serves.
fn object_schemas(group_version: &str) -> Value {
    static SCHEMAS: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    let all = SCHEMAS.get_or_init(|| {
        serde_json::from_str(include_str!("openapi_schemas.json")).expect("the embedded schemas are JSON")
    });
    all.get(group_version).cloned().unwrap_or_else(|| json!({}))
}

/// The aggregated discovery format the client accepts, if any (kubectl asks for it first).
fn aggregated_format(request: &Request) -> Option<&'static str> {
    let accept = request.header("Accept")?;
    if accept.contains("v=v2;") && accept.contains("as=APIGroupDiscoveryList") {
        Some(AGGREGATED_V2)
    } else if accept.contains("v=v2beta1;") && accept.contains("as=APIGroupDiscoveryList") {
        Some(AGGREGATED_V2BETA1)
    } else {
        None
    }
}

fn group_list() -> Value {
    let groups: Vec<Value> = resources::groups()
        .into_iter()
        .filter(|(group, _)| !group.is_empty())
        .map(|(group, version)| group_json(group, version))
        .chain(metrics_api::GROUPS.iter().map(|(group, version)| group_json(group, version)))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

fn group_json(group: &str, version: &str) -> Value {
    let gv = json!({"groupVersion": format!("{group}/{version}"), "version": version});
    json!({"name": group, "versions": [gv.clone()], "preferredVersion": gv})
}

fn group_entry(group: &str) -> Option<Value> {
    let (group, version) = resources::groups().into_iter().find(|(g, _)| *g == group)?;
    let mut entry = group_json(group, version);
    entry["kind"] = "APIGroup".into();
    entry["apiVersion"] = "v1".into();
    Some(entry)
}

fn resource_list(group: &str, version: &str) -> Option<Value> {
    let served: Vec<&ResourceType> = RESOURCES.iter().filter(|r| r.group == group && r.version == version).collect();
    if served.is_empty() {
        return None;
    }
    let mut list = Vec::new();
    for r in served {
        let mut entry = json!({
            "name": r.plural,
            "singularName": r.singular,
            "namespaced": r.namespaced,
            "kind": r.kind,
            "verbs": r.verbs.names(),
        });
        if !r.short_names.is_empty() {
            entry["shortNames"] = json!(r.short_names);
        }
        if !r.categories.is_empty() {
            entry["categories"] = json!(r.categories);
        }
        list.push(entry);
        for sub in r.subresources {
            let (kind, gv) = sub_kind(r, sub);
            let mut entry = json!({
                "name": format!("{}/{}", r.plural, sub.name),
                "singularName": "",
                "namespaced": r.namespaced,
                "kind": kind,
                "verbs": sub.verbs.names(),
            });
            if gv != r.group_version() {
                let (g, v) = split_gv(&gv);
                entry["group"] = g.into();
                entry["version"] = v.into();
            }
            list.push(entry);
        }
    }
    // kube-apiserver lists them sorted by name, each resource followed by its subresources.
    list.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    let group_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": list}))
}

/// The kind and group/version of a subresource's body (status bodies are the kind itself).
fn sub_kind(resource: &ResourceType, sub: &resources::Subresource) -> (String, String) {
    if sub.kind.is_empty() {
        (resource.kind.to_string(), resource.group_version())
    } else {
        (sub.kind.to_string(), sub.group_version.to_string())
    }
}

fn split_gv(gv: &str) -> (&str, &str) {
    gv.split_once('/').unwrap_or(("", gv))
}

/// apidiscovery.k8s.io/v2 `APIGroupDiscoveryList` for `/api` (core) or `/apis`.
fn aggregated(core: bool, content_type: &str, stale: &BTreeSet<String>) -> Value {
    let api_version =
        if content_type == AGGREGATED_V2 { "apidiscovery.k8s.io/v2" } else { "apidiscovery.k8s.io/v2beta1" };
    let mut items: Vec<Value> = resources::groups()
        .into_iter()
        .filter(|(group, _)| group.is_empty() == core)
        .map(|(group, version)| {
            let group_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
            if stale.contains(&group_version) {
                return json!({
                    "metadata": group_metadata(group),
                    "versions": [{"version": version, "freshness": "Stale"}],
                });
            }
            let mut served: Vec<&ResourceType> =
                RESOURCES.iter().filter(|r| r.group == group && r.version == version).collect();
            served.sort_by_key(|r| r.plural);
            let resources: Vec<Value> = served.into_iter().map(aggregated_resource).collect();
            json!({
                "metadata": group_metadata(group),
                "versions": [{"version": version, "resources": resources, "freshness": "Current"}],
            })
        })
        .collect();
    if !core {
        items.extend(metrics_api::GROUPS.iter().map(|(group, version)| aggregated_group(group, version, stale)));
    }
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": api_version, "metadata": {}, "items": items})
}

/// An `APIGroupDiscovery`'s metadata: the group's name, none for the core group (an empty
/// name and a zero creationTimestamp are left out).
fn group_metadata(group: &str) -> Value {
    if group.is_empty() { json!({}) } else { json!({"name": group}) }
}

/// An aggregated API's entry; `Stale` when faults make it unavailable.
fn aggregated_group(group: &str, version: &str, stale: &BTreeSet<String>) -> Value {
    if stale.contains(&format!("{group}/{version}")) {
        return json!({
            "metadata": {"name": group},
            "versions": [{"version": version, "freshness": "Stale"}],
        });
    }
    metrics_api::aggregated_discovery_item(group, version)
}

/// A resource in aggregated discovery, its subresources sorted by name. A response kind of the
/// resource's own group/version leaves them empty, as kube-apiserver writes it.
fn aggregated_resource(r: &ResourceType) -> Value {
    let mut subs: Vec<&resources::Subresource> = r.subresources.iter().collect();
    subs.sort_by_key(|sub| sub.name);
    let subresources: Vec<Value> = subs
        .into_iter()
        .map(|sub| {
            let (kind, gv) = sub_kind(r, sub);
            let (group, version) = if gv == r.group_version() { ("", "") } else { split_gv(&gv) };
            json!({
                "subresource": sub.name,
                "responseKind": {"group": group, "version": version, "kind": kind},
                "verbs": sub.verbs.names(),
            })
        })
        .collect();
    let mut entry = json!({
        "resource": r.plural,
        "responseKind": {"group": "", "version": "", "kind": r.kind},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs.names(),
    });
    if !r.short_names.is_empty() {
        entry["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        entry["categories"] = json!(r.categories);
    }
    if !subresources.is_empty() {
        entry["subresources"] = json!(subresources);
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(path: &str, accept: Option<&str>) -> (String, Value) {
        let mut headers = Vec::new();
        if let Some(a) = accept {
            headers.push(("Accept".to_string(), a.to_string()));
        }
        let request = Request {
            method: "GET".into(),
            path: path.into(),
            query: vec![],
            headers,
            body: vec![],
            peer_certificates: vec![],
            remote: "127.0.0.1:1".parse().unwrap(),
        };
        let (ct, body) = answer(&request, &BTreeSet::new()).unwrap().unwrap();
        (ct.to_string(), serde_json::from_str(&body).unwrap_or(Value::Null))
    }

    #[test]
    fn legacy_discovery_lists_groups_and_resources() {
        let (_, apis) = get("/apis", None);
        assert!(apis["groups"].as_array().unwrap().iter().any(|g| g["name"] == "apps"));
        let (_, core) = get("/api/v1", None);
        let pods = core["resources"].as_array().unwrap().iter().find(|r| r["name"] == "pods").unwrap();
        assert_eq!(pods["shortNames"], json!(["po"]));
        let scale = get("/apis/apps/v1", None).1["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["name"] == "deployments/scale")
            .cloned()
            .unwrap();
        assert_eq!(scale["group"], "autoscaling");
        assert_eq!(scale["kind"], "Scale");
    }

    #[test]
    fn aggregated_discovery_when_asked() {
        let accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";
        let (ct, list) = get("/apis", Some(accept));
        assert_eq!(ct, AGGREGATED_V2);
        let apps = list["items"].as_array().unwrap().iter().find(|i| i["metadata"]["name"] == "apps").unwrap();
        assert_eq!(apps["versions"][0]["resources"][0]["scope"], "Namespaced");
        let (_, core) = get("/api", Some(accept));
        assert_eq!(core["items"][0]["metadata"], json!({}), "the core group has no name");
    }
}
