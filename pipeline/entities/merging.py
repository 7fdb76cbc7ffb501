"""Merging entities: the proposal pass over new entities, a person's merge, and the checks of a
person's decision on a possibly-same pair (applied by `pipeline/entities/decisions.py`).

The proposal pass looks each new entity up like a phrase (its name, its label, its name's
embedding when it has one: the pass writes it first, `pipeline/entities/name_vectors.py`) and,
per candidate, by `pipeline/entities/resolver.py: pair_decision`: merges the pair automatically
at the merge threshold (the entity with more mentions survives; the older one on a tie), holds
it as POSSIBLY_SAME (status held) above the possibly-same threshold, and never proposes a pair a
person refused. A batch of entities is read in a few statements and decided in turn
(`pipeline/entities/proposals.py`). Everything runs as plans
(`pipeline/postgres/plans.py`): `propose_for` and `propose_pending` on a synchronous
connection or pool (the worker), `merge_plan` and `check_pair` also on the API's async one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg_pool import ConnectionPool

from pipeline.domain.errors import EntityMerged, InvalidInput, NotFound
from pipeline.embedding.reuse import VectorReuse
from pipeline.entities.name_vectors import embed_claimed, embed_queued
from pipeline.entities.proposals import Proposal, propose_batch
from pipeline.entities.resolving import ResolveConfig
from pipeline.entities.store import merges, resolution as store, writes as entities_sql
from pipeline.entities.store.merges import MergeReport
from pipeline.ports import Embedder
from pipeline.postgres.plans import Plan, run


@contextmanager
def connection_of(conn_or_pool: psycopg.Connection[Any] | ConnectionPool
                  ) -> Iterator[psycopg.Connection[Any]]:
    """The connection itself, or one of the pool's for the block."""
    if isinstance(conn_or_pool, ConnectionPool):
        with conn_or_pool.connection() as conn:
            yield conn
    else:
        yield conn_or_pool


# Entities one round of the proposal pass examines (one transaction): large enough that a burst's
# entities are looked up together (one statement per round), small enough to commit in seconds.
PROPOSAL_BATCH = 200
# The pass waits while extraction has rows pending, at most this long for its oldest waiting
# entity: in a burst the mentions come first, and the pass then examines the burst's entities
# together (they share the extract worker).
PROPOSAL_MAX_DELAY = 30.0

@dataclass
class ProposalStats:
    """What `propose_all` did: entities examined, pairs merged, pairs held as possibly the same."""

    examined: int = 0
    merged: int = 0
    held: int = 0


def propose_for(conn_or_pool: psycopg.Connection[Any] | ConnectionPool, namespace: uuid.UUID,
                entity_ids: Sequence[uuid.UUID],
                config: ResolveConfig | None = None) -> list[Proposal]:
    """Run the proposal pass over `entity_ids` (entities of `namespace` the extraction stage
    just created), in one transaction; what it merged and held. Idempotent: a held
    pair is refreshed, a merged entity is no longer live and is skipped."""
    with connection_of(conn_or_pool) as conn:
        return run(conn, propose_batch([(namespace, entity_id) for entity_id in entity_ids],
                                       config or ResolveConfig()))


def propose_pending(conn_or_pool: psycopg.Connection[Any] | ConnectionPool, *, batch: int,
                    config: ResolveConfig | None = None) -> list[Proposal]:
    """The Celery-free runner: examine up to `batch` live entities not yet proposed (every
    namespace, oldest first) in one transaction, and mark them; a second runner meanwhile finds
    the pass locked and does nothing. Call it until it examines nothing (`propose_all`)."""
    return _propose_round(conn_or_pool, batch, config or ResolveConfig())[1]


def propose_all(pool: ConnectionPool, *, batch: int = PROPOSAL_BATCH, config: ResolveConfig,
                names: Embedder | None = None, max_rounds: int = 50,
                reuse: VectorReuse | None = None) -> ProposalStats:
    """Run the proposal pass until no unexamined entity is left (or `max_rounds` ran: the rest
    waits for the next call; the sweep makes one). What the worker runs after extraction. With
    `names` (the name embedder), the entities get their name vectors first
    (`pipeline/entities/name_vectors.py`; `reuse` says where stored name vectors may also
    come from: a replay's live generation)."""
    stats = ProposalStats()
    with pool.connection() as conn:
        # a namespace's first load: the lookups need statistics that say it is not selective
        entities_sql.analyze_stale(conn, ("entities", "entity_aliases"))
    for _ in range(max_rounds):
        if names is not None and embed_queued(pool, names, batch=batch, reuse=reuse) is None:
            names = None  # the embedder failed: this pass leaves the names to backfill
        examined, proposals = _propose_round(pool, batch, config, names, reuse)
        if not examined:
            break
        stats.examined += examined
        stats.merged += sum(p.applied and p.decision == "merge" for p in proposals)
        stats.held += sum(p.applied and p.decision == "possibly_same" for p in proposals)
    return stats


