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

This module does no I/O.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import stringprep
import struct
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any, Union

from kafkawire import errors
from kafkawire.protocol.apis.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE
from kafkawire.protocol.api import Api, ApiVersionError
from kafkawire.protocol.schema import Struct

__all__ = [
    # mechanisms
    "SaslMechanism",
    "PlainMechanism",
    "ScramMechanism",
    "OAuthBearerMechanism",
    "OAuthBearerToken",
    "TokenProvider",
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
    "SaslUnsupportedMechanismError",
    "SaslAuthenticationError",
    "SaslIllegalStateError",
]

#: Kafka refuses SCRAM iteration counts below this (and RFC 7677 asks for at least 4096).
SCRAM_MIN_ITERATIONS = 4096
#: Largest iteration count accepted from a broker by default: PBKDF2 with a huge count from
#: a hostile or broken broker would hang the client.
SCRAM_MAX_ITERATIONS = 10_000_000

_I32 = struct.Struct(">i")


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------


class SaslError(errors.KafkaWireError):
    """A SASL failure found on the client's side (no broker error code)."""


class SaslPrepError(SaslError, ValueError):
    """A user name or password SASLprep (RFC 4013) refuses: a prohibited character, a
    bidirectional-text rule broken, or nothing left after mapping."""


class SaslProtocolError(SaslError):
    """A broker message that does not follow the mechanism's grammar (a SCRAM message with
    a missing attribute or a nonce that is not ours, bytes after the exchange ended...)."""


class ScramIterationCountError(SaslError):
    """The broker's SCRAM iteration count is below the minimum (4096, as Kafka) or above
    the limit this client accepts."""


class ScramServerSignatureError(SaslError):
    """The broker's ServerSignature does not match: it could not prove it knows the
    password (SCRAM mutual authentication failed).  The client must not trust the
    connection: it may be talking to an impostor."""


class SaslAuthenticationError(errors.SaslAuthenticationFailedError):
    """SASL_AUTHENTICATION_FAILED (58) from the broker; ``error_message`` is the broker's
    text (None when it gave none) and ``mechanism`` the mechanism tried."""

    def __init__(self, message: str, *, mechanism: str | None = None, error_message: str | None = None):
        super().__init__(message)
        self.mechanism = mechanism
        self.error_message = error_message


class ScramServerError(SaslAuthenticationError):
    """The broker ended SCRAM with an ``e=`` attribute (RFC 5802 server-error);
    ``server_error`` is its value, e.g. ``invalid-proof`` or ``unknown-user``."""

    def __init__(self, message: str, *, mechanism: str, server_error: str):
        super().__init__(message, mechanism=mechanism, error_message=server_error)
        self.server_error = server_error


class OAuthBearerServerError(SaslAuthenticationError):
    """The broker refused the OAUTHBEARER token with an RFC 7628 error challenge:
    ``status`` (e.g. ``invalid_token``), ``scope`` and ``openid_configuration`` come from
    its JSON (None when absent); ``challenge`` is the raw text."""

    def __init__(self, message: str, *, challenge: str, status: str | None, scope: str | None,
                 openid_configuration: str | None, error_message: str | None = None):
        super().__init__(message, mechanism="OAUTHBEARER", error_message=error_message)
        self.challenge = challenge
        self.status = status
        self.scope = scope
        self.openid_configuration = openid_configuration


class OAuthBearerTokenError(SaslError, ValueError):
    """A token, authorization id or extension that cannot be put into an OAUTHBEARER
    initial response (not RFC 6750 / RFC 7628 syntax, or a reserved extension name)."""


class SaslUnsupportedMechanismError(errors.UnsupportedSaslMechanismError):
    """UNSUPPORTED_SASL_MECHANISM (33): ``mechanism`` was refused; ``enabled_mechanisms``
    lists what the broker said it offers."""

    def __init__(self, message: str, *, mechanism: str, enabled_mechanisms: list[str]):
        super().__init__(message)
        self.mechanism = mechanism
        self.enabled_mechanisms = enabled_mechanisms


class SaslIllegalStateError(errors.IllegalSaslStateError):
    """ILLEGAL_SASL_STATE (34), from the broker, or a call out of order on this side."""

    def __init__(self, message: str, *, error_message: str | None = None):
        super().__init__(message)
        self.error_message = error_message


# ---------------------------------------------------------------------------------------
# SASLprep (RFC 4013, a profile of stringprep, RFC 3454)
# ---------------------------------------------------------------------------------------

# RFC 4013 section 2.3: the stringprep tables whose characters must not appear in output.
_PROHIBITED = (
    ("a non-ASCII space", stringprep.in_table_c12),
    ("an ASCII control character", stringprep.in_table_c21),
    ("a non-ASCII control character", stringprep.in_table_c22),
    ("a private-use character", stringprep.in_table_c3),
    ("a non-character code point", stringprep.in_table_c4),
    ("a surrogate code point", stringprep.in_table_c5),
    ("a character inappropriate for plain text", stringprep.in_table_c6),
    ("a character inappropriate for canonical representation", stringprep.in_table_c7),
    ("a display-property-changing or deprecated character", stringprep.in_table_c8),
    ("a tagging character", stringprep.in_table_c9),
)


