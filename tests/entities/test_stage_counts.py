"""The extraction stage's incremental counts equal a from-scratch recount, on the real stack.

The write-back recounts only what each batch touched (`part_count` of the entities its rows
named before and after, CO_OCCURS of the pairs they counted, all in set-based statements). Here
two tenants' documents go through many small batches, then edits, soft deletes, revivals and
hard-deleted stale chunks, and after each round every entity's `part_count` and every CO_OCCURS
edge (weight and evidence) must equal what a recount from the mention and object tables gives,
computed here in Python by the rule of docs/entities.md (`counted_entities`: a row's most
mentioned entities up to the cap). The other tenant's numbers stay as they were.
"""

from __future__ import annotations

import random
import uuid
from collections import Counter
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pipeline.entities import writeback
from pipeline.entities.ids import counted_entities, pairs
from pipeline.entities.stage import ExtractionStage
from pipeline.settings import Settings
from tests.entities.stageutil import CapsExtractor, apply, delete, put, q

# Capitalised names (CapsExtractor reads runs of them as one name: the text keeps them apart
# with lower-case words). A few are frequent, so pairs recur across rows and batches.
NAMES = ["Ada", "Babbage", "Church", "Turing", "Hopper", "Knuth", "Liskov", "Noether",
         "Hilbert", "Euler", "Gauss", "Riemann"]
CAP = 3  # small, so rows with more entities exercise the cap's ranking
EVIDENCE_N = 2


def text(rng: random.Random, words: int) -> str:
    weights = [8, 6, 4, 3, 2, 2, 1, 1, 1, 1, 1, 1]
    out = []
    for _ in range(words):
        out.append(rng.choices(NAMES, weights)[0] if rng.random() < 0.4 else "and then")
    return " ".join(out)


def long_text(rng: random.Random) -> str:
    """Enough words for several chunks (settings below: 16-token chunks)."""
    return text(rng, rng.randint(10, 60))


def expected(settings: Settings, ns: uuid.UUID) -> tuple[dict[uuid.UUID, int],
                                                         dict[tuple[uuid.UUID, uuid.UUID],
                                                              tuple[float, list[uuid.UUID]]]]:
    """From scratch: part_count per entity, and (weight, evidence) per CO_OCCURS pair."""
    rows: dict[uuid.UUID, Counter[uuid.UUID]] = {}
    for row_id, entity, n in q(
            settings, "SELECT m.row_id, m.entity_id, count(*) FROM mentions m"
            " JOIN objects o ON o.id = m.row_id AND o.deleted_at IS NULL"
            " WHERE m.namespace_id = %s GROUP BY 1, 2", ns):
        rows.setdefault(row_id, Counter())[entity] = int(n)
    parts: Counter[uuid.UUID] = Counter()
    edges: dict[tuple[uuid.UUID, uuid.UUID], list[uuid.UUID]] = {}
    for row_id, counts in rows.items():
        parts.update(counts.keys())
        for pair in pairs(counted_entities(counts, CAP)):
            edges.setdefault(pair, []).append(row_id)
    counts_all = {eid: parts.get(eid, 0) for (eid,) in q(
        settings, "SELECT id FROM entities WHERE namespace_id = %s AND merged_into IS NULL",
        ns)}
    return counts_all, {pair: (float(len(ids)), sorted(ids)[:EVIDENCE_N])
                        for pair, ids in edges.items()}


def stored(settings: Settings, ns: uuid.UUID) -> tuple[dict[uuid.UUID, int],
                                                       dict[tuple[uuid.UUID, uuid.UUID],
                                                            tuple[float, list[uuid.UUID]]]]:
    counts = {eid: n for eid, n in q(
        settings, "SELECT id, part_count FROM entities WHERE namespace_id = %s"
        " AND merged_into IS NULL", ns)}
    edges = {(a, b): (w, list(ev)) for a, b, w, ev in q(
        settings, "SELECT from_id, to_id, weight, evidence FROM entity_edges"
        " WHERE namespace_id = %s AND edge_type = 'CO_OCCURS'", ns)}
    return counts, edges


