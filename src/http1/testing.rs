//! Chunked bodies as the fuzz tests of the HTTP/1.1 users write them.

/// `body` as a chunked body: chunks of the given sizes (cycled; the last takes the rest),
/// each with or without an extension and in upper or lower case hex, then trailers.
pub(crate) fn chunked(body: &[u8], sizes: &[usize], decorate: bool) -> Vec<u8> {
    chunked_with_offsets(body, sizes, decorate).0
}

/// [`chunked`], and where each byte of `body` is on the wire.
pub(crate) fn chunked_with_offsets(body: &[u8], sizes: &[usize], decorate: bool) -> (Vec<u8>, Vec<usize>) {
    let mut wire = Vec::new();
    let mut offsets = Vec::new();
    let mut rest = body;
    let mut sizes = sizes.iter().cycle();
    while !rest.is_empty() {
        let size = (*sizes.next().expect("at least one chunk size")).clamp(1, rest.len());
        let head = if decorate { format!("{size:X};name=\"v\"\r\n") } else { format!("{size:x}\r\n") };
        wire.extend_from_slice(head.as_bytes());
        offsets.extend(wire.len()..wire.len() + size);
        wire.extend_from_slice(&rest[..size]);
        wire.extend_from_slice(b"\r\n");
        rest = &rest[size..];
    }
    wire.extend_from_slice(if decorate { b"0\r\nX-Trailer: 1\r\n\r\n" } else { b"0\r\n\r\n" });
    (wire, offsets)
}