def saslprep(value: str, *, allow_unassigned: bool = True, what: str = "string") -> str:
    """Prepare ``value`` with SASLprep (RFC 4013) and return the result.

    Mapping (non-ASCII spaces to SPACE, "commonly mapped to nothing" characters removed),
    NFKC normalization, the prohibited-output check and the bidirectional-text check.
    ``allow_unassigned`` True is RFC 3454's "query" semantics, what a client uses (RFC 5802
    section 5.1); False refuses unassigned code points ("stored strings").  Raises
    :class:`SaslPrepError` naming ``what`` and the offending character.
    """
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    mapped = "".join(
        " " if stringprep.in_table_c12(ch) else ch
        for ch in value
        if not stringprep.in_table_b1(ch)
    )
    out = unicodedata.ucd_3_2_0.normalize("NFKC", mapped)
    for ch in out:
        for label, table in _PROHIBITED:
            if table(ch):
                raise SaslPrepError(
                    f"{what} contains {label} (U+{ord(ch):04X}), which SASLprep (RFC 4013) "
                    f"prohibits; remove it"
                )
        if not allow_unassigned and stringprep.in_table_a1(ch):
            raise SaslPrepError(
                f"{what} contains the unassigned code point U+{ord(ch):04X}, which SASLprep "
                f"refuses in stored strings"
            )
    # RFC 3454 section 6: right-to-left text must be all RandALCat-or-neutral, and begin
    # and end with a RandALCat character.
    if any(stringprep.in_table_d1(ch) for ch in out):
        if any(stringprep.in_table_d2(ch) for ch in out):
            raise SaslPrepError(
                f"{what} mixes right-to-left and left-to-right characters, which SASLprep's "
                f"bidirectional check (RFC 3454 section 6) prohibits"
            )
        if not (stringprep.in_table_d1(out[0]) and stringprep.in_table_d1(out[-1])):
            raise SaslPrepError(
                f"{what} contains right-to-left characters but does not begin and end with "
                f"one, which SASLprep's bidirectional check (RFC 3454 section 6) prohibits"
            )
    return out


def scram_escape_username(name: str) -> str:
    """A (SASLprepped) user name as a SCRAM ``saslname``: "=" as "=3D", "," as "=2C"."""
    return name.replace("=", "=3D").replace(",", "=2C")


# ---------------------------------------------------------------------------------------
# Mechanisms
# ---------------------------------------------------------------------------------------


class SaslMechanism:
    """One client side of one SASL authentication.

    The exchange calls :meth:`initial_response` once, then :meth:`respond` with each
    challenge from the broker; ``respond`` returns the next message, or None when the
    mechanism has nothing more to send.  ``done`` is True once the mechanism has accepted
    the broker's last message (for SCRAM: verified its signature).
    """

    #: The mechanism's IANA name, as sent in SaslHandshake.
    name: str = ""

    def __init__(self) -> None:
        self._started = False
        self._done = False

    @property
    def done(self) -> bool:
        return self._done

    def initial_response(self) -> bytes:
        raise NotImplementedError

    def respond(self, challenge: bytes) -> bytes | None:
        raise NotImplementedError

    def complete(self, server_final: bytes) -> None:
        """Accept the broker's final message; raises if it does not prove the exchange."""
        raise NotImplementedError

    def fresh(self) -> SaslMechanism:
        """A new, unstarted mechanism with the same credentials (for re-authentication)."""
        raise NotImplementedError

    def _start(self) -> None:
        if self._started:
            raise SaslIllegalStateError(
                f"{self.name}: initial_response() called twice; a mechanism object serves one "
                f"authentication, use fresh() for the next"
            )
        self._started = True

    def _check_started(self) -> None:
        if not self._started:
            raise SaslIllegalStateError(f"{self.name}: respond() before initial_response()")

    def __repr__(self) -> str:
        state = "done" if self._done else ("started" if self._started else "new")
        return f"<{type(self).__name__} {self.name} {state}>"


class PlainMechanism(SaslMechanism):
    """PLAIN (RFC 4616): one message, ``authzid NUL authcid NUL passwd``, authzid empty.

    The user name and password go as UTF-8 exactly as given (Kafka's PLAIN server compares
    them without SASLprep).  Send PLAIN only over TLS: the password travels in clear.
    """

    name = "PLAIN"

    def __init__(self, username: str, password: str):
        super().__init__()
        for label, value in (("username", username), ("password", password)):
            if not isinstance(value, str):
                raise TypeError(f"PLAIN {label} must be a str, got {type(value).__name__}")
            if not value:
                raise ValueError(f"PLAIN {label} is empty")
            if "\0" in value:
                raise ValueError(f"PLAIN {label} contains a NUL character, which RFC 4616 uses as its separator")
        self.username = username
        self._password = password

    def initial_response(self) -> bytes:
        self._start()
        return b"\0" + self.username.encode("utf-8") + b"\0" + self._password.encode("utf-8")

    def respond(self, challenge: bytes) -> bytes | None:
        self._check_started()
        self.complete(challenge)
        return None

    def complete(self, server_final: bytes) -> None:
        if self._done or server_final:
            raise SaslProtocolError(
                f"PLAIN: the broker sent {len(server_final)} unexpected byte(s) after the "
                f"exchange; PLAIN has one message"
            )
        self._done = True

    def fresh(self) -> PlainMechanism:
        return PlainMechanism(self.username, self._password)


def _default_nonce() -> str:
    # 24 random bytes as base64url: printable and without ",", as RFC 5802 requires.
    return secrets.token_urlsafe(24)


_SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}

# RFC 5802 section 7, server-error-value: what each one means, for the error message.
_SCRAM_SERVER_ERRORS = {
    "invalid-encoding": "the broker could not decode the client's message",
    "extensions-not-supported": "the broker does not support the extensions sent",
    "invalid-proof": "wrong password (the client proof did not verify)",
    "channel-bindings-dont-match": "channel bindings do not match",
    "server-does-support-channel-binding": "the broker supports channel binding",
    "channel-binding-not-supported": "the broker does not support channel binding",
    "unsupported-channel-binding-type": "unsupported channel binding type",
    "unknown-user": "the broker has no SCRAM credential for this user and mechanism",
    "invalid-username-encoding": "the user name is not valid UTF-8 or SASLprep failed on it",
    "no-resources": "the broker is out of resources",
    "other-error": "an unspecified error",
}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _salted_password(hash_name: str, prepped_password: str, salt: bytes, iterations: int) -> bytes:
    # RFC 5802 section 2.2: Hi(str, salt, i) is PBKDF2 with HMAC as the PRF and one block of
    # output (dkLen = the hash's size), which is what pbkdf2_hmac returns by default.
    return hashlib.pbkdf2_hmac(hash_name, prepped_password.encode("utf-8"), salt, iterations)


