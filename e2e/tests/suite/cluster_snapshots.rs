//! Metadata log compaction (issue 4): after many metadata changes the raft log is compacted
//! into a snapshot, and a broker that was down for all of them — so the entries it misses are
//! gone — catches up by installing the leader's snapshot.

use std::time::Duration;

use e2e::cluster::{create_topic_via, delete_topic_via, set_topic_config_via, Cluster, ClusterSpec};

const SETTLE: Duration = Duration::from_secs(60);

#[test]
fn after_many_metadata_changes_the_log_is_compacted_and_a_broker_that_missed_them_installs_a_snapshot() {
    // Snapshot every 50 entries and keep none below it: a broker away for more than that
    // cannot be sent entries, only the snapshot.
    let spec = ClusterSpec::new(4, 3).with_args(&[
        "--metadata-snapshot-interval-entries",
        "50",
        "--metadata-max-retained-entries",
        "0",
    ]);
    let mut cluster = Cluster::start(spec).expect("start 3 voters and a learner");
    let away = 3;
    let applied_before = cluster.metric(away, "strom_metadata_applied_index").expect("applied index");
    cluster.broker(away).kill().expect("kill the learner");

    let addr = cluster.broker(0).kafka_addr();
    for i in 0..100 {
        let name = format!("churn-{i:03}");
        assert_eq!(create_topic_via(addr, &name, 1, &[]).expect("create").0, 0, "create {name}");
        if i % 2 == 0 {
            assert_eq!(set_topic_config_via(addr, &name, "retention.ms", "60000").expect("alter"), 0);
        } else {
            assert_eq!(delete_topic_via(addr, &name).expect("delete"), 0, "delete {name}");
        }
    }
    let controller = cluster.agreed_controller(SETTLE).expect("a controller");
    let start = e2e::cluster::wait_until(SETTLE, || {
        let start = cluster.metric(controller, "strom_metadata_log_start_index")?;
        anyhow::ensure!(
            start > applied_before + 1.0,
            "log starts at {start}; the learner had applied {applied_before}"
        );
        Ok(start)
    })
    .expect("the controller compacted its log past what the learner had");
    println!("learner had applied {applied_before}; the controller's log now starts at {start}");
    let snapshots = cluster.broker(controller).data_dir().join("metadata").join("snapshots");
    let files: Vec<_> = std::fs::read_dir(&snapshots).expect("snapshot dir").flatten().collect();
    assert!(!files.is_empty(), "{} holds a snapshot", snapshots.display());

    cluster.broker(away).start().expect("restart the learner");
    let view = cluster.wait_same_metadata(&[0, 1, 2, 3], SETTLE).expect("the learner catches up");
    assert_eq!(view.topics.len(), 50, "50 topics remain");
    let installs = cluster.metric(away, "strom_metadata_snapshot_installs_total").expect("installs");
    assert!(installs >= 1.0, "the learner installed a snapshot ({installs})");
}
