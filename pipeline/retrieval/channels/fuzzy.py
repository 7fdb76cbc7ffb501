"""The fuzzy channel: near-spellings by fuzzy term queries on the lexical index
(`FuzzySearcher.search_fuzzy`): query words the namespace's index does not know, matched within
an edit distance (misspellings, variant codes). What the trigram channel does on Postgres.

Required, like the lexical channel: its failure fails the request.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from pipeline.domain.read_model import Filters, Hit
from pipeline.ports import FuzzySearcher


class FuzzyChannel:
    """`Channel` "fuzzy": rows holding near-spellings of the query's unknown words."""

    name: str = "fuzzy"
    degrade: str | None = None

    def __init__(self, searcher: FuzzySearcher) -> None:
        self.searcher = searcher

    async def candidates(self, namespace: uuid.UUID, query: str, filters: Filters,
                         scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k rows by the number of unknown query words they hold near."""
        return await self.searcher.search_fuzzy(namespace, query, filters, scope_ids, k)
