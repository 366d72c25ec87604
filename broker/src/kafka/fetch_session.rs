//! Fetch sessions (KIP-227): a consumer that fetches the same partitions over and over sends
//! them once, in a full fetch that opens a session, and afterwards only what changed (new
//! fetch offsets, partitions added or forgotten) in incremental fetches; the broker answers an
//! incremental fetch with only the partitions that have news (records, a moved high watermark
//! or log start offset, an error). The Java client uses sessions by default; librdkafka and
//! kafka-python send full fetches (session epoch -1) and never get one.
//!
//! This module is the bookkeeping only, without I/O: [`FetchSessionCache::begin`] turns a
//! request into the partitions to read, [`FetchSessionCache::finish`] decides which of them
//! the response carries and remembers what the client was told. Bounded: at most
//! `max_sessions` sessions and `max_partitions` cached partitions in all; a full fetch that
//! does not fit gets no session (session id 0: the client keeps sending full fetches), after
//! evicting the least recently used session idle for at least [`EVICTABLE_AFTER`].

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kafka_protocol::error::ResponseError;
use kafka_protocol::messages::TopicName;
use parking_lot::Mutex;
use uuid::Uuid;

/// The session epoch of a full fetch that wants no session (and closes the one named).
pub const FINAL_EPOCH: i32 = -1;
/// The session epoch of a full fetch that opens a session.
pub const INITIAL_EPOCH: i32 = 0;
/// A session unused this long may be evicted to make room for a new one (Kafka: 2 minutes).
pub const EVICTABLE_AFTER: Duration = Duration::from_secs(120);

/// One partition of a fetch, as the client names it (by topic name before v13, by id after).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PartitionKey {
    pub topic: TopicName,
    pub topic_id: Uuid,
    pub partition: i32,
}

/// What the client asks of one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionRequest {
    pub key: PartitionKey,
    pub fetch_offset: i64,
    pub partition_max_bytes: i32,
}

/// What a fetch reads: every partition of the request, or of its session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchPlan {
    /// The session id the response carries (0: none).
    pub session_id: i32,
    /// Whether the response carries only partitions with news.
    pub incremental: bool,
    pub partitions: Vec<PartitionRequest>,
}

/// What a read found in one partition, for deciding whether the response carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartitionOutcome {
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub has_records: bool,
    pub error: bool,
}

#[derive(Debug, Clone)]
struct Cached {
    request: PartitionRequest,
    /// What the client was last told (None until the first response).
    told: Option<(i64, i64)>,
}

#[derive(Debug)]
struct Session {
    /// The epoch the next incremental fetch must carry.
    next_epoch: i32,
    uses_topic_ids: bool,
    /// In the order they are read: partitions that returned records move to the end, so a
    /// response's byte limit does not always favour the same ones.
    partitions: Vec<Cached>,
    last_used: Instant,
}

#[derive(Debug, Default)]
struct Sessions {
    by_id: HashMap<i32, Session>,
    cached_partitions: usize,
    last_id: i32,
}

/// Every fetch session of this broker.
#[derive(Debug)]
pub struct FetchSessionCache {
    max_sessions: usize,
    max_partitions: usize,
    sessions: Mutex<Sessions>,
}

fn next_epoch(epoch: i32) -> i32 {
    if epoch == i32::MAX {
        1
    } else {
        epoch + 1
    }
}

impl FetchSessionCache {
    pub fn new(max_sessions: usize, max_partitions: usize) -> FetchSessionCache {
        let sessions =
            Sessions { last_id: i32::try_from(std::process::id() % 1_000_000).unwrap_or(0), ..Default::default() };
        FetchSessionCache { max_sessions, max_partitions, sessions: Mutex::new(sessions) }
    }

