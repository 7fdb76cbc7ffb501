"""`brainstream status`'s lines on replication: the standbys the primary streams to
(`pg_stat_replication`: state, how far behind in bytes and seconds) and, with POSTGRES_READ_DSN,
the read standby asked directly (in recovery, replay paused, bytes behind the primary).

The read standby is optional capacity: one that is down or lagging is reported here, never as
an error (the API's reads go to the primary meanwhile)."""

from __future__ import annotations

from typing import Any

import psycopg

from pipeline.domain.setting_values import redact_credentials
from pipeline.postgres.lsn import parse_lsn
from pipeline.settings import Settings

_STREAMED = (
    "SELECT application_name, coalesce(client_addr::text, 'local'), state,"
    " pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::bigint,"
    " extract(epoch FROM replay_lag)::float8 FROM pg_stat_replication ORDER BY 1, 2")
_STANDBY = ("SELECT pg_is_in_recovery(), pg_last_wal_replay_lsn()::text,"
            " CASE WHEN pg_is_in_recovery() THEN pg_get_wal_replay_pause_state() END")


def read_replication(settings: Settings) -> dict[str, Any]:
    """The standbys streaming from the primary, and the read standby's own view (None without
    POSTGRES_READ_DSN; `error` when it did not answer)."""
    with psycopg.connect(settings.effective_postgres_dsn, connect_timeout=5) as conn:
        streamed = [{"name": r[0], "client": r[1], "state": r[2], "bytes_behind": r[3],
                     "replay_lag_seconds": None if r[4] is None else round(r[4], 3)}
                    for r in conn.execute(_STREAMED).fetchall()]
        written = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    out: dict[str, Any] = {"standbys": streamed, "read_standby": None}
    dsn = settings.effective_postgres_read_dsn
    if dsn is None:
        return out
    try:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            row = conn.execute(_STANDBY).fetchone()
    except psycopg.Error as exc:
        out["read_standby"] = {"state": "down", "error": redact_credentials(
            f"{type(exc).__name__}: {exc}")}
        return out
    assert row is not None and written is not None
    in_recovery, replayed, pause = row
    if not in_recovery or replayed is None:
        out["read_standby"] = {"state": "down", "error": "not a standby in recovery"}
        return out
    behind = max(0, parse_lsn(written[0]) - parse_lsn(replayed))
    out["read_standby"] = {"state": "ok", "replayed": replayed, "bytes_behind": behind,
                           "replay": pause, "max_lag_seconds": settings.postgres_read_max_lag}
    return out


def render_replication(replication: dict[str, Any]) -> list[str]:
    """The status lines of `read_replication`'s answer."""
    lines = []
    for s in replication.get("standbys", []):
        lag = s["replay_lag_seconds"]
        lines.append(f"standby {s['name'] or '?'} ({s['client']}): {s['state']}, "
                     f"{s['bytes_behind']} bytes behind"
                     + (f", replay lag {lag} s" if lag is not None else ", caught up"))
    read = replication.get("read_standby")
    if read is not None:
        if read["state"] == "down":
            lines.append(f"read standby: down, reads go to the primary ({read['error']})")
        else:
            lines.append(f"read standby: replayed {read['replayed']}, {read['bytes_behind']} "
                         f"bytes behind the primary, replay {read['replay']} (reads go to the "
                         f"primary past {read['max_lag_seconds']:g} s of lag)")
    return lines
