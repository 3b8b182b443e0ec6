"""Kafka's own Admin client as an independent view: the programs in java/ run with java on
the cached kafka-clients jars, each printing one tab-separated line per item."""

from __future__ import annotations

import os
import subprocess

from kafkawire.testing.kafka import KAFKA_VERSION, java_binary, kafka_jars

HERE = os.path.join(os.path.dirname(__file__), "java")


def java_view(program: str, *args: str) -> list[list[str]]:
    """The lines ``java/<program>.java`` prints for ``args``, split on tabs."""
    libs = os.path.join(kafka_jars(KAFKA_VERSION), "*")
    out = subprocess.run([java_binary(), "-cp", libs, os.path.join(HERE, f"{program}.java"), *args],
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    return [line.split("\t") for line in out.stdout.splitlines() if "\t" in line]
