//! The decoder's cases, and generated bodies (docs/reliability.md, "Fuzzing") given to its three
//! users' ways of reading: pushed in random pieces (the watch client), read whole through a
//! buffer of random size (the secure port) and copied with their framing (the fault proxy).
//! Valid bodies must come out as written, with what follows them left unread; damaged ones
//! must get the same answer from all three, and a refusal must say what was wrong in one line.

use std::io::{BufReader, Cursor};

use proptest::prelude::*;

use super::*;
use crate::fuzz::{assert_clear, config};
use crate::http1::testing::{apply, chunked, chunked_with_offsets, damages};

/// What a way of reading made of a wire: the body's data and how many wire bytes it took, or
/// a refusal (including a wire that ends inside the body).
#[derive(Debug, PartialEq)]
enum Outcome {
    Body { data: Vec<u8>, used: usize },
    Refused,
}

fn refused(error: io::Error) -> Outcome {
    assert_clear(&error.to_string());
    Outcome::Refused
}

/// The watch client's way: `wire` pushed in pieces cut at `cuts`.
fn pushed(wire: &[u8], cuts: &[usize]) -> Outcome {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (wire.len() + 1)).collect();
    points.extend([0, wire.len()]);
    points.sort_unstable();
    let mut decoder = ChunkedDecoder::new();
    let (mut data, mut used) = (Vec::new(), 0);
    for piece in points.windows(2) {
        match decoder.decode(&wire[piece[0]..piece[1]], &mut data) {
            Ok(n) => used += n,
            Err(error) => return refused(error),
        }
    }
    if decoder.is_done() { Outcome::Body { data, used } } else { refused(cut_short()) }
}

/// The secure port's way: read whole through a buffer of `capacity` bytes.
fn read_whole(wire: &[u8], capacity: usize) -> Outcome {
    let mut reader = BufReader::with_capacity(capacity, Cursor::new(wire));
    match read_body(&mut reader, usize::MAX) {
        Ok(data) => Outcome::Body { data, used: reader.get_ref().position() as usize - reader.buffer().len() },
        Err(error) => refused(error),
    }
}

/// The fault proxy's way: copied through a buffer of `capacity` bytes; the copy must be the
/// wire's bytes the body took, and its data is then the pushed decoder's.
fn copied(wire: &[u8], capacity: usize) -> Outcome {
    let mut reader = BufReader::with_capacity(capacity, Cursor::new(wire));
    let mut out = Vec::new();
    match copy_body(&mut reader, &mut out) {
        Ok(()) => {
            let used = reader.get_ref().position() as usize - reader.buffer().len();
            assert_eq!(out, &wire[..used], "the copy is the body's framing as it came");
            match pushed(&out, &[]) {
                Outcome::Body { data, .. } => Outcome::Body { data, used },
                Outcome::Refused => panic!("a copied body that does not decode"),
            }
        }
        Err(error) => refused(error),
    }
}

/// The three ways' outcome, which must be one.
fn agreed(wire: &[u8], cuts: &[usize], capacity: usize) -> Outcome {
    let outcome = pushed(wire, cuts);
    assert_eq!(read_whole(wire, capacity), outcome, "the secure port's reading of {wire:?}");
    assert_eq!(copied(wire, capacity), outcome, "the fault proxy's copy of {wire:?}");
    outcome
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn valid_bodies_come_out_as_written_and_leave_what_follows(
        body in proptest::collection::vec(any::<u8>(), 0..300),
        sizes in proptest::collection::vec(1usize..64, 1..8),
        decorate in any::<bool>(),
        next in proptest::collection::vec(any::<u8>(), 0..16),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
        capacity in 1usize..64,
    ) {
        let mut wire = chunked(&body, &sizes, decorate);
        let used = wire.len();
        wire.extend_from_slice(&next);
        prop_assert_eq!(agreed(&wire, &cuts, capacity), Outcome::Body { data: body, used });
    }

    #[test]
    fn damaged_bodies_get_one_answer_from_all_three(
        body in proptest::collection::vec(any::<u8>(), 1..200),
        sizes in proptest::collection::vec(1usize..64, 1..8),
        damage in damages(),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
        capacity in 1usize..64,
    ) {
        let (mut wire, offsets) = chunked_with_offsets(&body, &sizes, false);
        let first_damaged = apply(&mut wire, &damage);
        if let Outcome::Body { data, .. } = agreed(&wire, &cuts, capacity) {
            // Whatever a damaged wire still gives, the data before the damage is the body's.
            let intact = offsets.iter().take_while(|o| **o < first_damaged).count();
            prop_assert_eq!(&data[..intact.min(data.len())], &body[..intact.min(data.len())]);
        }
    }

    #[test]
    fn random_bytes_get_one_answer_from_all_three(
        wire in proptest::collection::vec(any::<u8>(), 0..512),
        prefix in proptest::sample::select(&["", "5\r\n", "ffffffffffffffff\r\n", "10000000000000000\r\n", "0\r\n", "-1\r\n", "+5\r\n", " 5 \r\n", "5;\r\n", "\r\n", "0\r\nx\n"][..]),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
        capacity in 1usize..64,
    ) {
        let mut bytes = prefix.as_bytes().to_vec();
        bytes.extend_from_slice(&wire);
        agreed(&bytes, &cuts, capacity);
    }
}

