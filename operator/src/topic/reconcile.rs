//! The reconcile of one `Topic`: check the spec and who manages the Kafka topic (pure), reach
//! the Cluster, describe the topic, make the one change [`diff`] asks for (create or alter,
//! through the admin API), write the status from the topic as the brokers answered after the
//! change, and announce what was done in Events. Deleting the resource goes through a
//! finalizer that honours `deletionPolicy` and lets go when the Cluster or the namespace goes.

use std::sync::Arc;

use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::runtime::finalizer::Event as Finalizer;
use kube::runtime::reflector::Store;
use kube::ResourceExt;

use crate::admin::{Admin, AdminError};
use crate::cluster_ref::{namespace_terminating, reach, Reach};
use crate::conditions::{conditions, Health};
use crate::context::Context;
use crate::crd::topic::{DeletionPolicy, Topic, TopicStatus};
use crate::failures::{self, Failures};
use crate::publish;

use super::plan::{claimed_by, diff, health, kafka_name, validate, Change, TopicView};

/// The finalizer that stands between `kubectl delete topic` and the Kafka topic.
pub const FINALIZER: &str = "strom.dev/topic";

/// What the Topic controller's reconciles share.
#[derive(Clone)]
pub struct Shared {
    pub ctx: Arc<Context>,
    /// Every Topic the controller watches (to find two naming the same Kafka topic).
    pub topics: Store<Topic>,
    /// Waits for a Cluster that is missing or not ready, per Topic (for the backoff).
    pub waits: Failures,
}

pub use crate::finalized::{Error, ReconcileError};

/// The controller's entry point.
pub async fn reconcile(topic: Arc<Topic>, shared: Arc<Shared>) -> Result<Action, ReconcileError> {
    let cluster = topic.spec.cluster_ref.name.clone();
    crate::finalized::run(&shared.ctx, FINALIZER, topic, &cluster, |event| async {
        match event {
            Finalizer::Apply(topic) => apply(&topic, &shared).await,
            Finalizer::Cleanup(topic) => cleanup(&topic, &shared).await,
        }
    })
    .await
}

async fn apply(topic: &Topic, shared: &Shared) -> Result<Action, Error> {
    let ctx = &shared.ctx;
    let namespace = topic.namespace().ok_or(Error::NoNamespace)?;
    let name = kafka_name(topic);
    let key = failures::key(topic);
    let previous = topic.status.clone().unwrap_or_default();
    let refuse = |reason: &str, why: String| Health::Stalled { reason: reason.into(), message: why };

    if let Err(why) = validate(&name) {
        finish(ctx, topic, &previous, None, refuse("InvalidSpec", why)).await?;
        return Ok(Action::await_change());
    }
    let all = shared.topics.state();
    if let Some(other) = claimed_by(topic, all.iter().map(|t| &**t)) {
        let why = format!(
            "Kafka topic {name} of Cluster {} is managed by Topic {other}; this one changes nothing",
            topic.spec.cluster_ref.name
        );
        finish(ctx, topic, &previous, None, refuse("TopicClaimed", why)).await?;
        return Ok(Action::requeue(ctx.settings.resync));
    }
    let cluster = &topic.spec.cluster_ref.name;
    let read = |what| {
        let topic = Error::resource(topic);
        move |source| Error::Read { what, resource: topic, source: Box::new(source) }
    };
    let admin = match reach(ctx, &namespace, cluster).await.map_err(read("its Cluster"))? {
        Reach::Ready { admin, .. } => admin,
        waiting => {
            let health = match waiting {
                Reach::Missing => {
                    refuse("ClusterNotFound", format!("Cluster {cluster} does not exist in namespace {namespace}"))
                }
                Reach::Deleting => refuse("ClusterDeleting", format!("Cluster {cluster} is being deleted")),
                Reach::NotReady(why) => Health::Reconciling { reason: "ClusterNotReady".into(), message: why },
                Reach::Ready { .. } => unreachable!("handled above"),
            };
            finish(ctx, topic, &previous, None, health).await?;
            return Ok(Action::requeue(shared.waits.retry_in(&key)));
        }
    };
    shared.waits.succeeded(&key);

    let failed = |source| Error::Admin { subject: format!("topic {name}"), source: Box::new(source) };
    let observed = admin.topic(&name).await.map_err(failed)?;
    let existed = observed.is_some();
    let (after, refused) = match change(ctx, topic, &admin, &name, &previous, observed.as_ref()).await {
        Ok(after) => (after, None),
        // NotFound: the topic went between the describe and the change; look again.
        Err(e) => match e.refusal().filter(|_| !e.not_found()) {
            Some(status) => (observed, Some(status.message().to_string())),
            None => return Err(failed(e)),
        },
    };
    let remaining = diff(&topic.spec, after.as_ref());
    let health = match refused {
        Some(why) => refuse("Refused", format!("the brokers refused the change to topic {name}: {why}")),
        None => health(&name, &topic.spec, &remaining),
    };
    let held = existed && previous.topic_id.is_none() && !matches!(health, Health::Stalled { .. });
    if let (true, Some(view)) = (held, &after) {
        let note = format!("adopted the existing topic {name} (id {})", view.id);
        publish::event(ctx, topic, EventType::Normal, "Adopted", "Reconcile", note).await;
    }
    let requeue = match &health {
        Health::Reconciling { .. } => ctx.settings.busy_requeue,
        _ => ctx.settings.resync,
    };
    finish(ctx, topic, &previous, after.as_ref(), health).await?;
    Ok(Action::requeue(requeue))
}

