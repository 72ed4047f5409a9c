//! Subresources with their own semantics (`scale`, `binding`, `eviction`, `token`,
//! `finalize`, `approval`) and the create-only review and binding resources.

use std::time::Duration;

use serde_json::{Value, json};

use crate::apimachinery::field::Error as FieldError;
use crate::apimachinery::labels::Selector;
use crate::sandbox::apiserver::handlers::patch::json_patch_error;
use crate::sandbox::apiserver::handlers::update::write_update;
use crate::sandbox::apiserver::patch;
use crate::sandbox::apiserver::protobuf;
use crate::sandbox::apiserver::status::{ApiError, ApiResult};
use crate::sandbox::apiserver::{ApiServer, Target};
use crate::sandbox::auth::UserInfo;
use crate::sandbox::auth::rbac;
use crate::sandbox::storage::objects::{self, name_of, now};
use crate::sandbox::storage::resources::{self, ResourceType};
use crate::server::http::Request;

/// TokenRequest's default and bounds on `expirationSeconds`.
const DEFAULT_TOKEN_SECONDS: i64 = 3600;
const MIN_TOKEN_SECONDS: i64 = 600;

/// Serves `sub` of the object `target` names (`scale`, `binding`, `eviction`, `token`, `finalize`,
/// or `approval`); 405 for a method the subresource does not take.
pub fn handle(
    api: &ApiServer,
    request: &Request,
    target: &Target,
    sub: &str,
    user: &UserInfo,
) -> ApiResult<(u16, Value)> {
    let name = target.name.as_deref().ok_or_else(ApiError::method_not_allowed)?;
    match (sub, request.method.as_str()) {
        ("scale", "GET") => {
            let object = get_object(api, target, name)?;
            Ok((200, scale_of(&object)))
        }
        ("scale", "PUT" | "PATCH") => update_scale(api, request, target, name, user),
        ("binding", "POST") => bind(api, request, target.namespace.as_deref().unwrap_or_default(), name),
        ("eviction", "POST") => super::eviction::evict(api, request, target, name, user),
        ("token", "POST") => issue_token(api, request, target, name),
        ("finalize", "PUT") | ("approval", "PUT") => replace_part(api, request, target, name, sub, user),
        ("approval", "GET") => Ok((200, get_object(api, target, name)?)),
        _ => Err(ApiError::method_not_allowed()),
    }
}

/// Create-only resources that are not subresources: bindings and the review APIs.
pub fn create_only(api: &ApiServer, request: &Request, target: &Target, user: &UserInfo) -> ApiResult<(u16, Value)> {
    let body = body(request)?;
    let resource = target.resource;
    match (resource.group, resource.plural) {
        ("", "bindings") => {
            let pod = name_of(&body).to_string();
            bind(api, request, target.namespace.as_deref().unwrap_or_default(), &pod)
        }
        ("authentication.k8s.io", "tokenreviews") => {
            let token = body["spec"]["token"].as_str().unwrap_or_default();
            let status = match api.tokens.lookup(token) {
                Some(u) => {
                    json!({"authenticated": true, "user": {"username": u.name, "uid": u.uid, "groups": u.groups}})
                }
                None => json!({"authenticated": false, "error": "invalid bearer token"}),
            };
            Ok((201, review_answer(resource, body, status)))
        }
        // `kubectl auth whoami`: who the requester is, as the authenticator saw them.
        ("authentication.k8s.io", "selfsubjectreviews") => {
            let mut user_info = json!({"username": user.name, "groups": user.groups});
            if !user.uid.is_empty() {
                user_info["uid"] = user.uid.clone().into();
            }
            Ok((201, review_answer(resource, body, json!({"userInfo": user_info}))))
        }
        ("authorization.k8s.io", _) => {
            let namespace = target.namespace.as_deref();
            let (subject, attributes) = rbac::review_request(resource.plural, &body, user, namespace)?;
            let decision = api.store.write::<_, ApiError>(|txn| Ok(rbac::authorize(txn, &subject, &attributes)))?;
            Ok((201, review_answer(resource, body, decision.to_status())))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn review_answer(resource: &ResourceType, mut body: Value, status: Value) -> Value {
    body["apiVersion"] = resource.group_version().into();
    body["kind"] = resource.kind.into();
    if !body["metadata"].is_object() {
        body["metadata"] = json!({});
    }
    if let Some(metadata) = body["metadata"].as_object_mut() {
        // A zero creationTimestamp is left out (`omitzero`, since v1.34).
        metadata.remove("creationTimestamp");
    }
    body["status"] = status;
    body
}

pub(super) fn body(request: &Request) -> ApiResult<Value> {
    if protobuf::is_protobuf(request.header("Content-Type")) {
        return protobuf::decode_body(&request.body).map_err(|e| ApiError::bad_request(e.to_string()));
    }
    serde_json::from_slice(&request.body)
        .map_err(|e| ApiError::bad_request(format!("cannot decode the request body: {e}")))
}

fn get_object(api: &ApiServer, target: &Target, name: &str) -> ApiResult<Value> {
    let ns = target.namespace.as_deref().unwrap_or_default();
    let object = api
        .store
        .get(target.resource.storage_key(), ns, name)
        .ok_or_else(|| ApiError::not_found(target.resource, name))?;
    Ok(crate::sandbox::apiserver::convert::to_external(target.resource, &object))
}

/// autoscaling/v1 Scale of a scalable object.
fn scale_of(object: &Value) -> Value {
    let meta = &object["metadata"];
    let selector = &object["spec"]["selector"];
    // ReplicationControllers have a plain label map; apps kinds a LabelSelector.
    let selector_text = if selector.get("matchLabels").is_some() || selector.get("matchExpressions").is_some() {
        Selector::from_label_selector_object(selector).map(|s| s.to_string()).unwrap_or_default()
    } else {
        let mut pairs: Vec<String> = selector
            .as_object()
            .map(|m| m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect())
            .unwrap_or_default();
        pairs.sort();
        pairs.join(",")
    };
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {
            "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
            "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"],
        },
        "spec": {"replicas": object["spec"]["replicas"].as_i64().unwrap_or(0)},
        "status": {"replicas": object["status"]["replicas"].as_i64().unwrap_or(0), "selector": selector_text},
    })
}

