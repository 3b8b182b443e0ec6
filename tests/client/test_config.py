import ssl

import pytest

from kafkawire.client.config import Config, parse_bootstrap
from kafkawire.client.errors import ConfigError


def test_defaults_are_the_java_clients():
    c = Config.producer(bootstrap_servers="h:1")
    assert (c.acks, c.batch_size, c.max_request_size, c.retries) == (-1, 16384, 1048576, 2**31 - 1)
    assert c.compression_type == 0 and c.delivery_timeout_ms == 120000
    k = Config.consumer(bootstrap_servers="h:1")
    assert (k.fetch_max_wait_ms, k.fetch_min_bytes, k.auto_offset_reset) == (500, 1, "latest")


def test_dotted_java_names_and_string_values():
    c = Config.producer(**{"bootstrap.servers": "a:1,b:2", "acks": "1", "compression.type": "ZSTD"})
    assert c.bootstrap_servers == [("a", 1), ("b", 2)]
    assert c.acks == 1 and c.compression_type == 4


@pytest.mark.parametrize(
    "options,message",
    [
        ({"lingr_ms": 1}, "did you mean 'linger_ms'"),
        ({"acks": 2}, "acks must be 0, 1 or 'all'"),
        ({"batch_size": -1}, "batch_size must be between 0"),
        ({"linger_ms": "soon"}, "linger_ms must be an integer"),
        ({"compression_type": "brotli"}, "compression_type must be one of none, gzip"),
        ({"delivery_timeout_ms": 1000}, "delivery_timeout_ms .* must be at least"),
        ({"enable_idempotence": True}, "not supported yet"),
    ],
)
def test_bad_producer_options_say_what_is_wrong(options, message):
    with pytest.raises(ConfigError, match=message):
        Config.producer(bootstrap_servers="h:1", **options)


def test_consumer_checks():
    with pytest.raises(ConfigError, match="auto_offset_reset must be one of earliest, latest, none"):
        Config.consumer(bootstrap_servers="h:1", auto_offset_reset="smallest")
    with pytest.raises(ConfigError, match="needs bootstrap_servers"):
        Config.consumer()


@pytest.mark.parametrize("bad", ["", "host", "host:0", "host:x", ":9092", 9092])
def test_bad_bootstrap(bad):
    with pytest.raises(ConfigError, match="bootstrap_servers"):
        parse_bootstrap(bad)


def test_bootstrap_forms():
    assert parse_bootstrap(["a:1", "b:2,c:3"]) == [("a", 1), ("b", 2), ("c", 3)]
    assert parse_bootstrap("[::1]:9092") == [("::1", 9092)]


def test_ssl_protocol_makes_a_default_context():
    c = Config.client(bootstrap_servers="h:1", security_protocol="ssl")
    assert isinstance(c.ssl_context, ssl.SSLContext)
