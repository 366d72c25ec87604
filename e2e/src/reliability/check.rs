//! The checker: reads a [`History`](super::history) and reports every way it breaks
//! RELIABILITY.md's properties that a client can see.
//!
//! - P1 lost write: a send was acknowledged and no consumer, the final read included, read it.
//! - P2 duplicate: one value at two positions (read twice, or read elsewhere than acknowledged).
//! - P3 poll order: within one assignment, a consumer's polls of a partition go backwards
//!   (non-monotonic poll) or jump over an offset known to hold a value (poll skip).
//! - P4 inconsistent offset: two values at one (partition, offset).
//! - P5 send order: a record sent after another was acknowledged on the same partition sits at
//!   a lower offset.
//! - P6 phantom read: a value read that was never sent, or whose send definitely failed.
//! - P7 the high watermark a consumer saw went backwards.
//! - P8 the group's committed offset of a partition went backwards.
//!
//! A send that ended in `info` (a timeout, a lost connection) may or may not have happened:
//! reading it is fine and so is not reading it. Nothing here looks at brokers (P9–P12 are the
//! scenarios' own checks).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;

use super::history::{Op, Type, F};

/// One violation, with what is needed to find it in the history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Anomaly {
    /// P1.
    Lost { value: String, partition: i32, offset: i64 },
    /// P2: every (partition, offset) the value was acknowledged or read at.
    Duplicate { value: String, at: Vec<(i32, i64)> },
    /// P3: `process` polled `offset` after `previous` in one assignment.
    NonMonotonicPoll { process: String, partition: i32, previous: i64, offset: i64 },
    /// P3: `process` went from `previous` to `offset`, past `skipped`, which holds a value.
    PollSkip { process: String, partition: i32, previous: i64, offset: i64, skipped: i64 },
    /// P4.
    InconsistentOffset { partition: i32, offset: i64, values: Vec<String> },
    /// P5: `later` was sent after `earlier` was acknowledged, yet sits at a lower or equal offset.
    NonMonotonicSend { partition: i32, earlier: (String, i64), later: (String, i64) },
    /// P6.
    PhantomRead { value: String, why: &'static str },
    /// P7.
    HighWatermarkBackwards { process: String, partition: i32, previous: i64, offset: i64 },
    /// P8.
    CommittedOffsetBackwards { process: String, partition: i32, previous: i64, offset: i64 },
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Anomaly::Lost { value, partition, offset } => {
                write!(f, "P1 lost write: {value} acknowledged at {partition}/{offset}, never read")
            }
            Anomaly::Duplicate { value, at } => write!(f, "P2 duplicate: {value} at {at:?}"),
            Anomaly::NonMonotonicPoll { process, partition, previous, offset } => {
                write!(f, "P3 non-monotonic poll: {process} read {partition}/{offset} after {previous}")
            }
            Anomaly::PollSkip { process, partition, previous, offset, skipped } => write!(
                f,
                "P3 poll skip: {process} read {partition}/{offset} right after {previous}, skipping {skipped}"
            ),
            Anomaly::InconsistentOffset { partition, offset, values } => {
                write!(f, "P4 inconsistent offset: {partition}/{offset} holds {values:?}")
            }
            Anomaly::NonMonotonicSend { partition, earlier, later } => write!(
                f,
                "P5 non-monotonic send: in partition {partition}, {} (offset {}) was sent after {} (offset {}) was acknowledged",
                later.0, later.1, earlier.0, earlier.1
            ),
            Anomaly::PhantomRead { value, why } => write!(f, "P6 phantom read: {value} ({why})"),
            Anomaly::HighWatermarkBackwards { process, partition, previous, offset } => {
                write!(f, "P7 high watermark backwards: {process} saw {partition} at {offset} after {previous}")
            }
            Anomaly::CommittedOffsetBackwards { process, partition, previous, offset } => {
                write!(f, "P8 committed offset backwards: {process} saw {partition} at {offset} after {previous}")
            }
        }
    }
}

/// What the checker found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Sends started.
    pub sent: usize,
    pub acknowledged: usize,
    /// Sends that definitely failed.
    pub failed: usize,
    /// Sends whose outcome is unknown (`info`, or no completion at all).
    pub unknown: usize,
    /// Distinct values read.
    pub read: usize,
    pub polls: usize,
    pub anomalies: Vec<Anomaly>,
}

impl Report {
    pub fn is_valid(&self) -> bool {
        self.anomalies.is_empty()
    }

    pub fn lost(&self) -> usize {
        self.anomalies.iter().filter(|a| matches!(a, Anomaly::Lost { .. })).count()
    }

