"""How errors leave the API: a status per error type, and one JSON body shape for all of them
(`{"error": {"code", "message", "field"}}`), from the core's errors, a database outage, an unknown
route or a request that fails validation.

A dependency outage (503) tells the client its code and to retry, nothing more: the driver's
text names hosts, ports and users, so it goes to the log only.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.schemas import ErrorOut
from pipeline.domain.errors import (
    BrainstreamError,
    DegradedAnswer,
    InvalidInput,
    NamespaceForbidden,
    NotFound,
    OperatorRequired,
    Overloaded,
    RecipeReadOnly,
    ScopeRequired,
    TooManyRequests,
    Unauthorized,
    Unavailable,
)
from pipeline.domain.memory_errors import PrivilegedKeyRequired

log = logging.getLogger(__name__)

UNAVAILABLE_MESSAGE = "a dependency is unavailable; retry later"

STATUS = {
    PrivilegedKeyRequired: 403,  # an InvalidInput: listed before it
    NotFound: 404,
    Unauthorized: 401,
    NamespaceForbidden: 403,
    RecipeReadOnly: 403,
    ScopeRequired: 403,
    OperatorRequired: 403,
    TooManyRequests: 429,
    Unavailable: 503,
    InvalidInput: 422,
}

# The error answers every authenticated route documents.
ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorOut, "description": "the body is not valid JSON"},
    401: {"model": ErrorOut, "description": "missing or unknown API key"},
    403: {"model": ErrorOut, "description": "the key is not bound to that namespace, lacks"
                                             " the scope the request needs"
                                             " (`scope_required`), the recipe is a read-only"
                                             " operator default, the operator's status needs"
                                             " an operator key, or a message's `system`"
                                             " metadata key was given"},
    404: {"model": ErrorOut, "description": "not found in this namespace"},
    408: {"model": ErrorOut, "description": "the body did not arrive in time (api/limits.py)"},
    413: {"model": ErrorOut, "description": "the body is too large (api/limits.py)"},
    422: {"model": ErrorOut, "description": "invalid request (the error names the field)"},
    429: {"model": ErrorOut, "description": "this key is over its share (requests in flight, "
                                            "publishes per second, database connections)"},
    503: {"model": ErrorOut, "description": "a dependency is unavailable, the process is "
                                            "overloaded, the request ran out of time, or"
                                            " `strict` refused a degraded answer"
                                            " (`degraded_answer`)"},
}


def status_of(exc: BrainstreamError) -> int:
    """The HTTP status of a core error (500 for a type with none)."""
    for cls, status in STATUS.items():
        if isinstance(exc, cls):
            return status
    return 500


def error_response(exc: BrainstreamError) -> JSONResponse:
    """The JSON answer for a core error (an outage's details are logged, not answered)."""
    status = status_of(exc)
    body: dict[str, str | None] = dict(exc.to_dict())
    if isinstance(exc, Overloaded):  # our own refusal: its message names no host
        body["field"] = None
    elif isinstance(exc, DegradedAnswer):  # `strict` refused a degraded answer: says which
        pass
    elif status >= 500:
        log.warning("answered %d %s: %s", status, exc.code, exc.message)
        body = {"code": exc.code, "message": UNAVAILABLE_MESSAGE if isinstance(exc, Unavailable)
                else "internal error", "field": None}
    retry_after = getattr(exc, "retry_after", None)
    headers = {"Retry-After": str(retry_after)} if retry_after is not None else None
    return JSONResponse(status_code=status, content={"error": body}, headers=headers)


async def brainstream_error(request: Request, exc: BrainstreamError) -> JSONResponse:
    """A core error, with its code, message and field."""
    return error_response(exc)


async def unexpected_error(request: Request, exc: Exception) -> JSONResponse:
    """Any other failure: a JSON 500 with code `internal` and no detail (the server logs the
    traceback), never Starlette's plain-text page."""
    return JSONResponse(status_code=500, content={"error": {
        "code": "internal", "message": "internal error", "field": None}})


async def database_down(request: Request, exc: Exception) -> JSONResponse:
    """Postgres restarting or unreachable wherever the query ran: a 503 the client may retry,
    never a 500 (most reads map this already: pipeline.postgres.pool.read_connection)."""
    return error_response(Unavailable(f"postgres: {type(exc).__name__}: {exc}"))


async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    """Starlette's own errors (unknown route, wrong method, unparsable body) in our shape."""
    codes = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}
    return JSONResponse(status_code=exc.status_code, headers=exc.headers,
                        content={"error": {"code": codes.get(exc.status_code, "http_error"),
                                           "message": str(exc.detail), "field": None}})


async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
    """A request the schemas refuse: 422 naming the first field at fault."""
    first = _first_error(exc.errors(), exc.body)
    field = ".".join(first[0]) or None
    error = first[1]
    empty = error.get("type") in ("missing", "string_too_short", "string_pattern_mismatch")
    code = "query_required" if field == "query" and empty else "invalid_request"
    message = f"{field or 'request'}: {error.get('msg')}"
    if field is None and error.get("type") == "model_attributes_type":
        message = "the body must be a JSON object (send Content-Type: application/json)"
    return JSONResponse(status_code=422, content={"error": {
        "code": code, "message": message, "field": field or "body"}})


def _first_error(errors: Sequence[Any], body: Any) -> tuple[list[str], dict[str, Any]]:
    """(field path, error) of the first error that says what is wrong: a union's branch that
    only reports the wrong type (`kind` is not a string) gives way to the branch that matched
    the type and found the fault (`kind[0]` holds NUL)."""
    found = [(_field_path(e.get("loc", ()), body), e) for e in errors]
    if not found:
        return [], {"loc": (), "msg": "invalid request"}
    for path, error in found:
        branch_miss = str(error.get("type", "")).endswith("_type") and any(
            other[:len(path)] == path and not str(e.get("type", "")).endswith("_type")
            for other, e in found)
        if not branch_miss:
            return path, error
    return found[0]


def _field_path(loc: Sequence[Any], body: Any) -> list[str]:
    """The steps of `loc` that name a field or an item of the request. Pydantic adds a union
    branch's tag (`str`, `list[...]`, `function-after[...]`) to the loc, which names no part of
    the request: a step that is no key or index of the value reached is left out."""
    steps = list(loc)
    if steps and steps[0] in ("body", "query", "path", "header"):
        node = body if steps.pop(0) == "body" else None  # where it came from, not which field
    else:
        node = None
    parts = []
    for step in steps:
        if isinstance(node, dict):
            node = node.get(step)  # a field, given or missing
        elif isinstance(node, list) and isinstance(step, int):
            node = node[step] if 0 <= step < len(node) else None
        elif node is not None:
            continue  # a union branch's tag
        parts.append(str(step))
    return parts
