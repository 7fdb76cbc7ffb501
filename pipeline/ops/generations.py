"""Index generations, the write side: create one for a replay, record its marker, switch reads to
it, drop it, and apply migrations to every live one. One at a time: each change holds the
generations' advisory lock. What a generation is, and which one is active, is in
`pipeline/generations/active.py`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from pipeline.domain.errors import InvalidInput, NotFound
from pipeline.generations.active import (
    COLUMNS,
    FIRST_GROUP,
    Generation,
    active_generation,
    connect_base,
    get_generation,
    has_table,
    implicit_first,
    list_generations,
    row_to_generation,
)
from pipeline.settings import Settings

log = logging.getLogger(__name__)

_LOCK_KEY = 0x6272_6169_6E67  # serializes generation creation, switch and drop
# Data tables of a generation (what `drop` empties when the generation is the base database).
DATA_TABLES = ("outbox", "deferred_events", "links", "objects", "processed_events")
Report = Callable[[str], None]


def _noop(_: str) -> None:
    pass


@contextlib.contextmanager
def _control(base: Settings) -> Iterator[psycopg.Connection[tuple[Any, ...]]]:
    """An autocommit connection to the control table, holding the generations' lock (one
    create, activate or drop at a time)."""
    with connect_base(base, autocommit=True) as conn:
        _require_table(conn)
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        try:
            yield conn
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))


def _seed_first(conn: psycopg.Connection[tuple[Any, ...]], base: Settings) -> None:
    """Record the implicit generation 1 (the base database) as a row."""
    meta = conn.execute("SELECT value FROM brainstream_meta WHERE key = 'embedding_dim'"
                        ).fetchone()
    first = implicit_first(base)
    dim = int(str(meta[0])) if meta else first.embedding_dim
    conn.execute(
        "INSERT INTO index_generations (id, dbname, graph_name, consumer_group, embedder,"
        " embedding_dim, state, handoff_at, activated_at)"
        " VALUES (1, %s, %s, %s, %s, %s, 'active', now(), now()) ON CONFLICT (id) DO NOTHING",
        (first.dbname, first.graph_name, first.consumer_group, first.embedder, dim))


def _require_table(conn: psycopg.Connection[tuple[Any, ...]]) -> None:
    if not has_table(conn):
        raise InvalidInput("the database has no index_generations table: run "
                           "`brainstream migrate` first", field="generation")


def create_generation(base: Settings, *, embedder: str, embedding_dim: int,
                      since: datetime | None = None, report: Report = _noop) -> Generation:
    """Record a new `building` generation, create and migrate its database, copy the kind
    catalog and expand recipes from the active generation, and prepare its graph."""
    from pipeline.graph.falkordb.schema import connect as graph_connect, prepare_graph
    from pipeline.ops.migrations import apply_migrations

    with _control(base) as conn:
        with conn.transaction():
            _seed_first(conn, base)
            row = conn.execute("SELECT coalesce(max(id), 1) + 1 FROM index_generations"
                               ).fetchone()
            gen_id = int(row[0]) if row else 2
            first = implicit_first(base)
            gen = Generation(
                id=gen_id, dbname=f"{first.dbname}_g{gen_id}",
                graph_name=f"{base.graph_name}_g{gen_id}",
                consumer_group=f"{FIRST_GROUP}-g{gen_id}", embedder=embedder,
                embedding_dim=embedding_dim, state="building", since=since)
            conn.execute(
                "INSERT INTO index_generations (id, dbname, graph_name, consumer_group,"
                " embedder, embedding_dim, state, since) VALUES (%s, %s, %s, %s, %s, %s,"
                " 'building', %s)",
                (gen.id, gen.dbname, gen.graph_name, gen.consumer_group, gen.embedder,
                 gen.embedding_dim, since))
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                              (gen.dbname,)).fetchone()
        if exists:  # a leftover of a replay that failed before recording its row
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(
                sql.Identifier(gen.dbname)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(gen.dbname)))
    report(f"generation {gen.id}: database {gen.dbname}, graph {gen.graph_name}, "
           f"consumer group {gen.consumer_group}, embedder {embedder} ({embedding_dim} dims)")
    settings = gen.settings(base)
    try:
        apply_migrations(settings)
        _copy_configuration(active_generation(base).settings(base), settings)
        db = graph_connect(settings)
        if gen.graph_name in db.list_graphs():
            db.select_graph(gen.graph_name).delete()  # a leftover graph of the same name
        prepare_graph(settings, report=report)
    except BaseException as exc:
        mark_failed(base, gen.id, f"creating the generation: {type(exc).__name__}: {exc}")
        raise
    return gen


def _copy_configuration(source: Settings, target: Settings) -> None:
    """What is not in the topic but shapes how events apply: the kind catalog (validation,
    chunking, functional relation types) and the expand recipes (every namespace's and the
    stored defaults)."""
    with psycopg.connect(source.effective_postgres_dsn) as src:
        kinds = src.execute("SELECT kind, spec, created_at, updated_at FROM object_kinds"
                            ).fetchall()
        recipes = src.execute("SELECT namespace_id, name, spec, created_at, updated_at"
                              " FROM expand_recipes").fetchall()
        relations = src.execute("SELECT relation_type, spec, created_at, updated_at"
                                " FROM relation_types").fetchall()
    with psycopg.connect(target.effective_postgres_dsn) as dst, dst.transaction(), \
            dst.cursor() as cur:
        cur.executemany("INSERT INTO object_kinds (kind, spec, created_at, updated_at)"
                        " VALUES (%s, %s, %s, %s) ON CONFLICT (kind) DO NOTHING",
                        [(k, Jsonb(s), c, u) for k, s, c, u in kinds])
        cur.executemany("INSERT INTO expand_recipes (namespace_id, name, spec, created_at,"
                        " updated_at) VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        [(ns, n, Jsonb(s), c, u) for ns, n, s, c, u in recipes])
        # functional relation types decide how link events cut each other's validity
        cur.executemany("INSERT INTO relation_types (relation_type, spec, created_at,"
                        " updated_at) VALUES (%s, %s, %s, %s) ON CONFLICT DO NOTHING",
                        [(t, Jsonb(s), c, u) for t, s, c, u in relations])


def record_marker(base: Settings, generation_id: int, marker: dict[str, Any]) -> None:
    """Remember where the replay's marker records went (for `generations list` and recovery)."""
    with connect_base(base) as conn:
        conn.execute("UPDATE index_generations SET marker = %s WHERE id = %s",
                     (Jsonb(marker), generation_id))


