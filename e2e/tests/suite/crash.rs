//! Requirement (DESIGN §2 "Storage" recovery, RELIABILITY P1/P4): a crash loses nothing the
//! broker acknowledged, and recovery after a crash keeps exactly the whole, intact batches.
//!
//! - `acked_records_survive_sigkill_and_restart`: acks=all records acknowledged before (and
//!   around) a SIGKILL are all readable after the restart, each exactly once, at the offset
//!   their delivery report named — over three hard bounces.
//! - `recovery_truncates_a_torn_tail_to_the_last_whole_batch`: with the broker killed, the
//!   active segment is cut at a byte inside one of its last batches; after the restart the
//!   partition holds exactly the records of the whole batches before the cut (computed by
//!   parsing the batch headers of the file here, not by asking the broker), and new records
//!   get the next offsets.
//! - `recovery_drops_a_last_batch_whose_crc_does_not_match`: the same with one flipped byte
//!   inside the CRC-covered part of the last batch.

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::fs::{self, OpenOptions};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use e2e::broker::BrokerProcess;
use e2e::clients::{self, Record};
use e2e::segment::{self, BatchInfo, CRC_START};
use rdkafka::producer::Producer;

const BOUNCES: usize = 3;
const ACKED_BEFORE_KILL: usize = 5_000;
const SENT_AFTER_KILL: usize = 2_000;

#[test]
fn acked_records_survive_sigkill_and_restart() {
    let mut broker = BrokerProcess::start_default().expect("start broker");
    let bootstrap = broker.bootstrap();
    let topic = "crash-acks";
    clients::create_topic(&bootstrap, topic, 3, &[]).expect("create topic");

    let mut values: Vec<String> = Vec::new();
    let mut acked = Vec::new();
    for bounce in 0..BOUNCES {
        let mut config = clients::producer_config(&bootstrap, "all");
        // No retries: a record is written at most once by the client, so any duplicate found
        // later was made by the broker. A shorter timeout settles the records the kill strands.
        config.set("message.send.max.retries", "0").set("linger.ms", "2").set("message.timeout.ms", "20000");
        let (producer, log) = clients::tracked_producer(&config).expect("create producer");
        let first_id = values.len();
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut killed_at = None;
        loop {
            let id = values.len();
            let value = format!("bounce{bounce}-{id}");
            let partition = i32::try_from(id % 3).unwrap();
            let record = Record::with_opaque_to(topic, id).partition(partition).key(&value).payload(&value);
            clients::send_blocking(&producer, record).expect("enqueue");
            values.push(value);
            match killed_at {
                None if log.acked_count() >= ACKED_BEFORE_KILL => {
                    broker.kill().expect("SIGKILL broker");
                    killed_at = Some(values.len());
                }
                Some(at) if values.len() >= at + SENT_AFTER_KILL => break,
                _ => {}
            }
            assert!(Instant::now() < deadline, "bounce {bounce}: producing stalled");
            if killed_at.is_none() && values.len() - first_id > 200 * ACKED_BEFORE_KILL {
                panic!("bounce {bounce}: {} sent but only {} acked", values.len(), log.acked_count());
            }
        }
        broker.restart().expect("restart after SIGKILL");
        producer.flush(Duration::from_secs(60)).expect("flush after restart");
        let reports = log.snapshot();
        println!(
            "bounce {bounce}: sent {}, acked {}, failed {} (acked before kill >= {ACKED_BEFORE_KILL})",
            values.len() - first_id,
            reports.acked.len(),
            reports.failed.len()
        );
        acked.extend(reports.acked);
    }

    let records = clients::read_to_end(&bootstrap, topic, Duration::from_secs(120))
        .expect("read the topic after the last restart");
    let mut at: HashMap<(i32, i64), &str> = HashMap::new();
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for r in &records {
        at.insert((r.partition, r.offset), r.value_str());
        *seen.entry(r.value_str()).or_default() += 1;
    }
    let duplicated: Vec<_> = seen.iter().filter(|(_, &n)| n > 1).take(10).collect();
    assert!(duplicated.is_empty(), "values stored more than once: {duplicated:?}");
    let mut lost = Vec::new();
    for d in &acked {
        let value = values[d.id].as_str();
        if at.get(&(d.partition, d.offset)) != Some(&value) {
            lost.push(format!(
                "{value} acked at {}@{} but found {:?} there",
                d.partition,
                d.offset,
                at.get(&(d.partition, d.offset))
            ));
        }
    }
    assert!(
        lost.is_empty(),
        "{} of {} acknowledged records lost or moved, e.g. {:?}",
        lost.len(),
        acked.len(),
        &lost[..lost.len().min(10)]
    );
    println!("{} acknowledged records all present once; {} records in the log", acked.len(), records.len());
}

