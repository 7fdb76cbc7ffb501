"""The one retry policy: jittered exponential backoff with a cap (tenacity), for the write path's
bounded retries and the read side's background recoveries.

What exhausts it is dead-lettered or marked failed by the caller, never dropped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    Retrying,
    retry_if_exception_type,
    retry_if_not_exception_type,
    stop_after_attempt,
    wait_random_exponential,
)

from pipeline.domain.errors import Unavailable

T = TypeVar("T")


def _reporter(on_retry: Callable[[int, BaseException], None] | None
              ) -> Callable[[RetryCallState], None]:
    """tenacity's before_sleep hook: tell `on_retry` which attempt failed and why."""

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None:
            exc = state.outcome.exception()
            if exc is not None:
                on_retry(state.attempt_number, exc)

    return before_sleep


def retry_transient(
    call: Callable[[], T],
    *,
    attempts: int,
    max_wait: float,
    transient: tuple[type[BaseException], ...] = (Unavailable,),
    on_retry: Callable[[int, BaseException], None] | None = None,
) -> T:
    """Run `call`, retrying only `transient` errors; the last error is re-raised as is."""

    retrying = Retrying(
        stop=stop_after_attempt(attempts),
        wait=wait_random_exponential(multiplier=0.2, max=max_wait),
        retry=retry_if_exception_type(transient),
        before_sleep=_reporter(on_retry),
        reraise=True,
    )
    return retrying(call)


def backoff_seconds(attempt: int, *, cap: float, base: float = 0.5) -> float:
    """Delay before the next try of a persisted job (outbox rows): exponential, capped."""
    return float(min(cap, base * (2 ** max(0, min(attempt, 30) - 1))))


async def retry_until_done(call: Callable[[], Awaitable[T]], *, max_wait: float,
                           give_up: tuple[type[BaseException], ...] = (),
                           on_retry: Callable[[int, BaseException], None] | None = None) -> T:
    """Await `call` until it succeeds, with the same jittered, capped backoff (for a background
    recovery that must not end: a dependency that may come back). `give_up` errors (a bad
    setting, say) are re-raised at once; cancel the awaiting task to stop it."""

    retrying = AsyncRetrying(
        wait=wait_random_exponential(multiplier=0.2, max=max_wait),
        retry=retry_if_not_exception_type(give_up) if give_up else retry_if_exception_type(),
        before_sleep=_reporter(on_retry),
        reraise=True,
    )
    return await retrying(call)
