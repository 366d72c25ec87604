//! The plan phase (pure): from the spec, the status the operator wrote last time and what it
//! observes now, the next step of the cluster's one multi-step operation — scale up, scale
//! down, rolling restart, replace a lost broker, refill a returned one — or the decision to
//! start one. Everything an operation needs to resume is in `status.operation`, so a
//! restarted operator (or the other replica, after a leader election) carries on.
//!
//! - Scale up: grow the StatefulSet; once the new brokers are registered and live, move
//!   replicas onto them (the brokers' balancer, in rounds of at most `maxConcurrentMoves`).
//! - Scale down: refused while fewer brokers than the largest replication factor would
//!   remain; otherwise drain the highest ids (move every replica off them), then shrink the
//!   StatefulSet, then unregister the brokers once their pods are gone.
//! - Rolling restart (the pod template changed): one broker at a time, the active controller
//!   last, a broker that is down already first; the next only when every broker is Ready and
//!   no partition is under-replicated or offline. Deleting the pod makes the broker hand its
//!   leaderships over before it stops (its controlled shutdown on SIGTERM).
//! - Failover: a broker down longer than `failover.replaceAfter` has its replicas moved to
//!   the others; when it is back, replicas are moved onto it again.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::crd::cluster::{BrokerStatus, ClusterSpec, ClusterStatus, Operation, OperationKind, Phase};

use super::observed::{BrokerView, Observed, Planned, StatefulSetView};
use super::validate::Valid;

/// How long a broker that is registered and live must have been not Ready before a rolling
/// restart treats it as down (and restarts it ahead of the cluster's health).
const DOWN_FOR_RESTART: std::time::Duration = std::time::Duration::from_secs(30);

/// What the plan is made from.
#[derive(Debug, Clone, Copy)]
pub struct Inputs<'a> {
    pub spec: &'a ClusterSpec,
    pub valid: &'a Valid,
    /// The status the operator wrote last (its `operation` and per-broker failover state).
    pub previous: &'a ClusterStatus,
    pub observed: &'a Observed,
    pub now: Timestamp,
}

/// The decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The StatefulSet's size to apply.
    pub statefulset_replicas: i32,
    /// The effect to carry out now (at most one).
    pub step: Step,
    /// The operation to record in status (None: none in progress).
    pub operation: Option<Operation>,
    /// Per-broker status, with failover bookkeeping (`downSince`, `replaced`).
    pub brokers: Vec<BrokerStatus>,
    pub outcome: Outcome,
}

/// An effect on the cluster, carried out by the reconciler through the admin API or the
/// Kubernetes API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Nothing,
    /// Start moves with the brokers' balancer.
    Rebalance {
        mode: RebalanceMode,
        brokers: Vec<i32>,
        throttle_bytes_per_sec: u64,
        max_moves: i32,
    },
    /// Stop the moves in flight (a scale-down the spec no longer asks for).
    CancelRebalance,
    /// Remove brokers (drained, their pods gone) from the cluster's metadata.
    Unregister(Vec<i32>),
    /// Delete broker `id`'s pod (uid as precondition); the StatefulSet controller recreates it
    /// from the new template.
    Restart {
        id: i32,
        pod: String,
        uid: String,
    },
}

/// Which rebalance: onto some brokers, or off them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RebalanceMode {
    AddBrokers,
    DrainBrokers,
}

/// Where the cluster stands after this step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing to do.
    Settled,
    /// Work in progress or awaited; what for.
    Progressing(String),
    /// Cannot go on until the spec or the cluster changes.
    Blocked { reason: &'static str, message: String },
}

/// Those of `ids` the brokers know (an unregistered broker holds nothing, and the admin API
/// refuses to plan for it).
pub fn registered(view: &BrokerView, ids: &[i32]) -> Vec<i32> {
    ids.iter().copied().filter(|id| view.brokers.contains_key(id)).collect()
}

