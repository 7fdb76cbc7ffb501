"""Ranking math of the read side: reciprocal rank fusion over objects (each channel's part hits
promoted to their parent first), temporal decay, evidence. Pure functions, deterministic (ties
break by id)."""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pipeline.domain.read_model import Hit, RowMeta


@dataclass(frozen=True)
class Fused:
    """A row after fusion: its RRF score and its rank in each channel that found it."""

    id: uuid.UUID
    score: float
    ranks: Mapping[str, int] = field(default_factory=dict)


def rrf(channels: Mapping[str, Sequence[Hit]], *, k: int = 60,
        weights: Mapping[str, float] | None = None) -> list[Fused]:
    """Reciprocal rank fusion: score(d) = sum over channels of w / (k + rank(d)), rank from 1.

    Depends only on each channel's order, never on its raw scores, so channels with
    incomparable scales (BM25, similarity, cosine) fuse fairly. A duplicate id within one
    channel counts once, at its best rank.
    """
    if k < 0:
        raise ValueError("k must be >= 0")
    # per id: [its score so far, its rank in each channel that found it] (one lookup a hit)
    found: dict[uuid.UUID, tuple[list[float], dict[str, int]]] = {}
    for name in sorted(channels):
        weight = 1.0 if weights is None else weights.get(name, 1.0)
        for rank, hit in enumerate(channels[name], start=1):
            entry = found.get(hit.id)
            if entry is None:
                found[hit.id] = ([weight / (k + rank)], {name: rank})
            elif name not in entry[1]:  # a duplicate within a channel counts at its best
                entry[0][0] += weight / (k + rank)
                entry[1][name] = rank
    fused = [Fused(i, score[0], ranks) for i, (score, ranks) in found.items()]
    fused.sort(key=lambda f: (-f.score, f.id))  # a UUID orders as its text
    return fused


def decay_factor(updated_at: datetime, now: datetime, lam: float) -> float:
    """exp(-lam * age in days); 1.0 when lam is 0 or the timestamp is in the future."""
    if lam <= 0:
        return 1.0
    age_days = max(0.0, (now - updated_at).total_seconds() / 86400.0)
    return math.exp(-lam * age_days)


@dataclass(frozen=True)
class Promoted:
    """A first-class object with the part hits that promoted it (best first)."""

    id: uuid.UUID
    score: float
    evidence: tuple[tuple[uuid.UUID, float], ...]  # (part id, fused score)


def promote(fused: Sequence[Fused], meta: Mapping[uuid.UUID, RowMeta], *,
            evidence_n: int = 3) -> list[Promoted]:
    """Group rows under their promoted object (a part's parent, or the row itself); the object
    scores its best row's score. Rows without metadata (gone since the channels ran) are
    dropped."""
    groups: dict[uuid.UUID, list[Fused]] = {}
    for item in fused:
        row = meta.get(item.id)
        if row is None:
            continue
        groups.setdefault(row.parent_id or row.id, []).append(item)
    out: list[Promoted] = []
    for object_id, rows in groups.items():
        rows.sort(key=lambda f: (-f.score, f.id))
        evidence = tuple((r.id, r.score) for r in rows if meta[r.id].parent_id is not None)
        out.append(Promoted(object_id, rows[0].score, evidence[:max(0, evidence_n)]))
    out.sort(key=lambda p: (-p.score, p.id))
    return out


def fuse_and_promote(channels: Mapping[str, Sequence[Hit]], meta: Mapping[uuid.UUID, RowMeta],
                     *, k: int = 60, evidence_n: int = 3,
                     weights: Mapping[str, float] | None = None) -> list[Promoted]:
    """Reciprocal rank fusion over objects: each channel's rows are promoted to their objects
    first (an object takes the rank of its best row in that channel, so one long document
    votes once per channel however many of its parts matched), then the objects' ranks are
    fused (each channel's vote times its weight in `weights`, 1 when absent). Evidence: the
    object's parts ordered by their own fused score over the channels.

    Fusing rows and then summing or pooling per object distorts both ways: a sum rewards
    length, and with RRF's flat scores (k = 60) even a small share of the other parts
    reorders documents; fusing at the object level is the ranking each channel actually
    expresses about documents.
    """
    object_channels = {
        name: [Hit(row.parent_id or row.id, hit.score) for hit in hits
               if (row := meta.get(hit.id)) is not None]
        for name, hits in channels.items()}
    objects = rrf(object_channels, k=k, weights=weights)
    by_object = {p.id: p for p in promote(rrf(channels, k=k, weights=weights), meta,
                                          evidence_n=evidence_n)}
    return [Promoted(o.id, o.score, by_object[o.id].evidence) for o in objects]
