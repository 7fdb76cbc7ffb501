"""The resolver's proposal pass over a batch of new entities, as one plan: the batch's rows,
lookups and nearest names are read in a few statements for all of it
(`pipeline/entities/store/resolution_batch.py`), then each entity is decided in turn exactly as
alone (`pipeline/entities/merging.py` documents the policy).

Deciding in turn over reads made up front stays exact because only a merge changes what a
later entity of the batch would have read: a merge of F into I retires F and gives I F's
names, aliases, edges and mentions. A later entity whose lookup did not find F or I (and was not
cut by its limit) finds neither afterwards, so its rows hold; the others are read again after
the merge. Held pairs are written together, before each merge (a merge re-keys F's held pairs)
and at the end; a pair's status is re-read once a merge touched one of its ends.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from pipeline.entities.resolver import MERGE, POSSIBLY_SAME, Candidate, pair_decision, rank
from pipeline.entities.resolving import ResolveConfig, lookup
from pipeline.entities.store import merges, resolution_batch as batch
from pipeline.entities.store.merges import Hold, ordered
from pipeline.entities.store.resolution_batch import Looked, PassEntity
from pipeline.postgres.plans import Plan

RESOLVER = "resolver"  # `decided_by` of the automatic merges

Pair = tuple[uuid.UUID, uuid.UUID]


@dataclass(frozen=True)
class Proposal:
    """What the pass did with one pair: `merge` (`merged_into` the survivor) or
    `possibly_same` (`applied` False when a person had already decided the pair)."""

    entity_id: uuid.UUID
    other_id: uuid.UUID
    decision: str
    confidence: float
    method: str
    applied: bool
    merged_into: uuid.UUID | None = None


class _Batch:
    """The pass's reads for the batch, and what its merges made stale."""

    def __init__(self, config: ResolveConfig) -> None:
        self.config = config
        self.entities: dict[uuid.UUID, PassEntity] = {}
        self.looked: dict[uuid.UUID, Looked] = {}
        self.ranked: dict[uuid.UUID, list[Candidate]] = {}
        self.statuses: dict[Pair, str | None] = {}
        self.holds: list[tuple[Hold, int]] = []  # with the index of their proposal in `out`
        self.out: list[Proposal] = []

    def read(self, entities: Sequence[PassEntity]) -> Plan[None]:
        """Look `entities` up, and read the status of every pair the pass may propose."""
        live = [e for e in entities if e.merged_into is None]
        self.entities.update((e.id, e) for e in entities)
        self.looked.update((yield from batch.look_up(
            live, [lookup(e.name) for e in live], limit=self.config.pool,
            k=self.config.resolver.candidates)))
        wanted: dict[Pair, uuid.UUID] = {}
        for e in live:
            self.ranked[e.id] = self._proposable(e)
            for c in self.ranked[e.id]:
                wanted.setdefault(ordered(e.id, c.entity_id), e.namespace_id)
        wanted = {p: ns for p, ns in wanted.items() if p not in self.statuses}
        found = yield from batch.pair_statuses(wanted)
        self.statuses.update({p: found.get(p) for p in wanted})

    def _proposable(self, entity: PassEntity) -> list[Candidate]:
        """The candidates the pass may act on, best first: at most the configured number, all
        at or above the possibly-same threshold (ranked best first: the rest are below it)."""
        out: list[Candidate] = []
        resolver = self.config.resolver
        for c in rank(entity.name, self.looked[entity.id].rows, label=entity.label,
                      exclude=entity.id, floor=resolver.possibly_same_threshold):
            if c.confidence < resolver.possibly_same_threshold:
                break
            out.append(c)
        return out

    def status(self, namespace: uuid.UUID, a: uuid.UUID, b: uuid.UUID) -> Plan[str | None]:
        """A pair's status: as read with the batch, or read again after a merge touched it."""
        pair = ordered(a, b)
        if pair not in self.statuses:
            self.statuses[pair] = yield from merges.pair_status(namespace, a, b)
        return self.statuses[pair]

    def flush_holds(self) -> Plan[None]:
        """Write the held pairs so far; each proposal learns whether its hold applied."""
        if not self.holds:
            return
        applied = yield from merges.hold_many([h for h, _ in self.holds])
        for h, index in self.holds:
            p = self.out[index]
            self.out[index] = Proposal(p.entity_id, p.other_id, p.decision, p.confidence,
                                       p.method, ordered(h.a, h.b) in applied)
        self.holds = []

    def after_merge(self, namespace: uuid.UUID, from_id: uuid.UUID, into_id: uuid.UUID,
                    rest: Sequence[uuid.UUID]) -> Plan[None]:
        """Forget what the merge changed: the statuses of pairs with either end, and the reads
        of the entities still to examine whose lookup found either (or was cut by its limit,
        in the namespace), which are read again."""
        both = {from_id, into_id}
        self.statuses = {p: s for p, s in self.statuses.items() if not both & set(p)}
        stale = [eid for eid in rest if eid in both or (
            eid in self.looked and (
                any(r.entity_id in both for r in self.looked[eid].rows)
                or (self.looked[eid].truncated
                    and self.entities[eid].namespace_id == namespace)))]
        if not stale:
            return
        fresh = yield from batch.records(stale)
        for eid in stale:
            self.looked.pop(eid, None)
            self.ranked.pop(eid, None)
        yield from self.read(list(fresh.values()))


