"""A kafkawire job through Spark Connect, run as a script by test_connect.py.

    python connect_job.py BOOTSTRAP IN_TOPIC OUT_TOPIC STREAM_TOPIC CHECKPOINT
    python connect_job.py avro BOOTSTRAP TOPIC REGISTRY_URL

The session is a Spark Connect client (``SparkSession.builder.remote("local[2]")``: PySpark
starts a local Connect server and talks to it over gRPC).  Reads IN_TOPIC in batch, writes
its values upper-cased to OUT_TOPIC, streams IN_TOPIC to STREAM_TOPIC with
Trigger.AvailableNow, and prints one JSON line: the session's type, the rows read and the
stream's input rows.  With ``avro`` first: reads TOPIC's Avro values into typed columns
(value.format=avro, the schemas from the registry at REGISTRY_URL) and prints the value
type and the rows (sparkavro.plain).  A script of its own: a process holds one SparkSession, and the
suite's is a classic one.
"""

from __future__ import annotations

import json
import os
import sys


def session():  # type: ignore[no-untyped-def]
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    import kafkawire.spark

    spark = SparkSession.builder.remote("local[2]").config("spark.sql.session.timeZone", "UTC").getOrCreate()
    kafkawire.spark.register(spark)
    return spark


def avro(bootstrap: str, topic: str, registry_url: str) -> None:
    from sparkavro import plain

    spark = session()
    try:
        df = (spark.read.format("kafkawire").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
              .option("value.format", "avro").option("schema.registry.url", registry_url).load())
        rows = [{"key": r.key.decode(), "partition": r.partition, "offset": r.offset, "value": plain(r.value)}
                for r in df.select("key", "partition", "offset", "value").collect()]
        print(json.dumps({"session": type(spark).__module__, "type": df.schema["value"].dataType.simpleString(),
                          "rows": rows}))
    finally:
        spark.stop()


def main() -> None:
    if sys.argv[1] == "avro":
        return avro(*sys.argv[2:5])
    bootstrap, in_topic, out_topic, stream_topic, checkpoint = sys.argv[1:6]
    spark = session()
    try:
        df = (spark.read.format("kafkawire").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", in_topic).load())
        rows = [{"key": r.key.decode(), "value": r.value.decode(), "partition": r.partition, "offset": r.offset}
                for r in df.select("key", "value", "partition", "offset").collect()]
        (df.selectExpr("key", "upper(CAST(value AS STRING)) AS value").write.format("kafkawire")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", out_topic).mode("append").save())
        query = (spark.readStream.format("kafkawire").option("kafka.bootstrap.servers", bootstrap)
                 .option("subscribe", in_topic).option("startingOffsets", "earliest")
                 .option("maxOffsetsPerTrigger", "150").load()
                 .select("key", "value").writeStream.format("kafkawire")
                 .option("kafka.bootstrap.servers", bootstrap).option("topic", stream_topic)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        if not query.awaitTermination(180):
            query.stop()
            raise SystemExit("the stream did not end within 180 s")
        if query.exception() is not None:
            raise SystemExit(f"the stream failed: {query.exception()}")
        stream_rows = [p.numInputRows for p in query.recentProgress]
        print(json.dumps({"session": type(spark).__module__, "rows": rows, "stream_rows": stream_rows}))
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
