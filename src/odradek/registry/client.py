"""A blocking client of a schema registry's REST API (Confluent's, or a broker's
``schema.registry.listener``), for ``odradek schemas`` and ``odradek console
--schema-registry``: JSON in Confluent's media type, HTTP basic credentials (Confluent's
``basic.auth.user.info``), TLS checked against given authorities or the system's.

Threads: any; each call blocks for at most ``timeout_s``.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"


class RegistryCallError(Exception):
    """The registry answered an error (``status`` and Confluent's ``error_code``), or could
    not be reached (both None)."""

    def __init__(self, message: str, status: int | None = None, code: int | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code


def quote(text: str) -> str:
    """A subject (or other name) as one segment of a path."""
    return urllib.parse.quote(text, safe="")


class RegistryClient:
    """Calls to the registry at ``url`` (see the module doc)."""

    def __init__(
        self,
        url: str,
        *,
        basic_auth: str | None = None,
        ca_file: str | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
        self.url = url.rstrip("/")
        self._headers = {"Content-Type": MEDIA_TYPE, "Accept": MEDIA_TYPE}
        if basic_auth:
            token = base64.b64encode(basic_auth.encode()).decode()
            self._headers["Authorization"] = f"Basic {token}"
        self._context = ssl.create_default_context(cafile=ca_file) if ca_file else None
        self._timeout_s = timeout_s

    def call(self, method: str, path: str, body: object = None) -> Any:
        """The JSON answer to ``method path`` (``body`` sent as JSON); raises
        :class:`RegistryCallError`."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.url + path, data=data, method=method, headers=self._headers
        )
        try:
            with urllib.request.urlopen(
                request, timeout=self._timeout_s, context=self._context
            ) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as e:
            try:
                answer = json.loads(e.read())
                code, message = int(answer["error_code"]), str(answer["message"])
            except (ValueError, KeyError, TypeError):
                raise RegistryCallError(f"HTTP {e.code}", e.code) from e
            raise RegistryCallError(f"{message} (error {code})", e.code, code) from e
        except urllib.error.URLError as e:
            raise RegistryCallError(f"cannot reach {self.url}: {e.reason}") from e
        except (OSError, ValueError) as e:  # a connection reset, an answer that is not JSON
            raise RegistryCallError(f"cannot read {self.url}'s answer: {e}") from e
