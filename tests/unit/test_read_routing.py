"""The pure parts of reading from a standby: LSN text, and the lag of a standby from the
primary's sampled WAL positions (pipeline/postgres/lsn.py, standby.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given, strategies as st

from pipeline.postgres.lsn import format_lsn, parse_lsn
from pipeline.postgres.standby import (
    DOWN,
    REPLAY_CACHE_SECONDS,
    StandbyMonitor,
    StandbyState,
    WalHistory,
)


@given(st.integers(min_value=0, max_value=2**64 - 1))
def test_an_lsn_reads_back_as_postgres_prints_it(position: int) -> None:
    assert parse_lsn(format_lsn(position)) == position
    assert parse_lsn(format_lsn(position).lower()) == position


def test_known_lsns_and_refusals() -> None:
    assert parse_lsn("0/16B3748") == 0x16B3748
    assert parse_lsn("1/0") == 2**32
    assert format_lsn(2**32 + 255) == "1/FF"
    for bad in ("", "16B3748", "0/", "/1", "0/123456789", "x/1", "0/1/2", "-1/0", "0 /1"):
        with pytest.raises(ValueError):
            parse_lsn(bad)


def test_lag_is_zero_when_the_newest_sample_is_replayed() -> None:
    history = WalHistory(keep_seconds=10)
    for t, lsn in ((0.0, 100), (1.0, 200), (2.0, 200)):
        history.add(t, lsn)
    assert history.lag(200, now=50.0) == 0.0  # an idle primary: no lag however long
    assert history.lag(300, now=2.5) == 0.0


def test_lag_is_the_age_of_the_newest_sample_the_standby_holds() -> None:
    history = WalHistory(keep_seconds=100)
    for t, lsn in ((0.0, 100), (1.0, 200), (2.0, 300), (3.0, 400)):
        history.add(t, lsn)
    assert history.lag(300, now=3.5) == pytest.approx(1.5)  # has all the primary had at 2.0
    assert history.lag(250, now=3.5) == pytest.approx(2.5)
    assert history.lag(50, now=3.5) == pytest.approx(3.5)  # behind every sample: >= oldest


@given(st.lists(st.integers(min_value=0, max_value=1000), min_size=1, max_size=30),
       st.integers(min_value=0, max_value=1000))
def test_lag_never_shrinks_as_the_standby_falls_further_behind(steps: list[int],
                                                                replayed: int) -> None:
    history = WalHistory(keep_seconds=1e9)
    position = 0
    for t, step in enumerate(steps):
        position += step
        history.add(float(t), position)
    now = float(len(steps))
    lags = [history.lag(r, now) for r in range(replayed, -1, -max(1, replayed // 7 or 1))]
    assert lags == sorted(lags)
    assert all(0 <= lag <= now for lag in lags)


def test_history_forgets_old_samples_but_keeps_two() -> None:
    history = WalHistory(keep_seconds=5)
    for t in range(100):
        history.add(float(t), t * 10)
    assert history.lag(0, now=100.0) >= 5  # behind all kept: at least as old as the oldest


def test_a_standby_serves_only_when_up_and_within_the_bound() -> None:
    assert not DOWN.serves(5.0)
    assert DOWN.describe(5.0) == "down"
    fresh = StandbyState(up=True, lag_seconds=1.0, replayed=10, probed_at=0.0)
    assert fresh.serves(5.0) and fresh.describe(5.0) == "ok"
    assert not fresh.serves(0.5) and fresh.describe(0.5) == "lagging"


def test_the_read_dsn_follows_the_generation_database_as_the_primary_dsn_does() -> None:
    from psycopg.conninfo import conninfo_to_dict

    from pipeline.settings import Settings

    base = Settings(_env_file=None,  # type: ignore[call-arg]
                    postgres_dsn="postgresql://app@primary:5432/brainstream",
                    postgres_read_dsn="postgresql://reader@standby:5432/brainstream")
    assert base.effective_postgres_read_dsn == "postgresql://reader@standby:5432/brainstream"
    gen = base.for_generation(3, dbname="brainstream_g3", graph_name="g3",
                              consumer_group="c3", embedder="static", embedding_dim=256)
    primary = conninfo_to_dict(gen.effective_postgres_dsn)
    standby = conninfo_to_dict(gen.effective_postgres_read_dsn or "")
    assert primary["dbname"] == standby["dbname"] == "brainstream_g3"
    assert (standby["host"], standby["user"]) == ("standby", "reader")
    unset = Settings(_env_file=None)  # type: ignore[call-arg]
    assert unset.for_generation(3, dbname="x", graph_name="g3", consumer_group="c3",
                                embedder="static",
                                embedding_dim=256).effective_postgres_read_dsn is None


class _Answers:
    """A probe connection whose answers are given by the test, each when it says so."""

    def __init__(self) -> None:
        self.pending: list[tuple[asyncio.Future[tuple[Any, ...]], str]] = []

    async def one(self, query: str) -> tuple[Any, ...]:
        answer: asyncio.Future[tuple[Any, ...]] = asyncio.get_running_loop().create_future()
        self.pending.append((answer, query))
        return await answer

    def answer(self, index: int, row: tuple[Any, ...]) -> None:
        self.pending[index][0].set_result(row)


def test_a_probe_answered_late_does_not_take_back_a_newer_replay_position() -> None:
    """The probe asks the standby; a read that needs a newer position asks again and is told
    it has replayed it; then the probe's older answer arrives. Reads of that position still
    go to the standby (the standby's replay only moves forward)."""
    async def scenario() -> None:
        monitor = StandbyMonitor("postgresql://primary", "postgresql://standby", max_lag=60.0)
        primary, standby = _Answers(), _Answers()
        monitor._primary, monitor._standby = primary, standby  # type: ignore[assignment]
        monitor.state = StandbyState(up=True, lag_seconds=0.0, replayed=100, probed_at=0.0)
        probing = asyncio.create_task(monitor.probe())
        await asyncio.sleep(0)
        primary.answer(0, ("0/C8",))
        await asyncio.sleep(0)
        assert len(standby.pending) == 1  # the probe's question is on its way
        await asyncio.sleep(REPLAY_CACHE_SECONDS)
        reading = asyncio.create_task(monitor.has_replayed(200))
        await asyncio.sleep(0)
        standby.answer(1, ("0/C8", True))
        assert await reading
        standby.answer(0, ("0/64", True))  # asked first, answered last
        await probing
        assert monitor.state.up and monitor.state.replayed == 200
        assert await monitor.has_replayed(200)
    asyncio.run(scenario())
