//! Brokers and the active controller failing (issue 4): a SIGKILLed controller is replaced by
//! an election and topic creation works again; the killed broker catches up with the metadata
//! log when it returns; a broker that stops heartbeating (SIGSTOP) is fenced — Metadata stops
//! naming it — and SIGCONT brings it back unfenced, leading its partitions again.

use std::time::{Duration, Instant};

use e2e::clients;
use e2e::cluster::{create_topic_via, wait_until, Cluster, ClusterSpec, MetadataView};

const SETTLE: Duration = Duration::from_secs(30);
/// Election settings of these tests' clusters (Kafka's controller.quorum.election.timeout.ms
/// default); a new leader is elected within a leader lease plus one randomised timeout.
const ELECTION_TIMEOUT_MS: u64 = 1000;

#[test]
fn sigkill_of_the_active_controller_elects_a_new_one_and_the_killed_broker_catches_up() {
    let mut cluster = Cluster::start(ClusterSpec::new(3, 3)).expect("start 3 brokers");
    clients::create_topic(&cluster.bootstrap(), "before", 3, &[]).expect("create before the kill");
    let old = cluster.agreed_controller(SETTLE).expect("a controller");
    cluster.broker(old).kill().expect("SIGKILL the controller");
    let killed_at = Instant::now();
    let survivor = (old + 1) % 3;
    let addr = cluster.broker(survivor).kafka_addr();
    // CreateTopics waits through the election (the broker retries until its controller
    // timeout), so one request either succeeds or says why not.
    let (code, message) = create_topic_via(addr, "after-failover", 3, &[]).expect("CreateTopics");
    let gap = killed_at.elapsed();
    println!("topic creation worked again {gap:?} after the controller was killed");
    assert_eq!(code, 0, "CreateTopics after the failover: {message:?}");
    // Bound: leader lease (2x the election timeout) + a randomised election timeout (up to 2x)
    // + generous slack for a loaded machine. A liveness bound, not a performance claim.
    let bound = Duration::from_millis(4 * ELECTION_TIMEOUT_MS) + Duration::from_secs(10);
    assert!(gap < bound, "a new controller took {gap:?} (bound {bound:?})");
    let new = cluster.agreed_controller(SETTLE).expect("the survivors agree on a new controller");
    assert_ne!(new, old, "the killed broker is not the controller");

    cluster.broker(old).start().expect("restart the old controller with the same command line");
    let view = cluster.wait_same_metadata(&[0, 1, 2], SETTLE).expect("the returned broker catches up");
    assert!(view.topics.contains_key("after-failover"), "it learned what was created while it was down");
    assert!(view.brokers.contains_key(&old), "it is listed again: {:?}", view.brokers);
}

/// The partitions `broker` leads in `view`.
fn led_by(view: &MetadataView, broker: i32) -> Vec<(String, usize, i32)> {
    view.topics
        .iter()
        .flat_map(|(name, t)| {
            t.partitions
                .iter()
                .enumerate()
                .filter(|(_, p)| p.leader == broker)
                .map(move |(i, p)| (name.clone(), i, p.leader_epoch))
        })
        .collect()
}

/// Pauses `victim`, checks the others fence it, resumes it, checks it is back.
fn pause_fence_and_return(cluster: &mut Cluster, victim: i32) {
    let others: Vec<i32> = (0..3).filter(|b| *b != victim).collect();
    let before = cluster.wait_same_metadata(&[0, 1, 2], SETTLE).expect("agree before the pause");
    let led = led_by(&before, victim);
    assert!(!led.is_empty(), "broker {victim} leads something before the pause: {before:?}");

    cluster.broker(victim).pause().expect("SIGSTOP");
    let paused_at = Instant::now();
    let fenced = wait_until(SETTLE, || {
        let view = cluster.wait_same_metadata(&others, Duration::from_secs(5))?;
        anyhow::ensure!(!view.brokers.contains_key(&victim), "broker {victim} is still listed");
        anyhow::ensure!(led_by(&view, victim).is_empty(), "broker {victim} is still named leader");
        Ok(view)
    })
    .unwrap_or_else(|e| {
        let _ = cluster.broker(victim).resume();
        panic!("broker {victim} was not fenced: {e:#}")
    });
    println!("broker {victim} fenced {:?} after SIGSTOP", paused_at.elapsed());
    for (topic, index, _) in &led {
        let p = &fenced.topics[topic].partitions[*index];
        assert_eq!((p.leader, p.error), (-1, 5), "{topic}-{index} has no leader while its only replica is fenced");
    }

    cluster.broker(victim).resume().expect("SIGCONT");
    let back = wait_until(SETTLE, || {
        let view = cluster.wait_same_metadata(&[0, 1, 2], Duration::from_secs(5))?;
        anyhow::ensure!(view.brokers.contains_key(&victim), "broker {victim} is not listed yet");
        let now = led_by(&view, victim);
        anyhow::ensure!(now.len() == led.len(), "broker {victim} leads {now:?}, led {led:?}");
        Ok(view)
    })
    .expect("the resumed broker is unfenced and leads again");
    for (topic, index, epoch) in &led {
        let p = &back.topics[topic].partitions[*index];
        assert!(p.leader_epoch > *epoch, "{topic}-{index}: leader epoch {} after {epoch}", p.leader_epoch);
    }
}

#[test]
fn a_paused_broker_is_fenced_then_unfenced_and_so_is_a_paused_controller() {
    let mut cluster = Cluster::start(ClusterSpec::new(3, 3)).expect("start 3 brokers");
    clients::create_topic(&cluster.bootstrap(), "fenced", 6, &[]).expect("create");
    let controller = cluster.agreed_controller(SETTLE).expect("a controller");
    let follower = (controller + 1) % 3;
    pause_fence_and_return(&mut cluster, follower);

    // The controller itself: the others elect a new one, which fences the old one; SIGCONT
    // makes it a follower that registers back in.
    let controller = cluster.agreed_controller(SETTLE).expect("a controller");
    pause_fence_and_return(&mut cluster, controller);
    let after = cluster.agreed_controller(SETTLE).expect("a controller after all that");
    println!("controller before the pause {controller}, after {after}");
    clients::produce_to_partitions(
        &cluster.bootstrap(),
        "fenced",
        &(0..6).map(|p| (p, format!("v{p}"))).collect::<Vec<_>>(),
    )
    .expect("every partition takes writes again");
}
