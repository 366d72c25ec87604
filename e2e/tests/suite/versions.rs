//! Requirement (PROTOCOL "Framing and handshake", "What each client calls"): every version of
//! an API that the broker advertises in ApiVersions is one it can actually answer. Clients of
//! different ages pick different versions (Debian's kcat 1.7.1 on librdkafka 2.0.2 uses older
//! ones than rdkafka 0.39), and a response field that does not exist in the chosen version
//! must be left out, not make the broker drop the connection.
//!
//! For the client-facing APIs (ApiVersions, Metadata, Produce, Fetch, ListOffsets,
//! DescribeConfigs, InitProducerId, DescribeCluster, DescribeQuorum) each advertised version that the
//! `kafka-protocol` crate can encode is sent once on a raw connection with a meaningful request
//! (a real topic with records in it), and the answer must decode at that version and report
//! no error.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Result};
use bytes::{Bytes, BytesMut};
use e2e::broker::BrokerProcess;
use e2e::clients::{self, Record};
use e2e::wire::{self, Conn};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::metadata_response::MetadataResponseTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, DescribeClusterRequest, DescribeClusterResponse,
    DescribeConfigsRequest, DescribeConfigsResponse, DescribeQuorumRequest, DescribeQuorumResponse, FetchRequest,
    FetchResponse, InitProducerIdRequest, InitProducerIdResponse, ListOffsetsRequest, ListOffsetsResponse,
    MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record as BatchRecord, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use rdkafka::producer::Producer;

const TOPIC: &str = "versions";
const EARLIEST: i64 = -2;
const LATEST: i64 = -1;

/// One raw connection that sends requests and reads their answers in order.
fn name() -> TopicName {
    TopicName::from(StrBytes::from_static_str(TOPIC))
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(anyhow!(what()))
    }
}

/// A one-record batch (magic 2, uncompressed), as a client would produce it.
fn batch(value: &str) -> Bytes {
    let now = i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis()).unwrap();
    let record = BatchRecord {
        transactional: false,
        control: false,
        delete_horizon: false,
        partition_leader_epoch: -1,
        producer_id: -1,
        producer_epoch: -1,
        timestamp_type: TimestampType::Creation,
        offset: 0,
        sequence: -1,
        timestamp: now,
        key: None,
        value: Some(Bytes::copy_from_slice(value.as_bytes())),
        headers: Default::default(),
    };
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        [&record],
        &RecordEncodeOptions { version: 2, compression: Compression::None },
    )
    .unwrap();
    buf.freeze()
}

fn api_versions(conn: &mut Conn, v: i16) -> Result<()> {
    let request = if v >= 3 { wire::api_versions_request() } else { ApiVersionsRequest::default() };
    let r: ApiVersionsResponse = conn.call(ApiKey::ApiVersions, v, &request)?;
    check(r.error_code == 0, || format!("error {}", r.error_code))?;
    check(r.api_keys.len() > 5, || format!("only {} API keys listed", r.api_keys.len()))
}

fn metadata_at(conn: &mut Conn, v: i16, known: &MetadataResponseTopic) -> Result<()> {
    let request =
        MetadataRequest::default().with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(name()))]));
    let r: MetadataResponse = conn.call(ApiKey::Metadata, v, &request)?;
    check(r.brokers.len() == 1, || format!("{} brokers", r.brokers.len()))?;
    let t = r.topics.first().ok_or_else(|| anyhow!("no topic in the answer"))?;
    check(t.error_code == 0, || format!("topic error {}", t.error_code))?;
    check(t.partitions.len() == 1 && t.partitions[0].error_code == 0, || format!("partitions {:?}", t.partitions))?;
    check(v < 10 || t.topic_id == known.topic_id, || format!("topic id {} (v12 said {})", t.topic_id, known.topic_id))
}

fn produce_at(conn: &mut Conn, v: i16, known: &MetadataResponseTopic) -> Result<()> {
    let mut topic = TopicProduceData::default().with_partition_data(vec![PartitionProduceData::default()
        .with_index(0)
        .with_records(Some(batch(&format!("produced with v{v}"))))]);
    topic = if v >= 13 { topic.with_topic_id(known.topic_id) } else { topic.with_name(name()) };
    let request = ProduceRequest::default()
        .with_acks(-1)
        .with_timeout_ms(10_000)
        .with_transactional_id(None)
        .with_topic_data(vec![topic]);
    let r: ProduceResponse = conn.call(ApiKey::Produce, v, &request)?;
    let p = r
        .responses
        .first()
        .and_then(|t| t.partition_responses.first())
        .ok_or_else(|| anyhow!("no partition in the answer"))?;
    check(p.error_code == 0, || format!("partition error {}", p.error_code))?;
    check(p.base_offset >= 3, || format!("base offset {}", p.base_offset))
}

