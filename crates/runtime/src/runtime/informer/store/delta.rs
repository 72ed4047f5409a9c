//! A small LZ77 coder against a reference: the packed body of a pod is mostly the same bytes
//! as its siblings' (same template, same defaults, same status shape), so it is kept as the
//! few ranges that differ plus copies out of a sibling's body.
//!
//! The encoded form is a sequence of operations, each a LEB128 header `h`:
//! - `h & 1 == 0`: a literal run of `h >> 1` bytes, which follow;
//! - `h & 1 == 1`: a copy of `(h >> 1) + MIN_MATCH` bytes from the position that follows (a
//!   LEB128 number) in the *window*: the reference, then the output decoded so far. A copy may
//!   overlap the bytes it produces, as in every LZ77 coder.

use std::sync::{Arc, Weak};

/// The shortest copy worth its header and position.
const MIN_MATCH: usize = 5;
/// Candidates tried per position: the match found is the longest of these.
const MAX_CHAIN: usize = 32;
const HASH_BITS: u32 = 13;
const NONE: u32 = u32::MAX;
/// No object the API server stores comes near this (etcd's limit is 1.5 MiB): a longer
/// output can only come from a corrupt input, which must not exhaust memory.
const MAX_OUTPUT: usize = 16 << 20;

/// Encodes `target` as copies out of `reference` (and of itself) and literals.
pub(super) fn encode(reference: &[u8], target: &[u8]) -> Vec<u8> {
    let window: Vec<u8> = [reference, target].concat();
    let mut chains = Chains::new(window.len());
    for position in 0..reference.len() {
        chains.insert(&window, position);
    }
    encode_window(&mut chains, &window, reference.len())
}

/// How many references [`Encoder`] keeps indexed.
const INDEXED_REFERENCES: usize = 4;

/// [`encode`] with its buffers kept from one call to the next, and the hash chains of the last
/// few references kept: a burst of one controller's pods codes against one reference in a row,
/// and indexing every position of it again for each pod was most of the coding's time (and
/// three large allocations a pod). ~180 KiB in all.
pub(super) struct Encoder {
    window: Vec<u8>,
    chains: Chains,
    /// The last references indexed, the most recently used last.
    indexed: Vec<IndexedReference>,
}

/// The chains of a reference's own positions, as [`encode`] builds them before the target's.
struct IndexedReference {
    /// Held weakly, so that a reference lives no longer than the pods coded against it (a
    /// weak pointer keeps the allocation, so its address is not reused while it is here).
    reference: Weak<[u8]>,
    head: Box<[u32]>,
    previous: Box<[u32]>,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder { window: Vec::new(), chains: Chains::new(0), indexed: Vec::new() }
    }
}

impl Encoder {
    /// The same bytes as [`encode`] gives.
    pub(super) fn encode(&mut self, reference: &Arc<[u8]>, target: &[u8]) -> Vec<u8> {
        self.window.clear();
        self.window.extend_from_slice(reference);
        self.window.extend_from_slice(target);
        self.chains.previous.resize(self.window.len(), NONE);
        match self
            .indexed
            .iter()
            .position(|indexed| std::ptr::addr_eq(indexed.reference.as_ptr(), Arc::as_ptr(reference)))
        {
            Some(found) => {
                let indexed = self.indexed.remove(found);
                self.chains.head.copy_from_slice(&indexed.head);
                self.chains.previous[..reference.len()].copy_from_slice(&indexed.previous);
                self.indexed.push(indexed);
            }
            None => {
                self.chains.head.fill(NONE);
                for position in 0..reference.len() {
                    self.chains.insert(&self.window, position);
                }
                if self.indexed.len() == INDEXED_REFERENCES {
                    self.indexed.remove(0);
                }
                self.indexed.push(IndexedReference {
                    reference: Arc::downgrade(reference),
                    head: self.chains.head.clone().into_boxed_slice(),
                    previous: self.chains.previous[..reference.len()].into(),
                });
            }
        }
        encode_window(&mut self.chains, &self.window, reference.len())
    }
}

/// The coding of `window[reference_len..]`, the chains holding every position before it.
fn encode_window(chains: &mut Chains, window: &[u8], reference_len: usize) -> Vec<u8> {
    let target_len = window.len() - reference_len;
    let mut out = Vec::with_capacity(target_len / 4 + 16);
    let mut literal_start = reference_len;
    let mut position = reference_len;
    while position < window.len() {
        let (start, length) = chains.longest_match(window, position);
        if length < MIN_MATCH {
            chains.insert(window, position);
            position += 1;
            continue;
        }
        put_literals(&mut out, &window[literal_start..position]);
        put_varint(&mut out, (((length - MIN_MATCH) as u64) << 1) | 1);
        put_varint(&mut out, start as u64);
        for p in position..position + length {
            chains.insert(window, p);
        }
        position += length;
        literal_start = position;
    }
    put_literals(&mut out, &window[literal_start..]);
    out
}