// ---------------------------------------------------------------------------------------------
// Recovery from a damaged tail
// ---------------------------------------------------------------------------------------------

const TAIL_RECORDS: usize = 2_000;
const RECORDS_PER_BATCH: usize = 20;

/// A single-partition topic whose contents the test knows offset by offset.
struct KnownPartition {
    broker: BrokerProcess,
    topic: String,
    /// `values[offset]` is the value stored at that offset.
    values: Vec<String>,
}

impl KnownPartition {
    fn start(topic: &str) -> Self {
        let broker = BrokerProcess::start_default().expect("start broker");
        clients::create_topic(&broker.bootstrap(), topic, 1, &[]).expect("create topic");
        let mut known = Self { broker, topic: topic.to_string(), values: Vec::new() };
        let values: Vec<String> = (0..TAIL_RECORDS).map(|i| format!("{topic}-v{i}")).collect();
        known.produce(&values);
        known
    }

    /// Produces `values` in batches of at most RECORDS_PER_BATCH (a flush after each) and
    /// checks they got the next offsets.
    fn produce(&mut self, values: &[String]) {
        let mut config = clients::producer_config(&self.broker.bootstrap(), "all");
        config.set("linger.ms", "100").set("enable.idempotence", "false");
        let (producer, log) = clients::tracked_producer(&config).expect("create producer");
        let first = self.values.len();
        for (n, chunk) in values.chunks(RECORDS_PER_BATCH).enumerate() {
            for (j, value) in chunk.iter().enumerate() {
                let id = first + n * RECORDS_PER_BATCH + j;
                let record = Record::with_opaque_to(&self.topic, id).partition(0).payload(value);
                clients::send_blocking(&producer, record).expect("enqueue");
            }
            producer.flush(Duration::from_secs(30)).expect("flush");
        }
        let reports = log.snapshot();
        assert!(reports.failed.is_empty(), "deliveries failed: {:?}", reports.failed.first());
        for d in &reports.acked {
            assert_eq!(
                d.offset,
                i64::try_from(d.id).unwrap(),
                "record {} got offset {}, the partition had {first} records before",
                d.id,
                d.offset
            );
        }
        self.values.extend_from_slice(values);
    }

    /// The last `.log` file with batches in it, its bytes, and the batches parsed from them.
    fn last_segment(&self) -> (PathBuf, Vec<u8>, Vec<BatchInfo>) {
        let dir = self.broker.partition_dir(&self.topic, 0);
        let mut files = segment::log_files(&dir).expect("list segments");
        assert!(!files.is_empty(), "no .log files in {}", dir.display());
        while let Some(path) = files.pop() {
            let bytes = fs::read(&path).expect("read segment");
            let batches = segment::parse_batches(&bytes);
            if !batches.is_empty() {
                for b in &batches {
                    assert_eq!(b.magic, 2, "batch at {} of {}", b.position, path.display());
                    assert!(b.crc_matches(&bytes), "bad CRC before the test touched {}", path.display());
                }
                return (path, bytes, batches);
            }
        }
        panic!("no segment of {} holds a batch", dir.display());
    }

    /// Restarts and checks that the partition holds exactly `self.values`, then that a new
    /// produce continues at the next offset.
    fn restart_and_verify(&mut self, round: &str) {
        self.broker.restart().expect("restart on the damaged log");
        let bootstrap = self.broker.bootstrap();
        let expected = i64::try_from(self.values.len()).unwrap();
        let (low, high) = clients::watermarks(&bootstrap, &self.topic, 0).expect("watermarks");
        assert_eq!((low, high), (0, expected), "{round}: watermarks after recovery");
        let records =
            clients::read_to_end(&bootstrap, &self.topic, Duration::from_secs(60)).expect("read after recovery");
        let got: Vec<(i64, &str)> = records.iter().map(|r| (r.offset, r.value_str())).collect();
        let want: Vec<(i64, &str)> =
            self.values.iter().enumerate().map(|(o, v)| (i64::try_from(o).unwrap(), v.as_str())).collect();
        if got != want {
            let first_diff = got.iter().zip(&want).position(|(g, w)| g != w);
            panic!(
                "{round}: read {} records, expected {}; first difference at index {first_diff:?}",
                got.len(),
                want.len()
            );
        }
        let more: Vec<String> = (0..10).map(|j| format!("{}-after-{round}-{j}", self.topic)).collect();
        self.produce(&more);
        println!("{round}: recovered {expected} records, next produce at offset {expected}");
    }
}