def _small_caps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(writeback, "COOCCUR_CAP", CAP)
    monkeypatch.setattr(writeback, "EVIDENCE_N", EVIDENCE_N)


def run_stage(settings: Settings, pool: ConnectionPool) -> None:
    ExtractionStage(settings, pool, CapsExtractor()).run()  # type: ignore[arg-type]


def test_incremental_counts_equal_a_full_recount(edb: Settings, epool: ConnectionPool,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _small_caps(monkeypatch)
    settings = edb.model_copy(update={"extract_batch_size": 5,
        "chunk_max_tokens": 16, "chunk_overlap_tokens": 0})
    rng = random.Random(11)
    ns, other = uuid.uuid4(), uuid.uuid4()
    docs = [uuid.uuid4() for _ in range(24)]
    theirs = [uuid.uuid4() for _ in range(6)]
    texts = {d: long_text(rng) for d in docs}
    apply(settings, [put(ns, d, title="doc", content=texts[d]) for d in docs]
          + [put(other, d, title="doc", content=long_text(rng)) for d in theirs])
    run_stage(settings, epool)
    assert stored(settings, ns) == expected(settings, ns)
    assert stored(settings, other) == expected(settings, other)
    assert any(n >= 5 for n in stored(settings, ns)[0].values())  # names recur across rows
    theirs_before = stored(settings, other)

    deleted: set[uuid.UUID] = set()
    done: Counter[str] = Counter()
    for round_ in range(3):
        events: list[dict[str, Any]] = []
        for d in rng.sample(docs, 8):
            action = rng.choice(["edit", "shorten", "delete", "revive"])
            if action in ("edit", "shorten"):
                # new text: re-extracted, old mentions replaced; shorter: fewer chunks, the
                # later parts are hard-deleted
                texts[d] = long_text(rng) if action == "edit" else text(rng, 4)
                events.append(put(ns, d, title="doc", content=texts[d]))
                deleted.discard(d)
            elif action == "delete":  # soft delete: mentions kept, counted out
                events.append(delete(ns, d))
                deleted.add(d)
            elif deleted:  # revival with the text it had: recounted, not re-extracted
                back = deleted.pop()
                events.append(put(ns, back, title="doc", content=texts[back]))
            else:
                continue
            done[action] += 1
        apply(settings, events)
        run_stage(settings, epool)
        assert q(settings, "SELECT count(*) FROM entity_extraction WHERE namespace_id = %s"
                 " AND (status = 'pending' OR recount)", ns) == [(0,)]
        got, want = stored(settings, ns), expected(settings, ns)
        assert got[0] == want[0], f"part_count differs after round {round_}"
        assert got[1] == want[1], f"CO_OCCURS differs after round {round_}"
    assert set(done) == {"edit", "shorten", "delete", "revive"}  # every kind of change ran
    assert stored(settings, other) == theirs_before


def test_a_batch_counts_the_pairs_of_its_new_entities_as_the_recount_does(
        edb: Settings, epool: ConnectionPool, monkeypatch: pytest.MonkeyPatch) -> None:
    """One batch that creates every entity it names: weight, evidence (the first ids, capped) and
    the soft-deleted rows left out must be what a recount gives, with no later batch to fix
    them (the test above runs many small batches, which recount each other's pairs)."""
    _small_caps(monkeypatch)
    settings = edb.model_copy(update={"extract_batch_size": 50})
    ns = uuid.uuid4()
    docs = [uuid.uuid4() for _ in range(7)]
    apply(settings, [put(ns, d, title="doc", content="Ada and then Babbage and then Church")
                     for d in docs])
    apply(settings, [delete(ns, docs[0])])  # extracted with the others, counted out
    run_stage(settings, epool)
    got, want = stored(settings, ns), expected(settings, ns)
    assert got == want
    assert sorted(w for w, _ in got[1].values()) == [6.0, 6.0, 6.0]
    assert all(len(evidence) == EVIDENCE_N for _, evidence in got[1].values())
