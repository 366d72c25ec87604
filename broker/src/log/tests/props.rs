//! Property tests: random logs (batch sizes, record timestamps in any order, codecs,
//! LogAppendTime, segment sizes, index intervals and sizes, DeleteRecords, reopening) checked
//! against a naive linear scan of a model of every batch and record.

use std::fs::OpenOptions;

use kafka_protocol::records::Compression;
use proptest::prelude::*;

use super::super::batch::{batches, BatchHeader};
use super::super::{Log, LogConfig, TimestampType};
use super::{encode, headers, open, read_all, segment_log_path};

const CODECS: [Compression; 5] =
    [Compression::None, Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd];

#[derive(Debug, Clone)]
struct BatchSpec {
    timestamps: Vec<i64>,
    value_len: usize,
    codec: usize,
    log_append_time: bool,
}

fn batch_spec() -> impl Strategy<Value = BatchSpec> {
    (prop::collection::vec(0i64..1000, 1..6), 0usize..400, 0usize..CODECS.len(), prop::bool::weighted(0.15)).prop_map(
        |(timestamps, value_len, codec, log_append_time)| BatchSpec { timestamps, value_len, codec, log_append_time },
    )
}

fn config() -> impl Strategy<Value = LogConfig> {
    (300u64..4000, 0u64..700, 24u64..300).prop_map(|(segment_bytes, index_interval_bytes, segment_index_bytes)| {
        LogConfig { segment_bytes, index_interval_bytes, segment_index_bytes, ..LogConfig::default() }
    })
}

/// What the test appended: each batch's offsets, size and records as (offset, timestamp).
#[derive(Debug)]
struct ModelBatch {
    base: i64,
    last: i64,
    size: usize,
    records: Vec<(i64, i64)>,
}

fn append_all(log: &mut Log, specs: &[BatchSpec]) -> Vec<ModelBatch> {
    let mut model = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let mut bytes = encode(&spec.timestamps, spec.value_len, CODECS[spec.codec]);
        let now_ms = 10_000 + i as i64;
        let timestamp_type =
            if spec.log_append_time { TimestampType::LogAppendTime } else { TimestampType::CreateTime };
        let info = log.append(&mut bytes, 0, timestamp_type, now_ms).expect("append");
        let records = spec
            .timestamps
            .iter()
            .enumerate()
            .map(|(k, t)| (info.first_offset + k as i64, if spec.log_append_time { now_ms } else { *t }))
            .collect();
        model.push(ModelBatch { base: info.first_offset, last: info.last_offset, size: bytes.len(), records });
    }
    model
}

/// The first record at or after the log start with a timestamp >= `target`, by linear scan.
fn naive_offset_for_timestamp(model: &[ModelBatch], log_start: i64, target: i64) -> Option<(i64, i64)> {
    model.iter().flat_map(|b| b.records.iter().copied()).find(|(offset, ts)| *offset >= log_start && *ts >= target)
}