/// Where to damage the segment, relative to its batches.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// Truncate the file in the middle of the records of the n-th batch from the end.
    CutInsideRecords { from_end: usize },
    /// Truncate the file a few bytes into the header of the n-th batch from the end.
    CutInsideHeader { from_end: usize, at: usize },
    /// Flip one byte in the middle of the last batch's records.
    FlipInLastBatchRecords,
    /// Flip one byte of the last batch's header at this position (CRC_START or later).
    FlipInLastBatchHeader { at: usize },
}

/// Damages the stopped broker's last segment and returns the base offset of the first batch
/// that can no longer be whole: recovery must keep everything before it and nothing after.
fn damage(known: &KnownPartition, how: Damage) -> i64 {
    let (path, bytes, batches) = known.last_segment();
    let nth_from_end = |n: usize| {
        assert!(batches.len() > n, "only {} batches in {}", batches.len(), path.display());
        batches[batches.len() - 1 - n]
    };
    let file = OpenOptions::new().write(true).open(&path).expect("open segment for writing");
    let first_lost = match how {
        Damage::CutInsideRecords { from_end } => {
            let b = nth_from_end(from_end);
            let cut = b.position + segment::BATCH_HEADER_LEN + (b.size() - segment::BATCH_HEADER_LEN) / 2;
            file.set_len(u64::try_from(cut).unwrap()).expect("truncate");
            b
        }
        Damage::CutInsideHeader { from_end, at } => {
            let b = nth_from_end(from_end);
            file.set_len(u64::try_from(b.position + at).unwrap()).expect("truncate");
            b
        }
        Damage::FlipInLastBatchRecords | Damage::FlipInLastBatchHeader { .. } => {
            let b = nth_from_end(0);
            let pos = b.position
                + match how {
                    Damage::FlipInLastBatchHeader { at } => at,
                    _ => segment::BATCH_HEADER_LEN + (b.size() - segment::BATCH_HEADER_LEN) / 2,
                };
            assert!(pos >= b.position + CRC_START && pos < b.end(), "flip outside the CRC range");
            let mut damaged = bytes.clone();
            damaged[pos] ^= 0xFF;
            fs::write(&path, &damaged).expect("write flipped byte");
            let reparsed = segment::parse_batches(&damaged);
            assert!(!reparsed[reparsed.len() - 1].crc_matches(&damaged), "flip left the CRC valid");
            b
        }
    };
    drop(file);
    println!(
        "{how:?}: {} of {} batches of {} kept whole (first lost: base offset {})",
        batches.iter().filter(|b| b.base_offset < first_lost.base_offset).count(),
        batches.len(),
        path.display(),
        first_lost.base_offset
    );
    first_lost.base_offset
}

fn damage_and_recover(topic: &str, rounds: &[Damage]) {
    let mut known = KnownPartition::start(topic);
    let (_, _, batches) = known.last_segment_after_kill();
    let total: i64 = batches.iter().map(|b| i64::from(b.record_count)).sum();
    assert_eq!(
        (batches.last().map(BatchInfo::next_offset), total),
        (Some(i64::try_from(TAIL_RECORDS).unwrap()), i64::try_from(TAIL_RECORDS).unwrap()),
        "the segment must hold every produced record in whole batches before the damage"
    );
    for (n, &how) in rounds.iter().enumerate() {
        if n > 0 {
            known.broker.kill().expect("SIGKILL broker");
        }
        let keep = damage(&known, how);
        known.values.truncate(usize::try_from(keep).unwrap());
        known.restart_and_verify(&format!("round {n}"));
    }
}

impl KnownPartition {
    fn last_segment_after_kill(&mut self) -> (PathBuf, Vec<u8>, Vec<BatchInfo>) {
        // kill() reaps the process, so nothing writes to the files after it returns.
        self.broker.kill().expect("SIGKILL broker");
        self.last_segment()
    }
}

#[test]
fn recovery_truncates_a_torn_tail_to_the_last_whole_batch() {
    damage_and_recover(
        "torn-tail",
        &[
            Damage::CutInsideRecords { from_end: 2 },
            Damage::CutInsideHeader { from_end: 0, at: 7 },
            Damage::CutInsideHeader { from_end: 1, at: 40 },
        ],
    );
}

#[test]
fn recovery_drops_a_last_batch_whose_crc_does_not_match() {
    damage_and_recover(
        "flipped-byte",
        &[
            Damage::FlipInLastBatchRecords,
            // lastOffsetDelta: a broker trusting it before the CRC would invent offsets.
            Damage::FlipInLastBatchHeader { at: CRC_START + 2 },
        ],
    );
}
