//! The type checker: cel-go's `checker` over our [`Expr`], with the standard library's
//! overloads, string extensions, the Kubernetes authorizer library, and the other Kubernetes
//! and extension libraries (URLs, quantities, IPs/CIDRs, regex, lists, sets, format, optional
//! values) declared by name only: their calls are typed `dyn` and never reported.

use std::collections::HashMap;
use std::sync::OnceLock;

use super::errors::{Issue, Issues, Source};
use super::parser::{Expr, ExprKind, parse};
use super::types::Type;

/// The declared variables.
#[derive(Debug, Clone, Default)]
pub struct Env {
    vars: HashMap<String, Type>,
}

impl Env {
    /// An environment with no variables.
    pub fn new() -> Env {
        Env::default()
    }

    /// Declares `name` with type `t`.
    pub fn declare(&mut self, name: &str, t: Type) {
        self.vars.insert(name.to_string(), t);
    }
}

/// Parses and checks `text`: its type, or the issues as cel-go displays them.
pub fn compile(env: &Env, text: &str) -> Result<Type, Issues> {
    let source = Source::new(text);
    let expr = match parse(&source) {
        Ok(expr) => expr,
        Err(issue) => return Err(Issues::new(source, vec![issue])),
    };
    let mut checker = Checker { env, scopes: Vec::new(), issues: Vec::new() };
    let t = checker.check(&expr);
    if checker.issues.is_empty() { Ok(t) } else { Err(Issues::new(source, checker.issues)) }
}

/// One overload: receiver-style or global, parameter types (the receiver first), result.
struct Overload {
    member: bool,
    params: Vec<Type>,
    result: Type,
}

const A: Type = Type::Param("A");
const B: Type = Type::Param("B");
const AUTHORIZER: Type = Type::Opaque("kubernetes.authorization.Authorizer");
const PATH_CHECK: Type = Type::Opaque("kubernetes.authorization.PathCheck");
const GROUP_CHECK: Type = Type::Opaque("kubernetes.authorization.GroupCheck");
const RESOURCE_CHECK: Type = Type::Opaque("kubernetes.authorization.ResourceCheck");
const DECISION: Type = Type::Opaque("kubernetes.authorization.Decision");

/// The authorizer library's `authorizer` variable type.
pub fn authorizer_type() -> Type {
    AUTHORIZER
}

/// Functions of the Kubernetes and extension libraries the checker knows by name only.
const UNTYPED_FUNCTIONS: &[&str] = &[
    // library.URLs
    "url",
    "isURL",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
    // library.Quantity
    "quantity",
    "isQuantity",
    "isInteger",
    "asInteger",
    "asApproximateFloat",
    "sign",
    "add",
    "sub",
    "isGreaterThan",
    "isLessThan",
    "compareTo",
    // library.IP, library.CIDR
    "ip",
    "isIP",
    "ip.isCanonical",
    "cidr",
    "isCIDR",
    "family",
    "isUnspecified",
    "isLoopback",
    "isLinkLocalMulticast",
    "isLinkLocalUnicast",
    "isGlobalUnicast",
    "containsIP",
    "containsCIDR",
    "masked",
    "prefixLength",
    // library.Regex, library.Lists, library.Format, library.SemverLib
    "find",
    "findAll",
    "isSorted",
    "sum",
    "min",
    "max",
    "format.named",
    "validate",
    "format.dns1123Label",
    "format.dns1123Subdomain",
    "format.dns1035Label",
    "format.qualifiedName",
    "format.dns1123LabelPrefix",
    "format.dns1123SubdomainPrefix",
    "format.dns1035LabelPrefix",
    "format.labelValue",
    "format.uri",
    "format.uuid",
    "format.byte",
    "format.date",
    "format.datetime",
    "semver",
    "isSemver",
    "major",
    "minor",
    "patch",
    // ext.Strings, ext.Sets, ext.Math, ext.Lists, ext.Encoders
    "format",
    "quote",
    "strings.quote",
    "reverse",
    "sets.contains",
    "sets.equivalent",
    "sets.intersects",
    "math.greatest",
    "math.least",
    "math.ceil",
    "math.floor",
    "math.round",
    "math.trunc",
    "math.abs",
    "math.sign",
    "math.isInf",
    "math.isNaN",
    "math.isFinite",
    "math.bitAnd",
    "math.bitOr",
    "math.bitXor",
    "math.bitNot",
    "math.bitShiftLeft",
    "math.bitShiftRight",
    "math.sqrt",
    "lists.range",
    "slice",
    "flatten",
    "distinct",
    "sort",
    "sortBy",
    "first",
    "last",
    "base64.encode",
    "base64.decode",
    // optional values
    "optional.of",
    "optional.ofNonZeroValue",
    "optional.none",
    "hasValue",
    "value",
    "orValue",
    "or",
    "optMap",
    "optFlatMap",
    "_[?_]",
    // timestamps' and durations' getters
    "getFullYear",
    "getMonth",
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
];

