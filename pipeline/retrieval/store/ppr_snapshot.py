"""`EntitySnapshotSource` on Postgres: a namespace's entity layer read at once for an in-memory
PPR snapshot, the change log of migration 0029, and the current state of the keys it names.

The build reads in one REPEATABLE READ transaction (entities, rows, mention pairs and walkable
edges of one moment, the entities' names and the alias table for the seed lookup, and that
moment's `xmin`), the three big tables by binary COPY parsed with numpy (a mention pair is 42
bytes on the wire; no Python object per pair). A key's state (`read_keys`) carries an
entity's name, norm and alias norms, and an entity merged away brings its survivor's state
(a merge moves the aliases to the survivor, which may log nothing itself). What "live" means is
what `PgEntityGraph` means: a row whose object and promoted object are not deleted, an entity
not merged away.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
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
)
from pipeline.postgres.pool import AsyncConn, read_connection

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

# Binary COPY: a 19-byte header, then per tuple a field count (int16) and per field its length
# (int32) and bytes; every column here is NOT NULL and of fixed width. Big-endian.
_HEADER = 19
_ENTITY_TUPLE = np.dtype([("n", ">i2"), ("l0", ">i4"), ("id", "V16"), ("l1", ">i4"),
                          ("count", ">i4"), ("l2", ">i4"), ("live", "u1")])
_ROW_TUPLE = np.dtype([("n", ">i2"), ("l0", ">i4"), ("id", "V16"), ("l1", ">i4"),
                       ("obj", "V16"), ("l2", ">i4"), ("part", "u1"), ("l3", ">i4"),
                       ("live", "u1")])
_PAIR_TUPLE = np.dtype([("n", ">i2"), ("l0", ">i4"), ("row", "S16"), ("l1", ">i4"),
                        ("entity", "S16")])


def _tuples(data: bytes, dtype: np.dtype[Any]) -> np.ndarray[Any, np.dtype[Any]]:
    """The fixed-width tuples of a binary COPY (header and the -1 trailer cut off)."""
    body = data[_HEADER:-2]
    return np.frombuffer(body, dtype=dtype, count=len(body) // dtype.itemsize)


def _uuids(column: np.ndarray[Any, np.dtype[Any]]) -> list[uuid.UUID]:
    raw = column.tobytes()
    return [uuid.UUID(bytes=raw[i: i + 16]) for i in range(0, len(raw), 16)]


def _link(r: tuple[Any, ...]) -> SnapshotLink:
    return SnapshotLink(r[0], r[1], r[2], r[3], r[4])


def _assemble(xmin: int, entity_data: bytes, row_data: bytes, pair_data: bytes,
              links: list[SnapshotLink], names: list[tuple[str, str]],
              aliases: list[tuple[str, uuid.UUID]]) -> SnapshotBuild:
    """The build from the three binary COPYs: mention pairs mapped to entity and row numbers
    (both key arrays are sorted: ORDER BY id, and bytes order is uuid order)."""
    entities = _tuples(entity_data, _ENTITY_TUPLE)
    rows = _tuples(row_data, _ROW_TUPLE)
    pairs = _tuples(pair_data, _PAIR_TUPLE)
    entity_keys = entities["id"].copy().view("S16")
    row_keys = rows["id"].copy().view("S16")
    e_at = np.searchsorted(entity_keys, pairs["entity"])
    r_at = np.searchsorted(row_keys, pairs["row"])
    known = ((e_at < len(entity_keys)) & (r_at < len(row_keys)))
    known[known] &= ((entity_keys[e_at[known]] == pairs["entity"][known])
                     & (row_keys[r_at[known]] == pairs["row"][known]))
    row_ids, objects = _uuids(rows["id"]), _uuids(rows["obj"])
    return SnapshotBuild(
        xmin=xmin, entity_ids=_uuids(entities["id"]),
        entity_counts=entities["count"].astype(np.int64),
        entity_live=entities["live"].astype(bool),
        rows=[SnapshotRow(i, o, bool(p), bool(v)) for i, o, p, v in
              zip(row_ids, objects, rows["part"].tolist(), rows["live"].tolist(),
                  strict=True)],
        mention_rows=r_at[known].astype(np.int64),
        mention_entities=e_at[known].astype(np.int64), links=links,
        entity_names=[n for n, _ in names], entity_norms=[k for _, k in names],
        aliases=aliases)


class PgEntitySnapshotSource:
    """The entity layer of one database for in-memory PPR snapshots."""

    def __init__(self, pool: AsyncConnectionPool[AsyncConn], *, build_timeout: float = 300.0
                 ) -> None:
        self.pool = pool
        self.build_timeout = build_timeout  # the build's statements, not the API's timeout

    async def _copy(self, conn: AsyncConn, statement: str, namespace: uuid.UUID) -> bytes:
        query = sql.SQL(statement).format(ns=sql.Literal(str(namespace)))  # a uuid literal
        chunks: list[bytes] = []
        async with conn.cursor() as cur, cur.copy(query) as copy:
            async for chunk in copy:
                chunks.append(bytes(chunk))
        return b"".join(chunks)

    async def build(self, namespace: uuid.UUID) -> SnapshotBuild:
        """The namespace's entity layer in one REPEATABLE READ transaction."""
        async with read_connection(self.pool) as conn, conn.transaction():
            await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            await conn.execute("SELECT set_config('statement_timeout', %s, true)",
                               (f"{int(self.build_timeout * 1000)}ms",))
            row = await (await conn.execute(_XMIN)).fetchone()
            assert row is not None
            entities = await self._copy(conn, _ENTITIES, namespace)
            rows = await self._copy(conn, _ROWS, namespace)
            pairs = await self._copy(conn, _MENTIONS, namespace)
            cur = await conn.execute(_LINKS, {"ns": namespace}, prepare=False)
            links = [_link(r) for r in await cur.fetchall()]
            cur = await conn.execute(_NAMES, {"ns": namespace}, prepare=False)
            names = [(r[0], r[1]) for r in await cur.fetchall()]
            cur = await conn.execute(_ALIASES, {"ns": namespace}, prepare=False)
            aliases = [(r[0], r[1]) for r in await cur.fetchall()]
        # parsed off the event loop: a few hundred thousand ids at 100k parts
        return await asyncio.to_thread(_assemble, int(row[0]), entities, rows, pairs, links,
                                       names, aliases)

    async def changes(self, since: int, namespace: uuid.UUID | None = None) -> LogRead:
        """Log entries of transactions `>= since` and the reading snapshot's xmin."""
        cond = (sql.SQL("true") if namespace is None else
                sql.SQL("(l.namespace_id = %(ns)s OR l.kind = 'truncate')"))
        async with read_connection(self.pool) as conn:
            cur = await conn.execute(_CHANGES.format(cond=cond),
                                     {"since": str(since), "ns": namespace}, prepare=False)
            found = await cur.fetchall()
        entries = [LogEntry(int(r[1]), int(r[2]), r[3], r[4], tuple(r[5]))
                   for r in found if r[1] is not None]
        return LogRead(entries, int(found[0][0]))

    async def read_keys(self, namespace: uuid.UUID, rows: Sequence[uuid.UUID],
                        objects: Sequence[uuid.UUID], entities: Sequence[uuid.UUID],
                        edge_entities: Sequence[uuid.UUID]) -> KeyState:
        """The keys' current state, read in one REPEATABLE READ transaction."""
        state = KeyState(asked_rows=set(rows) | set(objects))
        params = {"ns": namespace, "rows": list(rows), "objs": list(objects)}
        async with read_connection(self.pool) as conn, conn.transaction():
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
