"""Celery tasks: thin shells over the background stages (`pipeline/wiring/stages.py`: one task
per stage, named after it), the proposal pass and the sweep."""

from __future__ import annotations

import logging
import uuid
from typing import Any

from pipeline.entities.decisions import apply_pending
from pipeline.entities.merging import PROPOSAL_MAX_DELAY, proposals_due, propose_if_due
from pipeline.entities.resolving import ResolveConfig
from pipeline.lexical import changes as lexical_log
from pipeline.lexical.vocab import refresh_vocab
from pipeline.retrieval.ppr.snapshots import SnapshotConfig
from pipeline.retrieval.store.ppr_log import prune_log
from pipeline.wiring.stages import BY_NAME, pending
from workers.app import (
    EMBED_TASK,
    EXTRACT_TASK,
    MEMORY_TASK,
    PROPOSE_TASK,
    RELAY_TASK,
    SWEEP_TASK,
    app,
)
from workers.runtime import runtime

log = logging.getLogger(__name__)


def _run(name: str, roots: list[str] | None = None) -> dict[str, Any]:
    """Run one stage of `pipeline/wiring/stages.py` on this process's runtime, then send the
    tasks of the stages it handed work to."""
    outcome = BY_NAME[name].run(runtime(), [uuid.UUID(r) for r in roots] if roots else None,
                                None, False)
    for follow in outcome.follow:
        TASKS[follow].delay()
    return outcome.stats


@app.task(name=EMBED_TASK)
def embed(roots: list[str] | None = None) -> dict[str, Any]:
    """Embed pending rows of these roots (or any); idempotent: only `pending` rows are claimed."""
    return _run("embed", roots)


@app.task(name=EXTRACT_TASK)
def extract(roots: list[str] | None = None) -> dict[str, Any]:
    """Extract the entities of pending rows of these roots (or any), recount what deletes
    changed, apply curators' decisions and run the proposal pass when due; idempotent: only
    `pending` (or flagged) rows are claimed, and the write-back is a compare-and-set on the text
    hash."""
    return _run("extract", roots)


@app.task(name=PROPOSE_TASK)
def propose() -> dict[str, Any]:
    """The proposal pass over every entity nobody examined yet (sent by the sweep, run on the
    extraction queue); idempotent: an entity leaves the pass's queue in the transaction that
    examined it, and a merge is a compare-and-set."""
    rt = runtime()
    proposals = propose_if_due(rt.pool, config=ResolveConfig.from_settings(rt.settings),
                               names=rt.name_embedder)
    if proposals is None:  # an extraction's own pass examined them meanwhile, or it is not due
        return {"examined": 0}
    return proposals.__dict__


@app.task(name=MEMORY_TASK)
def memory(sessions: list[str] | None = None) -> dict[str, Any]:
    """Run the message extractors, then the summariser, over these sessions (or any);
    idempotent: only pending rows are claimed, and results are written by compare-and-set."""
    return _run("memory", sessions)


@app.task(name=RELAY_TASK)
def relay() -> dict[str, Any]:
    """Apply the outbox (objects and links) to the graph; idempotent: rows re-sync current
    Postgres state."""
    return _run("relay")


# each stage's task, by the stage's name (a task's name is `brainstream.<stage>`)
TASKS = {"embed": embed, "extract": extract, "memory": memory, "relay": relay}


@app.task(name=SWEEP_TASK)
def sweep() -> dict[str, Any]:
    """Find work whose trigger was lost (killed worker, flushed Redis) and trigger it again
    (extraction also: rows whose deleted state changed wait for it to recount them); send the
    resolver's proposal pass when entities nobody examined wait for it; apply deferred events
    that are due even when no new events arrive; run memory work (message extractors,
    summaries) nobody holds; prune the lexical change log; add new words to the search
    vocabulary (the trigram channel's)."""
    rt = runtime()
    deferred = rt.processor.retry_due_deferred()
    waiting = pending(rt.pool, older_than=2 * rt.settings.sweep_interval)
    with rt.pool.connection() as conn:
        proposals_waiting = proposals_due(conn, PROPOSAL_MAX_DELAY)
    for name, count in waiting.items():
        if count:
            TASKS[name].delay()
    # curators' decisions recorded but not applied yet (a killed worker), before the proposal
    # pass, so a refusal keeps the resolver from proposing the pair again
    apply_pending(rt.pool)
    # entities a killed worker created but never examined: the pass runs on the extraction
    # queue, so a long one never holds the embedding queue; nothing is sent when none waits
    if proposals_waiting:
        propose.delay()
    with rt.pool.connection() as conn:
        vocab_rows = refresh_vocab(conn) or 0
        ppr_log_pruned = prune_log(conn, SnapshotConfig().log_retention)
        # the read hosts' followers prune it too; this keeps it short where none runs
        lexical_pruned = lexical_log.prune(conn)
    return {"embed_pending": waiting["embed"], "extract_pending": waiting["extract"],
            "outbox_backlog": waiting["relay"], "memory_pending": waiting["memory"],
            "deferred_applied": deferred, "vocab_rows": vocab_rows,
            "proposal_pass": proposals_waiting,
            "lexical_log_pruned": lexical_pruned, "ppr_log_pruned": ppr_log_pruned}