fn g(params: Vec<Type>, result: Type) -> Overload {
    Overload { member: false, params, result }
}

fn m(params: Vec<Type>, result: Type) -> Overload {
    Overload { member: true, params, result }
}

/// The typed functions and operators, by name.
fn functions() -> &'static HashMap<&'static str, Vec<Overload>> {
    static TABLE: OnceLock<HashMap<&'static str, Vec<Overload>>> = OnceLock::new();
    TABLE.get_or_init(|| {
        use Type::*;
        let mut t: HashMap<&'static str, Vec<Overload>> = HashMap::new();
        let numbers = [Int, Uint, Double];
        let list_a = || Type::list(A);
        let map_ab = || Type::map(A, B);
        t.insert(
            "_+_",
            numbers
                .iter()
                .chain(&[String, Bytes, Duration])
                .map(|n| g(vec![n.clone(), n.clone()], n.clone()))
                .chain([
                    g(vec![list_a(), list_a()], list_a()),
                    g(vec![Timestamp, Duration], Timestamp),
                    g(vec![Duration, Timestamp], Timestamp),
                ])
                .collect(),
        );
        t.insert(
            "_-_",
            numbers
                .iter()
                .chain(&[Duration])
                .map(|n| g(vec![n.clone(), n.clone()], n.clone()))
                .chain([g(vec![Timestamp, Timestamp], Duration), g(vec![Timestamp, Duration], Timestamp)])
                .collect(),
        );
        for op in ["_*_", "_/_"] {
            t.insert(op, numbers.iter().map(|n| g(vec![n.clone(), n.clone()], n.clone())).collect());
        }
        t.insert("_%_", vec![g(vec![Int, Int], Int), g(vec![Uint, Uint], Uint)]);
        t.insert("-_", vec![g(vec![Int], Int), g(vec![Double], Double)]);
        t.insert("!_", vec![g(vec![Bool], Bool)]);
        for op in ["_&&_", "_||_"] {
            t.insert(op, vec![g(vec![Bool, Bool], Bool)]);
        }
        for op in ["_==_", "_!=_"] {
            t.insert(op, vec![g(vec![A, A], Bool)]);
        }
        for op in ["_<_", "_<=_", "_>_", "_>=_"] {
            // Ordered kinds, plus the cross-type numeric comparisons Kubernetes enables.
            let mut overloads: Vec<Overload> = [Bool, String, Bytes, Timestamp, Duration]
                .iter()
                .chain(&numbers)
                .map(|k| g(vec![k.clone(), k.clone()], Bool))
                .collect();
            for a in &numbers {
                for b in numbers.iter().filter(|b| *b != a) {
                    overloads.push(g(vec![a.clone(), b.clone()], Bool));
                }
            }
            t.insert(op, overloads);
        }
        t.insert("_?_:_", vec![g(vec![Bool, A, A], A)]);
        t.insert("_[_]", vec![g(vec![list_a(), Int], A), g(vec![map_ab(), A], B)]);
        t.insert("@in", vec![g(vec![A, list_a()], Bool), g(vec![A, map_ab()], Bool)]);
        let sized = [String, Bytes, list_a(), map_ab()];
        t.insert("size", sized.iter().flat_map(|s| [g(vec![s.clone()], Int), m(vec![s.clone()], Int)]).collect());
        for f in ["contains", "startsWith", "endsWith"] {
            t.insert(f, vec![m(vec![String, String], Bool)]);
        }
        t.insert("matches", vec![g(vec![String, String], Bool), m(vec![String, String], Bool)]);
        let conversions: [(&str, Vec<Type>, Type); 9] = [
            ("int", vec![Int, Uint, Double, String, Timestamp], Int),
            ("uint", vec![Int, Uint, Double, String], Uint),
            ("double", vec![Int, Uint, Double, String], Double),
            ("string", vec![Int, Uint, Double, Bool, Bytes, Timestamp, Duration, String], String),
            ("bool", vec![Bool, String], Bool),
            ("bytes", vec![Bytes, String], Bytes),
            ("duration", vec![Duration, String], Duration),
            ("timestamp", vec![Timestamp, String, Int], Timestamp),
            ("dyn", vec![A], Dyn),
        ];
        for (name, from, to) in conversions {
            t.insert(name, from.into_iter().map(|f| g(vec![f], to.clone())).collect());
        }
        t.insert("type", vec![g(vec![A], TypeOf(Box::new(A)))]);
        // ext.Strings.
        t.insert("charAt", vec![m(vec![String, Int], String)]);
        for f in ["indexOf", "lastIndexOf"] {
            // The strings extension, and library.Lists on lists.
            t.insert(
                f,
                vec![m(vec![String, String], Int), m(vec![String, String, Int], Int), m(vec![list_a(), A], Int)],
            );
        }
        for f in ["lowerAscii", "upperAscii", "trim"] {
            t.insert(f, vec![m(vec![String], String)]);
        }
        t.insert(
            "replace",
            vec![m(vec![String, String, String], String), m(vec![String, String, String, Int], String)],
        );
        t.insert("split", vec![m(vec![String, String], list(String)), m(vec![String, String, Int], list(String))]);
        t.insert("substring", vec![m(vec![String, Int], String), m(vec![String, Int, Int], String)]);
        t.insert("join", vec![m(vec![list(String)], String), m(vec![list(String), String], String)]);
        // library.Authz.
        t.insert("path", vec![m(vec![AUTHORIZER, String], PATH_CHECK)]);
        t.insert("group", vec![m(vec![AUTHORIZER, String], GROUP_CHECK)]);
        t.insert("serviceAccount", vec![m(vec![AUTHORIZER, String, String], AUTHORIZER)]);
        t.insert("resource", vec![m(vec![GROUP_CHECK, String], RESOURCE_CHECK)]);
        for f in ["subresource", "namespace", "name", "fieldSelector", "labelSelector"] {
            t.insert(f, vec![m(vec![RESOURCE_CHECK, String], RESOURCE_CHECK)]);
        }
        t.insert("check", vec![m(vec![PATH_CHECK, String], DECISION), m(vec![RESOURCE_CHECK, String], DECISION)]);
        for (f, result) in [("errored", Bool), ("allowed", Bool), ("error", String), ("reason", String)] {
            t.insert(f, vec![m(vec![DECISION], result)]);
        }
        t
    })
}

