//! Property test: random keys, values, tombstones, codecs, segment sizes and rolls; after a
//! forced pass the log holds exactly what a naive model of compaction keeps, in offset order —
//! also after reopening (cleanly, after a crash, or recovering every segment) — and a second
//! pass finds nothing to remove.

use std::fs;

use proptest::prelude::*;

use super::super::codec::Codec;
use super::super::{CompactionConfig, LogConfig};
use super::compaction::{append_records, forced, roll};
use super::keyed::{naive_compaction, stored_records, TestRecord, NO_PRODUCER};
use super::open;

const CODECS: [Codec; 5] = [Codec::None, Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd];

#[derive(Debug, Clone)]
struct BatchSpec {
    /// (key, value length); no key = a record without a key, no value = a tombstone.
    records: Vec<(Option<u8>, Option<usize>)>,
    timestamp: i64,
    codec: usize,
    roll_after: bool,
}

fn batch_spec() -> impl Strategy<Value = BatchSpec> {
    let record = (prop::option::weighted(0.9, 0u8..12), prop::option::weighted(0.8, 0usize..80));
    (prop::collection::vec(record, 1..6), 0i64..1000, 0..CODECS.len(), prop::bool::weighted(0.1))
        .prop_map(|(records, timestamp, codec, roll_after)| BatchSpec { records, timestamp, codec, roll_after })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn compaction_keeps_each_keys_last_record_unless_an_expired_tombstone(
        specs in prop::collection::vec(batch_spec(), 1..60),
        segment_bytes in 200u64..3000,
        delete_retention_ms in 0i64..1000,
        now_ms in 0i64..2000,
        roll_at_end in any::<bool>(),
        reopen in 0u8..3,
    ) {
        let dir = tempfile::tempdir().expect("tempdir");
        let config = LogConfig { segment_bytes, retention_ms: -1, ..LogConfig::default() };
        let mut log = open(dir.path(), &config);
        let mut appended = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let records: Vec<TestRecord> = spec
                .records
                .iter()
                .enumerate()
                .map(|(j, (key, value_len))| {
                    let key = key.map(|k| vec![b'k', k]);
                    let value = value_len.map(|len| format!("{i}.{j}:{}", "x".repeat(len)).into_bytes());
                    TestRecord::new(key.as_deref(), value.as_deref(), spec.timestamp)
                })
                .collect();
            append_records(&mut log, &mut appended, &records, CODECS[spec.codec], NO_PRODUCER);
            if spec.roll_after {
                roll(&mut log);
            }
        }
        if roll_at_end {
            roll(&mut log);
        }
        let active_base = *log.segments.keys().next_back().expect("active segment");
        let log_end_offset = log.log_end_offset();
        let compaction = CompactionConfig { delete_retention_ms, ..CompactionConfig::default() };

        forced(&mut log, now_ms, &compaction);

        let expected: Vec<(i64, TestRecord)> = naive_compaction(&appended, active_base, now_ms, &compaction);
        let check = |log: &super::super::Log| -> Result<(), TestCaseError> {
            let got: Vec<(i64, TestRecord)> = stored_records(log)
                .into_iter()
                .map(|r| (r.offset, TestRecord { key: r.key, value: r.value, headers: Vec::new(), timestamp: r.timestamp }))
                .collect();
            prop_assert_eq!(&got, &expected);
            prop_assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, log_end_offset));
            Ok(())
        };
        check(&log)?;
        if active_base == log_end_offset {
            // Everything was cleanable: at most one record per key.
            let mut keys: Vec<&[u8]> = expected.iter().filter_map(|(_, r)| r.key.as_deref()).collect();
            let count = keys.len();
            keys.sort_unstable();
            keys.dedup();
            prop_assert_eq!(keys.len(), count);
        }
        let mut log = match reopen {
            0 => log,
            1 => {
                log.close().expect("close");
                open(dir.path(), &config)
            }
            _ => {
                drop(log);
                fs::remove_file(dir.path().join("log.checkpoint")).expect("remove");
                open(dir.path(), &config)
            }
        };
        check(&log)?;
        let again = forced(&mut log, now_ms, &compaction);
        prop_assert_eq!(again.records_removed, 0);
        check(&log)?;
    }
}
