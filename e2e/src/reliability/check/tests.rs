//! Hand-made histories, one per anomaly: the checker reports each, and nothing in a clean one.

use super::*;

fn invoke(value: &str, partition: i32) -> Op {
    Op::new("p0", Type::Invoke, F::Send).value(value).partition(partition)
}

fn ack(value: &str, partition: i32, offset: i64) -> Op {
    Op::new("p0", Type::Ok, F::Send).value(value).partition(partition).offset(offset)
}

fn poll(process: &str, value: &str, partition: i32, offset: i64) -> Op {
    Op::new(process, Type::Ok, F::Poll).value(value).partition(partition).offset(offset)
}

fn assign(process: &str, partition: i32) -> Op {
    Op::new(process, Type::Ok, F::Assign).partition(partition)
}

fn observed(f: F, process: &str, partition: i32, offset: i64) -> Op {
    Op::new(process, Type::Ok, f).partition(partition).offset(offset)
}

/// Three values sent and acknowledged in turn at offsets 0..3 of partition 0, read by c0.
fn clean() -> Vec<Op> {
    let mut ops = Vec::new();
    for (i, v) in ["a", "b", "c"].iter().enumerate() {
        ops.push(invoke(v, 0));
        ops.push(ack(v, 0, i as i64));
    }
    ops.push(assign("c0", 0));
    for (i, v) in ["a", "b", "c"].iter().enumerate() {
        ops.push(poll("c0", v, 0, i as i64));
    }
    ops.push(observed(F::Watermark, "c0", 0, 3));
    ops.push(observed(F::Committed, "observer", 0, 2));
    ops.push(observed(F::Committed, "observer", 0, 3));
    ops
}

fn only(ops: &[Op]) -> Anomaly {
    let report = check(ops);
    assert_eq!(report.anomalies.len(), 1, "expected one anomaly, got {:#?}", report.anomalies);
    report.anomalies[0].clone()
}

#[test]
fn a_clean_history_has_no_anomaly_and_counts_what_happened() {
    let report = check(&clean());
    assert!(report.is_valid(), "{:#?}", report.anomalies);
    assert_eq!((report.sent, report.acknowledged, report.read, report.polls), (3, 3, 3, 3));
    assert_eq!(
        report.to_string(),
        "sent 3, acknowledged 3, failed 0, unknown 0, read 3 (3 polls), lost 0, duplicates 0, anomalies 0"
    );
}

#[test]
fn an_acknowledged_value_never_read_is_a_lost_write() {
    let ops: Vec<Op> =
        clean().into_iter().filter(|op| !(op.f == F::Poll && op.value.as_deref() == Some("c"))).collect();
    assert_eq!(only(&ops), Anomaly::Lost { value: "c".into(), partition: 0, offset: 2 });
}

#[test]
fn unknown_and_failed_sends_may_go_unread_but_a_failed_one_must_not_be_read() {
    let mut ops = clean();
    ops.push(invoke("d", 0));
    ops.push(Op::new("p0", Type::Info, F::Send).value("d").partition(0).error("timed out"));
    ops.push(invoke("e", 0));
    ops.push(Op::new("p0", Type::Fail, F::Send).value("e").partition(0).error("not persisted"));
    let report = check(&ops);
    assert!(report.is_valid(), "{:#?}", report.anomalies);
    assert_eq!((report.unknown, report.failed), (1, 1));
    // Reading the unknown one is fine; reading the failed one is not.
    ops.push(poll("c0", "d", 0, 3));
    assert!(check(&ops).is_valid());
    ops.push(poll("c0", "e", 0, 4));
    assert_eq!(only(&ops), Anomaly::PhantomRead { value: "e".into(), why: "its send failed" });
}

#[test]
fn a_value_never_sent_that_is_read_is_a_phantom() {
    let mut ops = clean();
    ops.push(poll("c0", "zzz", 0, 3));
    assert_eq!(only(&ops), Anomaly::PhantomRead { value: "zzz".into(), why: "never sent" });
}

#[test]
fn a_value_read_twice_or_elsewhere_than_acknowledged_is_a_duplicate() {
    let mut ops = clean();
    ops.push(assign("final", 0));
    ops.push(poll("final", "a", 0, 0));
    ops.push(poll("final", "b", 0, 1));
    ops.push(poll("final", "c", 0, 2));
    ops.push(poll("final", "c", 0, 3));
    assert_eq!(only(&ops), Anomaly::Duplicate { value: "c".into(), at: vec![(0, 2), (0, 3)] });

    let mut ops = clean();
    ops.retain(|op| !(op.f == F::Poll && op.value.as_deref() == Some("c")));
    ops.push(poll("c0", "c", 1, 0));
    assert_eq!(only(&ops), Anomaly::Duplicate { value: "c".into(), at: vec![(0, 2), (1, 0)] });
}