#: KIP-554's numbers for the SCRAM mechanisms in DescribeUserScramCredentials and
#: AlterUserScramCredentials (0 is "unknown").
SCRAM_MECHANISM_TYPES = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}


class ScramCredential:
    """What a broker stores to check a SCRAM login, as AlterUserScramCredentials carries it
    (KIP-554): ``mechanism``, ``iterations``, ``salt`` and ``salted_password`` =
    Hi(Normalize(password), salt, iterations) (RFC 5802); the password itself is not kept."""

    __slots__ = ("mechanism", "iterations", "salt", "salted_password")

    def __init__(self, mechanism: str, iterations: int, salt: bytes, salted_password: bytes):
        self.mechanism = mechanism
        self.iterations = iterations
        self.salt = salt
        self.salted_password = salted_password

    @property
    def mechanism_type(self) -> int:
        """KIP-554's number for the mechanism (1 SCRAM-SHA-256, 2 SCRAM-SHA-512)."""
        return SCRAM_MECHANISM_TYPES[self.mechanism]

    def __repr__(self) -> str:  # the salted password is as good as the password: not shown
        return f"ScramCredential({self.mechanism}, iterations={self.iterations})"


def scram_credential(mechanism: str, password: str, *, iterations: int = SCRAM_MIN_ITERATIONS,
                     salt: bytes | None = None) -> ScramCredential:
    """The :class:`ScramCredential` for ``password`` under ``mechanism`` (SCRAM-SHA-256 or
    SCRAM-SHA-512): a fresh 32-byte random salt unless ``salt`` is given, and the password
    SASLprepped (RFC 4013) exactly as :class:`ScramMechanism` preps it at login, so that
    kafkawire logs in with it.  (Java's and librdkafka's clients send the password unprepped:
    a password SASLprep changes, e.g. one with a non-ASCII space or a compatibility form
    such as U+FB01, logs in from kafkawire only.)  ``iterations`` must be at least 4096
    (RFC 7677; Kafka also refuses more than 16384)."""
    name = mechanism.upper() if isinstance(mechanism, str) else mechanism
    hash_name = _SCRAM_HASHES.get(name)  # type: ignore[arg-type]
    if hash_name is None:
        raise ValueError(
            f"unknown SCRAM mechanism {mechanism!r}: a SCRAM credential is for one of "
            f"{', '.join(_SCRAM_HASHES)}"
        )
    if not isinstance(iterations, int) or isinstance(iterations, bool) or iterations < SCRAM_MIN_ITERATIONS:
        raise ValueError(
            f"SCRAM iterations must be an int of at least {SCRAM_MIN_ITERATIONS} (RFC 7677; "
            f"Kafka refuses fewer), got {iterations!r}"
        )
    if salt is None:
        salt = secrets.token_bytes(32)
    elif not isinstance(salt, (bytes, bytearray)) or not salt:
        raise ValueError(f"a SCRAM salt must be non-empty bytes, got {salt!r}")
    prepped = saslprep(password, what="SCRAM password")
    if not prepped:
        raise SaslPrepError("SCRAM password is empty after SASLprep")
    return ScramCredential(name, iterations, bytes(salt), _salted_password(hash_name, prepped, bytes(salt), iterations))


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b))


