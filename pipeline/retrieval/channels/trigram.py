"""The trigram channel: near-spellings of query words the namespace's vocabulary does not know
(`PartSearcher.search_trigram`: misspellings, variant codes).

Required, like the lexical channel: its failure fails the request.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from pipeline.domain.read_model import Filters, Hit
from pipeline.ports import PartSearcher


class TrigramChannel:
    """`Channel` "trigram": the searcher's rows holding near words of the query's words."""

    name: str = "trigram"
    degrade: str | None = None

    def __init__(self, searcher: PartSearcher) -> None:
        self.searcher = searcher

    async def candidates(self, namespace: uuid.UUID, query: str, filters: Filters,
                         scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k rows by trigram word similarity."""
        return await self.searcher.search_trigram(namespace, query, filters, scope_ids, k)
