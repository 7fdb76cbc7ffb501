"""The read API: a thin FastAPI shell over pipeline.retrieval (its own process: `brainstream api`).

It parses and authenticates requests, calls the engine under the caller's namespace, and maps
results and errors to JSON. No SQL, ranking or validation logic lives here.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

import psycopg
from fastapi import Depends, FastAPI, Header, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from psycopg_pool import PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from api import metrics
from api.schemas import (
    ChildrenOut,
    ContinueBody,
    ErrorOut,
    ExpandBody,
    ExpandManyBody,
    FindLinksBody,
    FindObjectsBody,
    PageOut,
    RecipeBody,
    RecipeRunBody,
    RichObjectOut,
    SearchBody,
)
from api.wiring import ActiveServices, Services
from pipeline.domain.errors import (
    BrainstreamError,
    InvalidInput,
    NamespaceForbidden,
    NotFound,
    Unauthorized,
    Unavailable,
)
from pipeline.domain.read_model import ExpandQuery, Filters, SearchQuery
from pipeline.domain.settings import Settings, load_settings

STATUS = {
    NotFound: 404,
    Unauthorized: 401,
    NamespaceForbidden: 403,
    Unavailable: 503,
    InvalidInput: 422,
}

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "the body is not valid JSON"},
    401: {"model": ErrorOut, "description": "missing or unknown API key"},
    403: {"model": ErrorOut, "description": "the key is not bound to that namespace"},
    404: {"model": ErrorOut, "description": "not found in this namespace"},
    422: {"model": ErrorOut, "description": "invalid request (the error names the field)"},
    503: {"model": ErrorOut, "description": "a dependency is unavailable"},
}


def status_of(exc: BrainstreamError) -> int:
    for cls, status in STATUS.items():
        if isinstance(exc, cls):
            return status
    return 500


def error_response(exc: BrainstreamError) -> JSONResponse:
    return JSONResponse(status_code=status_of(exc), content={"error": exc.to_dict()})


def get_services(request: Request) -> Services:
    svc: Services = request.app.state.services
    return svc


def namespace(request: Request, authorization: Annotated[str | None, Header()] = None,
              x_namespace: Annotated[str | None, Header()] = None) -> uuid.UUID:
    """The caller's namespace, from its API key (and X-Namespace when it has several)."""
    settings: Settings = request.app.state.settings
    if not authorization or not authorization.lower().startswith("bearer "):
        raise Unauthorized("missing bearer API key", field="Authorization")
    namespaces = settings.api_keys.get(authorization[7:].strip())
    if not namespaces:
        raise Unauthorized("unknown API key", field="Authorization")
    if x_namespace is None:
        if len(namespaces) != 1:
            raise InvalidInput("this key has several namespaces: name one with X-Namespace",
                               field="X-Namespace")
        chosen = namespaces[0]
    elif x_namespace in namespaces:
        chosen = x_namespace
    else:
        raise NamespaceForbidden("the key is not bound to that namespace", field="X-Namespace")
    try:
        return uuid.UUID(chosen)
    except ValueError as exc:
        raise Unauthorized("the key's namespace is not a UUID") from exc


Ns = Annotated[uuid.UUID, Depends(namespace)]
Svc = Annotated[Services, Depends(get_services)]


