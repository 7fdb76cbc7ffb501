"""The one retry policy: jittered exponential backoff with a cap (tenacity), for the write path's
bounded retries and the read side's background recoveries.

What exhausts it is dead-lettered or marked failed by the caller, never dropped.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
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

from pipeline.domain.errors import BrainstreamError, Unavailable

T = TypeVar("T")
R = TypeVar("R")
E = TypeVar("E", bound=BrainstreamError)


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


def isolate_refused(rows: Sequence[R], compute: Callable[[Sequence[R]], T], *,
                    store: Callable[[Sequence[R], T], None],
                    fail: Callable[[Sequence[R], BrainstreamError], None],
                    attempts: int, max_wait: float,
                    on_retry: Callable[[int, BaseException], None] | None = None,
                    on_split: Callable[[int, BrainstreamError], None] | None = None,
                    lighter: Callable[[R], R | None] | None = None) -> None:
    """Compute a claimed batch with the one policy and `store` what it answers, the shape the
    embedding, extraction and message extractor workers share.

    Transient errors are retried (`retry_transient`); retries exhausted (`Unavailable`) `fail`
    the batch whole: the dependency is down for every row alike, and halving would only multiply
    the calls to it. A refusal (any other `BrainstreamError`) halves the batch (`on_split` told)
    until each refused row is alone; a refused row that `lighter` can make lighter (a message
    without the turns before it) is tried once more in that form; then it fails alone, and every
    other row is stored."""
    def attempt(batch: Sequence[R]) -> None:
        try:
            value = retry_transient(lambda: compute(batch), attempts=attempts,
                                    max_wait=max_wait, on_retry=on_retry)
        except Unavailable as exc:
            fail(batch, exc)
            return
        except BrainstreamError as exc:
            if len(batch) > 1:
                if on_split is not None:
                    on_split(len(batch), exc)
                half = len(batch) // 2
                attempt(batch[:half])
                attempt(batch[half:])
                return
            alone = lighter(batch[0]) if lighter is not None else None
            if alone is not None:
                attempt([alone])
            else:
                fail(batch, exc)
            return
        store(batch, value)

    attempt(rows)


def give_up_error(exc: BrainstreamError, error: type[E], *, attempts: int, what: str,
                  refused: str) -> E:
    """The `error` a worker records (and dead-letters) for rows `isolate_refused` fails: `what`
    failed after the retries, or `refused` (an `error` raised as such is kept)."""
    if isinstance(exc, Unavailable):
        return error(f"{what} failed after {attempts} attempts: {exc.code}: {exc.message}")
    if isinstance(exc, error):
        return exc
    return error(f"{refused}: {exc.code}: {exc.message}")


def backoff_seconds(attempt: int, *, cap: float, base: float = 0.5) -> float:
    """Delay before the next try of a persisted job (outbox rows): exponential, capped."""
    return float(min(cap, base * (2 ** max(0, min(attempt, 30) - 1))))


async def retry_until_done(call: Callable[[], Awaitable[T]], *, max_wait: float,
                           give_up: tuple[type[BaseException], ...] = (),
                           on_retry: Callable[[int, BaseException], None] | None = None) -> T:
    """Await `call` until it succeeds, with the same jittered, capped backoff (for a background
    recovery that must not end: a dependency that may come back). `give_up` errors (a bad
    setting, say) are re-raised at once; cancel the awaiting task to stop it."""

    # Only errors are retried: tenacity catches BaseException around each attempt, so a
    # cancellation landing inside `call` (say, an API stopping while the embedder loads) would
    # otherwise count as one more failure and the loop would go on, its canceller waiting forever.
    retrying = AsyncRetrying(
        wait=wait_random_exponential(multiplier=0.2, max=max_wait),
        retry=retry_if_exception_type(Exception) & retry_if_not_exception_type(give_up),
        before_sleep=_reporter(on_retry),
        reraise=True,
    )
    return await retrying(call)
