import ssl

import pytest

from kafkawire.client.config import Config, parse_bootstrap
from kafkawire.errors import ConfigError


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
        ({"enable_idempotence": True, "acks": 1}, "enable_idempotence=True is ruled out by acks=1"),
        ({"transactional_id": "t", "enable_idempotence": False}, "transactional_id needs enable_idempotence"),
        ({"transactional_id": "t", "retries": 0}, "ruled out by retries=0"),
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
    assert c.ssl_context.verify_mode == ssl.CERT_REQUIRED and c.ssl_context.check_hostname


# -- TLS options (kafkawire.client.tls builds the context) ------------------------------


@pytest.fixture(scope="module")
def certs():
    from kafkawire.testing.tls import TestCertificates

    made = TestCertificates()
    yield made
    made.cleanup()


def _ssl(**options):
    return Config.client(bootstrap_servers="h:1", security_protocol="SSL", **options)


def test_security_protocol_names():
    assert Config.client(bootstrap_servers="h:1").security_protocol == "PLAINTEXT"
    assert _ssl().security_protocol == "SSL"
    with pytest.raises(ConfigError, match="must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"):
        Config.client(bootstrap_servers="h:1", security_protocol="TLS")


@pytest.mark.parametrize("protocol", ["SASL_SSL", "sasl_plaintext"])
def test_sasl_protocols_fail_clearly_at_construction(protocol):
    # Java's default mechanism, GSSAPI, is refused with the list of supported ones.
    with pytest.raises(ConfigError, match="GSSAPI .* not supported by kafkawire; set sasl_mechanism "
                                          "to one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"):
        Config.producer(bootstrap_servers="h:1", security_protocol=protocol)


def test_ssl_options_with_plaintext_are_an_error_not_ignored(certs):
    with pytest.raises(ConfigError, match=r"ssl_cafile is set but security_protocol is 'PLAINTEXT'.*"
                                          r"security_protocol='SSL'"):
        Config.client(bootstrap_servers="h:1", ssl_cafile=certs.cafile)
    with pytest.raises(ConfigError, match="ssl_context, ssl_check_hostname are set"):
        Config.client(bootstrap_servers="h:1", ssl_context=ssl.create_default_context(),
                      ssl_check_hostname=False)
    # Defaults spelled out are not a mistake.
    Config.client(bootstrap_servers="h:1", ssl_check_hostname=True, ssl_cafile=None)


def test_cafile_context_verifies_certificate_and_host(certs):
    ctx = _ssl(ssl_cafile=certs.cafile).ssl_context
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.minimum_version >= ssl.TLSVersion.TLSv1_2
    assert [c["subject"] for c in ctx.get_ca_certs()] == [((("commonName", "kafkawire test CA"),),)]


@pytest.mark.parametrize("options", [
    {"ssl_check_hostname": False},
    {"ssl_check_hostname": "false"},
    {"ssl_endpoint_identification_algorithm": ""},
    {"ssl.endpoint.identification.algorithm": None},
])
def test_hostname_check_off_keeps_chain_verification(certs, options):
    ctx = _ssl(ssl_cafile=certs.cafile, **options).ssl_context
    assert not ctx.check_hostname and ctx.verify_mode == ssl.CERT_REQUIRED


def test_endpoint_identification_algorithm_values():
    assert _ssl().ssl_endpoint_identification_algorithm == "https"
    assert _ssl(ssl_endpoint_identification_algorithm="HTTPS").ssl_context.check_hostname
    with pytest.raises(ConfigError, match="must be 'https'.* or ''"):
        _ssl(ssl_endpoint_identification_algorithm="ldaps")


def test_given_ssl_context_wins_over_the_rest(certs):
    mine = ssl.create_default_context()
    mine.check_hostname = False
    c = _ssl(ssl_context=mine, ssl_cafile=certs.other_cafile, ssl_check_hostname=True)
    assert c.ssl_context is mine and not mine.check_hostname


def test_client_certificate_with_encrypted_key(certs, tmp_path):
    _ssl(ssl_cafile=certs.cafile, ssl_certfile=certs.client.certfile,
         ssl_keyfile=certs.client.keyfile, ssl_password=certs.client_password)
    # The key and the certificate in one file (Java's PEM keystore shape).
    both = tmp_path / "both.pem"
    both.write_bytes(open(certs.server.certfile, "rb").read() + open(certs.server.keyfile, "rb").read())
    _ssl(ssl_certfile=both)


