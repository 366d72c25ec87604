#!/usr/bin/env python3
"""kafka-python against a Strom broker: what the pure-Python client produces comes back intact.

For each codec (none, gzip, snappy, lz4, zstd) a fresh 3-partition topic is created with
KafkaAdminClient, 10,000 keyed records with headers (a repeated header key and an empty value
included) and explicit timestamps (distinct, not in send order, so a batch's timestamp deltas
go both ways) are produced with acks=all, and an assign-only consumer (group_id=None,
seek_to_beginning) reads them back. Checked: every record exactly once, per-key order (the
value carries a per-key sequence), one partition per key, key/value/headers intact, and each
timestamp the one sent, as CreateTime. A codec whose Python library is missing fails its case:
clients.sh installs them all.

Prints one line per case: "PASS <case>" or "FAIL <case>: <why>"; exits 1 if any case failed.
`create-topic` is a helper for clients.sh (kcat cannot create topics).
"""

import argparse
import os
import sys
import time
from collections import defaultdict

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka import codec as kcodec
from kafka.admin import KafkaAdminClient

CODECS = {
    "none": lambda: True,
    "gzip": kcodec.has_gzip,
    "snappy": kcodec.has_snappy,
    "lz4": kcodec.has_lz4,
    "zstd": kcodec.has_zstd,
}
KEYS = 97
# Timestamps are base + (i * TS_STEP) % TS_SPREAD: distinct for i < TS_SPREAD, and out of order.
TS_STEP = 7919
TS_SPREAD = 10007
CREATE_TIME = 0


def create_topic(bootstrap, topic, partitions):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="strom-e2e-py-admin")
    try:
        admin.create_topics({topic: {"num_partitions": partitions, "replication_factor": 1}})
    finally:
        admin.close()


def expected(i, base_ms):
    k = i % KEYS
    seq = i // KEYS
    key = f"key-{k:03d}".encode()
    value = f"k={k} seq={seq} {'py' * (i % 17)}".encode()
    headers = [("seq", str(seq).encode()), ("dup", b"first"), ("dup", b"second"), ("empty", b"")]
    timestamp_ms = base_ms + (i * TS_STEP) % TS_SPREAD
    return key, value, headers, timestamp_ms


def roundtrip(bootstrap, codec, records, partitions):
    topic = f"kafka-python-{codec}-{os.getpid()}"
    create_topic(bootstrap, topic, partitions)
    base_ms = int(time.time() * 1000) - 60_000

    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        client_id="strom-e2e-py-producer",
        acks="all",
        compression_type=None if codec == "none" else codec,
        linger_ms=5,
    )
    futures = []
    for i in range(records):
        key, value, headers, timestamp_ms = expected(i, base_ms)
        futures.append(producer.send(topic, key=key, value=value, headers=headers, timestamp_ms=timestamp_ms))
    producer.flush(timeout=120)
    failed = [f for f in futures if f.failed()]
    not_done = [f for f in futures if not f.is_done]
    producer.close(timeout=10)
    if failed or not_done:
        first = failed[0].exception if failed else "not done"
        return f"{len(failed)} sends failed, {len(not_done)} unsettled (first: {first!r})"

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        client_id="strom-e2e-py-consumer",
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(tps)
        if sum(ends.values()) != records:
            return f"high watermarks {ends} sum to {sum(ends.values())}, produced {records}"
        got = []
        deadline = time.time() + 120
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            if time.time() > deadline:
                positions = {tp.partition: consumer.position(tp) for tp in tps}
                return f"stuck at positions {positions}, ends {ends}"
            for batch in consumer.poll(timeout_ms=500).values():
                got.extend(batch)
    finally:
        consumer.close()

    if len(got) != records:
        return f"read {len(got)} records, produced {records}"
    next_seq = defaultdict(int)
    partition_of = {}
    for r in got:
        words = r.value.decode().split(" ")
        k, seq = int(words[0][2:]), int(words[1][4:])
        if seq != next_seq[k]:
            return f"{r.partition}@{r.offset}: key {k} seq {seq}, expected {next_seq[k]}"
        next_seq[k] = seq + 1
        if partition_of.setdefault(k, r.partition) != r.partition:
            return f"key {k} in partitions {partition_of[k]} and {r.partition}"
        key, value, headers, timestamp_ms = expected(seq * KEYS + k, base_ms)
        if (r.key, r.value) != (key, value):
            return f"{r.partition}@{r.offset}: {(r.key, r.value)!r} != {(key, value)!r}"
        if list(r.headers) != headers:
            return f"{r.partition}@{r.offset}: headers {list(r.headers)!r} != {headers!r}"
        if (r.timestamp, r.timestamp_type) != (timestamp_ms, CREATE_TIME):
            got_ts = f"timestamp {r.timestamp} (type {r.timestamp_type})"
            return f"{r.partition}@{r.offset}: {got_ts}, want {timestamp_ms} (type {CREATE_TIME}, CreateTime)"
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bootstrap", required=True)
    sub = parser.add_subparsers(dest="command", required=True)
    rt = sub.add_parser("roundtrip", help="round trip per codec")
    rt.add_argument("--records", type=int, default=10_000)
    rt.add_argument("--partitions", type=int, default=3)
    rt.add_argument("--codecs", default="none,gzip,snappy,lz4,zstd")
    ct = sub.add_parser("create-topic", help="create a topic")
    ct.add_argument("--topic", required=True)
    ct.add_argument("--partitions", type=int, default=3)
    args = parser.parse_args()

    if args.command == "create-topic":
        create_topic(args.bootstrap, args.topic, args.partitions)
        return 0

    failures = 0
    for codec in args.codecs.split(","):
        case = f"kafka-python {codec}"
        if codec not in CODECS:
            print(f"FAIL {case}: unknown codec", flush=True)
            failures += 1
            continue
        if not CODECS[codec]():
            print(f"FAIL {case}: the Python library for {codec} is not installed", flush=True)
            failures += 1
            continue
        started = time.time()
        try:
            problem = roundtrip(args.bootstrap, codec, args.records, args.partitions)
        except Exception as e:  # a client exception is a failed case, not a crash of the run
            problem = f"{type(e).__name__}: {e}"
        if problem:
            print(f"FAIL {case}: {problem}", flush=True)
            failures += 1
        else:
            print(f"PASS {case} ({args.records} records, {time.time() - started:.1f}s)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