def mark_handoff(base: Settings, generation_id: int) -> None:
    """The generation's consumer-group offsets are committed: a live consumer may join it."""
    with connect_base(base) as conn:
        conn.execute("UPDATE index_generations SET handoff_at = now() WHERE id = %s",
                     (generation_id,))


def mark_failed(base: Settings, generation_id: int, note: str) -> None:
    """A replay gave up: the generation can only be dropped."""
    with connect_base(base) as conn:
        conn.execute("UPDATE index_generations SET state = 'failed', note = %s"
                     " WHERE id = %s AND state = 'building'", (note[:2000], generation_id))


def activate(base: Settings, generation_id: int, *, caught_up: bool = False) -> Generation:
    """Switch reads and writes to a generation: one transaction retires the active row and
    activates this one (atomic for every reader of the pointer). A generation whose replay has
    not handed off is refused unless the replay itself says it `caught_up`."""
    with _control(base) as conn, conn.transaction():
        _seed_first(conn, base)
        row = conn.execute(f"SELECT {COLUMNS} FROM index_generations WHERE id = %s"
                           " FOR UPDATE", (generation_id,)).fetchone()
        if row is None:
            raise NotFound(f"no index generation {generation_id}", field="generation")
        gen = row_to_generation(row)
        if gen.state == "active":
            return gen
        if gen.state not in ("building", "retired"):
            raise InvalidInput(f"generation {gen.id} is {gen.state}; only a built or "
                               "retired generation can be activated",
                               field="generation")
        if gen.handoff_at is None and not caught_up:
            raise InvalidInput(f"generation {gen.id} has not caught up yet (its replay "
                               "did not finish)", field="generation")
        conn.execute("UPDATE index_generations SET state = 'retired',"
                     " retired_at = now() WHERE state = 'active'")
        conn.execute("UPDATE index_generations SET state = 'active',"
                     " activated_at = now() WHERE id = %s", (gen.id,))
    return get_generation(base, generation_id)


