//! CEL types, named and printed as cel-go's `FormatCELType`, and their construction from
//! OpenAPI v3 schemas as apiserver's `common.SchemaDeclType` after `resolver.PopulateRefs`.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

/// A CEL type.
#[derive(Debug, Clone)]
pub enum Type {
    /// `dyn`: anything, checked at run time.
    Dyn,
    /// The type of an expression that failed to check (`*error*`); assignable to anything.
    Error,
    /// `null_type`.
    Null,
    /// `bool`.
    Bool,
    /// `int`.
    Int,
    /// `uint`.
    Uint,
    /// `double`.
    Double,
    /// `string`.
    String,
    /// `bytes`.
    Bytes,
    /// `google.protobuf.Duration`.
    Duration,
    /// `google.protobuf.Timestamp`.
    Timestamp,
    /// `list(T)`.
    List(Box<Type>),
    /// `map(K, V)`.
    Map(Box<Type>, Box<Type>),
    /// An object with declared fields (a schema's object, the admission request, ...).
    Object(Arc<ObjectType>),
    /// A library's opaque type, e.g. `kubernetes.authorization.Authorizer`.
    Opaque(&'static str),
    /// `type(T)`.
    TypeOf(Box<Type>),
    /// A type parameter of an overload.
    Param(&'static str),
}

/// An object type: its name and fields (escaped as apiserver's `cel.Escape`).
#[derive(Debug)]
pub struct ObjectType {
    /// E.g. `Deployment123456.spec` or `kubernetes.AdmissionRequest`.
    pub name: String,
    /// Field types by (escaped) name.
    pub fields: BTreeMap<String, Type>,
}

impl PartialEq for Type {
    fn eq(&self, other: &Type) -> bool {
        use Type::*;
        match (self, other) {
            (List(a), List(b)) | (TypeOf(a), TypeOf(b)) => a == b,
            (Map(ak, av), Map(bk, bv)) => ak == bk && av == bv,
            (Object(a), Object(b)) => a.name == b.name,
            (Opaque(a), Opaque(b)) | (Param(a), Param(b)) => a == b,
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Dyn => f.write_str("dyn"),
            Type::Error => f.write_str("*error*"),
            Type::Null => f.write_str("null_type"),
            Type::Bool => f.write_str("bool"),
            Type::Int => f.write_str("int"),
            Type::Uint => f.write_str("uint"),
            Type::Double => f.write_str("double"),
            Type::String => f.write_str("string"),
            Type::Bytes => f.write_str("bytes"),
            Type::Duration => f.write_str("google.protobuf.Duration"),
            Type::Timestamp => f.write_str("google.protobuf.Timestamp"),
            Type::List(t) => write!(f, "list({t})"),
            Type::Map(k, v) => write!(f, "map({k}, {v})"),
            Type::Object(o) => f.write_str(&o.name),
            Type::Opaque(name) | Type::Param(name) => f.write_str(name),
            Type::TypeOf(t) => write!(f, "type({t})"),
        }
    }
}

impl Type {
    /// An object type from `(field, type)` pairs.
    pub fn object(name: &str, fields: Vec<(&str, Type)>) -> Type {
        let fields = fields.into_iter().map(|(n, t)| (n.to_string(), t)).collect();
        Type::Object(Arc::new(ObjectType { name: name.to_string(), fields }))
    }

    /// `list(T)`.
    pub fn list(t: Type) -> Type {
        Type::List(Box::new(t))
    }

    /// `map(K, V)`.
    pub fn map(k: Type, v: Type) -> Type {
        Type::Map(Box::new(k), Box::new(v))
    }

    /// `dyn` or `*error*`: assignable either way.
    pub fn is_dyn_or_error(&self) -> bool {
        matches!(self, Type::Dyn | Type::Error)
    }
}

/// The literals and operator word that apiserver's `celReservedSymbols` adds to the parser's
/// reserved words: all are escaped as `__word__` in field names.
const RESERVED_LITERALS: &[&str] = &["true", "false", "null", "in"];

/// apiserver's `cel.Escape`: a property name as a CEL field name, or `None` when it cannot be one.
pub fn escape(name: &str) -> Option<String> {
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    if RESERVED_LITERALS.contains(&name) || super::parser::RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut out = String::new();
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if rest.starts_with("__") {
            out.push_str("__underscores__");
            rest = &rest[2..];
            continue;
        }
        match c {
            '.' => out.push_str("__dot__"),
            '-' => out.push_str("__dash__"),
            '/' => out.push_str("__slash__"),
            c if c.is_ascii_alphanumeric() || c == '_' => out.push(c),
            _ => return None,
        }
        rest = &rest[c.len_utf8()..];
    }
    Some(out)
}

/// The components of one OpenAPI v3 document (`components.schemas`), to resolve `$ref`s in.
pub struct Components<'a> {
    /// Schemas by name.
    pub schemas: &'a Map<String, Value>,
}

