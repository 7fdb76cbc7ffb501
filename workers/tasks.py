"""Celery tasks: thin shells over pipeline/embedding, pipeline/entities, pipeline/outbox and
pipeline/memory_services."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from pipeline.domain.errors import Unavailable
from pipeline.embedding.service import EmbeddingService, pending_count
from pipeline.entities.decisions import apply_pending
from pipeline.entities.merging import ProposalStats, proposals_due, propose_if_due
from pipeline.entities.resolving import ResolveConfig
from pipeline.entities.stage import ExtractionStage
from pipeline.entities.store import extraction
from pipeline.lexical import queue as lexical_queue
from pipeline.lexical.vocab import refresh_vocab
from pipeline.lexical.writer import LexicalWriter
from pipeline.memory.extraction import MessageExtraction
from pipeline.memory.store.fold import PgSummaryWork
from pipeline.memory.store.work import PgMessageWork, pending_work
from pipeline.memory.summarisers import build_summariser
from pipeline.memory.summarising import SessionSummariser
from pipeline.outbox.relay import ENTITIES, OBJECTS, OutboxRelay
from pipeline.outbox.store import backlog
from pipeline.retrieval.store.ppr_log import prune_log
from workers.app import (
    EMBED_TASK,
    ENTITY_RELAY_TASK,
    EXTRACT_TASK,
    LEXICAL_TASK,
    MEMORY_TASK,
    PROPOSE_TASK,
    RELAY_TASK,
    SWEEP_TASK,
    app,
)
from workers.runtime import Runtime, runtime

log = logging.getLogger(__name__)


@app.task(name=EMBED_TASK)
def embed(roots: list[str] | None = None) -> dict[str, Any]:
    """Embed pending rows of these roots (or any); idempotent: only `pending` rows are claimed."""
    rt = runtime()
    service = EmbeddingService(rt.settings, rt.pool, rt.embedder, rt.dead_letters)
    ids = [uuid.UUID(r) for r in roots] if roots else None
    stats = service.run(ids)
    if stats.roots_completed or stats.failed:
        relay.delay()
    return stats.__dict__


@app.task(name=EXTRACT_TASK)
def extract(roots: list[str] | None = None) -> dict[str, Any]:
    """Extract the entities of pending rows of these roots (or any) and recount what deletes
    changed; idempotent: only `pending` (or flagged) rows are claimed, and the write-back is a
    compare-and-set on the text hash."""
    rt = runtime()
    stage = ExtractionStage(rt.settings, rt.pool, rt.extractor, dead_letters=rt.dead_letters)
    ids = [uuid.UUID(r) for r in roots] if roots else None
    stats = stage.run(ids)
    # curators' decisions first: the proposal pass then honours a refusal, and skips a merged
    # entity (pipeline/entities/decisions.py)
    decided = apply_pending(rt.pool, batch=rt.settings.entity_decision_batch)
    # the pass waits while extraction has rows pending (ENTITY_PROPOSAL_MAX_DELAY at most): the
    # task that drains the last of a burst examines the burst's entities
    proposals = _propose(rt) or ProposalStats()
    if stats.extracted or stats.recounted or stats.failed or proposals.merged \
            or decided.applied:
        relay_entities.delay()
    return {**stats.__dict__, "proposals": proposals.__dict__, "decisions": decided.__dict__}


@app.task(name=PROPOSE_TASK)
def propose() -> dict[str, Any]:
    """The proposal pass over every entity nobody examined yet (sent by the sweep, run on the
    extraction queue); idempotent: an entity leaves the pass's queue in the transaction that
    examined it, and a merge is a compare-and-set."""
    proposals = _propose(runtime())
    if proposals is None:  # an extraction's own pass examined them meanwhile, or it is not due
        return {"examined": 0}
    if proposals.merged:
        relay_entities.delay()
    return proposals.__dict__


def _propose(rt: Runtime) -> ProposalStats | None:
    """The resolver's proposal pass over the entities extraction created, when it is due
    (`pipeline/entities/merging.py: proposals_due`): merge at the merge threshold, hold
    possibly-same pairs."""
    return propose_if_due(rt.pool, batch=rt.settings.entity_proposal_batch,
                          config=ResolveConfig.from_settings(rt.settings),
                          names=rt.name_embedder,
                          max_delay=rt.settings.entity_proposal_max_delay)


@app.task(name=MEMORY_TASK)
def memory(sessions: list[str] | None = None) -> dict[str, Any]:
    """Run the message extractors, then the summariser, over these sessions (or any);
    idempotent: only pending rows are claimed, and results are written by compare-and-set."""
    rt = runtime()
    ids = [uuid.UUID(s) for s in sessions] if sessions else None
    extracted = MessageExtraction(rt.settings, PgMessageWork(rt.pool), rt.embedder,
                                  rt.extractor, rt.dead_letters).run(ids)
    summariser = build_summariser(rt.settings, rt.embedder)
    summarised = SessionSummariser(rt.settings, PgSummaryWork(rt.pool), summariser,
                                   rt.embedder, rt.dead_letters).run(ids)
    return {"extracted": extracted.stored, "extract_failed": extracted.failed,
            **summarised.__dict__}


@app.task(name=RELAY_TASK)
def relay() -> dict[str, Any]:
    """Apply the outbox's object lane (objects and links) to the graph, then send the entity
    lane what it handed over; idempotent: rows re-sync current Postgres state."""
    result = _relay(OBJECTS)
    if result.get("handed"):
        relay_entities.delay()
    return result


@app.task(name=ENTITY_RELAY_TASK)
def relay_entities() -> dict[str, Any]:
    """Apply the outbox's entity lane (entities, MENTIONS, entity edges) to the graph;
    idempotent: rows re-sync current Postgres state."""
    return _relay(ENTITIES)


def _relay(lane: str) -> dict[str, Any]:
    rt = runtime()
    try:
        graph = rt.graph
    except Unavailable as exc:  # rows stay pending; the sweep triggers the relay again
        log.warning("relay (%s): %s", lane, exc)
        return {"skipped": True, "error": str(exc)}
    stats = OutboxRelay(rt.settings, rt.pool, graph, rt.changes, rt.dead_letters).run(
        lanes=(lane,))
    return {k: v for k, v in stats.__dict__.items() if k != "errors"}


@app.task(name=LEXICAL_TASK)
def lexical() -> dict[str, Any]:
    """Apply the lexical queue to the Tantivy indexes; idempotent: a queued root is re-read from
    Postgres and its documents replaced, and the row leaves the queue only after the commit."""
    rt = runtime()
    return LexicalWriter(rt.settings, rt.pool).run().__dict__


@app.task(name=SWEEP_TASK)
def sweep() -> dict[str, Any]:
    """Find work whose trigger was lost (killed worker, flushed Redis) and trigger it again
    (extraction also: rows whose deleted state changed wait for it to recount them); send the
    resolver's proposal pass when entities nobody examined wait for it; apply deferred events
    that are due even when no new events arrive; run memory work (message extractors,
    summaries) nobody holds; add new words to the search vocabulary (the trigram channel's)."""
    rt = runtime()
    deferred = rt.processor.retry_due_deferred()
    pending = pending_count(rt.pool, older_than=2 * rt.settings.sweep_interval)
    with rt.pool.connection() as conn:  # the backlogs nobody may hold, on one connection
        extract_pending = extraction.pending_count(conn,
                                                   older_than=2 * rt.settings.sweep_interval)
        memory_pending = pending_work(conn, older_than=2 * rt.settings.sweep_interval)
        lexical_backlog = lexical_queue.backlog(conn)
        proposals_waiting = proposals_due(conn, rt.settings.entity_proposal_max_delay)
    outbox = backlog(rt.pool)
    if memory_pending:
        memory.delay(None)
    if pending:
        embed.delay(None)
    if extract_pending:
        extract.delay(None)
    # curators' decisions recorded but not applied yet (a killed worker), before the proposal
    # pass, so a refusal keeps the resolver from proposing the pair again
    decided = apply_pending(rt.pool, batch=rt.settings.entity_decision_batch)
    # entities a killed worker created but never examined: the pass runs on the extraction
    # queue, so a long one never holds the embedding queue; nothing is sent when none waits
    if proposals_waiting:
        propose.delay()
    if outbox:
        relay.delay()
    if outbox or decided.applied:
        relay_entities.delay()
    if lexical_backlog:
        lexical.delay()
    with rt.pool.connection() as conn:
        vocab_rows = refresh_vocab(conn) or 0
        ppr_log_pruned = prune_log(conn, rt.settings.ppr_snapshot_log_retention)
    return {"embed_pending": pending, "extract_pending": extract_pending,
            "outbox_backlog": outbox, "memory_pending": memory_pending,
            "deferred_applied": deferred, "vocab_rows": vocab_rows,
            "proposal_pass": proposals_waiting,
            "lexical_backlog": lexical_backlog, "ppr_log_pruned": ppr_log_pruned}
