"""kafkawire's asyncio shell: the same I/O-free state machines as the sync client
(:mod:`kafkawire.protocol`: connection, metadata, fetcher), driven by asyncio.

So far: :class:`AsyncConsumer` with manual assignment.
"""

from kafkawire.aio.consumer import AsyncConsumer

__all__ = ["AsyncConsumer"]
