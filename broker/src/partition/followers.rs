//! What a partition leader knows of its followers, and the pure rules built on it: the high
//! watermark (the smallest log end offset in the ISR), which ISR members have fallen behind
//! for longer than `replica.lag.time.max.ms`, and which followers have caught up enough to
//! rejoin. Kafka's rules (`Replica.updateFetchState`, `Partition.maybeShrinkIsr` /
//! `maybeExpandIsr`), with time passed in.

use std::collections::HashMap;

/// One follower as its fetches describe it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerState {
    /// The follower has every record below this offset; -1 until it fetched in this epoch.
    pub log_end_offset: i64,
    /// The last time the follower was caught up with the leader's log end offset.
    pub last_caught_up_ms: i64,
    last_fetch_ms: i64,
    last_fetch_leader_log_end: i64,
}

impl FollowerState {
    /// A follower of a leader that just took over: not heard from yet, but given a full lag
    /// window before it can be removed from the ISR.
    pub fn new(now_ms: i64) -> FollowerState {
        FollowerState {
            log_end_offset: -1,
            last_caught_up_ms: now_ms,
            last_fetch_ms: now_ms,
            last_fetch_leader_log_end: -1,
        }
    }

    /// A fetch at `fetch_offset` arrived when the leader's log ended at `leader_log_end`.
    pub fn on_fetch(&mut self, fetch_offset: i64, leader_log_end: i64, now_ms: i64) {
        if fetch_offset >= leader_log_end {
            self.last_caught_up_ms = self.last_caught_up_ms.max(now_ms);
        } else if self.last_fetch_leader_log_end >= 0 && fetch_offset >= self.last_fetch_leader_log_end {
            self.last_caught_up_ms = self.last_caught_up_ms.max(self.last_fetch_ms);
        }
        self.log_end_offset = fetch_offset;
        self.last_fetch_leader_log_end = leader_log_end;
        self.last_fetch_ms = now_ms;
    }
}

/// The high watermark the ISR allows: the smallest log end offset among the leader (`me`)
/// and the other in-sync replicas; never below `current`.
pub fn high_watermark(
    me: i32,
    leader_log_end: i64,
    isr: &[i32],
    followers: &HashMap<i32, FollowerState>,
    current: i64,
) -> i64 {
    let mut hw = leader_log_end;
    for r in isr.iter().filter(|r| **r != me) {
        let leo = followers.get(r).map_or(-1, |f| f.log_end_offset);
        hw = hw.min(leo);
    }
    hw.max(current)
}

/// ISR members that have not caught up for longer than `max_lag_ms`.
pub fn lagging(
    me: i32,
    isr: &[i32],
    followers: &HashMap<i32, FollowerState>,
    now_ms: i64,
    max_lag_ms: i64,
) -> Vec<i32> {
    isr.iter()
        .copied()
        .filter(|r| *r != me)
        .filter(|r| followers.get(r).is_none_or(|f| now_ms - f.last_caught_up_ms > max_lag_ms))
        .collect()
}

/// What decides which replicas may rejoin the ISR.
#[derive(Debug, Clone, Copy)]
pub struct Rejoin<'a> {
    pub replicas: &'a [i32],
    pub isr: &'a [i32],
    /// Replicas the metadata shows fenced (KIP-841): never proposed, whatever they fetched.
    pub ineligible: &'a [i32],
    pub high_watermark: i64,
    pub epoch_start_offset: i64,
    pub now_ms: i64,
    /// A follower must have fetched within this window (`replica.lag.time.max.ms`): one that
    /// stopped fetching does not rejoin on the strength of an old fetch.
    pub max_lag_ms: i64,
}

/// Replicas outside the ISR that may rejoin: eligible, fetching, and holding everything below
/// the high watermark and below the start of the current leader epoch.
pub fn caught_up(rule: &Rejoin<'_>, followers: &HashMap<i32, FollowerState>) -> Vec<i32> {
    rule.replicas
        .iter()
        .copied()
        .filter(|r| !rule.isr.contains(r) && !rule.ineligible.contains(r))
        .filter(|r| {
            followers.get(r).is_some_and(|f| {
                f.log_end_offset >= rule.high_watermark
                    && f.log_end_offset >= rule.epoch_start_offset
                    && rule.now_ms - f.last_fetch_ms <= rule.max_lag_ms
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_high_watermark_is_the_smallest_log_end_in_the_isr_and_never_goes_back() {
        let mut followers = HashMap::new();
        let mut f1 = FollowerState::new(0);
        f1.on_fetch(70, 100, 1);
        followers.insert(1, f1);
        followers.insert(2, FollowerState::new(0));
        assert_eq!(high_watermark(0, 100, &[0, 1], &followers, 10), 70);
        assert_eq!(high_watermark(0, 100, &[0, 1, 2], &followers, 10), 10, "2 has not fetched: no progress");
        assert_eq!(high_watermark(0, 100, &[0, 1], &followers, 80), 80, "never backwards");
        assert_eq!(high_watermark(0, 100, &[0], &followers, 10), 100, "a leader alone in the ISR");
    }

    #[test]
    fn a_follower_that_stops_catching_up_lags_after_the_window_and_one_that_catches_up_rejoins() {
        let mut f = FollowerState::new(0);
        f.on_fetch(100, 100, 1_000);
        let mut followers = HashMap::from([(1, f)]);
        assert!(lagging(0, &[0, 1], &followers, 20_000, 30_000).is_empty());
        // Fetching, but always behind the leader's end as of its previous fetch.
        followers.get_mut(&1).expect("f").on_fetch(100, 500, 5_000);
        followers.get_mut(&1).expect("f").on_fetch(200, 900, 10_000);
        assert!(lagging(0, &[0, 1], &followers, 31_500, 30_000).contains(&1));
        let rule = Rejoin {
            replicas: &[0, 1],
            isr: &[0],
            ineligible: &[],
            high_watermark: 300,
            epoch_start_offset: 0,
            now_ms: 40_000,
            max_lag_ms: 30_000,
        };
        assert!(caught_up(&rule, &followers).is_empty());
        followers.get_mut(&1).expect("f").on_fetch(900, 900, 40_000);
        assert_eq!(caught_up(&rule, &followers), vec![1]);
        assert!(
            caught_up(&Rejoin { epoch_start_offset: 1000, ..rule }, &followers).is_empty(),
            "not yet into the current epoch"
        );
        assert!(
            caught_up(&Rejoin { ineligible: &[1], ..rule }, &followers).is_empty(),
            "a fenced broker never rejoins"
        );
        assert!(
            caught_up(&Rejoin { now_ms: 71_000, ..rule }, &followers).is_empty(),
            "a follower that stopped fetching does not rejoin on an old fetch"
        );
    }
}
