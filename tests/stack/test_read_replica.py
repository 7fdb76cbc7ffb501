"""Reads from a physical standby (POSTGRES_READ_DSN), on a real streaming standby of the test
stack's Postgres (`pg_basebackup -R`, then `pg_ctl start` on a port of its own).

Which server answered is proven on the servers themselves: the standby pool's backends
(application_name `brainstream-read-standby`) run a statement exactly when a read went to the
standby (their `state_change` moves), and a row the primary holds but a paused standby has not
replayed is found or not found depending on where the read went.

Shown: (a) reads go to the standby; (b) with replay paused, a `wait: true` write is read back at
once (from the primary), another tenant's reads stay on the standby, a caller's
`X-Brainstream-Min-Lsn` sends its reads to the primary too, and after resume reads return to
the standby; a standby past the staleness bound serves nothing; (c) with the standby stopped,
reads go to the primary and /readyz stays ready, saying the standby is down."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from fastapi.testclient import TestClient

from api.read_routing import LSN_HEADER, MIN_LSN_HEADER
from bench.harness.standby import Standby
from pipeline.postgres.lsn import format_lsn, parse_lsn
from pipeline.settings import Settings
from tests.apiprocess import free_port
from tests.apiutil import ApiTenant, api_client, ok
from tests.pipelineutil import Proc, Publisher, envelope, wait_for
from tests.stackutil import TEST_DATA_DIR

pytestmark = pytest.mark.stack


def _holds(standby: Standby, object_id: str) -> bool:
    return bool(standby.one("SELECT count(*) FROM objects WHERE id = %s", (object_id,)) == 1)


@pytest.fixture(scope="module")
def standby(catalog: Settings) -> Iterator[Standby]:
    server = Standby(catalog, TEST_DATA_DIR / "read-standby", free_port())
    server.create()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def tenants() -> dict[str, ApiTenant]:
    return {name: ApiTenant(uuid.uuid4(), f"rr-{name}-{uuid.uuid4().hex[:8]}")
            for name in ("a", "b")}


def _client(settings: Settings, tenants: dict[str, ApiTenant], standby: Standby,
            max_lag: float) -> TestClient:
    return api_client(settings, tenants.values(), "write", memory_write_wait=30.0,
                      postgres_read_dsn=standby.dsn, postgres_read_max_lag=max_lag)


def _put(client: TestClient, tenant: ApiTenant, title: str) -> tuple[str, int]:
    """A `wait: true` put through the API: the object's id and the answer's LSN."""
    object_id = str(uuid.uuid4())
    event = {"type": "brainstream.object.put", "id": str(uuid.uuid4()),
             "data": {"id": object_id, "kind": "company", "title": title}}
    answer = client.post("/v1/events", json={"events": [event], "wait": True},
                         headers=tenant.headers)
    assert answer.status_code == 200, answer.text
    return object_id, parse_lsn(answer.headers[LSN_HEADER])


def _read(client: TestClient, tenant: ApiTenant, object_id: str, standby: Standby,
          **headers: str) -> tuple[int, bool]:
    """GET the object as `tenant`: the status, and whether the standby ran the read."""
    before = standby.last_read()
    answer = client.get(f"/v1/objects/{object_id}", headers={**tenant.headers, **headers})
    assert answer.status_code in (200, 404), answer.text
    return answer.status_code, standby.last_read() != before


def _caught_up(standby: Standby, position: int) -> bool:
    return standby.replayed() >= position


def test_reads_go_to_the_standby_and_a_wait_write_is_read_back_at_once(
        catalog: Settings, procs: dict[str, Proc], standby: Standby,
        tenants: dict[str, ApiTenant]) -> None:
    a, b = tenants["a"], tenants["b"]
    with _client(catalog, tenants, standby, max_lag=60.0) as client:
        seen_a, lsn_a = _put(client, a, "Alder Mills")
        seen_b, lsn_b = _put(client, b, "Birch Works")
        wait_for(lambda: _caught_up(standby, max(lsn_a, lsn_b)), timeout=30,
                 what="the standby to replay the first writes")
        ready = ok(client.get("/readyz"))
        assert ready["postgres_standby"]["state"] == "ok", ready
        # (a) both tenants' reads are served by the standby
        assert _read(client, a, seen_a, standby) == (200, True)
        assert _read(client, b, seen_b, standby) == (200, True)

        # with replay paused, an object the pipeline applies without a wait is on the primary
        # only: a read the standby serves does not find it
        standby.one("SELECT pg_wal_replay_pause()")
        try:
            unseen = str(uuid.uuid4())
            pub = Publisher(catalog)
            pub.send(envelope("object.put", a.namespace,
                              {"id": unseen, "kind": "company", "title": "Cedar Row"}), unseen)
            pub.close()
            with psycopg.connect(catalog.effective_postgres_dsn) as primary:
                wait_for(lambda: primary.execute("SELECT 1 FROM objects WHERE id = %s",
                                                 (unseen,)).fetchone(),
                         timeout=30, what="the pipeline to apply the unwaited put")
            assert not _holds(standby, unseen)
            assert _read(client, a, unseen, standby) == (404, True)

            # (b) a wait:true write is read back at once, from the primary
            written, lsn = _put(client, a, "Dogwood Yard")
            assert not _holds(standby, written) and standby.replayed() < lsn
            assert _read(client, a, written, standby) == (200, False)
            assert _read(client, a, unseen, standby) == (200, False)  # all of a's reads
            # (d) the other tenant's reads stay on the standby
            assert _read(client, b, seen_b, standby) == (200, True)
            # a caller that brings the LSN (another deployment path) reads the primary too
            assert _read(client, b, seen_b, standby,
                         **{MIN_LSN_HEADER: format_lsn(lsn)}) == (200, False)
            bad = client.get(f"/v1/objects/{seen_b}",
                             headers={**b.headers, MIN_LSN_HEADER: "16B3748"})
            assert bad.status_code == 400, bad.text
            assert bad.json()["error"]["field"] == MIN_LSN_HEADER
            assert bad.json()["error"]["code"] == "invalid_header"
        finally:
            standby.one("SELECT pg_wal_replay_resume()")
        wait_for(lambda: _caught_up(standby, lsn), timeout=30,
                 what="the standby to replay the paused writes")
        # once replayed, a's reads return to the standby: at the first read after the API asks
        # the standby again (it caches the standby's replayed position for 100 ms)
        wait_for(lambda: _read(client, a, written, standby) == (200, True), timeout=5,
                 what="a's reads to return to the standby")
        assert _read(client, b, seen_b, standby,
                     **{MIN_LSN_HEADER: format_lsn(lsn)}) == (200, True)


def test_a_standby_past_the_staleness_bound_serves_no_reads(
        catalog: Settings, procs: dict[str, Proc], standby: Standby,
        tenants: dict[str, ApiTenant]) -> None:
    a, b = tenants["a"], tenants["b"]
    with _client(catalog, tenants, standby, max_lag=1.0) as client:
        seen, lsn = _put(client, b, "Elm Court")
        wait_for(lambda: _caught_up(standby, lsn), timeout=30, what="the standby to replay")
        wait_for(lambda: _read(client, b, seen, standby) == (200, True), timeout=10,
                 what="b's reads to go to the standby")
        standby.one("SELECT pg_wal_replay_pause()")
        try:
            _put(client, a, "Fir Lane")  # WAL the paused standby does not replay
            wait_for(lambda: ok(client.get("/readyz"))["postgres_standby"]["state"]
                     == "lagging", timeout=20, what="the standby to count as lagging")
            ready = ok(client.get("/readyz"))
            assert ready["postgres_standby"]["lag_seconds"] > 1.0
            assert _read(client, b, seen, standby) == (200, False)  # no floor, still primary
            assert "brainstream_postgres_replica_lag_seconds" in client.get("/metrics").text
        finally:
            standby.one("SELECT pg_wal_replay_resume()")
        wait_for(lambda: _read(client, b, seen, standby) == (200, True), timeout=20,
                 what="reads to return to the standby after resume")


def test_a_stopped_standby_sends_reads_to_the_primary_and_the_api_stays_ready(
        catalog: Settings, procs: dict[str, Proc], standby: Standby,
        tenants: dict[str, ApiTenant]) -> None:
    a = tenants["a"]
    with _client(catalog, tenants, standby, max_lag=60.0) as client:
        seen, lsn = _put(client, a, "Gum Street")
        wait_for(lambda: _caught_up(standby, lsn), timeout=30, what="the standby to replay")
        standby.stop()
        try:
            started = time.monotonic()
            for _ in range(5):  # every read answers, none a 5xx
                answer = client.get(f"/v1/objects/{seen}", headers=a.headers)
                assert answer.status_code == 200, answer.text
            assert time.monotonic() - started < 30  # not hung on the standby
            wait_for(lambda: ok(client.get("/readyz"))["postgres_standby"]["state"] == "down",
                     timeout=10, what="/readyz to say the standby is down")
            ready = client.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert set(ready.json()["dependencies"].values()) == {"ok"}
            assert "brainstream_postgres_replica_up 0.0" in client.get("/metrics").text
            written, _ = _put(client, a, "Hazel Walk")  # writes never needed it
            assert ok(client.get(f"/v1/objects/{written}", headers=a.headers))["title"] == \
                "Hazel Walk"
        finally:
            standby.start()
        # the standby back: reads return to it
        wait_for(lambda: ok(client.get("/readyz"))["postgres_standby"]["state"] == "ok",
                 timeout=30, what="the standby to count as up again")


def test_status_shows_the_read_standby(catalog: Settings, standby: Standby) -> None:
    from pipeline.ops.status_standby import read_replication, render_replication

    settings = catalog.model_copy(update={"postgres_read_dsn": standby.dsn})
    replication = read_replication(settings)
    assert replication["read_standby"]["state"] == "ok", replication
    assert any(s["state"] == "streaming" for s in replication["standbys"]), replication
    lines = render_replication(replication)
    assert any(line.startswith("read standby: replayed") for line in lines), lines


def test_read_floors_are_per_namespace_only_go_up_and_expire(catalog: Settings) -> None:
    """The floors in the stack's Redis, as two API processes (two `ReadFloors`) share them."""
    import asyncio

    from pipeline.postgres.read_floors import ReadFloors

    async def run() -> None:
        one = ReadFloors(catalog.result_set_redis_url, ttl_seconds=1.0)
        other = ReadFloors(catalog.result_set_redis_url, ttl_seconds=1.0)
        a, b = uuid.uuid4(), uuid.uuid4()
        try:
            await one.raise_to(a, 2**40 + 5)
            await other.raise_to(a, 17)  # a later, lower position never lowers it
            assert await other.floor(a) == 2**40 + 5
            assert await other.floor(b) == 0  # the other namespace is untouched
            await asyncio.sleep(1.3)
            assert await other.floor(a) == 0  # expired in Redis
            assert await one.floor(a) == 0  # and in the process that wrote it
        finally:
            await one.close()
            await other.close()

    asyncio.run(run())
