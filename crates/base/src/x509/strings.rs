//! ASN.1 string values of a Name, read as Go reads them. Go has two readers, and they differ:
//! a certificate's subject goes through `crypto/x509`'s `parseASN1String` (T61String as
//! Latin-1, an unknown string type is an error), a certificate request's through
//! `encoding/asn1` into `any` (T61String kept as raw bytes, BMPString decoded, a value of
//! another type is not a string and the attribute is ignored). A subject read differently from
//! Go names a different user, so each reader here follows its Go counterpart exactly.

/// A string value as a certificate request's subject holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestValue {
    /// Text.
    Text(String),
    /// Not a string (another type): Go's `FillFromRDNSequence` ignores the attribute.
    Ignored,
}

/// A value Go's reader refuses: the whole request or certificate does not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid {0}")]
pub struct InvalidString(pub &'static str);

const UTF8_STRING: u8 = 0x0c;
const NUMERIC_STRING: u8 = 0x12;
const PRINTABLE_STRING: u8 = 0x13;
const T61_STRING: u8 = 0x14;
const IA5_STRING: u8 = 0x16;
const BMP_STRING: u8 = 0x1e;

/// `encoding/asn1`'s reading of a value of tag `tag` into `any`, then `.(string)`.
pub fn request_value(tag: u8, content: &[u8]) -> Result<RequestValue, InvalidString> {
    let text = |bytes: &[u8]| RequestValue::Text(String::from_utf8_lossy(bytes).into_owned());
    Ok(match tag {
        PRINTABLE_STRING if content.iter().all(|b| is_printable(*b, true)) => text(content),
        PRINTABLE_STRING => return Err(InvalidString("PrintableString")),
        NUMERIC_STRING if content.iter().all(|b| b.is_ascii_digit() || *b == b' ') => text(content),
        NUMERIC_STRING => return Err(InvalidString("NumericString")),
        IA5_STRING if content.is_ascii() => text(content),
        IA5_STRING => return Err(InvalidString("IA5String")),
        UTF8_STRING => match std::str::from_utf8(content) {
            Ok(s) => RequestValue::Text(s.to_string()),
            Err(_) => return Err(InvalidString("UTF-8 string")),
        },
        T61_STRING => RequestValue::Text(latin1(content)),
        BMP_STRING => RequestValue::Text(bmp_lenient(content)?),
        _ => RequestValue::Ignored,
    })
}

/// `crypto/x509`'s `parseASN1String`, for a certificate's subject.
pub fn certificate_value(tag: u8, content: &[u8]) -> Result<String, InvalidString> {
    match tag {
        T61_STRING => Ok(latin1(content)),
        PRINTABLE_STRING if content.iter().all(|b| is_printable(*b, true)) => Ok(ascii(content)),
        PRINTABLE_STRING => Err(InvalidString("PrintableString")),
        UTF8_STRING => std::str::from_utf8(content).map(str::to_string).map_err(|_| InvalidString("UTF-8 string")),
        BMP_STRING => bmp_strict(content),
        IA5_STRING if content.is_ascii() => Ok(ascii(content)),
        IA5_STRING => Err(InvalidString("IA5String")),
        NUMERIC_STRING if content.iter().all(|b| b.is_ascii_digit() || *b == b' ') => Ok(ascii(content)),
        NUMERIC_STRING => Err(InvalidString("NumericString")),
        _ => Err(InvalidString("string type")),
    }
}

fn ascii(content: &[u8]) -> String {
    latin1(content)
}

/// T.61 read as Latin-1, as Go and BoringSSL read it.
fn latin1(content: &[u8]) -> String {
    content.iter().map(|b| char::from(*b)).collect()
}

/// `encoding/asn1`'s `isPrintable`, with `*` and `&` allowed as its parser allows them.
fn is_printable(b: u8, lenient: bool) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(b, b' ' | b'\'' | b'(' | b')' | b'+' | b',' | b'-' | b'.' | b'/' | b':' | b'=' | b'?')
        || (lenient && matches!(b, b'*' | b'&'))
}

/// The UCS-2 code units of a BMPString, without a trailing NUL terminator.
fn bmp_units(content: &[u8]) -> Result<Vec<u16>, InvalidString> {
    if !content.len().is_multiple_of(2) {
        return Err(InvalidString("BMPString"));
    }
    let content = content.strip_suffix(&[0, 0]).unwrap_or(content);
    Ok(content.chunks_exact(2).map(|p| u16::from_be_bytes([p[0], p[1]])).collect())
}

/// `encoding/asn1`'s `parseBMPString`: UTF-16, unpaired surrogates replaced.
fn bmp_lenient(content: &[u8]) -> Result<String, InvalidString> {
    Ok(char::decode_utf16(bmp_units(content)?).map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER)).collect())
}

/// `crypto/x509`'s BMPString: UCS-2 only (no surrogates, no noncharacters).
fn bmp_strict(content: &[u8]) -> Result<String, InvalidString> {
    let units = bmp_units(content)?;
    let refused = |u: &u16| matches!(u, 0xfffe | 0xffff | 0xfdd0..=0xfdef | 0xd800..=0xdfff);
    if units.iter().any(refused) {
        return Err(InvalidString("BMPString"));
    }
    Ok(char::decode_utf16(units).map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_read_strings_as_encoding_asn1() {
        assert_eq!(request_value(0x13, b"a*&b"), Ok(RequestValue::Text("a*&b".into())));
        assert_eq!(request_value(0x13, b"a@b"), Err(InvalidString("PrintableString")));
        assert_eq!(request_value(0x1e, &[0, b'h', 0, b'i', 0, 0]), Ok(RequestValue::Text("hi".into())));
        assert_eq!(request_value(0x1e, &[0, b'h', 0]), Err(InvalidString("BMPString")));
        assert_eq!(request_value(0x14, b"caf\xe9"), Ok(RequestValue::Text("café".into())), "T61String as Latin-1");
        assert_eq!(request_value(0x1a, b"visible"), Ok(RequestValue::Ignored), "VisibleString is not a Go string");
        assert_eq!(request_value(0x0c, b"\xff"), Err(InvalidString("UTF-8 string")));
    }

    #[test]
    fn certificates_read_strings_as_crypto_x509() {
        assert_eq!(certificate_value(0x14, b"caf\xe9"), Ok("café".into()), "T61String as Latin-1");
        assert_eq!(certificate_value(0x1e, &[0xd8, 0x00]), Err(InvalidString("BMPString")));
        assert_eq!(certificate_value(0x1a, b"visible"), Err(InvalidString("string type")));
        assert_eq!(certificate_value(0x16, b"a@b"), Ok("a@b".into()));
    }
}
