//! Field selectors (`?fieldSelector=`), parsed, validated and applied the way kube-apiserver
//! v1.36 does: `k8s.io/apimachinery/pkg/fields/selector.go` for the grammar, then the two layers
//! kube-apiserver applies per kind: the field label conversion funcs registered in
//! `pkg/apis/<group>/<version>/conversion.go` decide which labels a request may use (and rename
//! aliases), and the registries' `ToSelectableFields` decide what each label reads from the
//! object. The two lists differ: pods accept `status.podIPs` but never project it, so it reads
//! as empty; `apps/v1` registers no conversion at all, so ReplicaSets take `metadata.*` only.
//!
//! Label selectors are [`crate::apimachinery::labels`]'.

use serde_json::Value;

use crate::apimachinery::strconv::quote;
use crate::sandbox::storage::resources::ResourceType;

/// A field selector, validated for one resource: every term must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

/// `label=value` or `label!=value`, with the label resolved to what it reads from an object.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FieldTerm {
    projection: Projection,
    value: String,
    negated: bool,
}

/// How a selectable field's value is read from the stored JSON, mirroring the registry's
/// `ToSelectableFields`, which reads the typed object: absent integers read `0`, absent
/// booleans `false`, absent strings the empty string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Projection {
    Text(&'static [&'static str]),
    Flag(&'static [&'static str]),
    Count(&'static [&'static str]),
    /// `status.podIPs[0].ip`, or the legacy `status.podIP`.
    PodIp,
    /// Accepted by the conversion but never projected: always the empty string.
    Unprojected,
    /// An Event field, at its core/v1 path or its events.k8s.io path depending on the object's
    /// `apiVersion` (both groups read the same storage).
    Event {
        core: &'static [&'static str],
        events: &'static [&'static str],
    },
    /// An Event's `source.component`, falling back to the reporting controller.
    EventSource,
}

/// What a kind's conversion func answers for a label it does not take.
#[derive(Debug, Clone, Copy)]
enum Rejection {
    /// `field label not supported: <label>` (most registered kinds).
    NotSupported,
    /// `field label "<label>" not supported for <kind>` (batch/v1 Job).
    NotSupportedForKind(&'static str),
    /// `field label not supported for <group/version, Kind=kind>: <label>` (resource.k8s.io/v1
    /// ResourceSlice).
    NotSupportedForGvk(&'static str),
    /// `runtime.DefaultMetaV1FieldSelectorConversion`, for kinds with no registered func.
    MetadataOnly,
}

/// Why a `fieldSelector` was refused, in `fields.ParseSelector`'s and the field label
/// conversions' words (a 400 BadRequest).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A term without an operator.
    #[error("invalid selector: '{selector}'; can't understand '{term}'")]
    Syntax {
        /// The whole selector.
        selector: String,
        /// The term.
        term: String,
    },
    /// A backslash before anything but `\\`, `,`, `=` (or at the end: empty).
    #[error("invalid field selector: invalid escape sequence: \\{0}")]
    InvalidEscape(String),
    /// A bare `,` or `=` in a value (upstream formats the rune with %v: its code point).
    #[error("invalid field selector: unescaped character in value: {}", *.0 as u32)]
    Unescaped(char),
    /// `field label not supported: <label>` (most registered kinds).
    #[error("field label not supported: {0}")]
    LabelNotSupported(String),
    /// `field label "<label>" not supported for <kind>` (batch/v1 Job).
    #[error("field label {} not supported for {kind}", quote(.label))]
    LabelNotSupportedForKind {
        /// The label.
        label: String,
        /// The kind.
        kind: &'static str,
    },
    /// `field label not supported for <gvk>: <label>`.
    #[error("field label not supported for {gvk}: {label}")]
    LabelNotSupportedForGvk {
        /// The label.
        label: String,
        /// The group, version and kind.
        gvk: &'static str,
    },
    /// Kinds with no registered conversion: only the metadata labels.
    #[error("{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"", quote(.0))]
    NotKnown(String),
}

/// A kind's accepted labels (aliases included) and what each reads.
struct FieldRules {
    fields: &'static [(&'static str, Projection)],
    rejection: Rejection,
}

