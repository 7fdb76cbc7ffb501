"""`EntitySnapshotSource` on Postgres: a namespace's entity layer read at once for an in-memory
PPR snapshot, the change log of migration 0029, and the current state of the keys it names.

A build runs on a connection of its own, opened for it and closed after (never one of the read
pool's: a build may take minutes, a search waits at most seconds for a connection), with the
build's own statement timeout. It reads in one REPEATABLE READ transaction: first it counts what
the snapshot would hold (`SnapshotSize`) and is refused, before reading a row, when that is over
the bytes it may take; then entities, rows, mention pairs and walkable edges of one moment, the
entities' names and the alias table for the seed lookup, and that moment's `xmin`. The three big
tables come by binary COPY, parsed with numpy batch by batch (a mention pair is 42 bytes on the
wire; no Python object per pair) into arrays sized by the count: the answer is never held
whole, and a stream that delivers more than the cap allows is cancelled at once.

A key's state (`read_keys`) carries an entity's name, norm and alias norms, and an entity
merged away brings its survivor's state (a merge moves the aliases to the survivor, which may
log nothing itself). What "live" means is what `PgEntityGraph` means: a row whose object and
promoted object are not deleted, an entity not merged away.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import psycopg
from psycopg import sql
from psycopg_pool import AsyncConnectionPool

from pipeline.domain.entity_snapshot import (
    EntityState,
    KeyState,
    LogEntry,
    LogRead,
    SnapshotBuild,
    SnapshotLink,
    SnapshotRow,
    SnapshotSize,
    SnapshotTooLarge,
)
from pipeline.domain.errors import QueryTimeout, Unavailable
from pipeline.postgres.pool import AsyncConn, read_connection
from pipeline.retrieval.store.ppr_copy import GrowingArray, Records, stream_copy

_XMIN = "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint"
_ENTITIES = ("COPY (SELECT id, part_count, merged_into IS NULL FROM entities"
             " WHERE namespace_id = {ns} ORDER BY id) TO STDOUT (FORMAT BINARY)")
_ROW_STATE = ("o.id, p.id, o.parent_id IS NOT NULL,"
              " o.deleted_at IS NULL AND p.deleted_at IS NULL"
              " FROM objects o JOIN objects p ON p.id = coalesce(o.parent_id, o.id)")
_ROWS = ("COPY (SELECT " + _ROW_STATE + " WHERE o.namespace_id = {ns} ORDER BY o.id)"
         " TO STDOUT (FORMAT BINARY)")
# not DISTINCT: the CSR build drops repeated pairs after its sort, cheaper than a sort here
_MENTIONS = ("COPY (SELECT row_id, entity_id FROM mentions WHERE namespace_id = {ns})"
             " TO STDOUT (FORMAT BINARY)")
_WALKABLE = ("edge_type IN ('RELATES', 'POSSIBLY_SAME') AND status IS DISTINCT FROM 'refused'")
_LINKS = sql.SQL("SELECT from_id, to_id, edge_type, status, predicate FROM entity_edges"
                 " WHERE namespace_id = %(ns)s AND " + _WALKABLE)
_LINKS_OF = sql.SQL(
    "SELECT from_id, to_id, edge_type, status, predicate FROM entity_edges"
    " WHERE namespace_id = %(ns)s AND (from_id = ANY(%(ids)s::uuid[])"
    " OR to_id = ANY(%(ids)s::uuid[])) AND " + _WALKABLE)
# The reads by key write their namespace test `(...) IS TRUE`, which no index serves: statistics
# that predate a tenant estimate its namespace at about one row, and a read of a few keys was
# then planned as a scan of the namespace (tests/leanwrites/test_new_tenant_plans.py).
_ROW_STATES = sql.SQL(
    "SELECT " + _ROW_STATE + " WHERE (o.namespace_id = %(ns)s) IS TRUE"
    " AND (o.id = ANY(%(rows)s::uuid[]) OR o.id = ANY(%(objs)s::uuid[])"
    " OR o.parent_id = ANY(%(objs)s::uuid[]))")
_MENTIONS_OF = sql.SQL(
    "SELECT row_id, array_agg(DISTINCT entity_id) FROM mentions"
    " WHERE (namespace_id = %(ns)s) IS TRUE AND row_id = ANY(%(rows)s::uuid[])"
    " GROUP BY row_id")
_ENTITY_STATES = sql.SQL(
    "SELECT id, part_count, merged_into IS NULL, name, norm, merged_into FROM entities"
    " WHERE (namespace_id = %(ns)s) IS TRUE AND id = ANY(%(ids)s::uuid[])")
# The seed lookup's names: in entity order (the COPY's), and the alias table.
_NAMES = sql.SQL("SELECT name, norm FROM entities WHERE namespace_id = %(ns)s ORDER BY id")
_ALIASES = sql.SQL("SELECT norm, entity_id FROM entity_aliases WHERE namespace_id = %(ns)s")
_ALIASES_OF = sql.SQL(
    "SELECT entity_id, array_agg(norm) FROM entity_aliases"
    " WHERE (namespace_id = %(ns)s) IS TRUE AND entity_id = ANY(%(ids)s::uuid[])"
    " GROUP BY entity_id")
# One statement, one snapshot: the entries and the xmin of the snapshot that saw them.
_CHANGES = sql.SQL(
    "WITH s AS (SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint AS xmin)"
    " SELECT s.xmin, l.seq, l.xid::text::bigint, l.namespace_id, l.kind, l.ids FROM s"
    " LEFT JOIN ppr_snapshot_log l ON l.xid >= %(since)s::text::xid8 AND {cond}"
    " ORDER BY l.seq")

# What the snapshot would hold, counted in the build's own transaction before it reads a row
# (each by an index on the namespace; the mention pairs by the entities' index, as the COPY of
# the mentions counts them: with repeats).
_COUNTS = sql.SQL(
    "SELECT (SELECT count(*) FROM entities WHERE namespace_id = %(ns)s),"
    " (SELECT count(*) FROM objects WHERE namespace_id = %(ns)s),"
    " (SELECT count(*) FROM entities e JOIN mentions m ON m.entity_id = e.id"
    "  WHERE e.namespace_id = %(ns)s),"
    " (SELECT count(*) FROM entity_edges WHERE namespace_id = %(ns)s AND " + _WALKABLE + "),"
    " (SELECT count(*) FROM entity_aliases WHERE namespace_id = %(ns)s)")

_ENTITY_TUPLE = np.dtype([("n", ">i2"), ("l0", ">i4"), ("id", "S16"), ("l1", ">i4"),
                          ("count", ">i4"), ("l2", ">i4"), ("live", "u1")])
_ROW_TUPLE = np.dtype([("n", ">i2"), ("l0", ">i4"), ("id", "S16"), ("l1", ">i4"),
                       ("obj", "S16"), ("l2", ">i4"), ("part", "u1"), ("l3", ">i4"),
                       ("live", "u1")])
_PAIR_TUPLE = np.dtype([("n", ">i2"), ("l0", ">i4"), ("row", "S16"), ("l1", ">i4"),
                        ("entity", "S16")])
# The application name of a build's connection (what pg_stat_activity shows).
BUILD_APPLICATION = "brainstream-ppr-build"


def _uuids(column: Records) -> list[uuid.UUID]:
    raw = column.tobytes()
    return [uuid.UUID(bytes=raw[i: i + 16]) for i in range(0, len(raw), 16)]


def _link(r: tuple[Any, ...]) -> SnapshotLink:
    return SnapshotLink(r[0], r[1], r[2], r[3], r[4])


class _Cap:
    """A build's size against the bytes it may take: the counted size, each part replaced by
    what its stream delivered once it has."""

    def __init__(self, size: SnapshotSize, cap: int) -> None:
        self.size, self.cap, self.read = size, cap, 0

    def most(self, part: str) -> int:
        """The most tuples the stream of `part` may deliver."""
        rest = replace(self.size, **{part: 0}).nbytes()
        return max(0, self.cap - rest) // SnapshotSize(**{part: 1}).nbytes()

    def over(self, part: str) -> Callable[[int], SnapshotTooLarge]:
        """The error of a stream of `part` that delivered too many tuples."""
        return lambda n: SnapshotTooLarge(replace(self.size, **{part: n}).nbytes(), self.cap,
                                          self.read + n)

    def done(self, part: str, n: int) -> None:
        """The stream of `part` delivered `n` tuples."""
        self.size, self.read = replace(self.size, **{part: n}), self.read + n


class _Parsed:
    """The three streams' fields, in arrays sized by the count: entity and row ids (sorted:
    ORDER BY id, and bytes order is uuid order), and the mention pairs as entity and row
    numbers (pairs naming a key the build did not see are dropped)."""

    def __init__(self, size: SnapshotSize) -> None:
        self.e_ids = GrowingArray("S16", size.entities)
        self.e_count = GrowingArray(np.int64, size.entities)
        self.e_live = GrowingArray(bool, size.entities)
        self.r_ids = GrowingArray("S16", size.rows)
        self.r_obj = GrowingArray("S16", size.rows)
        self.r_part = GrowingArray(bool, size.rows)
        self.r_live = GrowingArray(bool, size.rows)
        self.m_rows = GrowingArray(np.int64, size.pairs)
        self.m_entities = GrowingArray(np.int64, size.pairs)

    def entities(self, batch: Records) -> None:
        self.e_ids.extend(batch["id"])
        self.e_count.extend(batch["count"])
        self.e_live.extend(batch["live"])

    def rows(self, batch: Records) -> None:
        self.r_ids.extend(batch["id"])
        self.r_obj.extend(batch["obj"])
        self.r_part.extend(batch["part"])
        self.r_live.extend(batch["live"])

    def pairs(self, batch: Records) -> None:
        entity_keys, row_keys = self.e_ids.values(), self.r_ids.values()
        e_at = np.searchsorted(entity_keys, batch["entity"])
        r_at = np.searchsorted(row_keys, batch["row"])
        known = (e_at < len(entity_keys)) & (r_at < len(row_keys))
        known[known] &= ((entity_keys[e_at[known]] == batch["entity"][known])
                         & (row_keys[r_at[known]] == batch["row"][known]))
        self.m_rows.extend(r_at[known])
        self.m_entities.extend(e_at[known])


def _assemble(xmin: int, parsed: _Parsed, links: list[SnapshotLink],
              names: list[tuple[str, str]], aliases: list[tuple[str, uuid.UUID]]
              ) -> SnapshotBuild:
    """The build from the parsed streams: an id object per key (the snapshot keeps them)."""
    row_ids, objects = _uuids(parsed.r_ids.values()), _uuids(parsed.r_obj.values())
    return SnapshotBuild(
        xmin=xmin, entity_ids=_uuids(parsed.e_ids.values()),
        entity_counts=parsed.e_count.values(), entity_live=parsed.e_live.values(),
        rows=[SnapshotRow(i, o, bool(p), bool(v)) for i, o, p, v in
              zip(row_ids, objects, parsed.r_part.values().tolist(),
                  parsed.r_live.values().tolist(), strict=True)],
        mention_rows=parsed.m_rows.values(), mention_entities=parsed.m_entities.values(),
        links=links, entity_names=[n for n, _ in names], entity_norms=[k for _, k in names],
        aliases=aliases)


async def _changes(conn: AsyncConn, since: int, namespace: uuid.UUID | None) -> LogRead:
    """Log entries of transactions `>= since` and the reading snapshot's xmin."""
    cond = (sql.SQL("true") if namespace is None else
            sql.SQL("(l.namespace_id = %(ns)s OR l.kind = 'truncate')"))
    cur = await conn.execute(_CHANGES.format(cond=cond),
                             {"since": str(since), "ns": namespace}, prepare=False)
    found = await cur.fetchall()
    entries = [LogEntry(int(r[1]), int(r[2]), r[3], r[4], tuple(r[5]))
               for r in found if r[1] is not None]
    return LogRead(entries, int(found[0][0]))


