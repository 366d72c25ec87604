//! The balancer: a pure function from the cluster as it is — brokers with racks, every
//! partition's replicas and size, brokers to drain — to a target assignment.
//!
//! Rules, in order:
//! 1. Every replica on a draining broker moves to an eligible broker.
//! 2. Replica counts are evened out (every eligible broker within one of the mean), moving
//!    one replica at a time from the most to a least loaded broker, never putting two
//!    replicas of a partition on one broker and never reducing the number of racks a
//!    partition spans. Which replica: one of the topic the giver holds most more of than the
//!    receiver (so each topic spreads, not only the totals), then the partition whose size
//!    best evens the two brokers' bytes.
//! 3. Leadership (the first replica, the preferred leader) is evened out by reordering
//!    replicas — no data moves for that.
//!
//! A replica that need not move does not: an already balanced cluster gets an empty plan.
//! Deterministic: ties break on broker id, then partition.

use std::collections::{BTreeMap, BTreeSet};

/// A broker the balancer may place replicas on (or drain).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BalancerBroker {
    pub id: i32,
    pub rack: Option<String>,
}

/// One partition as it is now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionLoad {
    pub topic: String,
    pub partition: i32,
    pub replicas: Vec<i32>,
    /// Bytes of one replica (the leader's log size).
    pub size_bytes: u64,
}

/// What to balance.
#[derive(Debug, Clone, Default)]
pub struct BalanceRequest {
    pub brokers: Vec<BalancerBroker>,
    pub partitions: Vec<PartitionLoad>,
    /// Brokers that must end up holding nothing.
    pub drain: BTreeSet<i32>,
    /// Only move replicas onto these brokers (and off draining ones); empty: any.
    pub only_to: BTreeSet<i32>,
}

/// One partition whose replicas change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub topic: String,
    pub partition: i32,
    pub from: Vec<i32>,
    pub to: Vec<i32>,
}

impl Move {
    /// Replicas that have to be copied to a new broker.
    pub fn added(&self) -> Vec<i32> {
        self.to.iter().copied().filter(|b| !self.from.contains(b)).collect()
    }
}

/// Why there is no plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BalanceError {
    #[error("no broker would be left to hold replicas")]
    NoBrokers,
    #[error("partition {topic}-{partition} has {replicas} replicas but only {brokers} brokers would remain")]
    TooFewBrokers { topic: String, partition: i32, replicas: usize, brokers: usize },
    #[error("broker {0} is not registered")]
    UnknownBroker(i32),
}

