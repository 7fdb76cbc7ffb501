"""Entity reads of the read API: entity find by name (`find_objects` with `include_entities`)
and the entity part of `/v1/schema` (labels and edge types with counts), per namespace."""

from __future__ import annotations

import uuid
from typing import Any

from pipeline.domain.read_model import EntityMatch
from pipeline.entities.names import normalise
from pipeline.ports import EntityReader
from pipeline.retrieval.requests import check_limit, query_text

# RELATES predicates the schema lists (the most frequent first).
MAX_SCHEMA_PREDICATES = 50


class EntityQueries:
    """Entity find and description over an `EntityReader`."""

    def __init__(self, reader: EntityReader, *, max_query_terms: int) -> None:
        self.reader = reader
        self.max_query_terms = max_query_terms

    async def find(self, namespace: uuid.UUID, query: str, limit: int) -> list[EntityMatch]:
        """Entities whose name (normalised: pipeline/entities/names.py) is the query's, an
        alias of it, or near it by trigrams; best first, at most `limit`."""
        check_limit(limit)
        norm = normalise(query_text(query, max_terms=self.max_query_terms))
        if not norm:  # only punctuation or an article: no name to match
            return []
        return await self.reader.find_by_name(namespace, norm, limit)

    async def describe(self, namespace: uuid.UUID) -> dict[str, Any]:
        """The namespace's entity labels and entity edge types with their counts (POSSIBLY_SAME
        by status), and its most frequent RELATES predicates."""
        edge_types: dict[str, dict[str, Any]] = {}
        for edge_type, status, count in await self.reader.edge_type_counts(namespace):
            entry = edge_types.setdefault(edge_type, {"type": edge_type, "count": 0})
            entry["count"] += count
            if status:
                entry.setdefault("by_status", {})[status] = count
        return {
            "labels": [{"label": label, "count": count}
                       for label, count in await self.reader.label_counts(namespace)],
            "edge_types": [edge_types[t] for t in sorted(edge_types)],
            "predicates": [{"predicate": p, "count": c} for p, c in
                           await self.reader.predicate_counts(namespace, MAX_SCHEMA_PREDICATES)],
        }
