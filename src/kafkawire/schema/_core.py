"""The Schema Registry client's decisions, without I/O: which HTTP request an operation
makes, what each answer means (a value, or a typed error from
:mod:`kafkawire.schema.errors`), what is cached, and whether and when to try again.

An operation is a generator that yields steps and is sent their outcomes:

* :data:`CLOCK`: send back the monotonic clock (seconds);
* :class:`Request`: make this HTTP request with this time-out; send back an
  :class:`Answer` (status and body) or a :class:`Failure` (it got no answer), both stamped
  with the clock;
* :class:`Sleep`: wait this long; send back the clock.

Its return value is the operation's result.  A cached result returns before the first
step.  The sync and asyncio clients each drive operations with one short loop
(:mod:`kafkawire.schema._sync`, :mod:`kafkawire.schema._aio`); every public method is
written once here, in :class:`ClientBase`.
"""

from __future__ import annotations

import base64
import functools
import json
import random
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Generator, Hashable, Iterable
from urllib.parse import quote, unquote, urlencode, urlsplit, urlunsplit

from kafkawire.errors import ConfigError
from kafkawire.schema.errors import (
    SchemaRegistryConnectionError,
    SchemaRegistryError,
    SchemaRegistryTimeoutError,
    for_registry_code,
)

__all__ = [
    "CLOCK",
    "Answer",
    "ClientBase",
    "Failure",
    "RegisteredSchema",
    "RegistryCore",
    "Request",
    "Schema",
    "SchemaReference",
    "Sleep",
]

# -- what the registry stores ---------------------------------------------------------------


@dataclass(frozen=True)
class SchemaReference:
    """A schema's reference to another registered schema: ``name`` is how the referring
    schema names it (an Avro full name, a .proto import path, a JSON Schema ``$ref``),
    ``subject`` and ``version`` where it is registered."""

    name: str
    subject: str
    version: int

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True)
class Schema:
    """A schema's text, its type (``AVRO``, ``PROTOBUF`` or ``JSON``) and its references."""

    schema_str: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.schema_str, str):
            raise ConfigError(f"a schema's text must be a str, not {type(self.schema_str).__name__}")
        object.__setattr__(self, "schema_type", (self.schema_type or "AVRO").upper())
        object.__setattr__(self, "references", tuple(self.references))

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"schema": self.schema_str}
        # The API's default type is AVRO; an AVRO schema is sent without it, as clients do.
        if self.schema_type != "AVRO":
            body["schemaType"] = self.schema_type
        if self.references:
            body["references"] = [r.to_json() for r in self.references]
        return body


@dataclass(frozen=True)
class RegisteredSchema:
    """A schema as registered: its id, and the subject and version it is under."""

    schema_id: int
    schema: Schema
    subject: str | None = None
    version: int | None = None


def _schema_from(body: dict[str, Any]) -> Schema:
    refs = tuple(SchemaReference(r["name"], r["subject"], int(r["version"]))
                 for r in body.get("references") or ())
    return Schema(body["schema"], body.get("schemaType") or "AVRO", refs)


def _registered_from(body: dict[str, Any], subject: str | None = None) -> RegisteredSchema:
    return RegisteredSchema(int(body["id"]), _schema_from(body), body.get("subject", subject),
                            body.get("version"))


# -- the steps --------------------------------------------------------------------------------


class _Clock:
    def __repr__(self) -> str:
        return "CLOCK"


#: Step: send back the monotonic clock.
CLOCK = _Clock()


@dataclass(frozen=True)
class Request:
    """Step: make this request (``url`` carries no credentials; ``headers`` do)."""

    method: str
    url: str
    headers: dict[str, str]
    body: bytes | None
    timeout: float


@dataclass(frozen=True)
class Sleep:
    """Step: wait ``seconds``, then send back the clock."""

    seconds: float


@dataclass(frozen=True)
class Answer:
    """Outcome of a :class:`Request`: the registry answered."""

    status: int
    body: bytes
    now: float


#: Why a request got no answer: refused/reset/DNS, its time-out, or TLS (a certificate
#: that did not verify is not retried; another TLS failure is).
FAILURE_KINDS = ("connection", "timeout", "tls", "tls-verify")


