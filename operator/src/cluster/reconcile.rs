//! The reconcile of one `Cluster`, in phases: observe (read the StatefulSet, the pods and the
//! brokers' view: I/O) → validate (pure) → plan (pure) → build (pure) → apply (server-side
//! apply of every object) → carry out the plan's step (admin API or a pod deletion) → status
//! (written only when it changed) and Events on transitions. Level-triggered and idempotent:
//! running it twice in a row does nothing the first run did not.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Node, PersistentVolumeClaim, Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::json;

use crate::admin::{Admin, AdminError};
use crate::conditions::Health;
use crate::context::Context;
use crate::crd::cluster::{Cluster, ClusterStatus, Operation, OperationKind};
use crate::quantity;

use super::desired::{desired, template_hash, BuildError, Desired};
use super::names::{self, Names, FIELD_MANAGER};
use super::observed::{pods_by_ordinal, pods_without_rack, Observed, Planned, StatefulSetView};
use super::plan::{plan, registered, wanted_rebalance, Inputs, Plan, RebalanceMode, Step};
use super::status::{health, status, StatusInputs};
use super::validate::validate;

/// A reconcile that failed; it is retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the Cluster has no namespace")]
    NoNamespace,
    #[error("reading the {what} of Cluster {cluster}")]
    Read {
        what: &'static str,
        cluster: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("applying {kind} {name}")]
    Apply {
        kind: &'static str,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("step {step} of Cluster {cluster}")]
    Step {
        step: String,
        cluster: String,
        #[source]
        source: Box<AdminError>,
    },
    #[error("deleting pod {pod} to restart its broker")]
    Restart {
        pod: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("writing the status of Cluster {cluster}")]
    Status {
        cluster: String,
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
            Error::Apply { .. } => "Apply",
            Error::Step { .. } => "Step",
            Error::Restart { .. } => "Restart",
            Error::Status { .. } => "Status",
        }
    }
}

/// Reconciles one Cluster (the controller's entry point).
pub async fn reconcile(cluster: Arc<Cluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let timer = ctx.metrics.reconcile("Cluster");
    let result = reconcile_fresh(&cluster, &ctx).await;
    timer.done(result.as_ref().err().map(Error::label));
    result
}

/// Reconciles the Cluster as the API server has it now. The controller's cached copy can be
/// older than the status the last reconcile wrote (a trigger that arrived during a reconcile
/// runs right after it, before the watch delivers that write), and planning from an old
/// `status.operation` would lose an operation or repeat a step.
async fn reconcile_fresh(cached: &Cluster, ctx: &Context) -> Result<Action, Error> {
    let namespace = cached.namespace().ok_or(Error::NoNamespace)?;
    let api: Api<Cluster> = Api::namespaced(ctx.client.clone(), &namespace);
    let name = cached.name_any();
    let read = |source| Error::Read { what: "Cluster", cluster: name.clone(), source: Box::new(source) };
    match api.get_opt(&name).await.map_err(read)? {
        Some(cluster) => reconcile_cluster(&cluster, ctx).await,
        None => Ok(Action::await_change()),
    }
}

