"""Every Kafka API kafkawire speaks, one declaration per API (see kafkawire.protocol.schema).

Each module in this package builds a few APIs from Kafka's own definitions
(:func:`~kafkawire.protocol.api.from_generated`, up to the versions kafkawire speaks) as
module-level :class:`Api` objects; this package collects them all into ``BY_KEY`` and
``BY_NAME``.
"""

from __future__ import annotations

import importlib
import pkgutil

from kafkawire.protocol.api import Api

BY_KEY: dict[int, Api] = {}
BY_NAME: dict[str, Api] = {}

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    _module = importlib.import_module(f"{__name__}.{_info.name}")
    for _value in vars(_module).values():
        if isinstance(_value, Api):
            if _value.key in BY_KEY and BY_KEY[_value.key] is not _value:
                raise RuntimeError(f"api key {_value.key} declared twice ({_value.name})")
            BY_KEY[_value.key] = _value
            BY_NAME[_value.name] = _value


def get(key_or_name: int | str) -> Api:
    """The Api for a key (18) or a name ("ApiVersions")."""
    table = BY_KEY if isinstance(key_or_name, int) else BY_NAME
    try:
        return table[key_or_name]  # type: ignore[index]
    except KeyError:
        raise KeyError(f"kafkawire does not declare the API {key_or_name!r}") from None
