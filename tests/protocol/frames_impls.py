"""Both forms of kafkawire._frames for the tests that hold them to each other: the
compiled one (when built) and its pure-Python twin."""

from twins import both_forms

from kafkawire.protocol import _frames_py

IMPLS, _compiled = both_forms("kafkawire._frames", _frames_py)


def record_reads(monkeypatch, name: str) -> list:
    """Every result of kafkawire.protocol.connection's reader ``name`` (produce_answer,
    fetch_answer) from now on: None where the general reader took over."""
    from kafkawire.protocol import connection

    read: list = []
    original = getattr(connection, name)
    monkeypatch.setattr(connection, name, lambda *a: read.append(original(*a)) or read[-1])
    return read
