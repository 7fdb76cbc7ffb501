"""Every port of the core: the small interfaces through which the pipeline reaches the world.

One file, like psycopg's `abc.py`: the write path (`EventStore`, `EventStores`, `WorkTrigger`,
`DeadLetterSink`), the projection (`GraphWriter`, `ChangeSink`), embedding (`Embedder`),
extraction (`Extractor`) and the read side (`Channel`, `EntityGraph`, `PartSearcher`,
`ObjectReader`, `GraphReader`, `ResultSetStore`). Each has one production adapter in a module of
its own (`pipeline/stores/`, `pipeline/graph/falkordb/`, `pipeline/kafka/`,
`pipeline/embedding/embedders/`, `pipeline/retrieval/channels/`). The values they trade are in
`pipeline/domain/`.

Read ports are async (the API serves many requests per process) and scoped to one namespace: a
port never returns a row of another namespace, nor a soft-deleted one.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol, TypeAlias, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from pipeline.domain.entity_reads import EntityLink, NameMatch, RowMention
from pipeline.domain.kinds import KindCatalog
from pipeline.domain.mentions import Extraction, TextField
from pipeline.domain.projection import Change, EdgeKey, EdgeState, NodeState
from pipeline.domain.read_model import (
    Direction,
    EdgeHit,
    Filters,
    Hit,
    Neighbor,
    RichObject,
    RowMeta,
)
from pipeline.domain.write_model import DeferredRow, LinkHead, ObjectHead, ObjectWrite

Vectors: TypeAlias = NDArray[np.float32]
# Embeds one query text; raises Unavailable when the embedder cannot answer.
QueryEmbedder = Callable[[str], Awaitable[Sequence[float]]]
# The kind catalog as it is now (cached by the adapter).
CatalogSource = Callable[[], Awaitable[KindCatalog]]
# A dead letter as the sink takes it: the record's key and value, and the headers naming why.
Letter = tuple[bytes | None, bytes, list[tuple[str, bytes]]]


# -- the write path ---------------------------------------------------------------------------


class EventStore(Protocol):
    """The write path's view of the source of truth, bound to one transaction.

    Every method runs inside the caller's transaction; nothing commits. Errors: an unreachable
    store raises `Unavailable` (the batch is retried); a value the store refuses raises
    `RejectedByDatabase` (that event is dead-lettered).
    """

    def savepoint(self) -> AbstractContextManager[None]:
        """Undo one event's writes on error without losing the rest of the batch."""
        ...

    def claim_event(self, namespace: uuid.UUID, source: str, event_id: str,
                    event_type: str) -> bool:
        """Record the event as processed; False when it already was (a duplicate)."""
        ...

    def set_outcome(self, namespace: uuid.UUID, source: str, event_id: str,
                    outcome: str) -> None: ...

    def load_catalog(self) -> KindCatalog: ...

    def set_event_time(self, at: datetime | None) -> None:
        """Stamp the following writes with `at` (None: the transaction's own time)."""
        ...

    def lock_object(self, object_id: uuid.UUID) -> ObjectHead | None:
        """The row of `object_id`, locked until commit (events on one object serialize)."""
        ...

    def share_objects(self, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, ObjectHead]:
        """Rows of `ids`, share-locked so they cannot vanish."""
        ...

    def upsert_objects(self, rows: Sequence[ObjectWrite]) -> list[uuid.UUID]:
        """Insert or replace `rows`; the ids refused because another namespace owns them."""
        ...

    def chunked_parts_of(self, parent_id: uuid.UUID) -> list[tuple[uuid.UUID, int]]: ...

    def explicit_parts_of(self, parent_id: uuid.UUID) -> list[tuple[uuid.UUID, str | None]]:
        """(id, content) of the parts sent with this `parent_id` (not cut by the pipeline)."""
        ...

    def retitle_parts(self, parent_id: uuid.UUID, title: str | None,
                      hashes: Sequence[tuple[uuid.UUID, str]]) -> None:
        """Give parts their parent's new title and the hash of their new index text, (id,
        hash) each; a part whose hash changed is embedded again."""
        ...

    def delete_rows(self, ids: Sequence[uuid.UUID]) -> None: ...

    def soft_delete_object(self, object_id: uuid.UUID, version: int | None,
                           event_id: str) -> None: ...

    def revive_parts(self, parent_id: uuid.UUID, deleted_at: datetime) -> None: ...

    def lock_link(self, from_id: uuid.UUID, relation_type: str,
                  to_id: uuid.UUID) -> LinkHead | None: ...

    def upsert_link(self, namespace: uuid.UUID, from_id: uuid.UUID, relation_type: str,
                    to_id: uuid.UUID, meta: dict[str, Any], version: int | None,
                    event_id: str) -> None: ...

    def soft_delete_link(self, from_id: uuid.UUID, relation_type: str, to_id: uuid.UUID,
                         version: int | None, event_id: str) -> None: ...

    def is_waiting(self, wait_key: str, *, before: int | None = None) -> bool: ...

    def defer(self, *, namespace: uuid.UUID, source: str, event_id: str, wait_key: str,
              topic: str, partition: int, offset: int, key: bytes | None, value: bytes,
              headers: Sequence[tuple[str, bytes]], code: str, reason: str,
              field: str | None) -> None: ...

    def due_deferred(self, limit: int) -> list[DeferredRow]: ...

    def drop_deferred(self, row_id: int) -> None: ...

    def postpone_deferred(self, row_id: int, delay: float) -> None: ...

    def enqueue(self, namespace: uuid.UUID, aggregate_id: uuid.UUID, op: str,
                payload: dict[str, Any] | None = None) -> None:
        """Record what the graph must do, in this transaction (the transactional outbox)."""
        ...


