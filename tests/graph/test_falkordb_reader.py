"""FalkorGraphReader on the real FalkorDB of the test stack, one fresh graph per test.

Graphs are built with FalkorGraphWriter (the production write path); readers use the asyncio
client. Ids are UUIDs named for readability through `Ids`.
"""

from __future__ import annotations

import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import falkordb
import falkordb.asyncio
import pytest

from pipeline.domain.errors import InvalidInput, Unavailable
from pipeline.graph.falkordb.reader import FalkorGraphReader, fulltext_query
from pipeline.graph.falkordb.schema import connect, prepare_graph
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.settings import Settings
from tests.graph.graphutil import (
    NS_A,
    NS_B,
    Ids,
    blend,
    edge,
    free_port,
    named_nodes as _nodes,
    node,
    private_falkordb,
    unit_vector,
)
from tests.stackutil import make_settings

pytestmark = pytest.mark.stack


# -- query sanitizing (no server) ------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("budget", "budget"),
    ("budget report", "budget|report"),
    ('budget (alpha) -"q:3" @x | %y* ~z', "budget|alpha|q|3|x|y|z"),
    ("a|b|", "a|b"),
    ("dup dup DUP", "dup|DUP"),
    ("snake_case", "snake_case"),
    ("_ __ a_b _c", "a_b|_c"),
    ("", ""),
    (" -|()@:\"'*%~{}[]<>", ""),
])
def test_fulltext_query_sanitizes(text: str, expected: str) -> None:
    assert fulltext_query(text) == expected


def test_fulltext_query_non_ascii_variants_and_caps() -> None:
    assert fulltext_query("NAÏVE") == "NAÏVE|naïve|Naïve"
    assert len(fulltext_query(" ".join(f"w{i}" for i in range(100))).split("|")) == 32
    assert fulltext_query("x" * 500) == "x" * 64


# -- entities: full text -------------------------------------------------------------------------


def _twin_namespaces(writer: FalkorGraphWriter, ids: Ids) -> None:
    """The same titles in two namespaces, plus kinds and a kind-less (placeholder) node."""
    writer.upsert_nodes([
        node(ids["a-budget"], NS_A, title="Quarterly budget", text="budget review for Q3"),
        node(ids["a-note"], NS_A, kind="note", title="Budget note", text="note note note"),
        node(ids["a-other"], NS_A, title="Holiday plan", text="beach"),
        node(ids["a-ghost"], NS_A, kind="", title="Budget ghost", text="budget budget"),
        node(ids["b-budget"], NS_B, title="Quarterly budget", text="budget review for Q3"),
        node(ids["b-note"], NS_B, kind="note", title="Budget note", text="short"),
    ])


@pytest.mark.anyio
async def test_text_namespace_isolation(writer: FalkorGraphWriter, reader: FalkorGraphReader,
                                        ids: Ids) -> None:
    _twin_namespaces(writer, ids)
    hits_a = await reader.find_entities_text(NS_A, "budget", [], 10)
    hits_b = await reader.find_entities_text(NS_B, "budget", [], 10)
    assert sorted(ids.names(h.id for h in hits_a)) == ["a-budget", "a-note"]
    assert sorted(ids.names(h.id for h in hits_b)) == ["b-budget", "b-note"]
    assert await reader.find_entities_text(uuid.uuid4(), "budget", [], 10) == []
    # Best first. RediSearch divides a term's frequency by the document's most frequent term:
    # "budget" weighs 1 in a-budget, 1/4 in a-note (where "note" appears 4 times).
    assert ids.name(hits_a[0].id) == "a-budget"
    assert hits_a[0].score > hits_a[1].score


@pytest.mark.anyio
async def test_text_best_first_not_by_id(writer: FalkorGraphWriter, reader: FalkorGraphReader,
                                         ids: Ids) -> None:
    writer.upsert_nodes([
        node(ids[f"{c}-weak"], NS_A, title="budget", text="other other other") for c in "abc"
    ] + [node(ids["z-strong"], NS_A, title="budget", text="budget")])
    hits = await reader.find_entities_text(NS_A, "budget", [], 2)
    assert ids.names(h.id for h in hits) == ["z-strong", "a-weak"]  # ties by id


