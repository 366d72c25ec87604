//! What every reconcile shares: the Kubernetes client, the Event recorder, metrics, and the
//! operator's settings.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kube::runtime::events::{Recorder, Reporter};
use kube::Client;

use crate::admin::Admin;
use crate::metrics::Metrics;
use crate::topic::unmanaged::UnmanagedTopics;

/// The operator's settings (flags of `strom-operator run`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// DNS domain of the Kubernetes cluster (pod names are `<pod>.<service>.<ns>.svc.<domain>`).
    pub cluster_domain: String,
    /// How long an idle resource waits for its next reconcile when nothing changes.
    pub resync: Duration,
    /// How soon a resource in the middle of an operation is looked at again.
    pub busy_requeue: Duration,
    /// What to do about topics no Topic resource names.
    pub unmanaged_topics: UnmanagedTopics,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            cluster_domain: "cluster.local".into(),
            resync: Duration::from_secs(60),
            busy_requeue: Duration::from_secs(2),
            unmanaged_topics: UnmanagedTopics::Ignore,
        }
    }
}

/// Shared by every reconcile.
#[derive(Clone)]
pub struct Context {
    /// The Kubernetes client (the operator's service account, or the kubeconfig's user).
    pub client: Client,
    /// Who publishes the Events (`kubectl describe` shows them).
    pub reporter: Reporter,
    pub metrics: Arc<Metrics>,
    pub settings: Settings,
    /// Warnings already published that would only repeat themselves (keys of
    /// [`Context::first_warning`]).
    warned: Arc<Mutex<HashSet<String>>>,
    /// An admin connection per Cluster (`namespace/name`) and the addresses it was made for,
    /// shared by the reconciles of its Topics and ConsumerGroups (gRPC multiplexes them).
    admins: Arc<Mutex<HashMap<String, KeptAdmin>>>,
}

/// An admin connection and the broker addresses it was made for.
type KeptAdmin = (Vec<String>, Admin);

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("settings", &self.settings).finish_non_exhaustive()
    }
}

impl Context {
    pub fn new(client: Client, metrics: Arc<Metrics>, settings: Settings) -> Context {
        let reporter = Reporter { controller: "strom-operator".into(), instance: std::env::var("POD_NAME").ok() };
        Context { client, reporter, metrics, settings, warned: Arc::default(), admins: Arc::default() }
    }

    /// The admin connection kept for `cluster` if it was made for `addresses`.
    pub fn cached_admin(&self, cluster: &str, addresses: &[String]) -> Option<Admin> {
        let admins = self.admins.lock().unwrap_or_else(|e| e.into_inner());
        admins.get(cluster).filter(|(a, _)| a == addresses).map(|(_, admin)| admin.clone())
    }

    pub fn keep_admin(&self, cluster: &str, addresses: &[String], admin: &Admin) {
        let mut admins = self.admins.lock().unwrap_or_else(|e| e.into_inner());
        admins.insert(cluster.to_string(), (addresses.to_vec(), admin.clone()));
    }

    /// Drops the connection kept for `cluster` (a call through it failed: the next reconcile
    /// connects again, to whichever broker answers first).
    pub fn forget_admin(&self, cluster: &str) {
        self.admins.lock().unwrap_or_else(|e| e.into_inner()).remove(cluster);
    }

    /// True the first time `key` is asked about: for Warnings that say the same every time.
    pub fn first_warning(&self, key: &str) -> bool {
        self.warned.lock().unwrap_or_else(|e| e.into_inner()).insert(key.to_string())
    }

    /// A recorder for one Event. kube's Recorder folds every later Event with the same
    /// reason into a series of the first, keeping the first one's note ("restarting broker 0"
    /// three times over); each step here says something new, so each gets its own Event.
    pub fn recorder(&self) -> Recorder {
        Recorder::new(self.client.clone(), self.reporter.clone())
    }
}
