"""Settings and environment for the test stack (its own ports and data directory)."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import psycopg
from psycopg import sql

from pipeline.domain.kinds import load_catalog
from pipeline.ingest.store.catalog import apply_catalog
from pipeline.ops.migrations import apply_migrations
from pipeline.settings import Settings

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"

# Several test runs can share a machine (a developer's and CI's, or parallel work): an offset moves
# every port and gets its own data directory.
_OFFSET = int(os.environ.get("BRAINSTREAM_TEST_PORT_OFFSET", "0"))
TEST_DATA_DIR = REPO / (".brainstream-test" + (f"-{_OFFSET}" if _OFFSET else ""))

TEST_PORTS = {
    "pg_port": 25432 + _OFFSET,
    "kafka_port": 29092 + _OFFSET,
    "s3_port": 29000 + _OFFSET,
    "falkordb_port": 26379 + _OFFSET,
    "redis_port": 26380 + _OFFSET,
}


def make_settings(data_dir: Path = TEST_DATA_DIR / "stack", **overrides: object) -> Settings:
    """Settings for the test stack, ignoring any developer .env and BRAINSTREAM_* variables."""
    values: dict[str, object] = {
        "data_dir": data_dir,
        "embedder": "static",
        "topic_partitions": 4,
        **TEST_PORTS,
    }
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


def settings_env(settings: Settings) -> dict[str, str]:
    """The BRAINSTREAM_* environment that reproduces `settings` in a subprocess."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("BRAINSTREAM_") or k == "BRAINSTREAM_TEST_PORT_OFFSET"}
    for name in ("data_dir", "embedder", "topic_partitions", *TEST_PORTS,
                 "postgres_dsn", "kafka_bootstrap", "falkordb_url", "redis_url"):
        value = getattr(settings, name)
        if value is not None:
            env[f"BRAINSTREAM_{name.upper()}"] = str(value)
    return env


def restore_stack(settings: Settings) -> list[str]:
    """Bring every embedded service of `settings` back to healthy; what had to be restored.

    A test that stops a service and fails before restarting it (or whose restart failed under
    load) would otherwise make every later test of the session fail on the shared stack. A
    service that runs but does not answer is restarted; `start` waits until each is ready
    (FalkorDB: until its indexes are operational again).
    """
    from pipeline.services.stack import Stack

    restored = []
    for service in Stack(settings).services:  # in start order: the broker after its store
        status = service.status()
        if service.external or status.healthy:
            continue
        if status.state == "unhealthy":
            service.stop()
        service.start()
        restored.append(f"{service.name} ({status.state}: {status.detail})")
    return restored


def fresh_database(stack: Settings, prefix: str, *, example_catalog: bool = False,
                   **overrides: object) -> Settings:
    """Settings (with `overrides`) on a new, migrated database `<prefix>_<random>` of the
    running test stack; with `example_catalog`, the example kinds (company, note, ...) are
    registered, else the catalog is empty (open)."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(stack.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = stack.effective_postgres_dsn.rsplit("/", 1)[0] + f"/{name}"
    settings = make_settings(postgres_dsn=dsn, **overrides)
    apply_migrations(settings)
    if example_catalog:
        with psycopg.connect(dsn) as conn:
            apply_catalog(conn, load_catalog((EXAMPLES / "kinds.yaml").read_text()))
    return settings