const REF_PREFIX: &str = "#/components/schemas/";

impl Components<'_> {
    /// The name of the schema declaring `x-kubernetes-group-version-kind` = (group, version, kind).
    pub fn find_kind(&self, group: &str, version: &str, kind: &str) -> Option<&str> {
        self.schemas.iter().find_map(|(name, schema)| {
            let gvks = schema.get("x-kubernetes-group-version-kind")?.as_array()?;
            gvks.iter()
                .any(|g| {
                    g["group"].as_str().unwrap_or("") == group
                        && g["version"].as_str() == Some(version)
                        && g["kind"].as_str() == Some(kind)
                })
                .then_some(name.as_str())
        })
    }

    /// The CEL type of the named schema as a resource root (`SchemaDeclType(s, true)` then
    /// `MaybeAssignTypeName(type_name)`), or `None` when it has no CEL type.
    pub fn root_type(&self, schema_name: &str, type_name: &str) -> Option<Type> {
        let mut visited = HashSet::from([schema_name.to_string()]);
        let schema = self.schemas.get(schema_name)?;
        self.decl_type(schema, true, type_name, &mut visited)
    }

    /// `refOf`: a `$ref`, directly or inside `allOf`.
    fn ref_of(schema: &Value) -> Option<&str> {
        if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
            return Some(r);
        }
        schema.get("allOf")?.as_array()?.iter().find_map(Self::ref_of)
    }

    /// `SchemaDeclType` of `schema`, its `$ref` resolved first (a ref already being resolved
    /// further up becomes an empty object, as `populateRefs`).
    fn decl_type(&self, schema: &Value, root: bool, name: &str, visited: &mut HashSet<String>) -> Option<Type> {
        if let Some(r) = Self::ref_of(schema) {
            if visited.contains(r) {
                return Some(Type::object(name, vec![]));
            }
            let resolved = self.schemas.get(r.strip_prefix(REF_PREFIX).unwrap_or(r))?;
            visited.insert(r.to_string());
            let t = self.decl_type(resolved, root, name, visited);
            visited.remove(r);
            return t;
        }
        if is_int_or_string(schema) {
            return Some(Type::Dyn);
        }
        let embedded = |s: &Value| s.get("x-kubernetes-embedded-resource").and_then(Value::as_bool) == Some(true);
        match schema_type(schema) {
            "array" => {
                let items = schema.get("items")?;
                Some(Type::list(self.decl_type(items, embedded(items), &format!("{name}.@idx"), visited)?))
            }
            "object" => {
                if let Some(additional) = schema.get("additionalProperties").filter(|a| a.is_object()) {
                    let value = self.decl_type(additional, embedded(additional), &format!("{name}.@elem"), visited)?;
                    return Some(Type::map(Type::String, value));
                }
                let mut fields = BTreeMap::new();
                if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                    for (prop_name, prop) in props {
                        let Some(field) = escape(prop_name) else { continue };
                        let field_name = format!("{name}.{field}");
                        if let Some(t) = self.decl_type(prop, embedded(prop), &field_name, visited) {
                            fields.insert(field, t);
                        }
                    }
                }
                if root {
                    self.with_type_and_object_meta(&mut fields, name);
                }
                Some(Type::Object(Arc::new(ObjectType { name: name.to_string(), fields })))
            }
            "string" => Some(match schema.get("format").and_then(Value::as_str) {
                Some("byte") => Type::Bytes,
                Some("duration") => Type::Duration,
                Some("date" | "date-time") => Type::Timestamp,
                _ => Type::String,
            }),
            "boolean" => Some(Type::Bool),
            "number" => Some(Type::Double),
            "integer" => Some(Type::Int),
            _ => None,
        }
    }

    /// `WithTypeAndObjectMeta`: a root without string `kind`/`apiVersion` and a `metadata`
    /// with `name` and `generateName` gets them (metadata with just those two).
    fn with_type_and_object_meta(&self, fields: &mut BTreeMap<String, Type>, name: &str) {
        let has_meta = matches!(fields.get("metadata"), Some(Type::Object(m))
            if m.fields.get("name") == Some(&Type::String) && m.fields.get("generateName") == Some(&Type::String));
        if fields.get("kind") == Some(&Type::String) && fields.get("apiVersion") == Some(&Type::String) && has_meta {
            return;
        }
        fields.insert("kind".into(), Type::String);
        fields.insert("apiVersion".into(), Type::String);
        let meta = vec![("name", Type::String), ("generateName", Type::String)];
        fields.insert("metadata".into(), Type::object(&format!("{name}.metadata"), meta));
    }
}

