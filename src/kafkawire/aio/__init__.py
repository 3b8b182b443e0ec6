"""kafkawire's asyncio shell: the same I/O-free state machines as the sync client
(:mod:`kafkawire.protocol`: connection, metadata, accumulator, fetcher, group), driven by asyncio.

:class:`AsyncProducer`, :class:`AsyncConsumer` (manual assignment or consumer groups),
:class:`AsyncShareConsumer` (share groups) and :class:`AsyncAdmin`.
"""

from kafkawire.aio.admin import AsyncAdmin
from kafkawire.aio.consumer import AsyncConsumer
from kafkawire.aio.producer import AsyncProducer
from kafkawire.aio.share_consumer import AsyncShareConsumer

__all__ = ["AsyncAdmin", "AsyncConsumer", "AsyncProducer", "AsyncShareConsumer"]
