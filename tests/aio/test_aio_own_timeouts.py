"""The asyncio cluster relabels only its own waits' timeouts as "no answer in time":
KafkaTimeoutError is a TimeoutError (as asyncio's own timeout is), so an answer that
failed with one, or a connection setup that did, keeps its class and its ``.errors``."""

from __future__ import annotations

import asyncio

import pytest

from kafkawire.aio.cluster import AsyncCluster
from kafkawire.core.config import Config
from kafkawire.errors import DeliveryTimeoutError, KafkaTimeoutError
from kafkawire.protocol.metadata import refresh_timeout
from kafkawire.protocol.steps import Await


def _cluster() -> AsyncCluster:
    return AsyncCluster(Config.client(bootstrap_servers="127.0.0.1:9"))


def test_an_answers_own_timeout_error_keeps_its_class():
    async def main() -> None:
        cluster = _cluster()
        try:
            answer = asyncio.get_running_loop().create_future()
            answer.set_exception(DeliveryTimeoutError("record expired after delivery_timeout_ms"))
            with pytest.raises(DeliveryTimeoutError, match="delivery_timeout_ms"):
                await cluster.do_step(Await(answer), cluster._now() + 5, "Produce")

            cause = ConnectionResetError("reset")
            failed = refresh_timeout(1.0, cause)
            answer = asyncio.get_running_loop().create_future()
            answer.set_exception(failed)
            with pytest.raises(KafkaTimeoutError) as info:
                await cluster.do_step(Await(answer), cluster._now() + 5, "Metadata")
            assert info.value is failed and info.value.__cause__ is cause and info.value.errors == [cause]
        finally:
            await cluster.close()

    asyncio.run(main())


def test_the_waits_own_timeout_is_named():
    async def main() -> None:
        cluster = _cluster()
        try:
            never = asyncio.get_running_loop().create_future()
            with pytest.raises(KafkaTimeoutError, match="^Metadata: no answer in time$"):
                await cluster.do_step(Await(never), cluster._now() + 0.05, "Metadata")
            assert not never.done()  # shielded: the answer may still come for someone else
        finally:
            await cluster.close()

    asyncio.run(main())
