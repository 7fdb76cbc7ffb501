"""`brainstream verify` checks the history invariants: clean after real events, and exit 1 with
the invariant named once rows are corrupted (overlapping versions of a functional link, a live
link with no version holding, a gap in the seqs)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from typing import Any

import psycopg
import pytest

from pipeline.domain.relations import RelationSpec
from pipeline.graph.falkordb.schema import prepare_graph
from pipeline.ingest.store.catalog import apply_relations
from pipeline.ops.history_check import check_history
from pipeline.settings import Settings
from tests.pipelineutil import envelope, ingest, put
from tests.stackutil import make_settings, settings_env

pytestmark = pytest.mark.stack


def _cli_verify(settings: Settings) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "verify", "--sample", "0"],
                          env={**settings_env(settings),
                               "BRAINSTREAM_GRAPH_NAME": settings.graph_name},
                          capture_output=True, text=True, timeout=120, check=False)


def test_verify_finds_broken_histories(db: psycopg.Connection[Any],
                                       stack_settings: Settings) -> None:
    settings = make_settings(postgres_dsn=db.info.dsn, graph_name=f"h_{uuid.uuid4().hex[:8]}",
                             **{k: getattr(stack_settings, k) for k in
                                ("kafka_port", "falkordb_port", "redis_port")})
    prepare_graph(settings)
    apply_relations(db, [RelationSpec("works_at", functional=True)])
    ns = uuid.uuid4()
    person, x, y = (put(ns, title=t) for t in ("Pat", "Xco", "Yco"))
    p, xi, yi = (e["data"]["id"] for e in (person, x, y))

    def works_at(to: str, start: str) -> dict[str, Any]:
        return envelope("link.put", ns, {"from": p, "to": to, "relation_type": "works_at",
                                         "valid_from": start})

    knows = envelope("link.put", ns, {"from": p, "to": yi, "relation_type": "knows"})
    ingest(settings, [person, x, y, works_at(yi, "2020-01-01T00:00:00Z"),
                      works_at(xi, "2010-01-01T00:00:00Z"), knows])
    assert check_history(db).clean
    done = _cli_verify(settings)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "its invariants hold" in done.stdout

    # x's version (2010, cut by y in 2020) made to run on: x and y overlap from 2020
    assert db.execute("UPDATE link_versions SET valid_to = NULL WHERE to_id = %s AND seq = 1"
                      " AND valid_to IS NOT NULL", (xi,)).rowcount == 1
    # the `knows` link's only version retired: its row is live with nothing holding, and
    # its seqs start at 2
    db.execute("INSERT INTO link_versions SELECT namespace_id, from_id, relation_type, to_id, 2,"
               " state, meta, valid_from, valid_to, asserted_to, recorded_at, recorded_by,"
               " change, now(), 'x' FROM link_versions WHERE relation_type = 'knows'"
               " AND from_id = %s", (p,))
    db.execute("DELETE FROM link_versions WHERE relation_type = 'knows' AND from_id = %s"
               " AND seq = 1", (p,))
    db.execute("DELETE FROM object_versions WHERE object_id = %s", (p,))
    db.execute("INSERT INTO object_versions (object_id, seq, namespace_id, change, event_id,"
               " kind, recorded_at) VALUES (%s, 2, %s, 'put', 'e', 'company', now())", (p, ns))
    check = check_history(db)
    counts = {name: n for name, (n, _) in check.violations.items()}
    assert counts == {"overlapping versions of functional links": 1,
                      "versions with valid_from not before valid_to": 0,
                      "live links without a version holding": 1,
                      "links whose version seqs have a gap": 1,
                      "objects whose version seqs have a gap": 1}, counts
    done = _cli_verify(settings)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "VIOLATED" in done.stdout and "overlapping versions of functional links" in done.stdout
