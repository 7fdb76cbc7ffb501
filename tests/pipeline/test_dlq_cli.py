"""`brainstream dlq list | show | retry`: a rejected event, fixed upstream of it (here: the
kind is added to the catalog), is re-driven and applied exactly once."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from pipeline.ops.dlq import read_all
from pipeline.settings import Settings
from tests.pipeline.conftest import indexed
from tests.pipelineutil import Proc, Publisher, put, wait_for
from tests.stackutil import settings_env

pytestmark = pytest.mark.stack


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args],
                          env=settings_env(settings), capture_output=True, text=True,
                          timeout=120, check=False)


def test_retry_after_a_fix_applies_once(procs: dict[str, Proc], catalog: Settings,
                                        publisher: Publisher, tmp_path: Path) -> None:
    kind = f"gadget_{uuid.uuid4().hex[:8]}"
    event = put(uuid.uuid4(), kind=kind, title="Rejected until its kind exists")
    oid = event["data"]["id"]
    publisher.send(event, oid)
    letter = wait_for(lambda: next((d for d in read_all(catalog) if oid.encode() in d.value),
                                   None), what="the dead letter")
    assert letter.code == "unknown_kind"
    listed = _cli(catalog, "dlq", "list", "--code", "unknown_kind", "--limit", "1000")
    assert listed.returncode == 0 and letter.ref in listed.stdout
    shown = _cli(catalog, "dlq", "show", letter.ref)
    assert "code=unknown_kind" in shown.stdout and oid in shown.stdout

    kinds = tmp_path / "kinds.yaml"
    kinds.write_text(f"kinds:\n  - kind: {kind}\n    description: now known\n")
    assert _cli(catalog, "kinds", "apply", str(kinds)).returncode == 0
    retried = _cli(catalog, "dlq", "retry", letter.ref)
    assert retried.returncode == 0, retried.stderr
    assert "re-drove 1 to the input topic" in retried.stdout
    wait_for(lambda: indexed(catalog, oid), what="the re-driven put")
    again = _cli(catalog, "dlq", "retry", letter.ref)
    assert "1 were re-driven before" in again.stdout
    with psycopg.connect(catalog.effective_postgres_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM processed_events WHERE event_id = %s",
                            (event["id"],)).fetchone() == (1,)
    assert _cli(catalog, "dlq", "retry").returncode == 2  # nothing named: refused