class ScramMechanism(SaslMechanism):
    """SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677), without channel binding.

    ``nonce`` is a callable returning the client nonce (printable ASCII, no ","); the
    default draws 24 bytes from :mod:`secrets`.  ``extensions`` are added to the
    client-first message as ``key=value`` (Kafka's delegation tokens use
    ``tokenauth=true``, KIP-48).  The user name and password are SASLprepped (RFC 4013);
    the user name is then escaped for the wire.  The broker's iteration count must be at
    least ``min_iterations`` (4096, as Kafka) and at most ``max_iterations``.
    """

    def __init__(
        self,
        mechanism: str,
        username: str,
        password: str,
        *,
        nonce: Callable[[], str] | None = None,
        extensions: Mapping[str, str] | None = None,
        min_iterations: int = SCRAM_MIN_ITERATIONS,
        max_iterations: int = SCRAM_MAX_ITERATIONS,
    ):
        super().__init__()
        hash_name = _SCRAM_HASHES.get(mechanism.upper())
        if hash_name is None:
            raise ValueError(
                f"unknown SCRAM mechanism {mechanism!r}: kafkawire speaks "
                f"{', '.join(_SCRAM_HASHES)}"
            )
        self.name = mechanism.upper()
        self._hash = hash_name
        self.username = username
        self._password = password
        # Prepared now, so that a bad name or password fails before anything is sent.
        self._prepped_user = saslprep(username, what="SCRAM username")
        self._prepped_password = saslprep(password, what="SCRAM password")
        if not self._prepped_user:
            raise SaslPrepError("SCRAM username is empty after SASLprep")
        if not self._prepped_password:
            raise SaslPrepError("SCRAM password is empty after SASLprep")
        self._nonce_source = nonce or _default_nonce
        self.extensions = dict(extensions or {})
        for key, value in self.extensions.items():
            if not (key.isascii() and key.isalpha()) or key in ("n", "r", "c", "p", "m"):
                raise ValueError(f"SCRAM extension name {key!r} must be letters, not a SCRAM attribute")
            if "," in value or "=" in value:
                raise ValueError(f"SCRAM extension {key}'s value must not contain ',' or '='")
        self.min_iterations = min_iterations
        self.max_iterations = max_iterations
        self._client_nonce = ""
        self._client_first_bare = ""
        self._server_signature: bytes | None = None
        self._step = 0

    def fresh(self) -> ScramMechanism:
        return ScramMechanism(
            self.name, self.username, self._password, nonce=self._nonce_source,
            extensions=self.extensions, min_iterations=self.min_iterations,
            max_iterations=self.max_iterations,
        )

    # client-first ------------------------------------------------------------------------

    def initial_response(self) -> bytes:
        self._start()
        nonce = self._nonce_source()
        if not nonce or not all(0x21 <= ord(c) <= 0x7E and c != "," for c in nonce):
            raise SaslProtocolError(
                f"the SCRAM nonce source returned {nonce!r}: a nonce must be non-empty "
                f"printable ASCII without ','"
            )
        self._client_nonce = nonce
        bare = f"n={scram_escape_username(self._prepped_user)},r={nonce}"
        for key, value in self.extensions.items():
            bare += f",{key}={value}"
        self._client_first_bare = bare
        self._step = 1
        # gs2 header "n,,": no channel binding, no authorization identity.
        return ("n,," + bare).encode("utf-8")

    # server-first -> client-final, server-final --------------------------------------------

    def respond(self, challenge: bytes) -> bytes | None:
        self._check_started()
        if self._step == 1:
            return self._client_final(challenge)
        if self._step == 2:
            self.complete(challenge)
            return None
        raise SaslProtocolError(
            f"{self.name}: the broker sent {len(challenge)} byte(s) after the exchange ended"
        )

    def _parse(self, message: bytes, what: str) -> list[tuple[str, str]]:
        try:
            text = bytes(message).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslProtocolError(f"{self.name}: the broker's {what} is not UTF-8: {bytes(message)!r}") from None
        attrs = []
        for part in text.split(","):
            if len(part) < 2 or part[1] != "=" or not part[0].isalpha():
                raise SaslProtocolError(
                    f"{self.name}: malformed {what} from the broker: {text!r} (attributes "
                    f"are letter=value separated by ',')"
                )
            attrs.append((part[0], part[2:]))
        return attrs

    def _server_error(self, value: str) -> ScramServerError:
        meaning = _SCRAM_SERVER_ERRORS.get(value, "an error this client does not know")
        return ScramServerError(
            f"{self.name} authentication of user {self.username!r} failed: the broker "
            f"answered e={value} ({meaning})",
            mechanism=self.name,
            server_error=value,
        )

    def _client_final(self, server_first: bytes) -> bytes:
        attrs = self._parse(server_first, "server-first message")
        if attrs[0][0] == "e":
            raise self._server_error(attrs[0][1])
        if attrs[0][0] == "m":
            raise SaslProtocolError(
                f"{self.name}: the broker requires a mandatory extension (m={attrs[0][1]}) "
                f"this client does not support"
            )
        if len(attrs) < 3 or [a[0] for a in attrs[:3]] != ["r", "s", "i"]:
            raise SaslProtocolError(
                f"{self.name}: the broker's server-first message {bytes(server_first)!r} does "
                f"not start with r=, s=, i= (RFC 5802 section 7)"
            )
        nonce, salt_b64, iterations_text = attrs[0][1], attrs[1][1], attrs[2][1]
        if not nonce.startswith(self._client_nonce) or len(nonce) <= len(self._client_nonce):
            raise SaslProtocolError(
                f"{self.name}: the broker's nonce does not extend the client's (RFC 5802 "
                f"section 5.1): the reply is not for this exchange"
            )
        try:
            salt = base64.b64decode(salt_b64, validate=True)
        except (binascii.Error, ValueError):
            raise SaslProtocolError(f"{self.name}: the broker's salt {salt_b64!r} is not base64") from None
        if not iterations_text.isdigit():
            raise SaslProtocolError(
                f"{self.name}: the broker's iteration count {iterations_text!r} is not a number"
            )
        iterations = int(iterations_text)
        if iterations < self.min_iterations:
            raise ScramIterationCountError(
                f"{self.name}: the broker asked for {iterations} iterations, fewer than the "
                f"minimum {self.min_iterations} (Kafka's and RFC 7677's); the credential is "
                f"too weak: recreate it with more iterations"
            )
        if iterations > self.max_iterations:
            raise ScramIterationCountError(
                f"{self.name}: the broker asked for {iterations} iterations, more than "
                f"max_iterations={self.max_iterations}; raise max_iterations if this is intended"
            )
        salted = _salted_password(self._hash, self._prepped_password, salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self._hash).digest()
        stored_key = hashlib.new(self._hash, client_key).digest()
        server_key = hmac.new(salted, b"Server Key", self._hash).digest()
        # c=biws is base64("n,,"), the gs2 header sent in client-first.
        without_proof = f"c={_b64(b'n,,')},r={nonce}"
        auth_message = ",".join(
            (self._client_first_bare, bytes(server_first).decode("utf-8"), without_proof)
        ).encode("utf-8")
        client_signature = hmac.new(stored_key, auth_message, self._hash).digest()
        proof = _xor(client_key, client_signature)
        self._server_signature = hmac.new(server_key, auth_message, self._hash).digest()
        self._step = 2
        return f"{without_proof},p={_b64(proof)}".encode("ascii")

    def complete(self, server_final: bytes) -> None:
        if self._step != 2 or self._server_signature is None:
            raise SaslIllegalStateError(
                f"{self.name}: complete() before the client-final message was made"
            )
        # Whatever the final message holds, the exchange ends with it.
        self._step = 3
        attrs = self._parse(server_final, "server-final message")
        key, value = attrs[0]
        if key == "e":
            raise self._server_error(value)
        if key != "v":
            raise SaslProtocolError(
                f"{self.name}: the broker's server-final message {bytes(server_final)!r} has "
                f"neither v= nor e="
            )
        try:
            signature = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            raise SaslProtocolError(f"{self.name}: the broker's server signature {value!r} is not base64") from None
        if not hmac.compare_digest(signature, self._server_signature):
            raise ScramServerSignatureError(
                f"{self.name}: the broker's ServerSignature does not match: the broker could "
                f"not prove it knows the password of {self.username!r} (an impostor, or a "
                f"credential changed during the exchange); do not use this connection"
            )
        self._done = True


# -- OAUTHBEARER --------------------------------------------------------------------------


