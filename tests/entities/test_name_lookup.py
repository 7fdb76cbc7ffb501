"""The extraction stage looks each batch's names up once, before its write transaction; the
write-back looks up only the names unknown then and follows the others to whatever they were
merged into meanwhile. Real Postgres, in-process stage (tests/entities/stageutil.py's
`CapsExtractor`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pipeline.entities import merging, stage as stage_module
from pipeline.entities.ids import entity_id
from pipeline.entities.stage import ExtractionStage
from pipeline.entities.store import writes as entities_sql
from pipeline.settings import Settings
from tests.entities.stageutil import CapsExtractor, apply, entities, put, q


def _named(settings: Settings, root: uuid.UUID) -> set[uuid.UUID]:
    """The entities the mentions of a root and its parts point to."""
    return {e for (e,) in q(settings, "SELECT DISTINCT m.entity_id FROM mentions m JOIN objects o"
                            " ON o.id = m.row_id WHERE o.id = %s OR o.parent_id = %s",
                            root, root)}


def test_each_batch_looks_its_names_up_once(edb: Settings, epool: ConnectionPool,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    ns, other, a, b, c = (uuid.uuid4() for _ in range(5))
    apply(edb, [put(ns, a, title="t", content="Kepler met Brahe"),
                put(other, b, title="t", content="Kepler")])
    ExtractionStage(edb, epool, CapsExtractor()).run([a, b])  # type: ignore[arg-type]

    lookups: list[set[Any]] = []
    real = entities_sql.by_norm

    def counted(conn: Any, keys: Iterable[tuple[uuid.UUID, str, str]]
                ) -> dict[tuple[uuid.UUID, str, str], uuid.UUID]:
        wanted = set(keys)
        if wanted:
            lookups.append(wanted)
        return real(conn, wanted)

    monkeypatch.setattr(entities_sql, "by_norm", counted)
    apply(edb, [put(ns, c, title="t", content="Brahe wrote to Kepler")])
    ExtractionStage(edb, epool, CapsExtractor()).run([c])  # type: ignore[arg-type]
    # one lookup of the batch's names; every name was known, so none in the transaction
    assert lookups == [{(ns, "brahe", ""), (ns, "kepler", "")}]
    assert _named(edb, c) == {entity_id(ns, "brahe"), entity_id(ns, "kepler")}
    # the other tenant's Kepler is its own entity, untouched
    assert set(entities(edb, other)) == {"kepler"}


def test_a_name_merged_between_lookup_and_write_back_lands_on_the_survivor(
        edb: Settings, epool: ConnectionPool, monkeypatch: pytest.MonkeyPatch) -> None:
    ns, a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    apply(edb, [put(ns, a, title="t", content="Kepler"),
                put(ns, b, title="t", content="Johannes Kepler")])
    ExtractionStage(edb, epool, CapsExtractor()).run([a, b])  # type: ignore[arg-type]
    kepler, johannes = entity_id(ns, "kepler"), entity_id(ns, "johannes kepler")

    looked_up = entities_sql.by_norm
    calls: list[Any] = []

    def merging_meanwhile(conn: Any, keys: Any) -> Any:
        """The batch's lookup, before the write transaction (the first call; the write-back
        looks up through the same module); meanwhile a person merges Kepler into Johannes
        Kepler."""
        found = looked_up(conn, keys)
        calls.append(keys)
        if len(calls) == 1:
            with epool.connection() as other:
                merging.merge(other, ns, kepler, johannes, dry_run=False, decided_by="tests")
        return found

    apply(edb, [put(ns, c, title="t", content="Kepler met Tycho")])
    monkeypatch.setattr(stage_module.entities_sql, "by_norm", merging_meanwhile)
    stats = ExtractionStage(edb, epool, CapsExtractor()).run([c])  # type: ignore[arg-type]
    monkeypatch.undo()
    assert stats.failed == 0 and stats.extracted == 2
    assert _named(edb, c) == {johannes, entity_id(ns, "tycho")}
    assert q(edb, "SELECT merged_into FROM entities WHERE id = %s", kepler) == [(johannes,)]