async fn reconcile_cluster(cluster: &Cluster, ctx: &Context) -> Result<Action, Error> {
    if cluster.metadata.deletion_timestamp.is_some() {
        // The garbage collector deletes what the Cluster owns; claims follow the StatefulSet's
        // retention policy.
        return Ok(Action::await_change());
    }
    let namespace = cluster.namespace().ok_or(Error::NoNamespace)?;
    let names = Names::new(&cluster.name_any(), &namespace, &ctx.settings.cluster_domain);
    let previous = cluster.status.clone().unwrap_or_default();
    let now = Timestamp::now();

    let (mut observed, admin) = observe(ctx, &names, cluster.spec.listeners.internal).await?;

    let valid = match validate(&cluster.spec, &names) {
        Ok(valid) => valid,
        Err(invalid) => {
            return refuse(ctx, cluster, &names, &observed, &previous, "InvalidSpec", &invalid.to_string(), now).await
        }
    };
    if let (Some(op), Some(admin), Some(view)) = (&previous.operation, &admin, &observed.brokers) {
        if let Some((mode, brokers)) = wanted_rebalance(op) {
            let known = registered(view, &brokers);
            observed.planned_moves = if known.is_empty() {
                Some(Planned::Moves(0))
            } else {
                match admin.plan(mode, &known).await {
                    Ok(planned) => Some(planned),
                    Err(e) => {
                        tracing::debug!(cluster = %names.cluster, error = %error_chain(&e), "dry-run rebalance failed");
                        None
                    }
                }
            };
        }
    }
    let plan = plan(&Inputs { spec: &cluster.spec, valid: &valid, previous: &previous, observed: &observed, now });
    let claim_size = observed
        .statefulset
        .as_ref()
        .and_then(|s| s.claim_size.clone())
        .unwrap_or_else(|| cluster.spec.storage.size.clone());
    let objects = match desired(cluster, &names, &valid, plan.statefulset_replicas, &claim_size) {
        Ok(objects) => objects,
        Err(e @ BuildError::PodTemplate(_)) => {
            let why = error_chain(&e);
            return refuse(ctx, cluster, &names, &observed, &previous, "InvalidSpec", &why, now).await;
        }
        Err(e @ BuildError::NoUid) => {
            tracing::warn!(cluster = %names.cluster, error = %e, "not reconciled yet");
            return Ok(Action::requeue(ctx.settings.busy_requeue));
        }
    };

    // The status first: an operation and its phase are recorded before their effects, so a
    // crash between the two leaves a status the next reconcile resumes from.
    let template_pending = observed
        .statefulset
        .as_ref()
        .is_some_and(|s| s.template_hash.as_deref() != Some(template_hash(&objects.statefulset).as_str()));
    let inputs = StatusInputs {
        spec: &cluster.spec,
        generation: cluster.metadata.generation,
        names: &names,
        observed: &observed,
        plan: Ok(&plan),
        previous: &previous,
        template_pending,
        now,
    };
    let health = health(&inputs);
    write_status(ctx, &names, &previous, status(&inputs)).await?;
    announce(ctx, cluster, &previous, &plan, &health).await;

    match apply_all(ctx, &names, &objects).await {
        Err(Error::Apply { kind, name, source }) if matches!(*source, kube::Error::Api(ref e) if e.code == 400 || e.code == 422) =>
        {
            let why = format!("the API server refused {kind} {name}: {}", error_chain(&*source));
            let fresh = Api::<Cluster>::namespaced(ctx.client.clone(), &names.namespace)
                .get_status(&names.cluster)
                .await
                .map_err(|source| Error::Read {
                    what: "Cluster",
                    cluster: names.cluster.clone(),
                    source: Box::new(source),
                })?;
            let written = fresh.status.unwrap_or_default();
            return refuse(ctx, cluster, &names, &observed, &written, "ApplyRefused", &why, now).await;
        }
        other => other?,
    }
    if let Some(rack) = &cluster.spec.rack {
        set_racks(ctx, &names, &observed, &rack.topology_key).await?;
    }
    expand_claims(ctx, cluster, &names, &observed, valid.storage_bytes).await;
    let controller = observed.brokers.as_ref().and_then(|v| v.controller);
    carry_out(ctx, cluster, &names, admin.as_ref(), &plan.step, controller).await?;
    if let (Health::Ready { .. }, Some(admin)) = (&health, &admin) {
        if let Err(e) = crate::topic::unmanaged::reconcile(ctx, cluster, admin).await {
            tracing::warn!(cluster = %names.cluster, error = %error_chain(&e), "looking for unmanaged topics failed");
        }
    }

    let busy = plan.operation.is_some() || !matches!(health, Health::Ready { .. });
    Ok(Action::requeue(if busy { ctx.settings.busy_requeue } else { ctx.settings.resync }))
}