#[test]
fn a_read_going_backwards_within_an_assignment_is_a_non_monotonic_poll_but_not_after_a_reassignment() {
    let mut ops = clean();
    ops.push(poll("c0", "b", 0, 1));
    assert_eq!(only(&ops), Anomaly::NonMonotonicPoll { process: "c0".into(), partition: 0, previous: 2, offset: 1 });
    let mut ops = clean();
    ops.push(assign("c0", 0));
    ops.push(poll("c0", "b", 0, 1));
    assert!(check(&ops).is_valid(), "a consumer re-reads from its committed offset after a rebalance");
}

#[test]
fn a_read_jumping_over_an_offset_that_holds_a_value_is_a_poll_skip() {
    let mut ops = clean();
    ops.retain(|op| !(op.f == F::Poll && op.value.as_deref() == Some("b")));
    ops.push(assign("final", 0));
    ops.push(poll("final", "b", 0, 1));
    assert_eq!(
        only(&ops),
        Anomaly::PollSkip { process: "c0".into(), partition: 0, previous: 0, offset: 2, skipped: 1 }
    );
}

#[test]
fn two_values_at_one_offset_are_an_inconsistent_offset() {
    let mut ops = clean();
    ops.push(invoke("d", 0));
    // In flight together with "d", so it may land anywhere after it (no P5 ordering).
    ops.push(invoke("f", 0));
    ops.push(ack("d", 0, 3));
    ops.push(poll("c0", "d", 0, 3));
    ops.push(invoke("e", 1));
    ops.push(ack("e", 1, 0));
    ops.push(assign("c1", 1));
    ops.push(poll("c1", "e", 1, 0));
    assert!(check(&ops).is_valid());
    // A consumer reads something else where "d" was acknowledged.
    ops.push(Op::new("p0", Type::Info, F::Send).value("f").partition(0));
    ops.push(assign("c2", 0));
    ops.push(poll("c2", "f", 0, 3));
    assert_eq!(
        only(&ops),
        Anomaly::InconsistentOffset { partition: 0, offset: 3, values: vec!["d".into(), "f".into()] }
    );
}

#[test]
fn a_record_sent_after_another_was_acknowledged_must_land_above_it() {
    // "b" is sent after "a" was acknowledged at 5, and lands at 4: reordered.
    let ops = vec![
        invoke("a", 0),
        ack("a", 0, 5),
        invoke("b", 0),
        ack("b", 0, 4),
        assign("c0", 0),
        poll("c0", "b", 0, 4),
        poll("c0", "a", 0, 5),
    ];
    assert_eq!(
        only(&ops),
        Anomaly::NonMonotonicSend { partition: 0, earlier: ("a".into(), 5), later: ("b".into(), 4) }
    );
    // Two sends in flight together may land in either order.
    let ops = vec![
        invoke("a", 0),
        invoke("b", 0),
        ack("b", 0, 4),
        ack("a", 0, 5),
        assign("c0", 0),
        poll("c0", "b", 0, 4),
        poll("c0", "a", 0, 5),
    ];
    assert!(check(&ops).is_valid());
}

#[test]
fn an_acknowledgement_without_an_offset_counts_where_the_value_was_read() {
    let ops = vec![
        invoke("a", 0),
        ack("a", 0, -1),
        invoke("b", 0),
        ack("b", 0, 3),
        assign("c0", 0),
        poll("c0", "b", 0, 3),
        poll("c0", "a", 0, 4),
    ];
    assert_eq!(
        only(&ops),
        Anomaly::NonMonotonicSend { partition: 0, earlier: ("a".into(), 4), later: ("b".into(), 3) }
    );
}

#[test]
fn a_high_watermark_or_committed_offset_going_backwards_is_reported() {
    let mut ops = clean();
    ops.push(observed(F::Watermark, "c0", 0, 2));
    assert_eq!(
        only(&ops),
        Anomaly::HighWatermarkBackwards { process: "c0".into(), partition: 0, previous: 3, offset: 2 }
    );
    let mut ops = clean();
    ops.push(observed(F::Committed, "observer", 0, 1));
    assert_eq!(
        only(&ops),
        Anomaly::CommittedOffsetBackwards { process: "observer".into(), partition: 0, previous: 3, offset: 1 }
    );
    // Unknown (negative) observations are not observations.
    let mut ops = clean();
    ops.push(observed(F::Committed, "observer", 0, -1001));
    assert!(check(&ops).is_valid());
}
