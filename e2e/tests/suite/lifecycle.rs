//! Requirement (DESIGN §2 "Observability", the `strom serve` contract): the HTTP port answers
//! `/healthz`, `/readyz` and `/metrics` (Prometheus text), and SIGTERM is a clean shutdown —
//! the process exits with status 0 and a restart on the same data dir serves every record that
//! was acknowledged before it, even with acks=1.

#![allow(clippy::unwrap_used)]

use std::process::ExitStatus;
use std::time::Duration;

use e2e::broker::BrokerProcess;
use e2e::clients::{self, Record};
use rdkafka::producer::Producer;

/// A clean shutdown handles the signal and exits on its own: status 0 (or 143, which the JVM
/// uses after running its shutdown hooks, so that the reference Kafka passes too). Death by
/// the signal itself (no exit code) means SIGTERM was not handled.
fn clean_exit(status: ExitStatus) -> bool {
    matches!(status.code(), Some(0 | 143))
}

#[test]
fn http_endpoints_answer_health_readiness_and_prometheus_metrics() {
    let broker = BrokerProcess::start_default().expect("start broker");
    for path in ["/healthz", "/readyz"] {
        let response = broker.http_get(path).expect("GET");
        assert_eq!(response.status, 200, "GET {path}: {}", response.body);
    }
    let metrics = broker.http_get("/metrics").expect("GET /metrics");
    assert_eq!(metrics.status, 200);
    assert!(
        metrics.body.lines().any(|l| l.starts_with("# TYPE ")),
        "/metrics is not Prometheus text:\n{}",
        &metrics.body[..metrics.body.len().min(500)]
    );
    // Without an Accept header asking for OpenMetrics: the classic format (a counter family
    // named as its samples, no `# EOF`); Prometheus, which asks, gets OpenMetrics
    // (observability.rs scrapes with it).
    assert!(metrics.body.lines().any(|l| l == "# TYPE strom_network_bytes_in_total counter"), "{}", metrics.body);
    assert!(!metrics.body.contains("# EOF"), "{}", metrics.body);
    let missing = broker.http_get("/no-such-page").expect("GET unknown path");
    assert_eq!(missing.status, 404, "an unknown path is 404");
}

#[test]
fn sigterm_exits_cleanly_and_a_restart_serves_the_same_records() {
    let mut broker = BrokerProcess::start_default().expect("start broker");
    let bootstrap = broker.bootstrap();
    clients::create_topic(&bootstrap, "kept", 2, &[]).expect("create topic");
    let (producer, log) = clients::tracked_producer(&clients::producer_config(&bootstrap, "1")).unwrap();
    let values: Vec<String> = (0..5_000).map(|i| format!("kept-{i}")).collect();
    for (i, value) in values.iter().enumerate() {
        let record = Record::with_opaque_to("kept", i).partition(i32::try_from(i % 2).unwrap()).payload(value);
        clients::send_blocking(&producer, record).unwrap();
    }
    producer.flush(Duration::from_secs(30)).expect("flush");
    assert_eq!((log.acked_count(), log.failed_count()), (values.len(), 0));
    drop(producer);

    let status = broker.terminate().expect("SIGTERM");
    assert!(clean_exit(status), "strom ended with {status} on SIGTERM");
    broker.restart().expect("restart after a clean shutdown");

    let records = clients::read_to_end(&bootstrap, "kept", Duration::from_secs(60)).unwrap();
    let mut got: Vec<&str> = records.iter().map(|r| r.value_str()).collect();
    got.sort_unstable();
    let mut want: Vec<&str> = values.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(got.len(), want.len(), "records after the restart");
    assert!(got == want, "the records after the restart differ from those acknowledged");
    let status = broker.terminate().expect("second SIGTERM");
    assert!(clean_exit(status), "strom ended with {status} on the second SIGTERM");
}
