"""Migration 0033 on a database that already holds embedded rows: the vectors, hashes and
states move to `object_embeddings` (data kept) and the wide row loses its embedding columns."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql

from pipeline.ops.migrations import apply_migrations, migrations_dir
from pipeline.settings import Settings
from tests.stackutil import make_settings

pytestmark = pytest.mark.stack


def test_existing_vectors_move_to_the_narrow_table(stack_settings: Settings,
                                                   tmp_path: Path) -> None:
    name = f"lean_migrate_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(stack_settings.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    settings = make_settings(postgres_dsn=stack_settings.effective_postgres_dsn.rsplit("/", 1)[0]
                             + f"/{name}")
    before = tmp_path / "before"
    before.mkdir()
    for path in migrations_dir().glob("*.sql"):
        if int(path.name[:4]) < 33:
            shutil.copy(path, before / path.name)
    apply_migrations(settings, directory=before)

    ns, parent, part, failed = uuid.uuid4(), uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    vector = np.linspace(0.1, 1.0, settings.vector_dim, dtype=np.float32)
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        register_vector(conn)
        conn.execute(
            "INSERT INTO objects (id, namespace_id, kind, title, parent_id, index_text_hash,"
            " embedding, embedded_hash, embed_status, embed_attempts, embed_error) VALUES"
            " (%s, %s, 'doc', 'parent', NULL, 'h1', %s, 'h1', 'done', 0, NULL),"
            " (%s, %s, 'doc', NULL, %s, 'h2', NULL, NULL, 'pending', 0, NULL),"
            " (%s, %s, 'doc', 'refused', NULL, 'h3', NULL, NULL, 'failed', 2, 'too long')",
            (parent, ns, vector, part, ns, parent, failed, ns))

    apply_migrations(settings)

    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        register_vector(conn)
        rows = {r[0]: r[1:] for r in conn.execute(
            "SELECT id, namespace_id, root_id, index_text_hash, embedded_hash, embed_status,"
            " embed_attempts, embed_error FROM object_embeddings").fetchall()}
        stored = conn.execute("SELECT embedding FROM object_embeddings WHERE id = %s",
                              (parent,)).fetchone()
        left = conn.execute("SELECT attname FROM pg_attribute WHERE attrelid = 'objects'::regclass"
                            " AND attnum > 0 AND NOT attisdropped AND attname LIKE 'embed%%'"
                            ).fetchall()
    assert rows == {parent: (ns, parent, "h1", "h1", "done", 0, None),
                    part: (ns, parent, "h2", None, "pending", 0, None),
                    failed: (ns, failed, "h3", None, "failed", 2, "too long")}
    assert stored is not None and np.allclose(stored[0], vector)
    assert left == []
