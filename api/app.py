"""The read API: a thin FastAPI shell over pipeline.retrieval (its own process: `brainstream api`).

It parses and authenticates requests, calls the engine under the caller's namespace, and maps
results and errors to JSON. No SQL, ranking or validation logic lives here. This module only
assembles the application: the services' lifespan, the error handlers, the request limits
(`api/limits.py`) and the routers (`api/routes/`: search, graph, paths, objects, entities,
memory, memory search, events, admin, the operator's status, and the web explorer at /ui).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from psycopg_pool import PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException

from api import access, errors, limits, metrics
from api.read_routing import ReadRouting
from api.routes import (
    admin,
    entities,
    entity_pages,
    events,
    facts,
    graph,
    history,
    memory,
    memory_search,
    objects,
    operator,
    paths,
    search,
    ui,
)
from api.security_headers import SecurityHeaders, page_policy
from pipeline.domain.errors import BrainstreamError, ConfigError
from pipeline.kafka.event_writes import EventWriter
from pipeline.kafka.io import make_producer
from pipeline.kafka.publish_pool import PublishPool
from pipeline.kafka.publisher import EventPublisher, LazyPublisher
from pipeline.kafka.signing import signer_for
from pipeline.memory.writes import MessageWriter
from pipeline.settings import Settings, load_settings
from pipeline.supervisor.lifeline import API_PARENT_ENV
from pipeline.wiring import ActiveServices, Services, freeze_startup_heap
from pipeline.wiring.lexical_follower import ReplicaFollower
from pipeline.wiring.worker_readiness import WorkerReadiness

log = logging.getLogger(__name__)

# A safety net: closing the services must never block the stop. It once hung in the degrade
# test: the embedder's background retry swallowed the cancellation that `close` sent it while an
# attempt ran, and went on retrying (fixed in pipeline/domain/retry.py). Hitting this bound is a
# bug of the same kind: it is logged as an error with where the close was waiting.
SHUTDOWN_SECONDS = 10.0


async def _bounded(closing: Coroutine[Any, Any, None], seconds: float) -> None:
    """Run `closing`; past `seconds`, log an error naming where it waits, and leave it
    cancelled rather than block the stop."""
    task = asyncio.ensure_future(closing)
    done, _ = await asyncio.wait({task}, timeout=seconds)
    if not done:
        log.error("closing the API's services took over %.0f s (a close that never returns: "
                  "a bug); stopping without them. It was waiting at:\n%s", seconds,
                  "\n".join(_awaiting(task.get_coro())))
        task.cancel()


def _awaiting(awaitable: object) -> list[str]:
    """Where a suspended coroutine waits: each coroutine of its await chain, then what the
    innermost one awaits (a future, another task)."""
    where = []
    while awaitable is not None:
        frame = getattr(awaitable, "cr_frame", None)
        if frame is None:
            where.append(f"  awaiting {awaitable!r}")
            break
        where.append(f"  {frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}")
        awaitable = getattr(awaitable, "cr_await", None)
    return where


def create_app(settings: Settings | None = None,
               services: Services | None = None) -> FastAPI:
    """The API application; `services` may be injected (tests), else built at start-up."""
    settings = settings or load_settings()
    _check_operator_recipes(settings)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            if services is not None:  # injected (tests): used as is
                app.state.services = services
                yield
                return
            # the active index generation, followed across `brainstream replay` switches
            active = ActiveServices(settings, lambda svc: setattr(app.state, "services", svc))
            await active.start()
            # this host's lexical replicas (one process of the host writes, the others skip)
            follower = ReplicaFollower(settings)
            follower.start()
            freeze_startup_heap()
            # under `brainstream api`, /readyz is what every worker of the instance agrees on
            readiness = WorkerReadiness.for_instance(settings.result_set_redis_url,
                                                     settings.api_workers,
                                                     os.environ.get(API_PARENT_ENV))
            app.state.worker_readiness = readiness
            beat = None if readiness is None else asyncio.create_task(
                readiness.heartbeat(lambda: _services_ready(app)))
            try:
                yield
            finally:
                if beat is not None and readiness is not None:
                    beat.cancel()
                    await _bounded(readiness.close(), SHUTDOWN_SECONDS)
                await _bounded(asyncio.to_thread(follower.stop), SHUTDOWN_SECONDS)
                await _bounded(active.close(), SHUTDOWN_SECONDS)
        finally:
            app.state.publish_threads.close()
            app.state.memory_writer.close()
            app.state.decision_publisher.close()
            app.state.event_writer.close()
            await app.state.shared_limits.close()

    # /docs is served by api/routes/ui.py from this origin's files; no ReDoc (it loads a CDN)
    app = FastAPI(title="brainstream read API", version="1", lifespan=lifespan,
                  docs_url=None, redoc_url=None,
                  description="Hybrid search, exact find, entity and link find, graph "
                              "expansion and paths over a brainstream knowledge base. Every "
                              "call is scoped to the namespace of the caller's API key.")
    app.state.settings = settings
    app.state.worker_readiness = None  # this process's own readiness (set at start-up)
    app.state.api_keys = access.key_table(settings)  # secret -> the key's record
    # the write-through of memory messages publishes events like any publisher (its key signs);
    # a broker that does not answer fails the request within the wait, not the request deadline
    block_ms = round(settings.memory_write_wait * 1000)

    def make_publisher() -> EventPublisher:
        return EventPublisher(make_producer(settings, bootstrap_timeout_ms=block_ms,
                                            max_block_ms=block_ms),
                              settings.topic_events, signer_for(settings),
                              max_event_bytes=settings.max_event_bytes)

    # per-key limits shared by the API's processes (requests in flight, publishes per second)
    app.state.shared_limits = limits.shared_limits(settings)
    # every publish runs on these threads, never the default executor (publish_pool.py)
    threads = PublishPool(admit=app.state.shared_limits.check_publish)
    app.state.publish_threads = threads
    app.state.memory_writer = MessageWriter(make_publisher, threads=threads,
                                            wait_seconds=settings.memory_write_wait)
    # curators' decisions on entities are events too (pipeline/entities/decision_events.py)
    app.state.decision_publisher = LazyPublisher(make_publisher,
                                                 timeout=settings.memory_write_wait + 10.0)
    # POST /v1/events: callers' object and link events, with the same wait bound
    app.state.event_writer = EventWriter(make_publisher, threads=threads,
                                         wait_seconds=settings.memory_write_wait)

    app.exception_handler(BrainstreamError)(errors.brainstream_error)
    app.exception_handler(psycopg.OperationalError)(errors.database_down)
    app.exception_handler(PoolTimeout)(errors.database_down)
    app.exception_handler(StarletteHTTPException)(errors.http_error)
    app.exception_handler(RequestValidationError)(errors.validation_error)
    app.exception_handler(Exception)(errors.unexpected_error)
    # innermost of the middleware: a request's reads are routed once its key is known
    app.add_middleware(ReadRouting)
    limits.install(app, settings)  # before the metrics: their refusals are timed too
    app.middleware("http")(metrics.observe)
    # outermost: every answer carries the headers, refusals of the limits included
    app.add_middleware(SecurityHeaders, docs_policy=page_policy(ui.DOCS_HTML))

    # entity_pages before entities: `/v1/entities/possibly_same` before `/v1/entities/{id}`
    for area in (search, graph, paths, objects, history, entity_pages, entities, facts, memory,
                 memory_search, events, admin, operator, ui):
        app.include_router(area.router)
    ui.install(app)
    return app


async def _services_ready(app: FastAPI) -> bool:
    """Whether this worker's dependencies all answer (what its /readyz checks)."""
    checks = await app.state.services.check()
    return not any(checks.values())


def _check_operator_recipes(settings: Settings) -> None:
    """Operator-defined expand recipes (EXPAND_RECIPES) must be valid recipe specs: a bad one
    stops the API at start with the recipe named, instead of answering 500 to every tenant
    that lists or runs recipes."""
    from pydantic import ValidationError

    from api.schemas import RecipeBody
    from pipeline.retrieval.store.recipes import check_recipe_name

    for name, spec in settings.expand_recipes.items():
        try:
            check_recipe_name(name)
            RecipeBody.model_validate(spec)
        except (ValidationError, BrainstreamError) as exc:
            raise ConfigError(f"BRAINSTREAM_EXPAND_RECIPES: recipe {name!r}: {exc}") from exc
