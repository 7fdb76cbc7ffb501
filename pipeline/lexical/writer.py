"""The lexical index's one writer: applies the queue to the Tantivy indexes in batches.

Each round claims up to `BATCH_SIZE` queue rows, re-reads the roots they name from
Postgres, replaces each root's documents (delete by root, add its searchable rows as they are
now), commits every touched namespace's index, and only then deletes the rows from the queue.
Idempotent: a row applied twice writes the same documents; a writer killed before the queue
delete (even between two namespaces' commits) leaves the rows queued, and the next writer
applies them again. Tantivy's commit is atomic (a new meta.json), so a kill -9 mid-commit leaves
the last committed state, and the index reopens and converges.

One writer at a time per generation: a Postgres advisory lock (other invocations return at
once, `skipped`), and Tantivy's own lock file per index directory.

A rebuild writes a fresh index beside the namespace's (`<namespace>.rebuild`) and swaps it in
by two renames, so it takes the current schema; the writer rebuilds so an index it finds stale
(written with an older schema, `documents.is_stale`) before writing to it.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tantivy
from psycopg_pool import ConnectionPool

from pipeline.lexical import queue
from pipeline.lexical.documents import (
    ROOT_ID,
    is_stale,
    namespace_dir,
    open_index,
    to_documents,
)
from pipeline.lexical.settings import LexicalSettings
from pipeline.outbox.single_writer import single_writer

log = logging.getLogger(__name__)

# Queued roots applied per commit: a commit costs a segment, and 500 roots keep one under a second.
BATCH_SIZE = 500
# Tantivy's indexing memory per writer (its minimum is 15 MB): enough for a commit of 500 roots.
WRITER_HEAP_BYTES = 50_000_000

WRITER_LOCK = 0x6272_6169_6E6C  # one lexical writer at a time per database (and rebuild)
# Namespace writers kept open between rounds: each may hold up to WRITER_HEAP_BYTES,
# so a round touching many tenants must not keep them all.
_OPEN_WRITERS = 8


@dataclass
class WriterStats:
    rows: int = 0  # queue rows applied
    roots: int = 0  # distinct roots re-synced
    documents: int = 0  # documents written
    commits: int = 0
    skipped: bool = False  # another writer holds the lock


class LexicalWriter:
    """Applies `lexical_queue` to the index generation of `settings`."""

    def __init__(self, settings: LexicalSettings, pool: ConnectionPool[Any], *,
                 batch_size: int = BATCH_SIZE) -> None:
        self.settings = settings
        self.pool = pool
        self.batch_size = batch_size
        self._writers: dict[uuid.UUID, tantivy.IndexWriter] = {}

    def run(self, *, max_rounds: int = 1000) -> WriterStats:
        """Drain the queue (up to `max_rounds` batches) unless another writer is at it."""
        stats = WriterStats()
        with single_writer(self.pool, WRITER_LOCK) as held:
            if not held:
                stats.skipped = True
                return stats
            try:
                for _ in range(max_rounds):
                    if not self._round(stats):
                        break
            finally:
                self._close()
        return stats

    def rebuild(self, namespaces: Sequence[uuid.UUID]) -> WriterStats:
        """Rebuild these namespaces' indexes from Postgres: every document deleted and the
        searchable rows written again, one commit per namespace (searches see the old index
        until it). Waits for a running writer; queue rows older than the rebuild are covered
        by it and dropped, newer ones stay for the next writer run."""
        stats = WriterStats()
        with single_writer(self.pool, WRITER_LOCK, wait=True):
            try:
                with self.pool.connection() as conn:
                    covered = queue.max_id(conn)
                for namespace in namespaces:
                    self._rebuild_namespace(namespace, stats)
                with self.pool.connection() as conn:
                    queue.forget_up_to(conn, covered)
            finally:
                self._close()
        return stats

    def _rebuild_namespace(self, namespace: uuid.UUID, stats: WriterStats) -> None:
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
            roots = queue.roots_of(conn, namespace)
        size = self.batch_size
        for start in range(0, len(roots), size):
            chunk = roots[start:start + size]
            with self.pool.connection() as conn:
                docs = queue.load_documents(conn, namespace, chunk)
            for doc in to_documents(docs):
                writer.add_document(doc)
            stats.roots += len(chunk)
            stats.documents += len(docs)
        writer.commit()
        _finish(writer)
        stats.commits += 1
        _swap(fresh, path)

    def _round(self, stats: WriterStats) -> bool:
        with self.pool.connection() as conn:
            rows = queue.claim(conn, self.batch_size)
        if not rows:
            return False
        by_namespace: dict[uuid.UUID, set[uuid.UUID]] = defaultdict(set)
        for row in rows:
            by_namespace[row.namespace_id].add(row.root_id)
        for namespace, roots in sorted(by_namespace.items()):
            ordered = sorted(roots)
            with self.pool.connection() as conn:
                docs = queue.load_documents(conn, namespace, ordered)
            writer = self._writer(namespace)
            for root in ordered:
                writer.delete_documents_by_term(ROOT_ID, str(root))
            for doc in to_documents(docs):
                writer.add_document(doc)
            writer.commit()
            stats.commits += 1
            stats.roots += len(ordered)
            stats.documents += len(docs)
        with self.pool.connection() as conn:
            queue.forget(conn, [row.id for row in rows])
        stats.rows += len(rows)
        return True

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
        return namespace_dir(self.settings.resolved_data_dir, self.settings.generation,
                             namespace)

    def _close(self) -> None:
        """Let pending merges finish and release the indexes' locks."""
        writers, self._writers = self._writers, {}
        for writer in writers.values():
            _finish(writer)


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
