"""Mode `auto`'s gate (pure): a seed is strong when the query itself writes its words as a name
(the heuristic extractor's rules read over the query); `auto` walks from strong seeds alone.
The real-stack check of the decision is tests/entities/test_ppr_auto_gate.py."""

from __future__ import annotations

import asyncio

from pipeline.retrieval.ppr.seeds import named_in_query, query_names, query_ngrams
from pipeline.retrieval.ppr.stage import PprConfig, PprStage, SeedPlan
from tests.unit.test_ppr_stage import NS, MemoryGraph


def _names(query: str) -> list[str]:
    return [query[start:end] for start, end in query_names(query)]


def _plan(graph: MemoryGraph, query: str, config: PprConfig | None = None) -> SeedPlan:
    return asyncio.run(PprStage(graph, config or PprConfig()).plan(NS, query))


def test_the_query_names_what_the_extractor_would_name_in_a_passage() -> None:
    assert _names("Which nation is the birthplace of the director of Moonfall Harbor?") == [
        "Moonfall Harbor"]
    # a sentence-opening function word is no name; an acronym and a CamelCase word are
    assert _names("Does the ALDH1 level predict relapse in PyTorch models?") == [
        "ALDH1", "PyTorch"]
    # quantities are mentions, but no question is about "10%" or "6 months"
    assert _names("10% of SIDS deaths happen before 6 months.") == ["SIDS"]
    assert _names("which nation is the birthplace of the director") == []


def test_an_ngram_is_named_when_it_overlaps_a_name_of_the_query() -> None:
    query = "Who directed Moonfall Harbor in Ostravia?"
    names = query_names(query)
    named = {g.text for g in query_ngrams(query, max_tokens=2) if named_in_query(g, names)}
    assert {"Moonfall Harbor", "Moonfall", "Harbor", "Ostravia", "in Ostravia"} <= named
    assert "Who directed" not in named and "directed" not in named


def test_seeds_are_strong_only_where_the_query_writes_a_name() -> None:
    graph = MemoryGraph({"r1": ["Moonfall Harbor", "Elara Vantreck"], "r2": ["Birthplace"],
                         "r3": ["Elara Vantreck", "Ostravia"]}, extra_rows=50)
    plan = _plan(graph, "Which nation is the birthplace of the director of Moonfall Harbor?")
    # "birthplace" is a common word (no seed at all), the film is written as a name
    assert [(s.entity.name, s.strong) for s in plan.seeds] == [("Moonfall Harbor", True)]
    # written in lower case, the film's name matches (two words) but the query does not write
    # it as a name: a seed for mode ppr, none for auto
    plan = _plan(graph, "which nation is the birthplace of the director of moonfall harbor")
    assert [(s.entity.name, s.strong) for s in plan.seeds] == [("Moonfall Harbor", False)]
    assert plan.strong_only().seeds == ()


def test_strong_only_keeps_the_hubs_and_the_limit() -> None:
    rows = {f"r{i}": ["Corvid Studio"] for i in range(10)} | {"x": ["Elara Vantreck"]}
    graph = MemoryGraph(rows, extra_rows=30)  # 41 rows: the hub limit is 4.1 rows
    plan = _plan(graph, "Did Corvid Studio hire elara vantreck?", PprConfig(hub_min_rows=0))
    assert [h.name for h in plan.hubs] == ["Corvid Studio"]
    assert [(s.entity.name, s.strong) for s in plan.seeds] == [("Elara Vantreck", False)]
    strong = plan.strong_only()
    assert strong.seeds == () and strong.hubs == plan.hubs
    assert strong.hub_limit == plan.hub_limit


def test_a_possessive_run_also_comes_without_its_s() -> None:
    grams = query_ngrams("Was Grace Krilanovich\u2019s novel McDonald's?", max_tokens=2)
    texts = [g.text for g in grams]
    assert "Grace Krilanovich\u2019s" in texts and "Grace Krilanovich" in texts
    stripped = next(g for g in grams if g.text == "Grace Krilanovich")
    assert (stripped.start, stripped.end) == (1, 3)
    assert stripped.last - stripped.first == len("Grace Krilanovich")
    assert "McDonald's" in texts and "McDonald" in texts
    assert "Krilanovich\u2019s novel" in texts and "Krilanovich novel" not in texts