fn update_scale(
    api: &ApiServer,
    request: &Request,
    target: &Target,
    name: &str,
    user: &UserInfo,
) -> ApiResult<(u16, Value)> {
    let resource = target.resource;
    let ns = target.namespace.as_deref().unwrap_or_default().to_string();
    let document = body(request)?;
    let main = Target { resource, namespace: target.namespace.clone(), name: Some(name.into()), subresource: None };
    let stored = api.store.write(|txn| {
        let old = txn.get(resource.storage_key(), &ns, name).ok_or_else(|| ApiError::not_found(resource, name))?;
        let current = scale_of(&old);
        let scale = if request.method == "PATCH" {
            let content_type = request.header("Content-Type").unwrap_or_default();
            if content_type.starts_with("application/json-patch+json") {
                patch::json_patch(&current, &document).map_err(json_patch_error)?
            } else {
                // Scale has no list fields: merge and strategic merge patches agree.
                patch::json_merge_patch(&current, &document)
            }
        } else {
            document.clone()
        };
        if let Some(rv) = scale["metadata"]["resourceVersion"].as_str().filter(|v| !v.is_empty())
            && Some(rv) != old["metadata"]["resourceVersion"].as_str()
        {
            return Err(ApiError::modified(resource, name));
        }
        let replicas = scale["spec"]["replicas"].as_i64().unwrap_or(0);
        if replicas < 0 {
            let causes =
                [FieldError::invalid_json("spec.replicas", &json!(replicas), "must be greater than or equal to 0")];
            return Err(ApiError::new(
                422,
                "Invalid",
                format!("Scale.autoscaling \"{name}\" is invalid: {}", causes[0]),
                None,
            ));
        }
        let mut updated = (*old).clone();
        updated["spec"]["replicas"] = replicas.into();
        updated["metadata"]["resourceVersion"] = Value::Null;
        write_update(api, txn, &main, &old, updated, user, false)
    })?;
    Ok((200, scale_of(&stored)))
}

