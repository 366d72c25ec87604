//! Transactions through the admin API (`strom transactions list|describe|abort`, the same
//! views as `kafka-transactions.sh`): list asks every broker for the ids it coordinates;
//! describe and abort are carried out by the id's coordinator (the leader of its
//! `__transaction_state` partition), another broker passing the call on, once.

use strom_proto::admin::admin_client::AdminClient;
use strom_proto::admin::{
    AbortTransactionRequest, DescribeTransactionRequest, ListTransactionsRequest, TopicPartition, Transaction,
    TransactionListing,
};
use tonic::transport::Channel;
use tonic::Status;

use super::peers::{self, PEER_TIMEOUT};
use crate::node::Node;
use crate::txn::coordinator::CoordinatorError;
use crate::txn::state::TxnMetadata;
use crate::txn::TRANSACTION_STATE_TOPIC;

/// The coordinator of `id` as this broker's metadata names it.
fn coordinator_of(node: &Node, id: &str) -> Result<i32, Status> {
    if id.is_empty() {
        return Err(Status::invalid_argument("the transactional id is empty"));
    }
    let image = node.catalog.image();
    let partition = node.txn.partition_of(id);
    let leader = image
        .topic(TRANSACTION_STATE_TOPIC)
        .and_then(|t| t.partition(partition))
        .map(|p| p.leader)
        .ok_or_else(|| Status::not_found(format!("transactional id {id} is not known (no transaction yet)")))?;
    if leader < 0 || !image.is_live(leader) {
        return Err(Status::unavailable(format!(
            "the coordinator of transactional id {id} is not available right now"
        )));
    }
    Ok(leader)
}

/// Where a one-id call runs: here (None), or the coordinator's client to forward to.
fn route(node: &Node, id: &str, forwarded: bool) -> Result<Option<AdminClient<Channel>>, Status> {
    let coordinator = coordinator_of(node, id)?;
    if coordinator == node.id() {
        return Ok(None);
    }
    if forwarded {
        return Err(Status::unavailable(format!("the coordinator of transactional id {id} moved; try again")));
    }
    peers::client_for(node, coordinator)
        .map(Some)
        .ok_or_else(|| Status::unavailable(format!("broker {coordinator}, the coordinator of {id}, is unknown")))
}

fn txn_status(id: &str, e: CoordinatorError) -> Status {
    use crate::txn::state::TxnError;
    match e {
        CoordinatorError::UnknownTransactionalId(_) => Status::not_found(format!("transactional id {id} is not known")),
        CoordinatorError::Txn(TxnError::InvalidTxnState) => {
            Status::failed_precondition(format!("transactional id {id} has no open transaction to abort"))
        }
        CoordinatorError::Txn(TxnError::ConcurrentTransactions) => Status::failed_precondition(format!(
            "the transaction of {id} is already being ended (its markers are being written); it finishes as decided"
        )),
        CoordinatorError::NotCoordinator(_) => {
            Status::unavailable(format!("the coordinator of transactional id {id} moved; try again"))
        }
        other => Status::unavailable(format!("transactional id {id}: {other}")),
    }
}

fn transaction(node: &Node, m: TxnMetadata) -> Transaction {
    Transaction {
        transactional_id: m.transactional_id,
        coordinator: node.id(),
        state: m.state.name().to_string(),
        producer_id: m.producer_id,
        producer_epoch: i32::from(m.producer_epoch),
        timeout_ms: m.timeout_ms,
        start_time_ms: m.start_ms,
        partitions: m.partitions.into_iter().map(|(topic, partition)| TopicPartition { topic, partition }).collect(),
    }
}

pub async fn list_transactions(node: &Node, r: ListTransactionsRequest) -> Vec<TransactionListing> {
    let local = || {
        node.txn
            .list()
            .into_iter()
            .filter(|m| r.states.is_empty() || r.states.iter().any(|s| s == m.state.name()))
            .map(|m| TransactionListing {
                transactional_id: m.transactional_id,
                producer_id: m.producer_id,
                state: m.state.name().to_string(),
                coordinator: node.id(),
            })
            .collect::<Vec<_>>()
    };
    let mut all = local();
    if !r.local_only {
        let ids: Vec<i32> = node.catalog.image().live_brokers().map(|b| b.id).filter(|b| *b != node.id()).collect();
        let calls = ids.into_iter().map(|id| {
            let states = r.states.clone();
            async move {
                let mut client = peers::client_for(node, id)?;
                let call = client.list_transactions(ListTransactionsRequest { local_only: true, states });
                match tokio::time::timeout(PEER_TIMEOUT, call).await {
                    Ok(Ok(resp)) => Some(resp.into_inner().transactions),
                    _ => None,
                }
            }
        });
        for listed in futures::future::join_all(calls).await.into_iter().flatten() {
            all.extend(listed);
        }
    }
    all.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
    all
}

pub async fn describe_transaction(node: &Node, r: DescribeTransactionRequest) -> Result<Transaction, Status> {
    if let Some(mut client) = route(node, &r.transactional_id, r.forwarded)? {
        let call = client.describe_transaction(DescribeTransactionRequest { forwarded: true, ..r });
        return Ok(call.await?.into_inner());
    }
    let meta = node.txn.describe_checked(&r.transactional_id).map_err(|e| txn_status(&r.transactional_id, e))?;
    Ok(transaction(node, meta))
}

pub async fn abort_transaction(node: &Node, r: AbortTransactionRequest) -> Result<Transaction, Status> {
    if let Some(mut client) = route(node, &r.transactional_id, r.forwarded)? {
        let call = client.abort_transaction(AbortTransactionRequest { forwarded: true, ..r });
        return Ok(call.await?.into_inner());
    }
    let meta = node.txn.abort(&r.transactional_id).await.map_err(|e| txn_status(&r.transactional_id, e))?;
    Ok(transaction(node, meta))
}
