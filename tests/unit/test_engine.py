"""Engine decisions that need no database: which channels run, and the degrade label."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import pytest

from pipeline.domain.errors import Unavailable
from pipeline.domain.kinds import KindCatalog
from pipeline.domain.read_model import Filters, Hit, RichObject, RowMeta, SearchQuery
from pipeline.retrieval.engine import EngineConfig, RetrievalEngine

DOC = uuid.UUID(int=7)


class _Searcher:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def _hit(self, name: str) -> list[Hit]:
        self.calls.append(name)
        return [Hit(DOC, 1.0)]

    async def search_lexical(self, *a: Any) -> list[Hit]:
        return await self._hit("lexical")

    async def search_trigram(self, *a: Any) -> list[Hit]:
        return await self._hit("trigram")

    async def search_dense(self, *a: Any) -> list[Hit]:
        return await self._hit("dense")

    async def exact_matches(self, *a: Any) -> list[Hit]:
        return await self._hit("exact")

    async def row_meta(self, ns: uuid.UUID, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, RowMeta]:
        return {i: RowMeta(i, None) for i in ids}


class _Reader:
    async def hydrate(self, ns: uuid.UUID, ids: Sequence[uuid.UUID], *,
                      with_content: bool = False,
                      content_of: Sequence[uuid.UUID] = ()) -> dict[uuid.UUID, RichObject]:
        now = datetime.now(UTC)
        return {i: RichObject(i, "doc", "title", None, 0.0, {}, None, None, None, now, now)
                for i in ids}


async def _catalog() -> KindCatalog:
    return KindCatalog([])


def _engine(searcher: _Searcher, embed: Any) -> RetrievalEngine:
    return RetrievalEngine(searcher, _Reader(), None, _catalog, embed,  # type: ignore[arg-type]
                           EngineConfig())


async def _vector(text: str) -> list[float]:
    return [1.0, 0.0]


async def _down(text: str) -> list[float]:
    raise Unavailable("embedder down")


def test_search_runs_the_three_channels() -> None:
    searcher = _Searcher()
    asyncio.run(_engine(searcher, _vector).search(
        uuid.uuid4(), SearchQuery("a long natural language question about things", Filters())))
    assert sorted(searcher.calls) == ["dense", "lexical", "trigram"]


def test_a_down_embedder_degrades_to_lexical_only() -> None:
    searcher = _Searcher()
    page = asyncio.run(_engine(searcher, _down).search(uuid.uuid4(), SearchQuery("acme")))
    assert page.degrade == "lexical_only"
    assert [o.id for o in page.objects] == [DOC]
    assert "dense" not in searcher.calls


class _DatabaseDown(_Searcher):
    async def search_dense(self, *a: Any) -> list[Hit]:
        raise Unavailable("postgres: couldn't get a connection after 5.00 sec")


def test_the_database_down_under_the_dense_channel_fails_the_search() -> None:
    # The embedder answered; the vector query could not reach Postgres. That is not
    # `lexical_only` (which tells a caller the embedder is down): the request is a 503.
    with pytest.raises(Unavailable, match="postgres"):
        asyncio.run(_engine(_DatabaseDown(), _vector).search(uuid.uuid4(), SearchQuery("acme")))
