use super::*;
use crate::crd::group::PartitionOffset;

fn topic_reset(topic: &str, to: ResetTo) -> TopicReset {
    TopicReset { topic: topic.into(), to, partitions: vec![], timestamp: None, shift_by: None, offsets: vec![] }
}

fn reset(id: &str, topics: Vec<TopicReset>) -> OffsetReset {
    OffsetReset { id: id.into(), topics }
}

fn group(members: usize, offsets: &[(&str, i32, i64)]) -> GroupView {
    GroupView {
        state: if members > 0 { "Stable".into() } else { "Empty".into() },
        members: (0..members)
            .map(|i| MemberView { client_id: format!("c{i}"), client_host: "/10.0.0.1".into() })
            .collect(),
        offsets: offsets
            .iter()
            .map(|(t, p, o)| LagView { topic: t.to_string(), partition: *p, committed: *o, log_end: 100, lag: 100 - o })
            .collect(),
    }
}

#[test]
fn timestamps_are_milliseconds_or_rfc_3339_and_anything_else_is_refused_with_the_reason() {
    assert_eq!(parse_timestamp("1700000000000"), Ok(1_700_000_000_000));
    assert_eq!(parse_timestamp("2026-12-01T00:00:00Z"), Ok(1_796_083_200_000));
    assert_eq!(parse_timestamp("2026-12-01T01:00:00+01:00"), Ok(1_796_083_200_000));
    let bad = parse_timestamp("2026-13-01T00:00:00Z").expect_err("refused");
    assert!(bad.contains("not RFC 3339"), "{bad}");
    assert!(parse_timestamp("yesterday").is_err());
    assert!(parse_timestamp("1969-12-31T23:59:59Z").expect_err("refused").contains("before 1970"));
}

#[test]
fn a_reset_is_applied_once_per_id() {
    let r = reset("r1", vec![topic_reset("orders", ResetTo::Earliest)]);
    let step = reset_step(Some(&r), None, Some(&group(0, &[])));
    let ResetStep::Compute(calls) = step else { panic!("{step:?}") };
    assert_eq!(
        calls,
        vec![ResetCall { topic: "orders".into(), partitions: vec![], kind: ResetKindOf::Earliest, value: 0 }]
    );
    let done = ResetResult { id: "r1".into(), applied_at: Some("2026-12-07T00:00:00Z".into()), offsets: vec![] };
    assert_eq!(reset_step(Some(&r), Some(&done), Some(&group(0, &[]))), ResetStep::Nothing);
    let again = reset("r2", r.topics.clone());
    assert!(matches!(reset_step(Some(&again), Some(&done), Some(&group(0, &[]))), ResetStep::Compute(_)));
    assert_eq!(reset_step(None, Some(&done), None), ResetStep::Nothing);
}

#[test]
fn a_reset_waits_while_the_group_has_members_and_says_who() {
    let r = reset("r1", vec![topic_reset("orders", ResetTo::Latest)]);
    let ResetStep::Wait(why) = reset_step(Some(&r), None, Some(&group(1, &[]))) else { panic!() };
    assert!(why.contains("1 member(s) (c0@/10.0.0.1)") && why.contains("stop its consumers"), "{why}");
    assert!(
        matches!(health("g", &ResetStep::Wait(why), None), Health::Reconciling { reason, .. } if reason == "WaitingForEmptyGroup")
    );
    assert!(matches!(reset_step(Some(&r), None, None), ResetStep::Compute(_)), "a group not yet known has no members");
}

#[test]
fn a_reset_interrupted_after_its_offsets_were_recorded_commits_the_same_offsets() {
    let r = reset("r1", vec![TopicReset { shift_by: Some(-10), ..topic_reset("orders", ResetTo::ShiftBy) }]);
    let recorded = ResetResult {
        id: "r1".into(),
        applied_at: None,
        offsets: vec![
            ResetOffset { topic: "orders".into(), partition: 0, before: Some(50), after: 40 },
            ResetOffset { topic: "orders".into(), partition: 1, before: Some(30), after: 20 },
            ResetOffset { topic: "orders".into(), partition: 2, before: None, after: 40 },
        ],
    };
    let ResetStep::Commit(offsets) = reset_step(Some(&r), Some(&recorded), Some(&group(0, &[("orders", 0, 40)])))
    else {
        panic!()
    };
    assert_eq!(offsets, recorded.offsets);
    let calls = commit_calls(&offsets);
    assert_eq!(
        calls,
        vec![
            ResetCall { topic: "orders".into(), partitions: vec![1], kind: ResetKindOf::Offset, value: 20 },
            ResetCall { topic: "orders".into(), partitions: vec![0, 2], kind: ResetKindOf::Offset, value: 40 },
        ]
    );
}

#[test]
fn offsets_per_partition_become_one_call_each_and_malformed_resets_are_invalid() {
    let offsets = vec![PartitionOffset { partition: 0, offset: 5 }, PartitionOffset { partition: 2, offset: 9 }];
    let r = reset("r1", vec![TopicReset { offsets, ..topic_reset("orders", ResetTo::Offset) }]);
    let calls = validate(&r).expect("valid");
    assert_eq!(calls.len(), 2);
    assert_eq!((calls[1].partitions.clone(), calls[1].value), (vec![2], 9));

    let bad_time = reset(
        "r1",
        vec![TopicReset {
            timestamp: Some("2026-02-30T00:00:00Z".into()),
            ..topic_reset("orders", ResetTo::Timestamp)
        }],
    );
    let ResetStep::Invalid(why) = reset_step(Some(&bad_time), None, Some(&group(1, &[]))) else { panic!() };
    assert!(why.starts_with("topic orders: timestamp"), "an invalid reset says so even while it would wait: {why}");
    assert!(matches!(health("g", &ResetStep::Invalid(why), None), Health::Stalled { .. }));
    let twice = reset("r1", vec![topic_reset("orders", ResetTo::Latest), topic_reset("orders", ResetTo::Earliest)]);
    assert!(validate(&twice).expect_err("refused").contains("listed twice"));
}

#[test]
fn offsets_before_and_after_are_paired_per_partition_and_lag_is_summed() {
    let g = group(0, &[("orders", 0, 70)]);
    let offsets = reset_offsets(Some(&g), &[("orders".into(), 1, 0), ("orders".into(), 0, 10)]);
    assert_eq!(
        offsets,
        vec![
            ResetOffset { topic: "orders".into(), partition: 0, before: Some(70), after: 10 },
            ResetOffset { topic: "orders".into(), partition: 1, before: None, after: 0 },
        ]
    );
    let (state, members, lag, per) = lag_status(Some(&group(2, &[("orders", 0, 70), ("orders", 1, 60)])));
    assert_eq!((state.as_str(), members, lag, per.len()), ("Stable", 2, 70, 2));
    assert_eq!(lag_status(None).0, "Dead");
}
