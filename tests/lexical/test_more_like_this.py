"""More like this on a real Tantivy index (`TantivySearcher.search_like`): a document's lexemes
find the documents sharing its distinctive ones, within one namespace's index."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import tantivy

from pipeline.domain.read_model import Filters
from pipeline.lexical.documents import (
    TEXT,
    RowDocument,
    namespace_dir,
    open_index,
    to_document,
)
from pipeline.lexical.searcher import TantivySearcher, _like_query, _top

DOCS = {
    "fold": {"chaperonin": [1, 5], "fold": [2], "protein": [3], "calorimetri": [4]},
    "fold2": {"chaperonin": [1], "fold": [2], "kinet": [3], "protein": [4]},
    "bread": {"sourdough": [1], "yeast": [2], "protein": [3]},
    "rain": {"monsoon": [1], "rain": [2]},
}


async def _no_lexemes(query: str) -> list[str]:
    return []


def _write(data_dir: Path, ns: uuid.UUID, ids: dict[str, uuid.UUID]) -> None:
    index = open_index(namespace_dir(data_dir, 1, ns), create=True)
    assert index is not None
    writer = index.writer()
    now = datetime.now(UTC)
    for name, positions in DOCS.items():
        writer.add_document(to_document(RowDocument(
            row_id=ids[name], root_id=ids[name], kind="doc", title=name, created_at=now,
            updated_at=now, properties={}, positions=positions, body=" ".join(positions))))
    writer.commit()
    writer.wait_merging_threads()


def test_like_ranks_the_shared_distinctive_terms_first(tmp_path: Path) -> None:
    a, b = uuid.uuid4(), uuid.uuid4()
    ids = {ns: {name: uuid.uuid4() for name in DOCS} for ns in (a, b)}
    for ns in (a, b):
        _write(tmp_path, ns, ids[ns])
    searcher = TantivySearcher(tmp_path, 1, _no_lexemes)
    terms = {lexeme: len(pos) for lexeme, pos in DOCS["fold"].items()}
    hits = asyncio.run(searcher.search_like(a, terms, Filters(), [], 10))
    names = {v: k for k, v in ids[a].items()}
    got = [names.get(h.id, "foreign") for h in hits]
    assert got[:2] == ["fold", "fold2"] and "rain" not in got and "foreign" not in got
    # scope and filters apply
    scoped = asyncio.run(searcher.search_like(a, terms, Filters(), [ids[a]["bread"]], 10))
    assert [h.id for h in scoped] == [ids[a]["bread"]]
    assert asyncio.run(searcher.search_like(a, terms, Filters(kinds=("note",)), [], 10)) == []


class _Stale:
    """A searcher as Tantivy's reader sees an index between a commit that deleted documents
    and the merge that purges them: a term's document count holds the deleted ones, so it can
    pass the live count (Tantivy's MoreLikeThis then panics: a 500 no handler can catch)."""

    def __init__(self, searcher: tantivy.Searcher, live: int) -> None:
        self.inner = searcher
        self.num_docs = live

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_like_builds_its_own_query_while_deleted_documents_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ns = uuid.uuid4()
    ids = {name: uuid.uuid4() for name in DOCS}
    _write(tmp_path, ns, ids)
    searcher = TantivySearcher(tmp_path, 1, _no_lexemes)
    terms = {lexeme: len(pos) for lexeme, pos in DOCS["fold"].items()}
    tantivys = asyncio.run(searcher.search_like(ns, terms, Filters(), [], 10))
    index = searcher.index(ns)
    assert index is not None
    # the query built here is Tantivy's: the same rows, the same scores
    live = index.searcher()
    dfs = {lexeme: live.doc_freq(TEXT, lexeme) for lexeme in terms}
    own = _top(live, _like_query(live.num_docs, terms, dfs), 10)
    assert [h.id for h in own] == [h.id for h in tantivys]
    assert [h.score for h in own] == pytest.approx([h.score for h in tantivys], rel=1e-5)

    class _Index:
        def searcher(self) -> _Stale:
            return _Stale(index.searcher(), live=1)  # "protein" is in 3 documents

    monkeypatch.setattr(searcher, "index", lambda namespace: _Index())
    stale = asyncio.run(searcher.search_like(ns, terms, Filters(), [], 10))
    assert [h.id for h in stale][:2] == [ids["fold"], ids["fold2"]]