impl FieldSelector {
    /// Selects every object.
    pub fn everything() -> FieldSelector {
        FieldSelector { terms: Vec::new() }
    }

    /// Parses `?fieldSelector=` for a resource, as `fields.ParseSelector` followed by the kind's
    /// field label conversion: syntax errors first, then the first unsupported label in sorted
    /// term order. The empty string selects everything.
    pub fn parse(text: &str, resource: &ResourceType) -> Result<FieldSelector, Error> {
        let raw_terms = parse_field_terms(text)?;
        let rules = field_rules(resource);
        let terms = raw_terms.into_iter().map(|term| rules.resolve(term)).collect::<Result<_, _>>()?;
        Ok(FieldSelector { terms })
    }

    /// Whether the selector restricts nothing.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }

    /// Whether an object satisfies every term.
    pub fn matches(&self, object: &Value) -> bool {
        self.terms.iter().all(|term| (term.projection.read(object) == term.value) != term.negated)
    }
}

/// A term before its label is checked against the kind.
struct RawTerm {
    label: String,
    value: String,
    negated: bool,
}

impl FieldRules {
    fn resolve(&self, term: RawTerm) -> Result<FieldTerm, Error> {
        let Some(&(_, projection)) = self.fields.iter().find(|(label, _)| *label == term.label) else {
            return Err(self.rejection.message(&term.label));
        };
        Ok(FieldTerm { projection, value: term.value, negated: term.negated })
    }
}

impl Rejection {
    fn message(self, label: &str) -> Error {
        let label = label.to_string();
        match self {
            Rejection::NotSupported => Error::LabelNotSupported(label),
            Rejection::NotSupportedForKind(kind) => Error::LabelNotSupportedForKind { label, kind },
            Rejection::NotSupportedForGvk(gvk) => Error::LabelNotSupportedForGvk { label, gvk },
            Rejection::MetadataOnly => Error::NotKnown(label),
        }
    }
}

impl Projection {
    fn read(self, object: &Value) -> String {
        match self {
            Projection::Text(path) => text_at(object, path),
            Projection::Flag(path) => lookup(object, path).and_then(Value::as_bool).unwrap_or(false).to_string(),
            Projection::Count(path) => lookup(object, path).and_then(Value::as_i64).unwrap_or(0).to_string(),
            Projection::PodIp => match object.pointer("/status/podIPs/0/ip").and_then(Value::as_str) {
                Some(ip) => ip.to_string(),
                None => text_at(object, &["status", "podIP"]),
            },
            Projection::Unprojected => String::new(),
            Projection::Event { core, events } => text_at(object, if is_events_group(object) { events } else { core }),
            Projection::EventSource => event_source(object),
        }
    }
}

fn lookup<'a>(object: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(object, |value, key| value.get(key))
}

fn text_at(object: &Value, path: &[&str]) -> String {
    lookup(object, path).and_then(Value::as_str).unwrap_or_default().to_string()
}

/// Whether an Event object is in its events.k8s.io shape rather than core/v1's.
fn is_events_group(object: &Value) -> bool {
    object.get("apiVersion").and_then(Value::as_str).is_some_and(|v| v.starts_with("events.k8s.io/"))
}

/// `source`: the source component, or else the reporting controller.
fn event_source(object: &Value) -> String {
    let (component, controller) = if is_events_group(object) {
        (text_at(object, &["deprecatedSource", "component"]), text_at(object, &["reportingController"]))
    } else {
        (text_at(object, &["source", "component"]), text_at(object, &["reportingComponent"]))
    };
    if component.is_empty() { controller } else { component }
}

/// Splits on unescaped commas, sorts (as upstream), and parses each non-empty term.
fn parse_field_terms(text: &str) -> Result<Vec<RawTerm>, Error> {
    let mut parts = split_terms(text);
    parts.sort_unstable();
    parts.into_iter().filter(|part| !part.is_empty()).map(|part| parse_field_term(text, part)).collect()
}

fn parse_field_term(selector: &str, part: &str) -> Result<RawTerm, Error> {
    let Some((label, operator, value)) = split_term(part) else {
        return Err(Error::Syntax { selector: selector.to_string(), term: part.to_string() });
    };
    Ok(RawTerm { label: label.to_string(), value: unescape_value(value)?, negated: operator == "!=" })
}