    pub fn duplicates(&self) -> usize {
        self.anomalies.iter().filter(|a| matches!(a, Anomaly::Duplicate { .. })).count()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sent {}, acknowledged {}, failed {}, unknown {}, read {} ({} polls), lost {}, duplicates {}, anomalies {}",
            self.sent,
            self.acknowledged,
            self.failed,
            self.unknown,
            self.read,
            self.polls,
            self.lost(),
            self.duplicates(),
            self.anomalies.len()
        )
    }
}

/// How one send ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Pending,
    Acked { partition: i32, offset: i64 },
    Failed,
    Unknown,
}

#[derive(Debug)]
struct Send {
    partition: Option<i32>,
    outcome: Outcome,
}

/// Checks `ops` (in the order they were recorded).
pub fn check(ops: &[Op]) -> Report {
    let mut report = Report::default();
    let sends = sends(ops, &mut report);

    // Where each value was acknowledged or read, and what each position holds (P2, P4).
    let mut positions: HashMap<&str, BTreeSet<(i32, i64)>> = HashMap::new();
    let mut read_at: HashMap<&str, BTreeSet<(i32, i64)>> = HashMap::new();
    for (value, send) in &sends {
        if let Outcome::Acked { partition, offset } = send.outcome {
            if offset >= 0 {
                positions.entry(value).or_default().insert((partition, offset));
            }
        }
    }
    for op in ops.iter().filter(|op| op.f == F::Poll && op.kind == Type::Ok) {
        report.polls += 1;
        if let (Some(value), Some(p), Some(o)) = (op.value.as_deref(), op.partition, op.offset) {
            positions.entry(value).or_default().insert((p, o));
            read_at.entry(value).or_default().insert((p, o));
        }
    }
    report.read = read_at.len();
    let mut holds: BTreeMap<(i32, i64), BTreeSet<&str>> = BTreeMap::new();
    for (value, at) in &positions {
        for &position in at {
            holds.entry(position).or_default().insert(value);
        }
    }
    let mut values: Vec<&&str> = positions.keys().collect();
    values.sort_unstable();
    for value in values {
        let at = &positions[*value];
        if at.len() > 1 {
            report.anomalies.push(Anomaly::Duplicate { value: value.to_string(), at: at.iter().copied().collect() });
        }
    }
    for (&(partition, offset), values) in &holds {
        if values.len() > 1 {
            report.anomalies.push(Anomaly::InconsistentOffset {
                partition,
                offset,
                values: values.iter().map(|v| v.to_string()).collect(),
            });
        }
    }

    // P1 and P6.
    let mut sorted: Vec<(&&str, &Send)> = sends.iter().collect();
    sorted.sort_unstable_by_key(|(v, _)| **v);
    for (value, send) in sorted {
        if let Outcome::Acked { partition, offset } = send.outcome {
            if !read_at.contains_key(*value) {
                report.anomalies.push(Anomaly::Lost { value: value.to_string(), partition, offset });
            }
        }
    }
    let mut read_values: Vec<&&str> = read_at.keys().collect();
    read_values.sort_unstable();
    for value in read_values {
        match sends.get(*value).map(|s| s.outcome) {
            None => report.anomalies.push(Anomaly::PhantomRead { value: value.to_string(), why: "never sent" }),
            Some(Outcome::Failed) => {
                report.anomalies.push(Anomaly::PhantomRead { value: value.to_string(), why: "its send failed" })
            }
            Some(_) => {}
        }
    }

    send_order(ops, &sends, &read_at, &mut report);
    poll_order(ops, &holds, &mut report);
    monotonic(ops, F::Watermark, &mut report, |process, partition, previous, offset| Anomaly::HighWatermarkBackwards {
        process,
        partition,
        previous,
        offset,
    });
    monotonic(ops, F::Committed, &mut report, |process, partition, previous, offset| {
        Anomaly::CommittedOffsetBackwards { process, partition, previous, offset }
    });
    report
}

/// Every send by value, with its outcome; counts them into `report`.
fn sends<'a>(ops: &'a [Op], report: &mut Report) -> HashMap<&'a str, Send> {
    let mut sends: HashMap<&str, Send> = HashMap::new();
    for op in ops.iter().filter(|op| op.f == F::Send) {
        let Some(value) = op.value.as_deref() else { continue };
        match op.kind {
            Type::Invoke => {
                sends.insert(value, Send { partition: op.partition, outcome: Outcome::Pending });
            }
            Type::Ok => {
                let outcome = Outcome::Acked { partition: op.partition.unwrap_or(-1), offset: op.offset.unwrap_or(-1) };
                sends.entry(value).or_insert(Send { partition: op.partition, outcome }).outcome = outcome;
            }
            Type::Fail => {
                sends.entry(value).or_insert(Send { partition: op.partition, outcome: Outcome::Failed }).outcome =
                    Outcome::Failed
            }
            Type::Info => {
                sends.entry(value).or_insert(Send { partition: op.partition, outcome: Outcome::Unknown }).outcome =
                    Outcome::Unknown
            }
        }
    }
    report.sent = sends.len();
    for send in sends.values() {
        match send.outcome {
            Outcome::Acked { .. } => report.acknowledged += 1,
            Outcome::Failed => report.failed += 1,
            Outcome::Pending | Outcome::Unknown => report.unknown += 1,
        }
    }
    sends
}

