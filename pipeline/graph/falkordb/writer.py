"""FalkorDB adapter of the `GraphWriter` port: the write side of the graph projection.

Every method is idempotent (MERGE on ids, DELETE of what matches), so the outbox relay may retry a
whole call after any failure; a call spanning several statements (batches, relation types) is not
atomic as a whole, but replaying it converges to the same graph.

Errors (translated by `errors.graph_errors`): a graph that cannot be reached (refused or dropped
connection, timeout, server loading, read-only replica, query queue full) raises `GraphUnavailable`
so the relay retries later; bad credentials raise `ConfigError`; values that can never be written
raise `InvalidInput`.

The Cypher it sends, and the FalkorDB 4.16.3 quirks that shape it (orphan vector-index entries
after any SET, a vector SET skipped when close to the old one, relation types that cannot be
parameters), are in `cypher.py`; the edge full-text indexes it creates per relation type in
`schema.py`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import falkordb

from pipeline.domain.errors import InvalidInput
from pipeline.domain.projection import EdgeKey, EdgeState, NodeState
from pipeline.domain.relations import check_relation_type
from pipeline.graph.falkordb import cypher
from pipeline.graph.falkordb.errors import graph_errors
from pipeline.graph.falkordb.params import VectorParam
from pipeline.graph.falkordb.schema import ensure_edge_fulltext_index, read_capabilities
from pipeline.graph.falkordb.settings import GraphSettings


def _chunks(rows: list[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(rows), size):
        yield rows[start:start + size]


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


class FalkorGraphWriter:
    """`GraphWriter` on a FalkorDB graph whose node schema `prepare_graph` has created.

    Capabilities (edge full-text support, the vector dimension, the relation types already
    indexed) are read once here; constructing raises GraphUnavailable when the graph is
    unreachable.
    `nodes_written` and `embeddings_written` count what the server actually rewrote.
    """

    def __init__(self, db: falkordb.FalkorDB, graph_name: str, *, batch_size: int = 500) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        self.graph_name = graph_name
        self.batch_size = batch_size
        self.nodes_written = 0
        self.embeddings_written = 0
        self._graph: Any = db.select_graph(graph_name)
        with graph_errors("connect"):
            # A graph key exists only once queried; reads on a missing key fail.
            self._graph.query("RETURN 1")
            procedures = {str(row[0]) for row in self._graph.query(cypher.PROCEDURES).result_set}
        caps = read_capabilities(self._graph, "connect")
        self.edge_fulltext = "db.idx.fulltext.queryRelationships" in procedures
        self.vector_dim = caps.vector_dim
        self._indexed_types = set(caps.edge_fulltext_types)

    @classmethod
    def from_settings(cls, settings: GraphSettings) -> FalkorGraphWriter:
        """A writer on the configured graph; raises Unavailable if FalkorDB cannot be reached."""
        with graph_errors("connect"):
            # Bounded timeouts: a hung server must surface as Unavailable, not block the relay.
            db = falkordb.FalkorDB.from_url(settings.effective_falkordb_url,
                                            socket_connect_timeout=5, socket_timeout=60)
        return cls(db, settings.graph_name)

    # -- edge indexes -----------------------------------------------------------------------

    def _ensure_edge_index(self, relation_type: str) -> None:
        """Create the full-text index on `note` for a relation type the first time it is seen."""
        if not self.edge_fulltext or relation_type in self._indexed_types:
            return
        # Another process may have created it since construction.
        self._indexed_types |= read_capabilities(self._graph, "edge index").edge_fulltext_types
        if relation_type not in self._indexed_types:
            ensure_edge_fulltext_index(self._graph, relation_type)
        self._indexed_types.add(relation_type)

    # -- nodes ------------------------------------------------------------------------------

    def _node_row(self, node: NodeState) -> dict[str, Any]:
        embedding: VectorParam | None = None
        if node.embedding is not None:
            embedding = VectorParam(node.embedding)
            if self.vector_dim is not None and embedding.dim != self.vector_dim:
                # FalkorDB would store it silently without indexing it.
                raise InvalidInput(
                    f"node {node.id}: embedding has {embedding.dim} dimensions, the graph's "
                    f"vector index {self.vector_dim}", field="embedding")
            if not embedding.finite:
                raise InvalidInput(f"node {node.id}: embedding holds NaN or infinity",
                                   field="embedding")
        return {"id": node.id, "namespace": node.namespace, "kind": node.kind,
                "title": node.title, "index_text": node.index_text, "embedding": embedding,
                "embedded_hash": node.embedded_hash, "updated_at": node.updated_at}

    def upsert_nodes(self, nodes: Sequence[NodeState]) -> None:
        """MERGE nodes by id; only changed nodes are written, and embeddings only on new hashes.

        Incident edges are kept. A node whose state equals the stored one is not touched (see
        `cypher.py` for why). Without `embedded_hash` an embedding is always rewritten,
        since nothing proves it unchanged.
        """
        # Last state wins for repeated ids, as if the batch had been applied one by one.
        rows = list({node.id: self._node_row(node) for node in nodes}.values())
        for chunk in _chunks(rows, self.batch_size):
            with graph_errors("upsert nodes"):
                result = self._graph.query(cypher.UPSERT_NODES, {"rows": chunk})
            # An aggregate over zero surviving rows comes back as no row at all.
            if result.result_set:
                written, embedded = result.result_set[0]
                self.nodes_written += int(written or 0)
                self.embeddings_written += int(embedded or 0)

    def delete_nodes(self, ids: Sequence[str]) -> None:
        """DETACH DELETE nodes by id; missing ids are ignored."""
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), self.batch_size):
            with graph_errors("delete nodes"):
                self._graph.query(cypher.DELETE_NODES,
                                  {"ids": unique[start:start + self.batch_size]})

    # -- edges ------------------------------------------------------------------------------

    def upsert_edges(self, edges: Sequence[EdgeState]) -> None:
        """MERGE edges (one statement per relation type), creating placeholder endpoints.

        Every relation type is checked before anything is written, so a bad one rejects the call.
        """
        by_type: dict[str, dict[EdgeKey, dict[str, Any]]] = {}
        for edge in edges:
            check_relation_type(edge.relation_type)
            by_type.setdefault(edge.relation_type, {})[edge.key] = {
                "from_id": edge.from_id, "to_id": edge.to_id, "namespace": edge.namespace,
                "note": edge.note, "status": edge.status, "role": edge.role,
                "confidence": float(edge.confidence), "evidence_id": edge.evidence_id,
                "created_at": edge.created_at, "updated_at": edge.updated_at,
            }
        for relation_type, keyed in by_type.items():
            self._ensure_edge_index(relation_type)
            query = cypher.upsert_edges(relation_type)
            for chunk in _chunks(list(keyed.values()), self.batch_size):
                with graph_errors("upsert edges"):
                    self._graph.query(query, {"rows": chunk})

    def delete_edges(self, keys: Sequence[EdgeKey]) -> None:
        """Delete edges by (from, type, to); missing edges are ignored."""
        by_type: dict[str, dict[EdgeKey, dict[str, Any]]] = {}
        for key in keys:
            check_relation_type(key.relation_type)
            by_type.setdefault(key.relation_type, {})[key] = {
                "from_id": key.from_id, "to_id": key.to_id}
        for relation_type, keyed in by_type.items():
            query = cypher.delete_edges(relation_type)
            for chunk in _chunks(list(keyed.values()), self.batch_size):
                with graph_errors("delete edges"):
                    self._graph.query(query, {"rows": chunk})

    # -- reads (tests, `brainstream verify`) -----------------------------------------------

    def _read_by_ids(self, query: str, ids: Sequence[str], what: str) -> list[list[Any]]:
        """`query` over `$ids`, in batches of distinct ids; all rows."""
        unique = list(dict.fromkeys(ids))
        rows: list[list[Any]] = []
        for start in range(0, len(unique), self.batch_size):
            rows += self._read(query, {"ids": unique[start:start + self.batch_size]}, what)
        return rows

    def _read(self, query: str, params: dict[str, Any], what: str) -> list[list[Any]]:
        with graph_errors(what):
            return list(self._graph.ro_query(query, params).result_set)

    def node_exists(self, id: str) -> bool:
        """Whether a node with this id exists (placeholders count)."""
        rows = self._read(cypher.NODE_EXISTS, {"id": id}, "node exists")
        return bool(rows and int(rows[0][0]) > 0)

    def node_times(self, ids: Sequence[str]) -> dict[str, str]:
        """The stored `updated_at` of those of `ids` whose node holds its object's state
        (placeholders left out)."""
        return {str(r[0]): str(r[1])
                for r in self._read_by_ids(cypher.NODE_TIMES, ids, "node times")}

    def fetch_node(self, id: str) -> NodeState | None:
        """The stored state of a node (a placeholder has kind "" and no text), or None."""
        rows = self._read(cypher.FETCH_NODE, {"id": id}, "fetch node")
        if not rows:
            return None
        (id_, namespace, kind, title, index_text, embedding, embedded_hash,
         updated_at) = rows[0]
        return NodeState(
            id=str(id_), namespace=str(namespace or ""), kind=str(kind or ""),
            title=_opt_str(title), index_text=str(index_text or ""),
            embedding=None if embedding is None else tuple(float(x) for x in embedding),
            embedded_hash=_opt_str(embedded_hash), updated_at=str(updated_at or ""),
        )

    def fetch_edges(self, namespace: str | None = None) -> list[EdgeState]:
        """Every edge, optionally of one namespace, ordered by (from, type, to)."""
        rows = self._read(cypher.FETCH_EDGES, {"ns": namespace}, "fetch edges")
        return [
            EdgeState(
                from_id=str(r[0]), to_id=str(r[1]), relation_type=str(r[2]),
                namespace=str(r[3] or ""), note=_opt_str(r[4]), status=_opt_str(r[5]),
                role=_opt_str(r[6]), confidence=float(r[7] or 0.0), evidence_id=_opt_str(r[8]),
                created_at=str(r[9] or ""), updated_at=str(r[10] or ""),
            )
            for r in rows
        ]

    def node_ids(self, namespace: str | None = None) -> set[str]:
        """The ids of every node, optionally of one namespace."""
        rows = self._read(cypher.NODE_IDS, {"ns": namespace}, "node ids")
        return {str(r[0]) for r in rows}