/// Assigns a pod to a node (what the scheduler does), refusing a pod that is already bound.
fn bind(api: &ApiServer, request: &Request, ns: &str, pod_name: &str) -> ApiResult<(u16, Value)> {
    let binding = body(request)?;
    let node = binding["target"]["name"].as_str().unwrap_or_default().to_string();
    let pods = resources::find("", "v1", "pods").expect("pods are served");
    if node.is_empty() {
        return Err(ApiError::invalid(pods, pod_name, &[FieldError::required("target.name", "")]));
    }
    if !name_of(&binding).is_empty() && name_of(&binding) != pod_name {
        return Err(ApiError::bad_request("name in URL does not match name in Binding object"));
    }
    api.store.write(|txn| {
        let pod = txn.get("pods", ns, pod_name).ok_or_else(|| ApiError::not_found(pods, pod_name))?;
        check_binding_preconditions(pods, &binding, &pod)?;
        if objects::is_deleting(&pod) {
            return Err(binding_conflict(
                pod_name,
                &format!("pod {pod_name} is being deleted, cannot be assigned to a host"),
            ));
        }
        if let Some(bound) = pod["spec"]["nodeName"].as_str().filter(|n| !n.is_empty()) {
            return Err(binding_conflict(pod_name, &format!("pod {pod_name} is already assigned to node \"{bound}\"")));
        }
        if pod["spec"]["schedulingGates"].as_array().is_some_and(|gates| !gates.is_empty()) {
            return Err(binding_conflict(pod_name, &format!("pod {pod_name} has non-empty .spec.schedulingGates")));
        }
        let mut pod = (*pod).clone();
        pod["spec"]["nodeName"] = node.clone().into();
        // `setPodNodeAndMetadata`: the nomination is done with (ClearingNominatedNodeNameAfterBinding,
        // on since v1.35), the binding's annotations are copied to the pod, and its labels with
        // the node's topology labels the PodTopologyLabels admission adds to the binding
        // (PodTopologyLabelsAdmission, on since v1.35), overwriting the pod's.
        if let Some(status) = pod["status"].as_object_mut() {
            status.remove("nominatedNodeName");
        }
        if let Some(annotations) = binding["metadata"]["annotations"].as_object() {
            for (key, value) in annotations {
                pod["metadata"]["annotations"][key] = value.clone();
            }
        }
        let mut labels = binding["metadata"]["labels"].as_object().cloned().unwrap_or_default();
        if binding["target"]["kind"] == "Node" {
            labels.extend(crate::sandbox::admission::nodes::topology_labels(txn, &node));
        }
        for (key, value) in labels {
            pod["metadata"]["labels"][key] = value;
        }
        set_condition(&mut pod, "PodScheduled", "True");
        txn.put("pods", pod);
        Ok(())
    })?;
    Ok((201, json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201})))
}

/// A Binding's `metadata.uid` and `metadata.resourceVersion` are preconditions on the pod.
fn check_binding_preconditions(pods: &ResourceType, binding: &Value, pod: &Value) -> ApiResult<()> {
    for (field, label) in [("uid", "UID"), ("resourceVersion", "ResourceVersion")] {
        let wanted = binding["metadata"][field].as_str().filter(|v| !v.is_empty());
        let actual = pod["metadata"][field].as_str().unwrap_or_default();
        if let Some(wanted) = wanted.filter(|w| *w != actual) {
            let why =
                format!("Precondition failed: {label} in precondition: {wanted}, {label} in object meta: {actual}");
            return Err(ApiError::conflict(pods, name_of(pod), &why));
        }
    }
    Ok(())
}

/// A refused binding: the pod registry reports it as a conflict on `pods/binding`.
fn binding_conflict(pod: &str, why: &str) -> ApiError {
    ApiError::new(
        409,
        "Conflict",
        format!("Operation cannot be fulfilled on pods/binding \"{pod}\": {why}"),
        Some(json!({"name": pod, "kind": "pods/binding"})),
    )
}

