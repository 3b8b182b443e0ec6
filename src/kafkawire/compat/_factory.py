"""The record factories (and aiokafka's builder append) the drop-ins use: compiled
(kafkawire._compat) with the compiled codec, else the pure-Python twin
(kafkawire.compat._factory_py), as kafkawire.codec picks.

Each call makes a whole batch of the host's records with the cyclic GC paused, as
kafkawire's own consumer does: every record is a GC allocation, and the collector would
otherwise run every 700 of them and promote the batch made so far generation by
generation, which costs about as much as making the records.  It runs once they are all
made (they cannot form cycles before the host hands them out).
"""

import gc as _gc

from kafkawire import codec as _codec

if _codec.IMPLEMENTATION == "cython":
    try:
        from kafkawire import _compat as _impl
    except ImportError:  # built before kafkawire._compat existed
        from kafkawire.compat import _factory_py as _impl
else:
    from kafkawire.compat import _factory_py as _impl

IMPLEMENTATION = "cython" if _impl.__name__ == "kafkawire._compat" else "python"

__all__ = ["IMPLEMENTATION", "AiokafkaAppender", "DefaultRecordMetadata", "aiokafka_records",
           "kafka_python_records"]

AiokafkaAppender = _impl.AiokafkaAppender
DefaultRecordMetadata = _impl.DefaultRecordMetadata


def _gc_paused(make):
    def call(*args):
        if not _gc.isenabled():
            return make(*args)
        _gc.disable()
        try:
            return make(*args)
        finally:
            _gc.enable()

    call.__name__ = make.__name__
    call.__doc__ = make.__doc__
    return call


kafka_python_records = _gc_paused(_impl.kafka_python_records)
aiokafka_records = _gc_paused(_impl.aiokafka_records)
