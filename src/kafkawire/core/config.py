"""Client configuration: the Java client's names in snake_case, checked up front.

``Config.producer(**options)`` / ``Config.consumer(**options)`` validate every option
and fill in the Java client's defaults.  Dotted Java names are accepted too
(``"bootstrap.servers"`` is ``bootstrap_servers``).  An unknown name, a wrong type or an
out-of-range value raises :class:`~kafkawire.errors.ConfigError` saying which
option, what was given and what is allowed.
"""

from __future__ import annotations

import difflib
import os
import ssl
from typing import Any, Callable

from kafkawire.errors import ConfigError
from kafkawire.compression import CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD

__all__ = ["Config", "parse_bootstrap", "reference_markdown", "COMPRESSION_CODECS", "merge_options"]

INT32_MAX = 2**31 - 1

COMPRESSION_CODECS = {
    "none": CODEC_NONE,
    "gzip": CODEC_GZIP,
    "snappy": CODEC_SNAPPY,
    "lz4": CODEC_LZ4,
    "zstd": CODEC_ZSTD,
}


def _accepts(kind: str) -> Callable[[Callable[[str, Any], Any]], Callable[[str, Any], Any]]:
    """Tag a checker with what it accepts, in words, for the options reference."""
    def tag(check: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
        check.accepts = kind  # type: ignore[attr-defined]
        return check

    return tag


def _int(lo: int, hi: int = 2**63 - 1) -> Callable[[str, Any], int]:
    @_accepts(f"int, {lo} to {hi}")
    def check(name: str, value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, str) and value.strip().lstrip("-").isdigit():
                value = int(value)
            else:
                raise ConfigError(f"{name} must be an integer, got {value!r}")
        if not lo <= value <= hi:
            raise ConfigError(f"{name} must be between {lo} and {hi}, got {value}")
        return value

    return check


@_accepts("bool")
def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"{name} must be True or False, got {value!r}")


@_accepts("str")
def _str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string, got {value!r}")
    return value


def _choice(*choices: str) -> Callable[[str, Any], str]:
    @_accepts(" | ".join(repr(c) for c in choices))
    def check(name: str, value: Any) -> str:
        if not isinstance(value, str) or value.lower() not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
        return value.lower()

    return check


@_accepts("0 | 1 | 'all' (-1)")
def _acks(name: str, value: Any) -> int:
    if value in ("all", "-1", -1):
        return -1
    if value in (0, 1, "0", "1"):
        return int(value)
    raise ConfigError(f"acks must be 0, 1 or 'all' (-1), got {value!r}")


@_accepts(" | ".join(repr(c) for c in COMPRESSION_CODECS))
def _compression(name: str, value: Any) -> int:
    if value is None:
        return CODEC_NONE
    if isinstance(value, str) and value.lower() in COMPRESSION_CODECS:
        return COMPRESSION_CODECS[value.lower()]
    raise ConfigError(
        f"compression_type must be one of {', '.join(COMPRESSION_CODECS)}, got {value!r}"
    )


@_accepts("'host:port,...' or a list of them")
def _bootstrap(name: str, value: Any) -> list[tuple[str, int]]:
    return parse_bootstrap(value)


@_accepts("ssl.SSLContext or None")
def _ssl_context(name: str, value: Any) -> ssl.SSLContext | None:
    if value is None or isinstance(value, ssl.SSLContext):
        return value
    raise ConfigError(f"ssl_context must be an ssl.SSLContext or None, got {type(value).__name__}")


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@_accepts(" | ".join(repr(p) for p in SECURITY_PROTOCOLS))
def _security_protocol(name: str, value: Any) -> str:
    if not isinstance(value, str) or value.upper() not in SECURITY_PROTOCOLS:
        raise ConfigError(f"{name} must be one of {', '.join(SECURITY_PROTOCOLS)}; got {value!r}")
    return value.upper()


@_accepts("path or None")
def _path_or_none(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) or hasattr(value, "__fspath__"):
        path = os.fspath(value)
        return os.fsdecode(path) if isinstance(path, bytes) else path
    raise ConfigError(f"{name} must be a file path (str or os.PathLike) or None, got {value!r}")


@_accepts("str or None")
def _str_or_none(name: str, value: Any) -> str | None:
    return None if value is None else _str(name, value)


def _optional(check: Callable[[str, Any], Any]) -> Callable[[str, Any], Any]:
    @_accepts(f"{check.accepts}, or None")  # type: ignore[attr-defined]
    def optional(name: str, value: Any) -> Any:
        return None if value is None else check(name, value)

    return optional


@_accepts("str, bytes or None")
def _password(name: str, value: Any) -> str | bytes | None:
    if value is None or isinstance(value, (str, bytes)):
        return value
    raise ConfigError(f"{name} must be a string (or bytes) or None, got {type(value).__name__}")


@_accepts("'https' | ''")
def _endpoint_identification(name: str, value: Any) -> str:
    # Java's names: "https" checks the broker's host name, "" (or null) does not.
    if value is None or value == "":
        return ""
    if isinstance(value, str) and value.lower() == "https":
        return "https"
    raise ConfigError(f"{name} must be 'https' (check the broker's host name) or '' (do not), "
                      f"got {value!r}")


