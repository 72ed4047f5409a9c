//! Pod specs wherever they appear: `SetDefaults_Pod`, `SetDefaults_PodSpec` and the nested
//! defaulters `zz_generated.defaults.go` runs on containers, probes and volumes
//! (`pkg/apis/core/v1`), plus the persistent-volume sources shared with PersistentVolumes.

use serde_json::{Value, json};

use super::fields::{
    Field, Lit::Bool, Lit::Int, Lit::Object, Lit::Str, child, child_at, entry, fill, is_empty, is_zero, items, ptr,
    remove, set, str_at, val,
};
use super::image;
use crate::quantity::Quantity;

/// Whether a pod spec belongs to a Pod or to a template: `SetDefaults_Pod` only runs on Pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Owner {
    Pod,
    Template,
}

/// `SetDefaults_PodSpec`.
const POD_SPEC: &[Field] = &[
    val("dnsPolicy", Str("ClusterFirst")),
    val("restartPolicy", Str("Always")),
    ptr("securityContext", Object),
    ptr("terminationGracePeriodSeconds", Int(30)),
    val("schedulerName", Str("default-scheduler")),
];

/// `SetDefaults_Container` (besides the pull policy).
const CONTAINER: &[Field] =
    &[val("terminationMessagePath", Str("/dev/termination-log")), val("terminationMessagePolicy", Str("File"))];

/// `SetDefaults_Probe`.
const PROBE: &[Field] = &[
    val("timeoutSeconds", Int(1)),
    val("periodSeconds", Int(10)),
    val("successThreshold", Int(1)),
    val("failureThreshold", Int(3)),
];

/// `SetDefaults_HTTPGetAction`.
const HTTP_GET: &[Field] = &[val("path", Str("/")), val("scheme", Str("HTTP"))];

/// `SetDefaults_ObjectFieldSelector`.
const FIELD_REF: &[Field] = &[val("apiVersion", Str("v1"))];

/// The `TCP` default of container, service and endpoint ports.
pub(super) const PROTOCOL_TCP: &[Field] = &[val("protocol", Str("TCP"))];

/// `SetDefaults_SecretVolumeSource` / `ConfigMapVolumeSource` / `DownwardAPIVolumeSource` /
/// `ProjectedVolumeSource`: mode 0644.
const DEFAULT_MODE: &[Field] = &[ptr("defaultMode", Int(0o644))];

/// `SetDefaults_PersistentVolumeClaimSpec`.
pub(super) const PVC_SPEC: &[Field] = &[ptr("volumeMode", Str("Filesystem"))];

/// Per-source defaults shared by pod volumes and persistent volumes: (source key, fields).
const PERSISTENT_SOURCES: &[(&str, &[Field])] = &[
    ("hostPath", &[ptr("type", Str(""))]),
    ("iscsi", &[val("iscsiInterface", Str("default"))]),
    ("rbd", &[val("pool", Str("rbd")), val("user", Str("admin")), val("keyring", Str("/etc/ceph/keyring"))]),
    (
        "azureDisk",
        &[
            ptr("cachingMode", Str("ReadWrite")),
            ptr("fsType", Str("ext4")),
            ptr("readOnly", Bool(false)),
            ptr("kind", Str("Shared")),
        ],
    ),
    ("scaleIO", &[val("storageMode", Str("ThinProvisioned")), val("fsType", Str("xfs"))]),
];

/// A Pod: `SetObjectDefaults_Pod`, and on create (no `resourceVersion` yet) the strategy's
/// `mutatePodAffinity` and `mutateTopologySpreadConstraints`.
pub(super) fn pod(object: &mut Value) {
    let creating = object.pointer("/metadata/resourceVersion").is_none_or(is_zero);
    let labels = object.pointer("/metadata/labels").cloned().unwrap_or_default();
    let Some(spec) = entry(object, "spec") else { return };
    pod_spec(spec, Owner::Pod);
    if creating {
        mutate_pod_affinity(spec, &labels);
        mutate_topology_spread_constraints(spec, &labels);
    }
}

/// `mutateTopologySpreadConstraints` (`MatchLabelKeysInPodTopologySpreadSelectorMerge`, on
/// since v1.34): each topology spread constraint's `matchLabelKeys` become `In` requirements on
/// the pod's values of those labels, added to its label selector when it has one.
fn mutate_topology_spread_constraints(spec: &mut Value, labels: &Value) {
    for constraint in items(spec, "topologySpreadConstraints") {
        apply_keys(constraint, labels, &[("matchLabelKeys", "In")]);
    }
}

