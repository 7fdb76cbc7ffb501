"""Paging through ranked answers: a first page, and `continue` over a stored result set.

Every ranked read (search, exact find, entity and link find, expansion) ends here with its
ranked items. A list longer than the page is stored once as a result set (`ResultSetStore`,
shared by every API process), so `continue` pages through the same snapshot until it expires;
the result-set id a page returns names the offset of the next page (`<set>.<offset>`).

An item holds ids and scores only (its id, score, evidence part ids with their scores, and its
graph relation), never titles, properties, content or snippets, and a set is stored as it is:
the page's objects and evidence parts are read under the caller's namespace when the page is
served (`materialize`: one statement, the parts' texts included), so nothing is read for items
not on the page, an object or part deleted since the snapshot is simply left out, and a set's
size depends on its length alone. That length is capped (`max_items`): a longer answer is cut
and every page of it says `truncated`.

Evidence snippets are cut here, for the page's items only (from the query the result set keeps),
in a thread: a request never spends CPU on items it does not return, nor blocks the event loop.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any

from pipeline.domain.errors import InvalidInput, ResultSetExpired
from pipeline.domain.read_model import Evidence, Page, Relation, RichObject
from pipeline.ports import ObjectReader, ResultSetStore
from pipeline.retrieval.requests import check_limit
from pipeline.retrieval.snippets import MAX_SNIPPET_TERMS, Snippets

# One ranked answer: {"id", "score", "evidence": [[part_id, score], ...], "relation"?: {...}}
# (JSON-ready, as a result set stores it); the evidence's parts are the object's own, best first.
Item = dict[str, Any]

# What a result-set id looks like (`<set>.<offset>`) and the largest offset it may name (a set
# holds at most 1,000 items: EngineConfig.result_set_max_items).
RESULT_SET_ID_PATTERN = r"^[0-9a-f]{1,64}(\.[0-9]{1,7})?$"
RESULT_SET_ID = re.compile(RESULT_SET_ID_PATTERN, re.ASCII)
MAX_OFFSET = 1_000_000


class ResultPager:
    """Makes pages of ranked items and continues stored result sets.

    `max_items` caps how many items one result set holds; `snippet_width` and
    `snippet_max_terms` bound each evidence snippet's text and its work.
    """

    def __init__(self, result_sets: ResultSetStore, reader: ObjectReader, *,
                 max_items: int = 1000, snippet_width: int = 240,
                 snippet_max_terms: int = MAX_SNIPPET_TERMS) -> None:
        self.result_sets = result_sets
        self.reader = reader
        self.max_items = max_items
        self.snippet_width = snippet_width
        self.snippet_max_terms = snippet_max_terms

    async def first_page(self, namespace: uuid.UUID, items: list[Item], limit: int, *,
                         kind: str, degrade: str | None = None, mode: str | None = None,
                         hydrated: Mapping[uuid.UUID, RichObject] | None = None,
                         query: str | None = None, truncated: bool = False) -> Page:
        """The first `limit` items as objects; the list is stored when there is more.

        `kind` names the read that ranked them, `degrade` and `mode` label every page of the
        answer; `hydrated` may hold objects the caller already read (the rest are read here);
        evidence gets snippets for `query` (kept with the result set for the later pages);
        `truncated` says the caller already cut the list at a bound of its own.
        """
        if len(items) > self.max_items:
            items, truncated = items[: self.max_items], True
        result_set_id = None
        if len(items) > limit:
            meta: dict[str, object] = {"degrade": degrade, "kind": kind, "mode": mode,
                                       "query": query, "truncated": truncated}
            saved = await self.result_sets.save(namespace, [_stored(i) for i in items], meta)
            result_set_id = f"{saved}.{limit}"  # the id names the next page's offset
        objects = await self.materialize(namespace, items[:limit], hydrated, query=query)
        return Page(tuple(objects), result_set_id, len(items) > limit, degrade=degrade or None,
                    mode=mode, truncated=truncated)

    async def continue_page(self, namespace: uuid.UUID, result_set_id: str,
                            limit: int = 10) -> Page:
        """The next page of a result set: the same snapshot from any API process."""
        check_limit(limit)
        set_id, offset = parse_result_set_id(result_set_id)
        stored = await self.result_sets.load(namespace, set_id)
        if stored is None:
            raise ResultSetExpired("result set unknown or expired", field="result_set_id")
        items, meta = stored
        query = meta.get("query")
        objects = await self.materialize(namespace, items[offset: offset + limit], None,
                                         query=str(query) if query else None)
        has_more = offset + limit < len(items)
        next_id = f"{set_id}.{offset + limit}" if has_more else None
        degrade = meta.get("degrade")
        mode = meta.get("mode")
        return Page(tuple(objects), next_id, has_more,
                    degrade=str(degrade) if degrade else None,
                    mode=str(mode) if mode else None, truncated=bool(meta.get("truncated")))

    async def materialize(self, namespace: uuid.UUID, items: Sequence[Item],
                          hydrated: Mapping[uuid.UUID, RichObject] | None, *,
                          query: str | None = None) -> list[RichObject]:
        """The items' objects with their score, evidence and relation, in item order, read in
        one statement with their evidence parts (and those parts' texts when `query` asks
        for snippets); an item whose object, or an evidence part no longer visible, is left
        out."""
        ids = [uuid.UUID(str(item["id"])) for item in items]
        parts = [uuid.UUID(str(pid)) for item in items for pid, _ in item.get("evidence") or ()]
        wanted = [i for i in ids if hydrated is None or i not in hydrated]
        read = (await self.reader.hydrate(namespace, [*wanted, *parts],
                                          content_of=parts if query else ())
                if wanted or parts else {})
        objects = {**hydrated, **read} if hydrated else read
        if not parts:
            return [_with(objects[oid], item, ()) for item, oid in zip(items, ids, strict=True)
                    if oid in objects]
        snippets = (partial(Snippets, query, width=self.snippet_width,
                            max_terms=self.snippet_max_terms) if query else None)
        # CPU work (one pattern for the query, one scan per part): in a thread
        return await asyncio.to_thread(_materialized, items, ids, objects, snippets)


def _materialized(items: Sequence[Item], ids: Sequence[uuid.UUID],
                  objects: Mapping[uuid.UUID, RichObject],
                  cutter: Callable[[], Snippets] | None) -> list[RichObject]:
    """Each item whose object was read, with the evidence of its parts that were (a part's
    title and properties are its object's; a snippet of its text by `cutter()`'s snippets)."""
    snippets = cutter() if cutter is not None else None
    out = []
    for item, oid in zip(items, ids, strict=True):
        obj = objects.get(oid)
        if obj is None:
            continue  # deleted since the result set was made
        evidence = []
        for part_id, score in item.get("evidence") or ():
            part = objects.get(uuid.UUID(str(part_id)))
            if part is None:
                continue  # a part no longer visible gives no evidence
            excerpt = snippets(part.content) if snippets is not None else ""
            evidence.append(Evidence(
                part_id=part.id, title=obj.title, snippet=excerpt, score=float(score),
                position=part.position, properties=dict(obj.properties),
                highlights=tuple((a, b) for a, b in snippets.highlights(excerpt))
                if snippets is not None else ()))
        out.append(_with(obj, item, tuple(evidence)))
    return out


def parse_result_set_id(result_set_id: str) -> tuple[str, int]:
    """A result-set id's set and offset (`<set>` or `<set>.<offset>`, ASCII hex and digits);
    anything else is InvalidInput (422) naming `result_set_id`, never a 500."""
    set_id, dot, offset = result_set_id.partition(".")
    if not RESULT_SET_ID.fullmatch(result_set_id) or (dot and int(offset) > MAX_OFFSET):
        raise InvalidInput("result_set_id must be <set>.<offset> as a page returned it",
                           field="result_set_id")
    return set_id, int(offset) if dot else 0


def _stored(item: Item) -> Item:
    """An item as a result set stores it: ids and scores (and the relation), nothing else."""
    out: Item = {"id": item["id"], "score": item["score"],
                 "evidence": [[str(pid), float(score)] for pid, score in
                              item.get("evidence") or ()]}
    if item.get("relation"):
        out["relation"] = item["relation"]
    return out


def _with(obj: RichObject, item: Item, evidence: tuple[Evidence, ...]) -> RichObject:
    relation = None
    if item.get("relation"):
        rel = dict(item["relation"])
        relation = Relation(
            type=str(rel["type"]), direction=rel.get("direction"), depth=int(rel["depth"]),
            source_id=uuid.UUID(rel["source_id"]) if rel.get("source_id") else None,
            note=rel.get("note"), status=rel.get("status"), role=rel.get("role"),
            confidence=rel.get("confidence"),
            evidence_id=uuid.UUID(rel["evidence_id"]) if rel.get("evidence_id") else None,
            valid_from=_time(rel.get("valid_from")), valid_to=_time(rel.get("valid_to")))
    return replace(obj, score=float(item.get("score", 0.0)), evidence=evidence,
                   relation=relation)


def _time(value: object) -> datetime | None:
    """A relation's validity bound as a result set stores it (ISO text), or None."""
    return datetime.fromisoformat(str(value)) if value else None
