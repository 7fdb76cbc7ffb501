"""`pg_stat_statements` on a benchmark stack's Postgres: turn it on (a restart), reset it before a
phase, and print the statements that took the most server time after it.

Used by `python -m bench.ingest --pg-statements N` and `bench/extract/profile.py`.
"""

from __future__ import annotations

import psycopg

from pipeline.settings import Settings

TOP = """
SELECT calls, round(total_exec_time::numeric) AS exec_ms, round(total_plan_time::numeric),
       rows, left(regexp_replace(query, '\\s+', ' ', 'g'), %s)
FROM pg_stat_statements WHERE query NOT ILIKE '%%pg_stat_statements%%'
ORDER BY total_exec_time + total_plan_time DESC LIMIT %s"""


def configure(settings: Settings) -> None:
    """Preload the extension from the next start on (the caller restarts Postgres)."""
    with (settings.resolved_data_dir / "postgres" / "postgresql.auto.conf").open("a") as f:
        f.write("shared_preload_libraries = 'pg_stat_statements'\n"
                "pg_stat_statements.track = all\npg_stat_statements.track_planning = on\n")


def reset(settings: Settings) -> None:
    """Create the extension where it is missing and forget what was counted so far."""
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        conn.execute("SELECT pg_stat_statements_reset()")


def top(settings: Settings, limit: int = 15, width: int = 150) -> list[str]:
    """One line per statement, the most server time (execution + planning) first."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        rows = conn.execute(TOP, (width, limit)).fetchall()
    return [f"{calls:>8} calls {exec_ms:>7} ms exec {plan_ms:>6} ms plan {count:>8} rows"
            f" | {query}" for calls, exec_ms, plan_ms, count, query in rows]