/// `x-kubernetes-int-or-string` or the `int-or-string` format.
fn is_int_or_string(schema: &Value) -> bool {
    schema.get("format").and_then(Value::as_str) == Some("int-or-string")
        || schema.get("x-kubernetes-int-or-string").and_then(Value::as_bool) == Some(true)
}

/// The schema's (first) `type`; none for schemas with only a `oneOf` (`Quantity`), which
/// therefore have no CEL type, as upstream (its compiled-in v3 definitions are the same).
fn schema_type(schema: &Value) -> &str {
    match schema.get("type") {
        Some(Value::String(t)) => t,
        Some(Value::Array(ts)) => ts.first().and_then(Value::as_str).unwrap_or(""),
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_become_cel_types() {
        let doc = json!({
            "io.k8s.api.apps.v1.Deployment": {
                "type": "object",
                "x-kubernetes-group-version-kind": [{"group": "apps", "version": "v1", "kind": "Deployment"}],
                "properties": {
                    "spec": {"allOf": [{"$ref": "#/components/schemas/Spec"}]},
                    "namespace": {"type": "string"},
                    "port": {"type": "string", "format": "int-or-string"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "raw": {},
                }
            },
            "Spec": {"type": "object", "properties": {"replicas": {"type": "integer"}, "when": {"type": "string", "format": "date-time"}}},
        });
        let components = Components { schemas: doc.as_object().unwrap() };
        let name = components.find_kind("apps", "v1", "Deployment").unwrap();
        let Some(Type::Object(root)) = components.root_type(name, "Deployment1") else { panic!() };
        assert_eq!(root.fields["spec"].to_string(), "Deployment1.spec");
        let Type::Object(spec) = &root.fields["spec"] else { panic!() };
        assert_eq!(spec.fields["replicas"], Type::Int);
        assert_eq!(spec.fields["when"], Type::Timestamp);
        assert_eq!(root.fields["__namespace__"], Type::String);
        assert_eq!(root.fields["port"], Type::Dyn);
        assert_eq!(root.fields["labels"].to_string(), "map(string, string)");
        assert!(!root.fields.contains_key("raw"), "no type, no field");
        assert_eq!(root.fields["kind"], Type::String, "a root gets kind, apiVersion and metadata");
    }

    #[test]
    fn escapes_as_apiserver() {
        assert_eq!(escape("foo-bar").as_deref(), Some("foo__dash__bar"));
        assert_eq!(escape("a__b").as_deref(), Some("a__underscores__b"));
        assert_eq!(escape("if").as_deref(), Some("__if__"));
        assert_eq!(escape("1a"), None);
        assert_eq!(escape("a@b"), None);
    }
}
