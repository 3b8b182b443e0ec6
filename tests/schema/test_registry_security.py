"""TLS and credentials.  TLS: Debian's stunnel4 (a real TLS server) in front of the real
registry, with throwaway certificates (kafkawire.testing.tls), and the clients' ssl_*
options.  Credentials: Apicurio turns authentication on only with an OpenID Connect
server beside it, so the headers are checked on a loopback HTTP server that records them
and refuses a wrong one as a registry does (HTTP 401, error_code 40101)."""

from __future__ import annotations

import base64
import http.server
import json
import threading
from typing import Any, Callable, Iterator

import pytest

from kafkawire.errors import ConfigError
from kafkawire.schema import Schema, errors
from kafkawire.testing.registry import ApicurioRegistry
from kafkawire.testing.tls import Stunnel, TestCertificates, TLSService


@pytest.fixture(scope="module")
def tls_registry(apicurio_registry: ApicurioRegistry, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The session's registry behind TLS: ``ok`` with a certificate for 127.0.0.1 signed
    by ``certs.cafile``, ``wrong_host`` with one for another host name."""
    certs = TestCertificates(str(tmp_path_factory.mktemp("certs")))
    target = (apicurio_registry.host, apicurio_registry.port)
    with Stunnel([TLSService("ok", target, certs.server),
                  TLSService("wrong_host", target, certs.wrong_host)]) as stunnel:
        yield stunnel, certs


def _url(stunnel: Stunnel, name: str) -> str:
    return f"https://127.0.0.1:{stunnel.port(name)}/apis/ccompat/v7"


def test_tls_with_the_ca(tls_registry: Any, make_client: Callable[..., Any], subject: str) -> None:
    stunnel, certs = tls_registry
    client = make_client(_url(stunnel, "ok"), ssl_cafile=certs.cafile)
    schema_id = client.register_schema(subject, Schema('{"type":"string"}'))
    assert client.get_latest_version(subject).schema_id == schema_id


def test_tls_with_an_unknown_ca_fails_at_once(tls_registry: Any, make_client: Callable[..., Any]) -> None:
    stunnel, certs = tls_registry
    client = make_client(_url(stunnel, "ok"), ssl_cafile=certs.other_cafile)
    with pytest.raises(errors.SchemaRegistryConnectionError) as info:
        client.get_subjects()
    assert not info.value.retriable and client.requests_sent == 1  # no retries: config must change
    assert "ssl_cafile" in str(info.value) and "certificate" in str(info.value)


def test_tls_host_name_check(tls_registry: Any, make_client: Callable[..., Any]) -> None:
    stunnel, certs = tls_registry
    strict = make_client(_url(stunnel, "wrong_host"), ssl_cafile=certs.cafile)
    with pytest.raises(errors.SchemaRegistryConnectionError) as info:
        strict.get_subjects()
    assert not info.value.retriable and "ssl_check_hostname" in str(info.value)
    for off in ({"ssl_check_hostname": False}, {"ssl_endpoint_identification_algorithm": ""}):
        lax = make_client(_url(stunnel, "wrong_host"), ssl_cafile=certs.cafile, **off)
        assert isinstance(lax.get_subjects(), list)


def test_tls_options_are_checked() -> None:
    from kafkawire.schema import SchemaRegistryClient

    with pytest.raises(ConfigError, match="ssl_cafile"):
        SchemaRegistryClient("https://127.0.0.1:1", ssl_cafile="/no/such/ca.pem")
    with pytest.raises(ConfigError, match="ssl_context"):
        SchemaRegistryClient("https://127.0.0.1:1", ssl_context="not a context")


class _Witness(http.server.BaseHTTPRequestHandler):
    """Records each request's Authorization header; answers 401 unless it is the expected one."""

    seen: list[str | None] = []
    expected: set[str] = set()

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        auth = self.headers.get("Authorization")
        type(self).seen.append(auth)
        if auth in type(self).expected:
            status, body = 200, ["s"]
        else:
            status, body = 401, {"error_code": 40101, "message": "Unauthorized"}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def witness() -> Iterator[Any]:
    _Witness.seen = []
    _Witness.expected = {"Basic " + base64.b64encode(b"alice:s3cret").decode(), "Bearer token-2"}
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Witness)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Witness
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_basic_auth(witness: Any, make_client: Callable[..., Any]) -> None:
    url, seen = witness
    assert make_client(url, basic_auth_user_info="alice:s3cret").get_subjects() == ["s"]
    assert make_client(url.replace("http://", "http://alice:s3cret@")).get_subjects() == ["s"]
    wrong = make_client(url, basic_auth_user_info="alice:wrong")
    with pytest.raises(errors.SchemaRegistryAuthError) as info:
        wrong.get_subjects()
    assert info.value.code == 40101 and info.value.status == 401 and not info.value.retriable
    assert "basic_auth_user_info" in str(info.value) and wrong.requests_sent == 1
    assert seen.seen[0] == seen.seen[1] == "Basic " + base64.b64encode(b"alice:s3cret").decode()


def test_bearer_auth(witness: Any, make_client: Callable[..., Any]) -> None:
    url, seen = witness
    assert make_client(url, bearer_auth_token="token-2").get_subjects() == ["s"]
    tokens = iter(["token-2", ("token-2", 0)])
    client = make_client(url, bearer_auth_token_provider=lambda: next(tokens))
    assert client.get_subjects() == ["s"] and client.get_subjects() == ["s"]  # asked before each request
    assert seen.seen == ["Bearer token-2"] * 3
    with pytest.raises(errors.SchemaRegistryAuthError):
        make_client(url, bearer_auth_token="stale").get_subjects()
