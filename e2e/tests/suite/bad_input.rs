//! Requirement (DESIGN §2 "Wire protocol", RELIABILITY P12 and scenario S8): hostile or broken
//! input on the Kafka port gets a closed connection (or, for an unsupported ApiVersions version,
//! the KIP-511 error answer) — never a panic, never unbounded memory — and everyone else keeps
//! being served.
//!
//! Each case runs against its own broker and then checks that the process is alive, that its
//! RSS grew by at most ~50 MiB, and that a normal client still works (a raw ApiVersions v3
//! round trip and a fresh librdkafka producer). Each close must be explained in the broker's
//! log — the `closing connection` warning naming the client's address and the reason — and the
//! log must hold no `panicked` line: a connection is a tokio task, so a panic in it would look
//! like a close from the client's side.

#![allow(clippy::unwrap_used)]

use std::fs;
use std::io::Write;
use std::net::{Shutdown, SocketAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use bytes::Buf;
use e2e::broker::{BrokerOptions, BrokerProcess};
use e2e::clients::{self, Record};
use e2e::wire::{self, Closed};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, MetadataRequest, TopicName};
use kafka_protocol::protocol::{Decodable, StrBytes};
use rdkafka::producer::Producer;

const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);
/// The warning is written just after the socket is closed, so a test waits a little for it.
const LOG_TIMEOUT: Duration = Duration::from_secs(10);
const CLOSE_WARNING: &str = "closing connection";
const RSS_GROWTH_LIMIT: u64 = 50 * 1024 * 1024;
const ALIVE_TOPIC: &str = "still-alive";
const UNSUPPORTED_VERSION: i16 = 35;

/// A broker under attack, with what "healthy" looked like before the attack.
struct Target {
    broker: BrokerProcess,
    baseline_rss: u64,
}

impl Target {
    fn start() -> Self {
        Self::start_with(BrokerOptions::default())
    }

    fn start_with(options: BrokerOptions) -> Self {
        let broker = BrokerProcess::launch(options).expect("start broker");
        clients::create_topic(&broker.bootstrap(), ALIVE_TOPIC, 1, &[]).expect("create topic");
        // Warm up the paths a normal client uses, so the baseline includes them.
        let target = Self { baseline_rss: 0, broker };
        target.normal_client_works("warm-up");
        Self { baseline_rss: target.broker.rss_bytes().expect("baseline RSS"), ..target }
    }

    fn addr(&self) -> SocketAddr {
        self.broker.kafka_addr()
    }

    /// A raw ApiVersions v3 round trip and one acks=all record through librdkafka.
    fn normal_client_works(&self, context: &str) {
        let response = wire::api_versions_roundtrip(self.addr(), 3)
            .unwrap_or_else(|e| panic!("{context}: ApiVersions v3 round trip failed: {e:#}"));
        assert_eq!(response.error_code, 0, "{context}: ApiVersions v3 error code");
        assert!(
            response.api_keys.iter().any(|k| k.api_key == ApiKey::Produce as i16),
            "{context}: ApiVersions v3 does not list Produce"
        );
        let mut config = clients::producer_config(&self.broker.bootstrap(), "all");
        config.set("message.timeout.ms", "30000");
        let (producer, log) = clients::tracked_producer(&config).expect("create producer");
        let value = format!("{context}: still serving");
        clients::send_blocking(&producer, Record::with_opaque_to(ALIVE_TOPIC, 0).payload(&value)).expect("enqueue");
        producer.flush(Duration::from_secs(30)).expect("flush");
        assert_eq!(
            (log.acked_count(), log.failed_count()),
            (1, 0),
            "{context}: a normal producer's record was not acknowledged: {:?}",
            log.snapshot().failed
        );
    }

