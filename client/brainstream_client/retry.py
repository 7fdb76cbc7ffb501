"""The one retry policy: which answers and failures are retried, and how long to wait
between attempts (exponential back-off with jitter, capped; a server's Retry-After wins)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

# 503: a dependency is down or the request ran out of time, and nothing was done; 429: this key
# has too many requests in flight. Both say "later", so both are retried.
RETRY_STATUSES = frozenset({429, 503})


@dataclass(frozen=True)
class RetryPolicy:
    """`attempts` tries in all (1 = no retry); the wait before retry n (from 0) is half of
    `min(cap, base * 2**n)` plus a random part up to the other half, so clients that failed
    together do not come back together. A Retry-After header replaces that wait, bounded by
    `max_retry_after`."""

    attempts: int = 5
    base: float = 0.5
    cap: float = 10.0
    max_retry_after: float = 60.0
    rng: random.Random = field(default_factory=random.Random, compare=False, repr=False)

    def delay(self, retry: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry number `retry` (0 for the first retry)."""
        asked = parse_retry_after(retry_after)
        if asked is not None:
            return min(asked, self.max_retry_after)
        backoff = min(self.cap, self.base * 2.0 ** retry)
        return backoff / 2 + self.rng.uniform(0, backoff / 2)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Retry-After in seconds: delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def retryable_failure(exc: httpx.TransportError, idempotent: bool) -> bool:
    """Whether a transport failure may be retried: one before the request left (no
    connection) always; one after it may have arrived (a read timeout, a dropped connection)
    only when repeating the request cannot do a thing twice."""
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout):
        return True
    return idempotent and isinstance(exc, httpx.TimeoutException | httpx.NetworkError
                                     | httpx.RemoteProtocolError)
