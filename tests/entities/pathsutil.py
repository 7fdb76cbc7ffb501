"""A small mixed graph per tenant for the path, schema and entity-find tests: objects and links
written by the real write path, entities, mentions and entity edges written with SQL (the
extraction stage is another piece; these tests must not depend on it)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg
from fastapi.testclient import TestClient

from pipeline.entities.names import normalise
from pipeline.settings import Settings
from tests.apiutil import ApiTenant
from tests.entities.holdutil import hold_extraction
from tests.pipelineutil import envelope, ingest, put

# O1 -cites- O2, O2 names X1 in its part, X1 -CO_OCCURS- X2 (stated by O2's part), X2 -RELATES
# (launched_by)- X3 (stated by O4), X3 named by O5: O1 reaches O2, X1, X2, X3, O5 in 1..5 hops.
# Odel (soft-deleted) would shorten every path: O1 -cites- Odel -cites- O5, Odel names X1 and X3,
# X1 -RELATES- X3 is stated by Odel alone. O6 is alone.
PART_TEXT = "Notes: Neil Armstrong flew Apollo 11 to the Moon in July 1969."
O4_TEXT = "Apollo 11 was launched by NASA from Cape Kennedy."
O5_TEXT = "NASA is the space agency of the United States."
DEL_TEXT = "Neil Armstrong worked for NASA."


@dataclass
class World(ApiTenant):
    objects: dict[str, str] = field(default_factory=dict)
    entities: dict[str, str] = field(default_factory=dict)

    def paths(self, client: TestClient, sources: list[str], targets: list[str],
              **extra: Any) -> Any:
        """POST /v1/paths by names of this world (objects or entities)."""
        body = {"from": [self.id(n) for n in sources], "to": [self.id(n) for n in targets],
                **extra}
        return client.post("/v1/paths", json=body, headers=self.headers)

    def id(self, name: str) -> str:
        return self.objects.get(name) or self.entities[name]


def build_world(settings: Settings) -> World:
    """One tenant's mixed graph (see the module's comment)."""
    ns = uuid.uuid4()
    world = World(ns, f"key-paths-{uuid.uuid4().hex[:8]}")
    o = world.objects = {n: str(uuid.uuid4()) for n in
                         ("O1", "O2", "O2p", "O4", "O5", "O6", "Odel")}
    ingest(settings, [
        put(ns, id=o["O1"], kind="company", title="Mission archive"),
        put(ns, id=o["O2"], kind="note", title="Crew notes"),
        envelope("object.put", ns, {"id": o["O2p"], "kind": "note", "parent_id": o["O2"],
                                    "position": 0, "content": PART_TEXT}),
        put(ns, id=o["O4"], kind="note", title="Launch", content=O4_TEXT),
        put(ns, id=o["O5"], kind="note", title="Agency", content=O5_TEXT),
        put(ns, id=o["O6"], kind="company", title="Unrelated"),
        put(ns, id=o["Odel"], kind="note", title="Deleted", content=DEL_TEXT),
        envelope("link.put", ns, {"from": o["O1"], "to": o["O2"], "relation_type": "cites",
                                  "meta": {"note": "the archive cites the crew notes",
                                           "confidence": 0.9}}),
        envelope("link.put", ns, {"from": o["O1"], "to": o["Odel"], "relation_type": "cites"}),
        envelope("link.put", ns, {"from": o["Odel"], "to": o["O5"], "relation_type": "cites"}),
        envelope("object.soft_delete", ns, {"id": o["Odel"]}),
    ])
    hold_extraction(settings, ns)  # this world's entities are written by hand
    e = world.entities = {n: str(uuid.uuid4()) for n in ("X1", "X2", "X3", "X4")}
    names = {"X1": ("Neil Armstrong", "NAME"), "X2": ("Apollo 11", "NAME"),
             "X3": ("NASA", "ACRONYM"), "X4": ("Moon", "NAME")}
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        for n, (name, label) in names.items():
            conn.execute("INSERT INTO entities (id, namespace_id, name, norm, label, part_count)"
                         " VALUES (%s, %s, %s, %s, %s, 1)",
                         (e[n], ns, name, normalise(name), label))
        mention(conn, ns, o["O2p"], PART_TEXT, e["X1"], "Neil Armstrong", "NAME")
        mention(conn, ns, o["O2p"], PART_TEXT, e["X2"], "Apollo 11", "NAME")
        mention(conn, ns, o["O2p"], PART_TEXT, e["X4"], "Moon", "NAME")
        mention(conn, ns, o["O4"], O4_TEXT, e["X2"], "Apollo 11", "NAME")
        mention(conn, ns, o["O4"], O4_TEXT, e["X3"], "NASA", "ACRONYM")
        mention(conn, ns, o["O5"], O5_TEXT, e["X3"], "NASA", "ACRONYM")
        mention(conn, ns, o["Odel"], DEL_TEXT, e["X1"], "Neil Armstrong", "NAME")
        mention(conn, ns, o["Odel"], DEL_TEXT, e["X3"], "NASA", "ACRONYM")
        entity_edge(conn, ns, e["X1"], e["X2"], "CO_OCCURS", weight=1, evidence=[o["O2p"]])
        entity_edge(conn, ns, e["X2"], e["X3"], "RELATES", predicate="launched_by",
                    evidence=[o["O4"]])
        entity_edge(conn, ns, e["X1"], e["X3"], "RELATES", predicate="worked_for",
                    evidence=[o["Odel"]])
    return world


def mention(conn: psycopg.Connection[Any], ns: uuid.UUID, row_id: str, text: str,
            entity_id: str, surface: str, label: str) -> None:
    """A mention of `surface` where it first appears in the row's content."""
    start = text.index(surface)
    conn.execute("INSERT INTO mentions (row_id, field, start_pos, end_pos, namespace_id,"
                 " entity_id, label, text) VALUES (%s, 'content', %s, %s, %s, %s, %s, %s)",
                 (row_id, start, start + len(surface), ns, entity_id, label, surface))


def entity_edge(conn: psycopg.Connection[Any], ns: uuid.UUID, a: str, b: str, edge_type: str,
                *, predicate: str = "", weight: float = 0, evidence: list[str] | None = None,
                status: str | None = None) -> None:
    """An entity edge; the symmetric types are stored once, from the smaller id."""
    if edge_type != "RELATES":
        a, b = sorted((a, b))
    conn.execute("INSERT INTO entity_edges (namespace_id, from_id, to_id, edge_type, predicate,"
                 " weight, status, evidence) VALUES (%s, %s, %s, %s, %s, %s, %s, %s::uuid[])",
                 (ns, a, b, edge_type, predicate, weight, status, evidence or []))