/// The observe phase: the StatefulSet, the broker pods, and (when any pod runs) the brokers'
/// view through the admin API of the first broker that answers, Ready pods first.
async fn observe(ctx: &Context, names: &Names, internal_port: i32) -> Result<(Observed, Option<Admin>), Error> {
    let read = |what| {
        let cluster = names.cluster.clone();
        move |source| Error::Read { what, cluster, source: Box::new(source) }
    };
    let sets: Api<StatefulSet> = Api::namespaced(ctx.client.clone(), &names.namespace);
    let statefulset = sets.get_opt(&names.statefulset()).await.map_err(read("StatefulSet"))?;
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &names.namespace);
    let listed = pods.list(&ListParams::default().labels(&names.selector_string())).await.map_err(read("pods"))?;
    let mut observed = Observed {
        statefulset: statefulset.as_ref().map(StatefulSetView::of),
        pods: pods_by_ordinal(names, &listed.items),
        brokers: None,
        planned_moves: None,
    };
    let mut ids: Vec<i32> = observed.pods.keys().copied().collect();
    ids.sort_by_key(|id| !observed.pods[id].ready);
    let addresses: Vec<String> = ids.iter().map(|id| format!("{}:{internal_port}", names.pod_fqdn(*id))).collect();
    let admin = if addresses.is_empty() {
        None
    } else {
        match Admin::connect(&addresses).await {
            Ok(admin) => Some(admin),
            Err(e) => {
                tracing::debug!(cluster = %names.cluster, error = %error_chain(&e), "no broker answered");
                None
            }
        }
    };
    if let Some(admin) = &admin {
        match admin.describe().await {
            Ok(view) => observed.brokers = Some(view),
            Err(e) => {
                tracing::debug!(cluster = %names.cluster, error = %error_chain(&e), "describing the cluster failed")
            }
        }
    }
    Ok((observed, admin))
}

/// Server-side apply of one object, owned by the operator's field manager.
async fn apply<K>(ctx: &Context, namespace: &str, kind: &'static str, object: &K) -> Result<(), Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    let api: Api<K> = Api::namespaced(ctx.client.clone(), namespace);
    let mut value = serde_json::to_value(object).map_err(|e| Error::Apply {
        kind,
        name: name.clone(),
        source: Box::new(kube::Error::SerdeError(e)),
    })?;
    value["apiVersion"] = json!(K::api_version(&()));
    value["kind"] = json!(K::kind(&()));
    api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(&value))
        .await
        .map_err(|source| Error::Apply { kind, name, source: Box::new(source) })?;
    Ok(())
}

async fn apply_all(ctx: &Context, names: &Names, d: &Desired) -> Result<(), Error> {
    let ns = &names.namespace;
    apply::<ConfigMap>(ctx, ns, "ConfigMap", &d.config_map).await?;
    apply::<Service>(ctx, ns, "Service", &d.headless_service).await?;
    apply::<Service>(ctx, ns, "Service", &d.bootstrap_service).await?;
    apply::<StatefulSet>(ctx, ns, "StatefulSet", &d.statefulset).await?;
    apply::<PodDisruptionBudget>(ctx, ns, "PodDisruptionBudget", &d.pdb).await?;
    Ok(())
}

/// Gives each scheduled broker pod the `strom.dev/rack` annotation from its node's
/// `topology_key` label (empty when the node has none); the broker waits for it at start
/// (`--rack-from-file`). Set once: a pod never changes node.
async fn set_racks(ctx: &Context, names: &Names, observed: &Observed, topology_key: &str) -> Result<(), Error> {
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &names.namespace);
    for (id, pod, node) in pods_without_rack(&observed.pods) {
        let labels = nodes
            .get_opt(&node)
            .await
            .map_err(|source| Error::Read { what: "node", cluster: names.cluster.clone(), source: Box::new(source) })?
            .and_then(|n| n.metadata.labels)
            .unwrap_or_default();
        let rack = labels.get(topology_key).cloned().unwrap_or_default();
        let patch = json!({"metadata": {"annotations": {names::RACK_ANNOTATION: rack}}});
        pods.patch(&pod, &PatchParams::default(), &Patch::Merge(&patch)).await.map_err(|source| Error::Apply {
            kind: "Pod",
            name: pod.clone(),
            source: Box::new(source),
        })?;
        tracing::info!(cluster = %names.cluster, broker = id, node = %node, rack = %rack, "rack set from the node's {topology_key} label");
    }
    Ok(())
}

/// Grows claims smaller than `storage.size` (the claim template keeps its first size, as
/// Kubernetes requires). Where the storage class cannot expand, a Warning Event says so.
async fn expand_claims(ctx: &Context, cluster: &Cluster, names: &Names, observed: &Observed, want: u64) {
    let Some(size) = observed.statefulset.as_ref().and_then(|s| s.claim_size.as_deref()) else { return };
    if quantity::bytes(size).is_ok_and(|have| have >= want) {
        return;
    }
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(ctx.client.clone(), &names.namespace);
    for id in observed.pods.keys() {
        let name = names.claim(*id);
        let claim = match claims.get_opt(&name).await {
            Ok(Some(claim)) => claim,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(claim = %name, error = %e, "reading a claim to expand it failed");
                continue;
            }
        };
        let requested = claim
            .spec
            .as_ref()
            .and_then(|s| s.resources.as_ref())
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("storage"))
            .and_then(|q| quantity::bytes(&q.0).ok());
        if requested.is_some_and(|r| r >= want) {
            continue;
        }
        let patch = json!({"spec": {"resources": {"requests": {"storage": cluster.spec.storage.size}}}});
        if let Err(e) = claims.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            // Once per claim and size: the storage class will not change its mind by itself.
            if ctx.first_warning(&format!("{}/{name}/{}", names.namespace, cluster.spec.storage.size)) {
                let note = format!("claim {name} cannot grow to {}: {e}", cluster.spec.storage.size);
                publish(ctx, cluster, EventType::Warning, "ClaimNotExpanded", "ExpandClaim", note).await;
            }
        }
    }
}

