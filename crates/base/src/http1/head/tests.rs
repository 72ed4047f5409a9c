//! Heads as written and as damaged (docs/reliability.md, "Fuzzing"): a valid head reads and
//! parses back to what was written, whatever its line ends and however much follows it; random
//! and damaged bytes give a head or one clear line, never a panic, and never more than
//! [`MAX_HEAD`] bytes read.

use std::io::{BufReader, Cursor};

use proptest::prelude::*;

use super::*;
use crate::fuzz::{assert_clear, config};
use crate::http1::testing::{apply, damages};

fn header_pair() -> impl Strategy<Value = (String, String)> {
    ("[A-Za-z][A-Za-z0-9-]{0,12}", "[ -~]{0,20}").prop_map(|(n, v)| (n, v.trim().to_string()))
}

fn written(first_line: &str, headers: &[(String, String)], line_end: &str) -> Vec<u8> {
    let mut raw = format!("{first_line}{line_end}");
    for (name, value) in headers {
        raw.push_str(&format!("{name}: {value}{line_end}"));
    }
    raw.push_str(line_end);
    raw.into_bytes()
}

/// Reads a head from `wire` and parses it as a request and as a response; every refusal is
/// one clear line.
fn read_and_parse(wire: &[u8]) {
    let mut reader = BufReader::with_capacity(13, Cursor::new(wire));
    match read(&mut reader) {
        Ok(Some(raw)) => {
            assert!(raw.len() <= MAX_HEAD);
            for result in [whole_request(&raw).map(|h| h.headers), whole_response(&raw).map(|h| h.headers)] {
                match result {
                    Ok(headers) => {
                        if let Err(error) = framing(&headers) {
                            assert_clear(&error.to_string());
                        }
                    }
                    Err(error) => assert_clear(&error.to_string()),
                }
            }
        }
        Ok(None) => {}
        Err(error) => assert_clear(&error.to_string()),
    }
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn valid_heads_read_and_parse_back(
        headers in proptest::collection::vec(header_pair(), 0..12),
        crlf in any::<bool>(),
        blank_lines_before in 0usize..3,
        next in proptest::collection::vec(any::<u8>(), 0..16),
    ) {
        let line_end = if crlf { "\r\n" } else { "\n" };
        let request = written("POST /api/v1/pods?watch=1 HTTP/1.1", &headers, line_end);
        let response = written("HTTP/1.1 201 Created", &headers, line_end);
        for (head, is_request) in [(request, true), (response, false)] {
            let mut wire = line_end.repeat(blank_lines_before).into_bytes();
            wire.extend_from_slice(&head);
            wire.extend_from_slice(&next);
            let mut reader = Cursor::new(wire.as_slice());
            let raw = read(&mut reader).unwrap().expect("a head");
            prop_assert_eq!(&raw, &head);
            prop_assert_eq!(reader.position() as usize, wire.len() - next.len());
            if is_request {
                let parsed = whole_request(&raw).unwrap();
                prop_assert_eq!((parsed.method.as_str(), parsed.target.as_str()), ("POST", "/api/v1/pods?watch=1"));
                prop_assert_eq!(parsed.headers, headers.clone());
            } else {
                let parsed = whole_response(&raw).unwrap();
                prop_assert_eq!(parsed.code, 201);
                prop_assert_eq!(parsed.headers, headers.clone());
            }
        }
    }

    #[test]
    fn damaged_heads_parse_or_fail_clearly(
        headers in proptest::collection::vec(header_pair(), 0..8),
        damage in damages(),
    ) {
        for first_line in ["GET /healthz HTTP/1.1", "HTTP/1.1 200 OK"] {
            let mut wire = written(first_line, &headers, "\r\n");
            apply(&mut wire, &damage);
            read_and_parse(&wire);
        }
    }

    #[test]
    fn random_bytes_parse_or_fail_clearly(wire in proptest::collection::vec(any::<u8>(), 0..600), text in "[ -~\r\n]{0,300}") {
        read_and_parse(&wire);
        read_and_parse(text.as_bytes());
        for raw in [wire.as_slice(), text.as_bytes()] {
            for result in [parse_request(raw).map(|_| ()), parse_response(raw).map(|_| ())] {
                if let Err(error) = result {
                    assert_clear(&error.to_string());
                }
            }
        }
    }
}

#[test]
fn an_endless_head_is_refused_at_its_limit() {
    let endless = vec![b'a'; 200 * 1024];
    let mut reader = Cursor::new(endless.as_slice());
    assert_eq!(read(&mut reader).unwrap_err().to_string(), "a head larger than 65536 bytes");
    assert!(reader.position() as usize <= MAX_HEAD + 1);
    let many_lines = "X-A: 1\r\n".repeat(10_000);
    let mut reader = Cursor::new(many_lines.as_bytes());
    assert_eq!(read(&mut reader).unwrap_err().to_string(), "a head larger than 65536 bytes");
    let cut = b"GET / HTTP/1.1\r\nHost: x";
    assert_eq!(read(&mut &cut[..]).unwrap_err().to_string(), "end of stream inside a head");
    assert_eq!(read(&mut &b""[..]).unwrap(), None);
    assert_eq!(read(&mut &b"\r\n\r\n"[..]).unwrap(), None);
}

#[test]
fn too_many_headers_and_bad_names_are_refused() {
    let many = written("GET / HTTP/1.1", &vec![("X-A".to_string(), "1".to_string()); MAX_HEADERS + 1], "\r\n");
    assert_eq!(whole_request(&many).unwrap_err().to_string(), "a malformed request head: too many headers");
    let spaced = b"HTTP/1.1 200 OK\r\nContent-Length : 3\r\n\r\n";
    assert_eq!(whole_response(spaced).unwrap_err().to_string(), "a malformed response head: invalid header name");
    assert_eq!(
        whole_response(b"SSH-2.0-OpenSSH\r\n\r\n").unwrap_err().to_string(),
        "a malformed response head: invalid HTTP version"
    );
}

#[test]
fn framing_is_read_as_go_reads_it() {
    let headers = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
        pairs.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect()
    };
    let framed = |pairs: &[(&str, &str)]| framing(&headers(pairs)).map_err(|e| e.to_string());
    assert_eq!(framed(&[]), Ok(Framing::Unframed));
    assert_eq!(framed(&[("Content-Length", "12")]), Ok(Framing::Length(12)));
    assert_eq!(framed(&[("content-length", "3"), ("Content-Length", "3")]), Ok(Framing::Length(3)));
    assert_eq!(framed(&[("Transfer-Encoding", "Chunked"), ("Content-Length", "3")]), Ok(Framing::Chunked));
    assert_eq!(framed(&[("Content-Length", "+3")]), Err("bad Content-Length \"+3\"".into()));
    assert_eq!(framed(&[("Content-Length", "-1")]), Err("bad Content-Length \"-1\"".into()));
    assert_eq!(framed(&[("Content-Length", "")]), Err("bad Content-Length \"\"".into()));
    assert_eq!(
        framed(&[("Content-Length", "3"), ("Content-Length", "4")]),
        Err("Content-Length given twice, differently".into())
    );
    assert_eq!(
        framed(&[("Transfer-Encoding", "gzip, chunked")]),
        Err("unsupported Transfer-Encoding \"gzip, chunked\"".into())
    );
    assert_eq!(framed(&[("Transfer-Encoding", "identity")]), Err("unsupported Transfer-Encoding \"identity\"".into()));
}
