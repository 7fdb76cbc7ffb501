"""The retrieval engine: hybrid search, exact find, paging and reads, framework-free.

Flow of a search: three candidate channels run concurrently (lexical BM25, trigram, dense),
fuse by reciprocal rank, promote part hits to their parent with evidence, hydrate from Postgres
under the caller's namespace, apply a mild temporal decay, and store the ranked list as a result
set so `continue` pages through the same snapshot. A down embedder degrades the answer to
lexical-only (labelled), never to an error.
"""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pipeline.domain.errors import (
    InvalidFilter,
    InvalidInput,
    NotFound,
    QueryRequired,
    ResultSetExpired,
    Unavailable,
)
from pipeline.domain.kinds import PROPERTY_KEY_PATTERN, KindCatalog
from pipeline.domain.read_model import (
    Evidence,
    Filters,
    Hit,
    Page,
    Relation,
    RichObject,
    RowMeta,
    SearchQuery,
)
from pipeline.ports import ObjectReader, PartSearcher, ResultSetStore
from pipeline.retrieval.fusion import (
    Fused,
    Promoted,
    decay_factor,
    fuse_and_promote,
    promote,
)
from pipeline.retrieval.snippets import snippet

log = logging.getLogger(__name__)

# Embeds one query text; raises Unavailable when the embedder cannot answer.
QueryEmbedder = Callable[[str], Awaitable[Sequence[float]]]
CatalogSource = Callable[[], Awaitable[KindCatalog]]

LEXICAL_ONLY = "lexical_only"
MAX_LIMIT = 100


@dataclass(frozen=True)
class EngineConfig:
    candidate_k: int = 50
    rrf_k: int = 60
    decay_lambda: float = 0.002  # per day: a year-old hit keeps about half its score
    evidence_n: int = 3
    max_results: int = 100
    embed_timeout: float = 5.0
    snippet_chars: int = 240


def check_limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInput(f"limit must be between 1 and {MAX_LIMIT}", field="limit")
    return limit


