//! The status phase (pure): what `kubectl get clusters` and kstatus readers see — the
//! conditions, ready brokers, the active controller, unhealthy partitions, bootstrap servers,
//! the operation in progress — from the plan and what was observed.

use k8s_openapi::jiff::Timestamp;

use crate::conditions::{self, Health};
use crate::crd::cluster::{ClusterSpec, ClusterStatus, OperationKind};

use super::names::Names;
use super::observed::Observed;
use super::plan::{Outcome, Plan};

/// What the status is made from.
#[derive(Debug, Clone, Copy)]
pub struct StatusInputs<'a> {
    pub spec: &'a ClusterSpec,
    pub generation: Option<i64>,
    pub names: &'a Names,
    pub observed: &'a Observed,
    /// The plan, or why the spec cannot be carried out (reason, message).
    pub plan: Result<&'a Plan, (&'a str, &'a str)>,
    pub previous: &'a ClusterStatus,
    /// The StatefulSet is about to get a new pod template (a rolling restart will follow).
    pub template_pending: bool,
    pub now: Timestamp,
}

/// How the cluster is, for the three conditions.
pub fn health(i: &StatusInputs<'_>) -> Health {
    let plan = match i.plan {
        Err((reason, why)) => return Health::Stalled { reason: reason.into(), message: why.to_string() },
        Ok(plan) => plan,
    };
    if let Outcome::Blocked { reason, message } = &plan.outcome {
        return Health::Stalled { reason: (*reason).to_string(), message: message.clone() };
    }
    if let Some(op) = &plan.operation {
        let reason = match op.kind {
            OperationKind::ScaleUp => "ScalingUp",
            OperationKind::ScaleDown => "ScalingDown",
            OperationKind::RollingRestart => "RollingRestart",
            OperationKind::ReplaceBroker => "ReplacingBroker",
            OperationKind::RefillBroker => "RefillingBroker",
        };
        let message = match &plan.outcome {
            Outcome::Progressing(m) => m.clone(),
            _ => op.progress.clone().unwrap_or_default(),
        };
        return Health::Reconciling { reason: reason.into(), message };
    }
    if let Outcome::Progressing(message) = &plan.outcome {
        let reason = if i.observed.statefulset.is_none() { "Creating" } else { "Progressing" };
        return Health::Reconciling { reason: reason.into(), message: message.clone() };
    }
    if i.template_pending {
        return Health::Reconciling { reason: "Progressing".into(), message: "applying a new pod template".into() };
    }
    if i.observed.statefulset.as_ref().is_some_and(|s| !s.status_current) {
        return Health::Reconciling {
            reason: "Progressing".into(),
            message: "waiting for the StatefulSet controller to see the new spec".into(),
        };
    }
    let not_ready: Vec<String> = (0..i.spec.replicas)
        .filter(|id| !i.observed.pods.get(id).is_some_and(|p| p.ready && !p.terminating))
        .map(|id| id.to_string())
        .collect();
    if !not_ready.is_empty() {
        return Health::Reconciling {
            reason: "BrokersNotReady".into(),
            message: format!("brokers not ready: {}", not_ready.join(", ")),
        };
    }
    let Some(view) = &i.observed.brokers else {
        return Health::Reconciling {
            reason: "BrokersUnreachable".into(),
            message: "no broker answered the admin API".into(),
        };
    };
    if view.offline > 0 {
        return Health::Reconciling {
            reason: "OfflinePartitions".into(),
            message: format!("{} partitions have no live leader", view.offline),
        };
    }
    Health::Ready {
        reason: "Ready".into(),
        message: format!(
            "{} brokers ready; active controller {}; {} partitions, {} under-replicated",
            i.spec.replicas,
            view.controller.map_or_else(|| "none".to_string(), |c| c.to_string()),
            view.partitions,
            view.under_replicated
        ),
    }
}

/// The status to write.
pub fn status(i: &StatusInputs<'_>) -> ClusterStatus {
    let health = health(i);
    let observed = i.observed;
    let view = observed.brokers.as_ref();
    let ready_replicas =
        i32::try_from(observed.pods.values().filter(|p| p.ready && !p.terminating).count()).unwrap_or(0);
    let (operation, brokers) = match i.plan {
        Ok(plan) => (plan.operation.clone(), plan.brokers.clone()),
        Err(_) => (i.previous.operation.clone(), i.previous.brokers.clone()),
    };
    let sts = observed.statefulset.as_ref();
    let settled = matches!(health, Health::Ready { .. });
    ClusterStatus {
        observed_generation: i.generation,
        conditions: conditions::conditions(&health, i.generation, &i.previous.conditions, i.now),
        replicas: sts.map_or(0, |s| s.replicas),
        ready_replicas,
        brokers_ready: Some(format!("{ready_replicas}/{}", i.spec.replicas)),
        selector: Some(i.names.selector_string()),
        active_controller: view.and_then(|v| v.controller).or(i.previous.active_controller),
        under_replicated_partitions: view.map(|v| v.under_replicated).or(i.previous.under_replicated_partitions),
        offline_partitions: view.map(|v| v.offline).or(i.previous.offline_partitions),
        bootstrap_servers: Some(i.names.bootstrap_servers(i.spec.listeners.kafka)),
        brokers,
        operation,
        current_revision: if settled {
            sts.and_then(|s| s.update_revision.clone()).or(i.previous.current_revision.clone())
        } else {
            i.previous.current_revision.clone()
        },
    }
}
