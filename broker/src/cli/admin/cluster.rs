//! `strom cluster`, `strom rebalance` and `strom broker`.

use std::io::Write;

use serde::Serialize;
use strom_proto::admin::admin_client::AdminClient;
use strom_proto::admin::{
    CancelRebalanceRequest, DescribeClusterRequest, DescribeClusterResponse, ElectLeadersRequest, PartitionInfo,
    RebalanceMode, RebalancePlan, RebalanceProgress, RebalanceRequest, RebalanceStatusRequest, RemoveBrokerRequest,
    TopicPartition, UnhealthyPartitionsRequest, UnhealthyPartitionsResponse,
};
use tonic::transport::Channel;

use super::commands::{BrokerCommand, ClusterCommand, ExecuteFlags, RebalanceCommand, RebalanceScope};
use super::output::{bytes, emit, ids, parse_bytes, table};
use super::{progress, CliError, Connection, Output};

type Client = AdminClient<Channel>;

#[derive(Serialize)]
struct ClusterView {
    cluster: DescribeClusterResponse,
    unhealthy: UnhealthyPartitionsResponse,
}

fn yes(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

fn partition_rows(topics: &[String], partitions: &[PartitionInfo]) -> Vec<Vec<String>> {
    topics
        .iter()
        .zip(partitions)
        .map(|(t, p)| vec![t.clone(), p.partition.to_string(), p.leader.to_string(), ids(&p.replicas), ids(&p.isr)])
        .collect()
}

pub async fn cluster(
    client: &mut Client,
    conn: &Connection,
    command: ClusterCommand,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        ClusterCommand::Describe => {
            let cluster = client.describe_cluster(DescribeClusterRequest {}).await?.into_inner();
            let unhealthy = client.unhealthy_partitions(UnhealthyPartitionsRequest {}).await?.into_inner();
            let mut human = format!(
                "cluster {}  controller {}  topics {}  partitions {}  under-replicated {}  offline {}  reassigning {}\n",
                cluster.cluster_id,
                cluster.controller_id,
                cluster.topics,
                cluster.partitions,
                cluster.under_replicated_partitions,
                cluster.offline_partitions,
                cluster.reassigning_partitions
            );
            if let Some(t) = cluster.replication_throttle_bytes_per_sec {
                human.push_str(&format!("replication throttle {}/s\n", bytes(t)));
            }
            human.push('\n');
            let rows: Vec<Vec<String>> = cluster
                .brokers
                .iter()
                .map(|b| {
                    vec![
                        b.id.to_string(),
                        b.rack.clone().unwrap_or_else(|| "-".into()),
                        yes(b.live),
                        yes(b.voter),
                        yes(b.controller),
                        b.kafka_address.clone(),
                        b.internal_address.clone(),
                        b.replicas.to_string(),
                        b.leaders.to_string(),
                        bytes(b.bytes),
                    ]
                })
                .collect();
            human.push_str(&table(
                &["ID", "RACK", "LIVE", "VOTER", "CONTROLLER", "KAFKA", "INTERNAL", "REPLICAS", "LEADERS", "BYTES"],
                &rows,
            ));
            for (title, topics, partitions) in [
                ("Offline partitions", &unhealthy.offline_topics, &unhealthy.offline),
                ("Under-replicated partitions", &unhealthy.under_replicated_topics, &unhealthy.under_replicated),
            ] {
                if !partitions.is_empty() {
                    human.push_str(&format!("\n{title}:\n"));
                    human.push_str(&table(
                        &["TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR"],
                        &partition_rows(topics, partitions),
                    ));
                }
            }
            emit(out, conn.output, &ClusterView { cluster, unhealthy }, &human)
        }
        ClusterCommand::ElectLeaders { topic, partition, unclean } => {
            let partitions = match (topic, partition) {
                (None, _) => vec![],
                (Some(t), Some(p)) => vec![TopicPartition { topic: t, partition: p }],
                (Some(t), None) => {
                    let described = client
                        .describe_topic(strom_proto::admin::DescribeTopicRequest { name: t.clone() })
                        .await?
                        .into_inner();
                    described
                        .partition_info
                        .iter()
                        .map(|p| TopicPartition { topic: t.clone(), partition: p.partition })
                        .collect()
                }
            };
            let answer = client.elect_leaders(ElectLeadersRequest { partitions, unclean }).await?.into_inner();
            let failed: Vec<_> = answer.results.iter().filter(|r| !r.error.is_empty()).collect();
            let rows: Vec<Vec<String>> =
                failed.iter().map(|r| vec![r.topic.clone(), r.partition.to_string(), r.error.clone()]).collect();
            let mut human = format!("{} partition(s) checked, {} not elected\n", answer.results.len(), failed.len());
            if !rows.is_empty() {
                human.push_str(&table(&["TOPIC", "PARTITION", "WHY"], &rows));
            }
            emit(out, conn.output, &answer, &human)?;
            if failed.is_empty() {
                Ok(())
            } else {
                Err(CliError::Status(tonic::Status::failed_precondition(format!(
                    "{} partition(s) could not be elected",
                    failed.len()
                ))))
            }
        }
    }
}

