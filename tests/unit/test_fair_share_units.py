"""The pure parts of the fair share (issue 35, item 4 and 6): a key's connection share never
exceeds its cap, never deadlocks a task against itself, and refuses after its wait; the
publishing threads refuse at once when all are busy. The real-stack proof is in
tests/hostile/test_fair_share.py."""

from __future__ import annotations

import asyncio
import threading

import pytest
from hypothesis import given, strategies as st

from pipeline.domain.errors import Overloaded, TooManyRequests
from pipeline.fairness.connections import ConnectionShare, share_of_pool
from pipeline.kafka.publish_pool import PublishPool


@given(st.integers(min_value=1, max_value=500))
def test_a_key_never_takes_the_whole_pool(pool: int) -> None:
    share = share_of_pool(pool)
    assert share >= 1 and (share < pool or pool == 1)


def test_a_share_holds_at_most_its_cap_and_every_task_gets_through() -> None:
    share = ConnectionShare(2, wait_seconds=5)
    most = 0

    async def statement() -> None:
        nonlocal most
        async with share.connection("a"):
            most = max(most, share.held("a"))
            await asyncio.sleep(0.01)

    async def main() -> None:
        await asyncio.gather(*(statement() for _ in range(10)))
        async with share.connection("b"):  # another tenant is not counted against a
            assert share.held("a") == 0 and share.held("b") == 1

    asyncio.run(main())
    assert most == 2


def test_a_task_holding_a_connection_never_waits_on_its_own_share() -> None:
    share = ConnectionShare(1, wait_seconds=0.2)

    async def main() -> None:
        async with share.connection("a"), share.connection("a"):  # nested: no wait
            await asyncio.gather(_inner(share))  # nor in a task started while held
        assert share.held("a") == 0

    asyncio.run(main())


async def _inner(share: ConnectionShare) -> None:
    async with share.connection("a"):
        pass


def test_a_share_that_stays_taken_refuses_with_429_after_its_wait() -> None:
    share = ConnectionShare(1, wait_seconds=0.05)

    async def main() -> None:
        hold = asyncio.Event()

        async def holder() -> None:
            async with share.connection("a"):
                await hold.wait()

        task = asyncio.create_task(holder())
        await asyncio.sleep(0)
        with pytest.raises(TooManyRequests) as err:
            async with share.connection("a"):
                pass
        assert err.value.retry_after == 1 and err.value.field == "Authorization"
        hold.set()
        await task

    asyncio.run(main())


def test_busy_publishing_threads_refuse_at_once_and_free_when_the_publish_ends() -> None:
    threads = PublishPool(2)
    release = threading.Event()

    async def main() -> None:
        running = [asyncio.ensure_future(threads.run(release.wait)) for _ in range(2)]
        await asyncio.sleep(0.05)
        with pytest.raises(Overloaded) as err:
            await threads.run(lambda: None)
        assert err.value.retry_after == 1
        running[0].cancel()  # a cancelled request: its thread still counts until it ends
        with pytest.raises(Overloaded):
            await threads.run(lambda: None)
        release.set()
        await asyncio.gather(running[1])
        await asyncio.sleep(0.05)
        assert await threads.run(lambda: 7) == 7

    try:
        asyncio.run(main())
    finally:
        release.set()
        threads.close()


def test_busy_keys_together_leave_the_reserve_to_a_key_holding_none() -> None:
    share = ConnectionShare(3, wait_seconds=0.05)  # a pool of 4: one in reserve

    async def main() -> None:
        release = asyncio.Event()
        taken: list[str] = []

        async def hold(tenant: str) -> None:
            async with share.connection(tenant):
                taken.append(tenant)
                await release.wait()

        holders = [asyncio.create_task(hold(t)) for t in ("a", "a", "c")]
        await asyncio.sleep(0)
        assert sorted(taken) == ["a", "a", "c"]
        for busy in ("a", "c"):  # three taken: a busy key waits, then is refused
            with pytest.raises(TooManyRequests):
                async with share.connection(busy):
                    pass
        async with share.connection("b"):  # a key holding none still gets the reserve
            assert share.held("b") == 1
        release.set()
        await asyncio.gather(*holders)
        assert share.held("a") == share.held("c") == 0

    asyncio.run(main())