/// Why an encoded body does not decode (a corrupt cache entry: never expected).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum DecodeError {
    #[error("a number cut short")]
    NumberCutShort,
    #[error("a number longer than 64 bits")]
    NumberTooLong,
    #[error("a length beyond memory")]
    LengthBeyondMemory,
    #[error("a position beyond memory")]
    PositionBeyondMemory,
    #[error("an output longer than {MAX_OUTPUT} bytes")]
    OutputTooLong,
    #[error("a literal past the end")]
    LiteralPastEnd,
    #[error("a copy from {start}, past the {decoded} bytes decoded")]
    CopyPastWindow { start: usize, decoded: usize },
}

/// Decodes what [`encode`] made of some target against the same `reference`.
pub(super) fn decode(reference: &[u8], encoded: &[u8]) -> Result<Vec<u8>, DecodeError> {
    let mut out = Vec::with_capacity(reference.len().max(encoded.len() * 2));
    let mut input = encoded;
    while !input.is_empty() {
        let header = take_varint(&mut input)?;
        let copy = header & 1 == 1;
        let length = usize::try_from(header >> 1).map_err(|_| DecodeError::LengthBeyondMemory)?
            + if copy { MIN_MATCH } else { 0 };
        if length > MAX_OUTPUT.saturating_sub(out.len()) {
            return Err(DecodeError::OutputTooLong);
        }
        if !copy {
            let (literal, rest) = input.split_at_checked(length).ok_or(DecodeError::LiteralPastEnd)?;
            out.extend_from_slice(literal);
            input = rest;
            continue;
        }
        let start = usize::try_from(take_varint(&mut input)?).map_err(|_| DecodeError::PositionBeyondMemory)?;
        if start >= reference.len() + out.len() {
            return Err(DecodeError::CopyPastWindow { start, decoded: reference.len() + out.len() });
        }
        copy_within_window(reference, &mut out, start, length);
    }
    Ok(out)
}

/// Appends `length` bytes of the window (`reference`, then `out`) from `start < window length`,
/// in runs: a copy that overlaps what it produces repeats the bytes already there.
fn copy_within_window(reference: &[u8], out: &mut Vec<u8>, start: usize, length: usize) {
    let (mut position, end) = (start, start + length);
    if position < reference.len() {
        let stop = end.min(reference.len());
        out.extend_from_slice(&reference[position..stop]);
        position = stop;
    }
    while position < end {
        let from = position - reference.len();
        let run = (out.len() - from).min(end - position);
        out.extend_from_within(from..from + run);
        position += run;
    }
}

/// Hash chains over the window's 4-byte sequences: the most recent position of each hash,
/// and for every position the previous one with the same hash.
struct Chains {
    head: Vec<u32>,
    previous: Vec<u32>,
}

impl Chains {
    fn new(len: usize) -> Chains {
        Chains { head: vec![NONE; 1 << HASH_BITS], previous: vec![NONE; len] }
    }

    fn hash(window: &[u8], position: usize) -> Option<usize> {
        let bytes: [u8; 4] = window.get(position..position + 4)?.try_into().ok()?;
        Some((u32::from_le_bytes(bytes).wrapping_mul(0x9E37_79B1) >> (32 - HASH_BITS)) as usize)
    }

    fn insert(&mut self, window: &[u8], position: usize) {
        if let Some(hash) = Self::hash(window, position) {
            self.previous[position] = self.head[hash];
            self.head[hash] = position as u32;
        }
    }

    /// The longest earlier match for the bytes at `position`: `(start, length)`.
    fn longest_match(&self, window: &[u8], position: usize) -> (usize, usize) {
        let Some(hash) = Self::hash(window, position) else { return (0, 0) };
        let wanted = &window[position..];
        let (mut best_start, mut best_length) = (0, 0);
        let mut candidate = self.head[hash];
        for _ in 0..MAX_CHAIN {
            if candidate == NONE {
                break;
            }
            let start = candidate as usize;
            let length = window[start..].iter().zip(wanted).take_while(|(a, b)| a == b).count();
            if length > best_length {
                (best_start, best_length) = (start, length);
                if length == wanted.len() {
                    break;
                }
            }
            candidate = self.previous[start];
        }
        (best_start, best_length)
    }
}

