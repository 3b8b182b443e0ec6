"""The kafkawire command against a real broker."""

import io
import json
import sys
import uuid

import pytest

from kafkawire.cli import build_parser, main


class _Stdin:
    def __init__(self, data: bytes):
        self.buffer = io.BytesIO(data)


@pytest.mark.broker
def test_produce_consume_metadata_offsets(tansu_broker, monkeypatch, capsysbinary):
    topic = f"cli-{uuid.uuid4().hex[:6]}"
    b = tansu_broker.bootstrap
    monkeypatch.setattr(sys, "stdin", _Stdin(b"one\nk2:two\nthree\n"))
    assert main(["produce", "-b", b, "-t", topic, "-p", "0", "--key-separator", ":"]) == 0
    capsysbinary.readouterr()
    assert main(["consume", "-b", b, "-t", topic, "-p", "0", "--timeout", "1", "-n", "3"]) == 0
    assert capsysbinary.readouterr().out == b"one\ntwo\nthree\n"
    assert main(["consume", "-b", b, "-t", topic, "-p", "0", "--timeout", "1", "-n", "3",
                 "--format", "json"]) == 0
    docs = [json.loads(line) for line in capsysbinary.readouterr().out.splitlines()]
    assert [(d["offset"], d["key"], d["value"]) for d in docs] == [
        (0, None, "one"), (1, "k2", "two"), (2, None, "three")]
    assert {d["topic"] for d in docs} == {topic} and all(d["timestamp"] > 0 for d in docs)
    assert main(["consume", "-b", b, "-t", topic, "-p", "0", "--timeout", "1", "-n", "1",
                 "--from", "1", "--format", "tsv"]) == 0
    assert capsysbinary.readouterr().out.split(b"\t")[:2] == [b"0", b"1"]
    assert main(["offsets", "-b", b, topic, "-p", "0"]) == 0
    assert capsysbinary.readouterr().out.decode().split("\t")[:3] == [topic, "0", "0"]
    assert main(["offsets", "-b", b, "-t", topic, "-p", "0"]) == 0  # the older form
    assert capsysbinary.readouterr().out.decode().split("\t")[:3] == [topic, "0", "0"]
    assert main(["metadata", "-b", b, topic]) == 0
    out = capsysbinary.readouterr().out.decode()
    assert f"broker " in out and f"topic {topic} partitions" in out


def test_unreachable_broker_is_a_clean_error(capsys):
    from kafkawire.testing import free_port

    port = free_port()
    assert main(["metadata", "-b", f"127.0.0.1:{port}"]) == 2
    err = capsys.readouterr().err
    assert "NoBrokersAvailableError" in err and f"127.0.0.1:{port}" in err


def test_parser_knows_every_command():
    parser = build_parser()
    for cmd in ("produce", "consume", "metadata", "offsets", "broker", "bench", "demo"):
        assert parser.parse_args([cmd] + (["-b", "h:1", "t"] if cmd in ("produce", "consume", "offsets") else
                                          ["-b", "h:1"] if cmd == "metadata" else [])).command == cmd


@pytest.mark.parametrize("cmd", ["produce", "consume", "offsets", "metadata"])
def test_a_topic_is_a_plain_argument_and_t_still_works(cmd):
    from kafkawire.cli import _topic

    parser = build_parser()
    for argv in ([cmd, "events"], [cmd, "-t", "events"], [cmd, "-b", "h:1", "events", "-t", "events"]):
        args = parser.parse_args(argv)
        _topic(parser, args)
        assert args.topic == "events"
    assert parser.parse_args([cmd]).bootstrap == "localhost:9092"  # where `kafkawire broker` listens


def test_a_missing_or_doubled_topic_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["offsets", "-b", "h:1"])
    assert e.value.code == 2 and "name the topic" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["consume", "a", "-t", "b"])
    assert "two topics given ('a' and -t 'b')" in capsys.readouterr().err


def test_main_leaves_the_callers_sigpipe_disposition_alone():
    # Only the command's own process (run()) dies quietly on a closed pipe; a program
    # calling main() would otherwise be killed by its next write to a closed socket.
    import signal

    before = signal.getsignal(signal.SIGPIPE)
    assert main(["topics", "list", "-b", "127.0.0.1:1"]) == 2  # nothing listens on port 1
    assert signal.getsignal(signal.SIGPIPE) == before
