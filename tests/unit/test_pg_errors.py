"""Whose fault a Postgres error is (`pipeline.postgres.errors`): decided from the
connection's state and the SQLSTATE class, never from psycopg's exception class alone."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import errors as pg
from psycopg_pool import PoolTimeout

from pipeline.domain.errors import RejectedByDatabase, Unavailable
from pipeline.postgres.errors import OUTAGE_CLASSES, is_outage, port_error


class _Conn:
    def __init__(self, *, closed: bool = False, broken: bool = False) -> None:
        self.closed, self.broken = closed, broken


LIVE: Any = _Conn()

OUTAGES = ["08000", "08003", "08006", "08001", "08004", "08P01", "53000", "53100", "53200",
           "53300", "57000", "57014", "57P01", "57P02", "57P03", "57P05", "58000", "58030",
           "40001", "40P01"]
# The event's fault, though psycopg files 54xxx and 55xxx under OperationalError too.
REJECTIONS = ["54000", "54001", "54011", "54023", "55000", "55006", "22001", "22003", "22021",
              "22P02", "22P05", "23502", "23505", "23514", "42601", "42P01", "0A000", "XX000",
              "XX001", "XX002", "P0001", "2201X"]


@pytest.mark.parametrize("sqlstate", OUTAGES)
def test_outage_classes_retry_the_batch(sqlstate: str) -> None:
    exc = pg.lookup(sqlstate)("server says no")
    assert exc.sqlstate == sqlstate and sqlstate[:2] in OUTAGE_CLASSES
    assert is_outage(exc, LIVE)
    assert isinstance(port_error(exc, LIVE), Unavailable)


@pytest.mark.parametrize("sqlstate", REJECTIONS)
def test_every_other_class_rejects_the_event_and_names_its_sqlstate(sqlstate: str) -> None:
    exc = pg.lookup(sqlstate)("value refused")
    assert not is_outage(exc, LIVE)
    error = port_error(exc, LIVE)
    assert isinstance(error, RejectedByDatabase)
    assert (error.code, error.message) == (
        "rejected_by_database", f"{type(exc).__name__}: value refused (SQLSTATE {sqlstate})")


def test_program_limit_exceeded_is_an_operational_error_yet_the_events_fault() -> None:
    exc = pg.ProgramLimitExceeded("string is too long for tsvector")
    assert isinstance(exc, psycopg.OperationalError)  # why the class alone cannot decide
    assert not is_outage(exc, LIVE)


@pytest.mark.parametrize("conn", [_Conn(broken=True), _Conn(closed=True)])
@pytest.mark.parametrize("sqlstate", [None, "54000", "22P05", "XX000"])
def test_a_broken_connection_is_an_outage_whatever_the_error(conn: Any,
                                                             sqlstate: str | None) -> None:
    exc = psycopg.OperationalError("lost") if sqlstate is None else pg.lookup(sqlstate)("x")
    assert is_outage(exc, conn)


def test_no_sqlstate_is_an_outage_only_without_a_live_connection() -> None:
    refused_by_client = psycopg.DataError("PostgreSQL text fields cannot contain NUL bytes")
    assert not is_outage(refused_by_client, LIVE)
    assert is_outage(psycopg.OperationalError("connection refused"), None)


def test_a_pool_timeout_is_an_outage() -> None:
    assert is_outage(PoolTimeout("couldn't get a connection after 30.00 sec"), None)
