//! The `strom` CLI and the admin gRPC API (issue 6) from a user's side: topics created,
//! altered and deleted; a consumer group's offsets reset to a timestamp once it has stopped
//! (and refused while it has live members), its next consumer re-reading from there; and bad
//! input — to the CLI and straight to the gRPC API — answered with a clear error and an exit
//! code scripts can rely on, changing nothing.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use e2e::broker::{BrokerOptions, BrokerProcess};
use e2e::cli::{strom, CliRun};
use e2e::cluster::{Cluster, ClusterSpec, MetadataView};
use e2e::groups::fixtures::{
    high_watermarks, member, produce_tagged, values_of, wait_for_committed, wait_until_received,
};
use e2e::groups::{committed_offsets, Assignor};
use serde_json::Value;
use strom_proto::admin::admin_client::AdminClient;
use strom_proto::admin::{CreateTopicRequest, RebalanceRequest, RemoveBrokerRequest, ResetGroupOffsetsRequest};

const SETTLE: Duration = Duration::from_secs(60);

fn three_brokers() -> Cluster {
    Cluster::start(ClusterSpec::new(3, 3)).expect("start 3 brokers")
}

fn cli(cluster: &Cluster, args: &[&str]) -> CliRun {
    strom(cluster.brokers[0].internal_addr(), args).expect("run strom")
}

fn cli_json(cluster: &Cluster, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-o", "json"]);
    cli(cluster, &all).success().expect("strom succeeds").json().expect("JSON")
}

fn now_ms() -> i64 {
    i64::try_from(SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0)).unwrap_or(0)
}

#[test]
fn topics_are_created_altered_described_and_deleted_through_the_cli() {
    let cluster = three_brokers();
    let created =
        cli_json(&cluster, &["topic", "create", "clicks", "-p", "4", "-r", "3", "-c", "retention.ms=3600000"]);
    assert_eq!(created["partitions"].as_i64(), Some(4), "{created}");
    assert_eq!(created["replication_factor"].as_i64(), Some(3));
    assert_eq!(created["configs"]["retention.ms"].as_str(), Some("3600000"));
    cluster.wait_fully_replicated(&[1], "clicks", 3, SETTLE).expect("the topic is live for Kafka clients");

    let table = cli(&cluster, &["topic", "list"]).success().expect("list");
    assert!(table.stdout.lines().any(|l| l.starts_with("clicks ") && l.contains(" 4 ")), "{}", table.stdout);

    let altered = cli_json(
        &cluster,
        &["topic", "alter", "clicks", "-p", "6", "-c", "retention.ms=60000", "--delete-config", "x"],
    );
    assert_eq!(altered["partitions"].as_i64(), Some(6), "{altered}");
    assert_eq!(altered["configs"]["retention.ms"].as_str(), Some("60000"));
    // Broker 2 may not have applied the new partitions yet when the CLI returns: wait until it
    // lists all 6, each fully replicated.
    let view = e2e::cluster::wait_until(SETTLE, || {
        let view = cluster.wait_fully_replicated(&[2], "clicks", 3, SETTLE)?;
        let partitions = view.topics["clicks"].partitions.len();
        anyhow::ensure!(partitions == 6, "broker 2 lists {partitions} partitions");
        Ok(view)
    })
    .expect("6 partitions");
    assert_eq!(view.topics["clicks"].partitions.len(), 6);

    // Down to replication factor 2 by reassignment, then back to 3.
    let smaller = cli_json(&cluster, &["topic", "alter", "clicks", "-r", "2"]);
    assert!(smaller["partition_info"].as_array().is_some_and(|ps| !ps.is_empty()), "{smaller}");
    cluster.wait_fully_replicated(&[0], "clicks", 2, SETTLE).expect("2 replicas each");
    cli_json(&cluster, &["topic", "alter", "clicks", "-r", "3"]);
    cluster.wait_fully_replicated(&[0], "clicks", 3, SETTLE).expect("3 replicas each again");

    let described = cli(&cluster, &["topic", "describe", "clicks"]).success().expect("describe");
    assert!(
        described.stdout.contains("PARTITION") && described.stdout.contains("retention.ms=60000"),
        "{}",
        described.stdout
    );
    cli(&cluster, &["topic", "delete", "clicks"]).success().expect("delete");
    let gone = cli(&cluster, &["topic", "describe", "clicks"]);
    assert_eq!(gone.code, 3, "{gone:?}");
}

