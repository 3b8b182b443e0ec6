"""kafkawire's asyncio shell: the same I/O-free state machines as the sync client
(:mod:`kafkawire.protocol`: connection, metadata, fetcher), driven by asyncio.

:class:`AsyncProducer`, and :class:`AsyncConsumer` with manual assignment (groups are
the sync consumer's only, so far).
"""

from kafkawire.aio.consumer import AsyncConsumer
from kafkawire.aio.producer import AsyncProducer

__all__ = ["AsyncConsumer", "AsyncProducer"]