async def _read_keys(conn: AsyncConn, namespace: uuid.UUID, rows: Sequence[uuid.UUID],
                     objects: Sequence[uuid.UUID], entities: Sequence[uuid.UUID],
                     edge_entities: Sequence[uuid.UUID]) -> KeyState:
    """The keys' current state, read in one REPEATABLE READ transaction."""
    state = KeyState(asked_rows=set(rows) | set(objects))
    params = {"ns": namespace, "rows": list(rows), "objs": list(objects)}
    async with conn.transaction():
        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")

        async def fetch(query: sql.SQL, args: dict[str, Any]) -> list[tuple[Any, ...]]:
            cur = await conn.execute(query, args, prepare=False)
            return list(await cur.fetchall())

        if rows or objects:
            state.rows = [SnapshotRow(r[0], r[1], bool(r[2]), bool(r[3]))
                          for r in await fetch(_ROW_STATES, params)]
        if rows:
            state.mentions = {row: () for row in rows}
            state.mentions.update({r[0]: tuple(r[1]) for r in
                                   await fetch(_MENTIONS_OF, params)})
        if edge_entities:
            state.links = {e: [] for e in edge_entities}
            for r in await fetch(_LINKS_OF, {"ns": namespace, "ids": list(edge_entities)}):
                link = _link(r)
                for end in (link.from_id, link.to_id):
                    if end in state.links:
                        state.links[end].append(link)
        wanted = {*entities, *(e for ids in state.mentions.values() for e in ids),
                  *(e for links in state.links.values() for x in links
                    for e in (x.from_id, x.to_id))}
        found: dict[uuid.UUID, EntityState] = {e: EntityState(e, 0, False) for e in wanted}
        ask = set(wanted)
        while ask:
            # A merge moves the merged entity's aliases to its survivor, whose own state
            # may log nothing (no mention moved, the same count): it is read too.
            survivors: set[uuid.UUID] = set()
            for r in await fetch(_ENTITY_STATES, {"ns": namespace, "ids": list(ask)}):
                found[r[0]] = EntityState(r[0], int(r[1]), bool(r[2]), r[3], r[4])
                if r[5] is not None and r[5] not in found:
                    survivors.add(r[5])
            ask = survivors
        aliases: dict[uuid.UUID, tuple[str, ...]] = {e: () for e in found}
        if found:
            aliases.update((r[0], tuple(r[1])) for r in await fetch(
                _ALIASES_OF, {"ns": namespace, "ids": list(found)}))
        state.entities = [replace(e, aliases=aliases[e.id]) for e in found.values()]
    return state