@pytest.mark.anyio
async def test_text_kinds_placeholder_and_k(writer: FalkorGraphWriter,
                                            reader: FalkorGraphReader, ids: Ids) -> None:
    _twin_namespaces(writer, ids)
    notes = await reader.find_entities_text(NS_A, "budget", ["note"], 10)
    assert ids.names(h.id for h in notes) == ["a-note"]
    both = await reader.find_entities_text(NS_A, "budget", ["note", "doc"], 10)
    assert len(both) == 2
    # The kind-less node matches best on text, but is never returned.
    assert "a-ghost" not in ids.names(h.id for h in both)
    one = await reader.find_entities_text(NS_A, "budget", [], 1)
    assert ids.names(h.id for h in one) == ["a-budget"]
    assert await reader.find_entities_text(NS_A, "budget", [], 0) == []


@pytest.mark.anyio
async def test_text_query_syntax_is_harmless(writer: FalkorGraphWriter,
                                             reader: FalkorGraphReader, ids: Ids) -> None:
    _twin_namespaces(writer, ids)
    trips = reader.round_trips
    for text in ["", "   ", "-|()@", '"', "%%", "*"]:
        assert await reader.find_entities_text(NS_A, text, [], 10) == []
    assert reader.round_trips == trips  # nothing worth asking was sent
    hits = await reader.find_entities_text(NS_A, 'holiday (beach -"x:y" @z |', [], 10)
    assert ids.names(h.id for h in hits) == ["a-other"]
    # Any word matches: "holiday" finds one, "note" another.
    hits = await reader.find_entities_text(NS_A, "holiday NOTE", [], 10)
    assert sorted(ids.names(h.id for h in hits)) == ["a-note", "a-other"]


@pytest.mark.anyio
async def test_text_non_ascii_case(writer: FalkorGraphWriter, reader: FalkorGraphReader,
                                   ids: Ids) -> None:
    writer.upsert_nodes([node(ids["n"], NS_A, title="Naïve café", text="")])
    for text in ["naïve", "NAÏVE", "Naïve", "CAFÉ"]:
        hits = await reader.find_entities_text(NS_A, text, [], 10)
        assert ids.names(h.id for h in hits) == ["n"], text


