//! Scenario S8's floods (issue 34): 10,000 idle connections, and 1,000 more that each send a
//! frame size of 100 MiB (under `socket.request.max.bytes`) and then nothing. The broker's
//! memory must follow the bytes that arrived, not the sizes claimed (1,000 × 100 MiB would be
//! 100 GiB): its RSS stays within [`RSS_BOUND`] of where it started, and a producer beside
//! the flood is served as usual. Closing them all gives the connections back.

#![allow(clippy::unwrap_used)]

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use e2e::broker::{BrokerOptions, BrokerProcess};
use e2e::clients;
use e2e::cluster::wait_until;

const IDLE: usize = 10_000;
const CLAIMING: usize = 1_000;
const CLAIMED_BYTES: i32 = 100 << 20;
/// Growth of the broker's RSS allowed under the flood: 24 KiB a connection.
const RSS_BOUND: u64 = 256 << 20;

#[test]
fn ten_thousand_idle_connections_and_huge_claimed_frames_stay_within_a_memory_bound() {
    let options = BrokerOptions {
        extra_args: vec!["--max-connections".into(), (IDLE + CLAIMING + 100).to_string()],
        ..BrokerOptions::default()
    };
    let mut broker = BrokerProcess::new(options).unwrap();
    broker.start().unwrap();
    let bootstrap = broker.bootstrap();
    clients::create_topic(&bootstrap, "beside", 1, &[]).unwrap();
    clients::produce_to_partitions(&bootstrap, "beside", &[(0, "before".into())]).unwrap();
    let before = broker.rss_bytes().unwrap();

    let addr = broker.kafka_addr();
    let mut conns = Vec::with_capacity(IDLE + CLAIMING);
    for _ in 0..IDLE {
        conns.push(TcpStream::connect(addr).unwrap());
    }
    for _ in 0..CLAIMING {
        let mut s = TcpStream::connect(addr).unwrap();
        // The size prefix and the first bytes of a header: the rest never comes.
        s.write_all(&CLAIMED_BYTES.to_be_bytes()).unwrap();
        s.write_all(&[0, 0, 0, 9, 0, 0, 0, 1]).unwrap();
        conns.push(s);
    }
    // Every connection accepted (the broker counts them).
    let open = wait_until(Duration::from_secs(60), || {
        let n = broker_connections(&broker)?;
        anyhow::ensure!(n >= (IDLE + CLAIMING) as f64, "{n} connections open");
        Ok(n)
    })
    .unwrap();
    let during = broker.rss_bytes().unwrap();
    clients::produce_to_partitions(&bootstrap, "beside", &[(0, "during".into())]).expect("a producer beside the flood");
    let read = clients::read_to_end(&bootstrap, "beside", Duration::from_secs(30)).unwrap();
    assert_eq!(read.len(), 2);
    println!(
        "{open} connections open: broker RSS {} MiB before, {} MiB during (+{} KiB a connection)",
        before >> 20,
        during >> 20,
        during.saturating_sub(before) / 1024 / (IDLE + CLAIMING) as u64
    );
    assert!(
        during.saturating_sub(before) <= RSS_BOUND,
        "RSS grew from {} MiB to {} MiB under {open} connections",
        before >> 20,
        during >> 20
    );
    drop(conns);
    wait_until(Duration::from_secs(60), || {
        let n = broker_connections(&broker)?;
        anyhow::ensure!(n < 10.0, "{n} connections still open");
        Ok(())
    })
    .unwrap();
    assert!(broker.is_running());
}

fn broker_connections(broker: &BrokerProcess) -> anyhow::Result<f64> {
    let metrics = broker.http_get("/metrics")?;
    e2e::cluster::metric_value(&metrics.body, "strom_kafka_connections")
        .ok_or_else(|| anyhow::anyhow!("no strom_kafka_connections"))
}