class PgSnapshotBuild:
    """`SnapshotBuilder` on one connection of its own: the build, then its catch-up reads."""

    def __init__(self, conn: AsyncConn) -> None:
        self.conn = conn

    async def count(self, namespace: uuid.UUID) -> SnapshotSize:
        """What the namespace's snapshot would hold (in the caller's transaction, if any)."""
        cur = await self.conn.execute(_COUNTS, {"ns": namespace}, prepare=False)
        found = await cur.fetchone()
        assert found is not None
        return SnapshotSize(*(int(n) for n in found))

    async def build(self, namespace: uuid.UUID, room: Callable[[SnapshotSize], int]
                    ) -> SnapshotBuild:
        """The namespace's entity layer in one REPEATABLE READ transaction, counted first:
        refused before reading a row when over `room(size)` bytes, cancelled as soon as a
        stream crosses them."""
        conn = self.conn
        async with conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            row = await (await conn.execute(_XMIN)).fetchone()
            assert row is not None
            size = await self.count(namespace)
            cap = _Cap(size, room(size))
            if size.nbytes() > cap.cap:
                raise SnapshotTooLarge(size.nbytes(), cap.cap, 0)
            parsed = _Parsed(size)
            for part, statement, dtype, on_batch in (
                    ("entities", _ENTITIES, _ENTITY_TUPLE, parsed.entities),
                    ("rows", _ROWS, _ROW_TUPLE, parsed.rows),
                    ("pairs", _MENTIONS, _PAIR_TUPLE, parsed.pairs)):
                query = sql.SQL(statement).format(ns=sql.Literal(str(namespace)))  # a uuid
                cap.done(part, await stream_copy(conn, query, dtype, on_batch,
                                                 most=cap.most(part), over=cap.over(part)))
            cur = await conn.execute(_LINKS, {"ns": namespace}, prepare=False)
            links = [_link(r) for r in await cur.fetchall()]
            cur = await conn.execute(_NAMES, {"ns": namespace}, prepare=False)
            names = [(r[0], r[1]) for r in await cur.fetchall()]
            cur = await conn.execute(_ALIASES, {"ns": namespace}, prepare=False)
            aliases = [(r[0], r[1]) for r in await cur.fetchall()]
        # an id object per key, made off the event loop: a few hundred thousand at 100k parts
        return await asyncio.to_thread(_assemble, int(row[0]), parsed, links, names, aliases)

    async def changes(self, since: int, namespace: uuid.UUID | None = None) -> LogRead:
        """Log entries of transactions `>= since` and the reading snapshot's xmin."""
        return await _changes(self.conn, since, namespace)

    async def read_keys(self, namespace: uuid.UUID, rows: Sequence[uuid.UUID],
                        objects: Sequence[uuid.UUID], entities: Sequence[uuid.UUID],
                        edge_entities: Sequence[uuid.UUID]) -> KeyState:
        """The keys' current state, read in one REPEATABLE READ transaction."""
        return await _read_keys(self.conn, namespace, rows, objects, entities, edge_entities)