/// Sets a pod condition, keeping its transition time when the status does not change.
pub fn set_condition(pod: &mut Value, kind: &str, status: &str) {
    let conditions = pod["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let mut found = false;
    let mut updated: Vec<Value> = conditions
        .into_iter()
        .map(|mut c| {
            if c["type"] == kind {
                found = true;
                if c["status"] != status {
                    c["status"] = status.into();
                    c["lastTransitionTime"] = now().into();
                }
            }
            c
        })
        .collect();
    if !found {
        updated.push(json!({"type": kind, "status": status, "lastProbeTime": null, "lastTransitionTime": now()}));
    }
    pod["status"]["conditions"] = Value::Array(updated);
}

/// TokenRequest: a bearer token for the service account, valid for `expirationSeconds`.
fn issue_token(api: &ApiServer, request: &Request, target: &Target, name: &str) -> ApiResult<(u16, Value)> {
    let ns = target.namespace.as_deref().unwrap_or_default();
    let account =
        api.store.get("serviceaccounts", ns, name).ok_or_else(|| ApiError::not_found(target.resource, name))?;
    let mut token_request = body(request)?;
    let seconds = token_request["spec"]["expirationSeconds"].as_i64().unwrap_or(DEFAULT_TOKEN_SECONDS);
    if seconds < MIN_TOKEN_SECONDS {
        return Err(ApiError::new(
            422,
            "Invalid",
            format!(
                "TokenRequest.authentication.k8s.io \"{name}\" is invalid: spec.expirationSeconds: Invalid value: {seconds}: may not specify a duration less than 10 minutes"
            ),
            None,
        ));
    }
    let user = UserInfo {
        name: format!("system:serviceaccount:{ns}:{name}"),
        uid: account["metadata"]["uid"].as_str().unwrap_or_default().to_string(),
        groups: vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated".into(),
        ],
    };
    if token_request["spec"]["audiences"].as_array().is_none_or(Vec::is_empty) {
        token_request["spec"]["audiences"] = json!([SERVICE_ACCOUNT_ISSUER]);
    }
    let lifetime = Duration::from_secs(seconds as u64);
    let (token, expires) = match &api.service_account_key {
        Some(key) => {
            let claims = bound_token_claims(&user, ns, name, &token_request["spec"]["audiences"], lifetime);
            let token = crate::jwt::sign(key, &claims).map_err(|e| ApiError::internal(e.to_string()))?;
            let expires = std::time::SystemTime::now() + lifetime;
            api.tokens.add(&token, user, Some(expires));
            (token, expires)
        }
        None => api.tokens.issue(user, lifetime),
    };
    let expires: jiff::Timestamp = expires.try_into().map_err(|_| ApiError::internal("token expiry out of range"))?;
    token_request["apiVersion"] = "authentication.k8s.io/v1".into();
    token_request["kind"] = "TokenRequest".into();
    token_request["metadata"] = json!({"name": name, "namespace": ns, "creationTimestamp": now()});
    token_request["spec"]["expirationSeconds"] = seconds.into();
    token_request["status"] =
        json!({"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()});
    Ok((201, token_request))
}

/// The issuer of bound tokens: kubeadm's `--service-account-issuer`, also the default audience.
const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";

/// The claims of a bound service-account token, as kube-apiserver's `serviceaccount.Claims`
/// (with `ServiceAccountTokenJTI`, on by default since v1.30): subject, audiences, issue, not-
/// before and expiry times, a `jti`, and the `kubernetes.io` private claims.
fn bound_token_claims(
    user: &UserInfo,
    namespace: &str,
    account: &str,
    audiences: &Value,
    lifetime: Duration,
) -> serde_json::Map<String, Value> {
    let now = jiff::Timestamp::now().as_second();
    let claims = json!({
        "aud": audiences,
        "exp": now + lifetime.as_secs() as i64,
        "iat": now,
        "iss": SERVICE_ACCOUNT_ISSUER,
        "jti": crate::random::uuid(),
        "kubernetes.io": {"namespace": namespace, "serviceaccount": {"name": account, "uid": user.uid}},
        "nbf": now,
        "sub": user.name,
    });
    match claims {
        Value::Object(map) => map,
        _ => unreachable!("json! of an object"),
    }
}

/// `namespaces/x/finalize` (only `spec.finalizers` changes) and
/// `certificatesigningrequests/x/approval` (only `status.conditions` changes).
fn replace_part(
    api: &ApiServer,
    request: &Request,
    target: &Target,
    name: &str,
    sub: &str,
    user: &UserInfo,
) -> ApiResult<(u16, Value)> {
    let resource = target.resource;
    let ns = target.namespace.as_deref().unwrap_or_default().to_string();
    let document = body(request)?;
    if name_of(&document) != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({}) does not match the name on the URL ({name})",
            name_of(&document)
        )));
    }
    // Approval is written as a status update (admission sees `approval`); finalize changes spec.
    let part = (sub == "approval").then(|| sub.to_string());
    let main = Target { resource, namespace: target.namespace.clone(), name: Some(name.into()), subresource: part };
    let stored = api.store.write(|txn| {
        let old = txn.get(resource.storage_key(), &ns, name).ok_or_else(|| ApiError::not_found(resource, name))?;
        if let Some(rv) = document["metadata"]["resourceVersion"].as_str().filter(|v| !v.is_empty())
            && Some(rv) != old["metadata"]["resourceVersion"].as_str()
        {
            return Err(ApiError::modified(resource, name));
        }
        let mut updated = (*old).clone();
        if sub == "finalize" {
            updated["spec"]["finalizers"] = document["spec"]["finalizers"].clone();
            // `finalizers` is `omitempty`: an empty list is not stored.
            if updated["spec"]["finalizers"].as_array().is_none_or(Vec::is_empty) {
                updated["spec"].as_object_mut().map(|m| m.remove("finalizers"));
            }
        } else {
            updated["status"]["conditions"] = document["status"]["conditions"].clone();
        }
        write_update(api, txn, &main, &old, updated, user, false)
    })?;
    Ok((200, crate::sandbox::apiserver::convert::to_external(resource, &stored)))
}

