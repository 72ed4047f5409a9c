//! Go's `strconv.Quote`, which is also what `fmt`'s `%q` prints for a string: Kubernetes quotes
//! names and values this way in error messages, field errors and flag errors.

/// `strconv.Quote`: the text in double quotes with Go's escapes. Printability of non-ASCII
/// characters is approximated (see [`is_print`]); ASCII is exact.
pub fn quote(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for c in text.chars() {
        match c {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\x07' => quoted.push_str("\\a"),
            '\x08' => quoted.push_str("\\b"),
            '\x0c' => quoted.push_str("\\f"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            '\x0b' => quoted.push_str("\\v"),
            ' '..='~' => quoted.push(c),
            c if (c as u32) < 0x80 => quoted.push_str(&format!("\\x{:02x}", c as u32)),
            c if is_print(c) => quoted.push(c),
            c if (c as u32) < 0x10000 => quoted.push_str(&format!("\\u{:04x}", c as u32)),
            c => quoted.push_str(&format!("\\U{:08x}", c as u32)),
        }
    }
    quoted.push('"');
    quoted
}

/// Approximates Go's `unicode.IsPrint` for non-ASCII characters: control, whitespace,
/// private-use and the common format characters are not printable (Go also escapes unassigned
/// code points, which this does not know).
fn is_print(c: char) -> bool {
    let format_or_private = matches!(
        c as u32,
        0xAD | 0x600..=0x605 | 0x61C | 0x6DD | 0x70F | 0x180E | 0x200B..=0x200F | 0x202A..=0x202E
            | 0x2060..=0x206F | 0xE000..=0xF8FF | 0xFEFF | 0xFFF9..=0xFFFB | 0xF0000..
    );
    !c.is_control() && !c.is_whitespace() && !format_or_private
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_as_go_does() {
        assert_eq!(quote("a\tb\u{1}é\u{a0}"), "\"a\\tb\\x01é\\u00a0\"");
        assert_eq!(quote("say \"hi\"\\"), "\"say \\\"hi\\\"\\\\\"");
        assert_eq!(quote("\0\x7f"), "\"\\x00\\x7f\"");
        assert_eq!(quote("\u{feff}\u{f0000}"), "\"\\ufeff\\U000f0000\"");
        assert_eq!(quote("it's"), "\"it's\"");
    }
}
