//! Requirement (DESIGN §2 "Storage", PROTOCOL "Record batches"): the broker keeps client
//! batches as the bytes that were produced, so what a librdkafka producer sends is exactly what
//! a consumer reads back — every record once, in order within its partition, with its key,
//! value, headers (order and duplicate keys kept, null and empty values kept) and CreateTime
//! timestamp intact — under every compression codec (none, gzip, snappy, lz4, zstd).
//!
//! One broker serves all codecs; each codec gets a fresh 3-partition topic, 200,000 records,
//! acks=all.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use e2e::broker::BrokerProcess;
use e2e::clients::{self, ConsumedRecord, Record};
use rdkafka::message::{Header, OwnedHeaders, Timestamp};
use rdkafka::producer::Producer;

const RECORDS: usize = 200_000;
const PARTITIONS: i32 = 3;
/// Distinct keys; a multiple of PARTITIONS so every partition gets the same number of keys.
const KEYS: usize = 999;
const CODECS: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];
/// Timestamps spread over the ten minutes before the test: realistic (no retention.ms
/// deletes them) and not monotonic, so batches carry negative timestamp deltas too.
const TIMESTAMP_SPREAD_MS: i64 = 600_000;

/// What record number `i` is made of. The value carries the key number and the per-key
/// sequence, which is how the checker finds gaps, duplicates and reordering.
struct Expected {
    key: String,
    value: String,
    partition: i32,
    timestamp: i64,
    headers: Vec<(String, Option<Vec<u8>>)>,
}

fn expected(i: usize, base_ts: i64) -> Expected {
    let k = i % KEYS;
    let seq = i / KEYS;
    let scramble = i64::try_from(i.wrapping_mul(7919) % 600_000).unwrap();
    Expected {
        key: format!("key-{k:04}"),
        value: format!("k={k} seq={seq} {}", "abcdefghij".repeat(1 + i % 12)),
        partition: i32::try_from(k).unwrap() % PARTITIONS,
        timestamp: base_ts + scramble % TIMESTAMP_SPREAD_MS,
        headers: vec![
            ("seq".into(), Some(seq.to_string().into_bytes())),
            ("dup".into(), Some(b"first".to_vec())),
            ("dup".into(), Some(b"second".to_vec())),
            ("empty".into(), Some(Vec::new())),
            ("null".into(), None),
        ],
    }
}

fn owned_headers(headers: &[(String, Option<Vec<u8>>)]) -> OwnedHeaders {
    headers.iter().fold(OwnedHeaders::new_with_capacity(headers.len()), |hs, (key, value)| {
        hs.insert(Header { key, value: value.as_ref() })
    })
}

/// (key number, sequence) from a value written by [`expected`].
fn parse_value(value: &str) -> Option<(usize, usize)> {
    let mut words = value.split(' ');
    let k = words.next()?.strip_prefix("k=")?.parse().ok()?;
    let seq = words.next()?.strip_prefix("seq=")?.parse().ok()?;
    Some((k, seq))
}

fn produce(bootstrap: &str, topic: &str, codec: &str, base_ts: i64) {
    let mut config = clients::producer_config(bootstrap, "all");
    config
        .set("compression.codec", codec)
        .set("linger.ms", "20")
        .set("batch.size", "1000000")
        .set("batch.num.messages", "10000");
    let (producer, log) = clients::tracked_producer(&config).expect("create producer");
    for i in 0..RECORDS {
        let e = expected(i, base_ts);
        let record = Record::with_opaque_to(topic, i)
            .partition(e.partition)
            .key(&e.key)
            .payload(&e.value)
            .timestamp(e.timestamp)
            .headers(owned_headers(&e.headers));
        clients::send_blocking(&producer, record).expect("enqueue record");
    }
    producer.flush(Duration::from_secs(180)).expect("flush");
    let reports = log.snapshot();
    assert!(
        reports.failed.is_empty(),
        "{codec}: {} deliveries failed, first: {:?}",
        reports.failed.len(),
        reports.failed.first()
    );
    assert_eq!(reports.acked.len(), RECORDS, "{codec}: acknowledged records");
}

