"""Memory search: hybrid retrieval over a session's (or a user's sessions') messages and
summaries.

Channels: BM25 and cosine over messages, and over summaries (`search_scope` picks which kinds),
each `candidates` deep, fused by weighted reciprocal rank fusion (`pipeline/retrieval/fusion.py:
rrf`; memory's own `rrf_k`, the dense channels weighted `dense_weight` against lexical's 1:
docs/memory.md says why and on what figures). A hit's `score` is its fused score
over the best possible one (first in every channel searched): in (0, 1], so `min_score` means
the same whatever the channels. Optional MMR (`mmr_lambda`) re-ranks
the fused candidates for variety; `context: N` adds each message hit's N turns either side.
When the query embedder is down the answer is lexical only and says so (`degraded`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np

from pipeline.domain.conditions import MEMORY, parse_conditions
from pipeline.domain.errors import InvalidInput, Unavailable
from pipeline.domain.memory_values import MESSAGE, SUMMARY, MemoryRow, MemoryScope
from pipeline.domain.read_model import Hit
from pipeline.memory.mmr import mmr
from pipeline.memory.ports import MemorySearcher
from pipeline.memory.recall_rules import (
    RecallRules,
    RulePlan,
    echo_channel,
    entity_channel,
    plan_rules,
    rule_channels,
)
from pipeline.ports import QueryEmbedder
from pipeline.retrieval.fusion import rrf

SCOPES = {"messages": (MESSAGE,), "summary": (SUMMARY,), "both": (MESSAGE, SUMMARY)}
CHANNELS = ("lexical", "dense")


@dataclass(frozen=True)
class MemoryQuery:
    """One search request, checked by `MemorySearch.search`."""

    text: str
    limit: int = 10
    search_scope: str = "messages"
    where: object | None = None
    since: datetime | None = None
    until: datetime | None = None
    min_score: float = 0.0
    mmr_lambda: float | None = None
    context: int = 0
    channels: tuple[str, ...] = CHANNELS  # lexical and/or dense (the benchmark compares them)


@dataclass(frozen=True)
class MemoryHit:
    """One result: the row, its score in (0, 1], the session it is in, its neighbours."""

    row: MemoryRow
    session_id: str
    score: float
    context: list[MemoryRow] = field(default_factory=list)


@dataclass(frozen=True)
class MemoryAnswer:
    hits: list[MemoryHit]
    degraded: str | None = None


@dataclass(frozen=True)
class MemorySearchLimits:
    """Bounds of a request and the fusion's constants (docs/memory.md has the table behind them:
    candidates per channel, RRF's k, and the dense channels' weight against lexical's 1)."""

    max_limit: int = 100
    max_context: int = 10
    max_conditions: int = 20
    rrf_k: int = 10
    dense_weight: float = 0.5
    candidates: int = 40  # per channel; at least the hits asked for
    # the speaker, time and entity channels (None: off)
    rules: RecallRules | None = field(default_factory=RecallRules)



