//! The leader-epoch cache of one replica (Kafka's `leader-epoch-checkpoint`): for each leader
//! epoch, the first offset written in it. It answers "where did epoch E end?" — the question
//! a returning follower asks its leader so that it truncates exactly where their histories
//! diverge (KIP-101 / KIP-279), never merely to its high watermark.
//!
//! The file is Kafka's text format (`0`, the entry count, then `epoch start_offset` lines),
//! replaced atomically on every change; a missing or unreadable file is rebuilt from the
//! log's batch headers.

use std::path::{Path, PathBuf};

const FILE: &str = "leader-epoch-checkpoint";

/// Epoch → start offset, in increasing order of both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<(i32, i64)>,
}

/// Where an epoch ended in this replica's log, as OffsetForLeaderEpoch answers it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEnd {
    /// The largest epoch at most the one asked about (-1 if there is none).
    pub epoch: i32,
    /// The first offset after that epoch: the next epoch's start, or the log end offset for
    /// the latest epoch (-1 if unknown).
    pub end_offset: i64,
}

impl EpochEnd {
    pub const UNDEFINED: EpochEnd = EpochEnd { epoch: -1, end_offset: -1 };
}

impl LeaderEpochCache {
    /// Loads the cache of the replica in `dir`; `from_log` rebuilds it (from batch headers)
    /// when the file is missing or damaged. Entries past `log_end_offset` are dropped.
    pub fn open(dir: &Path, log_end_offset: i64, from_log: impl FnOnce() -> Vec<(i32, i64)>) -> LeaderEpochCache {
        let path = dir.join(FILE);
        let entries = std::fs::read_to_string(&path).ok().and_then(|t| parse(&t)).unwrap_or_else(from_log);
        let mut cache = LeaderEpochCache { path, entries };
        cache.entries.retain(|(_, start)| *start <= log_end_offset);
        cache.persist();
        cache
    }

    /// The latest epoch with an entry.
    pub fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|(e, _)| *e)
    }

    /// Records that `epoch` starts at `start_offset` (a new leader's first offset, or the first
    /// batch of a newer epoch a follower copies). Older or equal epochs are ignored.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) {
        if self.latest_epoch().is_some_and(|e| e >= epoch) {
            return;
        }
        // An epoch that started no later than this one's start has no records: drop it.
        self.entries.retain(|(_, s)| *s < start_offset);
        self.entries.push((epoch, start_offset));
        self.persist();
    }

    /// The log was truncated to `log_end_offset`: epochs that started at or after it are gone.
    pub fn truncate_from_end(&mut self, log_end_offset: i64) {
        let before = self.entries.len();
        self.entries.retain(|(_, s)| *s < log_end_offset);
        if self.entries.len() != before {
            self.persist();
        }
    }

    /// Where `epoch` ended, given this log's end offset.
    pub fn end_offset_for(&self, epoch: i32, log_end_offset: i64) -> EpochEnd {
        let Some(i) = self.entries.iter().rposition(|(e, _)| *e <= epoch) else {
            return EpochEnd::UNDEFINED;
        };
        let end_offset = self.entries.get(i + 1).map_or(log_end_offset, |(_, s)| *s);
        EpochEnd { epoch: self.entries[i].0, end_offset }
    }

    pub fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    fn persist(&self) {
        let mut text = format!("0\n{}\n", self.entries.len());
        for (e, s) in &self.entries {
            text.push_str(&format!("{e} {s}\n"));
        }
        if let Err(e) = crate::metadata::atomic_file::write(&self.path, text.as_bytes()) {
            // The cache is rebuilt from the log if this file is lost; the error is worth a log line.
            tracing::warn!(path = %self.path.display(), error = %e, "could not write the leader-epoch checkpoint");
        }
    }
}

fn parse(text: &str) -> Option<Vec<(i32, i64)>> {
    let mut lines = text.lines();
    if lines.next()?.trim() != "0" {
        return None;
    }
    let count: usize = lines.next()?.trim().parse().ok()?;
    let mut out = Vec::with_capacity(count.min(10_000));
    for line in lines.take(count) {
        let (e, s) = line.trim().split_once(' ')?;
        out.push((e.parse().ok()?, s.parse().ok()?));
    }
    (out.len() == count).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_end_of_an_epoch_is_the_next_epochs_start_or_the_log_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut c = LeaderEpochCache::open(dir.path(), 0, Vec::new);
        c.assign(0, 0);
        c.assign(2, 100);
        c.assign(5, 250);
        assert_eq!(c.end_offset_for(0, 300), EpochEnd { epoch: 0, end_offset: 100 });
        assert_eq!(c.end_offset_for(1, 300), EpochEnd { epoch: 0, end_offset: 100 }, "no epoch 1: epoch 0 ends at 100");
        assert_eq!(c.end_offset_for(2, 300), EpochEnd { epoch: 2, end_offset: 250 });
        assert_eq!(c.end_offset_for(7, 300), EpochEnd { epoch: 5, end_offset: 300 });
        assert_eq!(c.end_offset_for(-1, 300), EpochEnd::UNDEFINED);
    }

    #[test]
    fn the_checkpoint_survives_reopening_and_truncation_drops_later_epochs() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut c = LeaderEpochCache::open(dir.path(), 0, Vec::new);
        c.assign(1, 0);
        c.assign(3, 40);
        c.assign(3, 60);
        c.assign(2, 70);
        assert_eq!(c.entries(), &[(1, 0), (3, 40)], "older and equal epochs are ignored");
        let again = LeaderEpochCache::open(dir.path(), 100, || panic!("the file is there"));
        assert_eq!(again.entries(), c.entries());
        let mut again = again;
        again.truncate_from_end(40);
        assert_eq!(again.entries(), &[(1, 0)]);
        let reopened = LeaderEpochCache::open(dir.path(), 100, || panic!("the file is there"));
        assert_eq!(reopened.entries(), &[(1, 0)]);
    }

    #[test]
    fn a_damaged_checkpoint_is_rebuilt_from_the_log_and_clamped_to_its_end() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join(FILE), "0\n3\n1 0\n").expect("write");
        let c = LeaderEpochCache::open(dir.path(), 50, || vec![(0, 0), (4, 20), (6, 80)]);
        assert_eq!(c.entries(), &[(0, 0), (4, 20)]);
    }
}
