//! One transactional id's state at its coordinator and the pure decisions on it (Kafka's
//! `TransactionMetadata` and `TransactionCoordinator`'s checks, KIP-98 and KIP-360). Each
//! decision returns the metadata to write to `__transaction_state`; the coordinator applies it
//! only once that write is replicated, so a failover resumes from what was decided.
//!
//! States: `Empty` (a producer id and epoch, no transaction) → `Ongoing` (partitions added)
//! → `PrepareCommit` / `PrepareAbort` (decided; markers being written) → `CompleteCommit` /
//! `CompleteAbort` (markers written) → `Ongoing` again with the next AddPartitionsToTxn.
//! InitProducerId bumps the epoch from any settled state; from `Ongoing` it first aborts the
//! open transaction in the new epoch (fencing the old producer), and the client retries.

use std::collections::BTreeSet;

/// Where a transactional id is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    /// Expired and removed (`transactional.id.expiration.ms`).
    Dead,
}

impl TxnState {
    /// Every state, in Kafka's order (ListTransactions filters name them).
    pub const ALL: [TxnState; 7] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
    ];

    /// Kafka's name, as DescribeTransactions and ListTransactions report it.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
        }
    }

    /// Kafka's byte for the state in `__transaction_state` values.
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
        }
    }

    pub fn from_id(id: i8) -> Option<TxnState> {
        Some(match id {
            0 => TxnState::Empty,
            1 => TxnState::Ongoing,
            2 => TxnState::PrepareCommit,
            3 => TxnState::PrepareAbort,
            4 => TxnState::CompleteCommit,
            5 => TxnState::CompleteAbort,
            6 => TxnState::Dead,
            _ => return None,
        })
    }

    /// Whether the outcome is decided and markers are (or may be) in flight.
    pub fn is_preparing(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }
}

/// One transactional id at its coordinator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxnMetadata {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// The partitions the open (or ending) transaction wrote to.
    pub partitions: BTreeSet<(String, i32)>,
    /// When the open transaction began (its first partition added); -1 without one.
    pub start_ms: i64,
    pub last_update_ms: i64,
}

/// Why a request is refused, in Kafka's terms (mapped to error codes at the protocol edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    #[error("the producer id does not match the transactional id's (INVALID_PRODUCER_ID_MAPPING)")]
    InvalidProducerIdMapping,
    #[error("a newer producer with the same transactional id fenced this one (PRODUCER_FENCED)")]
    ProducerFenced,
    #[error("the previous transaction is still being completed; retry (CONCURRENT_TRANSACTIONS)")]
    ConcurrentTransactions,
    #[error("the request does not fit the transaction's state (INVALID_TXN_STATE)")]
    InvalidTxnState,
    #[error("transaction.timeout.ms {got} is not within 1..={max} (INVALID_TRANSACTION_TIMEOUT)")]
    InvalidTransactionTimeout { got: i32, max: i32 },
}

/// The last epoch a producer id may use; after it InitProducerId hands out a new id.
pub const MAX_EPOCH: i16 = i16::MAX - 1;

/// What InitProducerId does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InitDecision {
    /// Write this (state Empty, the new epoch) and answer with its producer id and epoch.
    Ready(TxnMetadata),
    /// A transaction was open: write this (PrepareAbort in a bumped epoch, fencing the old
    /// producer), abort it, and answer CONCURRENT_TRANSACTIONS so the client retries.
    AbortFirst(TxnMetadata),
}

/// Whether InitProducerId needs a fresh producer id for `current` (none yet, or its epochs
/// are used up).
pub fn needs_producer_id(current: Option<&TxnMetadata>) -> bool {
    current.is_none_or(|m| m.state == TxnState::Dead || m.producer_epoch >= MAX_EPOCH)
}