class MemorySearch:
    """Hybrid search over memory; scoped to one namespace, and to sessions resolved in it."""

    def __init__(self, searcher: MemorySearcher, embed_query: QueryEmbedder,
                 limits: MemorySearchLimits) -> None:
        self.searcher = searcher
        self.embed_query = embed_query
        self.limits = limits

    async def search(self, namespace: uuid.UUID, sessions: dict[uuid.UUID, str],
                     query: MemoryQuery) -> MemoryAnswer:
        """Search `sessions` (row id -> session_id, already resolved under `namespace`)."""
        self._check(query)
        scope = MemoryScope(tuple(sessions), where=parse_conditions(
            query.where, max_leaves=self.limits.max_conditions, grammar=MEMORY)
            if query.where is not None else None, since=query.since, until=query.until)
        k = max(self.limits.candidates, query.limit)
        degraded: str | None = None
        vector: Sequence[float] | None = None
        rules = self.limits.rules if MESSAGE in SCOPES[query.search_scope] else None
        plan = await plan_rules(self.searcher, rules, namespace, tuple(sessions),
                                 query.text) if rules is not None else None
        if "dense" in query.channels:
            try:
                vector = await self.embed_query(plan.text if plan else query.text)
            except Unavailable:
                degraded = "lexical_only"
        # the query is embedded first: no connection waits on the embedder
        async with self.searcher.one_connection():
            return await self._search(namespace, sessions, query, scope, k, vector, degraded,
                                      plan)

    async def _search(self, namespace: uuid.UUID, sessions: dict[uuid.UUID, str],
                      query: MemoryQuery, scope: MemoryScope, k: int,
                      vector: Sequence[float] | None, degraded: str | None,
                      plan: RulePlan | None) -> MemoryAnswer:
        # the channels run one after another on the one connection
        channels: dict[str, list[Hit]] = {}
        for kind in SCOPES[query.search_scope]:
            if "lexical" in query.channels:
                channels[f"{kind}_lexical"] = await self.searcher.lexical(
                    namespace, kind, scope, plan.text if plan and kind == MESSAGE
                    else query.text, k)
            if vector is not None:
                channels[f"{kind}_dense"] = await self.searcher.dense(namespace, kind, scope,
                                                                      vector, k)
        extra = await self._rule_channels(namespace, query, scope, k, vector, plan)
        channels.update({name: hits for name, (hits, _) in extra.items()})
        kinds = {hit.id: name.split("_")[0] for name, hits in channels.items() for hit in hits}
        weights = self._weights(channels) | {name: w for name, (_, w) in extra.items()}
        fused = rrf(channels, k=self.limits.rrf_k, weights=weights)
        # the second fusion follows a speaker or time rule: a query neither concerns gets the
        # plain hybrid answer (the documented fusion of the two channels)
        if plan is not None and (plan.speakers or plan.when) and set(query.channels) == {
                "lexical", "dense"}:
            assert self.limits.rules is not None
            joined = await entity_channel(self.searcher, self.limits.rules, namespace, scope,
                                          fused, kinds, k)
            joined |= await echo_channel(self.searcher, self.limits.rules, plan, namespace,
                                         scope, fused, kinds, vector, k)
            if joined:
                channels.update({name: hits for name, (hits, _) in joined.items()})
                weights |= {name: w for name, (_, w) in joined.items()}
                kinds |= {hit.id: MESSAGE for hits, _ in joined.values() for hit in hits}
                fused = rrf(channels, k=self.limits.rrf_k, weights=weights)
        best = sum(weights.values()) / (self.limits.rrf_k + 1) if channels else 1.0
        fused = [f for f in fused if f.score / best >= query.min_score]
        rows = await self._rows(namespace, kinds, [f.id for f in fused])
        ranked = [(rows[f.id], f.score / best) for f in fused if f.id in rows]
        if query.mmr_lambda is not None:
            ranked = mmr(ranked, [s for _, s in ranked], [_unit(r.vector) for r, _ in ranked],
                         lam=query.mmr_lambda, k=query.limit)
        hits = []
        for row, score in ranked[:query.limit]:
            context = []
            if query.context and row.kind == MESSAGE:
                context = await self.searcher.neighbours(namespace, row.session_pk, row.seq,
                                                         query.context)
            hits.append(MemoryHit(row, sessions[row.session_pk], round(score, 6), context))
        return MemoryAnswer(hits, degraded)

    async def _rule_channels(self, namespace: uuid.UUID, query: MemoryQuery, scope: MemoryScope,
                             k: int, vector: Sequence[float] | None, plan: RulePlan | None
                             ) -> dict[str, tuple[list[Hit], float]]:
        """The speaker and time channels (`recall_rules.py`), over the channels asked for."""
        if plan is None:
            return {}
        assert self.limits.rules is not None
        extra = await rule_channels(self.searcher, self.limits.rules, plan, namespace, scope, k,
                                    vector, self.limits.dense_weight)
        return {name: value for name, value in extra.items()
                if ("lexical" if "_lexical_" in name else "dense") in query.channels}

    def _weights(self, channels: dict[str, list[Hit]]) -> dict[str, float]:
        """Dense channels weigh `dense_weight` beside lexical ones; without a lexical channel
        (a request for dense only) they weigh 1, as lexical ones always do."""
        mixed = any(n.endswith("_lexical") for n in channels) and any(
            n.endswith("_dense") for n in channels)
        return {n: self.limits.dense_weight if mixed and n.endswith("_dense") else 1.0
                for n in channels}

    async def _rows(self, namespace: uuid.UUID, kinds: dict[uuid.UUID, str],
                    ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, MemoryRow]:
        out: dict[uuid.UUID, MemoryRow] = {}
        for kind in (MESSAGE, SUMMARY):
            wanted = [i for i in ids if kinds.get(i) == kind]
            out.update(await self.searcher.rows(namespace, kind, wanted))
        return out

    def _check(self, query: MemoryQuery) -> None:
        limits = self.limits
        if not query.text.strip():
            raise InvalidInput("the query is empty", field="query")
        if not 1 <= query.limit <= limits.max_limit:
            raise InvalidInput(f"limit is 1 to {limits.max_limit}", field="limit")
        if query.search_scope not in SCOPES:
            raise InvalidInput("search_scope is messages, summary or both",
                               field="search_scope")
        if not 0 <= query.context <= limits.max_context:
            raise InvalidInput(f"context is 0 to {limits.max_context} turns", field="context")
        if not 0.0 <= query.min_score <= 1.0:
            raise InvalidInput("min_score is within [0, 1]", field="min_score")
        if query.mmr_lambda is not None and not 0.0 <= query.mmr_lambda <= 1.0:
            raise InvalidInput("mmr_lambda is within [0, 1]", field="mmr_lambda")
        if query.since and query.until and query.since >= query.until:
            raise InvalidInput("since must be before until", field="since")
        if not query.channels or set(query.channels) - set(CHANNELS):
            raise InvalidInput("channels are lexical and/or dense", field="channels")


def _unit(vector: Any) -> Any:
    if vector is None:
        return None
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    return array / norm if norm > 0 else None
