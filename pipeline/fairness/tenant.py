"""The tenant a request acts for, carried in a context variable from the API's middleware to
the read pool (`pipeline.postgres.pool.read_connection`) and the publishing threads, so neither
needs the request passed down."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from contextvars import Context, ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from pipeline.fairness.connections import ConnectionShare

T = TypeVar("T")


def tenant_id(api_key: str) -> str:
    """A stable name for a key that is not the key: what Redis and the logs see."""
    return hashlib.sha256(api_key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Tenant:
    """One API key's request: its name (`tenant_id`), this process's connection share, and
    the key's own limits (its record in API_KEYS)."""

    id: str
    connections: ConnectionShare
    max_in_flight: int
    publish_rate: float


_CURRENT: ContextVar[Tenant | None] = ContextVar("brainstream_tenant", default=None)


def current_tenant() -> Tenant | None:
    """The tenant of the running request (None outside one: workers, consumers, tests)."""
    return _CURRENT.get()


@contextmanager
def acting_as(tenant: Tenant) -> Iterator[None]:
    """Run the block (and the tasks it starts) as `tenant`."""
    token = _CURRENT.set(tenant)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def detached(coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """Start `coro` as a task of no request: a background task started while serving one (a
    snapshot build, a recount) would otherwise inherit its tenant and charge its connections
    to that key's share for as long as it runs."""
    return asyncio.get_running_loop().create_task(coro, context=Context())
