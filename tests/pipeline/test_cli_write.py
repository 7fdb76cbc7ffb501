"""`brainstream kinds apply` and `brainstream publish` as an operator runs them."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import psycopg
import pytest

from pipeline.settings import Settings
from tests.pipeline.conftest import indexed
from tests.pipelineutil import Proc, wait_for
from tests.stackutil import settings_env

pytestmark = pytest.mark.stack


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args],
                          env=settings_env(settings), capture_output=True, text=True,
                          timeout=120, check=False)


def test_kinds_apply_is_additive_and_refuses_bad_specs(catalog: Settings,
                                                       tmp_path: Path) -> None:
    extra = tmp_path / "extra.yaml"
    extra.write_text("kinds:\n  - kind: ticket\n    description: Support tickets\n"
                     "    fields:\n      - {name: priority, type: number, operators: [eq, in]}\n")
    done = _cli(catalog, "kinds", "apply", str(extra))
    assert done.returncode == 0, done.stderr
    listed = _cli(catalog, "kinds", "list").stdout
    assert "kind: ticket" in listed and "kind: deal" in listed  # nothing removed
    bad = tmp_path / "bad.yaml"
    bad.write_text("kinds:\n  - kind: ticket\n    fields:\n"
                   "      - {name: priority, type: colour}\n")
    refused = _cli(catalog, "kinds", "apply", str(bad))
    assert refused.returncode == 2
    assert "ticket" in refused.stderr and "priority" in refused.stderr
    assert "Traceback" not in refused.stderr
    retyped = tmp_path / "retype.yaml"
    retyped.write_text("kinds:\n  - kind: ticket\n    fields:\n"
                       "      - {name: priority, type: string}\n")
    refused = _cli(catalog, "kinds", "apply", str(retyped))
    assert refused.returncode == 2 and "ticket.fields.priority.type" in refused.stderr


def test_publish_wraps_bare_objects(procs: dict[str, Proc], catalog: Settings,
                                   tmp_path: Path) -> None:
    ns = uuid.uuid4()
    oid = str(uuid.uuid4())
    events = tmp_path / "bare.jsonl"
    events.write_text(json.dumps({"id": oid, "kind": "company", "title": "Bare Co"}) + "\n\n")
    refused = _cli(catalog, "publish", str(events))
    assert refused.returncode == 2 and "--namespace" in refused.stderr
    done = _cli(catalog, "publish", str(events), "--namespace", str(ns))
    assert done.returncode == 0, done.stderr
    assert "published 1 record(s)" in done.stdout and "1 wrapped" in done.stdout
    wait_for(lambda: indexed(catalog, oid), what="the wrapped bare object")
    with psycopg.connect(catalog.effective_postgres_dsn) as conn:
        row = conn.execute("SELECT namespace_id, title FROM objects WHERE id = %s",
                           (oid,)).fetchone()
    assert row == (ns, "Bare Co")
