//! The metadata storage against openraft's own conformance suite, plus what the suite does
//! not cover: reopening, a torn tail, purge and truncate across restarts, snapshots loaded
//! back at start.

use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::io::Write;

use openraft::storage::{RaftLogStorage, RaftLogStorageExt, RaftStateMachine};
use openraft::testing::{blank_ent, log_id, StoreBuilder, Suite};
use openraft::{Entry, EntryPayload, RaftLogReader, RaftSnapshotBuilder};
use tempfile::TempDir;

use super::command::MetadataCommand;
use super::log_store::LogStore;
use super::state_machine::StateMachine;
use super::types::{StorageError, TypeConfig, Vote};

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StorageError> {
        let dir = TempDir::new().map_err(|e| openraft::StorageIOError::write(&e))?;
        let log = LogStore::open(&dir.path().join("raft")).map_err(|e| openraft::StorageIOError::write(&e))?;
        let sm = StateMachine::open(&dir.path().join("snapshots"))?;
        Ok((dir, log, sm))
    }
}

#[test]
fn the_log_store_and_state_machine_pass_openraft_conformance_suite() {
    // The suite builds its own runtime for each case: a plain #[test], not #[tokio::test].
    Suite::test_all(Builder).expect("openraft storage suite");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime")
}

fn command_ent(term: u64, index: u64, name: &str) -> Entry<TypeConfig> {
    Entry {
        log_id: log_id(term, 0, index),
        payload: EntryPayload::Normal(MetadataCommand::CreateTopic {
            name: name.to_string(),
            id: uuid::Uuid::from_u128(u128::from(index)),
            configs: BTreeMap::new(),
            assignment: vec![vec![0]],
        }),
    }
}

async fn indexes(log: &mut LogStore) -> Vec<u64> {
    log.try_get_log_entries(..).await.expect("read").iter().map(|e| e.log_id.index).collect()
}

#[test]
fn entries_and_the_vote_survive_reopening() {
    let dir = TempDir::new().expect("tempdir");
    runtime().block_on(async {
        let mut log = LogStore::open(dir.path()).expect("open");
        log.save_vote(&Vote::new(3, 1)).await.expect("vote");
        log.blocking_append((1..=20).map(|i| command_ent(3, i, &format!("t{i}")))).await.expect("append");
        drop(log);
        let mut log = LogStore::open(dir.path()).expect("reopen");
        assert_eq!(log.read_vote().await.expect("vote"), Some(Vote::new(3, 1)));
        assert_eq!(indexes(&mut log).await, (1..=20).collect::<Vec<_>>());
        let state = log.get_log_state().await.expect("state");
        assert_eq!(state.last_log_id, Some(log_id(3, 0, 20)));
    });
}

#[test]
fn a_torn_tail_is_cut_back_to_the_last_whole_entry() {
    let dir = TempDir::new().expect("tempdir");
    runtime().block_on(async {
        let mut log = LogStore::open(dir.path()).expect("open");
        log.blocking_append((1..=5).map(|i| blank_ent::<TypeConfig>(1, 0, i))).await.expect("append");
        drop(log);
        let segment = dir.path().join(format!("{:020}.log", 1));
        let len = std::fs::metadata(&segment).expect("segment").len();
        // Cut the last entry in half, then append garbage as a crash mid-write might leave.
        let f = OpenOptions::new().write(true).open(&segment).expect("open segment");
        f.set_len(len - 10).expect("truncate");
        let mut f = OpenOptions::new().append(true).open(&segment).expect("open segment");
        f.write_all(b"\x00\x00\x00\x07garbage").expect("garbage");
        drop(f);
        let mut log = LogStore::open(dir.path()).expect("reopen after a torn write");
        assert_eq!(indexes(&mut log).await, vec![1, 2, 3, 4]);
        // Appending continues after the cut.
        log.blocking_append([blank_ent::<TypeConfig>(2, 0, 5)]).await.expect("append after recovery");
        drop(log);
        let mut log = LogStore::open(dir.path()).expect("reopen again");
        assert_eq!(indexes(&mut log).await, vec![1, 2, 3, 4, 5]);
        let state = log.get_log_state().await.expect("state");
        assert_eq!(state.last_log_id, Some(log_id(2, 0, 5)));
    });
}

