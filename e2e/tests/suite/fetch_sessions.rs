//! Fetch sessions (KIP-227) on a raw connection, the way Kafka's Java consumer uses them: a
//! full fetch with session epoch 0 opens a session; incremental fetches then name only what
//! changed and get back only partitions with news; a forgotten partition is no longer read; a
//! wrong epoch or an unknown session id is FETCH_SESSION_ID_NOT_FOUND / INVALID_FETCH_SESSION_EPOCH;
//! epoch -1 closes the session. (The Java client itself runs on sessions in kafka_tools.rs.)

use std::time::{Duration, Instant};

use e2e::broker::BrokerProcess;
use e2e::clients::{self, Record};
use e2e::wire::Conn;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic, ForgottenTopic};
use kafka_protocol::messages::{ApiKey, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use rdkafka::producer::Producer;

const TOPIC: &str = "sessions";
const VERSION: i16 = 12;
const FETCH_SESSION_ID_NOT_FOUND: i16 = 70;
const INVALID_FETCH_SESSION_EPOCH: i16 = 71;

fn topic() -> TopicName {
    TopicName(StrBytes::from_static_str(TOPIC))
}

fn request(session_id: i32, epoch: i32, partitions: &[(i32, i64)], forgotten: &[i32]) -> FetchRequest {
    let fetch = partitions
        .iter()
        .map(|(p, offset)| {
            FetchPartition::default().with_partition(*p).with_fetch_offset(*offset).with_partition_max_bytes(1 << 20)
        })
        .collect::<Vec<_>>();
    let topics =
        if fetch.is_empty() { vec![] } else { vec![FetchTopic::default().with_topic(topic()).with_partitions(fetch)] };
    let forgotten = if forgotten.is_empty() {
        vec![]
    } else {
        vec![ForgottenTopic::default().with_topic(topic()).with_partitions(forgotten.to_vec())]
    };
    FetchRequest::default()
        .with_replica_id((-1).into())
        .with_max_wait_ms(300)
        .with_min_bytes(1)
        .with_max_bytes(1 << 20)
        .with_session_id(session_id)
        .with_session_epoch(epoch)
        .with_topics(topics)
        .with_forgotten_topics_data(forgotten)
}

/// (partition, high watermark, record bytes) of every partition in the answer.
fn answered(r: &FetchResponse) -> Vec<(i32, i64, usize)> {
    r.responses
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.partition_index, p.high_watermark, p.records.as_ref().map_or(0, |b| b.len())))
        .collect()
}

fn produce(bootstrap: &str, partition: i32, n: usize) {
    let (producer, log) = clients::tracked_producer(&clients::producer_config(bootstrap, "all")).expect("producer");
    for i in 0..n {
        let value = format!("p{partition}-{i}");
        clients::send_blocking(&producer, Record::with_opaque_to(TOPIC, i).payload(&value).partition(partition))
            .expect("send");
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
    assert_eq!(log.acked_count(), n);
}

#[test]
fn an_incremental_fetch_answers_only_what_changed() {
    let mut broker = BrokerProcess::start_default().expect("start broker");
    let bootstrap = broker.bootstrap();
    clients::create_topic(&bootstrap, TOPIC, 3, &[]).expect("create topic");
    produce(&bootstrap, 0, 5);
    produce(&bootstrap, 1, 3);
    let mut conn = Conn::open(broker.kafka_addr()).expect("connect");
    let fetch =
        |conn: &mut Conn, r: &FetchRequest| -> FetchResponse { conn.call(ApiKey::Fetch, VERSION, r).expect("Fetch") };

    // Full fetch, epoch 0: a session, and every partition in the answer.
    let full = fetch(&mut conn, &request(0, 0, &[(0, 0), (1, 0), (2, 0)], &[]));
    assert_eq!(full.error_code, 0);
    let session = full.session_id;
    assert!(session > 0, "a session was opened");
    let parts = answered(&full);
    assert_eq!(parts.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>(), vec![(0, 5), (1, 3), (2, 0)], "{parts:?}");
    assert!(parts[0].2 > 0 && parts[1].2 > 0 && parts[2].2 == 0, "{parts:?}");

    // Epoch 1 with the new offsets of 0 and 1: nothing new anywhere, so no partition at all,
    // after the long poll.
    let started = Instant::now();
    let quiet = fetch(&mut conn, &request(session, 1, &[(0, 5), (1, 3)], &[]));
    assert_eq!((quiet.error_code, quiet.session_id), (0, session));
    assert!(answered(&quiet).is_empty(), "{:?}", answered(&quiet));
    assert!(started.elapsed() >= Duration::from_millis(250), "waited for news: {:?}", started.elapsed());

    // Records for partition 2 only: epoch 2 names no partition and gets exactly that one.
    produce(&bootstrap, 2, 4);
    let news = fetch(&mut conn, &request(session, 2, &[], &[]));
    let parts = answered(&news);
    assert_eq!(parts.len(), 1, "{parts:?}");
    assert_eq!((parts[0].0, parts[0].1), (2, 4));
    assert!(parts[0].2 > 0);

    // Wrong epochs and ids are refused and do not end the session.
    assert_eq!(fetch(&mut conn, &request(session, 9, &[], &[])).error_code, INVALID_FETCH_SESSION_EPOCH);
    assert_eq!(fetch(&mut conn, &request(session + 1, 3, &[], &[])).error_code, FETCH_SESSION_ID_NOT_FOUND);

    // Forget partition 2 (still at offset 0 in the session): new records there are not sent,
    // those in partition 0 are.
    produce(&bootstrap, 2, 1);
    produce(&bootstrap, 0, 1);
    let after = fetch(&mut conn, &request(session, 3, &[], &[2]));
    let parts = answered(&after);
    assert_eq!(parts.iter().map(|p| (p.0, p.1)).collect::<Vec<_>>(), vec![(0, 6)], "{parts:?}");

    // Epoch -1 closes it: a full answer without a session, and the old id is gone.
    let last = fetch(&mut conn, &request(session, -1, &[(0, 6)], &[]));
    assert_eq!((last.error_code, last.session_id), (0, 0));
    assert_eq!(fetch(&mut conn, &request(session, 4, &[], &[])).error_code, FETCH_SESSION_ID_NOT_FOUND);
    assert!(broker.is_running(), "the broker is still up");
}