def proposals_due(conn: psycopg.Connection[Any], max_delay: float | None = None) -> bool:
    """Whether an entity waits for the proposal pass (one probe of its queue; no lock taken).
    The queue is filled as entities are created, so entities a killed worker created and never
    examined are still found. With `max_delay` (PROPOSAL_MAX_DELAY), the pass is not due
    while extraction has rows pending, until the oldest waiting entity has waited that long:
    the pass and extraction share the extract worker, and in a burst the mentions come first;
    the pass then examines the burst's entities together."""
    return run(conn, merges.any_unproposed(max_delay))


def propose_if_due(pool: ConnectionPool, *, batch: int = PROPOSAL_BATCH,
                   config: ResolveConfig, names: Embedder | None = None,
                   max_delay: float | None = PROPOSAL_MAX_DELAY,
                   reuse: VectorReuse | None = None) -> ProposalStats | None:
    """`propose_all` when an entity waits for the pass (`proposals_due`), else None without
    claiming (what the sweep's propose task and the extract task run: most ticks nothing
    changed, and the claim's pass lock would make another pass meanwhile find it taken and
    skip its entities until the next tick)."""
    with pool.connection() as conn:
        due = proposals_due(conn, max_delay)
    if not due:
        return None
    return propose_all(pool, batch=batch, config=config, names=names, reuse=reuse)


def _propose_round(conn_or_pool: psycopg.Connection[Any] | ConnectionPool, batch: int,
                   config: ResolveConfig, names: Embedder | None = None,
                   reuse: VectorReuse | None = None) -> tuple[int, list[Proposal]]:
    out: list[Proposal] = []
    with connection_of(conn_or_pool) as conn, conn.transaction():
        claimed = run(conn, merges.claim_unproposed(batch))
        if claimed and names is not None:  # created since the queue was embedded
            embed_claimed(conn, names, [entity_id for _, entity_id in claimed], reuse=reuse)
        if claimed:
            out = run(conn, propose_batch(claimed, config))
            run(conn, merges.mark_proposed([entity_id for _, entity_id in claimed]))
    return len(claimed), out


def merge_plan(namespace: uuid.UUID, from_id: uuid.UUID, into_id: uuid.UUID, *, dry_run: bool,
               decided_by: str, note: str | None = None) -> Plan[MergeReport]:
    """A person's merge of `from_id` into `into_id` (confidence 1: a person decided), or what it
    would change with `dry_run`."""
    return (yield from merges.merge(namespace, from_id, into_id, confidence=1.0,
                                    method="person", decided_by=decided_by, dry_run=dry_run,
                                    note=note))


def merge(conn: psycopg.Connection[Any], namespace: uuid.UUID, from_id: uuid.UUID,
          into_id: uuid.UUID, *, dry_run: bool, decided_by: str) -> MergeReport:
    """`merge_plan` on a synchronous connection (operators' scripts, the worker)."""
    return run(conn, merge_plan(namespace, from_id, into_id, dry_run=dry_run,
                                decided_by=decided_by))


@dataclass(frozen=True)
class PairDecision:
    """A person's decision on a pair, and the merge a verification made."""

    from_id: uuid.UUID
    to_id: uuid.UUID
    status: str  # verified | refused | deferred (or what a person had decided before)
    merge: MergeReport | None


def check_pair(namespace: uuid.UUID, from_id: uuid.UUID, to_id: uuid.UUID,
               decision: str) -> Plan[None]:
    """Refuse a pair decision before anything is written: a decision other than verify, refuse
    or defer, one entity twice, an entity not in the namespace, or one merged already."""
    if decision not in ("verify", "refuse", "defer"):
        raise InvalidInput("decision must be verify, refuse or defer", field="decision")
    if from_id == to_id:
        raise InvalidInput("a pair needs two entities", field="to")
    found = yield from store.entities(namespace, [from_id, to_id])
    for field, entity_id in (("from", from_id), ("to", to_id)):
        entity = found.get(entity_id)
        if entity is None:
            raise NotFound(f"no entity {entity_id} in this namespace", field=field)
        if entity.merged_into is not None:
            raise EntityMerged(f"entity {entity_id} was merged into {entity.merged_into}",
                               field=field)
