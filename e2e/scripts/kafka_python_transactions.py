#!/usr/bin/env python3
"""kafka-python's transactional producer and read_committed consumer against Strom.

A fresh 3-partition topic; one transactional producer (transactional_id) commits 100 records,
aborts 50 and commits 100 more. An assign-only consumer with isolation_level=read_committed
must read exactly the 200 committed records, each once, and none of the aborted ones; one
with read_uncommitted reads all 250. Then a second producer with the same transactional_id
fences the first: the first's next commit fails, and what it sent is never read committed.

Prints "PASS <case>" or "FAIL <case>: <why>" per case; exits 1 if any failed.
"""

import argparse
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient

PARTITIONS = 3


def create_topic(bootstrap, topic):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="strom-e2e-py-admin")
    try:
        admin.create_topics({topic: {"num_partitions": PARTITIONS, "replication_factor": 1}})
    finally:
        admin.close()


def producer(bootstrap, transactional_id):
    p = KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id="strom-e2e-py-txn",
        transactional_id=transactional_id,
        acks="all",
        enable_idempotence=True,
    )
    p.init_transactions()
    return p


def transaction(p, topic, prefix, n, commit):
    p.begin_transaction()
    for i in range(n):
        p.send(topic, key=str(i).encode(), value=f"{prefix}-{i}".encode())
    p.flush()
    if commit:
        p.commit_transaction()
    else:
        p.abort_transaction()


def read(bootstrap, topic, isolation, expected, quiet=2.0, limit=60.0):
    """Values read from the beginning until `expected` arrived and `quiet` seconds brought none."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id=f"strom-e2e-py-{isolation}",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation,
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        got = []
        deadline = time.time() + limit
        last = time.time()
        while time.time() < deadline:
            batch = consumer.poll(timeout_ms=200)
            for records in batch.values():
                got.extend(r.value.decode() for r in records)
                last = time.time()
            if len(got) >= expected and time.time() - last > quiet:
                break
        return got
    finally:
        consumer.close()


def commit_and_abort(bootstrap):
    topic = "kp-txn"
    create_topic(bootstrap, topic)
    p = producer(bootstrap, "kp-tx")
    transaction(p, topic, "first", 100, True)
    transaction(p, topic, "aborted", 50, False)
    transaction(p, topic, "second", 100, True)
    p.close()
    committed = {f"first-{i}" for i in range(100)} | {f"second-{i}" for i in range(100)}
    got = read(bootstrap, topic, "read_committed", len(committed))
    if len(got) != len(committed) or set(got) != committed:
        extra = sorted(set(got) - committed)[:5]
        return f"read_committed read {len(got)} records ({len(set(got))} distinct), extra {extra}"
    everything = read(bootstrap, topic, "read_uncommitted", 250)
    if len(everything) != 250 or sum(v.startswith("aborted-") for v in everything) != 50:
        return f"read_uncommitted read {len(everything)} records"
    return None


def fencing(bootstrap):
    topic = "kp-fence"
    create_topic(bootstrap, topic)
    zombie = producer(bootstrap, "kp-shared")
    zombie.begin_transaction()
    for i in range(10):
        zombie.send(topic, value=f"zombie-{i}".encode())
    zombie.flush()
    successor = producer(bootstrap, "kp-shared")
    transaction(successor, topic, "successor", 10, True)
    successor.close()
    try:
        zombie.commit_transaction()
        return "the fenced producer's commit succeeded"
    except Exception:  # kafka-python raises ProducerFencedError (or a KafkaError around it)
        pass
    finally:
        zombie.close(timeout=5)
    got = read(bootstrap, topic, "read_committed", 10)
    if sorted(got) != sorted(f"successor-{i}" for i in range(10)):
        return f"read_committed read {sorted(got)[:12]}"
    return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    args = parser.parse_args()
    failed = False
    for name, case in [("transactions commit/abort", commit_and_abort), ("transactions fencing", fencing)]:
        try:
            why = case(args.bootstrap)
        except Exception as e:  # a crash of a case is its failure, with the cause
            why = f"{type(e).__name__}: {e}"
        if why is None:
            print(f"PASS kafka-python {name}")
        else:
            failed = True
            print(f"FAIL kafka-python {name}: {why}")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
