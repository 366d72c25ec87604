//! Requirement (DESIGN §2 "Wire protocol": CreateTopics, DeleteTopics, CreatePartitions,
//! DescribeConfigs, AlterConfigs, IncrementalAlterConfigs, DeleteRecords, ListOffsets): the
//! admin operations behave as Kafka's do when driven by librdkafka's AdminClient — including
//! the errors a user gets for a duplicate topic (TOPIC_ALREADY_EXISTS), a bad config
//! (INVALID_CONFIG), a replication factor above the broker count (INVALID_REPLICATION_FACTOR)
//! and a partition decrease (INVALID_PARTITIONS). IncrementalAlterConfigs, which rdkafka's
//! AdminClient lacks, is driven with raw protocol frames.
//!
//! All tests share nothing but the binary: each starts its own broker.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::thread;
use std::time::{Duration, Instant};

use e2e::broker::BrokerProcess;
use e2e::clients::{self, admin_options, block_on, Record};
use e2e::wire;
use kafka_protocol::messages::incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig};
use kafka_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, ApiKey, IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;
use rdkafka::admin::{AdminClient, AlterConfig, ConfigResource, ConfigSource, NewPartitions, ResourceSpecifier};
use rdkafka::client::DefaultClientContext;
use rdkafka::error::RDKafkaErrorCode;
use rdkafka::producer::Producer;
use rdkafka::{Offset, TopicPartitionList};

type Admin = AdminClient<DefaultClientContext>;

/// How long a change may take to show (Kafka answers admin requests before its metadata image
/// has caught up; a single Strom node is expected to be immediate).
const PROPAGATION: Duration = Duration::from_secs(10);

fn start() -> (BrokerProcess, Admin) {
    let broker = BrokerProcess::start_default().expect("start broker");
    let admin = clients::admin_client(&broker.bootstrap()).expect("admin client");
    (broker, admin)
}

fn create(
    admin: &Admin,
    topic: &str,
    partitions: i32,
    replication: i32,
    configs: &[(&str, &str)],
) -> Result<(), RDKafkaErrorCode> {
    clients::create_topic_with(admin, topic, partitions, replication, configs)
        .expect("CreateTopics round trip")
        .map(|_| ())
        .map_err(|(_, code)| code)
}

fn describe_topic(admin: &Admin, topic: &str) -> ConfigResource {
    let mut results = block_on(admin.describe_configs([&ResourceSpecifier::Topic(topic)], &admin_options()))
        .unwrap()
        .expect("DescribeConfigs round trip");
    assert_eq!(results.len(), 1);
    results.pop().unwrap().unwrap_or_else(|code| panic!("DescribeConfigs {topic}: {code:?}"))
}

