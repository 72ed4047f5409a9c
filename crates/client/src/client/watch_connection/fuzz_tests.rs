//! Generated watch bodies (docs/reliability.md, "Fuzzing"): valid event streams, chunked with random chunk
//! sizes, extensions and trailers and cut into random reads, must give the same events as
//! written; random bytes, mutated and truncated streams, bad or oversized chunk sizes must give
//! events, an end or an error with a clear message, never a panic or a hang.

use proptest::prelude::*;
use serde_json::{Value, json};

use super::{BodyDecoder, EventBody, Head, Target};
use crate::client::Error;
use crate::fuzz::{assert_clear, config};
use crate::http1::chunked::ChunkedDecoder;
use crate::http1::testing::{apply, chunked, chunked_with_offsets, damages};

/// An event as its type and object text, or the error's message.
type Decoded = Result<(String, String), String>;

/// One event line as kube-apiserver writes it.
fn event() -> impl Strategy<Value = (String, String)> {
    let kind = proptest::sample::select(&["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR", "Weird", ""][..]);
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<String>().prop_map(Value::String),
    ];
    let object = leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            proptest::collection::btree_map("[a-zA-Z\n\"]{0,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    });
    (kind, object).prop_map(|(kind, object)| (kind.to_string(), object.to_string()))
}

fn line((kind, object): &(String, String)) -> String {
    format!("{{\"type\":{},\"object\":{object}}}\n", json!(kind))
}

/// Feeds `wire` cut at `cuts` (positions into it) and takes every event as it completes, then
/// the rest once the connection closes. An error ends the body, as it ends the watch.
fn decode(decoder: BodyDecoder, wire: &[u8], cuts: &[usize]) -> (Vec<Decoded>, bool) {
    let mut body = EventBody::new(decoder);
    let mut events = Vec::new();
    let mut take = |body: &mut EventBody| {
        while let Some(event) = body.next_event() {
            events.push(event.map(|e| (e.event_type, e.object.get().to_string())).map_err(|e| e.to_string()));
        }
    };
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (wire.len() + 1)).collect();
    points.extend([0, wire.len()]);
    points.sort_unstable();
    for piece in points.windows(2) {
        if let Err(error) = body.feed(&wire[piece[0]..piece[1]]) {
            assert_clear(&error.to_string());
            take(&mut body);
            return (events, false);
        }
        take(&mut body);
    }
    let complete = body.ended;
    body.ended = true;
    take(&mut body);
    (events, complete)
}

/// What the events of a stream must be: the written ones, objects compacted as serde_json
/// reads them.
fn expected(events: &[(String, String)]) -> Vec<Decoded> {
    events.iter().map(|(kind, object)| Ok((kind.clone(), object.clone()))).collect()
}

fn check_errors(events: &[Decoded]) {
    for error in events.iter().filter_map(|e| e.as_ref().err()) {
        assert_clear(error);
        assert!(error.contains("watch stream"), "{error}");
    }
}

