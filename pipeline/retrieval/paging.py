"""Paging through ranked answers: a first page, and `continue` over a stored result set.

Every ranked read (search, exact find, entity and link find, expansion) ends here with its
ranked items. A list longer than the page is stored once as a result set (`ResultSetStore`,
shared by every API process), so `continue` pages through the same snapshot until it expires;
the result-set id a page returns names the offset of the next page (`<set>.<offset>`). Objects
are hydrated under the caller's namespace when a page is made, so an object deleted since the
snapshot is simply left out. Evidence snippets are built here, for the page's items only (from
the query the result set keeps), in a thread: a request never spends CPU on items it does not
return, nor blocks the event loop with it.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from pipeline.domain.errors import ResultSetExpired
from pipeline.domain.read_model import Evidence, Page, Relation, RichObject
from pipeline.ports import ObjectReader, ResultSetStore
from pipeline.retrieval.requests import check_limit
from pipeline.retrieval.snippets import MAX_SNIPPET_TERMS, Snippets, fill_snippets, missing_snippets

# One ranked answer: {"id", "score", "evidence": [...], "relation"?: {...}} (JSON-ready, as stored).
Item = dict[str, Any]


class ResultPager:
    """Makes pages of ranked items and continues stored result sets."""

    def __init__(self, result_sets: ResultSetStore, reader: ObjectReader, *,
                 snippet_width: int = 240, snippet_max_terms: int = MAX_SNIPPET_TERMS) -> None:
        self.result_sets = result_sets
        self.reader = reader
        self.snippet_width = snippet_width
        self.snippet_max_terms = snippet_max_terms

    async def first_page(self, namespace: uuid.UUID, items: list[Item], limit: int, *,
                         kind: str, degrade: str | None = None, mode: str | None = None,
                         hydrated: dict[uuid.UUID, RichObject] | None = None,
                         query: str | None = None,
                         texts: Mapping[str, str | None] | None = None) -> Page:
        """The first `limit` items as objects; the whole list is stored when there is more.

        `kind` names the read that ranked them, `degrade` and `mode` label every page of the
        answer; `hydrated` may hold objects the caller already read (the rest are read here).
        Evidence without a snippet gets one for `query` (kept with the result set for the
        later pages), from `texts` (part id -> content) or the parts read here.
        """
        result_set_id = None
        if len(items) > limit:
            meta: dict[str, object] = {"degrade": degrade, "kind": kind, "mode": mode,
                                       "query": query}
            saved = await self.result_sets.save(namespace, items, meta)
            result_set_id = f"{saved}.{limit}"  # the id names the next page's offset
        objects = await self.materialize(namespace, items[:limit], hydrated, query=query,
                                         texts=texts)
        return Page(tuple(objects), result_set_id, len(items) > limit, degrade=degrade or None,
                    mode=mode)

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
        query = meta.get("query")
        objects = await self.materialize(namespace, page_items, None,
                                         query=str(query) if query else None)
        has_more = offset + limit < len(items)
        next_id = f"{result_set_id.split('.')[0]}.{offset + limit}" if has_more else None
        degrade = meta.get("degrade")
        mode = meta.get("mode")
        return Page(tuple(objects), next_id, has_more,
                    degrade=str(degrade) if degrade else None,
                    mode=str(mode) if mode else None)

    async def materialize(self, namespace: uuid.UUID, items: Sequence[Item],
                          hydrated: dict[uuid.UUID, RichObject] | None, *,
                          query: str | None = None,
                          texts: Mapping[str, str | None] | None = None) -> list[RichObject]:
        """The items' objects with their score, evidence and relation, in item order; items
        whose object is no longer visible are left out. Evidence without a snippet gets one
        for `query` (see `first_page`)."""
        missing = missing_snippets(items) if query else []
        if query and missing:
            if texts is None or any(part not in texts for part in missing):
                parts = await self.reader.hydrate(namespace, [uuid.UUID(p) for p in missing],
                                                  with_content=True)
                texts = {str(pid): obj.content for pid, obj in parts.items()}
            items = await asyncio.to_thread(self._snippets, items, texts, query)
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


    def _snippets(self, items: Sequence[Item], texts: Mapping[str, str | None],
                  query: str) -> list[Item]:
        # CPU work, run in a thread: one pattern for the query, one scan per part
        return fill_snippets(items, texts, Snippets(query, width=self.snippet_width,
                                                    max_terms=self.snippet_max_terms))


def _offset(result_set_id: str) -> int:
    parts = result_set_id.split(".")
    if len(parts) == 1:
        return 0
    if len(parts) != 2 or not parts[1].isdigit():
        raise ResultSetExpired("malformed result set id", field="result_set_id")
    return int(parts[1])


def _with(obj: RichObject, item: Item) -> RichObject:
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
