"""Client configuration: the Java client's names in snake_case, checked up front.

``Config.producer(**options)`` / ``Config.consumer(**options)`` validate every option
and fill in the Java client's defaults.  Dotted Java names are accepted too
(``"bootstrap.servers"`` is ``bootstrap_servers``).  An unknown name, a wrong type or an
out-of-range value raises :class:`~kafkawire.client.errors.ConfigError` saying which
option, what was given and what is allowed.
"""

from __future__ import annotations

import difflib
import os
import ssl
from typing import Any, Callable

from kafkawire.client.errors import ConfigError
from kafkawire.compression import CODEC_GZIP, CODEC_LZ4, CODEC_NONE, CODEC_SNAPPY, CODEC_ZSTD

__all__ = ["Config", "parse_bootstrap", "COMPRESSION_CODECS"]

INT32_MAX = 2**31 - 1

COMPRESSION_CODECS = {
    "none": CODEC_NONE,
    "gzip": CODEC_GZIP,
    "snappy": CODEC_SNAPPY,
    "lz4": CODEC_LZ4,
    "zstd": CODEC_ZSTD,
}


def _int(lo: int, hi: int = 2**63 - 1) -> Callable[[str, Any], int]:
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


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise ConfigError(f"{name} must be True or False, got {value!r}")


def _str(name: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string, got {value!r}")
    return value


def _choice(*choices: str) -> Callable[[str, Any], str]:
    def check(name: str, value: Any) -> str:
        if not isinstance(value, str) or value.lower() not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
        return value.lower()

    return check


def _acks(name: str, value: Any) -> int:
    if value in ("all", "-1", -1):
        return -1
    if value in (0, 1, "0", "1"):
        return int(value)
    raise ConfigError(f"acks must be 0, 1 or 'all' (-1), got {value!r}")


def _compression(name: str, value: Any) -> int:
    if value is None:
        return CODEC_NONE
    if isinstance(value, str) and value.lower() in COMPRESSION_CODECS:
        return COMPRESSION_CODECS[value.lower()]
    raise ConfigError(
        f"compression_type must be one of {', '.join(COMPRESSION_CODECS)}, got {value!r}"
    )


def _bootstrap(name: str, value: Any) -> list[tuple[str, int]]:
    return parse_bootstrap(value)


def _ssl_context(name: str, value: Any) -> ssl.SSLContext | None:
    if value is None or isinstance(value, ssl.SSLContext):
        return value
    raise ConfigError(f"ssl_context must be an ssl.SSLContext or None, got {type(value).__name__}")


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _security_protocol(name: str, value: Any) -> str:
    if not isinstance(value, str) or value.upper() not in SECURITY_PROTOCOLS:
        raise ConfigError(f"{name} must be one of {', '.join(SECURITY_PROTOCOLS)}; got {value!r}")
    return value.upper()


def _path_or_none(name: str, value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str) or hasattr(value, "__fspath__"):
        path = os.fspath(value)
        return os.fsdecode(path) if isinstance(path, bytes) else path
    raise ConfigError(f"{name} must be a file path (str or os.PathLike) or None, got {value!r}")


def _str_or_none(name: str, value: Any) -> str | None:
    return None if value is None else _str(name, value)


def _password(name: str, value: Any) -> str | bytes | None:
    if value is None or isinstance(value, (str, bytes)):
        return value
    raise ConfigError(f"{name} must be a string (or bytes) or None, got {type(value).__name__}")


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


# Options that only mean something with SASL; without it they are an error, not ignored.
_SASL_OPTIONS = ("sasl_mechanism", "sasl_plain_username", "sasl_plain_password",
                 "sasl_oauth_token_provider", "sasl_oauthbearer_extensions")
#: What ``sasl_mechanism`` may be (GSSAPI, Java's default, is refused with this list).
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def _sasl_mechanism(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name} must be one of {', '.join(SASL_MECHANISMS)}; got {value!r}")
    return value.strip().upper()


def _extensions(name: str, value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                              for k, v in value.items()):
        raise ConfigError(f"{name} must be a dict of str -> str (KIP-342 extensions), got {value!r}")
    return dict(value)


def _callable_or_none(name: str, value: Any) -> Any:
    if value is None or callable(value):
        return value
    raise ConfigError(f"{name} must be callable or None, got {value!r}")


def _overrides(name: str, value: Any) -> dict[Any, int]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{name} must be a dict of API name or key -> version, got {value!r}")
    for k, v in value.items():
        if not isinstance(k, (str, int)) or isinstance(v, bool) or not isinstance(v, int) or v < 0:
            raise ConfigError(f"{name}: {k!r}: {v!r} is not an API name/key -> version >= 0")
    return dict(value)


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
    "connections_max_idle_ms": (540000, _int(-1, 2**62)),
    "max_in_flight_requests_per_connection": (5, _int(1, 1000)),
    # TLS (kafkawire.client.tls builds the context): ssl_context, when given, wins over the
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
    "compression_level": (None, lambda n, v: None if v is None else _int(-131072, 22)(n, v)),
    "retries": (INT32_MAX, _int(0, INT32_MAX)),
    "buffer_memory": (33554432, _int(0, 2**62)),
    "max_block_ms": (60000, _int(0, 2**62)),
    "delivery_timeout_ms": (120000, _int(1, INT32_MAX)),
    # On by default, as in the Java client since 3.0; turned off (not refused) when it was
    # not asked for and acks, retries or max_in_flight_requests_per_connection rule it out.
    "enable_idempotence": (True, _bool),
    "key_serializer": (None, _callable_or_none),
    "value_serializer": (None, _callable_or_none),
    "partitioner": (None, _callable_or_none),
    "transactional_id": (None, lambda n, v: v if v is None else _str(n, v)),
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
    "group_id": (None, lambda n, v: v if v is None else _str(n, v)),
    "group_instance_id": (None, lambda n, v: v if v is None else _str(n, v)),  # KIP-345
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
}

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
            from kafkawire.client.tls import build_ssl_context

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
            if provider is None:
                raise ConfigError(
                    "sasl_mechanism 'OAUTHBEARER' needs sasl_oauth_token_provider: a callable "
                    "returning the token, or (token, expiry_ms)"
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
            stray = self._stray(("sasl_oauth_token_provider", "sasl_oauthbearer_extensions"))
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
        for secret in ("sasl_plain_password", "ssl_password"):
            if shown.get(secret) is not None:
                shown[secret] = "***"
        return f"Config({self._kind}, {shown!r})"
