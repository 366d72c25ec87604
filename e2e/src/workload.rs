//! A continuous writer and the checker that proves nothing acknowledged was lost (RELIABILITY.md
//! P1–P3): an idempotent acks=all librdkafka producer sending unique values at a steady rate
//! on its own thread while a test injects faults, and a check of everything read back against
//! every delivery report — each acknowledged value read exactly once, at the offset it was
//! acknowledged at, and in send order within its partition.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rdkafka::producer::Producer;

use crate::clients::{self, ConsumedRecord, DeliveryLog, Record, Reports};

/// The value of record `id` (sortable, unique).
pub fn value_of(id: usize) -> String {
    format!("w{id:09}")
}

/// A producer writing on its own thread until stopped.
pub struct Writer {
    started: Instant,
    per_second: u32,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicUsize>,
    log: Arc<DeliveryLog>,
    handle: JoinHandle<Result<()>>,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer").field("sent", &self.sent()).field("acked", &self.acked()).finish()
    }
}

/// What a writer did.
#[derive(Debug, Clone)]
pub struct Written {
    pub sent: usize,
    pub reports: Reports,
    /// When record 0 was due; record `id` was due `id / per_second` later (the pacing).
    pub started: Instant,
    pub per_second: u32,
}

impl Written {
    /// Each acknowledged record's delay from when it was due to its acknowledgement, by the
    /// time it was due (so a stall shows as the delay of every record due during it).
    pub fn delays(&self) -> Vec<(Instant, Duration)> {
        let rate = f64::from(self.per_second.max(1));
        self.reports
            .acked
            .iter()
            .map(|d| {
                let due = self.started + Duration::from_secs_f64(d.id as f64 / rate);
                (due, d.at.saturating_duration_since(due))
            })
            .collect()
    }
}

