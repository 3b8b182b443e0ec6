"""What a Schema Registry call can end in: one class per error code the registry answers
with (``error_code`` in its JSON body, Confluent's numbering, which Karapace, Redpanda and
Apicurio's ``ccompat`` API keep), and the ways the registry cannot be reached.

Each carries ``code`` (the registry's error code, or None), ``status`` (the HTTP status,
or None) and ``retriable`` (True when the same call may succeed later unchanged).  This
module does no I/O.
"""

from __future__ import annotations

from typing import Any

from kafkawire.errors import KafkaTimeoutError, KafkaWireError

__all__ = [
    "SchemaRegistryError",
    "SchemaRegistryConnectionError",
    "SchemaRegistryTimeoutError",
    "SchemaRegistryServerError",
    "SchemaRegistryAuthError",
    "SubjectNotFoundError",
    "VersionNotFoundError",
    "SchemaNotFoundError",
    "SubjectSoftDeletedError",
    "SubjectNotSoftDeletedError",
    "VersionSoftDeletedError",
    "VersionNotSoftDeletedError",
    "SubjectConfigNotFoundError",
    "SubjectModeNotFoundError",
    "IncompatibleSchemaError",
    "InvalidSchemaError",
    "InvalidVersionError",
    "InvalidCompatibilityLevelError",
    "InvalidModeError",
    "OperationNotPermittedError",
    "ReferenceExistsError",
    "PayloadError",
    "FramingError",
    "UnknownMagicByteError",
    "TruncatedFrameError",
    "InvalidMessageIndexesError",
    "PayloadDecodeError",
    "SchemaResolutionError",
    "SerializationError",
    "UnknownSchemaIdError",
    "for_registry_code",
]

# The class for each registry error code: filled by each subclass that names its code.
_BY_CODE: dict[int, type[SchemaRegistryError]] = {}


class SchemaRegistryError(KafkaWireError):
    """A Schema Registry call that did not succeed.  ``code`` is the registry's
    ``error_code`` (40401, 409, 42201, ...) or None, ``status`` the HTTP status or None,
    ``url`` the request's URL (without credentials)."""

    #: What to do, where the code alone tells (ends the message).
    fix: str = ""

    def __init__(self, message: str, *, code: int | None = None, status: int | None = None,
                 url: str | None = None):
        super().__init__(message)
        if code is not None:
            self.code = code
        self.status = status
        self.url = url

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("code")
        if code is not None:
            _BY_CODE.setdefault(code, cls)


class SchemaRegistryConnectionError(SchemaRegistryError):
    """No registry URL could be reached (refused, reset, DNS, TLS).  ``attempts`` holds the
    typed errors of each try when there were several."""

    retriable = True

    def __init__(self, message: str, *, attempts: list[SchemaRegistryError] | None = None,
                 url: str | None = None, retriable: bool = True):
        super().__init__(message, url=url)
        self.attempts = list(attempts or [])
        self.retriable = retriable


class SchemaRegistryTimeoutError(SchemaRegistryError, KafkaTimeoutError):
    """The call's deadline passed before the registry answered it (``attempts``: the
    typed errors of the tries made meanwhile)."""

    retriable = True

    def __init__(self, message: str, *, attempts: list[SchemaRegistryError] | None = None,
                 url: str | None = None):
        super().__init__(message, url=url)
        self.attempts = list(attempts or [])


class SchemaRegistryServerError(SchemaRegistryError):
    """The registry failed (HTTP 5xx: its store, a leader election, a forward); the client
    retries these until the call's deadline, then raises this with the last answer."""

    retriable = True


class SchemaRegistryAuthError(SchemaRegistryError):
    """HTTP 401 (no or wrong credentials) or 403 (the credentials may not do this)."""

    fix = ("check basic_auth_user_info or bearer_auth_token (401), or the principal's "
           "permissions on the registry (403)")


class _NotFound(SchemaRegistryError):
    pass


class SubjectNotFoundError(_NotFound):
    code = 40401
    fix = "check the subject's name (and its context); get_subjects() lists what exists"


class VersionNotFoundError(_NotFound):
    code = 40402
    fix = "get_versions(subject) lists the subject's versions"


class SchemaNotFoundError(_NotFound):
    code = 40403
    fix = ("the id is not in this registry (a record written against another registry or "
           "context, or the schema was deleted permanently)")


class SubjectSoftDeletedError(SchemaRegistryError):
    code = 40404
    fix = "pass deleted=True to read it, or delete it with permanent=True"


class SubjectNotSoftDeletedError(SchemaRegistryError):
    code = 40405
    fix = "delete it without permanent=True first, then permanently"


