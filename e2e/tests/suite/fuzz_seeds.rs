//! Captures the seed corpora of the fuzz targets (broker/fuzz, docs/fuzzing.md) from real
//! clients: librdkafka's requests as they crossed a proxy in front of a broker (every API a
//! producer, an idempotent and a transactional producer, a consumer group and the admin client
//! send), and the record batches those producers wrote, as the broker stored them (uncompressed
//! and with each codec). Not part of the suite; run it when the clients or APIs change:
//!
//! ```text
//! STROM_BIN=$PWD/target/release/strom cargo test --release -p e2e --test suite \
//!     fuzz_seeds:: -- --ignored --exact fuzz_seeds::capture_fuzz_seed_corpora
//! ```

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::time::Duration;

use e2e::broker::{BrokerOptions, BrokerProcess};
use e2e::clients::{self, Record};
use e2e::proxy::TcpProxy;
use e2e::{segment, wire};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

const TIMEOUT: Duration = Duration::from_secs(30);
/// Frames kept per (API key, version): enough variety, a corpus small enough to commit.
const PER_API_VERSION: usize = 6;
const LARGEST: usize = 64 * 1024;

fn seeds_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../broker/fuzz/seeds").join(target)
}

/// Writes `data` under `dir` named by its hash; returns whether it was new.
fn write_seed(dir: &Path, data: &[u8]) -> bool {
    let mut hasher = DefaultHasher::new();
    data.hash(&mut hasher);
    let path = dir.join(format!("{:016x}", hasher.finish()));
    let new = !path.exists();
    fs::write(&path, data).unwrap();
    new
}

#[test]
#[ignore = "writes broker/fuzz/seeds; run by hand (see the module docs)"]
fn capture_fuzz_seed_corpora() {
    let mut broker = BrokerProcess::new(BrokerOptions::default()).unwrap();
    let proxy = TcpProxy::start(broker.kafka_addr()).unwrap();
    broker.set_advertised_kafka(proxy.addr());
    broker.start().unwrap();
    let bootstrap = proxy.addr().to_string();
    proxy.start_capturing();

    let codecs = ["none", "gzip", "snappy", "lz4", "zstd"];
    for codec in codecs {
        clients::create_topic(&bootstrap, &format!("seeds-{codec}"), 2, &[("cleanup.policy", "delete")]).unwrap();
    }
    for codec in codecs {
        let mut config = clients::producer_config(&bootstrap, "all");
        config.set("compression.codec", codec).set("enable.idempotence", "true");
        let (producer, log) = clients::tracked_producer(&config).unwrap();
        let topic = format!("seeds-{codec}");
        for id in 0..200usize {
            let value = format!("value {id} {}", "x".repeat(id % 50));
            let key = format!("key-{}", id % 7);
            let mut headers = rdkafka::message::OwnedHeaders::new();
            if id % 3 == 0 {
                headers = headers.insert(rdkafka::message::Header { key: "h", value: Some("v") });
            }
            let record = Record::with_opaque_to(&topic, id).key(&key).payload(&value).headers(headers);
            clients::send_blocking(&producer, record).unwrap();
        }
        producer.flush(TIMEOUT).unwrap();
        assert_eq!(log.acked_count(), 200, "{codec}");
    }

    // A transaction (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn).
    let txn: ThreadedProducer<DefaultProducerContext> = clients::producer_config(&bootstrap, "all")
        .set("transactional.id", "seeds-txn")
        .set("message.timeout.ms", "30000")
        .create()
        .unwrap();
    txn.init_transactions(TIMEOUT).unwrap();
    txn.begin_transaction().unwrap();
    for i in 0..10 {
        let value = format!("txn {i}");
        txn.send(BaseRecord::<str, str>::to("seeds-none").key("t").payload(&value)).map_err(|(e, _)| e).unwrap();
    }
    txn.commit_transaction(TIMEOUT).unwrap();

    // A consumer group: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetFetch, Fetch,
    // OffsetCommit, LeaveGroup.
    let mut config = clients::base_config(&bootstrap);
    config.set("group.id", "seeds-group").set("enable.auto.commit", "false").set("auto.offset.reset", "earliest");
    let consumer: BaseConsumer = config.create().unwrap();
    let topics: Vec<String> = codecs.iter().map(|c| format!("seeds-{c}")).collect();
    let topic_refs: Vec<&str> = topics.iter().map(String::as_str).collect();
    consumer.subscribe(&topic_refs).unwrap();
    let mut read = 0;
    let deadline = std::time::Instant::now() + TIMEOUT;
    while read < 1000 && std::time::Instant::now() < deadline {
        if let Some(Ok(_)) = consumer.poll(Duration::from_millis(100)) {
            read += 1;
            if read % 100 == 0 {
                consumer.commit_consumer_state(CommitMode::Sync).unwrap();
            }
        }
    }
    assert!(read >= 1000, "read {read}");
    consumer.unsubscribe();
    drop(consumer);
    // Admin: DescribeConfigs, CreatePartitions, DeleteTopics, ListOffsets via watermarks.
    clients::topic_configs(&bootstrap, "seeds-none").unwrap();
    clients::watermarks(&bootstrap, "seeds-gzip", 0).unwrap();
    let admin = clients::admin_client(&bootstrap).unwrap();
    let new_parts = rdkafka::admin::NewPartitions::new("seeds-lz4", 3);
    clients::block_on(admin.create_partitions(&[new_parts], &clients::admin_options())).unwrap().unwrap();
    clients::block_on(admin.delete_topics(&["seeds-lz4"], &clients::admin_options())).unwrap().unwrap();
    std::thread::sleep(Duration::from_millis(500));

    // Requests, a few per API and version, largest last dropped.
    let requests = seeds_dir("kafka_request");
    fs::create_dir_all(&requests).unwrap();
    let mut kept: BTreeMap<(i16, i16), usize> = BTreeMap::new();
    let mut seen = HashSet::new();
    for connection in proxy.take_captured() {
        for frame in wire::split_frames(&connection) {
            if frame.len() < 4 || frame.len() > LARGEST || !seen.insert(frame.clone()) {
                continue;
            }
            let key = (i16::from_be_bytes([frame[0], frame[1]]), i16::from_be_bytes([frame[2], frame[3]]));
            let count = kept.entry(key).or_default();
            if *count < PER_API_VERSION {
                *count += 1;
                write_seed(&requests, &frame);
            }
        }
    }
    eprintln!("request seeds per (api key, version): {kept:?}");
    assert!(kept.len() >= 15, "expected many APIs, got {kept:?}");

    // Batches as stored, one to three per seed; each compressed batch's records section
    // (after the 61-byte header) as a decompress seed, its codec first.
    broker.terminate().unwrap();
    let (batches_dir, decompress_dir) = (seeds_dir("record_batch"), seeds_dir("decompress"));
    fs::create_dir_all(&batches_dir).unwrap();
    fs::create_dir_all(&decompress_dir).unwrap();
    let (mut batch_seeds, mut compressed_seeds) = (0, 0);
    for codec in ["none", "gzip", "snappy", "zstd"] {
        for partition in 0..2 {
            for file in segment::log_files(&broker.partition_dir(&format!("seeds-{codec}"), partition)).unwrap() {
                let bytes = fs::read(&file).unwrap();
                let batches = segment::parse_batches(&bytes);
                for (i, group) in batches.chunks(3).enumerate().take(4) {
                    let (start, end) = (group[0].position, group[group.len() - 1].end());
                    if end - start <= LARGEST && write_seed(&batches_dir, &bytes[start..end]) {
                        batch_seeds += 1;
                    }
                    let first = &group[0];
                    let codec_id = first.attributes & 7;
                    if codec_id != 0 && i < 2 {
                        let mut seed = vec![u8::try_from(codec_id).unwrap()];
                        seed.extend_from_slice(&bytes[first.position + 61..first.end()]);
                        if write_seed(&decompress_dir, &seed) {
                            compressed_seeds += 1;
                        }
                    }
                }
            }
        }
    }
    eprintln!("{batch_seeds} batch seeds, {compressed_seeds} decompress seeds");
    assert!(batch_seeds > 0 && compressed_seeds > 0);
    internal_seeds();
}