def propose_batch(claimed: Sequence[tuple[uuid.UUID, uuid.UUID]],
                  config: ResolveConfig) -> Plan[list[Proposal]]:
    """The proposal pass over `claimed` ((namespace, entity id), examined in this order): what
    it merged and held."""
    state = _Batch(config)
    yield from batch.settings(config.trigram_threshold, config.resolver.candidates)
    found = yield from batch.records([eid for _, eid in claimed])
    order = [eid for ns, eid in claimed if eid in found and found[eid].namespace_id == ns]
    yield from state.read([found[eid] for eid in order])
    for position, entity_id in enumerate(order):
        entity = state.entities[entity_id]
        if entity.merged_into is not None:
            continue  # merged meanwhile: the survivor keeps its own proposals
        yield from _propose_one(state, entity, order[position + 1:])
    yield from state.flush_holds()
    return state.out


def _propose_one(state: _Batch, entity: PassEntity, rest: Sequence[uuid.UUID]) -> Plan[None]:
    """One entity's proposals, in rank order (the pass's policy: `merging.py`)."""
    made = 0
    for candidate in state.ranked.get(entity.id, []):
        if made == state.config.resolver.candidates:
            break
        decision = pair_decision(candidate, state.config.resolver)
        if decision not in (MERGE, POSSIBLY_SAME):
            continue  # a homonym or a different number: shown by a resolve, never proposed
        other = candidate.entity_id
        if (yield from state.status(entity.namespace_id, entity.id, other)) == "refused":
            continue  # a person said no: never proposed again, never merged
        made += 1
        if decision == MERGE:
            # the better-known entity survives; on a tie the existing one
            into, from_ = ((entity.id, other) if entity.part_count > candidate.part_count
                           else (other, entity.id))
            yield from state.flush_holds()
            yield from merges.merge(entity.namespace_id, from_, into,
                                    confidence=candidate.confidence, method=candidate.method,
                                    decided_by=RESOLVER, dry_run=False)
            state.out.append(Proposal(entity.id, other, MERGE, candidate.confidence,
                                      candidate.method, True, into))
            yield from state.after_merge(entity.namespace_id, from_, into, rest)
            if from_ == entity.id:
                break  # this entity is gone; the survivor keeps its own proposals
            continue
        state.holds.append((Hold(entity.namespace_id, entity.id, other, candidate.confidence,
                                 candidate.method), len(state.out)))
        state.out.append(Proposal(entity.id, other, POSSIBLY_SAME, candidate.confidence,
                                  candidate.method, False))
