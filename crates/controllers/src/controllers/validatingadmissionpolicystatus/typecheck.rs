//! apiserver's `validating.TypeChecker` (`typechecking.go`): each expression of a policy is
//! compiled once per kind the policy matches, with `object`/`oldObject` typed from that kind's
//! OpenAPI schema and `params` from the paramKind's; the errors become `ExpressionWarning`s.
//!
//! Schemas come from the server's `/openapi/v3/<group-version>` documents (upstream reads
//! built-in kinds from compiled-in definitions and others from the same documents); kinds from
//! discovery (upstream's RESTMapper).

use std::collections::{BTreeSet, HashMap};
use std::time::{SystemTime, UNIX_EPOCH};

use k8s_openapi::api::admissionregistration::v1::{ExpressionWarning, ValidatingAdmissionPolicy, Variable};
use serde_json::Value;

use crate::apimachinery::schema::parse_group_version;
use crate::cel::{Components, Env, Type, authorizer_type, compile};

/// `maxTypesToCheck`.
const MAX_TYPES_TO_CHECK: usize = 10;

/// A group, version and kind, printed as Go's `GroupVersionKind.String()`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Gvk {
    /// Empty for the core group.
    pub group: String,
    /// `v1`.
    pub version: String,
    /// `Deployment`.
    pub kind: String,
}

impl std::fmt::Display for Gvk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}, Kind={}", self.group, self.version, self.kind)
    }
}

/// Where kinds and schemas come from: the server (discovery and `/openapi/v3`) or a test's table.
pub trait SchemaSource {
    /// The kinds served as `resource` in `group`/`version` (`RESTMapper.KindsFor`).
    fn kinds_for(&mut self, group: &str, version: &str, resource: &str) -> Vec<Gvk>;
    /// The OpenAPI v3 document of `group`/`version`, if served.
    fn document(&mut self, group: &str, version: &str) -> Option<Value>;
}

/// `TypeChecker.Check`: the warnings of every validation's expression and message expression.
pub fn check(source: &mut dyn SchemaSource, policy: &ValidatingAdmissionPolicy) -> Vec<ExpressionWarning> {
    let context = Context::new(source, policy);
    let mut warnings = Vec::new();
    let validations = policy.spec.as_ref().and_then(|s| s.validations.as_ref());
    for (i, validation) in validations.into_iter().flatten().enumerate() {
        let expressions = [
            ("expression", Some(&validation.expression)),
            ("messageExpression", validation.message_expression.as_ref()),
        ];
        for (field, expression) in expressions {
            let Some(expression) = expression.filter(|e| !e.is_empty()) else { continue };
            let results = context.check_expression(expression);
            if !results.is_empty() {
                warnings.push(ExpressionWarning {
                    field_ref: format!("spec.validations[{i}].{field}"),
                    warning: results.join("\n"),
                });
            }
        }
    }
    warnings
}

/// `TypeCheckingContext`: the kinds with their object types, the params type, the variables.
struct Context {
    kinds: Vec<(Gvk, Type)>,
    params: Option<Type>,
    variables: Vec<Variable>,
}

impl Context {
    /// `CreateContext`: kinds whose schema cannot be found are left out.
    fn new(source: &mut dyn SchemaSource, policy: &ValidatingAdmissionPolicy) -> Context {
        let kinds = types_to_check(source, policy)
            .into_iter()
            .filter_map(|gvk| decl_type(source, &gvk).map(|t| (gvk, t)))
            .collect();
        let spec = policy.spec.as_ref();
        let params = spec.and_then(|s| s.param_kind.as_ref()).and_then(|p| {
            let (group, version) =
                parse_group_version(p.api_version.as_deref()?).ok().filter(|(_, v)| !v.is_empty())?;
            let gvk = Gvk { group: group.into(), version: version.into(), kind: p.kind.clone()? };
            decl_type(source, &gvk)
        });
        let variables = spec.and_then(|s| s.variables.clone()).unwrap_or_default();
        Context { kinds, params, variables }
    }

