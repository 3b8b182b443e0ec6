"""The sans-IO connection: framing, correlation ids, pipelining and version negotiation.

A :class:`Connection` holds the protocol state of one TCP connection to one broker and does
no I/O (the h11/h2 shape): :meth:`Connection.send` turns a request object into the chunks
to write, :meth:`Connection.receive_data` turns the bytes read into :class:`Response`
events.  Whoever owns the socket (the sync client, an asyncio client, a test) moves the
bytes.  Negotiation, as a caller drives it::

    conn = Connection(client_id="my-app")
    cid, chunks = conn.api_versions_request()
    write(chunks)
    while not conn.negotiated:
        events = conn.receive_data(read())
        if conn.retry_api_versions:       # the broker answered UNSUPPORTED_VERSION (35)
            cid, chunks = conn.api_versions_request()
            write(chunks)
    cid, chunks = conn.send(METADATA, METADATA.Request(topics=None))

Responses come back on one connection in the order of the requests (Kafka's ordering
guarantee), so the connection matches each response against the oldest request still in
flight; a different correlation id means the byte stream is out of step, and the
connection is then poisoned: every later call raises the same error.

Produce with ``acks=0`` gets no response from the broker: send it with
``expects_response=False``, or the next response would be matched against it.

Reading straight into the frame: ``receive_data`` copies the bytes it is given into a
buffer of the frame's own.  An I/O shell that reads into buffers (``socket.recv_into``)
can spare that copy for the bulk of a large frame: :meth:`Connection.receive_buffer`
gives the unfilled rest of the frame being received (None between frames, while its
4-byte size prefix is not complete), the shell reads into its start, then reports how
many bytes it wrote with :meth:`Connection.received_into`, which returns the responses
completed like ``receive_data`` does.  The two ways may be mixed freely::

    view = conn.receive_buffer()
    if view is not None and len(view) >= 65536:
        n = sock.recv_into(view)          # 0: the broker closed the connection
        events = conn.received_into(n)
    else:
        events = conn.receive_data(sock.recv(65536))

A frame's buffer is allocated (not zeroed, kafkawire.codec.alloc_buffer) only once its
size prefix has been checked against ``max_frame_size``.

This module does no I/O.
"""

from __future__ import annotations

import struct
from collections import deque
from typing import Any, Union

from kafkawire import _twins, errors
from kafkawire.codec import alloc_buffer
from kafkawire.protocol import apis
from kafkawire.protocol.api import Api, ApiVersionError
from kafkawire.protocol.headers import decode_response_header, encode_request_header
from kafkawire.protocol.producer import decode_produce_response, encode_produce, frame_produce, lone_produce_request
from kafkawire.protocol.schema import Struct, Writer, decode

__all__ = [
    "Connection",
    "Response",
    "ProtocolError",
    "CorrelationIdError",
    "FrameTooLargeError",
    "DEFAULT_MAX_FRAME_SIZE",
    "UNSUPPORTED_VERSION",
]

#: Largest response frame accepted by default (100 MiB).
DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024
#: Kafka's UNSUPPORTED_VERSION error code.
UNSUPPORTED_VERSION = 35

_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_PRODUCE_API = apis.get("Produce")
_FETCH_API = apis.get("Fetch")
# A lone Produce request framed, and Produce and Fetch answers read, in one call each.
_frames = _twins.load("kafkawire._frames", "kafkawire.protocol._frames_py")
produce_frame, produce_frame_one = _frames.produce_frame, _frames.produce_frame_one
produce_answer = _frames.produce_answer
fetch_answer, fetch_body = _frames.fetch_answer, _frames.fetch_body
_MAX_CORRELATION_ID = 2**31 - 1

ApiRef = Union[Api, int, str]


class ProtocolError(errors.KafkaWireError):
    """The bytes from the broker do not follow the protocol; the connection is unusable.

    ``events`` holds the responses decoded from the same ``receive_data`` (or
    ``received_into``) call before the problem was found.  Close the socket and open a new
    connection.
    """

    def __init__(self, message: str, events: list[Response] | None = None):
        super().__init__(message)
        self.events: list[Response] = list(events or [])


