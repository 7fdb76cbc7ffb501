"""The MCP server's one way to the API: an HTTP call with the caller's credentials, its JSON
answer, or a tool error carrying the API's JSON error (status, code, message, field)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from pipeline.domain.errors import InvalidInput

# The request headers a caller's own credentials travel in (forwarded over streamable HTTP).
FORWARDED = ("authorization", "x-namespace")


class ApiToolError(ToolError):
    """An API answer that was not a success, as the model reads it: the API's JSON error with
    the HTTP status (`{"status": 422, "error": {"code", "message", "field"}}`)."""

    def __init__(self, status: int, error: Mapping[str, Any]) -> None:
        self.status = status
        self.error = dict(error)
        super().__init__(json.dumps({"status": status, "error": self.error}))


# Path segments a URL resolves away (RFC 3986 dot segments) or that leave the step empty: quoting
# keeps them as they are, so `read(object_id="..")` would become `GET /v1/`.
DOT_SEGMENTS = ("", ".", "..")


def segment(value: str, argument: str) -> str:
    """A caller's value placed in a URL path: quoted whole, so it never adds a path step; a dot
    segment or an empty one is a tool error naming `argument` (the API's 422 shape)."""
    if value in DOT_SEGMENTS:
        raise ApiToolError(422, {"code": InvalidInput.code, "field": argument,
                                 "message": f"{argument}: {value!r} is not an id (empty, `.` "
                                            "and `..` are refused)"})
    return quote(value, safe="")


@dataclass(frozen=True)
class ApiBackend:
    """Where the API is and how a call authenticates: over stdio with the server's own key
    (MCP_API_KEY, and MCP_NAMESPACE for a key with several), over HTTP with the caller's
    Authorization (and X-Namespace) headers."""

    base_url: str
    timeout: float
    api_key: str | None = None
    namespace: str | None = None
    forward_caller: bool = False

    def credentials(self, ctx: Context | None) -> dict[str, str]:
        """The headers that authenticate this call."""
        if self.forward_caller:
            given = (ctx.headers if ctx is not None else None) or {}
            lowered = {k.lower(): v for k, v in given.items()}
            return {name: lowered[name] for name in FORWARDED if name in lowered}
        out = {}
        if self.api_key:
            out["authorization"] = f"Bearer {self.api_key}"
        if self.namespace:
            out["x-namespace"] = self.namespace
        return out

    async def call(self, ctx: Context | None, method: str, path: str, *,
                   body: Mapping[str, Any] | None = None,
                   params: Mapping[str, Any] | None = None) -> Any:
        """One API call; its JSON answer (None for 204), or `ApiToolError`."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            async with httpx.AsyncClient(base_url=self.base_url, timeout=self.timeout) as http:
                response = await http.request(method, path, json=body, params=query,
                                              headers=self.credentials(ctx))
        except httpx.HTTPError as exc:
            raise self.unreachable(exc) from exc
        return answer_of(response)

    def fetch_sync(self, path: str) -> Any:
        """A GET with the server's own key, before the server runs (the schema at start)."""
        try:
            with httpx.Client(base_url=self.base_url, timeout=self.timeout) as http:
                response = http.get(path, headers=self.credentials(None))
        except httpx.HTTPError as exc:
            raise self.unreachable(exc) from exc
        return answer_of(response)

    def unreachable(self, exc: Exception) -> ApiToolError:
        """The tool error of an API that did not answer (a 503 the model may retry)."""
        return ApiToolError(503, {"code": "unavailable", "field": None,
                                  "message": f"the API at {self.base_url} did not answer "
                                             f"({type(exc).__name__}); retry later"})


def answer_of(response: httpx.Response) -> Any:
    """The JSON of a success; the API's error as an `ApiToolError` otherwise."""
    if response.status_code == 204:
        return None
    try:
        payload = response.json()
    except ValueError:
        payload = None
    if response.is_success:
        return payload
    error = payload.get("error") if isinstance(payload, dict) else None
    if not isinstance(error, dict):
        error = {"code": "http_error", "field": None,
                 "message": f"the API answered {response.status_code}"}
    raise ApiToolError(response.status_code, error)