/// InitProducerId with a transactional id. `fresh_producer_id` is a newly allocated id when
/// [`needs_producer_id`] said so; `expected` is the (id, epoch) a v3+ client names when it
/// re-initialises after an error (KIP-360).
pub fn init_producer_id(
    current: Option<&TxnMetadata>,
    transactional_id: &str,
    timeout_ms: i32,
    max_timeout_ms: i32,
    expected: Option<(i64, i16)>,
    fresh_producer_id: Option<i64>,
    now_ms: i64,
) -> Result<InitDecision, TxnError> {
    if timeout_ms <= 0 || timeout_ms > max_timeout_ms {
        return Err(TxnError::InvalidTransactionTimeout { got: timeout_ms, max: max_timeout_ms });
    }
    let current = current.filter(|m| m.state != TxnState::Dead);
    if let (Some(m), Some((id, epoch))) = (current, expected) {
        // The client's view must be the current epoch or the one before it (a retry whose
        // answer was lost); anything else is a fenced producer.
        let known = id == m.producer_id && (epoch == m.producer_epoch || epoch + 1 == m.producer_epoch);
        if !known {
            return Err(TxnError::ProducerFenced);
        }
    }
    let fresh = |m: Option<&TxnMetadata>| TxnMetadata {
        transactional_id: transactional_id.to_string(),
        producer_id: fresh_producer_id.unwrap_or(m.map_or(-1, |m| m.producer_id)),
        producer_epoch: 0,
        timeout_ms,
        state: TxnState::Empty,
        partitions: BTreeSet::new(),
        start_ms: -1,
        last_update_ms: now_ms,
    };
    let Some(m) = current else {
        return Ok(InitDecision::Ready(fresh(None)));
    };
    match m.state {
        TxnState::PrepareCommit | TxnState::PrepareAbort => Err(TxnError::ConcurrentTransactions),
        TxnState::Ongoing => {
            let mut next = m.clone();
            next.producer_epoch = m.producer_epoch.saturating_add(1).min(MAX_EPOCH);
            next.state = TxnState::PrepareAbort;
            next.last_update_ms = now_ms;
            Ok(InitDecision::AbortFirst(next))
        }
        TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort | TxnState::Dead => {
            // A retry of an InitProducerId whose answer was lost: the same epoch again.
            if expected.is_some_and(|(_, epoch)| epoch + 1 == m.producer_epoch) && m.state == TxnState::Empty {
                return Ok(InitDecision::Ready(m.clone()));
            }
            if m.producer_epoch >= MAX_EPOCH {
                return Ok(InitDecision::Ready(fresh(Some(m))));
            }
            let mut next = m.clone();
            next.producer_epoch = m.producer_epoch + 1;
            next.timeout_ms = timeout_ms;
            next.state = TxnState::Empty;
            next.partitions.clear();
            next.start_ms = -1;
            next.last_update_ms = now_ms;
            Ok(InitDecision::Ready(next))
        }
    }
}

/// Checks that a request of (`producer_id`, `producer_epoch`) is from the current producer.
fn check_producer(m: &TxnMetadata, producer_id: i64, producer_epoch: i16) -> Result<(), TxnError> {
    if m.state == TxnState::Dead || m.producer_id != producer_id {
        return Err(TxnError::InvalidProducerIdMapping);
    }
    if producer_epoch != m.producer_epoch {
        return Err(TxnError::ProducerFenced);
    }
    Ok(())
}

/// AddPartitionsToTxn (and AddOffsetsToTxn, with the group's `__consumer_offsets` partition):
/// `None` when they are all in the transaction already, else the metadata to write.
pub fn add_partitions(
    current: Option<&TxnMetadata>,
    producer_id: i64,
    producer_epoch: i16,
    partitions: &[(String, i32)],
    now_ms: i64,
) -> Result<Option<TxnMetadata>, TxnError> {
    let m = current.ok_or(TxnError::InvalidProducerIdMapping)?;
    check_producer(m, producer_id, producer_epoch)?;
    if m.state.is_preparing() {
        return Err(TxnError::ConcurrentTransactions);
    }
    if m.state == TxnState::Ongoing && partitions.iter().all(|p| m.partitions.contains(p)) {
        return Ok(None);
    }
    let mut next = m.clone();
    if m.state != TxnState::Ongoing {
        next.partitions.clear();
        next.start_ms = now_ms;
    }
    next.state = TxnState::Ongoing;
    next.partitions.extend(partitions.iter().cloned());
    next.last_update_ms = now_ms;
    Ok(Some(next))
}

