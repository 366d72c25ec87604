//! The reconcile of one `ConsumerGroup`: reach the Cluster, describe the group (state,
//! members, lag), carry out the reset step [`reset_step`] decides (record the offsets first,
//! then commit them), write the status and announce resets in Events. Deleting the resource
//! goes through a finalizer that honours `deletionPolicy`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::Event as Finalizer;
use kube::runtime::reflector::Store;
use kube::ResourceExt;

use crate::admin::{Admin, AdminError};
use crate::cluster_ref::{namespace_terminating, reach, Reach};
use crate::conditions::{conditions, Health};
use crate::context::Context;
use crate::crd::group::{ConsumerGroup, ConsumerGroupStatus, ResetOffset, ResetResult, DEFAULT_REFRESH_SECONDS};
use crate::crd::topic::DeletionPolicy;
use crate::failures::{self, Failures};
use crate::publish;

use super::plan::{commit_calls, health, lag_status, reset_offsets, reset_step, GroupView, ResetStep};

/// The finalizer that stands between `kubectl delete consumergroup` and the group.
pub const FINALIZER: &str = "strom.dev/consumer-group";

/// What the ConsumerGroup controller's reconciles share.
#[derive(Clone)]
pub struct Shared {
    pub ctx: Arc<Context>,
    /// Every ConsumerGroup the controller watches (to find two naming one group).
    pub groups: Store<ConsumerGroup>,
    /// Waits for a Cluster that is missing or not ready, per ConsumerGroup.
    pub waits: Failures,
    /// When each ConsumerGroup is due again, and at which generation. Its own status writes
    /// (lag changes with every record) wake the controller; a wake-up before the due time at
    /// the same generation is not a reason to describe the group again.
    pub due: Arc<Mutex<HashMap<String, Due>>>,
}

/// The generation a ConsumerGroup was last reconciled at, and when it is due again.
pub type Due = (Option<i64>, Instant);

pub use crate::finalized::{Error, ReconcileError};

/// The Kafka group id: `spec.groupId`, else the resource's name.
pub fn group_id(group: &ConsumerGroup) -> String {
    group.spec.group_id.clone().unwrap_or_else(|| group.name_any())
}

/// The controller's entry point.
pub async fn reconcile(group: Arc<ConsumerGroup>, shared: Arc<Shared>) -> Result<Action, ReconcileError> {
    let cluster = group.spec.cluster_ref.name.clone();
    crate::finalized::run(&shared.ctx, FINALIZER, group, &cluster, |event| async {
        match event {
            Finalizer::Apply(group) => apply(&group, &shared).await,
            Finalizer::Cleanup(group) => cleanup(&group, &shared).await,
        }
    })
    .await
}

fn refresh(group: &ConsumerGroup) -> Duration {
    let seconds = group.spec.refresh_seconds.unwrap_or(DEFAULT_REFRESH_SECONDS).max(1);
    Duration::from_secs(u64::try_from(seconds).unwrap_or(30))
}

/// What a ConsumerGroup names: (namespace, cluster, group id).
fn names(g: &ConsumerGroup) -> (Option<String>, String, String) {
    (g.namespace(), g.spec.cluster_ref.name.clone(), group_id(g))
}

async fn apply(cached: &ConsumerGroup, shared: &Shared) -> Result<Action, Error> {
    let key = failures::key(cached);
    let due = shared.due.lock().unwrap_or_else(|e| e.into_inner()).get(&key).copied();
    if let Some((generation, at)) = due {
        if generation == cached.metadata.generation && Instant::now() < at {
            return Ok(Action::requeue(at - Instant::now()));
        }
    }
    let Some(again) = apply_fresh(cached, shared).await? else { return Ok(Action::await_change()) };
    let at = Instant::now() + again;
    shared.due.lock().unwrap_or_else(|e| e.into_inner()).insert(key, (cached.metadata.generation, at));
    Ok(Action::requeue(again))
}

