"""kafkawire: a Kafka client for Python with a compiled codec core."""

__version__ = "0.1.0"
