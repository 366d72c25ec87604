"""Kafka's partition-reassignment and leader-election APIs through kafka-python's admin client
(its own protocol code), against a Strom cluster of three brokers.

  kafka_python_reassign.py --bootstrap HOST:PORT[,...]

Creates a topic (3 partitions, replication factor 2) holding records; moves partition 0 onto
the broker it was not on (AlterPartitionReassignments), follows it with
ListPartitionReassignments until done and checks Metadata shows the new replicas in sync and
the first of them leading; checks the refusals Kafka gives (cancelling a partition that is not
moving: NO_REASSIGNMENT_IN_PROGRESS; an unknown broker: INVALID_REPLICA_ASSIGNMENT; an unknown
partition: UNKNOWN_TOPIC_OR_PARTITION); runs a preferred ElectLeaders; reads every record
back. Prints PASS/FAIL lines; exits 1 if anything failed.
"""

import argparse
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka import errors as Errors

TOPIC = "py-reassigned"
RECORDS = 300
failures = 0


def check(ok, what):
    global failures
    if ok:
        print(f"PASS kafka-python reassign: {what}")
    else:
        failures += 1
        print(f"FAIL kafka-python reassign: {what}")
    return ok


def partitions_of(admin):
    """{partition: {"leader", "replicas", "isr"}} from a Metadata request."""
    for t in admin.describe_topics([TOPIC]):
        if t["name"] == TOPIC:
            return {
                p["partition_index"]: {"leader": p["leader_id"], "replicas": p["replica_nodes"], "isr": p["isr_nodes"]}
                for p in t["partitions"]
            }
    return {}


def wait_for(what, predicate, timeout=60):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        try:
            last = predicate()
            if last:
                return last
        except Exception as e:  # noqa: BLE001 - report what kept failing
            last = e
        time.sleep(0.2)
    raise TimeoutError(f"{what}: last saw {last!r}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    args = parser.parse_args()
    admin = KafkaAdminClient(bootstrap_servers=args.bootstrap, client_id="strom-py-reassign")
    admin.create_topics([NewTopic(TOPIC, 3, 2)])
    wait_for("the topic has leaders", lambda: len(partitions_of(admin)) == 3
             and all(p["leader"] >= 0 and len(p["isr"]) == 2 for p in partitions_of(admin).values()))

    producer = KafkaProducer(bootstrap_servers=args.bootstrap, acks="all")
    values = [f"record-{i}".encode() for i in range(RECORDS)]
    for i, v in enumerate(values):
        producer.send(TOPIC, v, partition=i % 3)
    producer.flush(30)
    producer.close()

    before = partitions_of(admin)
    replicas = before[0]["replicas"]
    newcomer = next(b for b in (0, 1, 2) if b not in replicas)
    target = [newcomer, replicas[0]]
    tp0, tp1, tp2 = (TopicPartition(TOPIC, p) for p in range(3))
    result = admin.alter_partition_reassignments({tp0: target})
    check(result.get(tp0) is None, f"AlterPartitionReassignments {TOPIC}-0 {replicas} -> {target} accepted ({result})")

    listed = admin.list_partition_reassignments()
    print(f"ListPartitionReassignments right after: {listed}")
    try:
        wait_for("the move finishes", lambda: tp0 not in admin.list_partition_reassignments())
        check(True, "ListPartitionReassignments shows the move until it is done")
    except TimeoutError as e:
        check(False, f"the move never finished: {e}")
    try:
        after = wait_for("the new replicas lead and are in sync", lambda: (
            lambda p: p if sorted(p["replicas"]) == sorted(target) and sorted(p["isr"]) == sorted(target)
            and p["leader"] == target[0] else None)(partitions_of(admin)[0]))
        check(True, f"Metadata: {TOPIC}-0 replicas {after['replicas']} isr {after['isr']} leader {after['leader']}")
    except TimeoutError as e:
        check(False, f"Metadata never showed the target: {e}")

    refused = admin.alter_partition_reassignments({tp1: None})
    check(refused.get(tp1) is Errors.NoReassignmentInProgressError,
          f"cancelling a partition that is not moving: {refused.get(tp1)}")
    refused = admin.alter_partition_reassignments({tp2: [0, 99]})
    check(refused.get(tp2) is Errors.InvalidReplicationAssignmentError, f"an unknown broker: {refused.get(tp2)}")
    tp9 = TopicPartition(TOPIC, 9)
    refused = admin.alter_partition_reassignments({tp9: [0, 1]})
    check(refused.get(tp9) is Errors.UnknownTopicOrPartitionError, f"an unknown partition: {refused.get(tp9)}")
    check(partitions_of(admin)[2]["replicas"] == before[2]["replicas"], "a refused move changes nothing")

    response = admin.elect_leaders(0, {TOPIC: [0, 1, 2]}, raise_errors=False)
    codes = sorted(p.error_code for r in response.replica_election_results for p in r.partition_result)
    # Every partition is led by its preferred replica already: ELECTION_NOT_NEEDED (84) each.
    check(codes == [84, 84, 84], f"preferred ElectLeaders on preferred leaders: codes {codes}")

    consumer = KafkaConsumer(bootstrap_servers=args.bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=10000)
    consumer.assign([tp0, tp1, tp2])
    consumer.seek_to_beginning()
    got = set()
    deadline = time.time() + 60
    while len(got) < RECORDS and time.time() < deadline:
        for batch in consumer.poll(timeout_ms=1000).values():
            got.update(m.value for m in batch)
    consumer.close()
    check(got == set(values), f"every record is read back after the move ({len(got)} of {RECORDS})")
    admin.close()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