class OAuthBearerToken:
    """An OAuth 2 bearer token: ``value``, and when it expires, ``expiry_ms``, in
    milliseconds since the epoch (Java's ``lifetimeMs()``).  ``start_ms`` is when it was
    issued (None: unknown; the refresh helper then counts from the time it is asked).
    ``principal`` is the name the token stands for, for messages only."""

    __slots__ = ("value", "expiry_ms", "start_ms", "principal")

    def __init__(self, value: str, expiry_ms: int, *, start_ms: int | None = None, principal: str | None = None):
        self.value = value
        self.expiry_ms = int(expiry_ms)
        self.start_ms = None if start_ms is None else int(start_ms)
        self.principal = principal

    @classmethod
    def from_lifetime(cls, value: str, lifetime_ms: int, *, now_ms: int, principal: str | None = None) -> OAuthBearerToken:
        """A token received at ``now_ms`` that is valid for ``lifetime_ms`` (an OAuth
        ``expires_in`` times 1000)."""
        return cls(value, now_ms + lifetime_ms, start_ms=now_ms, principal=principal)

    def refresh_at_ms(self, now_ms: int, jitter: float, **limits: Any) -> int:
        """When to fetch the next token: :func:`token_refresh_at_ms` for this token."""
        return token_refresh_at_ms(
            self.expiry_ms, now_ms=now_ms, start_ms=self.start_ms, jitter=jitter, **limits
        )

    def __repr__(self) -> str:  # never shows the token itself
        return f"<OAuthBearerToken principal={self.principal!r} expiry_ms={self.expiry_ms}>"


#: What a token provider may return: a token object, or ``(value, expiry_ms)``.
TokenProvider = Callable[[], Union[OAuthBearerToken, tuple[str, int]]]

# RFC 6750 section 2.1, b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
_B64TOKEN_CHARS = frozenset(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/"
)


def _check_token(value: str) -> None:
    body = value.rstrip("=")
    if not body or not set(body) <= _B64TOKEN_CHARS:
        raise OAuthBearerTokenError(
            "the OAUTHBEARER token is not an RFC 6750 b64token (letters, digits and "
            "-._~+/ followed by optional '='); was it given with its 'Bearer ' prefix or "
            "with whitespace around it?"
        )


def _check_extension(key: str, value: str) -> None:
    # RFC 7628 section 3.1: key = 1*(ALPHA); value = *(VCHAR / SP / HTAB / CR / LF).
    if not (key.isascii() and key.isalpha()):
        raise OAuthBearerTokenError(f"OAUTHBEARER extension name {key!r} must be ASCII letters only")
    if key == "auth":
        raise OAuthBearerTokenError("'auth' is reserved for the token; it cannot be an OAUTHBEARER extension")
    if not all(0x20 <= ord(c) <= 0x7E or c in "\t\r\n" for c in value):
        raise OAuthBearerTokenError(
            f"OAUTHBEARER extension {key}'s value may hold only printable ASCII, space, tab, CR and LF"
        )


def _parse_json_challenge(challenge: bytes) -> tuple[str, dict[str, Any]]:
    text = bytes(challenge).decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    return text, data if isinstance(data, dict) else {}


class OAuthBearerMechanism(SaslMechanism):
    """OAUTHBEARER (RFC 7628 as Kafka speaks it, KIP-255).

    ``token`` is an :class:`OAuthBearerToken`, or a token provider: a callable returning
    one, or ``(value, expiry_ms)``; it is called by :meth:`initial_response`, and the token
    it gave stays in ``.token`` (for :meth:`OAuthBearerToken.refresh_at_ms`).
    ``extensions`` (KIP-342) go into the initial response as ``key=value`` pairs.

    The initial response is ``n,[a=authzid],\\x01auth=Bearer <token>[\\x01k=v...]\\x01\\x01``.
    A broker that refuses the token answers with a JSON error challenge; the client then
    sends a single ``\\x01`` (RFC 7628 section 3.2.3), the broker answers that with
    SASL_AUTHENTICATION_FAILED, and the exchange raises :class:`OAuthBearerServerError`
    with the JSON's status.
    """

    name = "OAUTHBEARER"

    def __init__(
        self,
        token: OAuthBearerToken | TokenProvider,
        *,
        extensions: Mapping[str, str] | None = None,
        authzid: str | None = None,
    ):
        super().__init__()
        self._source = token
        self.extensions = dict(extensions or {})
        for key, value in self.extensions.items():
            _check_extension(key, value)
        if authzid is not None and ("," in authzid or "=" in authzid or "\x01" in authzid):
            raise OAuthBearerTokenError("OAUTHBEARER authzid must not contain ',', '=' or \\x01")
        self.authzid = authzid
        self.token: OAuthBearerToken | None = None
        #: The broker's JSON error challenge, once one came.
        self.server_challenge: bytes | None = None

    def fresh(self) -> OAuthBearerMechanism:
        return OAuthBearerMechanism(self._source, extensions=self.extensions, authzid=self.authzid)

    def _get_token(self) -> OAuthBearerToken:
        source = self._source
        token = source if isinstance(source, OAuthBearerToken) else source()
        if isinstance(token, tuple):
            if len(token) != 2:
                raise TypeError("an OAUTHBEARER token provider's tuple must be (value, expiry_ms)")
            token = OAuthBearerToken(token[0], token[1])
        if not isinstance(token, OAuthBearerToken):
            raise TypeError(
                f"the OAUTHBEARER token provider returned {type(token).__name__}; it must "
                f"return an OAuthBearerToken or (value, expiry_ms)"
            )
        if not isinstance(token.value, str):
            raise TypeError("an OAUTHBEARER token value must be a str")
        _check_token(token.value)
        return token

    def initial_response(self) -> bytes:
        self._start()
        self.token = self._get_token()
        authzid = f"a={self.authzid}" if self.authzid else ""
        parts = [f"n,{authzid},", f"auth=Bearer {self.token.value}"]
        parts.extend(f"{k}={v}" for k, v in self.extensions.items())
        return ("\x01".join(parts) + "\x01\x01").encode("utf-8")

    def respond(self, challenge: bytes) -> bytes | None:
        self._check_started()
        if self.server_challenge is not None:
            # The broker should have failed the exchange after our %x01; it did not.
            raise self.server_error()
        if self._done:
            raise SaslProtocolError(
                f"OAUTHBEARER: the broker sent {len(challenge)} byte(s) after the exchange ended"
            )
        if not challenge:
            self._done = True
            return None
        # RFC 7628 section 3.2.3: an error challenge is answered with a lone %x01, after
        # which the server fails the exchange (Kafka: with SASL_AUTHENTICATION_FAILED).
        self.server_challenge = bytes(challenge)
        return b"\x01"

    def complete(self, server_final: bytes) -> None:
        if server_final:
            self.server_challenge = bytes(server_final)
            raise self.server_error()
        self._done = True

    def server_error(self, broker_message: str | None = None) -> OAuthBearerServerError:
        """The typed error for the broker's JSON error challenge (and its final message)."""
        text, data = _parse_json_challenge(self.server_challenge or b"")
        status = data.get("status")
        detail = f"status {status!r}" if status else f"challenge {text!r}"
        if data.get("scope"):
            detail += f", scope {data['scope']!r}"
        who = f" for {self.token.principal!r}" if self.token is not None and self.token.principal else ""
        message = f"OAUTHBEARER authentication{who} failed: the broker refused the token ({detail})"
        if broker_message:
            message += f": {broker_message}"
        return OAuthBearerServerError(
            message,
            challenge=text,
            status=status if isinstance(status, str) else None,
            scope=data.get("scope") if isinstance(data.get("scope"), str) else None,
            openid_configuration=data.get("openid-configuration")
            if isinstance(data.get("openid-configuration"), str) else None,
            error_message=broker_message,
        )


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
    if upper in ("PLAIN", *_SCRAM_HASHES):
        if username is None or password is None:
            raise ValueError(f"SASL mechanism {upper} needs a username and a password")
        if upper == "PLAIN":
            return PlainMechanism(username, password, **options)
        return ScramMechanism(upper, username, password, **options)
    raise ValueError(
        f"unknown SASL mechanism {name!r}: kafkawire speaks {', '.join(MECHANISMS)} "
        f"(GSSAPI/Kerberos is not supported)"
    )


