//! Requests as real clients send them decode, and whatever decodes re-encodes to bytes that
//! decode to the same request (a stable property, beside the coverage-guided fuzzing of
//! `broker/fuzz`). The frames are the fuzz seed corpus, captured from librdkafka
//! (`broker/fuzz/seeds/kafka_request`, written by e2e's `fuzz_seeds` test); the property
//! mutates them a few bytes at a time.

use std::path::Path;
use std::sync::OnceLock;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::RequestKind;
use proptest::prelude::*;
use proptest::sample::Index;

use super::router::split_request;

fn seeds() -> &'static [Vec<u8>] {
    static SEEDS: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds/kafka_request");
        let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| std::fs::read(entry.expect("seed entry").path()).expect("read a seed"))
            .collect();
        seeds.sort();
        seeds
    })
}

/// Decodes `frame` as the listener would; `None` when it is refused.
fn decode(frame: &[u8]) -> Option<(i16, kafka_protocol::messages::ApiKey, RequestKind)> {
    let mut request = split_request(Bytes::copy_from_slice(frame)).ok()?;
    let kind = RequestKind::decode(request.key, &mut request.body, request.version).ok()?;
    Some((request.version, request.key, kind))
}

#[test]
fn every_request_a_real_client_sent_is_accepted_and_round_trips() {
    assert!(seeds().len() >= 20, "the corpus holds {} frames", seeds().len());
    for seed in seeds() {
        let key = i16::from_be_bytes([seed[0], seed[1]]);
        let version = i16::from_be_bytes([seed[2], seed[3]]);
        let (version, api, kind) =
            decode(seed).unwrap_or_else(|| panic!("API key {key} v{version} ({} bytes) does not decode", seed.len()));
        let mut encoded = BytesMut::new();
        kind.encode(&mut encoded, version).unwrap_or_else(|e| panic!("{api:?} v{version} does not re-encode: {e}"));
        let again = RequestKind::decode(api, &mut encoded.freeze(), version).expect("re-decode");
        assert_eq!(again, kind, "{api:?} v{version}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn what_decodes_re_encodes_to_the_same_request(
        which in any::<Index>(),
        flips in proptest::collection::vec((any::<Index>(), any::<u8>()), 0..4),
    ) {
        let mut frame = which.get(seeds()).clone();
        for (at, xor) in flips {
            let i = at.index(frame.len());
            frame[i] ^= xor;
        }
        if let Some((version, key, kind)) = decode(&frame) {
            let mut encoded = BytesMut::new();
            // A decoded value may hold what its version cannot carry (a mutated field the
            // encoder refuses): refusing is fine, a different request is not.
            if kind.encode(&mut encoded, version).is_ok() {
                let again = RequestKind::decode(key, &mut encoded.freeze(), version);
                prop_assert_eq!(again.ok(), Some(kind));
            }
        }
    }
}
