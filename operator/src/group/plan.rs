//! What a `ConsumerGroup` asks for, decided from its spec, its status and the group as the
//! brokers describe it (pure): the status' view of the group, and whether the reset in the
//! spec is done, must wait, or is applied now.
//!
//! Reset rules: a reset is applied once per `id` (the status records the last id); only while
//! the group has no members (a consumer that is running would overwrite the offsets with its
//! next commit, so the status says it waits and for whom); its offsets are computed once,
//! recorded in the status, then committed, so a reset interrupted halfway commits the same
//! offsets again instead of computing new ones (a `ShiftBy` applied twice would shift twice).

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use crate::conditions::Health;
use crate::crd::group::{OffsetReset, PartitionLag, ResetOffset, ResetResult, ResetTo, TopicReset};

/// A group as the brokers describe it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupView {
    pub state: String,
    pub members: Vec<MemberView>,
    pub offsets: Vec<LagView>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberView {
    pub client_id: String,
    pub client_host: String,
}

/// A partition's committed offset, log end offset (-1: unknown) and lag (-1: unknown).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LagView {
    pub topic: String,
    pub partition: i32,
    pub committed: i64,
    pub log_end: i64,
    pub lag: i64,
}

/// How a reset call picks its offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResetKindOf {
    Earliest,
    Latest,
    Timestamp,
    Offset,
    ShiftBy,
}

/// One ResetGroupOffsets call: a topic, its partitions (empty: all) and a target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetCall {
    pub topic: String,
    pub partitions: Vec<i32>,
    pub kind: ResetKindOf,
    /// Milliseconds since the epoch, an offset, or a shift.
    pub value: i64,
}

/// What to do about the spec's reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResetStep {
    /// No reset, or the last one is applied.
    Nothing,
    /// The spec's reset cannot be carried out as written.
    Invalid(String),
    /// The group has members; the reset waits until it has none.
    Wait(String),
    /// Compute the offsets with these calls (dry runs), record them, then commit them.
    Compute(Vec<ResetCall>),
    /// Commit the offsets already recorded for this reset.
    Commit(Vec<ResetOffset>),
}

/// Milliseconds since the epoch of `value`: digits, or RFC 3339.
pub fn parse_timestamp(value: &str) -> Result<i64, String> {
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return value.parse().map_err(|_| format!("timestamp {value} is out of range"));
    }
    let t: Timestamp = value.parse().map_err(|e| format!("timestamp {value:?} is not RFC 3339: {e}"))?;
    let ms = t.as_millisecond();
    if ms < 0 {
        return Err(format!("timestamp {value} is before 1970"));
    }
    Ok(ms)
}

/// The calls one topic's reset makes.
fn calls(r: &TopicReset) -> Result<Vec<ResetCall>, String> {
    let call = |kind, value| ResetCall { topic: r.topic.clone(), partitions: r.partitions.clone(), kind, value };
    Ok(match r.to {
        ResetTo::Earliest => vec![call(ResetKindOf::Earliest, 0)],
        ResetTo::Latest => vec![call(ResetKindOf::Latest, 0)],
        ResetTo::Timestamp => {
            let value = r.timestamp.as_deref().ok_or_else(|| format!("topic {}: timestamp is required", r.topic))?;
            let ms = parse_timestamp(value).map_err(|e| format!("topic {}: {e}", r.topic))?;
            vec![call(ResetKindOf::Timestamp, ms)]
        }
        ResetTo::ShiftBy => {
            let shift = r.shift_by.ok_or_else(|| format!("topic {}: shiftBy is required", r.topic))?;
            vec![call(ResetKindOf::ShiftBy, shift)]
        }
        ResetTo::Offset => {
            if r.offsets.is_empty() {
                return Err(format!("topic {}: offsets is required", r.topic));
            }
            let mut seen = BTreeMap::new();
            for o in &r.offsets {
                if seen.insert(o.partition, o.offset).is_some() {
                    return Err(format!("topic {}: partition {} is listed twice", r.topic, o.partition));
                }
            }
            r.offsets
                .iter()
                .map(|o| ResetCall {
                    topic: r.topic.clone(),
                    partitions: vec![o.partition],
                    kind: ResetKindOf::Offset,
                    value: o.offset,
                })
                .collect()
        }
    })
}

