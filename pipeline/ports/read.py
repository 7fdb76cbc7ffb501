"""The read side's ports: async, and scoped to one namespace (never a row of another namespace,
nor a soft-deleted one)."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Protocol

from pipeline.domain.entity_reads import EntityRef, Hop, NameMatch
from pipeline.domain.entity_snapshot import KeyState, LogRead, SnapshotBuild, SnapshotSize
from pipeline.domain.kinds import KindCatalog
from pipeline.domain.match_set import FacetCounts, FacetPlan, SortPlan
from pipeline.domain.mentions import ObjectEntity
from pipeline.domain.paths import Citation, GraphEdge, Hub, NodeInfo, NodeRef
from pipeline.domain.read_model import (
    AsOf,
    Direction,
    EdgeHit,
    EntityMatch,
    Filters,
    Hit,
    Neighbor,
    RichObject,
    RowMeta,
)

# Embeds one query text; raises Unavailable when the embedder cannot answer.
QueryEmbedder = Callable[[str], Awaitable[Sequence[float]]]
# The kind catalog as it is now (cached by the adapter).
CatalogSource = Callable[[], Awaitable[KindCatalog]]


class Channel(Protocol):
    """One candidate source of hybrid search, fused by name (`pipeline/retrieval/channels/`).

    `degrade` is the label an answer carries when this channel raised `ChannelDegraded` (its
    own dependency is down); None means the search cannot answer without it. Any other error,
    `Unavailable` included, propagates.
    """

    name: str
    degrade: str | None

    async def candidates(self, namespace: uuid.UUID, query: str, filters: Filters,
                         scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k searchable rows (parts, or objects without parts) for `query`."""
        ...


class Reranker(Protocol):
    """The second stage of search: scores texts against the query, over the fused list's best
    objects (`pipeline/retrieval/rerank/`). Raises `Unavailable` when it cannot answer now, any
    other `BrainstreamError` when it refuses; the stage then keeps the fused order."""

    async def rerank(self, query: str, texts: Sequence[str]) -> list[float]:
        """One score per text, in input order (higher: more relevant)."""
        ...

    def close(self) -> None:
        """Release its connections."""
        ...


class EntityHops(Protocol):
    """Where the PPR walk reads its hops: the database (`EntityGraph`) or an in-memory
    snapshot of the namespace (`pipeline/retrieval/ppr/snapshot.py`), with the same answers."""

    async def hop(self, namespace: uuid.UUID, entity_ids: Sequence[uuid.UUID],
                  row_ids: Sequence[uuid.UUID], per_entity: int, link_limit: int) -> Hop:
        """One hop at once: the live rows naming each of `entity_ids` (at most `per_entity`
        each, the first by row id), the live entities each of `row_ids` names, and the
        walkable entity edges with an end among `entity_ids` (at most `link_limit`)."""
        ...


class SnapshotReads(Protocol):
    """What keeps in-memory PPR snapshots fresh: the change log since a position, and the
    current state of the keys it named."""

    async def changes(self, since: int, namespace: uuid.UUID | None = None) -> LogRead:
        """Log entries written by transactions `>= since` (of one namespace, and truncations,
        when `namespace` is given), and the read's position."""
        ...

    async def read_keys(self, namespace: uuid.UUID, rows: Sequence[uuid.UUID],
                        objects: Sequence[uuid.UUID], entities: Sequence[uuid.UUID],
                        edge_entities: Sequence[uuid.UUID]) -> KeyState:
        """The current state of those keys, read in one transaction."""
        ...


class SnapshotBuilder(SnapshotReads, Protocol):
    """One build's own connection: the build, then its catch-up reads."""

    async def build(self, namespace: uuid.UUID, room: Callable[[SnapshotSize], int]
                    ) -> SnapshotBuild:
        """The namespace's entities, rows, mentions and walkable edges, read in one
        transaction, with that read's position. Its size is counted first and `room(size)`
        says how many bytes (`SnapshotSize.nbytes`) the build may take: over it, the build is
        refused before reading a row, and a read that crosses it stops at once
        (`SnapshotTooLarge` both times)."""
        ...


class EntitySnapshotSource(SnapshotReads, Protocol):
    """What in-memory PPR snapshots are built and kept fresh from: a build runs on a session
    of its own (not the read pool), the tail's reads on the read side's connections."""

    def build_session(self) -> AbstractAsyncContextManager[SnapshotBuilder]:
        """A connection for one build and its catch-up, closed on exit."""
        ...


