"""The pager reads the returned page alone: its objects and evidence parts in one statement,
texts only where snippets are cut, and a stored set holds ids and scores only."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Collection, Sequence
from datetime import UTC, datetime
from typing import Any

from pipeline.domain.read_model import RichObject
from pipeline.retrieval.paging import Item, ResultPager

NS = uuid.UUID(int=1)
DOC, OTHER, GONE = uuid.UUID(int=10), uuid.UUID(int=11), uuid.UUID(int=12)
P1, P2, P_GONE = uuid.UUID(int=20), uuid.UUID(int=21), uuid.UUID(int=22)


def _obj(oid: uuid.UUID, *, parent: uuid.UUID | None = None, position: int | None = None,
         content: str | None = None) -> RichObject:
    now = datetime.now(UTC)
    return RichObject(oid, "doc", f"title {oid.int}", None, 0.0, {"team": f"t{oid.int}"},
                      None, parent, position, now, now, content=content)


class _Reader:
    """Visible: DOC with parts P1, P2 and OTHER; GONE and P_GONE were deleted."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[uuid.UUID], list[uuid.UUID]]] = []
        self.rows = {DOC: _obj(DOC), OTHER: _obj(OTHER),
                     P1: _obj(P1, parent=DOC, position=0, content="cranes lift containers"),
                     P2: _obj(P2, parent=DOC, position=4, content="the harbour crane rests")}

    async def hydrate(self, ns: uuid.UUID, ids: Sequence[uuid.UUID], *,
                      with_content: bool = False,
                      content_of: Collection[uuid.UUID] = ()) -> dict[uuid.UUID, RichObject]:
        assert ns == NS
        self.calls.append((list(ids), list(content_of)))
        keep = set(content_of)
        out = {}
        for oid in ids:
            row = self.rows.get(oid)
            if row is not None:
                out[oid] = row if with_content or oid in keep else _obj(
                    oid, parent=row.parent_id, position=row.position)
        return out


class _Sets:
    def __init__(self) -> None:
        self.saved: list[dict[str, Any]] = []

    async def save(self, ns: uuid.UUID, items: Sequence[dict[str, Any]],
                   meta: dict[str, Any]) -> str:
        self.saved = list(items)
        return "ab12"

    async def load(self, ns: uuid.UUID, set_id: str) -> Any:
        return self.saved, {"query": "crane"}


def _items() -> list[Item]:
    return [{"id": str(DOC), "score": 0.9, "evidence": [[str(P2), 0.8], [str(P_GONE), 0.7],
                                                        [str(P1), 0.5]]},
            {"id": str(GONE), "score": 0.6, "evidence": []},
            {"id": str(OTHER), "score": 0.4, "evidence": []}]


def test_a_page_is_read_in_one_statement_with_its_evidence_texts() -> None:
    reader, sets = _Reader(), _Sets()
    pager = ResultPager(sets, reader)  # type: ignore[arg-type]
    page = asyncio.run(pager.first_page(NS, _items(), 2, kind="search", query="crane"))
    assert len(reader.calls) == 1
    ids, texts = reader.calls[0]
    assert ids == [DOC, GONE, P2, P_GONE, P1] and texts == [P2, P_GONE, P1]
    [doc] = page.objects  # GONE is left out of its page
    assert [e.part_id for e in doc.evidence] == [P2, P1]  # the deleted part gives none
    best = doc.evidence[0]
    assert (best.title, best.properties, best.position, best.score) == (
        "title 10", {"team": "t10"}, 4, 0.8)
    assert best.snippet == "the harbour crane rests"
    assert [best.snippet[a:b] for a, b in best.highlights] == ["crane"]
    # the stored set holds ids and scores only, in the form the items had
    assert sets.saved[0] == {"id": str(DOC), "score": 0.9, "evidence": [
        [str(P2), 0.8], [str(P_GONE), 0.7], [str(P1), 0.5]]}
    assert page.result_set_id == "ab12.2" and page.has_more


def test_continue_reads_its_page_once_and_without_a_query_no_text() -> None:
    reader, sets = _Reader(), _Sets()
    pager = ResultPager(sets, reader)  # type: ignore[arg-type]
    sets.saved = _items()
    page = asyncio.run(pager.continue_page(NS, "ab12.0", 3))
    assert len(reader.calls) == 1 and [o.id for o in page.objects] == [DOC, OTHER]
    assert page.objects[0].evidence[0].snippet == "the harbour crane rests"
    bare = asyncio.run(pager.materialize(NS, _items(), None))
    assert reader.calls[-1][1] == []  # no snippets asked: no texts read
    assert [e.snippet for e in bare[0].evidence] == ["", ""]
