"""How the accumulator ends a batch at its delivery_timeout_ms (no I/O, time passed in):
a batch the broker kept refusing fails with the broker's typed error, and a Produce
request asks the broker to answer by the earliest deadline of the batches it carries.
(Proven against Apache Kafka in tests/integration/test_kafka_failover.py.)"""

from __future__ import annotations

from kafkawire.client.config import Config
from kafkawire.client.future import Future
from kafkawire.errors import (
    DeliveryTimeoutError,
    KafkaConnectionError,
    NotEnoughReplicasError,
    RequestTimedOutError,
)
from kafkawire.protocol import apis
from kafkawire.protocol.accumulator import Accumulator

PRODUCE = apis.get("Produce")
_TPR = PRODUCE.Response.TopicProduceResponse
_PPR = _TPR.PartitionProduceResponse


def accumulator(**options):
    options = {"linger_ms": 0, "enable_idempotence": False, "delivery_timeout_ms": 6000,
               "request_timeout_ms": 3000, "retry_backoff_ms": 100, **options}
    return Accumulator(Config.producer(bootstrap_servers="h:1", **options), Future)


def one_batch(acc, now=0.0):
    acc.append(("t", 0), (None, b"v", 1000), 30, 100, now)
    by_node, expired, _wait, _ = acc.collect(now, lambda t, p: 1, flushing=True)
    assert not expired
    return by_node[1]


def refused(acc, sent, code):
    resp = PRODUCE.Response(responses=[_TPR(name="t", partition_responses=[
        _PPR(index=b.partition, error_code=code, base_offset=-1) for b in sent])])
    return acc.results(resp, sent, "broker 1")[0]


def test_a_batch_refused_until_its_deadline_fails_with_the_brokers_typed_error():
    acc = accumulator()
    now = 0.0
    batches = one_batch(acc, now)
    for _ in range(3):  # NOT_ENOUGH_REPLICAS, retried after each backoff
        _req, sent, _rest, _failed = acc.produce_request(batches, PRODUCE.max_version, now)
        [(b, exc, retriable)] = refused(acc, sent, 19)
        assert retriable and acc.retry(b, exc, retriable, now, closed=False)
        now = b.retry_at
    by_node, expired, _wait, _ = acc.collect(6.0, lambda t, p: 1, flushing=True)
    assert expired == [b] and not by_node
    exc = acc.expired_error(b)
    assert isinstance(exc, NotEnoughReplicasError) and exc.code == 19 and exc.retriable
    assert isinstance(exc.__cause__, NotEnoughReplicasError)
    text = str(exc)
    assert "t[0] not acknowledged within delivery_timeout_ms=6000: 3 attempt(s)" in text
    assert "NOT_ENOUGH_REPLICAS (19)" in text and "Retried until the deadline" in text
    assert "bring the partition's replicas back" in text and "raise delivery_timeout_ms" in text
    acc.release(b)
    assert acc.last_error == {}  # nothing kept once the batch is done


def test_a_refusal_answered_at_the_deadline_says_it_was_retried_to_the_end():
    acc = accumulator()
    batches = one_batch(acc)
    _req, sent, _rest, _failed = acc.produce_request(batches, PRODUCE.max_version, 0.0)
    [(b, exc, retriable)] = refused(acc, sent, 19)
    assert not acc.retry(b, exc, retriable, 6.5, closed=False)  # past the deadline: the caller fails it
    assert isinstance(exc, NotEnoughReplicasError) and "Retried until the deadline" in str(exc)


def test_a_connection_error_before_the_deadline_is_named_by_the_timeout():
    acc = accumulator()
    batches = one_batch(acc)
    _req, sent, _rest, _failed = acc.produce_request(batches, PRODUCE.max_version, 0.0)
    b = sent[0]
    lost = KafkaConnectionError("broker 1 at h:1 closed the connection")
    assert acc.retry(b, lost, True, 0.5, closed=False)
    exc = acc.expired_error(b)
    assert type(exc) is DeliveryTimeoutError and exc.__cause__ is lost
    assert "after 1 attempt(s), the last failed with broker 1 at h:1 closed the connection" in str(exc)


def test_a_batch_never_sent_keeps_the_plain_timeout():
    acc = accumulator()
    acc.append(("t", 0), (None, b"v", 1000), 30, 100, 0.0)
    _by_node, expired, _wait, _ = acc.collect(6.0, lambda t, p: None, flushing=True)
    exc = acc.expired_error(expired[0])
    assert type(exc) is DeliveryTimeoutError and "leader could not be reached" in str(exc)


def test_the_request_timeout_ends_at_the_first_delivery_deadline():
    acc = accumulator(request_timeout_ms=3000, delivery_timeout_ms=6000)
    batches = one_batch(acc, 0.0)
    req, sent, _rest, _failed = acc.produce_request(batches, PRODUCE.max_version, 1.0)
    assert req.timeout_ms == 3000  # 5 s left: the configured request timeout
    [(b, exc, retriable)] = refused(acc, sent, 7)
    assert isinstance(exc, RequestTimedOutError) and acc.retry(b, exc, retriable, 4.0, closed=False)
    req, _sent, _rest, _failed = acc.produce_request([b], PRODUCE.max_version, 4.5)
    assert req.timeout_ms == 1500  # the broker is asked to answer by the deadline
    req, _sent, _rest, _failed = acc.produce_request([b], PRODUCE.max_version, 5.9999)
    assert req.timeout_ms == 1  # never 0 or less
    req, _sent, _rest, _failed = acc.produce_request([b], PRODUCE.max_version)
    assert req.timeout_ms == 3000  # no clock given: as configured
