"""Conversation-memory routes (issue 12): a session, a user's sessions, a session's memory
(latest summary and recent messages), its messages by page, and the write-through that
publishes messages as an event and can wait until they are stored. Every route is scoped to
the namespace of the caller's API key; a deleted session is absent (404)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse

from api.access import Caller, ReadNs, WriteNs
from api.dependencies import Svc
from api.errors import ERRORS
from api.memory_schemas import (
    MemoryOut,
    MessageOut,
    MessagesOut,
    PostMessagesBody,
    SessionOut,
    SessionsOut,
    WriteOut,
)
from api.read_routing import applied_write_headers
from pipeline.domain.memory_errors import MemorySessionNotFound, PrivilegedKeyRequired
from pipeline.domain.memory_model import SYSTEM_KEY
from pipeline.memory.writes import MessageWriter
from schemas.limits import SESSION_ID_MAX, USER_ID_MAX

router = APIRouter(tags=["memory"], responses=ERRORS)
# The most messages GET memory (`lastn`) and one page of GET messages return, and the most
# sessions one page of GET sessions lists: one page stays one bounded read.
PAGE_MAX = 1000

# Postgres text cannot hold NUL: refused at the boundary (422), never a 500 further in.
NO_NUL = r"^[^\x00]*$"
SessionId = Annotated[str, Path(min_length=1, max_length=SESSION_ID_MAX,
                                pattern=r"^[^\x00]*[^\x00\s][^\x00]*$")]  # \S matches NUL


def _missing() -> MemorySessionNotFound:
    return MemorySessionNotFound("no such session in this namespace", field="session_id")


@router.get("/v1/sessions/{session_id}", response_model=SessionOut)
async def session(session_id: SessionId, ns: ReadNs, svc: Svc) -> SessionOut:
    """One live session."""
    found = await svc.memory.session(ns, session_id)
    if found is None:
        raise _missing()
    return SessionOut.of(found)


@router.get("/v1/sessions", response_model=SessionsOut)
async def sessions(ns: ReadNs, svc: Svc,
                   user_id: Annotated[str | None, Query(min_length=1, max_length=USER_ID_MAX,
                                                        pattern=NO_NUL)] = None,
                   after: Annotated[str | None, Query(max_length=SESSION_ID_MAX,
                                                      pattern=NO_NUL)] = None,
                   limit: Annotated[int, Query(ge=1)] = 100) -> SessionsOut:
    """Live sessions (of one user), by session id; page on with `after`."""
    limit = min(limit, PAGE_MAX)
    found = await svc.memory.sessions(ns, user_id, after, limit + 1)
    more = len(found) > limit
    found = found[:limit]
    return SessionsOut(sessions=[SessionOut.of(s) for s in found],
                       next_after=found[-1].session_id if more else None)


@router.get("/v1/sessions/{session_id}/memory", response_model=MemoryOut)
async def memory(session_id: SessionId, ns: ReadNs, svc: Svc,
                 lastn: Annotated[int | None, Query(ge=1)] = None) -> MemoryOut:
    """The latest summary and the last `lastn` messages; without `lastn`, the messages after
    the summary point, at most the window (`summary_lag` says how many more are waiting)."""
    settings = svc.settings
    if lastn is not None:
        lastn = min(lastn, PAGE_MAX)
    found = await svc.memory.memory(ns, session_id, lastn=lastn, window=settings.memory_window)
    if found is None:
        raise _missing()
    return MemoryOut.of(found)


@router.get("/v1/sessions/{session_id}/messages", response_model=MessagesOut)
async def messages(session_id: SessionId, ns: ReadNs, svc: Svc,
                   after_seq: Annotated[int, Query(ge=0)] = 0,
                   limit: Annotated[int, Query(ge=1)] = 100) -> MessagesOut:
    """Visible messages by seq (arrival order); page on with `after_seq`."""
    limit = min(limit, PAGE_MAX)
    found = await svc.memory.messages(ns, session_id, after_seq=after_seq, limit=limit + 1)
    if found is None:
        raise _missing()
    more = len(found) > limit
    found = found[:limit]
    return MessagesOut(messages=[MessageOut.of(m) for m in found],
                       next_after_seq=found[-1].seq if more else None)


@router.post("/v1/sessions/{session_id}/messages", response_model=WriteOut,
             responses={202: {"model": WriteOut, "description": "published, not stored yet"}})
async def add_messages(session_id: SessionId, body: PostMessagesBody, ns: WriteNs,
                       caller: Caller, svc: Svc, request: Request) -> JSONResponse:
    """Publish the messages as a `brainstream.messages.add` event of source `api:<key name>`
    (a new session is created);
    with `wait`, answer 200 once they are stored, or 202 when the wait (MEMORY_WRITE_WAIT)
    ran out first. A deleted session is 404 (a session.put event revives it)."""
    for index, m in enumerate(body.messages):
        if SYSTEM_KEY in m.metadata:
            raise PrivilegedKeyRequired("the `system` metadata key is the pipeline's",
                                        field=f"messages.{index}.metadata.system")
    if await svc.memory.deleted(ns, session_id):
        raise _missing()
    writer: MessageWriter = request.app.state.memory_writer
    result = await writer.add(ns, session_id,
                              [m.model_dump(mode="json", exclude_none=True)
                               for m in body.messages],
                              source=caller.source, wait=body.wait,
                              stored=lambda key, uuids: svc.memory.stored(ns, key, uuids))
    out = WriteOut(event_id=result.event_id, status="applied" if result.applied else "accepted",
                   messages=[MessageOut.of(m) for m in result.messages])
    return JSONResponse(status_code=200 if result.applied else 202,
                        content=out.model_dump(mode="json"),
                        headers=await applied_write_headers(svc, ns) if result.applied else None)
