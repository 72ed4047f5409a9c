//! How a field error shows a bad value since Kubernetes v1.34: apimachinery's `field.ErrorBody`
//! writes anything but a number, a boolean or a string as `json.Marshal` writes it (v1.33 wrote
//! Go's `%#v`). The values are internal API types, which have no JSON tags: their fields are
//! named as in Go (`{"Name":"d","NodeID":"n",…}`), in declaration order, every one written (a nil
//! pointer, slice or map as `null`), an embedded struct's fields in its parent's place. Maps come
//! with sorted keys, strings escaped as Go ≥ 1.22 escapes them (`<`, `>`, `&` as `\u003c`, …), byte
//! slices base64-encoded, a `RawExtension` as its raw JSON.
//!
//! [`Schema`]s give the shape of the internal types that validation messages show; values are
//! read from the stored (external) JSON by their JSON names.

use base64::Engine;
use serde_json::Value;

use crate::apimachinery::gojson::string;

/// A value as Go's `encoding/json` writes it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Go {
    Null,
    Bool(bool),
    Number(String),
    Str(String),
    List(Vec<Go>),
    /// A struct or a map, its entries in writing order.
    Object(Vec<(String, Go)>),
    /// Already JSON (a `RawExtension`).
    Raw(String),
}

impl Go {
    /// Compact JSON, as `json.Marshal`.
    pub(super) fn json(&self) -> String {
        let mut out = String::new();
        self.write(&mut out, None, 0);
        out
    }

    /// JSON indented by `indent` per level, as `json.MarshalIndent(v, "", indent)`.
    pub(super) fn pretty(&self, indent: &str) -> String {
        let mut out = String::new();
        self.write(&mut out, Some(indent), 0);
        out
    }

    fn write(&self, out: &mut String, indent: Option<&str>, depth: usize) {
        let newline = |out: &mut String, depth: usize| {
            if let Some(indent) = indent {
                out.push('\n');
                out.push_str(&indent.repeat(depth));
            }
        };
        match self {
            Go::Null => out.push_str("null"),
            Go::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Go::Number(n) => out.push_str(n),
            Go::Str(s) => out.push_str(&string(s)),
            Go::Raw(raw) => out.push_str(raw),
            Go::List(items) if items.is_empty() => out.push_str("[]"),
            Go::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    newline(out, depth + 1);
                    item.write(out, indent, depth + 1);
                }
                newline(out, depth);
                out.push(']');
            }
            Go::Object(entries) if entries.is_empty() => out.push_str("{}"),
            Go::Object(entries) => {
                out.push('{');
                for (i, (key, value)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    newline(out, depth + 1);
                    out.push_str(&string(key));
                    out.push(':');
                    if indent.is_some() {
                        out.push(' ');
                    }
                    value.write(out, indent, depth + 1);
                }
                newline(out, depth);
                out.push('}');
            }
        }
    }
}

/// A JSON value of a type whose fields carry JSON tags, or of a map: objects with sorted keys.
pub(super) fn untyped(value: &Value) -> Go {
    match value {
        Value::Null => Go::Null,
        Value::Bool(b) => Go::Bool(*b),
        Value::Number(n) => Go::Number(n.to_string()),
        Value::String(s) => Go::Str(s.clone()),
        Value::Array(items) => Go::List(items.iter().map(untyped).collect()),
        Value::Object(map) => Go::Object(map.iter().map(|(k, v)| (k.clone(), untyped(v))).collect()),
    }
}