/// `mutatePodAffinity` (`MatchLabelKeysInPodAffinity`, GA since v1.33): each pod (anti-)affinity
/// term's `matchLabelKeys` and `mismatchLabelKeys` become `In` and `NotIn` requirements on the
/// pod's values of those labels, added to the term's label selector when it has one.
fn mutate_pod_affinity(spec: &mut Value, labels: &Value) {
    for kind in ["podAffinity", "podAntiAffinity"] {
        let Some(affinity) = child_at(spec, &["affinity", kind]) else { continue };
        for term in items(affinity, "requiredDuringSchedulingIgnoredDuringExecution") {
            apply_label_keys(term, labels);
        }
        for weighted in items(affinity, "preferredDuringSchedulingIgnoredDuringExecution") {
            if let Some(term) = child(weighted, "podAffinityTerm") {
                apply_label_keys(term, labels);
            }
        }
    }
}

/// `applyMatchLabelKeysAndMismatchLabelKeys` on one term.
fn apply_label_keys(term: &mut Value, labels: &Value) {
    apply_keys(term, labels, &[("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")]);
}

/// `applyLabelKeysToLabelSelector` for each (key list, operator) of `owner`.
fn apply_keys(owner: &mut Value, labels: &Value, lists: &[(&str, &str)]) {
    let term = owner;
    let mut requirements = Vec::new();
    for &(keys, operator) in lists {
        for key in term.get(keys).and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if let Some(value) = labels.get(key) {
                requirements.push(json!({"key": key, "operator": operator, "values": [value]}));
            }
        }
    }
    if requirements.is_empty() {
        return;
    }
    let Some(selector) = child(term, "labelSelector") else { return };
    if selector.get("matchExpressions").is_none_or(Value::is_null) {
        set(selector, "matchExpressions", json!([]));
    }
    if let Some(expressions) = selector.get_mut("matchExpressions").and_then(Value::as_array_mut) {
        // Merged requirements are not merged twice, so defaulting stays idempotent.
        for requirement in requirements {
            if !expressions.contains(&requirement) {
                expressions.push(requirement);
            }
        }
    }
}

/// A `PodTemplateSpec` (workload templates, PodTemplate's `template`).
pub(super) fn template(template: &mut Value) {
    embedded_metadata(template);
    if let Some(spec) = entry(template, "spec") {
        pod_spec(spec, Owner::Template);
    }
}

/// The wire shape of an embedded `ObjectMeta`: always written (a struct, not `omitempty`), and
/// since v1.34 without a zero `creationTimestamp` (its tag is `omitzero`; v1.33 wrote `null`).
pub(super) fn embedded_metadata(object: &mut Value) {
    if let Some(metadata) = entry(object, "metadata").and_then(Value::as_object_mut)
        && metadata.get("creationTimestamp").is_some_and(Value::is_null)
    {
        metadata.remove("creationTimestamp");
    }
}

/// A pod spec: `SetDefaults_Pod` first for Pods, then `SetDefaults_PodSpec` and the nested
/// defaulters, in `SetObjectDefaults_Pod`'s order.
fn pod_spec(spec: &mut Value, owner: Owner) {
    if owner == Owner::Pod {
        pod_only(spec);
    }
    fill(spec, POD_SPEC);
    service_account_alias(spec);
    resource_list(spec, &["overhead"]);
    resource_list(spec, &["resources", "limits"]);
    resource_list(spec, &["resources", "requests"]);
    for volume in items(spec, "volumes") {
        pod_volume(volume);
    }
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in items(spec, list) {
            self::container(container);
        }
    }
}

/// `SetDefaults_Pod`: requests default to limits, then the pod-level resources
/// (`PodLevelResources`, Beta and on since v1.34), service links are on, and host-network
/// ports get their host port.
fn pod_only(spec: &mut Value) {
    for list in ["containers", "initContainers"] {
        for container in items(spec, list) {
            if let Some(resources) = child(container, "resources") {
                requests_from_limits(resources);
            }
        }
    }
    pod_level_resources(spec);
    fill(spec, &[ptr("enableServiceLinks", Bool(true))]);
    if spec.get("hostNetwork") == Some(&Value::Bool(true)) {
        for list in ["containers", "initContainers"] {
            for port in items(spec, list).flat_map(|c| items(c, "ports")) {
                let container_port = port.get("containerPort").filter(|p| !is_zero(p)).cloned();
                if let Some(container_port) = container_port
                    && port.get("hostPort").is_none_or(is_zero)
                {
                    set(port, "hostPort", container_port);
                }
            }
        }
    }
}

