//! How a `Topic` or a `ConsumerGroup` reaches the `Cluster` its `clusterRef` names: the
//! Cluster must exist, not be being deleted, and be Ready; then the admin API of the first of
//! its brokers that answers. What stands in the way is said in words for the resource's
//! conditions.

use kube::api::Api;
use kube::ResourceExt;

use crate::admin::{Admin, AdminError};
use crate::cluster::names::Names;
use crate::conditions::READY;
use crate::context::Context;
use crate::crd::cluster::Cluster;

/// Where a resource's Cluster stands.
#[derive(Debug)]
pub enum Reach {
    /// No Cluster of that name in the namespace.
    Missing,
    /// The Cluster is being deleted.
    Deleting,
    /// It exists but cannot be used now; why, in words.
    NotReady(String),
    /// An admin connection to one of its brokers, and its broker count.
    Ready { admin: Admin, brokers: i32 },
}

/// Why the Cluster is not usable yet, or None when it is Ready (pure).
pub fn not_ready(cluster: &Cluster) -> Option<String> {
    let name = cluster.name_any();
    let ready = cluster.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == READY));
    match ready {
        Some(c) if c.status == "True" => None,
        Some(c) => Some(format!("Cluster {name} is not Ready ({}: {})", c.reason, c.message)),
        None => Some(format!("Cluster {name} has no status yet")),
    }
}

/// `host:port` of each broker's internal (admin) port, by pod DNS name.
pub fn admin_addresses(cluster: &Cluster, cluster_domain: &str) -> Vec<String> {
    let names = Names::new(&cluster.name_any(), &cluster.namespace().unwrap_or_default(), cluster_domain);
    let port = cluster.spec.listeners.internal;
    (0..cluster.spec.replicas.max(0)).map(|id| format!("{}:{port}", names.pod_fqdn(id))).collect()
}

/// Looks the Cluster up and, when it is Ready, connects to it.
pub async fn reach(ctx: &Context, namespace: &str, cluster: &str) -> Result<Reach, kube::Error> {
    let api: Api<Cluster> = Api::namespaced(ctx.client.clone(), namespace);
    let Some(cluster) = api.get_opt(cluster).await? else { return Ok(Reach::Missing) };
    if cluster.metadata.deletion_timestamp.is_some() {
        return Ok(Reach::Deleting);
    }
    if let Some(why) = not_ready(&cluster) {
        return Ok(Reach::NotReady(why));
    }
    let addresses = admin_addresses(&cluster, &ctx.settings.cluster_domain);
    let key = format!("{namespace}/{}", cluster.name_any());
    if let Some(admin) = ctx.cached_admin(&key, &addresses) {
        return Ok(Reach::Ready { admin, brokers: cluster.spec.replicas });
    }
    match Admin::connect(&addresses).await {
        Ok(admin) => {
            ctx.keep_admin(&key, &addresses, &admin);
            Ok(Reach::Ready { admin, brokers: cluster.spec.replicas })
        }
        Err(e @ AdminError::Unreachable { .. }) => {
            Ok(Reach::NotReady(format!("no broker of Cluster {} answered: {e}", cluster.name_any())))
        }
        Err(e) => Ok(Reach::NotReady(e.to_string())),
    }
}

/// Drops the admin connection kept for the Cluster after a call through it failed.
pub fn forget(ctx: &Context, namespace: &str, cluster: &str) {
    ctx.forget_admin(&format!("{namespace}/{cluster}"));
}

/// True when the namespace is being deleted (or is gone): a finalizer then lets go rather
/// than hold the namespace in Terminating.
/// An operator installed with namespaced permissions only may not read namespaces: then this
/// says false, and the Cluster's own deletion (which a namespace deletion brings) lets go.
pub async fn namespace_terminating(ctx: &Context, namespace: &str) -> Result<bool, kube::Error> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(ctx.client.clone());
    match api.get_opt(namespace).await {
        Ok(ns) => Ok(ns.is_none_or(|ns| ns.metadata.deletion_timestamp.is_some())),
        Err(kube::Error::Api(e)) if e.code == 403 => {
            tracing::debug!(namespace, "may not read namespaces; judging by the Cluster alone");
            Ok(false)
        }
        Err(e) => Err(e),
    }
}