/// Makes the change the topic needs; the topic as the brokers have it afterwards.
async fn change(
    ctx: &Context,
    topic: &Topic,
    admin: &Admin,
    name: &str,
    previous: &TopicStatus,
    observed: Option<&TopicView>,
) -> Result<Option<TopicView>, AdminError> {
    match diff(&topic.spec, observed).change {
        Change::Nothing => Ok(observed.cloned()),
        Change::Create { partitions, replication_factor, configs } => {
            let created = admin.create_topic(name, partitions, replication_factor, &configs).await?;
            ctx.metrics.step("Topic", "Create");
            let note = format!(
                "created topic {name}: {partitions} partitions, replication factor {replication_factor}, {} config value(s)",
                configs.len()
            );
            publish::event(ctx, topic, EventType::Normal, "Created", "Reconcile", note).await;
            Ok(Some(created))
        }
        Change::Alter(alter) => {
            let have = observed.cloned().unwrap_or_else(|| unreachable!("an alteration needs a topic"));
            let what = alter.describe(&have);
            let altered = admin.alter_topic(name, &alter).await?;
            ctx.metrics.step("Topic", "Alter");
            // The spec did not change since the topic was last in sync: someone changed the
            // topic outside Git, and this puts it back.
            let was_ready = previous.observed_generation == topic.metadata.generation
                && previous.conditions.iter().any(|c| c.type_ == crate::conditions::READY && c.status == "True");
            let (reason, note) = if was_ready {
                ("DriftReverted", format!("topic {name} was changed outside its Topic resource; put back: {what}"))
            } else {
                ("Updated", format!("updated topic {name}: {what}"))
            };
            publish::event(ctx, topic, EventType::Normal, reason, "Reconcile", note).await;
            Ok(Some(altered))
        }
    }
}

