use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::crd::topic::DeletionPolicy;
use crate::crd::ClusterRef;

fn spec(partitions: i32, rf: i32, config: &[(&str, &str)]) -> TopicSpec {
    TopicSpec {
        cluster_ref: ClusterRef { name: "events".into() },
        topic_name: None,
        partitions,
        replication_factor: rf,
        config: config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        deletion_policy: DeletionPolicy::Delete,
    }
}

fn view(partitions: i32, rf: i32, config: &[(&str, &str)]) -> TopicView {
    TopicView {
        id: "id-1".into(),
        partitions,
        replication_factor: rf,
        configs: config.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
        reassigning: 0,
    }
}

#[test]
fn a_missing_topic_is_created_as_the_spec_says() {
    let d = diff(&spec(6, 3, &[("retention.ms", "1000")]), None);
    let configs: BTreeMap<String, String> = [("retention.ms".to_string(), "1000".to_string())].into();
    assert_eq!(d.change, Change::Create { partitions: 6, replication_factor: 3, configs });
    assert!(matches!(health("t", &spec(6, 3, &[]), &d), Health::Reconciling { .. }));
}

#[test]
fn a_topic_as_the_spec_says_needs_nothing_and_is_ready() {
    let s = spec(3, 3, &[("retention.ms", "1000")]);
    let d = diff(&s, Some(&view(3, 3, &[("retention.ms", "1000"), ("cleanup.policy", "compact")])));
    assert_eq!(d.change, Change::Nothing, "a key left out of the spec is not managed");
    assert!(matches!(health("t", &s, &d), Health::Ready { .. }));
}

#[test]
fn partitions_grow_and_configs_that_differ_are_set_in_one_alteration() {
    let s = spec(6, 3, &[("retention.ms", "2000"), ("cleanup.policy", "delete")]);
    let have = view(3, 3, &[("retention.ms", "1000")]);
    let d = diff(&s, Some(&have));
    let Change::Alter(alter) = &d.change else { panic!("{d:?}") };
    assert_eq!(alter.partitions, Some(6));
    assert_eq!(alter.replication_factor, None);
    assert_eq!(alter.set_configs.len(), 2);
    assert_eq!(alter.describe(&have), "partitions 3 → 6, cleanup.policy (default) → delete, retention.ms 1000 → 2000");
}

#[test]
fn a_topic_with_more_partitions_than_the_spec_is_never_shrunk_and_stalls_with_the_reason() {
    let s = spec(3, 3, &[]);
    let d = diff(&s, Some(&view(6, 3, &[])));
    assert_eq!(d.change, Change::Nothing);
    assert_eq!(d.more_partitions_than_spec, Some((6, 3)));
    let Health::Stalled { reason, message } = health("t", &s, &d) else { panic!() };
    assert_eq!(reason, "PartitionsAboveSpec");
    assert!(message.contains("set spec.partitions to 6"), "{message}");
}

#[test]
fn a_replication_factor_change_is_a_reassignment_started_once() {
    let s = spec(3, 3, &[]);
    let d = diff(&s, Some(&view(3, 2, &[])));
    assert_eq!(d.change, Change::Alter(Alter { replication_factor: Some(3), ..Alter::default() }));
    let moving = TopicView { reassigning: 2, ..view(3, 2, &[]) };
    let d = diff(&s, Some(&moving));
    assert_eq!(d.change, Change::Nothing, "not started again while it runs");
    let Health::Reconciling { reason, message } = health("t", &s, &d) else { panic!() };
    assert_eq!(reason, "Reassigning");
    assert!(message.contains("2 partition(s)"), "{message}");
}

#[test]
fn dot_names_are_refused_before_they_reach_a_broker() {
    assert!(validate("orders").is_ok());
    assert!(validate("..").is_err());
    assert!(validate(".").is_err());
}

fn topic(name: &str, kafka: Option<&str>, created: &str) -> Topic {
    let mut t = Topic::new(name, TopicSpec { topic_name: kafka.map(str::to_string), ..spec(1, 1, &[]) });
    t.metadata.namespace = Some("ns".into());
    t.metadata.creation_timestamp = Some(Time(created.parse().expect("time")));
    t
}

#[test]
fn of_two_topic_resources_for_one_kafka_topic_the_older_manages_it() {
    let first = topic("orders", None, "2026-01-01T00:00:00Z");
    let second = topic("orders-copy", Some("orders"), "2026-01-02T00:00:00Z");
    let other = topic("payments", None, "2025-01-01T00:00:00Z");
    let all = [first.clone(), second.clone(), other];
    assert_eq!(claimed_by(&first, &all), None);
    assert_eq!(claimed_by(&second, &all), Some("orders".into()));
    let mut deleting = first.clone();
    deleting.metadata.deletion_timestamp = Some(Time("2026-01-03T00:00:00Z".parse().expect("time")));
    assert_eq!(claimed_by(&second, &[deleting.clone(), second.clone()]), None, "a Topic being deleted lets go");
    assert!(crate::claim::named_by_another(&deleting, &[deleting.clone(), second.clone()], names), "renamed in Git");
    assert!(!crate::claim::named_by_another(&second, &[deleting, second.clone()], names));
}
