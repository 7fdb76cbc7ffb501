"""Entity ids and the co-occurrence rule of a row: pure functions the stage and its SQL agree on.

An entity's id is derived from its namespace, normalised name and label class
(`pipeline/entities/likeness.py: label_class`) when it is first seen, so a replay (or two workers
creating it at once) gets the same id; an untyped entity (class '') keeps the id it had before
classes were part of the identity. A row's entities count for
co-occurrence up to a cap, the most mentioned first (ties by id), so the pairs a row adds are
bounded and the same whoever computes them; `pipeline/entities/store/writes.py` ranks them
with the same order in SQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from itertools import combinations

# Fixed forever: changing it would give every entity a new id on the next replay.
ENTITY_ID_NAMESPACE = uuid.UUID("5b0c7f6e-3d1a-5e8b-9c2f-6a4e1d7b8c90")

Pair = tuple[uuid.UUID, uuid.UUID]


def entity_id(namespace: uuid.UUID, norm: str, label_class: str = "") -> uuid.UUID:
    """The id an entity named `norm` (already normalised) of `label_class` gets in `namespace`.
    NUL separates the class: no name or label holds one (the stage drops such mentions)."""
    key = f"{namespace}:{norm}" if not label_class else f"{namespace}:{norm}\x00{label_class}"
    return uuid.uuid5(ENTITY_ID_NAMESPACE, key)


def counted_entities(mentions: Mapping[uuid.UUID, int], cap: int) -> list[uuid.UUID]:
    """The entities of one row that count for co-occurrence: at most `cap`, ranked by how often
    the row mentions them, then by id."""
    ranked = sorted(mentions.items(), key=lambda item: (-item[1], item[0]))
    return [entity for entity, _ in ranked[:cap]]


def pairs(entities: Iterable[uuid.UUID]) -> set[Pair]:
    """The unordered pairs of distinct entities, each as (smaller id, larger id)."""
    return {(a, b) for a, b in combinations(sorted(set(entities)), 2)}
