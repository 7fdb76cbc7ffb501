"""The values of `POST /v1/paths`: the mixed graph's nodes and edges, the evidence an edge cites,
and the answer (ranked paths, and what bounded the search).

The mixed graph has three kinds of node, first-class objects, entities and conversation messages
(walked only when a path starts or ends at a message: a document-only answer never changes), and
five kinds of edge: a publisher's link between two objects (`LINK`, with its relation type),
`MENTIONS` between an object (or a live message) and an entity its live rows name, and the
entity-to-entity edges `CO_OCCURS`, `RELATES` (an extracted triple, with its predicate) and
`POSSIBLY_SAME` (verified pairs only). Every edge is walked in both directions; `forward` says
whether the path follows it as stored.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pipeline.domain.read_model import AsOf

NodeType = Literal["object", "entity", "message"]
EdgeType = Literal["LINK", "MENTIONS", "CO_OCCURS", "RELATES", "POSSIBLY_SAME"]

# The most hops a path may have: past four, a path between two objects explains little.
MAX_PATH_HOPS = 4

# Why the search did not cover every path up to `max_hops` (`PathAnswer.cut_by`).
CUT_MAX_NODES = "max_nodes"
CUT_MAX_EDGES = "max_edges"
CUT_DEADLINE = "deadline"
CUT_PATH_CAP = "path_cap"
CUT_HUBS = "hubs"

# The answer's status. `found`: paths are returned. `connected_beyond_max_length`: none within
# `max_hops`, but the search went on and met a longer one. `no_path_within_max_length`: none
# within `max_hops`, and whether a longer one exists is unknown (the probe beyond stopped).
# `not_connected`: one side's whole component was explored without meeting the other.
# `search_incomplete`: no path found, and a bound cut the search (`cut_by` says which).
Status = Literal["found", "connected_beyond_max_length", "no_path_within_max_length",
                 "not_connected", "search_incomplete"]


@dataclass(frozen=True, order=True)
class NodeRef:
    """A node of the mixed graph: an object (always a first-class one), an entity, or a
    message of conversation memory (by its uuid)."""

    type: NodeType
    id: uuid.UUID
    # The search hashes nodes millions of times on large graphs: once, here.
    _hash: int = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.type, self.id.int)))

    def __hash__(self) -> int:
        return self._hash


@dataclass(frozen=True)
class GraphEdge:
    """One stored edge as the search sees it: its ends as stored (`a` -> `b`), its type, the
    relation type (LINK) or predicate (RELATES), and its support: `weight` (LINK: 1; MENTIONS:
    mentions in the object's live rows; CO_OCCURS: rows naming both; RELATES: live rows stating
    it) and `confidence` (LINK, POSSIBLY_SAME; 0 when unset)."""

    a: NodeRef
    b: NodeRef
    type: EdgeType
    relation: str = ""
    weight: float = 1.0
    confidence: float = 0.0

    @property
    def key(self) -> tuple[NodeRef, NodeRef, str, str]:
        """The stored edge's identity (what its evidence is read by)."""
        return self.a, self.b, self.type, self.relation

    def other(self, node: NodeRef) -> NodeRef:
        """The end that is not `node`."""
        return self.b if node == self.a else self.a


def edge_strength(edge: GraphEdge) -> float:
    """How strongly an edge ties its ends, in (0, 1]: a path's strength is the product of its
    edges' (the weakest link matters most).

    A publisher's link is as strong as its stated confidence, 1 when it states none; a verified
    POSSIBLY_SAME likewise. Support `n` (mentions, rows naming both, rows stating a triple)
    gives n / (n + 1); a stated relation (RELATES) counts one more than its rows, so it
    outranks a co-occurrence with the same support.
    """
    if edge.type in ("LINK", "POSSIBLY_SAME"):
        return edge.confidence if edge.confidence > 0 else 1.0
    support = max(edge.weight, 0.0) + (1.0 if edge.type == "RELATES" else 0.0)
    return support / (support + 1.0) if support > 0 else 0.01


@dataclass(frozen=True)
class PathQuery:
    """`POST /v1/paths`, validated by shape: endpoints (object or entity ids), bounds."""

    sources: tuple[uuid.UUID, ...]
    targets: tuple[uuid.UUID, ...]
    max_hops: int = MAX_PATH_HOPS
    k: int = 3
    at: AsOf | None = None  # links as of a world and system time; None: now


@dataclass(frozen=True)
class Citation:
    """What states an edge: a live row (`row_id`, a part or an object without parts, of
    `object_id`) with the span [start, end) of `field` and a snippet around it; or, for a link,
    its note and metadata (and, read as of a time, when its version held)."""

    # `POST /v1/paths` answers this type as it is (api/entity_schemas.py): the OpenAPI
    # document's `Citation`, so a field added here is documented and answered at once.
    row_id: uuid.UUID | None = None
    object_id: uuid.UUID | None = None
    field: str | None = None
    start: int | None = None
    end: int | None = None
    text: str | None = None
    snippet: str | None = None
    note: str | None = None
    meta: dict[str, object] = dataclasses.field(default_factory=dict)
    # A message's mention: `row_id` is the message's uuid, `field` its content; its session.
    session_id: str | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None


@dataclass(frozen=True)
class NodeInfo:
    """A node as the answer shows it: an object's kind and title, an entity's name and label."""

    ref: NodeRef
    kind: str | None = None
    title: str | None = None
    name: str | None = None
    label: str | None = None
    part_count: int | None = None
    # A message: its session and role (`title` is the start of its content).
    session_id: str | None = None
    role: str | None = None


@dataclass(frozen=True)
class PathStep:
    """One edge of a path: the stored edge, whether the path follows it as stored, its strength
    and what states it."""

    edge: GraphEdge
    forward: bool
    strength: float
    evidence: tuple[Citation, ...] = ()


@dataclass(frozen=True)
class FoundPath:
    """A path from a source to a target: its nodes in order and the edge between each two."""

    nodes: tuple[NodeRef, ...]
    steps: tuple[PathStep, ...]
    strength: float

    @property
    def hops(self) -> int:
        return len(self.steps)


@dataclass(frozen=True)
class Hub:
    """An entity the search reached but did not expand (it is named in too many rows)."""

    id: uuid.UUID
    name: str
    part_count: int


@dataclass(frozen=True)
class PathAnswer:
    """The k best paths and how the search ended."""

    paths: tuple[FoundPath, ...]
    nodes: dict[NodeRef, NodeInfo]
    status: Status
    search_incomplete: bool
    cut_by: tuple[str, ...] = ()
    hubs_skipped: tuple[Hub, ...] = ()
    shortest_beyond: int | None = None  # connected_beyond_max_length: the length met
    explored_nodes: int = 0
    explored_edges: int = 0
