//! Failed reconciles per resource: how many in a row (for the backoff of the next retry) and
//! the last error's message (so the same error is announced once, not on every retry).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};

use crate::cluster::reconcile::error_chain;
use crate::context::Context;

/// Shared by a controller's reconcile (which records outcomes) and its error policy (which
/// asks how long to wait).
#[derive(Debug, Clone, Default)]
pub struct Failures {
    by_key: Arc<Mutex<HashMap<String, (u32, String)>>>,
}

impl Failures {
    /// The resource's reconcile succeeded: its count starts again.
    pub fn succeeded(&self, key: &str) {
        self.by_key.lock().unwrap_or_else(|e| e.into_inner()).remove(key);
    }

    /// The reconcile failed with `message`: true if that message is new for the resource.
    pub fn failed(&self, key: &str, message: &str) -> bool {
        let mut by_key = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        let entry = by_key.entry(key.to_string()).or_default();
        let new = entry.1 != message;
        entry.1 = message.to_string();
        new
    }

    /// Counts one more failure in a row and says how long to wait before the retry.
    pub fn retry_in(&self, key: &str) -> Duration {
        let mut by_key = self.by_key.lock().unwrap_or_else(|e| e.into_inner());
        let entry = by_key.entry(key.to_string()).or_default();
        entry.0 += 1;
        backoff(entry.0)
    }
}

/// How long to wait after the `failures`th failure in a row: 2 s doubling, at most 256 s.
pub fn backoff(failures: u32) -> Duration {
    Duration::from_secs(1u64 << failures.clamp(1, 8))
}

/// Records a reconcile's outcome for `object`; a failure shows up on it as a Warning Event,
/// once per message.
pub async fn record<K, E>(ctx: &Context, failures: &Failures, object: &K, result: &Result<Action, E>)
where
    K: Resource<DynamicType = ()> + ResourceExt,
    E: std::error::Error + 'static,
{
    let key = key(object);
    match result {
        Ok(_) => failures.succeeded(&key),
        Err(e) => {
            let message = error_chain(e);
            if failures.failed(&key, &message) {
                crate::publish::event(ctx, object, EventType::Warning, "ReconcileFailed", "Reconcile", message).await;
            }
        }
    }
}

/// The error policy: log the failure and retry after the backoff.
pub fn retry<K: ResourceExt, E: std::error::Error + 'static>(failures: &Failures, object: &K, error: &E) -> Action {
    let key = key(object);
    let wait = failures.retry_in(&key);
    tracing::warn!(kind = %std::any::type_name::<K>().rsplit("::").next().unwrap_or("?"), resource = %key, error = %error_chain(error), retry_in = ?wait, "reconcile failed");
    Action::requeue(wait)
}

/// `namespace/name`, the key of a resource.
pub fn key<K: ResourceExt>(object: &K) -> String {
    format!("{}/{}", object.namespace().unwrap_or_default(), object.name_any())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_new_once_and_the_backoff_doubles_until_a_success() {
        let f = Failures::default();
        assert!(f.failed("ns/a", "boom"));
        assert!(!f.failed("ns/a", "boom"));
        assert!(f.failed("ns/a", "bang"));
        assert_eq!(f.retry_in("ns/a"), Duration::from_secs(2));
        assert_eq!(f.retry_in("ns/a"), Duration::from_secs(4));
        f.succeeded("ns/a");
        assert_eq!(f.retry_in("ns/a"), Duration::from_secs(2));
        assert_eq!(backoff(30), Duration::from_secs(256));
    }
}
