//! The ConsumerGroup controller: a `ConsumerGroup` shows its group's state, members and lag
//! in status, refreshed every `spec.refreshSeconds`, and carries out declarative offset
//! resets once per reset id while the group is empty.
//!
//! - [`plan`]: the reset rules and the status' view of the group (pure).
//! - [`reconcile`]: the admin calls, the status, the Events and the finalizer.
//!
//! Watches: ConsumerGroups; Clusters (a Cluster that appears or becomes Ready wakes the
//! groups that name it).

pub mod plan;
pub mod reconcile;

use std::sync::Arc;

use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::ResourceExt;

use crate::cluster::reconcile::error_chain;
use crate::context::Context;
use crate::crd::cluster::Cluster;
use crate::crd::group::ConsumerGroup;
use crate::failures::{self, Failures};

use self::reconcile::{ReconcileError, Shared};

/// Runs the ConsumerGroup controller until `shutdown` resolves. `namespace`: watch only that.
pub async fn run(
    ctx: Arc<Context>,
    namespace: Option<String>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    let (groups, clusters): (Api<ConsumerGroup>, Api<Cluster>) = match &namespace {
        Some(ns) => (Api::namespaced(client.clone(), ns), Api::namespaced(client.clone(), ns)),
        None => (Api::all(client.clone()), Api::all(client.clone())),
    };
    let controller = Controller::new(groups, watcher::Config::default());
    let store = controller.store();
    let failures = Failures::default();
    let on_error = failures.clone();
    let shared = Arc::new(Shared { ctx, groups: store.clone(), waits: Failures::default(), due: Arc::default() });
    controller
        .watches(clusters, watcher::Config::default(), move |cluster: Cluster| {
            let (name, ns) = (cluster.name_any(), cluster.namespace());
            store
                .state()
                .into_iter()
                .filter(|g| g.spec.cluster_ref.name == name && g.namespace() == ns)
                .map(|g| ObjectRef::from_obj(&*g))
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(shutdown)
        .run(
            move |group, shared: Arc<Shared>| {
                let failures = failures.clone();
                async move {
                    let result = reconcile::reconcile(group.clone(), shared.clone()).await;
                    failures::record(&shared.ctx, &failures, &*group, &result).await;
                    result
                }
            },
            move |group: Arc<ConsumerGroup>, error: &ReconcileError, _| failures::retry(&on_error, &*group, error),
            shared,
        )
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %error_chain(&e), "consumer group controller");
            }
        })
        .await;
}
