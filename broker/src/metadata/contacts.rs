//! When the raft leader last heard from each quorum member, and when each was last caught
//! up: the `LastFetchTimestamp` and `LastCaughtUpTimestamp` of KRaft's DescribeQuorum.
//!
//! KRaft's followers fetch from their leader; openraft's leader pushes AppendEntries to its
//! followers and learners instead. So a member's last "fetch" here is the last time it
//! answered one of the leader's AppendEntries, heartbeats included (recorded by
//! [`network`](super::network) as the reply arrives). Whether a member is caught up is decided
//! on each look at raft's metrics (the controller loop looks on every change and at least every
//! 100 ms) by Kafka's rule for a fetch (`partition::followers`): a member whose log reaches the
//! leader's log end now is caught up now; one that reaches where the leader's log ended at the
//! previous look was caught up then (entries keep coming under load, so the end of the moment
//! is rarely reached). Times are wall-clock milliseconds, as in Kafka; everything belongs to
//! one leader term, and a new term starts with nothing known (-1, which Kafka's tools show as
//! unknown).

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

/// Shared by the raft network (replies) and the controller (looks, DescribeQuorum).
#[derive(Debug, Clone, Default)]
pub struct Contacts {
    inner: Arc<Mutex<Timeline>>,
}

/// What one leader term has seen, by raft node id.
#[derive(Debug, Default)]
struct Timeline {
    term: u64,
    /// The leader's last log index at the previous look, and when that look was; None before
    /// the first look of the term.
    previous: Option<(Option<u64>, i64)>,
    /// member → (the term of the AppendEntries it answered, when the reply arrived).
    replied_ms: HashMap<u64, (u64, i64)>,
    caught_up_ms: HashMap<u64, i64>,
}

impl Timeline {
    fn enter(&mut self, term: u64) {
        if term != self.term {
            self.term = term;
            self.previous = None;
            self.caught_up_ms.clear();
        }
    }
}

impl Contacts {
    /// `member` answered an AppendEntries of leader term `term` at `now_ms`.
    pub fn replied(&self, member: u64, term: u64, now_ms: i64) {
        self.inner.lock().replied_ms.insert(member, (term, now_ms));
    }

    /// One look at the leader's replication in `term`: its last log index and, per member,
    /// the last index the leader knows the member has (None: nothing matched yet).
    pub fn observe(
        &self,
        term: u64,
        now_ms: i64,
        leader_last: Option<u64>,
        matched: impl IntoIterator<Item = (u64, Option<u64>)>,
    ) {
        let mut t = self.inner.lock();
        t.enter(term);
        let previous = t.previous;
        for (member, has) in matched {
            // Option's order: None (an empty log) is below every index.
            let at = if has >= leader_last {
                Some(now_ms)
            } else {
                previous.filter(|(end, _)| has >= *end).map(|(_, when)| when)
            };
            if let Some(at) = at {
                let last = t.caught_up_ms.entry(member).or_insert(at);
                *last = (*last).max(at);
            }
        }
        t.previous = Some((leader_last, now_ms));
    }

    /// (last reply, last caught up) of `member` in `term`, -1 where not known.
    pub fn of(&self, term: u64, member: u64) -> (i64, i64) {
        let t = self.inner.lock();
        let replied = t.replied_ms.get(&member).filter(|(at_term, _)| *at_term == term).map_or(-1, |(_, ms)| *ms);
        let caught_up = if t.term == term { t.caught_up_ms.get(&member).copied().unwrap_or(-1) } else { -1 };
        (replied, caught_up)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_known_before_a_reply_or_a_look() {
        let c = Contacts::default();
        assert_eq!(c.of(1, 2), (-1, -1));
    }

    #[test]
    fn a_reply_counts_only_in_its_own_term() {
        let c = Contacts::default();
        c.replied(2, 5, 1_000);
        assert_eq!(c.of(5, 2).0, 1_000);
        assert_eq!(c.of(6, 2).0, -1);
        c.replied(2, 6, 1_100);
        assert_eq!(c.of(6, 2).0, 1_100);
    }

    #[test]
    fn a_member_at_the_leaders_end_is_caught_up_now() {
        let c = Contacts::default();
        c.observe(3, 1_000, Some(10), [(1, Some(10)), (2, Some(7)), (4, None)]);
        assert_eq!(c.of(3, 1).1, 1_000);
        assert_eq!(c.of(3, 2).1, -1);
        assert_eq!(c.of(3, 4).1, -1);
    }

    #[test]
    fn reaching_the_previous_end_means_caught_up_at_the_previous_look() {
        let c = Contacts::default();
        c.observe(3, 1_000, Some(10), [(2, Some(7))]);
        // The leader moved on to 15; the member reached 12, past the 10 of the look before.
        c.observe(3, 1_100, Some(15), [(2, Some(12))]);
        assert_eq!(c.of(3, 2).1, 1_000);
        // Still short of the previous end (15): stays where it was.
        c.observe(3, 1_200, Some(20), [(2, Some(14))]);
        assert_eq!(c.of(3, 2).1, 1_000);
        c.observe(3, 1_300, Some(20), [(2, Some(20))]);
        assert_eq!(c.of(3, 2).1, 1_300);
    }

    #[test]
    fn an_empty_log_has_nothing_to_catch_up_with() {
        let c = Contacts::default();
        c.observe(1, 500, None, [(2, None)]);
        assert_eq!(c.of(1, 2).1, 500);
    }

    #[test]
    fn a_new_term_forgets_who_was_caught_up() {
        let c = Contacts::default();
        c.observe(3, 1_000, Some(10), [(2, Some(10))]);
        c.observe(4, 2_000, Some(12), [(2, Some(10))]);
        assert_eq!(c.of(4, 2).1, -1);
        assert_eq!(c.of(3, 2).1, -1, "the old term's view is gone");
    }
}
