"""The data source's options, parsed and checked on the driver, with no Spark and no I/O.

Names, defaults and meanings are the JVM Kafka connector's (spark-sql-kafka-0-10), so a
query moves between ``format("kafka")`` and ``format("kafkawire")`` by changing the name.
Every error is a :class:`KafkawireOptionError` naming the option and what it takes.
"""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass
from typing import Any, Mapping

from kafkawire.core.config import Config
from kafkawire.errors import ConfigError
from kafkawire.spark._errors import KafkawireOptionError
from kafkawire.spark import _typed
from kafkawire.spark._security import translate

__all__ = ["KafkawireOptionError", "SourceOptions", "SinkOptions", "EARLIEST", "LATEST"]

# Kafka's ListOffsets sentinels, which the connector's JSON offsets use too.
EARLIEST, LATEST = -2, -1

# Rejected as the JVM connector rejects them: the source manages offsets and bytes itself.
_REJECTED_SOURCE = {
    "kafka.auto.offset.reset": "set startingOffsets instead",
    "kafka.enable.auto.commit": "the source commits nothing to Kafka; offsets live in the checkpoint",
    "kafka.key.deserializer": "keys are always binary; cast or decode them in a DataFrame expression",
    "kafka.value.deserializer": "values are always binary; cast or decode them in a DataFrame expression",
    "kafka.interceptor.classes": "interceptors are Java classes and do not apply",
}
_REJECTED_SINK = {
    "kafka.key.serializer": "keys are written as binary; cast them to binary or string first",
    "kafka.value.serializer": "values are written as binary; cast them to binary or string first",
    "kafka.interceptor.classes": "interceptors are Java classes and do not apply",
}
# Java client options that mean nothing to a client without consumer groups: accepted and
# dropped (the JVM connector sets group.id only to name its own consumers).
_IGNORED = {"kafka.group.id", "kafka.client.dns.lookup"}

_SOURCE_KEYS = {
    "assign", "subscribe", "subscribepattern", "startingoffsets", "endingoffsets",
    "startingtimestamp", "startingoffsetsbytimestamp", "endingtimestamp",
    "endingoffsetsbytimestamp", "startingoffsetsbytimestampstrategy", "failondataloss",
    "maxoffsetspertrigger", "minoffsetspertrigger", "maxtriggerdelay", "minpartitions",
    "maxrecordsperpartition", "includeheaders", "groupidprefix", "kafkaconsumer.polltimeoutms",
    "fetchoffset.numretries", "fetchoffset.retryintervalms", *_typed.OPTION_NAMES,
}
_SINK_KEYS = {"topic", "includeheaders", *_typed.OPTION_NAMES} - {"mode"}  # a sink writes, it has no decode mode
# lowercase -> the documented spelling, for error messages and "did you mean".
_SPELLING = {**{name.lower(): name for name in (
    "assign", "subscribe", "subscribePattern", "startingOffsets", "endingOffsets", "startingTimestamp",
    "startingOffsetsByTimestamp", "endingTimestamp", "endingOffsetsByTimestamp",
    "startingOffsetsByTimestampStrategy", "failOnDataLoss", "maxOffsetsPerTrigger", "minOffsetsPerTrigger",
    "maxTriggerDelay", "minPartitions", "maxRecordsPerPartition", "includeHeaders", "topic")},
    **_typed.OPTION_NAMES}


def _lower(options: Mapping[str, Any]) -> dict[str, str]:
    return {str(k).lower(): ("" if v is None else str(v)) for k, v in options.items()}


def _check_names(opts: dict[str, str], known: set[str], where: str) -> None:
    """Reject a misspelt option (close to one of ours) or one of the other side's; others
    pass, since Spark adds its own (path, checkpointLocation, ...)."""
    for name in sorted(opts):
        if name.startswith("kafka.") or name in known:
            continue
        if name.startswith(_typed.REGISTRY_PREFIX):
            if "value.format" in known:
                continue  # checked with the typed-column options
            raise KafkawireOptionError(f"option {name!r} does not apply {where}")
        if name in _SPELLING or name in _SOURCE_KEYS:
            raise KafkawireOptionError(f"option {name!r} does not apply {where}")
        # 0.8 lets one wrong letter of a five-letter name through ('topik' for 'topic').
        close = difflib.get_close_matches(name, list(_SPELLING), n=1, cutoff=0.8)
        if close and _SPELLING[close[0]].lower() in known:
            raise KafkawireOptionError(f"unknown option {name!r} {where}; did you mean {_SPELLING[close[0]]!r}?")


