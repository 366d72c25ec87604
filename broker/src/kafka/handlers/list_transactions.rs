//! ListTransactions: the transactional ids this broker coordinates, filtered by state,
//! producer id and (v1+) how long the open transaction has run. `kafka-transactions.sh list`
//! asks every broker and merges the answers. The filters are Kafka's: an unknown state name
//! is reported back and matches nothing; a duration filter keeps only transactions open for
//! longer than it.

use kafka_protocol::messages::list_transactions_response::TransactionState;
use kafka_protocol::messages::{ListTransactionsRequest, ListTransactionsResponse, ProducerId, TransactionalId};

use crate::node::Node;
use crate::time::now_ms;
use crate::txn::state::{TxnMetadata, TxnState};

use super::str_bytes;

/// The request's filters, parsed.
#[derive(Debug, Default)]
struct Filters {
    states: Option<Vec<TxnState>>,
    producer_ids: Vec<i64>,
    /// Only transactions open for longer than this (ms); negative: no filter.
    duration_ms: i64,
}

impl Filters {
    fn includes(&self, m: &TxnMetadata, now_ms: i64) -> bool {
        if m.state == TxnState::Dead {
            return false;
        }
        if !self.producer_ids.is_empty() && !self.producer_ids.contains(&m.producer_id) {
            return false;
        }
        if self.states.as_ref().is_some_and(|states| !states.contains(&m.state)) {
            return false;
        }
        self.duration_ms < 0 || (m.start_ms >= 0 && now_ms - m.start_ms > self.duration_ms)
    }
}

pub fn handle(node: &Node, req: ListTransactionsRequest, version: i16) -> ListTransactionsResponse {
    let mut resp = ListTransactionsResponse::default();
    let mut filters = Filters {
        producer_ids: req.producer_id_filters.iter().map(|p| p.0).collect(),
        duration_ms: if version >= 1 { req.duration_filter } else { -1 },
        ..Filters::default()
    };
    if !req.state_filters.is_empty() {
        let mut states = Vec::new();
        for name in &req.state_filters {
            // Kafka's `PrepareEpochFence` has no counterpart here: it matches nothing.
            match TxnState::ALL.iter().find(|s| s.name() == name.as_str()) {
                Some(s) => states.push(*s),
                None => resp.unknown_state_filters.push(name.clone()),
            }
        }
        filters.states = Some(states);
    }
    let now = now_ms();
    let mut listed: Vec<TxnMetadata> = node.txn.list().into_iter().filter(|m| filters.includes(m, now)).collect();
    listed.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
    resp.transaction_states = listed
        .into_iter()
        .map(|m| {
            let mut t = TransactionState::default();
            t.transactional_id = TransactionalId(str_bytes(&m.transactional_id));
            t.producer_id = ProducerId(m.producer_id);
            t.transaction_state = str_bytes(m.state.name());
            t
        })
        .collect();
    resp
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn meta(id: &str, producer_id: i64, state: TxnState, start_ms: i64) -> TxnMetadata {
        TxnMetadata {
            transactional_id: id.into(),
            producer_id,
            producer_epoch: 0,
            timeout_ms: 60_000,
            state,
            partitions: BTreeSet::new(),
            start_ms,
            last_update_ms: 0,
        }
    }

    #[test]
    fn filters_combine_as_kafkas_do() {
        let open = meta("a", 1, TxnState::Ongoing, 1_000);
        let idle = meta("b", 2, TxnState::Empty, -1);
        let none = Filters { duration_ms: -1, ..Filters::default() };
        assert!(none.includes(&open, 5_000) && none.includes(&idle, 5_000));
        assert!(!none.includes(&meta("c", 3, TxnState::Dead, -1), 5_000), "dead ids are never listed");

        let ongoing = Filters { states: Some(vec![TxnState::Ongoing]), duration_ms: -1, ..Filters::default() };
        assert!(ongoing.includes(&open, 5_000) && !ongoing.includes(&idle, 5_000));
        let unknown_only = Filters { states: Some(vec![]), duration_ms: -1, ..Filters::default() };
        assert!(!unknown_only.includes(&open, 5_000), "a filter of unknown states matches nothing");

        let producer = Filters { producer_ids: vec![2], duration_ms: -1, ..Filters::default() };
        assert!(!producer.includes(&open, 5_000) && producer.includes(&idle, 5_000));

        let long = Filters { duration_ms: 3_000, ..Filters::default() };
        assert!(long.includes(&open, 5_000), "open for 4 s > 3 s");
        assert!(!long.includes(&open, 3_500), "open for 2.5 s");
        assert!(!long.includes(&idle, 5_000), "no transaction open");
    }
}