/// Comma-separated terms; a backslash-escaped comma stays in its term, backslash included.
fn split_terms(text: &str) -> Vec<&str> {
    if text.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            terms.push(&text[start..i]);
            start = i + 1;
        }
    }
    terms.push(&text[start..]);
    terms
}

/// The first `!=`, `==` or `=` splits a term; the label cannot be escaped.
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    for (i, _) in term.char_indices() {
        let rest = &term[i..];
        for operator in ["!=", "==", "="] {
            if let Some(value) = rest.strip_prefix(operator) {
                return Some((&term[..i], operator, value));
            }
        }
    }
    None
}

/// `UnescapeValue`: `\\`, `\,` and `\=` are the only escapes; a bare `,` or `=` is an error.
fn unescape_value(value: &str) -> Result<String, Error> {
    let mut unescaped = String::with_capacity(value.len());
    let mut escaped = false;
    for c in value.chars() {
        if escaped {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(Error::InvalidEscape(c.to_string()));
            }
            unescaped.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' || c == '=' {
            // Upstream formats the rune with %v: its code point in decimal.
            return Err(Error::Unescaped(c));
        } else {
            unescaped.push(c);
        }
    }
    if escaped {
        return Err(Error::InvalidEscape(String::new()));
    }
    Ok(unescaped)
}

// --- Per-kind tables ----------------------------------------------------------------------------

const NAME: (&str, Projection) = ("metadata.name", Projection::Text(&["metadata", "name"]));
const NAMESPACE: (&str, Projection) = ("metadata.namespace", Projection::Text(&["metadata", "namespace"]));

/// Kinds with no registered conversion (every resource not listed in [`field_rules`]).
static DEFAULT_RULES: FieldRules = FieldRules { fields: &[NAME, NAMESPACE], rejection: Rejection::MetadataOnly };

static POD_RULES: FieldRules = FieldRules {
    fields: &[
        NAME,
        NAMESPACE,
        ("spec.nodeName", Projection::Text(&["spec", "nodeName"])),
        ("spec.restartPolicy", Projection::Text(&["spec", "restartPolicy"])),
        ("spec.schedulerName", Projection::Text(&["spec", "schedulerName"])),
        ("spec.serviceAccountName", Projection::Text(&["spec", "serviceAccountName"])),
        ("spec.hostNetwork", Projection::Flag(&["spec", "hostNetwork"])),
        ("status.phase", Projection::Text(&["status", "phase"])),
        ("status.podIP", Projection::PodIp),
        ("status.podIPs", Projection::Unprojected),
        ("status.nominatedNodeName", Projection::Text(&["status", "nominatedNodeName"])),
        // Old v1 clients' name for spec.nodeName.
        ("spec.host", Projection::Text(&["spec", "nodeName"])),
    ],
    rejection: Rejection::NotSupported,
};

static NODE_RULES: FieldRules = FieldRules {
    fields: &[NAME, ("spec.unschedulable", Projection::Flag(&["spec", "unschedulable"]))],
    rejection: Rejection::NotSupported,
};

static NAMESPACE_RULES: FieldRules = FieldRules {
    fields: &[NAME, ("status.phase", Projection::Text(&["status", "phase"]))],
    rejection: Rejection::NotSupported,
};

static SECRET_RULES: FieldRules = FieldRules {
    fields: &[NAME, NAMESPACE, ("type", Projection::Text(&["type"]))],
    rejection: Rejection::NotSupported,
};

static SERVICE_RULES: FieldRules = FieldRules {
    fields: &[
        NAME,
        NAMESPACE,
        ("spec.clusterIP", Projection::Text(&["spec", "clusterIP"])),
        ("spec.type", Projection::Text(&["spec", "type"])),
    ],
    rejection: Rejection::NotSupported,
};

static REPLICATION_CONTROLLER_RULES: FieldRules = FieldRules {
    fields: &[NAME, NAMESPACE, ("status.replicas", Projection::Count(&["status", "replicas"]))],
    rejection: Rejection::NotSupported,
};

