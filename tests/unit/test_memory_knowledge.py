"""The knowledge part of a memory search degrades, never fails the memory answer: a document
search that is unavailable gives no documents and says so; its own degrade is passed on; a
refused request is the caller's error. The engine is a fake here (this tests the shell's
mapping; tests/memory/test_memory_graph.py runs the real one)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from pipeline.domain.errors import InvalidInput, Unavailable
from pipeline.domain.read_model import Page, SearchQuery
from pipeline.memory.knowledge import KNOWLEDGE_UNAVAILABLE, search_knowledge

NS = uuid.uuid4()


def test_an_unavailable_document_search_is_a_labelled_empty_answer() -> None:
    async def down(ns: uuid.UUID, q: SearchQuery) -> Page:
        raise Unavailable("postgres is down")

    answer = asyncio.run(search_knowledge(down, NS, "q", 10))
    assert (answer.objects, answer.degraded) == ((), KNOWLEDGE_UNAVAILABLE)


def test_the_document_search_runs_in_its_default_mode_and_passes_its_degrade_on() -> None:
    asked: list[SearchQuery] = []

    async def lexical(ns: uuid.UUID, q: SearchQuery) -> Page:
        asked.append(q)
        return Page((), None, False, degrade="lexical_only")

    answer = asyncio.run(search_knowledge(lexical, NS, "Caroline", 500))
    assert answer.degraded == "lexical_only"
    assert (asked[0].mode, asked[0].query, asked[0].limit) == ("hybrid", "Caroline", 100)


def test_a_refused_request_is_not_a_degradation() -> None:
    async def refuses(ns: uuid.UUID, q: SearchQuery) -> Page:
        raise InvalidInput("query too long", field="query")

    with pytest.raises(InvalidInput):
        asyncio.run(search_knowledge(refuses, NS, "q", 10))
