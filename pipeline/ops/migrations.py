"""The SQL migration runner: numbered files in migrations/, applied once each, in order.

Safe to run concurrently (a session-level advisory lock serializes runners; the second one finds
everything applied) and idempotent. A file that changed after it was applied is an error: schema
changes are new files, never edits. The templated values are `{{EMBEDDING_DIM}}` and
`{{NAME_EMBEDDING_DIM}}` (entity name vectors, `ENTITY_NAME_EMBEDDER`), checked against what the
database was created with, because vector columns cannot silently change dimension.

After the files, still under the lock, the database is made to maintain the SQL BM25 postings
exactly when LEXICAL_ENGINE is postgres (pipeline/lexical/postings_switch.py): every start
migrates, so every start aligns.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg

from pipeline.domain.errors import MigrationError
from pipeline.embedding.embedders import name_vector_dim
from pipeline.lexical.postings_switch import align_sql_postings
from pipeline.settings import Settings

log = logging.getLogger(__name__)

# Any constant works as long as every runner uses the same one.
_LOCK_KEY = 0x6272_6169_6E73  # "brains"
_FILE_PATTERN = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

Report = Callable[[str], None]


@dataclass(frozen=True)
class Migration:
    """One numbered SQL file."""

    version: int
    name: str
    path: Path

    @property
    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


def migrations_dir() -> Path:
    """The migrations/ folder of this checkout."""
    return Path(__file__).resolve().parents[2] / "migrations"


def discover(directory: Path | None = None) -> list[Migration]:
    """Every migration file, sorted by version; a malformed name or duplicate number is refused."""
    folder = directory or migrations_dir()
    found: dict[int, Migration] = {}
    for path in sorted(folder.glob("*.sql")):
        match = _FILE_PATTERN.match(path.name)
        if match is None:
            raise MigrationError(f"{path.name}: migration files are named NNNN_name.sql")
        version = int(match.group(1))
        if version in found:
            raise MigrationError(f"two migrations share number {version:04d}")
        found[version] = Migration(version, match.group(2), path)
    return [found[v] for v in sorted(found)]


def render(migration: Migration, settings: Settings) -> str:
    """The SQL of a migration with its template values filled in."""
    return (migration.text.replace("{{EMBEDDING_DIM}}", str(int(settings.vector_dim)))
            .replace("{{NAME_EMBEDDING_DIM}}", str(int(name_vector_dim(settings)))))


def _noop(_: str) -> None:
    pass


def apply_migrations(settings: Settings, *, report: Report = _noop,
                     directory: Path | None = None) -> list[int]:
    """Apply every pending migration; return the versions applied by this call."""
    migrations = discover(directory)
    applied_now: list[int] = []
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        try:
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            rows = conn.execute("SELECT version, checksum FROM schema_migrations").fetchall()
            done = {int(version): str(checksum) for version, checksum in rows}
            for migration in migrations:
                if migration.version in done:
                    if done[migration.version] != migration.checksum:
                        raise MigrationError(
                            f"migration {migration.path.name} changed after it was applied; "
                            "add a new numbered file instead of editing an applied one"
                        )
                    continue
                with conn.transaction():
                    conn.execute(render(migration, settings).encode())
                    conn.execute(
                        "INSERT INTO schema_migrations (version, name, checksum)"
                        " VALUES (%s, %s, %s)",
                        (migration.version, migration.name, migration.checksum),
                    )
                applied_now.append(migration.version)
                report(f"postgres: applied {migration.path.name}")
            _check_dimension(conn, settings)
            switched = align_sql_postings(conn, settings.lexical_engine)
            if switched is not None:
                log.info("postgres: %s", switched)
                report(f"postgres: {switched}")
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
    return applied_now


def _check_dimension(conn: psycopg.Connection[tuple[object, ...]], settings: Settings) -> None:
    row = conn.execute(
        "SELECT value FROM brainstream_meta WHERE key = 'embedding_dim'"
    ).fetchone()
    if row is not None and int(str(row[0])) != settings.vector_dim:
        raise MigrationError(
            f"the database holds {row[0]}-dimensional embeddings but the settings ask for "
            f"{settings.vector_dim} (embedder {settings.embedder!r}); use a fresh data directory "
            "or rebuild with `brainstream replay` into a new generation",
            field="embedding_dim",
        )
    row = conn.execute(
        "SELECT value FROM brainstream_meta WHERE key = 'name_embedding_dim'"
    ).fetchone()
    if row is not None and int(str(row[0])) != name_vector_dim(settings):
        raise MigrationError(
            f"the database holds {row[0]}-dimensional entity name vectors but the settings ask "
            f"for {name_vector_dim(settings)} (entity_name_embedder "
            f"{settings.entity_name_embedder!r}, embedder {settings.embedder!r}); set it back, "
            "or rebuild with `brainstream replay` into a new generation",
            field="entity_name_embedder",
        )


def applied_versions(settings: Settings) -> list[int]:
    """The versions recorded in schema_migrations (empty when the table does not exist)."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        exists = conn.execute("SELECT to_regclass('schema_migrations')").fetchone()
        if exists is None or exists[0] is None:
            return []
        rows = conn.execute("SELECT version FROM schema_migrations ORDER BY version").fetchall()
        return [int(row[0]) for row in rows]