/// Every call of a reset, or why it cannot be carried out.
pub fn validate(reset: &OffsetReset) -> Result<Vec<ResetCall>, String> {
    let mut topics = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for r in &reset.topics {
        if !topics.insert(r.topic.as_str()) {
            return Err(format!("topic {} is listed twice in the reset", r.topic));
        }
        out.extend(calls(r)?);
    }
    Ok(out)
}

/// The next step for the spec's reset, given the last reset recorded and the group.
pub fn reset_step(reset: Option<&OffsetReset>, last: Option<&ResetResult>, group: Option<&GroupView>) -> ResetStep {
    let Some(reset) = reset else { return ResetStep::Nothing };
    let recorded = last.filter(|l| l.id == reset.id);
    if recorded.is_some_and(|l| l.applied_at.is_some()) {
        return ResetStep::Nothing;
    }
    let calls = match validate(reset) {
        Ok(calls) => calls,
        Err(why) => return ResetStep::Invalid(why),
    };
    let members = group.map_or(&[][..], |g| &g.members[..]);
    if !members.is_empty() {
        let who: Vec<String> = members.iter().take(3).map(|m| format!("{}@{}", m.client_id, m.client_host)).collect();
        let more = if members.len() > 3 { format!(" and {} more", members.len() - 3) } else { String::new() };
        return ResetStep::Wait(format!(
            "reset {} waits: the group has {} member(s) ({}{more}); it is applied once the group has none, so stop its consumers",
            reset.id,
            members.len(),
            who.join(", ")
        ));
    }
    match recorded {
        Some(l) => ResetStep::Commit(l.offsets.clone()),
        None => ResetStep::Compute(calls),
    }
}

/// The recorded offsets as commit calls: one Offset call per topic and target offset.
pub fn commit_calls(offsets: &[ResetOffset]) -> Vec<ResetCall> {
    let mut by_target: BTreeMap<(String, i64), Vec<i32>> = BTreeMap::new();
    for o in offsets {
        by_target.entry((o.topic.clone(), o.after)).or_default().push(o.partition);
    }
    by_target
        .into_iter()
        .map(|((topic, value), partitions)| ResetCall { topic, partitions, kind: ResetKindOf::Offset, value })
        .collect()
}

/// Each partition's offset before (from the group as described) and after (the dry runs).
pub fn reset_offsets(group: Option<&GroupView>, after: &[(String, i32, i64)]) -> Vec<ResetOffset> {
    let before = |t: &str, p: i32| {
        group.and_then(|g| g.offsets.iter().find(|o| o.topic == t && o.partition == p)).map(|o| o.committed)
    };
    let mut out: Vec<ResetOffset> = after
        .iter()
        .map(|(topic, partition, offset)| ResetOffset {
            topic: topic.clone(),
            partition: *partition,
            before: before(topic, *partition),
            after: *offset,
        })
        .collect();
    out.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    out
}

/// The status' view of the group: state, members, lag per partition and in total.
pub fn lag_status(group: Option<&GroupView>) -> (String, i32, i64, Vec<PartitionLag>) {
    let Some(g) = group else { return ("Dead".into(), 0, 0, Vec::new()) };
    let mut offsets: Vec<PartitionLag> = g
        .offsets
        .iter()
        .map(|o| PartitionLag {
            topic: o.topic.clone(),
            partition: o.partition,
            committed_offset: o.committed,
            log_end_offset: o.log_end,
            lag: o.lag,
        })
        .collect();
    offsets.sort_by(|a, b| (&a.topic, a.partition).cmp(&(&b.topic, b.partition)));
    let total = offsets.iter().map(|o| o.lag.max(0)).sum();
    (g.state.clone(), i32::try_from(g.members.len()).unwrap_or(i32::MAX), total, offsets)
}

/// The group's health after this reconcile's step.
pub fn health(group_id: &str, step: &ResetStep, group: Option<&GroupView>) -> Health {
    match step {
        ResetStep::Invalid(why) => Health::Stalled { reason: "InvalidReset".into(), message: why.clone() },
        ResetStep::Wait(why) => Health::Reconciling { reason: "WaitingForEmptyGroup".into(), message: why.clone() },
        ResetStep::Compute(_) | ResetStep::Commit(_) => {
            Health::Reconciling { reason: "Resetting".into(), message: format!("resetting the offsets of {group_id}") }
        }
        ResetStep::Nothing => {
            let (state, members, lag, _) = lag_status(group);
            Health::Ready {
                reason: "Observed".into(),
                message: format!("group {group_id}: {state}, {members} member(s), total lag {lag}"),
            }
        }
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