    /// How many sessions are open.
    pub fn len(&self) -> usize {
        self.sessions.lock().by_id.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decides what a fetch reads; an error is a Kafka error code for the whole response.
    pub fn begin(
        &self,
        session_id: i32,
        epoch: i32,
        uses_topic_ids: bool,
        requested: Vec<PartitionRequest>,
        forgotten: Vec<PartitionKey>,
        now: Instant,
    ) -> Result<FetchPlan, i16> {
        let mut s = self.sessions.lock();
        if epoch == FINAL_EPOCH || epoch == INITIAL_EPOCH {
            if session_id != 0 {
                s.remove(session_id);
            }
            let mut plan = FetchPlan { session_id: 0, incremental: false, partitions: requested };
            if epoch == INITIAL_EPOCH
                && !plan.partitions.is_empty()
                && self.make_room(&mut s, plan.partitions.len(), now)
            {
                let id = s.new_id();
                let partitions = plan.partitions.iter().map(|r| Cached { request: r.clone(), told: None }).collect();
                s.cached_partitions += plan.partitions.len();
                s.by_id.insert(id, Session { next_epoch: 1, uses_topic_ids, partitions, last_used: now });
                plan.session_id = id;
            }
            return Ok(plan);
        }
        if epoch < 0 {
            return Err(ResponseError::InvalidFetchSessionEpoch.code());
        }
        let Some(session) = s.by_id.get_mut(&session_id) else {
            return Err(ResponseError::FetchSessionIdNotFound.code());
        };
        if session.next_epoch != epoch {
            return Err(ResponseError::InvalidFetchSessionEpoch.code());
        }
        if session.uses_topic_ids != uses_topic_ids {
            return Err(ResponseError::FetchSessionTopicIdError.code());
        }
        let before = session.partitions.len();
        session.partitions.retain(|c| !forgotten.contains(&c.request.key));
        for r in requested {
            match session.partitions.iter_mut().find(|c| c.request.key == r.key) {
                Some(c) => c.request = r,
                None => session.partitions.push(Cached { request: r, told: None }),
            }
        }
        let after = session.partitions.len();
        session.next_epoch = next_epoch(epoch);
        session.last_used = now;
        let partitions = session.partitions.iter().map(|c| c.request.clone()).collect();
        s.cached_partitions = (s.cached_partitions + after).saturating_sub(before);
        if s.cached_partitions > self.max_partitions {
            // Grown past the cache: the client starts over with a full fetch.
            s.remove(session_id);
            return Err(ResponseError::FetchSessionIdNotFound.code());
        }
        Ok(FetchPlan { session_id, incremental: true, partitions })
    }

    /// Which partitions of `plan` the response carries, given what the read found
    /// (`outcomes[i]` for `plan.partitions[i]`); remembers what the client is told.
    pub fn finish(&self, plan: &FetchPlan, outcomes: &[PartitionOutcome]) -> Vec<bool> {
        let mut s = self.sessions.lock();
        let session = (plan.session_id != 0).then(|| s.by_id.get_mut(&plan.session_id)).flatten();
        let Some(session) = session else {
            return vec![true; outcomes.len()];
        };
        let mut include = Vec::with_capacity(outcomes.len());
        let mut returned = vec![false; session.partitions.len()];
        for (i, (request, outcome)) in plan.partitions.iter().zip(outcomes).enumerate() {
            // The plan lists the session's partitions in its order, so index i is the one
            // unless another request changed the session in between.
            let at = match session.partitions.get(i) {
                Some(c) if c.request.key == request.key => Some(i),
                _ => session.partitions.iter().position(|c| c.request.key == request.key),
            };
            let Some(at) = at else {
                include.push(!plan.incremental);
                continue;
            };
            let cached = &mut session.partitions[at];
            let now = (outcome.high_watermark, outcome.log_start_offset);
            let news = outcome.has_records || outcome.error || cached.told != Some(now);
            if !outcome.error {
                cached.told = Some(now);
            }
            returned[at] |= outcome.has_records;
            include.push(!plan.incremental || news);
        }
        // Partitions that returned records go last, in their order (one stable pass).
        if returned.iter().any(|r| *r) {
            let (mut last, mut first) = (Vec::new(), Vec::with_capacity(session.partitions.len()));
            for (c, r) in std::mem::take(&mut session.partitions).into_iter().zip(returned) {
                if r {
                    last.push(c);
                } else {
                    first.push(c);
                }
            }
            first.extend(last);
            session.partitions = first;
        }
        include
    }

    /// Room for a session of `partitions`, evicting idle sessions if needed.
    fn make_room(&self, s: &mut Sessions, partitions: usize, now: Instant) -> bool {
        if partitions > self.max_partitions {
            return false;
        }
        while s.by_id.len() >= self.max_sessions || s.cached_partitions + partitions > self.max_partitions {
            let idle = s
                .by_id
                .iter()
                .filter(|(_, session)| now.saturating_duration_since(session.last_used) >= EVICTABLE_AFTER)
                .min_by_key(|(_, session)| session.last_used)
                .map(|(id, _)| *id);
            match idle {
                Some(id) => s.remove(id),
                None => return false,
            }
        }
        true
    }
}

impl Sessions {
    fn remove(&mut self, id: i32) {
        if let Some(session) = self.by_id.remove(&id) {
            self.cached_partitions = self.cached_partitions.saturating_sub(session.partitions.len());
        }
    }

