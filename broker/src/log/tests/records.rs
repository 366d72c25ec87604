//! Reading the records of a batch from its raw bytes (`for_each_record`).

use proptest::prelude::*;

use super::super::batch::{set_base_offset, set_log_append_time, CRC_COVERED_FROM};
use super::super::codec::{self, Codec};
use super::super::records::{for_each_header, for_each_record, RecordsError};
use super::super::LogError;
use super::keyed::{raw_batch, TestRecord, NO_PRODUCER};

const CODECS: [Codec; 5] = [Codec::None, Codec::Gzip, Codec::Snappy, Codec::Lz4, Codec::Zstd];

fn sample() -> Vec<TestRecord> {
    let mut with_headers = TestRecord::new(Some(b"k2"), None, 90);
    with_headers.headers =
        vec![(b"a".to_vec(), Some(b"1".to_vec())), (b"a".to_vec(), None), (b"".to_vec(), Some(vec![]))];
    vec![TestRecord::new(Some(b"k1"), Some(b"v1"), 100), with_headers, TestRecord::new(None, Some(&[0; 300]), 1 << 40)]
}

type Seen = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>, Vec<u8>);

fn collect(batch: &[u8]) -> Result<Vec<Seen>, LogError> {
    let mut seen = Vec::new();
    for_each_record(batch, |r| {
        seen.push((r.offset, r.timestamp, r.key.map(<[u8]>::to_vec), r.value.map(<[u8]>::to_vec), r.headers.to_vec()))
    })?;
    Ok(seen)
}

#[test]
fn records_are_read_with_offsets_timestamps_keys_values_and_raw_headers() {
    let records = sample();
    for codec in CODECS {
        let mut batch = raw_batch(&records, codec, NO_PRODUCER);
        set_base_offset(&mut batch, 1000);
        let seen = collect(&batch).expect("parses");
        let expected: Vec<Seen> = records
            .iter()
            .enumerate()
            .map(|(i, r)| (1000 + i as i64, r.timestamp, r.key.clone(), r.value.clone(), r.encoded_headers()))
            .collect();
        assert_eq!(seen, expected, "{codec:?}");
        let mut headers = Vec::new();
        for_each_header(&seen[1].4, |k, v| headers.push((k.to_vec(), v.map(<[u8]>::to_vec)))).expect("headers");
        assert_eq!(headers, records[1].headers, "duplicate keys and null values as written");
    }
}

#[test]
fn log_append_time_batches_give_every_record_the_append_time() {
    let mut batch = raw_batch(&sample(), Codec::Lz4, NO_PRODUCER);
    set_log_append_time(&mut batch, 777);
    let times: Vec<i64> = collect(&batch).expect("parses").iter().map(|s| s.1).collect();
    assert_eq!(times, [777, 777, 777]);
}

/// `batch` with its records section replaced by `section` (uncompressed) and `count` records.
fn with_section(section: &[u8], count: i32, last_offset_delta: i32) -> Vec<u8> {
    let mut batch = raw_batch(&[TestRecord::new(None, None, 0)], Codec::None, NO_PRODUCER);
    batch.truncate(61);
    batch.extend_from_slice(section);
    let batch_length = (batch.len() - 12) as i32;
    batch[8..12].copy_from_slice(&batch_length.to_be_bytes());
    batch[23..27].copy_from_slice(&last_offset_delta.to_be_bytes());
    batch[57..61].copy_from_slice(&count.to_be_bytes());
    let crc = crc32c::crc32c(&batch[CRC_COVERED_FROM..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
    batch
}

#[test]
fn malformed_records_are_errors_naming_the_problem() {
    // A valid record: length 6 (zigzag 12), attributes, timestamp delta 0, offset delta 0,
    // key null (-1, zigzag 1), value null, no headers.
    let good = [12u8, 0, 0, 0, 1, 1, 0];
    let cases: [(&str, Vec<u8>, i32, i32); 7] = [
        ("fewer records than counted", good.to_vec(), 2, 1),
        ("bytes after the last record", [&good[..], &[0]].concat(), 1, 0),
        ("length beyond the section", vec![40, 0, 0, 0, 1, 1, 0], 1, 0),
        ("length shorter than the contents", vec![10, 0, 0, 0, 1, 1, 0], 1, 0),
        ("offset delta beyond the batch", vec![12, 0, 0, 4, 1, 1, 0], 1, 0),
        ("varint too long", vec![0xff, 0xff, 0xff, 0xff, 0xff, 0x01], 1, 0),
        ("key length below -1", vec![12, 0, 0, 0, 3, 1, 0], 1, 0),
    ];
    for (what, section, count, last_offset_delta) in cases {
        let batch = with_section(&section, count, last_offset_delta);
        match collect(&batch) {
            Err(LogError::InvalidRecords { offset: 0, source: RecordsError::Malformed { .. } })
            | Err(LogError::InvalidRecords { offset: 0, source: RecordsError::TrailingBytes { .. } }) => {}
            other => panic!("{what}: {other:?}"),
        }
    }
    assert_eq!(collect(&with_section(&good, 1, 0)).expect("the good record").len(), 1);
    assert!(matches!(collect(&[0; 20]), Err(LogError::InvalidBatch(_))));
}

#[test]
fn a_section_that_decompresses_past_the_cap_is_refused() {
    let bomb = codec::compress(Codec::Gzip, &vec![0; 8 << 20]).expect("compress");
    let mut batch = with_section(&bomb, 1, 0);
    batch[22] |= 1; // gzip
    match collect(&batch) {
        Err(LogError::InvalidRecords { source: RecordsError::DecompressedTooLarge { size, limit, .. }, .. }) => {
            // The stream is cut one byte past the cap: the 8 MiB are never buffered.
            assert_eq!((size, limit), ((1 << 20) + 1, 1 << 20));
        }
        other => panic!("{other:?}"),
    }
}

proptest! {
    #[test]
    fn garbage_records_never_panic(
        section in prop::collection::vec(any::<u8>(), 0..200),
        count in 0i32..5,
        codec in 0u8..5,
    ) {
        let mut batch = with_section(&section, count, count.max(1) - 1);
        batch[22] |= codec;
        let _ = collect(&batch);
    }
}
