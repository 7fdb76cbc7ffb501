"""A new host's lexical replica from a copy of another's, instead of a build from Postgres.

A build reads every searchable row of the database (hours at 100M documents: docs/scaling.md).
`snapshot` copies a current replica's indexes, under its writer lock so no commit is half in the
copy, with its cursor in `seed.json`, and holds the log beyond that cursor (a registration of
its own in `lexical_replicas`) so a prune keeps what the seed lacks. `seed` puts the copy in
place on the new host, registers the new replica at the seed's cursor and lets the hold go; its
follower then applies the log from there. A seed older than the log waits for it
(`REPLICA_TTL_SECONDS`) is refused: build instead.
"""

from __future__ import annotations

import json
import shutil
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from pipeline.domain.errors import InvalidInput
from pipeline.lexical import changes
from pipeline.lexical.changes import Cursor
from pipeline.lexical.documents import generation_dir, indexed_namespaces, namespace_dirs
from pipeline.lexical.replica import (
    ReplicaState,
    read_state,
    replica_lock,
    replica_name,
    write_state,
)
from pipeline.services.settings import StackSettings

SEED_FILE = "seed.json"


@dataclass(frozen=True)
class Seed:
    """What a copy holds: the database and generation it follows, its cursor, its hold."""

    database: str
    generation: int
    cursor: Cursor
    hold: str
    namespaces: int


def _database(settings: StackSettings) -> str:
    return str(conninfo_to_dict(settings.effective_postgres_dsn).get("dbname") or "postgres")


def snapshot(settings: StackSettings, pool: ConnectionPool[Any], target: Path) -> Seed:
    """Copy this host's current replica to `target` (a new directory) as a seed."""
    if target.exists() and any(target.iterdir()):
        raise InvalidInput(f"{target} is not empty", field="target")
    data_dir, generation = settings.resolved_data_dir, settings.generation
    me = replica_name(data_dir)
    with replica_lock(data_dir, generation, wait=True):
        state = read_state(settings)
        with pool.connection() as conn:
            current = state is not None and state.replica == me and changes.registered(conn, me)
        if state is None or not current:
            raise InvalidInput("this host's replica is not built: nothing to copy",
                               field="replica")
        names = sorted(indexed_namespaces(data_dir, generation))
        for namespace in names:
            shutil.copytree(generation_dir(data_dir, generation) / str(namespace),
                            target / str(namespace), ignore=shutil.ignore_patterns("*.lock"))
        held = f"seed:{uuid.uuid4().hex[:12]}"
        with pool.connection() as conn:
            changes.hold(conn, held, socket.gethostname(), str(target), state.cursor)
    seed = Seed(_database(settings), generation, state.cursor, held, len(names))
    (target / SEED_FILE).write_text(json.dumps({
        "database": seed.database, "generation": generation,
        "cursor": [seed.cursor.xid, seed.cursor.id], "hold": held}))
    return seed


def adopt_seed(settings: StackSettings, pool: ConnectionPool[Any], source: Path) -> Seed:
    """Make the copy at `source` this host's replica, current at its cursor (the follower
    applies the log from there)."""
    try:
        raw = json.loads((source / SEED_FILE).read_text())
        seed = Seed(str(raw["database"]), int(raw["generation"]),
                    Cursor(int(raw["cursor"][0]), int(raw["cursor"][1])), str(raw["hold"]), 0)
    except (FileNotFoundError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise InvalidInput(f"{source} holds no seed ({SEED_FILE}): {exc}",
                           field="source") from exc
    if (seed.database, seed.generation) != (_database(settings), settings.generation):
        raise InvalidInput(f"the seed follows database {seed.database} generation "
                           f"{seed.generation}, not this host's", field="source")
    data_dir, generation = settings.resolved_data_dir, settings.generation
    me = replica_name(data_dir)
    names = sorted(namespace_dirs(source))
    with replica_lock(data_dir, generation, wait=True):
        base = generation_dir(data_dir, generation)
        for namespace in names:
            path = base / str(namespace)
            shutil.rmtree(path, ignore_errors=True)
            shutil.copytree(source / str(namespace), path)
        with pool.connection() as conn:
            if not changes.adopt(conn, me, socket.gethostname(), str(data_dir), seed.cursor,
                                 seed.hold):
                raise InvalidInput("the seed is older than the change log keeps: build the "
                                   "replica from Postgres instead", field="source")
        write_state(settings, ReplicaState(me, seed.cursor))
    return Seed(seed.database, seed.generation, seed.cursor, seed.hold, len(names))