/// Writes the status for `health` and the topic as seen, and a Warning Event when the
/// resource newly stalls.
async fn finish(
    ctx: &Context,
    topic: &Topic,
    previous: &TopicStatus,
    seen: Option<&TopicView>,
    health: Health,
) -> Result<(), Error> {
    let was = previous.conditions.iter().find(|c| c.type_ == crate::conditions::READY);
    if let Health::Stalled { reason, message } = &health {
        if was.is_none_or(|c| c.reason != *reason || c.message != *message) {
            publish::event(ctx, topic, EventType::Warning, reason, "Reconcile", message.clone()).await;
        }
    }
    let next = TopicStatus {
        observed_generation: topic.metadata.generation,
        conditions: conditions(&health, topic.metadata.generation, &previous.conditions, Timestamp::now()),
        // Recorded once the Topic has had its way (created or adopted and not refused): a
        // Topic whose first apply is refused never held the topic, and its deletion must
        // not delete an application's topic of that name.
        topic_id: match (seen, &previous.topic_id, &health) {
            (Some(t), Some(_), _) => Some(t.id.clone()),
            (Some(t), None, Health::Ready { .. } | Health::Reconciling { .. }) => Some(t.id.clone()),
            (_, previous, _) => previous.clone(),
        },
        partitions: seen.map(|t| t.partitions).or(previous.partitions),
        replication_factor: match seen {
            Some(t) => (t.replication_factor > 0).then_some(t.replication_factor),
            None => previous.replication_factor,
        },
        reassigning_partitions: seen.map(|t| t.reassigning).filter(|n| *n > 0),
    };
    let namespace = topic.namespace().unwrap_or_default();
    publish::status::<Topic, _>(ctx, &namespace, &topic.name_any(), previous, &next)
        .await
        .map_err(|source| Error::Status { resource: Error::resource(topic), source: Box::new(source) })
}

/// `kubectl delete topic`: deletes the Kafka topic unless `deletionPolicy: Retain`, another
/// Topic names it (manages it, or takes over from this one: a Topic renamed in Git), this
/// Topic never had it (created or adopted: `status.topicId`, and the topic still has that id),
/// or the Cluster or the namespace is going away (then there is nothing to keep consistent,
/// and holding on would leave the namespace in Terminating).
async fn cleanup(topic: &Topic, shared: &Shared) -> Result<Action, Error> {
    let ctx = &shared.ctx;
    let namespace = topic.namespace().ok_or(Error::NoNamespace)?;
    let name = kafka_name(topic);
    let cluster = &topic.spec.cluster_ref.name;
    let read = |what| {
        let topic = Error::resource(topic);
        move |source| Error::Read { what, resource: topic, source: Box::new(source) }
    };
    let note = |n: String| async move {
        publish::event(ctx, topic, EventType::Normal, "Released", "Delete", n).await;
        Ok(Action::await_change())
    };
    if topic.spec.deletion_policy == DeletionPolicy::Retain {
        return note(format!("deletionPolicy Retain: topic {name} stays in Cluster {cluster}")).await;
    }
    let all = shared.topics.state();
    if crate::claim::named_by_another(topic, all.iter().map(|t| &**t), super::plan::names) {
        return note(format!("another Topic names topic {name}: left to it")).await;
    }
    let Some(id) = topic.status.as_ref().and_then(|s| s.topic_id.clone()) else {
        return note(format!("this Topic never created or adopted topic {name}: nothing to delete")).await;
    };
    if namespace_terminating(ctx, &namespace).await.map_err(read("its namespace"))? {
        return note(format!("namespace {namespace} is being deleted: topic {name} left with its Cluster")).await;
    }
    match reach(ctx, &namespace, cluster).await.map_err(read("its Cluster"))? {
        Reach::Missing | Reach::Deleting => {
            note(format!("Cluster {cluster} is gone or going: nothing to delete topic {name} from")).await
        }
        Reach::NotReady(why) => Err(Error::CannotDelete { subject: format!("topic {name}"), why }),
        Reach::Ready { admin, .. } => {
            let failed = |e| Error::Admin { subject: format!("topic {name}"), source: Box::new(e) };
            if let Some(now) = admin.topic(&name).await.map_err(failed)?.filter(|now| now.id != id) {
                let n =
                    format!("topic {name} is not the one this Topic had (id {} now, {id} before): left alone", now.id);
                return note(n).await;
            }
            let existed = admin.delete_topic(&name).await.map_err(failed)?;
            ctx.metrics.step("Topic", "Delete");
            let what = if existed { "deleted" } else { "already gone:" };
            let n = format!("{what} topic {name} (deletionPolicy Delete)");
            publish::event(ctx, topic, EventType::Normal, "Deleted", "Delete", n).await;
            Ok(Action::await_change())
        }
    }
}
