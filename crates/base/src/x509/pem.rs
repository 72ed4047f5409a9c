//! PEM as Go's `encoding/pem` reads and writes it. Which block a reader takes is a security
//! decision: kube-apiserver's CSR validation and admission, `kubectl` and external approvers
//! all read a CSR's first block with `pem.Decode`, so the signer must take that same block —
//! a scan that took a block Go skips as malformed would sign a request nobody else looked at.
//! [`decode`] is therefore a line-for-line port of Go 1.25's `pem.Decode`, not a looser reader.

use base64::Engine;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// One PEM block: its type (the label after `BEGIN`) and decoded bytes. Headers are read and
/// dropped, as every caller of ours ignores them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// The label, e.g. `CERTIFICATE REQUEST`.
    pub label: String,
    /// The base64-decoded body.
    pub der: Vec<u8>,
}

const BEGIN: &[u8] = b"\n-----BEGIN ";
const END: &[u8] = b"\n-----END ";
const DASHES: &[u8] = b"-----";

/// Go's `base64.StdEncoding` as `pem.Decode` uses it: padding required, non-zero trailing bits
/// allowed (Go's decoder is not `Strict`).
const GO_STD_ENCODING: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
);

/// `pem.Decode`: the first well-formed block of `data` and what follows it, or `None` when
/// there is none. Malformed blocks (a BEGIN not at a line start, an END line with more on it,
/// a body that is not base64) are skipped, as Go skips them.
pub fn decode(data: &[u8]) -> Option<(Block, &[u8])> {
    let mut rest = data;
    loop {
        if let Some(after) = rest.strip_prefix(&BEGIN[1..]) {
            rest = after;
        } else {
            let at = find(rest, BEGIN)?;
            rest = &rest[at + BEGIN.len()..];
        }
        let (type_line, after_type) = line(rest);
        rest = after_type;
        let Some(label) = type_line.strip_suffix(DASHES) else { continue };

        let mut has_headers = false;
        loop {
            if rest.is_empty() {
                return None;
            }
            let (header, next) = line(rest);
            if !header.contains(&b':') {
                break;
            }
            has_headers = true;
            rest = next;
        }

        let (end_index, trailer_index) = if !has_headers && rest.starts_with(&END[1..]) {
            (0, END.len() - 1)
        } else {
            match find(rest, END) {
                Some(at) => (at, at + END.len()),
                None => continue,
            }
        };
        let trailer = &rest[trailer_index..];
        let trailer_len = label.len() + DASHES.len();
        if trailer.len() < trailer_len {
            continue;
        }
        let (end_label, rest_of_end_line) = trailer.split_at(trailer_len);
        if !end_label.starts_with(label) || !end_label.ends_with(DASHES) {
            continue;
        }
        if !line(rest_of_end_line).0.is_empty() {
            continue;
        }
        // Go drops spaces and tabs here and its base64 decoder skips CR and LF; anything else
        // that is not base64 makes the block malformed.
        let body: Vec<u8> =
            rest[..end_index].iter().copied().filter(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\n')).collect();
        let Ok(der) = GO_STD_ENCODING.decode(&body) else { continue };
        let (_, after) = line(&rest[end_index + END.len() - 1..]);
        let block = Block { label: String::from_utf8_lossy(label).into_owned(), der };
        return Some((block, after));
    }
}

/// Every block of `input` in order, as repeated calls of `pem.Decode` find them.
pub fn blocks(input: &[u8]) -> Vec<Block> {
    let mut out = Vec::new();
    let mut rest = input;
    while let Some((block, next)) = decode(rest) {
        out.push(block);
        rest = next;
    }
    out
}

/// A PEM block of `label` around `der`, base64 in 64-column lines as Go's `pem.Encode`.
pub fn encode(label: &str, der: &[u8]) -> String {
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// Go's `getLine`: the line (CR LF or LF ended, trailing spaces and tabs trimmed) and the rest.
fn line(data: &[u8]) -> (&[u8], &[u8]) {
    let (mut end, next) = match data.iter().position(|b| *b == b'\n') {
        Some(i) => (i, i + 1),
        None => (data.len(), data.len()),
    };
    if end > 0 && next > end && data[end - 1] == b'\r' {
        end -= 1;
    }
    let mut line = &data[..end];
    while let [head @ .., b' ' | b'\t'] = line {
        line = head;
    }
    (line, &data[next..])
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = "MIIB";

    fn labels(input: &str) -> Vec<(String, Vec<u8>)> {
        blocks(input.as_bytes()).into_iter().map(|b| (b.label, b.der)).collect()
    }

    #[test]
    fn reads_blocks_as_go_does() {
        let block = format!("-----BEGIN A-----\n{BODY}\n-----END A-----\n");
        assert_eq!(labels(&block), [("A".to_string(), vec![0x30, 0x82, 0x01])]);
        // Text before, CRLF line ends, headers, trailing spaces on the BEGIN and END lines.
        let odd = format!(
            "junk\r\n-----BEGIN A-----  \r\nProc-Type: 4,ENCRYPTED\r\n\r\n{BODY}\r\n-----END A----- \t\r\ntrailer"
        );
        assert_eq!(labels(&odd), [("A".to_string(), vec![0x30, 0x82, 0x01])]);
        // Padding bits that are not zero (Go is not strict) and an empty block.
        assert_eq!(labels("-----BEGIN A-----\nMIJ=\n-----END A-----\n")[0].1, [0x30, 0x82]);
        assert_eq!(labels("-----BEGIN A-----\n-----END A-----\n")[0].1, Vec::<u8>::new());
    }

    #[test]
    fn skips_what_go_skips() {
        let good = format!("-----BEGIN B-----\n{BODY}\n-----END B-----\n");
        // Each of these first blocks is malformed for Go, which then reads the second one.
        let malformed = [
            format!("x-----BEGIN A-----\n{BODY}\n-----END A-----\n"),
            format!("-----BEGIN A-----\n{BODY}\n-----END A----- x\n"),
            format!("-----BEGIN A-----{BODY}\n-----END A-----\n"),
            format!("-----BEGIN A-----\n{BODY}\nx-----END A-----\n"),
            format!("-----BEGIN A-----\n{BODY}\x0c\n-----END A-----\n"),
            format!("-----BEGIN A-----\n{BODY}\u{a0}\n-----END A-----\n"),
            format!("-----BEGIN A-----\n{BODY}\n-----END B-----\n"),
            "-----BEGIN A-----\nM=IB\n-----END A-----\n".to_string(),
        ];
        for first in malformed {
            let found = labels(&format!("{first}{good}"));
            assert_eq!(found.first().map(|(l, _)| l.as_str()), Some("B"), "{first:?} must be skipped: {found:?}");
        }
        // CR-only line ends: the BEGIN line runs to the next LF, into the good block, and Go
        // finds no block at all.
        let cr_only = format!("-----BEGIN A-----\r{BODY}\r-----END A-----\r{good}");
        assert_eq!(labels(&cr_only), []);
    }

    #[test]
    fn encodes_in_64_column_lines() {
        let pem = encode("CERTIFICATE", &[0xAB; 60]);
        let lines: Vec<&str> = pem.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], "-----BEGIN CERTIFICATE-----");
        assert_eq!(lines[1].len(), 64);
        assert_eq!(lines[3], "-----END CERTIFICATE-----");
        assert_eq!(blocks(pem.as_bytes())[0].der, [0xAB; 60]);
    }
}
