"""The one report shape of `brainstream verify`: for each kind of thing compared (object nodes,
links), what the graph lacks, what it has in excess, and what it holds differently from Postgres
(the truth), so every check is counted, summarised and judged clean the same way.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Generic, TypeVar

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
