"""The engine fuses the channels it is given, by name: a new channel joins the fusion, a required
channel's failure fails the request, an optional one's labels the answer."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from typing import Any

import pytest

from pipeline.domain.errors import ChannelDegraded, Unavailable
from pipeline.domain.read_model import Filters, Hit, SearchQuery
from pipeline.ports import Channel
from pipeline.retrieval.channels import standard_channels
from pipeline.retrieval.engine import EngineConfig, RetrievalEngine
from tests.unit.test_engine import DOC, _catalog, _Reader, _Searcher, _vector

OTHER_DOC = uuid.UUID(int=2)


class _Extra:
    """A channel of its own (say, an entity-graph walk) that finds another document."""

    def __init__(self, name: str, degrade: str | None = None, fail: bool = False) -> None:
        self.name = name
        self.degrade = degrade
        self.fail = fail

    async def candidates(self, namespace: uuid.UUID, query: str, filters: Filters,
                         scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        if self.fail:  # its own dependency when it may degrade, else what all channels share
            raise (ChannelDegraded if self.degrade else Unavailable)(f"{self.name} down")
        return [Hit(OTHER_DOC, 1.0)]


def _engine(searcher: _Searcher, channels: Sequence[Channel] | None = None,
            embed: Any = _vector) -> RetrievalEngine:
    return RetrievalEngine(searcher, _Reader(), None, _catalog, embed,  # type: ignore[arg-type]
                           EngineConfig(), channels=channels)


def _search(engine: RetrievalEngine, query: str = "acme") -> Any:
    return asyncio.run(engine.search(uuid.uuid4(), SearchQuery(query, Filters())))


def test_a_channel_given_by_name_joins_the_fusion() -> None:
    searcher = _Searcher()
    channels = [*standard_channels(searcher, _vector, embed_timeout=1.0), _Extra("walk")]
    page = _search(_engine(searcher, channels))
    assert sorted(searcher.calls) == ["dense", "lexical", "trigram"]
    assert {o.id for o in page.objects} == {DOC, OTHER_DOC}
    assert page.degrade is None


def test_a_required_channel_that_fails_fails_the_request() -> None:
    searcher = _Searcher()
    channels = [*standard_channels(searcher, _vector, embed_timeout=1.0),
                _Extra("walk", fail=True)]
    with pytest.raises(Unavailable):
        _search(_engine(searcher, channels))


def test_an_optional_channel_that_fails_labels_the_answer() -> None:
    searcher = _Searcher()
    channels = [*standard_channels(searcher, _vector, embed_timeout=1.0),
                _Extra("walk", degrade="graph_unavailable", fail=True)]
    page = _search(_engine(searcher, channels))
    assert page.degrade == "graph_unavailable"
    assert [o.id for o in page.objects] == [DOC]


def test_no_embedder_answers_lexical_only() -> None:
    searcher = _Searcher()
    page = _search(_engine(searcher, embed=None))
    assert page.degrade == "lexical_only"
    assert "dense" not in searcher.calls


def test_find_exact_fuses_its_configured_channels_only() -> None:
    searcher = _Searcher()
    page = asyncio.run(_engine(searcher).find_exact(uuid.uuid4(), SearchQuery('"acme"')))
    assert sorted(searcher.calls) == ["exact", "lexical", "trigram"]
    assert page.degrade is None


def test_find_exact_must_name_channels_the_engine_has() -> None:
    searcher = _Searcher()
    with pytest.raises(ValueError, match="trigram"):
        _engine(searcher, [standard_channels(searcher, _vector, embed_timeout=1.0)[0]])


def test_a_channel_weighted_zero_is_not_asked() -> None:
    searcher = _Searcher()
    engine = RetrievalEngine(searcher, _Reader(), None, _catalog, _vector,  # type: ignore[arg-type]
                             EngineConfig(channel_weights=(("trigram", 0.0),)))
    page = _search(engine)
    assert sorted(searcher.calls) == ["dense", "lexical"]
    assert [o.id for o in page.objects] == [DOC]
    with pytest.raises(ValueError, match="weights"):
        RetrievalEngine(searcher, _Reader(), None, _catalog, _vector,  # type: ignore[arg-type]
                        EngineConfig(channel_weights=(("dense", -1.0),)))
