"""The API's routes, one `APIRouter` per area: search (search, find_exact, continue), graph
(entity and link find, expansion, recipes), paths (paths between objects and entities),
objects (read, children, schema), admin (liveness, readiness, metrics), operator (the
operator's status, admin keys only) and ui (the web explorer at /ui, and `GET /v1/me`).
`api/app.py` includes them."""

from __future__ import annotations

from typing import Any

from api import metrics
from api.schemas import PageOut
from pipeline.domain.read_model import Page

# OpenAPI links of every ranked answer: what a client (and a stateful test) does next with a
# page: the next page through its result set, the first object read in full, its parts.
PAGE_LINKS: dict[int | str, dict[str, Any]] = {200: {"links": {
    "NextPage": {"operationId": "continue__v1_continue_post",
                 "requestBody": {"result_set_id": "$response.body#/result_set_id"},
                 "description": "the next page (when `has_more`)"},
    "ReadFirst": {"operationId": "read_v1_objects__object_id__get",
                  "parameters": {"object_id": "$response.body#/objects/0/id"},
                  "description": "the first object with its content"},
    "ChildrenOfFirst": {"operationId": "children_v1_objects__object_id__children_get",
                        "parameters": {"object_id": "$response.body#/objects/0/id"},
                        "description": "the first object's parts"},
}}}


def page(result: Page, endpoint: str) -> PageOut:
    """A page as the API answers it; a degraded answer is counted by endpoint and mode."""
    if result.degrade:
        metrics.DEGRADED.labels(endpoint, result.degrade).inc()
    return PageOut.of(result)
