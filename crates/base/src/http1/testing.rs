//! Chunked bodies as the fuzz tests of the HTTP/1.1 users write them.

/// `body` as a chunked body: chunks of the given sizes (cycled; the last takes the rest),
/// each with or without an extension and in upper or lower case hex, then trailers.
pub fn chunked(body: &[u8], sizes: &[usize], decorate: bool) -> Vec<u8> {
    chunked_with_offsets(body, sizes, decorate).0
}

/// [`chunked`], and where each byte of `body` is on the wire.
pub fn chunked_with_offsets(body: &[u8], sizes: &[usize], decorate: bool) -> (Vec<u8>, Vec<usize>) {
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

/// One change to a wire: at a position, a byte replaced (kind 0) or inserted (1), or the wire
/// cut there (2).
pub type Damage = (proptest::sample::Index, u8, u8);

/// One to three changes to a wire.
pub fn damages() -> impl proptest::strategy::Strategy<Value = Vec<Damage>> {
    use proptest::prelude::*;
    proptest::collection::vec((any::<proptest::sample::Index>(), any::<u8>(), 0u8..3), 1..4)
}

/// Applies `damage` to `wire`; returns where its first damaged byte is (its length if none).
pub fn apply(wire: &mut Vec<u8>, damage: &[Damage]) -> usize {
    let mut first_damaged = wire.len();
    for (at, byte, how) in damage {
        if wire.is_empty() {
            break;
        }
        let at = at.index(wire.len());
        first_damaged = first_damaged.min(at);
        match how {
            0 => wire[at] = *byte,
            1 => wire.insert(at, *byte),
            _ => wire.truncate(at),
        }
    }
    first_damaged
}