/// The internal port's messages, built as a broker builds them (the first byte picks the
/// message, as in fuzz_targets/internal_message.rs). gRPC over HTTP/2 is not worth capturing
/// off the wire for this: prost encodes the same bytes.
fn internal_seeds() {
    use prost::Message;
    use strom_proto::{controller, raft, replication};
    let dir = seeds_dir("internal_message");
    fs::create_dir_all(&dir).unwrap();
    let vote = br#"{"vote":{"leader_id":{"term":3,"node_id":1},"committed":false},"last_log_id":{"leader_id":{"term":2,"node_id":0},"index":41}}"#;
    let append = br#"{"vote":{"leader_id":{"term":3,"node_id":1},"committed":true},"prev_log_id":{"leader_id":{"term":3,"node_id":1},"index":41},"entries":[],"leader_commit":{"leader_id":{"term":3,"node_id":1},"index":41}}"#;
    let raft_request = raft::RaftRequest { cluster_id: "c-1".into(), from_node: 1, body: vote.to_vec().into() };
    let fetch = replication::FetchRequest {
        replica_id: 2,
        broker_epoch: 7,
        max_wait_ms: 500,
        max_bytes: 1 << 20,
        partitions: vec![replication::PartitionFetch {
            topic_id: "5f8e3a1c-0000-4000-8000-000000000001".into(),
            topic: "orders".into(),
            partition: 0,
            current_leader_epoch: 3,
            fetch_offset: 1200,
            last_fetched_epoch: 3,
            max_bytes: 1 << 20,
        }],
    };
    let heartbeat =
        controller::BrokerHeartbeatRequest { broker_id: 2, broker_epoch: 7, applied_index: 41, want_shutdown: false };
    let seeds: [(u8, Vec<u8>); 6] = [
        (0, raft_request.encode_to_vec()),
        (2, append.to_vec()),
        (3, vote.to_vec()),
        (5, fetch.encode_to_vec()),
        (8, heartbeat.encode_to_vec()),
        (0, raft::RaftRequest { body: append.to_vec().into(), ..raft_request.clone() }.encode_to_vec()),
    ];
    for (which, body) in seeds {
        let mut seed = vec![which];
        seed.extend_from_slice(&body);
        write_seed(&dir, &seed);
    }
}