/// `defaultHugePagePodLimits` then `defaultPodRequests`, for a pod whose `spec.resources` says
/// something: a hugepages size the containers limit gets their total as the pod's limit (unless
/// the pod requests it); CPU and memory the containers request get their effective total as
/// the pod's request; a pod-level limit (CPU, memory, hugepages) is the request of what is
/// still not requested.
fn pod_level_resources(spec: &mut Value) {
    use crate::sandbox::admission::resource_list::aggregate_containers;
    let Some(resources) = child(spec, "resources").cloned() else { return };
    let pod = serde_json::json!({"spec": spec.clone()});
    let is_hugepages = |name: &str| name.starts_with("hugepages-");
    let supported = |name: &str| matches!(name, "cpu" | "memory") || is_hugepages(name);
    let mut limits = resources["limits"].as_object().cloned().unwrap_or_default();
    let requests_given = resources["requests"].as_object().cloned().unwrap_or_default();
    if !limits.is_empty() || !requests_given.is_empty() {
        for (name, total) in aggregate_containers(&pod, "limits") {
            if is_hugepages(&name) && !requests_given.contains_key(&name) && !limits.contains_key(&name) {
                limits.insert(name, total.canonical().into());
            }
        }
        if !limits.is_empty() {
            spec["resources"]["limits"] = Value::Object(limits.clone());
        }
    }
    if limits.is_empty() {
        return;
    }
    let mut requests = requests_given;
    for (name, total) in aggregate_containers(&pod, "requests") {
        if matches!(name.as_str(), "cpu" | "memory") && !requests.contains_key(&name) {
            requests.insert(name, total.canonical().into());
        }
    }
    for (name, limit) in &limits {
        if supported(name) && !requests.contains_key(name) {
            requests.insert(name.clone(), limit.clone());
        }
    }
    if !requests.is_empty() {
        spec["resources"]["requests"] = Value::Object(requests);
    }
}

/// The v1 conversion of `serviceAccount`, the deprecated alias of `serviceAccountName`: it fills
/// an empty `serviceAccountName` on the way in and always mirrors it on the way out.
fn service_account_alias(spec: &mut Value) {
    if is_empty(spec, "serviceAccountName") && !is_empty(spec, "serviceAccount") {
        let alias = spec.get("serviceAccount").cloned().unwrap_or_default();
        set(spec, "serviceAccountName", alias);
    }
    match spec.get("serviceAccountName").filter(|name| !is_zero(name)).cloned() {
        Some(name) => set(spec, "serviceAccount", name),
        None => remove(spec, "serviceAccount"),
    }
}

/// `SetDefaults_ResourceList` on the resource list at `path`: each value rounds up to
/// milli-units (`RoundUp(-3)`) and is written back in canonical form, as kube-apiserver
/// re-serializes it (`0.5` becomes `500m`, `1n` becomes `1m`). Pod-template hashes depend on
/// the stored values.
fn resource_list(object: &mut Value, path: &[&str]) {
    let Some(list) = path.iter().try_fold(object, |v, key| v.get_mut(*key)).and_then(Value::as_object_mut) else {
        return;
    };
    for value in list.values_mut() {
        let Some(quantity) = Quantity::from_json(value) else { continue };
        let rounded = match i64::try_from(quantity.milli_value()) {
            Ok(millis) => Quantity::from_millis(millis, quantity.format()),
            Err(_) => quantity,
        };
        *value = Value::String(rounded.canonical());
    }
}

/// Copies each limit that has no request into `requests`.
fn requests_from_limits(resources: &mut Value) {
    let Some(limits) = resources.get("limits").and_then(Value::as_object).filter(|l| !l.is_empty()).cloned() else {
        return;
    };
    let Some(requests) = entry(resources, "requests").and_then(Value::as_object_mut) else { return };
    for (name, quantity) in limits {
        requests.entry(name).or_insert(quantity);
    }
}

