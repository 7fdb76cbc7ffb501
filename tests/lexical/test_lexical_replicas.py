"""Lexical replicas, one per read host, over one database's change log: two data directories
(two hosts) follow the same log on their own cursors and converge; the log is pruned below the
slower one only; a replica that comes after the rows were pruned, or was forgotten while its
host was away, builds itself from Postgres; and a row whose transaction commits after a later
one is not skipped (the cursor follows closed transactions, not row ids)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg_pool import ConnectionPool

from pipeline.cli import main
from pipeline.domain.errors import InvalidInput
from pipeline.domain.read_model import Filters
from pipeline.ingest.batch import apply_batch
from pipeline.ingest.records import RawRecord
from pipeline.ingest.store.events import PgEventStore
from pipeline.lexical import changes
from pipeline.lexical.replica import read_state, replica_name
from pipeline.lexical.searcher import TantivySearcher
from pipeline.lexical.seeds import adopt_seed, snapshot
from pipeline.lexical.writer import LexicalWriter
from pipeline.ops.lexical import verify_lexical
from pipeline.settings import Settings
from tests.pipelineutil import put
from tests.search.searchref import OPTIONS, apply_events
from tests.stackutil import settings_env

pytestmark = pytest.mark.stack


async def _lexemes(text: str) -> list[str]:
    return text.lower().split()


@pytest.fixture(scope="module")
def second_host(lex_settings: Settings, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    """The same database, another host's data directory."""
    data_dir: Path = tmp_path_factory.mktemp("lexical-host-b")
    return lex_settings.model_copy(update={"data_dir": data_dir})


@pytest.fixture(scope="module")
def writer_b(second_host: Settings, sync_pool: ConnectionPool) -> Iterator[LexicalWriter]:
    yield LexicalWriter(second_host, sync_pool)


def _count(settings: Settings, ns: uuid.UUID, word: str) -> int:
    searcher = TantivySearcher(settings.resolved_data_dir, settings.generation, _lexemes)
    return len(asyncio.run(searcher.search_lexical(ns, word, Filters(), [], 1000)))


def _notes(ns: uuid.UUID, word: str, n: int, start: int = 0) -> list[dict[str, Any]]:
    return [put(ns, kind="note", title=f"{word} {i}", content=f"{word} crane log {i}")
            for i in range(start, start + n)]


def test_two_hosts_follow_one_log_and_it_is_pruned_below_the_slower(
        lex_settings: Settings, second_host: Settings, db: psycopg.Connection[Any],
        writer: LexicalWriter, writer_b: LexicalWriter) -> None:
    assert writer.replica != writer_b.replica  # one per data directory
    ns = uuid.uuid4()
    apply_events(db, _notes(ns, "gannet", 20))
    writer.run()
    changes.prune(db)  # host B never registered: nothing holds the log for it
    first = writer_b.run()
    assert first.built  # it came after the prune: built from Postgres, not from the log
    assert _count(lex_settings, ns, "gannet") == _count(second_host, ns, "gannet") == 20
    # host A moves on, host B does not: the prune keeps what B has not applied
    apply_events(db, _notes(ns, "gannet", 5, start=20))
    writer.run()
    changes.prune(db)
    assert writer.pending() == 0 and writer_b.pending() >= 1
    assert _count(lex_settings, ns, "gannet") == 25 and _count(second_host, ns, "gannet") == 20
    later = writer_b.run()
    assert not later.built and later.rows >= 1  # from the log
    assert _count(second_host, ns, "gannet") == 25
    changes.prune(db)  # both past every row now
    assert db.execute("SELECT count(*) FROM lexical_log").fetchone() == (0,)
    for settings in (lex_settings, second_host):
        assert verify_lexical(settings, sample=50).clean
    listed = {r.replica: r for r in changes.replicas(db)}
    assert {writer.replica, writer_b.replica} <= set(listed)
    assert listed[writer_b.replica].pending == 0


def test_a_row_committed_after_a_later_one_is_not_skipped(
        lex_settings: Settings, db: psycopg.Connection[Any], writer: LexicalWriter) -> None:
    ns = uuid.uuid4()
    writer.run()
    slow, fast = _notes(ns, "puffin", 1), _notes(ns, "puffin", 1, start=1)
    # the slow transaction writes first (the smaller log id) and commits last
    with psycopg.connect(lex_settings.effective_postgres_dsn) as held:
        records = [RawRecord("t", 0, 0, None, json.dumps(slow[0]).encode())]
        outcome = apply_batch(PgEventStore(held), records, OPTIONS)
        assert not outcome.dead
        apply_events(db, fast)  # commits while the slow one is open
        writer.run()
        # the fast one waits behind the open transaction: neither is applied yet
        assert _count(lex_settings, ns, "puffin") == 0 and writer.pending() >= 1
        held.commit()
    writer.run()
    assert _count(lex_settings, ns, "puffin") == 2  # both: the earlier id was not skipped
    assert writer.pending() == 0


