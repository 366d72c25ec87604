#!/usr/bin/env python3
"""Checks what `kcat -C -J` read back against what clients.sh fed `kcat -P -K:`.

The input file holds the lines given to the producer, "key:value", where the value is
"value-<i>-written-<ms>": the record's index and the wall-clock time (ms) the line was written,
before kcat read it, so a lower bound for the CreateTime librdkafka stamps on it (kcat cannot
set timestamps itself). The consumed JSON lines come on stdin.

Checked: every input line comes back exactly once as key and value; each record carries the
given headers (repeated and empty values included, in order) and a CreateTime timestamp
between the line's write time and the end of the produce run; within a partition, offsets
ascend and timestamps do not go back; each key stays in one partition and its indexes ascend.

Prints the first problem found and exits 1, or prints nothing and exits 0. Standard library only.
"""

import argparse
import json
import re
import sys
from collections import Counter

VALUE = re.compile(r"value-(\d+)-written-(\d+)")


def problem(args, consumed):
    with open(args.input) as f:
        want = Counter(tuple(line.rstrip("\n").split(":", 1)) for line in f)
    headers = []
    for h in args.header:
        name, value = h.split("=", 1)
        headers += [name, value]

    if sum(want.values()) != args.records:
        return f"the input holds {sum(want.values())} lines, want {args.records}"
    records = [json.loads(line) for line in consumed if line.strip()]
    got = Counter((r["key"], r["payload"]) for r in records)
    if got != want:
        missing, extra = want - got, got - want
        return (
            f"read {len(records)} records for {args.records} produced: {sum(missing.values())} missing "
            f"(e.g. {next(iter(missing), None)}), {sum(extra.values())} extra or duplicated "
            f"(e.g. {next(iter(extra), None)})"
        )

    last_in_partition = {}  # partition -> (offset, ts)
    key_state = {}  # key -> (partition, index)
    for r in records:
        where = f"{r['partition']}@{r['offset']}"
        index, written_ms = (int(g) for g in VALUE.fullmatch(r["payload"]).groups())
        if r.get("headers") != headers:
            return f"{where}: headers {r.get('headers')} != {headers}"
        if r["tstype"] != "create":
            return f"{where}: timestamp type {r['tstype']}, want create"
        if not written_ms <= r["ts"] <= args.produced_by_ms:
            return f"{where}: timestamp {r['ts']} outside [{written_ms}, {args.produced_by_ms}] (written, produced)"
        offset_ts = last_in_partition.get(r["partition"])
        if offset_ts and (r["offset"] <= offset_ts[0] or r["ts"] < offset_ts[1]):
            return f"{where} (ts {r['ts']}) read after offset {offset_ts[0]} (ts {offset_ts[1]})"
        last_in_partition[r["partition"]] = (r["offset"], r["ts"])
        partition_index = key_state.get(r["key"])
        if partition_index and partition_index[0] != r["partition"]:
            return f"key {r['key']} in partitions {partition_index[0]} and {r['partition']}"
        if partition_index and index <= partition_index[1]:
            return f"{where}: key {r['key']} index {index} after index {partition_index[1]}"
        key_state[r["key"]] = (r["partition"], index)
    return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--input", required=True, help="the lines given to kcat -P -K:")
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--header", action="append", default=[], help="name=value, as given to kcat -H")
    parser.add_argument("--produced-by-ms", type=int, required=True, help="wall-clock ms after kcat -P exited")
    args = parser.parse_args()
    found = problem(args, sys.stdin)
    if found:
        print(found)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
