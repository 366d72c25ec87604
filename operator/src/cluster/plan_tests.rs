//! The plan as a specification: each step of scale-up, scale-down, rolling restart and
//! failover, from hand-made observations.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::cluster::names::Names;
use crate::cluster::observed::{BrokerInfo, BrokerView, Observed, Planned, PodView, StatefulSetView};
use crate::cluster::validate::{tests::spec, validate, Valid};
use crate::crd::cluster::{ClusterSpec, ClusterStatus};

const NOW: &str = "2026-12-06T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().expect("time")
}

/// A cluster of `n` Ready brokers at revision `rev`, all live, broker 0 the controller,
/// `replicas` replicas each, with topics of replication factor `rf`.
struct World {
    spec: ClusterSpec,
    valid: Valid,
    status: ClusterStatus,
    observed: Observed,
}

impl World {
    fn new(n: i32, rf: i32) -> World {
        let spec = spec(n);
        let valid = validate(&spec, &Names::new("c", "ns", "cluster.local")).expect("valid");
        let pods = (0..n).map(|id| (id, pod(id, "rev1", true))).collect();
        let brokers = (0..n)
            .map(|id| (id, BrokerInfo { rack: None, live: true, voter: id < 3, replicas: 4, leaders: 1 }))
            .collect();
        let observed = Observed {
            statefulset: Some(StatefulSetView {
                replicas: n,
                update_revision: Some("rev1".into()),
                status_current: true,
                claim_size: Some("1Gi".into()),
                template_hash: None,
            }),
            pods,
            brokers: Some(BrokerView {
                controller: Some(0),
                brokers,
                partitions: 12,
                under_replicated: 0,
                offline: 0,
                reassigning: 0,
                max_replication_factor: rf,
            }),
            planned_moves: None,
        };
        World { spec, valid, status: ClusterStatus::default(), observed }
    }

    fn plan(&self) -> Plan {
        plan(&Inputs {
            spec: &self.spec,
            valid: &self.valid,
            previous: &self.status,
            observed: &self.observed,
            now: now(),
        })
    }

    /// Plans, then records the plan in status as the reconciler would.
    fn step(&mut self) -> Plan {
        let p = self.plan();
        self.status.operation = p.operation.clone();
        self.status.brokers = p.brokers.clone();
        if let Some(sts) = self.observed.statefulset.as_mut() {
            sts.replicas = p.statefulset_replicas;
        }
        p
    }

    fn view(&mut self) -> &mut BrokerView {
        self.observed.brokers.as_mut().expect("view")
    }

    fn register(&mut self, id: i32, replicas: i32) {
        self.observed.pods.insert(id, pod(id, "rev1", true));
        self.view().brokers.insert(id, BrokerInfo { rack: None, live: true, voter: false, replicas, leaders: 0 });
    }
}

fn pod(id: i32, revision: &str, ready: bool) -> PodView {
    PodView {
        name: format!("c-broker-{id}"),
        uid: format!("uid-{id}-{revision}"),
        revision: Some(revision.into()),
        ready,
        terminating: false,
        restarts: 0,
        node: Some("node-a".into()),
        rack: None,
    }
}

fn progressing(p: &Plan) -> &str {
    match &p.outcome {
        Outcome::Progressing(m) => m,
        other => panic!("expected progress, got {other:?}"),
    }
}

#[test]
fn a_new_cluster_gets_a_statefulset_of_spec_replicas() {
    let mut w = World::new(3, 3);
    w.observed.statefulset = None;
    w.observed.pods = BTreeMap::new();
    let p = w.plan();
    assert_eq!((p.statefulset_replicas, &p.step, &p.operation), (3, &Step::Nothing, &None));
    assert_eq!(progressing(&p), "creating the brokers");
}

#[test]
fn a_settled_cluster_needs_nothing() {
    let p = World::new(3, 3).plan();
    assert_eq!(
        (p.statefulset_replicas, &p.step, &p.operation, &p.outcome),
        (3, &Step::Nothing, &None, &Outcome::Settled)
    );
    assert!(p.brokers.iter().all(|b| b.down_since.is_none() && b.live && b.ready));
}