/// The plan: the partitions whose replica lists change, with their new lists.
pub fn plan(request: &BalanceRequest) -> Result<Vec<Move>, BalanceError> {
    let known: BTreeSet<i32> = request.brokers.iter().map(|b| b.id).collect();
    for b in request.drain.iter().chain(&request.only_to) {
        if !known.contains(b) {
            return Err(BalanceError::UnknownBroker(*b));
        }
    }
    let eligible: Vec<&BalancerBroker> = request.brokers.iter().filter(|b| !request.drain.contains(&b.id)).collect();
    if eligible.is_empty() {
        return Err(BalanceError::NoBrokers);
    }
    let rack: BTreeMap<i32, Option<&str>> = request.brokers.iter().map(|b| (b.id, b.rack.as_deref())).collect();
    let mut current: Vec<Vec<i32>> = request.partitions.iter().map(|p| p.replicas.clone()).collect();
    for (p, replicas) in request.partitions.iter().zip(&current) {
        if replicas.len() > eligible.len() {
            return Err(BalanceError::TooFewBrokers {
                topic: p.topic.clone(),
                partition: p.partition,
                replicas: replicas.len(),
                brokers: eligible.len(),
            });
        }
    }
    let eligible_ids: Vec<i32> = eligible.iter().map(|b| b.id).collect();
    let may_receive = |b: i32| request.only_to.is_empty() || request.only_to.contains(&b);
    let racks_of = |replicas: &[i32]| -> BTreeSet<Option<&str>> {
        replicas.iter().map(|r| rack.get(r).copied().flatten()).collect()
    };

    // 1. Drain.
    for i in 0..current.len() {
        for slot in 0..current[i].len() {
            let b = current[i][slot];
            if !request.drain.contains(&b) {
                continue;
            }
            let load = replica_counts(&current, &eligible_ids);
            let others: Vec<i32> = current[i].iter().copied().filter(|r| *r != b).collect();
            let used_racks = racks_of(&others);
            let target = eligible_ids
                .iter()
                .copied()
                .filter(|c| !current[i].contains(c) && may_receive(*c))
                .min_by_key(|c| (used_racks.contains(&rack.get(c).copied().flatten()), load[c], *c))
                .or_else(|| {
                    eligible_ids.iter().copied().filter(|c| !current[i].contains(c)).min_by_key(|c| (load[c], *c))
                });
            match target {
                Some(t) => current[i][slot] = t,
                None => {
                    return Err(BalanceError::TooFewBrokers {
                        topic: request.partitions[i].topic.clone(),
                        partition: request.partitions[i].partition,
                        replicas: current[i].len(),
                        brokers: eligible_ids.len(),
                    })
                }
            }
        }
    }

    // 2. Even out replica counts.
    let total: usize = current.iter().map(Vec::len).sum();
    let ceil = total.div_ceil(eligible_ids.len());
    let floor = total / eligible_ids.len();
    let max_steps = total * 2 + 16;
    for _ in 0..max_steps {
        let load = replica_counts(&current, &eligible_ids);
        let mut by_load: Vec<(usize, i32)> = load.iter().map(|(b, n)| (*n, *b)).collect();
        by_load.sort_unstable();
        let (lowest, highest) = (by_load[0].0, by_load[by_load.len() - 1].0);
        if highest <= ceil && lowest >= floor || highest <= lowest + 1 {
            break;
        }
        let bytes = byte_counts(&current, &request.partitions);
        let per_topic = topic_counts(&current, &request.partitions);
        let topic_count = |b: i32, t: &str| per_topic.get(&(t.to_string(), b)).copied().unwrap_or(0) as i64;
        // The most loaded broker that can give a replica to a less loaded one (by two or more).
        let mut moved = false;
        'pairs: for &(hot_n, hot) in by_load.iter().rev() {
            for &(cold_n, cold) in by_load.iter().filter(|(_, b)| may_receive(*b)) {
                if hot_n < cold_n + 2 {
                    break;
                }
                // Of the partitions that may move (no second replica on `cold`, no rack
                // lost), the one of the topic `hot` holds most more of than `cold` (each
                // topic spreads too), then the one whose size best evens the two brokers'
                // bytes.
                let gap = i128::from(bytes.get(&hot).copied().unwrap_or(0))
                    - i128::from(bytes.get(&cold).copied().unwrap_or(0));
                let ideal = (gap / 2).max(0);
                let candidate = (0..current.len())
                    .filter(|i| {
                        let replicas = &current[*i];
                        if !replicas.contains(&hot) || replicas.contains(&cold) {
                            return false;
                        }
                        let before = racks_of(replicas).len();
                        let after: Vec<i32> = replicas.iter().map(|r| if *r == hot { cold } else { *r }).collect();
                        racks_of(&after).len() >= before
                    })
                    .min_by_key(|i| {
                        let p = &request.partitions[*i];
                        let spread = topic_count(hot, &p.topic) - topic_count(cold, &p.topic);
                        (-spread, (i128::from(p.size_bytes) - ideal).abs(), p.size_bytes, p.topic.clone(), p.partition)
                    });
                if let Some(i) = candidate {
                    for r in current[i].iter_mut() {
                        if *r == hot {
                            *r = cold;
                        }
                    }
                    moved = true;
                    break 'pairs;
                }
            }
        }
        if !moved {
            break;
        }
    }

    // 3. Even out preferred leaders by reordering: each topic's first, then the totals.
    let mut topics: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, p) in request.partitions.iter().enumerate() {
        topics.entry(p.topic.as_str()).or_default().push(i);
    }
    for members in topics.values() {
        even_leaders(&mut current, members, &eligible_ids, &request.partitions);
    }
    let all: Vec<usize> = (0..current.len()).collect();
    even_leaders(&mut current, &all, &eligible_ids, &request.partitions);

    Ok(request
        .partitions
        .iter()
        .zip(current)
        .filter(|(p, to)| p.replicas != *to)
        .map(|(p, to)| Move { topic: p.topic.clone(), partition: p.partition, from: p.replicas.clone(), to })
        .collect())
}

