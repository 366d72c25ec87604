//! Requirement (log compaction: topic config `cleanup.policy=compact`, the cleaner running every
//! `--log-cleaner-interval-ms`): a compacted topic keeps at least the last record of every key
//! and drops older ones, so a consumer reading from the beginning ends with each key's latest
//! value; a key whose latest record is a tombstone (null value) ends with that tombstone or
//! disappears. Compaction never moves or alters a record it keeps: every record read sits at
//! the offset its producer was told, with the value written there, and offsets only increase.
//! The log end offset is untouched and new records continue from it.
//!
//! The topic: one partition, `segment.bytes=16384`, `min.cleanable.dirty.ratio=0.01`,
//! `delete.retention.ms=100`; the broker's cleaner runs every 200 ms. 300 keys are updated 30
//! times (9,000 records, ~55 segments); every tenth key ends with a tombstone, and every tenth
//! (offset by five) is tombstoned half-way and then written again. The active segment is never
//! cleaned, so it may still hold a few newer duplicates: the check is on each key's LAST record
//! and on the total read being far below what was produced. Once uncompressed, once with lz4
//! batches (which the cleaner must decompress and write back).

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::thread;
use std::time::{Duration, Instant};

use e2e::broker::{BrokerOptions, BrokerProcess};
use e2e::clients::{self, ConsumedRecord, Record};
use e2e::segment;
use rdkafka::producer::Producer;

const KEYS: usize = 300;
const ROUNDS: usize = 30;
const SEGMENT_BYTES: u64 = 16_384;
/// Records a segment may hold at most (no record is stored in fewer than ~40 bytes, even lz4
/// compressed): the slack for the uncleaned active segment and the one being rolled.
const RECORDS_PER_SEGMENT_MAX: usize = SEGMENT_BYTES as usize / 40;
/// What reading from the beginning may return once compaction has caught up.
const MAX_AFTER_COMPACTION: usize = KEYS + 2 * RECORDS_PER_SEGMENT_MAX;
const COMPACTION_TIMEOUT: Duration = Duration::from_secs(45);

/// One record written: key, value (None: a tombstone).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Written {
    key: String,
    value: Option<String>,
}

fn key(k: usize) -> String {
    format!("key-{k:03}")
}

