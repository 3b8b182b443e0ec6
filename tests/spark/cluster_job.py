"""A kafkawire Spark job for a standalone cluster, run as a script by test_standalone_cluster.py.

    python cluster_job.py MASTER_URL BOOTSTRAP IN_TOPIC OUT_TOPIC EXECUTORS
    python cluster_job.py MASTER_URL BOOTSTRAP IN_TOPIC avro EXECUTORS REGISTRY_URL

Reads IN_TOPIC with format("kafkawire"), writes its values upper-cased to OUT_TOPIC, and
prints one JSON line on stdout: the rows read, the write's row count, and which processes
ran the read tasks.  With ``avro`` for OUT_TOPIC it reads IN_TOPIC's Avro values into
typed columns instead (value.format=avro, schemas from the registry at REGISTRY_URL:
each executor's Python workers fetch the writer schemas themselves) and writes nothing;
the rows' values are printed as sparkavro.plain gives them.  It runs in its own process because a pytest process holds one
SparkSession (a local one) and a driver cannot switch masters.
"""

from __future__ import annotations

import json
import os
import sys
import time


def _executor() -> tuple[str, int]:
    """(executor id, pid) of the executor JVM above this Python worker.

    Python tasks are not told their executor id: the JVM that forked this worker (through
    pyspark.daemon) carries it on its command line, ``--executor-id N``.
    """
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().decode("utf-8", "replace").split("\0")
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in args:
            return args[args.index("--executor-id") + 1], pid
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            # Field 4 is the parent pid; the command name in field 2 may hold spaces.
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    return "?", -1


def _read_task(rows):  # type: ignore[no-untyped-def]
    executor_id, executor_pid = _executor()
    yield {"executor_id": executor_id, "executor_pid": executor_pid,
           "python_pid": os.getpid(), "rows": sum(1 for _ in rows)}


def main() -> None:
    master, bootstrap, in_topic, out_topic, executors = sys.argv[1:6]
    registry_url = sys.argv[6] if out_topic == "avro" else None
    n_executors = int(executors)
    # The driver binds loopback like the cluster, and its Python tasks run this interpreter.
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import kafkawire.spark

    t0 = time.monotonic()
    spark = (
        SparkSession.builder.master(master)
        .appName("kafkawire-cluster-job")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "512m")
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", str(n_executors))
        # Schedule nothing until every executor is up, so tasks spread over all of them.
        .config("spark.scheduler.minRegisteredResourcesRatio", "1.0")
        .config("spark.scheduler.maxRegisteredResourcesWaitingTime", "120s")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        # The reader implements pushFilters(), which Spark refuses unless this is on.
        .config("spark.sql.python.filterPushdown.enabled", "true")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    t_session = time.monotonic() - t0
    try:
        jsc = spark.sparkContext._jsc.sc()
        # The memory status map lists the driver's block manager too.
        deadline = time.monotonic() + 120
        while jsc.getExecutorMemoryStatus().size() < n_executors + 1:
            if time.monotonic() > deadline:
                raise SystemExit(f"only {jsc.getExecutorMemoryStatus().size() - 1} of "
                                 f"{n_executors} executors registered within 120 s")
            time.sleep(0.2)
        kafkawire.spark.register(spark)

        t1 = time.monotonic()
        reader = (spark.read.format("kafkawire")
                  .option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", in_topic))
        if registry_url is not None:
            reader = reader.option("value.format", "avro").option("schema.registry.url", registry_url)
        df = reader.load()
        tasks = df.rdd.mapPartitions(_read_task).collect()
        if registry_url is not None:
            from sparkavro import plain

            summary = {
                "driver_jvm_pid": spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid(),
                "read_tasks": tasks,
                "type": df.schema["value"].dataType.simpleString(),
                "rows": [{"key": r.key.decode(), "partition": r.partition, "offset": r.offset,
                          "value": plain(r.value)}
                         for r in df.select("key", "partition", "offset", "value").collect()],
            }
            print(json.dumps(summary))
            return
        rows = [
            {"key": r.key.decode(), "value": r.value.decode(), "partition": r.partition,
             "offset": r.offset}
            for r in df.select("key", "value", "partition", "offset").collect()
        ]
        t_read = time.monotonic() - t1

        t2 = time.monotonic()
        (df.selectExpr("key", "upper(CAST(value AS STRING)) AS value")
           .write.format("kafkawire")
           .option("kafka.bootstrap.servers", bootstrap)
           .option("topic", out_topic)
           .mode("append")
           .save())
        t_write = time.monotonic() - t2

        summary = {
            "driver_python_pid": os.getpid(),
            "driver_jvm_pid": spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid(),
            # host:port of each block manager, the driver's included.
            "block_managers": sorted(jsc.getExecutorMemoryStatus().keys().mkString(",").split(",")),
            "read_tasks": tasks,
            "rows": rows,
            "seconds": {"session": round(t_session, 1), "read": round(t_read, 1),
                        "write": round(t_write, 1)},
        }
    finally:
        spark.stop()
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
