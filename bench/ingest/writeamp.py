"""Write amplification of an ingest phase: WAL bytes (from `pg_current_wal_lsn()` deltas) and
the rows each table inserted, updated (and of those, HOT: no index touched), deleted
(`pg_stat_user_tables`), read before and after the phase on the benchmark's database.

Backends flush their table counters when idle (at most every 10 s), so `after` waits that long
first; the pipeline is idle then, so the wait adds no writes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import psycopg

from pipeline.settings import Settings

FLUSH_WAIT_SECONDS = 11.0


@dataclass(frozen=True)
class TableWrites:
    """Row writes of one table over the phase."""

    table: str
    inserted: int
    updated: int
    hot: int
    deleted: int

    @property
    def hot_share(self) -> float | None:
        return self.hot / self.updated if self.updated else None


@dataclass(frozen=True)
class Snapshot:
    """The WAL position and every table's cumulative counters at one moment."""

    lsn: str
    tables: dict[str, tuple[int, int, int, int]]


@dataclass(frozen=True)
class WriteCost:
    """WAL bytes and per-table row writes between two snapshots."""

    wal_bytes: int
    tables: list[TableWrites]

    def per_doc(self, docs: int) -> float:
        return self.wal_bytes / docs if docs else 0.0


def snapshot(settings: Settings, *, wait: bool = False) -> Snapshot:
    """Read the counters (after `FLUSH_WAIT_SECONDS` with `wait`)."""
    if wait:
        time.sleep(FLUSH_WAIT_SECONDS)
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        lsn = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        rows = conn.execute("SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del"
                            " FROM pg_stat_user_tables").fetchall()
    assert lsn is not None
    return Snapshot(str(lsn[0]), {str(r[0]): (int(r[1]), int(r[2]), int(r[3]), int(r[4]))
                                  for r in rows})


def difference(settings: Settings, before: Snapshot, after: Snapshot) -> WriteCost:
    """What the phase between `before` and `after` wrote (tables it did not write left out)."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        wal = conn.execute("SELECT pg_wal_lsn_diff(%s::pg_lsn, %s::pg_lsn)::bigint",
                           (after.lsn, before.lsn)).fetchone()
    tables = []
    for name, counts in sorted(after.tables.items()):
        was = before.tables.get(name, (0, 0, 0, 0))
        ins, upd, hot, dele = (a - b for a, b in zip(counts, was, strict=True))
        if ins or upd or dele:
            tables.append(TableWrites(name, ins, upd, hot, dele))
    return WriteCost(int(wal[0]) if wal else 0, tables)


def table_lines(cost: WriteCost, docs: int) -> list[str]:
    """The Markdown table of `cost` for `docs` documents."""
    lines = [f"WAL written: {cost.wal_bytes / 1e6:.1f} MB, "
             f"{cost.per_doc(docs) / 1024:.1f} KiB per document.", "",
             "| table | inserted | updated | of which HOT | HOT share | deleted |",
             "|---|---:|---:|---:|---:|---:|"]
    for t in cost.tables:
        share = "-" if t.hot_share is None else f"{100 * t.hot_share:.0f}%"
        lines.append(f"| {t.table} | {t.inserted} | {t.updated} | {t.hot} | {share} | "
                     f"{t.deleted} |")
    updated = sum(t.updated for t in cost.tables)
    hot = sum(t.hot for t in cost.tables)
    lines.append(f"| all | {sum(t.inserted for t in cost.tables)} | {updated} | {hot} | "
                 f"{100 * hot / updated if updated else 0:.0f}% | "
                 f"{sum(t.deleted for t in cost.tables)} |")
    return lines
