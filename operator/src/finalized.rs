//! What the Topic and ConsumerGroup controllers share: their reconcile error, and the run of
//! a reconcile behind its finalizer (`Apply` while the resource lives, `Cleanup` once it is
//! being deleted), with the reconcile metric, and the Cluster's admin connection dropped
//! after an admin call through it failed.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;

use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::finalizer::{self, finalizer};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::admin::AdminError;
use crate::context::Context;

/// A reconcile that failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the resource has no namespace")]
    NoNamespace,
    #[error("reading {what} for {resource}")]
    Read {
        what: &'static str,
        /// `Kind name`.
        resource: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("admin call for {subject}")]
    Admin {
        /// What the call was about, e.g. `topic orders`.
        subject: String,
        #[source]
        source: Box<AdminError>,
    },
    #[error("deleting {subject}: {why}")]
    CannotDelete { subject: String, why: String },
    #[error("writing the status of {resource}")]
    Status {
        resource: String,
        #[source]
        source: Box<kube::Error>,
    },
}

impl Error {
    /// The variant's name, for the error metric's label.
    pub fn label(&self) -> &'static str {
        match self {
            Error::NoNamespace => "NoNamespace",
            Error::Read { .. } => "Read",
            Error::Admin { .. } => "Admin",
            Error::CannotDelete { .. } => "CannotDelete",
            Error::Status { .. } => "Status",
        }
    }

    /// `Kind name` of a resource, for the variants that name one.
    pub fn resource<K: Resource<DynamicType = ()>>(object: &K) -> String {
        format!("{} {}", K::kind(&()), object.name_any())
    }
}

/// What the controllers' reconcile returns.
pub type ReconcileError = finalizer::Error<Error>;

/// Runs `reconcile` for `object` behind the finalizer `name`; `cluster` is the Cluster its
/// `clusterRef` names.
pub async fn run<K, F, Fut>(
    ctx: &Context,
    name: &str,
    object: Arc<K>,
    cluster: &str,
    reconcile: F,
) -> Result<Action, ReconcileError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + Debug,
    F: FnOnce(finalizer::Event<K>) -> Fut,
    Fut: Future<Output = Result<Action, Error>>,
{
    let timer = ctx.metrics.reconcile(&K::kind(&()));
    let namespace = object.namespace().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &namespace);
    let result = finalizer(&api, name, object, reconcile).await;
    let failed = match &result {
        Err(finalizer::Error::ApplyFailed(e) | finalizer::Error::CleanupFailed(e)) => Some(e),
        _ => None,
    };
    if let Some(Error::Admin { .. }) = failed {
        crate::cluster_ref::forget(ctx, &namespace, cluster);
    }
    timer.done(result.as_ref().err().map(|_| failed.map_or("Finalizer", Error::label)));
    result
}
