//! `strom topic create|list|describe|alter|delete`.

use std::io::Write;

use strom_proto::admin::admin_client::AdminClient;
use strom_proto::admin::{
    AlterTopicRequest, CreateTopicRequest, DeleteTopicRequest, DescribeTopicRequest, ListTopicsRequest, Topic,
};
use tonic::transport::Channel;

use super::commands::TopicCommand;
use super::output::{emit, ids, parse_configs, table};
use super::{CliError, Connection};

fn describe(t: &Topic) -> String {
    let mut human = format!(
        "topic {}  id {}  partitions {}  replication factor {}{}\n",
        t.name,
        t.id,
        t.partitions,
        t.replication_factor,
        if t.internal { "  (internal)" } else { "" }
    );
    let mut configs: Vec<_> = t.configs.iter().collect();
    configs.sort();
    for (k, v) in configs {
        human.push_str(&format!("  {k}={v}\n"));
    }
    human.push('\n');
    let rows: Vec<Vec<String>> = t
        .partition_info
        .iter()
        .map(|p| {
            vec![
                p.partition.to_string(),
                p.leader.to_string(),
                p.leader_epoch.to_string(),
                ids(&p.replicas),
                ids(&p.isr),
                ids(&p.adding),
                ids(&p.removing),
            ]
        })
        .collect();
    human.push_str(&table(&["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "ADDING", "REMOVING"], &rows));
    human
}

pub async fn run(
    client: &mut AdminClient<Channel>,
    conn: &Connection,
    command: TopicCommand,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        TopicCommand::Create { name, partitions, replication_factor, configs } => {
            let request = CreateTopicRequest {
                name,
                partitions: nonzero("--partitions", partitions)?,
                replication_factor: nonzero("--replication-factor", replication_factor)?,
                configs: parse_configs(&configs)?.into_iter().collect(),
            };
            let topic = client.create_topic(request).await?.into_inner();
            let human = format!("created {}\n{}", topic.name, describe(&topic));
            emit(out, conn.output, &topic, &human)
        }
        TopicCommand::List { internal } => {
            let topics =
                client.list_topics(ListTopicsRequest { include_internal: internal }).await?.into_inner().topics;
            let rows: Vec<Vec<String>> = topics
                .iter()
                .map(|t| {
                    let moving = t.partition_info.iter().filter(|p| !p.adding.is_empty() || !p.removing.is_empty());
                    vec![
                        t.name.clone(),
                        t.partitions.to_string(),
                        t.replication_factor.to_string(),
                        t.partition_info.iter().filter(|p| p.isr.len() < p.replicas.len()).count().to_string(),
                        moving.count().to_string(),
                    ]
                })
                .collect();
            let human = table(&["TOPIC", "PARTITIONS", "RF", "UNDER-REPLICATED", "REASSIGNING"], &rows);
            emit(out, conn.output, &topics, &human)
        }
        TopicCommand::Describe { name } => {
            let topic = client.describe_topic(DescribeTopicRequest { name }).await?.into_inner();
            let human = describe(&topic);
            emit(out, conn.output, &topic, &human)
        }
        TopicCommand::Alter { name, partitions, replication_factor, configs, delete_configs } => {
            let set_configs = parse_configs(&configs)?;
            if partitions.is_none()
                && replication_factor.is_none()
                && set_configs.is_empty()
                && delete_configs.is_empty()
            {
                return Err(CliError::BadInput(
                    "nothing to alter: give --partitions, --replication-factor, --config or --delete-config".into(),
                ));
            }
            let request = AlterTopicRequest {
                name,
                partitions: nonzero("--partitions", partitions)?,
                set_configs: set_configs.into_iter().collect(),
                delete_configs,
                replication_factor: nonzero("--replication-factor", replication_factor)?,
            };
            let topic = client.alter_topic(request).await?.into_inner();
            let human = format!("altered {}\n{}", topic.name, describe(&topic));
            emit(out, conn.output, &topic, &human)
        }
        TopicCommand::Delete { name } => {
            client.delete_topic(DeleteTopicRequest { name: name.clone() }).await?;
            emit(out, conn.output, &serde_json::json!({ "deleted": name }), &format!("deleted {name}\n"))
        }
    }
}

/// A count given on the command line: 0 means "unset" to the API, so an explicit 0 is refused
/// here rather than silently meaning the default. Negative counts go to the broker, which
/// says what is wrong with them.
fn nonzero(flag: &str, value: Option<i32>) -> Result<i32, CliError> {
    match value {
        Some(0) => Err(CliError::BadInput(format!("{flag} must be at least 1, got 0"))),
        Some(n) => Ok(n),
        None => Ok(0),
    }
}