class EntityGraph(EntityHops, Protocol):
    """The entity layer as PPR retrieval walks it (`pipeline/retrieval/ppr/stage.py`): name
    lookup, the namespace's size, and one hop at a time from entities and rows. Only live rows
    (whose promoted objects are live too) and live (not merged) entities of the namespace are
    ever returned."""

    async def match_names(self, namespace: uuid.UUID, keys: Sequence[str],
                          folds: Sequence[str]) -> list[NameMatch]:
        """Entities whose normalised name or alias is one of `keys` (method exact / alias),
        and those whose folded name is one of `folds` (method fold, key = the fold)."""
        ...

    async def hop_at(self, namespace: uuid.UUID, entity_ids: Sequence[uuid.UUID],
                     row_ids: Sequence[uuid.UUID], per_entity: int, link_limit: int,
                     at: tuple[datetime, datetime]) -> Hop:
        """`hop` with the RELATES facts that count at `at` (world time, system time) instead
        of the current RELATES edges of stated facts."""
        ...

    async def live_rows(self, namespace: uuid.UUID) -> int:
        """How many live rows the namespace holds (the hub rule's denominator; may be cached)."""
        ...

    async def message_entities(self, namespace: uuid.UUID, message_ids: Sequence[uuid.UUID]
                               ) -> list[tuple[str, EntityRef]]:
        """The live entities the live conversation messages among `message_ids` name (the
        first span naming each, and the entity), once each."""
        ...

    async def visible_objects(self, namespace: uuid.UUID, object_ids: Sequence[uuid.UUID],
                              filters: Filters, scope_ids: Sequence[uuid.UUID]
                              ) -> set[uuid.UUID]:
        """Those of `object_ids` a search may return under `filters` and `scope_ids`."""
        ...


