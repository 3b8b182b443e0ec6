"""Share-group consumption side by side: kafkawire's ShareConsumer and Kafka's own
KafkaShareConsumer (kafka-clients, run with java from the cached jars), each alone in a
fresh share group reading the same topic on one Apache Kafka node.

Each reads ``--records`` records of ``--size`` bytes from the start (the group's start
offset set with Admin.alter_share_group_offsets), acknowledging implicitly; the time is
from its first record to the last, so joining and the JVM's start are left out.  Rounds
alternate between the clients; medians are reported.

    .venv/bin/python bench/compare_share.py --records 200000 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
import uuid

from kafkawire import Admin, Producer, ShareConsumer
from kafkawire.client.admin import NewTopic
from kafkawire.testing.kafka import KAFKA_VERSION, KafkaCluster, java_binary, kafka_jars

READER = os.path.join(os.path.dirname(__file__), "..", "tests", "integration", "java", "ShareReader.java")


def fresh_group(bootstrap: str, topic: str) -> str:
    group = f"bench-{uuid.uuid4().hex[:8]}"
    with Admin(bootstrap_servers=bootstrap) as admin:
        admin.alter_share_group_offsets(group, {(topic, 0): 0})
    return group


def kafkawire_round(bootstrap: str, topic: str, n: int) -> float:
    group = fresh_group(bootstrap, topic)
    with ShareConsumer(bootstrap_servers=bootstrap, group_id=group) as c:
        c.subscribe([topic])
        got, first = 0, None
        deadline = time.monotonic() + 300
        while got < n and time.monotonic() < deadline:
            recs = c.poll(1.0)
            if recs and first is None:
                first = time.perf_counter()
            got += len(recs)
        assert got >= n and first is not None, got
        return time.perf_counter() - first


def java_round(bootstrap: str, topic: str, n: int) -> float:
    group = fresh_group(bootstrap, topic)
    libs = os.path.join(kafka_jars(KAFKA_VERSION), "*")
    out = subprocess.run([java_binary(), "-cp", libs, READER, bootstrap, group, topic, "30", "300", str(n)],
                         capture_output=True, text=True, timeout=400).stdout
    line = next(x for x in out.splitlines() if x.startswith("count\t"))
    return int(line.split("\t")[2]) / 1000.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with KafkaCluster(1) as k:
        topic = f"share-bench-{uuid.uuid4().hex[:8]}"
        with Admin(bootstrap_servers=k.bootstrap) as admin:
            admin.create_topics([NewTopic(topic, 1, -1)], timeout=30)
        value = b"x" * args.size
        with Producer(bootstrap_servers=k.bootstrap, linger_ms=5) as p:
            for _ in range(args.records):
                p.send(topic, value=value)
            p.flush(120)
        times: dict[str, list[float]] = {"kafkawire": [], "java": []}
        for _ in range(args.rounds):
            times["kafkawire"].append(kafkawire_round(k.bootstrap, topic, args.records))
            times["java"].append(java_round(k.bootstrap, topic, args.records))
    print(f"{args.records} records of {args.size} B, one member, implicit acknowledgement, "
          f"Apache Kafka {KAFKA_VERSION}, medians of {args.rounds} rounds")
    print("| client | seconds | records/s |")
    print("|---|---|---|")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"| {name} | {med:.3f} | {args.records / med:,.0f} |")
    ratio = statistics.median(times["java"]) / statistics.median(times["kafkawire"])
    print(f"kafkawire / java throughput: {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