/// Describes `topic` until `settled` holds (Kafka applies config changes to the metadata image
/// after answering) or 10 s pass; returns the last description either way.
fn describe_when(admin: &Admin, topic: &str, settled: impl Fn(&ConfigResource) -> bool) -> ConfigResource {
    let deadline = Instant::now() + PROPAGATION;
    loop {
        let resource = describe_topic(admin, topic);
        if settled(&resource) || Instant::now() > deadline {
            return resource;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// The partition count Metadata reports once it equals `want`, or the last count seen.
fn partitions_when(bootstrap: &str, topic: &str, want: usize) -> Option<usize> {
    let deadline = Instant::now() + PROPAGATION;
    loop {
        let count = clients::partition_count(bootstrap, topic).ok();
        if count == Some(want) || Instant::now() > deadline {
            return count;
        }
        thread::sleep(Duration::from_millis(100));
    }
}

fn config_value(resource: &ConfigResource, name: &str) -> Option<String> {
    resource.get(name).and_then(|e| e.value.clone())
}

/// Whether Metadata knows `topic` (false once it reports UNKNOWN_TOPIC_OR_PARTITION).
fn topic_exists(bootstrap: &str, topic: &str) -> bool {
    clients::partition_count(bootstrap, topic).is_ok()
}

fn produce(bootstrap: &str, topic: &str, partition: i32, count: usize) {
    let (producer, log) = clients::tracked_producer(&clients::producer_config(bootstrap, "all")).unwrap();
    for i in 0..count {
        let value = format!("record-{i}");
        clients::send_blocking(&producer, Record::with_opaque_to(topic, i).partition(partition).payload(&value))
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
    assert_eq!((log.acked_count(), log.failed_count()), (count, 0), "deliveries to {topic}-{partition}");
}

#[test]
fn create_topic_then_same_name_again_is_topic_already_exists() {
    let (broker, admin) = start();
    assert_eq!(create(&admin, "orders", 3, 1, &[]), Ok(()));
    assert_eq!(partitions_when(&broker.bootstrap(), "orders", 3), Some(3));
    assert_eq!(create(&admin, "orders", 3, 1, &[]), Err(RDKafkaErrorCode::TopicAlreadyExists));
    assert_eq!(create(&admin, "orders", 5, 1, &[]), Err(RDKafkaErrorCode::TopicAlreadyExists));
    assert_eq!(clients::partition_count(&broker.bootstrap(), "orders").ok(), Some(3), "unchanged");
}

#[test]
fn create_topic_with_a_bad_config_is_invalid_config_and_creates_nothing() {
    let (broker, admin) = start();
    let cases: [(&str, &str, &str); 4] = [
        ("bad-policy", "cleanup.policy", "shred"),
        ("bad-number", "segment.bytes", "a lot"),
        ("bad-negative", "max.message.bytes", "-5"),
        ("bad-name", "no.such.config", "1"),
    ];
    for (topic, key, value) in cases {
        assert_eq!(create(&admin, topic, 1, 1, &[(key, value)]), Err(RDKafkaErrorCode::InvalidConfig), "{key}={value}");
        assert!(!topic_exists(&broker.bootstrap(), topic), "{topic} exists after a refused create");
    }
}

#[test]
fn replication_factor_above_the_broker_count_is_invalid_replication_factor() {
    let (broker, admin) = start();
    assert_eq!(create(&admin, "replicated", 1, 3, &[]), Err(RDKafkaErrorCode::InvalidReplicationFactor));
    assert!(!topic_exists(&broker.bootstrap(), "replicated"));
}

#[test]
fn describe_configs_reports_topic_overrides_and_defaults() {
    let (_broker, admin) = start();
    create(&admin, "described", 1, 1, &[("retention.ms", "3600000")]).unwrap();
    let resource = describe_topic(&admin, "described");
    let retention = resource.get("retention.ms").expect("retention.ms listed");
    assert_eq!(retention.value.as_deref(), Some("3600000"));
    assert_eq!(retention.source, ConfigSource::DynamicTopic, "an override is a dynamic topic config");
    assert!(!retention.is_default);
    for name in ["cleanup.policy", "segment.bytes", "retention.bytes", "max.message.bytes"] {
        let entry = resource.get(name).unwrap_or_else(|| panic!("{name} not listed"));
        assert_ne!(entry.source, ConfigSource::DynamicTopic, "{name} was not overridden");
    }
    assert_eq!(config_value(&resource, "cleanup.policy").as_deref(), Some("delete"));

    let mut brokers = block_on(admin.describe_configs([&ResourceSpecifier::Broker(0)], &admin_options()))
        .unwrap()
        .expect("DescribeConfigs broker 0");
    let broker_configs = brokers.pop().unwrap().expect("broker 0 described");
    assert!(!broker_configs.entries.is_empty(), "broker 0 has configs");
}

#[test]
fn alter_configs_changes_what_describe_reports() {
    let (broker, admin) = start();
    create(&admin, "altered", 1, 1, &[("retention.ms", "3600000")]).unwrap();
    let alter = AlterConfig::new(ResourceSpecifier::Topic("altered"))
        .set("retention.ms", "12345")
        .set("cleanup.policy", "delete");
    let results = block_on(admin.alter_configs([&alter], &admin_options())).unwrap().expect("AlterConfigs");
    assert!(results.iter().all(Result::is_ok), "AlterConfigs: {results:?}");
    let resource = describe_when(&admin, "altered", |r| config_value(r, "retention.ms").as_deref() == Some("12345"));
    assert_eq!(config_value(&resource, "retention.ms").as_deref(), Some("12345"));

    // rdkafka 0.39's alter_configs reports every resource as Ok whatever the broker said, so
    // the refusal of a bad value is checked with a raw AlterConfigs request.
    assert_eq!(
        raw_alter_configs(&broker, "altered", &[("retention.ms", "soon")]),
        INVALID_CONFIG,
        "a bad value is INVALID_CONFIG"
    );
    let resource = describe_topic(&admin, "altered");
    assert_eq!(config_value(&resource, "retention.ms").as_deref(), Some("12345"), "unchanged");
}

#[test]
fn alter_configs_replaces_the_whole_set_of_overrides() {
    // Kafka's (non-incremental) AlterConfigs sets the topic's complete override set: a key
    // left out goes back to its default.
    let (_broker, admin) = start();
    create(&admin, "replaced", 1, 1, &[("retention.ms", "3600000"), ("segment.bytes", "1048576")]).unwrap();
    let alter = AlterConfig::new(ResourceSpecifier::Topic("replaced")).set("retention.ms", "7200000");
    let results = block_on(admin.alter_configs([&alter], &admin_options())).unwrap().expect("AlterConfigs");
    assert!(results.iter().all(Result::is_ok), "AlterConfigs: {results:?}");
    let resource = describe_when(&admin, "replaced", |r| config_value(r, "retention.ms").as_deref() == Some("7200000"));
    assert_eq!(config_value(&resource, "retention.ms").as_deref(), Some("7200000"));
    let segment = resource.get("segment.bytes").expect("segment.bytes listed");
    assert_ne!(segment.source, ConfigSource::DynamicTopic, "segment.bytes is back to its default");
}

const INVALID_CONFIG: i16 = 40;

/// One AlterConfigs v1 request for a topic on a raw connection; returns the resource's error.
fn raw_alter_configs(broker: &BrokerProcess, topic: &str, configs: &[(&str, &str)]) -> i16 {
    use kafka_protocol::messages::alter_configs_request as legacy;
    let request = AlterConfigsRequest::default().with_resources(vec![legacy::AlterConfigsResource::default()
        .with_resource_type(2) // topic
        .with_resource_name(StrBytes::from_string(topic.to_string()))
        .with_configs(
            configs
                .iter()
                .map(|(name, value)| {
                    legacy::AlterableConfig::default()
                        .with_name(StrBytes::from_string((*name).to_string()))
                        .with_value(Some(StrBytes::from_string((*value).to_string())))
                })
                .collect(),
        )]);
    let version = 1;
    let mut stream = wire::connect(broker.kafka_addr(), Duration::from_secs(10)).unwrap();
    stream.write_all(&wire::encode_request(ApiKey::AlterConfigs, version, 78, &request).unwrap()).unwrap();
    let frame = wire::read_frame(&mut stream).unwrap().expect("an AlterConfigs response");
    let (correlation_id, response) =
        wire::decode_response::<AlterConfigsResponse>(ApiKey::AlterConfigs, version, frame).unwrap();
    assert_eq!(correlation_id, 78);
    assert_eq!(response.responses.len(), 1, "one result per resource");
    response.responses[0].error_code
}

/// One IncrementalAlterConfigs v1 request on a raw connection; returns the resource's error.
fn incremental_alter(broker: &BrokerProcess, topic: &str, name: &str, operation: i8, value: Option<&str>) -> i16 {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![AlterConfigsResource::default()
        .with_resource_type(2) // topic
        .with_resource_name(StrBytes::from_string(topic.to_string()))
        .with_configs(vec![AlterableConfig::default()
            .with_name(StrBytes::from_string(name.to_string()))
            .with_config_operation(operation)
            .with_value(value.map(|v| StrBytes::from_string(v.to_string())))])]);
    let version = 1;
    let mut stream = wire::connect(broker.kafka_addr(), Duration::from_secs(10)).unwrap();
    stream.write_all(&wire::encode_request(ApiKey::IncrementalAlterConfigs, version, 77, &request).unwrap()).unwrap();
    let frame = wire::read_frame(&mut stream).unwrap().expect("an IncrementalAlterConfigs response");
    let (correlation_id, response) =
        wire::decode_response::<IncrementalAlterConfigsResponse>(ApiKey::IncrementalAlterConfigs, version, frame)
            .unwrap();
    assert_eq!(correlation_id, 77);
    assert_eq!(response.responses.len(), 1, "one result per resource");
    response.responses[0].error_code
}

#[test]
fn incremental_alter_configs_sets_and_deletes_single_keys() {
    let (broker, admin) = start();
    create(&admin, "incremental", 1, 1, &[("segment.bytes", "1048576")]).unwrap();
    const SET: i8 = 0;
    const DELETE: i8 = 1;
    assert_eq!(incremental_alter(&broker, "incremental", "retention.ms", SET, Some("777000")), 0);
    let resource =
        describe_when(&admin, "incremental", |r| config_value(r, "retention.ms").as_deref() == Some("777000"));
    assert_eq!(config_value(&resource, "retention.ms").as_deref(), Some("777000"));
    assert_eq!(config_value(&resource, "segment.bytes").as_deref(), Some("1048576"), "other overrides kept");

    assert_eq!(incremental_alter(&broker, "incremental", "retention.ms", DELETE, None), 0);
    let resource = describe_when(&admin, "incremental", |r| {
        r.get("retention.ms").is_some_and(|e| e.source != ConfigSource::DynamicTopic)
    });
    let retention = resource.get("retention.ms").expect("retention.ms listed");
    assert_ne!(retention.source, ConfigSource::DynamicTopic, "retention.ms back to its default");
    assert_eq!(config_value(&resource, "segment.bytes").as_deref(), Some("1048576"), "other overrides kept");

    assert_eq!(incremental_alter(&broker, "incremental", "retention.ms", SET, Some("never")), INVALID_CONFIG);
}

#[test]
fn create_partitions_grows_a_topic_and_refuses_to_shrink_it() {
    let (broker, admin) = start();
    let bootstrap = broker.bootstrap();
    create(&admin, "growing", 2, 1, &[]).unwrap();
    let grow = NewPartitions::new("growing", 4);
    let results = block_on(admin.create_partitions([&grow], &admin_options())).unwrap().expect("CreatePartitions");
    assert!(results.iter().all(Result::is_ok), "grow to 4: {results:?}");
    assert_eq!(partitions_when(&bootstrap, "growing", 4), Some(4));
    produce(&bootstrap, "growing", 3, 10);
    assert_eq!(clients::watermarks(&bootstrap, "growing", 3).unwrap(), (0, 10));

    let shrink = NewPartitions::new("growing", 2);
    let results = block_on(admin.create_partitions([&shrink], &admin_options())).unwrap().expect("CreatePartitions");
    assert!(matches!(results.as_slice(), [Err((_, RDKafkaErrorCode::InvalidPartitions))]), "shrink to 2: {results:?}");
    assert_eq!(clients::partition_count(&bootstrap, "growing").unwrap(), 4, "still 4 partitions");
}

#[test]
fn delete_topics_removes_the_topic_and_its_records() {
    let (broker, admin) = start();
    let bootstrap = broker.bootstrap();
    create(&admin, "doomed", 1, 1, &[]).unwrap();
    produce(&bootstrap, "doomed", 0, 20);
    let results = block_on(admin.delete_topics(&["doomed"], &admin_options())).unwrap().expect("DeleteTopics");
    assert!(results.iter().all(Result::is_ok), "delete: {results:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while topic_exists(&bootstrap, "doomed") {
        assert!(Instant::now() < deadline, "Metadata still lists the deleted topic");
        thread::sleep(Duration::from_millis(100));
    }
    let again = block_on(admin.delete_topics(&["doomed"], &admin_options())).unwrap().expect("DeleteTopics");
    assert!(
        matches!(again.as_slice(), [Err((_, RDKafkaErrorCode::UnknownTopicOrPartition))]),
        "deleting it twice: {again:?}"
    );
    create(&admin, "doomed", 1, 1, &[]).expect("the name can be reused");
    assert_eq!(
        clients::eventually(PROPAGATION, || clients::watermarks(&bootstrap, "doomed", 0)).unwrap(),
        (0, 0),
        "a reused name starts empty"
    );
}

#[test]
fn delete_records_moves_the_log_start_offset_that_list_offsets_reports() {
    let (broker, admin) = start();
    let bootstrap = broker.bootstrap();
    create(&admin, "trimmed", 1, 1, &[]).unwrap();
    produce(&bootstrap, "trimmed", 0, 100);
    assert_eq!(clients::watermarks(&bootstrap, "trimmed", 0).unwrap(), (0, 100));

    let delete = |offset: Offset| {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset("trimmed", 0, offset).unwrap();
        let result = block_on(admin.delete_records(&tpl, &admin_options())).unwrap().expect("DeleteRecords");
        let element = result.find_partition("trimmed", 0).expect("a result for trimmed-0");
        element.error().map(|()| element.offset())
    };
    assert_eq!(delete(Offset::Offset(40)).expect("delete before 40"), Offset::Offset(40), "new low watermark");
    assert_eq!(clients::watermarks(&bootstrap, "trimmed", 0).unwrap(), (40, 100), "ListOffsets earliest moved");
    let records = clients::read_to_end(&bootstrap, "trimmed", Duration::from_secs(30)).unwrap();
    assert_eq!(records.first().map(|r| r.offset), Some(40), "reading from the beginning starts at 40");
    assert_eq!(records.len(), 60);

    assert!(delete(Offset::Offset(500)).is_err(), "deleting beyond the high watermark is refused");
    assert_eq!(clients::watermarks(&bootstrap, "trimmed", 0).unwrap(), (40, 100), "unchanged");

    assert_eq!(delete(Offset::End).expect("delete everything"), Offset::Offset(100));
    assert_eq!(clients::watermarks(&bootstrap, "trimmed", 0).unwrap(), (100, 100));
    produce(&bootstrap, "trimmed", 0, 5);
    assert_eq!(clients::watermarks(&bootstrap, "trimmed", 0).unwrap(), (100, 105), "appends continue");
}
