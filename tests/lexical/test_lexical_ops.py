"""`brainstream lexical verify` and `rebuild` on the real database, and the writer killed with
SIGKILL in the middle of its commits: the index reopens and the next writer converges."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import psycopg
import pytest
import tantivy
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.domain.read_model import Filters
from pipeline.lexical.documents import ROOT_ID, namespace_dir, open_index
from pipeline.lexical.searcher import TantivySearcher
from pipeline.lexical.writer import LexicalWriter
from pipeline.ops.lexical import verify_lexical
from pipeline.settings import Settings
from tests.pipelineutil import put
from tests.search.searchref import apply_events
from tests.stackutil import settings_env

pytestmark = pytest.mark.stack


def _cli(settings: Settings, *args: str) -> Any:
    return CliRunner().invoke(main, ["lexical", *args], env=settings_env(settings))


def _fill(db: psycopg.Connection[Any], n: int, word: str) -> uuid.UUID:
    ns = uuid.uuid4()
    apply_events(db, [put(ns, kind="note", title=f"{word} note {i}",
                          content=f"{word} entry {i} about the harbour crane log")
                      for i in range(n)])
    return ns


def test_verify_finds_drift_and_repair_or_rebuild_fixes_it(
        lex_settings: Settings, db: psycopg.Connection[Any], writer: LexicalWriter) -> None:
    ns = _fill(db, 30, "okapi")
    other = _fill(db, 5, "tapir")
    writer.run()
    clean = _cli(lex_settings, "verify", "--sample", "10")
    assert clean.exit_code == 0, clean.output
    assert "agree" in clean.output
    # a root's documents vanish from the index behind the writer's back
    root = uuid.UUID(str(db.execute("SELECT id FROM objects WHERE namespace_id = %s"
                                    " AND parent_id IS NULL LIMIT 1", (ns,)).fetchone()[0]))
    index = open_index(namespace_dir(lex_settings.resolved_data_dir, 1, ns), create=False)
    assert index is not None
    rogue = index.writer(15_000_000, 1)
    rogue.delete_documents_by_term(ROOT_ID, str(root))
    rogue.commit()
    rogue.wait_merging_threads()
    check = verify_lexical(lex_settings, sample=1000)
    drifted = {n.namespace: n for n in check.namespaces}
    assert not check.clean
    assert not drifted[ns].clean and drifted[ns].indexed == drifted[ns].expected - 1
    assert drifted[other].clean  # the other tenant's index is untouched
    repaired = _cli(lex_settings, "verify", "--repair")
    assert repaired.exit_code == 1 and "DRIFT" in repaired.output
    writer.run()
    assert verify_lexical(lex_settings, sample=1000).clean
    # the whole generation's indexes gone: rebuild writes them again from Postgres
    shutil.rmtree(namespace_dir(lex_settings.resolved_data_dir, 1, ns))
    assert not verify_lexical(lex_settings).clean
    rebuilt = _cli(lex_settings, "rebuild")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert verify_lexical(lex_settings, sample=1000).clean


def test_a_round_over_more_tenants_than_open_writers(
        lex_settings: Settings, db: psycopg.Connection[Any], writer: LexicalWriter) -> None:
    # more namespaces in one round than the writer keeps open: the least recently used are
    # finished (merges waited for, locks released) and reopened when needed again
    spaces = [_fill(db, 2, f"ibex{i}") for i in range(12)]
    stats = writer.run()
    assert stats.commits >= 12 and writer.pending() == 0
    searcher = TantivySearcher(lex_settings.resolved_data_dir, 1, _lexemes)
    for i, ns in enumerate(spaces):
        hits = asyncio.run(searcher.search_lexical(ns, "harbour", Filters(), [], 10))
        assert len(hits) == 2, i
    assert verify_lexical(lex_settings, sample=5).clean


def _meta_mtime(path: Any) -> float:
    try:
        return float(os.stat(path / "meta.json").st_mtime_ns)
    except FileNotFoundError:
        return 0.0


@pytest.mark.slow  # a kill -9 and a restart: `make faults` runs it
def test_writer_killed_mid_commit_reopens_and_converges(
        lex_settings: Settings, db: psycopg.Connection[Any], writer: LexicalWriter) -> None:
    writer.run()  # start from an empty queue
    ns = _fill(db, 200, "quagga")
    path = namespace_dir(lex_settings.resolved_data_dir, 1, ns)
    env = settings_env(lex_settings)
    child = subprocess.Popen(
        [sys.executable, "-c",
         "from pipeline.settings import load_settings\n"
         "from pipeline.lexical.writer import LexicalWriter\n"
         "from pipeline.postgres.pool import make_pool\n"
         "s = load_settings()\n"
         "LexicalWriter(s, make_pool(s, max_size=2), batch_size=5).run()\n"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        commits = 0
        seen = _meta_mtime(path)
        for _ in range(2000):  # bounded: until the child committed twice (it has ~40 to go)
            now = _meta_mtime(path)
            if now != seen:
                commits, seen = commits + 1, now
                if commits >= 2:
                    break
            assert child.poll() is None, child.stderr.read() if child.stderr else ""
            time.sleep(0.005)
        assert commits >= 2
        os.kill(child.pid, signal.SIGKILL)  # while it writes the next batches
    finally:
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    left = writer.pending()
    assert left > 0  # it died with work queued
    # the index reopens at its last commit, readable
    index = open_index(path, create=False)
    assert index is not None
    partial = index.searcher().num_docs
    assert 0 < partial < 200
    # the next writer takes the lock files over and converges
    stats = writer.run()
    assert not stats.skipped and stats.rows == left
    assert writer.pending() == 0
    check = verify_lexical(lex_settings, sample=50)
    assert check.clean
    searcher = TantivySearcher(lex_settings.resolved_data_dir, 1, _lexemes)
    hits = asyncio.run(searcher.search_lexical(ns, "quagga", Filters(), [], 1000))
    assert len(hits) == 200  # each once: nothing lost, nothing doubled
    assert len({h.id for h in hits}) == 200
    assert isinstance(index, tantivy.Index)


async def _lexemes(query: str) -> list[str]:
    return [w.lower() for w in query.split()]
