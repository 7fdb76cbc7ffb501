"""Memory search routes (issue 12): one session, or every live session of one user, searched
by hybrid retrieval over messages and summaries (`pipeline/memory/search.py`). Scoped
to the namespace of the caller's API key; a session of another namespace is absent (404)."""

from __future__ import annotations

from fastapi import APIRouter

from api.access import ReadNs
from api.dependencies import Svc
from api.errors import ERRORS
from api.memory_search_schemas import MemorySearchBody, MemorySearchOut, UserMemorySearchBody
from api.routes.memory import SessionId
from pipeline.domain.memory_errors import MemorySessionNotFound
from pipeline.memory.search import MemorySearch, MemorySearchLimits
from pipeline.memory.store.search import PgMemorySearcher
from pipeline.wiring.services import Services, query_embedder

router = APIRouter(tags=["memory"], responses=ERRORS)
# The most sessions one user-wide memory search reads (the first by session id).
MAX_SESSIONS = 1000


def _search(svc: Services) -> tuple[MemorySearch, PgMemorySearcher]:
    searcher = PgMemorySearcher(svc.pool)
    return MemorySearch(searcher, query_embedder(lambda: svc.embedder),
                        MemorySearchLimits()), searcher


@router.post("/v1/sessions/{session_id}/search", response_model=MemorySearchOut)
async def search_session(session_id: SessionId, body: MemorySearchBody, ns: ReadNs,
                         svc: Svc) -> MemorySearchOut:
    """Hybrid search (BM25 + dense, fused by weighted RRF) over one session's messages and/or
    summaries, with a metadata filter, a date range, `min_score`, MMR and neighbouring turns."""
    search, searcher = _search(svc)
    sessions = await searcher.sessions(ns, session_id=session_id, limit=1)
    if not sessions:
        raise MemorySessionNotFound("no such session in this namespace", field="session_id")
    return MemorySearchOut.of(await search.search(ns, sessions, body.to_query()))


@router.post("/v1/memory/search", response_model=MemorySearchOut)
async def search_user(body: UserMemorySearchBody, ns: ReadNs, svc: Svc) -> MemorySearchOut:
    """The same search across every live session of `user_id` (none: no results); at most
    `MAX_SESSIONS` sessions are searched (the first by session id)."""
    search, searcher = _search(svc)
    sessions = await searcher.sessions(ns, user_id=body.user_id,
                                       limit=MAX_SESSIONS)
    if not sessions:
        return MemorySearchOut(results=[])
    return MemorySearchOut.of(await search.search(ns, sessions, body.to_query()))
