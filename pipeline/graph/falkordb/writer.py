"""FalkorDB adapter of the `GraphWriter` port: the write side of the graph projection.

Every method is idempotent (MERGE on ids, DELETE of what matches), so the outbox relay may retry a
whole call after any failure; a call spanning several statements (batches, relation types) is not
atomic as a whole, but replaying it converges to the same graph.

Errors: a graph that cannot be reached (refused or dropped connection, timeout, server loading,
read-only replica, query queue full) raises `Unavailable` so the relay retries
later; bad credentials raise `ConfigError`; values that can never be written raise `InvalidInput`.

FalkorDB 4.16.3 quirks absorbed here (see shared/STACK.md):
- Any SET (even of an unchanged value, even of a non-vector property) or DELETE on a
  vector-indexed node leaves an orphan entry in the vector index, so `queryNodes(k)` returns fewer
  than k. Hence nodes whose stored state already equals the new state are not touched at all, and
  the embedding is rewritten only when its `embedded_hash` (or its presence) changes.
- SET of a vector over an existing vector is silently skipped when both are equal after rounding
  every component to the nearest integer, i.e. always for normalized embeddings (components in
  (-0.5, 0.5)): the old vector stays. Removing the property first makes the SET take effect.
- Relation types cannot be query parameters: one statement per type, names checked against
  `RELATION_TYPE_PATTERN` and back-quoted.
- Edge full-text indexes exist only as the DDL `CREATE FULLTEXT INDEX FOR ()-[e:T]->() ON
  (e.note)`; there is no `db.idx.fulltext.createRelationshipIndex` procedure in 4.16.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import falkordb
import redis.exceptions as redis_errors

from pipeline.domain.errors import ConfigError, GraphUnavailable, InvalidInput
from pipeline.domain.projection import EdgeKey, EdgeState, NodeState
from pipeline.domain.relations import check_relation_type
from pipeline.domain.settings import Settings
from pipeline.graph.falkordb.schema import NODE_LABEL, index_rows

# Server replies that mean "not now" rather than "never"; FalkorDB has no error codes for them.
_TRANSIENT_REPLIES = ("Max pending queries exceeded", "Query timed out")
_ALREADY_INDEXED = "already indexed"

_NODE_SCALARS = ("namespace", "kind", "title", "index_text", "embedded_hash", "updated_at")
_EDGE_FIELDS = ("namespace", "note", "status", "role", "confidence", "evidence_id",
                "created_at", "updated_at")


def _same(prop: str) -> str:
    # Null-safe equality: `a = b` is null when either side is null.
    return f"coalesce(n.{prop} = r.{prop}, n.{prop} IS NULL AND r.{prop} IS NULL)"


# One statement per batch: FalkorDB runs a query atomically, so the comparison with the stored
# state and the write cannot interleave with another writer. REMOVE before SET: see the module
# docstring (a new vector close to the old one is otherwise not written).
_UPSERT_NODES = f"""
UNWIND $rows AS r
MERGE (n:{NODE_LABEL} {{id: r.id}})
WITH n, r,
  CASE
    WHEN r.embedding IS NULL THEN n.embedding IS NOT NULL
    WHEN n.embedding IS NULL OR r.embedded_hash IS NULL THEN true
    ELSE coalesce(n.embedded_hash <> r.embedded_hash, true)
  END AS vec_changed
WITH n, r, vec_changed
WHERE vec_changed OR NOT ({" AND ".join(_same(p) for p in _NODE_SCALARS)})
SET {", ".join(f"n.{p} = r.{p}" for p in _NODE_SCALARS)}
FOREACH (_ IN CASE WHEN vec_changed THEN [1] ELSE [] END |
  REMOVE n.embedding
  SET n.embedding = CASE WHEN r.embedding IS NULL THEN NULL ELSE vecf32(r.embedding) END)
RETURN count(n), sum(CASE WHEN vec_changed THEN 1 ELSE 0 END)
"""

_DELETE_NODES = f"UNWIND $ids AS id MATCH (n:{NODE_LABEL} {{id: id}}) DETACH DELETE n"

_NODE_RETURN = ("n.id, n.namespace, n.kind, n.title, n.index_text, n.embedding, "
                "n.embedded_hash, n.updated_at")


def _upsert_edges_query(relation_type: str) -> str:
    # Endpoints are merged so that edge and node projections may arrive in any order; a
    # placeholder gets the edge's namespace and is filled in by the node's own upsert.
    return f"""
