//! Offset commits appended to `__consumer_offsets` and not yet replicated, counted per group,
//! so OffsetFetch can wait for them: a fetch that arrives after a commit was appended answers
//! with it (once it is safe to show) or without it (once it failed), never with the value
//! before it while it is still on its way. Without this, a consumer that takes over partitions
//! right after their previous owner committed could read the older offset, resume from it,
//! and commit below what was already committed.
//!
//! Each commit holds a [`Ticket`]; dropping it (completed, failed, or its request abandoned)
//! ends the wait.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

#[derive(Debug, Default)]
pub struct InFlight {
    counts: Mutex<HashMap<String, usize>>,
    settled: Notify,
}

/// One commit in flight for a group, until dropped.
#[derive(Debug)]
pub struct Ticket {
    in_flight: Arc<InFlight>,
    group: String,
}

impl InFlight {
    pub fn begin(self: &Arc<Self>, group: &str) -> Ticket {
        *self.counts.lock().entry(group.to_string()).or_default() += 1;
        Ticket { in_flight: Arc::clone(self), group: group.to_string() }
    }

    fn pending(&self, group: &str) -> bool {
        self.counts.lock().get(group).is_some_and(|n| *n > 0)
    }

    /// Waits until `group` has no commit in flight, or `timeout` passed.
    pub async fn settled(&self, group: &str, timeout: Duration) {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.settled.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if !self.pending(group) {
                return;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return;
            }
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut counts = self.in_flight.counts.lock();
        if let Some(n) = counts.get_mut(&self.group) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.remove(&self.group);
            }
        }
        drop(counts);
        self.in_flight.settled.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_fetch_waits_for_the_commits_in_flight_of_its_group_only() {
        let in_flight = Arc::new(InFlight::default());
        let ticket = in_flight.begin("g");
        let other = in_flight.begin("h");
        let waiter = {
            let in_flight = Arc::clone(&in_flight);
            tokio::spawn(async move { in_flight.settled("g", Duration::from_secs(30)).await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "a commit of g is in flight");
        drop(ticket);
        tokio::time::timeout(Duration::from_secs(5), waiter).await.expect("settled").expect("task");
        // h's commit does not hold up g, and an abandoned wait ends at its timeout.
        in_flight.settled("g", Duration::from_secs(30)).await;
        in_flight.settled("h", Duration::from_millis(20)).await;
        drop(other);
    }
}
