"""What the sync and the async client share: where the API is and who calls it, how an
operation becomes a request, when a failed attempt is retried, and how an answer becomes a
value or an `ApiError`. Only the sending (and the sleeping) differs between the two."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel

from brainstream_client.errors import ApiError
from brainstream_client.operations import Operation
from brainstream_client.retry import RETRY_STATUSES, RetryPolicy, retryable_failure

T = TypeVar("T")

DEFAULT_URL = "http://127.0.0.1:8000"
USER_AGENT = "brainstream-client/0.1.0"


def connection(base_url: str | None, api_key: str | None,
               namespace: str | None) -> tuple[str, dict[str, str]]:
    """The base URL and headers; what is not given comes from BRAINSTREAM_API_URL,
    BRAINSTREAM_API_KEY and BRAINSTREAM_NAMESPACE (X-Namespace: for a key bound to several
    namespaces)."""
    url = base_url or os.environ.get("BRAINSTREAM_API_URL") or DEFAULT_URL
    key = api_key or os.environ.get("BRAINSTREAM_API_KEY")
    ns = namespace or os.environ.get("BRAINSTREAM_NAMESPACE")
    headers = {"User-Agent": USER_AGENT}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    if ns:
        headers["X-Namespace"] = str(ns)
    return url.rstrip("/"), headers


def prepare(op: Operation[Any], path: Mapping[str, object] | None,
            query: Mapping[str, object] | None, body: BaseModel | None
            ) -> tuple[str, dict[str, Any], Any]:
    """(url, query parameters, JSON body) of one call. Unset optional fields (None) are left
    out of both: the API's defaults apply."""
    params = {k: str(v) for k, v in (query or {}).items() if v is not None}
    payload = (body.model_dump(mode="json", by_alias=True, exclude_none=True)
               if body is not None else None)
    return op.url(**(path or {})), params, payload


def retry_wait(policy: RetryPolicy, op: Operation[Any], retry: int, *,
               response: httpx.Response | None = None,
               error: httpx.TransportError | None = None) -> float | None:
    """Seconds to wait before retrying this failed attempt, or None: do not retry (the
    answer stands, or the failure is final)."""
    if retry + 1 >= policy.attempts:
        return None
    if error is not None:
        return policy.delay(retry) if retryable_failure(error, op.idempotent) else None
    assert response is not None
    if response.status_code in RETRY_STATUSES and response.status_code not in op.answers:
        return policy.delay(retry, response.headers.get("Retry-After"))
    return None


def answer(op: Operation[T], response: httpx.Response) -> T:
    """The operation's value, or the `ApiError` the API answered."""
    if response.status_code not in op.answers:
        raise ApiError.from_response(response)
    return op.parse(response)
