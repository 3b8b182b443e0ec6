"""kafkawire's exceptions.

Three families share one root, :class:`KafkaWireError`:

* :class:`CodecError` and its subclasses: bytes that cannot be decoded, records that
  cannot be encoded, compression problems.  Raised by :mod:`kafkawire.codec`.
* :class:`BrokerError` and its subclasses: one class per Kafka error code, found with
  :func:`for_code`.  Each carries ``code``, ``retriable`` and a one-line ``meaning``.
* What a client meets besides a broker's error code: :class:`KafkaConnectionError`
  (and the ways a broker cannot be reached), :class:`KafkaTimeoutError`,
  :class:`ConfigError`, :class:`CommitFailedError` and the rest of that family.
* A refused SASL login: :class:`SaslAuthenticationError` (SASL_AUTHENTICATION_FAILED,
  58) and :class:`ScramServerError`, :class:`SaslUnsupportedMechanismError`,
  :class:`SaslIllegalStateError` and the client's own :class:`SaslError` family.
* Raised by the layers that define them, and found here too (imported on first use, so
  that this module stays free of them): :class:`AdminError`, :class:`ApiVersionError`,
  :class:`ProtocolError` (:class:`FrameTooLargeError`, :class:`CorrelationIdError`),
  :class:`TransactionStateError`, :class:`TransactionAbortedError` and
  :class:`ForkedClientError`.

Every name is imported from here.  The code sits in private modules along those seams:
``_errors_base`` (the roots), ``_errors_codec`` (the codec's exceptions and the factories
both codec implementations build them with, so the two give the same messages),
``_errors_table`` (the broker error table and its look-ups), ``_errors_client`` and
``_errors_sasl``.
``kafkawire.client.errors`` and ``kafkawire.core.errors``, where the client's exceptions
used to live, are this module.

This module does no I/O.
"""

from __future__ import annotations

import importlib
from typing import Any

from kafkawire import _errors_base, _errors_client, _errors_codec, _errors_sasl, _errors_table
from kafkawire._errors_base import *  # noqa: F403
from kafkawire._errors_client import *  # noqa: F403
from kafkawire._errors_codec import *  # noqa: F403
from kafkawire._errors_codec import (  # noqa: F401 - the factories both codecs raise through
    bad_compressed,
    corrupt,
    crc_mismatch,
    encode_error,
    library_missing,
    malformed,
    too_big,
    too_deep,
    truncated,
    unsupported_codec,
    unsupported_magic,
)
from kafkawire._errors_sasl import *  # noqa: F403
from kafkawire._errors_table import *  # noqa: F403

# Exceptions defined beside the code that raises them, which imports this module: they are
# looked up on first use (PEP 562) rather than imported here, which would be a circle.
_ELSEWHERE = {
    "AdminError": "kafkawire.protocol.admin",
    "ApiVersionError": "kafkawire.protocol.api",
    "ProtocolError": "kafkawire.protocol.connection",
    "FrameTooLargeError": "kafkawire.protocol.connection",
    "CorrelationIdError": "kafkawire.protocol.connection",
    "TransactionStateError": "kafkawire.protocol.transactions",
    "TransactionAbortedError": "kafkawire.protocol.transactions",
    "ForkedClientError": "kafkawire.core.fork",
    "OAuthBearerLoginError": "kafkawire.protocol.sasl._oidc",
    "OAuthBearerCredentialsError": "kafkawire.protocol.sasl._oidc",
    "OAuthBearerTokenResponseError": "kafkawire.protocol.sasl._oidc",
    "OAuthBearerEndpointError": "kafkawire.protocol.sasl._oidc",
    "OAuthBearerEndpointTimeoutError": "kafkawire.protocol.sasl._oidc",
    "UntestedHostError": "kafkawire.compat._guard",
}

__all__ = [*_errors_base.__all__, *_errors_codec.__all__, *_errors_table.__all__, *_errors_client.__all__,
           *_errors_sasl.__all__, *_ELSEWHERE]


def __getattr__(name: str) -> Any:
    module = _ELSEWHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_ELSEWHERE))


# Shown by their public name in tracebacks and reprs (and pickled by it: the same class).
for _name in __all__:
    _obj = globals().get(_name)
    if isinstance(_obj, type) and _obj.__module__.startswith("kafkawire._errors_"):
        _obj.__module__ = __name__
del _name, _obj