    /// A positive id no open session has.
    fn new_id(&mut self) -> i32 {
        loop {
            self.last_id = if self.last_id == i32::MAX { 1 } else { self.last_id + 1 };
            if !self.by_id.contains_key(&self.last_id) {
                return self.last_id;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::StrBytes;

    fn key(p: i32) -> PartitionKey {
        PartitionKey { topic: TopicName(StrBytes::from_static_str("t")), topic_id: Uuid::nil(), partition: p }
    }

    fn req(p: i32, offset: i64) -> PartitionRequest {
        PartitionRequest { key: key(p), fetch_offset: offset, partition_max_bytes: 1 << 20 }
    }

    fn quiet(hw: i64) -> PartitionOutcome {
        PartitionOutcome { high_watermark: hw, log_start_offset: 0, has_records: false, error: false }
    }

    fn data(hw: i64) -> PartitionOutcome {
        PartitionOutcome { has_records: true, ..quiet(hw) }
    }

    #[test]
    fn a_session_answers_only_partitions_with_news() {
        let cache = FetchSessionCache::new(10, 100);
        let now = Instant::now();
        let full =
            cache.begin(0, INITIAL_EPOCH, false, vec![req(0, 0), req(1, 0), req(2, 0)], vec![], now).expect("begin");
        assert!(full.session_id > 0 && !full.incremental);
        assert_eq!(cache.finish(&full, &[data(5), quiet(0), quiet(0)]), vec![true, true, true]);

        // Partition 0 moved on; nothing else changed: only a record-bearing partition is sent.
        let inc = cache.begin(full.session_id, 1, false, vec![req(0, 5)], vec![], now).expect("begin");
        assert!(inc.incremental);
        assert_eq!(
            inc.partitions.iter().map(|p| (p.key.partition, p.fetch_offset)).collect::<Vec<_>>(),
            vec![(1, 0), (2, 0), (0, 5)]
        );
        assert_eq!(cache.finish(&inc, &[quiet(0), data(9), quiet(5)]), vec![false, true, false]);

        // A moved high watermark alone is news too; a forgotten partition is no longer read.
        let inc = cache.begin(full.session_id, 2, false, vec![], vec![key(1)], now).expect("begin");
        // (partition 2 returned records last time, so it is read last now)
        assert_eq!(inc.partitions.iter().map(|p| p.key.partition).collect::<Vec<_>>(), vec![0, 2]);
        assert_eq!(cache.finish(&inc, &[quiet(5), quiet(12)]), vec![false, true]);
    }

    #[test]
    fn wrong_ids_and_epochs_are_refused() {
        let cache = FetchSessionCache::new(10, 100);
        let now = Instant::now();
        let full = cache.begin(0, INITIAL_EPOCH, false, vec![req(0, 0)], vec![], now).expect("begin");
        let not_found = ResponseError::FetchSessionIdNotFound.code();
        let bad_epoch = ResponseError::InvalidFetchSessionEpoch.code();
        assert_eq!(cache.begin(full.session_id + 1, 1, false, vec![], vec![], now), Err(not_found));
        assert_eq!(cache.begin(full.session_id, 2, false, vec![], vec![], now), Err(bad_epoch));
        assert_eq!(cache.begin(full.session_id, -2, false, vec![], vec![], now), Err(bad_epoch));
        assert_eq!(
            cache.begin(full.session_id, 1, true, vec![], vec![], now),
            Err(ResponseError::FetchSessionTopicIdError.code())
        );
        assert!(cache.begin(full.session_id, 1, false, vec![], vec![], now).is_ok());
        // A final fetch closes the session.
        let last = cache.begin(full.session_id, FINAL_EPOCH, false, vec![req(0, 1)], vec![], now).expect("begin");
        assert_eq!(last.session_id, 0);
        assert!(cache.is_empty());
        assert_eq!(cache.begin(full.session_id, 2, false, vec![], vec![], now), Err(not_found));
    }

    #[test]
    fn the_cache_is_bounded_and_evicts_only_idle_sessions() {
        let cache = FetchSessionCache::new(2, 5);
        let t0 = Instant::now();
        let a = cache.begin(0, INITIAL_EPOCH, false, vec![req(0, 0)], vec![], t0).expect("begin");
        let b = cache.begin(0, INITIAL_EPOCH, false, vec![req(0, 0)], vec![], t0).expect("begin");
        assert!(a.session_id > 0 && b.session_id > 0 && a.session_id != b.session_id);
        // Full: no session for a third client while the others are in use.
        let c = cache.begin(0, INITIAL_EPOCH, false, vec![req(0, 0)], vec![], t0).expect("begin");
        assert_eq!(c.session_id, 0);
        // Too many partitions for the cache: never a session.
        let wide: Vec<_> = (0..6).map(|p| req(p, 0)).collect();
        assert_eq!(cache.begin(0, INITIAL_EPOCH, false, wide, vec![], t0).expect("begin").session_id, 0);
        // Later, b stays busy and a is idle: a is evicted for the newcomer.
        let later = t0 + EVICTABLE_AFTER;
        assert!(cache.begin(b.session_id, 1, false, vec![], vec![], later).is_ok());
        let d = cache
            .begin(0, INITIAL_EPOCH, false, vec![req(0, 0)], vec![], later + Duration::from_secs(1))
            .expect("begin");
        assert!(d.session_id > 0);
        assert!(cache.begin(a.session_id, 1, false, vec![], vec![], later).is_err());
        // Growing a session past the partition bound ends it.
        let grow: Vec<_> = (1..6).map(|p| req(p, 0)).collect();
        assert_eq!(
            cache.begin(d.session_id, 1, false, grow, vec![], later),
            Err(ResponseError::FetchSessionIdNotFound.code())
        );
    }
}
