"""The JVM Kafka connector's security options, as kafkawire client options.

A Spark job written for ``format("kafka")`` carries Java client settings: the login in
``kafka.sasl.jaas.config``, trust and identity in Java keystores.  :func:`translate` turns
them into kafkawire's names (``sasl_plain_username``, ``ssl_cafile``, ...), so the same
options serve ``format("kafkawire")``.  It runs where a client is made (the driver and every
executor), as the Java client reads its keystores in each task: paths name files on that
machine, and a PKCS#12 store is turned into PEM files private to the process (in memory on Linux).
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import importlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
from typing import Any, Callable

from kafkawire.spark._errors import KafkawireOptionError

__all__ = ["translate", "parse_jaas"]

_PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
_MODULE_MECHANISMS = {_PLAIN: ("PLAIN",), _SCRAM: ("SCRAM-SHA-256", "SCRAM-SHA-512"), _OAUTH: ("OAUTHBEARER",)}

# Java-only settings with nothing to map to: kafkawire's TLS is Python's ssl module.
_JAVA_ONLY = {
    "ssl_keymanager_algorithm", "ssl_trustmanager_algorithm", "ssl_secure_random_implementation",
    "ssl_provider", "ssl_engine_factory_class", "sasl_login_class",
}
_JAAS_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))', re.S)


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """``Module required key="value" key2=value2;`` -> (module, options), the one-module
    form Kafka's ``sasl.jaas.config`` takes."""
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _JAAS_TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise KafkawireOptionError(f"option 'kafka.sasl.jaas.config' cannot be read at {text[pos:pos + 20]!r}; "
                                       f"expected e.g. 'org.apache.kafka.common.security.plain.PlainLoginModule "
                                       f"required username=\"alice\" password=\"secret\";'")
        pos = m.end()
        if m.group(1) is not None:
            tokens.append(("str", re.sub(r"\\(.)", r"\1", m.group(1))))
        elif m.group(2) is not None:
            tokens.append(("word", m.group(2)))
        else:
            tokens.append((m.group(3) or m.group(4), ""))
    if len(tokens) < 3 or tokens[0][0] != "word" or tokens[-1][0] != ";" or \
            tokens[1][1].lower() not in ("required", "requisite", "sufficient", "optional"):
        raise KafkawireOptionError(
            "option 'kafka.sasl.jaas.config' must be one login module, a control flag and its options "
            "ending in ';', e.g. 'org.apache.kafka.common.security.scram.ScramLoginModule required "
            "username=\"alice\" password=\"secret\";'")
    body, options = tokens[2:-1], {}
    if len(body) % 3 or any(body[i + 1][0] != "=" or body[i][0] != "word" or body[i + 2][0] not in ("word", "str")
                            for i in range(0, len(body), 3)):
        raise KafkawireOptionError("option 'kafka.sasl.jaas.config': the login module's options must be "
                                   "key=value pairs (values with spaces in double quotes), one ';' at the end")
    for i in range(0, len(body), 3):
        options[body[i][1]] = body[i + 2][1]
    return tokens[0][1], options


def _unsecured_token_provider(options: dict[str, str]) -> Callable[[], tuple[str, int]]:
    """What Kafka's default OAUTHBEARER login does without a callback handler: an
    unsecured JWS (alg none) from the ``unsecuredLogin*`` options, for brokers that
    validate with Kafka's unsecured validator (test and development setups)."""
    claim = options.get("unsecuredLoginPrincipalClaimName", "sub")
    subject = options.get(f"unsecuredLoginStringClaim_{claim}")
    if not subject:
        raise KafkawireOptionError(
            f"option 'kafka.sasl.jaas.config': OAuthBearerLoginModule without a token needs "
            f"unsecuredLoginStringClaim_{claim}=\"<principal>\" (Kafka's unsecured login), or set "
            f"kafka.sasl.oauth.token.provider to 'module:function' returning (token, expiry_ms)")
    lifetime = float(options.get("unsecuredLoginLifetimeSeconds", "3600"))
    strings = {k[len("unsecuredLoginStringClaim_"):]: v for k, v in options.items()
               if k.startswith("unsecuredLoginStringClaim_")}

    def provider() -> tuple[str, int]:
        now = time.time()
        claims: dict[str, Any] = {**strings, "iat": int(now), "exp": int(now + lifetime)}

        def part(obj: dict[str, Any]) -> str:
            return base64.urlsafe_b64encode(json.dumps(obj, separators=(",", ":")).encode()).decode().rstrip("=")
        return f"{part({'alg': 'none'})}.{part(claims)}.", int((now + lifetime) * 1000)
    return provider


