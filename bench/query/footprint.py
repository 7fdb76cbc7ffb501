"""Disk and memory a scale of the query benchmark occupies (issue 13: "with disk and memory
used"): what each store holds on disk, the largest Postgres relations, and the resident memory of
each service's process tree after the measurements (the caches warm, as a serving stack's are).
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import psutil
import psycopg
import redis

from pipeline.services.stack import Stack
from pipeline.settings import Settings

# the relations worth naming (the rest is summed into "other")
TOP_RELATIONS = 8


def _du(path: Path) -> int:
    """Bytes under `path` (files only, as `du --apparent-size` would count them)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):  # a segment merged away while walking
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _tree_rss(pid: int | None) -> int:
    """Resident bytes of a process and its children (Postgres's backends, node's workers)."""
    total = 0
    for proc in _tree(pid):
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total


def footprint(settings: Settings) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """(disk rows, memory rows), each (what, bytes)."""
    data = settings.resolved_data_dir
    disk: list[tuple[str, int]] = []
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        db_size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        rels = conn.execute(
            "SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind IN ('r', 'm')"
            " ORDER BY 2 DESC LIMIT %s", (TOP_RELATIONS,)).fetchall()
    disk.append(("Postgres database", int(db_size[0]) if db_size else 0))
    disk += [(f"  {name} (with its indexes and TOAST)", int(size)) for name, size in rels]
    for label, sub in (("Tantivy lexical indexes", "lexical"), ("FalkorDB files", "falkordb"),
                       ("broker topics (S3 store)", "s3"), ("whole data directory", "")):
        path = data / sub if sub else data
        if path.exists():
            disk.append((label, _du(path)))
    memory: list[tuple[str, int]] = []
    for service in Stack(settings).services:
        if not service.external:
            memory.append((f"{service.name} (resident, process tree)",
                           _tree_rss(service.running_pid())))
    graph = redis.Redis.from_url(settings.effective_falkordb_url)
    try:
        used = graph.info("memory").get("used_memory", 0)
        memory.append(("FalkorDB used_memory (INFO)", int(used)))
    finally:
        graph.close()
    memory.append(("this benchmark process (engine, caches, snapshot)",
                   psutil.Process().memory_info().rss))
    return disk, memory


def _tree(pid: int | None) -> list[psutil.Process]:
    """A process and its live children (none when it is gone)."""
    if pid is None:
        return []
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.Error:
        return []


def serving_cpu(settings: Settings, api_pid: int) -> float:
    """CPU-seconds (user + system) so far of everything that serves a request: the API's process
    tree (or this process's) and the embedded services' (Postgres with its backends, Redis,
    FalkorDB), each process counted once. Differences of two calls give a run's CPU cost
    (backends that exit in between are not counted)."""
    procs: dict[int, psutil.Process] = {}
    for pid in [api_pid, *(s.running_pid() for s in Stack(settings).services if not s.external)]:
        procs |= {p.pid: p for p in _tree(pid)}
    total = 0.0
    for proc in procs.values():
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            total += times.user + times.system
    return total


# What "idle" means before a measurement: the services' background work (FalkorDB building its
# indexes after loading the graph, autovacuum after a load) below this share of one core.
SETTLED_CORES = 0.05


def wait_settled(settings: Settings, *, timeout: float = 180.0) -> float:
    """Wait until the serving processes are idle (a second at most `SETTLED_CORES` busy): a
    stack just started goes on working for tens of seconds, and that CPU would be counted
    against the first calls measured. Returns the seconds waited."""
    started = time.monotonic()
    before = serving_cpu(settings, os.getpid())
    while time.monotonic() - started < timeout:
        time.sleep(1.0)
        now = serving_cpu(settings, os.getpid())
        if now - before <= SETTLED_CORES:
            break
        before = now
    return time.monotonic() - started