def parse_bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise KafkawireOptionError(f"option {name!r} must be 'true' or 'false', got {raw!r}")
    return value == "true"


def _positive(name: str, raw: str, allow_zero: bool = False) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        value = None
    if value is None or value < 0 or (value == 0 and not allow_zero):
        need = "an integer >= 0" if allow_zero else "a positive integer"
        raise KafkawireOptionError(f"option {name!r} must be {need}, got {raw!r}")
    return value


def _duration_ms(name: str, raw: str) -> int:
    """A Spark duration like '15m', '30s', '500ms' or a bare number of milliseconds."""
    m = re.fullmatch(r"\s*(\d+)\s*(ms|s|m|min|h|d)?\s*", raw.lower())
    if not m:
        raise KafkawireOptionError(f"option {name!r} must be a duration like '15m' or '30s', got {raw!r}")
    scale = {None: 1, "ms": 1, "s": 1000, "m": 60000, "min": 60000, "h": 3600000, "d": 86400000}
    return int(m.group(1)) * scale[m.group(2)]


def _json(name: str, raw: str, example: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise KafkawireOptionError(f"option {name!r} is not valid JSON ({exc}); expected e.g. {example}") from None


def _partition_map(name: str, raw: str, what: str) -> dict[str, dict[int, int]]:
    """``{"topic": {"0": 23, "1": -2}}`` -> ``{"topic": {0: 23, 1: -2}}``."""
    example = '{"topicA":{"0":23,"1":-1}}'
    value = _json(name, raw, example)
    if not isinstance(value, dict):
        raise KafkawireOptionError(f"option {name!r} must be a JSON object like {example}, got {raw!r}")
    out: dict[str, dict[int, int]] = {}
    for topic, parts in value.items():
        if not isinstance(parts, dict):
            raise KafkawireOptionError(f"option {name!r}: topic {topic!r} must map partitions to {what}, like {example}")
        out[topic] = {}
        for p, v in parts.items():
            try:
                pi = int(p)
            except (TypeError, ValueError):
                pi = -1
            if pi < 0 or isinstance(v, bool) or not isinstance(v, int):
                raise KafkawireOptionError(
                    f"option {name!r}: {topic!r} partition {p!r} -> {v!r} is not a partition number "
                    f"mapped to {what}")
            out[topic][pi] = v
    return out


def _client_options(opts: dict[str, str], kind: str, rejected: dict[str, str]) -> tuple[dict[str, Any], Config]:
    """``kafka.*`` options with the prefix stripped, as kafkawire client options
    (``kafka.max.partition.fetch.bytes`` -> ``max_partition_fetch_bytes``), and the client
    Config they make: checked now so a bad one fails the query on the driver, not in
    every task.  The Java security settings (JAAS, keystores) stay in their Java form,
    translated where each client is made (keystore paths name files on that machine)."""
    out: dict[str, Any] = {}
    for name, value in opts.items():
        if not name.startswith("kafka."):
            continue
        if name in rejected:
            raise KafkawireOptionError(f"option {name!r} is not supported by format('kafkawire'): {rejected[name]}")
        if name in _IGNORED:
            continue
        out[name[len("kafka."):].replace(".", "_")] = value
    if "bootstrap_servers" not in out or not out["bootstrap_servers"].strip():
        given = [name for name in opts if name.startswith("kafka.") and name != "kafka.bootstrap.servers"]
        close = difflib.get_close_matches("kafka.bootstrap.servers", given, n=1, cutoff=0.8)
        if close:
            raise KafkawireOptionError(
                f"unknown option {close[0]!r}; did you mean 'kafka.bootstrap.servers'? (it is required, "
                f"e.g. .option('kafka.bootstrap.servers', 'host:9092'))")
        raise KafkawireOptionError(
            "option 'kafka.bootstrap.servers' is required, e.g. .option('kafka.bootstrap.servers', 'host:9092')")
    try:
        config = getattr(Config, kind)(**translate(out))
    except ConfigError as exc:
        raise KafkawireOptionError(f"a kafka.* option is not accepted by kafkawire's {kind}: {exc}") from None
    return out, config


@dataclass
class SourceOptions:
    """The source's options, parsed.  Offsets specs are dicts ``{topic: {partition: n}}``
    with EARLIEST/LATEST sentinels, or ``"earliest"`` / ``"latest"`` for every partition."""

    client: dict[str, Any]
    assign: dict[str, list[int]] | None = None
    subscribe: list[str] | None = None
    pattern: re.Pattern | None = None
    starting: Any = None  # None: the default for the query kind
    ending: Any = "latest"
    starting_by_timestamp: Any = None  # int (every partition) or {topic: {partition: ts}}
    ending_by_timestamp: Any = None
    timestamp_strategy: str = "error"
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60 * 1000
    min_partitions: int | None = None
    max_records_per_partition: int | None = None
    include_headers: bool = False
    poll_timeout_ms: int = 120000
    typed: Any = None  # _typed.TypedColumns: keys/values decoded into columns; None: binary

    @classmethod
    def parse(cls, options: Mapping[str, Any], streaming: bool) -> SourceOptions:
        opts = _lower(options)
        _check_names(opts, _SOURCE_KEYS, "to reading format('kafkawire')")
        self = cls(client=_client_options(opts, "consumer", _REJECTED_SOURCE)[0])
        chosen = [k for k in ("assign", "subscribe", "subscribepattern") if k in opts]
        if len(chosen) != 1:
            raise KafkawireOptionError(
                "exactly one of the options 'assign', 'subscribe' or 'subscribePattern' must be set"
                + (f"; got {chosen}" if chosen else ""))
        if "assign" in opts:
            example = '{"topicA":[0,1],"topicB":[2,4]}'
            value = _json("assign", opts["assign"], example)
            if (not isinstance(value, dict) or not value or not all(
                    isinstance(ps, list) and all(isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in ps)
                    for ps in value.values())):
                raise KafkawireOptionError(f"option 'assign' must be JSON like {example}, got {opts['assign']!r}")
            self.assign = {t: sorted(set(ps)) for t, ps in value.items()}
        elif "subscribe" in opts:
            topics = [t.strip() for t in opts["subscribe"].split(",") if t.strip()]
            if not topics:
                raise KafkawireOptionError("option 'subscribe' must list one or more topics, comma-separated")
            self.subscribe = topics
        else:
            try:
                self.pattern = re.compile(opts["subscribepattern"])
            except re.error as exc:
                raise KafkawireOptionError(f"option 'subscribePattern' is not a valid regular expression: {exc}") from None
        self._parse_offsets(opts, streaming)
        self.typed = _typed.parse(opts)
        if "failondataloss" in opts:
            self.fail_on_data_loss = parse_bool("failOnDataLoss", opts["failondataloss"])
        if "includeheaders" in opts:
            self.include_headers = parse_bool("includeHeaders", opts["includeheaders"])
        for key, attr, name in (("maxoffsetspertrigger", "max_offsets_per_trigger", "maxOffsetsPerTrigger"),
                                ("minoffsetspertrigger", "min_offsets_per_trigger", "minOffsetsPerTrigger"),
                                ("minpartitions", "min_partitions", "minPartitions"),
                                ("maxrecordsperpartition", "max_records_per_partition", "maxRecordsPerPartition"),
                                ("kafkaconsumer.polltimeoutms", "poll_timeout_ms", "kafkaConsumer.pollTimeoutMs")):
            if key in opts:
                setattr(self, attr, _positive(name, opts[key]))
        if "maxtriggerdelay" in opts:
            self.max_trigger_delay_ms = _duration_ms("maxTriggerDelay", opts["maxtriggerdelay"])
        if not streaming:
            for key, name in (("maxoffsetspertrigger", "maxOffsetsPerTrigger"),
                              ("minoffsetspertrigger", "minOffsetsPerTrigger")):
                if key in opts:
                    raise KafkawireOptionError(f"option {name!r} applies to streaming queries only")
        return self

    def _parse_offsets(self, opts: dict[str, str], streaming: bool) -> None:
        for key, attr, name, forbidden in (
            ("startingoffsets", "starting", "startingOffsets", "latest" if not streaming else None),
            ("endingoffsets", "ending", "endingOffsets", "earliest"),
        ):
            if key not in opts:
                continue
            if streaming and key == "endingoffsets":
                raise KafkawireOptionError("option 'endingOffsets' is for batch queries only; a stream has no end")
            raw = opts[key].strip()
            if raw.lower() in ("earliest", "latest"):
                if raw.lower() == forbidden:
                    raise KafkawireOptionError(
                        f"option {name!r} cannot be {forbidden!r} for a "
                        f"{'streaming' if streaming else 'batch'} query")
                setattr(self, attr, raw.lower())
                continue
            spec = _partition_map(name, raw, "offsets (-2 earliest, -1 latest)")
            bad_sentinel = LATEST if key == "startingoffsets" and not streaming else EARLIEST if key == "endingoffsets" else None
            for topic, parts in spec.items():
                for p, v in parts.items():
                    if v < EARLIEST or v == bad_sentinel:
                        raise KafkawireOptionError(
                            f"option {name!r}: offset {v} for {topic}[{p}] is not allowed here "
                            f"(use an offset >= 0{', -2 (earliest)' if key == 'startingoffsets' else ''}"
                            f"{', -1 (latest)' if key == 'endingoffsets' or streaming else ''})")
            setattr(self, attr, spec)
        # startingTimestamp wins over startingOffsetsByTimestamp, which wins over
        # startingOffsets (the JVM connector's precedence); likewise for the ending ones.
        for ts_key, map_key, attr, names in (
            ("startingtimestamp", "startingoffsetsbytimestamp", "starting_by_timestamp",
             ("startingTimestamp", "startingOffsetsByTimestamp")),
            ("endingtimestamp", "endingoffsetsbytimestamp", "ending_by_timestamp",
             ("endingTimestamp", "endingOffsetsByTimestamp")),
        ):
            if streaming and attr == "ending_by_timestamp" and (ts_key in opts or map_key in opts):
                raise KafkawireOptionError(f"options {names[0]!r} and {names[1]!r} are for batch queries only")
            if ts_key in opts:
                setattr(self, attr, _positive(names[0], opts[ts_key], allow_zero=True))
            elif map_key in opts:
                spec = _partition_map(names[1], opts[map_key], "timestamps in ms")
                for topic, parts in spec.items():
                    for p, v in parts.items():
                        if v < 0:
                            raise KafkawireOptionError(f"option {names[1]!r}: timestamp {v} for {topic}[{p}] is negative")
                setattr(self, attr, spec)
        if "startingoffsetsbytimestampstrategy" in opts:
            value = opts["startingoffsetsbytimestampstrategy"].strip().lower()
            if value not in ("error", "latest"):
                raise KafkawireOptionError(
                    f"option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest', "
                    f"got {opts['startingoffsetsbytimestampstrategy']!r}")
            self.timestamp_strategy = value
        if self.starting is None:
            self.starting = "latest" if streaming else "earliest"


@dataclass
class SinkOptions:
    client: dict[str, Any]
    delivery_timeout_s: float  # how long a task waits for its acknowledgements
    topic: str | None = None
    typed: Any = None  # _typed.TypedColumns: key/value columns written as Avro; None: as given

    @classmethod
    def parse(cls, options: Mapping[str, Any]) -> SinkOptions:
        opts = _lower(options)
        _check_names(opts, _SINK_KEYS, "to writing format('kafkawire'): the sink takes 'topic' and kafka.* options")
        client, config = _client_options(opts, "producer", _REJECTED_SINK)
        self = cls(client=client, delivery_timeout_s=config.delivery_timeout_ms / 1000.0)
        if "topic" in opts:
            topic = opts["topic"].strip()
            if not topic:
                raise KafkawireOptionError("option 'topic' is empty; give a topic name or drop the option")
            self.topic = topic
        self.typed = _typed.parse_sink(opts, self.topic)
        return self