# Options that only mean something over TLS; with PLAINTEXT they are an error, not ignored.
_TLS_OPTIONS = ("ssl_context", "ssl_cafile", "ssl_capath", "ssl_certfile", "ssl_keyfile",
                "ssl_password", "ssl_crlfile", "ssl_ciphers", "ssl_check_hostname",
                "ssl_endpoint_identification_algorithm")


# The OAUTHBEARER token endpoint's options (KIP-768): with them, kafkawire fetches the tokens.
_OIDC_OPTIONS = ("sasl_oauthbearer_token_endpoint_url", "sasl_oauthbearer_client_id",
                 "sasl_oauthbearer_client_secret", "sasl_oauthbearer_scope",
                 "sasl_oauthbearer_assertion_file")
# Options that only mean something with SASL; without it they are an error, not ignored.
_SASL_OPTIONS = ("sasl_mechanism", "sasl_plain_username", "sasl_plain_password",
                 "sasl_oauth_token_provider", "sasl_oauthbearer_extensions", *_OIDC_OPTIONS)
#: What ``sasl_mechanism`` may be (GSSAPI, Java's default, is refused with this list).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


@_accepts(" | ".join(repr(m) for m in SASL_MECHANISMS))
def _sasl_mechanism(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name} must be one of {', '.join(SASL_MECHANISMS)}; got {value!r}")
    return value.strip().upper()


@_accepts("dict of str to str, or None")
def _extensions(name: str, value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in value.items()):
        raise ConfigError(f"{name} must be a dict of str -> str (KIP-342 extensions), got {value!r}")
    return dict(value)


@_accepts("callable or None")
def _callable_or_none(name: str, value: Any) -> Any:
    if value is None or callable(value):
        return value
    raise ConfigError(f"{name} must be callable or None, got {value!r}")


@_accepts("callable, one of librdkafka's partitioner names, or None")
def _partitioner(name: str, value: Any) -> Any:
    if isinstance(value, str):
        from kafkawire.core.partitioner import named_partitioner

        try:
            return named_partitioner(value)
        except ValueError as exc:
            raise ConfigError(f"{name}: {exc}") from None
    return _callable_or_none(name, value)


