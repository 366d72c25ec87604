//! The coordinator on real `__transaction_state` logs, with a marker sink that records what
//! it is asked to write (and can refuse, like a partition leader that is gone): decisions are
//! durable before they are answered, a second producer fences the first, and a coordinator
//! that takes over finishes the commit the old one decided.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use super::*;
use crate::config::BrokerConfig;
use crate::metadata::TopicMetadata;
use crate::partition::Leadership;

type Call = (i64, i16, bool, BTreeSet<(String, i32)>);

#[derive(Default)]
struct Sink {
    calls: Mutex<Vec<Call>>,
    refuse: AtomicBool,
}

#[tonic::async_trait]
impl MarkerSink for Sink {
    async fn write(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        _coordinator_epoch: i32,
        partitions: &BTreeSet<(String, i32)>,
    ) -> BTreeSet<(String, i32)> {
        if self.refuse.load(Ordering::SeqCst) {
            return partitions.clone();
        }
        self.calls.lock().push((producer_id, producer_epoch, commit, partitions.clone()));
        BTreeSet::new()
    }
}

fn replicas(dir: &std::path::Path) -> Arc<ReplicaManager> {
    let broker = Arc::new(BrokerConfig { data_dir: dir.to_path_buf(), ..BrokerConfig::default() });
    let replicas = Arc::new(ReplicaManager::new(dir, broker));
    let topic = TopicMetadata {
        name: TRANSACTION_STATE_TOPIC.to_string(),
        id: uuid::Uuid::from_u128(8),
        partitions: vec![],
        configs: BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())]),
    };
    for p in 0..3 {
        let replica = replicas.ensure_partition(&topic, p).expect("state partition");
        replica.set_leadership(Leadership::sole_leader(0, 0));
    }
    replicas
}

fn coordinator(replicas: &Arc<ReplicaManager>, sink: &Arc<Sink>, epoch: i32) -> Arc<TransactionCoordinator> {
    let config = TxnConfig { state_partitions: 3, ..TxnConfig::default() };
    let c = Arc::new(TransactionCoordinator::new(config, replicas.clone(), sink.clone()));
    for p in 0..3 {
        c.load_partition(p, epoch);
    }
    c
}

async fn settled(c: &TransactionCoordinator, id: &str, state: TxnState) -> TxnMetadata {
    for _ in 0..200 {
        if let Some(m) = c.describe(id).filter(|m| m.state == state) {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{id} never reached {state:?}: {:?}", c.describe(id));
}

fn out(p: i32) -> (String, i32) {
    ("out".to_string(), p)
}

#[tokio::test]
async fn a_commit_is_durable_before_it_is_answered_and_its_markers_reach_every_partition() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (replicas, sink) = (replicas(dir.path()), Arc::new(Sink::default()));
    let c = coordinator(&replicas, &sink, 0);
    assert!(c.needs_producer_id("tx"));
    assert_eq!(c.init_producer_id("tx", 60_000, None, None).await, Err(CoordinatorError::NeedsProducerId));
    let (pid, epoch) = c.init_producer_id("tx", 60_000, None, Some(1000)).await.expect("init");
    assert_eq!((pid, epoch), (1000, 0));
    c.add_partitions("tx", pid, epoch, &[out(0), out(1)]).await.expect("add");
    c.end_txn("tx", pid, epoch, true).await.expect("commit");
    let done = settled(&c, "tx", TxnState::CompleteCommit).await;
    assert!(done.partitions.is_empty());
    assert_eq!(sink.calls.lock().clone(), vec![(1000, 0, true, [out(0), out(1)].into_iter().collect())]);

    // Another coordinator over the same logs (a restart) knows the same.
    let again = coordinator(&replicas, &Arc::new(Sink::default()), 1);
    assert_eq!(
        again.describe("tx").map(|m| (m.producer_id, m.producer_epoch, m.state)),
        Some((1000, 0, TxnState::CompleteCommit))
    );
}

#[tokio::test]
async fn a_second_producer_fences_the_first_and_its_open_transaction_is_aborted() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (replicas, sink) = (replicas(dir.path()), Arc::new(Sink::default()));
    let c = coordinator(&replicas, &sink, 0);
    let (pid, epoch) = c.init_producer_id("tx", 60_000, None, Some(7)).await.expect("init");
    c.add_partitions("tx", pid, epoch, &[out(2)]).await.expect("add");
    // The second instance: told to retry while the open transaction is aborted in epoch 1.
    let first_try = c.init_producer_id("tx", 60_000, None, None).await;
    assert_eq!(first_try, Err(CoordinatorError::Txn(TxnError::ConcurrentTransactions)));
    settled(&c, "tx", TxnState::CompleteAbort).await;
    assert_eq!(sink.calls.lock().clone(), vec![(7, 1, false, [out(2)].into_iter().collect())]);
    let (pid2, epoch2) = c.init_producer_id("tx", 60_000, None, None).await.expect("init again");
    assert_eq!((pid2, epoch2), (7, 2));
    // The zombie (epoch 0) is fenced.
    assert_eq!(c.add_partitions("tx", 7, 0, &[out(0)]).await, Err(CoordinatorError::Txn(TxnError::ProducerFenced)));
    assert_eq!(c.end_txn("tx", 7, 0, true).await, Err(CoordinatorError::Txn(TxnError::ProducerFenced)));
}

