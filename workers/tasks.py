"""Celery tasks: thin shells over pipeline/embedding, pipeline/entities and pipeline/outbox."""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any

from pipeline.domain.errors import Unavailable
from pipeline.embedding.service import EmbeddingService, pending_count
from pipeline.entities.merging import ProposalStats, propose_all
from pipeline.entities.resolving import ResolveConfig
from pipeline.entities.stage import ExtractionStage
from pipeline.ops.vocab import refresh_vocab
from pipeline.outbox.relay import OutboxRelay
from pipeline.outbox.store import backlog
from pipeline.stores.postgres import extraction
from workers.app import EMBED_TASK, EXTRACT_TASK, RELAY_TASK, SWEEP_TASK, app
from workers.runtime import Runtime, runtime

log = logging.getLogger(__name__)
_relay_lock = threading.Lock()


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
    stage = ExtractionStage(rt.settings, rt.pool, rt.extractor, rt.embedder, rt.dead_letters)
    ids = [uuid.UUID(r) for r in roots] if roots else None
    stats = stage.run(ids)
    proposals = _propose(rt) if stats.entities_created else ProposalStats()
    if stats.extracted or stats.recounted or stats.failed or proposals.merged:
        relay.delay()
    return {**stats.__dict__, "proposals": proposals.__dict__}


def _propose(rt: Runtime) -> ProposalStats:
    """The resolver's proposal pass over the entities extraction created: merge at the merge
    threshold, hold possibly-same pairs (pipeline/entities/merging.py)."""
    return propose_all(rt.pool, batch=rt.settings.entity_proposal_batch,
                       config=ResolveConfig.from_settings(rt.settings))


@app.task(name=RELAY_TASK)
def relay() -> dict[str, Any]:
    """Apply the outbox to the graph; idempotent: rows re-sync current Postgres state."""
    rt = runtime()
    try:
        graph = rt.graph
    except Unavailable as exc:  # rows stay pending; the sweep triggers the relay again
        log.warning("relay: %s", exc)
        return {"skipped": True, "error": str(exc)}
    stats = OutboxRelay(rt.settings, rt.pool, graph, rt.changes, rt.dead_letters).run()
    return {k: v for k, v in stats.__dict__.items() if k != "errors"}


@app.task(name=SWEEP_TASK)
def sweep() -> dict[str, int]:
    """Find work whose trigger was lost (killed worker, flushed Redis) and trigger it again
    (extraction also: rows whose deleted state changed wait for it to recount them);
    apply deferred events that are due even when no new events arrive; add new words to the
    search vocabulary (the trigram channel's)."""
    rt = runtime()
    deferred = rt.processor.retry_due_deferred()
    pending = pending_count(rt.pool, older_than=2 * rt.settings.sweep_interval)
    with rt.pool.connection() as conn:
        extract_pending = extraction.pending_count(conn,
                                                   older_than=2 * rt.settings.sweep_interval)
    outbox = backlog(rt.pool)
    if pending:
        embed.delay(None)
    if extract_pending:
        extract.delay(None)
    proposals = _propose(rt)  # entities a killed worker created but never examined
    if proposals.merged:
        relay.delay()
    if outbox:
        relay.delay()
    with rt.pool.connection() as conn:
        vocab_rows = refresh_vocab(conn) or 0
    return {"embed_pending": pending, "extract_pending": extract_pending,
            "outbox_backlog": outbox, "deferred_applied": deferred, "vocab_rows": vocab_rows,
            "entities_examined": proposals.examined}
