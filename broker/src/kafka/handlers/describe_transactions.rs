//! DescribeTransactions: each transactional id's state at its coordinator, as
//! `kafka-transactions.sh describe` prints it. The client sends each id to its coordinator
//! (FindCoordinator key type 1); another broker answers NOT_COORDINATOR for it.

use std::collections::BTreeMap;

use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::{DescribeTransactionsRequest, DescribeTransactionsResponse, ProducerId};

use crate::kafka::error_code;
use crate::node::Node;

use super::{str_bytes, topic_name};

pub fn handle(node: &Node, req: DescribeTransactionsRequest) -> DescribeTransactionsResponse {
    let mut resp = DescribeTransactionsResponse::default();
    for id in req.transactional_ids {
        let mut state = TransactionState::default();
        match node.txn.describe_checked(&id) {
            Ok(meta) => {
                state.transaction_state = str_bytes(meta.state.name());
                state.transaction_timeout_ms = meta.timeout_ms;
                state.transaction_start_time_ms = meta.start_ms;
                state.producer_id = ProducerId(meta.producer_id);
                state.producer_epoch = meta.producer_epoch;
                let mut topics: BTreeMap<String, Vec<i32>> = BTreeMap::new();
                for (topic, partition) in meta.partitions {
                    topics.entry(topic).or_default().push(partition);
                }
                state.topics = topics
                    .into_iter()
                    .map(|(topic, partitions)| {
                        let mut t = TopicData::default();
                        t.topic = topic_name(&topic);
                        t.partitions = partitions;
                        t
                    })
                    .collect();
            }
            Err(e) => {
                state.error_code = error_code::txn(&e, true);
                state.producer_id = ProducerId(-1);
                state.producer_epoch = -1;
                state.transaction_start_time_ms = -1;
            }
        }
        state.transactional_id = id;
        resp.transaction_states.push(state);
    }
    resp
}
