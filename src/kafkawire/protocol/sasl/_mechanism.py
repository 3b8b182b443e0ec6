"""What every SASL mechanism is (:class:`SaslMechanism`: one client side of one
authentication), and PLAIN (RFC 4616), the simplest of them."""

from __future__ import annotations

from kafkawire.protocol.sasl._errors import SaslIllegalStateError, SaslProtocolError


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
