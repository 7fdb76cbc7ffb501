"""The fairness benchmark's processes beside the harness's stack and pipeline: the real API
(`brainstream api`, API_WORKERS unset: one worker per core), the slow broker its producer talks
through, tenant A's load in a child process, and the wait until the pipeline is idle.
"""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.process import BaseProcess

import httpx
import psycopg

from bench.fairness import load, slowbroker
from bench.harness.processes import child_env
from bench.harness.runenv import REPO, log
from pipeline.kafka.offsets import committed_offsets, read_tails
from pipeline.lexical.writer import pending_rows
from pipeline.ops.memory import read_memory_backlog
from pipeline.ops.status import read_backlogs
from pipeline.services.process import terminate_tree
from pipeline.settings import Settings

# Child processes start from a fresh interpreter (no fork of a process holding connections and
# threads).
_SPAWN = multiprocessing.get_context("spawn")


class SlowBrokerChild:
    """What the slow broker saw: the connections the API opened through it (0: the API's
    producer never used it)."""

    connections = 0


@contextmanager
def slow_broker(settings: Settings, delay: float) -> Iterator[tuple[str, SlowBrokerChild]]:
    """A slow broker (slowbroker.py) in front of the stack's, in a child process: yields its
    bootstrap address, and what it saw (filled in on exit)."""
    parent, child = _SPAWN.Pipe()
    proc = _SPAWN.Process(target=slowbroker.serve, args=(settings.kafka_port, delay, child),
                          daemon=True, name="slow-broker")
    proc.start()
    try:
        if not parent.poll(60):
            raise RuntimeError("the slow broker did not start")
        port = parent.recv()
        log(f"slow broker on 127.0.0.1:{port}, {delay:g} s per chunk sent to the broker")
        seen = SlowBrokerChild()
        yield f"127.0.0.1:{port}", seen
        parent.send("stop")
        if parent.poll(10):
            seen.connections = parent.recv()
    finally:
        proc.join(10)
        if proc.is_alive():
            proc.terminate()


@contextmanager
def api_process(settings: Settings, env: dict[str, str]) -> Iterator[subprocess.Popen[bytes]]:
    """`brainstream api` on `settings.api_port` with `settings` plus `env`, until it answers
    /healthz; stopped (its workers too) on exit."""
    log_path = settings.resolved_data_dir / "logs" / "bench-api.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log_file:
        proc = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "api", "--port",
                                 str(settings.api_port)], env=child_env(settings) | env,
                                cwd=REPO, stdout=log_file, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{settings.api_port}/healthz",
                             timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the API did not start; see {log_path}")
            time.sleep(0.5)
        yield proc
    finally:
        if proc.poll() is None:
            terminate_tree(proc.pid, timeout=20)


class HostileChild:
    """Tenant A's load in a child process: started (and its imports done) before the phase,
    so the phase's clock starts with A's first request."""

    def __init__(self, plan: load.HostilePlan) -> None:
        self.conn, child = _SPAWN.Pipe()
        self.proc: BaseProcess = _SPAWN.Process(target=load.hostile_process,
                                                args=(plan, child), daemon=True, name="tenant-a")
        self.proc.start()
        if not self.conn.poll(120) or self.conn.recv() != "ready":
            raise RuntimeError("tenant A's process did not start")

    @property
    def pid(self) -> int:
        assert self.proc.pid is not None
        return self.proc.pid

    def go(self, seconds: float, run: int) -> None:
        self.conn.send((seconds, run))

    def tally(self) -> load.HostileTally:
        """A's answers, once its load ended (the process then waits for `close`, so its CPU
        time can still be read)."""
        result: load.HostileTally = self.conn.recv()
        return result

    def close(self) -> None:
        self.conn.send("bye")
        self.proc.join(30)
        if self.proc.is_alive():
            self.proc.terminate()


# -- the pipeline's backlog ------------------------------------------------------------------


def pending(settings: Settings) -> dict[str, int]:
    """What the pipeline has not done yet (only non-zero entries): events not consumed, outbox
    rows, rows to embed or extract, messages to extract, sessions to summarise, documents for
    the lexical index."""
    committed = committed_offsets(settings, settings.topic_events, settings.consumer_group)
    tails = read_tails(settings, settings.topic_events, committed)
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        backlogs = read_backlogs(conn, settings.memory_window)
        memory = read_memory_backlog(conn, settings.memory_window)
        lexical = pending_rows(settings, conn)  # the API host's replica (same data dir)
    out = {"events": sum(t.count for t in tails),
           "outbox": sum(o.count for o in backlogs.outbox),
           "embedding": backlogs.embedding.get("pending", 0),
           "extraction": backlogs.extraction.get("pending", 0),
           "memory extraction": sum(e.pending for e in memory.extractors),
           "summaries": memory.summariser_pending,
           "lexical": lexical}
    return {name: count for name, count in out.items() if count}


def stored(settings: Settings, namespaces: list[uuid.UUID]) -> tuple[int, int]:
    """(documents, messages) stored in `namespaces`."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM objects WHERE namespace_id = ANY(%s)"
            "  AND parent_id IS NULL AND deleted_at IS NULL),"
            " (SELECT count(*) FROM messages WHERE namespace_id = ANY(%s))",
            (namespaces, namespaces)).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def wait_idle(settings: Settings, timeout: float, what: str,
              namespaces: list[uuid.UUID] | None = None, expect: tuple[int, int] = (0, 0)
              ) -> float:
    """Seconds until the pipeline has nothing left to do (and, with `namespaces`, at least
    `expect` documents and messages are stored in them); raises after `timeout`."""
    started = time.monotonic()
    last = started
    while True:
        left = pending(settings)
        have = stored(settings, namespaces) if namespaces else expect
        if not left and have[0] >= expect[0] and have[1] >= expect[1]:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise RuntimeError(f"{what}: the pipeline is not idle after {timeout:.0f} s: {left}"
                               f", stored {have}, expected {expect}")
        if time.monotonic() - last > 30:
            last = time.monotonic()
            log(f"{what}: waiting for the pipeline: {left or 'nothing pending'}, stored "
                f"{have[0]} documents and {have[1]} messages of {expect}")
        time.sleep(2)