    /// Everything the broker wrote to stdout and stderr so far.
    fn log(&self) -> String {
        let bytes = fs::read(self.broker.log_path()).expect("read the broker's log");
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Waits for the warning an operator reads when the broker hangs up on `peer`, and checks
    /// that its reason contains `reason` (`""`: any reason).
    fn assert_close_logged(&self, peer: SocketAddr, reason: &str, context: &str) {
        let needle = format!("{CLOSE_WARNING} peer={peer} reason=");
        let deadline = Instant::now() + LOG_TIMEOUT;
        let line = loop {
            if let Some(line) = self.log().lines().find(|l| l.contains(&needle)) {
                break line.to_string();
            }
            assert!(
                Instant::now() < deadline,
                "{context}: no `{CLOSE_WARNING}` warning for {peer} in the broker's log within {LOG_TIMEOUT:?}"
            );
            thread::sleep(Duration::from_millis(20));
        };
        assert!(line.contains(" WARN "), "{context}: the close is not logged as a warning: {line}");
        assert!(line.contains(reason), "{context}: the logged reason does not say {reason:?}: {line}");
    }

    /// Waits until the log holds at least `count` `closing connection` warnings.
    fn assert_closes_logged(&self, count: usize, context: &str) {
        let deadline = Instant::now() + LOG_TIMEOUT;
        loop {
            let logged = self.log().lines().filter(|l| l.contains(CLOSE_WARNING)).count();
            if logged >= count {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{context}: {logged} `{CLOSE_WARNING}` warnings in the broker's log, want at least {count}"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Alive, no panic in the log, bounded memory, still serving.
    fn assert_unharmed(&mut self, context: &str) {
        if let Some(status) = self.broker.try_exit_status().expect("poll broker") {
            panic!("{context}: the broker exited with {status}");
        }
        if let Some(line) = self.log().lines().find(|l| l.contains("panicked")) {
            panic!("{context}: the broker's log shows a panic: {line}");
        }
        let rss = self.broker.rss_bytes().expect("RSS");
        assert!(
            rss <= self.baseline_rss + RSS_GROWTH_LIMIT,
            "{context}: RSS grew from {} MiB to {} MiB",
            self.baseline_rss >> 20,
            rss >> 20
        );
        self.normal_client_works(context);
    }
}

/// xorshift64*: reproducible bytes without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next().to_le_bytes()[0]).collect()
    }
}

/// Sends `data`, optionally half-closes, and expects the broker to close the connection and
/// log why, with a reason containing `reason`.
fn expect_closed(target: &Target, data: &[u8], half_close: bool, reason: &str, context: &str) -> Closed {
    let mut stream = wire::connect(target.addr(), CLOSE_TIMEOUT).expect("connect");
    let peer = stream.local_addr().expect("local address");
    wire::write_tolerant(&mut stream, data);
    if half_close {
        let _ = stream.shutdown(Shutdown::Write);
    }
    let closed = wire::wait_closed(&mut stream, CLOSE_TIMEOUT)
        .unwrap_or_else(|e| panic!("{context}: the broker did not close the connection: {e:#}"));
    target.assert_close_logged(peer, reason, context);
    closed
}

fn size_prefix(size: i32) -> Vec<u8> {
    size.to_be_bytes().to_vec()
}

#[test]
fn random_bytes_close_the_connection() {
    let mut target = Target::start();
    for seed in 1..=16u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        // Half the cases: raw noise (the size prefix is noise too); the other half: noise in a
        // frame of the right size, so the header and body decoders see it.
        let len = 64 + usize::try_from(rng.next() % 4096).unwrap();
        let noise = rng.bytes(len);
        let data = if seed % 2 == 0 { wire::frame(&noise) } else { noise };
        // Which decoder gives up first depends on the noise: any reason will do.
        expect_closed(&target, &data, true, "", &format!("random bytes, seed {seed}"));
    }
    target.assert_unharmed("after random bytes");
}

#[test]
fn frame_claiming_2_gib_is_refused_without_buffering() {
    let mut target = Target::start();
    let mut data = size_prefix(i32::MAX);
    data.extend_from_slice(&wire::raw_request_header(ApiKey::Produce as i16, 9, 1, "big", true));
    // No half-close: the broker must hang up on its own, from the size prefix alone.
    let reason = "request of 2147483647 bytes exceeds socket.request.max.bytes";
    expect_closed(&target, &data, false, reason, "frame size 0x7fffffff");
    target.assert_unharmed("after a 2 GiB frame");
}

#[test]
fn negative_and_zero_frame_sizes_close_the_connection() {
    let mut target = Target::start();
    for size in [-1, i32::MIN, -4096, 0] {
        let mut data = size_prefix(size);
        data.extend_from_slice(&[0u8; 16]);
        expect_closed(&target, &data, false, &format!("invalid request size {size}"), &format!("frame size {size}"));
    }
    target.assert_unharmed("after negative and zero sizes");
}

#[test]
fn truncated_request_then_eof_closes_the_connection() {
    let mut target = Target::start();
    let request = wire::encode_request_payload(ApiKey::ApiVersions, 3, 7, &wire::api_versions_request()).unwrap();
    // Announce 100 bytes more than we send, then end our side.
    let announced = request.len() + 100;
    let mut data = size_prefix(i32::try_from(announced).unwrap());
    data.extend_from_slice(&request);
    let reason = format!("connection closed inside a request of {announced} bytes");
    let closed = expect_closed(&target, &data, true, &reason, "truncated request");
    assert!(
        matches!(closed, Closed::Eof { bytes: 0 } | Closed::Reset { bytes: 0 }),
        "the broker answered an incomplete frame: {closed:?}"
    );
    target.assert_unharmed("after a truncated request");
}

#[test]
fn frame_whose_body_is_cut_mid_field_closes_the_connection() {
    let mut target = Target::start();
    let version = 12;
    let topic_name = "a-topic-name-of-some-length";
    let request = MetadataRequest::default().with_topics(Some(vec![
        MetadataRequestTopic::default().with_name(Some(TopicName::from(StrBytes::from_static_str(topic_name))))
    ]));
    let payload = wire::encode_request_payload(ApiKey::Metadata, version, 9, &request).unwrap();
    let header_len =
        wire::encode_request_payload(ApiKey::Metadata, version, 9, &MetadataRequest::default()).unwrap().len() - 4; // an empty v12 body: topics null (1), two bools (2), no tags (1)
                                                                                                                    // Body: topics array length (1) | topic id (16) | name length (1) | name ... — cut in the name.
    let cut = header_len + 1 + 16 + 1 + topic_name.len() / 2;
    assert!(cut < payload.len());
    let reason = "malformed MetadataRequest v12 request";
    let closed = expect_closed(&target, &wire::frame(&payload[..cut]), false, reason, "body cut mid-field");
    assert!(
        matches!(closed, Closed::Eof { bytes: 0 } | Closed::Reset { bytes: 0 }),
        "the broker answered an undecodable body: {closed:?}"
    );
    target.assert_unharmed("after a body cut mid-field");
}

#[test]
fn unknown_api_key_closes_the_connection() {
    let mut target = Target::start();
    let mut payload = wire::raw_request_header(1000, 0, 11, "unknown-key", false);
    payload.extend_from_slice(&[0u8; 8]);
    expect_closed(&target, &wire::frame(&payload), false, "unknown API key 1000", "API key 1000");
    target.assert_unharmed("after an unknown API key");
}

#[test]
fn unsupported_api_versions_version_gets_error_35_in_a_v0_body() {
    let mut target = Target::start();
    let correlation_id = 4242;
    // A future ApiVersions: flexible header (v2) and a v3-shaped body, as KIP-511 expects.
    let mut payload = wire::raw_request_header(ApiKey::ApiVersions as i16, 99, correlation_id, "future", true);
    payload.extend_from_slice(b"\x0astrom-e2e\x060.1.0\x00");
    let mut stream = wire::connect(target.addr(), CLOSE_TIMEOUT).expect("connect");
    stream.write_all(&wire::frame(&payload)).expect("send");
    let frame = wire::read_frame(&mut stream)
        .expect("read the answer")
        .expect("the broker closed instead of answering ApiVersions v99");
    let (got_id, mut body) = wire::split_response_v0(frame).expect("response header v0");
    assert_eq!(got_id, correlation_id, "correlation id");
    let response = ApiVersionsResponse::decode(&mut body, 0).expect("a v0 ApiVersions body");
    assert_eq!(body.remaining(), 0, "bytes left after the v0 body: not a v0 body");
    assert_eq!(response.error_code, UNSUPPORTED_VERSION, "error code");
    let own = response
        .api_keys
        .iter()
        .find(|k| k.api_key == ApiKey::ApiVersions as i16)
        .expect("the answer lists ApiVersions' own range");
    assert!(
        own.min_version == 0 && own.max_version >= 3,
        "ApiVersions range {}..={} (clients fall back to it)",
        own.min_version,
        own.max_version
    );
    target.assert_unharmed("after ApiVersions v99");
}

#[test]
fn unsupported_metadata_version_closes_the_connection() {
    let mut target = Target::start();
    let mut payload = wire::raw_request_header(ApiKey::Metadata as i16, 99, 13, "future", true);
    payload.extend_from_slice(&[0x01, 0x00, 0x00, 0x00]); // null topics, 2 bools, no tags
    let reason = "Metadata version 99 is not supported";
    expect_closed(&target, &wire::frame(&payload), false, reason, "Metadata v99");
    target.assert_unharmed("after Metadata v99");
}

#[test]
fn frame_over_configured_socket_request_max_bytes_is_refused() {
    let limit = 1024 * 1024;
    let mut target =
        Target::start_with(BrokerOptions { socket_request_max_bytes: Some(limit), ..BrokerOptions::default() });
    let size = i32::try_from(2 * limit).unwrap();
    let mut stream = wire::connect(target.addr(), CLOSE_TIMEOUT).expect("connect");
    let peer = stream.local_addr().expect("local address");
    wire::write_tolerant(&mut stream, &size_prefix(size));
    // Keep streaming the announced body; the broker must hang up before it has it all.
    let chunk = vec![0u8; 64 * 1024];
    let mut sent = 0;
    while sent < 2 * limit && wire::write_tolerant(&mut stream, &chunk) {
        sent += 64 * 1024;
    }
    wire::wait_closed(&mut stream, CLOSE_TIMEOUT).expect("the broker closes an oversized frame");
    let reason = format!("request of {size} bytes exceeds socket.request.max.bytes {limit}");
    target.assert_close_logged(peer, &reason, "frame over socket.request.max.bytes");
    target.assert_unharmed("after a frame over socket.request.max.bytes");
}

/// One hostile connection of kind `n % 7`; true if the broker closed it and must have logged
/// why (kinds 1 to 5 always end in a `closing connection` warning; noise usually does too).
fn hostile_once(addr: SocketAddr, n: u64) -> bool {
    let mut rng = Rng(n.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let data = match n % 7 {
        0 => rng.bytes(512),
        1 => [size_prefix(i32::MAX), rng.bytes(32)].concat(),
        2 => [size_prefix(-1), rng.bytes(32)].concat(),
        3 => [size_prefix(4096), rng.bytes(100)].concat(),
        4 => wire::frame(&[wire::raw_request_header(1000, 0, 1, "x", false), rng.bytes(20)].concat()),
        5 => wire::frame(&[wire::raw_request_header(ApiKey::Metadata as i16, 99, 1, "x", true), rng.bytes(8)].concat()),
        _ => wire::frame(&rng.bytes(300)),
    };
    let Ok(mut stream) = wire::connect(addr, CLOSE_TIMEOUT) else {
        return false;
    };
    wire::write_tolerant(&mut stream, &data);
    let _ = stream.shutdown(Shutdown::Write);
    wire::wait_closed(&mut stream, CLOSE_TIMEOUT).is_ok() && (1..=5).contains(&(n % 7))
}

#[test]
fn hostile_connections_in_parallel_do_not_disturb_a_producer() {
    let mut target = Target::start();
    let addr = target.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let attackers: Vec<_> = (0..8u64)
        .map(|t| {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let mut n = t;
                let (mut connections, mut must_explain) = (0usize, 0usize);
                while !stop.load(Ordering::Relaxed) {
                    must_explain += usize::from(hostile_once(addr, n));
                    n += 8;
                    connections += 1;
                }
                (connections, must_explain)
            })
        })
        .collect();