/// A value that compresses about as badly as real data (a scrambled hex tail).
fn value(k: usize, round: usize) -> String {
    let mut x = (k as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (round as u64).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    let mut tail = String::new();
    for _ in 0..4 {
        x ^= x >> 31;
        x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
        tail.push_str(&format!("{x:016x}"));
    }
    format!("k{k:03}-r{round:02}-{tail}")
}

/// The whole history, in production order: rounds of updates to every key (in a scrambled
/// order), tombstones half-way for keys ≡ 5 (mod 10), final tombstones for keys ≡ 0 (mod 10).
fn history() -> Vec<Written> {
    let mut out = Vec::new();
    for round in 0..ROUNDS {
        for i in 0..KEYS {
            let k = (i * 7919) % KEYS;
            out.push(Written { key: key(k), value: Some(value(k, round)) });
            if round == ROUNDS / 2 && k % 10 == 5 {
                out.push(Written { key: key(k), value: None });
            }
        }
    }
    for k in (0..KEYS).filter(|k| k % 10 == 0) {
        out.push(Written { key: key(k), value: None });
    }
    out
}

/// Produces `records` (acks=all, small batches so segments roll often); returns the offset of
/// each, in order.
fn produce(bootstrap: &str, topic: &str, codec: &str, records: &[Written]) -> Vec<i64> {
    let mut config = clients::producer_config(bootstrap, "all");
    config.set("compression.codec", codec).set("batch.size", "4096").set("linger.ms", "1");
    let (producer, log) = clients::tracked_producer(&config).expect("create producer");
    for (id, w) in records.iter().enumerate() {
        let record = Record::with_opaque_to(topic, id).partition(0).key(&w.key);
        let record = match &w.value {
            Some(v) => record.payload(v),
            None => record,
        };
        clients::send_blocking(&producer, record).expect("enqueue");
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
    let reports = log.snapshot();
    assert!(reports.failed.is_empty(), "deliveries failed: {:?}", reports.failed.first());
    let mut offsets = vec![-1; records.len()];
    for d in &reports.acked {
        offsets[d.id] = d.offset;
    }
    assert!(offsets.iter().all(|&o| o >= 0), "every record acknowledged");
    offsets
}

/// Total bytes of the partition's `.log` files.
fn log_bytes(broker: &BrokerProcess, topic: &str) -> u64 {
    let files = segment::log_files(&broker.partition_dir(topic, 0)).expect("list segments");
    files.iter().filter_map(|f| fs::metadata(f).ok()).map(|m| m.len()).sum()
}

/// What a consumer reads, checked against what was written: offsets strictly increase, and
/// each record is exactly the one written at its offset. Returns each key's last record.
fn check_read(records: &[ConsumedRecord], written_at: &HashMap<i64, Written>) -> BTreeMap<String, Option<String>> {
    let mut last_offset = -1;
    let mut last = BTreeMap::new();
    for r in records {
        assert!(r.offset > last_offset, "offset {} read after {last_offset}", r.offset);
        last_offset = r.offset;
        let got = Written { key: r.key_str().to_string(), value: r.value.as_ref().map(|_| r.value_str().to_string()) };
        assert_eq!(written_at.get(&r.offset), Some(&got), "record at offset {} is not the one written there", r.offset);
        last.insert(got.key, got.value);
    }
    last
}

fn compaction_keeps_the_last_record_of_every_key(codec: &str) {
    let broker = BrokerProcess::launch(BrokerOptions {
        extra_args: vec!["--log-cleaner-interval-ms".into(), "200".into()],
        ..BrokerOptions::default()
    })
    .expect("start broker");
    let bootstrap = broker.bootstrap();
    let topic = format!("compacted-{codec}");
    let segment_bytes = SEGMENT_BYTES.to_string();
    clients::create_topic(
        &bootstrap,
        &topic,
        1,
        &[
            ("cleanup.policy", "compact"),
            ("segment.bytes", segment_bytes.as_str()),
            ("min.cleanable.dirty.ratio", "0.01"),
            ("delete.retention.ms", "100"),
        ],
    )
    .expect("create compacted topic");

    let history = history();
    let offsets = produce(&bootstrap, &topic, codec, &history);
    // The baseline is what was written, not the log's size after producing: the cleaner
    // already runs while the records arrive.
    let written_bytes: u64 =
        history.iter().map(|w| (w.key.len() + w.value.as_ref().map_or(0, String::len)) as u64).sum();
    let written_at: HashMap<i64, Written> = offsets.iter().copied().zip(history.iter().cloned()).collect();
    let mut latest: BTreeMap<String, Option<String>> = BTreeMap::new();
    for w in &history {
        latest.insert(w.key.clone(), w.value.clone());
    }
    let end = i64::try_from(history.len()).unwrap();
    assert_eq!(clients::watermarks(&bootstrap, &topic, 0).unwrap(), (0, end), "watermarks before compaction");

    // Poll until compaction has caught up: the log is a fraction of the keys and values written
    // and a read from the beginning returns far fewer records than were produced.
    let started = Instant::now();
    let records = loop {
        let bytes = log_bytes(&broker, &topic);
        let records =
            clients::read_to_end(&bootstrap, &topic, Duration::from_secs(30)).expect("read from the beginning");
        if records.len() <= MAX_AFTER_COMPACTION && bytes * 4 <= written_bytes {
            println!(
                "{codec}: compacted in {:.1?}: {} records read of {} produced, {bytes} bytes on disk for \
                 {written_bytes} bytes of keys and values written",
                started.elapsed(),
                records.len(),
                history.len()
            );
            break records;
        }
        assert!(
            started.elapsed() < COMPACTION_TIMEOUT,
            "{codec}: not compacted within {COMPACTION_TIMEOUT:?}: {} records read (want <= {MAX_AFTER_COMPACTION}) of \
             {} produced, {bytes} bytes on disk (want <= a quarter of the {written_bytes} bytes written)",
            records.len(),
            history.len()
        );
        thread::sleep(Duration::from_millis(500));
    };

    let last = check_read(&records, &written_at);
    for (key, want) in &latest {
        match (want, last.get(key)) {
            (Some(v), Some(Some(got))) => assert_eq!(got, v, "{codec}: {key} ends with an older value"),
            (Some(_), got) => panic!("{codec}: {key} ends with {got:?}, but its last record is a value"),
            (None, None | Some(None)) => {}
            (None, Some(Some(got))) => panic!("{codec}: tombstoned {key} ends with the value {got:?}"),
        }
    }
    assert_eq!(
        clients::watermarks(&bootstrap, &topic, 0).unwrap(),
        (0, end),
        "{codec}: compaction moves neither the log start offset nor the log end offset"
    );

    // Appends carry on at the log end offset, and the newest value wins.
    let more: Vec<Written> = (0..10).map(|k| Written { key: key(k), value: Some(value(k, 99)) }).collect();
    let more_offsets = produce(&bootstrap, &topic, codec, &more);
    assert_eq!(more_offsets, (end..end + 10).collect::<Vec<_>>(), "{codec}: offsets after compaction");
    let mut written_at = written_at;
    written_at.extend(more_offsets.iter().copied().zip(more.iter().cloned()));
    let records = clients::read_to_end(&bootstrap, &topic, Duration::from_secs(30)).expect("read again");
    let last = check_read(&records, &written_at);
    for w in &more {
        assert_eq!(last.get(&w.key), Some(&w.value), "{codec}: {} after a new write", w.key);
    }
}

#[test]
fn compaction_keeps_each_keys_last_record_at_its_offset_and_drops_older_ones() {
    compaction_keeps_the_last_record_of_every_key("none");
}

#[test]
fn compaction_of_lz4_batches_keeps_each_keys_last_record_at_its_offset() {
    compaction_keeps_the_last_record_of_every_key("lz4");
}
