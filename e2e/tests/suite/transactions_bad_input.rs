//! Transactions' bad input (issue 33): requests no well-behaved producer sends, raw over
//! `e2e::wire`, each refused with the error Apache Kafka gives and changing nothing the
//! coordinator reports (DescribeTransactions); a transaction whose topic is deleted before
//! its commit still completes; and afterwards the same coordinator serves a real librdkafka
//! transactional producer.
//!
//! - EndTxn or AddPartitionsToTxn for an id no producer initialised, or with another producer
//!   id → INVALID_PRODUCER_ID_MAPPING.
//! - An older epoch after InitProducerId bumped it → PRODUCER_FENCED.
//! - EndTxn commit with nothing open → INVALID_TXN_STATE; the opposite outcome of a decided
//!   transaction → INVALID_TXN_STATE; a repeated commit → NONE.
//! - AddPartitionsToTxn naming a topic that does not exist → UNKNOWN_TOPIC_OR_PARTITION (the
//!   others in the request OPERATION_NOT_ATTEMPTED), nothing added.
//! - InitProducerId with transaction.timeout.ms 0 or above transaction.max.timeout.ms →
//!   INVALID_TRANSACTION_TIMEOUT.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use e2e::broker::BrokerProcess;
use e2e::clients;
use e2e::cluster::wait_until;
use e2e::wire::Conn;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, DescribeTransactionsRequest,
    DescribeTransactionsResponse, EndTxnRequest, EndTxnResponse, FindCoordinatorRequest, FindCoordinatorResponse,
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, TopicName, TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};

const TIMEOUT: Duration = Duration::from_secs(30);

fn code(e: ResponseError) -> i16 {
    e.code()
}

fn id(s: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(s.to_string()))
}

/// InitProducerId v3 for `txn`, retried while the coordinator is still being set up.
fn init(conn: &mut Conn, txn: &str, timeout_ms: i32) -> InitProducerIdResponse {
    let mut req = InitProducerIdRequest::default();
    req.transactional_id = Some(id(txn));
    req.transaction_timeout_ms = timeout_ms;
    req.producer_id = ProducerId(-1);
    req.producer_epoch = -1;
    let retriable =
        [ResponseError::CoordinatorNotAvailable, ResponseError::NotCoordinator, ResponseError::ConcurrentTransactions]
            .map(code);
    wait_until(TIMEOUT, || {
        let resp: InitProducerIdResponse = conn.call(ApiKey::InitProducerId, 3, &req)?;
        anyhow::ensure!(!retriable.contains(&resp.error_code), "InitProducerId: error {}", resp.error_code);
        Ok(resp)
    })
    .unwrap()
}

fn add(conn: &mut Conn, txn: &str, producer_id: i64, epoch: i16, topics: &[(&str, i32)]) -> Vec<(String, i16)> {
    let mut req = AddPartitionsToTxnRequest::default();
    req.v3_and_below_transactional_id = id(txn);
    req.v3_and_below_producer_id = ProducerId(producer_id);
    req.v3_and_below_producer_epoch = epoch;
    for (topic, partition) in topics {
        let mut t = AddPartitionsToTxnTopic::default();
        t.name = TopicName(StrBytes::from_string(topic.to_string()));
        t.partitions = vec![*partition];
        req.v3_and_below_topics.push(t);
    }
    let resp: AddPartitionsToTxnResponse = conn.call(ApiKey::AddPartitionsToTxn, 3, &req).unwrap();
    resp.results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| t.results_by_partition.iter().map(move |p| (t.name.to_string(), p.partition_error_code)))
        .collect()
}

fn end(conn: &mut Conn, txn: &str, producer_id: i64, epoch: i16, commit: bool) -> i16 {
    let mut req = EndTxnRequest::default();
    req.transactional_id = id(txn);
    req.producer_id = ProducerId(producer_id);
    req.producer_epoch = epoch;
    req.committed = commit;
    let resp: EndTxnResponse = conn.call(ApiKey::EndTxn, 3, &req).unwrap();
    resp.error_code
}

/// DescribeTransactions: (error, state, partitions).
fn describe(conn: &mut Conn, txn: &str) -> (i16, String, usize) {
    let mut req = DescribeTransactionsRequest::default();
    req.transactional_ids = vec![id(txn)];
    let resp: DescribeTransactionsResponse = conn.call(ApiKey::DescribeTransactions, 0, &req).unwrap();
    let s = &resp.transaction_states[0];
    (s.error_code, s.transaction_state.to_string(), s.topics.iter().map(|t| t.partitions.len()).sum())
}

fn transactional_producer(bootstrap: &str, id: &str) -> ThreadedProducer<DefaultProducerContext> {
    let producer: ThreadedProducer<DefaultProducerContext> = clients::producer_config(bootstrap, "all")
        .set("transactional.id", id)
        .set("transaction.timeout.ms", "60000")
        .set("message.timeout.ms", "30000")
        .create()
        .unwrap();
    producer.init_transactions(TIMEOUT).unwrap();
    producer
}

