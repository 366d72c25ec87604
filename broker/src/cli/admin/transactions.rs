//! `strom transactions list|describe|abort`: the views of `kafka-transactions.sh` through the
//! admin API.

use std::io::Write;

use strom_proto::admin::admin_client::AdminClient;
use strom_proto::admin::{AbortTransactionRequest, DescribeTransactionRequest, ListTransactionsRequest, Transaction};
use tonic::transport::Channel;

use super::commands::TransactionsCommand;
use super::output::{emit, table};
use super::{CliError, Connection};

/// The states a transactional id can be listed in (Kafka's names).
const STATES: [&str; 6] = ["Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort"];

/// The human form of one transaction.
fn describe(t: &Transaction) -> String {
    let partitions: Vec<String> = t.partitions.iter().map(|tp| format!("{}-{}", tp.topic, tp.partition)).collect();
    let start = if t.start_time_ms < 0 { "-".to_string() } else { t.start_time_ms.to_string() };
    let rows = vec![vec![
        t.coordinator.to_string(),
        t.transactional_id.clone(),
        t.producer_id.to_string(),
        t.producer_epoch.to_string(),
        t.state.clone(),
        t.timeout_ms.to_string(),
        start,
        if partitions.is_empty() { "-".to_string() } else { partitions.join(",") },
    ]];
    table(
        &["COORDINATOR", "TRANSACTIONAL ID", "PRODUCER ID", "EPOCH", "STATE", "TIMEOUT MS", "START MS", "PARTITIONS"],
        &rows,
    )
}

pub async fn run(
    client: &mut AdminClient<Channel>,
    conn: &Connection,
    command: TransactionsCommand,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        TransactionsCommand::List { states } => {
            if let Some(bad) = states.iter().find(|s| !STATES.contains(&s.as_str())) {
                return Err(CliError::BadInput(format!(
                    "--state {bad:?} is not a state; one of {}",
                    STATES.join(", ")
                )));
            }
            let request = ListTransactionsRequest { local_only: false, states };
            let listed = client.list_transactions(request).await?.into_inner().transactions;
            let rows: Vec<Vec<String>> = listed
                .iter()
                .map(|t| {
                    vec![
                        t.transactional_id.clone(),
                        t.coordinator.to_string(),
                        t.producer_id.to_string(),
                        t.state.clone(),
                    ]
                })
                .collect();
            let human = table(&["TRANSACTIONAL ID", "COORDINATOR", "PRODUCER ID", "STATE"], &rows);
            emit(out, conn.output, &listed, &human)
        }
        TransactionsCommand::Describe { transactional_id } => {
            let request = DescribeTransactionRequest { transactional_id, forwarded: false };
            let t = client.describe_transaction(request).await?.into_inner();
            emit(out, conn.output, &t, &describe(&t))
        }
        TransactionsCommand::Abort { transactional_id } => {
            let request = AbortTransactionRequest { transactional_id, forwarded: false };
            let t = client.abort_transaction(request).await?.into_inner();
            let human = format!(
                "aborting the transaction of {} (producer {}, now epoch {}); its markers follow\n",
                t.transactional_id, t.producer_id, t.producer_epoch
            );
            emit(out, conn.output, &t, &human)
        }
    }
}
