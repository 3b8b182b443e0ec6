"""The record factories the drop-ins use: compiled (kafkawire._compat) with the compiled
codec, else the pure-Python twin (kafkawire.compat._factory_py), as kafkawire.codec picks."""

from kafkawire import codec as _codec

if _codec.IMPLEMENTATION == "cython":
    try:
        from kafkawire._compat import aiokafka_records, kafka_python_records
    except ImportError:  # built before kafkawire._compat existed
        from kafkawire.compat._factory_py import aiokafka_records, kafka_python_records
else:
    from kafkawire.compat._factory_py import aiokafka_records, kafka_python_records

IMPLEMENTATION = "cython" if kafka_python_records.__module__ == "kafkawire._compat" else "python"

__all__ = ["IMPLEMENTATION", "aiokafka_records", "kafka_python_records"]
