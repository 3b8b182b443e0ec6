"""SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677): the login (:class:`ScramMechanism`)
and the credential a broker stores for it (:func:`scram_credential`, for
AlterUserScramCredentials, KIP-554)."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Callable, Mapping

from kafkawire.protocol.sasl._errors import (
    SaslIllegalStateError,
    SaslPrepError,
    SaslProtocolError,
    ScramIterationCountError,
    ScramServerError,
    ScramServerSignatureError,
)
from kafkawire.protocol.sasl._mechanism import SaslMechanism
from kafkawire.protocol.sasl._saslprep import saslprep, scram_escape_username


#: Kafka refuses SCRAM iteration counts below this (and RFC 7677 asks for at least 4096).
SCRAM_MIN_ITERATIONS = 4096
#: Largest iteration count accepted from a broker by default: PBKDF2 with a huge count from
#: a hostile or broken broker would hang the client.
SCRAM_MAX_ITERATIONS = 10_000_000


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
