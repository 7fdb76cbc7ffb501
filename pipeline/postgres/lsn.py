"""Positions in the write-ahead log (`pg_lsn`) as integers: what the primary has written
(`pg_current_wal_lsn()`) and what a standby has replayed (`pg_last_wal_replay_lsn()`) compare
as numbers. The text form is Postgres's own, `<high>/<low>` in hexadecimal (`0/16B3748`)."""

from __future__ import annotations

import re

# Postgres prints each half as 1-8 hex digits; nothing else is an LSN.
_TEXT = re.compile(r"([0-9A-Fa-f]{1,8})/([0-9A-Fa-f]{1,8})")


LSN_FORMAT = "two hexadecimal halves, as Postgres prints them (`0/16B3748`)"


def parse_lsn(text: str) -> int:
    """The position an LSN's text names (ValueError for anything else)."""
    match = _TEXT.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"not an LSN: {LSN_FORMAT}")
    return int(match[1], 16) << 32 | int(match[2], 16)


def format_lsn(position: int) -> str:
    """An LSN's text, as Postgres prints it (`0/16B3748`)."""
    return f"{position >> 32:X}/{position & 0xFFFFFFFF:X}"