class LexicalSearcher(Protocol):
    """BM25 over the searchable rows of one namespace: the lexical channel's engine (the
    `PartSearcher` on Postgres, or the Tantivy index of `pipeline/lexical/`)."""

    async def search_lexical(self, namespace: uuid.UUID, query: str, filters: Filters,
                             scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k by BM25 (IDF and length normalization)."""
        ...


class MatchSetReader(Protocol):
    """A search's match set (`pipeline/domain/match_set.py`): the objects passing the filters
    and scope that hold a query word, with the fused `candidates`; facet counts and a sorted
    order over it."""

    async def facets(self, namespace: uuid.UUID, query: str, filters: Filters,
                     scope_ids: Sequence[uuid.UUID], candidates: Sequence[uuid.UUID],
                     plans: Sequence[FacetPlan]) -> list[FacetCounts]:
        """Per plan, its kept values with object counts, and the sum over all its values."""
        ...

    async def sorted_ids(self, namespace: uuid.UUID, query: str, filters: Filters,
                         scope_ids: Sequence[uuid.UUID], ranked: Sequence[uuid.UUID],
                         plan: SortPlan, limit: int) -> list[uuid.UUID]:
        """The first `limit` objects in the plan's order, ties by rank in `ranked`, then id."""
        ...


class FuzzySearcher(Protocol):
    """Near-spellings of the query's words the namespace's index does not know."""

    async def search_fuzzy(self, namespace: uuid.UUID, query: str, filters: Filters,
                           scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k rows holding a near-spelling of an unknown query word."""
        ...


class PartSearcher(Protocol):
    """Candidate channels over the searchable rows of one namespace (parts, and first-class
    objects without parts); filters and scope apply to the promoted object (a part's parent)."""

    async def search_lexical(self, namespace: uuid.UUID, query: str, filters: Filters,
                             scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k by BM25 (IDF and length normalization)."""
        ...

    async def search_trigram(self, namespace: uuid.UUID, query: str, filters: Filters,
                             scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k by trigram word similarity (near-spellings, codes)."""
        ...

    async def search_dense(self, namespace: uuid.UUID, vector: Sequence[float],
                           filters: Filters, scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k by cosine similarity; a selective filter never starves the result."""
        ...

    async def exact_matches(self, namespace: uuid.UUID, query: str, filters: Filters,
                            scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Equality matches first: id, title, property value, quoted phrase."""
        ...

    async def row_meta(self, namespace: uuid.UUID, ids: Sequence[uuid.UUID]
                       ) -> dict[uuid.UUID, RowMeta]:
        """Parent of searchable rows and when their object last changed (promotion, decay)."""
        ...


class ObjectReader(Protocol):
    """Hydration and reads of visible objects of one namespace (others are absent, not errors)."""

    async def hydrate(self, namespace: uuid.UUID, ids: Sequence[uuid.UUID], *,
                      with_content: bool = False,
                      content_of: Collection[uuid.UUID] = ()) -> dict[uuid.UUID, RichObject]:
        """The visible objects and parts among `ids`; content for all (`with_content`) or for
        those in `content_of` only."""
        ...

    async def children(self, namespace: uuid.UUID, parent_id: uuid.UUID, *, offset: int = 0,
                       limit: int = 100, with_content: bool = True) -> list[RichObject]:
        """Visible parts of a parent, by position."""
        ...

    async def siblings(self, namespace: uuid.UUID, part_id: uuid.UUID, *, radius: int,
                       with_content: bool = True) -> list[RichObject]:
        """The parts within `radius` positions of a part (itself excluded), by position."""
        ...


class MentionReader(Protocol):
    """The entity layer as the API reads it, scoped to one namespace."""

    async def object_entities(self, namespace: uuid.UUID, object_id: uuid.UUID, *,
                              max_entities: int, max_mentions: int
                              ) -> tuple[list[ObjectEntity], bool]:
        """The entities an object and its live parts name (the most mentioned first), each
        with its first mentions, and whether more entities were left out."""
        ...


class GraphReader(Protocol):
    """Entity, edge and neighborhood queries on the graph projection of one namespace.
    Every id it returns must still be hydrated from Postgres before anyone sees it."""

    async def find_entities_text(self, namespace: uuid.UUID, query: str,
                                 kinds: Sequence[str], k: int) -> list[Hit]: ...

    async def find_entities_vector(self, namespace: uuid.UUID, vector: Sequence[float],
                                   kinds: Sequence[str], k: int) -> list[Hit]: ...

    async def find_edges(self, namespace: uuid.UUID, relation_type: str, query: str,
                         k: int) -> list[EdgeHit]: ...

    async def neighbors(self, namespace: uuid.UUID, seeds: Sequence[uuid.UUID],
                        relation_types: Sequence[str], direction: Direction, max_hops: int,
                        limit: int) -> list[Neighbor]:
        """Nodes within `max_hops` of the seeds (seeds excluded), nearest first; each reached
        node once, claimed by the first seed (in `seeds` order) that reaches it."""
        ...


class ResultSetStore(Protocol):
    """Deterministic snapshots of ranked lists, shared by every API process (Redis, with TTL)."""

    async def save(self, namespace: uuid.UUID, items: Sequence[dict[str, object]],
                   meta: dict[str, object]) -> str: ...

    async def load(self, namespace: uuid.UUID, result_set_id: str
                   ) -> tuple[list[dict[str, object]], dict[str, object]] | None: ...


class LinkVersionReader(Protocol):
    """The links of one namespace as of a world and a system time (`AsOf`), from their
    versions: what the graph answers for now, answered for any point."""

    async def find_edges(self, namespace: uuid.UUID, relation_type: str, query: str, k: int,
                         at: AsOf) -> list[EdgeHit]: ...

    async def neighbors(self, namespace: uuid.UUID, seeds: Sequence[uuid.UUID],
                        relation_types: Sequence[str], direction: Direction, max_hops: int,
                        limit: int, at: AsOf) -> list[Neighbor]:
        """As `GraphReader.neighbors`, over the links counting at `at`."""
        ...


class PathGraph(Protocol):
    """The mixed graph of objects and entities of one namespace, as `POST /v1/paths` walks it
    (pipeline/domain/paths.py): only live objects and rows, only entities not merged away."""

    async def endpoints(self, namespace: uuid.UUID, ids: Sequence[uuid.UUID]
                        ) -> dict[uuid.UUID, NodeRef | str]:
        """Each id as a node: a visible first-class object, or an entity (a merged one as the
        entity it was merged into); "part" for a visible part; absent when unknown."""
        ...

    async def edges(self, namespace: uuid.UUID, frontier: Sequence[NodeRef], limit: int, *,
                    messages: bool = False) -> list[GraphEdge]:
        """The edges incident to the frontier's nodes, at most `limit` (which ones, when there
        are more, is unspecified: the caller asks for one more than it may take, to know);
        with `messages`, also the MENTIONS of live conversation messages."""
        ...

    async def hubs(self, namespace: uuid.UUID, entity_ids: Sequence[uuid.UUID], *,
                   fraction: float, min_parts: int) -> list[Hub]:
        """The entities among `entity_ids` named in more than `fraction` of the namespace's
        live rows and in at least `min_parts` rows."""
        ...

    async def nodes(self, namespace: uuid.UUID, refs: Sequence[NodeRef]
                    ) -> dict[NodeRef, NodeInfo]: ...

    async def citations(self, namespace: uuid.UUID, edges: Sequence[GraphEdge], per_edge: int
                        ) -> dict[tuple[NodeRef, NodeRef, str, str], list[Citation]]:
        """Up to `per_edge` citations of each edge (by `GraphEdge.key`), from live rows only."""
        ...

    def as_of(self, at: AsOf) -> PathGraph:
        """The same graph with its links as they held at `at` (from their versions)."""
        ...


class EntityReader(Protocol):
    """Entities of one namespace (not merged away, named by some live row) by name; counts."""

    async def find_by_name(self, namespace: uuid.UUID, norm: str, limit: int
                           ) -> list[EntityMatch]: ...

    async def label_counts(self, namespace: uuid.UUID) -> list[tuple[str, int]]: ...

    async def edge_type_counts(self, namespace: uuid.UUID) -> list[tuple[str, str, int]]: ...

    async def predicate_counts(self, namespace: uuid.UUID, limit: int
                               ) -> list[tuple[str, int]]: ...
