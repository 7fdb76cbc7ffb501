"""Resolve a phrase to an entity of a namespace: the lookup keys of the phrase, the store's
candidate rows (`pipeline/entities/store/resolution.py`), the pure decision
(`pipeline/entities/resolver.py`) and the chosen entity's evidence, as one plan the API runs on
its pool and the proposal pass on the worker's."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from pipeline.entities.likeness import initials
from pipeline.entities.names import fold, normalise, segments
from pipeline.entities.resolver import Resolution, ResolverConfig, decide
from pipeline.entities.settings import EntitySettings
from pipeline.entities.store import resolution as store
from pipeline.postgres.plans import Plan

_LETTERS = re.compile(r"[a-z0-9]{2,10}")
_MAX_PREFIX_WORDS = 8


@dataclass(frozen=True)
class ResolveConfig:
    """The resolver's thresholds and how much the lookup examines."""

    resolver: ResolverConfig = field(default_factory=ResolverConfig)
    pool: int = 50  # candidate rows examined per phrase
    trigram_threshold: float = 0.3
    evidence: int = 3  # mentions shown for the resolved entity

    @classmethod
    def from_settings(cls, settings: EntitySettings) -> ResolveConfig:
        """The configuration the two thresholds give (the rest are the resolver's constants,
        measured on the labelled pairs: docs/entities.md)."""
        return cls(ResolverConfig(merge_threshold=settings.entity_merge_threshold,
                                  possibly_same_threshold=settings.entity_possibly_same_threshold))


def lookup(phrase: str) -> store.Lookup:
    """What the store looks `phrase` up by: the phrase normalised and folded, its identifier
    pieces joined, its initials (an acronym entity), the names its first words form (an entity
    that is a prefix of the phrase), a LIKE pattern for names the phrase begins, and, when the
    phrase is acronym-shaped, its letters (names whose initials spell it)."""
    norm, folded = normalise(phrase), fold(phrase)
    pieces = segments(phrase)
    # the same pieces as another writer would join them: "parse_http_request" and
    # "parseHttpRequest" (the compact form, normalised), "Wi-Fi", "N.A.S.A" and "NASA"
    keys = {norm, folded, folded.replace(" ", ""),
            *(sep.join(pieces) for sep in (" ", "_", "-", ".", ""))}
    words = norm.split()
    keys.update(" ".join(words[:n]) for n in range(1, min(len(words), _MAX_PREFIX_WORDS)))
    if len(folded.split()) > 1:
        keys.update({initials(folded, keep_stop=False), initials(folded, keep_stop=True)})
    acronym = None
    if _LETTERS.fullmatch(folded):
        keys.update({".".join(folded), " ".join(folded)})  # spelled out: "N.A.S.A."
        acronym = folded
    return store.Lookup(norm, folded, sorted(k for k in keys if k),
                        _like_escape(norm) + " %", acronym)


def _like_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def resolve(namespace: uuid.UUID, phrase: str, config: ResolveConfig, *,
            vector: Sequence[float] | None, labels: Sequence[str] | None = None,
            skipped: Sequence[str] = ()) -> Plan[Resolution]:
    """The answer for one phrase: layers 1 to 4 from the name lookup, layer 5 from `vector`
    (the phrase's embedding; None when the embedder could not give it, and `skipped` says
    why), the decision, and the chosen entity's evidence."""
    rows = yield from store.candidates(namespace, lookup(phrase), labels=labels,
                                       limit=config.pool,
                                       trigram_threshold=config.trigram_threshold)
    if vector is not None:
        rows += yield from store.nearest(namespace, vector, labels=labels,
                                         k=config.resolver.candidates)
    answer = decide(phrase, rows, config.resolver, skipped=list(skipped))
    if answer.entity is None:
        return answer
    found = yield from store.evidence(namespace, [answer.entity.entity_id], config.evidence)
    return replace(answer, evidence=found.get(answer.entity.entity_id, []))
