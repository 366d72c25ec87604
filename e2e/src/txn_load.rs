//! `strom-load transactions`: a transactional producer that sends as fast as it can and
//! commits every `commit_interval` (issue 33's measure: throughput with commits every 100 ms,
//! and how long each commit takes). The records of a transaction are flushed (delivered and
//! acknowledged) first; the commit latency is then `commit_transaction` called → returned:
//! EndTxn and the coordinator's decision made durable, as the client sees it.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

/// What one run did.
#[derive(Debug, Clone, Default)]
pub struct TxnRun {
    pub records: usize,
    pub bytes: u64,
    pub secs: f64,
    pub commits: usize,
    /// Each commit's duration, in microseconds.
    pub commit_latencies_us: Vec<u64>,
}

/// Runs transactions on `topic` for `duration` with `config` (bootstrap, acks, linger and
/// the rest already set): records of `record_size` bytes, committed every `commit_interval`.
pub fn run(
    mut config: ClientConfig,
    transactional_id: &str,
    topic: &str,
    record_size: usize,
    commit_interval: Duration,
    duration: Duration,
) -> Result<TxnRun> {
    const TIMEOUT: Duration = Duration::from_secs(60);
    let producer: ThreadedProducer<DefaultProducerContext> = config
        .set("transactional.id", transactional_id)
        .set("transaction.timeout.ms", "60000")
        .set("message.timeout.ms", "30000")
        .create()
        .context("create the transactional producer")?;
    producer.init_transactions(TIMEOUT).context("InitProducerId")?;
    let payload = vec![b'x'; record_size];
    let mut run = TxnRun::default();
    let started = Instant::now();
    while started.elapsed() < duration {
        producer.begin_transaction().context("begin")?;
        let opened = Instant::now();
        while opened.elapsed() < commit_interval {
            let record = BaseRecord::<(), [u8]>::to(topic).payload(&payload[..]);
            match producer.send(record) {
                Ok(()) => {
                    run.records += 1;
                    run.bytes += record_size as u64;
                }
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err((e, _)) => return Err(e).context("send"),
            }
        }
        producer.flush(TIMEOUT).context("flush")?;
        let committing = Instant::now();
        producer.commit_transaction(TIMEOUT).context("commit")?;
        run.commit_latencies_us.push(u64::try_from(committing.elapsed().as_micros()).unwrap_or(u64::MAX));
        run.commits += 1;
    }
    run.secs = started.elapsed().as_secs_f64();
    Ok(run)
}