    /// `CheckExpression`: one result per kind whose compilation failed, `<gvk>: <issues>\n`.
    fn check_expression(&self, expression: &str) -> Vec<String> {
        let mut results = Vec::new();
        for (gvk, object) in &self.kinds {
            let env = self.env(object);
            if let Err(issues) = compile(&env, expression) {
                results.push(format!("{gvk}: {issues}\n"));
            }
        }
        results
    }

    /// `buildEnvSet` plus the composition environment's `variables`, each typed by its
    /// expression (`dyn` when it does not compile), in order.
    fn env(&self, object: &Type) -> Env {
        let mut env = Env::new();
        env.declare("namespaceObject", namespace_type());
        env.declare("request", request_type());
        env.declare("object", object.clone());
        env.declare("oldObject", object.clone());
        if let Some(params) = &self.params {
            env.declare("params", params.clone());
        }
        env.declare("authorizer", authorizer_type());
        let mut fields: Vec<(String, Type)> = Vec::new();
        for variable in &self.variables {
            let declare_variables = |env: &mut Env, fields: &[(String, Type)]| {
                let fields = fields.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
                env.declare("variables", Type::object("kubernetes.variables", fields));
            };
            declare_variables(&mut env, &fields);
            let t = compile(&env, &variable.expression).unwrap_or(Type::Dyn);
            fields.retain(|(n, _)| *n != variable.name);
            fields.push((variable.name.clone(), t));
        }
        let fields = fields.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
        env.declare("variables", Type::object("kubernetes.variables", fields));
        env
    }
}

/// `declType`: the kind's schema as a resource root, named `<Kind><nanoseconds>`
/// (`generateUniqueTypeName`).
fn decl_type(source: &mut dyn SchemaSource, gvk: &Gvk) -> Option<Type> {
    let document = source.document(&gvk.group, &gvk.version)?;
    let schemas = document.pointer("/components/schemas")?.as_object()?;
    let components = Components { schemas };
    let name = components.find_kind(&gvk.group, &gvk.version, &gvk.kind)?;
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or_default();
    components.root_type(name, &format!("{}{nanos}", gvk.kind))
}

/// `typesToCheck`: the kinds of the match constraints' resource rules without wildcards in
/// groups or versions and of their non-wildcard, non-subresource resources, sorted; at most 10.
pub fn types_to_check(source: &mut dyn SchemaSource, policy: &ValidatingAdmissionPolicy) -> Vec<Gvk> {
    let rules = policy
        .spec
        .as_ref()
        .and_then(|s| s.match_constraints.as_ref())
        .and_then(|m| m.resource_rules.as_ref())
        .cloned()
        .unwrap_or_default();
    let mut gvks = BTreeSet::new();
    for rule in rules {
        let Some(groups) = without_wildcards(rule.api_groups.as_deref(), "*") else { continue };
        let Some(versions) = without_wildcards(rule.api_versions.as_deref(), "*") else { continue };
        let mut resources: Vec<String> =
            rule.resources.unwrap_or_default().into_iter().filter(|r| !r.contains(['*', '/'])).collect();
        if groups.is_empty() || versions.is_empty() || resources.is_empty() {
            continue;
        }
        resources.sort();
        let mut count = 0;
        for group in &groups {
            for version in &versions {
                for resource in &resources {
                    for gvk in source.kinds_for(group, version, resource) {
                        gvks.insert(gvk);
                        count += 1;
                        if count == MAX_TYPES_TO_CHECK {
                            return gvks.into_iter().collect();
                        }
                    }
                }
            }
        }
    }
    gvks.into_iter().collect()
}