def _import_provider(spec: str) -> Callable[..., Any]:
    module, _, attr = spec.partition(":")
    try:
        target: Any = importlib.import_module(module.strip())
        for name in attr.strip().split("."):
            target = getattr(target, name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise KafkawireOptionError(
            f"option 'kafka.sasl.oauth.token.provider' must be 'module:function' importable where the "
            f"query runs, got {spec!r} ({exc})") from None
    if not callable(target):
        raise KafkawireOptionError(f"option 'kafka.sasl.oauth.token.provider': {spec!r} is not callable")
    return target


# -- keystores ----------------------------------------------------------------------------

_lock = threading.Lock()
_private_dir: str | None = None
_private_paths: dict[str, str] = {}  # content hash and name -> the file holding them


def _private_file(name: str, data: bytes) -> str:
    """``data`` in a file only this process can read, named by its content (made once per
    process, however many tasks ask)."""
    key = f"{hashlib.sha256(data).hexdigest()[:24]}-{name}"
    with _lock:
        path = _private_paths.get(key)
        if path is None or not os.path.exists(path):
            path = _private_paths[key] = _in_memory_file(name, data) or _in_private_dir(key, data)
        return path


def _in_memory_file(name: str, data: bytes) -> str | None:
    """``data`` in an anonymous in-memory file (Linux), or None where there is none.  A
    key written there never reaches a disk and goes with the process however it ends:
    Spark's Python workers leave by ``os._exit``, which skips ``atexit``."""
    if not hasattr(os, "memfd_create"):
        return None
    try:
        fd = os.memfd_create(name, os.MFD_CLOEXEC)
    except OSError:
        return None
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    path = f"/proc/self/fd/{fd}"  # open while the process lives; forked children inherit it
    if os.path.exists(path):
        return path
    os.close(fd)  # no /proc to name it by
    return None


def _in_private_dir(key: str, data: bytes) -> str:
    global _private_dir
    if _private_dir is None:
        _private_dir = tempfile.mkdtemp(prefix="kafkawire-spark-tls-")
        atexit.register(shutil.rmtree, _private_dir, True)
    path = os.path.join(_private_dir, key)
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(path + ".tmp", path)
    return path


def _store_kind(option: str, path: str, declared: str | None) -> tuple[str, bytes]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise KafkawireOptionError(f"option 'kafka.{option}' names {path!r}, which cannot be read: "
                                   f"{exc.strerror}") from None
    # Judged by content, as Java's keystores are: its "JKS" loader reads PKCS#12 too.
    if b"-----BEGIN" in data[:4096]:
        return "PEM", data
    if data[:4] == b"\xfe\xed\xfe\xed":
        raise KafkawireOptionError(
            f"option 'kafka.{option}': {path!r} is a JKS keystore, Java's own format, which kafkawire "
            f"cannot read; convert it once with 'keytool -importkeystore -srckeystore {path} "
            f"-destkeystore store.p12 -deststoretype PKCS12' (then point the option at store.p12), or "
            f"use PEM files with kafka.{option.rsplit('.', 1)[0]}.type=PEM")
    if declared and declared.upper() == "PEM":
        raise KafkawireOptionError(f"option 'kafka.{option}': {path!r} holds no PEM block, though the type is PEM")
    return "PKCS12", data


def _pkcs12(option: str, data: bytes, password: str | None) -> tuple[Any, Any, list[Any]]:
    try:
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise KafkawireOptionError(
            f"option 'kafka.{option}' names a PKCS#12 keystore; reading one needs the cryptography "
            f"package (pip install cryptography), or use PEM files with the .type=PEM option") from None
    try:
        key, cert, extra = pkcs12.load_key_and_certificates(data, password.encode() if password else None)
    except ValueError as exc:
        raise KafkawireOptionError(f"option 'kafka.{option}': the PKCS#12 keystore cannot be opened "
                                   f"({exc}); check its password option") from None
    return key, cert, list(extra)


def _pem(certs: list[Any]) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding

    return b"".join(c.public_bytes(Encoding.PEM) for c in certs)


def _truststore(opts: dict[str, Any], out: dict[str, Any]) -> None:
    kind = opts.pop("ssl_truststore_type", None)
    password = opts.pop("ssl_truststore_password", None)
    inline = opts.pop("ssl_truststore_certificates", None)
    location = opts.pop("ssl_truststore_location", None)
    if inline:
        out["ssl_cafile"] = _private_file("ca.pem", str(inline).encode())
    if location:
        found, data = _store_kind("ssl.truststore.location", location, kind)
        if found == "PEM":
            out["ssl_cafile"] = location
        else:
            key, cert, extra = _pkcs12("ssl.truststore.location", data, password)
            certs = ([cert] if cert is not None else []) + extra
            if not certs:
                raise KafkawireOptionError("option 'kafka.ssl.truststore.location': the keystore holds no certificate")
            out["ssl_cafile"] = _private_file("ca.pem", _pem(certs))


def _keystore(opts: dict[str, Any], out: dict[str, Any]) -> None:
    kind = opts.pop("ssl_keystore_type", None)
    store_password = opts.pop("ssl_keystore_password", None)
    key_password = opts.pop("ssl_key_password", None)
    location = opts.pop("ssl_keystore_location", None)
    inline_key = opts.pop("ssl_keystore_key", None)
    inline_chain = opts.pop("ssl_keystore_certificate_chain", None)
    if inline_key or inline_chain:
        if not (inline_key and inline_chain):
            raise KafkawireOptionError("options 'kafka.ssl.keystore.key' and 'kafka.ssl.keystore.certificate.chain' "
                                       "go together")
        out["ssl_certfile"] = _private_file("client.pem", f"{inline_key}\n{inline_chain}\n".encode())
        out["ssl_password"] = key_password
    if not location:
        return
    found, data = _store_kind("ssl.keystore.location", location, kind)
    if found == "PEM":
        # Kafka's PEM keystore: the private key and its certificate chain in one file,
        # the key encrypted with ssl.key.password when it is set.
        out["ssl_certfile"] = location
        out["ssl_password"] = key_password
        return
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, Encoding, PrivateFormat

    key, cert, extra = _pkcs12("ssl.keystore.location", data, store_password)
    if key is None or cert is None:
        raise KafkawireOptionError("option 'kafka.ssl.keystore.location': the keystore holds no private key "
                                   "with its certificate")
    # The key stays encrypted on disk, under a password that only this process knows.
    secret = os.urandom(24).hex()
    body = key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(secret.encode()))
    out["ssl_certfile"] = _private_file("client.pem", body + _pem([cert, *extra]))
    out["ssl_password"] = secret


