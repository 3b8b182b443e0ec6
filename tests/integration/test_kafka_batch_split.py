"""A batch refused with MESSAGE_TOO_LARGE is split and resent, on Apache Kafka (KIP-126, as
the Java client): a topic whose max.message.bytes is small, a producer whose batch_size
and max_request_size let a batch larger than that through, and linger_ms to fill it.
Every record lands once, in send order (read back by confluent-kafka), each record's
future at its offset; only a record larger than the topic's limit by itself fails, typed
(MessageTooLargeError, code 10).  Idempotent and not, both shells."""

from __future__ import annotations

import asyncio

import confluent_kafka as ck
import pytest

from kafkawire.aio import AsyncProducer
from kafkawire.client.producer import Producer
from kafkawire.errors import MessageTooLargeError
from topics import create_topic

pytestmark = [pytest.mark.broker, pytest.mark.kafka]

LIMIT = 4000  # the topic's max.message.bytes: about 35 of the records below
COUNT = 400
HUGE = 250  # the index of the record larger than the limit by itself


def _values() -> list[bytes]:
    values = [b"%06d:" % i + b"v" * 100 for i in range(COUNT)]
    values[HUGE] = b"%06d:" % HUGE + b"H" * (LIMIT * 2)
    return values


def _options(bootstrap: str, idempotent: bool) -> dict:
    # Without idempotence one request at a time keeps the order across a split (as in
    # the Java client, whose order guarantee then needs max.in.flight=1 too).
    return dict(bootstrap_servers=bootstrap, enable_idempotence=idempotent, linger_ms=500,
                batch_size=256 * 1024, max_request_size=1 << 20, compression_type="none",
                max_in_flight_requests_per_connection=5 if idempotent else 1)


def _read_back(bootstrap: str, topic: str, want: int) -> list[tuple[int, bytes]]:
    c = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "auto.offset.reset": "earliest",
                     "enable.auto.commit": False})
    try:
        c.assign([ck.TopicPartition(topic, 0, 0)])
        got: list[tuple[int, bytes]] = []
        for _ in range(120):
            for m in c.consume(500, 1.0):
                assert m.error() is None, m.error()
                got.append((m.offset(), m.value()))
            if len(got) >= want:
                break
        return got
    finally:
        c.close()


def _check(bootstrap: str, topic: str, values: list[bytes], outcomes: list) -> None:
    kept = [v for i, v in enumerate(values) if i != HUGE]
    for i, outcome in enumerate(outcomes):
        if i == HUGE:
            assert isinstance(outcome, MessageTooLargeError) and outcome.code == 10, outcome
        else:
            assert not isinstance(outcome, BaseException), (i, outcome)
    got = _read_back(bootstrap, topic, len(kept))
    assert [v for _o, v in got] == kept  # each once, in send order
    offsets = [o for i, o in enumerate(outcomes) if i != HUGE]
    assert offsets == [o for o, _v in got]  # each future says where its record is


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
def test_a_batch_too_large_for_the_topic_is_split_and_resent(kafka_broker, idempotent):
    topic = create_topic(kafka_broker.bootstrap, "split", 1, **{"max.message.bytes": LIMIT})
    values = _values()
    with Producer(**_options(kafka_broker.bootstrap, idempotent)) as p:
        futures = [p.send(topic, value=v, partition=0) for v in values]
        p.flush(60)
        outcomes = [f.exception(0) or f.result(0).offset for f in futures]
        if idempotent:
            assert p.metrics()["producer_id"] >= 0
    _check(kafka_broker.bootstrap, topic, values, outcomes)


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
def test_the_asyncio_producer_splits_too(kafka_broker, idempotent):
    topic = create_topic(kafka_broker.bootstrap, "split-aio", 1, **{"max.message.bytes": LIMIT})
    values = _values()

    async def run() -> list:
        async with AsyncProducer(**_options(kafka_broker.bootstrap, idempotent)) as p:
            futures = [await p.send(topic, value=v, partition=0) for v in values]
            await p.flush(60)
            out = []
            for f in futures:
                try:
                    out.append((await f).offset)
                except MessageTooLargeError as exc:
                    out.append(exc)
            return out

    _check(kafka_broker.bootstrap, topic, values, asyncio.run(run()))


def test_a_lone_record_too_large_fails_typed_and_the_next_goes_through(kafka_broker):
    topic = create_topic(kafka_broker.bootstrap, "split-one", 1, **{"max.message.bytes": LIMIT})
    with Producer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=0, max_request_size=1 << 20) as p:
        with pytest.raises(MessageTooLargeError) as info:
            p.send(topic, value=b"H" * (LIMIT * 2), partition=0).result(30)
        assert info.value.code == 10
        assert p.send(topic, value=b"small", partition=0).result(30).offset == 0
