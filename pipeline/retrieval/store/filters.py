"""The searchable rows of a namespace as SQL, with filters and scope applied to the promoted object.

Every search channel reads `objects o JOIN objects p`, where `o` is a searchable row (a visible
part, or a visible first-class object without visible parts) and `p` is its promoted object (the
part's parent, or the object itself). Values always travel as placeholders; the only names put
into SQL are our own aliases and parameter names, and property keys are checked against
`PROPERTY_KEY_PATTERN` before they are even used as JSON keys.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from psycopg import sql
from psycopg.types.json import Jsonb

from pipeline.domain.errors import InvalidFilter
from pipeline.domain.kinds import is_valid_property_key
from pipeline.domain.read_model import Filters, Scalar
from pipeline.postgres.conditions import compile_condition

NO_FILTERS = Filters()

Query = sql.SQL | sql.Composed

# `o` = the searchable row, `p` = its promoted object: a part's parent, or the object itself.
# OFFSET 0 keeps the "no visible parts" test a per-row index probe: otherwise Postgres may hash
# it, reading every object of the namespace (75 ms at 100k rows) before an HNSW scan of 100.
SEARCHABLE_FROM = sql.SQL("objects o JOIN objects p ON p.id = coalesce(o.parent_id, o.id)")

_SEARCHABLE_WHERE = sql.SQL(
    "o.namespace_id = %(ns)s AND p.namespace_id = %(ns)s"
    " AND o.deleted_at IS NULL AND p.deleted_at IS NULL"
    " AND (o.parent_id IS NOT NULL OR NOT EXISTS ("
    "SELECT 1 FROM objects c WHERE c.parent_id = o.id AND c.namespace_id = %(ns)s"
    " AND c.deleted_at IS NULL OFFSET 0))"
)


# A `where` is tested once per promoted object of the namespace (a root: a parent is never a
# part; migrations/0046), not once per searchable row joined to it.
_ROOTS = sql.SQL("w.namespace_id = %(ns)s AND w.parent_id IS NULL AND w.deleted_at IS NULL")
# At most this many passing roots are handed to a statement as ids (`passing_roots`); beyond,
# the filter is not narrow and the semi-join of `filter_conditions` serves.
MAX_WHERE_ROOTS = 2000
# A lexical replica's list of a `where`'s objects is corrected by the change log rows it has
# not applied; more than this many (a bulk load it is still catching up with) and the objects
# are listed in Postgres instead: the correction's read stays bounded (~2 ms).
LOG_SCAN_ROWS = 5000


@dataclass(frozen=True)
class Fragment:
    """A WHERE condition and the parameters its placeholders name."""

    where: Query
    params: dict[str, Any]


def check_property_key(name: str) -> str:
    """`name` if it is a valid property key; InvalidFilter(field=name) otherwise."""
    if not is_valid_property_key(name):
        raise InvalidFilter(f"invalid property name {name!r}", field=name)
    return name


def like_escape(text: str) -> str:
    """`text` with LIKE's wildcards and escape character taken literally."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def property_documents(name: str, values: Sequence[Scalar]) -> list[Jsonb]:
    """Containment documents matching `name` = any of `values`, scalar or list-valued."""
    key = check_property_key(name)
    docs: list[Jsonb] = []
    for value in values:
        docs.append(Jsonb({key: value}))
        docs.append(Jsonb({key: [value]}))
    return docs


