"""The kind catalog: which kinds exist, their typed fields, and which fields are filterable.

An empty catalog is *open mode*: every kind and property is accepted. A non-empty catalog
validates every put (unknown kind, missing required field, wrong type) and every property filter.
Catalog documents are checked at the boundary by `pipeline.domain.kind_documents` (the file
format and the identifier patterns); here they become frozen specs. Applies are additive
(`merge_catalog`).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from pipeline.domain.errors import (
    InvalidFilter,
    InvalidKindSpec,
    MissingRequiredField,
    UnknownKind,
    WrongFieldType,
)
from pipeline.domain.kind_documents import (
    KIND_PATTERN as KIND_PATTERN,
    PROPERTY_KEY_PATTERN as PROPERTY_KEY_PATTERN,
    FieldType as FieldType,
    KindDoc,
    Operator as Operator,
    Scalar as Scalar,
    decode_document,
    parse_catalog_document,
)
from pipeline.domain.relations import RelationSpec

_KIND_RE = re.compile(KIND_PATTERN)
_PROPERTY_KEY_RE = re.compile(PROPERTY_KEY_PATTERN)


@dataclass(frozen=True)
class FieldSpec:
    """One declared property of a kind. `operators` empty means "not filterable"."""

    name: str
    type: FieldType
    description: str = ""
    required: bool = False
    operators: tuple[Operator, ...] = ()
    examples: tuple[Scalar, ...] = ()


@dataclass(frozen=True)
class KindSpec:
    """One kind of first-class object (or part) and its declared fields."""

    kind: str
    description: str = ""
    is_parent: bool = False
    is_part: bool = False
    fields: tuple[FieldSpec, ...] = ()

    def field(self, name: str) -> FieldSpec | None:
        """The declared field called `name`, if any."""
        return next((f for f in self.fields if f.name == name), None)


def _normalize_operators(ops: Iterable[str]) -> tuple[Operator, ...]:
    # "in" with one value is "eq", so a field filterable with "in" is filterable with "eq" too.
    found = set(ops)
    if "in" in found:
        return ("eq", "in")
    return ("eq",) if "eq" in found else ()


def matches_type(field_type: FieldType, value: object) -> bool:
    """Whether a single (non-list) property value fits a declared field type."""
    if field_type == "string":
        return isinstance(value, str)
    if field_type == "boolean":
        return isinstance(value, bool)
    if field_type == "number":
        # bool is an int subclass in Python, but `true` is not a number to a publisher.
        return (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
        )
    if isinstance(value, str):  # datetime: an ISO-8601 string (date-only is midnight)
        try:
            dt.datetime.fromisoformat(value)
        except ValueError:
            return False
        return True
    return False


def _spec_from_doc(doc: KindDoc) -> KindSpec:
    seen: set[str] = set()
    fields: list[FieldSpec] = []
    for fdoc in doc.fields:
        where = f"{doc.kind}.fields.{fdoc.name}"
        if fdoc.name in seen:
            raise InvalidKindSpec(f"{where}: field declared twice", field=where)
        seen.add(fdoc.name)
        for example in fdoc.examples:
            if not matches_type(fdoc.type, example):
                raise InvalidKindSpec(
                    f"{where}.examples: {example!r} is not a {fdoc.type}",
                    field=f"{where}.examples",
                )
        fields.append(
            FieldSpec(
                name=fdoc.name,
                type=fdoc.type,
                description=fdoc.description,
                required=fdoc.required,
                operators=_normalize_operators(fdoc.operators),
                examples=tuple(fdoc.examples),
            )
        )
    return KindSpec(
        kind=doc.kind,
        description=doc.description,
        is_parent=doc.is_parent,
        is_part=doc.is_part,
        fields=tuple(fields),
    )


def catalog_from_dict(raw: Any) -> list[KindSpec]:
    """Parse an already-decoded catalog document `{kinds: [...]}` into specs."""
    doc = parse_catalog_document(raw)
    specs: list[KindSpec] = []
    seen: set[str] = set()
    for kdoc in doc.kinds:
        if kdoc.kind in seen:
            raise InvalidKindSpec(f"{kdoc.kind}: kind declared twice", field=kdoc.kind)
        seen.add(kdoc.kind)
        specs.append(_spec_from_doc(kdoc))
    return specs


def load_catalog(text: str) -> list[KindSpec]:
    """Parse a catalog document (YAML or JSON text) into validated kind specs."""
    return catalog_from_dict(decode_document(text))


# --- serialization (a jsonb column holds `catalog_to_dict(specs)`) -------------------------------


def catalog_to_dict(specs: Sequence[KindSpec]) -> dict[str, Any]:
    """Plain-JSON form of a catalog; `catalog_from_dict` reads it back unchanged."""
    return {
        "kinds": [
            {
                "kind": s.kind,
                "description": s.description,
                "is_parent": s.is_parent,
                "is_part": s.is_part,
                "fields": [
                    {
                        "name": f.name,
                        "type": f.type,
                        "description": f.description,
                        "required": f.required,
                        "operators": list(f.operators),
                        "examples": list(f.examples),
                    }
                    for f in s.fields
                ],
            }
            for s in specs
        ]
    }


# --- additive apply ------------------------------------------------------------------------------


def _merge_field(kind: str, old: FieldSpec, new: FieldSpec) -> FieldSpec:
    if old.type != new.type:
        where = f"{kind}.fields.{old.name}.type"
        raise InvalidKindSpec(
            f"{where}: cannot change type from {old.type} to {new.type} "
            "(stored objects were validated against the old type)",
            field=where,
        )
    # An omitted description/examples keeps the documented ones; everything else the file says wins.
    return replace(
        old,
        description=new.description or old.description,
        examples=new.examples or old.examples,
        required=new.required,
        operators=new.operators,
    )


def _merge_kind(old: KindSpec, new: KindSpec) -> KindSpec:
    incoming = {f.name: f for f in new.fields}
    fields = [_merge_field(old.kind, f, incoming[f.name]) if f.name in incoming else f
              for f in old.fields]
    known = {f.name for f in old.fields}
    fields += [f for f in new.fields if f.name not in known]
    return KindSpec(
        kind=old.kind,
        description=new.description or old.description,
        is_parent=new.is_parent,
        is_part=new.is_part,
        fields=tuple(fields),
    )


def merge_catalog(existing: Sequence[KindSpec], incoming: Sequence[KindSpec]) -> list[KindSpec]:
    """Additive upsert of `incoming` into `existing`: kinds and fields are added or updated,
    never removed; changing an existing field's type raises `InvalidKindSpec`."""
    by_kind = {s.kind: s for s in incoming}
    merged = [_merge_kind(s, by_kind[s.kind]) if s.kind in by_kind else s for s in existing]
    known = {s.kind for s in existing}
    merged += [s for s in incoming if s.kind not in known]
    return merged


