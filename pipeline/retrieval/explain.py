"""The per-hit part of a search's explain block: how each returned object stood in each
channel (its rank there and the channel's raw score: BM25, trigram similarity, cosine), in
PPR (its score), and with the reranker (its score), beside the fused rank and score.

Ranks are the object's, as the fusion sees them (`fusion.fuse_and_promote`: an object takes
its best row's rank in a channel); a raw score is that best row's. Raw scores of different
channels are on different scales: compare them within a channel only. Pure functions.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence

from pipeline.domain.read_model import Hit, RowMeta

ChannelDetails = dict[uuid.UUID, dict[str, dict[str, float]]]


def channel_details(channels: Mapping[str, Sequence[Hit]],
                    meta: Mapping[uuid.UUID, RowMeta]) -> ChannelDetails:
    """Per object: `{channel: {"rank": r, "score": raw}}` for each channel that found it."""
    out: ChannelDetails = {}
    for name in sorted(channels):
        rank = 0
        for hit in channels[name]:
            row = meta.get(hit.id)
            if row is None:
                continue
            object_id = row.parent_id or row.id
            seen = out.setdefault(object_id, {})
            if name in seen:
                continue  # the object's best row in this channel came first
            rank += 1
            seen[name] = {"rank": rank, "score": hit.score}
    return out


def hit_details(base: Sequence[dict[str, object]], ids: Sequence[uuid.UUID], *,
                channels: ChannelDetails, ppr: Mapping[uuid.UUID, float] | None,
                reranked: Mapping[uuid.UUID, float] | None) -> list[dict[str, object]]:
    """`base` (the fused ranks, `multihop.hits_explain`, one entry per id in `ids`) with each
    object's `channels`, `ppr_score` (None: not found by PPR, or PPR did not run) and
    `rerank_score` (None: not re-ranked)."""
    out = []
    for entry, object_id in zip(base, ids, strict=True):
        out.append({**entry, "channels": channels.get(object_id, {}),
                    "ppr_score": None if ppr is None else ppr.get(object_id),
                    "rerank_score": None if reranked is None else reranked.get(object_id)})
    return out
