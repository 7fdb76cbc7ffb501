"""Whole-passage grounding (`POST /v1/resolve` with `text`): every entity a passage names,
with the spans that name it and the layer that matched each.

The spans come from PPR's seed matcher (`PprStage.ground`: word n-grams of up to 8 words
looked up by normalised name, alias, then fold; overlapping matches keep the longest, then
the earliest), so what a passage is grounded to is what a search with that passage seeds
from. This module turns its spans into one answer per entity; the labels come from
`labels_of`.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from pipeline.domain.entity_reads import EntityRef
from pipeline.entities.resolver import ALIAS_CONFIDENCE
from pipeline.postgres.plans import Plan, Statement
from pipeline.retrieval.ppr.seeds import Ngram

# The passage a request may ground: about 3,000 words, 24,000 n-grams looked up in one
# statement; past it a caller sends several.
MAX_TEXT_CHARS = 20_000

# The confidence of each matcher layer, as the resolver scores it (docs/entities.md): an alias
# is scored as the resolver scores a surface or extractor alias (the matcher does not say
# which source), the least an alias scores.
LAYER_CONFIDENCE = {"exact": 1.0, "alias": min(ALIAS_CONFIDENCE.values()), "fold": 0.95}


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    text: str
    method: str
    confidence: float


@dataclass
class Grounded:
    """One entity the passage names: its spans in text order, its best layer, and whether a
    span of it also named another entity (homonyms: the text alone cannot tell them apart)."""

    entity: EntityRef
    label: str = ""
    spans: list[Span] = field(default_factory=list)
    ambiguous: bool = False

    @property
    def method(self) -> str:
        return max(self.spans, key=lambda s: s.confidence).method

    @property
    def confidence(self) -> float:
        return max(s.confidence for s in self.spans)


def grounded(matched: Sequence[tuple[Ngram, Sequence[tuple[EntityRef, str]]]]
             ) -> list[Grounded]:
    """One answer per entity from the matcher's spans, by the first span that names it."""
    out: dict[uuid.UUID, Grounded] = {}
    for gram, entities in matched:
        for entity, method in entities:
            entry = out.setdefault(entity.id, Grounded(entity))
            entry.spans.append(Span(gram.first, gram.last, gram.text, method,
                                    LAYER_CONFIDENCE.get(method, 0.0)))
            entry.ambiguous = entry.ambiguous or len(entities) > 1
    return sorted(out.values(), key=lambda g: (g.spans[0].start, str(g.entity.id)))


def labelled(entries: Sequence[Grounded], labels: Mapping[uuid.UUID, str],
             wanted: Collection[str] | None) -> list[Grounded]:
    """The entries with their labels, only those of `wanted` labels when given."""
    for entry in entries:
        entry.label = labels.get(entry.entity.id, "")
    return [e for e in entries if wanted is None or e.label in wanted]


def labels_of(namespace: uuid.UUID, ids: Sequence[uuid.UUID]) -> Plan[dict[uuid.UUID, str]]:
    """The label of each entity of the namespace among `ids`."""
    rows = yield Statement("SELECT id, label FROM entities WHERE (namespace_id = %s) IS TRUE"
                           " AND id = ANY(%s::uuid[])", (namespace, list(ids)))
    return {row[0]: str(row[1]) for row in rows}