class EventStores(Protocol):
    """Opens one `EventStore` per batch: one transaction, committed when the block ends.

    Errors as `EventStore`'s: an unreachable store raises `Unavailable` (the batch is retried).
    """

    def transaction(self) -> AbstractContextManager[EventStore]: ...

    def deferred_due(self) -> bool:
        """Whether a deferred event is due for another try (checked between batches)."""
        ...


class WorkTrigger(Protocol):
    """Tells the workers there is work (best effort: the periodic sweep finds what is missed)."""

    def embed(self, roots: Sequence[uuid.UUID]) -> None: ...

    def extract(self, roots: Sequence[uuid.UUID]) -> None:
        """Entity extraction of these roots' rows (pipeline/entities/stage.py)."""
        ...

    def relay(self) -> None: ...


class DeadLetterSink(Protocol):
    """Where rejected records go (the dead-letter topic; a replay only counts them)."""

    def send(self, letters: Sequence[Letter], timeout: float = 30.0) -> None:
        """Send and wait for every acknowledgement; raises `Unavailable` otherwise."""
        ...


# -- the projection -------------------------------------------------------------------------


class ChangeSink(Protocol):
    """Where change events go (the changes topic)."""

    def publish(self, changes: Sequence[Change]) -> None: ...


class GraphWriter(Protocol):
    """Write side of the graph projection. Every method is idempotent, so a relay may retry it.

    Implementations raise `pipeline.domain.errors.Unavailable` when the graph cannot be reached (the
    caller retries later) and `InvalidInput` for values that can never be written.
    """

    def upsert_nodes(self, nodes: Sequence[NodeState]) -> None:
        """Create or update nodes, keeping their incident edges."""
        ...

    def delete_nodes(self, ids: Sequence[str]) -> None:
        """Remove nodes and their incident edges; missing ids are ignored."""
        ...

    def upsert_edges(self, edges: Sequence[EdgeState]) -> None:
        """Create or update edges; missing endpoints are created as placeholders."""
        ...

    def delete_edges(self, keys: Sequence[EdgeKey]) -> None:
        """Remove edges; missing edges are ignored."""
        ...

    def node_exists(self, id: str) -> bool:
        """Whether a node (placeholder included) with this id is in the graph."""
        ...

    def fetch_node(self, id: str) -> NodeState | None:
        """The stored state of one node, or None."""
        ...

    def fetch_edges(self, namespace: str | None = None) -> list[EdgeState]:
        """Every edge (of one namespace, if given)."""
        ...

    def node_ids(self, namespace: str | None = None) -> set[str]:
        """The ids of every node (of one namespace, if given)."""
        ...