# ---------------------------------------------------------------------------------------
# Timing: re-authentication (KIP-368) and token refresh (KIP-255)
# ---------------------------------------------------------------------------------------


def _check_fraction(jitter: float) -> None:
    if not 0.0 <= jitter <= 1.0:
        raise ValueError(f"jitter must be a random number in [0, 1], got {jitter}")


def reauthentication_at_ms(
    session_lifetime_ms: int,
    *,
    authenticated_at_ms: int,
    jitter: float,
    low: float = 0.85,
    high: float = 0.95,
) -> int | None:
    """When to re-authenticate (KIP-368), or None if the broker set no session lifetime.

    A point between ``low`` and ``high`` of ``session_lifetime_ms`` (SaslAuthenticate v1+)
    after ``authenticated_at_ms``, chosen by ``jitter`` (a random number in [0, 1]) so
    that many connections do not re-authenticate at once.  The broker closes a
    connection whose session expired, so re-authenticate before the returned time passes.
    """
    _check_fraction(jitter)
    if not 0.0 < low <= high < 1.0:
        raise ValueError(f"need 0 < low <= high < 1, got low={low} high={high}")
    if session_lifetime_ms <= 0:
        return None
    fraction = low + (high - low) * jitter
    return authenticated_at_ms + round(session_lifetime_ms * fraction)


def token_refresh_at_ms(
    expiry_ms: int,
    *,
    now_ms: int,
    jitter: float,
    start_ms: int | None = None,
    window_factor: float = 0.8,
    window_jitter: float = 0.05,
    min_period_ms: int = 60_000,
    buffer_ms: int = 300_000,
) -> int:
    """When to fetch a new OAUTHBEARER token expiring at ``expiry_ms``.

    At ``window_factor`` plus up to ``window_jitter`` (scaled by ``jitter``, a random
    number in [0, 1]) of the token's lifetime, counted from ``start_ms`` (its issue time;
    ``now_ms`` when unknown), with Java's login-refresh defaults (80% + up to 5%).  When
    the token lives long enough, the time is then kept at least ``buffer_ms`` before the
    expiry and at least ``min_period_ms`` after ``now_ms``; a shorter-lived token is
    refreshed at the same fractions of what is left of it.  Never before ``now_ms``; an
    expired token gives ``now_ms`` (refresh at once).
    """
    _check_fraction(jitter)
    if not (0.5 <= window_factor <= 1.0 and 0.0 <= window_jitter <= 0.25 and window_factor + window_jitter <= 1.0):
        raise ValueError(
            f"need 0.5 <= window_factor <= 1, 0 <= window_jitter <= 0.25 and their sum <= 1; "
            f"got {window_factor} and {window_jitter}"
        )
    remaining = expiry_ms - now_ms
    if remaining <= 0:
        return now_ms
    fraction = window_factor + window_jitter * jitter
    start = now_ms if start_ms is None or start_ms > now_ms else start_ms
    if remaining >= min_period_ms + buffer_ms:
        target = start + round((expiry_ms - start) * fraction)
        target = min(target, expiry_ms - buffer_ms)
        target = max(target, now_ms + min_period_ms)
    else:
        target = now_ms + round(remaining * fraction)
    return max(target, now_ms)


# ---------------------------------------------------------------------------------------
# The handshake plan
# ---------------------------------------------------------------------------------------


def frame_raw_token(token: bytes) -> bytes:
    """A SASL token as sent after SaslHandshake v0: a 4-byte big-endian size, then the
    token, with no Kafka request header (KIP-43)."""
    return _I32.pack(len(token)) + bytes(token)


