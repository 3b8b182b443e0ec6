"""kafkawire: a Kafka client for Python with a compiled codec core.

* ``kafkawire.codec``: Kafka's message formats (MessageSet v0/v1, RecordBatch v2, every
  compression codec), usable on its own by any client.
* ``kafkawire.protocol``: the sans-IO protocol layer (API declarations, connection state
  machine, version negotiation).
* ``kafkawire.Producer`` / ``kafkawire.Consumer``: the client.
* ``kafkawire.errors``: every exception kafkawire raises, one class per Kafka error code.

The client classes are imported on first use, so that importing the codec or the
protocol layer never pulls in sockets or threads.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "codec", "errors", "protocol", "Producer", "Consumer", "Admin",
           "TopicPartition", "ConsumerRebalanceListener", "ShareConsumer", "ShareConsumerRecord",
           "AcknowledgeType"]

_LAZY = {
    "Producer": ("kafkawire.client.producer", "Producer"),
    "Consumer": ("kafkawire.client.consumer", "Consumer"),
    "Admin": ("kafkawire.client.admin", "Admin"),
    "TopicPartition": ("kafkawire.client.consumer", "TopicPartition"),
    "ConsumerRebalanceListener": ("kafkawire.client.group", "ConsumerRebalanceListener"),
    "ShareConsumer": ("kafkawire.client.share_consumer", "ShareConsumer"),
    "ShareConsumerRecord": ("kafkawire.protocol.share_group", "ShareConsumerRecord"),
    "AcknowledgeType": ("kafkawire.protocol.share_group", "AcknowledgeType"),
    "codec": ("kafkawire.codec", None),
    "errors": ("kafkawire.errors", None),
    "protocol": ("kafkawire.protocol", None),
}


def __getattr__(name: str) -> Any:
    try:
        module_name, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'kafkawire' has no attribute {name!r}") from None
    import importlib

    module = importlib.import_module(module_name)
    value = module if attr is None else getattr(module, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