#[tokio::test]
async fn a_new_coordinator_finishes_the_commit_the_old_one_decided() {
    let dir = tempfile::tempdir().expect("tempdir");
    let replicas = replicas(dir.path());
    let stuck = Arc::new(Sink::default());
    stuck.refuse.store(true, Ordering::SeqCst);
    let old = coordinator(&replicas, &stuck, 0);
    let (pid, epoch) = old.init_producer_id("tx", 60_000, None, Some(3)).await.expect("init");
    old.add_partitions("tx", pid, epoch, &[out(0), out(1)]).await.expect("add");
    old.end_txn("tx", pid, epoch, true).await.expect("commit decided");
    // The markers cannot be written; the id is busy meanwhile.
    assert_eq!(old.describe("tx").map(|m| m.state), Some(TxnState::PrepareCommit));
    assert_eq!(
        old.add_partitions("tx", pid, epoch, &[out(2)]).await,
        Err(CoordinatorError::Txn(TxnError::ConcurrentTransactions))
    );
    // Leadership moves: the old coordinator lets go, the new one resumes from the log.
    for p in 0..3 {
        old.unload_partition(p);
    }
    let sink = Arc::new(Sink::default());
    let new = coordinator(&replicas, &sink, 1);
    settled(&new, "tx", TxnState::CompleteCommit).await;
    assert_eq!(sink.calls.lock().clone(), vec![(3, 0, true, [out(0), out(1)].into_iter().collect())]);
    assert!(stuck.calls.lock().is_empty());
}

#[tokio::test]
async fn requests_for_ids_of_partitions_not_loaded_here_are_not_for_this_coordinator() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (replicas, sink) = (replicas(dir.path()), Arc::new(Sink::default()));
    let c = coordinator(&replicas, &sink, 0);
    let p = c.partition_of("elsewhere");
    c.unload_partition(p);
    assert!(matches!(
        c.init_producer_id("elsewhere", 60_000, None, Some(1)).await,
        Err(CoordinatorError::NotCoordinator(_))
    ));
    assert!(matches!(c.add_partitions("elsewhere", 1, 0, &[out(0)]).await, Err(CoordinatorError::NotCoordinator(_))));
    // Bad input changes nothing for the ids it does serve.
    assert!(matches!(
        c.init_producer_id("tx", 0, None, Some(1)).await,
        Err(CoordinatorError::Txn(TxnError::InvalidTransactionTimeout { .. }))
    ));
    assert_eq!(c.describe("tx"), None);
    assert_eq!(c.end_txn("tx", 1, 0, true).await, Err(CoordinatorError::Txn(TxnError::InvalidProducerIdMapping)));
}