fn list(t: Type) -> Type {
    Type::list(t)
}

struct Checker<'a> {
    env: &'a Env,
    /// Comprehension variables, innermost last.
    scopes: Vec<(String, Type)>,
    issues: Vec<Issue>,
}

impl Checker<'_> {
    fn error(&mut self, pos: usize, message: String) -> Type {
        self.issues.push(Issue { pos, message });
        Type::Error
    }

    fn lookup(&self, name: &str) -> Option<Type> {
        let local = self.scopes.iter().rev().find(|(n, _)| n == name).map(|(_, t)| t.clone());
        local.or_else(|| self.env.vars.get(name).cloned())
    }

    fn check(&mut self, e: &Expr) -> Type {
        match &e.kind {
            ExprKind::Null => Type::Null,
            ExprKind::Bool(_) => Type::Bool,
            ExprKind::Int(_) => Type::Int,
            ExprKind::Uint(_) => Type::Uint,
            ExprKind::Double(_) => Type::Double,
            ExprKind::String(_) => Type::String,
            ExprKind::Bytes => Type::Bytes,
            ExprKind::Ident(name) => match self.lookup(name) {
                Some(t) => t,
                None => self.error(e.pos, format!("undeclared reference to '{name}' (in container '')")),
            },
            ExprKind::Select { operand, field, test_only, optional } => {
                let t = self.check(operand);
                let field_type = self.select(e.pos, &t, field);
                if *test_only {
                    Type::Bool
                } else if *optional {
                    Type::Dyn
                } else {
                    field_type
                }
            }
            ExprKind::Call { target, function, args } => self.call(e.pos, target.as_deref(), function, args),
            ExprKind::List(items) => {
                let types: Vec<Type> = items.iter().map(|i| self.check(i)).collect();
                Type::list(join(&types))
            }
            ExprKind::Map(entries) => {
                let keys: Vec<Type> = entries.iter().map(|(k, _)| self.check(k)).collect();
                let values: Vec<Type> = entries.iter().map(|(_, v)| self.check(v)).collect();
                Type::map(join(&keys), join(&values))
            }
            ExprKind::Struct { name, fields } => {
                for (_, value) in fields {
                    self.check(value);
                }
                self.error(e.pos, format!("undeclared reference to '{name}' (in container '')"))
            }
            ExprKind::Comprehension { function, range, var, args } => {
                self.comprehension(e.pos, function, range, var, args)
            }
        }
    }

    /// A field of an object or a key of a map.
    fn select(&mut self, pos: usize, t: &Type, field: &str) -> Type {
        match t {
            Type::Dyn | Type::Error => Type::Dyn,
            Type::Object(o) => match o.fields.get(field) {
                Some(f) => f.clone(),
                None => self.error(pos, format!("undefined field '{field}'")),
            },
            Type::Map(_, v) => (**v).clone(),
            other => self.error(pos, format!("type '{other}' does not support field selection")),
        }
    }

    fn call(&mut self, pos: usize, target: Option<&Expr>, function: &str, args: &[Expr]) -> Type {
        // `cel.bind(name, init, body)` (ext.Bindings).
        if let Some(Expr { kind: ExprKind::Ident(ns), .. }) = target {
            if ns == "cel"
                && function == "bind"
                && args.len() == 3
                && self.lookup("cel").is_none()
                && let ExprKind::Ident(var) = &args[0].kind
            {
                let init = self.check(&args[1]);
                self.scopes.push((var.clone(), init));
                let t = self.check(&args[2]);
                self.scopes.pop();
                return t;
            }
            // A namespaced function (`sets.contains(...)`, `math.greatest(...)`).
            let qualified = format!("{ns}.{function}");
            if self.lookup(ns).is_none() && UNTYPED_FUNCTIONS.contains(&qualified.as_str()) {
                args.iter().for_each(|a| {
                    self.check(a);
                });
                return Type::Dyn;
            }
        }
        let receiver = target.map(|t| self.check(t));
        let arg_types: Vec<Type> = args.iter().map(|a| self.check(a)).collect();
        if UNTYPED_FUNCTIONS.contains(&function) && !functions().contains_key(function) {
            return Type::Dyn;
        }
        let Some(overloads) = functions().get(function) else {
            return self.error(pos, format!("undeclared reference to '{function}' (in container '')"));
        };
        let mut all: Vec<Type> = receiver.iter().cloned().collect();
        all.extend(arg_types);
        let member = receiver.is_some();
        let results: Vec<Type> = overloads
            .iter()
            .filter(|o| o.member == member && o.params.len() == all.len())
            .filter_map(|o| resolve(o, &all))
            .collect();
        if results.is_empty() {
            // A name shared with an untyped library function (`indexOf` on a quantity...).
            if UNTYPED_FUNCTIONS.contains(&function) {
                return Type::Dyn;
            }
            let signature = signature(&all, member);
            return self.error(pos, format!("found no matching overload for '{function}' applied to '{signature}'"));
        }
        if results.iter().all(|r| *r == results[0]) { results[0].clone() } else { Type::Dyn }
    }

    fn comprehension(&mut self, pos: usize, function: &str, range: &Expr, var: &str, args: &[Expr]) -> Type {
        let range_type = self.check(range);
        let (key, value) = match &range_type {
            Type::List(t) => (Type::Int, (**t).clone()),
            Type::Map(k, v) => ((**k).clone(), (**v).clone()),
            Type::Dyn | Type::Error => (Type::Dyn, Type::Dyn),
            other => {
                let message = format!(
                    "expression of type '{other}' cannot be range of a comprehension (must be list, map, or dynamic)"
                );
                self.error(range.pos, message);
                (Type::Dyn, Type::Dyn)
            }
        };
        // Two-variable forms (`all(i, v, pred)`): the first names the index or key.
        let two_vars = matches!(args.first(), Some(Expr { kind: ExprKind::Ident(_), .. }))
            && (args.len() == 2 && matches!(function, "all" | "exists" | "exists_one" | "existsOne")
                || args.len() >= 2 && function.starts_with("transform"));
        let single = if matches!(range_type, Type::List(_)) { value.clone() } else { key.clone() };
        let mut pushed = 1;
        if two_vars {
            let ExprKind::Ident(second) = &args[0].kind else { unreachable!("matched above") };
            self.scopes.push((var.to_string(), key));
            self.scopes.push((second.clone(), value));
            pushed = 2;
        } else {
            self.scopes.push((var.to_string(), single.clone()));
        }
        let body: Vec<Type> = args.iter().skip(pushed - 1).map(|a| self.check(a)).collect();
        self.scopes.truncate(self.scopes.len() - pushed);
        let predicate = |c: &mut Self, t: &Type, f: &str, step: Vec<Type>| {
            if !t.is_dyn_or_error() && *t != Type::Bool {
                c.error(pos, format!("found no matching overload for '{f}' applied to '{}'", signature(&step, false)));
            }
        };
        match (function, body.as_slice()) {
            ("all", [.., p]) => predicate(self, p, "_&&_", vec![Type::Bool, p.clone()]),
            ("exists", [.., p]) => predicate(self, p, "_||_", vec![Type::Bool, p.clone()]),
            ("exists_one" | "existsOne", [.., p]) => {
                predicate(self, p, "_?_:_", vec![p.clone(), Type::Int, Type::Int]);
                return Type::Bool;
            }
            ("filter", [p]) => {
                predicate(self, p, "_?_:_", vec![p.clone(), Type::list(single.clone()), Type::list(single.clone())]);
                return Type::list(single);
            }
            ("map", [f]) => return Type::list(f.clone()),
            ("map", [p, f]) => {
                let l = Type::list(f.clone());
                predicate(self, p, "_?_:_", vec![p.clone(), l.clone(), l.clone()]);
                return l;
            }
            _ if function.starts_with("transform") => return Type::Dyn,
            _ => {}
        }
        Type::Bool
    }
}

