"""What the client raises: `ApiError` for an answer the API refused (with the API's `code`,
`field` and `message`), `Unavailable` when 503s (or 429s) outlasted the retries, and
`ConnectionFailed` when the API could not be reached within them. Test with `isinstance` and
`code`, never with the message text."""

from __future__ import annotations

import httpx


class BrainstreamClientError(Exception):
    """Every error of this client."""


class ApiError(BrainstreamClientError):
    """The API answered with an error: `status` (HTTP), `code` (stable, e.g. `invalid_request`,
    `not_found`), `field` (the request field at fault, when one is) and `message`."""

    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(f"{status} {code}" + (f" ({field})" if field else "") + f": {message}")
        self.status = status
        self.code = code
        self.message = message
        self.field = field

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        """The error an answer carries (`{"error": {"code", "message", "field"}}`); an answer
        not in that shape (a proxy's page) keeps its status and text."""
        try:
            detail = response.json()["error"]
            code, message = str(detail["code"]), str(detail["message"])
            field = detail.get("field")
        except (ValueError, KeyError, TypeError):
            code, message, field = "http_error", response.text[:500], None
        kind = Unavailable if response.status_code in (429, 503) else cls
        return kind(response.status_code, code, message, str(field) if field else None)


class Unavailable(ApiError):
    """503 (a dependency is down, or the request ran out of time) or 429 (too many requests
    in flight for this key), still so after the last retry."""


class ConnectionFailed(BrainstreamClientError):
    """The API could not be reached (or the connection broke) on every attempt; the last
    transport error is the `__cause__`."""