/// Swaps preferred leaders among the partitions `members` until no broker leads two more of
/// them than another it can hand leadership to, directly (it leads a partition the other
/// replicates) or along a chain of such hand-overs (each broker in between leads as many as
/// before). Of several partitions for one hand-over, one of the topic whose leadership is
/// most uneven between the two brokers.
fn even_leaders(current: &mut [Vec<i32>], members: &[usize], brokers: &[i32], partitions: &[PartitionLoad]) {
    let max_steps = members.len() * 2 + 16;
    for _ in 0..max_steps {
        let mut leaders: BTreeMap<i32, usize> = brokers.iter().map(|b| (*b, 0)).collect();
        for i in members {
            if let Some(n) = current[*i].first().and_then(|l| leaders.get_mut(l)) {
                *n += 1;
            }
        }
        let mut by_count: Vec<(usize, i32)> = leaders.iter().map(|(b, n)| (*n, *b)).collect();
        by_count.sort_unstable();
        let topic_leaders = |b: i32, t: &str| {
            members.iter().filter(|j| current[**j].first() == Some(&b) && partitions[**j].topic == t).count() as i64
        };
        // The partition through which `from` hands leadership to `to`, if any.
        let hand_over = |from: i32, to: i32| {
            members
                .iter()
                .copied()
                .filter(|i| current[*i].first() == Some(&from) && current[*i].contains(&to))
                .min_by_key(|i| {
                    let t = &partitions[*i].topic;
                    (topic_leaders(to, t) - topic_leaders(from, t), *i)
                })
        };
        let mut chain: Option<Vec<(usize, i32)>> = None;
        for &(hot_n, hot) in by_count.iter().rev() {
            // Breadth-first from `hot` to the nearest broker leading at most hot_n - 2.
            let mut came_from: BTreeMap<i32, (i32, usize)> = BTreeMap::new();
            let mut queue = std::collections::VecDeque::from([hot]);
            let mut found = None;
            while let Some(u) = queue.pop_front() {
                if u != hot && leaders.get(&u).copied().unwrap_or(0) + 2 <= hot_n {
                    found = Some(u);
                    break;
                }
                for &v in brokers {
                    if v == hot || v == u || came_from.contains_key(&v) {
                        continue;
                    }
                    if let Some(i) = hand_over(u, v) {
                        came_from.insert(v, (u, i));
                        queue.push_back(v);
                    }
                }
            }
            if let Some(mut at) = found {
                let mut steps = Vec::new();
                while at != hot {
                    let (prev, i) = came_from[&at];
                    steps.push((i, at));
                    at = prev;
                }
                chain = Some(steps);
                break;
            }
        }
        let Some(steps) = chain else { return };
        for (i, to) in steps {
            if let Some(at) = current[i].iter().position(|r| *r == to) {
                current[i].swap(0, at);
            }
        }
    }
}

fn replica_counts(assignment: &[Vec<i32>], brokers: &[i32]) -> BTreeMap<i32, usize> {
    let mut out: BTreeMap<i32, usize> = brokers.iter().map(|b| (*b, 0)).collect();
    for replicas in assignment {
        for r in replicas {
            if let Some(n) = out.get_mut(r) {
                *n += 1;
            }
        }
    }
    out
}

fn byte_counts(assignment: &[Vec<i32>], partitions: &[PartitionLoad]) -> BTreeMap<i32, u64> {
    let mut out: BTreeMap<i32, u64> = BTreeMap::new();
    for (replicas, p) in assignment.iter().zip(partitions) {
        for r in replicas {
            *out.entry(*r).or_default() += p.size_bytes;
        }
    }
    out
}

fn topic_counts(assignment: &[Vec<i32>], partitions: &[PartitionLoad]) -> BTreeMap<(String, i32), usize> {
    let mut out: BTreeMap<(String, i32), usize> = BTreeMap::new();
    for (replicas, p) in assignment.iter().zip(partitions) {
        for r in replicas {
            *out.entry((p.topic.clone(), *r)).or_default() += 1;
        }
    }
    out
}

