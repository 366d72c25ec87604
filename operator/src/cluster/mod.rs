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

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::ResourceExt;

use crate::context::Context;
use crate::crd::cluster::Cluster;
use crate::failures::{self, Failures};

use self::names::CLUSTER_LABEL;
use self::reconcile::{error_chain, Error};

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
    let failures = Failures::default();
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
                    let result = reconcile::reconcile(cluster.clone(), ctx.clone()).await;
                    failures::record(&ctx, &failures, &*cluster, &result).await;
                    result
                }
            },
            move |cluster: Arc<Cluster>, error: &Error, _ctx| failures::retry(&on_error, &*cluster, error),
            ctx,
        )
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %error_chain(&e), "controller");
            }
        })
        .await;
}