@pytest.mark.parametrize("options, message", [
    ({"ssl_cafile": "/nonexistent/ca.pem"}, r"ssl_cafile '/nonexistent/ca.pem': no such file"),
    ({"ssl_capath": "/nonexistent"}, r"ssl_capath '/nonexistent': no such directory"),
    ({"ssl_keyfile": "KEY"}, r"ssl_keyfile is set but ssl_certfile is not"),
    ({"ssl_certfile": "CLIENT", "ssl_keyfile": "KEY"},
     r"private key in ssl_keyfile '.*client.key' is encrypted: give its password as ssl_password"),
    ({"ssl_certfile": "CLIENT", "ssl_keyfile": "KEY", "ssl_password": "wrong"},
     r"cannot decrypt the private key in ssl_keyfile .*ssl_password"),
    ({"ssl_certfile": "SERVER", "ssl_keyfile": "KEY", "ssl_password": "kafkawire-test"},
     r"does not belong to the certificate in ssl_certfile"),
    ({"ssl_ciphers": "NO-SUCH-CIPHER"}, r"ssl_ciphers 'NO-SUCH-CIPHER' selects no cipher"),
    ({"ssl_cafile": "KEY"}, r"ssl_cafile '.*' holds no usable PEM certificate"),
    ({"ssl_password": 5}, r"ssl_password must be a string"),
    ({"ssl_cafile": 5}, r"ssl_cafile must be a file path"),
])
def test_bad_tls_options_name_the_option(certs, options, message):
    files = {"CLIENT": certs.client.certfile, "KEY": certs.client.keyfile, "SERVER": certs.server.certfile}
    options = {k: files.get(v, v) if isinstance(v, str) else v for k, v in options.items()}
    with pytest.raises(ConfigError, match=message):
        _ssl(**options)


def test_crlfile_turns_on_revocation_checks(certs, tmp_path):
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization

    # An empty CRL signed by a throwaway key is enough to load; checking is the flag.
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    crl = (x509.CertificateRevocationListBuilder()
           .issuer_name(x509.Name([]))
           .last_update(now).next_update(now + datetime.timedelta(days=1))
           .sign(key, hashes.SHA256()))
    path = tmp_path / "crl.pem"
    path.write_bytes(crl.public_bytes(serialization.Encoding.PEM))
    ctx = _ssl(ssl_cafile=certs.cafile, ssl_crlfile=str(path)).ssl_context
    assert ctx.verify_flags & ssl.VERIFY_CRL_CHECK_LEAF


# -- SASL ------------------------------------------------------------------------------------

from kafkawire.protocol.sasl import (  # noqa: E402
    OAuthBearerMechanism,
    PlainMechanism,
    ScramMechanism,
)

_SCRAM = {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
          "sasl_plain_username": "alice", "sasl_plain_password": "alice-secret"}


@pytest.mark.parametrize("mechanism,cls", [("PLAIN", PlainMechanism), ("scram-sha-256", ScramMechanism),
                                           ("SCRAM-SHA-512", ScramMechanism)])
def test_sasl_user_and_password_build_the_mechanism(mechanism, cls):
    c = Config.producer(**{"bootstrap.servers": "h:1", "security.protocol": "sasl_plaintext",
                           "sasl.mechanism": mechanism, "sasl.plain.username": "alice",
                           "sasl.plain.password": "alice-secret"})
    assert c.security_protocol == "SASL_PLAINTEXT" and c.sasl_mechanism == mechanism.upper()
    assert isinstance(c.sasl, cls) and c.sasl.name == mechanism.upper()
    assert c.sasl.username == "alice" and c.ssl_context is None
    # The password never shows in the config's repr.
    assert "alice-secret" not in repr(c) and "'sasl_plain_password': '***'" in repr(c)


def test_sasl_ssl_builds_the_tls_context_too(certs):
    c = Config.consumer(bootstrap_servers="h:1", **{**_SCRAM, "security_protocol": "SASL_SSL"},
                        ssl_cafile=certs.cafile)
    assert isinstance(c.ssl_context, ssl.SSLContext) and isinstance(c.sasl, ScramMechanism)


def test_oauthbearer_takes_a_token_provider_and_extensions():
    def provider():
        return ("eyJ.token", 2_000_000_000_000)

    c = Config.client(bootstrap_servers="h:1", security_protocol="SASL_SSL",
                      sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=provider,
                      sasl_oauthbearer_extensions={"traceId": "123"})
    assert isinstance(c.sasl, OAuthBearerMechanism) and c.sasl.extensions == {"traceId": "123"}
    # The provider is called at login (and at each re-login), not by the config.
    first = c.sasl.fresh().initial_response()
    assert first == b"n,,\x01auth=Bearer eyJ.token\x01traceId=123\x01\x01"