#[test]
fn purge_and_truncate_hold_across_restarts_and_whole_segments_are_deleted() {
    let dir = TempDir::new().expect("tempdir");
    runtime().block_on(async {
        let mut log = LogStore::open(dir.path()).expect("open");
        // Big entries, so the log spans several 1 MiB segments.
        let big = "x".repeat(200_000);
        log.blocking_append((1..=30).map(|i| command_ent(1, i, &format!("{big}{i}")))).await.expect("append");
        let segments = || {
            std::fs::read_dir(dir.path())
                .expect("dir")
                .filter(|e| e.as_ref().is_ok_and(|e| e.path().extension().is_some_and(|x| x == "log")))
                .count()
        };
        let before = segments();
        assert!(before >= 5, "{before} segments");
        log.purge(log_id(1, 0, 20)).await.expect("purge");
        assert!(segments() < before, "segments wholly below the purge point are deleted");
        log.truncate(log_id(1, 0, 26)).await.expect("truncate");
        drop(log);
        let mut log = LogStore::open(dir.path()).expect("reopen");
        assert_eq!(indexes(&mut log).await, (21..=25).collect::<Vec<_>>());
        let state = log.get_log_state().await.expect("state");
        assert_eq!((state.last_purged_log_id, state.last_log_id), (Some(log_id(1, 0, 20)), Some(log_id(1, 0, 25))));
        assert_eq!(log.first_index(), 21);
        // Purging past the end keeps the log usable.
        log.purge(log_id(1, 0, 40)).await.expect("purge past the end");
        log.blocking_append([blank_ent::<TypeConfig>(2, 0, 41)]).await.expect("append after");
        drop(log);
        let mut log = LogStore::open(dir.path()).expect("reopen");
        assert_eq!(indexes(&mut log).await, vec![41]);
    });
}

#[test]
fn a_snapshot_is_loaded_back_at_start_with_its_image() {
    let dir = TempDir::new().expect("tempdir");
    runtime().block_on(async {
        let mut sm = StateMachine::open(dir.path()).expect("open");
        sm.apply((1..=3).map(|i| command_ent(1, i, &format!("topic-{i}")))).await.expect("apply");
        let mut builder = sm.get_snapshot_builder().await;
        let snapshot = builder.build_snapshot().await.expect("snapshot");
        assert_eq!(snapshot.meta.last_log_id, Some(log_id(1, 0, 3)));
        drop(sm);
        let mut again = StateMachine::open(dir.path()).expect("reopen");
        let (applied, _) = again.applied_state().await.expect("applied");
        assert_eq!(applied, Some(log_id(1, 0, 3)));
        let image = again.image();
        assert_eq!(image.topics.keys().cloned().collect::<Vec<_>>(), vec!["topic-1", "topic-2", "topic-3"]);
        assert_eq!(image.applied_index, 3);
        assert!(again.get_current_snapshot().await.expect("current").is_some());
    });
}

/// docs/durability.md: each small file of the raft log, empty, cut in half or removed, opens
/// with its fallback instead of stopping the broker.
#[test]
fn each_small_file_empty_torn_or_removed_opens_with_its_fallback() {
    for file in ["vote.json", "committed.json", "purged.json"] {
        for damage in ["empty", "half", "removed"] {
            let dir = TempDir::new().expect("tempdir");
            runtime().block_on(async {
                let mut log = LogStore::open(dir.path()).expect("open");
                log.save_vote(&Vote::new(3, 1)).await.expect("vote");
                let big = "x".repeat(200_000);
                log.blocking_append((1..=30).map(|i| command_ent(3, i, &format!("{big}{i}")))).await.expect("append");
                log.save_committed(Some(log_id(3, 0, 28))).await.expect("committed");
                log.purge(log_id(3, 0, 20)).await.expect("purge");
                drop(log);
                let path = dir.path().join(file);
                let whole = std::fs::read(&path).expect("the file exists");
                match damage {
                    "empty" => std::fs::write(&path, b"").expect("empty"),
                    "half" => std::fs::write(&path, &whole[..whole.len() / 2]).expect("half"),
                    _ => std::fs::remove_file(&path).expect("remove"),
                }
                let snapshot = Some(log_id(3, 0, 22));
                let mut log = LogStore::open_beside(dir.path(), snapshot)
                    .unwrap_or_else(|e| panic!("{file} {damage}: the log opens: {e}"));
                let vote = log.read_vote().await.expect("vote").expect("a vote");
                let committed = log.read_committed().await.expect("committed");
                let state = log.get_log_state().await.expect("state");
                let kept = indexes(&mut log).await;
                assert_eq!(state.last_log_id, Some(log_id(3, 0, 30)), "{file} {damage}");
                match file {
                    "vote.json" => {
                        // The vote the entries prove: term 3, for the leader of the last entry
                        // (node 0), not the vote for node 1 that was lost.
                        assert_eq!(vote, Vote::new(3, 0), "{file} {damage}");
                        assert_eq!(committed, Some(log_id(3, 0, 28)));
                    }
                    "committed.json" => {
                        assert_eq!(vote, Vote::new(3, 1));
                        assert_eq!(committed, None, "{file} {damage}: replays less, nothing else");
                    }
                    _ => {
                        // The snapshot covers what was purged.
                        assert_eq!(state.last_purged_log_id, Some(log_id(3, 0, 22)), "{file} {damage}");
                        assert_eq!(kept, (23..=30).collect::<Vec<_>>());
                    }
                }
            });
        }
    }
}