/// What EndTxn does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EndDecision {
    /// Write this (PrepareCommit or PrepareAbort), then the markers, then [`complete`].
    Prepare(TxnMetadata),
    /// A retry of an EndTxn that completed: answer success.
    AlreadyDone,
}

/// EndTxn: commit (`commit`) or abort the open transaction.
pub fn end_txn(
    current: Option<&TxnMetadata>,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    now_ms: i64,
) -> Result<EndDecision, TxnError> {
    let m = current.ok_or(TxnError::InvalidProducerIdMapping)?;
    check_producer(m, producer_id, producer_epoch)?;
    match (m.state, commit) {
        (TxnState::Ongoing, _) => {
            let mut next = m.clone();
            next.state = if commit { TxnState::PrepareCommit } else { TxnState::PrepareAbort };
            next.last_update_ms = now_ms;
            Ok(EndDecision::Prepare(next))
        }
        (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => Ok(EndDecision::AlreadyDone),
        (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => Err(TxnError::ConcurrentTransactions),
        // An abort with no transaction open is a no-op in Kafka for clients that abort
        // defensively; a commit of nothing is a client error.
        (TxnState::Empty, false) => Ok(EndDecision::AlreadyDone),
        _ => Err(TxnError::InvalidTxnState),
    }
}

/// The markers of a prepared transaction are written: CompleteCommit / CompleteAbort, with
/// no partitions.
pub fn complete(m: &TxnMetadata, now_ms: i64) -> Option<TxnMetadata> {
    let state = match m.state {
        TxnState::PrepareCommit => TxnState::CompleteCommit,
        TxnState::PrepareAbort => TxnState::CompleteAbort,
        _ => return None,
    };
    Some(TxnMetadata { state, partitions: BTreeSet::new(), start_ms: -1, last_update_ms: now_ms, ..m.clone() })
}

/// A transaction open past its timeout: aborted in a bumped epoch, so that the producer that
/// abandoned it is fenced (its late sends fail with PRODUCER_FENCED).
pub fn expire(m: &TxnMetadata, now_ms: i64) -> Option<TxnMetadata> {
    let due = m.state == TxnState::Ongoing && m.start_ms >= 0 && now_ms - m.start_ms > i64::from(m.timeout_ms);
    due.then(|| TxnMetadata {
        producer_epoch: m.producer_epoch.saturating_add(1).min(MAX_EPOCH),
        state: TxnState::PrepareAbort,
        last_update_ms: now_ms,
        ..m.clone()
    })
}

/// An operator's abort (`strom transactions abort`): the open transaction is aborted in a
/// bumped epoch, as a timeout aborts it, fencing its producer. Only an `Ongoing` transaction
/// can be aborted; one already decided finishes as decided.
pub fn abort_open(m: &TxnMetadata, now_ms: i64) -> Result<TxnMetadata, TxnError> {
    match m.state {
        TxnState::Ongoing => Ok(TxnMetadata {
            producer_epoch: m.producer_epoch.saturating_add(1).min(MAX_EPOCH),
            state: TxnState::PrepareAbort,
            last_update_ms: now_ms,
            ..m.clone()
        }),
        TxnState::PrepareCommit | TxnState::PrepareAbort => Err(TxnError::ConcurrentTransactions),
        _ => Err(TxnError::InvalidTxnState),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    const MAX: i32 = 900_000;

    fn ready(d: Result<InitDecision, TxnError>) -> TxnMetadata {
        match d {
            Ok(InitDecision::Ready(m)) => m,
            other => panic!("expected Ready, got {other:?}"),
        }
    }

    fn tp(t: &str, p: i32) -> (String, i32) {
        (t.to_string(), p)
    }

    #[test]
    fn an_operator_aborts_only_an_open_transaction_and_fences_its_producer() {
        let open = begun();
        let aborting = abort_open(&open, 20).unwrap();
        assert_eq!((aborting.state, aborting.producer_epoch), (TxnState::PrepareAbort, open.producer_epoch + 1));
        assert_eq!(aborting.partitions, open.partitions, "the markers go where the transaction wrote");
        assert_eq!(abort_open(&aborting, 30), Err(TxnError::ConcurrentTransactions));
        let idle = ready(init_producer_id(None, "tx", 60_000, MAX, None, Some(7), 0));
        assert_eq!(abort_open(&idle, 30), Err(TxnError::InvalidTxnState));
    }

    fn begun() -> TxnMetadata {
        let m = ready(init_producer_id(None, "tx", 60_000, MAX, None, Some(7), 0));
        add_partitions(Some(&m), 7, 0, &[tp("out", 0)], 10).unwrap().unwrap()
    }

    #[test]
    fn a_transaction_goes_from_empty_through_ongoing_and_prepare_to_complete() {
        let m = ready(init_producer_id(None, "tx", 60_000, MAX, None, Some(7), 0));
        assert_eq!((m.producer_id, m.producer_epoch, m.state), (7, 0, TxnState::Empty));
        let m = add_partitions(Some(&m), 7, 0, &[tp("out", 0), tp("out", 1)], 10).unwrap().unwrap();
        assert_eq!((m.state, m.start_ms, m.partitions.len()), (TxnState::Ongoing, 10, 2));
        assert_eq!(add_partitions(Some(&m), 7, 0, &[tp("out", 1)], 11), Ok(None), "already in");
        let EndDecision::Prepare(m) = end_txn(Some(&m), 7, 0, true, 20).unwrap() else { panic!() };
        assert_eq!(m.state, TxnState::PrepareCommit);
        assert_eq!(add_partitions(Some(&m), 7, 0, &[tp("out", 2)], 21), Err(TxnError::ConcurrentTransactions));
        assert_eq!(end_txn(Some(&m), 7, 0, true, 21), Err(TxnError::ConcurrentTransactions));
        let m = complete(&m, 30).unwrap();
        assert_eq!((m.state, m.partitions.len()), (TxnState::CompleteCommit, 0));
        assert_eq!(end_txn(Some(&m), 7, 0, true, 31), Ok(EndDecision::AlreadyDone), "a retried commit");
        assert_eq!(end_txn(Some(&m), 7, 0, false, 31), Err(TxnError::InvalidTxnState));
        // The next transaction starts from the complete state.
        let next = add_partitions(Some(&m), 7, 0, &[tp("other", 0)], 40).unwrap().unwrap();
        assert_eq!((next.state, next.start_ms, next.partitions.len()), (TxnState::Ongoing, 40, 1));
    }

    #[test]
    fn a_second_producer_fences_the_first_and_aborts_its_open_transaction() {
        let first = begun();
        let InitDecision::AbortFirst(fencing) =
            init_producer_id(Some(&first), "tx", 60_000, MAX, None, None, 50).unwrap()
        else {
            panic!("an open transaction is aborted first")
        };
        assert_eq!((fencing.producer_epoch, fencing.state), (1, TxnState::PrepareAbort));
        assert_eq!(fencing.partitions, first.partitions, "the markers go where it wrote");
        // The old producer (epoch 0) is fenced everywhere.
        assert_eq!(add_partitions(Some(&fencing), 7, 0, &[tp("out", 0)], 51), Err(TxnError::ProducerFenced));
        assert_eq!(end_txn(Some(&fencing), 7, 0, true, 51), Err(TxnError::ProducerFenced));
        // While the abort completes the new producer is told to retry; then it gets epoch 2.
        assert_eq!(
            init_producer_id(Some(&fencing), "tx", 60_000, MAX, None, None, 52),
            Err(TxnError::ConcurrentTransactions)
        );
        let aborted = complete(&fencing, 60).unwrap();
        let second = ready(init_producer_id(Some(&aborted), "tx", 60_000, MAX, None, None, 61));
        assert_eq!((second.producer_id, second.producer_epoch, second.state), (7, 2, TxnState::Empty));
        assert_eq!(end_txn(Some(&second), 7, 1, false, 62), Err(TxnError::ProducerFenced));
    }

    #[test]
    fn bad_requests_get_kafkas_errors_and_change_nothing() {
        let m = begun();
        assert_eq!(add_partitions(None, 7, 0, &[tp("out", 0)], 1), Err(TxnError::InvalidProducerIdMapping));
        assert_eq!(add_partitions(Some(&m), 8, 0, &[tp("out", 0)], 1), Err(TxnError::InvalidProducerIdMapping));
        assert_eq!(end_txn(None, 7, 0, true, 1), Err(TxnError::InvalidProducerIdMapping));
        assert_eq!(end_txn(Some(&m), 7, 3, true, 1), Err(TxnError::ProducerFenced));
        let empty = ready(init_producer_id(None, "tx", 60_000, MAX, None, Some(9), 0));
        assert_eq!(end_txn(Some(&empty), 9, 0, true, 1), Err(TxnError::InvalidTxnState), "commit of nothing");
        assert_eq!(end_txn(Some(&empty), 9, 0, false, 1), Ok(EndDecision::AlreadyDone), "abort of nothing");
        for timeout in [0, -1, MAX + 1] {
            assert!(matches!(
                init_producer_id(None, "tx", timeout, MAX, None, Some(1), 0),
                Err(TxnError::InvalidTransactionTimeout { .. })
            ));
        }
        // KIP-360: a client naming an epoch that is not the current one (or the one before) is fenced.
        assert_eq!(
            init_producer_id(Some(&empty), "tx", 60_000, MAX, Some((9, 5)), None, 1),
            Err(TxnError::ProducerFenced)
        );
        assert_eq!(
            init_producer_id(Some(&empty), "tx", 60_000, MAX, Some((3, 0)), None, 1),
            Err(TxnError::ProducerFenced)
        );
    }

    #[test]
    fn an_exhausted_epoch_gets_a_new_producer_id() {
        let mut m = ready(init_producer_id(None, "tx", 60_000, MAX, None, Some(7), 0));
        m.producer_epoch = MAX_EPOCH;
        assert!(needs_producer_id(Some(&m)));
        let next = ready(init_producer_id(Some(&m), "tx", 60_000, MAX, None, Some(8), 1));
        assert_eq!((next.producer_id, next.producer_epoch), (8, 0));
        assert!(!needs_producer_id(Some(&next)));
        assert!(needs_producer_id(None));
    }

    #[test]
    fn a_transaction_open_past_its_timeout_is_aborted_in_a_new_epoch() {
        let m = begun();
        assert_eq!(expire(&m, 10 + 60_000), None, "not past it yet");
        let aborted = expire(&m, 10 + 60_001).unwrap();
        assert_eq!((aborted.state, aborted.producer_epoch), (TxnState::PrepareAbort, 1));
        assert_eq!(expire(&complete(&aborted, 1).unwrap(), 1_000_000), None);
    }

    #[test]
    fn states_round_trip_through_their_ids() {
        for s in [
            TxnState::Empty,
            TxnState::Ongoing,
            TxnState::PrepareCommit,
            TxnState::PrepareAbort,
            TxnState::CompleteCommit,
            TxnState::CompleteAbort,
            TxnState::Dead,
        ] {
            assert_eq!(TxnState::from_id(s.id()), Some(s));
        }
        assert_eq!(TxnState::from_id(9), None);
    }
}
