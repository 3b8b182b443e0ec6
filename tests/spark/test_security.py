"""The JVM connector's security options (``kafka.security.protocol``, ``kafka.sasl.*`` with
``kafka.sasl.jaas.config``, ``kafka.ssl.*`` keystores) given unchanged to format("kafka") and
format("kafkawire"), on Apache Kafka's SASL_PLAINTEXT, SASL_SSL and mutual-TLS SSL listeners:
both read the same rows and write records the other reads back.

One cluster for the module (its SSL listener demands a client certificate; SASL_SSL does not).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from sparkkafka import new_topic, produce, records

from kafkawire.spark import KafkawireOptionError
from kafkawire.spark._security import parse_jaas, translate
from kafkawire.testing.kafka import KafkaCluster

pytestmark = pytest.mark.spark

FORMATS = ("kafka", "kafkawire")
USER, PASSWORD = "alice", "alice-secret"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@pytest.fixture(scope="module")
def secure():
    with KafkaCluster(1, listeners=["SSL", "SASL_PLAINTEXT", "SASL_SSL"], users={USER: PASSWORD},
                      ssl_client_auth="required") as cluster:
        t = new_topic(cluster.bootstrap, 2, prefix="sec")
        produce(cluster.bootstrap, t, {0: records(0, 30), 1: records(1, 20)})
        yield cluster, t


def _jaas(module: str, **options: str) -> str:
    return f"{module} required " + " ".join(f'{k}="{v}"' for k, v in options.items()) + ";"


def _keystores(cluster: KafkaCluster, tmp: str) -> dict[str, str]:
    """The client certificate as Kafka's PEM keystore (key and chain in one file) and as
    PKCS#12, and the CA as a PKCS#12 truststore: forms both connectors take."""
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        Encoding,
        NoEncryption,
        PrivateFormat,
        load_pem_private_key,
        pkcs12,
    )
    from cryptography.x509 import load_pem_x509_certificate

    certs = cluster.certificates
    secret = certs.client_password.encode()
    with open(certs.client.keyfile, "rb") as k, open(certs.client.certfile, "rb") as c, open(certs.cafile, "rb") as a:
        key_pem, cert_pem, ca_pem = k.read(), c.read(), a.read()
    paths = {"pem": os.path.join(tmp, "client-keystore.pem"), "p12": os.path.join(tmp, "client.p12"),
             "trust": os.path.join(tmp, "trust.p12")}
    key = load_pem_private_key(key_pem, secret)
    # Unencrypted: Java 17 cannot open a PBES2-encrypted PEM key ("PBES2 SecretKeyFactory
    # not available"); the PKCS#12 case covers an encrypted key.
    with open(paths["pem"], "wb") as out:
        out.write(key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()) + cert_pem)
    cert, ca = load_pem_x509_certificate(cert_pem), load_pem_x509_certificate(ca_pem)
    with open(paths["p12"], "wb") as out:
        out.write(pkcs12.serialize_key_and_certificates(b"client", key, cert, None, BestAvailableEncryption(secret)))
    with open(paths["trust"], "wb") as out:
        out.write(pkcs12.serialize_java_truststore([pkcs12.PKCS12Certificate(ca, b"ca")],
                                                   BestAvailableEncryption(secret)))
    return paths


def options_for(cluster: KafkaCluster, case: str, tmp: str) -> dict[str, str]:
    """Java-client options for ``case``: what a format("kafka") job would carry."""
    certs = cluster.certificates
    pem_trust = {"kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": certs.cafile}
    if case.startswith("SASL_PLAINTEXT"):
        mechanism = case.split()[1]
        module = PLAIN if mechanism == "PLAIN" else SCRAM
        return {"kafka.bootstrap.servers": cluster.bootstrap_for("SASL_PLAINTEXT"),
                "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": mechanism,
                "kafka.sasl.jaas.config": _jaas(module, username=USER, password=PASSWORD)}
    if case.startswith("SASL_SSL"):
        mechanism = case.split()[1]
        jaas = (_jaas(OAUTH, unsecuredLoginStringClaim_sub=USER) if mechanism == "OAUTHBEARER"
                else _jaas(SCRAM, username=USER, password=PASSWORD))
        return {"kafka.bootstrap.servers": cluster.bootstrap_for("SASL_SSL"),
                "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": mechanism,
                "kafka.sasl.jaas.config": jaas, **pem_trust}
    stores = _keystores(cluster, tmp)
    base = {"kafka.bootstrap.servers": cluster.bootstrap_for("SSL"), "kafka.security.protocol": "SSL"}
    if case == "SSL PEM":
        return {**base, **pem_trust, "kafka.ssl.keystore.type": "PEM", "kafka.ssl.keystore.location": stores["pem"]}
    return {**base, "kafka.ssl.truststore.type": "PKCS12", "kafka.ssl.truststore.location": stores["trust"],
            "kafka.ssl.truststore.password": certs.client_password,
            "kafka.ssl.keystore.type": "PKCS12", "kafka.ssl.keystore.location": stores["p12"],
            "kafka.ssl.keystore.password": certs.client_password, "kafka.ssl.key.password": certs.client_password}


def _rows(spark, fmt: str, options: dict, **extra) -> list[tuple]:
    r = spark.read.format(fmt)
    for k, v in {**options, **extra}.items():
        r = r.option(k, v)
    return sorted((tuple(x) for x in r.load().collect()), key=lambda x: (x[2], x[3], x[4]))