#[test]
fn a_lost_purged_file_without_a_snapshot_starts_the_log_at_its_first_entry() {
    let dir = TempDir::new().expect("tempdir");
    runtime().block_on(async {
        let mut log = LogStore::open(dir.path()).expect("open");
        let big = "x".repeat(200_000);
        log.blocking_append((1..=30).map(|i| command_ent(2, i, &format!("{big}{i}")))).await.expect("append");
        log.purge(log_id(2, 0, 20)).await.expect("purge");
        drop(log);
        std::fs::remove_file(dir.path().join("purged.json")).expect("remove");
        let mut log = LogStore::open(dir.path()).expect("reopen");
        let kept = indexes(&mut log).await;
        let state = log.get_log_state().await.expect("state");
        assert_eq!(state.last_purged_log_id.map(|l| l.index), Some(kept[0] - 1));
        assert_eq!(kept.last(), Some(&30));
    });
}

#[test]
fn a_damaged_newest_snapshot_is_replaced_by_the_older_one_the_log_still_covers() {
    let dir = TempDir::new().expect("tempdir");
    runtime().block_on(async {
        let snapshots = dir.path().join("snapshots");
        let mut sm = StateMachine::open(&snapshots).expect("open");
        let mut log = LogStore::open(&dir.path().join("raft")).expect("open");
        log.limit_purges(sm.purge_limit(), sm.persisted_snapshots());
        let entries: Vec<_> = (1..=9).map(|i| command_ent(1, i, &format!("topic-{i}"))).collect();
        log.blocking_append(entries.clone()).await.expect("append");
        for (upto, count) in [(3, 3), (6, 3), (9, 3)] {
            sm.apply(entries[upto - count..upto].to_vec()).await.expect("apply");
            let snapshot = sm.get_snapshot_builder().await.build_snapshot().await.expect("snapshot");
            // What openraft asks once a snapshot exists: purge everything it covers.
            log.purge(snapshot.meta.last_log_id.expect("log id")).await.expect("purge");
        }
        let files = |dir: &std::path::Path| std::fs::read_dir(dir).expect("dir").count();
        assert_eq!(files(&snapshots), 2, "the newest snapshot and the one before it");
        assert_eq!(
            log.get_log_state().await.expect("state").last_purged_log_id,
            Some(log_id(1, 0, 6)),
            "the log is purged no further than the older snapshot"
        );
        drop((sm, log));
        let newest = snapshots.join(format!("{:020}-{:020}.snap", 1, 9));
        let whole = std::fs::read(&newest).expect("newest snapshot");
        std::fs::write(&newest, &whole[..whole.len() / 2]).expect("damage it");
        let sm = StateMachine::open(&snapshots).expect("opens on the older snapshot");
        assert_eq!(sm.snapshot_last_log_id(), Some(log_id(1, 0, 6)));
        assert_eq!(sm.image().topics.len(), 6);
        let mut log = LogStore::open_beside(&dir.path().join("raft"), sm.snapshot_last_log_id()).expect("log");
        assert_eq!(indexes(&mut log).await, vec![7, 8, 9], "the log holds everything after the older snapshot");
    });
}
