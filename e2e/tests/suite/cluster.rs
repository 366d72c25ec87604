//! Multi-broker clusters on one metadata quorum (issue 4): leaders spread over brokers with
//! librdkafka routing to each; a whole-cluster restart keeps every topic, id and config;
//! learners (brokers that do not vote) serve the same metadata as the voters, whichever
//! broker a change was sent to; consumer groups find their coordinator among the brokers.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use e2e::clients;
use e2e::cluster::{create_topic_via, delete_topic_via, set_topic_config_via, topic_configs_via, Cluster, ClusterSpec};
use rdkafka::consumer::Consumer;

const SETTLE: Duration = Duration::from_secs(30);

#[test]
fn twelve_partitions_spread_their_leaders_over_three_brokers_and_librdkafka_reaches_every_one() {
    let mut cluster = Cluster::start(ClusterSpec::new(3, 3)).expect("start 3 brokers");
    let bootstrap = cluster.bootstrap();
    clients::create_topic(&bootstrap, "spread", 12, &[]).expect("create a topic of 12 partitions");
    let view = cluster.wait_same_metadata(&[0, 1, 2], SETTLE).expect("all brokers agree");
    let topic = &view.topics["spread"];
    assert_eq!(topic.partitions.len(), 12);
    let mut leaders: BTreeMap<i32, usize> = BTreeMap::new();
    for p in &topic.partitions {
        assert_eq!((p.error, p.replicas.clone(), p.isr.clone()), (0, vec![p.leader], vec![p.leader]), "{p:?}");
        *leaders.entry(p.leader).or_default() += 1;
    }
    println!("leaders per broker: {leaders:?}");
    assert_eq!(leaders.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2], "every broker leads: {leaders:?}");
    assert!(leaders.values().all(|n| *n <= 5), "no broker leads more than 5: {leaders:?}");
    assert_eq!(view.brokers.len(), 3, "Metadata lists every broker: {:?}", view.brokers);
    assert!(view.controller >= 0, "Metadata names a controller");

    // Produce to each partition explicitly; librdkafka must route each to its leader.
    let records: Vec<(i32, String)> =
        (0..12).flat_map(|p| (0..50).map(move |i| (p, format!("p{p:02}-{i:03}")))).collect();
    clients::produce_to_partitions(&bootstrap, "spread", &records).expect("produce to all 12 partitions");
    let read = clients::read_to_end(&bootstrap, "spread", Duration::from_secs(60)).expect("consume everything back");
    let mut per_partition: BTreeMap<i32, Vec<String>> = BTreeMap::new();
    for r in &read {
        per_partition.entry(r.partition).or_default().push(r.value_str().to_string());
    }
    for p in 0..12 {
        let want: Vec<String> = (0..50).map(|i| format!("p{p:02}-{i:03}")).collect();
        assert_eq!(per_partition.get(&p), Some(&want), "partition {p} holds exactly its records, in order");
    }
    // A broker that does not lead a partition refuses to serve it: clients are sent to the leader.
    let (p, leader) = topic.partitions.iter().enumerate().map(|(i, p)| (i, p.leader)).next().expect("a partition");
    let other = (leader + 1) % 3;
    let direct = clients::lookup_client(&cluster.broker(other).bootstrap()).expect("client of one broker");
    let meta = direct.fetch_metadata(Some("spread"), Duration::from_secs(10)).expect("metadata");
    let t = meta.topics().iter().find(|t| t.name() == "spread").expect("topic listed");
    assert_eq!(t.partitions()[p].leader(), leader, "every broker names the same leader");
}

#[test]
fn a_whole_cluster_restart_keeps_every_topic_its_id_and_its_configs() {
    let mut cluster = Cluster::start(ClusterSpec::new(3, 3)).expect("start 3 brokers");
    let bootstrap = cluster.bootstrap();
    clients::create_topic(&bootstrap, "kept-a", 4, &[("retention.ms", "3600000"), ("cleanup.policy", "compact")])
        .expect("create kept-a");
    clients::create_topic(&bootstrap, "kept-b", 7, &[("max.message.bytes", "65536")]).expect("create kept-b");
    let before = cluster.wait_same_metadata(&[0, 1, 2], SETTLE).expect("agree before");
    let addr = cluster.broker(1).kafka_addr();
    let configs_before: Vec<BTreeMap<String, String>> =
        ["kept-a", "kept-b"].iter().map(|t| topic_configs_via(addr, t).expect("describe configs")).collect();
    assert_eq!(configs_before[0].get("cleanup.policy").map(String::as_str), Some("compact"));

    for b in &mut cluster.brokers {
        b.kill().expect("SIGKILL");
    }
    for b in &mut cluster.brokers {
        b.spawn().expect("spawn again");
    }
    cluster.wait_all_ready(Duration::from_secs(60)).expect("all ready after the restart");
    let after = cluster.wait_same_metadata(&[0, 1, 2], SETTLE).expect("agree after");
    assert_eq!(after.cluster_id, before.cluster_id, "same cluster id");
    assert_eq!(after.topics.keys().collect::<Vec<_>>(), before.topics.keys().collect::<Vec<_>>(), "same topics");
    for (name, t) in &before.topics {
        let again = &after.topics[name];
        assert_eq!(again.id, t.id, "topic {name} keeps its id");
        let replicas =
            |v: &e2e::cluster::TopicView| v.partitions.iter().map(|p| p.replicas.clone()).collect::<Vec<_>>();
        assert_eq!(replicas(again), replicas(t), "topic {name} keeps its partitions and replicas");
    }
    let addr = cluster.broker(2).kafka_addr();
    let configs_after: Vec<BTreeMap<String, String>> =
        ["kept-a", "kept-b"].iter().map(|t| topic_configs_via(addr, t).expect("describe configs")).collect();
    assert_eq!(configs_after, configs_before, "configs survive the restart");
    clients::produce_to_partitions(&cluster.bootstrap(), "kept-b", &[(6, "after".to_string())])
        .expect("the restarted cluster takes writes");
}

