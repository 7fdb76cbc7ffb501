"""Entity name vectors of their own dimension (`ENTITY_NAME_EMBEDDER`, migration 0039): a database
for MiniLM passages keeps 256-dimensional static name vectors, a database migrated before 0039
loses the name vectors of the other model and `embed_names` (`brainstream entities backfill`)
gives them back per namespace, and a changed setting is refused rather than failing every write.
"""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql

from pipeline.domain.errors import MigrationError
from pipeline.embedding.embedders import (
    StaticEmbedder,
    build_name_embedder,
    name_vector_dim,
    same_name_embedder,
)
from pipeline.entities.name_vectors import embed_names
from pipeline.ops.migrations import apply_migrations, discover
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.stackutil import make_settings

pytestmark = pytest.mark.stack


def _empty_database(stack: Settings, **overrides: object) -> Settings:
    name = f"names_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(stack.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_settings(postgres_dsn=stack.effective_postgres_dsn.rsplit("/", 1)[0] + f"/{name}",
                         **overrides)


def _dims(settings: Settings) -> dict[str, int]:
    """The declared dimension of each vector column that matters here."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        rows = conn.execute(
            "SELECT c.relname, a.atttypmod FROM pg_attribute a JOIN pg_class c"
            " ON c.oid = a.attrelid WHERE a.attname = 'embedding'"
            " AND c.relname IN ('entities', 'entity_name_vectors', 'object_embeddings')"
            " AND NOT a.attisdropped").fetchall()
    return {str(name): int(mod) for name, mod in rows}


def _migrate_before(settings: Settings, version: int, tmp_path: Path) -> None:
    """Apply the migrations older than `version` only, as a database made before it was."""
    older = tmp_path / "migrations"
    older.mkdir()
    for migration in discover():
        if migration.version < version:
            shutil.copy(migration.path, older / migration.path.name)
    apply_migrations(settings, directory=older)


def _add_entity(conn: psycopg.Connection[Any], ns: uuid.UUID, name: str,
                vector: np.ndarray | None) -> uuid.UUID:
    eid = uuid.uuid4()
    conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label, embedding)"
                 " VALUES (%s, %s, %s, %s, 'ORG', %s)", (eid, ns, name, name.lower(), vector))
    return eid


def test_names_get_the_static_dimension_beside_minilm_passages(stack_settings: Settings
                                                                ) -> None:
    minilm = _empty_database(stack_settings, embedder="minilm")
    assert not same_name_embedder(minilm) and name_vector_dim(minilm) == 256
    assert isinstance(build_name_embedder(minilm), StaticEmbedder)
    apply_migrations(minilm)
    assert _dims(minilm) == {"entity_name_vectors": 256, "object_embeddings": 384}

    # names on the passages' model: a setting the database was not made for is refused
    passage = make_settings(postgres_dsn=minilm.postgres_dsn, embedder="minilm",
                            entity_name_embedder="passage")
    assert same_name_embedder(passage) and name_vector_dim(passage) == 384
    with pytest.raises(MigrationError) as err:
        apply_migrations(passage)
    assert err.value.field == "entity_name_embedder"

    # with static passages the two settings are one model: both are accepted
    static = _empty_database(stack_settings, embedder="static", entity_name_embedder="passage")
    apply_migrations(static)
    apply_migrations(make_settings(postgres_dsn=static.postgres_dsn, embedder="static"))
    assert _dims(static) == {"entity_name_vectors": 256, "object_embeddings": 256}


def test_an_older_database_loses_other_vectors_and_backfill_embeds_them(
        stack_settings: Settings, tmp_path: Path) -> None:
    """A MiniLM database migrated up to 0038 held 384-dimensional name vectors: 0039 drops
    them, and `embed_names` gives each live entity of the namespace asked a static vector."""
    minilm = _empty_database(stack_settings, embedder="minilm")
    _migrate_before(minilm, 39, tmp_path)
    assert _dims(minilm)["entities"] == 384

    tenants = [uuid.uuid4(), uuid.uuid4()]
    with psycopg.connect(minilm.effective_postgres_dsn, autocommit=True) as conn:
        register_vector(conn)
        old = np.ones(384, dtype=np.float32) / np.sqrt(384)
        ids = {ns: [_add_entity(conn, ns, "Acme Corporation", old),
                    _add_entity(conn, ns, "Globex", None)] for ns in tenants}

    apply_migrations(minilm)
    assert _dims(minilm)["entity_name_vectors"] == 256
    with psycopg.connect(minilm.effective_postgres_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM entity_name_vectors").fetchone() == (0,)
        assert conn.execute("SELECT value FROM brainstream_meta"
                            " WHERE key = 'name_embedding_dim'").fetchone() == ("256",)

    embedder = build_name_embedder(minilm)
    pool = make_pool(minilm, max_size=1, name="name-vectors-test")
    try:
        assert embed_names(pool, embedder, tenants[0], batch=1) == 2  # one tenant, page by page
        assert embed_names(pool, embedder, tenants[0], batch=1) == 0
        with psycopg.connect(minilm.effective_postgres_dsn) as conn:
            register_vector(conn)
            rows = dict(conn.execute("SELECT entity_id, embedding FROM entity_name_vectors"
                                     ).fetchall())
        assert all(rows.get(i) is not None for i in ids[tenants[0]])
        assert all(rows.get(i) is None for i in ids[tenants[1]])  # the other tenant: untouched
        expected = embedder.embed(["Acme Corporation"])[0]
        assert np.allclose(rows[ids[tenants[0]][0]], expected, atol=1e-6)
        assert embed_names(pool, embedder, None, batch=10) == 2  # every namespace
    finally:
        pool.close()


def test_name_vectors_move_to_their_own_table(stack_settings: Settings, tmp_path: Path) -> None:
    """Migration 0041: a database with name vectors on `entities` keeps each one, now in
    `entity_name_vectors` with its entity's namespace, and `entities` loses the column."""
    static = _empty_database(stack_settings, embedder="static")
    _migrate_before(static, 41, tmp_path)
    tenants = [uuid.uuid4(), uuid.uuid4()]
    vector = np.arange(256, dtype=np.float32) / 256
    with psycopg.connect(static.effective_postgres_dsn, autocommit=True) as conn:
        register_vector(conn)
        ids = {ns: [_add_entity(conn, ns, "Acme Corporation", vector),
                    _add_entity(conn, ns, "Globex", None)] for ns in tenants}

    apply_migrations(static)
    assert "entities" not in _dims(static)
    with psycopg.connect(static.effective_postgres_dsn) as conn:
        register_vector(conn)
        moved = {r[0]: (r[1], r[2]) for r in conn.execute(
            "SELECT entity_id, namespace_id, embedding FROM entity_name_vectors").fetchall()}
    assert set(moved) == {ids[ns][0] for ns in tenants}
    for ns in tenants:
        assert moved[ids[ns][0]][0] == ns
        assert np.allclose(moved[ids[ns][0]][1], vector)
