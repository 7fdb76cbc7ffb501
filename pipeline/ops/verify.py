"""`brainstream verify`: every disagreement between Postgres (the truth) and the graph.

Checks nodes (missing, extra, placeholders left behind, stale properties, stale or missing
vectors), edges (missing, extra, stale metadata), the vector index itself (FalkorDB 4.16 leaves
orphan entries behind writes, after which a node's own vector no longer finds it) and what is
left of the entity projection an older version wrote (`NamedEntity` nodes: `brainstream migrate`
deletes them). `--repair` hands every drifted aggregate to the outbox (the relay re-syncs it
from Postgres), rebuilds a vector index that no longer answers and deletes that leftover.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from redis.exceptions import ResponseError

from pipeline.domain.index_text import CONTENT_CAP_CHARS, entity_index_text
from pipeline.graph.falkordb.schema import (
    NODE_LABEL,
    RETIRED_ENTITY_LABEL,
    connect,
    drop_entity_projection,
    rebuild_vector_index,
)
from pipeline.ops.drift import Diff
from pipeline.outbox import store as outbox
from pipeline.outbox.ops import EDGE_SYNC, NODE_SYNC, edge_payload
from pipeline.settings import Settings

EdgeKey = tuple[str, str, str]


@dataclass
class Drift:
    nodes: Diff[str] = field(default_factory=lambda: Diff("nodes", "node properties"))
    edges: Diff[EdgeKey] = field(default_factory=lambda: Diff("edges", "edge metadata"))
    stale_vectors: list[str] = field(default_factory=list)
    vector_misses: list[str] = field(default_factory=list)
    vector_sampled: int = 0
    retired_entities: int = 0  # NamedEntity nodes an older version projected

    @property
    def clean(self) -> bool:
        return (self.nodes.clean and self.edges.clean
                and not (self.stale_vectors or self.vector_misses or self.retired_entities))

    def summary(self) -> list[tuple[str, int]]:
        return [*self.nodes.summary(),
                ("stale or missing vectors", len(self.stale_vectors)),
                *self.edges.summary(),
                (f"vector index misses (of {self.vector_sampled} sampled)",
                 len(self.vector_misses)),
                (f"leftover {RETIRED_ENTITY_LABEL} nodes", self.retired_entities)]


def _pg_nodes(conn: psycopg.Connection[Any], cap: int) -> dict[str, dict[str, Any]]:
    rows = conn.execute(
        "SELECT o.id, o.namespace_id, o.kind, o.title, o.summary, o.properties, o.content,"
        " e.embedded_hash, e.embedding IS NOT NULL FROM objects o"
        " LEFT JOIN object_embeddings e ON e.id = o.id"
        " WHERE o.parent_id IS NULL AND o.deleted_at IS NULL"
    ).fetchall()
    return {str(r[0]): {"namespace": str(r[1]), "kind": r[2], "title": r[3],
                        "index_text": entity_index_text(r[3], r[4], r[5] or {}, r[6],
                                                        content_cap_chars=cap),
                        "embedded_hash": r[7] if r[8] else None} for r in rows}


def _pg_edges(conn: psycopg.Connection[Any]) -> dict[EdgeKey, dict[str, Any]]:
    rows = conn.execute(
        "SELECT l.from_id, l.relation_type, l.to_id, l.namespace_id, l.meta FROM links l"
        " JOIN objects f ON f.id = l.from_id JOIN objects t ON t.id = l.to_id"
        " WHERE l.deleted_at IS NULL AND f.deleted_at IS NULL AND t.deleted_at IS NULL"
        " AND f.parent_id IS NULL AND t.parent_id IS NULL").fetchall()
    return {(str(r[0]), str(r[1]), str(r[2])): {"namespace": str(r[3]), **(r[4] or {})}
            for r in rows}


def _graph_nodes(graph: Any) -> dict[str, dict[str, Any]]:
    rows = graph.ro_query(
        f"MATCH (n:{NODE_LABEL}) RETURN n.id, n.namespace, n.kind, n.title, n.index_text,"
        " n.embedded_hash, n.embedding IS NOT NULL").result_set
    return {str(r[0]): {"namespace": str(r[1] or ""), "kind": r[2] or "", "title": r[3],
                        "index_text": r[4] or "", "embedded_hash": r[5] if r[6] else None}
            for r in rows}


def _graph_edges(graph: Any) -> dict[EdgeKey, dict[str, Any]]:
    rows = graph.ro_query(
        f"MATCH (a:{NODE_LABEL})-[e]->(b:{NODE_LABEL}) RETURN a.id, type(e), b.id,"
        " e.namespace, e.note, e.status, e.role, e.confidence, e.evidence_id").result_set
    return {(str(r[0]), str(r[1]), str(r[2])): {
        "namespace": str(r[3] or ""), "note": r[4], "status": r[5], "role": r[6],
        "confidence": float(r[7] or 0.0), "evidence_id": r[8]} for r in rows}


def _edge_stale(pg: dict[str, Any], gr: dict[str, Any]) -> bool:
    return bool(pg["namespace"] != gr["namespace"] or pg.get("note") != gr["note"]
            or pg.get("status") != gr["status"] or pg.get("role") != gr["role"]
            or abs(float(pg.get("confidence") or 0.0) - gr["confidence"]) > 1e-9
            or pg.get("evidence_id") != gr["evidence_id"])


def verify(settings: Settings, *, vector_sample: int = 200, seed: int = 0) -> Drift:
    """Compare everything; sample `vector_sample` vectors for index self-lookups."""
    drift = Drift()
    graph = connect(settings).select_graph(settings.graph_name)
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        pg_nodes = _pg_nodes(conn, CONTENT_CAP_CHARS)
        pg_edges = _pg_edges(conn)
    gr_nodes = _graph_nodes(graph)
    gr_edges = _graph_edges(graph)
    drift.nodes.checked, drift.edges.checked = len(pg_nodes), len(pg_edges)
    for oid, pg in pg_nodes.items():
        gr = gr_nodes.get(oid)
        if gr is None or not gr["kind"]:
            drift.nodes.missing.append(oid)
            continue
        if any(pg[k] != gr[k] for k in ("namespace", "kind", "title", "index_text")):
            drift.nodes.stale.append(oid)
        if pg["embedded_hash"] != gr["embedded_hash"]:
            drift.stale_vectors.append(oid)
    # a placeholder (kind '') is an endpoint created ahead of its node: extra if never filled
    drift.nodes.extra = sorted(set(gr_nodes) - set(pg_nodes))
    for key, pg in pg_edges.items():
        gr = gr_edges.get(key)
        if gr is None:
            drift.edges.missing.append(key)
        elif _edge_stale(pg, gr):
            drift.edges.stale.append(key)
    drift.edges.extra = sorted(set(gr_edges) - set(pg_edges))
    rows = graph.ro_query(f"MATCH (e:{RETIRED_ENTITY_LABEL}) RETURN count(e)").result_set
    drift.retired_entities = int(rows[0][0]) if rows else 0
    _check_vector_index(settings, graph, pg_nodes, drift, vector_sample, seed)
    return drift


# A node is looked up by its own vector among the k nearest; one the first look does not find is
# looked up again with a wider k before it counts as a miss. FalkorDB's vector index is HNSW: its
# greedy search keeps about k candidates, and with k=10 it can end in another region of the graph
# and miss an entry that is there (the fault suite saw one: not in the top 10, first at k=50,
# score 0). An entry that is really gone is not found at any k.
VECTOR_LOOKUP_K = (10, 100)


def _check_vector_index(settings: Settings, graph: Any, pg_nodes: dict[str, dict[str, Any]],
                        drift: Drift, sample: int, seed: int) -> None:
    with_vectors = sorted(i for i, n in pg_nodes.items() if n["embedded_hash"]
                          and i not in set(drift.stale_vectors) | set(drift.nodes.missing))
    chosen = random.Random(seed).sample(with_vectors, min(sample, len(with_vectors)))
    drift.vector_sampled = len(chosen)
    for oid in chosen:
        if not any(_finds_itself(graph, oid, k) for k in VECTOR_LOOKUP_K):
            drift.vector_misses.append(oid)


def _finds_itself(graph: Any, oid: str, k: int) -> bool:
    """True when the vector index returns the node among the k nearest to its own vector."""
    try:
        rows = graph.ro_query(
            f"MATCH (n:{NODE_LABEL} {{id: $id}}) WHERE n.embedding IS NOT NULL "
            f"CALL db.idx.vector.queryNodes('{NODE_LABEL}', 'embedding', {k}, n.embedding) "
            "YIELD node RETURN collect(node.id)", {"id": oid}).result_set
    except ResponseError:
        # FalkorDB refuses the lookup ("Invalid arguments for procedure") when the index
        # cannot serve it; seen in the fault suite after restarts and index rebuilds.
        # A miss is what it is (repair rebuilds the index), not a crash of verify.
        return False
    return bool(rows) and oid in rows[0][0]


def repair(settings: Settings, drift: Drift) -> dict[str, int]:
    """Queue every drifted aggregate for the relay; rebuild a vector index that misses; delete
    a leftover entity projection."""
    graph = connect(settings).select_graph(settings.graph_name)
    namespaces = _namespaces(settings, graph, drift)
    node_ids = drift.nodes.drifted() | set(drift.stale_vectors)
    edges = drift.edges.drifted()
    rebuilt = 0
    if drift.vector_misses:
        rebuild_vector_index(settings)
        rebuilt = 1
    with psycopg.connect(settings.effective_postgres_dsn) as conn, conn.transaction():
        outbox.enqueue_many(
            conn,
            [outbox.Entry(namespaces.get(i, uuid.UUID(int=0)), uuid.UUID(i), NODE_SYNC)
             for i in sorted(node_ids)]
            + [outbox.Entry(namespaces.get(f, uuid.UUID(int=0)), uuid.UUID(f), EDGE_SYNC,
                            edge_payload(f, t, to))
               for f, t, to in sorted(edges)])
    retired = drop_entity_projection(graph) if drift.retired_entities else 0
    return {"nodes": len(node_ids), "edges": len(edges), "vector_index_rebuilt": rebuilt,
            "retired_entities": retired}


def _namespaces(settings: Settings, graph: Any, drift: Drift) -> dict[str, uuid.UUID]:
    ids: Iterable[str] = drift.nodes.drifted() | set(drift.stale_vectors) \
        | {k[0] for k in drift.edges.drifted()}
    wanted = sorted(ids)
    out: dict[str, uuid.UUID] = {}
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        for oid, ns in conn.execute("SELECT id::text, namespace_id FROM objects"
                                    " WHERE id = ANY(%s::uuid[])", (wanted,)).fetchall():
            out[str(oid)] = ns
    for row in graph.ro_query(f"MATCH (n:{NODE_LABEL}) WHERE n.id IN $ids RETURN n.id,"
                              " n.namespace", {"ids": wanted}).result_set:
        if str(row[0]) not in out and row[1]:
            out[str(row[0])] = uuid.UUID(str(row[1]))
    return out