class CorrelationIdError(ProtocolError):
    """A response whose correlation id is not the one of the oldest request in flight."""


class FrameTooLargeError(ProtocolError):
    """A frame's size prefix is larger than ``max_frame_size`` (or negative)."""


def _resolve(api: ApiRef) -> Api:
    if isinstance(api, Api):
        return api
    return apis.get(api)


class Response:
    """One decoded response: ``correlation_id``, ``api``, ``version`` and ``response``.

    ``version`` is the version the body was decoded with: the request's version, except
    for an ApiVersions request the broker refused with UNSUPPORTED_VERSION, whose answer
    comes in the v0 layout (KIP-511) and is reported as version 0.  Any ``records`` field
    of ``response`` is a read-only memoryview into the frame the response arrived in.
    """

    __slots__ = ("correlation_id", "api", "version", "response")

    def __init__(self, correlation_id: int, api: Api, version: int, response: Struct):
        self.correlation_id = correlation_id
        self.api = api
        self.version = version
        self.response = response

    def __repr__(self) -> str:
        return (
            f"Response(correlation_id={self.correlation_id}, api={self.api.name}, "
            f"version={self.version}, response={self.response!r})"
        )


class Connection:
    """The protocol state of one connection to one broker.  See the module docstring.

    ``client_id`` goes into every request header.  ``max_frame_size`` bounds the size
    prefix of a response before anything is allocated for it.  ``version_overrides`` maps
    an API (key or name) to the version to use for it instead of the negotiated one.
    """

    def __init__(
        self,
        client_id: str | None = "kafkawire",
        *,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        version_overrides: dict[int | str, int] | None = None,
        software_name: str = "kafkawire",
        software_version: str | None = None,
    ):
        if max_frame_size < 4:
            raise ValueError(f"max_frame_size must be at least 4 bytes, got {max_frame_size}")
        self.client_id = client_id
        self.max_frame_size = max_frame_size
        self.software_name = software_name
        if software_version is None:
            from kafkawire import __version__ as software_version  # noqa: N811
        self.software_version: str = software_version
        self._overrides: dict[int, int] = {}
        for ref, version in (version_overrides or {}).items():
            api = _resolve(ref)
            api.check_version(version)
            self._overrides[api.key] = version
        self._next_id = 0
        self._header_tails: dict[int, bytes] = {}  # Produce version -> its header after the correlation id
        self._pending: deque[tuple[int, Api, int]] = deque()
        # Correlation ids of requests sent with expects_response=False (Produce acks=0).
        # Kafka never answers them, but some Kafka-protocol brokers (Tansu, librdkafka's
        # mock) do; such an answer is dropped instead of putting the connection out of step.
        self._unanswered: deque[int] = deque(maxlen=1024)
        # Receive state: the 4-byte size prefix being read, then the frame being filled.
        self._prefix = bytearray()
        self._frame: bytearray | None = None
        self._filled = 0
        # Where the view receive_buffer() last gave starts in _frame (-1: none given, or
        # outdated by a later receive_data/received_into).
        self._lent = -1
        self._error: ProtocolError | None = None
        #: api key -> (min_version, max_version) from the broker's ApiVersions answer.
        self.broker_versions: dict[int, tuple[int, int]] | None = None
        # (the broker_versions it was made from, {api ref: version}): version_for's answers.
        self._chosen: tuple[Any, dict[Any, int]] = (None, {})
        #: feature name -> the cluster's finalized level, from ApiVersions v3+ (KIP-584):
        #: e.g. transaction.version, which decides the EndTxn version a producer may use.
        self.finalized_features: dict[str, int] = {}
        self._api_versions_version = min(apis.get(18).max_version, self._overrides.get(18, 1 << 15))
        self._last_api_versions_error = 0
        #: True after the broker refused ApiVersions with UNSUPPORTED_VERSION: call
        #: :meth:`api_versions_request` again; it now asks at a version the broker speaks.
        self.retry_api_versions = False

    # -- state ----------------------------------------------------------------------------

    @property
    def in_flight(self) -> int:
        """Requests sent whose responses have not been received yet."""
        return len(self._pending)

    @property
    def negotiated(self) -> bool:
        """True once the broker's ApiVersions answer has been received."""
        return self.broker_versions is not None

    @property
    def poisoned(self) -> ProtocolError | None:
        """The protocol error that made this connection unusable, or None."""
        return self._error

    def _check_usable(self) -> None:
        if self._error is not None:
            raise type(self._error)(
                f"this connection is unusable after an earlier protocol error ({self._error}); "
                f"close it and open a new one"
            )

    # -- versions -------------------------------------------------------------------------

    def version_for(self, api: ApiRef) -> int:
        """The version to use for ``api``: its override, else the highest both sides speak."""
        ranges = self.broker_versions
        chosen = self._chosen
        if chosen[0] is ranges and ranges is not None:
            version = chosen[1].get(api)
            if version is not None:
                return version  # a producer asks once per Produce request
        else:
            chosen = self._chosen = (ranges, {})
        version = chosen[1][api] = self._choose_version(_resolve(api), ranges)
        return version

    def _choose_version(self, api: Api, ranges: dict[int, tuple[int, int]] | None) -> int:
        override = self._overrides.get(api.key)
        if override is not None:
            # A broker that sent no ranges gives nothing to check an override against.
            if ranges:
                broker = _offered(ranges, api.key)
                if broker is None or not broker[0] <= override <= broker[1]:
                    raise ApiVersionError(
                        f"{api.name} v{override} (set in version_overrides) is not supported by "
                        f"the broker ({_range_text(broker)}{_listed_note(ranges, api.key)}); "
                        f"change or remove the override"
                    )
            return override
        if ranges is None:
            hint = ""
            if self._last_api_versions_error:
                hint = f" (its last answer was error {self._last_api_versions_error})"
            raise ApiVersionError(
                f"no version for {api.name}: the broker's ApiVersions answer has not been "
                f"received{hint}; negotiate first with api_versions_request(), or pass "
                f"version= or version_overrides"
            )
        broker = _offered(ranges, api.key)
        low = max(api.min_version, broker[0]) if broker else 0
        high = min(api.max_version, broker[1]) if broker else -1
        if broker is None or low > high:
            raise ApiVersionError(
                f"{api.name} (key {api.key}): kafkawire speaks v{api.min_version}-"
                f"v{api.max_version}, the broker {_range_text(broker)}{_listed_note(ranges, api.key)}; "
                f"no version in common"
            )
        return high

    def api_versions_request(self) -> tuple[int, list[Any]]:
        """The ApiVersions request that starts negotiation: ``(correlation_id, chunks)``.

        Asks at the highest version kafkawire knows (or the override), lowered after an
        UNSUPPORTED_VERSION answer to what the broker said it speaks.
        """
        api = apis.get(18)
        version = self._api_versions_version
        self.retry_api_versions = False
        request = api.Request(
            client_software_name=self.software_name,
            client_software_version=self.software_version,
        )
        return self.send(api, request, version)

    def _on_api_versions(self, response: Struct, requested: int) -> None:
        code = response.error_code  # type: ignore[attr-defined]
        self._last_api_versions_error = code
        if code == 0:
            self.broker_versions = {
                k.api_key: (k.min_version, k.max_version) for k in response.api_keys  # type: ignore[attr-defined]
            }
            self.finalized_features = {
                f.name: f.max_version_level for f in getattr(response, "finalized_features", None) or ()
            }
            self.retry_api_versions = False
            return
        if code != UNSUPPORTED_VERSION:
            return
        # KIP-511: the broker lists its own ApiVersions range in api_keys; an older broker
        # sends the short v0 form with no range, and v0 is the one version all of them speak.
        ours = apis.get(18)
        retry = 0
        for entry in response.api_keys:  # type: ignore[attr-defined]
            if entry.api_key == 18:
                retry = max(ours.min_version, min(ours.max_version, entry.max_version))
        if retry >= requested:
            retry = requested - 1
        if retry < 0:
            raise ApiVersionError(
                "the broker refused ApiVersions v0 with UNSUPPORTED_VERSION: it does not "
                "speak ApiVersions (Kafka before 0.10?); set version_overrides for every API "
                "used and skip negotiation"
            )
        self._api_versions_version = retry
        self.retry_api_versions = True

    # -- sending --------------------------------------------------------------------------

    def send(
        self,
        api: ApiRef,
        request: Struct,
        version: int | None = None,
        *,
        expects_response: bool = True,
    ) -> tuple[int, list[Any]]:
        """Frame ``request`` and return ``(correlation_id, chunks)`` to write, in order.

        ``version`` None picks :meth:`version_for`.  Record data (``records`` fields) is
        its own chunk, the very object the request holds.  ``expects_response=False`` is
        for Produce with acks=0, which the broker never answers.
        """
        self._check_usable()
        api = _resolve(api)
        if not isinstance(request, api.Request):
            raise TypeError(
                f"send({api.name}, ...) needs a {api.name}.Request instance, got "
                f"{type(request).__name__}"
            )
        if version is None:
            version = self.version_for(api)
        api.check_version(version)
        if api.key == 0:
            # Produce acks=0 has no response: tracking it would shift every later match.
            acks = getattr(request, "acks", None)
            if (acks == 0) == expects_response:
                raise ValueError(
                    f"Produce with acks={acks} "
                    + ("gets no response: pass expects_response=False" if acks == 0
                       else "gets a response: do not pass expects_response=False")
                )
        correlation_id = self._next_id
        self._next_id = 0 if correlation_id == _MAX_CORRELATION_ID else correlation_id + 1
        body = encode_produce(request, version) if api.key == 0 else None
        if body is not None:
            return correlation_id, self._frame_produce(correlation_id, version, body, expects_response)
        w = Writer()
        w.buf += b"\0\0\0\0"
        w.buf += encode_request_header(
            api.key, version, correlation_id, self.client_id, api.request_header_version(version)
        )
        api.encode_request(request, version, w)
        if not w.chunks:
            # The common case, one chunk: patch the size in place.
            _I32.pack_into(w.buf, 0, len(w.buf) - 4)
            chunks: list[Any] = [bytes(w.buf)]
        else:
            chunks = w.parts()
            size = sum(memoryview(c).nbytes for c in chunks) - 4
            if size > _MAX_CORRELATION_ID:
                raise errors.encode_error(f"{api.name} request of {size} bytes is too large to frame")
            # chunks[0] is bytes: the size placeholder, header and leading fields (small);
            # record data stays as is.
            chunks[0] = _I32.pack(size) + chunks[0][4:]
        if expects_response:
            self._pending.append((correlation_id, api, version))
        else:
            self._unanswered.append(correlation_id)
        return correlation_id, chunks

    def send_produce(self, request: Struct, version: int) -> list[Any]:
        """``send(Produce, request, version)[1]`` for a producer's own request, one that
        gets an answer (acks 1 or -1) at a version :meth:`version_for` chose: the same
        chunks, without the checks a caller's arbitrary request needs."""
        self._check_usable()
        correlation_id = self._next_id
        tail = self._header_tails.get(version) or self._header_tail(version)
        # One batch (a producer sending one at a time): framed in one compiled call.
        chunks = produce_frame(request, version, correlation_id, tail)
        if chunks is not None:
            return self._produce_framed(correlation_id, version, chunks)
        body = encode_produce(request, version)
        if body is None:
            return self.send(_PRODUCE_API, request, version)[1]
        chunks = self._frame_produce(correlation_id, version, body, True)
        self._next_id = 0 if correlation_id == _MAX_CORRELATION_ID else correlation_id + 1
        return chunks

    def send_produce_one(self, fields: tuple, version: int) -> list[Any]:
        """:meth:`send_produce` for the request whose fields are ``fields``
        (transactional_id, acks, timeout_ms, topic, partition, records: one partition's
        batch, Accumulator.lone_request's), framed from them in one call, with no request
        object in between: a record sent one at a time pays this before its write."""
        self._check_usable()
        correlation_id = self._next_id
        chunks = produce_frame_one(*fields, version, correlation_id,
                                   self._header_tails.get(version) or self._header_tail(version))
        if chunks is None:  # the general writer's (and its checks')
            return self.send_produce(lone_produce_request(fields), version)
        return self._produce_framed(correlation_id, version, chunks)

    def _produce_framed(self, correlation_id: int, version: int, chunks: list[Any]) -> list[Any]:
        # A Produce request _frames framed with correlation_id: its answer awaited, the id taken.
        self._pending.append((correlation_id, _PRODUCE_API, version))
        self._next_id = 0 if correlation_id == _MAX_CORRELATION_ID else correlation_id + 1
        return chunks

    def _header_tail(self, version: int) -> bytes:
        """A Produce request's header after the correlation id: client_id (and tags)."""
        tail = self._header_tails[version] = encode_request_header(
            0, version, 0, self.client_id, _PRODUCE_API.request_header_version(version))[8:]
        return tail

    def _frame_produce(self, correlation_id: int, version: int, body: list[Any],
                       expects_response: bool) -> list[Any]:
        # Produce, the producer's per-request path: written directly (protocol/producer.py).
        tail = self._header_tails.get(version) or self._header_tail(version)
        size, chunks = frame_produce(correlation_id, version, tail, body)
        if chunks is None:
            raise errors.encode_error(f"{_PRODUCE_API.name} request of {size} bytes is too large to frame")
        if expects_response:
            self._pending.append((correlation_id, _PRODUCE_API, version))
        else:
            self._unanswered.append(correlation_id)
        return chunks

    # -- receiving ------------------------------------------------------------------------

    def receive_data(self, data: Any) -> list[Response]:
        """Feed bytes read from the socket; returns the responses they complete.

        Any split of the byte stream works, down to one byte at a time.  Each frame is
        copied once, into a buffer of its own; decoded ``records`` are views of it.  A
        frame that arrives whole in a ``bytes`` object (immutable: nothing can change it
        under the views) is decoded where it is, without the copy.
        """
        self._check_usable()
        self._lent = -1
        if type(data) is bytes and self._pending and self._frame is None and not self._prefix \
                and not self._unanswered and len(data) - 4 <= self.max_frame_size:
            # One whole answer to the Produce or Fetch request in flight first (a record
            # at a time): read in one compiled call, or by the general path.
            expected, api, version = self._pending[0]
            resp = produce_answer(data, expected, version) if api is _PRODUCE_API else \
                fetch_answer(data, expected, version) if api is _FETCH_API else None
            if resp is not None:
                self._pending.popleft()
                return [Response(expected, api, version, resp)]
        events: list[Response] = []
        view = memoryview(data).cast("B")
        pos = 0
        end = len(view)
        try:
            if type(data) is bytes and self._frame is None and not self._prefix:
                # Whole frames (the usual small answers): no frame buffer, no copy.
                while end - pos >= 4:
                    size = _I32.unpack_from(data, pos)[0]
                    if end - pos - 4 < size:
                        break
                    self._check_size(size, data[pos:pos + 4])
                    event = self._decode(view[pos + 4:pos + 4 + size])
                    pos += 4 + size
                    if event is not None:
                        events.append(event)
            while pos < end:
                if self._frame is None:
                    take = min(4 - len(self._prefix), end - pos)
                    self._prefix += view[pos : pos + take]
                    pos += take
                    if len(self._prefix) < 4:
                        break
                    size = _I32.unpack(self._prefix)[0]
                    self._check_size(size, bytes(self._prefix))
                    self._prefix.clear()
                    self._frame = alloc_buffer(size)
                    self._filled = 0
                frame = self._frame
                take = min(len(frame) - self._filled, end - pos)
                frame[self._filled : self._filled + take] = view[pos : pos + take]
                self._filled += take
                pos += take
                if self._filled == len(frame):
                    self._frame = None
                    event = self._decode(frame)
                    if event is not None:
                        events.append(event)
        except ProtocolError as exc:
            exc.events = events
            self._error = exc
            raise
        return events

    def receive_buffer(self) -> memoryview | None:
        """The unfilled rest of the frame being received, to read bytes into, or None.

        None between frames (the 4-byte size prefix is not complete yet: use
        :meth:`receive_data`).  Write the next bytes of the stream at the start of the
        view, then call :meth:`received_into` with their count before any other receive
        call; the view is not to be written after that.
        """
        self._check_usable()
        frame = self._frame
        if frame is None:
            return None
        self._lent = self._filled
        return memoryview(frame)[self._filled :]

    def received_into(self, n: int) -> list[Response]:
        """``n`` bytes were written at the start of the view :meth:`receive_buffer` gave
        last; returns the responses they complete (none, or the one of the frame)."""
        self._check_usable()
        frame = self._frame
        filled = self._filled
        if frame is None or self._lent != filled or not 0 <= n <= len(frame) - filled:
            raise ValueError(
                f"received_into({n}) needs the count of bytes written into the view the last "
                f"receive_buffer() call gave, with no receive call in between"
                + ("" if frame is None or self._lent != filled else
                   f" (0 to {len(frame) - filled})")
            )
        self._lent = -1
        filled += n
        self._filled = filled
        if filled < len(frame):
            return []
        self._frame = None
        try:
            event = self._decode(frame)
        except ProtocolError as exc:
            exc.events = []
            self._error = exc
            raise
        return [] if event is None else [event]

    def _check_size(self, size: int, prefix: bytes) -> None:
        if 4 <= size <= self.max_frame_size:
            return
        if size < 4:
            raise ProtocolError(
                f"the broker sent a frame of {size} bytes (size prefix {prefix.hex()}); a "
                f"response needs at least 4 bytes for its correlation id: the stream is corrupt"
            )
        hint = ""
        if prefix[0] in (0x15, 0x16) and prefix[1] == 0x03:
            hint = " These bytes look like a TLS record: the broker expects TLS."
        raise FrameTooLargeError(
            f"the broker announced a frame of {size} bytes (size prefix {prefix.hex()}), more "
            f"than max_frame_size={self.max_frame_size}. If responses this large are expected "
            f"(large fetch max_bytes), raise max_frame_size; a nonsense size usually means a "
            f"security mismatch: the listener expects TLS or SASL and the client speaks "
            f"plaintext, or the other way round.{hint}"
        )

    def _decode(self, frame: Any) -> Response | None:
        buf = memoryview(frame).toreadonly()
        if len(buf) < 4:  # pragma: no cover - _check_size refuses frames under 4 bytes
            raise ProtocolError("frame shorter than a correlation id")
        correlation_id = _I32.unpack_from(buf, 0)[0]
        if correlation_id in self._unanswered:
            # An answer to a request that expects none: drop it, and every older one
            # (responses come in request order, so those will never be answered now).
            while self._unanswered and self._unanswered.popleft() != correlation_id:
                pass
            return None
        if not self._pending:
            raise CorrelationIdError(
                f"the broker sent a response (correlation id {correlation_id}) with no request "
                f"in flight; was a Produce with acks=0 sent with expects_response=True?"
            )
        expected, api, version = self._pending[0]
        if correlation_id != expected:
            raise CorrelationIdError(
                f"the broker answered correlation id {correlation_id}, but the oldest request "
                f"in flight is {api.name} v{version} with correlation id {expected}; the "
                f"connection is out of step (a Produce with acks=0 sent with "
                f"expects_response=True?)"
            )
        self._pending.popleft()
        try:
            _cid, pos = decode_response_header(buf, api.response_header_version(version))
            body = buf[pos:]
            decoded_version = version
            if api.key == 18:
                decoded_version = self._api_versions_layout(body, version)
            key = api.key
            response = (decode_produce_response(body, version) if key == 0 else
                        fetch_body(body, version) if key == 1 else None)
            if response is None:
                response = api.decode_response(body, decoded_version)
        except errors.CodecError as exc:
            raise ProtocolError(
                f"cannot decode the {api.name} v{version} response (correlation id "
                f"{correlation_id}, {len(buf)} bytes): {exc}"
            ) from exc
        if api.key == 18:
            self._on_api_versions(response, version)
        return Response(correlation_id, api, decoded_version, response)

    @staticmethod
    def _api_versions_layout(body: memoryview, version: int) -> int:
        """The version whose layout an ApiVersions response body is in.

        A broker that refuses the request's version answers UNSUPPORTED_VERSION in the v0
        layout (KIP-511), since it cannot know the layout the client expects.
        """
        if version == 0 or len(body) < 2 or _I16.unpack_from(body, 0)[0] != UNSUPPORTED_VERSION:
            return version
        try:
            _obj, end = decode(apis.get(18).Response, body, 0)
        except errors.CodecError:
            return version
        # Only take v0 if it explains the body exactly; a broker may also answer in the
        # requested layout.
        return 0 if end == len(body) else version