UNWIND $rows AS r
MERGE (a:{NODE_LABEL} {{id: r.from_id}}) ON CREATE SET a.namespace = r.namespace
MERGE (b:{NODE_LABEL} {{id: r.to_id}}) ON CREATE SET b.namespace = r.namespace
MERGE (a)-[e:`{relation_type}`]->(b)
SET {", ".join(f"e.{f} = r.{f}" for f in _EDGE_FIELDS)}
"""


def _delete_edges_query(relation_type: str) -> str:
    return f"""
UNWIND $rows AS r
MATCH (:{NODE_LABEL} {{id: r.from_id}})-[e:`{relation_type}`]->(:{NODE_LABEL} {{id: r.to_id}})
DELETE e
"""


@contextmanager
def _graph_errors(what: str) -> Iterator[None]:
    """Translate client errors: outages become Unavailable (retryable), the rest stays loud."""
    try:
        yield
    except (redis_errors.AuthenticationError, redis_errors.AuthorizationError,
            redis_errors.NoPermissionError) as exc:
        raise ConfigError(f"graph refused the credentials during {what}: {exc}",
                          field="falkordb_url") from exc
    except (redis_errors.ConnectionError, redis_errors.TimeoutError, redis_errors.ReadOnlyError,
            redis_errors.TryAgainError, redis_errors.ClusterDownError, OSError) as exc:
        raise GraphUnavailable(f"graph unavailable during {what}: {exc}") from exc
    except redis_errors.ResponseError as exc:
        if any(reply in str(exc) for reply in _TRANSIENT_REPLIES):
            raise GraphUnavailable(f"graph busy during {what}: {exc}") from exc
        raise


def _chunks(rows: list[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(rows), size):
        yield rows[start:start + size]


def _opt_str(value: Any) -> str | None:
    return None if value is None else str(value)


class FalkorGraphWriter:
    """`GraphWriter` on a FalkorDB graph whose node schema `prepare_graph` has created.

    Capabilities (edge full-text support, the vector dimension, the relation types already
    indexed) are read once here; constructing raises Unavailable when the graph is unreachable.
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
        with _graph_errors("connect"):
            # A graph key exists only once queried; reads on a missing key fail.
            self._graph.query("RETURN 1")
            procedures = {str(row[0]) for row in self._graph.query(
                "CALL dbms.procedures() YIELD name RETURN name").result_set}
            rows = index_rows(self._graph)
        self.edge_fulltext = "db.idx.fulltext.queryRelationships" in procedures
        self.vector_dim = self._vector_dim(rows)
        self._indexed_types = self._edge_fulltext_types(rows)

    @classmethod
    def from_settings(cls, settings: Settings) -> FalkorGraphWriter:
        """A writer on the configured graph; raises Unavailable if FalkorDB cannot be reached."""
        with _graph_errors("connect"):
            # Bounded timeouts: a hung server must surface as Unavailable, not block the relay.
            db = falkordb.FalkorDB.from_url(settings.effective_falkordb_url,
                                            socket_connect_timeout=5, socket_timeout=60)
        return cls(db, settings.graph_name)

    # -- capabilities ---------------------------------------------------------------------

    @staticmethod
    def _vector_dim(rows: list[dict[str, Any]]) -> int | None:
        for row in rows:
            if (row["label"] == NODE_LABEL and row["entitytype"] == "NODE"
                    and "VECTOR" in row["types"].get("embedding", [])):
                options = dict(row["options"].get("embedding", {}))
                return int(options["dimension"]) if "dimension" in options else None
        return None

    @staticmethod
    def _edge_fulltext_types(rows: list[dict[str, Any]]) -> set[str]:
        return {str(row["label"]) for row in rows
                if row["entitytype"] == "RELATIONSHIP"
                and "FULLTEXT" in row["types"].get("note", [])}

    def _ensure_edge_index(self, relation_type: str) -> None:
        """Create the full-text index on `note` for a relation type the first time it is seen."""
        if not self.edge_fulltext or relation_type in self._indexed_types:
            return
        with _graph_errors("edge index"):
            # Another process may have created it since construction.
            self._indexed_types |= self._edge_fulltext_types(index_rows(self._graph))
            if relation_type in self._indexed_types:
                return
            try:
                self._graph.query(
                    f"CREATE FULLTEXT INDEX FOR ()-[e:`{relation_type}`]->() ON (e.note)")
            except redis_errors.ResponseError as exc:
                # A concurrent writer won the race: the index exists, which is all we need.
                if _ALREADY_INDEXED not in str(exc):
                    raise
        self._indexed_types.add(relation_type)

    # -- nodes ------------------------------------------------------------------------------

    def _node_row(self, node: NodeState) -> dict[str, Any]:
        embedding: list[float] | None = None
        if node.embedding is not None:
            embedding = [float(x) for x in node.embedding]
            if self.vector_dim is not None and len(embedding) != self.vector_dim:
                # FalkorDB would store it silently without indexing it.
                raise InvalidInput(
                    f"node {node.id}: embedding has {len(embedding)} dimensions, the graph's "
                    f"vector index {self.vector_dim}", field="embedding")
            if not all(math.isfinite(x) for x in embedding):
                raise InvalidInput(f"node {node.id}: embedding holds NaN or infinity",
                                   field="embedding")
        return {"id": node.id, "namespace": node.namespace, "kind": node.kind,
                "title": node.title, "index_text": node.index_text, "embedding": embedding,
                "embedded_hash": node.embedded_hash, "updated_at": node.updated_at}

    def upsert_nodes(self, nodes: Sequence[NodeState]) -> None:
        """MERGE nodes by id; only changed nodes are written, and embeddings only on new hashes.

        Incident edges are kept. A node whose state equals the stored one is not touched (see the
        module docstring for why). Without `embedded_hash` an embedding is always rewritten,
        since nothing proves it unchanged.
        """
        # Last state wins for repeated ids, as if the batch had been applied one by one.
        rows = list({node.id: self._node_row(node) for node in nodes}.values())
        for chunk in _chunks(rows, self.batch_size):
            with _graph_errors("upsert nodes"):
                result = self._graph.query(_UPSERT_NODES, {"rows": chunk})
            # An aggregate over zero surviving rows comes back as no row at all.
            if result.result_set:
                written, embedded = result.result_set[0]
                self.nodes_written += int(written or 0)
                self.embeddings_written += int(embedded or 0)

    def delete_nodes(self, ids: Sequence[str]) -> None:
        """DETACH DELETE nodes by id; missing ids are ignored."""
        unique = list(dict.fromkeys(ids))
        for start in range(0, len(unique), self.batch_size):
            with _graph_errors("delete nodes"):
                self._graph.query(_DELETE_NODES, {"ids": unique[start:start + self.batch_size]})

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
            query = _upsert_edges_query(relation_type)
            for chunk in _chunks(list(keyed.values()), self.batch_size):
                with _graph_errors("upsert edges"):
                    self._graph.query(query, {"rows": chunk})

    def delete_edges(self, keys: Sequence[EdgeKey]) -> None:
        """Delete edges by (from, type, to); missing edges are ignored."""
        by_type: dict[str, dict[EdgeKey, dict[str, Any]]] = {}
        for key in keys:
            check_relation_type(key.relation_type)
            by_type.setdefault(key.relation_type, {})[key] = {
                "from_id": key.from_id, "to_id": key.to_id}
        for relation_type, keyed in by_type.items():
            query = _delete_edges_query(relation_type)
            for chunk in _chunks(list(keyed.values()), self.batch_size):
                with _graph_errors("delete edges"):
                    self._graph.query(query, {"rows": chunk})

    # -- reads (tests, `brainstream verify`) -----------------------------------------------

    def _read(self, query: str, params: dict[str, Any], what: str) -> list[list[Any]]:
        with _graph_errors(what):
            return list(self._graph.ro_query(query, params).result_set)

    def node_exists(self, id: str) -> bool:
        """Whether a node with this id exists (placeholders count)."""
        rows = self._read(f"MATCH (n:{NODE_LABEL} {{id: $id}}) RETURN count(n)", {"id": id},
                          "node exists")
        return bool(rows and int(rows[0][0]) > 0)

    def fetch_node(self, id: str) -> NodeState | None:
        """The stored state of a node (a placeholder has kind "" and no text), or None."""
        rows = self._read(f"MATCH (n:{NODE_LABEL} {{id: $id}}) RETURN {_NODE_RETURN}",
                          {"id": id}, "fetch node")
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
        rows = self._read(
            f"MATCH (a:{NODE_LABEL})-[e]->(b:{NODE_LABEL}) "
            "WHERE $ns IS NULL OR e.namespace = $ns "
            "RETURN a.id, b.id, type(e), e.namespace, e.note, e.status, e.role, e.confidence, "
            "e.evidence_id, e.created_at, e.updated_at ORDER BY a.id, type(e), b.id",
            {"ns": namespace}, "fetch edges")
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
        rows = self._read(f"MATCH (n:{NODE_LABEL}) WHERE $ns IS NULL OR n.namespace = $ns "
                          "RETURN n.id", {"ns": namespace}, "node ids")
        return {str(r[0]) for r in rows}