/// P5: walks the history keeping, per partition, the acknowledged record with the highest
/// offset so far; a send started after it must land above it. A record acknowledged without
/// an offset (librdkafka's implicit acks after a lost response) counts at the offset it was
/// read at.
fn send_order(
    ops: &[Op],
    sends: &HashMap<&str, Send>,
    read_at: &HashMap<&str, BTreeSet<(i32, i64)>>,
    report: &mut Report,
) {
    let offset_of = |value: &str, partition: i32| -> Option<i64> {
        match sends.get(value).map(|s| s.outcome) {
            Some(Outcome::Acked { partition: p, offset }) if p == partition && offset >= 0 => Some(offset),
            _ => read_at.get(value)?.iter().find(|(p, _)| *p == partition).map(|&(_, o)| o),
        }
    };
    let mut highest_acked: HashMap<i32, (&str, i64)> = HashMap::new();
    let mut floors: Vec<(i32, &str, &str, i64)> = Vec::new();
    for op in ops.iter().filter(|op| op.f == F::Send) {
        let Some(value) = op.value.as_deref() else { continue };
        match op.kind {
            Type::Invoke => {
                let partition = op.partition.or_else(|| sends.get(value).and_then(|s| s.partition));
                if let Some(&(earlier, offset)) = partition.and_then(|p| highest_acked.get(&p)) {
                    floors.push((partition.unwrap_or(-1), value, earlier, offset));
                }
            }
            Type::Ok => {
                let Some(partition) = op.partition else { continue };
                if let Some(offset) = offset_of(value, partition) {
                    let highest = highest_acked.entry(partition).or_insert((value, offset));
                    if offset > highest.1 {
                        *highest = (value, offset);
                    }
                }
            }
            Type::Fail | Type::Info => {}
        }
    }
    for (partition, later, earlier, earlier_offset) in floors {
        if let Some(offset) = offset_of(later, partition) {
            if offset <= earlier_offset {
                report.anomalies.push(Anomaly::NonMonotonicSend {
                    partition,
                    earlier: (earlier.to_string(), earlier_offset),
                    later: (later.to_string(), offset),
                });
            }
        }
    }
}

/// P3: each process's polls of a partition, from one assignment to the next.
fn poll_order(ops: &[Op], holds: &BTreeMap<(i32, i64), BTreeSet<&str>>, report: &mut Report) {
    let mut last: HashMap<(&str, i32), i64> = HashMap::new();
    for op in ops {
        let Some(partition) = op.partition else { continue };
        let key = (op.process.as_str(), partition);
        match (op.f, op.kind, op.offset) {
            (F::Assign, _, _) => {
                last.remove(&key);
            }
            (F::Poll, Type::Ok, Some(offset)) => {
                if let Some(previous) = last.insert(key, offset) {
                    if offset <= previous {
                        report.anomalies.push(Anomaly::NonMonotonicPoll {
                            process: op.process.clone(),
                            partition,
                            previous,
                            offset,
                        });
                    } else if let Some((&(_, skipped), _)) =
                        holds.range((partition, previous + 1)..(partition, offset)).next()
                    {
                        report.anomalies.push(Anomaly::PollSkip {
                            process: op.process.clone(),
                            partition,
                            previous,
                            offset,
                            skipped,
                        });
                    }
                }
            }
            _ => {}
        }
    }
}

/// P7 and P8: the offsets `f` observes per process and partition never decrease. Negative
/// offsets (not known yet) are not observations.
fn monotonic(ops: &[Op], f: F, report: &mut Report, anomaly: impl Fn(String, i32, i64, i64) -> Anomaly) {
    let mut last: HashMap<(&str, i32), i64> = HashMap::new();
    for op in ops.iter().filter(|op| op.f == f && op.kind == Type::Ok) {
        let (Some(partition), Some(offset)) = (op.partition, op.offset) else { continue };
        if offset < 0 {
            continue;
        }
        if let Some(previous) = last.insert((op.process.as_str(), partition), offset) {
            if offset < previous {
                report.anomalies.push(anomaly(op.process.clone(), partition, previous, offset));
            }
        }
    }
}

#[cfg(test)]
mod tests;