/// Carries out the plan's step; what was done, for the Event.
async fn carry_out(
    ctx: &Context,
    cluster: &Cluster,
    names: &Names,
    admin: Option<&Admin>,
    step: &Step,
    controller: Option<i32>,
) -> Result<Option<String>, Error> {
    let failed = |step: &str| {
        let step = step.to_string();
        let cluster = names.cluster.clone();
        move |source| Error::Step { step, cluster, source: Box::new(source) }
    };
    let need_admin = || {
        admin.ok_or_else(|| Error::Step {
            step: "admin".into(),
            cluster: names.cluster.clone(),
            source: Box::new(AdminError::Unreachable { addresses: vec![], last: None }),
        })
    };
    let done = match step {
        Step::Nothing => return Ok(None),
        Step::Rebalance { mode, brokers, throttle_bytes_per_sec, max_moves } => {
            let started = need_admin()?
                .rebalance(*mode, brokers, *throttle_bytes_per_sec, *max_moves)
                .await
                .map_err(failed("Rebalance"))?;
            ctx.metrics.step("Cluster", "Rebalance");
            let (onto, what) = match mode {
                RebalanceMode::AddBrokers => ("onto", "RebalanceStarted"),
                RebalanceMode::DrainBrokers => ("off", "DrainStarted"),
            };
            (what, format!("started moving {started} partitions {onto} brokers {brokers:?}"))
        }
        Step::CancelRebalance => {
            need_admin()?.cancel_rebalance().await.map_err(failed("CancelRebalance"))?;
            ctx.metrics.step("Cluster", "CancelRebalance");
            ("RebalanceCancelled", "cancelled the partition moves in flight".to_string())
        }
        Step::Unregister(ids) => {
            let admin = need_admin()?;
            for id in ids {
                admin.remove_broker(*id).await.map_err(failed("RemoveBroker"))?;
            }
            ctx.metrics.step("Cluster", "Unregister");
            ("BrokersRemoved", format!("removed brokers {ids:?} from the cluster's metadata"))
        }
        Step::Restart { id, pod, uid } => {
            let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), &names.namespace);
            let dp = DeleteParams {
                preconditions: Some(Preconditions { uid: Some(uid.clone()), resource_version: None }),
                ..DeleteParams::default()
            };
            match pods.delete(pod, &dp).await {
                Ok(_) => {}
                // Gone already, or a new pod with the name: the plan will look again.
                Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
                Err(source) => return Err(Error::Restart { pod: pod.clone(), source: Box::new(source) }),
            }
            ctx.metrics.step("Cluster", "Restart");
            let which = if controller == Some(*id) { ", the active controller, last" } else { "" };
            let note =
                format!("restarting broker {id}{which}: deleted pod {pod} (it hands its leaderships over first)");
            ("BrokerRestarted", note)
        }
    };
    let (reason, note) = done;
    publish(ctx, cluster, EventType::Normal, reason, "Reconcile", note.clone()).await;
    Ok(Some(note))
}

fn kind_name(kind: OperationKind) -> &'static str {
    match kind {
        OperationKind::ScaleUp => "ScaleUp",
        OperationKind::ScaleDown => "ScaleDown",
        OperationKind::RollingRestart => "RollingRestart",
        OperationKind::ReplaceBroker => "ReplaceBroker",
        OperationKind::RefillBroker => "RefillBroker",
    }
}