class RetrievalEngine:
    """Search, exact find, continue, read and children over one namespace at a time."""

    def __init__(self, searcher: PartSearcher, reader: ObjectReader,
                 result_sets: ResultSetStore, catalog: CatalogSource,
                 embed_query: QueryEmbedder | None, config: EngineConfig | None = None) -> None:
        self.searcher = searcher
        self.reader = reader
        self.result_sets = result_sets
        self.catalog = catalog
        self.embed_query = embed_query
        self.config = config or EngineConfig()

    # -- validation -------------------------------------------------------------------------

    async def validate_filters(self, filters: Filters) -> None:
        """Property filters must name filterable fields of the catalog (when it is not empty)."""
        catalog = await self.catalog()
        for name, values in filters.properties:
            if not re.fullmatch(PROPERTY_KEY_PATTERN, name):
                raise InvalidFilter(f"{name!r} is not a valid property name",
                                    field=f"filters.{name}")
            if not values:
                raise InvalidFilter(f"filter {name!r} needs at least one value",
                                    field=f"filters.{name}")
            if not catalog.is_open:
                catalog.validate_filter(list(filters.kinds) or None, name,
                                        "in" if len(values) > 1 else "eq")
        if not catalog.is_open:
            unknown = [k for k in filters.kinds if catalog.get(k) is None]
            if unknown:
                raise InvalidFilter(f"unknown kind {unknown[0]!r}", field="kind")

    @staticmethod
    def _query_text(query: str) -> str:
        text = query.strip()
        if not text:
            raise QueryRequired("query must not be empty", field="query")
        if len(text) > 2000:
            raise InvalidInput("query is longer than 2000 characters", field="query")
        if "\x00" in text:
            raise InvalidInput("query contains a NUL character", field="query")
        return text

    # -- search -----------------------------------------------------------------------------

    async def search(self, namespace: uuid.UUID, request: SearchQuery) -> Page:
        """Hybrid search over parts, promoted to their objects."""
        query = self._query_text(request.query)
        check_limit(request.limit)
        await self.validate_filters(request.filters)
        k = self.config.candidate_k
        args = (namespace, query, request.filters, request.scope_ids, k)
        lexical, trigram, dense = await asyncio.gather(
            self.searcher.search_lexical(*args), self._trigram(*args),
            self._dense(namespace, query, request.filters, request.scope_ids, k),
            return_exceptions=True)
        channels: dict[str, list[Hit]] = {}
        for name, result in (("lexical", lexical), ("trigram", trigram)):
            if isinstance(result, BaseException):
                raise result
            channels[name] = result
        degrade = None
        if isinstance(dense, Unavailable):
            degrade = LEXICAL_ONLY
        elif isinstance(dense, BaseException):
            raise dense
        elif dense is not None:
            channels["dense"] = dense
        else:
            degrade = LEXICAL_ONLY
        return await self._rank_and_page(namespace, query, channels, request.limit, degrade)

    async def _trigram(self, namespace: uuid.UUID, query: str, filters: Filters,
                       scope: Sequence[uuid.UUID], k: int) -> list[Hit]:
        return await self.searcher.search_trigram(namespace, query, filters, scope, k)

    async def _dense(self, namespace: uuid.UUID, query: str, filters: Filters,
                     scope: Sequence[uuid.UUID], k: int) -> list[Hit] | None:
        if self.embed_query is None:
            return None
        try:
            vector = await asyncio.wait_for(self.embed_query(query), self.config.embed_timeout)
        except (TimeoutError, Unavailable) as exc:
            log.warning("embedder unavailable, answering lexical-only: %s", exc)
            raise Unavailable(f"embedder: {exc}") from exc
        return await self.searcher.search_dense(namespace, vector, filters, scope, k)

    async def find_exact(self, namespace: uuid.UUID, request: SearchQuery) -> Page:
        """Equality matches first (id, title, property value, quoted phrase), then lexical and
        trigram fusion; no dense channel."""
        query = self._query_text(request.query)
        check_limit(request.limit)
        await self.validate_filters(request.filters)
        k = self.config.candidate_k
        args = (namespace, query, request.filters, request.scope_ids, k)
        exact, lexical, trigram = await asyncio.gather(
            self.searcher.exact_matches(*args), self.searcher.search_lexical(*args),
            self._trigram(*args))
        return await self._rank_and_page(namespace, query, {"lexical": lexical,
                                                            "trigram": trigram},
                                         request.limit, None, first=exact)

    async def _rank_and_page(self, namespace: uuid.UUID, query: str,
                             channels: dict[str, list[Hit]], limit: int, degrade: str | None,
                             *, first: Sequence[Hit] = ()) -> Page:
        ids = list(dict.fromkeys([h.id for h in first]
                                 + [h.id for hits in channels.values() for h in hits]))
        meta = await self.searcher.row_meta(namespace, ids)
        promoted = fuse_and_promote(channels, meta, k=self.config.rrf_k,
                                    evidence_n=self.config.evidence_n)
        if first:
            # Exact matches lead, in their own order, above every fused result.
            top = 1.0 + max((p.score for p in promoted), default=0.0)
            leading = promote([_as_fused(h, top + (len(first) - i)) for i, h in
                               enumerate(first)], meta, evidence_n=self.config.evidence_n)
            seen = {p.id for p in leading}
            promoted = leading + [p for p in promoted if p.id not in seen]
        promoted = promoted[: self.config.max_results]
        objects = await self.reader.hydrate(namespace, [p.id for p in promoted])
        now = datetime.now(UTC)
        items: list[dict[str, Any]] = []
        for p in promoted:
            obj = objects.get(p.id)
            if obj is None:
                continue
            score = p.score * decay_factor(obj.updated_at, now, self.config.decay_lambda)
            items.append(self._item(p, score, meta, query))
        items.sort(key=lambda item: (-float(item["score"]), str(item["id"])))
        return await self._first_page(namespace, items, objects, limit,
                                      {"degrade": degrade, "kind": "search"})

    def _item(self, promoted: Promoted, score: float, meta: dict[uuid.UUID, RowMeta],
              query: str) -> dict[str, Any]:
        evidence = []
        for part_id, part_score in promoted.evidence:
            row = meta[part_id]
            evidence.append({"part_id": str(part_id), "title": row.title,
                             "snippet": snippet(row.content, query,
                                                width=self.config.snippet_chars),
                             "score": part_score, "position": row.position,
                             "properties": row.properties})
        return {"id": str(promoted.id), "score": score, "evidence": evidence}

    # -- paging -----------------------------------------------------------------------------

    async def _first_page(self, namespace: uuid.UUID, items: list[dict[str, Any]],
                          hydrated: dict[uuid.UUID, RichObject] | None, limit: int,
                          meta: dict[str, object], *, mode: str | None = None) -> Page:
        result_set_id = None
        if len(items) > limit:
            saved = await self.result_sets.save(namespace, items, {**meta, "mode": mode})
            result_set_id = f"{saved}.{limit}"  # the id names the next page's offset
        objects = await self._materialize(namespace, items[:limit], hydrated)
        degrade = meta.get("degrade")
        return Page(tuple(objects), result_set_id, len(items) > limit,
                    degrade=str(degrade) if degrade else None, mode=mode)

    async def continue_page(self, namespace: uuid.UUID, result_set_id: str,
                            limit: int = 10) -> Page:
        """The next page of a result set: the same snapshot from any API process."""
        check_limit(limit)
        stored = await self.result_sets.load(namespace, result_set_id.split(".")[0])
        if stored is None:
            raise ResultSetExpired("result set unknown or expired", field="result_set_id")
        items, meta = stored
        offset = _offset(result_set_id)
        page_items = items[offset: offset + limit]
        objects = await self._materialize(namespace, page_items, None)
        has_more = offset + limit < len(items)
        next_id = f"{result_set_id.split('.')[0]}.{offset + limit}" if has_more else None
        degrade = meta.get("degrade")
        mode = meta.get("mode")
        return Page(tuple(objects), next_id, has_more,
                    degrade=str(degrade) if degrade else None,
                    mode=str(mode) if mode else None)

    async def _materialize(self, namespace: uuid.UUID, items: Sequence[dict[str, Any]],
                           hydrated: dict[uuid.UUID, RichObject] | None) -> list[RichObject]:
        ids = [uuid.UUID(str(item["id"])) for item in items]
        if hydrated is None or any(i not in hydrated for i in ids):
            hydrated = await self.reader.hydrate(namespace, ids)
        out = []
        for item, oid in zip(items, ids, strict=True):
            obj = hydrated.get(oid)
            if obj is None:
                continue  # deleted since the result set was made
            out.append(_with(obj, item))
        return out

    # -- reads --------------------------------------------------------------------------------

    async def read(self, namespace: uuid.UUID, object_id: uuid.UUID) -> RichObject:
        found = await self.reader.hydrate(namespace, [object_id], with_content=True)
        if object_id not in found:
            raise NotFound(f"object {object_id} not found", field="id")
        return found[object_id]

    async def children(self, namespace: uuid.UUID, object_id: uuid.UUID, *, offset: int = 0,
                       limit: int = 100) -> list[RichObject]:
        if not 1 <= limit <= 1000 or offset < 0:
            raise InvalidInput("limit must be 1..1000 and offset >= 0", field="limit")
        await self.read(namespace, object_id)  # 404 for what is missing or out of scope
        return await self.reader.children(namespace, object_id, offset=offset, limit=limit)