def filter_conditions(filters: Filters, scope_ids: Sequence[uuid.UUID], *,
                      promoted: str = "p", row: str = "o",
                      where_roots: Sequence[uuid.UUID] | None = None) -> Fragment:
    """Conditions on the promoted object (`promoted` alias) and the scope; TRUE when empty.
    A `where` names the namespace as `%(ns)s` (`searchable` supplies it); `where_roots`, when
    given, are exactly the promoted objects passing it (`passing_roots`).

    Time ranges are half-open: `*_after` is inclusive (>=), `*_before` exclusive (<), so
    adjacent ranges neither overlap nor leave a gap.
    """
    p = sql.Identifier(promoted)
    o = sql.Identifier(row)
    parts: list[Query] = []
    params: dict[str, Any] = {}
    if filters.kinds:
        parts.append(sql.SQL("{}.kind = ANY(%(f_kinds)s::text[])").format(p))
        params["f_kinds"] = list(filters.kinds)
    if filters.title is not None:
        parts.append(sql.SQL("{}.title ILIKE %(f_title)s").format(p))
        params["f_title"] = f"%{like_escape(filters.title)}%"
    for column, op, value in (("created_at", ">=", filters.created_after),
                              ("created_at", "<", filters.created_before),
                              ("updated_at", ">=", filters.updated_after),
                              ("updated_at", "<", filters.updated_before)):
        if value is not None:
            name = f"f_{column}_{'after' if op == '>=' else 'before'}"
            parts.append(sql.SQL("{}.{} {} {}").format(
                p, sql.Identifier(column), sql.SQL(op), sql.Placeholder(name)))
            params[name] = value
    for i, (name, values) in enumerate(filters.properties):
        docs = property_documents(name, values)
        if not docs:
            parts.append(sql.SQL("FALSE"))  # `in ()` matches nothing; it never widens
            continue
        holder = f"f_prop_{i}"
        parts.append(sql.SQL("{}.properties @> ANY({}::jsonb[])").format(
            p, sql.Placeholder(holder)))
        params[holder] = docs
    if where_roots is not None:
        # the promoted objects passing `where`, found first (`passing_roots`, or the host's
        # lexical replica): a condition on the row itself, which the planner can drive from
        # (parts by their parent's index)
        parts.append(sql.SQL("({}.parent_id = ANY(%(f_roots)s::uuid[]) OR ({}.parent_id IS NULL"
                             " AND {}.id = ANY(%(f_roots)s::uuid[])))").format(o, o, o))
        params["f_roots"] = list(where_roots)
    elif filters.where is not None:
        parts.append(sql.SQL("{}.id IN (SELECT w.id FROM objects w WHERE {} AND {})").format(
            p, _ROOTS, compile_condition(filters.where, params, sql.SQL("w.properties"))))
    if scope_ids:
        parts.append(sql.SQL(
            "({}.id = ANY(%(f_scope)s::uuid[]) OR {}.id = ANY(%(f_scope)s::uuid[]))").format(p, o))
        params["f_scope"] = list(scope_ids)
    if not parts:
        return Fragment(sql.SQL("TRUE"), params)
    return Fragment(sql.SQL(" AND ").join(parts), params)


def searchable(namespace: uuid.UUID, filters: Filters = NO_FILTERS,
               scope_ids: Sequence[uuid.UUID] = (),
               where_roots: Sequence[uuid.UUID] | None = None) -> Fragment:
    """The WHERE of `FROM SEARCHABLE_FROM`: searchable rows of `namespace`, filtered."""
    extra = filter_conditions(filters, scope_ids, where_roots=where_roots)
    where = sql.SQL("{} AND {}").format(_SEARCHABLE_WHERE, extra.where)
    return Fragment(where, {"ns": namespace, **extra.params})


def lagging_roots(namespace: uuid.UUID, filters: Filters, cursor: tuple[int, int]
                  ) -> Fragment:
    """The statement listing the promoted objects of `namespace` whose changes a lexical
    replica at `cursor` has not applied (its change log rows beyond it), each with whether it
    passes `filters.where` now: what the replica's own list of passing objects may have wrong.
    Each row also says how many log rows were read (all namespaces'): at most
    LOG_SCAN_ROWS, so a replica that far behind costs a bounded read and its listing is not
    used. At least one row (root NULL when none lag)."""
    assert filters.where is not None
    params: dict[str, Any] = {"ns": namespace, "f_scan": LOG_SCAN_ROWS,
                              "f_xid": str(cursor[0]), "f_id": cursor[1]}
    test = compile_condition(filters.where, params, sql.SQL("w.properties"))
    return Fragment(sql.SQL(
        "WITH l AS MATERIALIZED (SELECT namespace_id, root_id FROM lexical_log"
        " WHERE (xid, id) > (%(f_xid)s::text::xid8, %(f_id)s) ORDER BY xid, id"
        " LIMIT %(f_scan)s)"
        " SELECT (SELECT count(*) FROM l), r.root_id, w.id IS NOT NULL FROM (SELECT 1) AS one"
        " LEFT JOIN (SELECT DISTINCT root_id FROM l WHERE namespace_id = %(ns)s) AS r ON true"
        " LEFT JOIN objects w ON w.id = r.root_id AND {} AND {}").format(_ROOTS, test), params)


def passing_roots(namespace: uuid.UUID, filters: Filters) -> Fragment | None:
    """The statement listing the promoted objects of `namespace` passing `filters.where`, at
    most MAX_WHERE_ROOTS + 1 of them (more: hand the statement the semi-join instead); None
    without a `where`."""
    if filters.where is None:
        return None
    params: dict[str, Any] = {"ns": namespace, "f_cap": MAX_WHERE_ROOTS + 1}
    test = compile_condition(filters.where, params, sql.SQL("w.properties"))
    return Fragment(sql.SQL("SELECT w.id FROM objects w WHERE {} AND {} LIMIT %(f_cap)s").format(
        _ROOTS, test), params)