/// Reconciles the ConsumerGroup as the API server has it now (a reset is recorded in its
/// status, and planning from an older copy could compute it a second time); when to look
/// again (None: on a change).
async fn apply_fresh(cached: &ConsumerGroup, shared: &Shared) -> Result<Option<Duration>, Error> {
    let ctx = &shared.ctx;
    let namespace = cached.namespace().ok_or(Error::NoNamespace)?;
    let api: Api<ConsumerGroup> = Api::namespaced(ctx.client.clone(), &namespace);
    let fresh = api.get_opt(&cached.name_any()).await.map_err(|source| Error::Read {
        what: "its latest version",
        resource: Error::resource(cached),
        source: Box::new(source),
    })?;
    let Some(resource) = fresh else { return Ok(None) };
    let resource = &resource;
    let id = group_id(resource);
    let key = failures::key(resource);
    let previous = resource.status.clone().unwrap_or_default();
    let cluster = &resource.spec.cluster_ref.name;
    let all = shared.groups.state();
    if let Some(other) = crate::claim::claimed_by(resource, all.iter().map(|g| &**g), names) {
        let why =
            format!("group {id} of Cluster {cluster} is managed by ConsumerGroup {other}; this one changes nothing");
        let health = Health::Stalled { reason: "GroupClaimed".into(), message: why };
        finish(ctx, resource, &previous, previous.clone(), health).await?;
        return Ok(Some(refresh(resource)));
    }
    let read =
        |source| Error::Read { what: "its Cluster", resource: Error::resource(resource), source: Box::new(source) };
    let admin = match reach(ctx, &namespace, cluster).await.map_err(read)? {
        Reach::Ready { admin, .. } => admin,
        waiting => {
            let stalled = |reason: &str, message| Health::Stalled { reason: reason.into(), message };
            let health = match waiting {
                Reach::Missing => {
                    stalled("ClusterNotFound", format!("Cluster {cluster} does not exist in namespace {namespace}"))
                }
                Reach::Deleting => stalled("ClusterDeleting", format!("Cluster {cluster} is being deleted")),
                Reach::NotReady(why) => Health::Reconciling { reason: "ClusterNotReady".into(), message: why },
                Reach::Ready { .. } => unreachable!("handled above"),
            };
            finish(ctx, resource, &previous, previous.clone(), health).await?;
            return Ok(Some(shared.waits.retry_in(&key)));
        }
    };
    shared.waits.succeeded(&key);

    let failed = |source| Error::Admin { subject: format!("group {id}"), source: Box::new(source) };
    let mut seen = admin.group(&id).await.map_err(failed)?;
    let mut last_reset = previous.last_reset.clone();
    let step = reset_step(resource.spec.reset.as_ref(), last_reset.as_ref(), seen.as_ref());
    let mut health = health(&id, &step, seen.as_ref());
    match carry_out(ctx, resource, &admin, &id, &step, seen.as_ref(), &previous, &mut last_reset).await {
        Ok(true) => {
            seen = admin.group(&id).await.map_err(failed)?;
            health = super::plan::health(&id, &ResetStep::Nothing, seen.as_ref());
        }
        Ok(false) => {}
        Err(Waiting(why)) => {
            health = Health::Reconciling { reason: "WaitingForEmptyGroup".into(), message: why };
        }
        Err(Missing(why)) => {
            // Most often a Topic applied together with this group and not created yet.
            health = Health::Reconciling { reason: "WaitingForTopic".into(), message: why };
        }
        Err(Refused(why)) => {
            let reset = resource.spec.reset.as_ref().map_or("", |r| r.id.as_str());
            health = Health::Stalled {
                reason: "ResetRefused".into(),
                message: format!("the brokers refused reset {reset} of group {id}: {why}"),
            };
        }
        Err(Failed(e)) => return Err(e),
    }
    let (state, members, total_lag, offsets) = lag_status(seen.as_ref());
    let next = ConsumerGroupStatus {
        observed_generation: resource.metadata.generation,
        conditions: previous.conditions.clone(),
        state: Some(state),
        members: Some(members),
        total_lag: Some(total_lag),
        offsets,
        last_reset,
    };
    let busy = matches!(health, Health::Reconciling { .. });
    finish(ctx, resource, &previous, next, health).await?;
    Ok(Some(if busy { ctx.settings.busy_requeue.max(Duration::from_secs(5)) } else { refresh(resource) }))
}