def drop_generation(base: Settings, generation_id: int, *, report: Report = _noop) -> None:
    """Drop a generation that is not active: its database (generation 1, the base database
    that holds the control table, is emptied instead) and its graph."""
    from pipeline.graph.falkordb.schema import connect as graph_connect

    gen = get_generation(base, generation_id)
    if gen.state == "active":
        raise InvalidInput(f"generation {gen.id} is active; activate another one first",
                           field="generation")
    if gen.state == "building" and gen.handoff_at is None:
        report(f"warning: generation {gen.id} was still building; a replay still running "
               "into it will fail")
    with _control(base) as conn:
        if gen.id == 1:
            with conn.transaction():
                conn.execute(sql.SQL("TRUNCATE {} CASCADE").format(
                    sql.SQL(", ").join(sql.Identifier(t) for t in DATA_TABLES)))
            report(f"generation 1: emptied {', '.join(DATA_TABLES)} in {gen.dbname} "
                   "(the base database holds the control table and stays)")
        else:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(gen.dbname)))
            report(f"generation {gen.id}: dropped database {gen.dbname}")
        conn.execute("UPDATE index_generations SET state = 'dropped', dropped_at = now()"
                     " WHERE id = %s", (gen.id,))
    db = graph_connect(base)
    if gen.graph_name in db.list_graphs():
        db.select_graph(gen.graph_name).delete()
        report(f"generation {gen.id}: deleted graph {gen.graph_name}")


def apply_to_live(base: Settings, action: Callable[[Settings], None]) -> list[int]:
    """Run `action` on the active generation and on any that is building (configuration such
    as the kind catalog must reach a generation a replay is filling)."""
    done = []
    for gen in list_generations(base):
        if gen.state == "active" or (gen.state == "building" and not gen.implicit):
            action(gen.settings(base))
            done.append(gen.id)
    return done


def migrate_generations(base: Settings, *, postgres: bool = True, graph: bool = True,
                        report: Report = _noop) -> list[int]:
    """`brainstream migrate` for every generation that still has a database: new migration
    files and graph indexes must reach a retired or building generation too, or activating it
    later would serve an old schema. Each is migrated with its own embedder's dimension.
    Returns the versions applied to the base database."""
    from pipeline.graph.falkordb.schema import prepare_graph
    from pipeline.ops.lexical import rebuild_stale_lexical
    from pipeline.ops.migrations import apply_migrations

    first = get_generation(base, 1)
    applied: list[int] = []
    if postgres:
        applied = apply_migrations(first.settings(base), report=report)
    for gen in list_generations(base):
        if gen.state in ("dropped", "failed"):
            continue
        settings = gen.settings(base)
        if postgres and gen.id != 1:
            for version in apply_migrations(settings):
                report(f"postgres: generation {gen.id}: applied migration {version:04d}")
        if postgres and settings.lexical_engine == "tantivy":
            # indexes written with an older schema than the code's, rebuilt from Postgres
            for namespace in rebuild_stale_lexical(settings):
                report(f"lexical: generation {gen.id}: rebuilt the index of {namespace}"
                       " (older schema)")
        if graph:
            prepare_graph(settings, report=report)
    return applied