# -- entities: vector ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_vector_namespace_isolation_and_score(writer: FalkorGraphWriter,
                                                    reader: FalkorGraphReader, ids: Ids,
                                                    dim: int) -> None:
    query = unit_vector(1, dim)
    writer.upsert_nodes([
        node(ids["a-same"], NS_A, title="x", embedding=query),
        node(ids["a-near"], NS_A, title="x", embedding=blend(query, unit_vector(2, dim), 0.3)),
        node(ids["a-far"], NS_A, kind="note", title="x", embedding=unit_vector(3, dim)),
        node(ids["b-same"], NS_B, title="x", embedding=query),
        node(ids["a-ghost"], NS_A, kind="", title="x", embedding=query),
    ])
    hits = await reader.find_entities_vector(NS_A, query, [], 10)
    assert ids.names(h.id for h in hits) == ["a-same", "a-near", "a-far"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert 1.0 > hits[1].score > hits[2].score
    hits_b = await reader.find_entities_vector(NS_B, query, [], 10)
    assert ids.names(h.id for h in hits_b) == ["b-same"]
    notes = await reader.find_entities_vector(NS_A, query, ["note"], 10)
    assert ids.names(h.id for h in notes) == ["a-far"]
    top = await reader.find_entities_vector(NS_A, query, [], 2)
    assert ids.names(h.id for h in top) == ["a-same", "a-near"]
    # Opposite direction: cosine distance 2, similarity -1 (last).
    opposite = await reader.find_entities_vector(NS_A, tuple(-x for x in query), [], 10)
    assert ids.name(opposite[-1].id) == "a-same"
    assert opposite[-1].score == pytest.approx(-1.0, abs=1e-5)


@pytest.mark.anyio
async def test_vector_overfetch_when_nearest_belong_elsewhere(
        writer: FalkorGraphWriter, reader: FalkorGraphReader, graph_settings: Settings,
        ids: Ids, dim: int) -> None:
    query = unit_vector(1, dim)
    # 200 nodes of B right around the query; A's 5 nodes are all farther than every one of B.
    writer.upsert_nodes([
        node(ids[f"b{i}"], NS_B, title="x", embedding=blend(query, unit_vector(100 + i, dim), 0.05))
        for i in range(200)
    ])
    writer.upsert_nodes([
        node(ids[f"a{i}"], NS_A, title="x", embedding=blend(query, unit_vector(500 + i, dim), 0.5))
        for i in range(5)
    ])
    trips = reader.round_trips
    hits = await reader.find_entities_vector(NS_A, query, [], 5)
    assert sorted(ids.names(h.id for h in hits)) == [f"a{i}" for i in range(5)]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    # Capabilities, the first round (all of B), one larger retry.
    assert reader.round_trips - trips == 3
    # With a cap below what is needed, B's nodes fill every entry the index may give: an exact
    # scan of A answers instead (B can never crowd A out).
    capped = FalkorGraphReader.from_settings(graph_settings, vector_cap=100)
    try:
        trips = capped.round_trips
        scanned = await capped.find_entities_vector(NS_A, query, [], 5)
        assert [(h.id, round(h.score, 5)) for h in scanned] == [
            (h.id, round(h.score, 5)) for h in hits]
        # capabilities, the first round, the retry up to the cap, the scan
        assert capped.round_trips - trips == 4
    finally:
        await capped.aclose()


@pytest.mark.anyio
async def test_vector_survives_orphan_index_entries(writer: FalkorGraphWriter,
                                                    reader: FalkorGraphReader,
                                                    graph_settings: Settings, ids: Ids,
                                                    dim: int) -> None:
    query = unit_vector(1, dim)
    nodes = [node(ids[f"a{i}"], NS_A, title=f"t{i}",
                  embedding=blend(query, unit_vector(10 + i, dim), 0.4)) for i in range(12)]
    writer.upsert_nodes(nodes)
    # Any SET on a vector-indexed node leaves an orphan entry (FalkorDB 4.16.3).
    graph = connect(graph_settings).select_graph(graph_settings.graph_name)
    graph.query("MATCH (n:Entity) SET n.title = n.title + '!'")
    writer.upsert_nodes([replace(n, title=f"{n.title}?") for n in nodes[:6]])
    hits = await reader.find_entities_vector(NS_A, query, [], 10)
    assert len(hits) == 10
    all_hits = await reader.find_entities_vector(NS_A, query, [], 50)
    assert len(all_hits) == 12


@pytest.mark.anyio
async def test_vector_bad_input(writer: FalkorGraphWriter, reader: FalkorGraphReader,
                                ids: Ids, dim: int) -> None:
    writer.upsert_nodes([node(ids["a"], NS_A, title="x", embedding=unit_vector(1, dim))])
    for bad in ([1.0, 0.0], [], [float("nan")] * dim):
        with pytest.raises(InvalidInput) as info:
            await reader.find_entities_vector(NS_A, bad, [], 5)
        assert info.value.field == "vector"
    assert await reader.find_entities_vector(NS_A, unit_vector(1, dim), [], 0) == []


# -- edges ---------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_edges_note_text_namespace_and_metadata(writer: FalkorGraphWriter,
                                                      reader: FalkorGraphReader,
                                                      ids: Ids) -> None:
    evidence = uuid.uuid4()
    writer.upsert_edges([
        edge(ids["a1"], ids["a2"], "CITES", note="the quarterly budget review",
             status="active", role="source", confidence=0.75, evidence_id=str(evidence)),
        edge(ids["a2"], ids["a3"], "CITES", note="budget footnote"),
        edge(ids["a1"], ids["a3"], "CITES", note="unrelated words"),
        edge(ids["a1"], ids["a3"], "MENTIONS", note="budget elsewhere"),
        edge(ids["b1"], ids["b2"], "CITES", ns=NS_B, note="the quarterly budget review"),
    ])
    hits = await reader.find_edges(NS_A, "CITES", "quarterly budget", 10)
    assert [(ids.name(h.from_id), ids.name(h.to_id)) for h in hits] == [
        ("a1", "a2"), ("a2", "a3")]
    first, second = hits
    assert first.score > second.score
    assert (first.relation_type, first.note, first.status, first.role, first.confidence,
            first.evidence_id) == ("CITES", "the quarterly budget review", "active", "source",
                                   0.75, evidence)
    assert (second.status, second.role, second.confidence, second.evidence_id) == (
        None, None, 0.0, None)
    hits_b = await reader.find_edges(NS_B, "CITES", "budget", 10)
    assert [(ids.name(h.from_id), ids.name(h.to_id)) for h in hits_b] == [("b1", "b2")]
    assert len(await reader.find_edges(NS_A, "CITES", "budget", 1)) == 1
    assert await reader.find_edges(NS_A, "CITES", "(|@", 10) == []
    assert await reader.find_edges(NS_A, "NEVER_WRITTEN", "budget", 10) == []
    with pytest.raises(InvalidInput) as info:
        await reader.find_edges(NS_A, "x`]->() DETACH DELETE n //", "budget", 10)
    assert info.value.field == "relation_type"