class RawTokenReader:
    """Splits the bytes read after SaslHandshake v0 into the broker's raw SASL tokens.

    ``feed(data)`` returns the tokens completed; bytes past the last complete token stay
    buffered.  The broker sends a token only in answer to one, so after the last one no
    Kafka response can be mixed in; ``leftover()`` returns whatever is buffered anyway.
    """

    def __init__(self, max_token_size: int = 1 << 20):
        self._buf = bytearray()
        self.max_token_size = max_token_size

    def feed(self, data: Any) -> list[bytes]:
        self._buf += data
        tokens = []
        while len(self._buf) >= 4:
            size = _I32.unpack_from(self._buf, 0)[0]
            if size < 0 or size > self.max_token_size:
                raise SaslProtocolError(
                    f"the broker sent a raw SASL token of {size} bytes (limit "
                    f"{self.max_token_size}); the stream is not a SASL exchange"
                )
            if len(self._buf) < 4 + size:
                break
            tokens.append(bytes(self._buf[4 : 4 + size]))
            del self._buf[: 4 + size]
        return tokens

    def leftover(self) -> bytes:
        out = bytes(self._buf)
        self._buf.clear()
        return out


class SaslStep:
    """One thing to send.  Either a Kafka request (``api``, ``version``, ``request``: frame
    it with :meth:`Connection.send`), or, after SaslHandshake v0, ``raw``: bytes to write
    to the socket as they are (size prefix included), bypassing the connection's framing,
    whose answer is one raw token (read it with :class:`RawTokenReader`)."""

    __slots__ = ("api", "version", "request", "raw")

    def __init__(self, api: Api | None, version: int | None, request: Struct | None, raw: bytes | None):
        self.api = api
        self.version = version
        self.request = request
        self.raw = raw

    def __repr__(self) -> str:
        if self.raw is not None:
            return f"SaslStep(raw={len(self.raw) - 4} bytes)"
        assert self.api is not None
        return f"SaslStep({self.api.name} v{self.version})"


class SaslResult:
    """An authentication that succeeded: ``mechanism`` (its name), ``session_lifetime_ms``
    (KIP-368; 0: the broker set none, or SaslAuthenticate v0)."""

    __slots__ = ("mechanism", "session_lifetime_ms")

    def __init__(self, mechanism: str, session_lifetime_ms: int):
        self.mechanism = mechanism
        self.session_lifetime_ms = session_lifetime_ms

    def reauthenticate_at_ms(self, authenticated_at_ms: int, jitter: float, **bounds: float) -> int | None:
        """:func:`reauthentication_at_ms` for this session (None: never needed)."""
        return reauthentication_at_ms(
            self.session_lifetime_ms, authenticated_at_ms=authenticated_at_ms, jitter=jitter, **bounds
        )

    def __repr__(self) -> str:
        return f"SaslResult(mechanism={self.mechanism!r}, session_lifetime_ms={self.session_lifetime_ms})"


_HANDSHAKE, _AUTH, _RAW, _DONE, _FAILED = "handshake", "authenticate", "raw", "done", "failed"