@dataclass(frozen=True)
class Failure:
    """Outcome of a :class:`Request`: no answer (``kind`` in :data:`FAILURE_KINDS`)."""

    kind: str
    detail: str
    now: float


Step = Any
Operation = Generator[Step, Any, Any]

_CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
_ACCEPT = ("application/vnd.schemaregistry.v1+json, application/vnd.schemaregistry+json; q=0.9, "
           "application/json; q=0.5")


class _LRU:
    """A bounded mapping that forgets the least recently used entry first."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self._items: OrderedDict[Hashable, Any] = OrderedDict()

    def get(self, key: Hashable) -> Any:
        value = self._items.get(key)
        if value is not None:
            try:
                self._items.move_to_end(key)
            except KeyError:  # another thread sharing the client pushed it out meanwhile
                pass
        return value

    def put(self, key: Hashable, value: Any) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def drop(self, keep: Callable[[Hashable], bool]) -> None:
        for key in [k for k in self._items if not keep(k)]:
            del self._items[key]

    def __len__(self) -> int:
        return len(self._items)


def _context(subject: str | None) -> str:
    # A qualified subject ":.ctx:name" lives in context ".ctx"; ids are numbered per context.
    if subject and subject.startswith(":.") and ":" in subject[2:]:
        return subject[1:subject.index(":", 2)]
    return ""


def _positive_ms(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(f"{name} must be a positive number of milliseconds, got {value!r}")
    return value / 1000.0


def _check_version(version: Any) -> str:
    if version == "latest" or (isinstance(version, int) and not isinstance(version, bool)
                               and (version > 0 or version == -1)):
        return str(version)
    raise ConfigError(f"a version is a positive int, -1 or 'latest', not {version!r}")


# -- the core -------------------------------------------------------------------------------------


class RegistryCore:
    """Configuration, caches and the request/retry logic one client instance shares."""

    def __init__(
        self,
        url: str | Iterable[str],
        *,
        basic_auth_user_info: str | None = None,
        bearer_auth_token: str | None = None,
        bearer_auth_logical_cluster: str | None = None,
        bearer_auth_identity_pool_id: str | None = None,
        timeout_ms: float = 30000,
        request_timeout_ms: float = 10000,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 3000,
        cache_capacity: int = 1000,
        rng: Callable[[], float] | None = None,
    ):
        urls = [u.strip() for u in url.split(",")] if isinstance(url, str) else [str(u).strip() for u in url]
        urls = [u for u in urls if u]
        if not urls:
            raise ConfigError("url: give the registry's URL, e.g. http://127.0.0.1:8081 "
                              "(several, comma-separated, are tried in turn)")
        self.urls: list[str] = []
        from_url: str | None = None
        for u in urls:
            parts = urlsplit(u)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigError(f"url {u!r} is not an http:// or https:// URL with a host")
            if parts.username is not None:
                from_url = f"{unquote(parts.username)}:{unquote(parts.password or '')}"
                netloc = parts.netloc.rpartition("@")[2]
                parts = parts._replace(netloc=netloc)
            self.urls.append(urlunsplit(parts).rstrip("/"))
        if from_url is not None and basic_auth_user_info is not None:
            raise ConfigError("credentials are given twice: in the url's user info and in "
                              "basic_auth_user_info; give them once")
        basic = basic_auth_user_info if basic_auth_user_info is not None else from_url
        if basic is not None and bearer_auth_token is not None:
            raise ConfigError("basic_auth_user_info and bearer_auth_token both given: the registry "
                              "takes one Authorization header; choose one")
        if basic is not None and ":" not in basic:
            raise ConfigError("basic_auth_user_info is 'user:password' (a colon between them)")
        self.timeout = _positive_ms("timeout_ms", timeout_ms)
        self.request_timeout = _positive_ms("request_timeout_ms", request_timeout_ms)
        self.backoff = _positive_ms("retry_backoff_ms", retry_backoff_ms)
        self.backoff_max = max(self.backoff, _positive_ms("retry_backoff_max_ms", retry_backoff_max_ms))
        if not isinstance(cache_capacity, int) or cache_capacity < 1:
            raise ConfigError(f"cache_capacity must be a positive int, got {cache_capacity!r}")
        self.headers = {"Content-Type": _CONTENT_TYPE, "Accept": _ACCEPT}
        if basic is not None:
            self.headers["Authorization"] = "Basic " + base64.b64encode(basic.encode()).decode()
        if bearer_auth_token is not None:
            if not isinstance(bearer_auth_token, str) or not bearer_auth_token:
                raise ConfigError("bearer_auth_token must be a non-empty str (give a callable as "
                                  "bearer_auth_token_provider)")
            self.headers["Authorization"] = f"Bearer {bearer_auth_token}"
        if bearer_auth_logical_cluster:
            self.headers["target-sr-cluster"] = bearer_auth_logical_cluster
        if bearer_auth_identity_pool_id:
            self.headers["Confluent-Identity-Pool-Id"] = bearer_auth_identity_pool_id
        self._url_index = 0
        self._random = rng or random.random
        #: Requests made so far (each try counts): cached answers make none.
        self.requests_sent = 0
        # Schemas by (context, id); ids by (subject, schema, normalize); registered
        # schemas by (subject, schema, normalize, deleted) and by (subject, version).
        self.schemas = _LRU(cache_capacity)
        self.ids = _LRU(cache_capacity)
        self.lookups = _LRU(cache_capacity)
        self.versions = _LRU(cache_capacity)

    @property
    def url(self) -> str:
        """The registry URL requests go to now (the next one after a connection failure)."""
        return self.urls[self._url_index]

    # -- retry decisions ------------------------------------------------------------------

    def backoff_delay(self, attempt: int) -> float:
        """Seconds to wait before try ``attempt + 1`` (``attempt`` >= 1 failed): doubling from
        retry_backoff_ms up to retry_backoff_max_ms, each within +-20% so that many clients
        a registry restart failed together do not come back together."""
        base = min(self.backoff_max, self.backoff * (2 ** min(attempt - 1, 30)))
        return base * (0.8 + 0.4 * self._random())

    def _answer_error(self, method: str, url: str, answer: Answer) -> SchemaRegistryError:
        code: int | None = None
        message = ""
        try:
            body = json.loads(answer.body)
            if isinstance(body, dict):
                code = body.get("error_code") if isinstance(body.get("error_code"), int) else None
                message = str(body.get("message") or "")
        except ValueError:
            message = answer.body[:200].decode("utf-8", "replace").strip()
        cls = for_registry_code(code, answer.status)
        what = message or f"HTTP {answer.status}"
        tag = f"error {code}, HTTP {answer.status}" if code is not None else f"HTTP {answer.status}"
        fix = f"; {cls.fix}" if cls.fix else ""
        return cls(f"{method} {url}: {what} ({tag}){fix}", code=code, status=answer.status, url=url)

    def _failure_error(self, method: str, url: str, failure: Failure) -> SchemaRegistryError:
        if failure.kind == "tls-verify":
            return SchemaRegistryConnectionError(
                f"{method} {url}: the registry's TLS certificate did not verify ({failure.detail}); "
                f"set ssl_cafile to the CA that signed it, or ssl_check_hostname=False when it "
                f"names another host", url=url, retriable=False)
        if failure.kind == "timeout":
            return SchemaRegistryConnectionError(
                f"{method} {url}: no answer within {failure.detail}", url=url)
        return SchemaRegistryConnectionError(f"{method} {url}: {failure.detail}", url=url)

    # -- one call: a request, retried until it is answered or its deadline passes -----------

    def exchange(self, method: str, path: str, query: dict[str, Any] | None = None,
                 body: dict[str, Any] | None = None) -> Generator[Step, Any, Any]:
        """The decoded JSON answer to ``method path``; retries 5xx answers and failures to
        connect with backoff until ``timeout_ms`` has passed, raises 4xx answers at once."""
        now = yield CLOCK
        deadline = now + self.timeout
        payload = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        params = {k: ("true" if v is True else "false" if v is False else v)
                  for k, v in (query or {}).items() if v is not None}
        suffix = path + (("?" + urlencode(params)) if params else "")
        attempts: list[SchemaRegistryError] = []
        while True:
            url = self.url + suffix
            self.requests_sent += 1
            outcome = yield Request(method, url, self.headers, payload,
                                    max(0.001, min(self.request_timeout, deadline - now)))
            now = outcome.now
            if isinstance(outcome, Answer):
                if 200 <= outcome.status < 300:
                    try:
                        return json.loads(outcome.body) if outcome.body else None
                    except ValueError:
                        raise SchemaRegistryError(
                            f"{method} {url}: the answer (HTTP {outcome.status}) is not JSON: "
                            f"{outcome.body[:200]!r}; is the url the registry's API root?",
                            status=outcome.status, url=url) from None
                error = self._answer_error(method, url, outcome)
            else:
                error = self._failure_error(method, url, outcome)
                if len(self.urls) > 1:  # the next registry instance, if there are several
                    self._url_index = (self._url_index + 1) % len(self.urls)
            if not error.retriable:
                raise error
            attempts.append(error)
            delay = self.backoff_delay(len(attempts))
            if now + delay >= deadline:
                raise SchemaRegistryTimeoutError(
                    f"{method} {suffix}: the registry did not answer within timeout_ms "
                    f"({self.timeout * 1000:.0f} ms, {len(attempts)} tries); the last: {error}",
                    attempts=attempts, url=url) from error
            now = yield Sleep(delay)

    # -- caches -----------------------------------------------------------------------------

    def remember(self, registered: RegisteredSchema, normalize: bool = False) -> None:
        subject = registered.subject
        self.schemas.put((_context(subject), registered.schema_id), registered.schema)
        if subject is not None:
            self.ids.put((subject, registered.schema, normalize), registered.schema_id)
            if registered.version is not None:
                self.versions.put((subject, registered.version), registered)

    def forget_subject(self, subject: str) -> None:
        """Drop what is cached under ``subject``: it, or a version of it, was deleted.  The
        schemas by id stay: an id names the same schema for good."""
        def keep(key: Hashable) -> bool:
            return key[0] != subject  # type: ignore[index]

        for cache in (self.versions, self.ids, self.lookups):
            cache.drop(keep)


# -- the public methods, once for both shells ---------------------------------------------------

def _operation(gen: Callable[..., Operation]) -> Callable[..., Any]:
    """A public method: runs the generator ``gen`` with the shell's runner (``_call``),
    so it returns the result (sync client) or an awaitable of it (asyncio client)."""

    @functools.wraps(gen)
    def method(self: ClientBase, *args: Any, **kwargs: Any) -> Any:
        return self._call(gen(self, *args, **kwargs))

    return method


def _subject_path(subject: str) -> str:
    if not isinstance(subject, str) or not subject:
        raise ConfigError(f"a subject is a non-empty str, not {subject!r}")
    return quote(subject, safe="")


def _as_schema(schema: Schema | str) -> Schema:
    if isinstance(schema, Schema):
        return schema
    if isinstance(schema, str):
        return Schema(schema)
    raise ConfigError(f"give a kafkawire.schema.Schema (or an Avro schema's text), not {type(schema).__name__}")


class ClientBase:
    """Every Schema Registry call, written once; a shell supplies ``_call`` (how an
    operation's steps are run) and its HTTP transport.  Options: see
    :class:`~kafkawire.schema.SchemaRegistryClient`."""

    _core: RegistryCore

    def _call(self, op: Operation) -> Any:
        raise NotImplementedError

    @property
    def requests_sent(self) -> int:
        """HTTP requests made so far (each retry counts; cached answers make none)."""
        return self._core.requests_sent

    # -- schemas by id ----------------------------------------------------------------------

    @_operation
    def get_schema(self, schema_id: int, subject: str | None = None) -> Operation:
        """The schema with id ``schema_id`` (``subject``, when given, picks its context).
        Cached: asked once per id.  :class:`SchemaNotFoundError` (40403) when unknown."""
        key = (_context(subject), schema_id)
        cached = self._core.schemas.get(key)
        if cached is not None:
            return cached
        body = yield from self._core.exchange("GET", f"/schemas/ids/{int(schema_id)}", {"subject": subject})
        schema = _schema_from(body)
        self._core.schemas.put(key, schema)
        return schema

    @_operation
    def get_subjects_for_id(self, schema_id: int) -> Operation:
        """The subjects a schema id is registered under."""
        return (yield from self._core.exchange("GET", f"/schemas/ids/{int(schema_id)}/subjects"))

    @_operation
    def get_versions_for_id(self, schema_id: int) -> Operation:
        """``(subject, version)`` pairs under which the schema id is registered."""
        body = yield from self._core.exchange("GET", f"/schemas/ids/{int(schema_id)}/versions")
        return [(x["subject"], int(x["version"])) for x in body]

    @_operation
    def get_schema_types(self) -> Operation:
        """The schema types the registry accepts (``AVRO``, ``PROTOBUF``, ``JSON``)."""
        return (yield from self._core.exchange("GET", "/schemas/types"))

    # -- subjects ---------------------------------------------------------------------------

    @_operation
    def register_schema(self, subject: str, schema: Schema | str, normalize: bool = False) -> Operation:
        """Register ``schema`` under ``subject`` (a no-op returning the existing id when it
        is there already); its id.  Cached: asked once per (subject, schema).
        :class:`IncompatibleSchemaError` (409) when the subject's compatibility rule
        refuses it, :class:`InvalidSchemaError` (42201) when it does not parse."""
        schema = _as_schema(schema)
        key = (subject, schema, normalize)
        cached = self._core.ids.get(key)
        if cached is not None:
            return cached
        body = yield from self._core.exchange("POST", f"/subjects/{_subject_path(subject)}/versions",
                                              {"normalize": True if normalize else None}, schema.to_json())
        schema_id = int(body["id"])
        self._core.ids.put(key, schema_id)
        self._core.schemas.put((_context(subject), schema_id), schema)
        return schema_id

    @_operation
    def lookup_schema(self, subject: str, schema: Schema | str, normalize: bool = False,
                      deleted: bool = False) -> Operation:
        """The registered version of ``schema`` under ``subject`` (id and version), without
        registering it.  :class:`SubjectNotFoundError` / :class:`SchemaNotFoundError`
        when it is not there.  Cached."""
        schema = _as_schema(schema)
        key = (subject, schema, normalize, deleted)
        cached = self._core.lookups.get(key)
        if cached is not None:
            return cached
        body = yield from self._core.exchange(
            "POST", f"/subjects/{_subject_path(subject)}",
            {"normalize": True if normalize else None, "deleted": True if deleted else None}, schema.to_json())
        found = RegisteredSchema(int(body["id"]), schema, body.get("subject", subject), body.get("version"))
        self._core.lookups.put(key, found)
        self._core.remember(found, normalize)
        return found

    @_operation
    def get_version(self, subject: str, version: int | str = "latest", deleted: bool = False) -> Operation:
        """Version ``version`` (an int, or ``"latest"``) of ``subject``.  A numbered version
        is cached; ``"latest"`` is asked each time (it changes)."""
        v = _check_version(version)
        if v not in ("latest", "-1") and not deleted:
            cached = self._core.versions.get((subject, int(v)))
            if cached is not None:
                return cached
        body = yield from self._core.exchange("GET", f"/subjects/{_subject_path(subject)}/versions/{v}",
                                              {"deleted": True if deleted else None})
        registered = _registered_from(body, subject)
        self._core.remember(registered)
        return registered

    def get_latest_version(self, subject: str) -> Any:
        """The latest version of ``subject`` (asked each time)."""
        return self.get_version(subject, "latest")

    @_operation
    def get_versions(self, subject: str, deleted: bool = False) -> Operation:
        """The version numbers under ``subject`` (with soft-deleted ones when ``deleted``)."""
        return (yield from self._core.exchange("GET", f"/subjects/{_subject_path(subject)}/versions",
                                               {"deleted": True if deleted else None}))

    @_operation
    def get_subjects(self, prefix: str | None = None, deleted: bool = False) -> Operation:
        """Every subject (starting with ``prefix``; soft-deleted ones too when ``deleted``)."""
        return (yield from self._core.exchange("GET", "/subjects",
                                               {"subjectPrefix": prefix, "deleted": True if deleted else None}))

    @_operation
    def get_referenced_by(self, subject: str, version: int | str = "latest") -> Operation:
        """Ids of the schemas that reference ``subject``'s ``version``."""
        v = _check_version(version)
        return (yield from self._core.exchange("GET", f"/subjects/{_subject_path(subject)}/versions/{v}/referencedby"))

    @_operation
    def delete_subject(self, subject: str, permanent: bool = False) -> Operation:
        """Delete ``subject`` (soft; ``permanent=True`` after a soft delete removes it and
        its schemas for good); the versions deleted."""
        body = yield from self._core.exchange("DELETE", f"/subjects/{_subject_path(subject)}",
                                              {"permanent": True if permanent else None})
        self._core.forget_subject(subject)
        return body

    @_operation
    def delete_version(self, subject: str, version: int | str, permanent: bool = False) -> Operation:
        """Delete one version of ``subject`` (soft, or ``permanent`` after a soft delete);
        the version number deleted."""
        v = _check_version(version)
        body = yield from self._core.exchange("DELETE", f"/subjects/{_subject_path(subject)}/versions/{v}",
                                              {"permanent": True if permanent else None})
        self._core.forget_subject(subject)
        return body

    # -- compatibility, config, mode, contexts ------------------------------------------------

    @_operation
    def test_compatibility(self, subject: str, schema: Schema | str, version: int | str | None = "latest") -> Operation:
        """Whether ``schema`` may be registered under ``subject`` by its compatibility rule,
        checked against ``version`` (``None``: every version the rule looks at)."""
        schema = _as_schema(schema)
        path = f"/compatibility/subjects/{_subject_path(subject)}/versions"
        if version is not None:
            path += f"/{_check_version(version)}"
        body = yield from self._core.exchange("POST", path, None, schema.to_json())
        return bool(body["is_compatible"])

    @_operation
    def get_config(self, subject: str | None = None, default_to_global: bool = False) -> Operation:
        """The compatibility level of ``subject`` (None: the registry's global one)."""
        path = "/config" if subject is None else f"/config/{_subject_path(subject)}"
        body = yield from self._core.exchange("GET", path, {"defaultToGlobal": True if default_to_global else None})
        return body.get("compatibilityLevel") or body.get("compatibility")

    @_operation
    def set_config(self, compatibility: str, subject: str | None = None) -> Operation:
        """Set the compatibility level (``BACKWARD``, ``FULL_TRANSITIVE``, ``NONE``, ...) of
        ``subject`` (None: the global one); the level set."""
        path = "/config" if subject is None else f"/config/{_subject_path(subject)}"
        body = yield from self._core.exchange("PUT", path, None, {"compatibility": str(compatibility).upper()})
        return body.get("compatibility") or body.get("compatibilityLevel")

    @_operation
    def delete_config(self, subject: str) -> Operation:
        """Remove ``subject``'s own compatibility level (the global one applies again)."""
        body = yield from self._core.exchange("DELETE", f"/config/{_subject_path(subject)}")
        return body.get("compatibilityLevel") or body.get("compatibility")

    @_operation
    def get_mode(self, subject: str | None = None) -> Operation:
        """The mode (``READWRITE``, ``READONLY``, ``IMPORT``) of ``subject`` or the registry."""
        path = "/mode" if subject is None else f"/mode/{_subject_path(subject)}"
        return (yield from self._core.exchange("GET", path))["mode"]

    @_operation
    def set_mode(self, mode: str, subject: str | None = None, force: bool = False) -> Operation:
        """Set the mode of ``subject`` (None: the registry's); the mode set."""
        path = "/mode" if subject is None else f"/mode/{_subject_path(subject)}"
        body = yield from self._core.exchange("PUT", path, {"force": True if force else None},
                                              {"mode": str(mode).upper()})
        return body["mode"]

    @_operation
    def delete_mode(self, subject: str) -> Operation:
        """Remove ``subject``'s own mode (the registry's applies again)."""
        return (yield from self._core.exchange("DELETE", f"/mode/{_subject_path(subject)}"))["mode"]

    @_operation
    def get_contexts(self) -> Operation:
        """The registry's schema contexts (a subject ``":.ctx:name"`` lives in ``.ctx``)."""
        return (yield from self._core.exchange("GET", "/contexts"))