fn request(scope: &RebalanceScope, throttle: u64) -> RebalanceRequest {
    let (mode, brokers) = if !scope.drain.is_empty() {
        (RebalanceMode::DrainBrokers, scope.drain.clone())
    } else if !scope.add_brokers.is_empty() {
        (RebalanceMode::AddBrokers, scope.add_brokers.clone())
    } else {
        (RebalanceMode::Full, vec![])
    };
    RebalanceRequest { mode: mode.into(), brokers, throttle_bytes_per_sec: throttle, max_moves: 0 }
}

fn plan_text(plan: &RebalancePlan) -> String {
    let mut human = format!("{} replica(s) to move, {} to copy\n", plan.replicas_to_move, bytes(plan.bytes_to_move));
    if !plan.moves.is_empty() {
        human.push('\n');
        let rows: Vec<Vec<String>> = plan
            .moves
            .iter()
            .map(|m| vec![m.topic.clone(), m.partition.to_string(), ids(&m.from), ids(&m.to), bytes(m.bytes)])
            .collect();
        human.push_str(&table(&["TOPIC", "PARTITION", "FROM", "TO", "BYTES"], &rows));
    }
    human.push('\n');
    let mut brokers: Vec<i32> = plan.replicas_after.keys().chain(plan.leaders_after.keys()).copied().collect();
    brokers.sort_unstable();
    brokers.dedup();
    let rows: Vec<Vec<String>> = brokers
        .iter()
        .map(|b| {
            vec![
                b.to_string(),
                plan.replicas_after.get(b).copied().unwrap_or(0).to_string(),
                plan.leaders_after.get(b).copied().unwrap_or(0).to_string(),
            ]
        })
        .collect();
    human.push_str(&table(&["BROKER", "REPLICAS AFTER", "LEADERS AFTER"], &rows));
    human
}

fn progress_text(p: &RebalanceProgress) -> String {
    if p.partitions_remaining == 0 {
        return "no partition is being reassigned\n".to_string();
    }
    let mut human = format!(
        "{} partition(s) moving, {} replica(s) catching up, {} behind\n\n",
        p.partitions_remaining,
        p.replicas_remaining,
        bytes(p.bytes_behind)
    );
    let rows: Vec<Vec<String>> = p
        .in_progress
        .iter()
        .map(|m| vec![m.topic.clone(), m.partition.to_string(), ids(&m.from), ids(&m.to)])
        .collect();
    human.push_str(&table(&["TOPIC", "PARTITION", "FROM", "TO"], &rows));
    human
}

#[derive(Serialize)]
struct Executed {
    plan: RebalancePlan,
    /// Present when the command waited: what was left (nothing, once done).
    progress: Option<RebalanceProgress>,
}

/// Executes the plan for `scope`; waits for it unless --no-wait.
async fn execute(
    client: &mut Client,
    conn: &Connection,
    scope: &RebalanceScope,
    flags: &ExecuteFlags,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let throttle = match &flags.throttle {
        Some(t) => match parse_bytes(t)? {
            0 => return Err(CliError::BadInput("a throttle of 0 bytes/s would never finish".into())),
            n => n,
        },
        None => 0,
    };
    let plan = client.execute_rebalance(request(scope, throttle)).await?.into_inner();
    if conn.output == Output::Table {
        write!(out, "{}", plan_text(&plan))?;
        out.flush()?;
    }
    let progress = if flags.no_wait || plan.moves.is_empty() {
        None
    } else {
        Some(progress::wait(client, plan.replicas_to_move, flags.timeout, conn.output == Output::Table).await?)
    };
    match conn.output {
        Output::Json => emit(out, Output::Json, &Executed { plan, progress }, ""),
        Output::Table => {
            let done = match (&progress, plan.moves.is_empty()) {
                (_, true) => "nothing to move\n",
                (Some(_), _) => "done\n",
                (None, _) => "started; follow it with `strom rebalance status --wait`\n",
            };
            write!(out, "{done}")?;
            Ok(())
        }
    }
}

pub async fn rebalance(
    client: &mut Client,
    conn: &Connection,
    command: RebalanceCommand,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        RebalanceCommand::Plan { scope } => {
            let plan = client.plan_rebalance(request(&scope, 0)).await?.into_inner();
            let human = plan_text(&plan);
            emit(out, conn.output, &plan, &human)
        }
        RebalanceCommand::Execute { scope, flags } => execute(client, conn, &scope, &flags, out).await,
        RebalanceCommand::Status { wait, timeout } => {
            let p = if wait {
                progress::wait(client, 0, timeout, conn.output == Output::Table).await?
            } else {
                client.rebalance_status(RebalanceStatusRequest {}).await?.into_inner()
            };
            let human = progress_text(&p);
            emit(out, conn.output, &p, &human)
        }
        RebalanceCommand::Cancel => {
            let p = client.cancel_rebalance(CancelRebalanceRequest {}).await?.into_inner();
            let human = format!("cancelled\n{}", progress_text(&p));
            emit(out, conn.output, &p, &human)
        }
    }
}

pub async fn broker(
    client: &mut Client,
    conn: &Connection,
    command: BrokerCommand,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        BrokerCommand::Drain { id, flags } => {
            let scope = RebalanceScope { add_brokers: vec![], drain: vec![id] };
            execute(client, conn, &scope, &flags, out).await
        }
        BrokerCommand::Remove { id } => {
            client.remove_broker(RemoveBrokerRequest { broker_id: id }).await?;
            emit(out, conn.output, &serde_json::json!({ "removed": id }), &format!("broker {id} removed\n"))
        }
    }
}
