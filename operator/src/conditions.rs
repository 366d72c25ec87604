//! kstatus conditions (`Ready`, `Reconciling`, `Stalled`), the contract Argo CD, Flux and
//! `kubectl wait --for=condition=Ready` read health from: `Ready` says whether the resource is
//! what its spec asks for, `Reconciling` that the operator is working towards it, `Stalled`
//! that it cannot get there without a change. Each carries the spec generation it describes.
//! A condition's `lastTransitionTime` moves only when its status does.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;

pub const READY: &str = "Ready";
pub const RECONCILING: &str = "Reconciling";
pub const STALLED: &str = "Stalled";

/// The health of a resource, from which its three conditions follow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Health {
    /// As the spec asks.
    Ready { reason: String, message: String },
    /// Not yet; the operator is working on it.
    Reconciling { reason: String, message: String },
    /// Not, and not without a change of spec or cluster.
    Stalled { reason: String, message: String },
}

impl Health {
    pub fn reason(&self) -> &str {
        match self {
            Health::Ready { reason, .. } | Health::Reconciling { reason, .. } | Health::Stalled { reason, .. } => {
                reason
            }
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Health::Ready { message, .. } | Health::Reconciling { message, .. } | Health::Stalled { message, .. } => {
                message
            }
        }
    }
}

/// The three conditions for `health` at `generation`, keeping the transition times of
/// `previous` conditions whose status did not change.
pub fn conditions(health: &Health, generation: Option<i64>, previous: &[Condition], now: Timestamp) -> Vec<Condition> {
    let (ready, reconciling, stalled) = match health {
        Health::Ready { .. } => ("True", "False", "False"),
        Health::Reconciling { .. } => ("False", "True", "False"),
        Health::Stalled { .. } => ("False", "False", "True"),
    };
    let make = |type_: &str, status: &str| {
        let (reason, message) = if status == "True" || type_ == READY {
            (health.reason().to_string(), health.message().to_string())
        } else {
            (format!("Not{type_}"), String::new())
        };
        let last = previous
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .map_or(Time(now), |c| c.last_transition_time.clone());
        Condition {
            type_: type_.to_string(),
            status: status.to_string(),
            reason,
            message,
            observed_generation: generation,
            last_transition_time: last,
        }
    };
    vec![make(READY, ready), make(RECONCILING, reconciling), make(STALLED, stalled)]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transition_times_move_only_when_a_status_changes() {
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().expect("time");
        let t1: Timestamp = "2026-01-01T00:05:00Z".parse().expect("time");
        let working = Health::Reconciling { reason: "ScalingUp".into(), message: "a".into() };
        let first = conditions(&working, Some(1), &[], t0);
        assert_eq!(first.iter().map(|c| c.status.as_str()).collect::<Vec<_>>(), ["False", "True", "False"]);
        assert_eq!(first[0].reason, "ScalingUp", "Ready=False says why");
        let again =
            conditions(&Health::Reconciling { reason: "ScalingUp".into(), message: "b".into() }, Some(2), &first, t1);
        assert!(again.iter().all(|c| c.last_transition_time.0 == t0));
        assert!(again.iter().all(|c| c.observed_generation == Some(2)));
        let ready =
            conditions(&Health::Ready { reason: "Ready".into(), message: "3 brokers".into() }, Some(2), &again, t1);
        assert_eq!(ready[0].status, "True");
        assert_eq!(ready[0].last_transition_time.0, t1);
        assert_eq!(ready[2].last_transition_time.0, t0, "Stalled stayed False");
    }
}