#[test]
fn bad_transactional_requests_get_kafkas_errors_and_change_nothing() {
    let broker = BrokerProcess::start_default().unwrap();
    let bootstrap = broker.bootstrap();
    clients::create_topic(&bootstrap, "t", 1, &[]).unwrap();
    let mut conn = Conn::open(broker.kafka_addr()).unwrap();
    let mut find = FindCoordinatorRequest::default();
    find.key = StrBytes::from_static_str("tx-bad");
    find.key_type = 1;
    wait_until(TIMEOUT, || {
        let resp: FindCoordinatorResponse = conn.call(ApiKey::FindCoordinator, 3, &find)?;
        anyhow::ensure!(resp.error_code == 0, "FindCoordinator: error {}", resp.error_code);
        Ok(())
    })
    .unwrap();

    // Timeouts out of bounds.
    for timeout_ms in [0, 900_001] {
        let resp = init(&mut conn, "tx-timeout", timeout_ms);
        assert_eq!(resp.error_code, code(ResponseError::InvalidTransactionTimeout), "timeout {timeout_ms}");
    }
    assert_eq!(describe(&mut conn, "tx-timeout").0, code(ResponseError::TransactionalIdNotFound));

    // An id no producer initialised.
    assert_eq!(end(&mut conn, "tx-unknown", 1, 0, true), code(ResponseError::InvalidProducerIdMapping));
    let added = add(&mut conn, "tx-unknown", 1, 0, &[("t", 0)]);
    assert_eq!(added, vec![("t".to_string(), code(ResponseError::InvalidProducerIdMapping))]);
    assert_eq!(describe(&mut conn, "tx-unknown").0, code(ResponseError::TransactionalIdNotFound));

    let first = init(&mut conn, "tx-bad", 60_000);
    assert_eq!(first.error_code, 0);
    let bumped = init(&mut conn, "tx-bad", 60_000);
    let (pid, epoch) = (bumped.producer_id.0, bumped.producer_epoch);
    assert_eq!(
        (pid, epoch),
        (first.producer_id.0, first.producer_epoch + 1),
        "a second InitProducerId bumps the epoch"
    );

    // Nothing open yet: a commit is refused.
    assert_eq!(end(&mut conn, "tx-bad", pid, epoch, true), code(ResponseError::InvalidTxnState));
    // A topic that does not exist: nothing is added.
    let added = add(&mut conn, "tx-bad", pid, epoch, &[("missing", 0), ("t", 0)]);
    assert_eq!(
        added,
        vec![
            ("missing".to_string(), code(ResponseError::UnknownTopicOrPartition)),
            ("t".to_string(), code(ResponseError::OperationNotAttempted)),
        ]
    );
    // Another producer id, the fenced epoch.
    let added = add(&mut conn, "tx-bad", pid + 1, epoch, &[("t", 0)]);
    assert_eq!(added, vec![("t".to_string(), code(ResponseError::InvalidProducerIdMapping))]);
    let added = add(&mut conn, "tx-bad", pid, epoch - 1, &[("t", 0)]);
    assert_eq!(added, vec![("t".to_string(), code(ResponseError::ProducerFenced))]);
    assert_eq!(describe(&mut conn, "tx-bad"), (0, "Empty".to_string(), 0), "none of it changed the id");

    // A transaction opened the right way; then EndTxn from the fenced epoch, and the opposite
    // outcome once it is decided.
    assert_eq!(add(&mut conn, "tx-bad", pid, epoch, &[("t", 0)]), vec![("t".to_string(), 0)]);
    assert_eq!(end(&mut conn, "tx-bad", pid, epoch - 1, true), code(ResponseError::ProducerFenced));
    assert_eq!(describe(&mut conn, "tx-bad"), (0, "Ongoing".to_string(), 1));
    assert_eq!(end(&mut conn, "tx-bad", pid, epoch, true), 0);
    wait_until(TIMEOUT, || {
        let (_, state, _) = describe(&mut conn, "tx-bad");
        anyhow::ensure!(state == "CompleteCommit", "state {state}");
        Ok(())
    })
    .unwrap();
    assert_eq!(end(&mut conn, "tx-bad", pid, epoch, true), 0, "a retried commit succeeds");
    assert_eq!(end(&mut conn, "tx-bad", pid, epoch, false), code(ResponseError::InvalidTxnState));

    // A transaction whose topic is deleted before its commit still completes.
    clients::create_topic(&bootstrap, "doomed", 1, &[]).unwrap();
    let producer = transactional_producer(&bootstrap, "tx-deleted");
    producer.begin_transaction().unwrap();
    producer.send(BaseRecord::<(), _>::to("doomed").payload("gone")).map_err(|(e, _)| e).unwrap();
    producer.flush(TIMEOUT).unwrap();
    let admin = clients::admin_client(&bootstrap).unwrap();
    clients::block_on(admin.delete_topics(&["doomed"], &clients::admin_options())).unwrap().unwrap();
    producer.commit_transaction(TIMEOUT).unwrap();
    wait_until(TIMEOUT, || {
        let (_, state, _) = describe(&mut conn, "tx-deleted");
        anyhow::ensure!(state == "CompleteCommit", "state {state}");
        Ok(())
    })
    .unwrap();

    // The coordinator still serves a real producer, and read_committed sees its records.
    let producer = transactional_producer(&bootstrap, "tx-after");
    producer.begin_transaction().unwrap();
    for i in 0..5 {
        let value = format!("after-{i}");
        producer.send(BaseRecord::<(), _>::to("t").payload(&value)).map_err(|(e, _)| e).unwrap();
    }
    producer.commit_transaction(TIMEOUT).unwrap();
    let consumer: BaseConsumer =
        clients::consumer_config(&bootstrap).set("isolation.level", "read_committed").create().unwrap();
    let mut assignment = TopicPartitionList::new();
    assignment.add_partition_offset("t", 0, Offset::Beginning).unwrap();
    consumer.assign(&assignment).unwrap();
    let mut read = Vec::new();
    let _ = wait_until(TIMEOUT, || {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            read.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
        anyhow::ensure!(read.len() >= 5, "read {}", read.len());
        Ok(())
    });
    assert_eq!(read, (0..5).map(|i| format!("after-{i}")).collect::<Vec<_>>());
    assert!(broker.log_tail(2000).lines().all(|l| !l.contains("panicked")), "no panic in the broker's log");
}