# --- validation against the catalog --------------------------------------------------------------


class KindCatalog:
    """The catalog in force: validates puts and property filters. Empty means open mode."""

    def __init__(self, specs: Iterable[KindSpec], relations: Iterable[RelationSpec] = ()) -> None:
        self._specs: dict[str, KindSpec] = {s.kind: s for s in specs}
        self._relations: dict[str, RelationSpec] = {r.type: r for r in relations}

    @property
    def relations(self) -> list[RelationSpec]:
        """The declared relation types, in type order."""
        return [self._relations[t] for t in sorted(self._relations)]

    def is_functional(self, relation_type: str) -> bool:
        """Whether the type holds one target per source at a time (undeclared: not)."""
        spec = self._relations.get(relation_type)
        return spec is not None and spec.functional

    @property
    def is_open(self) -> bool:
        """True when no kind is declared: every kind and property is accepted."""
        return not self._specs

    @property
    def specs(self) -> list[KindSpec]:
        """The declared kinds, in catalog order."""
        return list(self._specs.values())

    def get(self, kind: str) -> KindSpec | None:
        """The spec of `kind`, or None when it is not declared."""
        return self._specs.get(kind)

    def validate_put(self, kind: str, properties: Mapping[str, object]) -> None:
        """Refuse a put whose kind is unknown, or whose properties miss a required field or
        carry a wrongly typed value. Undeclared properties are accepted (but not filterable)."""
        if self.is_open:
            return
        spec = self._specs.get(kind)
        if spec is None:
            raise UnknownKind(f"kind {kind!r} is not in the kind catalog", field="data.kind")
        for fspec in spec.fields:
            where = f"data.properties.{fspec.name}"
            value = properties.get(fspec.name)
            if value is None or value == []:
                if fspec.required:
                    raise MissingRequiredField(
                        f"{kind}: required property {fspec.name!r} is missing", field=where
                    )
                continue
            values = cast(list[object], value) if isinstance(value, list) else [value]
            for item in values:
                if not matches_type(fspec.type, item):
                    raise WrongFieldType(
                        f"{kind}.{fspec.name}: expected {fspec.type}, got {item!r}", field=where
                    )

    def validate_filter(
        self, kinds: Sequence[str] | None, name: str, operator: Operator
    ) -> FieldSpec | None:
        """Refuse a property filter unless `name` is declared filterable with `operator` by at
        least one of `kinds` (all kinds when None). Returns the matching spec (None if open)."""
        where = f"filters.{name}"
        if not is_valid_property_key(name):
            raise InvalidFilter(f"{name!r} is not a valid property name", field=where)
        if operator not in ("eq", "in"):
            raise InvalidFilter(f"unknown filter operator {operator!r}", field=where)
        if self.is_open:
            return None
        if kinds is None:
            candidates = list(self._specs.values())
        else:
            unknown = [k for k in kinds if k not in self._specs]
            if unknown:
                raise InvalidFilter(f"unknown kinds: {', '.join(unknown)}", field="kinds")
            candidates = [self._specs[k] for k in kinds]
        for spec in candidates:
            fspec = spec.field(name)
            if fspec is not None and operator in fspec.operators:
                return fspec
        scope = "any kind" if kinds is None else "kinds " + ", ".join(kinds)
        raise InvalidFilter(
            f"property {name!r} is not filterable with {operator!r} for {scope}", field=where
        )

    def filterable_fields(self, kind: str) -> list[FieldSpec]:
        """The fields of `kind` that accept filters (empty for unknown kinds)."""
        spec = self._specs.get(kind)
        return [f for f in spec.fields if f.operators] if spec else []


def is_valid_property_key(name: str) -> bool:
    """Whether `name` matches the property key pattern (keys become jsonb keys in SQL)."""
    return bool(_PROPERTY_KEY_RE.fullmatch(name))


def is_valid_kind_name(kind: str) -> bool:
    """Whether `kind` matches the kind identifier pattern."""
    return bool(_KIND_RE.fullmatch(kind))