/// How a field's value is written.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
    /// A string, `""` when absent.
    Str,
    /// An integer, `0` when absent.
    Int,
    /// A pointer to a string, a number or a boolean: `null` when absent.
    Ptr,
    /// A slice of scalars or a map of scalars (strings, quantities): `null` when absent.
    Plain,
    /// A nested struct value, written even when absent.
    Struct(&'static Schema),
    /// A pointer to a struct.
    OptStruct(&'static Schema),
    /// A slice of structs.
    List(&'static Schema),
    /// An embedded struct: its fields in the parent's.
    Embedded(&'static Schema),
    /// A `runtime.RawExtension`: its raw JSON, `null` when absent.
    Raw,
}

/// One field: its name when written, where it is in the stored JSON, how it is written, and
/// whether it is left out when empty (a JSON-tagged `omitempty` field).
#[derive(Debug)]
pub(super) struct Field {
    name: &'static str,
    json: &'static str,
    kind: Kind,
    omit_empty: bool,
}

/// A field of an internal type (no JSON tag): named as in Go, always written.
pub(super) const fn go(name: &'static str, json: &'static str, kind: Kind) -> Field {
    Field { name, json, kind, omit_empty: false }
}

/// A JSON-tagged `omitempty` field, named by its tag.
pub(super) const fn tagged(json: &'static str, kind: Kind) -> Field {
    Field { name: json, json, kind, omit_empty: true }
}

/// A struct type's fields in declaration order.
pub(super) type Schema = [Field];

/// `value` (stored JSON) written as the struct `schema` describes.
pub(super) fn structure(value: &Value, schema: &Schema) -> Go {
    let mut entries = Vec::new();
    fill(value, schema, &mut entries);
    Go::Object(entries)
}

fn fill(value: &Value, schema: &Schema, entries: &mut Vec<(String, Go)>) {
    for field in schema {
        let raw = value.get(field.json).unwrap_or(&Value::Null);
        if let Kind::Embedded(inner) = field.kind {
            // Kept in the parent's JSON (inline), or, for an embedded ObjectMeta, under `metadata`.
            fill(if field.json.is_empty() { value } else { raw }, inner, entries);
            continue;
        }
        if field.omit_empty && is_empty(raw) {
            continue;
        }
        entries.push((field.name.to_string(), written(raw, field.kind)));
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => map.is_empty(),
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::Bool(b) => !b,
    }
}

fn written(raw: &Value, kind: Kind) -> Go {
    match (kind, raw) {
        (Kind::Str, Value::Null) => Go::Str(String::new()),
        (Kind::Int, Value::Null) => Go::Number("0".into()),
        (Kind::Struct(schema), _) => structure(raw, schema),
        (Kind::OptStruct(_) | Kind::List(_) | Kind::Raw | Kind::Ptr | Kind::Plain, Value::Null) => Go::Null,
        (Kind::OptStruct(schema), _) => structure(raw, schema),
        (Kind::List(schema), Value::Array(items)) => Go::List(items.iter().map(|i| structure(i, schema)).collect()),
        (Kind::Raw, _) => Go::Raw(raw.to_string()),
        _ => untyped(raw),
    }
}

/// A `[]byte` given as the base64 text the stored JSON holds, `null` when nil.
pub(super) fn bytes(encoded: Option<&str>) -> String {
    match encoded {
        None => "null".into(),
        // Re-encoded, so that the padding and alphabet are Go's.
        Some(text) => match base64::engine::general_purpose::STANDARD.decode(text) {
            Ok(raw) => string(&base64::engine::general_purpose::STANDARD.encode(raw)),
            Err(_) => string(text),
        },
    }
}

// --- Schemas ------------------------------------------------------------------------------------

use Kind::{Embedded, Int, List, OptStruct, Plain, Ptr, Raw, Str, Struct};

/// metav1.LabelSelector (JSON-tagged).
pub(super) static LABEL_SELECTOR: &Schema =
    &[tagged("matchLabels", Plain), tagged("matchExpressions", List(LABEL_SELECTOR_REQUIREMENT))];
static LABEL_SELECTOR_REQUIREMENT: &Schema = &[
    Field { name: "key", json: "key", kind: Str, omit_empty: false },
    Field { name: "operator", json: "operator", kind: Str, omit_empty: false },
    tagged("values", Plain),
];

/// The parts of metav1.ObjectMeta (JSON-tagged) a template's metadata may have.
static TEMPLATE_META: &Schema = &[
    tagged("name", Str),
    tagged("generateName", Str),
    tagged("namespace", Str),
    tagged("labels", Plain),
    tagged("annotations", Plain),
];

/// storage.CSINodeDriver.
pub(super) static CSI_NODE_DRIVER: &Schema = &[
    go("Name", "name", Str),
    go("NodeID", "nodeID", Str),
    go("TopologyKeys", "topologyKeys", Plain),
    go("Allocatable", "allocatable", OptStruct(&[go("Count", "count", Ptr)])),
];

/// storage.VolumeAttachmentSpec (an inline volume spec is shown as stored).
pub(super) static VOLUME_ATTACHMENT_SPEC: &Schema = &[
    go("Attacher", "attacher", Str),
    go(
        "Source",
        "source",
        Struct(&[
            go("PersistentVolumeName", "persistentVolumeName", Ptr),
            go("InlineVolumeSpec", "inlineVolumeSpec", Raw),
        ]),
    ),
    go("NodeName", "nodeName", Str),
];

/// networking.ServiceCIDRSpec.
pub(super) static SERVICE_CIDR_SPEC: &Schema = &[go("CIDRs", "cidrs", Plain)];

/// apps.DeploymentStrategy (its `intstr.IntOrString`s are values: `0` when absent).
pub(super) static DEPLOYMENT_STRATEGY: &Schema = &[
    go("Type", "type", Str),
    go(
        "RollingUpdate",
        "rollingUpdate",
        OptStruct(&[go("MaxUnavailable", "maxUnavailable", Int), go("MaxSurge", "maxSurge", Int)]),
    ),
];

/// apps.DaemonSetUpdateStrategy (the same shape as a Deployment's).
pub(super) static DAEMON_SET_UPDATE_STRATEGY: &Schema = DEPLOYMENT_STRATEGY;

/// apps.RollingUpdateStatefulSetStrategy.
pub(super) static ROLLING_UPDATE_STATEFUL_SET: &Schema =
    &[go("Partition", "partition", Int), go("MaxUnavailable", "maxUnavailable", Ptr)];

/// apps.StatefulSetUpdateStrategy.
pub(super) static STATEFUL_SET_UPDATE_STRATEGY: &Schema =
    &[go("Type", "type", Str), go("RollingUpdate", "rollingUpdate", OptStruct(ROLLING_UPDATE_STATEFUL_SET))];

/// batch.SuccessPolicy.
pub(super) static SUCCESS_POLICY: &Schema = &[go(
    "Rules",
    "rules",
    List(&[go("SucceededIndexes", "succeededIndexes", Ptr), go("SucceededCount", "succeededCount", Ptr)]),
)];

/// batch.PodFailurePolicy.
pub(super) static POD_FAILURE_POLICY: &Schema = &[go(
    "Rules",
    "rules",
    List(&[
        go("Action", "action", Str),
        go(
            "OnExitCodes",
            "onExitCodes",
            OptStruct(&[
                go("ContainerName", "containerName", Ptr),
                go("Operator", "operator", Str),
                go("Values", "values", Plain),
            ]),
        ),
        go("OnPodConditions", "onPodConditions", List(&[go("Type", "type", Str), go("Status", "status", Str)])),
    ]),
)];

/// batch.UncountedTerminatedPods.
pub(super) static UNCOUNTED_TERMINATED_PODS: &Schema =
    &[go("Succeeded", "succeeded", Plain), go("Failed", "failed", Plain)];

/// core.PersistentVolumeClaimSpec.
pub(super) static PERSISTENT_VOLUME_CLAIM_SPEC: &Schema = &[
    go("AccessModes", "accessModes", Plain),
    go("Selector", "selector", OptStruct(LABEL_SELECTOR)),
    go("Resources", "resources", Struct(&[go("Limits", "limits", Plain), go("Requests", "requests", Plain)])),
    go("VolumeName", "volumeName", Str),
    go("StorageClassName", "storageClassName", Ptr),
    go("VolumeMode", "volumeMode", Ptr),
    go(
        "DataSource",
        "dataSource",
        OptStruct(&[go("APIGroup", "apiGroup", Ptr), go("Kind", "kind", Str), go("Name", "name", Str)]),
    ),
    go(
        "DataSourceRef",
        "dataSourceRef",
        OptStruct(&[
            go("APIGroup", "apiGroup", Ptr),
            go("Kind", "kind", Str),
            go("Name", "name", Str),
            go("Namespace", "namespace", Ptr),
        ]),
    ),
    go("VolumeAttributesClassName", "volumeAttributesClassName", Ptr),
];

// resource.k8s.io

static DEVICE_TOLERATION: &Schema = &[
    go("Key", "key", Str),
    go("Operator", "operator", Str),
    go("Value", "value", Str),
    go("Effect", "effect", Str),
    go("TolerationSeconds", "tolerationSeconds", Ptr),
];
static DEVICE_SELECTOR: &Schema = &[go("CEL", "cel", OptStruct(&[go("Expression", "expression", Str)]))];
static CAPACITY_REQUIREMENTS: &Schema = &[go("Requests", "requests", Plain)];
static EXACT_DEVICE_REQUEST: &Schema = &[
    go("DeviceClassName", "deviceClassName", Str),
    go("Selectors", "selectors", List(DEVICE_SELECTOR)),
    go("AllocationMode", "allocationMode", Str),
    go("Count", "count", Int),
    go("AdminAccess", "adminAccess", Ptr),
    go("Tolerations", "tolerations", List(DEVICE_TOLERATION)),
    go("Capacity", "capacity", OptStruct(CAPACITY_REQUIREMENTS)),
];
static DEVICE_SUB_REQUEST: &Schema = &[
    go("Name", "name", Str),
    go("DeviceClassName", "deviceClassName", Str),
    go("Selectors", "selectors", List(DEVICE_SELECTOR)),
    go("AllocationMode", "allocationMode", Str),
    go("Count", "count", Int),
    go("Tolerations", "tolerations", List(DEVICE_TOLERATION)),
    go("Capacity", "capacity", OptStruct(CAPACITY_REQUIREMENTS)),
];
static DEVICE_CONFIGURATION: &Schema =
    &[go("Opaque", "opaque", OptStruct(&[go("Driver", "driver", Str), go("Parameters", "parameters", Raw)]))];
static DEVICE_CLAIM: &Schema = &[
    go(
        "Requests",
        "requests",
        List(&[
            go("Name", "name", Str),
            go("Exactly", "exactly", OptStruct(EXACT_DEVICE_REQUEST)),
            go("FirstAvailable", "firstAvailable", List(DEVICE_SUB_REQUEST)),
        ]),
    ),
    go(
        "Constraints",
        "constraints",
        List(&[
            go("Requests", "requests", Plain),
            go("MatchAttribute", "matchAttribute", Ptr),
            go("DistinctAttribute", "distinctAttribute", Ptr),
        ]),
    ),
    go("Config", "config", List(&[go("Requests", "requests", Plain), go("", "", Embedded(DEVICE_CONFIGURATION))])),
];

/// resource.ResourceClaimSpec.
pub(super) static RESOURCE_CLAIM_SPEC: &Schema = &[go("Devices", "devices", Struct(DEVICE_CLAIM))];

/// resource.ResourceClaimTemplateSpec: an embedded (JSON-tagged) ObjectMeta and the claim spec.
pub(super) static RESOURCE_CLAIM_TEMPLATE_SPEC: &Schema =
    &[go("", "metadata", Embedded(TEMPLATE_META)), go("Spec", "spec", Struct(RESOURCE_CLAIM_SPEC))];

static NODE_SELECTOR_REQUIREMENT: &Schema =
    &[go("Key", "key", Str), go("Operator", "operator", Str), go("Values", "values", Plain)];

/// core.NodeSelectorTerm.
pub(super) static NODE_SELECTOR_TERM: &Schema = &[
    go("MatchExpressions", "matchExpressions", List(NODE_SELECTOR_REQUIREMENT)),
    go("MatchFields", "matchFields", List(NODE_SELECTOR_REQUIREMENT)),
];

/// A slice of structs (`null` when nil).
pub(super) fn list(items: &Value, schema: &'static Schema) -> Go {
    written(items, List(schema))
}

/// resource.AllocationResult.
pub(super) static ALLOCATION_RESULT: &Schema = &[
    go(
        "Devices",
        "devices",
        Struct(&[
            go(
                "Results",
                "results",
                List(&[
                    go("Request", "request", Str),
                    go("Driver", "driver", Str),
                    go("Pool", "pool", Str),
                    go("Device", "device", Str),
                    go("AdminAccess", "adminAccess", Ptr),
                    go("Tolerations", "tolerations", List(DEVICE_TOLERATION)),
                    go("BindingConditions", "bindingConditions", Plain),
                    go("BindingFailureConditions", "bindingFailureConditions", Plain),
                    go("ShareID", "shareID", Ptr),
                    go("ConsumedCapacity", "consumedCapacity", Plain),
                ]),
            ),
            go(
                "Config",
                "config",
                List(&[
                    go("Source", "source", Str),
                    go("Requests", "requests", Plain),
                    go("", "", Embedded(DEVICE_CONFIGURATION)),
                ]),
            ),
        ]),
    ),
    go(
        "NodeSelector",
        "nodeSelector",
        OptStruct(&[go("NodeSelectorTerms", "nodeSelectorTerms", List(NODE_SELECTOR_TERM))]),
    ),
    go("AllocationTimestamp", "allocationTimestamp", Ptr),
];

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn internal_structs_are_written_with_go_names_in_order() {
        let driver = json!({"name": "d.example.dev", "nodeID": "n2", "topologyKeys": ["zone"]});
        assert_eq!(
            structure(&driver, CSI_NODE_DRIVER).json(),
            r#"{"Name":"d.example.dev","NodeID":"n2","TopologyKeys":["zone"],"Allocatable":null}"#
        );
        let template = json!({"metadata": {"labels": {"b": "2", "a": "1"}}, "spec": {"devices": {"config": [
            {"requests": ["g"], "opaque": {"driver": "d", "parameters": {"k": 1}}}]}}});
        assert_eq!(
            structure(&template, RESOURCE_CLAIM_TEMPLATE_SPEC).json(),
            r#"{"labels":{"a":"1","b":"2"},"Spec":{"Devices":{"Requests":null,"Constraints":null,"Config":[{"Requests":["g"],"Opaque":{"Driver":"d","Parameters":{"k":1}}}]}}}"#
        );
    }

    #[test]
    fn tagged_fields_are_left_out_when_empty_and_strings_escaped_as_go_does() {
        let selector = json!({"matchLabels": {"a": "<&>"}, "matchExpressions": []});
        assert_eq!(structure(&selector, LABEL_SELECTOR).json(), r#"{"matchLabels":{"a":"\u003c\u0026\u003e"}}"#);
        // Go ≥ 1.22 (kube-apiserver v1.36's) writes a backspace and a form feed as `\b` and `\f`.
        assert_eq!(untyped(&json!(["\u{8}\u{c}\u{1}"])).json(), r#"["\b\f\u0001"]"#);
        assert_eq!(bytes(Some("aGk=")), "\"aGk=\"");
        assert_eq!(bytes(None), "null");
    }

    #[test]
    fn pretty_json_is_indented_as_marshal_indent() {
        let spec = json!({"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}});
        assert_eq!(
            structure(&spec, PERSISTENT_VOLUME_CLAIM_SPEC).pretty(" "),
            "{\n \"AccessModes\": [\n  \"ReadWriteOnce\"\n ],\n \"Selector\": null,\n \"Resources\": {\n  \"Limits\": null,\n  \"Requests\": {\n   \"storage\": \"1Gi\"\n  }\n },\n \"VolumeName\": \"\",\n \"StorageClassName\": null,\n \"VolumeMode\": null,\n \"DataSource\": null,\n \"DataSourceRef\": null,\n \"VolumeAttributesClassName\": null\n}"
        );
    }
}
