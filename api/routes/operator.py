"""The operator's status as JSON (`GET /v1/admin/status`): what `brainstream status` computes,
the dead letters with their reasons and the index generations, for the web explorer's operator
page. It spans every tenant, so it takes a key with `operator: true` (`BRAINSTREAM_API_KEYS`);
a tenant's key is refused (403 `operator_required`)."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request

from api.access import Operator
from api.dependencies import Svc
from api.errors import ERRORS
from pipeline.ops.operator_view import operator_view
from pipeline.settings import Settings

router = APIRouter(tags=["ops"], responses=ERRORS)


@router.get("/v1/admin/status")
async def admin_status(request: Request, svc: Svc, key: Operator) -> dict[str, Any]:
    """Services, consumer lag, backlogs (outbox, embedding, extraction, memory, queues), the
    dead letters (oldest first, at most UI_DEAD_LETTERS_MAX, with their code and message) and
    the index generations; a part that could not be read is named in `errors`."""
    settings: Settings = request.app.state.settings
    # blocking reads (Kafka, Postgres, Redis probes) off the event loop
    return await asyncio.to_thread(operator_view, svc.settings, settings,
                                   max_letters=settings.ui_dead_letters_max)
