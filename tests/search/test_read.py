"""PgObjectReader on the real database: hydration, children and siblings of visible objects of one
namespace only."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import psycopg
import pytest

from pipeline.domain.chunking import explicit_part_id
from pipeline.domain.read_model import Filters
from pipeline.retrieval.store.objects import PgObjectReader
from pipeline.retrieval.store.search import PgPartSearcher
from tests.pipelineutil import envelope, put
from tests.search.searchref import apply_events

pytestmark = pytest.mark.stack

DOC = "\n\n".join(f"Section {i} describes berth {i} of the harbor in plain words."
                  for i in range(8))


def _part(ns: uuid.UUID, parent: str, position: int, content: str) -> dict[str, Any]:
    return envelope("object.put", ns, {"kind": "note", "parent_id": parent,
                                       "position": position, "content": content})


@pytest.fixture(scope="module")
def tenants(db: psycopg.Connection[Any]) -> dict[str, Any]:
    """The same documents in two namespaces; in each, one deleted object and one deleted part."""
    out: dict[str, Any] = {}
    for name in ("a", "b"):
        ns = uuid.uuid4()
        doc = put(ns, kind="report", title="Harbor report", summary="s", content=DOC,
                  properties={"region": "north"}, content_type="text/plain")
        bare = put(ns, kind="company", title="Harbor Inc")
        manual = put(ns, kind="manual", title="Manual")
        gone = put(ns, kind="company", title="Gone Ltd")
        pid = manual["data"]["id"]
        parts = [_part(ns, pid, p, f"manual page {p}") for p in (0, 1, 2, 3, 5, 6)]
        apply_events(db, [doc, bare, manual, gone, *parts])
        dead_part = str(explicit_part_id(ns, uuid.UUID(pid), 2))
        apply_events(db, [envelope("object.soft_delete", ns, {"id": gone["data"]["id"]}),
                          envelope("object.soft_delete", ns, {"id": dead_part})])
        out[name] = {"ns": ns, "doc": uuid.UUID(doc["data"]["id"]),
                     "bare": uuid.UUID(bare["data"]["id"]), "manual": uuid.UUID(pid),
                     "gone": uuid.UUID(gone["data"]["id"]), "dead_part": uuid.UUID(dead_part)}
    return out


def test_hydrate_returns_visible_objects_of_the_namespace(
        tenants: dict[str, Any], aio: asyncio.Runner, reader: PgObjectReader) -> None:
    a, b = tenants["a"], tenants["b"]
    asked = [a["doc"], a["bare"], a["gone"], a["dead_part"], b["doc"], b["bare"], uuid.uuid4()]
    got = aio.run(reader.hydrate(a["ns"], asked))
    assert set(got) == {a["doc"], a["bare"]}
    doc = got[a["doc"]]
    assert (doc.kind, doc.title, doc.summary, doc.properties, doc.content_type) == (
        "report", "Harbor report", "s", {"region": "north"}, "text/plain")
    assert (doc.score, doc.parent_id, doc.position, doc.content) == (0.0, None, None, None)
    assert doc.created_at <= doc.updated_at
    full = aio.run(reader.hydrate(a["ns"], [a["doc"]], with_content=True))
    assert full[a["doc"]].content == DOC
    assert aio.run(reader.hydrate(a["ns"], [])) == {}


def test_hydrate_parts_and_hidden_parts_of_deleted_parents(
        tenants: dict[str, Any], db: psycopg.Connection[Any], aio: asyncio.Runner,
        reader: PgObjectReader, searcher: PgPartSearcher) -> None:
    a = tenants["a"]
    part = explicit_part_id(a["ns"], a["manual"], 1)
    got = aio.run(reader.hydrate(a["ns"], [part], with_content=True))
    assert got[part].parent_id == a["manual"] and got[part].position == 1
    assert got[part].content == "manual page 1"
    # a part row left visible under a deleted parent (never written so, but not trusted either)
    ns = uuid.uuid4()
    parent = put(ns, kind="manual", title="Orphaned")
    apply_events(db, [parent, _part(ns, parent["data"]["id"], 0, "orphan text")])
    apply_events(db, [envelope("object.soft_delete", ns, {"id": parent["data"]["id"]})])
    orphan = explicit_part_id(ns, uuid.UUID(parent["data"]["id"]), 0)
    db.execute("UPDATE objects SET deleted_at = NULL WHERE id = %s", (orphan,))
    assert aio.run(reader.hydrate(ns, [orphan])) == {}
    assert aio.run(reader.siblings(ns, orphan, radius=3)) == []
    assert aio.run(searcher.row_meta(ns, [orphan])) == {}
    assert aio.run(searcher.search_lexical(ns, "orphan", Filters(), [], 5)) == []
    assert aio.run(searcher.exact_matches(ns, str(orphan), Filters(), [], 5)) == []


def test_children_by_position_visible_only_paged(
        tenants: dict[str, Any], aio: asyncio.Runner, reader: PgObjectReader) -> None:
    a, b = tenants["a"], tenants["b"]
    kids = aio.run(reader.children(a["ns"], a["manual"]))
    assert [k.position for k in kids] == [0, 1, 3, 5, 6]
    assert [k.content for k in kids] == [f"manual page {p}" for p in (0, 1, 3, 5, 6)]
    assert all(k.parent_id == a["manual"] for k in kids)
    page = aio.run(reader.children(a["ns"], a["manual"], offset=1, limit=2))
    assert [k.position for k in page] == [1, 3]
    assert aio.run(reader.children(a["ns"], a["manual"], offset=10)) == []
    # another tenant's parent, a deleted parent, an object without parts: nothing
    assert aio.run(reader.children(a["ns"], b["manual"])) == []
    assert aio.run(reader.children(a["ns"], a["gone"])) == []
    assert aio.run(reader.children(a["ns"], a["bare"])) == []
    chunked = aio.run(reader.children(a["ns"], a["doc"], limit=1000))
    assert len(chunked) >= 3
    assert [k.position for k in chunked] == list(range(len(chunked)))
    assert "".join(k.content or "" for k in chunked).count("Section") == 8


def test_siblings_within_radius(tenants: dict[str, Any], aio: asyncio.Runner,
                                reader: PgObjectReader) -> None:
    a, b = tenants["a"], tenants["b"]
    ns, manual = a["ns"], a["manual"]

    def around(position: int, radius: int, namespace: uuid.UUID = ns) -> list[int | None]:
        found = aio.run(reader.siblings(namespace, explicit_part_id(ns, manual, position),
                                        radius=radius))
        return [s.position for s in found]

    assert around(3, 1) == []  # 2 is deleted, 4 never existed
    assert around(3, 2) == [1, 5]
    assert around(1, 1) == [0]
    assert around(0, 10) == [1, 3, 5, 6]
    assert around(5, 0) == []
    assert around(3, 2, b["ns"]) == []  # a's part, asked in b
    assert aio.run(reader.siblings(ns, a["dead_part"], radius=5)) == []
    assert aio.run(reader.siblings(ns, a["bare"], radius=5)) == []  # not a part
