"""Search routes: hybrid search, exact find, and `continue` through a result set."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from fastapi import APIRouter

from api.access import ReadNs
from api.dependencies import Svc
from api.errors import ERRORS
from api.routes import PAGE_LINKS, page
from api.schemas import ContinueBody, FindExactBody, PageOut, SearchBody
from pipeline.domain.read_model import Filters, QueryVector, SearchQuery
from pipeline.retrieval.requests import with_where

router = APIRouter(tags=["search"], responses=ERRORS)


@router.post("/v1/search", response_model=PageOut, responses=PAGE_LINKS)
async def search(body: SearchBody, ns: ReadNs, svc: Svc) -> PageOut:
    """Hybrid retrieval over parts (BM25 + trigram + dense, RRF, decay), promoted to their
    objects with evidence; `mode` ppr or auto fuses it with PPR over the entity layer."""
    vector = (None if body.vector is None else
              QueryVector(model=body.vector.model, values=tuple(body.vector.values)))
    query = replace(_search_query(body), mode=body.mode, explain=body.explain,
                    rerank=body.rerank,
                    fusion=body.fusion.to_params() if body.fusion is not None else None,
                    similar_to=body.similar_to, min_score=body.min_score, vector=vector,
                    facts_at=_facts_at(body),
                    from_messages=tuple(body.from_messages or ()))
    return page(await svc.engine.search(ns, query), "search")


@router.post("/v1/find_exact", response_model=PageOut, responses=PAGE_LINKS)
async def find_exact(body: FindExactBody, ns: ReadNs, svc: Svc) -> PageOut:
    """Equality first (id, title, property value, quoted phrase), then lexical + trigram."""
    return page(await svc.engine.find_exact(ns, _search_query(body)), "find_exact")


@router.post("/v1/continue", response_model=PageOut, responses=PAGE_LINKS)
async def continue_(body: ContinueBody, ns: ReadNs, svc: Svc) -> PageOut:
    """The next page of a result set (a snapshot shared by every API process)."""
    return page(await svc.engine.continue_page(ns, body.result_set_id, body.limit),
                "continue")


def _facts_at(body: SearchBody) -> tuple[datetime, datetime] | None:
    """(world time, system time) of the walk's RELATES facts; None when neither is asked (the
    present, as known now: the snapshot walk may answer)."""
    if body.as_of is None and body.known_at is None:
        return None
    now = datetime.now(UTC)
    return body.as_of or now, body.known_at or now


def _search_query(body: FindExactBody) -> SearchQuery:
    filters = body.filters.to_filters() if body.filters else Filters()
    return SearchQuery(query=body.query or "", filters=with_where(filters, body.where),
                       limit=body.limit, scope_ids=tuple(body.scope_ids or ()),
                       strict=body.strict,
                       facets=tuple(f.to_spec() for f in body.facets or ()),
                       sort=body.sort.to_spec() if body.sort else None)
