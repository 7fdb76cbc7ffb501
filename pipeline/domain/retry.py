"""The one retry policy of the write path: jittered exponential backoff with a cap (tenacity).

What exhausts it is dead-lettered or marked failed by the caller, never dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from pipeline.domain.errors import Unavailable

T = TypeVar("T")


def retry_transient(
    call: Callable[[], T],
    *,
    attempts: int,
    max_wait: float,
    transient: tuple[type[BaseException], ...] = (Unavailable,),
    on_retry: Callable[[int, BaseException], None] | None = None,
) -> T:
    """Run `call`, retrying only `transient` errors; the last error is re-raised as is."""

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            exc = state.outcome.exception()
            if exc is not None:
                on_retry(state.attempt_number, exc)

    retrying = Retrying(
        stop=stop_after_attempt(attempts),
        wait=wait_random_exponential(multiplier=0.2, max=max_wait),
        retry=retry_if_exception_type(transient),
        before_sleep=before_sleep,
        reraise=True,
    )
    return retrying(call)


def backoff_seconds(attempt: int, *, cap: float, base: float = 0.5) -> float:
    """Delay before the next try of a persisted job (outbox rows): exponential, capped."""
    return float(min(cap, base * (2 ** max(0, min(attempt, 30) - 1))))
