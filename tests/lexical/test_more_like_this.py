"""More like this on a real Tantivy index (`TantivySearcher.search_like`): a document's lexemes
find the documents sharing its distinctive ones, within one namespace's index."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime
from pathlib import Path

from pipeline.domain.read_model import Filters
from pipeline.lexical.documents import RowDocument, namespace_dir, open_index, to_document
from pipeline.lexical.searcher import TantivySearcher

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
