"""The background stages, written once: what each is called, how it runs on a generation's
resources, and how much work waits for it.

Three callers read this list: the Celery tasks (`workers/tasks.py`: one task per stage, named
after it, sending the stages it hands work to), the sweep (which sends a stage's task when its
work waited longer than two sweep intervals: a trigger was lost) and `brainstream replay`
(`pipeline/ops/replay_step.py`: every stage in this order, in-process, until nothing waits).
A new stage is one entry here and, for the workers, one task that runs it.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from psycopg_pool import ConnectionPool

from pipeline.domain.errors import Unavailable
from pipeline.embedding.reuse import VectorReuse
from pipeline.embedding.service import EmbeddingService, pending_count
from pipeline.entities.decisions import apply_pending
from pipeline.entities.merging import ProposalStats, propose_all, propose_if_due
from pipeline.entities.resolving import ResolveConfig
from pipeline.entities.stage import ExtractionStage
from pipeline.entities.store import extraction
from pipeline.memory.extraction import MessageExtraction
from pipeline.memory.ports import Summariser
from pipeline.memory.store.fold import PgSummaryWork
from pipeline.memory.store.work import PgMessageWork, pending_work
from pipeline.memory.summarising import SessionSummariser
from pipeline.outbox.relay import OutboxRelay
from pipeline.outbox.store import backlog
from pipeline.ports import ChangeSink, DeadLetterSink, Embedder, Extractor, GraphWriter
from pipeline.settings import Settings

log = logging.getLogger(__name__)


class StageResources(Protocol):
    """What the stages run on: one generation's settings and pool, and the clients they share
    (a worker's per-process runtime, or the replay's in-process set)."""

    @property
    def settings(self) -> Settings: ...

    @property
    def pool(self) -> ConnectionPool: ...

    @property
    def embedder(self) -> Embedder: ...

    @property
    def name_embedder(self) -> Embedder: ...

    @property
    def extractor(self) -> Extractor: ...

    @property
    def graph(self) -> GraphWriter: ...

    @property
    def changes(self) -> ChangeSink: ...

    @property
    def dead_letters(self) -> DeadLetterSink | None: ...

    @property
    def summariser(self) -> Summariser: ...

    @property
    def vector_source(self) -> ConnectionPool | None:
        """Another generation's database whose stored vectors may be reused (a replay's live
        generation; None for the workers: their own database is the only one)."""
        ...


@dataclass
class Outcome:
    """What one run of a stage did (its task's result) and which stages now have work."""

    stats: dict[str, Any]
    follow: tuple[str, ...] = ()


Roots = Sequence[uuid.UUID] | None
# rows (or queue entries) that have waited at least `older_than` seconds
Pending = Callable[[ConnectionPool, float], int]


@dataclass(frozen=True)
class Stage:
    """One background stage. `run(resources, roots, rounds, draining)`: `roots` narrows the work
    to some objects or sessions (None: any), `rounds` bounds it (None: the stage's own bound),
    `draining` says the caller runs every stage until nothing waits (a replay), so nothing waits
    for more work to gather first. Every run is idempotent: a stage claims only pending work and
    writes its results by compare-and-set."""

    name: str
    run: Callable[[StageResources, Roots, int | None, bool], Outcome]
    pending: Pending


def _bound(name: str, rounds: int | None) -> dict[str, int]:
    """The keyword that bounds a stage's run (its own default when `rounds` is None)."""
    return {} if rounds is None else {name: rounds}


def _embed(res: StageResources, roots: Roots, rounds: int | None, draining: bool) -> Outcome:
    service = EmbeddingService(res.settings, res.pool, res.embedder, res.dead_letters,
                               reuse=VectorReuse.of(res.embedder, res.vector_source))
    stats = service.run(roots, **_bound("max_batches", rounds))
    return Outcome(stats.__dict__, ("relay",) if stats.roots_completed or stats.failed else ())


def _extract(res: StageResources, roots: Roots, rounds: int | None, draining: bool) -> Outcome:
    stage = ExtractionStage(res.settings, res.pool, res.extractor,
                            dead_letters=res.dead_letters)
    stats = stage.run(roots, **_bound("max_batches", rounds))
    # curators' decisions first: the proposal pass then honours a refusal, and skips a merged
    # entity (pipeline/entities/decisions.py)
    decided = apply_pending(res.pool)
    config = ResolveConfig.from_settings(res.settings)
    names = res.name_embedder
    reuse = VectorReuse.of(names, res.vector_source)
    proposals: ProposalStats | None
    if draining:  # nothing else extracts meanwhile: examine what this run created
        proposals = propose_all(res.pool, config=config, names=names, reuse=reuse
                                ) if stats.entities_created else None
    else:
        # the pass waits while extraction has rows pending (30 s at most): the task that
        # drains the last of a burst examines the burst's entities
        proposals = propose_if_due(res.pool, config=config, names=names, reuse=reuse)
    proposals = proposals or ProposalStats()
    # the entity layer lives in Postgres alone: nothing follows (PPR's snapshots and the entity
    # reads see the committed rows)
    return Outcome({**stats.__dict__, "proposals": proposals.__dict__,
                    "decisions": decided.__dict__})


def _memory(res: StageResources, roots: Roots, rounds: int | None, draining: bool) -> Outcome:
    extracted = MessageExtraction(res.settings, PgMessageWork(res.pool), res.embedder,
                                  res.extractor, res.dead_letters,
                                  reuse=VectorReuse.of(res.embedder, res.vector_source)).run(
        roots, **_bound("max_batches", rounds))
    summarised = SessionSummariser(res.settings, PgSummaryWork(res.pool), res.summariser,
                                   res.embedder, res.dead_letters).run(
        roots, **_bound("max_rounds", rounds))
    return Outcome({"extracted": extracted.stored, "extract_failed": extracted.failed,
                    "reused": extracted.reused, **summarised.__dict__})


def _relay(res: StageResources, roots: Roots, rounds: int | None, draining: bool) -> Outcome:
    try:
        graph = res.graph
    except Unavailable as exc:  # rows stay pending; the sweep triggers the relay again
        log.warning("relay: %s", exc)
        return Outcome({"skipped": True, "error": str(exc)})
    relay = OutboxRelay(res.settings, res.pool, graph, res.changes, res.dead_letters)
    stats = relay.run(**_bound("max_rounds", rounds))
    return Outcome({k: v for k, v in stats.__dict__.items() if k != "errors"})


def _embed_pending(pool: ConnectionPool, older_than: float) -> int:
    return pending_count(pool, older_than=older_than)


def _extract_pending(pool: ConnectionPool, older_than: float) -> int:
    with pool.connection() as conn:
        return extraction.pending_count(conn, older_than=older_than)


def _memory_pending(pool: ConnectionPool, older_than: float) -> int:
    with pool.connection() as conn:
        return pending_work(conn, older_than=older_than)


def _outbox_pending(pool: ConnectionPool, older_than: float) -> int:
    return backlog(pool)  # a due outbox row is work at once: the relay retries on its own clock


# In the order a replay runs them: a document is embedded and its entities extracted before the
# relay projects it. The lexical index is no stage: each read host keeps its own replica
# (`pipeline/lexical/replica.py`), and a replay builds the new generation's on its own host.
STAGES: tuple[Stage, ...] = (
    Stage("embed", _embed, _embed_pending),
    Stage("extract", _extract, _extract_pending),
    Stage("memory", _memory, _memory_pending),
    Stage("relay", _relay, _outbox_pending),
)
BY_NAME: dict[str, Stage] = {stage.name: stage for stage in STAGES}


def pending(pool: ConnectionPool, *, older_than: float = 0.0) -> dict[str, int]:
    """Each stage's waiting work."""
    return {s.name: s.pending(pool, older_than) for s in STAGES}
