"""The share consumer's per-record bookkeeping without a broker: ShareGroupMember's
take_records() and the settling of the records it gave (implicit acknowledgement), on
100,000 buffered records in runs of one partition (as ShareFetch answers leave them) and
alternating record by record (the worst case).  Min of 7 rounds, ns per record.

    .venv/bin/python bench/lab/share_take_records.py
"""

from __future__ import annotations

import time

from kafkawire.protocol.fetcher import TopicPartition
from kafkawire.protocol.share_group import ShareConsumerRecord, ShareGroupMember

N = 100_000


def main() -> None:
    for run in (500, 1):
        res = []
        for _ in range(7):
            m = ShareGroupMember("g")
            m.assignment = {TopicPartition("t", 0), TopicPartition("t", 1)}
            for i in range(N):
                m._buffer.append(ShareConsumerRecord("t", (i // run) % 2, i, 0, 0, None, b"v"))
            t = time.perf_counter()
            while m.take_records(500):
                pass
            m._settle_delivered()
            res.append((time.perf_counter() - t) / N * 1e9)
        print(f"runs of {run}: {min(res):.0f} ns/record")


if __name__ == "__main__":
    main()
