"""The record factories (and aiokafka's builder append) the drop-ins use: compiled
(kafkawire._compat) with the compiled codec, else the pure-Python twin
(kafkawire.compat._factory_py), as kafkawire.codec picks; and ``codec_impl``, that
codec's module, whose ``decode_records_with`` (kafkawire.codec.decode_records_with, with
its FIELD_* placeholders) makes a host's records straight from a batch's bytes.

Each call makes a whole batch of the host's records with the cyclic GC paused, as
kafkawire's own consumer does: every record is a GC allocation, and the collector would
otherwise run every 700 of them and promote the batch made so far generation by
generation, which costs about as much as making the records.  It runs once they are all
made (they cannot form cycles before the host hands them out).
"""

import gc as _gc

from kafkawire import _twins
from kafkawire import codec as _codec

codec_impl = _codec._impl  # kafkawire._codec or kafkawire._pycodec, whichever the codec loaded
_impl = _twins.load("kafkawire._compat", "kafkawire.compat._factory_py")

IMPLEMENTATION = "cython" if _impl.__name__ == "kafkawire._compat" else "python"

__all__ = ["IMPLEMENTATION", "AiokafkaAppender", "DefaultRecordMetadata", "KafkaPythonFutures",
           "aiokafka_send", "codec_impl", "configure_aiokafka_send", "configure_kafka_python",
           "decode_records_with", "deserialize", "kafka_python_append",
           "kafka_python_record_future", "kafka_python_records", "resolve_aiokafka_futures"]

AiokafkaAppender = _impl.AiokafkaAppender  # both hosts' magic-2 builders' per-record append
KafkaPythonFutures = _impl.KafkaPythonFutures
DefaultRecordMetadata = _impl.DefaultRecordMetadata


def _gc_paused(make):
    def call(*args, **kwargs):
        if not _gc.isenabled():
            return make(*args, **kwargs)
        _gc.disable()
        try:
            return make(*args, **kwargs)
        finally:
            _gc.enable()

    call.__name__ = make.__name__
    call.__doc__ = make.__doc__
    return call


kafka_python_records = _gc_paused(_impl.kafka_python_records)
decode_records_with = _gc_paused(codec_impl.decode_records_with)
deserialize = _impl.deserialize
resolve_aiokafka_futures = _impl.resolve_aiokafka_futures
configure_aiokafka_send = _impl.configure_aiokafka_send
aiokafka_send = _impl.aiokafka_send
configure_kafka_python = _impl.configure_kafka_python
kafka_python_append = _impl.kafka_python_append
kafka_python_record_future = _impl.kafka_python_record_future