# -- embedding ------------------------------------------------------------------------------


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of a fixed dimension.

    `embed` returns a float32 array of shape `(len(texts), dim)` in input order; every row has unit
    L2 norm except rows of texts that carry no signal, which stay all zero. An empty input gives
    shape `(0, dim)` without any work. Transient failures raise `EmbedderUnavailable`, permanent
    ones `EmbedderError`; callers retry, embedders do not.
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str]) -> Vectors:
        """Embed `texts`, one normalized row per text, in order."""
        ...


@runtime_checkable
class Extractor(Protocol):
    """Finds the entities a row names (`pipeline/entities/extractors/`).

    `extract` answers one `Extraction` per input row, in input order; a row with no text gets an
    empty one. Spans index the field they were found in. Transient failures (a model endpoint
    down) raise `Unavailable`; a text the extractor refuses raises another `BrainstreamError`.
    Callers retry and isolate refused rows, extractors do not.
    """

    name: str

    def extract(self, rows: Sequence[Sequence[TextField]]) -> list[Extraction]:
        """The mentions (and triples, if the extractor reads any) of each row, in order."""
        ...


# -- the read side --------------------------------------------------------------------------


class Channel(Protocol):
    """One candidate source of hybrid search, fused by name (`pipeline/retrieval/channels/`).

    `degrade` is the label an answer carries when this channel is unavailable (it raised
    `Unavailable`); None means the search cannot answer without it and the error propagates.
    """

    name: str
    degrade: str | None

    async def candidates(self, namespace: uuid.UUID, query: str, filters: Filters,
                         scope_ids: Sequence[uuid.UUID], k: int) -> list[Hit]:
        """Top k searchable rows (parts, or objects without parts) for `query`."""
        ...


class EntityGraph(Protocol):
    """The entity layer as PPR retrieval walks it (`pipeline/retrieval/channels/ppr.py`): name
    lookup, the namespace's size, and one hop at a time from entities or rows. Only live rows
    and live (not merged) entities of the namespace are ever returned."""

    async def match_names(self, namespace: uuid.UUID, keys: Sequence[str],
                          folds: Sequence[str]) -> list[NameMatch]:
        """Entities whose normalised name or alias is one of `keys` (method exact / alias),
        and those whose folded name is one of `folds` (method fold, key = the fold)."""
        ...

    async def live_rows(self, namespace: uuid.UUID) -> int:
        """How many live rows the namespace holds (the hub rule's denominator; may be cached)."""
        ...

    async def rows_of(self, namespace: uuid.UUID, entity_ids: Sequence[uuid.UUID],
                      per_entity: int) -> list[RowMention]:
        """Live rows naming each entity, at most `per_entity` rows each."""
        ...

    async def entities_of(self, namespace: uuid.UUID, row_ids: Sequence[uuid.UUID]
                          ) -> list[RowMention]:
        """The live entities each row names."""
        ...

    async def links_of(self, namespace: uuid.UUID, entity_ids: Sequence[uuid.UUID],
                       limit: int) -> list[EntityLink]:
        """Walkable entity edges with an end among `entity_ids`, at most `limit`."""
        ...

    async def visible_objects(self, namespace: uuid.UUID, object_ids: Sequence[uuid.UUID],
                              filters: Filters, scope_ids: Sequence[uuid.UUID]
                              ) -> set[uuid.UUID]:
        """Those of `object_ids` a search may return under `filters` and `scope_ids`."""
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
        """Parent, position, text of searchable rows (for promotion and snippets)."""
        ...


class ObjectReader(Protocol):
    """Hydration and reads of visible objects of one namespace (others are absent, not errors)."""

    async def hydrate(self, namespace: uuid.UUID, ids: Sequence[uuid.UUID], *,
                      with_content: bool = False) -> dict[uuid.UUID, RichObject]:
        ...

    async def children(self, namespace: uuid.UUID, parent_id: uuid.UUID, *, offset: int = 0,
                       limit: int = 100) -> list[RichObject]:
        """Visible parts of a parent, by position."""
        ...

    async def siblings(self, namespace: uuid.UUID, part_id: uuid.UUID, *, radius: int
                       ) -> list[RichObject]:
        """The parts within `radius` positions of a part (itself excluded), by position."""
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