/// The overload's result for these argument types, or `None` when they do not fit.
fn resolve(overload: &Overload, args: &[Type]) -> Option<Type> {
    let mut bindings: HashMap<&'static str, Type> = HashMap::new();
    for (p, a) in overload.params.iter().zip(args) {
        if !unify(p, a, &mut bindings) {
            return None;
        }
    }
    Some(substitute(&overload.result, &bindings))
}

fn unify(param: &Type, arg: &Type, bindings: &mut HashMap<&'static str, Type>) -> bool {
    if arg.is_dyn_or_error() {
        return true;
    }
    match (param, arg) {
        (Type::Param(name), _) => match bindings.get(name) {
            Some(bound) if bound.is_dyn_or_error() => true,
            Some(bound) => assignable(bound, arg),
            None => {
                bindings.insert(name, arg.clone());
                true
            }
        },
        (Type::Dyn, _) => true,
        (Type::List(p), Type::List(a)) => unify(p, a, bindings),
        (Type::Map(pk, pv), Type::Map(ak, av)) => unify(pk, ak, bindings) && unify(pv, av, bindings),
        (Type::TypeOf(p), Type::TypeOf(a)) => unify(p, a, bindings),
        _ => param == arg,
    }
}

/// Whether a value of `arg` fits where `to` is expected (null fits objects; dyn fits all).
fn assignable(to: &Type, arg: &Type) -> bool {
    match (to, arg) {
        (_, Type::Dyn | Type::Error) | (Type::Dyn | Type::Error, _) => true,
        (Type::Object(_), Type::Null) | (Type::Null, Type::Object(_)) => true,
        (Type::List(a), Type::List(b)) => assignable(a, b),
        (Type::Map(ak, av), Type::Map(bk, bv)) => assignable(ak, bk) && assignable(av, bv),
        _ => to == arg,
    }
}

