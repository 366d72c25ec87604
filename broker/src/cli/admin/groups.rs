//! `strom group list|describe|reset-offsets|delete`.

use std::io::Write;

use strom_proto::admin::admin_client::AdminClient;
use strom_proto::admin::{
    DeleteGroupRequest, DescribeGroupRequest, GroupOffset, ListGroupsRequest, ResetGroupOffsetsRequest, ResetKind,
};
use tonic::transport::Channel;

use super::commands::{GroupCommand, ResetTarget};
use super::output::{emit, table};
use super::{CliError, Connection};

/// The API's reset kind and value for what was typed.
pub fn reset_kind(to: &ResetTarget) -> Result<(ResetKind, i64), CliError> {
    if to.to_earliest {
        return Ok((ResetKind::Earliest, 0));
    }
    if to.to_latest {
        return Ok((ResetKind::Latest, 0));
    }
    if let Some(text) = &to.to_datetime {
        let time = humantime::parse_rfc3339_weak(text).map_err(|e| {
            CliError::BadInput(format!("--to-datetime {text:?}: {e} (expected e.g. 2026-12-01T09:30:00Z)"))
        })?;
        let ms = time
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|_| CliError::BadInput(format!("--to-datetime {text:?} is before 1970")))?
            .as_millis();
        return Ok((ResetKind::Timestamp, i64::try_from(ms).unwrap_or(i64::MAX)));
    }
    if let Some(ms) = to.to_timestamp {
        if ms < 0 {
            return Err(CliError::BadInput(format!("--to-timestamp {ms} is before 1970")));
        }
        return Ok((ResetKind::Timestamp, ms));
    }
    if let Some(offset) = to.to_offset {
        if offset < 0 {
            return Err(CliError::BadInput(format!("--to-offset {offset}: offsets are not negative")));
        }
        return Ok((ResetKind::Offset, offset));
    }
    if let Some(n) = to.shift_by {
        return Ok((ResetKind::ShiftBy, n));
    }
    Err(CliError::BadInput("say where to: --to-earliest, --to-latest, --to-datetime, ...".into()))
}

fn offset_rows(offsets: &[GroupOffset]) -> Vec<Vec<String>> {
    offsets
        .iter()
        .map(|o| {
            let known = |v: i64| if v < 0 { "-".to_string() } else { v.to_string() };
            vec![
                o.topic.clone(),
                o.partition.to_string(),
                o.committed_offset.to_string(),
                known(o.log_end_offset),
                known(o.lag),
            ]
        })
        .collect()
}

pub async fn run(
    client: &mut AdminClient<Channel>,
    conn: &Connection,
    command: GroupCommand,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    match command {
        GroupCommand::List => {
            let groups = client.list_groups(ListGroupsRequest { local_only: false }).await?.into_inner().groups;
            let rows: Vec<Vec<String>> = groups
                .iter()
                .map(|g| vec![g.group.clone(), g.state.clone(), g.protocol_type.clone(), g.coordinator.to_string()])
                .collect();
            let human = table(&["GROUP", "STATE", "PROTOCOL TYPE", "COORDINATOR"], &rows);
            emit(out, conn.output, &groups, &human)
        }
        GroupCommand::Describe { group } => {
            let g = client.describe_group(DescribeGroupRequest { group, forwarded: false }).await?.into_inner();
            let mut human = format!(
                "group {}  state {}  protocol {}  coordinator {}  members {}\n\n",
                g.group,
                g.state,
                if g.protocol.is_empty() { "-" } else { &g.protocol },
                g.coordinator,
                g.members.len()
            );
            if !g.members.is_empty() {
                let rows: Vec<Vec<String>> = g
                    .members
                    .iter()
                    .map(|m| {
                        let assigned: Vec<String> =
                            m.assignment.iter().map(|tp| format!("{}-{}", tp.topic, tp.partition)).collect();
                        vec![m.member_id.clone(), m.client_id.clone(), m.client_host.clone(), assigned.join(",")]
                    })
                    .collect();
                human.push_str(&table(&["MEMBER", "CLIENT", "HOST", "ASSIGNMENT"], &rows));
                human.push('\n');
            }
            human.push_str(&table(&["TOPIC", "PARTITION", "COMMITTED", "LOG END", "LAG"], &offset_rows(&g.offsets)));
            emit(out, conn.output, &g, &human)
        }
        GroupCommand::ResetOffsets { group, topic, partitions, to, dry_run } => {
            let (kind, value) = reset_kind(&to)?;
            let request = ResetGroupOffsetsRequest {
                group,
                topic,
                partitions,
                kind: kind.into(),
                value,
                dry_run,
                forwarded: false,
            };
            let answer = client.reset_group_offsets(request).await?.into_inner();
            let mut human =
                table(&["TOPIC", "PARTITION", "NEW OFFSET", "LOG END", "LAG"], &offset_rows(&answer.offsets));
            if dry_run {
                human.push_str("(dry run: nothing committed)\n");
            }
            emit(out, conn.output, &answer, &human)
        }
        GroupCommand::Delete { group } => {
            client.delete_group(DeleteGroupRequest { group: group.clone(), forwarded: false }).await?;
            emit(out, conn.output, &serde_json::json!({ "deleted": group }), &format!("deleted group {group}\n"))
        }
    }
}
