"""The FalkorDB projection's schema: its label, constraints and indexes, created idempotently, and
what they allow (the capabilities that writer and reader resolve from them).

Nodes are first-class objects under the label `Entity` (id, namespace, kind, title, index_text,
embedding), edges their links. Edge full-text indexes are per relation type and are created by
the writer when a type first appears (`ensure_edge_fulltext_index`), because FalkorDB cannot take
a relation type as a parameter. Extracted entities are not projected (Postgres serves every read
of them: docs/architecture.md, "The graph holds objects and links"); `prepare_graph` deletes what
an older version projected of them (`drop_entity_projection`).

FalkorDB 4.16.3 quirks absorbed here:
- Edge full-text indexes exist only as the DDL `CREATE FULLTEXT INDEX FOR ()-[e:T]->() ON
  (e.note)`; there is no `db.idx.fulltext.createRelationshipIndex` procedure in 4.16.
- Indexes and constraints build in the background, and a dropped index stays listed for a while:
  `wait_operational` and `rebuild_vector_index` wait for `db.indexes()` to catch up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import falkordb
from redis.exceptions import ResponseError

from pipeline.domain.errors import GraphUnavailable, MigrationError
from pipeline.graph.falkordb.errors import graph_errors
from pipeline.graph.falkordb.settings import GraphSettings

NODE_LABEL = "Entity"
# The label an older version projected extracted entities under (with MENTIONS edges from object
# nodes and CO_OCCURS, RELATES and POSSIBLY_SAME between them): deleted by `prepare_graph`.
RETIRED_ENTITY_LABEL = "NamedEntity"
# NamedEntity nodes deleted per statement: one statement holds the graph's write lock, so a big
# projection goes in steps that let the relay's writes and the readers in between.
_DROP_BATCH = 10_000
Report = Callable[[str], None]

INDEXES = ("CALL db.indexes() YIELD label, types, options, entitytype, status "
           "RETURN label, types, options, entitytype, status")
_ALREADY_INDEXED = "already indexed"


def _noop(_: str) -> None:
    pass


def connect(settings: GraphSettings) -> falkordb.FalkorDB:
    """A client for the configured (or embedded) FalkorDB."""
    return falkordb.FalkorDB.from_url(settings.effective_falkordb_url)


def index_row(row: list[Any]) -> dict[str, Any]:
    """One row of `INDEXES` as a dict: label, types per property, options, entity type, status."""
    label, types, options, entitytype, status = row
    return {"label": label, "types": dict(types or {}), "options": dict(options or {}),
            "entitytype": entitytype, "status": status}


def index_rows(graph: Any) -> list[dict[str, Any]]:
    """`CALL db.indexes()` as dicts (see `index_row`)."""
    return [index_row(row) for row in graph.query(INDEXES).result_set]


def _has_index(rows: list[dict[str, Any]], label: str, prop: str, kind: str,
               entitytype: str = "NODE") -> dict[str, Any] | None:
    for row in rows:
        if (row["label"] == label and row["entitytype"] == entitytype
                and kind in row["types"].get(prop, [])):
            return row
    return None


# -- capabilities ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GraphCapabilities:
    """What the graph's indexes allow, read from `CALL db.indexes()`."""

    node_fulltext: bool
    vector_dim: int | None
    edge_fulltext_types: frozenset[str]
    resolved_at: float


def parse_capabilities(rows: list[dict[str, Any]]) -> GraphCapabilities:
    """The capabilities that `index_rows` show, stamped with the time (`time.monotonic`)."""
    node_fulltext = False
    vector_dim: int | None = None
    edge_types: set[str] = set()
    for row in rows:
        types = row["types"]
        if row["entitytype"] == "NODE" and row["label"] == NODE_LABEL:
            if "FULLTEXT" in types.get("title", []) or "FULLTEXT" in types.get(
                    "index_text", []):
                node_fulltext = True
            if "VECTOR" in types.get("embedding", []):
                dim = dict(row["options"].get("embedding", {})).get("dimension")
                vector_dim = None if dim is None else int(dim)
        elif row["entitytype"] == "RELATIONSHIP" and "FULLTEXT" in types.get("note", []):
            edge_types.add(str(row["label"]))
    return GraphCapabilities(node_fulltext, vector_dim, frozenset(edge_types), time.monotonic())


