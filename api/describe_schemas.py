"""Response bodies of the self-describing reads: `GET /v1/schema` (the kinds callers filter by,
and the namespace's entity layer) and `GET /readyz` (each dependency up or down). Modelled so
the OpenAPI document tells clients and agents their shape, and the fuzz tests check it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field


class FieldOut(BaseModel):
    name: str
    type: str
    description: str | None = None
    required: bool
    operators: list[str] = Field(description="filter operators the field allows (eq, in, ...)")
    filterable: bool
    examples: list[Any]


class KindOut(BaseModel):
    kind: str
    description: str | None = None
    is_parent: bool
    is_part: bool
    fields: list[FieldOut]


class LabelCountOut(BaseModel):
    label: str
    count: int


class EdgeTypeCountOut(BaseModel):
    type: str
    count: int
    by_status: dict[str, int] | None = Field(
        default=None, description="POSSIBLY_SAME edges by status (held, verified, refused)")


class PredicateCountOut(BaseModel):
    predicate: str
    count: int


class EntitySchemaOut(BaseModel):
    labels: list[LabelCountOut]
    edge_types: list[EdgeTypeCountOut]
    predicates: list[PredicateCountOut] = Field(
        description="the namespace's most frequent RELATES predicates")


class SchemaOut(BaseModel):
    open_mode: bool = Field(description="an empty catalog: any kind and property is accepted")
    kinds: list[KindOut]
    filter_usage: str
    endpoints_with_filters: list[str]
    entities: EntitySchemaOut


class ReadyOut(BaseModel):
    status: Literal["ready", "unavailable"]
    dependencies: dict[str, Literal["ok", "down"]]
    generation: int = Field(description="the index generation served")
    code: Literal["dependency_unavailable"] | None = Field(
        default=None, description="set when a dependency is down (answer 503)")
    reasons: dict[str, str] | None = Field(
        default=None, description="fixed texts that name no host (today only sql_postings)")