enum ResetFailure {
    /// A member joined while the reset was being applied: the brokers' message.
    Waiting(String),
    /// A topic of the reset does not exist (yet): the brokers' message.
    Missing(String),
    /// The brokers refused (members joined meanwhile, a partition the topic lacks, ...):
    /// their message.
    Refused(String),
    Failed(Error),
}
use ResetFailure::{Failed, Missing, Refused, Waiting};

/// Carries out a Compute or Commit step, keeping `last_reset` as the status has it (the
/// record written before the commits stays when a commit fails, so the next attempt commits
/// the same offsets); true once every offset is committed.
#[allow(clippy::too_many_arguments)]
async fn carry_out(
    ctx: &Context,
    resource: &ConsumerGroup,
    admin: &Admin,
    id: &str,
    step: &ResetStep,
    seen: Option<&GroupView>,
    previous: &ConsumerGroupStatus,
    last_reset: &mut Option<ResetResult>,
) -> Result<bool, ResetFailure> {
    let Some(reset) = resource.spec.reset.as_ref() else { return Ok(false) };
    let call_failed = |e: AdminError| match e.refusal() {
        Some(status) if status.code() == tonic::Code::FailedPrecondition => {
            Waiting(format!("reset {} waits: {}", reset.id, status.message()))
        }
        Some(status) if e.not_found() => Missing(format!("reset {} waits: {}", reset.id, status.message())),
        Some(status) => Refused(status.message().to_string()),
        None => Failed(Error::Admin { subject: format!("group {id}"), source: Box::new(e) }),
    };
    let offsets: Vec<ResetOffset> = match step {
        ResetStep::Compute(calls) => {
            let mut after = Vec::new();
            for call in calls {
                after.extend(admin.reset_offsets(id, call, true).await.map_err(call_failed)?);
            }
            let offsets = reset_offsets(seen, &after);
            // Recorded before they are committed: a reconcile that stops halfway resumes
            // with these offsets, never new ones.
            let record = ResetResult { id: reset.id.clone(), applied_at: None, offsets: offsets.clone() };
            let next = ConsumerGroupStatus { last_reset: Some(record.clone()), ..previous.clone() };
            let namespace = resource.namespace().unwrap_or_default();
            publish::status::<ConsumerGroup, _>(ctx, &namespace, &resource.name_any(), previous, &next).await.map_err(
                |source| Failed(Error::Status { resource: Error::resource(resource), source: Box::new(source) }),
            )?;
            *last_reset = Some(record);
            offsets
        }
        ResetStep::Commit(offsets) => offsets.clone(),
        _ => return Ok(false),
    };
    for call in commit_calls(&offsets) {
        admin.reset_offsets(id, &call, false).await.map_err(call_failed)?;
    }
    ctx.metrics.step("ConsumerGroup", "Reset");
    let moved: Vec<String> = offsets
        .iter()
        .take(12)
        .map(|o| {
            let before = o.before.map_or("none".to_string(), |b| b.to_string());
            format!("{}-{} {before} → {}", o.topic, o.partition, o.after)
        })
        .collect();
    let more = if offsets.len() > 12 { format!(" and {} more", offsets.len() - 12) } else { String::new() };
    let note = format!("reset {} of group {id} applied: {}{more}", reset.id, moved.join(", "));
    publish::event(ctx, resource, EventType::Normal, "ResetApplied", "Reset", note).await;
    *last_reset = Some(ResetResult { id: reset.id.clone(), applied_at: Some(Timestamp::now().to_string()), offsets });
    Ok(true)
}

