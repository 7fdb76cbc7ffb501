"""A host's lexical replica writer: applies the change log to the Tantivy indexes under this
data directory, in batches, from the replica's cursor (`pipeline/lexical/replica.py`).

Each round reads up to `BATCH_SIZE` log rows beyond the cursor (of transactions below the
horizon: `changes.after`), re-reads the roots they name from Postgres, replaces each root's
documents (delete by root, add its searchable rows as they are now), commits every touched
namespace's index, and only then moves the cursor (the state file, then `lexical_replicas`).
Idempotent: a row applied twice writes the same documents; a writer killed before the cursor
moved (even between two namespaces' commits) applies the rows again. Tantivy's commit is atomic
(a new meta.json), so a kill -9 mid-commit leaves the last committed state, and the index
reopens and converges.

A replica with no cursor (new host, new database, or one forgotten while its host was down)
builds itself first: it registers at the log's horizon, then writes the index of every
namespace the database holds from Postgres (each into a fresh directory swapped in), so every
row below the horizon is in and every row above it follows from the log.

One writer at a time per data directory (`replica_lock`), and Tantivy's own lock file per index
directory. A rebuild writes a fresh index beside the namespace's (`<namespace>.rebuild`) and
swaps it in by two renames, so it takes the current schema; the writer rebuilds so an index it
finds stale (written with an older schema, `documents.is_stale`) before writing to it.
"""

from __future__ import annotations

import logging
import shutil
import socket
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tantivy
from psycopg_pool import ConnectionPool

from pipeline.lexical import changes
from pipeline.lexical.changes import Cursor
from pipeline.lexical.documents import (
    ROOT_ID,
    is_stale,
    namespace_dir,
    open_index,
    to_documents,
)
from pipeline.lexical.replica import (
    ReplicaState,
    clear_state,
    read_state,
    replica_lock,
    replica_name,
    write_state,
)
from pipeline.lexical.settings import LexicalSettings

log = logging.getLogger(__name__)

# Log rows applied per commit: a commit costs a segment, and 500 roots keep one under a second.
BATCH_SIZE = 500
# Tantivy's indexing memory per writer (its minimum is 15 MB): enough for a commit of 500 roots.
WRITER_HEAP_BYTES = 50_000_000
# Namespace writers kept open between rounds: each may hold up to WRITER_HEAP_BYTES,
# so a round touching many tenants must not keep them all.
_OPEN_WRITERS = 8
# How often a writer prunes the log (any replica's writer may: the floor is every live
# replica's): often enough that the log holds minutes of changes, not days.
PRUNE_SECONDS = 60.0
_last_prune = 0.0


@dataclass
class WriterStats:
    rows: int = 0  # log rows applied
    roots: int = 0  # distinct roots re-synced
    documents: int = 0  # documents written
    commits: int = 0
    skipped: bool = False  # another writer holds this replica
    built: bool = False  # the replica built itself from Postgres first
    pruned: int = 0  # log rows pruned