fn is_csr(resource: &ResourceType) -> bool {
    resource.group == "certificates.k8s.io" && resource.plural == "certificatesigningrequests"
}

/// The CSR strategy's `PrepareForCreate`: the requesting user is recorded in the spec, whatever
/// the client sent, and the status starts empty (no pre-approved requests).
pub fn csr_prepare_for_create(resource: &ResourceType, csr: &mut Value, user: &UserInfo) {
    if !is_csr(resource) {
        return;
    }
    let Some(spec) = csr["spec"].as_object_mut() else { return };
    for field in ["username", "uid", "groups", "extra"] {
        spec.remove(field);
    }
    spec.insert("username".into(), user.name.clone().into());
    if !user.uid.is_empty() {
        spec.insert("uid".into(), user.uid.clone().into());
    }
    if !user.groups.is_empty() {
        spec.insert("groups".into(), json!(user.groups));
    }
    csr.as_object_mut().map(|m| m.remove("status"));
}

/// The CSR strategy's `PrepareForUpdate`: an update of the object itself changes neither the
/// spec nor the status.
pub fn csr_prepare_for_update(resource: &ResourceType, old: &Value, csr: &mut Value) {
    if !is_csr(resource) {
        return;
    }
    for part in ["spec", "status"] {
        match old.get(part) {
            Some(v) => csr[part] = v.clone(),
            None => {
                csr.as_object_mut().map(|m| m.remove(part));
            }
        }
    }
}

/// `persistentvolumeStatusStrategy.PrepareForUpdate`: a PersistentVolume's phase change stamps
/// `status.lastPhaseTransitionTime`, unless the writer set a new one.
pub fn volume_phase_transition(resource: &ResourceType, old: &Value, volume: &mut Value) {
    if !(resource.group.is_empty() && resource.plural == "persistentvolumes") {
        return;
    }
    let status = &volume["status"];
    let unset_or_kept = status["lastPhaseTransitionTime"].is_null()
        || status["lastPhaseTransitionTime"] == old["status"]["lastPhaseTransitionTime"];
    if status["phase"] != old["status"]["phase"] && unset_or_kept && volume["status"].is_object() {
        volume["status"]["lastPhaseTransitionTime"] = now().into();
    }
}

/// The `status` and `approval` strategies' `PrepareForUpdate` of a CSR: a status update keeps
/// the stored Approved and Denied conditions in place of the sent ones when their number is
/// unchanged (`preserveConditionInstances`; adding or removing them is left to validation to
/// refuse); then `populateConditionTimestamps`.
pub fn csr_prepare_for_status_update(resource: &ResourceType, old: &Value, csr: &mut Value, approval: bool) {
    if !is_csr(resource) {
        return;
    }
    if !approval {
        for kind in ["Approved", "Denied"] {
            preserve_condition_instances(old, csr, kind);
        }
    }
    populate_condition_timestamps(old, csr);
}

fn preserve_condition_instances(old: &Value, csr: &mut Value, kind: &str) {
    let of_kind = |o: &Value| -> Vec<usize> {
        let conditions = o["status"]["conditions"].as_array().map(Vec::as_slice).unwrap_or_default();
        conditions.iter().enumerate().filter(|(_, c)| c["type"] == kind).map(|(i, _)| i).collect()
    };
    let (before, after) = (of_kind(old), of_kind(csr));
    if before.len() != after.len() {
        return;
    }
    for (old_index, new_index) in before.into_iter().zip(after) {
        csr["status"]["conditions"][new_index] = old["status"]["conditions"][old_index].clone();
    }
}

/// `populateConditionTimestamps`: conditions get `lastUpdateTime` now, and
/// `lastTransitionTime` from the same condition before, or now.
fn populate_condition_timestamps(old: &Value, csr: &mut Value) {
    let before = old["status"]["conditions"].as_array().cloned().unwrap_or_default();
    let Some(conditions) = csr["status"]["conditions"].as_array_mut() else { return };
    for condition in conditions {
        if condition["lastUpdateTime"].as_str().is_none_or(str::is_empty) {
            condition["lastUpdateTime"] = now().into();
        }
        if condition["lastTransitionTime"].as_str().is_none_or(str::is_empty) {
            let previous = before.iter().find(|c| {
                c["type"] == condition["type"]
                    && c["status"] == condition["status"]
                    && c["lastTransitionTime"].is_string()
            });
            condition["lastTransitionTime"] =
                previous.map_or_else(|| now().into(), |c| c["lastTransitionTime"].clone());
        }
    }
}
