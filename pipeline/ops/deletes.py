"""`brainstream delete`: an operator's delete by source or filter, as the API's (one
`brainstream.objects.soft_delete` event on the input topic, so a replay repeats it), counted on
the active generation first."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg

from pipeline.domain.kinds import KindCatalog
from pipeline.ingest.deletes import selection_of
from pipeline.ingest.store.catalog import read_catalog
from pipeline.ingest.store.deletes import count_matching
from pipeline.retrieval.requests import check_filters
from pipeline.settings import Settings
from schemas.deletes import OBJECTS_SOFT_DELETE, ObjectsSoftDelete

# Ids a count shows: enough to check a filter by eye.
SAMPLE_IDS = 10


@dataclass(frozen=True)
class Count:
    """What matches now, and the first ids in the order a delete takes them."""

    matched: int
    sample_ids: list[uuid.UUID]


def count(settings: Settings, namespace: uuid.UUID, payload: ObjectsSoftDelete) -> Count:
    """How many objects of `namespace` the delete matches in the generation `settings` name."""
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        check_filters(KindCatalog(read_catalog(conn)), payload.selection_filters())
        matched, sample = count_matching(conn, namespace, selection_of(payload), SAMPLE_IDS)
    return Count(matched, sample)


def envelope(namespace: uuid.UUID, payload: ObjectsSoftDelete, source: str) -> dict[str, Any]:
    """The event the operator publishes (a fresh id: one command, one delete)."""
    return {"specversion": "1.0", "id": str(uuid.uuid4()), "source": source,
            "type": OBJECTS_SOFT_DELETE, "namespace": str(namespace),
            "time": datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "data": payload.model_dump(mode="json", exclude_none=True, exclude_defaults=True)}