fn chunked_decoder() -> BodyDecoder {
    BodyDecoder::Chunked(ChunkedDecoder::new())
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn valid_streams_decode_to_the_same_events_however_split(
        events in proptest::collection::vec(event(), 0..6),
        sizes in proptest::collection::vec(1usize..64, 1..8),
        cuts in proptest::collection::vec(any::<usize>(), 0..12),
        decorate in any::<bool>(),
        blank_lines in any::<bool>(),
    ) {
        let mut body: String = events.iter().map(line).collect();
        if blank_lines {
            body = body.replace('\n', "\n\r\n \n");
        }
        let want = expected(&events);
        let wire = chunked(body.as_bytes(), &sizes, decorate);
        prop_assert_eq!(decode(chunked_decoder(), &wire, &cuts), (want.clone(), true));
        let length = BodyDecoder::Length(body.len());
        prop_assert_eq!(decode(length, body.as_bytes(), &cuts), (want.clone(), true));
        prop_assert_eq!(decode(BodyDecoder::UntilClose, body.as_bytes(), &cuts).0, want);
    }

    #[test]
    fn damaged_streams_give_a_prefix_of_the_events_and_clear_errors(
        events in proptest::collection::vec(event(), 1..5),
        sizes in proptest::collection::vec(1usize..64, 1..8),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
        damage in damages(),
    ) {
        let body: String = events.iter().map(line).collect();
        let (mut wire, offsets) = chunked_with_offsets(body.as_bytes(), &sizes, false);
        let first_damaged = apply(&mut wire, &damage);
        let (got, _) = decode(chunked_decoder(), &wire, &cuts);
        check_errors(&got);
        // The events whose newline reached the wire before the first damaged byte come through
        // intact and first.
        let mut end = 0;
        let intact = events.iter().take_while(|e| {
            end += line(e).len();
            offsets[end - 1] < first_damaged
        });
        let want = expected(&intact.cloned().collect::<Vec<_>>());
        prop_assert!(got.len() >= want.len(), "{:?} {:?}", got, want);
        prop_assert_eq!(&got[..want.len()], &want[..]);
    }

    #[test]
    fn random_bytes_end_or_fail_clearly(
        wire in proptest::collection::vec(any::<u8>(), 0..512),
        prefix in proptest::sample::select(&["", "5\r\n", "ffffffffffffffff\r\n", "10000000000000000\r\n", "0\r\n", "-1\r\n", "+5\r\n", " 5 \r\n", "5;\r\n", "\r\n"][..]),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let mut bytes = prefix.as_bytes().to_vec();
        bytes.extend_from_slice(&wire);
        check_errors(&decode(chunked_decoder(), &bytes, &cuts).0);
        check_errors(&decode(BodyDecoder::UntilClose, &bytes, &cuts).0);
    }

    #[test]
    fn events_of_any_type_and_object_decode_or_fail_clearly((kind, object) in event()) {
        let raw: super::RawEvent = serde_json::from_str(line(&(kind.clone(), object)).trim()).unwrap();
        let result = crate::client::watch::decode_event::<k8s_openapi::api::core::v1::ConfigMap>(raw);
        if let Err(error) = result {
            let message = error.to_string();
            assert_clear(&message.replace('\n', " "));
            match (kind.as_str(), &error) {
                ("ERROR", Error::Api(_)) => {}
                ("ADDED" | "MODIFIED" | "DELETED" | "BOOKMARK" | "ERROR", Error::Decode(m)) => {
                    assert!(m.contains(&format!("watch {kind} event")), "{m}")
                }
                (other, Error::Decode(m)) => assert!(m.contains("unknown watch event type"), "{other}: {m}"),
                (_, other) => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn answer_heads_and_server_urls_parse_or_fail(head in any::<Vec<u8>>(), text in any::<String>(), url in "(https?|ftp)://[a-z0-9\\[\\]:.%/@?#-]{0,30}") {
        for raw in [head.as_slice(), text.as_bytes(), format!("HTTP/1.1 {text}").as_bytes()] {
            if let Err(error) = Head::parse(raw) {
                assert_clear(&error.to_string());
            }
        }
        for server in [text.as_str(), url.as_str()] {
            if let Err(error) = Target::parse(server) {
                assert_clear(&error.to_string());
            }
        }
    }
}

/// The refusals a watch adds to the chunked decoder's (`crate::http1::chunked`, whose tests
/// hold the framing's), as the watch's errors.
#[test]
fn bad_framing_is_refused() {
    let error = chunked_decoder().decode(b"+5\r\nhello\r\n", &mut Vec::new()).unwrap_err().to_string();
    assert_eq!(error, "bad chunk size \"+5\"");
    let error = Head::parse(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n").err().unwrap().to_string();
    assert_eq!(error, "bad Content-Length \"-1\"");
}

/// A huge announced chunk is data until the 16 MiB bound on one event ends the watch.
#[test]
fn an_oversized_event_ends_the_watch() {
    let mut body = EventBody::new(chunked_decoder());
    body.feed(b"7fffffffffffffff\r\n{\"type\":\"ADDED\",\"object\":\"").unwrap();
    let filler = vec![b'x'; 1024 * 1024];
    let error = (0..20).find_map(|_| body.feed(&filler).err()).expect("the bound");
    assert_eq!(error.to_string(), "watch event larger than 16 MiB");
}