class LexicalWriter:
    """Keeps this host's replica of the generation of `settings` current."""

    def __init__(self, settings: LexicalSettings, pool: ConnectionPool[Any], *,
                 batch_size: int = BATCH_SIZE) -> None:
        self.settings = settings
        self.pool = pool
        self.batch_size = batch_size
        self.data_dir = settings.resolved_data_dir
        self.generation = settings.generation
        self.replica = replica_name(self.data_dir)
        self._writers: dict[uuid.UUID, tantivy.IndexWriter] = {}

    def run(self, *, max_rounds: int = 1000,
            stop: Callable[[], bool] = lambda: False) -> WriterStats:
        """Catch the replica up with the log (up to `max_rounds` batches), building it from
        Postgres first when it must; skipped when another writer holds it. `stop` is asked
        between batches and between a build's namespaces (a build stopped midway starts again
        next time)."""
        stats = WriterStats()
        with replica_lock(self.data_dir, self.generation) as held:
            if not held:
                stats.skipped = True
                return stats
            try:
                cursor = self._cursor(stats, stop)
                if cursor is None:
                    return stats
                with self.pool.connection() as conn:
                    below = changes.horizon(conn)
                for _ in range(max_rounds):
                    if stop():
                        break
                    moved = self._round(stats, cursor, below)
                    if moved is None:
                        break
                    cursor = moved
                with self.pool.connection() as conn:
                    changes.report(conn, self.replica, cursor)
            finally:
                self._close()
        stats.pruned = self._prune_if_due()
        return stats

    def pending(self) -> int:
        """Log rows this replica has not applied (`pending_rows`)."""
        with self.pool.connection() as conn:
            return pending_rows(self.settings, conn)

    def rebuild(self, namespaces: Sequence[uuid.UUID]) -> WriterStats:
        """Rebuild these namespaces' indexes from Postgres: every document deleted and the
        searchable rows written again, one commit per namespace (searches see the old index
        until it). Waits for a running writer. The cursor stays: the rows beyond it are
        applied again by the next run, which changes nothing."""
        stats = WriterStats()
        with replica_lock(self.data_dir, self.generation, wait=True):
            try:
                for namespace in namespaces:
                    self._rebuild_namespace(namespace, stats)
            finally:
                self._close()
        return stats

    def _cursor(self, stats: WriterStats, stop: Callable[[], bool]) -> Cursor | None:
        """The replica's cursor, after building it from Postgres when it has none (or its
        registration is gone: its log rows may be pruned); None when stopped mid-build."""
        state = read_state(self.settings)
        if state is not None and state.replica == self.replica:
            with self.pool.connection() as conn:
                if changes.registered(conn, self.replica):
                    return state.cursor
        return self._build(stats, stop)

    def _build(self, stats: WriterStats, stop: Callable[[], bool]) -> Cursor | None:
        clear_state(self.settings)  # a build killed midway starts again
        with self.pool.connection() as conn:
            cursor = changes.register(conn, self.replica, socket.gethostname(),
                                      str(self.data_dir))
            targets = set(changes.namespaces(conn))
        log.info("lexical replica %s of generation %d: building from Postgres",
                 self.replica, self.generation)
        # the database's namespaces only: an index directory of another namespace may be
        # another database's replica in the same data directory (it is left alone)
        for namespace in sorted(targets):
            if not self._rebuild_namespace(namespace, stats, stop):
                return None
        write_state(self.settings, ReplicaState(self.replica, cursor))
        stats.built = True
        return cursor

    def _rebuild_namespace(self, namespace: uuid.UUID, stats: WriterStats,
                           stop: Callable[[], bool] = lambda: False) -> bool:
        """Write the namespace's index afresh and swap it in; False when `stop` said so first
        (the index in place stays as it was)."""
        held = self._writers.pop(namespace, None)
        if held is not None:  # its lock is on the index being replaced
            _finish(held)
        path = self._path(namespace)
        fresh = path.with_name(path.name + ".rebuild")
        shutil.rmtree(fresh, ignore_errors=True)  # a rebuild killed before its swap
        index = open_index(fresh, create=True)
        assert index is not None  # created
        writer = index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
        with self.pool.connection() as conn:
            roots = changes.roots_of(conn, namespace)
        size = self.batch_size
        for start in range(0, len(roots), size):
            if stop():
                _finish(writer)
                shutil.rmtree(fresh, ignore_errors=True)
                return False
            chunk = roots[start:start + size]
            with self.pool.connection() as conn:
                docs = changes.load_documents(conn, namespace, chunk)
            for doc in to_documents(docs):
                writer.add_document(doc)
            stats.roots += len(chunk)
            stats.documents += len(docs)
        writer.commit()
        _finish(writer)
        stats.commits += 1
        _swap(fresh, path)
        return True

    def _round(self, stats: WriterStats, cursor: Cursor, below: int) -> Cursor | None:
        with self.pool.connection() as conn:
            rows = changes.after(conn, cursor, below, self.batch_size)
        if not rows:
            return None
        by_namespace: dict[uuid.UUID, set[uuid.UUID]] = defaultdict(set)
        for row in rows:
            by_namespace[row.namespace_id].add(row.root_id)
        for namespace, roots in sorted(by_namespace.items()):
            ordered = sorted(roots)
            with self.pool.connection() as conn:
                docs = changes.load_documents(conn, namespace, ordered)
            writer = self._writer(namespace)
            for root in ordered:
                writer.delete_documents_by_term(ROOT_ID, str(root))
            for doc in to_documents(docs):
                writer.add_document(doc)
            writer.commit()
            stats.commits += 1
            stats.roots += len(ordered)
            stats.documents += len(docs)
        moved = Cursor(rows[-1].xid, rows[-1].id)
        write_state(self.settings, ReplicaState(self.replica, moved))
        stats.rows += len(rows)
        return moved

    def _prune_if_due(self) -> int:
        global _last_prune
        now = time.monotonic()
        if now - _last_prune < PRUNE_SECONDS:
            return 0
        _last_prune = now
        with self.pool.connection() as conn:
            return changes.prune(conn)

    def _writer(self, namespace: uuid.UUID) -> tantivy.IndexWriter:
        writer = self._writers.pop(namespace, None)
        if writer is None:
            while len(self._writers) >= _OPEN_WRITERS:  # the least recently used first
                _finish(self._writers.pop(next(iter(self._writers))))
            path = self._path(namespace)
            if is_stale(path):
                log.info("lexical index of %s has an older schema: rebuilding it", namespace)
                self._rebuild_namespace(namespace, WriterStats())
            index = open_index(path, create=True)
            assert index is not None  # created
            # one indexing thread: the writer shares two cores with everything else
            writer = index.writer(heap_size=WRITER_HEAP_BYTES,
                                  num_threads=1)
        self._writers[namespace] = writer  # (re)inserted last: most recently used
        return writer

    def _path(self, namespace: uuid.UUID) -> Path:
        return namespace_dir(self.data_dir, self.generation, namespace)

    def _close(self) -> None:
        """Let pending merges finish and release the indexes' locks."""
        writers, self._writers = self._writers, {}
        for writer in writers.values():
            _finish(writer)


def pending_rows(settings: LexicalSettings, conn: changes.Conn) -> int:
    """Log rows this data directory's replica of `settings`' database and generation has not
    applied (at least 1 while it has never built itself: it has everything to do)."""
    state = read_state(settings)
    if state is None:
        return max(1, changes.pending_count(conn, Cursor(0)))
    return changes.pending_count(conn, state.cursor)


def _swap(fresh: Path, path: Path) -> None:
    """Put the index built at `fresh` in place of the one at `path` (two renames: searches
    that open the namespace in between find no index, for that instant)."""
    old = path.with_name(path.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if path.exists():
        path.rename(old)
    fresh.rename(path)
    shutil.rmtree(old, ignore_errors=True)


def _finish(writer: tantivy.IndexWriter) -> None:
    """Let the writer's merges finish and release its index's lock (uncommitted work, none
    here: every round commits, is dropped)."""
    try:
        writer.wait_merging_threads()
    except Exception as exc:  # a failed merge leaves the committed segments as they are
        log.warning("lexical index merge: %s", exc)
