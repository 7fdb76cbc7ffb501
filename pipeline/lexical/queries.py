"""Search filters as Tantivy queries, applied inside the engine (not after it).

The semantics are `pipeline/retrieval/store/filters.py`'s: every condition judges the promoted
object; kinds are `any of`; the title is a case-insensitive substring; time ranges are half-open
(`*_after` inclusive, `*_before` exclusive); a property matches when its value, or an element of
its list, equals one of the given values (JSON types kept: "5" is not 5, 5 is 5.0); scope keeps
a row whose own id or promoted object's id is listed. Filter clauses score 0, so a filtered
search ranks by BM25 alone, like the SQL one.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Sequence

import tantivy

from pipeline.domain.conditions import instant
from pipeline.domain.errors import InvalidFilter
from pipeline.domain.kinds import is_valid_property_key
from pipeline.domain.read_model import Filters, Scalar
from pipeline.lexical.conditions import condition_query
from pipeline.lexical.documents import (
    CREATED,
    KIND,
    LEAD,
    PROPERTIES,
    ROOT_ID,
    ROW_ID,
    SCHEMA,
    TITLE,
    UPDATED,
    micros,
)

# The characters Rust's regex syntax gives a meaning to (escaped in a title filter).
_REGEX_META = set("\\.+*?()|[]{}^$#&-~")


def lead_documents() -> tantivy.Query:
    """Each object's one lead document (facets, sorts and `where` listings count objects on
    these alone)."""
    return tantivy.Query.range_query(SCHEMA, LEAD, tantivy.FieldType.Unsigned,
                                     lower_bound=1, upper_bound=1)


def regex_literal(text: str) -> str:
    """`text` as a regex matching it literally (Tantivy's regex syntax)."""
    return "".join("\\" + c if c in _REGEX_META else c for c in text)


def _range(field: str, lower: int | None, upper: int | None) -> tantivy.Query:
    return tantivy.Query.range_query(SCHEMA, field, tantivy.FieldType.Integer,
                                     lower_bound=lower, upper_bound=upper,
                                     include_lower=True, include_upper=upper is None)


def _term_value(value: Scalar) -> Scalar | dt.datetime:
    # the index holds instant-shaped strings as dates (documents.json_properties)
    moment = instant(value)
    return moment if moment is not None else value


def filter_clauses(filters: Filters, scope_ids: Sequence[uuid.UUID]) -> list[tantivy.Query]:
    """One query per condition (all must match); [] without filters or scope."""
    clauses: list[tantivy.Query] = []
    if filters.kinds:
        clauses.append(tantivy.Query.term_set_query(SCHEMA, KIND, list(filters.kinds)))
    if filters.title is not None:
        pattern = ".*" + regex_literal(filters.title.lower()) + ".*"
        clauses.append(tantivy.Query.regex_query(SCHEMA, TITLE, pattern))
    for field, after, before in ((CREATED, filters.created_after, filters.created_before),
                                 (UPDATED, filters.updated_after, filters.updated_before)):
        if after is not None or before is not None:
            clauses.append(_range(field, None if after is None else micros(after),
                                  None if before is None else micros(before)))
    for name, values in filters.properties:
        if not is_valid_property_key(name):
            raise InvalidFilter(f"invalid property name {name!r}", field=name)
        if not values:
            clauses.append(tantivy.Query.empty_query())  # `in ()` matches nothing
            continue
        path = f"{PROPERTIES}.{name}"
        clauses.append(tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(SCHEMA, path, _term_value(v)))
             for v in values]))
    if filters.where is not None:
        clauses.append(condition_query(filters.where))
    if scope_ids:
        ids = [str(i) for i in scope_ids]
        clauses.append(tantivy.Query.boolean_query([
            (tantivy.Occur.Should, tantivy.Query.term_set_query(SCHEMA, ROW_ID, ids)),
            (tantivy.Occur.Should, tantivy.Query.term_set_query(SCHEMA, ROOT_ID, ids))]))
    return clauses


def filtered(scoring: tantivy.Query, filters: Filters,
             scope_ids: Sequence[uuid.UUID]) -> tantivy.Query:
    """`scoring` restricted by the filters and scope (which add nothing to the score)."""
    clauses = filter_clauses(filters, scope_ids)
    if not clauses:
        return scoring
    return tantivy.Query.boolean_query(
        [(tantivy.Occur.Must, scoring)]
        + [(tantivy.Occur.Must, tantivy.Query.const_score_query(c, 0.0)) for c in clauses])