class PgEntitySnapshotSource:
    """The entity layer of one database for in-memory PPR snapshots: builds on connections
    of their own (to the read pool's database), the tail's reads on the read pool."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn], *, build_timeout: float = 300.0,
                 conninfo: str | None = None) -> None:
        self.pool = pool
        found = pool.conninfo if conninfo is None else conninfo
        if not isinstance(found, str):
            raise ValueError("a PPR snapshot source needs the read pool's database as a string")
        self.conninfo = found  # where builds connect: the read pool's database, by default
        self.build_timeout = build_timeout  # the build's statements, not the API's timeout

    @asynccontextmanager
    async def build_session(self) -> AsyncIterator[PgSnapshotBuild]:
        """A connection opened for one build and closed after; an unreachable database is
        `Unavailable`, a statement past the build timeout `QueryTimeout`."""
        try:
            conn = await psycopg.AsyncConnection.connect(
                self.conninfo, autocommit=True, connect_timeout=5,
                application_name=BUILD_APPLICATION,
                options=f"-c statement_timeout={max(1, round(self.build_timeout * 1000))}")
            async with conn:
                yield PgSnapshotBuild(conn)
        except psycopg.errors.QueryCanceled as exc:
            raise QueryTimeout("a PPR snapshot build ran past its statement timeout") from exc
        except psycopg.OperationalError as exc:
            raise Unavailable(f"postgres: {exc}") from exc

    async def changes(self, since: int, namespace: uuid.UUID | None = None) -> LogRead:
        """Log entries of transactions `>= since` and the reading snapshot's xmin."""
        async with read_connection(self.pool) as conn:
            return await _changes(conn, since, namespace)

    async def read_keys(self, namespace: uuid.UUID, rows: Sequence[uuid.UUID],
                        objects: Sequence[uuid.UUID], entities: Sequence[uuid.UUID],
                        edge_entities: Sequence[uuid.UUID]) -> KeyState:
        """The keys' current state, read in one REPEATABLE READ transaction."""
        async with read_connection(self.pool) as conn:
            return await _read_keys(conn, namespace, rows, objects, entities, edge_entities)
