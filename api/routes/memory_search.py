"""Memory search routes (issue 12): one session, or every live session of one user, searched
by hybrid retrieval over messages and summaries (`pipeline/memory/search.py`). Scoped
to the namespace of the caller's API key; a session of another namespace is absent (404)."""

from __future__ import annotations

import asyncio
import uuid

from fastapi import APIRouter

from api.access import ReadNs
from api.dependencies import Svc
from api.errors import ERRORS
from api.memory_search_schemas import MemorySearchBody, MemorySearchOut, UserMemorySearchBody
from api.routes.memory import SessionId
from pipeline.domain.memory_errors import MemorySessionNotFound
from pipeline.memory.knowledge import search_knowledge
from pipeline.memory.search import MemoryAnswer, MemorySearch, MemorySearchLimits
from pipeline.memory.store.search import PgMemorySearcher
from pipeline.wiring.services import Services, query_embedder

router = APIRouter(tags=["memory"], responses=ERRORS)
# The most sessions one user-wide memory search reads (the first by session id).
MAX_SESSIONS = 1000


def _search(svc: Services) -> tuple[MemorySearch, PgMemorySearcher]:
    searcher = PgMemorySearcher(svc.pool)
    return MemorySearch(searcher, query_embedder(lambda: svc.embedder),
                        MemorySearchLimits()), searcher


async def _answer(search: MemorySearch, svc: Services, ns: uuid.UUID,
                  sessions: dict[uuid.UUID, str], body: MemorySearchBody) -> MemorySearchOut:
    """The memory search, and with `include_knowledge` the document search beside it (both at
    once; a refused memory query cancels the other)."""
    query = body.to_query()
    if not body.include_knowledge:
        return MemorySearchOut.of(await search.search(ns, sessions, query))
    knowledge = asyncio.ensure_future(search_knowledge(svc.engine.search, ns, body.query,
                                                       body.limit))
    try:
        memory = (await search.search(ns, sessions, query) if sessions
                  else MemoryAnswer(hits=[]))
    except BaseException:
        knowledge.cancel()
        raise
    return MemorySearchOut.of(memory, await knowledge)


@router.post("/v1/sessions/{session_id}/search", response_model=MemorySearchOut)
async def search_session(session_id: SessionId, body: MemorySearchBody, ns: ReadNs,
                         svc: Svc) -> MemorySearchOut:
    """Hybrid search (BM25 + dense, fused by weighted RRF) over one session's messages and/or
    summaries, with a metadata filter, a date range, `min_score`, MMR and neighbouring turns."""
    search, searcher = _search(svc)
    sessions = await searcher.sessions(ns, session_id=session_id, limit=1)
    if not sessions:
        raise MemorySessionNotFound("no such session in this namespace", field="session_id")
    return await _answer(search, svc, ns, sessions, body)


@router.post("/v1/memory/search", response_model=MemorySearchOut)
async def search_user(body: UserMemorySearchBody, ns: ReadNs, svc: Svc) -> MemorySearchOut:
    """The same search across every live session of `user_id` (none: no results); at most
    `MAX_SESSIONS` sessions are searched (the first by session id)."""
    search, searcher = _search(svc)
    sessions = await searcher.sessions(ns, user_id=body.user_id,
                                       limit=MAX_SESSIONS)
    if not sessions and not body.include_knowledge:
        return MemorySearchOut(results=[])
    return await _answer(search, svc, ns, sessions, body)
