"""librdkafka's mock Kafka cluster, driven through ctypes.

The confluent-kafka wheel bundles librdkafka, and librdkafka contains a mock cluster: N
in-process Kafka brokers listening on 127.0.0.1, with hooks to take brokers down, move
partition leaders, narrow the ApiVersions ranges and inject error codes.  This module
binds those hooks (declared in librdkafka's ``rdkafka_mock.h``) with explicit ctypes
signatures and wraps them in :class:`MockCluster`.

librdkafka marks the mock API experimental and outside its ABI guarantees; the bindings
are checked against the bundled library when it is loaded, and a missing symbol raises
:class:`MockClusterError` naming it.

Quirks of the mock broker (worth knowing when a test fails against it): about 5 MB kept
per partition, one stored message set per Fetch response, no CreateTopics /
DescribeGroups / ListGroups (create topics with :meth:`MockCluster.create_topic`), and
ApiVersions v3+ answered with UNSUPPORTED_VERSION (35) in the short v0-shaped fallback.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
import threading
from typing import Iterable, Sequence

__all__ = ["MockCluster", "MockClusterError", "librdkafka_path"]

#: Set this to the path of a librdkafka shared library to use it instead of the one in
#: the confluent-kafka wheel (it must export the mock API, librdkafka >= 2.3).
LIBRDKAFKA_ENV = "KAFKAWIRE_LIBRDKAFKA"

_RD_KAFKA_PRODUCER = 0
_ERRSTR_SIZE = 512

_c_void_p = ctypes.c_void_p
_c_char_p = ctypes.c_char_p
_c_int = ctypes.c_int
_c_int16 = ctypes.c_int16
_c_int32 = ctypes.c_int32
_c_size_t = ctypes.c_size_t
_resp_err = ctypes.c_int  # rd_kafka_resp_err_t is a C enum

# name -> (restype, argtypes), as declared in rdkafka.h / rdkafka_mock.h.
_SIGNATURES: dict[str, tuple[object, list[object]]] = {
    "rd_kafka_version_str": (_c_char_p, []),
    "rd_kafka_err2str": (_c_char_p, [_resp_err]),
    "rd_kafka_err2name": (_c_char_p, [_resp_err]),
    "rd_kafka_conf_new": (_c_void_p, []),
    "rd_kafka_conf_destroy": (None, [_c_void_p]),
    "rd_kafka_conf_set": (_c_int, [_c_void_p, _c_char_p, _c_char_p, _c_char_p, _c_size_t]),
    "rd_kafka_new": (_c_void_p, [_c_int, _c_void_p, _c_char_p, _c_size_t]),
    "rd_kafka_destroy": (None, [_c_void_p]),
    "rd_kafka_mock_cluster_new": (_c_void_p, [_c_void_p, _c_int]),
    "rd_kafka_mock_cluster_destroy": (None, [_c_void_p]),
    "rd_kafka_handle_mock_cluster": (_c_void_p, [_c_void_p]),
    "rd_kafka_mock_cluster_bootstraps": (_c_char_p, [_c_void_p]),
    "rd_kafka_mock_topic_create": (_resp_err, [_c_void_p, _c_char_p, _c_int, _c_int]),
    "rd_kafka_mock_topic_set_error": (None, [_c_void_p, _c_char_p, _resp_err]),
    "rd_kafka_mock_broker_set_down": (_resp_err, [_c_void_p, _c_int32]),
    "rd_kafka_mock_broker_set_up": (_resp_err, [_c_void_p, _c_int32]),
    "rd_kafka_mock_broker_set_rtt": (_resp_err, [_c_void_p, _c_int32, _c_int]),
    "rd_kafka_mock_partition_set_leader": (
        _resp_err,
        [_c_void_p, _c_char_p, _c_int32, _c_int32],
    ),
    "rd_kafka_mock_coordinator_set": (_resp_err, [_c_void_p, _c_char_p, _c_char_p, _c_int32]),
    "rd_kafka_mock_set_apiversion": (_resp_err, [_c_void_p, _c_int16, _c_int16, _c_int16]),
    "rd_kafka_mock_push_request_errors_array": (
        None,
        [_c_void_p, _c_int16, _c_size_t, ctypes.POINTER(_resp_err)],
    ),
    "rd_kafka_mock_clear_request_errors": (None, [_c_void_p, _c_int16]),
}

_lib: ctypes.CDLL | None = None
_lib_lock = threading.Lock()


class MockClusterError(RuntimeError):
    """The mock cluster could not be started, or one of its hooks refused a request."""


def librdkafka_path() -> str:
    """Path of the librdkafka shared library the mock cluster is loaded from.

    ``$KAFKAWIRE_LIBRDKAFKA`` if set, else the copy bundled in the confluent-kafka wheel
    (``site-packages/confluent_kafka.libs/librdkafka-<hash>.so.1``).
    """
    override = os.environ.get(LIBRDKAFKA_ENV)
    if override:
        if not os.path.isfile(override):
            raise MockClusterError(
                f"${LIBRDKAFKA_ENV}={override!r} is not a file; point it at a librdkafka "
                f"shared library or unset it to use the one in the confluent-kafka wheel"
            )
        return override
    spec = importlib.util.find_spec("confluent_kafka")
    if spec is None or not spec.submodule_search_locations:
        raise MockClusterError(
            "the mock cluster needs librdkafka from the confluent-kafka wheel, which is not "
            "installed; install it with: pip install confluent-kafka"
        )
    package_dir = list(spec.submodule_search_locations)[0]
    site = os.path.dirname(package_dir)
    patterns = [
        os.path.join(site, "confluent_kafka.libs", "librdkafka*.so*"),  # manylinux (auditwheel)
        os.path.join(site, "confluent_kafka", ".dylibs", "librdkafka*.dylib"),  # macOS (delocate)
        os.path.join(site, "confluent_kafka.libs", "librdkafka*.dll"),  # Windows (delvewheel)
    ]
    for pattern in patterns:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    raise MockClusterError(
        f"no librdkafka shared library found next to confluent_kafka in {site} (looked for "
        f"{', '.join(os.path.relpath(p, site) for p in patterns)}); this confluent-kafka "
        f"was not installed from a wheel: set ${LIBRDKAFKA_ENV} to a librdkafka >= 2.3"
    )


def _library() -> ctypes.CDLL:
    global _lib
    with _lib_lock:
        if _lib is None:
            path = librdkafka_path()
            try:
                lib = ctypes.CDLL(path)
            except OSError as exc:
                raise MockClusterError(f"cannot load librdkafka from {path}: {exc}") from exc
            for name, (restype, argtypes) in _SIGNATURES.items():
                try:
                    fn = getattr(lib, name)
                except AttributeError:
                    raise MockClusterError(
                        f"{path} does not export {name}; the mock cluster needs librdkafka "
                        f">= 2.3 with the mock API (a newer confluent-kafka wheel has it)"
                    ) from None
                fn.restype = restype
                fn.argtypes = argtypes
            _lib = lib
        return _lib


def librdkafka_version() -> str:
    """Version string of the librdkafka that hosts the mock cluster."""
    return _library().rd_kafka_version_str().decode()


class MockCluster:
    """N mock Kafka brokers on 127.0.0.1, with ids 1..N, and their fault-injection hooks.

    ::

        with MockCluster(3) as cluster:
            cluster.create_topic("events", partitions=2, replication_factor=3)
            cluster.broker_set_down(1)
            ... connect to cluster.bootstrap ...

    The brokers run on librdkafka threads inside this process and stop on :meth:`close`.
    Every hook raises :class:`MockClusterError` when librdkafka refuses it.
    """

    def __init__(self, num_brokers: int = 3):
        if not isinstance(num_brokers, int) or not 1 <= num_brokers <= 64:
            raise ValueError(f"num_brokers must be an int from 1 to 64, got {num_brokers!r}")
        self.num_brokers = num_brokers
        self._lib = _library()
        self._rk: int | None = None
        self._mcluster: int | None = None
        errstr = ctypes.create_string_buffer(_ERRSTR_SIZE)
        conf = self._lib.rd_kafka_conf_new()
        # The cluster is created with rd_kafka_mock_cluster_new() on a client handle that
        # has no bootstrap servers, so that handle never connects anywhere: no metadata
        # traffic of its own reaches the mock brokers and nothing is logged when a test
        # takes a broker down (test.mock.num.brokers would point the handle at them).
        for key, value in (("client.id", "kafkawire-mock-cluster"), ("log_level", "3")):
            res = self._lib.rd_kafka_conf_set(conf, key.encode(), value.encode(), errstr, _ERRSTR_SIZE)
            if res != 0:
                self._lib.rd_kafka_conf_destroy(conf)
                raise MockClusterError(f"rd_kafka_conf_set({key}={value}): {errstr.value.decode()}")
        rk = self._lib.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_SIZE)
        if not rk:  # on failure the conf is still ours to free
            self._lib.rd_kafka_conf_destroy(conf)
            raise MockClusterError(f"rd_kafka_new failed: {errstr.value.decode()}")
        self._rk = rk
        mcluster = self._lib.rd_kafka_mock_cluster_new(rk, num_brokers)
        if not mcluster:
            self._lib.rd_kafka_destroy(rk)
            self._rk = None
            raise MockClusterError(
                f"rd_kafka_mock_cluster_new({num_brokers}) failed (could not bind loopback "
                f"listeners?)"
            )
        self._mcluster = mcluster

    # -- lifecycle ------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._mcluster is None

    def close(self) -> None:
        """Stop the brokers and free the client handle (idempotent)."""
        if self._mcluster is not None:
            self._lib.rd_kafka_mock_cluster_destroy(self._mcluster)
            self._mcluster = None
        if self._rk is not None:
            self._lib.rd_kafka_destroy(self._rk)
            self._rk = None

    def __enter__(self) -> MockCluster:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown may have unloaded ctypes
            pass

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.bootstrap
        return f"<MockCluster {self.num_brokers} brokers {state}>"

    def _handle(self) -> int:
        if self._mcluster is None:
            raise MockClusterError("the mock cluster is closed")
        return self._mcluster

    def _check(self, err: int, what: str) -> None:
        if err != 0:
            name = self._lib.rd_kafka_err2name(err).decode()
            text = self._lib.rd_kafka_err2str(err).decode()
            raise MockClusterError(f"{what} failed: {name} ({err}): {text}")

    # -- addresses ------------------------------------------------------------------

    @property
    def bootstrap(self) -> str:
        """``"127.0.0.1:P1,127.0.0.1:P2,..."``, one entry per broker, in broker id order."""
        return self._lib.rd_kafka_mock_cluster_bootstraps(self._handle()).decode()

    @property
    def brokers(self) -> dict[int, tuple[str, int]]:
        """Broker id -> (host, port)."""
        out: dict[int, tuple[str, int]] = {}
        for broker_id, entry in enumerate(self.bootstrap.split(","), start=1):
            host, _, port = entry.rpartition(":")
            out[broker_id] = (host, int(port))
        return out

    # -- hooks ----------------------------------------------------------------------

    def create_topic(self, topic: str, partitions: int = 1, replication_factor: int = 1) -> None:
        """Create ``topic`` (the mock broker does not implement CreateTopics)."""
        err = self._lib.rd_kafka_mock_topic_create(
            self._handle(), topic.encode(), partitions, replication_factor
        )
        self._check(err, f"create_topic({topic!r}, {partitions}, {replication_factor})")

    def _set_int(self, name: str, value: int) -> None:
        fn = getattr(self._lib, name, None)
        if fn is None:
            raise MockClusterError(f"this librdkafka does not export {name}; upgrade confluent-kafka")
        fn.argtypes = [ctypes.c_void_p, ctypes.c_int32]
        fn.restype = None
        fn(self._handle(), value)

    def set_group_initial_rebalance_delay(self, delay_ms: int) -> None:
        """How long a classic JoinGroup into an empty group waits for more members
        (3000 ms by default; a member whose session timeout is that short or shorter is
        then never assigned)."""
        self._set_int("rd_kafka_mock_group_initial_rebalance_delay_ms", delay_ms)

    def set_consumer_group_timeouts(self, session_timeout_ms: int, heartbeat_interval_ms: int) -> None:
        """The broker-side session timeout and heartbeat interval of KIP-848 groups."""
        self._set_int("rd_kafka_mock_set_group_consumer_session_timeout_ms", session_timeout_ms)
        self._set_int("rd_kafka_mock_set_group_consumer_heartbeat_interval_ms", heartbeat_interval_ms)

    def topic_set_error(self, topic: str, error_code: int) -> None:
        """Return ``error_code`` for ``topic`` in Metadata responses (0 clears it)."""
        self._lib.rd_kafka_mock_topic_set_error(self._handle(), topic.encode(), error_code)

    def broker_set_down(self, broker_id: int) -> None:
        """Disconnect broker ``broker_id`` (-1: all) and refuse new connections.

        Partition leadership does not move: use :meth:`partition_set_leader` for that.
        """
        self._check(
            self._lib.rd_kafka_mock_broker_set_down(self._handle(), broker_id),
            f"broker_set_down({broker_id})",
        )

    def broker_set_up(self, broker_id: int) -> None:
        """Let broker ``broker_id`` (-1: all) accept connections again."""
        self._check(
            self._lib.rd_kafka_mock_broker_set_up(self._handle(), broker_id),
            f"broker_set_up({broker_id})",
        )

    def broker_set_rtt(self, broker_id: int, rtt_ms: int) -> None:
        """Delay every response of broker ``broker_id`` (-1: all) by ``rtt_ms``."""
        self._check(
            self._lib.rd_kafka_mock_broker_set_rtt(self._handle(), broker_id, rtt_ms),
            f"broker_set_rtt({broker_id}, {rtt_ms})",
        )

    def partition_set_leader(self, topic: str, partition: int, broker_id: int) -> None:
        """Make ``broker_id`` the leader (-1: leaderless); creates the topic if needed."""
        self._check(
            self._lib.rd_kafka_mock_partition_set_leader(
                self._handle(), topic.encode(), partition, broker_id
            ),
            f"partition_set_leader({topic!r}, {partition}, {broker_id})",
        )

    def coordinator_set(self, key_type: str, key: str, broker_id: int) -> None:
        """Pin the coordinator for a group (``key_type="group"``) or transactional id
        (``"transaction"``) to ``broker_id``."""
        if key_type not in ("group", "transaction"):
            raise ValueError(f"key_type must be 'group' or 'transaction', got {key_type!r}")
        self._check(
            self._lib.rd_kafka_mock_coordinator_set(
                self._handle(), key_type.encode(), key.encode(), broker_id
            ),
            f"coordinator_set({key_type!r}, {key!r}, {broker_id})",
        )

    def set_apiversion(self, api_key: int, min_version: int, max_version: int) -> None:
        """Narrow the range ApiVersions advertises for ``api_key``; (-1, -1) removes it.

        ``max_version`` may not exceed what the mock broker implements.
        """
        self._check(
            self._lib.rd_kafka_mock_set_apiversion(
                self._handle(), api_key, min_version, max_version
            ),
            f"set_apiversion({api_key}, {min_version}, {max_version})",
        )

    def push_request_errors(self, api_key: int, errors: Sequence[int] | Iterable[int]) -> None:
        """Answer the next ``len(errors)`` requests with ``api_key``, on any broker, with
        these error codes in order (librdkafka's -195, ``_TRANSPORT``, disconnects)."""
        codes = list(errors)
        array = (_resp_err * max(len(codes), 1))(*codes)
        self._lib.rd_kafka_mock_push_request_errors_array(
            self._handle(), api_key, len(codes), array
        )

    def clear_request_errors(self, api_key: int) -> None:
        """Drop the errors still queued for ``api_key``."""
        self._lib.rd_kafka_mock_clear_request_errors(self._handle(), api_key)