    let sampler = {
        let stop = Arc::clone(&stop);
        let pid = target.broker.pid().expect("broker pid");
        thread::spawn(move || {
            let mut samples = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                samples.push(e2e::broker::rss_of(pid).map(|b| b >> 20).unwrap_or(0));
                thread::sleep(Duration::from_secs(1));
            }
            samples
        })
    };
    let mut config = clients::producer_config(&target.broker.bootstrap(), "all");
    config.set("linger.ms", "1").set("message.timeout.ms", "30000");
    let (producer, log) = clients::tracked_producer(&config).expect("create producer");
    let run_for = Duration::from_secs(15);
    let started = Instant::now();
    let mut sent = 0usize;
    while started.elapsed() < run_for {
        let value = format!("under-attack-{sent}");
        clients::send_blocking(&producer, Record::with_opaque_to(ALIVE_TOPIC, sent).payload(&value)).expect("enqueue");
        sent += 1;
        if sent.is_multiple_of(100) {
            thread::sleep(Duration::from_millis(10));
        }
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
    stop.store(true, Ordering::Relaxed);
    let (connections, must_explain) =
        attackers.into_iter().map(|a| a.join().unwrap()).fold((0, 0), |(c, m), (ac, am)| (c + ac, m + am));
    println!("broker RSS each second (MiB): {:?}", sampler.join().unwrap());
    println!(
        "{connections} hostile connections; producer sent {sent}, acked {}, failed {}",
        log.acked_count(),
        log.failed_count()
    );
    assert!(connections > 100, "too few hostile connections to mean anything: {connections}");
    assert_eq!(
        (log.acked_count(), log.failed_count()),
        (sent, 0),
        "the producer was disturbed: {:?}",
        log.snapshot().failed.first()
    );
    target.assert_closes_logged(must_explain, "after parallel hostile connections");
    target.assert_unharmed("after parallel hostile connections");
}
