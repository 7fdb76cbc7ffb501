"""Request and response bodies of the entity graph's reads: `POST /v1/paths` and the entities
`find_objects` adds with `include_entities` (strict: unknown fields are refused)."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from api.asof_schemas import AsOfTime, KnownAtTime
from api.schemas import PageOut
from pipeline.domain.paths import (
    MAX_PATH_HOPS,
    Citation,
    FoundPath,
    NodeInfo,
    NodeRef,
    PathAnswer,
    PathStep,
    Status,
)
from pipeline.domain.read_model import EntityMatch


class PathsBody(BaseModel):
    """From one or more objects or entities (`from`) to one or more others (`to`)."""

    model_config = ConfigDict(extra="forbid")

    sources: list[uuid.UUID] = Field(alias="from", min_length=1, max_length=1000, description=(
        "ids of first-class objects, entities (a merged entity counts as the one it was "
        "merged into) or conversation messages (their uuid: paths then also cross "
        "conversations); paths start at any of them"))
    targets: list[uuid.UUID] = Field(alias="to", min_length=1, max_length=1000, description=(
        "ids of first-class objects, entities or messages; paths end at the first of them "
        "they reach"))
    max_hops: Annotated[int, Field(ge=1, le=MAX_PATH_HOPS)] = MAX_PATH_HOPS
    k: Annotated[int, Field(ge=1, le=100, description="how many paths (the best k)")] = 3
    as_of: AsOfTime = None
    known_at: KnownAtTime = None


class NodeOut(BaseModel):
    type: Literal["object", "entity", "message"]
    id: uuid.UUID
    kind: str | None = None
    title: str | None = None
    name: str | None = None
    label: str | None = None
    part_count: int | None = None
    session_id: str | None = Field(default=None, description="a message: its session")
    role: str | None = Field(default=None, description="a message: its role")

    @classmethod
    def of(cls, ref: NodeRef, info: NodeInfo | None) -> NodeOut:
        if info is None:
            return cls(type=ref.type, id=ref.id)
        return cls(type=ref.type, id=ref.id, kind=info.kind, title=info.title,
                   name=info.name, label=info.label, part_count=info.part_count,
                   session_id=info.session_id, role=info.role)


class PathEdgeOut(BaseModel):
    type: Literal["LINK", "MENTIONS", "CO_OCCURS", "RELATES", "POSSIBLY_SAME"]
    relation_type: str | None = Field(default=None, description="LINK: the link's type")
    predicate: str | None = Field(default=None, description="RELATES: the predicate")
    from_id: uuid.UUID = Field(description="the edge as stored: from")
    to_id: uuid.UUID = Field(description="the edge as stored: to")
    forward: bool = Field(description="the path follows the edge as stored")
    weight: float
    strength: float
    # The domain's own Citation (a dataclass pydantic serialises): one shape, no copy to drift.
    evidence: list[Citation]

    @classmethod
    def of(cls, step: PathStep) -> PathEdgeOut:
        edge = step.edge
        return cls(type=edge.type,
                   relation_type=edge.relation if edge.type == "LINK" else None,
                   predicate=edge.relation if edge.type == "RELATES" else None,
                   from_id=edge.a.id, to_id=edge.b.id, forward=step.forward,
                   weight=edge.weight, strength=step.strength,
                   evidence=list(step.evidence))


class PathOut(BaseModel):
    hops: int
    strength: float = Field(description="the product of the edges' strengths, in (0, 1]")
    nodes: list[NodeOut]
    edges: list[PathEdgeOut] = Field(description="edges[i] joins nodes[i] and nodes[i+1]")

    @classmethod
    def of(cls, path: FoundPath, nodes: dict[NodeRef, NodeInfo]) -> PathOut:
        return cls(hops=path.hops, strength=path.strength,
                   nodes=[NodeOut.of(n, nodes.get(n)) for n in path.nodes],
                   edges=[PathEdgeOut.of(s) for s in path.steps])


class HubOut(BaseModel):
    id: uuid.UUID
    name: str
    part_count: int


class PathsOut(BaseModel):
    paths: list[PathOut]
    status: Status = Field(description=(
        "found | connected_beyond_max_length (no path within max_hops, a longer one exists: "
        "`shortest_beyond`) | no_path_within_max_length (longer ones unknown) | not_connected "
        "| search_incomplete (no path found and a bound cut the search: `cut_by`)"))
    search_incomplete: bool = Field(description=(
        "a bound cut the search (also with paths: better ones may exist)"))
    cut_by: list[str] = Field(description=(
        "max_nodes, max_edges, deadline, path_cap, hubs (no path, and hubs were not expanded)"))
    hubs_skipped: list[HubOut] = Field(description=(
        "entities reached but not expanded: named in too many rows"))
    shortest_beyond: int | None = None
    explored_nodes: int
    explored_edges: int

    @classmethod
    def of(cls, answer: PathAnswer) -> PathsOut:
        return cls(paths=[PathOut.of(p, answer.nodes) for p in answer.paths],
                   status=answer.status, search_incomplete=answer.search_incomplete,
                   cut_by=list(answer.cut_by),
                   hubs_skipped=[HubOut(id=h.id, name=h.name, part_count=h.part_count)
                                 for h in answer.hubs_skipped],
                   shortest_beyond=answer.shortest_beyond,
                   explored_nodes=answer.explored_nodes, explored_edges=answer.explored_edges)


class EntityHitOut(BaseModel):
    """An entity found by name: `matched` exact (normalised name), alias (`via`) or trigram."""

    type: Literal["entity"] = "entity"
    id: uuid.UUID
    name: str
    label: str
    part_count: int
    matched: str = Field(description="exact, alias or trigram")
    via: str | None = None
    score: float

    @classmethod
    def of(cls, match: EntityMatch) -> EntityHitOut:
        return cls(type="entity", id=match.id, name=match.name, label=match.label,
                   part_count=match.part_count, matched=match.matched,
                   via=match.via, score=match.score)


class FindObjectsOut(PageOut):
    entities: list[EntityHitOut] | None = Field(default=None, description=(
        "with `include_entities`: the entities named like the query (first page only); "
        "absent otherwise"))

    @classmethod
    def with_entities(cls, page: PageOut, entities: list[EntityMatch] | None
                      ) -> FindObjectsOut:
        """The page, and the entities when asked (unset otherwise: the route leaves unset
        fields out, so an answer without `include_entities` is the same as before)."""
        out = page.model_dump()
        if entities is not None:
            out["entities"] = [EntityHitOut.of(e) for e in entities]
        return cls.model_validate(out)