fn fetch_at(conn: &mut Conn, v: i16, known: &MetadataResponseTopic) -> Result<()> {
    let mut topic = FetchTopic::default().with_partitions(vec![FetchPartition::default()
        .with_partition(0)
        .with_fetch_offset(0)
        .with_partition_max_bytes(1 << 20)]);
    topic = if v >= 13 { topic.with_topic_id(known.topic_id) } else { topic.with_topic(name()) };
    let request = FetchRequest::default()
        .with_max_wait_ms(100)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_topics(vec![topic]);
    let r: FetchResponse = conn.call(ApiKey::Fetch, v, &request)?;
    check(r.error_code == 0, || format!("error {}", r.error_code))?;
    let p =
        r.responses.first().and_then(|t| t.partitions.first()).ok_or_else(|| anyhow!("no partition in the answer"))?;
    check(p.error_code == 0, || format!("partition error {}", p.error_code))?;
    check(p.high_watermark >= 3, || format!("high watermark {}", p.high_watermark))?;
    check(p.records.as_ref().is_some_and(|b| b.len() > 61), || "no records from offset 0".into())
}

fn list_offsets_at(conn: &mut Conn, v: i16) -> Result<()> {
    for (timestamp, at_least) in [(EARLIEST, 0), (LATEST, 3)] {
        let request =
            ListOffsetsRequest::default().with_replica_id((-1).into()).with_topics(vec![ListOffsetsTopic::default()
                .with_name(name())
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(timestamp)])]);
        let r: ListOffsetsResponse = conn.call(ApiKey::ListOffsets, v, &request)?;
        let p =
            r.topics.first().and_then(|t| t.partitions.first()).ok_or_else(|| anyhow!("no partition in the answer"))?;
        check(p.error_code == 0, || format!("timestamp {timestamp}: error {}", p.error_code))?;
        check(p.offset >= at_least, || format!("timestamp {timestamp}: offset {}", p.offset))?;
    }
    Ok(())
}

fn describe_configs_at(conn: &mut Conn, v: i16) -> Result<()> {
    let request = DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
        .with_resource_type(2) // topic
        .with_resource_name(StrBytes::from_static_str(TOPIC))
        .with_configuration_keys(None)]);
    let r: DescribeConfigsResponse = conn.call(ApiKey::DescribeConfigs, v, &request)?;
    let res = r.results.first().ok_or_else(|| anyhow!("no resource in the answer"))?;
    check(res.error_code == 0, || format!("error {}", res.error_code))?;
    check(!res.configs.is_empty(), || "no configs".into())
}

fn init_producer_id_at(conn: &mut Conn, v: i16) -> Result<()> {
    let request = InitProducerIdRequest::default().with_transactional_id(None).with_transaction_timeout_ms(60_000);
    // COORDINATOR_LOAD_IN_PROGRESS (14) and COORDINATOR_NOT_AVAILABLE (15) are retriable:
    // a broker may still be loading its producer-id state right after starting.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let r: InitProducerIdResponse = conn.call(ApiKey::InitProducerId, v, &request)?;
        if matches!(r.error_code, 14 | 15) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        check(r.error_code == 0, || format!("error {}", r.error_code))?;
        return check(*r.producer_id >= 0, || format!("producer id {:?}", r.producer_id));
    }
}

fn describe_cluster_at(conn: &mut Conn, v: i16) -> Result<()> {
    let r: DescribeClusterResponse = conn.call(ApiKey::DescribeCluster, v, &DescribeClusterRequest::default())?;
    check(r.error_code == 0, || format!("error {}", r.error_code))?;
    check(r.brokers.len() == 1, || format!("{} brokers", r.brokers.len()))
}

