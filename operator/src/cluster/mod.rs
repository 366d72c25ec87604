//! The Cluster controller: a `Cluster` becomes brokers on persistent volumes, kept as the spec
//! says through scale-ups, scale-downs, rolling restarts and lost brokers.
//!
//! - [`names`]: names and labels of what is made for a cluster.
//! - [`validate`]: what a spec means, or why it cannot be carried out (pure).
//! - [`broker_config`]: the broker config file from `spec.config` (pure).
//! - [`desired`]: the ConfigMap, Services, StatefulSet and PodDisruptionBudget (pure);
//!   [`overrides`] merges `spec.pod.template` into the pod template.
//! - [`observed`]: what was seen of the cluster (StatefulSet, pods, the brokers' view).
//! - [`plan`]: the next step of the operation in progress, or the one to start (pure).
//! - [`status`]: conditions and the rest of the status (pure).
//! - [`reconcile`]: the phases wired together, with the I/O.
//!
//! Watches: Clusters; the objects it owns (their changes wake the owner); broker pods (by
//! the `strom.dev/cluster` label). The brokers' own state (leaders, ISR) is not in the API,
//! so a cluster in the middle of an operation is looked at again every couple of seconds,
//! an idle one only on the slow resync.

pub mod broker_config;
pub mod desired;
pub mod names;
pub mod observed;
pub mod overrides;
pub mod plan;
pub mod reconcile;
pub mod status;
pub mod validate;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::ResourceExt;

use crate::context::Context;
use crate::crd::cluster::Cluster;

use self::names::CLUSTER_LABEL;
use self::reconcile::{backoff, error_chain, Error};

/// Per Cluster: failures in a row (for the backoff) and the last error's message (so that
/// the same error is announced once, not on every retry).
type Failures = Arc<Mutex<HashMap<String, (u32, String)>>>;

/// Runs the Cluster controller until `shutdown` resolves (then finishes the reconciles in
/// flight). `namespace`: watch only that namespace.
pub async fn run(
    ctx: Arc<Context>,
    namespace: Option<String>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    fn api<K>(client: &kube::Client, namespace: &Option<String>) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        K::DynamicType: Default,
    {
        match namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        }
    }
    let managed = watcher::Config::default().labels(&format!("app.kubernetes.io/managed-by={}", names::FIELD_MANAGER));
    let failures: Failures = Arc::default();
    let on_error = failures.clone();
    Controller::new(api::<Cluster>(&client, &namespace), watcher::Config::default())
        .owns(api::<StatefulSet>(&client, &namespace), managed.clone())
        .owns(api::<ConfigMap>(&client, &namespace), managed.clone())
        .owns(api::<Service>(&client, &namespace), managed.clone())
        .owns(api::<PodDisruptionBudget>(&client, &namespace), managed.clone())
        .watches(api::<Pod>(&client, &namespace), watcher::Config::default().labels(CLUSTER_LABEL), |pod: Pod| {
            let cluster = pod.labels().get(CLUSTER_LABEL)?.clone();
            Some(ObjectRef::<Cluster>::new(&cluster).within(&pod.namespace()?))
        })
        .graceful_shutdown_on(shutdown)
        .run(
            move |cluster, ctx| {
                let failures = failures.clone();
                async move {
                    let key = format!("{}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any());
                    let result = reconcile::reconcile(cluster.clone(), ctx.clone()).await;
                    match &result {
                        Ok(_) => {
                            failures.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
                        }
                        Err(e) => {
                            // A failure shows up on the Cluster as a Warning Event, once per message.
                            let message = error_chain(e);
                            let new = {
                                let mut f = failures.lock().unwrap_or_else(|e| e.into_inner());
                                let entry = f.entry(key.clone()).or_default();
                                let new = entry.1 != message;
                                entry.1 = message.clone();
                                new
                            };
                            if new {
                                reconcile::warn(&ctx, &cluster, "ReconcileFailed", message).await;
                            }
                        }
                    }
                    result
                }
            },
            move |cluster: Arc<Cluster>, error: &Error, _ctx| {
                let key = format!("{}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any());
                let mut failures = on_error.lock().unwrap_or_else(|e| e.into_inner());
                let entry = failures.entry(key.clone()).or_default();
                entry.0 += 1;
                let wait = backoff(entry.0);
                tracing::warn!(cluster = %key, error = %error_chain(error), retry_in = ?wait, "reconcile failed");
                Action::requeue(wait)
            },
            ctx,
        )
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %error_chain(&e), "controller");
            }
        })
        .await;
}
