"""Request and response bodies of memory search (`api/routes/memory_search.py`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints

from api.knowledge_schemas import KnowledgeHitOut
from api.plain_text import PLAIN_TEXT, PlainJson
from api.schemas import Query
from pipeline.domain.memory_values import MemoryRow
from pipeline.memory.knowledge import KnowledgeAnswer
from pipeline.memory.search import MemoryAnswer, MemoryHit, MemoryQuery
from schemas.limits import USER_ID_MAX


class MemorySearchBody(BaseModel):
    """Hybrid search over a session's (or a user's sessions') messages and summaries."""

    model_config = ConfigDict(extra="forbid")

    query: Query
    limit: Annotated[int, Field(ge=1, le=1000)] = 10
    search_scope: Literal["messages", "summary", "both"] = "messages"
    where: PlainJson | None = Field(
        default=None, description="metadata filter: {'jsonpath': '$.key', 'eq': value}, or "
                                  "{'and': [...]} / {'or': [...]} of such conditions")
    since: AwareDatetime | None = Field(default=None, description="created at or after")
    until: AwareDatetime | None = Field(default=None, description="created before")
    min_score: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] = 0.0
    mmr_lambda: Annotated[float | None, Field(ge=0, le=1, allow_inf_nan=False)] = None
    context: Annotated[int, Field(ge=0, le=100)] = 0
    channels: list[Literal["lexical", "dense"]] = Field(
        default=["lexical", "dense"], min_length=1, max_length=2)
    include_knowledge: bool = Field(default=False, description=(
        "also search the namespace's documents with the same query (the default search): "
        "`knowledge` lists them beside the memory `results`, each hit labelled `source`"))

    def to_query(self) -> MemoryQuery:
        return MemoryQuery(text=self.query, limit=self.limit, search_scope=self.search_scope,
                           where=self.where, since=self.since, until=self.until,
                           min_score=self.min_score, mmr_lambda=self.mmr_lambda,
                           context=self.context, channels=tuple(dict.fromkeys(self.channels)))


class UserMemorySearchBody(MemorySearchBody):
    user_id: Annotated[str, StringConstraints(min_length=1, max_length=USER_ID_MAX), PLAIN_TEXT]


class TurnOut(BaseModel):
    kind: Literal["message", "summary"]
    uuid: UUID
    seq: int = Field(description="a summary's: the seq of the last message it folds")
    role: str | None
    content: str
    metadata: dict[str, Any]
    token_count: int | None
    created_at: datetime

    @classmethod
    def of(cls, row: MemoryRow) -> TurnOut:
        return cls(kind=row.kind, uuid=row.uuid, seq=row.seq, role=row.role,
                   content=row.content, metadata=row.metadata, token_count=row.token_count,
                   created_at=row.created_at)


class MemoryHitOut(TurnOut):
    session_id: str
    score: float = Field(description="fused score over the best possible one, in (0, 1]")
    context: list[TurnOut] = Field(description="neighbouring turns (with `context: N`)")
    source: Literal["memory"] = "memory"

    @classmethod
    def of_hit(cls, hit: MemoryHit) -> MemoryHitOut:
        return cls(**TurnOut.of(hit.row).model_dump(), session_id=hit.session_id,
                   score=hit.score, context=[TurnOut.of(r) for r in hit.context])


class MemorySearchOut(BaseModel):
    results: list[MemoryHitOut]
    degraded: str | None = Field(default=None,
                                 description="lexical_only when the query embedder is down")
    knowledge: list[KnowledgeHitOut] | None = Field(default=None, description=(
        "with `include_knowledge`: the namespace's documents for the query, best first"))
    knowledge_degraded: str | None = Field(default=None, description=(
        "with `include_knowledge`: knowledge_unavailable when the document search failed (the "
        "memory results still answer), else the document search's own degrade, if any"))

    @classmethod
    def of(cls, answer: MemoryAnswer, knowledge: KnowledgeAnswer | None = None
           ) -> MemorySearchOut:
        return cls(results=[MemoryHitOut.of_hit(h) for h in answer.hits],
                   degraded=answer.degraded,
                   knowledge=None if knowledge is None else [
                       KnowledgeHitOut.of_object(o) for o in knowledge.objects],
                   knowledge_degraded=None if knowledge is None else knowledge.degraded)
