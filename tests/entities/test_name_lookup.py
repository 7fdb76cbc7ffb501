"""The extraction stage looks each batch's names up once, before its write transaction (where
the new names' vectors are computed); the write-back looks up only the names unknown then and
follows the others to whatever they were merged into meanwhile. Real Postgres, in-process stage
(tests/entities/stageutil.py's `CapsExtractor`)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from psycopg_pool import ConnectionPool

from pipeline.domain.settings import Settings
from pipeline.embedding.embedders.static import StaticEmbedder
from pipeline.entities import merging
from pipeline.entities.ids import entity_id
from pipeline.entities.stage import ExtractionStage
from pipeline.stores.postgres import entities as entities_sql
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
        edb: Settings, epool: ConnectionPool) -> None:
    ns, a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    apply(edb, [put(ns, a, title="t", content="Kepler"),
                put(ns, b, title="t", content="Johannes Kepler")])
    ExtractionStage(edb, epool, CapsExtractor()).run([a, b])  # type: ignore[arg-type]
    kepler, johannes = entity_id(ns, "kepler"), entity_id(ns, "johannes kepler")

    class MergingEmbedder(StaticEmbedder):
        """Embeds the batch's new names (after the lookup, before the write transaction), and
        meanwhile a person merges Kepler into Johannes Kepler."""

        def embed(self, texts: Sequence[str]) -> Any:
            with epool.connection() as conn:
                merging.merge(conn, ns, kepler, johannes, dry_run=False, decided_by="tests")
            return super().embed(texts)

    apply(edb, [put(ns, c, title="t", content="Kepler met Tycho")])
    stats = ExtractionStage(edb, epool, CapsExtractor(),  # type: ignore[arg-type]
                            embedder=MergingEmbedder()).run([c])
    assert stats.failed == 0 and stats.extracted == 2
    assert _named(edb, c) == {johannes, entity_id(ns, "tycho")}
    assert q(edb, "SELECT merged_into FROM entities WHERE id = %s", kepler) == [(johannes,)]