fn put_literals(out: &mut Vec<u8>, literals: &[u8]) {
    if !literals.is_empty() {
        put_varint(out, (literals.len() as u64) << 1);
        out.extend_from_slice(literals);
    }
}

fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

fn take_varint(input: &mut &[u8]) -> Result<u64, DecodeError> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = input.split_first().ok_or(DecodeError::NumberCutShort)?;
        *input = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(DecodeError::NumberTooLong)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(reference: &[u8], target: &[u8]) -> usize {
        let encoded = encode(reference, target);
        assert_eq!(decode(reference, &encoded).expect("decodes"), target);
        encoded.len()
    }

    /// Deterministic pseudo-random bytes over a small alphabet, so that matches occur.
    fn noise(seed: u64, len: usize) -> Vec<u8> {
        let mut state = seed;
        (0..len)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                b"abcdefgh{}\":,"[(state >> 59) as usize % 13]
            })
            .collect()
    }

    #[test]
    fn round_trips_edge_cases() {
        round_trip(b"", b"");
        round_trip(b"reference", b"");
        round_trip(b"", b"no reference at all");
        round_trip(b"", &[b'x'; 1000]);
        round_trip(b"abc", b"abc");
        // A copy that starts in the reference and runs on into the bytes it produces.
        assert!(round_trip(b"xxab", b"abababababab") <= 6);
        for seed in 0..50 {
            let reference = noise(seed, (seed as usize * 37) % 700);
            let mut target = reference.clone();
            target.truncate(target.len() / 2);
            target.extend(noise(seed + 1000, 300));
            target.extend_from_slice(&reference);
            round_trip(&reference, &target);
            round_trip(&noise(seed, 3), &noise(seed + 7, 2000));
        }
    }

    #[test]
    fn a_sibling_costs_only_its_differences() {
        let pod = |name: &str, ip: &str| {
            format!(
                r#"{{"spec":{{"containers":[{{"name":"app","image":"registry.k8s.io/pause:3.10","env":[{{"name":"A","value":"1"}}]}}],"nodeName":"node-3","volumes":[{{"name":"kube-api-access-{name}"}}]}},"status":{{"phase":"Running","podIP":"{ip}","conditions":[{{"type":"Ready","status":"True"}}]}}}}"#
            )
        };
        let reference = pod("x2kq9", "10.244.1.5");
        let sibling = pod("b7wzt", "10.244.2.17");
        let size = round_trip(reference.as_bytes(), sibling.as_bytes());
        assert!(size < 40, "{size} bytes for a {}-byte sibling", sibling.len());
        assert!(round_trip(reference.as_bytes(), reference.as_bytes()) <= 4, "itself is one copy");
    }

    #[test]
    fn the_encoder_codes_as_encode_does_whether_its_reference_is_indexed_or_not() {
        let references: Vec<Arc<[u8]>> = (0..6).map(|seed| noise(seed, 300 + seed as usize * 50).into()).collect();
        let mut encoder = Encoder::default();
        // Each reference twice in a row (the second from its index), then all again after
        // more than the encoder keeps have pushed the first ones out.
        for round in 0..2 {
            for (i, reference) in references.iter().enumerate() {
                for target in [noise(100 + i as u64, 400), [&reference[..200], &noise(7, 50)[..]].concat()] {
                    let coded = encoder.encode(reference, &target);
                    assert_eq!(coded, encode(reference, &target), "round {round}, reference {i}");
                    assert_eq!(decode(reference, &coded).expect("decodes"), target);
                }
            }
        }
        let shorter: Arc<[u8]> = noise(0, 10).into();
        assert_eq!(encoder.encode(&shorter, b"abcabcabc"), encode(&shorter, b"abcabcabc"), "after longer windows");
    }

    #[test]
    fn corrupt_input_is_an_error_not_a_panic() {
        assert!(decode(b"ref", &[0x80]).is_err(), "a number cut short");
        assert!(decode(b"ref", &[10, b'a']).is_err(), "a literal past the end");
        assert!(decode(b"ref", &[1, 3]).is_err(), "a copy from past the window");
        assert!(decode(b"ref", &[0xff; 11]).is_err(), "a number too long");
        let encoded = encode(b"0123456789", b"0123456789abc");
        for cut in 0..encoded.len() {
            let _ = decode(b"0123456789", &encoded[..cut]);
        }
    }
}
