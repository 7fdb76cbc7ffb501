"""Entity routes: resolve phrases to entities (`/v1/resolve`), read one entity, and the
curators' writes: merge two entities, verify or refuse a possibly-same pair.

Merges are a person's decision on derived data: they need a key with the `admin` scope on the
namespace (its name is recorded as `decided_by`, and the event's source is `api:<name>`). The
content cannot re-derive them, so each is published as a `brainstream.entity.decision` event
(the topic is the record a replay rebuilds from) and applied at once in the same request
(`pipeline/entities/decisions.py`); the graph hears of it through the outbox like every other
change.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from dataclasses import replace

from fastapi import APIRouter, Request

from api.access import AdminNs, Caller, ReadNs
from api.dependencies import Svc
from api.entity_neighbour_schemas import LabelCount, NeighbourOut
from api.errors import ERRORS
from api.grounding_schemas import TextEntityOut
from api.resolution_schemas import (
    AliasOut,
    AnswerOut,
    DecisionBody,
    DecisionOut,
    EntityOut,
    MergeBody,
    MergeOut,
    ResolveBody,
    ResolveOut,
)
from pipeline.access import ApiKey
from pipeline.domain.errors import (
    EntityMerged,
    InvalidInput,
    NotFound,
    Unavailable,
)
from pipeline.entities.decision_events import decision_envelope
from pipeline.entities.decisions import FAILED, WAITING, Applied, record_and_apply
from pipeline.entities.merging import PairDecision, check_pair, merge_plan
from pipeline.entities.resolving import ResolveConfig, resolve
from pipeline.entities.store import merges, pages, resolution as store
from pipeline.kafka.publish_pool import PublishPool
from pipeline.kafka.publisher import LazyPublisher
from pipeline.postgres.plans import arun
from pipeline.postgres.pool import read_connection
from pipeline.retrieval import grounding
from pipeline.wiring.services import Services, query_embedder

router = APIRouter(tags=["entities"], responses=ERRORS)

EMBED_TIMEOUT = 5.0  # seconds: past it, the embedding layer is skipped, the answer still comes
MAX_ALIASES = 100  # aliases shown by GET /v1/entities/{id}
MAX_NEIGHBOURS = 10  # neighbours shown by GET /v1/entities/{id}, the strongest edges first


# The most phrases one /v1/resolve request may name: each is a lookup of a few statements.
RESOLVE_MAX_QUERIES = 20


async def _ground_text(text: str, labels: Sequence[str] | None, ns: uuid.UUID, svc: Services
                       ) -> ResolveOut:
    """Every entity the passage names (`pipeline/retrieval/grounding.py`)."""
    if svc.engine.ppr is None:
        raise InvalidInput("this server has no entity matcher (no PPR stage)", field="text")
    entries = grounding.grounded(await svc.engine.ppr.ground(ns, text))
    async with read_connection(svc.pool) as conn:
        names = await arun(conn, grounding.labels_of(ns, [e.entity.id for e in entries]))
    kept = grounding.labelled(entries, names, set(labels) if labels else None)
    return ResolveOut(results=[], entities=[TextEntityOut.of(e) for e in kept])


@router.post("/v1/resolve", response_model=ResolveOut, response_model_exclude_none=True)
async def resolve_phrases(body: ResolveBody, ns: ReadNs, svc: Svc) -> ResolveOut:
    """Resolve phrases to entities of the namespace: per phrase the entity, its confidence, the
    layer that decided and the candidates, or `unresolved` with a reason. With `text` (a
    passage, at most 20,000 characters) instead: `entities`, every entity the passage names
    with the spans naming it and the layer that matched each."""
    settings = svc.settings
    if sum(x is not None for x in (body.query, body.queries, body.text)) != 1:
        raise InvalidInput("send exactly one of `query`, `queries` and `text`",
                           field="text" if body.text is not None else "query")
    if body.text is not None:
        return await _ground_text(body.text, body.labels, ns, svc)
    phrases = [body.query] if body.query is not None else list(body.queries or [])
    if len(phrases) > RESOLVE_MAX_QUERIES:
        raise InvalidInput(f"at most {RESOLVE_MAX_QUERIES} queries", field="queries")
    config = ResolveConfig.from_settings(settings)
    if body.limit is not None:
        config = replace(config, resolver=replace(config.resolver, candidates=body.limit))
    embed = query_embedder(lambda: svc.name_embedder)
    # every phrase embedded before a connection is taken: none is held while the embedder
    # thinks (or times out)
    vectors: list[tuple[Sequence[float] | None, list[str]]] = []
    for phrase in phrases:
        try:
            vectors.append((await asyncio.wait_for(embed(phrase), EMBED_TIMEOUT), []))
        except (Unavailable, TimeoutError):
            vectors.append((None, ["embedding: the query embedder is unavailable"]))
    answers = []
    async with read_connection(svc.pool) as conn:
        for phrase, (vector, skipped) in zip(phrases, vectors, strict=True):
            answers.append(await arun(conn, resolve(ns, phrase, config, vector=vector,
                                                    labels=body.labels, skipped=skipped)))
    return ResolveOut(results=[AnswerOut.of(a) for a in answers])


@router.get("/v1/entities/{entity_id}", response_model=EntityOut,
            response_model_exclude_none=True)
async def read_entity(entity_id: uuid.UUID, ns: ReadNs, svc: Svc) -> EntityOut:
    """One entity with its aliases and counts, the labels its mentions carry, how many
    mentions and objects name it, and its strongest neighbours; a merged one answers with its
    survivor."""
    async with read_connection(svc.pool) as conn:
        found = await arun(conn, pages.survivor(ns, entity_id))
        if found is None:
            raise NotFound(f"no entity {entity_id} in this namespace", field="entity_id")
        aliases, counts = await arun(conn, store.details(ns, found.id, MAX_ALIASES))
        seen = await arun(conn, pages.profile(ns, found.id))
        near = await arun(conn, pages.neighbours(ns, found.id, MAX_NEIGHBOURS))
    merged = found.id != entity_id
    return EntityOut(id=found.id, name=found.name, label=found.label,
                     part_count=found.part_count, created_at=found.created_at,
                     updated_at=found.updated_at,
                     aliases=[AliasOut(alias=a, source=s) for a, s in aliases],
                     counts={"mentions": counts.mentions, "aliases": counts.aliases,
                             "edges": counts.edges},
                     merged_from=entity_id if merged else None,
                     note=f"entity {entity_id} was merged into {found.id}" if merged else None,
                     labels=[LabelCount(label=lb, count=n) for lb, n in seen.labels],
                     mention_count=seen.mention_count, object_count=seen.object_count,
                     neighbours=[NeighbourOut.of(n) for n in near])


@router.post("/v1/entities/merge", response_model=MergeOut, response_model_by_alias=True)
async def merge_entities(body: MergeBody, ns: AdminNs, who: Caller, svc: Svc,
                         request: Request) -> MergeOut:
    """Merge entity `from` into `into` (a curator's decision, published as an event so a replay
    keeps it), or with `dry_run` say what would move."""
    async with read_connection(svc.pool) as conn:
        report = await arun(conn, merge_plan(ns, body.from_, body.into, dry_run=True,
                                             decided_by=who.name))
    if body.dry_run:
        return MergeOut.of(report)
    done = await _decide(request, svc, ns, "merge", body.from_, body.into, who)
    if done.merge is None:  # merged meanwhile by someone else: nothing left to merge
        raise EntityMerged(f"entity {body.from_} and {body.into} are one already",
                           field="from")
    return MergeOut.of(done.merge)


@router.post("/v1/entities/possibly_same/{from_id}/{to_id}", response_model=DecisionOut,
             response_model_by_alias=True)
async def decide_pair(from_id: uuid.UUID, to_id: uuid.UUID, body: DecisionBody, ns: AdminNs,
                      who: Caller, svc: Svc, request: Request) -> DecisionOut:
    """Verify (merge `from` into `to`), refuse (never proposed again) or defer (undecided
    still, listed apart from the held pairs) a possibly-same pair; published as an event,
    like a merge."""
    async with read_connection(svc.pool) as conn:
        await arun(conn, check_pair(ns, from_id, to_id, body.decision))
    done = await _decide(request, svc, ns, body.decision, from_id, to_id, who)
    status = "verified" if body.decision == "verify" else "refused"
    if body.decision == "defer":  # deferred, or what a person had decided before
        async with read_connection(svc.pool) as conn:
            now = await arun(conn, merges.pair_status(ns, from_id, to_id))
        status = now or "deferred"
    return DecisionOut.of(PairDecision(from_id, to_id, status, done.merge))


async def _decide(request: Request, svc: Services, ns: uuid.UUID, decision: str,
                  from_id: uuid.UUID, to_id: uuid.UUID, who: ApiKey) -> Applied:
    """Publish the decision (the topic is its record: a replay applies it again), then record
    and apply it at once; the consumer later finds it recorded. A broker that does not take it
    is a 503 and nothing changed. No connection is held while the broker is waited on (what
    changed meanwhile is caught by the apply: WAITING, FAILED). Its source is the key's
    (`api:<name>`); the id is fresh, so the ledger's (source, id) stays unique."""
    event_id = str(uuid.uuid4())
    publisher: LazyPublisher = request.app.state.decision_publisher
    threads: PublishPool = request.app.state.publish_threads
    await threads.run(publisher.publish, decision_envelope(
        ns, event_id, decision, from_id, to_id, who.name, None, source=who.source))
    async with read_connection(svc.pool) as conn:
        done = await arun(conn, record_and_apply(ns, who.source, event_id, decision, from_id,
                                                 to_id, who.name, None))
    if done.status == WAITING:  # checked a moment ago: it vanished meanwhile
        raise NotFound(f"entity {from_id} or {to_id} is gone", field="from")
    if done.status == FAILED:
        raise EntityMerged(f"entity {from_id} and {to_id} are one already", field="from")
    await svc.reads.record_write(ns)  # applied at once: the curator's next reads see it
    return done