#[test]
fn a_stopped_group_is_reset_to_a_timestamp_and_its_next_consumer_rereads_from_there() {
    let cluster = three_brokers();
    cli(&cluster, &["topic", "create", "events", "-p", "3", "-r", "3"]).success().expect("create");
    cluster.wait_fully_replicated(&[0], "events", 3, SETTLE).expect("replicated");
    let bootstrap = cluster.bootstrap();
    let before = produce_tagged(&bootstrap, "events", "before", 3, 20);
    // The boundary: every record after it has a later timestamp.
    let boundary = now_ms() + 1;
    while now_ms() <= boundary {
        std::thread::yield_now();
    }
    let after = produce_tagged(&bootstrap, "events", "after", 3, 15);

    let mut first = member(&bootstrap, "billing", "billing-1", "events", Assignor::Range);
    let all: Vec<String> = before.iter().chain(&after).cloned().collect();
    wait_until_received(&[&first], &[], &all, "the first consumer");
    let ends = high_watermarks(&bootstrap, "events", 3);
    wait_for_committed(&bootstrap, "billing", "events", &ends);

    // Live members: refused, and the committed offsets stay where they are.
    let ts = boundary.to_string();
    let refused = cli(&cluster, &["group", "reset-offsets", "billing", "--topic", "events", "--to-timestamp", &ts]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(refused.stderr.contains("live member"), "{}", refused.stderr);
    assert_eq!(committed_offsets(&bootstrap, "billing", "events", 3).expect("OffsetFetch"), ends, "nothing moved");
    let deleting = cli(&cluster, &["group", "delete", "billing"]);
    assert_eq!(deleting.code, 1, "a group with members is not deleted: {deleting:?}");

    let described = cli_json(&cluster, &["group", "describe", "billing"]);
    assert_eq!(described["members"].as_array().map(Vec::len), Some(1), "{described}");
    assert!(described["offsets"].as_array().expect("offsets").iter().all(|o| o["lag"].as_i64() == Some(0)));
    first.leave().expect("the first consumer stops");

    let dry = cli_json(
        &cluster,
        &["group", "reset-offsets", "billing", "--topic", "events", "--to-timestamp", &ts, "--dry-run"],
    );
    assert_eq!(dry["offsets"].as_array().map(Vec::len), Some(3), "{dry}");
    assert_eq!(
        committed_offsets(&bootstrap, "billing", "events", 3).expect("OffsetFetch"),
        ends,
        "a dry run commits nothing"
    );

    let reset = cli_json(&cluster, &["group", "reset-offsets", "billing", "--topic", "events", "--to-timestamp", &ts]);
    let want: BTreeMap<i32, Option<i64>> = (0..3).map(|p| (p, Some(20))).collect();
    let got: BTreeMap<i32, Option<i64>> = reset["offsets"]
        .as_array()
        .expect("offsets")
        .iter()
        .map(|o| (i32::try_from(o["partition"].as_i64().unwrap_or(-1)).unwrap_or(-1), o["committed_offset"].as_i64()))
        .collect();
    assert_eq!(got, want, "each partition goes back to its first record after the boundary");
    wait_for_committed(&bootstrap, "billing", "events", &want);
    let lagging = cli_json(&cluster, &["group", "describe", "billing"]);
    assert!(lagging["offsets"].as_array().expect("offsets").iter().all(|o| o["lag"].as_i64() == Some(15)), "{lagging}");

    // The other kinds of reset, as dry runs from the offsets just committed (20 of 35 each).
    let dry_offsets = |args: &[&str]| -> Vec<Option<i64>> {
        let mut all = vec!["group", "reset-offsets", "billing", "--topic", "events", "--dry-run"];
        all.extend_from_slice(args);
        let answer = cli_json(&cluster, &all);
        answer["offsets"].as_array().expect("offsets").iter().map(|o| o["committed_offset"].as_i64()).collect()
    };
    assert_eq!(dry_offsets(&["--to-earliest"]), vec![Some(0); 3]);
    assert_eq!(dry_offsets(&["--to-latest"]), vec![Some(35); 3]);
    assert_eq!(dry_offsets(&["--to-offset", "7", "--partitions", "1"]), vec![Some(7)]);
    assert_eq!(dry_offsets(&["--shift-by", "-5"]), vec![Some(15); 3]);
    assert_eq!(dry_offsets(&["--shift-by", "100"]), vec![Some(35); 3], "clamped to the log end");
    assert_eq!(dry_offsets(&["--to-offset", "1000"]), vec![Some(35); 3], "clamped to the log end");
    wait_for_committed(&bootstrap, "billing", "events", &want);

    let mut second = member(&bootstrap, "billing", "billing-2", "events", Assignor::Range);
    wait_until_received(&[&second], &[], &after, "the next consumer");
    let reread = values_of(&second.records());
    assert!(before.iter().all(|v| !reread.contains(v)), "nothing before the timestamp is read again");
    assert_eq!(reread.len(), after.len(), "each record after the timestamp exactly once");
    second.leave().expect("the second consumer stops");

    let listed = cli(&cluster, &["group", "list"]).success().expect("list");
    assert!(listed.stdout.contains("billing"), "{}", listed.stdout);
    cli(&cluster, &["group", "delete", "billing"]).success().expect("delete the empty group");
    let gone = cli(&cluster, &["group", "describe", "billing"]);
    assert_eq!(gone.code, 3, "{gone:?}");
}

#[test]
fn unhealthy_partitions_are_listed_and_preferred_leaders_are_elected_through_the_cli() {
    let mut cluster = three_brokers();
    cli(&cluster, &["topic", "create", "health", "-p", "6", "-r", "3"]).success().expect("create");
    cluster.wait_fully_replicated(&[0], "health", 3, SETTLE).expect("replicated");
    cluster.brokers[2].kill().expect("SIGKILL broker 2");
    let described = e2e::cluster::wait_until(SETTLE, || {
        let d = cli_json(&cluster, &["cluster", "describe"]);
        anyhow::ensure!(d["cluster"]["under_replicated_partitions"].as_i64().unwrap_or(0) >= 6, "{d}");
        Ok(d)
    })
    .expect("the partitions without broker 2 are under-replicated");
    let listed: Vec<&str> = described["unhealthy"]["under_replicated_topics"]
        .as_array()
        .expect("list")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(listed.iter().filter(|t| **t == "health").count(), 6, "{described}");
    let brokers = described["cluster"]["brokers"].as_array().expect("brokers");
    assert!(brokers.iter().any(|b| b["id"] == 2 && b["live"] == false), "broker 2 shows as not live: {described}");

    cluster.brokers[2].start().expect("restart broker 2");
    cluster.wait_fully_replicated(&[0], "health", 3, SETTLE).expect("in sync again");
    let view = cluster.metadata_of(0).expect("metadata");
    let moved = view.topics["health"].partitions.iter().filter(|p| p.leader != p.replicas[0]).count();
    assert!(moved > 0, "broker 2's leaderships went elsewhere while it was down");
    let elected = cli(&cluster, &["cluster", "elect-leaders", "--topic", "health"]).success().expect("elect");
    assert!(elected.stdout.contains("6 partition(s) checked, 0 not elected"), "{}", elected.stdout);
    e2e::cluster::wait_until(SETTLE, || {
        let view = cluster.metadata_of(1)?;
        for (i, p) in view.topics["health"].partitions.iter().enumerate() {
            anyhow::ensure!(p.leader == p.replicas[0], "health-{i} led by {} not {}", p.leader, p.replicas[0]);
        }
        Ok(())
    })
    .expect("every partition led by its preferred replica");
}

/// What bad input must not change: every topic, its partitions and configs, and the brokers.
fn snapshot(cluster: &Cluster) -> (MetadataView, Value) {
    (cluster.metadata_of(0).expect("metadata"), cli_json(cluster, &["topic", "list", "--internal"]))
}

#[test]
fn bad_input_to_the_cli_and_the_admin_api_is_refused_clearly_and_changes_nothing() {
    let cluster = three_brokers();
    cli(&cluster, &["topic", "create", "kept", "-p", "2", "-r", "3"]).success().expect("create");
    cluster.wait_fully_replicated(&[0], "kept", 3, SETTLE).expect("replicated");
    let before = snapshot(&cluster);

    // (arguments, exit code, words the error must contain)
    let cases: &[(&[&str], i32, &[&str])] = &[
        (&["topic", "describe", "nope"], 3, &["topic nope does not exist"]),
        (&["topic", "create", "big", "-r", "4"], 2, &["replication factor 4", "3"]),
        (&["topic", "create", "neg", "-p", "-3"], 2, &["partitions", "-3"]),
        (&["topic", "create", "zero", "-p", "0"], 2, &["--partitions must be at least 1"]),
        (&["topic", "create", "bad name!"], 2, &["bad name!"]),
        (&["topic", "create", "cfg", "-c", "retention.ms"], 2, &["not key=value"]),
        (&["topic", "create", "cfg2", "-c", "no.such.config=1"], 2, &["no.such.config"]),
        (&["topic", "create", "__consumer_offsets"], 2, &["internal"]),
        (&["topic", "alter", "kept", "-p", "1"], 2, &["only grow"]),
        (&["topic", "alter", "kept", "-p", "-1"], 2, &["at least 1"]),
        (&["topic", "alter", "kept", "-r", "5"], 2, &["replication factor 5", "3 live broker"]),
        (&["topic", "alter", "kept"], 2, &["nothing to alter"]),
        (&["topic", "alter", "nope", "-p", "9"], 3, &["nope"]),
        (&["topic", "delete", "nope"], 3, &["nope"]),
        (&["topic", "delete", "__consumer_offsets"], 2, &["internal"]),
        (&["broker", "drain", "9"], 3, &["broker 9"]),
        (&["broker", "drain", "0"], 1, &["cannot drain", "kept"]),
        (&["broker", "remove", "9"], 3, &["broker 9"]),
        (&["broker", "remove", "1"], 1, &["voter"]),
        (&["rebalance", "execute", "--throttle", "fast"], 2, &["fast"]),
        (&["rebalance", "execute", "--throttle", "0"], 2, &["0 bytes/s"]),
        (&["rebalance", "plan", "--add-brokers", "7"], 3, &["broker 7"]),
        (&["group", "describe", "nobody"], 3, &["nobody"]),
        (&["group", "reset-offsets", "g", "--topic", "nope", "--to-earliest"], 3, &["nope"]),
        (&["group", "reset-offsets", "g", "--topic", "kept", "--to-offset", "-5"], 2, &["-5"]),
        (&["group", "reset-offsets", "g", "--topic", "kept", "--partitions", "7", "--to-earliest"], 2, &["7"]),
        (&["group", "reset-offsets", "g", "--topic", "kept", "--to-datetime", "yesterday"], 2, &["yesterday"]),
        (&["group", "reset-offsets", "g", "--topic", "kept"], 2, &["--to-"]),
        (&["cluster", "describe", "--output", "yaml"], 2, &["yaml"]),
        (&["topic", "frobnicate"], 2, &["frobnicate"]),
    ];
    for (args, code, words) in cases {
        let run = cli(&cluster, args);
        assert_eq!(run.code, *code, "strom {}: {run:?}", args.join(" "));
        for w in *words {
            assert!(run.stderr.contains(w), "strom {}: the error names {w:?}: {}", args.join(" "), run.stderr);
        }
        assert!(!run.stderr.contains("panicked"), "{}", run.stderr);
    }

    // Nobody listening: exit code 4.
    let unreachable = strom("127.0.0.1:1".parse().expect("addr"), &["cluster", "describe"]).expect("run");
    assert_eq!(unreachable.code, 4, "{unreachable:?}");
    assert!(unreachable.stderr.contains("cannot reach the admin API at 127.0.0.1:1"), "{}", unreachable.stderr);

    // Straight to the API: values the CLI would never send.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let endpoint = format!("http://{}", cluster.brokers[1].internal_addr());
    rt.block_on(async {
        let mut client = AdminClient::connect(endpoint).await.expect("connect");
        let empty = client.create_topic(CreateTopicRequest { name: String::new(), ..Default::default() }).await;
        let status = empty.expect_err("an empty topic name is refused");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        let huge = client
            .create_topic(CreateTopicRequest {
                name: "huge".into(),
                partitions: 1,
                replication_factor: 40_000,
                ..Default::default()
            })
            .await
            .expect_err("a replication factor beyond i16 is refused");
        assert_eq!(huge.code(), tonic::Code::InvalidArgument, "{huge:?}");
        let mode = client
            .plan_rebalance(RebalanceRequest { mode: 42, ..Default::default() })
            .await
            .expect_err("an unknown mode is refused");
        assert_eq!(mode.code(), tonic::Code::InvalidArgument, "{mode:?}");
        let kind = client
            .reset_group_offsets(ResetGroupOffsetsRequest {
                group: "g".into(),
                topic: "kept".into(),
                kind: 99,
                ..Default::default()
            })
            .await
            .expect_err("an unknown reset kind is refused");
        assert_eq!(kind.code(), tonic::Code::InvalidArgument, "{kind:?}");
        let nobody = client
            .reset_group_offsets(ResetGroupOffsetsRequest {
                group: String::new(),
                topic: "kept".into(),
                ..Default::default()
            })
            .await
            .expect_err("an empty group id is refused");
        assert_eq!(nobody.code(), tonic::Code::InvalidArgument, "{nobody:?}");
        let last = client.remove_broker(RemoveBrokerRequest { broker_id: -1 }).await.expect_err("broker -1");
        assert_eq!(last.code(), tonic::Code::NotFound, "{last:?}");
    });

    let after = snapshot(&cluster);
    assert_eq!(before.0, after.0, "the metadata Kafka clients see is unchanged");
    assert_eq!(before.1, after.1, "every topic, partition and config is unchanged");
    // The cluster still serves.
    cli(&cluster, &["cluster", "describe"]).success().expect("describe");
}

#[test]
fn draining_the_only_broker_is_refused() {
    let broker = BrokerProcess::launch(BrokerOptions::default()).expect("start a broker");
    strom(broker.internal_addr(), &["topic", "create", "solo", "-p", "2", "-r", "1"])
        .expect("run")
        .success()
        .expect("create solo");
    let run = strom(broker.internal_addr(), &["broker", "drain", "0"]).expect("run strom");
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("no broker would be left"), "{}", run.stderr);
    let described = strom(broker.internal_addr(), &["topic", "describe", "solo", "-o", "json"])
        .expect("run")
        .success()
        .expect("describe");
    let topic = described.json().expect("JSON");
    assert!(
        topic["partition_info"].as_array().expect("partitions").iter().all(|p| p["replicas"] == serde_json::json!([0])),
        "nothing moved: {topic}"
    );
}