_translated: dict[tuple, dict[str, Any]] = {}


def translate(options: dict[str, Any]) -> dict[str, Any]:
    """``kafka.*`` options (prefix stripped, dots as underscores) with the Java client's
    security settings replaced by kafkawire's; everything else is returned as it is.
    Remembered per process: the same options give the same token provider and files,
    so the per-process client cache (kafkawire.spark._io) finds its client again."""
    key = tuple(sorted((k, repr(v)) for k, v in options.items()))
    with _lock:
        done = _translated.get(key)
    if done is None:
        done = _translate(options)
        with _lock:
            _translated[key] = done
    return dict(done)


def _translate(options: dict[str, Any]) -> dict[str, Any]:
    opts = dict(options)
    out: dict[str, Any] = {}
    jaas = opts.pop("sasl_jaas_config", None)
    if jaas:
        module, login = parse_jaas(str(jaas))
        mechanisms = _MODULE_MECHANISMS.get(module)
        if mechanisms is None:
            raise KafkawireOptionError(
                f"option 'kafka.sasl.jaas.config': login module {module!r} is not supported by kafkawire; "
                f"it logs in with {', '.join(sorted(_MODULE_MECHANISMS))}")
        mechanism = str(opts.get("sasl_mechanism", "GSSAPI")).upper()
        if mechanism not in mechanisms:
            raise KafkawireOptionError(
                f"option 'kafka.sasl.jaas.config' uses {module.rsplit('.', 1)[-1]}, which serves "
                f"{' or '.join(mechanisms)}, but kafka.sasl.mechanism is {mechanism!r}; set "
                f"kafka.sasl.mechanism to {mechanisms[0]!r}")
        if module == _OAUTH:
            if "sasl_login_callback_handler_class" in opts:
                raise KafkawireOptionError(
                    "option 'kafka.sasl.login.callback.handler.class' names a Java class, which kafkawire "
                    "cannot run; set kafka.sasl.oauth.token.provider to 'module:function', a Python "
                    "callable returning (token, expiry_ms)")
            if "sasl_oauth_token_provider" not in opts:
                out["sasl_oauth_token_provider"] = _unsecured_token_provider(login)
            extensions = {k[len("unsecuredLoginExtension_"):]: v for k, v in login.items()
                          if k.startswith("unsecuredLoginExtension_")}
            if extensions:
                out["sasl_oauthbearer_extensions"] = extensions
        else:
            missing = [k for k in ("username", "password") if k not in login]
            if missing:
                raise KafkawireOptionError(f"option 'kafka.sasl.jaas.config' has no {' or '.join(missing)}; "
                                           f"{module.rsplit('.', 1)[-1]} needs username=\"...\" password=\"...\"")
            out["sasl_plain_username"], out["sasl_plain_password"] = login["username"], login["password"]
    provider = opts.pop("sasl_oauth_token_provider", None)
    if isinstance(provider, str) and provider.strip():
        out["sasl_oauth_token_provider"] = _import_provider(provider)
    _truststore(opts, out)
    _keystore(opts, out)
    java_only = sorted(_JAVA_ONLY & set(opts))
    if java_only:
        raise KafkawireOptionError(f"option 'kafka.{java_only[0].replace('_', '.')}' configures Java's TLS or "
                                   f"login classes, which kafkawire does not use; remove it")
    opts.update(out)
    return opts
