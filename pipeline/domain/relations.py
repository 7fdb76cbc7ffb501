"""Relation types: the one pattern they must match, wherever they arrive (events, API, graph).

Relation types end up inside graph query text (graph databases take no type parameters), so only
plain identifiers are ever accepted. The event schema, the API bodies and the graph adapters all
check against this one definition.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pipeline.domain.errors import InvalidInput

RELATION_TYPE_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,62}$"
_RELATION_TYPE_RE = re.compile(RELATION_TYPE_PATTERN)


def check_relation_type(relation_type: str) -> str:
    """Return `relation_type` if it is a plain identifier, else raise InvalidInput."""
    if not isinstance(relation_type, str) or not _RELATION_TYPE_RE.fullmatch(relation_type):
        raise InvalidInput(
            f"relation type {relation_type!r} must match {RELATION_TYPE_PATTERN}",
            field="relation_type",
        )
    return relation_type


@dataclass(frozen=True)
class RelationSpec:
    """A relation type of the catalog (`relations:` in kinds.yaml, table `relation_types`). A
    functional one holds at most one target per source at any world time (`ceo_of`): a put of
    another target cuts the one holding (pipeline/domain/validity.py)."""

    type: str
    description: str = ""
    functional: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The stored spec (`relation_types.spec`); `relations_from_dict` reads it back."""
        return {"type": self.type, "description": self.description,
                "functional": self.functional}