class VersionSoftDeletedError(SchemaRegistryError):
    code = 40406
    fix = "pass deleted=True to read it, or delete it with permanent=True"


class VersionNotSoftDeletedError(SchemaRegistryError):
    code = 40407
    fix = "delete the version without permanent=True first, then permanently"


class SubjectConfigNotFoundError(SchemaRegistryError):
    code = 40408
    fix = "the subject has no compatibility level of its own: pass default_to_global=True"


class SubjectModeNotFoundError(SchemaRegistryError):
    code = 40409
    fix = "the subject has no mode of its own; get_mode() gives the global one"


class IncompatibleSchemaError(SchemaRegistryError):
    code = 409
    fix = ("the schema breaks the subject's compatibility rule against its earlier versions: "
           "change the schema, or the subject's compatibility level (set_config)")


class InvalidSchemaError(SchemaRegistryError):
    code = 42201
    fix = "the registry could not parse the schema for its schema_type, or a reference is missing"


class InvalidVersionError(SchemaRegistryError):
    code = 42202
    fix = "a version is a positive integer or 'latest'"


class InvalidCompatibilityLevelError(SchemaRegistryError):
    code = 42203
    fix = ("use one of NONE, BACKWARD, BACKWARD_TRANSITIVE, FORWARD, FORWARD_TRANSITIVE, "
           "FULL, FULL_TRANSITIVE")


class InvalidModeError(SchemaRegistryError):
    code = 42204
    fix = "use one of READWRITE, READONLY, READONLY_OVERRIDE, IMPORT"


class OperationNotPermittedError(SchemaRegistryError):
    code = 42205
    fix = "the registry or subject is in a mode (READONLY, IMPORT) that refuses this call"


class ReferenceExistsError(SchemaRegistryError):
    code = 42206
    fix = "other schemas reference this one: delete those first (get_referenced_by)"


# -- Confluent's framing of a record (kafkawire.schema.framing) ------------------------------


class PayloadError(KafkaWireError, ValueError):
    """A record's key or value that could not be serialized or deserialized: not framed,
    not decodable with its writer schema, not readable into the reader schema, or a value
    the schema does not take.  ``schema_id``, ``topic``, ``partition`` and ``offset`` say
    which record, where known.  Not retriable: the bytes will not change."""

    def __init__(self, message: str, *, schema_id: int | None = None, topic: str | None = None,
                 partition: int | None = None, offset: int | None = None):
        super().__init__(message)
        self.schema_id = schema_id
        self.topic = topic
        self.partition = partition
        self.offset = offset


class FramingError(PayloadError):
    """A payload that is not in Confluent's framing (magic byte 0, schema id, Protobuf
    message indexes), or values that cannot be framed."""


class UnknownMagicByteError(FramingError):
    """The first byte is not 0: the record was not written by a Schema Registry
    serializer (plain bytes, a string), or in another framing."""


class TruncatedFrameError(FramingError):
    """The payload ends inside its header or its Protobuf message indexes."""


class InvalidMessageIndexesError(FramingError):
    """Protobuf message indexes that are negative, too large, or in an over-long varint."""


class PayloadDecodeError(PayloadError):
    """The payload does not decode with the schema its id names: it ends early (a string
    or bytes length past the end), has a union branch or enum symbol past the schema's,
    bytes left over after the record, or text that is not UTF-8.  ``path`` is where in
    the record (``"order.items[2].sku"``) and ``position`` the byte in the payload (after
    the framing), when known."""

    def __init__(self, message: str, *, path: str | None = None, position: int | None = None,
                 **where: object):
        super().__init__(message, **where)  # type: ignore[arg-type]
        self.path = path
        self.position = position


class SchemaResolutionError(PayloadError):
    """A record written with one schema cannot be read into the reader schema (a field
    without a default the writer lacks, types that do not promote, a missing enum
    symbol)."""


class SerializationError(PayloadError):
    """A value the schema does not take, or a serializer that cannot tell which subject
    (no topic) or schema to use."""


class UnknownSchemaIdError(SchemaNotFoundError):
    """A record whose schema id the registry does not know (40403): written against
    another registry or context, or its schema deleted permanently.  ``schema_id``,
    ``topic``, ``partition`` and ``offset`` name the record, where known."""

    schema_id: int | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None


def for_registry_code(code: int | None, status: int) -> type[SchemaRegistryError]:
    """The class for a registry answer's ``error_code`` (else its HTTP ``status``)."""
    if code is not None and code in _BY_CODE:
        return _BY_CODE[code]
    if status in (401, 403) or code in (40101, 40301):
        return SchemaRegistryAuthError
    if status >= 500 or (code is not None and code >= 50000):
        return SchemaRegistryServerError
    return SchemaRegistryError
