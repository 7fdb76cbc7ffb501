"""More like this on the SQL BM25 (LEXICAL_ENGINE=postgres): a document's most distinctive
lexemes find the documents of its topic, in the caller's namespace only."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest

from pipeline.domain.errors import NotFound
from pipeline.domain.read_model import Filters
from pipeline.retrieval.store.likeness import PgLikenessSource
from pipeline.retrieval.store.search import PgPartSearcher
from tests.pipelineutil import put
from tests.search.searchref import apply_events

pytestmark = pytest.mark.stack

TEXTS = {
    "fold": "Protein folding kinetics of chaperonin substrates measured by calorimetry.",
    "fold2": "Chaperonin assisted protein folding kinetics and calorimetry of substrates.",
    "bread": "Sourdough bread rises with wild yeast and lactobacilli in the starter.",
    "weather": "Monsoon rainfall patterns shift with ocean temperatures.",
}


def test_like_finds_the_topic_in_the_namespace(db: psycopg.Connection[Any], aio: asyncio.Runner,
                                               searcher: PgPartSearcher, pool: Any) -> None:
    ids: dict[tuple[str, str], uuid.UUID] = {}
    for tenant in ("a", "b"):
        ns = uuid.uuid4()
        for name, text in TEXTS.items():
            ids[tenant, name] = uuid.uuid4()
            apply_events(db, [put(ns, id=str(ids[tenant, name]), kind="doc", title=name,
                                  content=text)])
        ids[tenant, "ns"] = ns
    a = ids["a", "ns"]
    like = aio.run(PgLikenessSource(pool).likeness(a, ids["a", "fold"]))
    assert ids["a", "fold"] in like.exclude and like.terms["chaperonin"] >= 1
    hits = aio.run(searcher.search_like(a, like.terms, Filters(), [], 10))
    rows = {r[0]: r[1] for r in db.execute(
        "SELECT id, coalesce(parent_id, id) FROM objects WHERE namespace_id = %s", (a,))}
    found = [rows.get(h.id) for h in hits if h.id not in like.exclude]
    assert found and found[0] == ids["a", "fold2"]
    assert None not in found  # never a row of B
    with pytest.raises(NotFound):
        aio.run(PgLikenessSource(pool).likeness(a, ids["b", "fold"]))
