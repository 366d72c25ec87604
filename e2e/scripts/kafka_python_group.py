#!/usr/bin/env python3
"""kafka-python's group consumer against a Strom broker: subscribe in a group, read a topic fully,
commit, and a later member of the same group resumes exactly at the committed offsets.

Case "kafka-python group": a fresh 3-partition topic gets 3,000 unique records (acks=all). A
KafkaConsumer with group_id='g' subscribes (the coordinator assigns it every partition), polls
until it has read every record, commits synchronously and closes (LeaveGroup). The group's
committed offsets (KafkaConsumer.committed) must then equal the end offsets. 500 more records
are produced and a second consumer of group 'g' must receive exactly those: nothing the group
committed is delivered again, nothing after it is skipped.

Prints "PASS <case>" or "FAIL <case>: <why>"; exits 1 if the case failed.
"""

import argparse
import os
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient

GROUP = "g"
PARTITIONS = 3
# Long enough for the coordinator's initial rebalance delay (3 s by default) and a join.
READ_TIMEOUT_S = 60


def create_topic(bootstrap, topic, partitions):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="strom-e2e-py-admin")
    try:
        admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}})
    finally:
        admin.close()


def produce(bootstrap, topic, prefix, count):
    """Sends `count` unique values without keys, acks=all; returns them."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, client_id="strom-e2e-py-producer", acks="all", linger_ms=5)
    values = [f"{prefix}-{i:05d}".encode() for i in range(count)]
    futures = [producer.send(topic, value=v) for v in values]
    producer.flush(timeout=60)
    producer.close(timeout=10)
    failed = [f for f in futures if not f.is_done or f.failed()]
    if failed:
        raise RuntimeError(f"{len(failed)} of {count} sends failed or unsettled")
    return values


def read_in_group(bootstrap, topic, want, client_id):
    """A group-'g' member subscribed to `topic` polls until it holds every value of `want`,
    commits and closes. Returns (records in arrival order, committed offsets, end offsets)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id=client_id,
        group_id=GROUP,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        consumer.subscribe([topic])
        got = []
        seen = set()
        deadline = time.time() + READ_TIMEOUT_S
        while not want <= seen:
            if time.time() > deadline:
                raise RuntimeError(
                    f"{client_id}: {len(want - seen)} of {len(want)} records not received within {READ_TIMEOUT_S}s "
                    f"(assignment {sorted(tp.partition for tp in consumer.assignment())})"
                )
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend(batch)
                seen.update(r.value for r in batch)
        consumer.commit()
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        committed = {tp.partition: consumer.committed(tp) for tp in tps}
        ends = {tp.partition: off for tp, off in consumer.end_offsets(tps).items()}
        return got, committed, ends
    finally:
        consumer.close()


def group_case(bootstrap):
    topic = f"kafka-python-group-{os.getpid()}"
    create_topic(bootstrap, topic, PARTITIONS)
    first = produce(bootstrap, topic, "first", 3000)
    got, committed, ends = read_in_group(bootstrap, topic, set(first), "strom-e2e-py-group-1")
    dups = len(got) - len({r.value for r in got})
    if dups:
        return f"first member read {dups} records twice"
    if committed != ends:
        return f"committed offsets {committed} != end offsets {ends} after commit()"

    second = produce(bootstrap, topic, "second", 500)
    got, committed, ends = read_in_group(bootstrap, topic, set(second), "strom-e2e-py-group-2")
    again = [r for r in got if r.value.startswith(b"first-")]
    if again:
        r = again[0]
        return f"second member re-read {len(again)} committed records, first {r.partition}@{r.offset} {r.value!r}"
    if sorted(r.value for r in got) != sorted(second):
        return f"second member read {len(got)} records, wanted exactly the {len(second)} new ones"
    if committed != ends:
        return f"committed offsets {committed} != end offsets {ends} after the second commit()"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("group", help="the group consumer case")
    args = parser.parse_args()

    case = "kafka-python group"
    started = time.time()
    try:
        problem = group_case(args.bootstrap)
    except Exception as e:  # a client exception is a failed case, not a crash of the run
        problem = f"{type(e).__name__}: {e}"
    if problem:
        print(f"FAIL {case}: {problem}", flush=True)
        return 1
    print(f"PASS {case} (3000 + 500 records, group '{GROUP}', {time.time() - started:.1f}s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