@_accepts("dict of API name or key to version, or None")
def _overrides(name: str, value: Any) -> dict[Any, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{name} must be a dict of API name or key -> version, got {value!r}")
    for k, v in value.items():
        if not isinstance(k, (str, int)) or isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ConfigError(f"{name}: {k!r}: {v!r} is not an API name/key -> version >= 0")
    return dict(value)


@_accepts("list of assignor names, or 'a,b'")
def _assignors(name: str, value: Any) -> tuple[str, ...]:
    from kafkawire.protocol.consumer import ASSIGNORS

    items: list[Any] | None = list(value) if isinstance(value, (list, tuple)) else None
    if isinstance(value, str):  # the Java form, "range,cooperative-sticky"
        items = [x.strip() for x in value.split(",") if x.strip()]
    if not items or not all(isinstance(x, str) for x in items):
        raise ConfigError(f"{name} must be assignor names (a list or 'a,b'), got {value!r}")
    for x in items:
        if x not in ASSIGNORS:
            raise ConfigError(f"{name}: unknown assignor {x!r}; kafkawire has {', '.join(ASSIGNORS)}")
    return tuple(items)


@_accepts("str or None")
def _remote_assignor(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name} must be the name of an assignor the broker offers ('uniform' "
                          f"or 'range' on Kafka) or None for the broker's default, got {value!r}")
    return value.strip()


def parse_bootstrap(value: Any) -> list[tuple[str, int]]:
    """``"host:port,host:port"`` (or a list of such strings) -> [(host, port), ...]."""
    if isinstance(value, str):
        entries = [e.strip() for e in value.split(",")]
    elif isinstance(value, (list, tuple)):
        entries = []
        for e in value:
            if not isinstance(e, str):
                raise ConfigError(f"bootstrap_servers entries must be 'host:port' strings, got {e!r}")
            entries.extend(x.strip() for x in e.split(","))
    else:
        raise ConfigError(
            f"bootstrap_servers must be 'host:port[,host:port...]' or a list of them, got {value!r}"
        )
    out = []
    for entry in entries:
        if not entry:
            continue
        host, sep, port = entry.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(
                f"bootstrap_servers entry {entry!r} is not 'host:port' with a port 1-65535"
            )
        if host.startswith("[") and host.endswith("]"):  # [::1]:9092
            host = host[1:-1]
        out.append((host, int(port)))
    if not out:
        raise ConfigError("bootstrap_servers is empty: give at least one 'host:port'")
    return out


# name -> (default, checker).  Defaults are the Java client's.
_COMMON: dict[str, tuple[Any, Callable[[str, Any], Any]]] = {
    "bootstrap_servers": (None, _bootstrap),
    "client_id": ("kafkawire", _str),
    "request_timeout_ms": (30000, _int(1, INT32_MAX)),
    "retry_backoff_ms": (100, _int(0, INT32_MAX)),
    "retry_backoff_max_ms": (1000, _int(0, INT32_MAX)),
    "reconnect_backoff_ms": (50, _int(0, INT32_MAX)),
    "reconnect_backoff_max_ms": (1000, _int(0, INT32_MAX)),
    "socket_connection_setup_timeout_ms": (10000, _int(1, INT32_MAX)),
    "metadata_max_age_ms": (300000, _int(0, INT32_MAX)),
    "metadata_recovery_strategy": ("rebootstrap", _choice("rebootstrap", "none")),
    "metadata_recovery_rebootstrap_trigger_ms": (300000, _int(0, INT32_MAX)),
    "connections_max_idle_ms": (540000, _int(-1, 2**62)),
    "max_in_flight_requests_per_connection": (5, _int(1, 1000)),
    # TLS (kafkawire.core.tls builds the context): ssl_context, when given, wins over the
    # other ssl_* options; SSL and SASL_SSL use it.
    "security_protocol": ("PLAINTEXT", _security_protocol),
    "ssl_context": (None, _ssl_context),
    "ssl_cafile": (None, _path_or_none),
    "ssl_capath": (None, _path_or_none),
    "ssl_certfile": (None, _path_or_none),
    "ssl_keyfile": (None, _path_or_none),
    "ssl_password": (None, _password),
    "ssl_crlfile": (None, _path_or_none),
    "ssl_ciphers": (None, _str_or_none),
    "ssl_check_hostname": (True, _bool),
    "ssl_endpoint_identification_algorithm": ("https", _endpoint_identification),
    # SASL (SASL_PLAINTEXT, SASL_SSL).  GSSAPI is Java's default, refused with the list of
    # what kafkawire speaks.  Java carries the user and password in sasl.jaas.config;
    # kafka-python's names are used here, for SCRAM as well as PLAIN.
    "sasl_mechanism": ("GSSAPI", _sasl_mechanism),
    "sasl_plain_username": (None, _str_or_none),
    "sasl_plain_password": (None, _str_or_none),
    # A callable returning an OAuthBearerToken or (token, expiry_ms), called for each login.
    "sasl_oauth_token_provider": (None, _callable_or_none),
    "sasl_oauthbearer_extensions": (None, _extensions),
    # Or tokens from an OAuth 2 / OIDC token endpoint (KIP-768), fetched by kafkawire.
    "sasl_oauthbearer_token_endpoint_url": (None, _str_or_none),
    "sasl_oauthbearer_client_id": (None, _str_or_none),
    "sasl_oauthbearer_client_secret": (None, _str_or_none),
    "sasl_oauthbearer_scope": (None, _str_or_none),
    "sasl_oauthbearer_assertion_file": (None, _path_or_none),
    "sasl_login_retry_backoff_ms": (100, _int(1, INT32_MAX)),
    "sasl_login_retry_backoff_max_ms": (10000, _int(1, INT32_MAX)),
    # -1: the OS default. A fixed size turns off Linux's buffer autotuning, which costs
    # about a third of poll_batch's throughput on loopback (bench/compare_e2e.py).
    "send_buffer_bytes": (-1, _int(-1, INT32_MAX)),
    "receive_buffer_bytes": (-1, _int(-1, INT32_MAX)),
    # kafkawire's own: pin API versions, e.g. {"Produce": 2} (tests use this for magic 0/1).
    "api_version_overrides": (None, _overrides),
}

_PRODUCER = {
    "acks": ("all", _acks),
    "linger_ms": (5, _int(0, INT32_MAX)),
    "batch_size": (16384, _int(0, INT32_MAX)),
    "max_request_size": (1048576, _int(1, INT32_MAX)),
    "compression_type": ("none", _compression),
    "compression_level": (None, _optional(_int(-131072, 22))),
    "retries": (INT32_MAX, _int(0, INT32_MAX)),
    "buffer_memory": (33554432, _int(0, 2**62)),
    "max_block_ms": (60000, _int(0, 2**62)),
    "delivery_timeout_ms": (120000, _int(1, INT32_MAX)),
    # On by default, as in the Java client since 3.0; turned off (not refused) when it was
    # not asked for and acks, retries or max_in_flight_requests_per_connection rule it out.
    "enable_idempotence": (True, _bool),
    "key_serializer": (None, _callable_or_none),
    "value_serializer": (None, _callable_or_none),
    "partitioner": (None, _partitioner),
    "transactional_id": (None, _str_or_none),
    "transaction_timeout_ms": (60000, _int(1, INT32_MAX)),
}

_CONSUMER = {
    "fetch_max_wait_ms": (500, _int(0, INT32_MAX)),
    "fetch_min_bytes": (1, _int(0, INT32_MAX)),
    "fetch_max_bytes": (52428800, _int(0, INT32_MAX)),
    "max_partition_fetch_bytes": (1048576, _int(0, INT32_MAX)),
    "auto_offset_reset": ("latest", _choice("earliest", "latest", "none")),
    "max_poll_records": (500, _int(1, INT32_MAX)),
    "check_crcs": (True, _bool),
    "isolation_level": ("read_uncommitted", _choice("read_uncommitted", "read_committed")),
    "key_deserializer": (None, _callable_or_none),
    "value_deserializer": (None, _callable_or_none),
    "group_id": (None, _str_or_none),
    "group_instance_id": (None, _str_or_none),  # KIP-345
    "session_timeout_ms": (45000, _int(1, INT32_MAX)),
    "heartbeat_interval_ms": (3000, _int(1, INT32_MAX)),
    "max_poll_interval_ms": (300000, _int(1, INT32_MAX)),
    "partition_assignment_strategy": (("range", "cooperative-sticky"), _assignors),
    "enable_auto_commit": (True, _bool),
    "auto_commit_interval_ms": (5000, _int(0, INT32_MAX)),
    # "consumer": KIP-848's protocol (ConsumerGroupHeartbeat; the coordinator assigns);
    # "classic" (JoinGroup/SyncGroup) stays the default, as in the Java client.
    "group_protocol": ("classic", _choice("classic", "consumer")),
    # KIP-848's server-side assignor (Kafka's "uniform" or "range"); None: the broker's default.
    "group_remote_assignor": (None, _remote_assignor),
    # KIP-392: the consumer's rack, sent with each Fetch; "" (Java's default) names none.
    "client_rack": ("", _str),
}

# What each option does, for the reference (docs/options.md, generated by reference_markdown()).
# Every declared option needs a line here: the generator refuses to leave one out.
_DESCRIPTIONS = {
    "bootstrap_servers": "Brokers to ask for the cluster's metadata first; the rest are found from them. Required.",
    "client_id": "Name sent with every request, for the brokers' logs and quotas (Java's default is empty).",
    "request_timeout_ms": "How long to wait for a broker's answer to one request before retrying or failing it.",
    "retry_backoff_ms": "Pause before the first retry of a failed request (it grows up to retry_backoff_max_ms).",
    "retry_backoff_max_ms": "Longest pause between retries (raised to retry_backoff_ms if below it).",
    "reconnect_backoff_ms": "Pause before reconnecting to a broker that could not be reached (it grows up to reconnect_backoff_max_ms).",
    "reconnect_backoff_max_ms": "Longest pause between reconnection attempts to one broker.",
    "socket_connection_setup_timeout_ms": "Time allowed to open a connection: TCP, TLS handshake, version negotiation and SASL login.",
    "metadata_max_age_ms": "Cluster metadata is refreshed at least this often, even without errors.",
    "metadata_recovery_strategy": "What the client does when every broker its metadata names is gone (KIP-1102): \"rebootstrap\" forgets them and asks bootstrap_servers again, after metadata_recovery_rebootstrap_trigger_ms or at once when a broker answers REBOOTSTRAP_REQUIRED; \"none\" keeps trying the known brokers only.",
    "metadata_recovery_rebootstrap_trigger_ms": "How long every broker of the metadata may stay unreachable before the client goes back to bootstrap_servers (with metadata_recovery_strategy=\"rebootstrap\").",
    "connections_max_idle_ms": "A connection with nothing in flight and no bytes sent or received for longer than this is closed when a call next picks it, and a new one is opened in its place; keep it below the brokers' connections.max.idle.ms (600000 by default), since a broker closes idle connections without notice and a request sent on one would fail. -1: never.",
    "max_in_flight_requests_per_connection": "Requests sent to one broker before waiting for answers; at most 5 with idempotence.",
    "security_protocol": "PLAINTEXT, SSL (TLS), SASL_PLAINTEXT or SASL_SSL (SASL inside TLS).",
    "ssl_context": "A ready ssl.SSLContext; when given, the other ssl_* options are not used.",
    "ssl_cafile": "PEM file of the CA(s) that signed the brokers' certificates (default: the system's trust store).",
    "ssl_capath": "Directory of CA certificates, as ssl.SSLContext.load_verify_locations takes it.",
    "ssl_certfile": "PEM file of the client's certificate, for brokers that require one (mutual TLS).",
    "ssl_keyfile": "PEM file of the client certificate's private key.",
    "ssl_password": "Password of an encrypted ssl_keyfile.",
    "ssl_crlfile": "PEM file of certificate revocation lists to check the brokers' certificates against.",
    "ssl_ciphers": "OpenSSL cipher string limiting the TLS ciphers offered.",
    "ssl_check_hostname": "Check that the broker's certificate names the host connected to.",
    "ssl_endpoint_identification_algorithm": "Java's switch for the host-name check: 'https' checks it, '' does not.",
    "sasl_mechanism": "SASL mechanism (GSSAPI, Java's default, is not supported: set one of the others).",
    "sasl_plain_username": "User name for PLAIN and SCRAM.",
    "sasl_plain_password": "Password for PLAIN and SCRAM.",
    "sasl_oauth_token_provider": "For OAUTHBEARER: a callable returning the token, (token, expiry_ms) or an OAuthBearerToken; called at every login.",
    "sasl_oauthbearer_extensions": "For OAUTHBEARER: SASL extensions sent with the token (KIP-342).",
    "sasl_oauthbearer_token_endpoint_url": "For OAUTHBEARER: the OAuth 2 / OIDC token endpoint kafkawire fetches tokens from (KIP-768), instead of sasl_oauth_token_provider.",
    "sasl_oauthbearer_client_id": "Client id for the token endpoint's client_credentials grant (Java: sasl.oauthbearer.client.credentials.client.id; librdkafka: sasl.oauthbearer.client.id).",
    "sasl_oauthbearer_client_secret": "Client secret for the token endpoint (Java: sasl.oauthbearer.client.credentials.client.secret).",
    "sasl_oauthbearer_scope": "Scope asked of the token endpoint (None: the endpoint's default).",
    "sasl_oauthbearer_assertion_file": "For the JWT bearer grant (KIP-1139): a file holding a ready-made JWT assertion, read at each token fetch.",
    "sasl_login_retry_backoff_ms": "First wait after a token endpoint attempt that failed retriably; doubles per attempt.",
    "sasl_login_retry_backoff_max_ms": "Longest wait between token endpoint attempts (they stop at three quarters of socket_connection_setup_timeout_ms).",
    "send_buffer_bytes": "Socket send buffer size; -1 (kafkawire's default; Java's is 128 KiB) keeps the OS default and Linux's autotuning.",
    "receive_buffer_bytes": "Socket receive buffer size; -1 (kafkawire's default; Java's is 64 KiB) keeps the OS default and Linux's autotuning.",
    "api_version_overrides": "Pin API versions, e.g. {'Produce': 2}, instead of the newest both sides support.",
    "acks": "Acknowledgements a write waits for: 0 none, 1 the leader, 'all' every in-sync replica.",
    "linger_ms": "How long a batch may wait for more records before it is sent.",
    "batch_size": "Target size of one partition's batch, in bytes.",
    "max_request_size": "Largest Produce request, in bytes; a larger record is refused.",
    "compression_type": "Compression of produced batches.",
    "compression_level": "Level for the chosen compression (None: the codec's default).",
    "retries": "How often a failed batch is retried, within delivery_timeout_ms.",
    "buffer_memory": "Bytes of records queued but not yet acknowledged before send() blocks (up to max_block_ms).",
    "max_block_ms": "Longest time send() blocks for metadata or buffer space before raising.",
    "delivery_timeout_ms": "Longest time from send() to the record's outcome, retries included.",
    "enable_idempotence": "Producer ids and sequence numbers, so a retried batch is never written twice; turned off when acks, retries or in-flight requests rule it out and it was not asked for.",
    "key_serializer": "Callable turning send()'s key into bytes (send_batch takes bytes as they are).",
    "value_serializer": "Callable turning send()'s value into bytes (send_batch takes bytes as they are).",
    "partitioner": "Callable partitioner(key, num_partitions) -> partition, or a librdkafka partitioner's name (consistent_random, murmur2_random, fnv1a, ...: confluent-kafka's choices) (default: murmur2 of the key as the Java client, sticky without a key).",
    "transactional_id": "Id of a transactional producer; a new producer with the same id fences the old one.",
    "transaction_timeout_ms": "The coordinator aborts a transaction left open longer than this.",
    "fetch_max_wait_ms": "Longest time a broker holds a Fetch waiting for fetch_min_bytes.",
    "fetch_min_bytes": "Bytes a broker waits for before answering a Fetch.",
    "fetch_max_bytes": "Most bytes one Fetch answer may carry (a first batch larger than this still comes).",
    "max_partition_fetch_bytes": "Most bytes per partition in one Fetch answer.",
    "auto_offset_reset": "Where to start without a committed offset (or outside the log): 'earliest', 'latest', or 'none' to raise.",
    "max_poll_records": "Most records one poll() returns when max_records is not given.",
    "check_crcs": "Verify every batch's CRC (a damaged batch raises CorruptRecordError).",
    "isolation_level": "'read_committed' skips records of aborted transactions and stops at open ones.",
    "key_deserializer": "Callable turning a record's key bytes into what poll() returns.",
    "value_deserializer": "Callable turning a record's value bytes into what poll() returns.",
    "group_id": "Consumer group to join with subscribe() and to commit offsets for.",
    "group_instance_id": "Static membership (KIP-345): a restarted member with the same id takes its partitions back without a rebalance.",
    "session_timeout_ms": "A member silent for this long is expelled (classic protocol). Tansu holds each JoinGroup for half of it.",
    "heartbeat_interval_ms": "How often a member heartbeats (classic protocol); below session_timeout_ms, a third of it is usual.",
    "max_poll_interval_ms": "A member that does not call poll() for this long leaves the group.",
    "partition_assignment_strategy": "Client-side assignors, in order of preference: range, roundrobin, sticky, cooperative-sticky.",
    "enable_auto_commit": "Commit the offsets of records poll() returned, every auto_commit_interval_ms and on close().",
    "auto_commit_interval_ms": "Interval of the automatic commits.",
    "group_protocol": "'classic' (JoinGroup/SyncGroup) or 'consumer' (KIP-848: the broker assigns).",
    "group_remote_assignor": "With group_protocol='consumer': the broker's assignor ('uniform', 'range'; None: the broker's default).",
    "client_rack": "The rack (availability zone) the consumer runs in (KIP-392): brokers with a rack-aware replica.selector.class then name a replica in it to fetch from, instead of the leader; read from it until metadata_max_age_ms passes or it fails, then from the leader again.",
}

# Options with no Java client counterpart of that name (kafka-python's names, or kafkawire's own).
_NOT_JAVA = {"ssl_context", "ssl_cafile", "ssl_capath", "ssl_certfile", "ssl_keyfile", "ssl_password",
             "ssl_crlfile", "ssl_ciphers", "ssl_check_hostname", "sasl_plain_username",
             "sasl_plain_password", "sasl_oauth_token_provider", "sasl_oauthbearer_extensions",
             "sasl_oauthbearer_client_id", "sasl_oauthbearer_client_secret",
             "api_version_overrides", "compression_level", "partitioner"}


# Options the KIP-848 coordinator owns (its group.consumer.* settings and assignors): set
# with group_protocol="consumer" they would be ignored, so they are refused (as the Java
# client refuses them).
_CLASSIC_ONLY = {
    "partition_assignment_strategy": "the coordinator assigns the partitions: choose its "
                                     "assignor with group_remote_assignor",
    "session_timeout_ms": "the broker's group.consumer.session.timeout.ms (or the group's "
                          "consumer.session.timeout.ms) applies",
    "heartbeat_interval_ms": "the broker's group.consumer.heartbeat.interval.ms (or the "
                             "group's consumer.heartbeat.interval.ms) applies",
}


def merge_options(client: str, config: Any, options: dict[str, Any]) -> dict[str, Any]:
    """A client's options given as one dict (``Producer({"bootstrap.servers": ...})``, as
    confluent-kafka takes them), as keyword arguments, or both: merged, with a name given
    both ways (``bootstrap.servers`` and ``bootstrap_servers`` alike) refused.  ``client``
    names the class for the messages."""
    if config is None:
        return options
    if not hasattr(config, "keys") or not hasattr(config, "__getitem__"):
        raise TypeError(f"{client}() takes its options as one dict or as keyword arguments "
                        f"({client}(bootstrap_servers='host:9092', ...)), not a {type(config).__name__} "
                        f"({config!r:.60})")
    merged: dict[str, Any] = {}
    seen: dict[str, str] = {}
    for source in (config, options):
        for key in source.keys():
            if not isinstance(key, str):
                raise TypeError(f"{client}() option names are strings, got {key!r}")
            norm = key.replace(".", "_").replace("-", "_")
            if norm in seen:
                raise ConfigError(f"{client}() option {key!r} is given twice (as {seen[norm]!r} too); "
                                  f"give it once")
            seen[norm] = key
            merged[key] = source[key]
    return merged


class Config:
    """Validated options; read them as attributes (``config.linger_ms``)."""

    def __init__(self, kind: str, options: dict[str, Any]):
        table = dict(_COMMON)
        table.update(_PRODUCER if kind == "producer" else _CONSUMER if kind == "consumer" else {})
        self._kind = kind
        values: dict[str, Any] = {}
        for raw_name, value in options.items():
            name = raw_name.replace(".", "_").replace("-", "_")
            if name not in table:
                close = difflib.get_close_matches(name, table, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(f"unknown {kind} option {raw_name!r}{hint}")
            values[name] = table[name][1](name, value)
        given = set(values)
        for name, (default, check) in table.items():
            if name not in values:
                values[name] = check(name, default) if default is not None else None
        self.__dict__.update(values)
        self._given = given
        self._check_consistency()

    def _check_idempotence(self) -> None:
        conflicts = []
        if self.acks != -1:
            conflicts.append(f"acks={self.acks} (it needs acks='all')")
        if self.retries == 0:
            conflicts.append("retries=0 (it needs retries)")
        if self.max_in_flight_requests_per_connection > 5:
            conflicts.append(f"max_in_flight_requests_per_connection="
                             f"{self.max_in_flight_requests_per_connection} (at most 5)")
        if self.transactional_id is not None:
            if "enable_idempotence" in self._given and not self.enable_idempotence:
                raise ConfigError("transactional_id needs enable_idempotence; leave it unset or True")
            if conflicts:
                raise ConfigError(f"transactional_id needs the idempotent producer, ruled out by "
                                  f"{'; '.join(conflicts)}")
            self.enable_idempotence = True
        elif conflicts and self.enable_idempotence:
            if "enable_idempotence" in self._given:
                raise ConfigError(f"enable_idempotence=True is ruled out by {'; '.join(conflicts)}; "
                                  f"change those or set enable_idempotence=False")
            self.enable_idempotence = False

    def _check_consistency(self) -> None:
        if self.bootstrap_servers is None:
            raise ConfigError(
                f"{self._kind} needs bootstrap_servers, e.g. bootstrap_servers='127.0.0.1:9092'"
            )
        if self.retry_backoff_max_ms < self.retry_backoff_ms:
            self.retry_backoff_max_ms = self.retry_backoff_ms
        if self.reconnect_backoff_max_ms < self.reconnect_backoff_ms:
            self.reconnect_backoff_max_ms = self.reconnect_backoff_ms
        self._check_tls()
        self._check_sasl()
        if self._kind == "producer":
            if self.delivery_timeout_ms < self.linger_ms + self.request_timeout_ms:
                raise ConfigError(
                    f"delivery_timeout_ms ({self.delivery_timeout_ms}) must be at least "
                    f"linger_ms + request_timeout_ms ({self.linger_ms + self.request_timeout_ms})"
                )
            self._check_idempotence()
        if self._kind == "consumer":
            self._check_group_protocol()
            if self.heartbeat_interval_ms >= self.session_timeout_ms:
                raise ConfigError(
                    f"heartbeat_interval_ms ({self.heartbeat_interval_ms}) must be below "
                    f"session_timeout_ms ({self.session_timeout_ms}); a third of it is usual"
                )
            if self.group_instance_id is not None and self.group_id is None:
                raise ConfigError("group_instance_id needs a group_id (static membership is a group's)")

    def _check_group_protocol(self) -> None:
        if self.group_protocol == "classic":
            if self.group_remote_assignor is not None:
                raise ConfigError(
                    f"group_remote_assignor={self.group_remote_assignor!r} is for the consumer group "
                    f"protocol (KIP-848), where the broker assigns; set group_protocol='consumer', or "
                    f"choose a client-side assignor with partition_assignment_strategy")
            return
        stray = [n for n in _CLASSIC_ONLY if n in self._given]
        if stray:
            raise ConfigError(
                f"{', '.join(stray)} {'is' if len(stray) == 1 else 'are'} not used with "
                f"group_protocol='consumer' (KIP-848): "
                + "; ".join(f"{n}: {_CLASSIC_ONLY[n]}" for n in stray)
                + f". Remove {'it' if len(stray) == 1 else 'them'}, or use group_protocol='classic'")
        from kafkawire.protocol import apis

        commit_key = apis.get("OffsetCommit").key
        pinned = set()
        for ref, version in (self.api_version_overrides or {}).items():
            try:
                if apis.get(ref).key == commit_key:
                    pinned.add(version)
            except Exception:  # noqa: BLE001 - an unknown API is reported when a connection opens
                pass
        if pinned and min(pinned) < 9:
            # KIP-848: a member's commit carries its member epoch, which OffsetCommit has from v9.
            raise ConfigError(
                f"api_version_overrides pins OffsetCommit v{min(pinned)}, but with "
                f"group_protocol='consumer' commits need OffsetCommit v9 or later (the member "
                f"epoch, KIP-848): remove the override or raise it to 9")

    def _stray(self, names: tuple[str, ...]) -> list[str]:
        return [n for n in names if n in self._given and getattr(self, n) not in (None, _COMMON[n][0])]

    def _check_tls(self) -> None:
        protocol = self.security_protocol
        if protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
            stray = self._stray(_TLS_OPTIONS)
            if stray:
                with_tls = "SSL" if protocol == "PLAINTEXT" else "SASL_SSL"
                raise ConfigError(
                    f"{', '.join(stray)} {'is' if len(stray) == 1 else 'are'} set but "
                    f"security_protocol is {protocol!r}, so the connection would not use TLS: set "
                    f"security_protocol={with_tls!r}"
                )
            return
        if self.ssl_context is None:  # a user's ssl_context wins over the ssl_* options
            from kafkawire.core.tls import build_ssl_context

            self.ssl_context = build_ssl_context(
                cafile=self.ssl_cafile, capath=self.ssl_capath, certfile=self.ssl_certfile,
                keyfile=self.ssl_keyfile, password=self.ssl_password, crlfile=self.ssl_crlfile,
                ciphers=self.ssl_ciphers,
                check_hostname=(self.ssl_check_hostname
                                and self.ssl_endpoint_identification_algorithm == "https"),
            )

    def _check_sasl(self) -> None:
        self._sasl: Any = None
        protocol = self.security_protocol
        if not protocol.startswith("SASL_"):
            stray = self._stray(_SASL_OPTIONS)
            if stray:
                with_sasl = "SASL_PLAINTEXT" if protocol == "PLAINTEXT" else "SASL_SSL"
                raise ConfigError(
                    f"{', '.join(stray)} {'is' if len(stray) == 1 else 'are'} set but "
                    f"security_protocol is {protocol!r}, so the connection would not use SASL: set "
                    f"security_protocol={with_sasl!r}"
                )
            return
        mechanism = self.sasl_mechanism
        if mechanism not in SASL_MECHANISMS:
            what = ("GSSAPI (Kerberos, Java's default) is" if mechanism == "GSSAPI"
                    else f"{mechanism!r} is")
            raise ConfigError(
                f"sasl_mechanism: {what} not supported by kafkawire; set sasl_mechanism to one of "
                f"{', '.join(SASL_MECHANISMS)}"
            )
        user, password = self.sasl_plain_username, self.sasl_plain_password
        provider = self.sasl_oauth_token_provider
        if mechanism == "OAUTHBEARER":
            oidc = self._stray(_OIDC_OPTIONS)
            if provider is not None and oidc:
                raise ConfigError(
                    f"{', '.join(oidc)} and sasl_oauth_token_provider are both set: kafkawire "
                    f"fetches the tokens from the token endpoint, or calls the provider, not both"
                )
            if oidc:
                provider = self._oidc_provider()
            if provider is None:
                raise ConfigError(
                    "sasl_mechanism 'OAUTHBEARER' needs sasl_oauth_token_provider: a callable "
                    "returning the token, or (token, expiry_ms); or sasl_oauthbearer_token_endpoint_url "
                    "with sasl_oauthbearer_client_id and sasl_oauthbearer_client_secret"
                )
            stray = self._stray(("sasl_plain_username", "sasl_plain_password"))
            if stray:
                raise ConfigError(
                    f"{' and '.join(stray)} {'is' if len(stray) == 1 else 'are'} for PLAIN and "
                    f"SCRAM; OAUTHBEARER logs in with the token from sasl_oauth_token_provider"
                )
        else:
            missing = [n for n, v in (("sasl_plain_username", user), ("sasl_plain_password", password))
                       if not v]
            if missing:
                raise ConfigError(
                    f"sasl_mechanism {mechanism!r} needs {' and '.join(missing)} (Java's "
                    f"sasl.jaas.config username and password; they serve SCRAM too)"
                )
            stray = self._stray(("sasl_oauth_token_provider", "sasl_oauthbearer_extensions", *_OIDC_OPTIONS))
            if stray:
                raise ConfigError(
                    f"{' and '.join(stray)} {'is' if len(stray) == 1 else 'are'} for "
                    f"OAUTHBEARER, but sasl_mechanism is {mechanism!r}"
                )
        from kafkawire.protocol.sasl import SaslError, create_mechanism

        options: dict[str, Any] = {}
        if mechanism == "OAUTHBEARER" and self.sasl_oauthbearer_extensions:
            options["extensions"] = self.sasl_oauthbearer_extensions
        try:
            self._sasl = create_mechanism(mechanism, username=user, password=password,
                                          token=provider, **options)
        except (SaslError, ValueError, TypeError) as exc:
            option = ("sasl_oauthbearer_extensions" if mechanism == "OAUTHBEARER"
                      else "sasl_plain_username / sasl_plain_password")
            raise ConfigError(f"{option}: {exc}") from None

    def _oidc_provider(self) -> Any:
        """The token provider that fetches from sasl_oauthbearer_token_endpoint_url."""
        from kafkawire.core.oidc import OidcTokenProvider
        from kafkawire.protocol.sasl import OidcLogin

        if not self.sasl_oauthbearer_token_endpoint_url:
            raise ConfigError("sasl_oauthbearer_client_id / _client_secret / _scope / _assertion_file "
                              "need sasl_oauthbearer_token_endpoint_url, the token endpoint to ask")
        try:
            login = OidcLogin(self.sasl_oauthbearer_token_endpoint_url,
                              client_id=self.sasl_oauthbearer_client_id,
                              client_secret=self.sasl_oauthbearer_client_secret,
                              scope=self.sasl_oauthbearer_scope,
                              assertion=self.sasl_oauthbearer_assertion_file is not None,
                              retry_backoff_ms=self.sasl_login_retry_backoff_ms,
                              retry_backoff_max_ms=self.sasl_login_retry_backoff_max_ms)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        # Three quarters of the setup's time: the rest is for TCP, TLS, ApiVersions and the
        # SASL exchange around the fetch, so the fetch's own error ends the setup, not its timer.
        return OidcTokenProvider(login, timeout_ms=self.socket_connection_setup_timeout_ms * 3 // 4,
                                 assertion_file=self.sasl_oauthbearer_assertion_file)

    @property
    def sasl(self) -> Any:
        """The SASL mechanism the connections log in with (each login uses a ``fresh()``
        copy of it), or None without SASL."""
        return self._sasl

    @classmethod
    def producer(cls, **options: Any) -> Config:
        return cls("producer", options)

    @classmethod
    def consumer(cls, **options: Any) -> Config:
        return cls("consumer", options)

    @classmethod
    def client(cls, **options: Any) -> Config:
        return cls("client", options)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def __repr__(self) -> str:
        shown = self.as_dict()
        for secret in ("sasl_plain_password", "ssl_password", "sasl_oauthbearer_client_secret"):
            if shown.get(secret) is not None:
                shown[secret] = "***"
        return f"Config({self._kind}, {shown!r})"


# -- the options reference (docs/options.md) ---------------------------------------------

_REFERENCE_HEAD = """\
# kafkawire options

Generated from the declarations in `src/kafkawire/core/config.py` by
`python -m kafkawire.core.config --markdown > docs/options.md`; a test fails when this
page and the code differ.

Options are keyword arguments: `Producer(bootstrap_servers="localhost:9092", linger_ms=5)`.
Names are the Java client's in snake_case; the Java dotted name works too
(`Producer(**{"bootstrap.servers": "localhost:9092", "linger.ms": "5"})`), and strings
convert as in a properties file: `"5"` to 5, `"true"`/`"false"` to booleans. An unknown
name, a wrong type or a value out of range raises `kafkawire.errors.ConfigError`
when the client is made, naming the option (and the closest real one for a misspelt name).
Defaults are the Java client's unless the description says otherwise. The asyncio clients
take the same options.
"""


def _default_text(default: Any) -> str:
    if default is None:
        return "None"
    if default == INT32_MAX and not isinstance(default, bool):
        return "2147483647 (max int32)"
    return repr(default).replace("|", "\\|")


def _reference_table(table: dict[str, tuple[Any, Callable[[str, Any], Any]]]) -> list[str]:
    rows = ["| option | Java name | accepts | default | what it does |", "|---|---|---|---|---|"]
    for name, (default, check) in table.items():
        if name not in _DESCRIPTIONS:
            raise ValueError(f"option {name!r} has no line in kafkawire.core.config._DESCRIPTIONS")
        java = "-" if name in _NOT_JAVA else f"`{name.replace('_', '.')}`"
        accepts = getattr(check, "accepts", "see the description").replace("|", "\\|")
        rows.append(f"| `{name}` | {java} | {accepts} | `{_default_text(default)}` | {_DESCRIPTIONS[name]} |")
    return rows


def reference_markdown() -> str:
    """Every option of the producer, the consumer and the admin client as a Markdown page."""
    parts = [_REFERENCE_HEAD,
             "## Every client (producer, consumer, admin)\n",
             *_reference_table(_COMMON),
             "\n## Producer (`Producer`, `AsyncProducer`)\n",
             *_reference_table(_PRODUCER),
             "\n## Consumer (`Consumer`, `AsyncConsumer`)\n",
             *_reference_table(_CONSUMER),
             "\n## Admin (`Admin`)\n",
             "The admin client takes the options of every client above, and no others."]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    import sys

    if sys.argv[1:] != ["--markdown"]:
        sys.exit("usage: python -m kafkawire.core.config --markdown > docs/options.md")
    sys.stdout.write(reference_markdown())
