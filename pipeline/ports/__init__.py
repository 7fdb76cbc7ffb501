"""Every port of the core: the small interfaces through which the pipeline reaches the world.

One package, like psycopg's `abc.py` (modules `write`, `projection`, `models`, `read`; import them
from here): the write path (`EventStore`, `EventStores`, `WorkTrigger`, `DeadLetterSink`), the
projection (`GraphWriter`, `ChangeSink`), embedding (`Embedder`), extraction (`Extractor`) and the
read side (`Channel`, `EntityGraph`, `PartSearcher`, `ObjectReader`, `MentionReader`,
`GraphReader`, `ResultSetStore`, `Reranker`, `PathGraph`, `EntityReader`). Each has one
production adapter in a module of its own (`pipeline/stores/`, `pipeline/graph/falkordb/`,
`pipeline/kafka/`, `pipeline/embedding/embedders/`, `pipeline/retrieval/channels/`,
`pipeline/retrieval/rerank/http.py`). The values they trade are in
`pipeline/domain/` (and `pipeline/domain/memory_model.py`); the memory services' own ports are in
`pipeline/memory/ports.py`.

Read ports are async (the API serves many requests per process) and scoped to one namespace: a
port never returns a row of another namespace, nor a soft-deleted one.
"""

from __future__ import annotations

from pipeline.ports.models import (
    Embedder,
    Extractor,
    Vectors,
)
from pipeline.ports.projection import (
    ChangeSink,
    GraphWriter,
)
from pipeline.ports.read import (
    CatalogSource,
    Channel,
    EntityGraph,
    EntityHops,
    EntityReader,
    EntitySnapshotSource,
    FuzzySearcher,
    GraphReader,
    LexicalSearcher,
    LinkVersionReader,
    MatchSetReader,
    MentionReader,
    ObjectReader,
    PartSearcher,
    PathGraph,
    QueryEmbedder,
    Reranker,
    ResultSetStore,
    SnapshotBuilder,
    SnapshotReads,
)
from pipeline.ports.write import (
    DeadLetterSink,
    EventStore,
    EventStores,
    Letter,
    MemoryWriter,
    WorkTrigger,
)

__all__ = [
    "CatalogSource",
    "ChangeSink",
    "Channel",
    "DeadLetterSink",
    "Embedder",
    "EntityGraph",
    "EntityHops",
    "EntityReader",
    "EntitySnapshotSource",
    "EventStore",
    "EventStores",
    "Extractor",
    "FuzzySearcher",
    "GraphReader",
    "GraphWriter",
    "Letter",
    "LexicalSearcher",
    "LinkVersionReader",
    "MatchSetReader",
    "MemoryWriter",
    "MentionReader",
    "ObjectReader",
    "PartSearcher",
    "PathGraph",
    "QueryEmbedder",
    "Reranker",
    "ResultSetStore",
    "SnapshotBuilder",
    "SnapshotReads",
    "Vectors",
    "WorkTrigger",
]