def test_a_replica_forgotten_while_away_builds_itself_again(
        second_host: Settings, db: psycopg.Connection[Any], writer: LexicalWriter,
        writer_b: LexicalWriter) -> None:
    ns = uuid.uuid4()
    writer_b.run()
    # host B goes away for longer than the log waits for it; host A writes on
    db.execute("UPDATE lexical_replicas SET seen_at = now() - make_interval(secs => %s)"
               " WHERE replica = %s", (changes.REPLICA_TTL_SECONDS + 60, writer_b.replica))
    apply_events(db, _notes(ns, "skua", 3))
    writer.run()
    changes.prune(db)  # B forgotten, its rows pruned with A's cursor
    assert writer_b.replica not in {r.replica for r in changes.replicas(db)}
    before = read_state(second_host)
    assert before is not None  # B's files still say where it was
    back = writer_b.run()
    assert back.built  # its cursor meant nothing any more: rebuilt from Postgres
    assert _count(second_host, ns, "skua") == 3
    assert replica_name(second_host.resolved_data_dir) == writer_b.replica


def test_a_build_stopped_midway_leaves_no_cursor_and_starts_again(
        lex_settings: Settings, db: psycopg.Connection[Any], sync_pool: ConnectionPool,
        tmp_path: Path) -> None:
    """An API process stopping while its replica builds (shutdown) stops between batches; the
    replica has no cursor yet, so it is not ready, and the next run builds it whole."""
    ns = uuid.uuid4()
    apply_events(db, _notes(ns, "petrel", 3))
    host = lex_settings.model_copy(update={"data_dir": tmp_path / "host-c"})
    writer = LexicalWriter(host, sync_pool)
    stopped = writer.run(stop=lambda: True)
    assert not stopped.built and read_state(host) is None and writer.pending() >= 1
    again = writer.run()
    assert again.built and _count(host, ns, "petrel") == 3 and writer.pending() == 0


def test_a_new_host_starts_from_a_copy_of_another_and_follows_the_log(
        lex_settings: Settings, db: psycopg.Connection[Any], sync_pool: ConnectionPool,
        writer: LexicalWriter, tmp_path: Path) -> None:
    """`lexical snapshot` on a live host, `lexical seed` on a new one: the new replica is not
    built from Postgres, its follower applies what came after the copy (the copy's hold keeps
    those rows through a prune), and it agrees with Postgres; a seed whose hold is gone is
    refused."""
    ns = uuid.uuid4()
    apply_events(db, _notes(ns, "fulmar", 5))
    writer.run()
    seed = snapshot(lex_settings, sync_pool, tmp_path / "seed")
    assert seed.namespaces >= 1
    apply_events(db, _notes(ns, "fulmar", 3, start=5))  # after the copy
    writer.run()
    changes.prune(db)  # host A is past them; the seed's hold keeps them
    new_host = lex_settings.model_copy(update={"data_dir": tmp_path / "host-d"})
    adopt_seed(new_host, sync_pool, tmp_path / "seed")
    assert _count(new_host, ns, "fulmar") == 5  # the copy, as it was
    follower = LexicalWriter(new_host, sync_pool)
    caught_up = follower.run()
    assert not caught_up.built and caught_up.rows >= 1
    assert _count(new_host, ns, "fulmar") == 8 and follower.pending() == 0
    assert verify_lexical(new_host, sample=50).clean
    assert not any(r.replica.startswith("seed:") for r in changes.replicas(db))
    # a seed kept past the hold's lifetime: the log may lack what it misses, so it is refused
    stale = snapshot(lex_settings, sync_pool, tmp_path / "stale")
    db.execute("UPDATE lexical_replicas SET seen_at = now() - make_interval(secs => %s)"
               " WHERE replica = %s", (changes.REPLICA_TTL_SECONDS + 60, stale.hold))
    changes.prune(db)
    with pytest.raises(InvalidInput):
        adopt_seed(lex_settings.model_copy(update={"data_dir": tmp_path / "host-e"}),
                   sync_pool, tmp_path / "stale")


def test_the_seed_commands_refuse_what_they_cannot_use(lex_settings: Settings,
                                                       writer: LexicalWriter,
                                                       tmp_path: Path) -> None:
    writer.run()
    env = settings_env(lex_settings)
    runner = CliRunner()
    taken = runner.invoke(main, ["lexical", "snapshot", str(tmp_path / "s")], env=env)
    assert taken.exit_code == 0, taken.output
    assert "namespace(s) copied" in taken.output
    again = runner.invoke(main, ["lexical", "snapshot", str(tmp_path / "s")], env=env)
    assert again.exit_code != 0 and "not empty" in again.output
    (tmp_path / "empty").mkdir()
    nothing = runner.invoke(main, ["lexical", "seed", str(tmp_path / "empty")], env=env)
    assert nothing.exit_code != 0 and "holds no seed" in nothing.output