#[test]
fn scale_up_grows_the_statefulset_waits_for_registration_then_moves_replicas_in_rounds() {
    let mut w = World::new(3, 3);
    w.spec.replicas = 5;
    w.spec.rebalance.max_concurrent_moves = 2;
    let p = w.step();
    assert_eq!(p.statefulset_replicas, 5);
    let op = p.operation.clone().expect("operation");
    assert_eq!((op.kind, op.phase, op.brokers.clone()), (OperationKind::ScaleUp, Phase::WaitingForBrokers, vec![3, 4]));

    // Broker 3 registers, 4 not yet.
    w.register(3, 0);
    let p = w.step();
    assert_eq!(p.operation.as_ref().map(|o| o.phase), Some(Phase::WaitingForBrokers));
    assert_eq!(p.statefulset_replicas, 5);

    w.register(4, 0);
    let p = w.step();
    assert_eq!(p.operation.as_ref().map(|o| o.phase), Some(Phase::MovingReplicas));
    assert_eq!(wanted_rebalance(p.operation.as_ref().expect("op")), Some((RebalanceMode::AddBrokers, vec![3, 4])));

    w.observed.planned_moves = Some(Planned::Moves(5));
    let p = w.step();
    assert_eq!(
        p.step,
        Step::Rebalance {
            mode: RebalanceMode::AddBrokers,
            brokers: vec![3, 4],
            throttle_bytes_per_sec: 0,
            max_moves: 2
        }
    );

    // Moves in flight: wait, whatever the dry run says.
    w.view().reassigning = 2;
    let p = w.step();
    assert_eq!(p.step, Step::Nothing);
    assert!(progressing(&p).contains("2 partitions moving"));

    // The next round, then nothing left to move.
    w.view().reassigning = 0;
    w.observed.planned_moves = Some(Planned::Moves(3));
    assert!(matches!(w.step().step, Step::Rebalance { .. }));
    w.observed.planned_moves = Some(Planned::Moves(0));
    let p = w.step();
    assert_eq!((p.operation, p.outcome, p.statefulset_replicas), (None, Outcome::Settled, 5));
}

#[test]
fn scale_up_without_rebalance_on_scale_ends_once_the_brokers_registered() {
    let mut w = World::new(3, 3);
    w.spec.replicas = 4;
    w.spec.rebalance.on_scale = false;
    w.step();
    w.register(3, 0);
    let p = w.step();
    assert_eq!((p.operation, p.step), (None, Step::Nothing));
}