#[cfg(test)]
fn leader_counts(assignment: &[Vec<i32>], brokers: &[i32]) -> BTreeMap<i32, usize> {
    let mut out: BTreeMap<i32, usize> = brokers.iter().map(|b| (*b, 0)).collect();
    for replicas in assignment {
        if let Some(n) = replicas.first().and_then(|l| out.get_mut(l)) {
            *n += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn brokers(n: i32) -> Vec<BalancerBroker> {
        (0..n).map(|id| BalancerBroker { id, rack: None }).collect()
    }

    fn partitions(assignment: &[&[i32]]) -> Vec<PartitionLoad> {
        assignment
            .iter()
            .enumerate()
            .map(|(i, r)| PartitionLoad {
                topic: "t".into(),
                partition: i32::try_from(i).unwrap_or(0),
                replicas: r.to_vec(),
                size_bytes: 100,
            })
            .collect()
    }

    fn apply(parts: &[PartitionLoad], moves: &[Move]) -> Vec<Vec<i32>> {
        parts
            .iter()
            .map(|p| {
                moves
                    .iter()
                    .find(|m| m.partition == p.partition && m.topic == p.topic)
                    .map_or(p.replicas.clone(), |m| m.to.clone())
            })
            .collect()
    }

    #[test]
    fn an_already_balanced_cluster_gets_an_empty_plan() {
        let cases: &[(&[&[i32]], i32)] = &[
            (&[&[0, 1, 2], &[1, 2, 0], &[2, 0, 1]], 3),
            (&[&[0], &[1], &[2], &[0], &[1], &[2]], 3),
            (&[&[0, 1], &[1, 2], &[2, 3], &[3, 0]], 4),
            (&[&[0, 1, 2], &[3, 4, 0], &[1, 2, 3], &[4, 0, 1], &[2, 3, 4]], 5),
        ];
        for (assignment, n) in cases {
            let request =
                BalanceRequest { brokers: brokers(*n), partitions: partitions(assignment), ..Default::default() };
            assert_eq!(plan(&request).expect("plan"), vec![], "{assignment:?}");
        }
    }

    #[test]
    fn new_brokers_receive_replicas_until_every_broker_is_within_one_of_the_mean() {
        let assignment: Vec<Vec<i32>> = (0..24).map(|i| vec![i % 3, (i + 1) % 3, (i + 2) % 3]).collect();
        let refs: Vec<&[i32]> = assignment.iter().map(Vec::as_slice).collect();
        let parts = partitions(&refs);
        let request = BalanceRequest { brokers: brokers(5), partitions: parts.clone(), ..Default::default() };
        let moves = plan(&request).expect("plan");
        let after = apply(&parts, &moves);
        let counts = replica_counts(&after, &[0, 1, 2, 3, 4]);
        let leaders = leader_counts(&after, &[0, 1, 2, 3, 4]);
        let (min, max) = (counts.values().min().copied(), counts.values().max().copied());
        assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1), "replicas {counts:?}");
        let (min, max) = (leaders.values().min().copied(), leaders.values().max().copied());
        assert!(max.zip(min).is_some_and(|(a, b)| a - b <= 1), "leaders {leaders:?}");
        // 72 replicas over 5 brokers: 14 or 15 each, so about 29 replicas move, not more.
        let moved: usize = moves.iter().map(|m| m.added().len()).sum();
        assert!(moved <= 30, "{moved} replicas moved");
    }

    #[test]
    fn new_brokers_get_a_share_of_every_topic_and_of_the_bytes() {
        // An empty internal topic (like __consumer_offsets) next to a topic holding the data:
        // the new brokers must not be given only the empty replicas.
        let mut parts = Vec::new();
        for i in 0..50 {
            let replicas = vec![i % 3, (i + 1) % 3, (i + 2) % 3];
            parts.push(PartitionLoad { topic: "__consumer_offsets".into(), partition: i, replicas, size_bytes: 0 });
        }
        for i in 0..24 {
            let replicas = vec![i % 3, (i + 1) % 3, (i + 2) % 3];
            parts.push(PartitionLoad { topic: "orders".into(), partition: i, replicas, size_bytes: 1 << 20 });
        }
        let request = BalanceRequest { brokers: brokers(5), partitions: parts.clone(), ..Default::default() };
        let after = apply(&parts, &plan(&request).expect("plan"));
        let bytes = byte_counts(&after, &parts);
        let per_topic = topic_counts(&after, &parts);
        let leads = |b: i32| after.iter().zip(&parts).filter(|(r, p)| p.topic == "orders" && r[0] == b).count();
        for b in 0..5 {
            assert!((4..=5).contains(&leads(b)), "broker {b} leads {} of the 24 orders partitions", leads(b));
            let orders = per_topic.get(&("orders".to_string(), b)).copied().unwrap_or(0);
            assert!((13..=16).contains(&orders), "broker {b} holds {orders} of the 72 orders replicas");
            let mib = bytes.get(&b).copied().unwrap_or(0) >> 20;
            assert!((13..=16).contains(&mib), "broker {b} holds {mib} MiB of 72");
        }
    }

    #[test]
    fn draining_moves_everything_off_and_refuses_when_too_few_brokers_would_remain() {
        let parts = partitions(&[&[0, 1], &[1, 2], &[2, 3], &[3, 0]]);
        let request = BalanceRequest {
            brokers: brokers(4),
            partitions: parts.clone(),
            drain: BTreeSet::from([3]),
            ..Default::default()
        };
        let after = apply(&parts, &plan(&request).expect("plan"));
        assert!(after.iter().all(|r| !r.contains(&3)), "{after:?}");
        let rf3 = partitions(&[&[0, 1, 2]]);
        let too_few =
            BalanceRequest { brokers: brokers(3), partitions: rf3, drain: BTreeSet::from([2]), ..Default::default() };
        assert!(matches!(plan(&too_few), Err(BalanceError::TooFewBrokers { .. })));
        let all = BalanceRequest {
            brokers: brokers(1),
            partitions: partitions(&[&[0]]),
            drain: BTreeSet::from([0]),
            ..Default::default()
        };
        assert_eq!(plan(&all), Err(BalanceError::NoBrokers));
        let unknown = BalanceRequest {
            brokers: brokers(2),
            partitions: vec![],
            drain: BTreeSet::from([7]),
            ..Default::default()
        };
        assert_eq!(plan(&unknown), Err(BalanceError::UnknownBroker(7)));
    }

    proptest! {
        #[test]
        fn plans_keep_replicas_distinct_racks_spread_and_counts_within_one(
            n_brokers in 2i32..8,
            racks in 1usize..4,
            partition_count in 1usize..40,
            rf_seed in 1usize..4,
            seed in any::<u64>(),
            drain_one in any::<bool>(),
        ) {
            let rf = rf_seed.min(usize::try_from(n_brokers).unwrap_or(1) - usize::from(drain_one)).max(1);
            let bs: Vec<BalancerBroker> = (0..n_brokers)
                .map(|id| BalancerBroker { id, rack: Some(format!("r{}", usize::try_from(id).unwrap_or(0) % racks)) })
                .collect();
            // A random (skewed) starting assignment on the first brokers.
            let mut state = seed;
            let mut next = || { state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); state >> 33 };
            let parts: Vec<PartitionLoad> = (0..partition_count)
                .map(|i| {
                    let mut replicas: Vec<i32> = Vec::new();
                    while replicas.len() < rf {
                        let b = i32::try_from(next() % u64::try_from(n_brokers).unwrap_or(1)).unwrap_or(0);
                        if !replicas.contains(&b) { replicas.push(b); }
                    }
                    PartitionLoad { topic: "p".into(), partition: i32::try_from(i).unwrap_or(0), replicas, size_bytes: next() % 1000 }
                })
                .collect();
            let drain: BTreeSet<i32> = if drain_one { BTreeSet::from([n_brokers - 1]) } else { BTreeSet::new() };
            let request = BalanceRequest { brokers: bs.clone(), partitions: parts.clone(), drain: drain.clone(), ..Default::default() };
            let moves = plan(&request).expect("a plan");
            let after = apply(&parts, &moves);
            let rack_of = |b: i32| bs[usize::try_from(b).unwrap_or(0)].rack.clone();
            for (before, now) in parts.iter().zip(&after) {
                let unique: BTreeSet<i32> = now.iter().copied().collect();
                prop_assert_eq!(unique.len(), now.len(), "distinct brokers {:?}", now);
                prop_assert_eq!(now.len(), before.replicas.len());
                prop_assert!(now.iter().all(|b| !drain.contains(b)), "drained {:?}", now);
                let racks_before: BTreeSet<_> = before.replicas.iter().map(|b| rack_of(*b)).collect();
                let racks_after: BTreeSet<_> = now.iter().map(|b| rack_of(*b)).collect();
                if drain.is_empty() {
                    prop_assert!(racks_after.len() >= racks_before.len(), "racks {:?} -> {:?}", before.replicas, now);
                }
            }
            let eligible: Vec<i32> = (0..n_brokers).filter(|b| !drain.contains(b)).collect();
            let counts = replica_counts(&after, &eligible);
            let (min, max) = (counts.values().min().copied().unwrap_or(0), counts.values().max().copied().unwrap_or(0));
            // Rack rules can block a move; without racks in the way counts end within one.
            if racks == 1 {
                prop_assert!(max - min <= 1, "counts {:?}", counts);
                let leaders = leader_counts(&after, &eligible);
                let (lmin, lmax) = (leaders.values().min().copied().unwrap_or(0), leaders.values().max().copied().unwrap_or(0));
                prop_assert!(lmax - lmin <= 1, "leaders {:?} of {:?}", leaders, after);
            }
            // Moves only where needed: applying the plan again changes nothing.
            let again: Vec<PartitionLoad> = parts.iter().zip(&after).map(|(p, r)| PartitionLoad { replicas: r.clone(), ..p.clone() }).collect();
            let request = BalanceRequest { brokers: bs, partitions: again, drain, ..Default::default() };
            let second = plan(&request).expect("replan");
            prop_assert!(second.iter().all(|m| m.added().is_empty()), "a balanced result moves no data: {:?}", second);
        }
    }
}
