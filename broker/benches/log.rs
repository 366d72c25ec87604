//! Benchmarks of the partition log on a temporary directory (page cache, no fsync — Kafka's
//! default durability): appends of 1 KiB batches of 100-byte records and of 16 KiB batches,
//! and sequential 1 MiB fetches (index lookup, header walk and the pread of the slice).
//!
//! Run: `cargo bench -p broker --bench log` (`-- --quick` for a fast pass).

use std::hint::black_box;
use std::time::{Duration, Instant};

use broker::log::{Log, LogConfig, TimestampType};
use bytes::{Bytes, BytesMut};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions};

/// One uncompressed batch of `count` records with `value_len`-byte values.
fn batch(count: usize, value_len: usize) -> Vec<u8> {
    let records: Vec<Record> = (0..count)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: kafka_protocol::records::TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32 - 1,
            timestamp: 1_700_000_000_000 + i as i64,
            key: None,
            value: Some(Bytes::from(vec![b'x'; value_len])),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = RecordEncodeOptions { version: 2, compression: Compression::None };
    RecordBatchEncoder::encode(&mut buf, &records, &options).expect("encode bench batch");
    buf.to_vec()
}

/// Bounded disk use: 64 MiB segments, the oldest deleted past 192 MiB.
fn bench_config() -> LogConfig {
    LogConfig { segment_bytes: 64 << 20, retention_bytes: 192 << 20, retention_ms: -1, ..LogConfig::default() }
}

fn bench_append(c: &mut Criterion) {
    let mut group = c.benchmark_group("append");
    // ~1 KiB: 9 records of 100 bytes; 16 KiB: 150 records of 100 bytes.
    for (name, records) in [("1KiB_batch_100B_records", 9), ("16KiB_batch_100B_records", 150)] {
        let mut bytes = batch(records, 100);
        group.throughput(Throughput::Bytes(bytes.len() as u64));
        group.bench_function(name, |b| {
            let dir = tempfile::tempdir().expect("tempdir");
            let mut log = Log::open(dir.path(), bench_config()).expect("open");
            let mut appended: u64 = 0;
            b.iter_custom(|iters| {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(log.append(&mut bytes, 1, TimestampType::CreateTime, 0).expect("append"));
                    appended += 1;
                    if appended.is_multiple_of(4096) {
                        log.enforce_retention(0).expect("retention");
                    }
                }
                start.elapsed()
            });
            log.close().expect("close");
        });
    }
    group.finish();
}

fn bench_read(c: &mut Criterion) {
    let mut group = c.benchmark_group("read");
    group.throughput(Throughput::Bytes(1 << 20));
    for (name, records) in [("1MiB_fetch_of_1KiB_batches", 9), ("1MiB_fetch_of_16KiB_batches", 150)] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = Log::open(dir.path(), bench_config()).expect("open");
        let mut bytes = batch(records, 100);
        while log.size_bytes() < 96 << 20 {
            log.append(&mut bytes, 1, TimestampType::CreateTime, 0).expect("append");
        }
        let end = log.log_end_offset();
        group.bench_function(name, |b| {
            let mut offset = 0;
            b.iter_custom(|iters| {
                let mut elapsed = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    let slice = log.read(offset, 1 << 20, end, true).expect("read").expect("data");
                    let data = black_box(slice.read().expect("pread"));
                    elapsed += start.elapsed();
                    // The next fetch starts after the last whole batch returned.
                    let last = broker::log::batches(&data).last().expect("a batch").expect("whole").0;
                    offset = if last.last_offset() + 1 >= end { 0 } else { last.last_offset() + 1 };
                }
                elapsed
            });
        });
        log.close().expect("close");
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().measurement_time(Duration::from_secs(5));
    targets = bench_append, bench_read
}
criterion_main!(benches);
