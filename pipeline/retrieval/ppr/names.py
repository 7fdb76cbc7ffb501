"""The names of a snapshot's entities, for the PPR stage's seed lookup without SQL: what
`PgEntityGraph.match_names` reads from `entities` and `entity_aliases`, held as dictionaries
of normalised name -> entity numbers (the snapshot's), alias norm -> entity numbers and fold
-> entity numbers.

The fold of an entity is `fold(norm)`, the Python twin of SQL's `brainstream_name_fold(norm)`
(migration 0021 made the two agree). Merged entities stay in the dictionaries; the lookup
keeps only the live ones, as the SQL does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pipeline.entities.names import fold


class NameIndex:
    """norm / alias / fold -> entity numbers, and each entity's display name."""

    def __init__(self) -> None:
        self.names: dict[int, str] = {}
        self._norm_of: dict[int, str] = {}
        self._by_norm: dict[str, set[int]] = {}
        self._by_fold: dict[str, set[int]] = {}
        self._by_alias: dict[str, set[int]] = {}
        self._aliases_of: dict[int, frozenset[str]] = {}

    def set_name(self, entity: int, name: str, norm: str) -> None:
        """The entity's name and normalised name (an entity's norm never changes; a repeated
        call is a no-op)."""
        self.names[entity] = name
        if self._norm_of.get(entity) == norm:
            return
        old = self._norm_of.pop(entity, None)
        if old is not None:
            self._by_norm.get(old, set()).discard(entity)
            self._by_fold.get(fold(old), set()).discard(entity)
        self._norm_of[entity] = norm
        self._by_norm.setdefault(norm, set()).add(entity)
        self._by_fold.setdefault(fold(norm), set()).add(entity)

    def set_aliases(self, entity: int, norms: Iterable[str]) -> None:
        """The entity's alias norms become exactly `norms`."""
        new = frozenset(norms)
        old = self._aliases_of.get(entity, frozenset())
        for norm in old - new:
            self._by_alias.get(norm, set()).discard(entity)
        for norm in new - old:
            self._by_alias.setdefault(norm, set()).add(entity)
        self._aliases_of[entity] = new

    def match(self, keys: Sequence[str], folds: Sequence[str]
              ) -> list[tuple[str, str, int]]:
        """(key, method, entity number) of every entity whose norm (`exact`) or alias (`alias`)
        is one of `keys`, and whose fold is one of `folds` (`fold`, key = the fold); live or
        not (the caller keeps the live)."""
        out = [(key, "exact", e) for key in keys for e in self._by_norm.get(key, ())]
        out += [(key, "alias", e) for key in keys for e in self._by_alias.get(key, ())]
        out += [(key, "fold", e) for key in folds for e in self._by_fold.get(key, ())]
        return out

    def __len__(self) -> int:
        return len(self._norm_of)

    def alias_count(self) -> int:
        """Alias entries held (for the memory estimate)."""
        return sum(len(a) for a in self._aliases_of.values())
