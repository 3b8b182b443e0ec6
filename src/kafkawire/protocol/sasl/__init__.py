"""SASL authentication as sans-IO pieces: the mechanisms and the handshake plan.

Mechanisms (one object per authentication attempt; :meth:`SaslMechanism.fresh` makes a new
one with the same credentials, for re-authentication):

* :class:`PlainMechanism`, PLAIN (RFC 4616);
* :class:`ScramMechanism`, SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), with
  SASLprep (RFC 4013) of the user name and password;
* :class:`OAuthBearerMechanism`, OAUTHBEARER (RFC 7628 as Kafka uses it, KIP-255, with
  KIP-342 extensions), fed by a token provider.

:func:`scram_credential` makes what a broker stores for a SCRAM user (salt, iterations and
the salted password, with the same SASLprep and Hi() as the login), for
AlterUserScramCredentials (KIP-554).

:class:`SaslExchange` plans the conversation with the broker as data: it says which request
to send next (SaslHandshake, then SaslAuthenticate requests, or raw size-prefixed tokens
after a SaslHandshake v0) and turns each answer into the next step or a typed error.  A
caller that owns a :class:`~kafkawire.protocol.connection.Connection` drives it::

    exchange = SaslExchange(mechanism, conn.version_for(SASL_HANDSHAKE),
                            authenticate_version=conn.version_for(SASL_AUTHENTICATE))
    step = exchange.next_step()
    while step is not None:
        if step.raw is None:                      # a Kafka request: frame it as usual
            cid, chunks = conn.send(step.api, step.request, step.version)
            write(chunks)
            exchange.receive(wait_for_response(cid).response)
        else:                                     # SaslHandshake v0: a raw token
            write(step.raw)
            exchange.receive_raw(read_raw_token())  # 4-byte size, then the token
        step = exchange.next_step()
    reauthenticate_at = exchange.result.reauthenticate_at_ms(now_ms, random_fraction)

Time is never read here: every function that needs the time takes ``now_ms``, and every
random choice takes its random number (a float in [0, 1]) from the caller.

Every name is imported from here; the code sits in private modules: ``_mechanism`` (the
base class and PLAIN), ``_scram``, ``_oauthbearer``, ``_oidc`` (tokens from a token endpoint), ``_saslprep``, ``_timing``
(re-authentication, KIP-368, and token refresh), ``_exchange`` (the handshake plan) and
``_errors``.  :func:`create_mechanism`, which picks a mechanism by its configured name,
is defined here.

This package does no I/O.
"""

from __future__ import annotations

from typing import Any

from kafkawire.protocol.sasl._errors import (
    OAuthBearerServerError,
    OAuthBearerTokenError,
    SaslAuthenticationError,
    SaslError,
    SaslIllegalStateError,
    SaslPrepError,
    SaslProtocolError,
    SaslUnsupportedMechanismError,
    ScramIterationCountError,
    ScramServerError,
    ScramServerSignatureError,
)
from kafkawire.protocol.sasl._exchange import (
    RawTokenReader,
    SaslExchange,
    SaslResult,
    SaslStep,
    exchange_for,
    frame_raw_token,
)
from kafkawire.protocol.sasl._mechanism import PlainMechanism, SaslMechanism
from kafkawire.protocol.sasl._oauthbearer import OAuthBearerMechanism, OAuthBearerToken, TokenProvider
from kafkawire.protocol.sasl._oidc import (
    OAuthBearerCredentialsError,
    OAuthBearerEndpointError,
    OAuthBearerEndpointTimeoutError,
    OAuthBearerLoginError,
    OAuthBearerTokenResponseError,
    OidcLogin,
    TokenRequest,
    jwt_claims,
)
from kafkawire.protocol.sasl._saslprep import saslprep, scram_escape_username
from kafkawire.protocol.sasl._scram import (
    SCRAM_MAX_ITERATIONS,  # noqa: F401 - importable from here as before, not in __all__
    SCRAM_MECHANISM_TYPES,
    SCRAM_MIN_ITERATIONS,
    ScramCredential,
    ScramMechanism,
    scram_credential,
)
from kafkawire.protocol.sasl._timing import reauthentication_at_ms, token_refresh_at_ms

__all__ = [
    # mechanisms
    "SaslMechanism",
    "PlainMechanism",
    "ScramMechanism",
    "OAuthBearerMechanism",
    "OAuthBearerToken",
    "TokenProvider",
    # tokens from an OAuth 2 / OIDC token endpoint (KIP-768)
    "OidcLogin",
    "TokenRequest",
    "jwt_claims",
    "MECHANISMS",
    "create_mechanism",
    "saslprep",
    "scram_escape_username",
    "SCRAM_MIN_ITERATIONS",
    # SCRAM credentials (KIP-554)
    "ScramCredential",
    "scram_credential",
    "SCRAM_MECHANISM_TYPES",
    # the handshake plan
    "SaslExchange",
    "SaslStep",
    "SaslResult",
    "RawTokenReader",
    "frame_raw_token",
    "exchange_for",
    # timing
    "reauthentication_at_ms",
    "token_refresh_at_ms",
    # errors
    "SaslError",
    "SaslPrepError",
    "SaslProtocolError",
    "ScramIterationCountError",
    "ScramServerSignatureError",
    "ScramServerError",
    "OAuthBearerTokenError",
    "OAuthBearerServerError",
    "OAuthBearerLoginError",
    "OAuthBearerCredentialsError",
    "OAuthBearerTokenResponseError",
    "OAuthBearerEndpointError",
    "OAuthBearerEndpointTimeoutError",
    "SaslUnsupportedMechanismError",
    "SaslAuthenticationError",
    "SaslIllegalStateError",
]


#: The mechanism names :func:`create_mechanism` knows.
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def create_mechanism(
    name: str,
    *,
    username: str | None = None,
    password: str | None = None,
    token: OAuthBearerToken | TokenProvider | None = None,
    **options: Any,
) -> SaslMechanism:
    """The mechanism object for a configured name (``sasl_mechanism``): PLAIN and SCRAM
    need ``username`` and ``password``, OAUTHBEARER a ``token`` (or token provider).
    ``options`` go to the mechanism's constructor."""
    upper = name.upper()
    if upper == "OAUTHBEARER":
        if token is None:
            raise ValueError("SASL mechanism OAUTHBEARER needs a token or a token provider")
        return OAuthBearerMechanism(token, **options)
    if upper in MECHANISMS:  # PLAIN or SCRAM: OAUTHBEARER is above
        if username is None or password is None:
            raise ValueError(f"SASL mechanism {upper} needs a username and a password")
        if upper == "PLAIN":
            return PlainMechanism(username, password, **options)
        return ScramMechanism(upper, username, password, **options)
    raise ValueError(
        f"unknown SASL mechanism {name!r}: kafkawire speaks {', '.join(MECHANISMS)} "
        f"(GSSAPI/Kerberos is not supported)"
    )


# Shown by their public path in tracebacks and reprs (and pickled by it: the same class).
for _name in __all__:
    _obj = globals()[_name]
    if isinstance(_obj, type) and _obj.__module__.startswith(__name__ + "._"):
        _obj.__module__ = __name__
del _name, _obj