def test_without_sasl_there_is_no_mechanism():
    assert Config.client(bootstrap_servers="h:1").sasl is None
    assert Config.client(bootstrap_servers="h:1", sasl_mechanism="GSSAPI").sasl is None  # the default


@pytest.mark.parametrize("options,message", [
    # GSSAPI is Java's default: refused, with the list of what kafkawire speaks.
    ({"security_protocol": "SASL_PLAINTEXT"},
     r"sasl_mechanism: GSSAPI \(Kerberos, Java's default\) is not supported by kafkawire; set "
     r"sasl_mechanism to one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER"),
    ({**_SCRAM, "sasl_mechanism": "SCRAM-SHA-1"},
     r"'SCRAM-SHA-1' is not supported by kafkawire; set sasl_mechanism to one of PLAIN"),
    ({**_SCRAM, "sasl_mechanism": 256}, r"sasl_mechanism must be one of PLAIN, SCRAM-SHA-256"),
    ({**_SCRAM, "sasl_plain_password": None},
     r"sasl_mechanism 'SCRAM-SHA-256' needs sasl_plain_password \(Java's sasl.jaas.config"),
    ({"security_protocol": "SASL_SSL", "sasl_mechanism": "PLAIN"},
     r"'PLAIN' needs sasl_plain_username and sasl_plain_password"),
    ({**_SCRAM, "sasl_plain_username": ""}, r"needs sasl_plain_username \("),
    ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER"},
     r"'OAUTHBEARER' needs sasl_oauth_token_provider: a callable returning the token, or "
     r"\(token, expiry_ms\)"),
    ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
      "sasl_oauth_token_provider": "a-token"}, r"sasl_oauth_token_provider must be callable"),
    ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
      "sasl_oauth_token_provider": lambda: ("t", 1), "sasl_plain_username": "alice"},
     r"sasl_plain_username is for PLAIN and SCRAM; OAUTHBEARER logs in with the token"),
    ({**_SCRAM, "sasl_oauth_token_provider": lambda: ("t", 1)},
     r"sasl_oauth_token_provider is for OAUTHBEARER, but sasl_mechanism is 'SCRAM-SHA-256'"),
    ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
      "sasl_oauth_token_provider": lambda: ("t", 1), "sasl_oauthbearer_extensions": {"auth": "x"}},
     r"sasl_oauthbearer_extensions: 'auth' is reserved"),
    ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "OAUTHBEARER",
      "sasl_oauth_token_provider": lambda: ("t", 1), "sasl_oauthbearer_extensions": ["x"]},
     r"sasl_oauthbearer_extensions must be a dict of str -> str"),
    # SASLprep (RFC 4013) refuses the name before anything is sent.
    ({**_SCRAM, "sasl_plain_username": "al\u0007ice"},
     r"sasl_plain_username / sasl_plain_password: SCRAM username contains an ASCII control character"),
])
def test_bad_sasl_options_say_what_is_wrong(options, message):
    with pytest.raises(ConfigError, match=message):
        Config.producer(bootstrap_servers="h:1", **options)


@pytest.mark.parametrize("protocol,fix", [("PLAINTEXT", "SASL_PLAINTEXT"), ("SSL", "SASL_SSL")])
def test_sasl_options_without_sasl_are_an_error_not_ignored(protocol, fix):
    with pytest.raises(ConfigError, match=rf"sasl_mechanism, sasl_plain_username, sasl_plain_password are "
                                          rf"set but security_protocol is '{protocol}', so the connection "
                                          rf"would not use SASL: set security_protocol='{fix}'"):
        Config.client(bootstrap_servers="h:1", security_protocol=protocol, ssl_check_hostname=True,
                      **{k: v for k, v in _SCRAM.items() if k != "security_protocol"})
    with pytest.raises(ConfigError, match="sasl_oauth_token_provider is set but"):
        Config.client(bootstrap_servers="h:1", sasl_oauth_token_provider=lambda: ("t", 1))


def test_tls_options_with_sasl_plaintext_are_an_error(certs):
    with pytest.raises(ConfigError, match=r"ssl_cafile is set but security_protocol is 'SASL_PLAINTEXT'.*"
                                          r"set security_protocol='SASL_SSL'"):
        Config.client(bootstrap_servers="h:1", ssl_cafile=certs.cafile, **_SCRAM)


def test_idempotence_is_the_default_unless_other_options_rule_it_out():
    def producer(**options):
        return Config.producer(bootstrap_servers="h:1", **options)

    assert producer().enable_idempotence is True
    # As the Java client: not asked for, so acks=1 turns it off rather than failing.
    assert producer(acks=1).enable_idempotence is False
    assert producer(max_in_flight_requests_per_connection=6).enable_idempotence is False
    assert producer(transactional_id="t").enable_idempotence is True
