"""Memory search with the namespace's knowledge (`include_knowledge: true`): the same query
also searches the namespace's documents, with the retrieval engine's search in its default
mode, and the answer keeps the two apart (memory hits as they are, document hits beside them).

The document search is a guest in a memory answer: when it fails (Postgres, Redis or an
engine channel unavailable) the memory hits are answered and `degraded` says why the
knowledge is missing; when it answers degraded (e.g. lexical only), its `degrade` is passed
on. A bad request is the caller's, not a degradation: it raises, naming the field.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from pipeline.domain.errors import InvalidInput, Unavailable
from pipeline.domain.read_model import Page, RichObject, SearchQuery
from pipeline.retrieval.requests import MAX_LIMIT

log = logging.getLogger(__name__)

# `degraded` when the document search did not answer at all.
KNOWLEDGE_UNAVAILABLE = "knowledge_unavailable"

Search = Callable[[uuid.UUID, SearchQuery], Awaitable[Page]]


@dataclass(frozen=True)
class KnowledgeAnswer:
    objects: tuple[RichObject, ...]
    degraded: str | None = None


async def search_knowledge(search: Search, namespace: uuid.UUID, text: str, limit: int
                           ) -> KnowledgeAnswer:
    """The namespace's documents for `text` (the engine's default search, its first page of
    at most `limit` objects, at most the engine's page size)."""
    query = SearchQuery(query=text, limit=max(1, min(limit, MAX_LIMIT)))
    try:
        page = await search(namespace, query)
    except InvalidInput:
        raise
    except Unavailable as exc:
        log.warning("memory search: the knowledge search is unavailable: %s", exc)
        return KnowledgeAnswer((), KNOWLEDGE_UNAVAILABLE)
    return KnowledgeAnswer(page.objects, page.degrade)