CASES = ["SASL_PLAINTEXT PLAIN", "SASL_PLAINTEXT SCRAM-SHA-256", "SASL_SSL SCRAM-SHA-512", "SASL_SSL OAUTHBEARER",
         "SSL PEM", "SSL PKCS12"]


@pytest.mark.parametrize("case", CASES)
def test_same_options_read_and_write_alike(spark, secure, case, tmp_path):
    cluster, topic = secure
    options = options_for(cluster, case, str(tmp_path))
    got = {fmt: _rows(spark, fmt, options, subscribe=topic) for fmt in FORMATS}
    assert len(got["kafkawire"]) == 50 and got["kafka"] == got["kafkawire"]
    if case not in ("SASL_PLAINTEXT PLAIN", "SASL_SSL SCRAM-SHA-512", "SSL PKCS12"):
        return  # one write per listener
    df = spark.createDataFrame([(b"k%d" % i, b"v%d" % i) for i in range(20)], "key binary, value binary")
    out = {fmt: new_topic(cluster.bootstrap, 2, prefix="sec-out") for fmt in FORMATS}
    for fmt in FORMATS:
        w = df.write.format(fmt).mode("append").option("topic", out[fmt])
        for k, v in options.items():
            w = w.option(k, v)
        w.save()
    for fmt in FORMATS:  # each sink's records, read back through the other connector
        other = FORMATS[1 - FORMATS.index(fmt)]
        back = _rows(spark, other, options, subscribe=out[fmt])
        assert sorted((r[0], r[1]) for r in back) == sorted((b"k%d" % i, b"v%d" % i) for i in range(20)), fmt


def test_a_wrong_password_fails_both(spark, secure, tmp_path):
    cluster, topic = secure
    options = options_for(cluster, "SASL_PLAINTEXT SCRAM-SHA-256", str(tmp_path))
    options["kafka.sasl.jaas.config"] = _jaas(SCRAM, username=USER, password="wrong")
    for fmt in FORMATS:
        with pytest.raises(Exception) as info:  # noqa: PT011 - Py4J's and PySpark's errors differ
            _rows(spark, fmt, options, subscribe=topic)
        assert "uthentication" in str(info.value), fmt


def test_translation_of_java_settings(tmp_path):
    # Without Spark: the mapping itself, and the refusals that name the option.
    assert parse_jaas(f'{PLAIN} required username="a b" password="p\\"w;d";') == (
        PLAIN, {"username": "a b", "password": 'p"w;d'})
    got = translate({"sasl_mechanism": "SCRAM-SHA-512", "sasl_jaas_config": _jaas(SCRAM, username="u", password="p")})
    assert got == {"sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "u", "sasl_plain_password": "p"}
    token, expiry = translate({"sasl_mechanism": "OAUTHBEARER", "sasl_jaas_config": _jaas(
        OAUTH, unsecuredLoginStringClaim_sub="bob")})["sasl_oauth_token_provider"]()
    assert token.endswith(".") and expiry > 0
    jks = tmp_path / "trust.jks"
    jks.write_bytes(b"\xfe\xed\xfe\xed" + bytes(60))
    refusals = [
        ({"sasl_mechanism": "PLAIN", "sasl_jaas_config": "nonsense"}, "option 'kafka.sasl.jaas.config' must be"),
        ({"sasl_mechanism": "SCRAM-SHA-256", "sasl_jaas_config": _jaas(PLAIN, username="u", password="p")},
         "set kafka.sasl.mechanism to 'PLAIN'"),
        ({"sasl_mechanism": "GSSAPI", "sasl_jaas_config": "com.sun.security.auth.module.Krb5LoginModule required;"},
         "login module 'com.sun.security.auth.module.Krb5LoginModule' is not supported"),
        ({"ssl_truststore_location": str(jks)}, "is a JKS keystore, Java's own format"),
        ({"ssl_truststore_location": str(tmp_path / "absent.pem")}, "cannot be read"),
        ({"sasl_oauth_token_provider": "no_such_module:f"}, "must be 'module:function'"),
        ({"ssl_keymanager_algorithm": "SunX509"}, "configures Java's TLS or login classes"),
    ]
    for options, message in refusals:
        with pytest.raises(KafkawireOptionError, match=None) as info:
            translate(options)
        assert message in str(info.value), options


def test_a_bad_jaas_config_fails_at_load(spark, secure, tmp_path):
    cluster, topic = secure
    options = options_for(cluster, "SASL_PLAINTEXT PLAIN", str(tmp_path))
    options["kafka.sasl.jaas.config"] = json.dumps({"username": USER})
    with pytest.raises(Exception) as info:  # noqa: PT011
        spark.read.format("kafkawire").options(**options).option("subscribe", topic).load()
    assert "option 'kafka.sasl.jaas.config' must be one login module" in str(info.value)


def test_a_keystore_made_into_pem_leaves_nothing_behind_an_abrupt_exit(tmp_path):
    # Spark's Python workers end by os._exit, which skips atexit: the PEM a keystore becomes
    # must be readable while the process lives and leave nothing on disk after it.
    code = ("import os, sys\n"
            "from kafkawire.spark._security import translate\n"
            "path = translate({'ssl_truststore_certificates': 'PEM BODY'})['ssl_cafile']\n"
            "sys.stdout.write(open(path).read()); sys.stdout.flush(); os._exit(0)\n")
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "TMPDIR": str(tmp_path)},
                          capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "PEM BODY"), done.stderr
    assert list(tmp_path.iterdir()) == []
