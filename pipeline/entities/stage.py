"""Entity extraction: claim rows whose text changed, extract their mentions in batches with
retries, write mentions, entities, aliases and entity edges back, hand them to the graph.

Modelled on the embedding service (pipeline/embedding/service.py). Rows are claimed from
`entity_extraction` with a lease (not a lock), so a slow extractor never blocks the consumers;
the write-back is a compare-and-set on the text hash, so a put that changed the text meanwhile
wins and its row stays pending for the next round. Any number of workers can run this at once.

A claimed batch mixes rows of every tenant: a text the extractor refuses (a permanent error)
is isolated by halving the batch and only its row fails; retries exhausted on an outage fail
the batch as a whole. A failed row is marked `failed` and dead-lettered `extraction_failed`.

Rows whose deleted state changed (soft delete, revival) and rows hard-deleted (stale chunks,
purge) keep or lose their mentions without a text change; migration 0014 flags them and each
round recounts the entities and pairs they touched (`part_count` and co-occurrence weights
count live rows only). New entities get their name vector later, from the proposal pass that
examines them (`pipeline/entities/name_vectors.py`): the HNSW insert is not extraction's cost.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace

import psycopg
from psycopg_pool import ConnectionPool

from pipeline.domain.errors import BrainstreamError, ExtractionFailed, Unavailable
from pipeline.domain.mentions import Extraction, Mention, TextField, Triple
from pipeline.domain.retry import give_up_error, isolate_refused, retry_transient
from pipeline.entities.names import normalise
from pipeline.entities.settings import EntitySettings
from pipeline.entities.store import extraction as rows_sql, writes as entities_sql
from pipeline.entities.store.extraction import RowText
from pipeline.entities.writeback import Key, WriteResult, mention_keys, triple_keys, write_batch
from pipeline.kafka.io import dead_letter_headers
from pipeline.metrics import instruments as metrics
from pipeline.ports import DeadLetterSink, Extractor

log = logging.getLogger(__name__)

# What one field of a row may hand the extractor: a longer text is cut (a prefix, so spans stay
# valid). Far past any document's useful length; it bounds one row's cost.
EXTRACT_TEXT_CAP_CHARS = 100_000
# A batch the extractor fails is retried with jittered back-off (at most this many seconds
# apart) this many times, then its rows are marked failed and dead-lettered `extraction_failed`.
EXTRACT_RETRY_ATTEMPTS = 5
EXTRACT_RETRY_MAX_WAIT = 10.0


@dataclass
class ExtractStats:
    claimed: int = 0
    extracted: int = 0
    failed: int = 0
    mentions: int = 0
    entities_created: int = 0
    rows_skipped: int = 0  # text changed meanwhile: left pending for the next round
    recounted: int = 0  # rows whose deleted state changed, and hard-deleted rows


class ExtractionStage:
    """Extracts the entities of what the write path left pending."""

    def __init__(self, settings: EntitySettings, pool: ConnectionPool, extractor: Extractor, *,
                 dead_letters: DeadLetterSink | None = None) -> None:
        self.settings = settings
        self.pool = pool
        self.extractor = extractor
        self.dead_letters = dead_letters

    def run(self, roots: Sequence[uuid.UUID] | None = None, *, max_batches: int = 1000
            ) -> ExtractStats:
        """Extract pending rows (of `roots`, or all) and recount what deletes changed, until
        nothing is left or `max_batches` ran."""
        stats = ExtractStats()
        for _ in range(max_batches):
            with self.pool.connection() as conn:
                lease, limit = self.settings.extract_lease_seconds, self.settings.extract_batch_size
                ids = rows_sql.claim(conn, recount=False, lease=lease, roots=roots, limit=limit)
                recount = rows_sql.claim(conn, recount=True, lease=lease, roots=roots,
                                         limit=limit)
            stats.claimed += len(ids)
            extracted = self._extract(self._load(ids), stats) if ids else []
            result = self._write(extracted, recount)
            stats.extracted += result.extracted
            stats.rows_skipped += len(result.skipped)
            stats.recounted += result.recounted
            stats.mentions += result.mentions
            stats.entities_created += len(result.created)
            metrics.EXTRACT_MENTIONS.inc(result.mentions)
            self._after_batch(result.extracted + result.recounted)
            if not ids and not recount and not result.recounted:
                break
        return stats

    def _after_batch(self, written: int) -> None:
        """ANALYZE the entity tables whose statistics this batch (with the others since) made
        stale: they grow from (nearly) empty when a namespace is first loaded, and plans chosen
        for empty tables stay wrong until autovacuum comes round (`analyze_stale`)."""
        if written:
            with self.pool.connection() as conn:
                entities_sql.analyze_stale(conn)

    def analyze(self) -> None:
        """Refresh the planner statistics of the entity tables (after a bulk load)."""
        with self.pool.connection() as conn:
            entities_sql.analyze(conn)

    def _load(self, ids: Sequence[uuid.UUID]) -> list[RowText]:
        with self.pool.connection() as conn:
            return rows_sql.load(conn, ids, EXTRACT_TEXT_CAP_CHARS)

    # -- extracting ---------------------------------------------------------------------------

    def _extract(self, rows: Sequence[RowText], stats: ExtractStats
                 ) -> list[tuple[RowText, Extraction]]:
        """Each row with what the extractor found; a batch the extractor refuses is halved until
        each refused row is alone (see the module docstring), and that row fails."""
        supplied = [(row, supplied_extraction(row)) for row in rows if row.supplied is not None]
        rows = [row for row in rows if row.supplied is None]
        if not rows:
            return supplied
        metrics.EXTRACT_BATCH.observe(len(rows))

        def call(batch: Sequence[RowText]) -> list[Extraction]:
            with metrics.EXTRACT_SECONDS.time():
                found = self.extractor.extract(
                    [[TextField(name, text) for name, text in row.fields] for row in batch])
            if len(found) != len(batch):
                raise ExtractionFailed(f"the extractor answered {len(found)} rows for "
                                       f"{len(batch)}")
            return found

        attempts = EXTRACT_RETRY_ATTEMPTS

        def fail(batch: Sequence[RowText], exc: BrainstreamError) -> None:
            self._fail(batch, give_up_error(exc, ExtractionFailed, attempts=attempts,
                                            what="extraction",
                                            refused="the extractor refused this row"), stats)

        out: list[tuple[RowText, Extraction]] = supplied
        isolate_refused(
            rows, call, fail=fail, attempts=attempts,
            store=lambda batch, found: out.extend(
                (row, valid_mentions(row, got)) for row, got in zip(batch, found, strict=True)),
            max_wait=EXTRACT_RETRY_MAX_WAIT,
            on_retry=lambda n, exc: log.warning("extraction attempt %d failed: %s", n, exc),
            on_split=lambda n, exc: log.warning(
                "the extractor refused a batch of %d rows (%s: %s); isolating the row", n,
                exc.code, exc.message))
        return out

    def _fail(self, rows: Sequence[RowText], error: ExtractionFailed,
              stats: ExtractStats) -> None:
        """The rows cannot be extracted: dead-letter the reason, then mark them failed."""
        log.error("%s (%d rows)", error.message, len(rows))
        if self.dead_letters is not None:
            letters = []
            for row in rows:
                value = json.dumps({"id": str(row.id), "namespace": str(row.namespace_id),
                                    "root_id": str(row.root_id),
                                    "event_id": row.event_id}).encode()
                headers = dead_letter_headers(error, topic=rows_sql.EXTRACTION_SOURCE,
                                              partition=-1, offset=-1, event_id=row.event_id)
                letters.append((str(row.root_id).encode(), value, headers))
            try:
                self.dead_letters.send(letters)
            except Unavailable:
                # Not marked failed: the lease expires and the rows are tried again later.
                log.error("dead-letter topic unavailable; leaving rows pending")
                return
        with self.pool.connection() as conn, conn.transaction():
            marked = rows_sql.mark_failed(conn, [(row.id, row.text_hash) for row in rows],
                                          error.message[:2000])
        metrics.EXTRACT_FAILURES.inc(marked)
        stats.failed += marked

    # -- writing back -------------------------------------------------------------------------

    def _write(self, extracted: Sequence[tuple[RowText, Extraction]],
               recount: Sequence[uuid.UUID]) -> WriteResult:
        # The names are looked up once, here: the write-back only looks up those unknown now
        # (another writer may create them meanwhile) and follows merges of the others.
        firsts = mention_keys(extracted)
        keys = set(firsts) | triple_keys(extracted)
        seen: dict[Key, uuid.UUID] = {}
        if keys:
            with self.pool.connection() as conn:
                seen = entities_sql.by_norm(conn, keys)
        def once() -> WriteResult:
            with self.pool.connection() as conn, conn.transaction():
                return write_batch(conn, self.settings, self.extractor.name, extracted,
                                   recount, seen)


        # Another writer of the same rows or entities (the resolver merging, a consumer batch
        # deleting stale chunks) may lock in another order: Postgres then aborts one side. The
        # mentions are in hand, so the transaction is retried rather than left to the lease.
        return retry_transient(once, attempts=5, max_wait=2.0,
                               transient=(psycopg.errors.TransactionRollback,),
                               on_retry=lambda n, exc: log.warning(
                                   "extraction write-back attempt %d rolled back: %s", n, exc))


def supplied_extraction(row: RowText) -> Extraction:
    """What the put says the row mentions and states (migration 0053), as an extractor's
    answer: the extractor does not read such a row (docs/entities.md says why)."""
    assert row.supplied is not None
    fields = dict(row.fields)
    mentions = []
    for m in row.supplied.mentions:
        text = fields.get(m.field)
        if text is not None and m.end <= len(text):  # a field past the cap loses its tail
            mentions.append(Mention(m.name, m.label, m.field, m.start, m.end,
                                    text[m.start:m.end]))
    triples = [Triple(r.subject, r.predicate, r.object, r.subject_label, r.object_label)
               for r in row.supplied.relations]
    return valid_mentions(row, Extraction(mentions, triples))


def valid_mentions(row: RowText, found: Extraction) -> Extraction:
    """`found` without the mentions that do not index a field of the row as the port promises
    (span in range, `text` the span), or that Postgres cannot store (NUL characters, an empty
    normalised name): an extractor's slip costs that mention, not the row."""
    fields = dict(row.fields)
    good: list[Mention] = []
    for m in found.mentions:
        text = fields.get(m.field)
        if (text is None or not 0 <= m.start < m.end <= len(text)
                or text[m.start:m.end] != m.text or "\x00" in m.name + m.label
                or not normalise(m.name) or not m.label):
            log.warning("dropping a mention the extractor got wrong: %r", m)
            continue
        good.append(m if all("\x00" not in a for a in m.aliases) else replace(
            m, aliases=tuple(a for a in m.aliases if "\x00" not in a)))
    return Extraction(good, [t for t in found.triples
                             if "\x00" not in t.subject + t.predicate + t.object])