/// The refusals, each found or sharpened by generated bodies, the same for the three users.
#[test]
fn bad_framing_is_refused_with_its_reason() {
    let reason = |wire: &[u8]| {
        let error = ChunkedDecoder::new().decode(wire, &mut Vec::new()).unwrap_err().to_string();
        assert_clear(&error);
        assert_eq!(agreed(wire, &[], 7), Outcome::Refused);
        error
    };
    // A sign was taken as part of the size (by the secure port until it shared this decoder);
    // Go's reader takes hex digits only.
    assert_eq!(reason(b"+5\r\nhello\r\n"), "bad chunk size \"+5\"");
    assert_eq!(reason(b"0x5\r\nhello\r\n"), "bad chunk size \"0x5\"");
    assert_eq!(reason(b"\r\n"), "bad chunk size \"\"");
    assert_eq!(reason(b"10000000000000000\r\n"), "bad chunk size \"10000000000000000\"");
    // The two bytes after a chunk's data were skipped whatever they were (by the secure port
    // and the fault proxy until they shared this decoder).
    assert_eq!(reason(b"5\r\nhelloXY5\r\nworld\r\n"), "a chunk's data is not followed by CRLF");
    // Size lines and trailers grew without bound (in the fault proxy).
    assert_eq!(reason(&[b'1'; 5000]), "a chunk-size line longer than 4096 bytes");
    let mut endless = b"0\r\n".to_vec();
    endless.resize(70 * 1024, b'x');
    assert_eq!(reason(&endless), "a chunked body's trailers longer than 65536 bytes");
    let mut many = b"0\r\n".to_vec();
    many.extend(b"X-Trailer: 1\r\n".repeat(5000));
    assert_eq!(reason(&many), "a chunked body's trailers longer than 65536 bytes");
}

#[test]
fn a_short_trailer_line_is_not_the_end() {
    // A one-byte trailer line (`x\n`) was taken for the empty line that ends the trailers.
    let wire = b"3\r\nabc\r\n0\r\nx\n\r\nnext";
    assert_eq!(agreed(wire, &[2, 9], 5), Outcome::Body { data: b"abc".to_vec(), used: wire.len() - 4 });
}

#[test]
fn a_declared_chunk_over_the_limit_is_refused_before_its_data() {
    let huge = b"1\r\na\r\nffffffffffffffff\r\n";
    let error = read_body(&mut &huge[..], 8 * 1024 * 1024).unwrap_err().to_string();
    assert_eq!(error, "a chunk of 18446744073709551615 bytes over the body's limit");
    let at_limit = b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    assert_eq!(read_body(&mut &at_limit[..], 5).unwrap(), b"abcde");
    assert!(read_body(&mut &at_limit[..], 4).is_err());
    let cut = b"3\r\nabc\r\n";
    assert_eq!(read_body(&mut &cut[..], 5).unwrap_err().to_string(), "end of stream inside a chunked body");
}