/// The rebalance whose dry run the plan needs observed for `op` (mode and brokers).
pub fn wanted_rebalance(op: &Operation) -> Option<(RebalanceMode, Vec<i32>)> {
    if op.phase != Phase::MovingReplicas {
        return None;
    }
    let mode = match op.kind {
        OperationKind::ScaleUp | OperationKind::RefillBroker => RebalanceMode::AddBrokers,
        OperationKind::ScaleDown | OperationKind::ReplaceBroker => RebalanceMode::DrainBrokers,
        OperationKind::RollingRestart => return None,
    };
    Some((mode, op.brokers.clone()))
}

/// The next step.
pub fn plan(i: &Inputs<'_>) -> Plan {
    let brokers = broker_statuses(i);
    let Some(sts) = &i.observed.statefulset else {
        return Plan {
            statefulset_replicas: i.spec.replicas,
            step: Step::Nothing,
            operation: None,
            brokers,
            outcome: Outcome::Progressing("creating the brokers".into()),
        };
    };
    let mut plan = Plan {
        statefulset_replicas: sts.replicas,
        step: Step::Nothing,
        operation: None,
        brokers,
        outcome: Outcome::Settled,
    };
    match i.previous.operation.clone() {
        Some(op) => continue_operation(i, sts, op, &mut plan),
        None => start_operation(i, sts, &mut plan),
    }
    plan
}

fn list(ids: &[i32]) -> String {
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(", ")
}

fn operation(i: &Inputs<'_>, kind: OperationKind, from: i32, to: i32, phase: Phase, brokers: Vec<i32>) -> Operation {
    Operation {
        kind,
        from_replicas: from,
        to_replicas: to,
        phase,
        brokers,
        started_at: i.now.to_string(),
        progress: None,
    }
}

/// No operation in progress: the first thing that differs from the spec starts one.
fn start_operation(i: &Inputs<'_>, sts: &StatefulSetView, plan: &mut Plan) {
    let (target, current) = (i.spec.replicas, sts.replicas);
    if target > current {
        let op = operation(
            i,
            OperationKind::ScaleUp,
            current,
            target,
            Phase::WaitingForBrokers,
            (current..target).collect(),
        );
        plan.statefulset_replicas = target;
        plan.outcome =
            Outcome::Progressing(format!("scaling up to {target} brokers: starting brokers {}", list(&op.brokers)));
        plan.operation = Some(op);
        return;
    }
    if target < current {
        let Some(view) = &i.observed.brokers else {
            plan.outcome = Outcome::Progressing("waiting for the brokers to answer before scaling down".into());
            return;
        };
        if target < view.max_replication_factor {
            plan.outcome = Outcome::Blocked {
                reason: "ScaleDownRefused",
                message: format!(
                    "cannot scale down to {target} brokers: a topic has replication factor {} and needs that many brokers; \
                     the cluster keeps {current} brokers",
                    view.max_replication_factor
                ),
            };
            return;
        }
        let op =
            operation(i, OperationKind::ScaleDown, current, target, Phase::MovingReplicas, (target..current).collect());
        plan.outcome =
            Outcome::Progressing(format!("scaling down to {target} brokers: draining brokers {}", list(&op.brokers)));
        plan.operation = Some(op);
        return;
    }
    if !stale_pods(i, sts).is_empty() {
        let op = operation(i, OperationKind::RollingRestart, current, current, Phase::Restarting, stale_pods(i, sts));
        continue_operation(i, sts, op, plan);
        return;
    }
    if start_replacement(i, current, plan) {
        return;
    }
    if let Some(b) = plan.brokers.iter().find(|b| b.replaced && i.observed.broker_up(b.id)) {
        let id = b.id;
        let op = operation(i, OperationKind::RefillBroker, current, current, Phase::MovingReplicas, vec![id]);
        plan.outcome = Outcome::Progressing(format!("broker {id} is back: moving replicas onto it"));
        plan.operation = Some(op);
    }
}