/// Events for what changed: an operation started or finished, a refusal, readiness reached.
async fn announce(ctx: &Context, cluster: &Cluster, previous: &ClusterStatus, plan: &Plan, health: &Health) {
    let before: Option<&Operation> = previous.operation.as_ref();
    let after = plan.operation.as_ref();
    if let Some(op) = after.filter(|op| before.is_none_or(|b| b.kind != op.kind || b.started_at != op.started_at)) {
        let reason = format!("{}Started", kind_name(op.kind));
        publish(ctx, cluster, EventType::Normal, &reason, "Reconcile", health.message().to_string()).await;
    }
    if let Some(op) = before.filter(|b| after.is_none_or(|a| a.kind != b.kind || a.started_at != b.started_at)) {
        // An operation the spec no longer asks for ends as cancelled, not finished.
        let cancelled = matches!(op.kind, OperationKind::ScaleUp | OperationKind::ScaleDown)
            && cluster.spec.replicas != op.to_replicas;
        let (reason, note) = if cancelled {
            let note = format!(
                "{} to {} brokers cancelled: spec.replicas is now {}",
                kind_name(op.kind),
                op.to_replicas,
                cluster.spec.replicas
            );
            (format!("{}Cancelled", kind_name(op.kind)), note)
        } else {
            let note = format!("{} finished ({} → {} brokers)", kind_name(op.kind), op.from_replicas, op.to_replicas);
            (format!("{}Finished", kind_name(op.kind)), note)
        };
        publish(ctx, cluster, EventType::Normal, &reason, "Reconcile", note).await;
    }
    let was = previous.conditions.iter().find(|c| c.type_ == crate::conditions::READY);
    let changed = was.is_none_or(|c| c.reason != health.reason() || c.message != health.message());
    match health {
        Health::Stalled { reason, message } if changed => {
            publish(ctx, cluster, EventType::Warning, reason, "Reconcile", message.clone()).await;
        }
        Health::Ready { message, .. } if was.is_none_or(|c| c.status != "True") => {
            publish(ctx, cluster, EventType::Normal, "Ready", "Reconcile", message.clone()).await;
        }
        _ => {}
    }
}

async fn publish(ctx: &Context, cluster: &Cluster, type_: EventType, reason: &str, action: &str, note: String) {
    crate::publish::event(ctx, cluster, type_, reason, action, note).await;
}

/// The health gauges' values from a status.
fn health_of(status: &ClusterStatus) -> crate::metrics::ClusterHealth {
    let true_ = |type_: &str| status.conditions.iter().any(|c| c.type_ == type_ && c.status == "True");
    crate::metrics::ClusterHealth {
        brokers: i64::from(status.replicas),
        ready_brokers: i64::from(status.ready_replicas),
        under_replicated_partitions: i64::from(status.under_replicated_partitions.unwrap_or(0)),
        offline_partitions: i64::from(status.offline_partitions.unwrap_or(0)),
        ready: true_(crate::conditions::READY),
        stalled: true_(crate::conditions::STALLED),
    }
}

/// Writes `next` unless it equals what is there (and sets the Cluster's health gauges).
async fn write_status(
    ctx: &Context,
    names: &Names,
    previous: &ClusterStatus,
    next: ClusterStatus,
) -> Result<(), Error> {
    ctx.metrics.cluster_health(&names.namespace, &names.cluster, &health_of(&next));
    crate::publish::status::<Cluster, _>(ctx, &names.namespace, &names.cluster, previous, &next)
        .await
        .map_err(|source| Error::Status { cluster: names.cluster.clone(), source: Box::new(source) })
}

/// A spec the operator cannot carry out: status and a Warning Event say why; the running
/// cluster is left as it is until the spec changes.
#[allow(clippy::too_many_arguments)]
async fn refuse(
    ctx: &Context,
    cluster: &Cluster,
    names: &Names,
    observed: &Observed,
    previous: &ClusterStatus,
    reason: &str,
    why: &str,
    now: Timestamp,
) -> Result<Action, Error> {
    let inputs = StatusInputs {
        spec: &cluster.spec,
        generation: cluster.metadata.generation,
        names,
        observed,
        plan: Err((reason, why)),
        previous,
        template_pending: false,
        now,
    };
    let health = health(&inputs);
    let was = previous.conditions.iter().find(|c| c.type_ == crate::conditions::READY);
    if was.is_none_or(|c| c.reason != health.reason() || c.message != health.message()) {
        publish(ctx, cluster, EventType::Warning, reason, "Validate", why.to_string()).await;
    }
    write_status(ctx, names, previous, status(&inputs)).await?;
    Ok(Action::await_change())
}

/// An error with its causes, `a: b: c`.
pub fn error_chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    out
}