#[test]
fn a_scale_down_below_the_largest_replication_factor_is_refused_and_the_statefulset_keeps_its_size() {
    let mut w = World::new(3, 3);
    w.spec.replicas = 1;
    let p = w.step();
    assert_eq!((p.statefulset_replicas, &p.step, &p.operation), (3, &Step::Nothing, &None));
    match &p.outcome {
        Outcome::Blocked { reason, message } => {
            assert_eq!(*reason, "ScaleDownRefused");
            assert!(message.contains("replication factor 3"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // Asking for 3 again clears it.
    w.spec.replicas = 3;
    assert_eq!(w.step().outcome, Outcome::Settled);
}

#[test]
fn a_scale_down_waits_for_the_brokers_view_before_deciding() {
    let mut w = World::new(5, 3);
    w.spec.replicas = 3;
    w.observed.brokers = None;
    let p = w.step();
    assert_eq!((p.statefulset_replicas, p.operation), (5, None));
}

#[test]
fn scale_down_drains_then_shrinks_then_unregisters_the_highest_ids() {
    let mut w = World::new(5, 3);
    w.spec.replicas = 3;
    let p = w.step();
    let op = p.operation.clone().expect("op");
    assert_eq!((op.kind, op.phase, op.brokers), (OperationKind::ScaleDown, Phase::MovingReplicas, vec![3, 4]));
    assert_eq!(p.statefulset_replicas, 5, "the StatefulSet keeps its size while draining");

    w.observed.planned_moves = Some(Planned::Moves(8));
    let p = w.step();
    assert_eq!(
        p.step,
        Step::Rebalance {
            mode: RebalanceMode::DrainBrokers,
            brokers: vec![3, 4],
            throttle_bytes_per_sec: 0,
            max_moves: 0
        }
    );
    assert_eq!(p.statefulset_replicas, 5);

    w.view().reassigning = 8;
    assert_eq!(w.step().statefulset_replicas, 5);

    // Drained: the leaving brokers hold nothing.
    w.view().reassigning = 0;
    w.view().brokers.get_mut(&3).expect("3").replicas = 0;
    w.view().brokers.get_mut(&4).expect("4").replicas = 0;
    w.observed.planned_moves = Some(Planned::Moves(0));
    let p = w.step();
    assert_eq!(p.statefulset_replicas, 3, "shrink only now");
    assert_eq!(p.operation.as_ref().map(|o| o.phase), Some(Phase::Shrinking));

    // Pods 3 and 4 still stopping.
    let p = w.step();
    assert_eq!((p.statefulset_replicas, p.step.clone()), (3, Step::Nothing));
    w.observed.pods.remove(&3);
    w.observed.pods.remove(&4);
    // Still live in the metadata: wait for the fence.
    let p = w.step();
    assert_eq!(p.operation.as_ref().map(|o| o.phase), Some(Phase::Unregistering));
    assert_eq!(p.step, Step::Nothing);
    w.view().brokers.get_mut(&3).expect("3").live = false;
    w.view().brokers.get_mut(&4).expect("4").live = false;
    let p = w.step();
    assert_eq!(p.step, Step::Unregister(vec![3, 4]));
    w.view().brokers.remove(&3);
    w.view().brokers.remove(&4);
    let p = w.step();
    assert_eq!((p.operation, p.outcome, p.statefulset_replicas), (None, Outcome::Settled, 3));
}

#[test]
fn a_drain_the_balancer_cannot_do_is_blocked_with_its_reason_and_nothing_shrinks() {
    let mut w = World::new(4, 3);
    w.spec.replicas = 3;
    w.step();
    w.observed.planned_moves = Some(Planned::Impossible("cannot drain broker(s) [3]: not enough brokers".into()));
    let p = w.step();
    assert_eq!(p.statefulset_replicas, 4);
    assert!(matches!(p.outcome, Outcome::Blocked { reason: "CannotMoveReplicas", .. }), "{:?}", p.outcome);
    // Planned nothing, yet replicas are left: also blocked.
    w.observed.planned_moves = Some(Planned::Moves(0));
    let p = w.step();
    assert!(matches!(p.outcome, Outcome::Blocked { reason: "CannotMoveReplicas", .. }));
    assert_eq!(p.statefulset_replicas, 4);
}

#[test]
fn a_scale_down_the_spec_no_longer_asks_for_is_cancelled_while_draining() {
    let mut w = World::new(5, 3);
    w.spec.replicas = 3;
    w.step();
    w.view().reassigning = 3;
    w.spec.replicas = 5;
    let p = w.step();
    assert_eq!((p.step, p.operation, p.statefulset_replicas), (Step::CancelRebalance, None, 5));
}

fn with_new_revision(w: &mut World) {
    w.observed.statefulset.as_mut().expect("sts").update_revision = Some("rev2".into());
}

fn restarted(w: &mut World, id: i32) {
    w.observed.pods.insert(id, pod(id, "rev2", true));
}

#[test]
fn a_rolling_restart_goes_one_broker_at_a_time_with_the_controller_last() {
    let mut w = World::new(3, 3);
    w.view().controller = Some(1);
    with_new_revision(&mut w);
    let p = w.step();
    assert_eq!(
        p.operation.as_ref().map(|o| (o.kind, o.brokers.clone())),
        Some((OperationKind::RollingRestart, vec![0, 1, 2]))
    );
    assert_eq!(p.step, Step::Restart { id: 0, pod: "c-broker-0".into(), uid: "uid-0-rev1".into() });

    // Pod 0 terminating, then recreated but not ready yet: wait.
    w.observed.pods.get_mut(&0).expect("0").terminating = true;
    assert_eq!(w.step().step, Step::Nothing);
    w.observed.pods.insert(0, pod(0, "rev2", false));
    let p = w.step();
    assert_eq!(p.step, Step::Nothing);
    assert_eq!(progressing(&p), "waiting for broker 0 to be ready");

    // Ready, but partitions are still catching up: wait.
    restarted(&mut w, 0);
    w.view().under_replicated = 2;
    let p = w.step();
    assert_eq!(p.step, Step::Nothing);
    assert!(progressing(&p).contains("2 under-replicated"));

    // Broker 2 next (1 is the controller), then 1.
    w.view().under_replicated = 0;
    assert_eq!(w.step().step, Step::Restart { id: 2, pod: "c-broker-2".into(), uid: "uid-2-rev1".into() });
    restarted(&mut w, 2);
    assert_eq!(w.step().step, Step::Restart { id: 1, pod: "c-broker-1".into(), uid: "uid-1-rev1".into() });
    restarted(&mut w, 1);
    let p = w.step();
    assert_eq!((p.step, p.operation, p.outcome), (Step::Nothing, None, Outcome::Settled));
}

#[test]
fn a_broker_that_is_down_is_restarted_first_even_while_partitions_are_under_replicated() {
    let mut w = World::new(3, 3);
    with_new_revision(&mut w);
    w.observed.pods.insert(2, pod(2, "rev1", false));
    w.view().brokers.get_mut(&2).expect("2").live = false;
    w.view().under_replicated = 4;
    let p = w.step();
    assert_eq!(p.step, Step::Restart { id: 2, pod: "c-broker-2".into(), uid: "uid-2-rev1".into() });
}

#[test]
fn a_live_broker_whose_readiness_blinked_is_not_restarted_while_another_catches_up() {
    let mut w = World::new(3, 3);
    with_new_revision(&mut w);
    restarted(&mut w, 0);
    w.view().under_replicated = 3;
    // Broker 2 failed its readiness probe a moment ago but is live: not "down".
    w.observed.pods.insert(2, pod(2, "rev1", false));
    let p = w.step();
    assert_eq!(p.step, Step::Nothing, "{:?}", p.outcome);
    // Not Ready for longer than 30 s: it is down, and goes first.
    w.status.brokers[2].down_since = Some("2026-12-06T11:59:00Z".into());
    assert_eq!(w.step().step, Step::Restart { id: 2, pod: "c-broker-2".into(), uid: "uid-2-rev1".into() });
}

#[test]
fn a_lost_broker_past_replace_after_interrupts_a_rolling_restart() {
    let mut w = World::new(4, 3);
    w.valid.replace_after = Some(Duration::from_secs(30));
    with_new_revision(&mut w);
    w.step();
    restarted(&mut w, 0);
    w.observed.pods.insert(3, pod(3, "rev1", false));
    w.view().brokers.get_mut(&3).expect("3").live = false;
    w.status.brokers = w.plan().brokers;
    w.status.brokers[3].down_since = Some("2026-12-06T11:58:00Z".into());
    let p = w.step();
    assert_eq!(p.operation.map(|o| (o.kind, o.brokers)), Some((OperationKind::ReplaceBroker, vec![3])));
}

#[test]
fn no_restart_is_decided_before_the_statefulset_controller_has_seen_the_new_template() {
    let mut w = World::new(3, 3);
    with_new_revision(&mut w);
    w.observed.statefulset.as_mut().expect("sts").status_current = false;
    let p = w.step();
    assert_eq!((p.step, p.operation), (Step::Nothing, None));
}

#[test]
fn a_broker_down_longer_than_replace_after_has_its_replicas_moved_and_is_refilled_when_back() {
    let mut w = World::new(4, 3);
    w.valid.replace_after = Some(Duration::from_secs(30));
    // Broker 3 down since 10 s: not yet.
    w.observed.pods.insert(3, pod(3, "rev1", false));
    w.view().brokers.get_mut(&3).expect("3").live = false;
    w.status.brokers = w.plan().brokers;
    w.status.brokers[3].down_since = Some("2026-12-06T11:59:50Z".into());
    let p = w.step();
    assert_eq!((p.operation.clone(), p.brokers[3].down_since.as_deref()), (None, Some("2026-12-06T11:59:50Z")));

    // Down since 40 s: replace.
    w.status.brokers[3].down_since = Some("2026-12-06T11:59:20Z".into());
    let p = w.step();
    let op = p.operation.clone().expect("op");
    assert_eq!((op.kind, op.brokers.clone()), (OperationKind::ReplaceBroker, vec![3]));
    assert!(p.brokers[3].replaced);
    assert_eq!(wanted_rebalance(&op), Some((RebalanceMode::DrainBrokers, vec![3])));
    w.observed.planned_moves = Some(Planned::Moves(4));
    let p = w.step();
    assert_eq!(
        p.step,
        Step::Rebalance {
            mode: RebalanceMode::DrainBrokers,
            brokers: vec![3],
            throttle_bytes_per_sec: 0,
            max_moves: 0
        }
    );
    w.view().brokers.get_mut(&3).expect("3").replicas = 0;
    w.observed.planned_moves = Some(Planned::Moves(0));
    let p = w.step();
    assert_eq!((p.operation.clone(), p.brokers[3].replaced), (None, true));

    // Still down: nothing more to do (it holds nothing).
    w.observed.planned_moves = None;
    assert_eq!(w.step().operation, None);

    // Back: refill it.
    w.observed.pods.insert(3, pod(3, "rev1", true));
    w.view().brokers.get_mut(&3).expect("3").live = true;
    let p = w.step();
    assert_eq!(p.brokers[3].down_since, None);
    let op = p.operation.clone().expect("op");
    assert_eq!(
        (op.kind, wanted_rebalance(&op)),
        (OperationKind::RefillBroker, Some((RebalanceMode::AddBrokers, vec![3])))
    );
    w.observed.planned_moves = Some(Planned::Moves(3));
    assert!(matches!(w.step().step, Step::Rebalance { mode: RebalanceMode::AddBrokers, .. }));
    w.observed.planned_moves = Some(Planned::Moves(0));
    let p = w.step();
    assert_eq!((p.operation, p.brokers[3].replaced), (None, false));
}

#[test]
fn without_replace_after_a_lost_broker_is_only_reported() {
    let mut w = World::new(4, 3);
    w.observed.pods.insert(3, pod(3, "rev1", false));
    w.view().brokers.get_mut(&3).expect("3").live = false;
    w.status.brokers = w.plan().brokers;
    w.status.brokers[3].down_since = Some("2026-01-01T00:00:00Z".into());
    let p = w.step();
    assert_eq!(p.operation, None);
    assert_eq!(p.brokers[3].down_since.as_deref(), Some("2026-01-01T00:00:00Z"));
    assert!(!p.brokers[3].live && !p.brokers[3].ready);
}

#[test]
fn no_replacement_starts_when_the_other_brokers_could_not_hold_the_replicas() {
    // Three brokers, replication factor 3: the lost broker's replicas have nowhere to go.
    let mut w = World::new(3, 3);
    w.valid.replace_after = Some(Duration::from_secs(1));
    w.observed.pods.insert(2, pod(2, "rev1", false));
    w.view().brokers.get_mut(&2).expect("2").live = false;
    w.status.brokers = w.plan().brokers;
    w.status.brokers[2].down_since = Some("2026-12-06T11:00:00Z".into());
    let p = w.step();
    assert_eq!(p.operation, None);
    assert!(!p.brokers[2].replaced);
}

#[test]
fn a_stuck_replacement_ends_when_the_broker_comes_back() {
    let mut w = World::new(4, 3);
    w.valid.replace_after = Some(Duration::from_secs(1));
    w.observed.pods.insert(3, pod(3, "rev1", false));
    w.view().brokers.get_mut(&3).expect("3").live = false;
    w.status.brokers = w.plan().brokers;
    w.status.brokers[3].down_since = Some("2026-12-06T11:00:00Z".into());
    assert!(w.step().operation.is_some());
    w.observed.planned_moves = Some(Planned::Impossible("no room".into()));
    assert!(matches!(w.step().outcome, Outcome::Blocked { .. }));
    // Back: the replacement is moot; a refill follows (it was marked replaced).
    w.observed.pods.insert(3, pod(3, "rev1", true));
    w.view().brokers.get_mut(&3).expect("3").live = true;
    let p = w.step();
    assert_eq!(p.operation, None);
    let p = w.step();
    assert_eq!(p.operation.map(|o| o.kind), Some(OperationKind::RefillBroker));
}

#[test]
fn a_scale_up_whose_brokers_never_register_is_abandoned_when_the_spec_asks_for_fewer() {
    let mut w = World::new(3, 3);
    w.spec.replicas = 5;
    assert_eq!(w.step().statefulset_replicas, 5);
    w.spec.replicas = 3;
    let p = w.step();
    assert_eq!(p.operation, None);
    // The StatefulSet is still at 5; the next plan drains and shrinks (brokers 3 and 4 hold nothing).
    let p = w.step();
    assert_eq!(p.operation.map(|o| (o.kind, o.brokers)), Some((OperationKind::ScaleDown, vec![3, 4])));
}

#[test]
fn replicas_that_reached_a_leaving_broker_after_its_drain_are_drained_again_without_regrowing() {
    let mut w = World::new(4, 3);
    w.spec.replicas = 3;
    w.step();
    w.view().brokers.get_mut(&3).expect("3").replicas = 0;
    w.observed.planned_moves = Some(Planned::Moves(0));
    assert_eq!(w.step().statefulset_replicas, 3);
    w.observed.pods.remove(&3);
    let b3 = w.view().brokers.get_mut(&3).expect("3");
    b3.live = false;
    b3.replicas = 2;
    let p = w.step();
    assert_eq!(p.operation.as_ref().map(|o| o.phase), Some(Phase::MovingReplicas));
    assert_eq!(p.step, Step::Nothing);
    w.observed.planned_moves = Some(Planned::Moves(2));
    let p = w.step();
    assert!(matches!(p.step, Step::Rebalance { mode: RebalanceMode::DrainBrokers, .. }));
    assert_eq!(p.statefulset_replicas, 3, "the StatefulSet does not grow back");
}