/// A broker down longer than `failover.replaceAfter` while it holds replicas, and enough live
/// brokers besides it to take them (as many as the largest replication factor): starts
/// moving its replicas away. Without that room the replacement could never finish, so it
/// is not started; the broker stays reported as down.
fn start_replacement(i: &Inputs<'_>, current: i32, plan: &mut Plan) -> bool {
    let (Some(after), Some(view)) = (i.valid.replace_after, &i.observed.brokers) else { return false };
    let lost = plan
        .brokers
        .iter()
        .find(|b| !b.replaced && down_for(b, i.now).is_some_and(|d| d >= after) && i.observed.replicas_on(b.id) > 0);
    let Some(id) = lost.map(|b| b.id) else { return false };
    let others = i32::try_from(view.brokers.iter().filter(|(b, info)| **b != id && info.live).count()).unwrap_or(0);
    if others < view.max_replication_factor {
        return false;
    }
    let op = operation(i, OperationKind::ReplaceBroker, current, current, Phase::MovingReplicas, vec![id]);
    plan.outcome =
        Outcome::Progressing(format!("broker {id} has been down longer than {after:?}: moving its replicas away"));
    plan.operation = Some(op);
    if let Some(b) = plan.brokers.iter_mut().find(|b| b.id == id) {
        b.replaced = true;
    }
    true
}

fn continue_operation(i: &Inputs<'_>, sts: &StatefulSetView, mut op: Operation, plan: &mut Plan) {
    match op.kind {
        OperationKind::ScaleUp => {
            plan.statefulset_replicas = op.to_replicas;
            if op.phase == Phase::WaitingForBrokers && i.spec.replicas < op.to_replicas {
                // The spec gave up on brokers that never registered (a pod that cannot be
                // scheduled, a bad image): stop waiting; a scale-down follows from the spec.
                plan.statefulset_replicas = sts.replicas;
                plan.outcome = Outcome::Progressing(format!(
                    "scale-up to {} abandoned: spec.replicas is now {}",
                    op.to_replicas, i.spec.replicas
                ));
                plan.operation = None;
                return;
            }
            if op.phase == Phase::WaitingForBrokers {
                let registered = op
                    .brokers
                    .iter()
                    .filter(|id| i.observed.brokers.as_ref().is_some_and(|v| v.brokers.get(id).is_some_and(|b| b.live)))
                    .count();
                if registered < op.brokers.len() {
                    op.progress = Some(format!("{registered} of {} new brokers registered", op.brokers.len()));
                    plan.outcome =
                        Outcome::Progressing(format!("waiting for brokers {} to register", list(&op.brokers)));
                    plan.operation = Some(op);
                    return;
                }
                if !i.spec.rebalance.on_scale {
                    return finish(plan, "scaled up (rebalance.onScale is off: no replicas moved)");
                }
                op.phase = Phase::MovingReplicas;
                op.progress = None;
                plan.outcome = Outcome::Progressing(format!("moving replicas onto brokers {}", list(&op.brokers)));
                plan.operation = Some(op);
                return;
            }
            move_replicas(i, op, plan, false);
        }
        OperationKind::ScaleDown => continue_scale_down(i, op, plan),
        OperationKind::RollingRestart => {
            // A broker lost longer than replaceAfter comes first: the restart waits for every
            // broker to be ready, which a lost one never is. The restart resumes afterwards
            // (its pods are still on the old template).
            if start_replacement(i, sts.replicas, plan) {
                return;
            }
            continue_restart(i, sts, op, plan);
        }
        OperationKind::ReplaceBroker => {
            let id = op.brokers.first().copied().unwrap_or(-1);
            let moving = i.observed.brokers.as_ref().is_some_and(|v| v.reassigning > 0);
            let moot = i.observed.broker_up(id) || i.valid.replace_after.is_none() || i.spec.replicas != sts.replicas;
            if moot && !moving {
                // The broker is back (or the spec changed): nothing left to replace; what was
                // moved comes back to it as a refill.
                plan.operation = None;
                plan.outcome = Outcome::Progressing(format!("replacing broker {id} no longer needed"));
                return;
            }
            move_replicas(i, op, plan, true);
        }
        OperationKind::RefillBroker => {
            let ids = op.brokers.clone();
            move_replicas(i, op, plan, false);
            if plan.operation.is_none() {
                for b in plan.brokers.iter_mut().filter(|b| ids.contains(&b.id)) {
                    b.replaced = false;
                }
            }
        }
    }
}