impl Writer {
    /// Starts writing to `partitions` partitions of `topic` (round robin), `per_second` records
    /// a second, idempotent with acks=all (the Java client's defaults).
    pub fn start(bootstrap: &str, topic: &str, partitions: i32, per_second: u32) -> Result<Writer> {
        let mut config = clients::producer_config(bootstrap, "all");
        config
            .set("enable.idempotence", "true")
            .set("max.in.flight.requests.per.connection", "5")
            .set("message.timeout.ms", "180000")
            .set("request.timeout.ms", "10000");
        if let Ok(contexts) = std::env::var("STROM_E2E_WRITER_DEBUG") {
            config.set("debug", contexts);
        }
        let (producer, log) = clients::tracked_producer(&config)?;
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicUsize::new(0));
        let (topic, thread_stop, thread_sent) = (topic.to_string(), stop.clone(), sent.clone());
        let begin = Instant::now();
        let handle = thread::Builder::new()
            .name("writer".into())
            .spawn(move || -> Result<()> {
                let started = begin;
                let mut id = 0usize;
                while !thread_stop.load(Ordering::Relaxed) {
                    let value = value_of(id);
                    let partition = i32::try_from(id % usize::try_from(partitions).unwrap_or(1)).unwrap_or(0);
                    let record = Record::with_opaque_to(&topic, id).partition(partition).key(&value).payload(&value);
                    clients::send_blocking(&producer, record).with_context(|| format!("enqueue {value}"))?;
                    id += 1;
                    thread_sent.store(id, Ordering::Relaxed);
                    // Pace: the id-th record is due at id / per_second.
                    let due = Duration::from_secs_f64(id as f64 / f64::from(per_second.max(1)));
                    if let Some(wait) = due.checked_sub(started.elapsed()) {
                        thread::sleep(wait);
                    }
                }
                producer.flush(Duration::from_secs(180)).context("flush the writer")?;
                Ok(())
            })
            .context("spawn the writer")?;
        Ok(Writer { started: begin, per_second, stop, sent, log, handle })
    }

    pub fn sent(&self) -> usize {
        self.sent.load(Ordering::Relaxed)
    }

    pub fn acked(&self) -> usize {
        self.log.acked_count()
    }

    /// Every delivery report so far (a power-cut test takes what was acknowledged before the
    /// cut from it).
    pub fn reports(&self) -> Reports {
        self.log.snapshot()
    }

    /// Waits until at least `more` records beyond the current count are acknowledged: the
    /// cluster makes progress. Fails after `timeout`.
    pub fn wait_progress(&self, more: usize, timeout: Duration) -> Result<()> {
        let target = self.acked() + more;
        let deadline = Instant::now() + timeout;
        while self.acked() < target {
            if Instant::now() > deadline {
                bail!(
                    "only {} of {target} records acknowledged after {timeout:?} ({} sent)",
                    self.acked(),
                    self.sent()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }

    /// Stops sending, waits for every outstanding delivery report, returns them all.
    pub fn stop(self) -> Result<Written> {
        self.stop.store(true, Ordering::Relaxed);
        let Writer { started, per_second, sent, log, handle, .. } = self;
        match handle.join() {
            Ok(r) => r?,
            Err(_) => bail!("the writer thread panicked"),
        }
        Ok(Written { sent: sent.load(Ordering::Relaxed), reports: log.snapshot(), started, per_second })
    }
}

/// What the check found.
#[derive(Debug, Clone, Copy)]
pub struct Checked {
    pub sent: usize,
    pub acked: usize,
    pub failed: usize,
    pub read: usize,
    /// Acknowledged without an offset (librdkafka's implicit acks), checked where read.
    pub offset_unknown: usize,
}

/// Every acknowledged record is read exactly once, at its acknowledged offset; no value is read
/// twice; within each partition acknowledged records sit in send order.
///
/// librdkafka acknowledges some records without an offset (-1001): when a request's answer
/// was lost (a timeout, a dropped connection) but a later request of the same idempotent
/// producer succeeded, the earlier records are "implicitly acked" as persisted. Those must
/// still be read exactly once in their partition and in send order; their offset is the one
/// they were read at.
pub fn check_exactly_once_in_order(written: &Written, read: &[ConsumedRecord]) -> Result<Checked> {
    let mut by_value: HashMap<&str, Vec<&ConsumedRecord>> = HashMap::new();
    for r in read {
        by_value.entry(r.value_str()).or_default().push(r);
    }
    let mut duplicated: Vec<(&str, Vec<(i32, i64)>)> = by_value
        .iter()
        .filter(|(_, rs)| rs.len() > 1)
        .map(|(v, rs)| (*v, rs.iter().map(|r| (r.partition, r.offset)).collect()))
        .collect();
    if !duplicated.is_empty() {
        duplicated.sort_unstable();
        let acked_at: Vec<_> = duplicated
            .iter()
            .take(5)
            .filter_map(|(v, _)| written.reports.acked.iter().find(|d| value_of(d.id) == *v))
            .map(|d| (d.id, d.partition, d.offset))
            .collect();
        bail!(
            "{} values read more than once (idempotence is on), as (value, [(partition, offset)]): {:?}; \
             acknowledged as (id, partition, offset): {acked_at:?}",
            duplicated.len(),
            &duplicated[..duplicated.len().min(5)]
        );
    }
    let mut lost = Vec::new();
    let mut misplaced = Vec::new();
    for d in &written.reports.acked {
        let value = value_of(d.id);
        match by_value.get(value.as_str()).and_then(|rs| rs.first()) {
            None => lost.push(d.id),
            Some(r) if r.partition != d.partition || (d.offset >= 0 && r.offset != d.offset) => {
                misplaced.push((d.id, (d.partition, d.offset), (r.partition, r.offset)))
            }
            Some(_) => {}
        }
    }
    if !lost.is_empty() {
        bail!("{} acknowledged records were never read, e.g. ids {:?}", lost.len(), &lost[..lost.len().min(10)]);
    }
    if !misplaced.is_empty() {
        bail!("acknowledged records read elsewhere than acknowledged: {:?}", &misplaced[..misplaced.len().min(5)]);
    }
    let mut per_partition: BTreeMap<i32, Vec<(usize, i64)>> = BTreeMap::new();
    for d in &written.reports.acked {
        let offset = match d.offset {
            o if o >= 0 => o,
            _ => by_value.get(value_of(d.id).as_str()).and_then(|rs| rs.first()).map_or(d.offset, |r| r.offset),
        };
        per_partition.entry(d.partition).or_default().push((d.id, offset));
    }
    for (p, mut acked) in per_partition {
        acked.sort_unstable();
        if let Some(w) = acked.windows(2).find(|w| w[1].1 <= w[0].1) {
            bail!(
                "partition {p}: record {} was sent after {} but sits at offset {} <= {}",
                w[1].0,
                w[0].0,
                w[1].1,
                w[0].1
            );
        }
    }
    Ok(Checked {
        sent: written.sent,
        acked: written.reports.acked.len(),
        failed: written.reports.failed.len(),
        read: read.len(),
        offset_unknown: written.reports.acked.iter().filter(|d| d.offset < 0).count(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn acked(id: usize, partition: i32, offset: i64) -> clients::Delivered {
        clients::Delivered { id, partition, offset, at: Instant::now() }
    }

    fn read(id: usize, partition: i32, offset: i64) -> ConsumedRecord {
        ConsumedRecord {
            partition,
            offset,
            key: None,
            value: Some(value_of(id).into_bytes()),
            headers: Vec::new(),
            timestamp: rdkafka::Timestamp::NotAvailable,
        }
    }

    fn written(acks: Vec<clients::Delivered>) -> Written {
        Written {
            sent: acks.len(),
            reports: Reports { acked: acks, failed: Vec::new() },
            started: Instant::now(),
            per_second: 1,
        }
    }

    #[test]
    fn an_ack_without_an_offset_is_checked_where_it_was_read() {
        let w = written(vec![acked(0, 0, 10), acked(1, 0, -1001), acked(2, 0, 12)]);
        let checked =
            check_exactly_once_in_order(&w, &[read(0, 0, 10), read(1, 0, 11), read(2, 0, 12)]).expect("passes");
        assert_eq!((checked.acked, checked.offset_unknown), (3, 1));
        // Still lost if never read, misplaced in another partition, and out of order if it
        // was read after a record sent later.
        assert!(check_exactly_once_in_order(&w, &[read(0, 0, 10), read(2, 0, 12)]).is_err());
        assert!(check_exactly_once_in_order(&w, &[read(0, 0, 10), read(1, 1, 11), read(2, 0, 12)]).is_err());
        assert!(check_exactly_once_in_order(&w, &[read(0, 0, 10), read(1, 0, 13), read(2, 0, 12)]).is_err());
        // A known offset must match.
        assert!(check_exactly_once_in_order(&w, &[read(0, 0, 9), read(1, 0, 11), read(2, 0, 12)]).is_err());
    }
}
