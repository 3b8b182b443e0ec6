"""What the two shells share around the core: their options (the ``ssl_*`` ones become
the TLS context through :func:`kafkawire.core.tls.build_ssl_context`, as for the Kafka
clients), and the names of httpx's failures in the core's words."""

from __future__ import annotations

import ssl
from typing import Any, Callable

import httpx

from kafkawire.errors import ConfigError
from kafkawire.schema._core import Request, RegistryCore

__all__ = ["Options", "failure_of", "with_token"]

_SSL_OPTIONS = ("ssl_cafile", "ssl_capath", "ssl_certfile", "ssl_keyfile", "ssl_password",
                "ssl_crlfile", "ssl_ciphers")


class Options:
    """A client's options split into the core, the TLS context and the token provider."""

    def __init__(self, url: Any, options: dict[str, Any]):
        options = dict(options)
        provider = options.pop("bearer_auth_token_provider", None)
        if provider is not None and not callable(provider):
            raise ConfigError("bearer_auth_token_provider must be a callable returning the token "
                              "(a str, or a (token, expiry) pair)")
        if provider is not None and options.get("bearer_auth_token") is not None:
            raise ConfigError("give bearer_auth_token or bearer_auth_token_provider, not both")
        if provider is not None and options.get("basic_auth_user_info") is not None:
            raise ConfigError("basic_auth_user_info and a bearer token both given: choose one")
        self.token_provider: Callable[[], Any] | None = provider
        context = options.pop("ssl_context", None)
        if context is not None and not isinstance(context, ssl.SSLContext):
            raise ConfigError(f"ssl_context must be an ssl.SSLContext or None, got {type(context).__name__}")
        tls = {name: options.pop(name, None) for name in _SSL_OPTIONS}
        check_hostname = options.pop("ssl_check_hostname", True)
        algorithm = options.pop("ssl_endpoint_identification_algorithm", "https")
        if algorithm not in ("https", "", None):
            raise ConfigError(f"ssl_endpoint_identification_algorithm is 'https' or '', not {algorithm!r}")
        http_options = options.pop("http_options", None) or {}
        self.core = RegistryCore(url, **options)
        if context is None and any(u.startswith("https:") for u in self.core.urls):
            from kafkawire.core.tls import build_ssl_context

            context = build_ssl_context(
                cafile=tls["ssl_cafile"], capath=tls["ssl_capath"], certfile=tls["ssl_certfile"],
                keyfile=tls["ssl_keyfile"], password=tls["ssl_password"], crlfile=tls["ssl_crlfile"],
                ciphers=tls["ssl_ciphers"], check_hostname=bool(check_hostname) and algorithm == "https")
        #: What httpx.Client / httpx.AsyncClient are made with.
        self.http = {"verify": context if context is not None else True, "follow_redirects": False,
                     **http_options}


def with_token(request: Request, provider: Callable[[], Any] | None) -> dict[str, str]:
    """The request's headers, with a fresh bearer token from ``provider`` when there is one."""
    if provider is None:
        return request.headers
    token = provider()
    if isinstance(token, tuple):  # (token, expiry), as a SASL/OAUTHBEARER provider returns
        token = token[0]
    if not isinstance(token, str) or not token:
        raise ConfigError(f"bearer_auth_token_provider returned {type(token).__name__}, not a token str")
    return {**request.headers, "Authorization": f"Bearer {token}"}


def failure_of(exc: httpx.TransportError, timeout: float) -> tuple[str, str]:
    """(kind, detail) of a request that got no answer, for :class:`~kafkawire.schema._core.Failure`."""
    if isinstance(exc, httpx.TimeoutException):
        return "timeout", f"{timeout:.3f}s ({type(exc).__name__})"
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            return "tls-verify", seen.verify_message or str(seen)
        if isinstance(seen, ssl.SSLError):
            return "tls", str(seen)
        seen = seen.__cause__ or seen.__context__
    return "connection", str(exc) or type(exc).__name__