fn finish(plan: &mut Plan, _what: &str) {
    plan.operation = None;
    plan.outcome = Outcome::Settled;
}

/// The MovingReplicas phase: wait for moves in flight, start the next round, or finish.
/// `must_empty`: the operation's brokers must end up holding nothing (drain, replace).
fn move_replicas(i: &Inputs<'_>, mut op: Operation, plan: &mut Plan, must_empty: bool) {
    let Some(view) = &i.observed.brokers else {
        plan.outcome = Outcome::Progressing("waiting for the brokers to answer".into());
        plan.operation = Some(op);
        return;
    };
    let held: i32 = op.brokers.iter().map(|id| i.observed.replicas_on(*id)).sum();
    if view.reassigning > 0 {
        op.progress = Some(format!("{} partitions moving", view.reassigning));
        plan.outcome = Outcome::Progressing(format!("{} partitions moving", view.reassigning));
        plan.operation = Some(op);
        return;
    }
    match &i.observed.planned_moves {
        None => {
            plan.outcome = Outcome::Progressing("planning the moves".into());
            plan.operation = Some(op);
        }
        Some(Planned::Impossible(why)) => {
            plan.outcome = Outcome::Blocked { reason: "CannotMoveReplicas", message: why.clone() };
            plan.operation = Some(op);
        }
        Some(Planned::Moves(n)) if *n > 0 => {
            let mode = wanted_rebalance(&op).map_or(RebalanceMode::AddBrokers, |(m, _)| m);
            plan.step = Step::Rebalance {
                mode,
                brokers: registered(view, &op.brokers),
                throttle_bytes_per_sec: i.valid.throttle_bytes_per_sec,
                max_moves: i.spec.rebalance.max_concurrent_moves,
            };
            op.progress = Some(format!("starting {n} moves"));
            plan.outcome = Outcome::Progressing(format!("moving replicas of brokers {}", list(&op.brokers)));
            plan.operation = Some(op);
        }
        Some(Planned::Moves(_)) if must_empty && held > 0 => {
            plan.outcome = Outcome::Blocked {
                reason: "CannotMoveReplicas",
                message: format!(
                    "brokers {} still hold {held} replicas and the balancer finds no other broker for them \
                     (too few live brokers for the replication factors in use)",
                    list(&op.brokers)
                ),
            };
            plan.operation = Some(op);
        }
        Some(Planned::Moves(_)) => {
            if op.kind == OperationKind::ScaleDown {
                op.phase = Phase::Shrinking;
                op.progress = None;
                plan.statefulset_replicas = op.to_replicas;
                plan.outcome = Outcome::Progressing(format!("brokers {} drained; stopping them", list(&op.brokers)));
                plan.operation = Some(op);
            } else {
                finish(plan, "replicas moved");
            }
        }
    }
}

