"""The lexical channel: BM25 (`LexicalSearcher.search_lexical`: the SQL postings, or the Tantivy
index when LEXICAL_ENGINE is tantivy).

Required: a search cannot answer without it, so its failure fails the request.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from pipeline.domain.read_model import Filters, Hit
from pipeline.ports import LexicalSearcher


class LexicalChannel:
    """`Channel` "lexical": the searcher's BM25 top k."""

    name: str = "lexical"
    degrade: str | None = None

    def __init__(self, searcher: LexicalSearcher) -> None:
        self.searcher = searcher

    async def candidates(self, namespace: uuid.UUID, query: str, filters: Filters,
                         scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k rows by BM25."""
        return await self.searcher.search_lexical(namespace, query, filters, scope_ids, k)