# Produce v0-v2 carry message formats 0 and 1 only (KIP-32), which Kafka 4 no longer takes.
_PRODUCE, _FETCH, _FIRST_PRODUCE_V2_FORMAT, _FIRST_FETCH_AFTER_KIP_896 = 0, 1, 3, 4


def first_due(dues: Any) -> tuple[float, float] | None:
    """Of the answers awaited on a connection, each ``(due time, timeout)`` (the shell's
    clock), the one due first, or None.  Each request is due by its own timeout (a broker
    holds some on purpose: JoinGroup), so a later request may be due before an earlier
    one; once the first due time passes, the shell closes the connection with
    :func:`late_answer_error` (the stream is out of step past a lost answer)."""
    return min(dues, default=None)


def late_answer_error(name: str, host: str, port: int, timeout: float) -> errors.RequestTimeoutError:
    """What fails every request in flight when an answer is ``timeout`` seconds late."""
    return errors.RequestTimeoutError(
        f"{name} did not answer a request within {timeout:g}s; the connection was closed "
        f"(request_timeout_ms, or the request's own longer timeout)", host=host, port=port)


def max_idle(connections_max_idle_ms: int) -> float | None:
    """connections_max_idle_ms in seconds, None for -1 (never close an idle connection)."""
    return None if connections_max_idle_ms < 0 else connections_max_idle_ms / 1000


