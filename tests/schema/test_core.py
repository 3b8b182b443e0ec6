"""The registry client's decisions without I/O: operations driven step by step on a fake
clock, as the shells drive them (kafkawire.schema._core)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafkawire.errors import ConfigError, KafkaTimeoutError
from kafkawire.schema import errors
from kafkawire.schema._core import (
    CLOCK, Answer, ClientBase, Failure, RegistryCore, Request, Schema, SchemaReference, Sleep,
)

AVRO = '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'


class Scripted(ClientBase):
    """A client whose requests are answered from a script, on a fake clock; it records
    every step the core asked for."""

    def __init__(self, answers: list[Any], **options: Any):
        options.setdefault("rng", lambda: 0.5)  # no jitter: delays are exact
        self._core = RegistryCore(options.pop("url", "http://registry.test:8081"), **options)
        self.answers = list(answers)
        self.now = 100.0
        self.steps: list[Any] = []

    def _call(self, op: Any) -> Any:
        outcome = None
        while True:
            try:
                step = op.send(outcome)
            except StopIteration as done:
                return done.value
            self.steps.append(step)
            if step is CLOCK:
                outcome = self.now
            elif isinstance(step, Sleep):
                self.now += step.seconds
                outcome = self.now
            else:
                assert isinstance(step, Request)
                kind, value = self.answers.pop(0)
                self.now += 0.01
                if kind == "fail":
                    outcome = Failure(value, "refused", self.now)
                else:
                    status, body = kind, value
                    outcome = Answer(status, json.dumps(body).encode(), self.now)

    @property
    def requests(self) -> list[Request]:
        return [s for s in self.steps if isinstance(s, Request)]

    @property
    def sleeps(self) -> list[float]:
        return [s.seconds for s in self.steps if isinstance(s, Sleep)]


def test_a_request_says_method_url_body_and_headers() -> None:
    c = Scripted([(200, {"id": 7})], url="http://u:p%40ss@registry.test:8081/apis/ccompat/v7/")
    ref = SchemaReference("other.R", "other-value", 2)
    assert c.register_schema("a/b:c", Schema(AVRO, "avro", [ref]), normalize=True) == 7
    (req,) = c.requests
    assert req.method == "POST"
    # The subject is quoted whole ('/' and ':' too); credentials leave the URL for a header.
    assert req.url == "http://registry.test:8081/apis/ccompat/v7/subjects/a%2Fb%3Ac/versions?normalize=true"
    assert json.loads(req.body) == {"schema": AVRO, "references": [
        {"name": "other.R", "subject": "other-value", "version": 2}]}
    assert req.headers["Authorization"] == "Basic dTpwQHNz"  # base64("u:p@ss")
    assert req.headers["Content-Type"] == "application/vnd.schemaregistry.v1+json"


def test_query_parameters() -> None:
    c = Scripted([(200, []), (200, [1]), (200, {"subject": "s", "version": 3, "id": 1, "schema": AVRO})])
    c.get_subjects(prefix="orders-", deleted=True)
    c.delete_subject("s", permanent=True)
    c.get_version("s", 3, deleted=True)
    assert [r.url.partition("test:8081")[2] for r in c.requests] == [
        "/subjects?subjectPrefix=orders-&deleted=true", "/subjects/s?permanent=true",
        "/subjects/s/versions/3?deleted=true"]


def test_a_protobuf_schema_says_its_type() -> None:
    c = Scripted([(200, {"id": 1})])
    c.register_schema("s", Schema('syntax = "proto3"; message M {}', "PROTOBUF"))
    assert json.loads(c.requests[0].body)["schemaType"] == "PROTOBUF"


def test_answers_are_cached_once_per_schema() -> None:
    c = Scripted([(200, {"id": 3}), (200, {"schema": AVRO, "schemaType": "AVRO"}),
                  (200, {"subject": "s", "version": 4, "id": 3, "schema": AVRO})])
    for _ in range(1000):
        assert c.register_schema("s", AVRO) == 3
        assert c.get_schema(3) == Schema(AVRO)  # register taught it the id's schema
    assert c.requests_sent == 1
    assert c.get_schema(3, subject=":.other:s") == Schema(AVRO)  # another context: asked
    for _ in range(3):
        assert c.get_version("s", 4).schema_id == 3
    assert c.requests_sent == 3


def test_latest_is_asked_each_time_and_a_delete_forgets_the_subject() -> None:
    latest = {"subject": "s", "version": 1, "id": 1, "schema": AVRO}
    c = Scripted([(200, latest), (200, latest), (200, [1]), (200, {"id": 1})])
    c.get_latest_version("s")
    c.get_latest_version("s")
    # The same schema under the same subject has that version's id: nothing to ask.
    c.register_schema("s", AVRO)
    assert c.requests_sent == 2
    assert c.delete_subject("s") == [1]
    c.register_schema("s", AVRO)
    c.register_schema("s", AVRO)
    assert c.requests_sent == 4


def test_4xx_answers_raise_their_typed_error_at_once() -> None:
    cases = [(404, 40401, errors.SubjectNotFoundError), (404, 40402, errors.VersionNotFoundError),
             (404, 40403, errors.SchemaNotFoundError), (409, 409, errors.IncompatibleSchemaError),
             (422, 42201, errors.InvalidSchemaError), (422, 42203, errors.InvalidCompatibilityLevelError),
             (422, 42205, errors.OperationNotPermittedError), (401, 40101, errors.SchemaRegistryAuthError),
             (403, None, errors.SchemaRegistryAuthError), (400, None, errors.SchemaRegistryError)]
    for status, code, cls in cases:
        c = Scripted([(status, {"error_code": code, "message": "what the registry said"})])
        with pytest.raises(cls) as info:
            c.get_versions("s")
        assert type(info.value) is cls
        assert info.value.code == code and info.value.status == status and not info.value.retriable
        assert "what the registry said" in str(info.value) and "/subjects/s/versions" in str(info.value)
        assert c.requests_sent == 1 and c.sleeps == []


def test_5xx_and_failures_are_retried_with_growing_backoff() -> None:
    c = Scripted([(500, {"error_code": 50001, "message": "store"}), ("fail", "connection"),
                  ("fail", "timeout"), (503, "<html>proxy</html>"), (200, ["s"])],
                 retry_backoff_ms=100, retry_backoff_max_ms=300)
    assert c.get_subjects() == ["s"]
    assert c.sleeps == pytest.approx([0.1, 0.2, 0.3, 0.3])  # doubling, capped
    assert c.requests_sent == 5


def test_the_backoff_is_jittered_within_20_percent() -> None:
    for rng, factor in ((0.0, 0.8), (1.0, 1.2)):
        core = RegistryCore("http://r:1", retry_backoff_ms=100, rng=lambda rng=rng: rng)
        assert core.backoff_delay(1) == pytest.approx(0.1 * factor)
        assert core.backoff_delay(3) == pytest.approx(0.4 * factor)


def test_the_deadline_ends_retries_with_a_timeout_error_keeping_each_try() -> None:
    c = Scripted([("fail", "connection")] * 50, timeout_ms=1000, retry_backoff_ms=100,
                 retry_backoff_max_ms=200)
    with pytest.raises(errors.SchemaRegistryTimeoutError) as info:
        c.get_schema(1)
    error = info.value
    assert isinstance(error, KafkaTimeoutError) and isinstance(error, TimeoutError) and error.retriable
    assert all(isinstance(a, errors.SchemaRegistryConnectionError) for a in error.attempts)
    assert len(error.attempts) == c.requests_sent == 6
    assert c.now - 100.0 <= 1.0  # it never slept past the deadline
    # each request's own time-out is cut to what is left of the call's
    assert all(r.timeout <= 1.0 for r in c.requests) and c.requests[-1].timeout < 0.5


def test_an_unverified_certificate_is_not_retried() -> None:
    c = Scripted([("fail", "tls-verify")])
    with pytest.raises(errors.SchemaRegistryConnectionError) as info:
        c.get_subjects()
    assert not info.value.retriable and "ssl_cafile" in str(info.value) and c.requests_sent == 1


def test_connection_failures_move_to_the_next_url() -> None:
    c = Scripted([("fail", "connection"), (200, [])], url="http://a:1, http://b:2")
    assert c.get_subjects() == []
    assert [r.url for r in c.requests] == ["http://a:1/subjects", "http://b:2/subjects"]


def test_bad_options_are_config_errors() -> None:
    for url, options, words in [
        ("", {}, "give the registry's URL"),
        ("ftp://x", {}, "not an http"),
        ("http://u:p@x", {"basic_auth_user_info": "a:b"}, "given twice"),
        ("http://x", {"basic_auth_user_info": "a:b", "bearer_auth_token": "t"}, "choose one"),
        ("http://x", {"basic_auth_user_info": "nocolon"}, "user:password"),
        ("http://x", {"timeout_ms": 0}, "timeout_ms"),
        ("http://x", {"cache_capacity": 0}, "cache_capacity"),
    ]:
        with pytest.raises(ConfigError, match=words):
            RegistryCore(url, **options)
    c = Scripted([])
    with pytest.raises(ConfigError, match="version"):
        c.get_version("s", 0)
    with pytest.raises(ConfigError, match="subject"):
        c.get_versions("")


def test_bearer_auth_headers() -> None:
    core = RegistryCore("http://x", bearer_auth_token="tok", bearer_auth_logical_cluster="lsrc-1",
                        bearer_auth_identity_pool_id="pool-2")
    assert core.headers["Authorization"] == "Bearer tok"
    assert core.headers["target-sr-cluster"] == "lsrc-1" and core.headers["Confluent-Identity-Pool-Id"] == "pool-2"


def test_the_caches_are_bounded() -> None:
    c = Scripted([(200, {"schema": AVRO})] * 5, cache_capacity=2)
    for i in (1, 2, 3, 1):  # 1 was pushed out by 3
        c.get_schema(i)
    assert c.requests_sent == 4


def test_the_package_imports_without_its_transport() -> None:
    # The I/O-free parts load without httpx (an extra); the clients load it on first use.
    import subprocess
    import sys

    code = ("import sys, kafkawire.schema, kafkawire.schema.framing; "
            "assert 'httpx' not in sys.modules, 'httpx imported'; "
            "kafkawire.schema.SchemaRegistryClient; assert 'httpx' in sys.modules")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