#[test]
fn five_brokers_with_three_voters_and_two_learners_serve_the_same_metadata_whichever_broker_is_asked() {
    let mut cluster = Cluster::start(ClusterSpec::new(5, 3)).expect("start 5 brokers");
    let all = [0, 1, 2, 3, 4];
    // Changes sent to learners are forwarded to the active controller.
    let learner = cluster.broker(3).kafka_addr();
    assert_eq!(create_topic_via(learner, "via-learner", 5, &[("retention.ms", "60000")]).expect("create").0, 0);
    let other_learner = cluster.broker(4).kafka_addr();
    assert_eq!(create_topic_via(other_learner, "doomed", 2, &[]).expect("create").0, 0);
    assert_eq!(set_topic_config_via(other_learner, "via-learner", "retention.ms", "120000").expect("alter"), 0);
    let voter = cluster.broker(1).kafka_addr();
    assert_eq!(create_topic_via(voter, "via-voter", 3, &[]).expect("create").0, 0);
    assert_eq!(delete_topic_via(learner, "doomed").expect("delete"), 0);
    // A refused change is refused the same way through a learner.
    let (code, message) = create_topic_via(learner, "via-voter", 1, &[]).expect("create again");
    assert_eq!(code, 36, "TOPIC_ALREADY_EXISTS through a learner: {message:?}");

    let view = cluster.wait_same_metadata(&all, SETTLE).expect("all five agree");
    let names: BTreeSet<&str> = view.topics.keys().map(String::as_str).collect();
    assert_eq!(names, BTreeSet::from(["via-learner", "via-voter"]));
    assert_eq!(view.brokers.len(), 5, "every broker is listed: {:?}", view.brokers);
    let leaders = view.leaders();
    assert!(leaders.len() >= 4, "partitions are led by learners too: {leaders:?}");
    for id in all {
        let configs = topic_configs_via(cluster.broker(id).kafka_addr(), "via-learner").expect("describe");
        assert_eq!(configs.get("retention.ms").map(String::as_str), Some("120000"), "broker {id}");
    }

    // A learner that was down while things changed catches up when it returns.
    cluster.broker(4).kill().expect("kill learner 4");
    assert_eq!(create_topic_via(learner, "while-away", 2, &[]).expect("create").0, 0);
    assert_eq!(delete_topic_via(voter, "via-voter").expect("delete"), 0);
    cluster.broker(4).start().expect("restart learner 4");
    let view = cluster.wait_same_metadata(&all, SETTLE).expect("all five agree again");
    let names: BTreeSet<&str> = view.topics.keys().map(String::as_str).collect();
    assert_eq!(names, BTreeSet::from(["via-learner", "while-away"]));
}

#[test]
fn a_consumer_group_on_three_brokers_finds_its_coordinator_and_commits_every_offset_there() {
    use e2e::groups::fixtures::{high_watermarks, member, produce_tagged, wait_for_committed, wait_until_received};
    use e2e::groups::{self, Assignor};
    let cluster = Cluster::start(ClusterSpec::new(3, 3)).expect("start 3 brokers");
    let bootstrap = cluster.bootstrap();
    clients::create_topic(&bootstrap, "grouped", 6, &[]).expect("create");
    let wanted = produce_tagged(&bootstrap, "grouped", "g", 6, 40);
    let members = [
        member(&bootstrap, "spread", "m-1", "grouped", Assignor::Range),
        member(&bootstrap, "spread", "m-2", "grouped", Assignor::Range),
    ];
    wait_until_received(&[&members[0], &members[1]], &[], &wanted, "a group on three brokers");
    wait_for_committed(&bootstrap, "spread", "grouped", &high_watermarks(&bootstrap, "grouped", 6));
    // __consumer_offsets is spread over the brokers, and the group lives on one of them.
    let view = cluster.wait_same_metadata(&[0, 1, 2], SETTLE).expect("agree");
    let offsets = &view.topics["__consumer_offsets"];
    let leaders: BTreeSet<i32> = offsets.partitions.iter().map(|p| p.leader).collect();
    assert_eq!(leaders, BTreeSet::from([0, 1, 2]), "__consumer_offsets is led by every broker");
    let described = clients::eventually(Duration::from_secs(30), || {
        let d = groups::describe_group(&bootstrap, "spread")?;
        anyhow::ensure!(d.state == "Stable" && d.members.len() == 2, "{d:?}");
        Ok(d)
    })
    .expect("DescribeGroups reaches the coordinator");
    println!(
        "group described by its coordinator: {} members, protocol {}",
        described.members.len(),
        described.protocol
    );
}