/// `extractGroups`/`extractVersions`: sorted, or `None` when any holds a wildcard.
fn without_wildcards(values: Option<&[String]>, wildcard: &str) -> Option<Vec<String>> {
    let values = values.unwrap_or_default();
    if values.iter().any(|v| v.contains(wildcard)) {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort();
    Some(sorted)
}

/// `BuildRequestType`.
fn request_type() -> Type {
    let gvk = Type::object(
        "kubernetes.GroupVersionKind",
        vec![("group", Type::String), ("version", Type::String), ("kind", Type::String)],
    );
    let gvr = Type::object(
        "kubernetes.GroupVersionResource",
        vec![("group", Type::String), ("version", Type::String), ("resource", Type::String)],
    );
    let strings = || Type::list(Type::String);
    let user = Type::object(
        "kubernetes.UserInfo",
        vec![
            ("username", Type::String),
            ("uid", Type::String),
            ("groups", strings()),
            ("extra", Type::map(Type::String, strings())),
        ],
    );
    Type::object(
        "kubernetes.AdmissionRequest",
        vec![
            ("kind", gvk.clone()),
            ("resource", gvr.clone()),
            ("subResource", Type::String),
            ("requestKind", gvk),
            ("requestResource", gvr),
            ("requestSubResource", Type::String),
            ("name", Type::String),
            ("namespace", Type::String),
            ("operation", Type::String),
            ("userInfo", user),
            ("dryRun", Type::Bool),
            ("options", Type::Dyn),
        ],
    )
}

/// `BuildNamespaceType`.
fn namespace_type() -> Type {
    let strings = || Type::list(Type::String);
    let string_map = || Type::map(Type::String, Type::String);
    let condition = Type::object(
        "kubernetes.NamespaceCondition",
        vec![
            ("status", Type::String),
            ("type", Type::String),
            ("lastTransitionTime", Type::Timestamp),
            ("message", Type::String),
            ("reason", Type::String),
        ],
    );
    let status = Type::object(
        "kubernetes.NamespaceStatus",
        vec![("conditions", Type::list(condition)), ("phase", Type::String)],
    );
    let metadata = Type::object(
        "kubernetes.NamespaceMetadata",
        vec![
            ("name", Type::String),
            ("generateName", Type::String),
            ("namespace", Type::String),
            ("labels", string_map()),
            ("annotations", string_map()),
            ("UID", Type::String),
            ("creationTimestamp", Type::Timestamp),
            ("deletionGracePeriodSeconds", Type::Int),
            ("deletionTimestamp", Type::Timestamp),
            ("generation", Type::Int),
            ("resourceVersion", Type::String),
            ("finalizers", strings()),
        ],
    );
    Type::object(
        "kubernetes.Namespace",
        vec![
            ("metadata", metadata),
            ("spec", Type::object("kubernetes.NamespaceSpec", vec![("finalizers", strings())])),
            ("status", status),
        ],
    )
}

/// A [`SchemaSource`] of fixed kinds and documents, for tests.
#[derive(Default)]
pub struct FixedSource {
    /// `(group, version, resource)` → kind.
    pub kinds: HashMap<(String, String, String), String>,
    /// `(group, version)` → document.
    pub documents: HashMap<(String, String), Value>,
}

impl SchemaSource for FixedSource {
    fn kinds_for(&mut self, group: &str, version: &str, resource: &str) -> Vec<Gvk> {
        let key = (group.to_string(), version.to_string(), resource.to_string());
        let kind = self.kinds.get(&key).cloned();
        kind.map(|kind| Gvk { group: group.into(), version: version.into(), kind }).into_iter().collect()
    }

    fn document(&mut self, group: &str, version: &str) -> Option<Value> {
        self.documents.get(&(group.to_string(), version.to_string())).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// typechecking_test.go's fixture: deployments in apps/v1 whose schema has `foo: int64`.
    fn source() -> FixedSource {
        let mut source = FixedSource::default();
        source.kinds.insert(("apps".into(), "v1".into(), "deployments".into()), "Deployment".into());
        let document = json!({"components": {"schemas": {
            "Deployment": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Deployment"}],
                "properties": {"foo": {"type": "integer", "format": "int64"}},
            },
            "Params": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "", "version": "v1", "kind": "ConfigMap"}],
                "properties": {"foo": {"type": "string"}},
            },
        }}});
        source.documents.insert(("apps".into(), "v1".into()), document.clone());
        source.documents.insert((String::new(), "v1".into()), document);
        source
    }

    fn policy(validations: Value, extra: Value) -> ValidatingAdmissionPolicy {
        let mut spec = json!({
            "validations": validations,
            "matchConstraints": {"resourceRules": [
                {"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"], "operations": ["CREATE"]}
            ]},
        });
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object()) {
            spec.extend(extra.clone());
        }
        serde_json::from_value(json!({"metadata": {"name": "p"}, "spec": spec})).expect("a policy")
    }

    fn warnings(validations: Value, extra: Value) -> Vec<(String, String)> {
        check(&mut source(), &policy(validations, extra)).into_iter().map(|w| (w.field_ref, w.warning)).collect()
    }

    #[test]
    fn upstream_cases() {
        assert!(warnings(json!([{"expression": "object.foo == 1"}]), json!({})).is_empty());
        let w = warnings(json!([{"expression": "object.bar == 'foo'"}]), json!({}));
        assert_eq!(w[0].0, "spec.validations[0].expression");
        assert_eq!(
            w[0].1,
            "apps/v1, Kind=Deployment: ERROR: <input>:1:7: undefined field 'bar'\n | object.bar == 'foo'\n | ......^\n"
        );
        let w = warnings(json!([{"expression": "object.foo == 'bar'"}]), json!({}));
        assert!(w[0].1.contains("found no matching overload"), "{w:?}");
        let params = json!({"paramKind": {"apiVersion": "v1", "kind": "ConfigMap"}});
        let w = warnings(json!([{"expression": "object.foo == params.bar"}]), params.clone());
        assert!(w[0].1.contains("undefined field 'bar'"), "{w:?}");
        let w = warnings(json!([{"expression": "true"}, {"expression": "object.foo == 'a'"}]), json!({}));
        assert_eq!(w.len(), 1);
        assert_eq!(w[0].0, "spec.validations[1].expression");
        let w = warnings(json!([{"expression": "true", "messageExpression": "object.bar"}]), json!({}));
        assert_eq!(w[0].0, "spec.validations[0].messageExpression");
        let w = warnings(json!([{"expression": "authorizer.allowed()"}]), json!({}));
        assert!(
            w[0].1.contains("found no matching overload for 'allowed' applied to 'kubernetes.authorization.Authorizer"),
            "{w:?}"
        );
    }

    #[test]
    fn variables() {
        let vars = |name: &str, e: &str| json!({"variables": [{"name": name, "expression": e}]});
        assert!(warnings(json!([{"expression": "variables.works"}]), vars("works", "true")).is_empty());
        let w = warnings(json!([{"expression": "variables.nonExisting"}]), vars("works", "true"));
        assert!(w[0].1.contains("undefined field 'nonExisting'"), "{w:?}");
        let w = warnings(json!([{"expression": "variables.name == object.foo"}]), vars("name", "'something'"));
        assert!(w[0].1.contains("found no matching overload for '_==_' applied to '(string, int)"), "{w:?}");
        let w = warnings(json!([{"expression": "variables.name == object.foo"}]), vars("name", "object.foo == 'str'"));
        assert!(w.is_empty(), "an error in a variable is not reported: {w:?}");
    }

    #[test]
    fn kinds_to_check() {
        let rules = |rules: Value| {
            let policy: ValidatingAdmissionPolicy = serde_json::from_value(
                json!({"metadata": {"name": "p"}, "spec": {"matchConstraints": {"resourceRules": rules}}}),
            )
            .expect("a policy");
            types_to_check(&mut source(), &policy)
        };
        let deployments = json!([{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments"]}]);
        assert_eq!(rules(deployments).len(), 1);
        assert!(rules(json!([{"apiGroups": ["*"], "apiVersions": ["v1"], "resources": ["deployments"]}])).is_empty());
        assert!(
            rules(json!([{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["deployments/status"]}]))
                .is_empty()
        );
        assert!(rules(json!([{"apiGroups": ["apps"], "apiVersions": ["v1"], "resources": ["*"]}])).is_empty());
    }
}
