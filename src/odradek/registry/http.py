"""The registry's HTTP listener (``schema.registry.listener``): Confluent Schema Registry's REST
API on aiohttp, so that Confluent's clients and serializers, and tools configured with
``schema.registry.url``, work unchanged.

Threads: the server runs on a thread of its own with its own event loop, never the broker's
(:class:`~odradek.web_server.WebServer`);
every request's work is handed to the one store thread (:class:`~.store.SchemaStore` is not
thread-safe and its Kafka client blocks), so requests are served in arrival order there while
the HTTP loop keeps accepting. Answers are JSON in Confluent's media type; errors are Confluent's
``{"error_code", "message"}`` bodies.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from aiohttp import web

from odradek.config import BrokerConfig
from odradek.registry import errors
from odradek.registry.auth import BASIC, NONE, BasicAuthenticator, UserConfigs
from odradek.registry.contexts import context_of, unqualified_default
from odradek.registry.errors import RegistryError
from odradek.registry.records import content_answer, parse_references
from odradek.registry.schemas import AVRO, SCHEMA_TYPES
from odradek.registry.state import RegistryState, SchemaIdUse, SchemaRequest
from odradek.registry.store import SchemaStore
from odradek.security.acl import parse_super_users
from odradek.security.sasl import parse_jaas
from odradek.security.tls import server_context
from odradek.web_server import WebServer

if TYPE_CHECKING:
    from odradek.registry.metrics import RegistryMetrics

log = logging.getLogger(__name__)

T = TypeVar("T")

MEDIA_TYPE = "application/vnd.schemaregistry.v1+json"
MAX_BODY_BYTES = 16 << 20
# How long the web console waits for the store thread (behind a registration, say).
_READ_TIMEOUT_S = 30.0
# listener.name.schema_registry.ssl.* set the registry's own TLS settings (else ssl.*).
TLS_LISTENER_NAME = "schema_registry"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _answer(body: object, status: int = 200) -> web.Response:
    return web.Response(
        text=json.dumps(body, ensure_ascii=False), status=status, content_type=MEDIA_TYPE
    )


def _flag(request: web.Request, name: str, default: bool = False) -> bool:
    value = request.query.get(name)
    if value is None or value == "":
        return default
    return value.lower() == "true"


def _schema_request(body: object) -> SchemaRequest:
    if not isinstance(body, dict):
        raise errors.bad_request("the body is not a JSON object")
    schema = body.get("schema")
    if not isinstance(schema, str) or not schema.strip():
        raise errors.invalid_schema("Empty schema")
    schema_type = body.get("schemaType") or AVRO
    schema_id, version = body.get("id"), body.get("version")
    if not isinstance(schema_type, str):
        raise errors.invalid_schema("schemaType is not a string")
    for name, number in (("id", schema_id), ("version", version)):
        if number is not None and (isinstance(number, bool) or not isinstance(number, int)):
            raise errors.bad_request(f"{name} is not a number")
    try:
        references = parse_references(body.get("references"))
    except ValueError as e:
        raise errors.invalid_schema(str(e)) from e
    return SchemaRequest(schema, schema_type.upper(), references, schema_id, version)


def _schema_id(request: web.Request) -> int:
    try:
        return int(request.match_info["id"])
    except ValueError:
        raise errors.schema_not_found(f"Schema {request.match_info['id']} not found") from None


def _subject(request: web.Request) -> str:
    """The path's subject, a default context said (``:.:name``) spelt plainly."""
    return unqualified_default(request.match_info["subject"])


def _id_context(request: web.Request) -> str:
    """The context an id is looked up in: the one of the ``subject`` asked about (Confluent's
    ``?subject=:.ctx:name``, or the context alone, ``:.ctx:``), else the default context."""
    return context_of(request.query.get("subject", ""))[0]


