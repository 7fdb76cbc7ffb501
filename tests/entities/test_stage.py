"""The extraction stage on the real stack (Postgres; the dead-letter topic on the broker): mentions,
entities, aliases, part_count and co-occurrence weights; re-puts, changed text, deletes and
revivals; refused rows dead-lettered; tenants apart.

The stage runs in-process with the explicit `CapsExtractor` (tests/entities/stageutil.py) on a
database of this module's own, so the expected entities can be computed by hand.
"""

from __future__ import annotations

import json
import uuid

import numpy as np
import pytest
from psycopg_pool import ConnectionPool

from pipeline.embedding.embedders.static import StaticEmbedder
from pipeline.entities import stage as stage_module, writeback
from pipeline.entities.ids import entity_id
from pipeline.entities.merging import _propose_round, propose_all
from pipeline.entities.name_vectors import embed_names
from pipeline.entities.resolving import ResolveConfig
from pipeline.entities.stage import ExtractionStage
from pipeline.kafka.io import DeadLetterWriter, make_producer
from pipeline.ops import dlq
from pipeline.settings import Settings
from tests.entities.stageutil import (
    CapsExtractor,
    apply,
    cooccurs,
    delete,
    entities,
    extraction_state,
    put,
    q,
)
from tests.pipelineutil import read_topic


def stage(settings: Settings, pool: ConnectionPool, extractor: CapsExtractor | None = None,
          **kw: object) -> ExtractionStage:
    return ExtractionStage(settings, pool, extractor or CapsExtractor(), **kw)  # type: ignore[arg-type]


def test_mentions_entities_aliases_counts_and_edges(edb: Settings, epool: ConnectionPool) -> None:
    ns, a, b = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    apply(edb, [
        put(ns, a, title="about Ada Lovelace", content="met with Babbage and Ada Lovelace"),
        put(ns, b, title="notes", content="then Babbage likes Menabrea, said Ada Lovelace")])
    stats = stage(edb, epool).run([a, b])
    # two roots, one part each; the roots' content is read through their parts
    assert stats.claimed == stats.extracted == 4 and stats.failed == stats.rows_skipped == 0
    found = entities(edb, ns)
    assert set(found) == {"ada lovelace", "babbage", "menabrea"}
    for norm, (eid, _) in found.items():
        assert eid == entity_id(ns, norm)  # derived: a replay rebuilds the same ids
    # a's root title, a's part, b's part name Ada; Babbage: both parts; Menabrea: b's part
    assert {n: c for n, (_, c) in found.items()} == {"ada lovelace": 3, "babbage": 2,
                                                     "menabrea": 1}
    assert stats.entities_created == 3 and stats.mentions == 6
    spans = q(edb, "SELECT m.field, m.start_pos, m.end_pos, m.text, e.norm FROM mentions m"
              " JOIN entities e ON e.id = m.entity_id WHERE m.row_id = %s ORDER BY 2", a)
    assert spans == [("title", 6, 18, "Ada Lovelace", "ada lovelace")]
    assert cooccurs(edb, ns) == {frozenset(("ada lovelace", "babbage")): 2.0,
                                 frozenset(("ada lovelace", "menabrea")): 1.0,
                                 frozenset(("babbage", "menabrea")): 1.0}
    aliases = {(norm, source) for norm, source in q(
        edb, "SELECT norm, source FROM entity_aliases WHERE namespace_id = %s", ns)}
    assert ("ada lovelace", "surface") in aliases and ("adalovelace", "extractor") in aliases
    relates = q(edb, "SELECT f.norm, e.predicate, t.norm, e.weight, cardinality(e.evidence)"
                " FROM entity_edges e JOIN entities f ON f.id = e.from_id"
                " JOIN entities t ON t.id = e.to_id WHERE e.namespace_id = %s"
                " AND e.edge_type = 'RELATES'", ns)
    assert relates == [("babbage", "likes", "menabrea", 1.0, 1)]
    # the entity layer is Postgres' alone: the write-back leaves nothing for the graph relay
    ops = q(edb, "SELECT DISTINCT op FROM outbox WHERE namespace_id = %s", ns)
    assert set(ops) <= {("node_sync",)}, ops


