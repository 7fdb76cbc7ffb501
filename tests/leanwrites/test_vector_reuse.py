"""Vectors reused by (namespace, text hash, model key) (`pipeline/embedding/reuse.py`): a text a
model embedded once in a namespace is not embedded again by it there, by the embedding stage,
the message extractor or the name vectors, nor by a replay that finds it in the live
generation's database; never across namespaces, never from another model; purge removes what
could be reused. Real Postgres (fresh databases of the test stack); the embedder is the static
one behind a counter."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from pipeline.domain.index_text import text_hash
from pipeline.domain.mentions import Extraction
from pipeline.embedding.embedders import StaticEmbedder
from pipeline.embedding.identity import model_key
from pipeline.embedding.reuse import VectorReuse
from pipeline.embedding.service import EmbeddingService, stored_vectors
from pipeline.entities.name_vectors import embed_names
from pipeline.memory.extraction import MessageExtraction
from pipeline.memory.store.work import PgMessageWork
from pipeline.ops.purge import purge
from pipeline.ports import Vectors
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.memory.memutil import add, message
from tests.pipelineutil import apply_only, envelope, put
from tests.stackutil import fresh_database

pytestmark = pytest.mark.stack

TEXT = "Acme Robotics builds warehouse arms in Rotterdam."


class Counting:
    """The static embedder, recording every text it is given; `identity` as told (another
    identity is another model, even with the same name and dimension)."""

    name, dim = "static", 256

    def __init__(self, identity: str | None = None) -> None:
        self.inner = StaticEmbedder()
        self.identity = identity or self.inner.identity
        self.seen: list[str] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.seen.extend(texts)
        return self.inner.embed(texts)


@pytest.fixture()
def two(stack_settings: Settings) -> Iterator[tuple[Settings, Settings]]:
    """Two fresh databases: a live generation's and a new one's."""
    yield fresh_database(stack_settings, "reuse_a"), fresh_database(stack_settings, "reuse_b")


def _embed(settings: Settings, embedder: Counting, source: Settings | None = None) -> Any:
    pool = make_pool(settings, max_size=2, name="reuse-test")
    src = make_pool(source, max_size=1, name="reuse-test-source") if source else None
    try:
        return EmbeddingService(settings, pool, embedder,
                                reuse=VectorReuse.of(embedder, src)).run()
    finally:
        pool.close()
        if src is not None:
            src.close()


def _vectors(settings: Settings, root: str) -> dict[str, Any]:
    """The stored vectors of an object and its parts, by index text hash."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        register_vector(conn)
        return {r[0]: r[1] for r in conn.execute(
            "SELECT e.embedded_hash, e.embedding FROM object_embeddings e"
            " WHERE e.root_id = %s", (root,)).fetchall()}


def test_a_text_is_embedded_once_per_namespace_and_never_across(
        two: tuple[Settings, Settings]) -> None:
    settings, _ = two
    a, b = uuid.uuid4(), uuid.uuid4()
    embedder = Counting()
    first = put(a, kind="doc", title="Acme", content=TEXT)
    apply_only(settings, [first])
    stats = _embed(settings, embedder)
    assert stats.embedded == 2 and stats.reused == 0  # the document and its one part
    calls = len(embedder.seen)

    again = put(a, kind="doc", title="Acme", content=TEXT)  # another object, the same text
    apply_only(settings, [again])
    stats = _embed(settings, embedder)
    assert (stats.embedded, stats.reused) == (0, 2)
    assert len(embedder.seen) == calls  # no model call
    assert _vectors(settings, again["data"]["id"]).keys() == \
        _vectors(settings, first["data"]["id"]).keys()
    for key, vector in _vectors(settings, again["data"]["id"]).items():
        assert np.array_equal(vector, _vectors(settings, first["data"]["id"])[key])

    other = put(b, kind="doc", title="Acme", content=TEXT)  # another tenant's same text
    apply_only(settings, [other])
    stats = _embed(settings, embedder)
    assert (stats.embedded, stats.reused) == (2, 0)
    assert len(embedder.seen) > calls
    # the lookup itself answers nothing for a namespace that does not hold the text
    hashes = list(_vectors(settings, first["data"]["id"]))
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        register_vector(conn)
        key = model_key(embedder)
        assert stored_vectors(conn, key, [(uuid.uuid4(), h) for h in hashes]) == {}
        assert len(stored_vectors(conn, key, [(a, h) for h in hashes])) == len(hashes)
        assert stored_vectors(conn, "static:another", [(a, h) for h in hashes]) == {}


