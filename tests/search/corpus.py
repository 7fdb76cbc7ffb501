"""The shared search corpus: two namespaces with the same titles, contents and properties
(different ids), soft-deleted objects and parts in each, random embeddings, spread dates."""

from __future__ import annotations

import asyncio
import random
import uuid
from datetime import UTC, datetime
from typing import Any

import numpy as np
import psycopg

from pipeline.domain.chunking import explicit_part_id
from pipeline.domain.read_model import Hit
from tests.pipelineutil import envelope, put
from tests.search.searchref import apply_events, load_rows

WORDS = [
    "harbor", "cargo", "vessel", "crane", "berth", "container", "customs", "tariff", "invoice",
    "ledger", "audit", "compliance", "contract", "renewal", "pricing", "discount", "churn",
    "pipeline", "forecast", "quarter", "revenue", "margin", "supplier", "logistics", "freight",
    "warehouse", "inventory", "shipment", "delay", "penalty", "clause", "warranty", "insurance",
    "premium", "claim"]
TITLES = ["Rotterdam port deal", "Hamburg freight contract", "Annual audit notes",
          "Supplier pricing review", "Warehouse expansion", "SOC 2 compliance report",
          "Churn forecast Q3", "Insurance claim 42"]
KINDS = ("deal", "company", "note")
STAGES = ("won", "lost", "open")
TAGS = ("red", "green", "blue")
BASE = datetime(2024, 1, 1, tzinfo=UTC)
K_ALL = 10_000


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _events(ns: uuid.UUID, seed: int) -> tuple[list[dict[str, Any]], list[str]]:
    """The same corpus for any namespace (seeded); returns puts and the ids to soft-delete."""
    rng = random.Random(seed)
    events: list[dict[str, Any]] = []
    for i in range(40):
        props: dict[str, Any] = {"stage": rng.choice(STAGES),
                                 "tags": rng.sample(TAGS, rng.randint(0, 2)),
                                 "amount": rng.choice([10, 20, 30]), "flag": rng.random() < 0.5,
                                 "code": f"AB-{i % 5}"}
        long_doc = rng.random() < 0.4
        content = _text(rng, rng.randint(30, 90) if long_doc else rng.randint(3, 15))
        if i % 7 == 0:
            content += " Port of Rotterdam terminal"
        events.append(put(ns, kind=KINDS[i % 3], title=f"{TITLES[i % len(TITLES)]} {i}",
                          content=content, properties=props))
    parent = events[0]["data"]["id"]
    events.append(envelope("object.put", ns, {"kind": "note", "parent_id": parent, "position": 50,
                                              "content": "explicit part about customs tariff"}))
    # a parent (with or without parts), and an explicit part of a visible parent
    deleted = [events[1]["data"]["id"], events[2]["data"]["id"],
               str(explicit_part_id(ns, uuid.UUID(parent), 50))]
    return events, deleted


def build_corpus(db: psycopg.Connection[Any]) -> dict[str, Any]:
    """Write the corpus in two namespaces `a` and `b`; `rows` is every row as written."""
    ns_a, ns_b = uuid.uuid4(), uuid.uuid4()
    for ns in (ns_a, ns_b):
        events, deleted = _events(ns, seed=7)
        apply_events(db, events)
        apply_events(db, [envelope("object.soft_delete", ns, {"id": d}) for d in deleted])
    # spread the promoted objects over time (the write path stamps them all with now())
    db.execute("UPDATE objects SET created_at = %s + (row_n * interval '1 day'),"
               " updated_at = %s + (row_n * interval '2 day')"
               " FROM (SELECT id AS rid, row_number() OVER (ORDER BY title) AS row_n FROM objects"
               "       WHERE parent_id IS NULL) AS r WHERE id = r.rid", (BASE, BASE))
    apply_events(db, [put(ns_b, kind="note", title="Only in B", content="zebracorn sighting")])
    rng = np.random.default_rng(3)
    ids = [r[0] for r in db.execute("SELECT id FROM objects ORDER BY id").fetchall()]
    with db.cursor() as cur:
        cur.executemany("UPDATE object_embeddings SET embedding = %s, embed_status = 'done'"
                        " WHERE id = %s",
                        [(rng.random(256).astype(np.float32), i) for i in ids])
    rows = load_rows(db)
    return {"a": ns_a, "b": ns_b, "rows": rows}


def run(aio: asyncio.Runner, coro: Any) -> Any:
    return aio.run(coro)


def hit_ids(hits: list[Hit]) -> list[uuid.UUID]:
    return [h.id for h in hits]