def test_same_text_is_not_extracted_again_and_changed_text_is(edb: Settings,
                                                              epool: ConnectionPool) -> None:
    ns, a = uuid.uuid4(), uuid.uuid4()
    apply(edb, [put(ns, a, title="first", content="Turing wrote to Church")])
    stage(edb, epool).run([a])
    before = extraction_state(edb, a)
    assert {s[0] for s in before.values()} == {"done"}

    apply(edb, [put(ns, a, title="first", content="Turing wrote to Church")])  # the same text
    extractor = CapsExtractor()
    assert stage(edb, epool, extractor).run([a]).claimed == 0 and extractor.calls == []
    assert extraction_state(edb, a) == before  # attempts and updated_at unchanged

    apply(edb, [put(ns, a, title="first", content="Turing wrote to Kleene")])
    stats = stage(edb, epool).run([a])
    assert stats.extracted == 2  # the root's hash covers its content too
    found = entities(edb, ns)
    assert found["kleene"][1] == 1 and found["church"][1] == 0  # kept, counted out
    assert cooccurs(edb, ns) == {frozenset(("turing", "kleene")): 1.0}


def test_text_changed_back_before_extraction_is_not_stuck(edb: Settings,
                                                          epool: ConnectionPool) -> None:
    """0012's trigger kept the intermediate hash when the text went back to the extracted one:
    the row stayed pending forever (migration 0014 fixes it)."""
    ns, a = uuid.uuid4(), uuid.uuid4()
    apply(edb, [put(ns, a, title="t", content="Hopper")])
    stage(edb, epool).run([a])
    apply(edb, [put(ns, a, title="t", content="Liskov")])
    apply(edb, [put(ns, a, title="t", content="Hopper")])
    assert {s[0] for s in extraction_state(edb, a).values()} == {"done"}
    assert {s[3] for s in extraction_state(edb, a).values()} == {True}
    assert "liskov" not in entities(edb, ns)


def test_text_changed_during_extraction_stays_pending(edb: Settings,
                                                      epool: ConnectionPool) -> None:
    ns, a = uuid.uuid4(), uuid.uuid4()
    apply(edb, [put(ns, a, title="t", content="Dijkstra")])

    class Racing(CapsExtractor):
        def extract(self, rows):  # type: ignore[no-untyped-def]
            if not self.calls:  # a put lands while the first batch is being extracted
                apply(edb, [put(ns, a, title="t", content="Hoare")])
            return super().extract(rows)

    stats = stage(edb, epool, Racing()).run([a], max_batches=1)
    assert stats.rows_skipped == 2 and stats.extracted == 0
    assert {s[0] for s in extraction_state(edb, a).values()} == {"pending"}
    stage(edb, epool).run([a])
    assert set(entities(edb, ns)) == {"hoare"}  # Dijkstra's mentions were never written


def test_soft_delete_and_revival_recount(edb: Settings, epool: ConnectionPool) -> None:
    ns, a, b = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    apply(edb, [put(ns, a, title="x", content="Noether and Hilbert"),
                put(ns, b, title="y", content="Noether and Hilbert again")])
    stage(edb, epool).run([a, b])
    assert entities(edb, ns)["noether"][1] == 2
    assert cooccurs(edb, ns) == {frozenset(("noether", "hilbert")): 2.0}

    apply(edb, [delete(ns, a)])
    stats = stage(edb, epool).run()
    assert stats.recounted >= 2 and stats.claimed == 0  # no extraction: the text is the same
    assert entities(edb, ns)["noether"][1] == 1
    assert cooccurs(edb, ns) == {frozenset(("noether", "hilbert")): 1.0}
    # the deleted part keeps its mentions (a revival needs no extraction), counted out
    assert q(edb, "SELECT count(*) FROM mentions m JOIN objects o ON o.id = m.row_id"
             " WHERE o.parent_id = %s", a) == [(2,)]

    apply(edb, [put(ns, a, title="x", content="Noether and Hilbert")])  # revived, same text
    stage(edb, epool).run()
    assert entities(edb, ns)["noether"][1] == 2
    assert cooccurs(edb, ns) == {frozenset(("noether", "hilbert")): 2.0}


def test_hard_deleted_stale_chunk_recount(edb: Settings, epool: ConnectionPool) -> None:
    ns, a = uuid.uuid4(), uuid.uuid4()
    long_text = " ".join(["filler words here"] * 120) + " Ramanujan and Hardy"
    apply(edb, [put(ns, a, title="t", content="Hardy " + long_text)])
    stage(edb, epool).run([a])
    parts = q(edb, "SELECT count(*) FROM objects WHERE parent_id = %s", a)[0][0]
    assert parts >= 2
    assert entities(edb, ns)["ramanujan"][1] == 1

    apply(edb, [put(ns, a, title="t", content="Hardy alone")])  # the later chunks are deleted
    stats = stage(edb, epool).run()
    assert stats.recounted >= 1
    found = entities(edb, ns)
    assert found["ramanujan"][1] == 0 and found["hardy"][1] == 1
    assert cooccurs(edb, ns) == {}
    assert q(edb, "SELECT count(*) FROM entity_recount") == [(0,)]