def test_a_new_generation_takes_the_live_ones_vectors_of_the_same_model_only(
        two: tuple[Settings, Settings]) -> None:
    live, new = two
    a, b = uuid.uuid4(), uuid.uuid4()
    events = [put(a, kind="doc", title=f"Doc {i}", content=f"{TEXT} Paragraph {i}.\n\n"
                  f"A second paragraph about arm {i} and its battery.") for i in range(6)]
    apply_only(live, events)
    assert _embed(live, Counting()).embedded > 0

    # the same events in the new generation, and one the live one never had (tenant b)
    apply_only(new, [*events, put(b, kind="doc", title="Doc 0", content=events[0]["data"][
        "content"])])
    same = Counting()
    stats = _embed(new, same, source=live)
    assert stats.reused > 0 and stats.embedded == 2  # only tenant b's document and its part
    assert all("Doc 0" in text for text in same.seen)
    for event in events:
        root = event["data"]["id"]
        old, rebuilt = _vectors(live, root), _vectors(new, root)
        assert old.keys() == rebuilt.keys()
        assert all(np.array_equal(old[k], rebuilt[k]) for k in old)

    # another model (same name and dimension, another identity) reuses nothing
    other = fresh_database(live, "reuse_c")
    apply_only(other, events)
    changed = Counting(identity="static wordllama l2_supercat==9.9 dim=256")
    stats = _embed(other, changed, source=live)
    assert stats.reused == 0 and stats.embedded > 0 and changed.seen


def test_purge_removes_the_vectors_a_text_could_reuse(two: tuple[Settings, Settings]) -> None:
    settings, _ = two
    ns = uuid.uuid4()
    embedder = Counting()
    gone = put(ns, kind="doc", title="Acme", content=TEXT)
    apply_only(settings, [gone])
    _embed(settings, embedder)
    apply_only(settings, [envelope("object.soft_delete", ns, {"id": gone["data"]["id"]})])
    assert purge(settings, timedelta(0)).objects == 1

    apply_only(settings, [put(ns, kind="doc", title="Acme", content=TEXT)])
    stats = _embed(settings, embedder)
    assert (stats.embedded, stats.reused) == (2, 0)  # nothing of the purged object was kept


def test_a_message_text_embedded_once_is_reused_in_its_namespace_only(
        two: tuple[Settings, Settings]) -> None:
    settings, _ = two
    a, b = uuid.uuid4(), uuid.uuid4()
    embedder = Counting()

    def extract() -> int:
        pool = make_pool(settings, max_size=2, name="reuse-test-memory")
        try:
            return MessageExtraction(settings, PgMessageWork(pool), embedder,
                                     _NoEntities()).run().reused
        finally:
            pool.close()

    apply_only(settings, [add(a, "first", message("We met Caroline in Lisbon."))])
    assert extract() == 0
    calls = len(embedder.seen)
    apply_only(settings, [add(a, "second", message("We met Caroline in Lisbon.")),
                          add(b, "third", message("We met Caroline in Lisbon."))])
    assert extract() == 1  # tenant a's; tenant b's is embedded
    assert len(embedder.seen) == calls + 1
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        rows = conn.execute("SELECT namespace_id, embedded_hash, model, embedding IS NOT NULL"
                            " FROM messages").fetchall()
    assert len(rows) == 3 and len({r[1] for r in rows}) == 1
    assert {(r[2], r[3]) for r in rows} == {(model_key(embedder), True)}


def test_a_name_vector_comes_from_the_live_generation(two: tuple[Settings, Settings]) -> None:
    live, new = two
    ns, other = uuid.uuid4(), uuid.uuid4()
    insert = ("INSERT INTO entities (id, namespace_id, name, norm, label, part_count)"
              " VALUES (%s, %s, %s, %s, 'ORG', 1)")
    for settings, rows in ((live, [(ns, "Acme Robotics")]),
                           (new, [(ns, "Acme Robotics"), (other, "Acme Robotics")])):
        with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
            for namespace, name in rows:
                conn.execute(insert, (uuid.uuid4(), namespace, name, name.lower()))
    first = Counting()
    pool = make_pool(live, max_size=1, name="reuse-test-names")
    try:
        assert embed_names(pool, first, None, batch=10) == 1
    finally:
        pool.close()

    again = Counting()
    pool, source = (make_pool(s, max_size=1, name="reuse-test-names") for s in (new, live))
    try:
        assert embed_names(pool, again, None, batch=10,
                           reuse=VectorReuse.of(again, source)) == 2
    finally:
        pool.close()
        source.close()
    assert again.seen == ["Acme Robotics"]  # the other tenant's; tenant ns's came stored
    with psycopg.connect(new.effective_postgres_dsn) as conn:
        rows = conn.execute("SELECT name_hash, model FROM entity_name_vectors").fetchall()
    assert set(rows) == {(text_hash("Acme Robotics"), model_key(again))}


class _NoEntities:
    """An extractor that finds nothing (the entity extractor is not what is tested here)."""

    def extract(self, rows: Sequence[Any]) -> list[Extraction]:
        return [Extraction() for _ in rows]