class SaslExchange:
    """The SASL conversation for one connection, as data.  See the module docstring.

    ``handshake_version`` is the negotiated SaslHandshake version: 1 carries the tokens in
    SaslAuthenticate requests (KIP-152) at ``authenticate_version``; 0 sends them raw.
    Call :meth:`next_step`, send it, and feed the answer to :meth:`receive` (a decoded
    response) or :meth:`receive_raw` (a raw token); repeat until ``next_step`` returns
    None.  ``result`` then holds the :class:`SaslResult`.  Failures raise typed errors;
    after one the exchange is over and the connection must be closed.
    """

    def __init__(self, mechanism: SaslMechanism, handshake_version: int, *, authenticate_version: int | None = None):
        SASL_HANDSHAKE.check_version(handshake_version)
        if handshake_version >= 1:
            if authenticate_version is None:
                raise ValueError(
                    "SaslHandshake v1 carries the tokens in SaslAuthenticate: pass the "
                    "negotiated authenticate_version"
                )
            SASL_AUTHENTICATE.check_version(authenticate_version)
        self.mechanism = mechanism
        self.handshake_version = handshake_version
        self.authenticate_version = authenticate_version
        self.result: SaslResult | None = None
        self._state = _HANDSHAKE
        self._handshake_sent = False
        self._pending: bytes | None = None  # the next token to send
        self._awaiting = False

    @property
    def done(self) -> bool:
        return self._state == _DONE

    @property
    def raw_tokens(self) -> bool:
        """True when tokens go raw (SaslHandshake v0): the shell must then not feed the
        socket's bytes to the Connection until the exchange is done."""
        return self.handshake_version == 0

    def _fail(self, exc: BaseException) -> BaseException:
        self._state = _FAILED
        self._awaiting = False
        return exc

    def _check_not_awaiting(self) -> None:
        if self._state == _FAILED:
            raise SaslIllegalStateError("the SASL exchange already failed; close the connection")
        if self._awaiting:
            raise SaslIllegalStateError(
                "next_step() called while the answer to the previous step is still due"
            )

    def next_step(self) -> SaslStep | None:
        """The next thing to send, or None when the exchange is complete."""
        self._check_not_awaiting()
        if self._state == _DONE:
            return None
        if self._state == _HANDSHAKE:
            self._awaiting = True
            request = SASL_HANDSHAKE.Request(mechanism=self.mechanism.name)
            return SaslStep(SASL_HANDSHAKE, self.handshake_version, request, None)
        assert self._pending is not None
        token, self._pending = self._pending, None
        self._awaiting = True
        if self._state == _RAW:
            return SaslStep(None, None, None, frame_raw_token(token))
        request = SASL_AUTHENTICATE.Request(auth_bytes=token)
        return SaslStep(SASL_AUTHENTICATE, self.authenticate_version, request, None)

    def receive(self, response: Any) -> None:
        """Feed the decoded SaslHandshake or SaslAuthenticate response (a response struct,
        or the :class:`~kafkawire.protocol.connection.Response` event holding it)."""
        if self._state == _FAILED:
            raise SaslIllegalStateError("the SASL exchange already failed; close the connection")
        if not self._awaiting or self._state in (_RAW, _DONE):
            raise SaslIllegalStateError(
                "receive() with no SaslHandshake/SaslAuthenticate request awaiting an answer"
            )
        body = getattr(response, "response", response)
        self._awaiting = False
        if self._state == _HANDSHAKE:
            self._on_handshake(body)
        else:
            self._on_authenticate(body)

    def receive_raw(self, token: bytes) -> None:
        """Feed one raw token the broker sent (after SaslHandshake v0), without its size."""
        if self._state != _RAW or not self._awaiting:
            raise SaslIllegalStateError("receive_raw() with no raw SASL token awaiting an answer")
        self._awaiting = False
        self._advance(bytes(token), 0)

    def connection_closed(self) -> BaseException:
        """The error for a broker that closed the connection during the exchange (raise
        it).  After SaslHandshake v0 that is how a broker says authentication failed."""
        if self._state == _RAW:
            exc: BaseException = SaslAuthenticationError(
                f"{self.mechanism.name}: the broker closed the connection during raw SASL "
                f"authentication (SaslHandshake v0 gives no reason): most likely a wrong "
                f"user name or password",
                mechanism=self.mechanism.name,
            )
        else:
            exc = errors.KafkaWireError(
                f"the broker closed the connection during the SASL {self._state} step of "
                f"{self.mechanism.name}"
            )
        return self._fail(exc)

    # -- answers ----------------------------------------------------------------------------

    def _on_handshake(self, body: Any) -> None:
        code = body.error_code
        name = self.mechanism.name
        enabled = list(body.mechanisms or [])
        if code == errors.UnsupportedSaslMechanismError.code:
            if enabled == [name]:
                # Tansu echoes the requested name instead of listing what it offers (and
                # answers 33 to every mechanism when started without --authentication).
                offered = f"it named only {name} itself, so SASL may be switched off on it"
            else:
                offered = f"it offers {', '.join(enabled) if enabled else 'none it would name'}"
            raise self._fail(SaslUnsupportedMechanismError(
                f"the broker does not offer SASL mechanism {name}; {offered}: configure a "
                f"mechanism the broker enables (UNSUPPORTED_SASL_MECHANISM, 33)",
                mechanism=name,
                enabled_mechanisms=enabled,
            ))
        if code == errors.IllegalSaslStateError.code:
            raise self._fail(SaslIllegalStateError(
                "the broker refused SaslHandshake in the connection's current state "
                "(ILLEGAL_SASL_STATE, 34): a second handshake on an authenticated connection "
                "needs KIP-368 re-authentication support on the broker"
            ))
        if code:
            raise self._fail(errors.broker_error(code, f"SaslHandshake for {name}"))
        try:
            first = self.mechanism.initial_response()
        except BaseException as exc:
            raise self._fail(exc) from None
        self._pending = first
        self._state = _RAW if self.handshake_version == 0 else _AUTH

    def _on_authenticate(self, body: Any) -> None:
        code = body.error_code
        name = self.mechanism.name
        message = body.error_message
        if code == errors.SaslAuthenticationFailedError.code:
            mech = self.mechanism
            if isinstance(mech, OAuthBearerMechanism) and mech.server_challenge is not None:
                raise self._fail(mech.server_error(message))
            raise self._fail(SaslAuthenticationError(
                f"{name} authentication failed: {message or 'the broker gave no reason'} "
                f"(SASL_AUTHENTICATION_FAILED, 58)",
                mechanism=name,
                error_message=message,
            ))
        if code == errors.IllegalSaslStateError.code:
            raise self._fail(SaslIllegalStateError(
                f"the broker refused SaslAuthenticate for {name}: "
                f"{message or 'not allowed in the current SASL state'} (ILLEGAL_SASL_STATE, 34)",
                error_message=message,
            ))
        if code:
            raise self._fail(errors.broker_error(code, f"SaslAuthenticate for {name}", message))
        self._advance(bytes(body.auth_bytes or b""), getattr(body, "session_lifetime_ms", 0) or 0)

    def _advance(self, challenge: bytes, session_lifetime_ms: int) -> None:
        try:
            reply = self.mechanism.respond(challenge)
        except BaseException as exc:
            raise self._fail(exc) from None
        if reply is not None:
            self._pending = reply
            return
        if not self.mechanism.done:  # pragma: no cover - every mechanism here is done when it stops
            raise self._fail(SaslProtocolError(f"{self.mechanism.name} stopped before it was done"))
        self._state = _DONE
        self.result = SaslResult(self.mechanism.name, session_lifetime_ms)


def exchange_for(mechanism: SaslMechanism, version_for: Callable[[Api], int]) -> SaslExchange:
    """A :class:`SaslExchange` for ``mechanism`` at the versions negotiated with the broker.

    ``version_for`` is the connection's
    :meth:`~kafkawire.protocol.connection.Connection.version_for`.  Both shells start
    their exchange here, so they pick the same versions.  A broker whose ApiVersions
    answer lists no SaslHandshake has no SASL on this listener: that raises
    :class:`SaslUnsupportedMechanismError` with no enabled mechanisms.
    """
    try:
        handshake_version = version_for(SASL_HANDSHAKE)
    except ApiVersionError as exc:
        raise SaslUnsupportedMechanismError(
            f"no SASL authentication ({mechanism.name} or any other) on this listener: {exc}; "
            f"connect to a listener with SASL enabled, or without SASL",
            mechanism=mechanism.name,
            enabled_mechanisms=[],
        ) from None
    authenticate_version = None
    if handshake_version >= 1:
        try:
            authenticate_version = version_for(SASL_AUTHENTICATE)
        except ApiVersionError:
            # KIP-152: without SaslAuthenticate the tokens can only go raw, after v0.
            handshake_version = 0
    return SaslExchange(mechanism, handshake_version, authenticate_version=authenticate_version)
