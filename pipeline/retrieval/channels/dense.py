"""The dense channel: the query embedded, then cosine similarity over the rows' vectors
(`PartSearcher.search_dense`).

Optional: when the embedder is missing, down or slower than the timeout, the channel is
left out and the answer is labelled `lexical_only` instead of failing (`ChannelDegraded`). The
database failing is not the embedder failing: the searcher's `Unavailable` fails the request
(a 503), as it does for every other channel.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence

from pipeline.domain.errors import ChannelDegraded, Unavailable
from pipeline.domain.read_model import Filters, Hit
from pipeline.ports import PartSearcher, QueryEmbedder

log = logging.getLogger(__name__)

LEXICAL_ONLY = "lexical_only"


class DenseChannel:
    """`Channel` "dense": the searcher's cosine top k for the embedded query."""

    name: str = "dense"
    degrade: str | None = LEXICAL_ONLY

    def __init__(self, searcher: PartSearcher, embed_query: QueryEmbedder | None, *,
                 embed_timeout: float) -> None:
        self.searcher = searcher
        self.embed_query = embed_query
        self.embed_timeout = embed_timeout

    async def candidates(self, namespace: uuid.UUID, query: str, filters: Filters,
                         scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k rows by cosine similarity; ChannelDegraded when the query cannot be embedded."""
        if self.embed_query is None:
            raise ChannelDegraded("no query embedder")
        try:
            vector = await asyncio.wait_for(self.embed_query(query), self.embed_timeout)
        except (TimeoutError, Unavailable) as exc:
            log.warning("embedder unavailable, answering lexical-only: %s", exc)
            raise ChannelDegraded(f"embedder: {exc}") from exc
        return await self.searcher.search_dense(namespace, vector, filters, scope_ids, k)
