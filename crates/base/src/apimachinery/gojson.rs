//! The bytes Go's `encoding/json` `Marshal` writes (Go ≥ 1.22): compact, map keys sorted,
//! strings with the HTML-safe escapes. Where upstream hashes or prints JSON, ours must match it
//! byte for byte.

use serde_json::Value;

/// `json.Marshal` of a value decoded into `interface{}` (objects are Go maps: keys sorted).
pub fn marshal(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// `json.Marshal` of a string.
pub fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    write_string(&mut out, text);
    out
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(out, key);
                out.push(':');
                write_value(out, &map[key]);
            }
            out.push('}');
        }
    }
}

fn write_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_are_sorted_and_html_escaped_as_go_does() {
        let value = json!({"b": [1, true, null], "a": {"z": "x<y>&z", "c": "tab\there\u{8}\u{2028}\u{1}"}});
        assert_eq!(
            marshal(&value),
            r#"{"a":{"c":"tab\there\b\u2028\u0001","z":"x\u003cy\u003e\u0026z"},"b":[1,true,null]}"#
        );
        assert_eq!(string("a\"b\\c\u{c}"), r#""a\"b\\c\f""#);
    }
}