class RegistryServer:
    """The registry's API over ``store``: :meth:`start` (bound address), :meth:`stop`; over TLS
    with ``ssl_context``, and asking for basic credentials with ``authenticator``."""

    def __init__(
        self,
        store: SchemaStore,
        *,
        authenticator: BasicAuthenticator | None = None,
        ssl_context: ssl.SSLContext | None = None,
        metrics: RegistryMetrics | None = None,
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._authenticator = authenticator
        self._executor = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="odradek-registry-store"
        )
        self._server = WebServer(self._app, name="odradek-registry-http", ssl_context=ssl_context)
        self.bound: tuple[str, int] = ("", 0)

    @classmethod
    def from_config(
        cls,
        config: BrokerConfig,
        store: SchemaStore,
        user_configs: UserConfigs,
        metrics: RegistryMetrics | None = None,
    ) -> RegistryServer:
        """The server ``schema.registry.*`` asks for: TLS with the broker's key store for an
        ``https://`` listener, basic authentication against the broker's users (PLAIN users of
        ``sasl.jaas.config``, SCRAM credentials by ``user_configs``) when BASIC."""
        context = server_context(config, TLS_LISTENER_NAME) if config.schema_registry_tls else None
        authenticator = None
        method = (config.raw("schema.registry.authentication.method") or NONE).upper()
        if method == BASIC:
            jaas = config.raw("sasl.jaas.config")
            options = parse_jaas(jaas)[1] if jaas else {}
            plain_users = {
                name.removeprefix("user_"): password
                for name, password in options.items()
                if name.startswith("user_")
            }
            super_users = parse_super_users(config.raw("super.users"))
            authenticator = BasicAuthenticator(plain_users, user_configs, super_users)
        return cls(store, authenticator=authenticator, ssl_context=context, metrics=metrics)

    # -- life --------------------------------------------------------------------------------

    def start(self, host: str, port: int) -> tuple[str, int]:
        """Bind ``host:port`` (0: any free port) and serve on a thread of its own."""
        self.bound = self._server.start(host, port)
        return self.bound

    def _app(self) -> web.Application:
        app = web.Application(
            client_max_size=MAX_BODY_BYTES,
            middlewares=[self._count, self._errors, self._authenticate],
        )
        app.add_routes(self._routes())
        return app

    def stop(self) -> None:
        """Stop serving, let the store thread finish its request, close the store (blocks)."""
        self._server.stop()
        self._executor.shutdown(wait=True, cancel_futures=True)
        self._store.close()

    # -- what the broker asks (schema id validation) -----------------------------------------

    @property
    def known_schema_ids(self) -> Mapping[int, SchemaIdUse]:
        """The ids of the store's replay and their subjects as last published (any thread may
        read it)."""
        return self._store.known_ids

    def refresh_ids(self) -> concurrent.futures.Future[None]:
        """Replay ``_schemas`` to its end on the store thread, after the requests before it."""
        return self._executor.submit(self._store.refresh)

    def read(self, query: Callable[[RegistryState], T]) -> T:
        """``query``'s answer from the registry's state, on the store thread; blocks, so call
        it from any thread but the server's (the web console's, for one)."""
        return self._executor.submit(self._store.read, query).result(_READ_TIMEOUT_S)

    # -- plumbing ----------------------------------------------------------------------------

    @web.middleware
    async def _count(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        metrics = self._metrics
        if metrics is None:
            return await handler(request)
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as e:  # aiohttp's own answers: 404 and 405 for no route
            status = e.status
            raise
        finally:
            resource = request.match_info.route.resource
            endpoint = resource.canonical if resource is not None else "(no route)"
            metrics.answered(request.method, endpoint, status)
            if endpoint.startswith("/schemas/ids/{id}"):
                metrics.looked_up(status == 200)

    @web.middleware
    async def _errors(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            return await handler(request)
        except RegistryError as e:
            return _answer(e.body(), e.status)
        except web.HTTPException as e:
            if e.status < 400:
                raise
            return _answer({"error_code": e.status, "message": e.reason}, e.status)
        except Exception:
            log.exception("schema registry: %s %s failed", request.method, request.path)
            return _answer({"error_code": 50001, "message": "Error in the backend data store"}, 500)

    @web.middleware
    async def _authenticate(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        authenticator = self._authenticator
        if authenticator is None:
            return await handler(request)
        header = request.headers.get("Authorization")
        loop = asyncio.get_running_loop()
        # A SCRAM check derives a key and may ask the metadata store: not on this loop.
        principal = await loop.run_in_executor(None, authenticator.principal, header)
        if principal is None:
            answer = _answer({"error_code": 401, "message": "Unauthorized"}, 401)
            answer.headers["WWW-Authenticate"] = 'Basic realm="odradek schema registry"'
            return answer
        changes_settings = request.method in ("PUT", "DELETE") and request.path.startswith(
            ("/config", "/mode")
        )
        if changes_settings and not authenticator.may_change_settings(principal):
            message = f"User {principal} is denied operation {request.method} {request.path}"
            return _answer({"error_code": 40301, "message": message}, 403)
        return await handler(request)

    async def _on_store(self, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    async def _read(self, query: Callable[[RegistryState], T]) -> T:
        return await self._on_store(functools.partial(self._store.read, query))

    @staticmethod
    async def _body(request: web.Request) -> Any:
        try:
            return json.loads(await request.read())
        except (ValueError, UnicodeDecodeError, RecursionError) as e:
            raise errors.bad_request(f"the body is not JSON: {e}") from e

    def _routes(self) -> list[web.RouteDef]:
        return [
            web.get("/", self._root),
            web.get("/contexts", self._contexts),
            web.get("/schemas/types", self._types),
            web.get("/schemas", self._schemas),
            web.get("/schemas/ids/{id}", self._schema_by_id),
            web.get("/schemas/ids/{id}/schema", self._raw_schema_by_id),
            web.get("/schemas/ids/{id}/subjects", self._id_subjects),
            web.get("/schemas/ids/{id}/versions", self._id_versions),
            web.get("/subjects", self._subjects),
            web.post("/subjects/{subject}", self._lookup),
            web.delete("/subjects/{subject}", self._delete_subject),
            web.get("/subjects/{subject}/versions", self._versions),
            web.post("/subjects/{subject}/versions", self._register),
            web.get("/subjects/{subject}/versions/{version}", self._version),
            web.delete("/subjects/{subject}/versions/{version}", self._delete_version),
            web.get("/subjects/{subject}/versions/{version}/schema", self._raw_version),
            web.get("/subjects/{subject}/versions/{version}/referencedby", self._referenced_by),
            web.post("/compatibility/subjects/{subject}/versions", self._compatible_all),
            web.post("/compatibility/subjects/{subject}/versions/{version}", self._compatible),
            web.get("/config", self._get_config),
            web.put("/config", self._put_config),
            web.delete("/config", self._delete_config),
            web.get("/config/{subject}", self._get_config),
            web.put("/config/{subject}", self._put_config),
            web.delete("/config/{subject}", self._delete_config),
            web.get("/mode", self._get_mode),
            web.put("/mode", self._put_mode),
            web.get("/mode/{subject}", self._get_mode),
            web.put("/mode/{subject}", self._put_mode),
            web.delete("/mode/{subject}", self._delete_mode),
        ]

    # -- schemas -----------------------------------------------------------------------------

    async def _root(self, request: web.Request) -> web.Response:
        return _answer({})

    async def _contexts(self, request: web.Request) -> web.Response:
        return _answer(await self._read(lambda s: s.contexts()))

    async def _types(self, request: web.Request) -> web.Response:
        return _answer(list(SCHEMA_TYPES))

    async def _schemas(self, request: web.Request) -> web.Response:
        prefix = request.query.get("subjectPrefix", "")
        deleted, latest_only = _flag(request, "deleted"), _flag(request, "latestOnly")

        def query(state: RegistryState) -> list[dict[str, object]]:
            found = []
            for subject in state.subject_names(deleted=deleted, prefix=prefix):
                versions = [
                    v
                    for _, v in sorted(state.subjects[subject].items())
                    if deleted or not v.deleted
                ]
                found += [v.answer() for v in (versions[-1:] if latest_only else versions)]
            return found

        return _answer(await self._read(query))

    async def _schema_by_id(self, request: web.Request) -> web.Response:
        schema_id, context = _schema_id(request), _id_context(request)
        content = await self._read(lambda s: s.schema_by_id(schema_id, context))
        return _answer(content_answer(content))

    async def _raw_schema_by_id(self, request: web.Request) -> web.Response:
        schema_id, context = _schema_id(request), _id_context(request)
        content = await self._read(lambda s: s.schema_by_id(schema_id, context))
        return web.Response(text=content.schema, content_type=MEDIA_TYPE)

    async def _id_subjects(self, request: web.Request) -> web.Response:
        schema_id, deleted = _schema_id(request), _flag(request, "deleted")
        context = _id_context(request)
        usages = await self._read(lambda s: s.id_usages(schema_id, context, deleted=deleted))
        return _answer(sorted({subject for subject, _ in usages}))

    async def _id_versions(self, request: web.Request) -> web.Response:
        schema_id, deleted = _schema_id(request), _flag(request, "deleted")
        context = _id_context(request)
        usages = await self._read(lambda s: s.id_usages(schema_id, context, deleted=deleted))
        return _answer([{"subject": subject, "version": version} for subject, version in usages])

    # -- subjects ----------------------------------------------------------------------------

    async def _subjects(self, request: web.Request) -> web.Response:
        prefix, deleted = request.query.get("subjectPrefix", ""), _flag(request, "deleted")
        return _answer(await self._read(lambda s: s.subject_names(deleted=deleted, prefix=prefix)))

    async def _versions(self, request: web.Request) -> web.Response:
        subject, deleted = _subject(request), _flag(request, "deleted")
        return _answer(await self._read(lambda s: s.versions(subject, deleted=deleted)))

    async def _version(self, request: web.Request) -> web.Response:
        subject, spec = _subject(request), request.match_info["version"]
        deleted = _flag(request, "deleted")
        found = await self._read(lambda s: s.version(subject, spec, deleted=deleted))
        return _answer(found.answer())

    async def _raw_version(self, request: web.Request) -> web.Response:
        subject, spec = _subject(request), request.match_info["version"]
        deleted = _flag(request, "deleted")
        found = await self._read(lambda s: s.version(subject, spec, deleted=deleted))
        return web.Response(text=found.content.schema, content_type=MEDIA_TYPE)

    async def _referenced_by(self, request: web.Request) -> web.Response:
        subject, spec = _subject(request), request.match_info["version"]

        def query(state: RegistryState) -> list[int]:
            found = state.version(subject, spec, deleted=True)
            return state.referenced_by(subject, found.version)

        return _answer(await self._read(query))

    async def _register(self, request: web.Request) -> web.Response:
        subject, normalize = _subject(request), _flag(request, "normalize")
        asked = _schema_request(await self._body(request))
        registered = await self._on_store(
            lambda: self._store.register(subject, asked, normalize=normalize)
        )
        return _answer({"id": registered.id})

    async def _lookup(self, request: web.Request) -> web.Response:
        subject = _subject(request)
        normalize, deleted = _flag(request, "normalize"), _flag(request, "deleted")
        asked = _schema_request(await self._body(request))
        found = await self._read(
            lambda s: s.lookup(subject, asked, normalize=normalize, deleted=deleted)
        )
        return _answer(found.answer())

    async def _delete_subject(self, request: web.Request) -> web.Response:
        subject, permanent = _subject(request), _flag(request, "permanent")
        answer = await self._on_store(
            lambda: self._store.change(
                lambda s: s.plan_delete_subject(subject, permanent=permanent)
            )
        )
        return _answer(answer)

    async def _delete_version(self, request: web.Request) -> web.Response:
        subject, spec = _subject(request), request.match_info["version"]
        permanent = _flag(request, "permanent")
        answer = await self._on_store(
            lambda: self._store.change(
                lambda s: s.plan_delete_version(subject, spec, permanent=permanent)
            )
        )
        return _answer(answer)

    # -- compatibility -----------------------------------------------------------------------

    async def _compatible_all(self, request: web.Request) -> web.Response:
        return await self._compatibility(request, None)

    async def _compatible(self, request: web.Request) -> web.Response:
        return await self._compatibility(request, request.match_info["version"])

    async def _compatibility(self, request: web.Request, version: str | None) -> web.Response:
        subject, normalize = _subject(request), _flag(request, "normalize")
        asked = _schema_request(await self._body(request))
        messages = await self._read(
            lambda s: s.compatibility_messages(subject, asked, version=version, normalize=normalize)
        )
        answer: dict[str, object] = {"is_compatible": not messages}
        if _flag(request, "verbose"):
            answer["messages"] = messages
        return _answer(answer)

    # -- config and mode ---------------------------------------------------------------------

    async def _get_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        default_to_global = _flag(request, "defaultToGlobal")
        level = await self._read(
            lambda s: s.compatibility(subject, default_to_global=default_to_global)
        )
        return _answer({"compatibilityLevel": level})

    async def _put_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        body = await self._body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("the body is not a JSON object")
        level = body.get("compatibility", body.get("compatibilityLevel"))
        answer = await self._on_store(
            lambda: self._store.change(lambda s: s.plan_config(subject, level))
        )
        return _answer(answer)

    async def _delete_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        answer = await self._on_store(
            lambda: self._store.change(lambda s: s.plan_delete_config(subject))
        )
        return _answer(answer)

    async def _get_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        default_to_global = _flag(request, "defaultToGlobal")
        mode = await self._read(lambda s: s.mode(subject, default_to_global=default_to_global))
        return _answer({"mode": mode})

    async def _put_mode(self, request: web.Request) -> web.Response:
        subject, force = request.match_info.get("subject"), _flag(request, "force")
        body = await self._body(request)
        if not isinstance(body, dict):
            raise errors.bad_request("the body is not a JSON object")
        mode = body.get("mode")
        answer = await self._on_store(
            lambda: self._store.change(lambda s: s.plan_mode(subject, mode, force=force))
        )
        return _answer(answer)

    async def _delete_mode(self, request: web.Request) -> web.Response:
        subject = _subject(request)
        answer = await self._on_store(
            lambda: self._store.change(lambda s: s.plan_delete_mode(subject))
        )
        return _answer(answer)