fn continue_scale_down(i: &Inputs<'_>, mut op: Operation, plan: &mut Plan) {
    match op.phase {
        Phase::MovingReplicas => {
            // Never grow the StatefulSet back: after a shrink, a drain again (replicas that
            // reached a leaving broker late) keeps the smaller size.
            plan.statefulset_replicas =
                op.from_replicas.min(i.observed.statefulset.as_ref().map_or(op.from_replicas, |s| s.replicas));
            if i.spec.replicas != op.to_replicas {
                // The spec changed its mind while replicas were moving off the leaving brokers:
                // stop the moves; the next plan starts from the new spec.
                let moving = i.observed.brokers.as_ref().is_some_and(|v| v.reassigning > 0);
                plan.step = if moving { Step::CancelRebalance } else { Step::Nothing };
                plan.outcome = Outcome::Progressing(format!(
                    "scale-down to {} cancelled: spec.replicas is now {}",
                    op.to_replicas, i.spec.replicas
                ));
                plan.operation = None;
                return;
            }
            move_replicas(i, op, plan, true);
        }
        Phase::Shrinking | Phase::Unregistering => {
            plan.statefulset_replicas = op.to_replicas;
            let left: Vec<i32> = i.observed.pods.keys().copied().filter(|o| *o >= op.to_replicas).collect();
            if !left.is_empty() {
                op.phase = Phase::Shrinking;
                op.progress = Some(format!("waiting for pods of brokers {} to stop", list(&left)));
                plan.outcome = Outcome::Progressing(format!("stopping brokers {}", list(&left)));
                plan.operation = Some(op);
                return;
            }
            op.phase = Phase::Unregistering;
            let Some(view) = &i.observed.brokers else {
                plan.outcome = Outcome::Progressing("waiting for the brokers to answer".into());
                plan.operation = Some(op);
                return;
            };
            let registered: Vec<i32> = op.brokers.iter().copied().filter(|id| view.brokers.contains_key(id)).collect();
            if registered.is_empty() {
                return finish(plan, "scaled down");
            }
            let holding: Vec<i32> = registered.iter().copied().filter(|id| view.brokers[id].replicas > 0).collect();
            if !holding.is_empty() {
                // A replica reached a leaving broker after its drain (e.g. a topic created
                // meanwhile): drain again before removing it, which the brokers would refuse.
                op.phase = Phase::MovingReplicas;
                op.progress = None;
                plan.outcome = Outcome::Progressing(format!(
                    "brokers {} took replicas after their drain; draining again",
                    list(&holding)
                ));
                plan.operation = Some(op);
                return;
            }
            let live: Vec<i32> = registered.iter().copied().filter(|id| view.brokers[id].live).collect();
            if !live.is_empty() {
                op.progress = Some(format!("waiting for brokers {} to be fenced", list(&live)));
                plan.outcome = Outcome::Progressing(format!("waiting for brokers {} to be fenced", list(&live)));
                plan.operation = Some(op);
                return;
            }
            plan.step = Step::Unregister(registered.clone());
            op.progress = Some(format!("unregistering brokers {}", list(&registered)));
            plan.outcome = Outcome::Progressing(format!("unregistering brokers {}", list(&registered)));
            plan.operation = Some(op);
        }
        _ => finish(plan, "unexpected phase"),
    }
}

/// Pods created from an older template than the StatefulSet's current one.
fn stale_pods(i: &Inputs<'_>, sts: &StatefulSetView) -> Vec<i32> {
    let (true, Some(revision)) = (sts.status_current, sts.update_revision.as_ref()) else { return Vec::new() };
    i.observed
        .pods
        .iter()
        .filter(|(id, p)| **id < sts.replicas && p.revision.as_ref().is_some_and(|r| r != revision))
        .map(|(id, _)| *id)
        .collect()
}