fn substitute(t: &Type, bindings: &HashMap<&'static str, Type>) -> Type {
    match t {
        Type::Param(name) => bindings.get(name).cloned().unwrap_or(Type::Dyn),
        Type::List(e) => Type::list(substitute(e, bindings)),
        Type::Map(k, v) => Type::map(substitute(k, bindings), substitute(v, bindings)),
        Type::TypeOf(e) => Type::TypeOf(Box::new(substitute(e, bindings))),
        other => other.clone(),
    }
}

/// The common type of a literal's elements: theirs when all agree, else `dyn`.
fn join(types: &[Type]) -> Type {
    match types.first() {
        Some(first) if types.iter().all(|t| t == first) => first.clone(),
        _ => Type::Dyn,
    }
}

/// cel-go's `formatFunctionDeclType` without a result: `(a, b)` or `recv.(a, b)`.
fn signature(args: &[Type], member: bool) -> String {
    let (prefix, rest) = if member { (format!("{}.", args[0]), &args[1..]) } else { (String::new(), args) };
    let list: Vec<String> = rest.iter().map(Type::to_string).collect();
    format!("{prefix}({})", list.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env() -> Env {
        let mut env = Env::new();
        let spec = Type::object("Deployment1.spec", vec![("replicas", Type::Int), ("paused", Type::Bool)]);
        let labels = Type::map(Type::String, Type::String);
        let meta = Type::object("Deployment1.metadata", vec![("name", Type::String), ("labels", labels)]);
        let items = Type::list(Type::object("Deployment1.items.@idx", vec![("name", Type::String)]));
        let object =
            Type::object("Deployment1", vec![("spec", spec), ("metadata", meta), ("items", items), ("foo", Type::Int)]);
        env.declare("object", object.clone());
        env.declare("oldObject", object);
        env.declare("authorizer", authorizer_type());
        env
    }

    fn err(text: &str) -> String {
        compile(&env(), text).expect_err(text).to_string()
    }

    fn ok(text: &str) -> Type {
        compile(&env(), text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn fields_and_overloads() {
        assert_eq!(ok("object.spec.replicas > 1"), Type::Bool);
        assert_eq!(ok("object.spec.replicas > 1.5 && object.spec.paused"), Type::Bool);
        assert_eq!(
            err("object.spec.replicasss > 1"),
            "ERROR: <input>:1:12: undefined field 'replicasss'\n | object.spec.replicasss > 1\n | ...........^"
        );
        assert_eq!(
            err("object.foo == 'bar'"),
            "ERROR: <input>:1:12: found no matching overload for '_==_' applied to '(int, string)'\n | object.foo == 'bar'\n | ...........^"
        );
        assert!(err("params.bar").contains("undeclared reference to 'params' (in container '')"));
        assert!(err("object.spec > 1").contains("applied to '(Deployment1.spec, int)'"));
        assert!(err("object.foo.bar").contains("type 'int' does not support field selection"));
    }

    #[test]
    fn macros_and_libraries() {
        assert_eq!(ok("object.items.all(i, i.name.startsWith('a'))"), Type::Bool);
        assert_eq!(ok("object.items.map(i, i.name)"), Type::list(Type::String));
        assert!(err("object.items.all(i, i.nam == 'a')").contains("undefined field 'nam'"));
        assert!(
            err("object.items.exists(i, 1)").contains("found no matching overload for '_||_' applied to '(bool, int)'")
        );
        assert_eq!(ok("has(object.metadata.labels) && 'a' in object.metadata.labels"), Type::Bool);
        assert_eq!(ok("object.metadata.labels['a'].size() > 0 && size(object.items) == 2"), Type::Bool);
        assert_eq!(ok("quantity('1Gi').isGreaterThan(quantity('1'))"), Type::Dyn);
        assert_eq!(ok("cel.bind(x, object.foo, x + 1)"), Type::Int);
        assert_eq!(ok("sets.contains([1], [1])"), Type::Dyn);
        assert_eq!(ok("int('1') + object.foo"), Type::Int);
        assert_eq!(ok("object.foo == 1 ? 'a' : 'b'"), Type::String);
        assert!(err("nosuch(1)").contains("undeclared reference to 'nosuch' (in container '')"));
    }

    #[test]
    fn authorizer() {
        assert_eq!(ok("authorizer.group('').resource('endpoints').check('create').allowed()"), Type::Bool);
        assert!(
            err("authorizer.allowed()").contains(
                "found no matching overload for 'allowed' applied to 'kubernetes.authorization.Authorizer.()'"
            )
        );
    }
}