def test_refused_row_is_dead_lettered_and_the_rest_extracted(edb: Settings,
                                                             epool: ConnectionPool) -> None:
    ns, good, bad = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    apply(edb, [put(ns, good, title="fine", content="Shannon"),
                put(ns, bad, title="fine too", content="Nyquist POISON")])
    producer = make_producer(edb)
    try:
        stats = stage(edb, epool, CapsExtractor(refuse="POISON"),
                      dead_letters=DeadLetterWriter.of(producer, edb)).run([good, bad])
    finally:
        producer.close()
    assert stats.failed == 1 and stats.extracted == 3
    bad_part = q(edb, "SELECT id FROM objects WHERE parent_id = %s", bad)[0][0]
    assert extraction_state(edb, bad)[bad_part][:2] == ("failed", 1)
    assert set(entities(edb, ns)) == {"shannon"}
    letters = [(json.loads(v), h) for _, v, h in read_topic(edb, edb.topic_dlq)
               if h.get("brainstream.error.code") == "extraction_failed"]
    assert [v["id"] for v, _ in letters if v["namespace"] == str(ns)] == [str(bad_part)]

    # After a fix, `dlq retry` sets the row back to pending (not a republish to the input
    # topic, where a row description would only be dead-lettered again).
    ours = [d for d in dlq.read_all(edb) if d.code == "extraction_failed"
            and json.loads(d.value)["namespace"] == str(ns)]
    assert dlq.retry(edb, ours)["reextract"] == 1
    assert extraction_state(edb, bad)[bad_part][0] == "pending"
    assert stage(edb, epool).run([bad]).extracted == 1
    assert set(entities(edb, ns)) == {"shannon", "nyquist"}