fn continue_restart(i: &Inputs<'_>, sts: &StatefulSetView, mut op: Operation, plan: &mut Plan) {
    plan.statefulset_replicas = sts.replicas;
    if !sts.status_current {
        plan.outcome = Outcome::Progressing("waiting for the StatefulSet controller".into());
        plan.operation = Some(op);
        return;
    }
    let stale = stale_pods(i, sts);
    op.progress = Some(format!("{} of {} brokers restarted", sts.replicas - stale.len() as i32, sts.replicas));
    op.brokers = stale.clone();
    let pods = &i.observed.pods;
    let missing: Vec<i32> = (0..sts.replicas).filter(|id| pods.get(id).is_none_or(|p| p.terminating)).collect();
    if !missing.is_empty() {
        plan.outcome = Outcome::Progressing(format!("broker {} is restarting", list(&missing)));
        plan.operation = Some(op);
        return;
    }
    // A broker that is down already costs nothing to restart: it goes first, whatever the
    // cluster's health (it may be what is unhealthy). Down means fenced (or unregistered), or
    // not Ready for a while: a readiness probe that fails once under load is not down, and
    // restarting that broker while another catches up would take two out of the ISR.
    let down = |id: i32| {
        let fenced = i.observed.brokers.as_ref().is_some_and(|v| v.brokers.get(&id).is_none_or(|b| !b.live));
        let long = plan
            .brokers
            .iter()
            .find(|b| b.id == id)
            .and_then(|b| down_for(b, i.now))
            .is_some_and(|d| d >= DOWN_FOR_RESTART);
        !pods[&id].ready && (fenced || long)
    };
    if let Some(id) = stale.iter().copied().find(|id| down(*id)) {
        plan.step = restart(i, id);
        plan.outcome = Outcome::Progressing(format!("restarting broker {id} (it was not ready)"));
        plan.operation = Some(op);
        return;
    }
    if let Some(id) = (0..sts.replicas).find(|id| !pods[id].ready) {
        plan.outcome = Outcome::Progressing(format!("waiting for broker {id} to be ready"));
        plan.operation = Some(op);
        return;
    }
    let Some(view) = &i.observed.brokers else {
        plan.outcome = Outcome::Progressing("waiting for the brokers to answer".into());
        plan.operation = Some(op);
        return;
    };
    if view.under_replicated > 0 || view.offline > 0 {
        plan.outcome = Outcome::Progressing(format!(
            "waiting for {} under-replicated and {} offline partitions to recover",
            view.under_replicated, view.offline
        ));
        plan.operation = Some(op);
        return;
    }
    // The active controller goes last: restarting it costs a quorum election.
    let next = stale.iter().copied().find(|id| Some(*id) != view.controller).or_else(|| stale.first().copied());
    match next {
        None => finish(plan, "every broker runs the new template"),
        Some(id) => {
            plan.step = restart(i, id);
            plan.outcome = Outcome::Progressing(format!("restarting broker {id}"));
            plan.operation = Some(op);
        }
    }
}

fn restart(i: &Inputs<'_>, id: i32) -> Step {
    let pod = &i.observed.pods[&id];
    Step::Restart { id, pod: pod.name.clone(), uid: pod.uid.clone() }
}

fn down_for(b: &BrokerStatus, now: Timestamp) -> Option<std::time::Duration> {
    let since: Timestamp = b.down_since.as_deref()?.parse().ok()?;
    let d: SignedDuration = now.duration_since(since);
    std::time::Duration::try_from(d).ok()
}

/// Per-broker status for brokers 0..n of the StatefulSet: what is seen now, plus since when
/// a broker has been down and whether its replicas were moved away (kept from last time).
fn broker_statuses(i: &Inputs<'_>) -> Vec<BrokerStatus> {
    let n = i.observed.statefulset.as_ref().map_or(0, |s| s.replicas);
    let view: Option<&BrokerView> = i.observed.brokers.as_ref();
    (0..n)
        .map(|id| {
            let before = i.previous.brokers.iter().find(|b| b.id == id);
            let info = view.and_then(|v| v.brokers.get(&id));
            let up = i.observed.broker_up(id);
            BrokerStatus {
                id,
                rack: info.and_then(|b| b.rack.clone()).or_else(|| before.and_then(|b| b.rack.clone())),
                ready: i.observed.pods.get(&id).is_some_and(|p| p.ready),
                live: match view {
                    Some(_) => info.is_some_and(|b| b.live),
                    None => before.is_some_and(|b| b.live),
                },
                voter: id < i.spec.controllers,
                replicas: info.map_or_else(|| before.map_or(0, |b| b.replicas), |b| b.replicas),
                leaders: info.map_or_else(|| before.map_or(0, |b| b.leaders), |b| b.leaders),
                down_since: if up {
                    None
                } else {
                    Some(before.and_then(|b| b.down_since.clone()).unwrap_or_else(|| i.now.to_string()))
                },
                replaced: before.is_some_and(|b| b.replaced),
            }
        })
        .collect()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
