"""The SQL of a delete by source or filter (`brainstream.objects.soft_delete`): which live
first-class objects of a namespace match, counted for a dry run, and soft-deleted with their
parts by the consumer.

The filters are the search's (`pipeline/retrieval/store/filters.py: filter_conditions`, on the
object itself as the promoted row), so a filter means here what it means to a search, and a
condition added there applies here too. Every statement names the namespace: a caller counts
and deletes only its own objects.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import tuple_row

from pipeline.domain.write_model import Selection
from pipeline.postgres.pool import AsyncConn
from pipeline.postgres.timing import EVENT_TIME
from pipeline.retrieval.store.filters import Fragment, filter_conditions

Conn = psycopg.Connection[Any]


def matching(namespace: uuid.UUID, selection: Selection) -> Fragment:
    """The WHERE over `objects p`: the namespace's live first-class objects the selection
    matches (`objects_ns_source` serves a source; the search's indexes serve the filters)."""
    extra = filter_conditions(selection.filters, (), promoted="p", row="p")
    parts: list[sql.Composable] = [sql.SQL(
        "p.namespace_id = %(d_ns)s AND p.parent_id IS NULL AND p.deleted_at IS NULL")]
    # `ns`: a `where` semi-joins the namespace's objects under that name (filters.py)
    params: dict[str, Any] = {"d_ns": namespace, "ns": namespace, **extra.params}
    if selection.source is not None:
        parts.append(sql.SQL("p.source = %(d_source)s"))
        params["d_source"] = selection.source
    parts.append(extra.where)
    return Fragment(sql.SQL(" AND ").join(parts), params)


def _counting(namespace: uuid.UUID, selection: Selection, sample: int) -> Fragment:
    # One statement: the count, and the first `sample` ids in the order a delete takes them.
    where = matching(namespace, selection)
    return Fragment(sql.SQL(
        "SELECT (SELECT count(*) FROM objects p WHERE {w}),"
        " ARRAY(SELECT p.id FROM objects p WHERE {w} ORDER BY p.id LIMIT {n})"
    ).format(w=where.where, n=sql.Literal(sample)), where.params)


def count_matching(conn: Conn, namespace: uuid.UUID, selection: Selection,
                   sample: int) -> tuple[int, list[uuid.UUID]]:
    """How many objects the selection matches now, and the first `sample` of their ids (in id
    order: the order a delete takes them in). A dry run's answer."""
    query = _counting(namespace, selection, sample)
    row = conn.cursor(row_factory=tuple_row).execute(query.where, query.params).fetchone()
    return (int(row[0]), list(row[1])) if row else (0, [])


async def count_matching_async(conn: AsyncConn, namespace: uuid.UUID, selection: Selection,
                               sample: int) -> tuple[int, list[uuid.UUID]]:
    """`count_matching` on the API's connections."""
    query = _counting(namespace, selection, sample)
    cur = conn.cursor(row_factory=tuple_row)
    row = await (await cur.execute(query.where, query.params)).fetchone()
    return (int(row[0]), list(row[1])) if row else (0, [])


def soft_delete_matching(conn: Conn, namespace: uuid.UUID, selection: Selection, *,
                         limit: int, event_id: str) -> list[uuid.UUID]:
    """Soft-delete the first `limit` matching objects in id order (locked in that order, so two
    transactions cannot deadlock on them) and their visible parts, stamped with the event time
    as a delete by id is (a re-put of one revives exactly the parts this hid); their ids.

    A row already deleted is not matched, so applying the same selection again deletes nothing
    twice."""
    where = matching(namespace, selection)
    rows = conn.execute(sql.SQL(
        "WITH hit AS (SELECT p.id FROM objects p WHERE {where} ORDER BY p.id LIMIT {limit}"
        " FOR UPDATE OF p), t AS (SELECT " + EVENT_TIME + " AS at)"
        " UPDATE objects o SET deleted_at = (SELECT at FROM t), updated_at = (SELECT at FROM t),"
        " event_id = %(d_event)s FROM hit WHERE o.id = hit.id RETURNING o.id"
    ).format(where=where.where, limit=sql.Literal(limit)),
        {**where.params, "d_event": event_id}).fetchall()
    ids = sorted(row[0] for row in rows)
    if ids:
        conn.execute(
            "UPDATE objects c SET deleted_at = o.deleted_at, updated_at = o.deleted_at"
            " FROM objects o WHERE o.id = ANY(%s) AND c.parent_id = o.id"
            " AND c.deleted_at IS NULL", (ids,))
    return ids