def idle_error(name: str, host: str, port: int, idle: float, limit: float | None) -> errors.ConnectionClosedError | None:
    """For a ready connection with nothing in flight that has moved no byte for ``idle``
    seconds: the error to close it with when that is past ``limit`` (:func:`max_idle`),
    else None.  A broker closes a connection idle past its own connections.max.idle.ms
    without a word, and the client learns it only when a request written there meets the
    closed socket; closed first (the default is below the broker's), the shell's next
    use connects again instead."""
    if limit is None or idle <= limit:
        return None
    return errors.ConnectionClosedError(
        f"{name}: closed by the client after {idle:.1f}s without traffic "
        f"(connections_max_idle_ms={limit * 1000:g})", host=host, port=port)


def _offered(ranges: dict[int, tuple[int, int]], key: int) -> tuple[int, int] | None:
    """The versions of API ``key`` the broker really serves: its ApiVersions range, except
    that Kafka 4 lists Produce v0-v2 there for librdkafka's sake while it closes the
    connection on them (KAFKA-18659; KIP-896 removed them together with Fetch v0-v3, so a
    broker whose Fetch starts at v4 or later serves Produce from v3 only)."""
    broker = ranges.get(key)
    if key == _PRODUCE and broker is not None and broker[0] < _FIRST_PRODUCE_V2_FORMAT:
        fetch = ranges.get(_FETCH)
        if fetch is not None and fetch[0] >= _FIRST_FETCH_AFTER_KIP_896:
            return (_FIRST_PRODUCE_V2_FORMAT, broker[1]) if broker[1] >= _FIRST_PRODUCE_V2_FORMAT else None
    return broker


def _listed_note(ranges: dict[int, tuple[int, int]], key: int) -> str:
    """What the broker listed, where it serves less of it (see _offered)."""
    listed = ranges.get(key)
    if listed is None or listed == _offered(ranges, key):
        return ""
    return (f"; it lists v{listed[0]}-v{listed[1]} in ApiVersions but, as Kafka 4 does, closes the "
            f"connection on v{listed[0]}-v{_FIRST_PRODUCE_V2_FORMAT - 1}: KIP-896, KAFKA-18659")


def _range_text(broker: tuple[int, int] | None) -> str:
    if broker is None:
        return "does not list it in its ApiVersions answer"
    return f"speaks v{broker[0]}-v{broker[1]}"
