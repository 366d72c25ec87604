//! The history a reliability run writes: one JSON line per operation, as RELIABILITY.md
//! describes it — `{process, type: invoke|ok|fail|info, f: send|poll|..., value, partition,
//! offset, time}` — kept in memory for the checker and written to a file for whoever has to
//! read a failure.
//!
//! Every operation is recorded under one lock, so the order of the lines is an order in which
//! the operations really happened: an `ok` of a send recorded before the `invoke` of another
//! means the second was sent after the first was acknowledged (what P5 needs).

use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// Whether an operation is starting, or how it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Type {
    Invoke,
    /// It happened (a send acknowledged, a record polled, an offset observed).
    Ok,
    /// It definitely did not happen (a send the client knows was never persisted).
    Fail,
    /// Unknown (a timeout, a lost connection): it may or may not have happened.
    Info,
}

/// What an operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum F {
    /// A producer sends `value` (to `partition`; `offset` when acknowledged).
    Send,
    /// A consumer reads `value` at `partition`/`offset`.
    Poll,
    /// A consumer was assigned `partition`: its polls there start afresh.
    Assign,
    /// The high watermark of `partition` as its leader answered it (`offset`).
    Watermark,
    /// The group's committed offset of `partition` as the coordinator answered it (`offset`).
    Committed,
}

/// One line of the history.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    pub process: String,
    #[serde(rename = "type")]
    pub kind: Type,
    pub f: F,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
    /// Microseconds since the history began.
    pub time: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Op {
    /// An operation of `process` at time 0 (the recorder stamps the time).
    pub fn new(process: &str, kind: Type, f: F) -> Op {
        Op { process: process.to_string(), kind, f, value: None, partition: None, offset: None, time: 0, error: None }
    }

    pub fn value(mut self, value: impl Into<String>) -> Op {
        self.value = Some(value.into());
        self
    }

    pub fn partition(mut self, partition: i32) -> Op {
        self.partition = Some(partition);
        self
    }

    pub fn offset(mut self, offset: i64) -> Op {
        self.offset = Some(offset);
        self
    }

    pub fn error(mut self, error: impl Into<String>) -> Op {
        self.error = Some(error.into());
        self
    }
}

/// A history being recorded by many threads.
#[derive(Debug)]
pub struct History {
    began: Instant,
    path: PathBuf,
    inner: Mutex<Recorded>,
}

#[derive(Debug)]
struct Recorded {
    ops: Vec<Op>,
    file: BufWriter<File>,
    /// The first write error: recording goes on in memory, and [`History::flush`] reports it.
    write_error: Option<std::io::Error>,
}

impl History {
    /// A new history written to `path` (created or truncated).
    pub fn create(path: &Path) -> Result<History> {
        let file = File::create(path).with_context(|| format!("create {}", path.display()))?;
        Ok(History {
            began: Instant::now(),
            path: path.to_path_buf(),
            inner: Mutex::new(Recorded { ops: Vec::new(), file: BufWriter::new(file), write_error: None }),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> MutexGuard<'_, Recorded> {
        // A client thread that panicked while recording leaves a usable history behind.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Microseconds since the history began (the clock of [`Op::time`]).
    pub fn now(&self) -> u64 {
        u64::try_from(self.began.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Appends `op`, stamped with the time since the history began.
    pub fn record(&self, mut op: Op) {
        let mut inner = self.lock();
        op.time = self.now();
        if inner.write_error.is_none() {
            let line = serde_json::to_string(&op).map_err(std::io::Error::other);
            if let Err(e) = line.and_then(|l| writeln!(inner.file, "{l}")) {
                inner.write_error = Some(e);
            }
        }
        inner.ops.push(op);
    }

    /// Everything recorded so far, in order.
    pub fn ops(&self) -> Vec<Op> {
        self.lock().ops.clone()
    }

    /// How many operations match `pred`.
    pub fn count(&self, pred: impl Fn(&Op) -> bool) -> usize {
        self.lock().ops.iter().filter(|op| pred(op)).count()
    }

    /// Writes what is buffered to the file.
    pub fn flush(&self) -> Result<()> {
        let mut inner = self.lock();
        if let Some(e) = inner.write_error.take() {
            return Err(e).with_context(|| format!("write {}", self.path.display()));
        }
        inner.file.flush().with_context(|| format!("write {}", self.path.display()))
    }
}

/// Reads a history file back (to check a history a failed run left behind).
pub fn read(path: &Path) -> Result<Vec<Op>> {
    let file = File::open(path).with_context(|| format!("open {}", path.display()))?;
    let mut ops = Vec::new();
    for (n, line) in BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("read {}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        ops.push(serde_json::from_str(&line).with_context(|| format!("{} line {}", path.display(), n + 1))?);
    }
    Ok(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_history_reads_back_as_it_was_recorded() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("history.jsonl");
        let history = History::create(&path).expect("create");
        history.record(Op::new("p0", Type::Invoke, F::Send).value("v1").partition(2));
        history.record(Op::new("p0", Type::Ok, F::Send).value("v1").partition(2).offset(7));
        history.record(Op::new("c0", Type::Info, F::Send).value("v2").error("timed out"));
        history.flush().expect("flush");
        let back = read(&path).expect("read");
        assert_eq!(back, history.ops());
        assert!(back.windows(2).all(|w| w[0].time <= w[1].time));
        let first = std::fs::read_to_string(&path).expect("file");
        assert!(
            first.starts_with(r#"{"process":"p0","type":"invoke","f":"send","value":"v1","partition":2,"#),
            "{first}"
        );
    }
}
