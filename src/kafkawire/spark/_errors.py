"""The errors format("kafkawire") raises about its options (here, so that the option
parser and the security translation it calls both import them without a circle)."""

from __future__ import annotations

__all__ = ["KafkawireOptionError"]


class KafkawireOptionError(ValueError):
    """An option of ``format("kafkawire")`` that is missing, unknown or has a bad value."""


# Shown by its public name in the tracebacks Spark passes on (and pickled by it: the
# package exports it).
KafkawireOptionError.__module__ = "kafkawire.spark"