def test_outage_fails_the_batch_after_retries(edb: Settings, epool: ConnectionPool,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    ns, a = uuid.uuid4(), uuid.uuid4()
    apply(edb, [put(ns, a, title="t", content="Gauss")])
    monkeypatch.setattr(stage_module, "EXTRACT_RETRY_ATTEMPTS", 2)
    monkeypatch.setattr(stage_module, "EXTRACT_RETRY_MAX_WAIT", 0.1)
    settings = edb
    extractor = CapsExtractor(down=True)
    stats = stage(settings, epool, extractor).run([a])
    assert stats.failed == 2 and len(extractor.calls) == 2  # retried, not halved
    assert {s[0] for s in extraction_state(edb, a).values()} == {"failed"}


def test_same_text_in_two_namespaces_makes_two_entities(edb: Settings,
                                                        epool: ConnectionPool) -> None:
    ns1, ns2, a, b = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    apply(edb, [put(ns1, a, title="t", content="Feynman"), put(ns2, b, title="t",
                                                               content="Feynman")])
    stage(edb, epool).run([a, b])
    one, two = entities(edb, ns1), entities(edb, ns2)
    assert one["feynman"][0] != two["feynman"][0]
    assert one["feynman"][1] == two["feynman"][1] == 1
    assert q(edb, "SELECT DISTINCT m.namespace_id FROM mentions m JOIN entities e"
             " ON e.id = m.entity_id WHERE e.id = %s", one["feynman"][0]) == [(ns1,)]


def test_resolution_follows_aliases_and_merges(edb: Settings, epool: ConnectionPool) -> None:
    ns, a = uuid.uuid4(), uuid.uuid4()
    survivor, merged = entity_id(ns, "curie"), entity_id(ns, "sklodowska")
    q(edb, "INSERT INTO entities (id, namespace_id, name, norm, label) VALUES"
      " (%s, %s, 'Curie', 'curie', 'NAME'), (%s, %s, 'Sklodowska', 'sklodowska', 'NAME')"
      " RETURNING id", survivor, ns, merged, ns)
    q(edb, "UPDATE entities SET merged_into = %s WHERE id = %s RETURNING id", survivor, merged)
    q(edb, "INSERT INTO entity_aliases (namespace_id, norm, alias, entity_id, source)"
      " VALUES (%s, 'marie', 'Marie', %s, 'manual') RETURNING entity_id", ns, merged)
    apply(edb, [put(ns, a, title="t", content="Sklodowska, also Marie")])
    stats = stage(edb, epool).run([a])
    assert stats.entities_created == 0
    assert q(edb, "SELECT DISTINCT m.entity_id FROM mentions m JOIN objects o ON o.id = m.row_id"
             " WHERE o.parent_id = %s", a) == [(survivor,)]
    assert entities(edb, ns)["curie"][1] == 1


def test_cooccurrence_counts_only_the_most_mentioned_entities(edb: Settings,
                                                              epool: ConnectionPool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    ns, a = uuid.uuid4(), uuid.uuid4()
    apply(edb, [put(ns, a, title="t", content="Euler, Euler, Euler, Bernoulli, Bernoulli,"
                                               " Lagrange, Laplace")])
    monkeypatch.setattr(writeback, "COOCCUR_CAP", 2)
    stage(edb, epool).run([a])
    assert cooccurs(edb, ns) == {frozenset(("euler", "bernoulli")): 1.0}
    assert entities(edb, ns)["laplace"][1] == 1  # still mentioned and counted


def _vectors(settings: Settings, *ids: uuid.UUID) -> dict[uuid.UUID, np.ndarray]:
    return {eid: np.array(text.strip("[]").split(","), dtype=np.float32) for eid, text in q(
        settings, "SELECT entity_id, embedding::text FROM entity_name_vectors"
        " WHERE entity_id = ANY(%s)", list(ids))}


def test_the_proposal_pass_writes_name_vectors_not_the_stage(edb: Settings,
                                                              epool: ConnectionPool) -> None:
    """Migration 0041: the stage leaves the vectors to the pass, which writes each tenant's
    names before it examines them; a broken embedder costs the vectors, never the pass."""
    tenants, a, b = (uuid.uuid4(), uuid.uuid4()), uuid.uuid4(), uuid.uuid4()
    apply(edb, [put(tenants[0], a, title="t", content="Kepler"),
                put(tenants[1], b, title="t", content="Kepler, Brahe")])
    stage(edb, epool).run([a, b])
    ids = [entity_id(tenants[0], "kepler"), entity_id(tenants[1], "kepler"),
           entity_id(tenants[1], "brahe")]
    assert _vectors(edb, *ids) == {}

    names = StaticEmbedder()
    stats = propose_all(epool, batch=2, config=ResolveConfig(), names=names)
    assert stats.examined >= 3
    stored = _vectors(edb, *ids)
    assert set(stored) == set(ids)
    for eid in ids:
        name = "Brahe" if eid == ids[2] else "Kepler"
        assert np.allclose(stored[eid], names.embed([name])[0], atol=1e-5)
    assert q(edb, "SELECT entity_id, namespace_id FROM entity_name_vectors"
             " WHERE entity_id = ANY(%s) ORDER BY 1", ids) == sorted(
        [(ids[0], tenants[0]), (ids[1], tenants[1]), (ids[2], tenants[1])])

    class Broken:
        calls = 0
        name, dim, identity = "broken", 256, "broken"

        def embed(self, texts: list[str]) -> object:
            Broken.calls += 1
            raise RuntimeError("no embeddings today")

    c = uuid.uuid4()
    apply(edb, [put(tenants[0], c, title="t", content="Galilei")])
    stage(edb, epool).run([c])
    galilei = entity_id(tenants[0], "galilei")
    stats = propose_all(epool, batch=2, config=ResolveConfig(), names=Broken())  # type: ignore[arg-type]
    assert stats.examined >= 1
    assert Broken.calls == 1  # asked once for the pass, not once per round
    assert q(edb, "SELECT count(*) FROM entity_proposal_queue WHERE entity_id = %s",
             galilei) == [(0,)]
    assert _vectors(edb, galilei) == {}
    assert embed_names(epool, names, tenants[0], batch=10) == 1  # what backfill runs
    assert set(_vectors(edb, galilei)) == {galilei}


def test_a_round_embeds_what_it_claims_without_a_vector(edb: Settings,
                                                        epool: ConnectionPool) -> None:
    """An entity created after the pass embedded its queue gets its vector in the round that
    claims it."""
    ns, a = uuid.uuid4(), uuid.uuid4()
    apply(edb, [put(ns, a, title="t", content="Huygens")])
    stage(edb, epool).run([a])
    huygens = entity_id(ns, "huygens")
    while _propose_round(epool, 50, ResolveConfig(), StaticEmbedder())[0]:
        pass
    assert set(_vectors(edb, huygens)) == {huygens}


def test_status_and_exporter_count_extraction_rows(edb: Settings,
                                                   epool: ConnectionPool) -> None:
    from pipeline.ops.status import collect, read_backlogs, render

    def counts() -> dict[str, int]:
        with epool.connection() as conn:
            return read_backlogs(conn, edb.memory_window).extraction

    before = counts()
    ns, a = uuid.uuid4(), uuid.uuid4()
    apply(edb, [put(ns, a, title="t", content="Bohr")])
    assert counts()["pending"] == before.get("pending", 0) + 2
    stage(edb, epool).run()
    assert counts().get("pending", 0) == 0
    assert counts()["done"] == before.get("done", 0) + 2 + before.get("pending", 0)
    report = collect(edb)
    assert report.extraction["pending"] == 0
    assert "entity extraction: 0 pending" in render(report)
