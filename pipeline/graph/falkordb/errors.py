"""The one translation of FalkorDB client errors into the project's errors, for writer, reader and
schema alike.

- Bad credentials raise `ConfigError(field="falkordb_url")`: retrying cannot help.
- A graph that cannot answer now raises `GraphUnavailable`: a refused or dropped connection, a
  socket or redis timeout, a server still loading its dataset, a read-only replica, a cluster
  that says try again or is down, and the server replies that mean "not now" rather than "never"
  (FalkorDB has no error codes for them, so they are told by their text). The outbox relay
  retries a write later; the API degrades a read.
- Anything else (a bad query, a bad value) is re-raised as it is: loud.

Messages always contain "graph" (logs and the DLQ are read by people), but callers test the type.

Before there was one list here, the writer and the reader each kept their own and they had
drifted: only the reader knew the "LOADING" reply, only the writer a read-only replica. This is
their union; the writer now also treats a server that is loading as an outage, so the relay
retries instead of failing the batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis.exceptions as redis_errors

from pipeline.domain.errors import ConfigError, GraphUnavailable

# Server replies that mean "not now" rather than "never".
TRANSIENT_REPLIES = ("Max pending queries exceeded", "Query timed out", "LOADING")

_CREDENTIALS = (redis_errors.AuthenticationError, redis_errors.AuthorizationError,
                redis_errors.NoPermissionError)
# The two auth errors above subclass ConnectionError: they must be matched first.
_OUTAGES = (redis_errors.ConnectionError, redis_errors.TimeoutError, redis_errors.BusyLoadingError,
            redis_errors.ReadOnlyError, redis_errors.TryAgainError, redis_errors.ClusterDownError,
            OSError, TimeoutError)


@contextmanager
def graph_errors(what: str) -> Iterator[None]:
    """Translate client errors raised inside: outages become GraphUnavailable, the rest stays.

    `what` names the operation in the message ("graph unavailable during upsert nodes: ...").
    Nesting is harmless: a translated error passes an outer block unchanged.
    """
    try:
        yield
    except _CREDENTIALS as exc:
        raise ConfigError(f"graph refused the credentials during {what}: {exc}",
                          field="falkordb_url") from exc
    except _OUTAGES as exc:
        raise GraphUnavailable(f"graph unavailable during {what}: {exc}") from exc
    except redis_errors.ResponseError as exc:
        if any(reply in str(exc) for reply in TRANSIENT_REPLIES):
            raise GraphUnavailable(f"graph busy during {what}: {exc}") from exc
        raise