static JOB_RULES: FieldRules = FieldRules {
    fields: &[NAME, NAMESPACE, ("status.successful", Projection::Count(&["status", "succeeded"]))],
    rejection: Rejection::NotSupportedForKind("Job"),
};

/// `resourceSlice` `toSelectableFields`: an unset node name reads as empty.
static RESOURCE_SLICE_RULES: FieldRules = FieldRules {
    fields: &[
        NAME,
        ("spec.nodeName", Projection::Text(&["spec", "nodeName"])),
        ("spec.driver", Projection::Text(&["spec", "driver"])),
    ],
    rejection: Rejection::NotSupportedForGvk("resource.k8s.io/v1, Kind=ResourceSlice"),
};

static CSR_RULES: FieldRules = FieldRules {
    fields: &[NAME, ("spec.signerName", Projection::Text(&["spec", "signerName"]))],
    rejection: Rejection::NotSupported,
};

const fn event(core: &'static [&'static str], events: &'static [&'static str]) -> Projection {
    Projection::Event { core, events }
}

const INVOLVED_KIND: Projection = event(&["involvedObject", "kind"], &["regarding", "kind"]);
const INVOLVED_NAMESPACE: Projection = event(&["involvedObject", "namespace"], &["regarding", "namespace"]);
const INVOLVED_NAME: Projection = event(&["involvedObject", "name"], &["regarding", "name"]);
const INVOLVED_UID: Projection = event(&["involvedObject", "uid"], &["regarding", "uid"]);
const INVOLVED_API_VERSION: Projection = event(&["involvedObject", "apiVersion"], &["regarding", "apiVersion"]);
const INVOLVED_RESOURCE_VERSION: Projection =
    event(&["involvedObject", "resourceVersion"], &["regarding", "resourceVersion"]);
const INVOLVED_FIELD_PATH: Projection = event(&["involvedObject", "fieldPath"], &["regarding", "fieldPath"]);
const REASON: Projection = event(&["reason"], &["reason"]);
const REPORTING: Projection = event(&["reportingComponent"], &["reportingController"]);
const TYPE: Projection = event(&["type"], &["type"]);

/// core/v1 Events.
static EVENT_RULES: FieldRules = FieldRules {
    fields: &[
        ("involvedObject.kind", INVOLVED_KIND),
        ("involvedObject.namespace", INVOLVED_NAMESPACE),
        ("involvedObject.name", INVOLVED_NAME),
        ("involvedObject.uid", INVOLVED_UID),
        ("involvedObject.apiVersion", INVOLVED_API_VERSION),
        ("involvedObject.resourceVersion", INVOLVED_RESOURCE_VERSION),
        ("involvedObject.fieldPath", INVOLVED_FIELD_PATH),
        ("reason", REASON),
        ("reportingComponent", REPORTING),
        ("source", Projection::EventSource),
        ("type", TYPE),
        NAMESPACE,
        NAME,
    ],
    rejection: Rejection::NotSupported,
};

/// events.k8s.io/v1 Events: its own field names, mapped onto the core ones (which it rejects).
static EVENTS_GROUP_RULES: FieldRules = FieldRules {
    fields: &[
        ("reason", REASON),
        ("regarding.kind", INVOLVED_KIND),
        ("regarding.namespace", INVOLVED_NAMESPACE),
        ("regarding.name", INVOLVED_NAME),
        ("regarding.uid", INVOLVED_UID),
        ("regarding.apiVersion", INVOLVED_API_VERSION),
        ("regarding.resourceVersion", INVOLVED_RESOURCE_VERSION),
        ("regarding.fieldPath", INVOLVED_FIELD_PATH),
        ("reportingController", REPORTING),
        ("source", Projection::EventSource),
        ("type", TYPE),
        NAMESPACE,
        NAME,
    ],
    rejection: Rejection::NotSupported,
};

