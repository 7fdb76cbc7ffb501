"""The reranker stage of search: the fused list's best `depth` objects re-ordered by a
reranker's scores (`pipeline.ports.Reranker`), the rest left in the fused order below them.

Each object is sent as one text: its title and its best evidence part's text (an object
without parts: its own content, else its summary), whitespace folded, cut at
`RERANK_TEXT_CHARS`. Only objects the engine hydrated under the caller's namespace are sent,
so a reranker never sees another tenant's text.

A reranker slower than the stage's `budget`, down, or answering off its contract leaves the
fused order, and the answer says so (`rerank_skipped`); a request with `strict` is refused
instead (the engine raises `DegradedAnswer`). An object's `score` stays its fused score; its
reranker score is in `explain`.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.domain.errors import BrainstreamError
from pipeline.domain.read_model import RichObject
from pipeline.domain.setting_values import redact_credentials
from pipeline.ports import Reranker

log = logging.getLogger(__name__)

RERANK_SKIPPED = "rerank_skipped"
# Cross-encoders read about 512 tokens of query and text together (about 4 characters a
# token): more text is cut by the server anyway, and costs the transfer and its tokenizer.
RERANK_TEXT_CHARS = 2000


@dataclass(frozen=True)
class Reranked:
    """The items in their new order and each re-ranked object's score; `skipped` when the
    reranker did not answer (the items are then in their fused order)."""

    items: list[dict[str, Any]]
    scores: dict[uuid.UUID, float]
    skipped: bool = False


class RerankStage:
    """Re-ranks the top `depth` items with `reranker`, waiting at most `budget` seconds."""

    def __init__(self, reranker: Reranker, *, depth: int, budget: float) -> None:
        if depth < 1 or budget <= 0:
            raise ValueError("depth must be >= 1 and budget > 0")
        self.reranker = reranker
        self.depth = depth
        self.budget = budget

    def close(self) -> None:
        """Close the reranker's connections."""
        self.reranker.close()

    async def rerank(self, query: str, items: list[dict[str, Any]],
                     objects: Mapping[uuid.UUID, RichObject],
                     texts: Mapping[uuid.UUID, str | None]) -> Reranked:
        """`items` (ranked, JSON-ready: `id`, `evidence` as [part id, score] pairs) with their
        head re-ordered by the reranker's scores, ties in the fused order; `objects` are the
        head's, `texts` the contents of their evidence parts (and of an object that is a
        searchable row itself)."""
        head = [item for item in items[: self.depth] if uuid.UUID(str(item["id"])) in objects]
        if not head:
            return Reranked(items, {})
        bodies = [rerank_text(objects[uuid.UUID(str(item["id"]))], item, texts)
                  for item in head]
        try:
            scores = await asyncio.wait_for(self.reranker.rerank(query, bodies), self.budget)
        except TimeoutError:
            log.warning("reranker slower than %.2f s: answering the fused order", self.budget)
            return Reranked(items, {}, skipped=True)
        except BrainstreamError as exc:
            log.warning("reranker failed, answering the fused order: %s: %s", exc.code,
                        redact_credentials(exc.message))
            return Reranked(items, {}, skipped=True)
        if len(scores) != len(head):
            log.warning("reranker gave %d scores for %d texts: answering the fused order",
                        len(scores), len(head))
            return Reranked(items, {}, skipped=True)
        return Reranked(*reorder(items, head, scores))


def reorder(items: Sequence[dict[str, Any]], head: Sequence[dict[str, Any]],
            scores: Sequence[float]) -> tuple[list[dict[str, Any]], dict[uuid.UUID, float]]:
    """`head` (items of the list's top, in list order) sorted by score, best first, ties in
    list order, before every other item in list order; and each head item's score by id."""
    ranked = sorted(range(len(head)), key=lambda i: (-scores[i], i))
    chosen = {id(item) for item in head}
    out = [head[i] for i in ranked] + [item for item in items if id(item) not in chosen]
    return out, {uuid.UUID(str(head[i]["id"])): float(scores[i]) for i in range(len(head))}


def rerank_text(obj: RichObject, item: Mapping[str, Any], texts: Mapping[uuid.UUID, str | None],
                *, limit: int = RERANK_TEXT_CHARS) -> str:
    """The text the reranker reads for one object: its title, then its best evidence part's
    text (or its own content, or its summary), whitespace folded, at most `limit` chars."""
    body: str | None = None
    for part_id, _ in item.get("evidence") or ():
        body = texts.get(uuid.UUID(str(part_id)))
        if body:
            break
    if not body:
        body = texts.get(obj.id) or obj.summary
    text = " ".join(" ".join(part.split()) for part in (obj.title, body) if part)
    return text[:limit]
