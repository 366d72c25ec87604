//! A consumer group seen from outside: whether the members' assignments have settled, and what
//! DescribeGroups, ListGroups and OffsetFetch report.

use std::collections::{BTreeMap, BTreeSet};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use bytes::{Buf, Bytes};
use kafka_protocol::messages::ConsumerProtocolAssignment;
use kafka_protocol::protocol::Decodable;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use crate::clients::{base_config, lookup_client, ADMIN_TIMEOUT};

/// How long members' assignments must stay the same before [`wait_for_assignment`] believes
/// a rebalance is over: two heartbeat intervals of the tests' members, and the gap between the
/// two rebalances of a cooperative reassignment.
pub const ASSIGNMENT_SETTLE: Duration = Duration::from_secs(2);

/// Whether `assignments` give each partition in 0..partitions to exactly one member.
pub fn is_exclusive_cover(assignments: &[BTreeSet<i32>], partitions: i32) -> bool {
    let mut owners = vec![0usize; usize::try_from(partitions).unwrap_or(0)];
    for &p in assignments.iter().flatten() {
        match usize::try_from(p).ok().and_then(|i| owners.get_mut(i)) {
            Some(n) => *n += 1,
            None => return false,
        }
    }
    owners.iter().all(|&n| n == 1)
}

/// Polls `observe` (every member's current assignment) until the assignments give each of
/// `partitions` partitions to exactly one member, their sizes are `sizes` (in any order), and
/// nothing has changed for [`ASSIGNMENT_SETTLE`]; returns them. An error after `timeout`,
/// naming what was last seen.
pub fn wait_for_assignment(
    partitions: i32,
    sizes: &[usize],
    timeout: Duration,
    mut observe: impl FnMut() -> Vec<BTreeSet<i32>>,
) -> Result<Vec<BTreeSet<i32>>> {
    let mut want = sizes.to_vec();
    want.sort_unstable();
    let deadline = Instant::now() + timeout;
    let mut settled: Option<(Vec<BTreeSet<i32>>, Instant)> = None;
    loop {
        let seen = observe();
        let mut got: Vec<usize> = seen.iter().map(BTreeSet::len).collect();
        got.sort_unstable();
        if got == want && is_exclusive_cover(&seen, partitions) {
            match &settled {
                Some((before, since)) if *before == seen => {
                    if since.elapsed() >= ASSIGNMENT_SETTLE {
                        return Ok(seen);
                    }
                }
                _ => settled = Some((seen.clone(), Instant::now())),
            }
        } else {
            settled = None;
        }
        if Instant::now() > deadline {
            bail!(
                "assignments did not settle on sizes {want:?} covering partitions 0..{partitions} once each \
                 within {timeout:?}; last seen {seen:?}"
            );
        }
        thread::sleep(Duration::from_millis(100));
    }
}

/// A group as DescribeGroups reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupDescription {
    pub name: String,
    /// "Stable", "PreparingRebalance", "CompletingRebalance", "Empty" or "Dead".
    pub state: String,
    /// "consumer" for Kafka consumers.
    pub protocol_type: String,
    /// The assignor chosen for the current generation.
    pub protocol: String,
    pub members: Vec<GroupMemberDescription>,
}

/// One member in DescribeGroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMemberDescription {
    pub member_id: String,
    pub client_id: String,
    pub client_host: String,
    /// The member's assignment, decoded from the consumer protocol: topic → partitions.
    pub assignment: BTreeMap<String, BTreeSet<i32>>,
}

/// DescribeGroups of `group` through librdkafka (`rd_kafka_list_groups` with a group name).
pub fn describe_group(bootstrap: &str, group: &str) -> Result<GroupDescription> {
    let client = lookup_client(bootstrap)?;
    let list =
        client.fetch_group_list(Some(group), ADMIN_TIMEOUT).with_context(|| format!("describe group {group}"))?;
    let info =
        list.groups().iter().find(|g| g.name() == group).ok_or_else(|| anyhow!("group {group} not in the answer"))?;
    group_description(info)
}

/// Every group the broker knows (ListGroups, then DescribeGroups of each, as librdkafka does).
pub fn list_groups(bootstrap: &str) -> Result<Vec<GroupDescription>> {
    let client = lookup_client(bootstrap)?;
    let list = client.fetch_group_list(None, ADMIN_TIMEOUT).context("list groups")?;
    list.groups().iter().map(group_description).collect()
}

fn group_description(info: &rdkafka::groups::GroupInfo) -> Result<GroupDescription> {
    let members = info
        .members()
        .iter()
        .map(|m| {
            let assignment = match m.assignment() {
                Some(bytes) if !bytes.is_empty() => decode_consumer_assignment(bytes)
                    .with_context(|| format!("assignment of member {} of {}", m.id(), info.name()))?,
                _ => BTreeMap::new(),
            };
            Ok(GroupMemberDescription {
                member_id: m.id().to_string(),
                client_id: m.client_id().to_string(),
                client_host: m.client_host().to_string(),
                assignment,
            })
        })
        .collect::<Result<_>>()?;
    Ok(GroupDescription {
        name: info.name().to_string(),
        state: info.state().to_string(),
        protocol_type: info.protocol_type().to_string(),
        protocol: info.protocol().to_string(),
        members,
    })
}

/// Decodes a consumer-protocol assignment (i16 version, then the ConsumerProtocolAssignment
/// body). Versions above the crate's are read as its newest: the format only ever appends.
pub fn decode_consumer_assignment(bytes: &[u8]) -> Result<BTreeMap<String, BTreeSet<i32>>> {
    let mut buf = Bytes::copy_from_slice(bytes);
    if buf.remaining() < 2 {
        bail!("assignment of {} bytes has no version", bytes.len());
    }
    let version = buf.get_i16();
    if version < 0 {
        bail!("assignment version {version}");
    }
    let assignment = ConsumerProtocolAssignment::decode(&mut buf, version.min(3))
        .with_context(|| format!("decode consumer assignment v{version}"))?;
    let mut out: BTreeMap<String, BTreeSet<i32>> = BTreeMap::new();
    for tp in assignment.assigned_partitions {
        out.entry(tp.topic.0.to_string()).or_default().extend(tp.partitions);
    }
    Ok(out)
}

/// OffsetFetch for `group`: the committed offset of each of `topic`'s partitions
/// 0..partitions, `None` where nothing is committed.
pub fn committed_offsets(
    bootstrap: &str,
    group: &str,
    topic: &str,
    partitions: i32,
) -> Result<BTreeMap<i32, Option<i64>>> {
    let mut config = base_config(bootstrap);
    config.set("group.id", group).set("enable.auto.commit", "false");
    let consumer: BaseConsumer = config.create().context("create offset look-up consumer")?;
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let answer = consumer.committed_offsets(tpl, ADMIN_TIMEOUT).with_context(|| format!("OffsetFetch {group}"))?;
    let mut out = BTreeMap::new();
    for element in answer.elements() {
        element.error().with_context(|| format!("OffsetFetch {group} {topic}-{}", element.partition()))?;
        let offset = match element.offset() {
            Offset::Offset(o) => Some(o),
            _ => None,
        };
        out.insert(element.partition(), offset);
    }
    Ok(out)
}
