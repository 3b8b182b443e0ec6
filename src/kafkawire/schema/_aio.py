"""The asyncio Schema Registry client: the core's operations run over ``httpx.AsyncClient``."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from kafkawire.schema._core import CLOCK, Answer, ClientBase, Failure, Operation, Request
from kafkawire.schema._transport import Options, failure_of, with_token

__all__ = ["AsyncSchemaRegistryClient"]


class AsyncSchemaRegistryClient(ClientBase):
    """The asyncio twin of :class:`~kafkawire.schema.SchemaRegistryClient`: the same
    options, methods and errors; each method is awaited.  A cancelled call leaves nothing
    behind (httpx drops the connection it was using)."""

    def __init__(self, url: Any, **options: Any):
        parsed = Options(url, options)
        self._core = parsed.core
        self._token_provider = parsed.token_provider
        self._http = httpx.AsyncClient(**parsed.http)

    async def _send(self, request: Request) -> Answer | Failure:
        try:
            answer = await self._http.request(request.method, request.url, content=request.body,
                                              headers=with_token(request, self._token_provider),
                                              timeout=request.timeout)
        except httpx.TransportError as exc:
            return Failure(*failure_of(exc, request.timeout), time.monotonic())
        return Answer(answer.status_code, answer.content, time.monotonic())

    async def _call(self, op: Operation) -> Any:
        outcome: Any = None
        while True:
            try:
                step = op.send(outcome)
            except StopIteration as done:
                return done.value
            if step is CLOCK:
                outcome = time.monotonic()
            elif isinstance(step, Request):
                outcome = await self._send(step)
            else:
                await asyncio.sleep(step.seconds)
                outcome = time.monotonic()

    async def close(self) -> None:
        """Close the HTTP connections (the caches stay usable)."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncSchemaRegistryClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
