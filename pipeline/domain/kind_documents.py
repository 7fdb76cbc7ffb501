"""The kind catalog's file format: what a catalog document (YAML/JSON, the shape of
`kinds.yaml`) may say, checked by pydantic at the boundary.

Also the identifier rules every kind and property key is held to, wherever it arrives (catalog
files, events, filters): kinds may become graph labels and property keys are used as jsonb keys in
SQL, so both match strict patterns and are never quoted around. `pipeline.domain.kinds` turns a
parsed document into the frozen specs the rest of the pipeline uses.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from pipeline.domain.errors import InvalidKindSpec
from pipeline.domain.relations import RELATION_TYPE_PATTERN, RelationSpec

FieldType = Literal["string", "number", "boolean", "datetime"]
Operator = Literal["eq", "in"]
Scalar = str | int | float | bool

KIND_PATTERN = r"^[A-Za-z][A-Za-z0-9_]{0,62}$"
PROPERTY_KEY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"


def _null_as_empty(value: Any, info: ValidationInfo) -> Any:
    # `description:` with nothing after it is YAML null; it means "none", not an error.
    if value is None:
        return "" if info.field_name == "description" else []
    return value


class FieldDoc(BaseModel):
    """One field of a kind, as a catalog file declares it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    name: str = Field(pattern=PROPERTY_KEY_PATTERN)
    type: FieldType
    description: str = ""
    required: bool = False
    operators: list[Operator] = Field(default_factory=list)
    examples: list[Scalar] = Field(default_factory=list)

    _empty_as_default = field_validator("description", "operators", mode="before")(
        _null_as_empty)

    @field_validator("examples", mode="before")
    @classmethod
    def _dates_as_iso(cls, value: Any) -> Any:
        # YAML turns unquoted timestamps into date objects; datetime fields hold ISO strings.
        if value is None:
            return []
        if isinstance(value, list):
            return [v.isoformat() if isinstance(v, dt.date) else v for v in value]
        return value


class KindDoc(BaseModel):
    """One kind, as a catalog file declares it."""

    model_config = ConfigDict(extra="forbid", strict=True)

    kind: str = Field(pattern=KIND_PATTERN)
    description: str = ""
    is_parent: bool = False
    is_part: bool = False
    fields: list[FieldDoc] = Field(default_factory=list)

    _empty_as_default = field_validator("description", "fields", mode="before")(
        _null_as_empty)


class RelationDoc(BaseModel):
    """One relation type of the catalog (`relations:`): what it means, and whether it is
    functional (one target per source at any time)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    type: str = Field(pattern=RELATION_TYPE_PATTERN)
    description: str = ""
    functional: bool = False

    _empty = field_validator("description", mode="before")(_null_as_empty)


class CatalogDoc(BaseModel):
    """A whole catalog document: `{kinds: [...], relations: [...]}`."""

    model_config = ConfigDict(extra="forbid", strict=True)

    kinds: list[KindDoc]
    relations: list[RelationDoc] = Field(default_factory=list)


def _error_path(raw: Any, loc: tuple[int | str, ...]) -> str:
    """Turn a pydantic loc like ('kinds', 0, 'fields', 2, 'type') into 'deal.fields.stage.type'."""
    parts: list[str] = []
    rest = list(loc)
    if rest[:1] == ["kinds"] and len(rest) >= 2 and isinstance(rest[1], int):
        kinds = raw.get("kinds") if isinstance(raw, dict) else None
        kind_doc = kinds[rest[1]] if isinstance(kinds, list) and rest[1] < len(kinds) else None
        name = kind_doc.get("kind") if isinstance(kind_doc, dict) else None
        parts.append(name if isinstance(name, str) and name else f"kinds[{rest[1]}]")
        rest = rest[2:]
        if rest[:1] == ["fields"] and len(rest) >= 2 and isinstance(rest[1], int):
            fields = kind_doc.get("fields") if isinstance(kind_doc, dict) else None
            fdoc = fields[rest[1]] if isinstance(fields, list) and rest[1] < len(fields) else None
            fname = fdoc.get("name") if isinstance(fdoc, dict) else None
            label = fname if isinstance(fname, str) and fname else f"[{rest[1]}]"
            parts += ["fields", label]
            rest = rest[2:]
    parts += [f"[{p}]" if isinstance(p, int) else p for p in rest]
    return ".".join(parts).replace(".[", "[")


def parse_catalog_document(raw: Any) -> CatalogDoc:
    """Check an already-decoded catalog document `{kinds: [...]}`; the first problem raises
    `InvalidKindSpec` naming where it is (`deal.fields.stage.type`)."""
    if not isinstance(raw, dict):
        raise InvalidKindSpec("a kind catalog is a mapping with a 'kinds' list")
    try:
        return CatalogDoc.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        path = _error_path(raw, tuple(err["loc"]))
        raise InvalidKindSpec(f"{path}: {err['msg']}", field=path or None) from None


def relations_from_dict(raw: Any) -> list[RelationSpec]:
    """The relation types of an already-decoded catalog document `{kinds, relations}` (its
    `kinds` are checked by `pipeline.domain.kinds.catalog_from_dict`)."""
    doc = parse_catalog_document(raw)
    seen: set[str] = set()
    specs: list[RelationSpec] = []
    for rdoc in doc.relations:
        if rdoc.type in seen:
            raise InvalidKindSpec(f"{rdoc.type}: relation type declared twice", field=rdoc.type)
        seen.add(rdoc.type)
        specs.append(RelationSpec(rdoc.type, rdoc.description, rdoc.functional))
    return specs


def decode_document(text: str) -> Any:
    """A catalog document's text (YAML or JSON) decoded, for `catalog_from_dict` and
    `relations_from_dict` alike."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InvalidKindSpec(f"not valid YAML: {exc}") from None

