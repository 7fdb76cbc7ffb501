"""The one report shape of `brainstream verify`: for each kind of thing compared (object nodes,
links, entity nodes, MENTIONS, entity edges), what the graph lacks, what it has in excess, and
what it holds differently from Postgres (the truth).

`pipeline/ops/verify.py` and `pipeline/ops/verify_entities.py` both report in `Diff`s, so every
check is counted, summarised and judged clean the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pipeline.outbox.entity_sync import compare_states

K = TypeVar("K")


@dataclass
class Diff(Generic[K]):
    """One kind of thing, Postgres against the graph: `missing` (in Postgres only), `extra` (in
    the graph only), `stale` (in both, different). `noun` names the things and `stale_noun`
    what is stale about them, for the report's lines; `checked` counts Postgres' side."""

    noun: str
    stale_noun: str
    missing: list[K] = field(default_factory=list)
    extra: list[K] = field(default_factory=list)
    stale: list[K] = field(default_factory=list)
    checked: int = 0

    @classmethod
    def of_states(cls, noun: str, stale_noun: str, graph: Mapping[K, Any],
                  truth: Mapping[K, Any]) -> Diff[K]:
        """The diff of two keyed states whose values compare equal when they agree; keys
        sorted."""
        diff = compare_states(graph, truth)
        return cls(noun, stale_noun, missing=sorted(diff.missing),  # type: ignore[type-var]
                   extra=sorted(diff.extra), stale=sorted(diff.stale),  # type: ignore[type-var]
                   checked=len(truth))

    @property
    def clean(self) -> bool:
        return not (self.missing or self.extra or self.stale)

    def summary(self) -> list[tuple[str, int]]:
        """(line, count) for each of missing, extra and stale."""
        return [(f"missing {self.noun}", len(self.missing)),
                (f"extra {self.noun}", len(self.extra)),
                (f"stale {self.stale_noun}", len(self.stale))]

    def drifted(self) -> set[K]:
        """Every key that drifted, whichever way."""
        return {*self.missing, *self.extra, *self.stale}