/// Writes `next` with the conditions for `health`, and a Warning Event when the resource
/// newly stalls.
async fn finish(
    ctx: &Context,
    resource: &ConsumerGroup,
    previous: &ConsumerGroupStatus,
    mut next: ConsumerGroupStatus,
    health: Health,
) -> Result<(), Error> {
    let was = previous.conditions.iter().find(|c| c.type_ == crate::conditions::READY);
    let changed = was.is_none_or(|c| c.reason != health.reason() || c.message != health.message());
    match &health {
        Health::Stalled { reason, message } if changed => {
            publish::event(ctx, resource, EventType::Warning, reason, "Reconcile", message.clone()).await;
        }
        Health::Reconciling { reason, message } if changed && reason == "WaitingForEmptyGroup" => {
            publish::event(ctx, resource, EventType::Normal, reason, "Reset", message.clone()).await;
        }
        _ => {}
    }
    next.observed_generation = resource.metadata.generation;
    next.conditions = conditions(&health, resource.metadata.generation, &previous.conditions, Timestamp::now());
    let namespace = resource.namespace().unwrap_or_default();
    publish::status::<ConsumerGroup, _>(ctx, &namespace, &resource.name_any(), previous, &next)
        .await
        .map_err(|source| Error::Status { resource: Error::resource(resource), source: Box::new(source) })
}

/// `kubectl delete consumergroup`: deletes the group and its offsets unless
/// `deletionPolicy: Retain`, or the Cluster or the namespace is going away. A group with
/// members cannot be deleted (Kafka refuses); the deletion waits, and Events say why.
async fn cleanup(resource: &ConsumerGroup, shared: &Shared) -> Result<Action, Error> {
    let ctx = &shared.ctx;
    let namespace = resource.namespace().ok_or(Error::NoNamespace)?;
    let id = group_id(resource);
    let cluster = &resource.spec.cluster_ref.name;
    let read = |what| {
        let resource = Error::resource(resource);
        move |source| Error::Read { what, resource, source: Box::new(source) }
    };
    let released = |note: String| async move {
        publish::event(ctx, resource, EventType::Normal, "Released", "Delete", note).await;
        Ok::<_, Error>(Action::await_change())
    };
    if resource.spec.deletion_policy == DeletionPolicy::Retain {
        return released(format!("deletionPolicy Retain: group {id} and its offsets stay")).await;
    }
    let all = shared.groups.state();
    if crate::claim::named_by_another(resource, all.iter().map(|g| &**g), names) {
        return released(format!("another ConsumerGroup names group {id}: left to it")).await;
    }
    if namespace_terminating(ctx, &namespace).await.map_err(read("its namespace"))? {
        return released(format!("namespace {namespace} is being deleted: group {id} left with its Cluster")).await;
    }
    match reach(ctx, &namespace, cluster).await.map_err(read("its Cluster"))? {
        Reach::Missing | Reach::Deleting => {
            released(format!("Cluster {cluster} is gone or going: nothing to delete group {id} from")).await
        }
        Reach::NotReady(why) => Err(Error::CannotDelete { subject: format!("group {id}"), why }),
        Reach::Ready { admin, .. } => match admin.delete_group(&id).await {
            Ok(existed) => {
                ctx.metrics.step("ConsumerGroup", "Delete");
                let what = if existed { "deleted" } else { "already gone:" };
                let note = format!("{what} group {id} and its committed offsets (deletionPolicy Delete)");
                publish::event(ctx, resource, EventType::Normal, "Deleted", "Delete", note).await;
                Ok(Action::await_change())
            }
            Err(e) => match e.refusal() {
                Some(status) => {
                    Err(Error::CannotDelete { subject: format!("group {id}"), why: status.message().to_string() })
                }
                None => Err(Error::Admin { subject: format!("group {id}"), source: Box::new(e) }),
            },
        },
    }
}