def create_app(settings: Settings | None = None,
               services: Services | None = None) -> FastAPI:
    """The API application; `services` may be injected (tests), else built at start-up."""
    settings = settings or load_settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if services is not None:  # injected (tests): used as is
            app.state.services = services
            yield
            return
        # the active index generation, followed across `brainstream replay` switches
        active = ActiveServices(settings, lambda svc: setattr(app.state, "services", svc))
        await active.start()
        try:
            yield
        finally:
            await active.close()

    app = FastAPI(title="brainstream read API", version="1", lifespan=lifespan,
                  description="Hybrid search, exact find, entity and link find, and graph "
                              "expansion over a brainstream knowledge base. Every call is "
                              "scoped to the namespace of the caller's API key.")
    app.state.settings = settings

    @app.exception_handler(BrainstreamError)
    async def _brainstream_error(request: Request, exc: BrainstreamError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(psycopg.OperationalError)
    @app.exception_handler(PoolTimeout)
    async def _database_down(request: Request, exc: Exception) -> JSONResponse:
        # Postgres restarting or unreachable wherever the query ran: a 503 the client may
        # retry, never a 500 (most reads map this already: stores.postgres.read.read_connection).
        return error_response(Unavailable(f"postgres: {type(exc).__name__}: {exc}"))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}
        return JSONResponse(status_code=exc.status_code, headers=exc.headers,
                            content={"error": {"code": codes.get(exc.status_code, "http_error"),
                                               "message": str(exc.detail), "field": None}})

    @app.exception_handler(RequestValidationError)
    async def _validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        loc = [str(p) for p in first.get("loc", ())]
        if loc and loc[0] in ("body", "query", "path", "header"):
            loc = loc[1:]  # where it came from, not which field
        field = ".".join(loc) or None
        empty = first.get("type") in ("missing", "string_too_short", "string_pattern_mismatch")
        code = "query_required" if field == "query" and empty else "invalid_request"
        message = f"{field or 'request'}: {first.get('msg')}"
        if field is None and first.get("type") == "model_attributes_type":
            message = "the body must be a JSON object (send Content-Type: application/json)"
        return JSONResponse(status_code=422, content={"error": {
            "code": code, "message": message, "field": field or "body"}})

    @app.middleware("http")
    async def _observe(request: Request,
                       call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        started = time.perf_counter()
        response = await call_next(request)
        route = request.scope.get("route")
        path = getattr(route, "path", "unmatched")
        metrics.REQUEST_SECONDS.labels(path, request.method, str(response.status_code)) \
            .observe(time.perf_counter() - started)
        return response

    def page(result: Any, endpoint: str) -> PageOut:
        if result.degrade:
            metrics.DEGRADED.labels(endpoint, result.degrade).inc()
        return PageOut.of(result)

    @app.post("/v1/search", response_model=PageOut, responses=ERRORS, tags=["search"])
    async def search(body: SearchBody, ns: Ns, svc: Svc) -> PageOut:
        """Hybrid retrieval over parts (BM25 + trigram + dense, RRF, decay), promoted to their
        objects with evidence."""
        return page(await svc.engine.search(ns, _search_query(body)), "search")

    @app.post("/v1/find_exact", response_model=PageOut, responses=ERRORS, tags=["search"])
    async def find_exact(body: SearchBody, ns: Ns, svc: Svc) -> PageOut:
        """Equality first (id, title, property value, quoted phrase), then lexical + trigram."""
        return page(await svc.engine.find_exact(ns, _search_query(body)), "find_exact")

    @app.post("/v1/find_objects", response_model=PageOut, responses=ERRORS, tags=["graph"])
    async def find_objects(body: FindObjectsBody, ns: Ns, svc: Svc) -> PageOut:
        """Entity search in the graph (text + vector, RRF), hydrated under the namespace."""
        filters = body.filters.to_filters() if body.filters else Filters()
        return page(await svc.graph.find_objects(ns, body.query, body.kinds or [], filters,
                                                 body.limit), "find_objects")

    @app.post("/v1/find_links", response_model=PageOut, responses=ERRORS, tags=["graph"])
    async def find_links(body: FindLinksBody, ns: Ns, svc: Svc) -> PageOut:
        """Edge-note text search on one relation type; each hit is the target object with its
        relation (`relation.source_id` is the source)."""
        return page(await svc.graph.find_links(ns, body.relation_type, body.query,
                                               body.limit), "find_links")

    @app.post("/v1/expand", response_model=PageOut, responses=ERRORS, tags=["graph"])
    async def expand(body: ExpandBody, ns: Ns, svc: Svc) -> PageOut:
        """Containment and/or graph neighbors of one object (max_hops <= 4), paged."""
        query = ExpandQuery((body.object_id,), tuple(body.relation_types or ()), body.max_hops,
                            body.direction, body.limit, body.want_containment)
        return page(await svc.graph.expand(ns, query), "expand")

    @app.post("/v1/expand_many", response_model=PageOut, responses=ERRORS, tags=["graph"])
    async def expand_many(body: ExpandManyBody, ns: Ns, svc: Svc) -> PageOut:
        """Neighbors of many objects within a budget; the first seed to reach one claims it."""
        query = ExpandQuery(tuple(body.object_ids), tuple(body.relation_types or ()),
                            body.max_hops, body.direction, body.limit, body.want_containment,
                            body.neighbor_budget)
        return page(await svc.graph.expand_many(ns, query), "expand_many")

    @app.put("/v1/expand/recipes/{name}", response_model=RecipeBody, responses=ERRORS,
             tags=["graph"])
    async def register_recipe(name: str, body: RecipeBody, ns: Ns, svc: Svc) -> RecipeBody:
        """Register (or replace) a named expand template, shared by every API process."""
        await svc.recipes.put(name, body.model_dump())
        return body

    @app.post("/v1/expand/recipe/{name}", response_model=PageOut, responses=ERRORS,
              tags=["graph"])
    async def run_recipe(name: str, body: RecipeRunBody, ns: Ns, svc: Svc) -> PageOut:
        """Run a registered expand template on one or more objects."""
        spec = RecipeBody.model_validate(await svc.recipes.get(name))
        query = ExpandQuery(tuple(body.object_ids), tuple(spec.relation_types or ()),
                            spec.max_hops, spec.direction, body.limit or spec.limit,
                            spec.want_containment, spec.neighbor_budget)
        if len(body.object_ids) == 1 and spec.neighbor_budget is None:
            return page(await svc.graph.expand(ns, query), "expand_recipe")
        return page(await svc.graph.expand_many(ns, query), "expand_recipe")

    @app.post("/v1/continue", response_model=PageOut, responses=ERRORS, tags=["search"])
    async def continue_(body: ContinueBody, ns: Ns, svc: Svc) -> PageOut:
        """The next page of a result set (a snapshot shared by every API process)."""
        return page(await svc.engine.continue_page(ns, body.result_set_id, body.limit),
                    "continue")

    @app.get("/v1/objects/{object_id}", response_model=RichObjectOut, responses=ERRORS,
             tags=["objects"])
    async def read(object_id: uuid.UUID, ns: Ns, svc: Svc) -> RichObjectOut:
        """One object with its content."""
        return RichObjectOut.of(await svc.engine.read(ns, object_id), with_content=True)

    @app.get("/v1/objects/{object_id}/children", response_model=ChildrenOut, responses=ERRORS,
             tags=["objects"])
    async def children(object_id: uuid.UUID, ns: Ns, svc: Svc, offset: int = 0,
                       limit: int = 100) -> ChildrenOut:
        """The parts of an object, in order, with their content."""
        parts = await svc.engine.children(ns, object_id, offset=offset, limit=limit)
        return ChildrenOut(objects=[RichObjectOut.of(p, with_content=True) for p in parts])

    @app.get("/v1/schema", responses=ERRORS, tags=["objects"])
    async def schema(ns: Ns, svc: Svc, kind: str | None = None) -> dict[str, Any]:
        """Kinds with their filterable fields, and how to filter."""
        return await svc.describe_schema(kind)

    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["ops"], responses={503: {"description": "a dependency is down"}})
    async def readyz(svc: Svc) -> JSONResponse:
        """Readiness: each dependency answers (503 with details otherwise)."""
        checks = await svc.check()
        ready = all(v == "ok" for v in checks.values())
        return JSONResponse(status_code=200 if ready else 503,
                            content={"status": "ready" if ready else "degraded",
                                     "checks": checks,
                                     "generation": svc.settings.generation})

    @app.get("/metrics", tags=["ops"], include_in_schema=False)
    async def prometheus() -> Response:
        return Response(generate_latest(metrics.REGISTRY), media_type=CONTENT_TYPE_LATEST)

    return app


def _search_query(body: SearchBody) -> SearchQuery:
    return SearchQuery(query=body.query,
                       filters=body.filters.to_filters() if body.filters else Filters(),
                       limit=body.limit, scope_ids=tuple(body.scope_ids or ()))