/// Checks the consumed records against what was produced; returns the problems found.
fn check(records: &[ConsumedRecord], base_ts: i64) -> Vec<String> {
    let mut problems = Vec::new();
    let mut note = |p: String| {
        if problems.len() < 20 {
            problems.push(p);
        }
    };
    if records.len() != RECORDS {
        note(format!("read {} records, produced {RECORDS}", records.len()));
    }
    let mut next_seq = vec![0usize; KEYS];
    let mut last_offset = [-1i64; PARTITIONS as usize];
    for r in records {
        let at = format!("{}@{}", r.partition, r.offset);
        let Some((k, seq)) = parse_value(r.value_str()) else {
            note(format!("{at}: unparsable value {:?}", r.value_str()));
            continue;
        };
        if k >= KEYS {
            note(format!("{at}: key number {k} out of range"));
            continue;
        }
        let slot = usize::try_from(r.partition).unwrap_or(usize::MAX);
        match last_offset.get_mut(slot) {
            Some(last) if r.offset > *last => *last = r.offset,
            Some(last) => note(format!("{at}: offset not above previous {last}")),
            None => note(format!("{at}: partition out of range")),
        }
        if seq != next_seq[k] {
            note(format!("{at}: key {k} seq {seq}, expected {} (lost, duplicated or reordered)", next_seq[k]));
        }
        next_seq[k] = seq + 1;
        let e = expected(seq * KEYS + k, base_ts);
        if r.partition != e.partition {
            note(format!("{at}: key {k} in partition {}, sent to {}", r.partition, e.partition));
        }
        if r.key.as_deref() != Some(e.key.as_bytes()) {
            note(format!("{at}: key {:?}, expected {:?}", r.key_str(), e.key));
        }
        if r.value_str() != e.value {
            note(format!("{at}: value {:?}, expected {:?}", r.value_str(), e.value));
        }
        if r.timestamp != Timestamp::CreateTime(e.timestamp) {
            note(format!("{at}: timestamp {:?}, expected CreateTime({})", r.timestamp, e.timestamp));
        }
        if r.headers != e.headers {
            note(format!("{at}: headers {:?}, expected {:?}", r.headers, e.headers));
        }
    }
    let produced_per_key = |k: usize| (RECORDS - k).div_ceil(KEYS);
    if let Some(k) = (0..KEYS).find(|&k| next_seq[k] != produced_per_key(k)) {
        note(format!("key {k}: read up to seq {}, produced {}", next_seq[k], produced_per_key(k)));
    }
    problems
}

#[test]
fn every_record_roundtrips_intact_with_each_compression_codec() {
    let broker = BrokerProcess::start_default().expect("start broker");
    let bootstrap = broker.bootstrap();
    let now_ms = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap();
    let base_ts = now_ms - TIMESTAMP_SPREAD_MS;
    let mut failures = Vec::new();
    for codec in CODECS {
        let topic = format!("roundtrip-{codec}");
        clients::create_topic(&bootstrap, &topic, PARTITIONS, &[]).expect("create topic");
        let started = Instant::now();
        produce(&bootstrap, &topic, codec, base_ts);
        let produced = started.elapsed();
        let records = clients::read_to_end(&bootstrap, &topic, Duration::from_secs(180))
            .expect("consume the topic to its high watermark");
        let problems = check(&records, base_ts);
        println!(
            "{codec}: produced {RECORDS} in {produced:.1?}, consumed {} in {:.1?}, {} problems",
            records.len(),
            started.elapsed() - produced,
            problems.len()
        );
        if !problems.is_empty() {
            failures.push(format!("{codec}:\n  {}", problems.join("\n  ")));
        }
    }
    assert!(failures.is_empty(), "round trip mismatches:\n{}", failures.join("\n"));
}
