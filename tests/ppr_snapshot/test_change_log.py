"""The change log of migration 0029 on the real database: what each write logs (and what it
does not: CO_OCCURS edges, updates of objects that keep their deleted state, entity updates
that keep count and merge), per namespace; and the sweep's prune, which keeps an entry until
every reader has had the retention to see it."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

from pipeline.retrieval.store.ppr_log import prune_log
from pipeline.settings import Settings
from tests.entities.holdutil import hold_extraction
from tests.pipelineutil import ingest, put, wait_for


def _log(conn: psycopg.Connection[Any], ns: uuid.UUID, since: int) -> list[tuple[str, set[str]]]:
    return [(kind, {str(i) for i in ids}) for kind, ids in conn.execute(
        "SELECT kind, ids FROM ppr_snapshot_log WHERE namespace_id = %s AND seq > %s"
        " ORDER BY seq", (ns, since))]


def test_each_write_logs_the_keys_it_touched(catalog: Settings) -> None:
    ns, other = uuid.uuid4(), uuid.uuid4()
    doc = str(uuid.uuid4())
    ingest(catalog, [put(ns, id=doc, kind="note", title="Quillon", content="Quillon.")])
    hold_extraction(catalog, ns)
    a, b = sorted((uuid.uuid4(), uuid.uuid4()))
    with psycopg.connect(catalog.effective_postgres_dsn, autocommit=True) as conn:
        start = conn.execute("SELECT coalesce(max(seq), 0) FROM ppr_snapshot_log").fetchone()
        assert start is not None
        for e, name in ((a, "quillon"), (b, "ostra")):
            conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label)"
                         " VALUES (%s, %s, %s, %s, 'NAME')", (e, ns, name, name))
        conn.execute("INSERT INTO mentions (row_id, field, start_pos, end_pos, namespace_id,"
                     " entity_id, label, text) VALUES (%s, 'title', 0, 7, %s, %s, 'NAME',"
                     " 'Quillon')", (doc, ns, a))
        conn.execute("UPDATE entities SET part_count = 1 WHERE id = %s", (a,))
        conn.execute("UPDATE entities SET updated_at = now() WHERE id = %s", (a,))  # nothing
        conn.execute("INSERT INTO entity_edges (namespace_id, from_id, to_id, edge_type, weight)"
                     " VALUES (%s, %s, %s, 'CO_OCCURS', 1)", (ns, a, b))  # never walked
        conn.execute("INSERT INTO entity_edges (namespace_id, from_id, to_id, edge_type,"
                     " status) VALUES (%s, %s, %s, 'POSSIBLY_SAME', 'held')", (ns, a, b))
        conn.execute("UPDATE objects SET title = 'Quillon town' WHERE id = %s", (doc,))  # nothing
        conn.execute("UPDATE objects SET deleted_at = now() WHERE id = %s", (doc,))
        conn.execute("DELETE FROM mentions WHERE row_id = %s", (doc,))
        got = _log(conn, ns, start[0])
        assert got == [("entity", {str(a)}), ("entity", {str(b)}), ("row", {doc}),
                       ("entity", {str(a)}), ("edge", {str(a), str(b)}), ("object", {doc}),
                       ("row", {doc})]
        assert _log(conn, other, start[0]) == []


def test_the_sweep_prunes_only_what_every_reader_had_time_to_see(catalog: Settings) -> None:
    ns = uuid.uuid4()
    with psycopg.connect(catalog.effective_postgres_dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO ppr_snapshot_log (namespace_id, kind, ids)"
                     " VALUES (%s, 'row', '{}')", (ns,))

        def kept() -> bool:
            return bool(conn.execute("SELECT 1 FROM ppr_snapshot_log WHERE namespace_id = %s",
                                     (ns,)).fetchone())

        prune_log(conn, 3600.0)  # no horizon is an hour old: nothing goes
        assert kept()
        # each tick's horizon is "old enough" at once: the entry goes once no transaction that
        # was running when it was written is still running (the live pipeline's are short)
        wait_for(lambda: prune_log(conn, 0.0) >= 0 and not kept(), timeout=30,
                 what="the entry pruned")