fn check(log: &Log, model: &[ModelBatch], log_start: i64) -> Result<(), TestCaseError> {
    prop_assert_eq!(log.log_start_offset(), log_start);
    prop_assert_eq!(log.log_end_offset(), model.last().map_or(0, |b| b.last + 1));
    for (i, batch) in model.iter().enumerate().filter(|(_, b)| b.last >= log_start) {
        for offset in batch.base.max(log_start)..=batch.last {
            let slice = log.read(offset, 1, i64::MAX, true).expect("read").expect("data");
            let first = BatchHeader::parse(&slice.read().expect("pread")).expect("header");
            prop_assert_eq!(first.base_offset, batch.base, "read at {}", offset);
            prop_assert_eq!(slice.len, batch.size);
        }
        // A bounded fetch: whole consecutive batches within the budget, below the high watermark.
        let budget = 700;
        let high_watermark = model.get(i + 3).map_or(i64::MAX, |b| b.base);
        match log.read(batch.base.max(log_start), budget, high_watermark, false).expect("read") {
            None => prop_assert!(batch.size > budget),
            Some(slice) => {
                prop_assert!(slice.len <= budget);
                let bytes = slice.read().expect("pread");
                let mut expected = model[i..].iter();
                for item in batches(&bytes) {
                    let (header, _) = item.expect("whole batches");
                    let next = expected.next().expect("more batches than appended");
                    prop_assert_eq!((header.base_offset, header.total_size()), (next.base, next.size));
                    prop_assert!(header.last_offset() < high_watermark);
                }
            }
        }
    }
    let mut targets: Vec<i64> = (-1..1002).step_by(7).collect();
    targets.extend(model.iter().flat_map(|b| b.records.iter().map(|(_, t)| *t)));
    targets.extend([9_999, 10_000 + model.len() as i64]);
    for target in targets {
        let found = log.offset_for_timestamp(target).expect("lookup");
        prop_assert_eq!(found, naive_offset_for_timestamp(model, log_start, target), "timestamp {}", target);
    }
    if log_start == 0 {
        let max = model.iter().flat_map(|b| b.records.iter().map(|(_, t)| *t)).max();
        let expected = max.and_then(|max| naive_offset_for_timestamp(model, 0, max).map(|(o, t)| (t, o)));
        prop_assert_eq!(log.max_timestamp_and_offset(), expected);
    }
    let scanned: Vec<i64> = headers(log).iter().map(|h| h.base_offset).collect();
    let appended: Vec<i64> = model.iter().filter(|b| b.last >= log_start).map(|b| b.base).collect();
    prop_assert_eq!(scanned, appended);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    #[test]
    fn reads_and_timestamp_lookups_match_a_linear_scan(
        specs in prop::collection::vec(batch_spec(), 1..50),
        config in config(),
        delete_fraction in 0.0f64..1.0,
        reopen in 0u8..3,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), &config);
        let model = append_all(&mut log, &specs);
        check(&log, &model, 0)?;
        let log_start = if delete_fraction < 0.3 { 0 } else { (delete_fraction * log.log_end_offset() as f64) as i64 };
        prop_assert_eq!(log.delete_records_before(log_start).expect("delete records"), log_start);
        let log = match reopen {
            0 => log,
            1 => {
                log.close().expect("close");
                open(dir.path(), &config)
            }
            _ => {
                drop(log);
                open(dir.path(), &config)
            }
        };
        check(&log, &model, log_start)?;
    }

    #[test]
    fn a_crash_that_tears_the_active_segment_keeps_exactly_the_whole_batches_before_the_cut(
        specs in prop::collection::vec(batch_spec(), 1..40),
        config in config(),
        cut_fraction in 0.0f64..1.0,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = open(dir.path(), &config);
        let model = append_all(&mut log, &specs);
        let active_base = *log.segments.keys().next_back().expect("active");
        let before = read_all(&log);
        drop(log);
        let active: Vec<&ModelBatch> = model.iter().filter(|b| b.base >= active_base).collect();
        let active_size: usize = active.iter().map(|b| b.size).sum();
        let cut = (cut_fraction * active_size as f64) as usize;
        let path = segment_log_path(dir.path(), active_base);
        OpenOptions::new().write(true).open(&path).expect("open").set_len(cut as u64).expect("truncate");

        let (mut kept, mut end) = (0, 0);
        for batch in &active {
            if end + batch.size > cut {
                break;
            }
            end += batch.size;
            kept += 1;
        }
        let expected_end = active.get(kept).map_or_else(|| model.last().map_or(0, |b| b.last + 1), |b| b.base);
        let mut log = open(dir.path(), &config);
        prop_assert_eq!(log.log_end_offset(), expected_end);
        let dropped: usize = active[kept..].iter().map(|b| b.size).sum();
        prop_assert_eq!(read_all(&log), before[..before.len() - dropped].to_vec());
        let mut next = encode(&[1], 10, Compression::None);
        let info = log.append(&mut next, 0, TimestampType::CreateTime, 1).expect("append");
        prop_assert_eq!(info.first_offset, expected_end);
    }
}
