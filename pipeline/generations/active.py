"""Index generations, the read side: which database, graph and consumer group the pipeline and
the API use now (every process that follows a switch reads this; `pipeline/ops/generations.py`
creates, switches and drops them).

A generation is a Postgres database on the configured server, a FalkorDB graph and a Kafka
consumer group. `brainstream replay` builds a new one from the input topic while the current one
keeps serving; the switch is one UPDATE of the control table `index_generations` (in the base
database), and every process re-reads the active row (`ActivePointer`, a short TTL) and follows.

Generation 1 is the base database and graph (the embedded database or `POSTGRES_DSN`'s, and
`GRAPH_NAME`) and the consumer group `brainstream-consumer`, so a deployment that never
replayed works exactly as before: until the first replay records it, generation 1 is implicit
(no row is needed).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from pipeline.domain.errors import NotFound
from pipeline.services.settings import FIRST_CONSUMER_GROUP, PG_DATABASE
from pipeline.settings import Settings

log = logging.getLogger(__name__)

FIRST_GROUP = FIRST_CONSUMER_GROUP

@dataclass(frozen=True)
class Generation:
    """One row of `index_generations`."""

    id: int
    dbname: str
    graph_name: str
    consumer_group: str
    embedder: str
    embedding_dim: int
    state: str
    marker: dict[str, Any] = field(default_factory=dict)
    since: datetime | None = None
    handoff_at: datetime | None = None
    note: str | None = None
    created_at: datetime | None = None
    activated_at: datetime | None = None
    implicit: bool = False  # generation 1 before any replay recorded it

    def settings(self, base: Settings) -> Settings:
        """`base` addressing this generation (generation 1 is the base database itself)."""
        return base.for_generation(
            self.id, dbname=None if self.id == 1 else self.dbname, graph_name=self.graph_name,
            consumer_group=self.consumer_group, embedder=self.embedder,
            embedding_dim=self.embedding_dim)


COLUMNS = ("id, dbname, graph_name, consumer_group, embedder, embedding_dim, state, marker,"
            " since, handoff_at, note, created_at, activated_at")


def row_to_generation(row: tuple[Any, ...]) -> Generation:
    """A generation from a row of `COLUMNS`."""
    return Generation(id=int(row[0]), dbname=row[1], graph_name=row[2], consumer_group=row[3],
                      embedder=row[4], embedding_dim=int(row[5]), state=row[6],
                      marker=dict(row[7] or {}), since=row[8], handoff_at=row[9], note=row[10],
                      created_at=row[11], activated_at=row[12])


def base_dbname(base: Settings) -> str:
    """The name of the base database (generation 1)."""
    return str(conninfo_to_dict(base.base_postgres_dsn).get("dbname") or PG_DATABASE)


def implicit_first(base: Settings) -> Generation:
    """Generation 1 as the settings describe it (before the control table has a row)."""
    return Generation(id=1, dbname=base_dbname(base), graph_name=base.graph_name,
                      consumer_group=FIRST_GROUP, embedder=base.embedder,
                      embedding_dim=base.vector_dim, state="active", implicit=True)


def connect_base(base: Settings, **kwargs: Any) -> psycopg.Connection[tuple[Any, ...]]:
    """A connection to the base database, which holds the control table."""
    return psycopg.connect(base.base_postgres_dsn, **kwargs)


def has_table(conn: psycopg.Connection[tuple[Any, ...]]) -> bool:
    """Whether the control table exists (a database `migrate` never ran on has none)."""
    row = conn.execute("SELECT to_regclass('index_generations')").fetchone()
    return row is not None and row[0] is not None


def list_generations(base: Settings) -> list[Generation]:
    """Every generation, oldest first (generation 1 implicit when no replay ever ran)."""
    with connect_base(base, connect_timeout=5) as conn:
        if not has_table(conn):
            return [implicit_first(base)]
        rows = conn.execute(f"SELECT {COLUMNS} FROM index_generations ORDER BY id").fetchall()
    found = [row_to_generation(r) for r in rows]
    if not any(g.id == 1 for g in found):
        first = implicit_first(base)
        if any(g.state == "active" for g in found):
            first = Generation(**{**first.__dict__, "state": "retired"})
        found.insert(0, first)
    return found


def get_generation(base: Settings, generation_id: int) -> Generation:
    """One generation; NotFound when there is no such id."""
    for gen in list_generations(base):
        if gen.id == generation_id:
            return gen
    raise NotFound(f"no index generation {generation_id}", field="generation")


def active_generation(base: Settings) -> Generation:
    """The generation readers and writers use now."""
    gens = list_generations(base)
    for gen in gens:
        if gen.state == "active":
            return gen
    return gens[0]  # unreachable while the one-active invariant holds; be safe anyway


def resolve(base: Settings, generation_id: int | None = None) -> Settings:
    """`base` addressing the active generation, or the named one."""
    gen = active_generation(base) if generation_id is None else get_generation(base,
                                                                             generation_id)
    return gen.settings(base)


class ActivePointer:
    """The active generation, re-read at most every `ttl` seconds (thread-safe).

    A process that follows switches (worker, consumer) calls `current()` before its work; the
    cost is one small query per TTL. If the base database cannot be reached, the last known
    generation is kept: a switch is noticed once it answers again.
    """

    def __init__(self, base: Settings, ttl: float = 1.0) -> None:
        self.base = base
        self.ttl = ttl
        self._value: Generation | None = None
        self._at = 0.0
        self._lock = threading.Lock()

    def current(self) -> Generation:
        with self._lock:
            if self._value is None or time.monotonic() - self._at > self.ttl:
                try:
                    self._value = active_generation(self.base)
                except psycopg.OperationalError as exc:
                    if self._value is None:
                        raise
                    log.warning("cannot read the active generation (%s); keeping %d", exc,
                                self._value.id)
                self._at = time.monotonic()
            return self._value