def _as_fused(hit: Hit, score: float) -> Fused:
    return Fused(hit.id, score, {"exact": 1})


def _offset(result_set_id: str) -> int:
    parts = result_set_id.split(".")
    if len(parts) == 1:
        return 0
    if len(parts) != 2 or not parts[1].isdigit():
        raise ResultSetExpired("malformed result set id", field="result_set_id")
    return int(parts[1])


def _with(obj: RichObject, item: dict[str, Any]) -> RichObject:
    evidence = tuple(Evidence(part_id=uuid.UUID(str(e["part_id"])), title=e.get("title"),
                              snippet=str(e.get("snippet") or ""), score=float(e["score"]),
                              position=e.get("position"), properties=dict(e.get("properties")
                                                                          or {}))
                     for e in item.get("evidence") or [])
    relation = None
    if item.get("relation"):
        rel = dict(item["relation"])
        relation = Relation(
            type=str(rel["type"]), direction=rel.get("direction"), depth=int(rel["depth"]),
            source_id=uuid.UUID(rel["source_id"]) if rel.get("source_id") else None,
            note=rel.get("note"), status=rel.get("status"), role=rel.get("role"),
            confidence=rel.get("confidence"),
            evidence_id=uuid.UUID(rel["evidence_id"]) if rel.get("evidence_id") else None)
    return replace(obj, score=float(item.get("score", 0.0)), evidence=evidence,
                   relation=relation)

