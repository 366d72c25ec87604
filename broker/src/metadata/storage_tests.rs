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
