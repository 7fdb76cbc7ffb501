"""`POST /v1/events` (issue 15): publish object and link events as the caller, under its
namespace. Every event is validated as the consumer would (envelope, payload, kind catalog)
before any is sent: one bad event refuses the request (422 naming `events.N.<field>`) and
nothing is published. With `wait`, the answer is 200 once the pipeline has applied them all,
else 202 (still `accepted`)."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from api.dependencies import Ns, Svc
from api.errors import ERRORS
from api.event_schemas import PublishedEventOut, PublishEventsBody, PublishEventsOut
from pipeline.domain.errors import InvalidInput
from pipeline.ingest.store.ledger import PgEventLedger
from pipeline.kafka.event_writes import EventWriter, admit

router = APIRouter(tags=["events"], responses=ERRORS)
# Events one POST /v1/events may carry (published in one batch; more in several requests).
EVENTS_MAX = 500


@router.post("/v1/events", response_model=PublishEventsOut,
             responses={202: {"model": PublishEventsOut,
                              "description": "published, not all applied yet"}})
async def publish_events(body: PublishEventsBody, ns: Ns, svc: Svc,
                         request: Request) -> JSONResponse:
    """Publish the events (signed with the API's publisher key); 202 with each `accepted`, or
    with `wait` 200 and each `applied` once the pipeline applied them all within the wait."""
    settings = svc.settings
    if len(body.events) > EVENTS_MAX:
        raise InvalidInput(f"at most {EVENTS_MAX} events per request "
                           "(API_EVENTS_MAX)", field="events")
    envelopes = [e.model_dump(mode="json", exclude_none=True) for e in body.events]
    admitted = admit(envelopes, ns, await svc.catalog(), max_bytes=settings.max_event_bytes)
    writer: EventWriter = request.app.state.event_writer
    ledger = PgEventLedger(svc.pool)
    applied = await writer.publish(admitted, wait=body.wait,
                                   applied=lambda keys: ledger.applied(ns, keys))
    done = body.wait and len(applied) >= len({(a.source, a.event_id) for a in admitted})
    out = PublishEventsOut(events=[
        PublishedEventOut(event_id=a.event_id, type=a.type,
                          status="applied" if (a.source, a.event_id) in applied else "accepted")
        for a in admitted])
    return JSONResponse(status_code=200 if done else 202, content=out.model_dump(mode="json"))
