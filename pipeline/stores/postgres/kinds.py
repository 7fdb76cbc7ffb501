"""The kind catalog in Postgres (`object_kinds`): read it, apply a file additively."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from pipeline.domain.kinds import KindSpec, catalog_from_dict, catalog_to_dict, merge_catalog

_KINDS_LOCK = 0x6272_6169_6E6B  # serialize concurrent applies


def read_catalog(conn: psycopg.Connection[Any]) -> list[KindSpec]:
    rows = conn.execute("SELECT spec FROM object_kinds ORDER BY kind").fetchall()
    return catalog_from_dict({"kinds": [row[0] for row in rows]})


def apply_catalog(conn: psycopg.Connection[Any], incoming: Sequence[KindSpec]) -> list[KindSpec]:
    """Merge `incoming` into the stored catalog (additive upsert) in one transaction."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_KINDS_LOCK,))
        merged = merge_catalog(read_catalog(conn), incoming)
        for spec in catalog_to_dict(merged)["kinds"]:
            conn.execute(
                "INSERT INTO object_kinds (kind, spec) VALUES (%s, %s)"
                " ON CONFLICT (kind) DO UPDATE SET spec = EXCLUDED.spec, updated_at = now()"
                " WHERE object_kinds.spec IS DISTINCT FROM EXCLUDED.spec",
                (spec["kind"], Jsonb(spec)),
            )
    return merged
