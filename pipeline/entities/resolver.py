"""The resolver's decisions, pure: which entity a phrase names, and what to do with two
entities that may be one.

The layers, in order (each a `method` on the answer): 1 `exact` normalised name, 2 `alias`
table, 3 the name rules of `pipeline/entities/likeness.py` (`fold`, `segments`, `initials`,
`nickname`, `prefix`), 4 `spelling` (pg_trgm and edit similarity, capped below the merge
threshold), 5 `embedding` similarity of the names (capped at `EMBEDDING_CAP`). The store finds
the candidate rows (`pipeline/entities/store/resolution.py`); here each is scored by the best
layer that relates it to the phrase, and the answer is the top candidate, or `unresolved` with
why: `no_candidates`, `below_threshold`, or `tie` (two candidates within `tie_margin`, such as
two entities that share an alias: homonyms are shown, never guessed).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from functools import lru_cache

from pipeline.domain.resolution import CandidateRow, Evidence
from pipeline.entities.likeness import Likeness, cap, compare
from pipeline.entities.names import normalise

# An alias a merge or a person recorded is as good as the name; one an extractor saw, nearly.
ALIAS_CONFIDENCE = {"merge": 0.98, "manual": 0.98, "extractor": 0.96, "surface": 0.96}
# Names that merely mean something close ("car" / "automobile") are a lead, never a merge.
EMBEDDING_CAP = 0.85
# Below this cosine similarity a name's embedding says nothing: the nearest names of a
# namespace are always some names, and they are not candidates for that alone.
EMBEDDING_FLOOR = 0.5
# The proposal pass scores tens of alias rows per name; `normalise` is pure: answers are kept.
_normalise = lru_cache(maxsize=16_384)(normalise)

MERGE = "merge"
POSSIBLY_SAME = "possibly_same"
DISTINCT = "distinct"


@dataclass(frozen=True)
class ResolverConfig:
    """The thresholds (settings `entity_*`, docs/entities.md)."""

    merge_threshold: float = 0.95
    possibly_same_threshold: float = 0.75
    min_confidence: float = 0.5
    candidates: int = 5
    tie_margin: float = 0.02


@dataclass(frozen=True)
class Candidate:
    """An entity scored against the phrase by its best layer."""

    entity_id: uuid.UUID
    name: str
    label: str
    part_count: int
    confidence: float
    method: str
    numbers_differ: bool = False
    proposable: bool = True  # may be merged or held with the phrase's entity
    mixed: bool = False  # a typed name and an untyped one: held at most (likeness.Likeness)


@dataclass(frozen=True)
class Resolution:
    """The answer for one phrase: the entity it names, or `unresolved` with a reason."""

    query: str
    candidates: list[Candidate]
    entity: Candidate | None = None
    reason: str | None = None  # no_candidates | below_threshold | tie when unresolved
    evidence: list[Evidence] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # layers that could not run, and why

    @property
    def unresolved(self) -> bool:
        """No entity was chosen."""
        return self.entity is None


def score(phrase: str, row: CandidateRow, *, label: str = "NAME",
          floor: float = 0.0) -> Likeness | None:
    """How a candidate row relates to `phrase` (a name of label `label`), by its best layer
    (`floor`: see `likeness.compare`)."""
    if row.via == "embedding":
        by_name = compare(phrase, row.name, label_a=label, label_b=row.label, floor=floor)
        capped = None
        if row.similarity >= EMBEDDING_FLOOR:
            semantic = Likeness("embedding", min(EMBEDDING_CAP, EMBEDDING_CAP * row.similarity))
            capped = cap(semantic, phrase, row.name, label, row.label)
        return max((x for x in (by_name, capped) if x is not None),
                   key=lambda x: x.confidence, default=None)
    if row.via == "alias" and _normalise(row.matched) == _normalise(phrase):
        found = Likeness("alias", ALIAS_CONFIDENCE.get(row.alias_source or "", 0.96))
        return cap(found, phrase, row.matched, label, row.label)
    return compare(phrase, row.matched, label_a=label, label_b=row.label,
                   trigram=row.similarity if row.via == "name" else None, floor=floor)


def rank(phrase: str, rows: list[CandidateRow], *, label: str = "NAME",
         exclude: uuid.UUID | None = None, floor: float = 0.0) -> list[Candidate]:
    """Each entity once, with its best layer, best first (ties: the more mentioned first).
    With `floor` (the proposal pass's threshold), candidates below it may be missing; those at
    or above it are the same."""
    best: dict[uuid.UUID, Candidate] = {}
    # The lookup's branches find the same name more than once (by key and by trigrams, through
    # the name and an alias equal to it): about a quarter of the rows repeat what a score reads.
    scored: dict[tuple[object, ...], Likeness | None] = {}
    for row in rows:
        if row.entity_id == exclude:
            continue
        what = (row.via, row.matched, row.name, row.label, row.similarity, row.alias_source)
        if what in scored:
            found = scored[what]
        else:
            found = scored[what] = score(phrase, row, label=label, floor=floor)
        if found is None:
            continue
        seen = best.get(row.entity_id)
        if seen is None or found.confidence > seen.confidence:
            best[row.entity_id] = Candidate(row.entity_id, row.name, row.label, row.part_count,
                                            found.confidence, found.method,
                                            found.numbers_differ, found.proposable,
                                            found.mixed)
    return sorted(best.values(), key=lambda c: (-c.confidence, -c.part_count, c.name))


def decide(phrase: str, rows: list[CandidateRow], config: ResolverConfig, *,
           skipped: list[str] | None = None) -> Resolution:
    """The answer for `phrase` from the candidate rows the store found."""
    ranked = rank(phrase, rows)
    shown = ranked[:config.candidates]
    notes = list(skipped or [])
    if not ranked:
        return Resolution(phrase, [], reason="no_candidates", skipped=notes)
    top = ranked[0]
    if top.confidence < config.min_confidence:
        return Resolution(phrase, shown, reason="below_threshold", skipped=notes)
    if len(ranked) > 1 and top.confidence - ranked[1].confidence < config.tie_margin:
        return Resolution(phrase, shown, reason="tie", skipped=notes)
    return Resolution(phrase, shown, entity=top, skipped=notes)


def pair_decision(likeness: Likeness | Candidate | None, config: ResolverConfig) -> str:
    """What the proposal pass does with two entities: `merge` them (at the merge threshold),
    hold them as `possibly_same`, or leave them `distinct`. Names whose numbers differ, and
    homonyms, are always distinct; a typed name and an untyped one are held, not merged."""
    if likeness is None or not likeness.proposable:
        return DISTINCT
    if likeness.confidence >= config.merge_threshold:
        return POSSIBLY_SAME if likeness.mixed else MERGE
    if likeness.confidence >= config.possibly_same_threshold:
        return POSSIBLY_SAME
    return DISTINCT
