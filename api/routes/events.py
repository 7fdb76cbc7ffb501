"""`POST /v1/events` (issue 15): publish object and link events as the caller, under its
namespace (the `write` scope; `version` takes `admin`), with the source `api:<key name>`. Every
event is validated as the consumer would (envelope, payload, kind catalog) before any is sent,
off the event loop: one bad event refuses the request (422 naming `events.N.<field>`) and
nothing is published. Every event names its `id`, or the request sends an `Idempotency-Key`
the ids are derived from: a retried request is applied once. With `wait`, the answer is 200
once the pipeline has applied them all, else 202 (still `accepted`).

`POST /v1/objects/delete`: soft-delete the caller's objects of
a source or matching a filter as one `brainstream.objects.soft_delete` event, or only count them
(`dry_run`); the same scope, source, Idempotency-Key and wait as the events above."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse

from api.access import Caller, WriteNs
from api.dependencies import Svc
from api.errors import ERRORS
from api.event_schemas import (
    DeleteObjectsBody,
    DeleteObjectsOut,
    PublishedEventOut,
    PublishEventsBody,
    PublishEventsOut,
)
from api.read_routing import applied_write_headers
from pipeline.domain.errors import InvalidInput
from pipeline.ingest.deletes import selection_of
from pipeline.ingest.store.deletes import count_matching_async
from pipeline.ingest.store.ledger import PgEventLedger
from pipeline.kafka.event_writes import (
    EventWriter,
    Publisher,
    admit,
    admit_delete,
    idempotency_key,
)
from pipeline.postgres.pool import read_connection
from pipeline.retrieval.requests import check_filters
from schemas.deletes import parse_delete
from schemas.limits import DELETE_MAX

router = APIRouter(tags=["events"], responses=ERRORS)
# Events one POST /v1/events may carry (published in one batch; more in several requests).
EVENTS_MAX = 500


@router.post("/v1/events", response_model=PublishEventsOut,
             responses={202: {"model": PublishEventsOut,
                              "description": "published, not all applied yet"}})
async def publish_events(
        body: PublishEventsBody, ns: WriteNs, key: Caller, svc: Svc, request: Request,
        idempotency: Annotated[str | None, Header(
            alias="Idempotency-Key", description="derive the ids of events sent without one "
            "from it: a retry with the same key and body is applied once")] = None,
) -> JSONResponse:
    """Publish the events (signed with the API's publisher key); 202 with each `accepted`, or
    with `wait` 200 and each `applied` once the pipeline applied them all within the wait."""
    settings = svc.settings
    if len(body.events) > EVENTS_MAX:
        raise InvalidInput(f"at most {EVENTS_MAX} events per request: send more in several",
                           field="events")
    publisher = Publisher(key.name, may_version=key.allows(ns, "admin"),
                          idempotency_key=idempotency_key(idempotency))
    envelopes = [e.model_dump(mode="json", exclude_none=True) for e in body.events]
    # up to EVENTS_MAX envelopes parsed and checked: CPU work kept off the event loop
    admitted = await asyncio.to_thread(admit, envelopes, ns, await svc.catalog(),
                                       max_bytes=settings.max_event_bytes, publisher=publisher)
    writer: EventWriter = request.app.state.event_writer
    ledger = PgEventLedger(svc.pool)
    applied = await writer.publish(admitted, wait=body.wait,
                                   applied=lambda keys: ledger.applied(ns, keys))
    done = body.wait and len(applied) >= len({(a.source, a.event_id) for a in admitted})
    out = PublishEventsOut(events=[
        PublishedEventOut(event_id=a.event_id, type=a.type,
                          status="applied" if (a.source, a.event_id) in applied else "accepted")
        for a in admitted])
    return JSONResponse(status_code=200 if done else 202, content=out.model_dump(mode="json"),
                        headers=await applied_write_headers(svc, ns) if done else None)


# Ids a dry run (and every answer) shows of what matches: enough to check a filter by eye.
SAMPLE_IDS = 10


@router.post("/v1/objects/delete", response_model=DeleteObjectsOut,
             responses={202: {"model": DeleteObjectsOut,
                              "description": "published, not applied yet"}})
async def delete_objects(
        body: DeleteObjectsBody, ns: WriteNs, key: Caller, svc: Svc, request: Request,
        idempotency: Annotated[str | None, Header(
            alias="Idempotency-Key", description="derive the event's id from it: a retry "
            "with the same key is applied once")] = None,
) -> JSONResponse:
    """Soft-delete the namespace's objects of a `source` or matching `filters`/`where` (one
    `brainstream.objects.soft_delete` event, so a replay repeats it), or with `dry_run` only
    count them. The event deletes what matches when the pipeline applies it, at most `limit`."""
    payload = parse_delete(body.model_dump(mode="json", include={"source", "filters", "where",
                                                             "all"},
                                           exclude_none=True))
    check_filters(await svc.catalog(), payload.selection_filters())
    publisher = Publisher(key.name, may_version=False,
                          idempotency_key=idempotency_key(idempotency))
    admitted = admit_delete(payload, ns, max_bytes=svc.settings.max_event_bytes,
                            publisher=publisher)
    async with read_connection(svc.pool) as conn:
        matched, sample = await count_matching_async(conn, ns, selection_of(payload), SAMPLE_IDS)
    out = DeleteObjectsOut(dry_run=body.dry_run, matched=matched, limit=DELETE_MAX,
                           sample_ids=sample)
    if body.dry_run:
        return JSONResponse(status_code=200, content=out.model_dump(mode="json"))
    writer: EventWriter = request.app.state.event_writer
    ledger = PgEventLedger(svc.pool)
    applied = await writer.publish([admitted], wait=body.wait,
                                   applied=lambda keys: ledger.applied(ns, keys))
    done = (admitted.source, admitted.event_id) in applied
    out = out.model_copy(update={"event_id": admitted.event_id,
                                 "status": "applied" if done else "accepted"})
    return JSONResponse(status_code=200 if done else 202, content=out.model_dump(mode="json"),
                        headers=await applied_write_headers(svc, ns) if done else None)
