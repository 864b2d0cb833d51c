"""Kafka's ``sasl.jaas.config`` value: one JAAS login module entry, read the same way by the
broker (its PLAIN users, the inter-broker login) and by odradek's client (its username and
password). Pure: no I/O, no imports from the broker or the client."""

from __future__ import annotations

import re

_FLAGS = ("required", "requisite", "sufficient", "optional")
_OPTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*=\s*("((?:[^"\\]|\\.)*)"|[^\s;]+)')


class JaasError(ValueError):
    """The text is not one JAAS login module entry."""


def parse_jaas(text: str) -> tuple[str, dict[str, str]]:
    """One entry, ``<class> <flag> key="value" ...;``: its class and options (quoted values
    unescaped)."""
    body = text.strip().rstrip(";").strip()
    parts = body.split(None, 2)
    if len(parts) < 2 or parts[1] not in _FLAGS:
        raise JaasError(f"not a JAAS login module entry: {text[:60]!r}")
    options: dict[str, str] = {}
    rest = parts[2] if len(parts) > 2 else ""
    position = 0
    while position < len(rest.strip()):
        match = _OPTION.match(rest, position)
        if match is None:
            raise JaasError(f"malformed JAAS option near {rest[position : position + 30]!r}")
        value = match.group(3)
        value = re.sub(r"\\(.)", r"\1", value) if value is not None else match.group(2)
        options[match.group(1)] = value
        position = match.end()
    return parts[0], options
