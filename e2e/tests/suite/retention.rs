//! Requirement (DESIGN §2 "Storage": rolling at `segment.bytes`, retention by
//! `retention.bytes` deleting whole segments): a topic with segment.bytes=16384 and
//! retention.bytes=65536 on a broker that checks retention every 200 ms keeps only a few
//! segments however much is produced, its log start offset (the low watermark clients see
//! through ListOffsets earliest) moves forward as old segments go, and a consumer reading
//! from the beginning starts there.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::thread;
use std::time::{Duration, Instant};

use e2e::broker::{BrokerOptions, BrokerProcess};
use e2e::clients::{self, Record};
use e2e::segment;
use rdkafka::producer::Producer;

const SEGMENT_BYTES: u64 = 16_384;
const RETENTION_BYTES: u64 = 65_536;
/// Segments that may remain: what retention.bytes allows, one partly counted, the active one.
const MAX_SEGMENTS: usize = (RETENTION_BYTES / SEGMENT_BYTES) as usize + 2;
const RECORD_BYTES: usize = 1_000;

fn produce(bootstrap: &str, topic: &str, from: usize, count: usize) {
    let mut config = clients::producer_config(bootstrap, "all");
    // Batches well under segment.bytes, so segments roll at a batch boundary near 16 KiB.
    config.set("batch.size", "4096").set("linger.ms", "1");
    let (producer, log) = clients::tracked_producer(&config).expect("create producer");
    let filler = "r".repeat(RECORD_BYTES - 16);
    for i in from..from + count {
        let value = format!("{i:015} {filler}");
        clients::send_blocking(&producer, Record::with_opaque_to(topic, i).partition(0).payload(&value))
            .expect("enqueue");
    }
    producer.flush(Duration::from_secs(60)).expect("flush");
    assert_eq!((log.acked_count(), log.failed_count()), (count, 0), "deliveries");
}

/// (low watermark, number of .log files, their total bytes).
fn observe(broker: &BrokerProcess, topic: &str) -> (i64, usize, u64) {
    let (low, _) = clients::watermarks(&broker.bootstrap(), topic, 0).expect("watermarks");
    let files = segment::log_files(&broker.partition_dir(topic, 0)).expect("list segments");
    let bytes = files.iter().filter_map(|f| fs::metadata(f).ok()).map(|m| m.len()).sum();
    (low, files.len(), bytes)
}

/// Polls until retention has brought the partition down to MAX_SEGMENTS with the low
/// watermark above `above`, and has settled there (the same low watermark 600 ms — three
/// retention checks — later); returns that low watermark.
fn wait_for_retention(broker: &BrokerProcess, topic: &str, above: i64) -> i64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut candidate: Option<(i64, Instant)> = None;
    loop {
        let (low, segments, bytes) = observe(broker, topic);
        if low > above && segments <= MAX_SEGMENTS {
            match candidate {
                Some((seen, since)) if seen == low && since.elapsed() >= Duration::from_millis(600) => {
                    println!("low watermark {low}, {segments} segments, {bytes} bytes");
                    assert!(
                        bytes <= RETENTION_BYTES + 2 * SEGMENT_BYTES,
                        "{bytes} bytes kept for retention.bytes={RETENTION_BYTES}"
                    );
                    return low;
                }
                Some((seen, _)) if seen == low => {}
                _ => candidate = Some((low, Instant::now())),
            }
        } else {
            candidate = None;
        }
        assert!(
            Instant::now() < deadline,
            "retention did not settle: low watermark {low} (want > {above}), {segments} segments \
             (want <= {MAX_SEGMENTS}), {bytes} bytes"
        );
        thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn retention_bytes_deletes_old_segments_and_moves_the_log_start_offset() {
    let broker =
        BrokerProcess::launch(BrokerOptions { log_retention_check_interval_ms: Some(200), ..BrokerOptions::default() })
            .expect("start broker");
    let bootstrap = broker.bootstrap();
    let topic = "retained";
    let segment_bytes = SEGMENT_BYTES.to_string();
    let retention_bytes = RETENTION_BYTES.to_string();
    clients::create_topic(
        &bootstrap,
        topic,
        1,
        &[("segment.bytes", segment_bytes.as_str()), ("retention.bytes", retention_bytes.as_str())],
    )
    .expect("create topic");

    produce(&bootstrap, topic, 0, 1_000);
    let low = wait_for_retention(&broker, topic, 0);

    produce(&bootstrap, topic, 1_000, 300);
    let later = wait_for_retention(&broker, topic, low);
    assert!(later > low, "the low watermark moved from {low} to {later}");

    let (_, high) = clients::watermarks(&bootstrap, topic, 0).expect("watermarks");
    assert_eq!(high, 1_300, "high watermark");
    let records = clients::read_to_end(&bootstrap, topic, Duration::from_secs(60)).expect("read");
    let first = records.first().map(|r| r.offset);
    assert_eq!(first, Some(later), "a consumer from the beginning starts at the log start offset");
    let contiguous =
        records.iter().zip(later..).all(|(r, o)| r.offset == o && r.value_str().starts_with(&format!("{o:015} ")));
    assert!(contiguous, "records from the log start offset up are all there, in order");
    assert_eq!(i64::try_from(records.len()).unwrap(), high - later, "records retained");
}