fn describe_quorum_at(conn: &mut Conn, v: i16) -> Result<()> {
    use kafka_protocol::messages::describe_quorum_request::{PartitionData, TopicData};
    let topic = TopicData::default()
        .with_topic_name(TopicName(StrBytes::from_static_str("__cluster_metadata")))
        .with_partitions(vec![PartitionData::default().with_partition_index(0)]);
    let request = DescribeQuorumRequest::default().with_topics(vec![topic]);
    let r: DescribeQuorumResponse = conn.call(ApiKey::DescribeQuorum, v, &request)?;
    check(r.error_code == 0, || format!("error {}", r.error_code))?;
    let p = r.topics.first().and_then(|t| t.partitions.first()).ok_or_else(|| anyhow!("no partition"))?;
    check(p.error_code == 0 && *p.leader_id == 0, || format!("error {} leader {:?}", p.error_code, p.leader_id))?;
    check(p.current_voters.len() == 1 && p.high_watermark > 0, || format!("{p:?}"))
}

#[test]
fn every_advertised_version_of_the_client_apis_is_answered() {
    let broker = BrokerProcess::start_default().expect("start broker");
    let bootstrap = broker.bootstrap();
    clients::create_topic(&bootstrap, TOPIC, 1, &[]).expect("create topic");
    let (producer, log) = clients::tracked_producer(&clients::producer_config(&bootstrap, "all")).unwrap();
    for i in 0..3 {
        let value = format!("seed-{i}");
        clients::send_blocking(&producer, Record::with_opaque_to(TOPIC, i).payload(&value)).unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    assert_eq!(log.acked_count(), 3);

    let advertised: BTreeMap<i16, (i16, i16)> = wire::api_versions_roundtrip(broker.kafka_addr(), 3)
        .expect("ApiVersions v3")
        .api_keys
        .iter()
        .map(|k| (k.api_key, (k.min_version, k.max_version)))
        .collect();
    let mut conn = Conn::open(broker.kafka_addr()).expect("connect");
    let metadata: MetadataResponse = conn
        .call(
            ApiKey::Metadata,
            12,
            &MetadataRequest::default()
                .with_topics(Some(vec![MetadataRequestTopic::default().with_name(Some(name()))])),
        )
        .expect("Metadata v12");
    let known = metadata.topics.into_iter().next().expect("the topic in Metadata v12");

    let mut answered = Vec::new();
    let mut failures = Vec::new();
    for key in [
        ApiKey::ApiVersions,
        ApiKey::Metadata,
        ApiKey::Produce,
        ApiKey::Fetch,
        ApiKey::ListOffsets,
        ApiKey::DescribeConfigs,
        ApiKey::InitProducerId,
        ApiKey::DescribeCluster,
        ApiKey::DescribeQuorum,
    ] {
        let Some(&(min, max)) = advertised.get(&(key as i16)) else {
            failures.push(format!("{key:?} is not advertised"));
            continue;
        };
        let crate_range = key.valid_versions();
        for v in min.max(crate_range.min)..=max.min(crate_range.max) {
            // A fresh connection per version: a failure must not hide the next one.
            let mut conn = match Conn::open(broker.kafka_addr()) {
                Ok(c) => c,
                Err(e) => {
                    failures.push(format!("{key:?} v{v}: connect: {e:#}"));
                    continue;
                }
            };
            let outcome = match key {
                ApiKey::ApiVersions => api_versions(&mut conn, v),
                ApiKey::Metadata => metadata_at(&mut conn, v, &known),
                ApiKey::Produce => produce_at(&mut conn, v, &known),
                ApiKey::Fetch => fetch_at(&mut conn, v, &known),
                ApiKey::ListOffsets => list_offsets_at(&mut conn, v),
                ApiKey::DescribeConfigs => describe_configs_at(&mut conn, v),
                ApiKey::InitProducerId => init_producer_id_at(&mut conn, v),
                ApiKey::DescribeQuorum => describe_quorum_at(&mut conn, v),
                _ => describe_cluster_at(&mut conn, v),
            };
            match outcome {
                Ok(()) => answered.push(format!("{key:?} v{v}")),
                Err(e) => failures.push(format!("{key:?} v{v}: {e:#}")),
            }
        }
    }
    println!("answered correctly ({}): {}", answered.len(), answered.join(", "));
    assert!(failures.is_empty(), "advertised versions that fail:\n  {}", failures.join("\n  "));
}
