//! Go's `fmt` rendering of decoded JSON (`map[string]interface{}` and friends), so that error
//! messages read like kube-apiserver's.

use serde_json::{Number, Value};

/// What Go's `%v` prints for a decoded JSON value: `map[a:1 b:[x y]]`, `<nil>`, ...
pub fn value(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => s.clone(),
        Value::Array(items) => format!("[{}]", items.iter().map(value).collect::<Vec<_>>().join(" ")),
        Value::Object(map) => {
            // fmt prints map keys sorted.
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let entries: Vec<_> = entries.into_iter().map(|(k, v)| format!("{k}:{}", value(v))).collect();
            format!("map[{}]", entries.join(" "))
        }
    }
}

/// What Go's `%s` prints: strings as they are, anything else as `%!s(type=value)`.
pub fn string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "%!s(<nil>)".to_string(),
        other => format!("%!s({}={})", type_name(other), value(other)),
    }
}

/// The Go type a JSON value decodes to in apimachinery (integers become `int64`).
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float64",
        Value::Number(_) => "int64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// The word `encoding/json` uses for a JSON value in "cannot unmarshal X into ...".
pub fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn number(n: &Number) -> String {
    if let Some(i) = n.as_i64() {
        return i.to_string();
    }
    if let Some(u) = n.as_u64() {
        return u.to_string();
    }
    float(n.as_f64().unwrap_or(f64::NAN))
}

/// `%v` of a float64: the shortest representation, with an exponent below 1e-4 and from 1e6.
fn float(f: f64) -> String {
    if f == 0.0 || !f.is_finite() {
        return f.to_string();
    }
    let exponent = f.abs().log10().floor();
    if (-4.0..6.0).contains(&exponent) {
        return f.to_string();
    }
    let scientific = format!("{f:e}");
    let Some((mantissa, exp)) = scientific.split_once('e') else {
        return scientific;
    };
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_like_go() {
        assert_eq!(value(&json!({"b": [1, "x"], "a": null})), "map[a:<nil> b:[1 x]]");
        assert_eq!(value(&json!(1.5)), "1.5");
        assert_eq!(value(&json!(1000000.0)), "1e+06");
        assert_eq!(value(&json!(0.00001)), "1e-05");
        assert_eq!(string(&json!(3)), "%!s(int64=3)");
        assert_eq!(type_name(&json!([])), "[]interface {}");
    }
}
