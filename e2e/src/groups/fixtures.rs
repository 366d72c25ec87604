//! What the consumer-group test files (`tests/groups.rs`, `tests/group_bad_input.rs`) share:
//! the broker they run, members with the tests' session settings, records tagged by round, and
//! polls that wait for a condition (none sleeps a fixed time to let something happen).
//!
//! These are test fixtures: like an assertion, each panics with what it expected and what it
//! saw instead, so a test body reads as a list of steps.

use std::collections::{BTreeMap, HashSet};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::ensure;

use super::{committed_offsets, Assignor, GroupMember, GroupMemberOptions};
use crate::broker::{BrokerOptions, BrokerProcess};
use crate::clients::{self, ConsumedRecord};

/// `session.timeout.ms` of the tests' members: the broker's default minimum.
pub const SESSION_TIMEOUT_MS: u32 = 6_000;
/// `heartbeat.interval.ms` of the tests' members.
pub const HEARTBEAT_INTERVAL_MS: u32 = 1_000;
/// Upper bound for a rebalance to settle (joins, syncs, the settle time).
pub const REBALANCE_TIMEOUT: Duration = Duration::from_secs(30);
/// Upper bound for records to reach a consumer.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(30);

/// A broker with no initial rebalance delay; `offsets_partitions` sets
/// `--offsets-topic-num-partitions` (None: the default, 50).
pub fn start_broker(offsets_partitions: Option<u32>) -> BrokerProcess {
    let mut extra_args = vec!["--group-initial-rebalance-delay-ms".to_string(), "0".to_string()];
    if let Some(n) = offsets_partitions {
        extra_args.extend(["--offsets-topic-num-partitions".to_string(), n.to_string()]);
    }
    BrokerProcess::launch(BrokerOptions { extra_args, ..BrokerOptions::default() }).expect("start broker")
}

/// A [`GroupMember`] with [`SESSION_TIMEOUT_MS`] sessions and [`HEARTBEAT_INTERVAL_MS`]
/// heartbeats, committing what it processed every 200 ms.
pub fn member(bootstrap: &str, group: &str, client_id: &str, topic: &str, assignor: Assignor) -> GroupMember {
    let options = GroupMemberOptions {
        assignor,
        session_timeout_ms: SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: HEARTBEAT_INTERVAL_MS,
        ..GroupMemberOptions::new(group, client_id, topic)
    };
    GroupMember::start(bootstrap, options).expect("start group member")
}

/// `per_partition` records to each of `partitions` partitions, values `{tag}-p{p}-{i}`,
/// interleaved across partitions; returns the values in the order produced.
pub fn produce_tagged(bootstrap: &str, topic: &str, tag: &str, partitions: i32, per_partition: usize) -> Vec<String> {
    let records: Vec<(i32, String)> =
        (0..per_partition).flat_map(|i| (0..partitions).map(move |p| (p, format!("{tag}-p{p}-{i:04}")))).collect();
    clients::produce_to_partitions(bootstrap, topic, &records).expect("produce");
    records.into_iter().map(|(_, v)| v).collect()
}

/// Values of `records`.
pub fn values_of(records: &[ConsumedRecord]) -> HashSet<String> {
    records.iter().map(|r| r.value_str().to_string()).collect()
}

/// Polls until the records of `members` (and `earlier`, records of members gone) include every
/// value of `wanted`; panics with what is missing after [`DELIVERY_TIMEOUT`].
pub fn wait_until_received(members: &[&GroupMember], earlier: &[ConsumedRecord], wanted: &[String], context: &str) {
    let deadline = Instant::now() + DELIVERY_TIMEOUT;
    loop {
        let mut seen = values_of(earlier);
        for m in members {
            seen.extend(values_of(&m.records()));
        }
        let missing: Vec<&String> = wanted.iter().filter(|v| !seen.contains(*v)).collect();
        if missing.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{context}: {} of {} records never reached the group within {DELIVERY_TIMEOUT:?}, e.g. {:?}; members: {:?}",
            missing.len(),
            wanted.len(),
            &missing[..missing.len().min(5)],
            members.iter().map(|m| m.status()).collect::<Vec<_>>()
        );
        thread::sleep(Duration::from_millis(100));
    }
}

/// Polls OffsetFetch until `group`'s committed offsets of `topic` are `want`.
pub fn wait_for_committed(bootstrap: &str, group: &str, topic: &str, want: &BTreeMap<i32, Option<i64>>) {
    let partitions = i32::try_from(want.len()).expect("partition count fits in i32");
    let mut last = None;
    let result = clients::eventually(DELIVERY_TIMEOUT, || {
        let got = committed_offsets(bootstrap, group, topic, partitions)?;
        last = Some(got.clone());
        ensure!(&got == want, "committed {got:?}");
        Ok(())
    });
    if let Err(e) = result {
        panic!("group {group}: committed offsets of {topic} never became {want:?} (last {last:?}): {e:#}");
    }
}

/// Committed offsets equal to each partition's high watermark.
pub fn high_watermarks(bootstrap: &str, topic: &str, partitions: i32) -> BTreeMap<i32, Option<i64>> {
    (0..partitions).map(|p| (p, Some(clients::watermarks(bootstrap, topic, p).expect("watermarks").1))).collect()
}
