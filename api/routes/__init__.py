"""The API's routes, one `APIRouter` per area: search (search, find_exact, continue), graph
(entity and link find, expansion, recipes), objects (read, children, schema) and admin
(liveness, readiness, metrics). `api/app.py` includes them."""

from __future__ import annotations

from api import metrics
from api.schemas import PageOut
from pipeline.domain.read_model import Page


def page(result: Page, endpoint: str) -> PageOut:
    """A page as the API answers it; a degraded answer is counted by endpoint and mode."""
    if result.degrade:
        metrics.DEGRADED.labels(endpoint, result.degrade).inc()
    return PageOut.of(result)
