//! Broker sessions as the active controller sees them: the deadline by which each broker
//! must heartbeat again. Leader-local, never in the log: a new controller starts every
//! registered broker with a fresh deadline (a grace period), so an election fences nobody.
//! Time is passed in, so the rules are tested without sleeping.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use uuid::Uuid;

use super::super::image::MetadataImage;

#[derive(Debug, Clone)]
struct Session {
    incarnation: Uuid,
    deadline: Instant,
    /// Whether this controller has heard from the process itself (not just granted grace).
    heard: bool,
}

/// The session of every registered broker.
#[derive(Debug)]
pub struct Sessions {
    timeout: Duration,
    by_broker: HashMap<i32, Session>,
}

impl Sessions {
    pub fn new(timeout: Duration) -> Sessions {
        Sessions { timeout, by_broker: HashMap::new() }
    }

    /// This node became the active controller: every registered broker gets a full timeout.
    pub fn activate(&mut self, image: &MetadataImage, now: Instant) {
        self.by_broker = image
            .brokers
            .values()
            .map(|b| (b.id, Session { incarnation: b.incarnation, deadline: now + self.timeout, heard: false }))
            .collect();
    }

    /// Whether a registration by `incarnation` would take the id from another process that
    /// this controller has heard from within its session.
    pub fn held_by_other(&self, id: i32, incarnation: Uuid, now: Instant) -> Option<Duration> {
        let s = self.by_broker.get(&id)?;
        (s.heard && s.incarnation != incarnation && s.deadline > now).then(|| s.deadline - now)
    }

    /// A registration or heartbeat from `incarnation` of broker `id`.
    pub fn touch(&mut self, id: i32, incarnation: Uuid, now: Instant) {
        self.by_broker.insert(id, Session { incarnation, deadline: now + self.timeout, heard: true });
    }

    /// The incarnation whose session broker `id` has, if any.
    pub fn incarnation(&self, id: i32) -> Option<Uuid> {
        self.by_broker.get(&id).map(|s| s.incarnation)
    }

    /// Ends a session (a broker shutting down).
    pub fn end(&mut self, id: i32) {
        self.by_broker.remove(&id);
    }

    /// Unfenced brokers whose session ran out, with their epochs. A broker without a session
    /// (registered through another controller just now) is given one.
    pub fn expired(&mut self, image: &MetadataImage, now: Instant) -> Vec<(i32, u64)> {
        let mut out = Vec::new();
        for b in image.live_brokers() {
            let timeout = self.timeout;
            let s = self.by_broker.entry(b.id).or_insert_with(|| Session {
                incarnation: b.incarnation,
                deadline: now + timeout,
                heard: false,
            });
            if s.deadline <= now {
                out.push((b.id, b.epoch));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metadata::command::Endpoint;
    use crate::metadata::image::BrokerRegistration;

    fn image_with(ids: &[(i32, bool)]) -> MetadataImage {
        let mut image = MetadataImage::default();
        for &(id, fenced) in ids {
            image.brokers.insert(
                id,
                BrokerRegistration {
                    id,
                    incarnation: Uuid::from_u128(u128::try_from(id).unwrap_or(0)),
                    epoch: 5,
                    kafka: Endpoint { host: "h".into(), port: 1 },
                    internal_addr: "h:2".into(),
                    rack: None,
                    fenced,
                },
            );
        }
        image
    }

    #[test]
    fn a_broker_silent_past_its_session_timeout_expires_and_one_that_heartbeats_does_not() {
        let t0 = Instant::now();
        let image = image_with(&[(0, false), (1, false), (2, true)]);
        let mut s = Sessions::new(Duration::from_secs(9));
        s.activate(&image, t0);
        assert!(s.expired(&image, t0 + Duration::from_secs(8)).is_empty(), "grace after activation");
        s.touch(1, Uuid::from_u128(1), t0 + Duration::from_secs(5));
        assert_eq!(s.expired(&image, t0 + Duration::from_secs(10)), vec![(0, 5)], "fenced broker 2 is not expired");
    }

    #[test]
    fn another_process_may_take_an_id_only_once_the_live_one_is_silent() {
        let t0 = Instant::now();
        let image = image_with(&[(3, false)]);
        let mut s = Sessions::new(Duration::from_secs(2));
        s.activate(&image, t0);
        let newcomer = Uuid::from_u128(99);
        assert_eq!(s.held_by_other(3, newcomer, t0), None, "granted grace is not proof the old process lives");
        s.touch(3, Uuid::from_u128(3), t0);
        assert!(s.held_by_other(3, newcomer, t0 + Duration::from_secs(1)).is_some());
        assert_eq!(s.held_by_other(3, Uuid::from_u128(3), t0), None, "the same process may re-register");
        assert_eq!(s.held_by_other(3, newcomer, t0 + Duration::from_secs(3)), None);
    }
}
