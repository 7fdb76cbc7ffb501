"""Graph preparation: the constraints and indexes of the FalkorDB projection, created idempotently.

Nodes are first-class objects under the label `Entity` (id, namespace, kind, title, index_text,
embedding). Edge full-text indexes are per relation type and are created by the writer when a
type first appears, because FalkorDB cannot take a relation type as a parameter.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import falkordb

from pipeline.domain.errors import GraphUnavailable, MigrationError
from pipeline.domain.settings import Settings

NODE_LABEL = "Entity"
Report = Callable[[str], None]


def _noop(_: str) -> None:
    pass


def connect(settings: Settings) -> falkordb.FalkorDB:
    """A client for the configured (or embedded) FalkorDB."""
    return falkordb.FalkorDB.from_url(settings.effective_falkordb_url)


def index_rows(graph: Any) -> list[dict[str, Any]]:
    """`CALL db.indexes()` as dicts: label, types per property, options, entity type, status."""
    result = graph.query("CALL db.indexes() YIELD label, types, options, entitytype, status "
                         "RETURN label, types, options, entitytype, status")
    return [
        {"label": row[0], "types": dict(row[1]), "options": dict(row[2]),
         "entitytype": row[3], "status": row[4]}
        for row in result.result_set
    ]


def _has_index(rows: list[dict[str, Any]], label: str, prop: str, kind: str,
               entitytype: str = "NODE") -> dict[str, Any] | None:
    for row in rows:
        if (row["label"] == label and row["entitytype"] == entitytype
                and kind in row["types"].get(prop, [])):
            return row
    return None


def prepare_graph(settings: Settings, *, report: Report = _noop, timeout: float = 120.0) -> None:
    """Create the node constraint and the range, full-text and vector indexes if missing."""
    db = connect(settings)
    graph = db.select_graph(settings.graph_name)
    # A graph exists once something is written; a no-op query is enough to create the key.
    graph.query("RETURN 1")
    rows = index_rows(graph)
    created: list[str] = []
    for prop in ("id", "namespace"):
        if _has_index(rows, NODE_LABEL, prop, "RANGE") is None:
            graph.query(f"CREATE INDEX FOR (n:{NODE_LABEL}) ON (n.{prop})")
            created.append(f"range({prop})")
    if _has_index(rows, NODE_LABEL, "index_text", "FULLTEXT") is None:
        graph.query(
            f"CALL db.idx.fulltext.createNodeIndex('{NODE_LABEL}', 'title', 'index_text')"
        )
        created.append("fulltext(title, index_text)")
    vector = _has_index(rows, NODE_LABEL, "embedding", "VECTOR")
    if vector is None:
        graph.query(
            f"CREATE VECTOR INDEX FOR (n:{NODE_LABEL}) ON (n.embedding) "
            f"OPTIONS {{dimension: {int(settings.vector_dim)}, similarityFunction: 'cosine'}}"
        )
        created.append(f"vector(embedding, {settings.vector_dim})")
    else:
        dim = int(dict(vector["options"].get("embedding", {})).get("dimension", 0))
        if dim != settings.vector_dim:
            raise MigrationError(
                f"the graph's vector index has dimension {dim} but the settings ask for "
                f"{settings.vector_dim}; rebuild the graph (`brainstream graph rebuild`)",
                field="embedding_dim",
            )
    constraints = graph.list_constraints()
    if not any(c.get("label") == NODE_LABEL and list(c.get("properties", [])) == ["id"]
               and c.get("type") == "UNIQUE" for c in constraints):
        graph.create_node_unique_constraint(NODE_LABEL, "id")
        created.append("unique(id)")
    wait_operational(graph, timeout=timeout)
    report(f"graph: {settings.graph_name} ready"
           + (f" (created {', '.join(created)})" if created else " (nothing to do)"))


def wait_operational(graph: Any, *, timeout: float) -> None:
    """Block until every index and constraint reports OPERATIONAL (they build in background)."""
    deadline = time.monotonic() + timeout
    while True:
        pending = [r["label"] for r in index_rows(graph) if r["status"] != "OPERATIONAL"]
        pending += [str(c.get("label")) for c in graph.list_constraints()
                    if c.get("status") != "OPERATIONAL"]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise GraphUnavailable(f"graph indexes still building after {timeout:.0f}s: {pending}")
        time.sleep(0.2)
