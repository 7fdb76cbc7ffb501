"""The second stage of a multi-hop search: the first stage's object list (hybrid) and the PPR
stage's object list fused by reciprocal rank with a small k, or the first stage's best objects
re-ranked by their PPR score (`rerank_stages`, `EngineConfig.ppr_rerank_depth`), and the
explain block.

Pure functions; the engine (`pipeline.retrieval.engine`) runs the stages and calls these.
A small k lets a passage ranked high by one stage alone climb: with k = 60, RRF is nearly flat
over the top ranks and PPR's bridging passage (absent from the first stage) stays below every
passage both stages found.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pipeline.domain.read_model import Hit, RowMeta
from pipeline.retrieval.fusion import Promoted, rrf
from pipeline.retrieval.ppr.stage import PprResult, SeedPlan

FIRST, PPR = "first_stage", "ppr"


@dataclass(frozen=True)
class StageRanks:
    """Per object: its rank in the first stage and in PPR (None: not there), fused score."""

    first: int | None
    ppr: int | None
    fused: float


def fuse_stages(first: Sequence[Promoted], ppr: PprResult, meta: Mapping[uuid.UUID, RowMeta],
                *, k: int, evidence_n: int, ppr_weight: float = 1.0
                ) -> tuple[list[Promoted], dict[uuid.UUID, StageRanks]]:
    """RRF over the two object lists with `k`, the PPR list's votes times `ppr_weight` (the
    first stage's 1); evidence from the first stage where it found the object, else the
    object's parts the PPR stage ranked (best first)."""
    fused = rrf({FIRST: [Hit(p.id, p.score) for p in first], PPR: ppr.objects}, k=k,
                weights={PPR: ppr_weight})
    by_id = {p.id: p for p in first}
    ppr_parts: dict[uuid.UUID, list[tuple[uuid.UUID, float]]] = {}
    for part in ppr.parts:
        row = meta.get(part.id)
        if row is not None and row.parent_id is not None:
            ppr_parts.setdefault(row.parent_id, []).append((part.id, part.score))
    out: list[Promoted] = []
    ranks: dict[uuid.UUID, StageRanks] = {}
    for f in fused:
        known = by_id.get(f.id)
        evidence = known.evidence if known is not None and known.evidence else tuple(
            ppr_parts.get(f.id, [])[: max(0, evidence_n)])
        out.append(Promoted(f.id, f.score, evidence))
        ranks[f.id] = StageRanks(f.ranks.get(FIRST), f.ranks.get(PPR), f.score)
    return out, ranks


def rerank_stages(first: Sequence[Promoted], ppr: PprResult, *, depth: int
                  ) -> tuple[list[Promoted], dict[uuid.UUID, StageRanks]]:
    """The first stage's best `depth` objects ordered by their PPR mass (the sum over their
    rows; ties and objects the walk never reached keep the first stage's order), then the rest
    of the first stage: PPR as a re-ranker, adding no object the first stage did not find.
    An object's fused score is 1 / its new rank; its PPR rank is its rank by mass."""
    by_mass = sorted(ppr.objects, key=lambda h: (-ppr.mass.get(h.id, 0.0), str(h.id)))
    ppr_rank = {h.id: rank for rank, h in enumerate(by_mass, start=1)}
    head = sorted(enumerate(first[: max(0, depth)], start=1),
                  key=lambda item: (-ppr.mass.get(item[1].id, 0.0), item[0]))
    order = [*(p for _, p in head), *first[max(0, depth):]]
    out = [Promoted(p.id, 1.0 / rank, p.evidence) for rank, p in enumerate(order, start=1)]
    first_rank = {p.id: rank for rank, p in enumerate(first, start=1)}
    return out, {p.id: StageRanks(first_rank[p.id], ppr_rank.get(p.id), p.score) for p in out}


def plan_explain(plan: SeedPlan | None) -> dict[str, object]:
    """The seeds part of an explain block."""
    if plan is None:
        return {"seeds": [], "hubs_dropped": [], "hub_limit": None}
    return {"seeds": [{"entity_id": str(s.entity.id), "name": s.entity.name, "text": s.text,
                       "method": s.method, "weight": s.weight, "strong": s.strong,
                       "rows": s.entity.part_count}
                      for s in plan.seeds],
            "hubs_dropped": [{"entity_id": str(h.id), "name": h.name, "rows": h.part_count}
                             for h in plan.hubs],
            "hub_limit": plan.hub_limit}


def ppr_explain(result: PprResult | None, *, max_hubs: int) -> dict[str, object]:
    """The subgraph part of an explain block (hubs met while walking, at most `max_hubs`)."""
    if result is None:
        return {"subgraph": None, "iterations": 0, "stopped": None, "truncated": False}
    return {"subgraph": {"nodes": result.nodes, "edges": result.edges,
                         "entities": result.entities, "rows": result.rows,
                         "hops": result.hops},
            "iterations": result.iterations, "stopped": result.stopped or None,
            "truncated": result.truncated,
            "walk_source": result.source,
            "snapshot_age": (None if result.snapshot_age is None
                             else round(result.snapshot_age, 3)),
            "hubs_met": len(result.hubs),
            "hubs_met_sample": [{"entity_id": str(h.id), "rows": h.part_count}
                                for h in result.hubs[:max_hubs]]}


def hits_explain(object_ids: Sequence[uuid.UUID], ranks: Mapping[uuid.UUID, StageRanks]
                 ) -> list[dict[str, object]]:
    """Per returned object: first-stage rank, PPR rank and fused score."""
    out: list[dict[str, object]] = []
    for object_id in object_ids:
        r = ranks.get(object_id)
        out.append({"id": str(object_id), "first_stage_rank": r.first if r else None,
                    "ppr_rank": r.ppr if r else None, "fused_score": r.fused if r else None})
    return out
