//! What the operator tells the API server about a resource it reconciles: Kubernetes Events
//! (`kubectl describe` and `kubectl get events` show them) and the status subresource,
//! written with server-side apply only when it changed (an idle resource causes no writes,
//! and so no watch event that would wake its controller again).

use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::json;

use crate::cluster::names::FIELD_MANAGER;
use crate::context::Context;

/// Publishes an Event on `object` and logs it; a failure to publish is logged, not returned
/// (an Event is a report, never a reason to fail a reconcile).
pub async fn event<K>(ctx: &Context, object: &K, type_: EventType, reason: &str, action: &str, note: String)
where
    K: Resource<DynamicType = ()>,
{
    let kind = K::kind(&());
    let name = object.name_any();
    if type_ == EventType::Warning {
        tracing::warn!(%kind, %name, reason, "{note}");
    } else {
        tracing::info!(%kind, %name, reason, "{note}");
    }
    let event = Event { type_, reason: reason.into(), note: Some(note), action: action.into(), secondary: None };
    if let Err(e) = ctx.recorder().publish(&event, &object.object_ref(&())).await {
        tracing::warn!(%kind, %name, error = %e, "publishing an Event failed");
    }
}

/// Writes `next` as the status of `K` `name` in `namespace` unless it equals `previous`.
pub async fn status<K, S>(ctx: &Context, namespace: &str, name: &str, previous: &S, next: &S) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug,
    S: Serialize + PartialEq,
{
    if previous == next {
        return Ok(());
    }
    let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
    let patch = json!({"apiVersion": K::api_version(&()), "kind": K::kind(&()), "status": next});
    api.patch_status(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&patch)).await?;
    Ok(())
}