@pytest.mark.anyio
async def test_edges_type_indexed_after_first_call(writer: FalkorGraphWriter,
                                                   graph_settings: Settings, ids: Ids) -> None:
    reader = FalkorGraphReader.from_settings(graph_settings, capability_ttl=0.0)
    try:
        writer.upsert_edges([edge(ids["a"], ids["b"], "CITES", note="budget")])
        assert len(await reader.find_edges(NS_A, "CITES", "budget", 10)) == 1
        assert await reader.find_edges(NS_A, "LATER", "budget", 10) == []
        writer.upsert_edges([edge(ids["a"], ids["b"], "LATER", note="budget")])
        assert len(await reader.find_edges(NS_A, "LATER", "budget", 10)) == 1
    finally:
        await reader.aclose()


# -- missing graph, outages ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_missing_graph_reads_empty(stack_settings: Settings) -> None:
    dim = stack_settings.vector_dim
    settings = make_settings(graph_name=f"missing_{uuid.uuid4().hex[:8]}")
    reader = FalkorGraphReader.from_settings(settings)
    try:
        assert await reader.find_entities_text(NS_A, "budget", [], 5) == []
        assert await reader.find_entities_vector(NS_A, unit_vector(1, dim), [], 5) == []
        assert await reader.find_edges(NS_A, "CITES", "budget", 5) == []
        assert await reader.neighbors(NS_A, [uuid.uuid4()], [], "both", 2, 5) == []
    finally:
        await reader.aclose()


def test_unreachable_graph_is_unavailable() -> None:
    settings = make_settings(falkordb_url=f"redis://127.0.0.1:{free_port()}")
    with pytest.raises(Unavailable) as info:
        FalkorGraphReader.from_settings(settings)
    assert "graph" in info.value.message


@pytest.mark.anyio
async def test_graph_going_away_is_unavailable(tmp_path: Path, ids: Ids) -> None:
    with private_falkordb(tmp_path) as (proc, port):
        settings = make_settings(falkordb_url=f"redis://127.0.0.1:{port}", graph_name="gone")
        prepare_graph(settings)
        sync_db: Any = falkordb.FalkorDB.from_url(settings.effective_falkordb_url)
        FalkorGraphWriter(sync_db, "gone").upsert_edges([edge(ids["a"], ids["b"], note="x")])
        _nodes(FalkorGraphWriter(sync_db, "gone"), ids, "a b")
        reader = FalkorGraphReader.from_settings(settings)
        found = await reader.neighbors(NS_A, [ids["a"]], [], "out", 1, 5)
        assert [ids.name(n.id) for n in found] == ["b"]
        proc.terminate()
        proc.wait(timeout=30)
        calls = [
            reader.find_entities_text(NS_A, "x", [], 5),
            reader.find_edges(NS_A, "LINKS", "x", 5),
            reader.neighbors(NS_A, [ids["a"]], [], "out", 1, 5),
        ]
        for call in calls:
            with pytest.raises(Unavailable) as info:
                await call
            assert "graph" in info.value.message
        await reader.aclose()
