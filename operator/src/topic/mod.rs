//! The Topic controller: a `Topic` becomes a Kafka topic of its Cluster, kept as the spec
//! says; drift made outside Git is put back on the next resync.
//!
//! - [`plan`]: the topic compared with its spec, the change it needs, its health, and which
//!   of two Topics naming one Kafka topic manages it (pure).
//! - [`reconcile`]: the admin calls, the status, the Events and the finalizer.
//! - [`unmanaged`]: topics no Topic names — ignored, reported or adopted (a switch).
//!
//! Watches: Topics; Clusters (a Cluster that appears or becomes Ready wakes the Topics that
//! name it). The brokers' side is not in the API, so every Topic is looked at again each
//! resync period: that bounds how long drift lasts. Topics that Kafka clients create are not
//! in Git and are left alone unless `--unmanaged-topics` says otherwise ([`unmanaged`]).

pub mod plan;
pub mod reconcile;
pub mod unmanaged;

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
use crate::crd::topic::Topic;
use crate::failures::{self, Failures};

use self::reconcile::{ReconcileError, Shared};

/// Runs the Topic controller until `shutdown` resolves. `namespace`: watch only that one.
pub async fn run(
    ctx: Arc<Context>,
    namespace: Option<String>,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let client = ctx.client.clone();
    let (topics, clusters): (Api<Topic>, Api<Cluster>) = match &namespace {
        Some(ns) => (Api::namespaced(client.clone(), ns), Api::namespaced(client.clone(), ns)),
        None => (Api::all(client.clone()), Api::all(client.clone())),
    };
    let controller = Controller::new(topics, watcher::Config::default());
    let store = controller.store();
    let by_cluster = store.clone();
    let failures = Failures::default();
    let on_error = failures.clone();
    let shared = Arc::new(Shared { ctx, topics: store, waits: Failures::default() });
    controller
        .watches(clusters, watcher::Config::default(), move |cluster: Cluster| {
            let (name, ns) = (cluster.name_any(), cluster.namespace());
            by_cluster
                .state()
                .into_iter()
                .filter(|t| t.spec.cluster_ref.name == name && t.namespace() == ns)
                .map(|t| ObjectRef::from_obj(&*t))
                .collect::<Vec<_>>()
        })
        .graceful_shutdown_on(shutdown)
        .run(
            move |topic, shared: Arc<Shared>| {
                let failures = failures.clone();
                async move {
                    let result = reconcile::reconcile(topic.clone(), shared.clone()).await;
                    failures::record(&shared.ctx, &failures, &*topic, &result).await;
                    result
                }
            },
            move |topic: Arc<Topic>, error: &ReconcileError, _| failures::retry(&on_error, &*topic, error),
            shared,
        )
        .for_each(|result| async move {
            if let Err(e) = result {
                tracing::debug!(error = %error_chain(&e), "topic controller");
            }
        })
        .await;
}
