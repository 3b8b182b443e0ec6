"""The blocking Schema Registry client: the core's operations run over ``httpx.Client``."""

from __future__ import annotations

import time
from typing import Any

import httpx

from kafkawire.schema._core import CLOCK, Answer, ClientBase, Failure, Operation, Request
from kafkawire.schema._transport import Options, failure_of, with_token

__all__ = ["SchemaRegistryClient"]


class SchemaRegistryClient(ClientBase):
    """A Confluent-API Schema Registry client (Confluent, Karapace, Redpanda, Apicurio's
    ``/apis/ccompat/v7``).  Every method blocks at most ``timeout_ms``.

    ``url``: the API root, or several comma-separated (tried in turn on connection
    failures); user info in it is basic auth.  ``basic_auth_user_info="user:password"``,
    or ``bearer_auth_token`` (a str) / ``bearer_auth_token_provider`` (a callable asked
    before each request) with ``bearer_auth_logical_cluster`` and
    ``bearer_auth_identity_pool_id`` for Confluent Cloud.  TLS: the Kafka clients'
    ``ssl_context``, ``ssl_cafile``, ``ssl_capath``, ``ssl_certfile``, ``ssl_keyfile``,
    ``ssl_password``, ``ssl_crlfile``, ``ssl_ciphers``, ``ssl_check_hostname``,
    ``ssl_endpoint_identification_algorithm``.  ``timeout_ms`` (30 s) bounds a whole
    call with its retries, ``request_timeout_ms`` (10 s) one request; 5xx answers and
    connection failures are retried after ``retry_backoff_ms`` doubling up to
    ``retry_backoff_max_ms``.  ``cache_capacity`` bounds each cache (schemas by id, ids
    by schema, versions).  ``http_options``: more ``httpx.Client`` arguments (proxies).
    """

    def __init__(self, url: Any, **options: Any):
        parsed = Options(url, options)
        self._core = parsed.core
        self._token_provider = parsed.token_provider
        self._http = httpx.Client(**parsed.http)

    def _send(self, request: Request) -> Answer | Failure:
        try:
            answer = self._http.request(request.method, request.url, content=request.body,
                                        headers=with_token(request, self._token_provider),
                                        timeout=request.timeout)
        except httpx.TransportError as exc:
            return Failure(*failure_of(exc, request.timeout), time.monotonic())
        return Answer(answer.status_code, answer.content, time.monotonic())

    def _call(self, op: Operation) -> Any:
        outcome: Any = None
        while True:
            try:
                step = op.send(outcome)
            except StopIteration as done:
                return done.value
            if step is CLOCK:
                outcome = time.monotonic()
            elif isinstance(step, Request):
                outcome = self._send(step)
            else:
                time.sleep(step.seconds)
                outcome = time.monotonic()

    def close(self) -> None:
        """Close the HTTP connections (the caches stay usable)."""
        self._http.close()

    def __enter__(self) -> SchemaRegistryClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
