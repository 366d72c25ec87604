//! What every reconcile shares: the Kubernetes client, the Event recorder, metrics, and the
//! operator's settings.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::events::{Recorder, Reporter};
use kube::Client;

use crate::metrics::Metrics;

/// The operator's settings (flags of `strom-operator run`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// DNS domain of the Kubernetes cluster (pod names are `<pod>.<service>.<ns>.svc.<domain>`).
    pub cluster_domain: String,
    /// How long an idle resource waits for its next reconcile when nothing changes.
    pub resync: Duration,
    /// How soon a resource in the middle of an operation is looked at again.
    pub busy_requeue: Duration,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            cluster_domain: "cluster.local".into(),
            resync: Duration::from_secs(60),
            busy_requeue: Duration::from_secs(2),
        }
    }
}

/// Shared by every reconcile.
#[derive(Clone)]
pub struct Context {
    /// The Kubernetes client (the operator's service account, or the kubeconfig's user).
    pub client: Client,
    /// Publishes Events on the resources (`kubectl describe` shows them).
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    pub settings: Settings,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl Context {
    pub fn new(client: Client, metrics: Arc<Metrics>, settings: Settings) -> Context {
        let recorder = Recorder::new(client.clone(), Reporter { controller: "strom-operator".into(), instance: None });
        Context { client, recorder, metrics, settings }
    }
}
