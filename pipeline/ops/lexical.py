"""`brainstream lexical rebuild` and `lexical verify`: the Tantivy indexes against Postgres.

verify compares, per namespace, the searchable rows Postgres holds with the documents the index
holds (counts), and for a sample of roots the documents themselves (which rows, and their text);
roots beyond this replica's cursor are left aside (the writer has not applied them yet, which
is not drift). `--repair` logs the drifted roots (all of a namespace whose count differs) again,
for every replica's writer. rebuild rewrites namespaces' indexes from Postgres (see
`LexicalWriter.rebuild`); `rebuild_stale_lexical` (run by `brainstream migrate`) those
written with an older schema.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import tantivy
from psycopg_pool import ConnectionPool

from pipeline.lexical import changes
from pipeline.lexical.documents import (
    BODY,
    ID_HI,
    ID_LO,
    ROOT_ID,
    SCHEMA,
    id_from_halves,
    indexed_namespaces,
    is_stale,
    namespace_dir,
    open_index,
)
from pipeline.lexical.replica import read_state
from pipeline.lexical.writer import LexicalWriter, WriterStats
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings

_MAX_PARTS = 100_000  # the most documents one root's check reads


@dataclass
class NamespaceCheck:
    namespace: uuid.UUID
    expected: int  # searchable rows in Postgres
    indexed: int  # documents in the index
    pending: int = 0  # roots beyond the cursor: counts may differ until they are applied
    sampled: int = 0  # roots whose documents were compared
    drifted: list[uuid.UUID] = field(default_factory=list)  # sampled roots that differ

    @property
    def clean(self) -> bool:
        return (self.expected == self.indexed or self.pending > 0) and not self.drifted


@dataclass
class LexicalCheck:
    generation: int
    queued: int  # log rows this replica has not applied yet (-1: it never built itself)
    namespaces: list[NamespaceCheck] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.queued >= 0 and all(n.clean for n in self.namespaces)


@contextmanager
def lexical_pool(settings: Settings) -> Iterator[ConnectionPool[Any]]:
    """A small pool for a lexical command, closed after it."""
    pool = make_pool(settings, max_size=2, name="brainstream-lexical")
    try:
        yield pool
    finally:
        pool.close()


def rebuild_lexical(settings: Settings, namespace: uuid.UUID | None = None) -> WriterStats:
    """Rebuild one namespace's index, or every namespace's (those with objects, and those
    whose index outlived their objects), from Postgres."""
    with lexical_pool(settings) as pool:
        if namespace is not None:
            targets = [namespace]
        else:
            with pool.connection() as conn:
                targets = sorted(set(changes.namespaces(conn)) | indexed_namespaces(
                    settings.resolved_data_dir, settings.generation))
        return LexicalWriter(settings, pool).rebuild(targets)


def rebuild_stale_lexical(settings: Settings) -> list[uuid.UUID]:
    """Rebuild the generation's indexes that have an older schema than the code's (the
    namespaces rebuilt; none when every index is current, and then Postgres is not asked)."""
    stale = sorted(ns for ns in indexed_namespaces(settings.resolved_data_dir,
                                                   settings.generation)
                   if is_stale(namespace_dir(settings.resolved_data_dir, settings.generation,
                                             ns)))
    if stale:
        rebuild_lexical_namespaces(settings, stale)
    return stale


def rebuild_lexical_namespaces(settings: Settings,
                               namespaces: list[uuid.UUID]) -> WriterStats:
    """Rebuild these namespaces' indexes from Postgres."""
    with lexical_pool(settings) as pool:
        return LexicalWriter(settings, pool).rebuild(namespaces)


def verify_lexical(settings: Settings, *, sample: int = 20,
                   repair: bool = False) -> LexicalCheck:
    """Counts per namespace and `sample` sampled roots per namespace; with `repair`, log what
    drifted again for the writers."""
    with lexical_pool(settings) as pool:
        state = read_state(settings)
        cursor = state.cursor if state is not None else changes.Cursor(0)
        with pool.connection() as conn:
            check = LexicalCheck(settings.generation, changes.pending_count(conn, cursor)
                                 if state is not None else -1)
            expected = changes.namespace_counts(conn)
        for ns in sorted(set(expected) | indexed_namespaces(settings.resolved_data_dir,
                                                            settings.generation)):
            index = open_index(namespace_dir(settings.resolved_data_dir, settings.generation,
                                             ns), create=False)
            searcher = index.searcher() if index is not None else None
            result = NamespaceCheck(ns, expected.get(ns, 0),
                                    searcher.num_docs if searcher is not None else 0)
            with pool.connection() as conn:
                queued = changes.pending_roots(conn, cursor, ns)
                result.pending = len(queued)
                roots = [r for r in changes.sample_roots(conn, ns, sample) if r not in queued]
                want = {r: _expected_documents(conn, ns, r) for r in roots}
            for root, documents in want.items():
                result.sampled += 1
                if _indexed_documents(searcher, root) != documents:
                    result.drifted.append(root)
            check.namespaces.append(result)
            if repair:
                with pool.connection() as conn:
                    if result.expected != result.indexed and not result.pending:
                        changes.enqueue_all(conn, ns)
                    elif result.drifted:
                        changes.enqueue_roots(conn, ns, result.drifted)
        return check


def _expected_documents(conn: Any, namespace: uuid.UUID,
                        root: uuid.UUID) -> dict[uuid.UUID, str]:
    return {d.row_id: d.body for d in changes.load_documents(conn, namespace, [root])}


def _indexed_documents(searcher: tantivy.Searcher | None,
                       root: uuid.UUID) -> dict[uuid.UUID, str]:
    if searcher is None:
        return {}
    hits = searcher.search(tantivy.Query.term_query(SCHEMA, ROOT_ID, str(root)), _MAX_PARTS,
                           count=False).hits
    addresses = [a for _, a in hits]
    his = searcher.fast_field_values(ID_HI, addresses)
    los = searcher.fast_field_values(ID_LO, addresses)
    out: dict[uuid.UUID, str] = {}
    for address, hi, lo in zip(addresses, his, los, strict=True):
        body = searcher.doc(address).get_first(BODY)
        out[id_from_halves(int(hi or 0), int(lo or 0))] = str(body or "")
    return out
