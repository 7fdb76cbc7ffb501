"""Helpers of the memory work tests (extractors, summaries): pause the session's worker, start
one of our own with other settings, and read the extractor and summary state from Postgres."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from pipeline.settings import Settings
from tests.pipelineutil import Proc


@contextmanager
def own_worker(procs: dict[str, Proc], **env: str) -> Iterator[Proc]:
    """The session's worker stopped, one with `env` (BRAINSTREAM_* overrides) in its place; the
    session's worker is back afterwards, whatever happened."""
    procs["worker"].stop()
    mine = Proc("worker", {**procs["worker"].env, **env}, procs["worker"].log_dir)
    try:
        yield mine.start()
    finally:
        mine.kill9()
        procs["worker"].start()


@contextmanager
def worker_paused(procs: dict[str, Proc]) -> Iterator[None]:
    """No pipeline worker runs inside the block (the test drives the services in-process)."""
    procs["worker"].stop()
    try:
        yield
    finally:
        procs["worker"].start()


def query(settings: Settings, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]


def extraction_states(settings: Settings, ns: uuid.UUID | str) -> dict[str, int]:
    """Rows per `extractor:status` (and `extractor:attempts=n`) of one namespace."""
    out: dict[str, int] = {}
    for extractor, status, attempts, count in query(
            settings, "SELECT extractor, status, attempts, count(*) FROM message_extraction"
            " WHERE namespace_id = %s GROUP BY 1, 2, 3", str(ns)):
        out[f"{extractor}:{status}"] = out.get(f"{extractor}:{status}", 0) + count
        out[f"{extractor}:attempts={attempts}"] = count
    return out


def all_done(settings: Settings, ns: uuid.UUID | str, messages: int) -> dict[str, int] | None:
    states = extraction_states(settings, ns)
    wanted = {f"{x}:done": messages for x in ("token", "embed", "entities")}
    return states if all(states.get(k) == v for k, v in wanted.items()) else None


def summaries_of(settings: Settings, ns: uuid.UUID | str, session_id: str
                 ) -> list[tuple[int, str, str]]:
    """(recent_seq, content, embed_status) of a session's summaries, oldest first."""
    return [(int(r[0]), str(r[1]), str(r[2])) for r in query(
        settings, "SELECT m.recent_seq, m.content, m.embed_status FROM summaries m"
        " JOIN sessions s ON s.id = m.session_pk WHERE s.namespace_id = %s"
        " AND s.session_id = %s ORDER BY m.recent_seq", str(ns), session_id)]


def extracted(settings: Settings, uuids: list[str]) -> bool:
    """Whether every extractor is done with each of these messages."""
    [(done,)] = query(settings, "SELECT count(*) FROM message_extraction WHERE status = 'done'"
                      " AND message_uuid = ANY(%s::uuid[])", uuids)
    return bool(done == 3 * len(uuids))