/// The field label rules of a resource's kind (upstream keys them by group/version/kind).
fn field_rules(resource: &ResourceType) -> &'static FieldRules {
    match (resource.group, resource.kind) {
        ("", "Pod") => &POD_RULES,
        ("", "Node") => &NODE_RULES,
        ("", "Namespace") => &NAMESPACE_RULES,
        ("", "Secret") => &SECRET_RULES,
        ("", "Service") => &SERVICE_RULES,
        ("", "ReplicationController") => &REPLICATION_CONTROLLER_RULES,
        ("", "Event") => &EVENT_RULES,
        ("events.k8s.io", "Event") => &EVENTS_GROUP_RULES,
        ("batch", "Job") => &JOB_RULES,
        ("certificates.k8s.io", "CertificateSigningRequest") => &CSR_RULES,
        ("resource.k8s.io", "ResourceSlice") => &RESOURCE_SLICE_RULES,
        _ => &DEFAULT_RULES,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::sandbox::storage::resources;

    // --- field selectors ---

    fn resource(group: &str, version: &str, plural: &str) -> &'static ResourceType {
        resources::find(group, version, plural).expect("resource is served")
    }

    fn pods() -> &'static ResourceType {
        resource("", "v1", "pods")
    }

    fn field(text: &str, on: &ResourceType) -> FieldSelector {
        FieldSelector::parse(text, on).expect("field selector parses")
    }

    fn field_error(text: &str, on: &ResourceType) -> String {
        FieldSelector::parse(text, on).expect_err("field selector is invalid").to_string()
    }

    #[test]
    fn resource_slices_select_by_node_and_driver() {
        let slices = resource("resource.k8s.io", "v1", "resourceslices");
        let on_node = json!({"metadata": {"name": "s"}, "spec": {"nodeName": "n1", "driver": "d.example.com"}});
        let everywhere = json!({"metadata": {"name": "t"}, "spec": {"allNodes": true, "driver": "d.example.com"}});
        assert!(field("spec.nodeName=n1,spec.driver=d.example.com", slices).matches(&on_node));
        assert!(field("spec.nodeName=", slices).matches(&everywhere));
        assert!(!field("spec.nodeName=n1", slices).matches(&everywhere));
        assert_eq!(
            field_error("spec.pool=p", slices),
            "field label not supported for resource.k8s.io/v1, Kind=ResourceSlice: spec.pool"
        );
    }

    #[test]
    fn field_operators() {
        let pod = json!({"metadata": {"name": "a", "namespace": "ns"}});
        for text in ["metadata.name=a", "metadata.name==a", "metadata.name!=b", "metadata.name=a,metadata.namespace=ns"]
        {
            assert!(field(text, pods()).matches(&pod), "{text}");
        }
        for text in ["metadata.name=b", "metadata.name!=a", "metadata.name=a,metadata.namespace!=ns"] {
            assert!(!field(text, pods()).matches(&pod), "{text}");
        }
    }

    #[test]
    fn empty_field_selector_matches_everything() {
        for text in ["", ",", ",,"] {
            let selector = field(text, pods());
            assert!(selector.is_empty());
            assert!(selector.matches(&json!({})));
        }
        assert!(FieldSelector::everything().matches(&json!({})));
    }

    #[test]
    fn field_value_escaping() {
        let secret = resource("", "v1", "secrets");
        let object = json!({"type": "a,b=c\\d"});
        assert!(field("type=a\\,b\\=c\\\\d", secret).matches(&object));
        assert!(field("type!=a\\,b", secret).matches(&object));
        // An escaped comma does not split the selector; an unescaped one does.
        assert!(!field("type=a\\,b", secret).matches(&object));
        assert_eq!(field_error("type=a,b", secret), "invalid selector: 'type=a,b'; can't understand 'b'");
    }

    #[test]
    fn field_syntax_errors() {
        assert_eq!(
            field_error("metadata.name", pods()),
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'"
        );
        assert_eq!(
            field_error("metadata.name=a=b", pods()),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            field_error("metadata.name=!=b", pods()),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(field_error("metadata.name=a\\!", pods()), "invalid field selector: invalid escape sequence: \\!");
        assert_eq!(field_error("metadata.name=a\\", pods()), "invalid field selector: invalid escape sequence: \\");
        // Syntax is checked for every term before any label is.
        assert_eq!(field_error("zzz=1,bad", pods()), "invalid selector: 'zzz=1,bad'; can't understand 'bad'");
        // Labels are checked in sorted term order.
        assert_eq!(field_error("z=1,b=2", pods()), "field label not supported: b");
        // No whitespace trimming: the label is taken as written.
        assert_eq!(field_error("metadata.name = a", pods()), "field label not supported: metadata.name ");
    }

    #[test]
    fn unsupported_field_messages() {
        assert_eq!(field_error("spec.foo=a", pods()), "field label not supported: spec.foo");
        assert_eq!(
            field_error("status.replicas=1", resource("apps", "v1", "replicasets")),
            "\"status.replicas\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        assert_eq!(
            field_error("spec.suspend=true", resource("batch", "v1", "jobs")),
            "field label \"spec.suspend\" not supported for Job"
        );
        assert_eq!(
            field_error("metadata.namespace=a", resource("", "v1", "nodes")),
            "field label not supported: metadata.namespace"
        );
        assert_eq!(
            field_error("metadata.namespace=a", resource("", "v1", "namespaces")),
            "field label not supported: metadata.namespace"
        );
        assert_eq!(
            field_error("metadata.namespace=a", resource("certificates.k8s.io", "v1", "certificatesigningrequests")),
            "field label not supported: metadata.namespace"
        );
        assert_eq!(
            field_error("secrets=a", resource("", "v1", "serviceaccounts")),
            "\"secrets\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
    }

    #[test]
    fn metadata_fields_on_kinds_without_conversions() {
        let configmaps = resource("", "v1", "configmaps");
        let object = json!({"metadata": {"name": "cm", "namespace": "ns"}});
        assert!(field("metadata.name=cm,metadata.namespace=ns", configmaps).matches(&object));
        // Cluster-scoped kinds without a conversion accept metadata.namespace; it reads as empty.
        let volumes = resource("", "v1", "persistentvolumes");
        let volume = json!({"metadata": {"name": "pv"}});
        assert!(field("metadata.namespace=", volumes).matches(&volume));
        assert!(!field("metadata.namespace=ns", volumes).matches(&volume));
    }

    #[test]
    fn pod_fields() {
        let pod = json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"nodeName": "n1", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                     "serviceAccountName": "sa", "hostNetwork": true},
            "status": {"phase": "Running", "podIP": "10.0.0.1", "podIPs": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}],
                       "nominatedNodeName": "n2"},
        });
        let selector = "spec.nodeName=n1,spec.restartPolicy=Always,spec.schedulerName=default-scheduler,\
            spec.serviceAccountName=sa,spec.hostNetwork=true,status.phase=Running,status.podIP=10.0.0.1,\
            status.nominatedNodeName=n2,spec.host=n1,metadata.name=p,metadata.namespace=ns";
        assert!(field(selector, pods()).matches(&pod));
        // status.podIPs is accepted but never projected.
        assert!(field("status.podIPs=", pods()).matches(&pod));
        assert!(!field("status.podIPs=10.0.0.1", pods()).matches(&pod));
    }

    #[test]
    fn pod_field_defaults() {
        let pending = json!({"metadata": {"name": "p"}, "spec": {}, "status": {"podIP": "10.0.0.2"}});
        assert!(field("spec.nodeName=", pods()).matches(&pending));
        assert!(field("spec.host=", pods()).matches(&pending));
        assert!(field("spec.hostNetwork=false", pods()).matches(&pending));
        assert!(field("status.podIP=10.0.0.2", pods()).matches(&pending));
        assert!(field("status.phase=", pods()).matches(&json!({})));
        let scheduled = json!({"spec": {"nodeName": "n1"}});
        assert!(!field("spec.nodeName=", pods()).matches(&scheduled));
    }

    #[test]
    fn node_namespace_secret_service_fields() {
        let nodes = resource("", "v1", "nodes");
        assert!(field("spec.unschedulable=true", nodes).matches(&json!({"spec": {"unschedulable": true}})));
        assert!(field("spec.unschedulable=false,metadata.name=n", nodes).matches(&json!({"metadata": {"name": "n"}})));
        let namespaces = resource("", "v1", "namespaces");
        assert!(field("status.phase=Terminating", namespaces).matches(&json!({"status": {"phase": "Terminating"}})));
        let secrets = resource("", "v1", "secrets");
        let token = json!({"type": "kubernetes.io/service-account-token"});
        assert!(field("type=kubernetes.io/service-account-token", secrets).matches(&token));
        let services = resource("", "v1", "services");
        let headless = json!({"spec": {"clusterIP": "None", "type": "ClusterIP"}});
        assert!(field("spec.clusterIP=None,spec.type=ClusterIP", services).matches(&headless));
        assert!(!field("spec.clusterIP!=None", services).matches(&headless));
    }

    #[test]
    fn count_fields() {
        let controllers = resource("", "v1", "replicationcontrollers");
        assert!(field("status.replicas=3", controllers).matches(&json!({"status": {"replicas": 3}})));
        assert!(field("status.replicas=0", controllers).matches(&json!({"status": {}})));
        let jobs = resource("batch", "v1", "jobs");
        assert!(field("status.successful=2", jobs).matches(&json!({"status": {"succeeded": 2}})));
        assert!(field("status.successful=0", jobs).matches(&json!({})));
    }

    #[test]
    fn csr_fields() {
        let csrs = resource("certificates.k8s.io", "v1", "certificatesigningrequests");
        let csr = json!({"metadata": {"name": "c"}, "spec": {"signerName": "kubernetes.io/kubelet-serving"}});
        assert!(field("spec.signerName=kubernetes.io/kubelet-serving,metadata.name=c", csrs).matches(&csr));
    }

    #[test]
    fn core_event_fields() {
        let events = resource("", "v1", "events");
        let event = json!({
            "apiVersion": "v1",
            "metadata": {"name": "e", "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u1", "apiVersion": "v1",
                               "resourceVersion": "7", "fieldPath": "spec.containers{c}"},
            "reason": "Scheduled", "reportingComponent": "default-scheduler", "type": "Normal",
        });
        let selector = "involvedObject.kind=Pod,involvedObject.namespace=ns,involvedObject.name=p,\
            involvedObject.uid=u1,involvedObject.apiVersion=v1,involvedObject.resourceVersion=7,\
            involvedObject.fieldPath=spec.containers{c},reason=Scheduled,reportingComponent=default-scheduler,\
            type=Normal,metadata.name=e,metadata.namespace=ns";
        assert!(field(selector, events).matches(&event));
        // source: the source component, else the reporting component.
        assert!(field("source=default-scheduler", events).matches(&event));
        let with_source = json!({"source": {"component": "kubelet"}, "reportingComponent": "x"});
        assert!(field("source=kubelet", events).matches(&with_source));
        assert_eq!(field_error("regarding.name=p", events), "field label not supported: regarding.name");
    }

    #[test]
    fn events_group_fields() {
        let events = resource("events.k8s.io", "v1", "events");
        assert_eq!(field_error("involvedObject.name=p", events), "field label not supported: involvedObject.name");
        assert_eq!(field_error("reportingComponent=x", events), "field label not supported: reportingComponent");
        let selector = "regarding.kind=Pod,regarding.name=p,regarding.namespace=ns,regarding.uid=u1,\
            regarding.apiVersion=v1,regarding.resourceVersion=7,regarding.fieldPath=f,reason=Pulled,\
            reportingController=kubelet,source=kubelet,type=Warning,metadata.name=e,metadata.namespace=ns";
        let core_shape = json!({
            "apiVersion": "v1",
            "metadata": {"name": "e", "namespace": "ns"},
            "involvedObject": {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u1", "apiVersion": "v1",
                               "resourceVersion": "7", "fieldPath": "f"},
            "reason": "Pulled", "reportingComponent": "kubelet", "type": "Warning",
        });
        let group_shape = json!({
            "apiVersion": "events.k8s.io/v1",
            "metadata": {"name": "e", "namespace": "ns"},
            "regarding": {"kind": "Pod", "namespace": "ns", "name": "p", "uid": "u1", "apiVersion": "v1",
                          "resourceVersion": "7", "fieldPath": "f"},
            "reason": "Pulled", "reportingController": "kubelet", "type": "Warning",
        });
        let selector = field(selector, events);
        assert!(selector.matches(&core_shape));
        assert!(selector.matches(&group_shape));
        let deprecated_source = json!({"apiVersion": "events.k8s.io/v1", "deprecatedSource": {"component": "k"}});
        assert!(field("source=k", events).matches(&deprecated_source));
    }
}
