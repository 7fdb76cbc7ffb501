"""A client of one OpenAI-compatible route (`/embeddings` or `/chat/completions`): the URL
check, the bearer key, the timeout, the retry policy (tenacity, through
`pipeline.domain.retry`), the mapping of failures to the caller's errors, and the reading of a
chat completion's text or JSON content.

Failures are the caller's own errors, so its callers tell them apart as before: transport
trouble (refused connection, timeout, reset), 408, 429 and 5xx are `unavailable` (may pass:
retried by the policy, then raised); any other status, a body that is not JSON and an answer
off the contract are `refused` (asking again gets the same answer: never retried).

Create a client in the process that uses it (after any fork): it owns a pooled `httpx.Client`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import httpx
from pydantic import SecretStr

from pipeline.domain.errors import BrainstreamError, ConfigError, Unavailable
from pipeline.domain.retry import retry_transient

# Statuses that say "try again later" rather than "this request is wrong".
TRANSIENT_STATUSES = frozenset({408, 429})
_EXCERPT = 200


@dataclass(frozen=True)
class CallerErrors:
    """How the caller names its failures: `what` starts every message ("embedder"),
    `url_field` is the setting a bad URL is reported against, `unavailable` is raised for what
    may pass and `refused` for what will not."""

    what: str
    url_field: str
    unavailable: type[Unavailable]
    refused: type[BrainstreamError]


@dataclass(frozen=True)
class RetryPolicy:
    """Attempts per request (1: no retry inside the request; the stages retry whole batches
    with their own budgets) and the cap of the jittered backoff between them, in seconds."""

    attempts: int = 1
    max_wait: float = 2.0


NO_RETRY = RetryPolicy()
# The policy of every model server call (embedder, extractor, summariser): one attempt. The stages
# already retry whole batches with back-off, and more attempts here would multiply with theirs
# (and delay the API's lexical-only answer while a query embedder is down).
MODEL_HTTP_RETRY = NO_RETRY


def retry_policy() -> RetryPolicy:
    """The retry policy inside one model server request (`MODEL_HTTP_RETRY`)."""
    return MODEL_HTTP_RETRY


def secret(value: SecretStr | None) -> str | None:
    """A key setting's value, None when unset."""
    return value.get_secret_value() if value is not None else None


class OpenAICompatClient:
    """POSTs JSON to one route of an OpenAI-compatible server and answers the JSON of a 200."""

    def __init__(self, url: str, route: str, errors: CallerErrors, *, model: str | None = None,
                 api_key: str | None = None, timeout: float = 60.0,
                 retry: RetryPolicy = NO_RETRY) -> None:
        """`url` is the base (".../v1") or the full route; `model` is sent as given (omitted
        when None); `api_key` becomes a bearer token. A URL that is not absolute http(s)
        raises ConfigError naming `errors.url_field`."""
        if timeout <= 0 or retry.attempts < 1 or retry.max_wait <= 0:
            raise ValueError("timeout, retry attempts and retry wait must be positive")
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise ConfigError(f"{errors.what} URL {url!r} is invalid: {exc}",
                              field=errors.url_field) from exc
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise ConfigError(f"{errors.what} URL {url!r} must be an absolute http(s) URL",
                              field=errors.url_field)
        base = url.rstrip("/")
        self.endpoint = base if base.endswith(f"/{route}") else f"{base}/{route}"
        self.errors = errors
        self.model = model
        self.retry = retry
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(timeout=httpx.Timeout(timeout), headers=headers)

    def close(self) -> None:
        """Close the pooled connections."""
        self._client.close()

    def __enter__(self) -> OpenAICompatClient:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def refused(self, problem: str) -> BrainstreamError:
        """The caller's permanent error for an answer off its contract, naming the endpoint."""
        return self.errors.refused(f"{self.errors.what} {self.endpoint} {problem}")

    def post(self, payload: dict[str, Any]) -> Any:
        """The decoded JSON of a 200 answer to `payload` (plus `model`), after the retries
        the policy allows for transient failures."""
        body = payload if self.model is None else {**payload, "model": self.model}
        return retry_transient(lambda: self._post_once(body), attempts=self.retry.attempts,
                               max_wait=self.retry.max_wait,
                               transient=(self.errors.unavailable,))

    def _post_once(self, payload: dict[str, Any]) -> Any:
        where = f"{self.errors.what} {self.endpoint}"
        try:
            response = self._client.post(self.endpoint, json=payload)
        except httpx.UnsupportedProtocol as exc:
            raise self.errors.refused(f"{where}: {exc}") from exc
        except httpx.TransportError as exc:
            # Connect/read/write errors and timeouts: the server may be back soon.
            raise self.errors.unavailable(
                f"{where} unreachable: {type(exc).__name__}: {exc}") from exc
        status = response.status_code
        if status in TRANSIENT_STATUSES or status >= 500:
            raise self.errors.unavailable(f"{where} answered {status}: {_body(response)}")
        if status != 200:
            raise self.errors.refused(f"{where} answered {status}: {_body(response)}")
        try:
            return response.json()
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError both are ValueErrors
            raise self.refused(f"returned a body that is not JSON: {exc}: "
                               f"{_body(response)}") from exc

    def chat(self, messages: list[dict[str, str]], **options: Any) -> str:
        """The text of the first choice of a chat completion of `messages` (`options` go into
        the request as they are)."""
        answer = self.post({"messages": messages, **options})
        try:
            content = answer["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise self.refused("returned no chat completion (choices[0].message.content): "
                               f"{excerpt(json.dumps(answer))}") from exc
        if not isinstance(content, str):
            raise self.refused("returned a message content that is not text")
        return content

    def chat_json(self, messages: list[dict[str, str]]) -> Any:
        """The JSON a chat completion answers in JSON mode (deterministic: temperature 0); a
        Markdown fence around it is removed."""
        text = self.chat(messages, temperature=0,
                         response_format={"type": "json_object"}).strip()
        if text.startswith("```"):  # models often fence JSON even when asked not to
            text = text.strip("`").removeprefix("json").strip()
        try:
            return json.loads(text)
        except ValueError as exc:
            raise self.refused(f"returned content that is not JSON: {exc}: "
                               f"{excerpt(text)}") from exc


def excerpt(text: str) -> str:
    """The start of `text` on one line, for messages (error bodies say what the server
    disliked)."""
    text = " ".join(text.split())
    return text[:_EXCERPT] + ("..." if len(text) > _EXCERPT else "")


def _body(response: httpx.Response) -> str:
    try:
        return excerpt(response.text)
    except Exception:  # an undecodable body must not hide the status we are reporting
        return "<undecodable body>"
