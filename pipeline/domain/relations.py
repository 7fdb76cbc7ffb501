"""Relation types: the one pattern they must match, wherever they arrive (events, API, graph).

Relation types end up inside graph query text (graph databases take no type parameters), so only
plain identifiers are ever accepted. The event schema, the API bodies and the graph adapters all
check against this one definition.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from pipeline.domain.errors import InvalidInput, InvalidKindSpec

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


def relations_from_dict(raw: Any) -> list[RelationSpec]:
    """The relation types of an already-decoded catalog document `{kinds, relations}` (its
    `kinds` are checked by `pipeline.domain.kinds.catalog_from_dict`)."""
    from pipeline.domain.kind_documents import parse_catalog_document

    doc = parse_catalog_document(raw)
    seen: set[str] = set()
    specs: list[RelationSpec] = []
    for rdoc in doc.relations:
        if rdoc.type in seen:
            raise InvalidKindSpec(f"{rdoc.type}: relation type declared twice", field=rdoc.type)
        seen.add(rdoc.type)
        specs.append(RelationSpec(rdoc.type, rdoc.description, rdoc.functional))
    return specs


def load_relations(text: str) -> list[RelationSpec]:
    """The relation types of a catalog document (YAML or JSON text)."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidKindSpec(f"not valid YAML: {exc}") from None
    return relations_from_dict(raw)
