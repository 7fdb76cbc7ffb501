"""Homonyms on the real stack: PERSON "Jordan" and GPE "Jordan" are two entities (migration 0021:
an entity is its namespace, normalised name and label class); an untyped mention finds the one
typed entity of its name when there is only one, and a name of its own when several could be
meant; the proposal pass never merges the homonyms (nor an untyped name with a typed one); the
graph holds the objects and nothing of the entities (verify clean); `/v1/resolve` shows the
homonyms as a tie. Two tenants throughout. Also: names that differ only in letters `fold`
transliterates are merged.

The stage runs in-process with `TypedExtractor` (tests/resolution/typed.py) on a database and
graph of each test's own.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from fastapi.testclient import TestClient

from api.app import create_app
from pipeline.entities.ids import entity_id
from pipeline.entities.merging import propose_all
from pipeline.entities.resolving import ResolveConfig
from pipeline.entities.stage import ExtractionStage
from pipeline.ops.verify import verify
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.entities.projutil import graph_shape, relay
from tests.entities.stageutil import apply, put, q
from tests.resolution.typed import TypedExtractor

pytestmark = pytest.mark.stack


def extract_and_propose(settings: Settings, roots: list[uuid.UUID]) -> None:
    """What the worker does after a consumer batch: extract the roots, then the proposal pass."""
    pool = make_pool(settings, max_size=2)
    try:
        ExtractionStage(settings, pool, TypedExtractor()).run(roots)  # type: ignore[arg-type]
        propose_all(pool, batch=100, config=ResolveConfig.from_settings(settings))
    finally:
        pool.close()


def live(settings: Settings, ns: uuid.UUID) -> dict[tuple[str, str], tuple[uuid.UUID, int]]:
    """(norm, label) -> (id, part_count) of the namespace's live entities."""
    return {(norm, label): (eid, n) for eid, norm, label, n in q(
        settings, "SELECT id, norm, label, part_count FROM entities WHERE namespace_id = %s"
        " AND merged_into IS NULL", ns)}


def test_homonyms_are_two_entities_and_stay_two(db: psycopg.Connection[Any],
                                                 proj_settings: Settings) -> None:
    settings = proj_settings
    a, b = uuid.uuid4(), uuid.uuid4()
    o1, o2, o3, o4, o5 = (uuid.uuid4() for _ in range(5))
    apply(settings, [put(a, o1, title="Jordan the player flew to Jordan the country"),
                     put(a, o2, title="then Jordan the player scored"),
                     put(b, o4, title="far away Jordan the country lies")])
    extract_and_propose(settings, [o1, o2, o4])
    # one untyped mention in each tenant: A has two typed Jordans, B one
    apply(settings, [put(a, o3, title='who is "Jordan" here'),
                     put(b, o5, title='news from "Jordan" today')])
    extract_and_propose(settings, [o3, o5])

    in_a = live(settings, a)
    assert {k: n for k, (_, n) in in_a.items()} == {
        ("jordan", "PERSON"): 2, ("jordan", "GPE"): 1, ("jordan", "QUOTED"): 1}
    assert in_a[("jordan", "PERSON")][0] == entity_id(a, "jordan", "PERSON")
    assert in_a[("jordan", "GPE")][0] == entity_id(a, "jordan", "GPE")
    assert in_a[("jordan", "QUOTED")][0] == entity_id(a, "jordan")  # untyped: the old id
    # B: the quoted Jordan is the one Jordan B knows, the country
    assert {k: n for k, (_, n) in live(settings, b).items()} == {("jordan", "GPE"): 2}
    assert q(settings, "SELECT count(*) FROM entity_merges") == [(0,)]
    # the untyped name is held against each homonym; the homonyms are never a pair
    held = {(f, t, s) for f, t, s in q(
        settings, "SELECT f.label, t.label, e.status FROM entity_edges e"
        " JOIN entities f ON f.id = e.from_id JOIN entities t ON t.id = e.to_id"
        " WHERE e.namespace_id = %s AND e.edge_type = 'POSSIBLY_SAME'", a)}
    assert {frozenset((f, t)) for f, t, _ in held} == {frozenset(("QUOTED", "PERSON")),
                                                      frozenset(("QUOTED", "GPE"))}
    assert {s for _, _, s in held} == {"held"}

    relay(settings)
    nodes, edges = graph_shape(settings)
    assert nodes == {"Entity": 5} and not edges  # the entities stay in Postgres
    assert verify(settings).clean

    keys = {"key-a": [str(a)], "key-b": [str(b)]}
    with TestClient(create_app(settings.model_copy(update={"api_keys": keys}))) as client:
        def resolve(key: str, phrase: str) -> dict[str, Any]:
            got = client.post("/v1/resolve", json={"query": phrase},
                              headers={"Authorization": f"Bearer {key}"})
            assert got.status_code == 200, got.text
            return dict(got.json()["results"][0])

        tie = resolve("key-a", "Jordan")
        assert tie["unresolved"] and tie["reason"] == "tie"
        assert {c["label"] for c in tie["candidates"]} == {"PERSON", "GPE", "QUOTED"}
        one = resolve("key-b", "Jordan")
        assert one["entity_id"] == str(entity_id(b, "jordan", "GPE"))
        person = client.post("/v1/resolve", json={"query": "Jordan", "labels": ["PERSON"]},
                             headers={"Authorization": "Bearer key-a"}).json()["results"][0]
        assert person["entity_id"] == str(entity_id(a, "jordan", "PERSON"))


def test_transliterated_letters_merge_and_other_scripts_fold(db: psycopg.Connection[Any],
                                                           proj_settings: Settings) -> None:
    settings = proj_settings
    a, b = uuid.uuid4(), uuid.uuid4()
    o1, o2, o3 = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    apply(settings, [put(a, o1, title="trains from Łódź Fabryczna"),
                     put(b, o3, title="trains from Lodz Fabryczna")])
    extract_and_propose(settings, [o1, o3])
    apply(settings, [put(a, o2, title="trains from Lodz Fabryczna")])
    extract_and_propose(settings, [o2])
    # fold("Łódź Fabryczna") == fold("Lodz Fabryczna"): merged at 0.95, in A only
    merged = q(settings, "SELECT f.name, i.name, m.method FROM entity_merges m"
               " JOIN entities f ON f.id = m.from_id JOIN entities i ON i.id = m.into_id"
               " WHERE m.namespace_id = %s", a)
    assert len(merged) == 1 and merged[0][2] == "fold"
    assert {merged[0][0], merged[0][1]} == {"Łódź Fabryczna", "Lodz Fabryczna"}
    assert len(live(settings, a)) == 1
    assert list(live(settings, b)) == [("lodz fabryczna", "NAME")]
    assert q(settings, "SELECT count(*) FROM entity_merges WHERE namespace_id = %s", b) == [(0,)]
    folds = q(settings, "SELECT brainstream_name_fold(norm) FROM entities"
              " WHERE namespace_id = %s", a)
    assert set(folds) == {("lodz fabryczna",)}