def read_capabilities(graph: Any, what: str) -> GraphCapabilities:
    """The graph's capabilities now; an outage raises GraphUnavailable (naming `what`)."""
    with graph_errors(what):
        return parse_capabilities(index_rows(graph))


def ensure_edge_fulltext_index(graph: Any, relation_type: str) -> None:
    """Create the full-text index on `note` of an (already checked) relation type, unless some
    writer already has; an outage raises GraphUnavailable."""
    with graph_errors("edge index"):
        try:
            graph.query(f"CREATE FULLTEXT INDEX FOR ()-[e:`{relation_type}`]->() ON (e.note)")
        except ResponseError as exc:
            # A concurrent writer won the race: the index exists, which is all we need.
            if _ALREADY_INDEXED not in str(exc):
                raise


# -- preparation ----------------------------------------------------------------------------


def prepare_graph(settings: GraphSettings, *, report: Report = _noop,
                  timeout: float = 120.0) -> None:
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
            created.append(f"range({NODE_LABEL}.{prop})")
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
        created.append(f"unique({NODE_LABEL}.id)")
    dropped = drop_entity_projection(graph, rows, constraints)
    if dropped:
        created.append(f"deleted {dropped} {RETIRED_ENTITY_LABEL} nodes and their edges")
    wait_operational(graph, timeout=timeout)
    report(f"graph: {settings.graph_name} ready"
           + (f" ({', '.join(created)})" if created else " (nothing to do)"))


def drop_entity_projection(graph: Any, rows: list[dict[str, Any]] | None = None,
                           constraints: list[dict[str, Any]] | None = None) -> int:
    """Delete what an older version projected of the entity layer: every NamedEntity node with
    its edges (MENTIONS, CO_OCCURS, RELATES, POSSIBLY_SAME), then its constraint and indexes;
    the nodes deleted. `rows` and `constraints`: the graph's indexes and constraints, when the
    caller has just read them. Idempotent; on a graph without any, two reads and no write."""
    label = RETIRED_ENTITY_LABEL
    deleted = 0
    while True:
        result = graph.query(f"MATCH (e:{label}) WITH e LIMIT {_DROP_BATCH} DETACH DELETE e "
                             "RETURN count(e)")
        count = int(result.result_set[0][0]) if result.result_set else 0
        deleted += count
        if count < _DROP_BATCH:
            break
    for c in graph.list_constraints() if constraints is None else constraints:
        if c.get("label") == label and c.get("type") == "UNIQUE":
            graph.drop_node_unique_constraint(label, *list(c.get("properties", [])))
    for row in index_rows(graph) if rows is None else rows:
        if row["label"] == label and row["entitytype"] == "NODE":
            for prop, kinds in row["types"].items():
                if "RANGE" in kinds:
                    graph.query(f"DROP INDEX FOR (n:{label}) ON (n.{prop})")
    return deleted


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


def rebuild_vector_index(settings: GraphSettings, timeout: float = 120.0) -> None:
    """Drop and re-create the node vector index (clears orphan entries)."""
    graph = connect(settings).select_graph(settings.graph_name)
    try:
        graph.query(f"DROP VECTOR INDEX FOR (n:{NODE_LABEL}) ON (n.embedding)")
    except ResponseError as exc:
        if "no such index" not in str(exc):
            raise  # a missing index is what a rebuild repairs; anything else is not
    # The drop completes in the background: db.indexes() still lists the index right after it,
    # and prepare_graph, seeing it, would create nothing, leaving the graph without a vector
    # index (every vector query then fails; found by the fault suite). Wait until it is gone.
    deadline = time.monotonic() + timeout
    while _has_index(index_rows(graph), NODE_LABEL, "embedding", "VECTOR") is not None:
        if time.monotonic() > deadline:
            raise GraphUnavailable(
                f"the vector index was still being dropped after {timeout:.0f}s")
        time.sleep(0.1)
    prepare_graph(settings)