/// A container (regular, init or ephemeral) with its ports, env, probes and lifecycle hooks.
fn container(container: &mut Value) {
    if container.get("imagePullPolicy").is_none_or(is_zero) {
        let policy = image::pull_policy(str_at(container, "image"));
        set(container, "imagePullPolicy", Value::from(policy));
    }
    fill(container, CONTAINER);
    for port in items(container, "ports") {
        fill(port, PROTOCOL_TCP);
    }
    for env in items(container, "env") {
        if let Some(field_ref) = child_at(env, &["valueFrom", "fieldRef"]) {
            fill(field_ref, FIELD_REF);
        }
        // A file key reference is required unless said otherwise (EnvFiles, on since v1.35).
        if let Some(file_key_ref) = child_at(env, &["valueFrom", "fileKeyRef"]) {
            fill(file_key_ref, &[ptr("optional", Bool(false))]);
        }
    }
    for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
        if let Some(probe) = child(container, probe) {
            self::probe(probe);
        }
    }
    for hook in ["postStart", "preStop"] {
        if let Some(http_get) = child_at(container, &["lifecycle", hook, "httpGet"]) {
            fill(http_get, HTTP_GET);
        }
    }
    resource_list(container, &["resources", "limits"]);
    resource_list(container, &["resources", "requests"]);
    // Wire shape: `resources` is a struct value, so Go always writes it (`resources: {}`).
    entry(container, "resources");
}

/// `SetDefaults_Probe` with its handler: `httpGet` path and scheme, `grpc.service` `""`.
fn probe(probe: &mut Value) {
    fill(probe, PROBE);
    if let Some(http_get) = child(probe, "httpGet") {
        fill(http_get, HTTP_GET);
    }
    if let Some(grpc) = child(probe, "grpc") {
        fill(grpc, &[ptr("service", Str(""))]);
    }
}

/// A pod volume: `SetDefaults_Volume` (no source means an `emptyDir`; an image volume's pull
/// policy as a container's, `ImageVolume` being GA in v1.36) and the per-source defaulters.
fn pod_volume(volume: &mut Value) {
    let Some(map) = volume.as_object_mut() else { return };
    if !map.iter().any(|(key, value)| key != "name" && !value.is_null()) {
        map.insert("emptyDir".into(), Value::Object(Default::default()));
    }
    if let Some(image) = child(volume, "image")
        && image.get("pullPolicy").is_none_or(is_zero)
    {
        let policy = image::pull_policy(str_at(image, "reference"));
        set(image, "pullPolicy", Value::from(policy));
    }
    for source in ["secret", "configMap", "downwardAPI", "projected"] {
        if let Some(source) = child(volume, source) {
            fill(source, DEFAULT_MODE);
        }
    }
    if let Some(downward_api) = child(volume, "downwardAPI") {
        downward_api_items(downward_api);
    }
    if let Some(projected) = child(volume, "projected") {
        for source in items(projected, "sources") {
            if let Some(downward_api) = child(source, "downwardAPI") {
                downward_api_items(downward_api);
            }
            if let Some(token) = child(source, "serviceAccountToken") {
                fill(token, &[ptr("expirationSeconds", Int(3600))]);
            }
        }
    }
    if let Some(claim) = child_at(volume, &["ephemeral", "volumeClaimTemplate"]) {
        embedded_metadata(claim);
        if let Some(spec) = child(claim, "spec") {
            fill(spec, PVC_SPEC);
            resource_list(spec, &["resources", "limits"]);
            resource_list(spec, &["resources", "requests"]);
        }
    }
    persistent_sources(volume);
}

/// `fieldRef.apiVersion` of downward-API items.
fn downward_api_items(downward_api: &mut Value) {
    for item in items(downward_api, "items") {
        if let Some(field_ref) = child(item, "fieldRef") {
            fill(field_ref, FIELD_REF);
        }
    }
}

/// `SetDefaults_HostPathVolumeSource`, `ISCSI…`, `RBD…`, `AzureDisk…` and `ScaleIO…` on the
/// sources of a volume or a persistent volume spec.
pub(super) fn persistent_sources(volume: &mut Value) {
    for (key, fields) in PERSISTENT_SOURCES {
        if let Some(source) = child(volume, key) {
            fill(source, fields);
        }
    }
}

/// `SetDefaults_PersistentVolumeClaim` + `…ClaimSpec` on a claim (StatefulSet templates,
/// PersistentVolumeClaims): `Filesystem` mode and a `Pending` phase.
pub(super) fn claim(claim: &mut Value) {
    if let Some(spec) = entry(claim, "spec") {
        fill(spec, PVC_SPEC);
    }
    if let Some(status) = entry(claim, "status") {
        fill(status, &[val("phase", Str("Pending"))]);
    }
}
