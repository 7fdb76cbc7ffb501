"""Closed-loop searches through one host's API or several, with the CPU each component spent."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from bench.harness.hosts import Host
from bench.harness.runenv import log
from bench.hosts.meter import Meter
from bench.ingest.corpus import Doc
from pipeline.services.stack import Stack


@dataclass
class SearchRun:
    apis: int
    requests: int
    errors: int
    seconds: float
    cpu: dict[str, float]

    @property
    def rate(self) -> float:
        return self.requests / self.seconds


def queries(corpus: Sequence[Doc], count: int = 200) -> list[str]:
    rng = random.Random(7)
    titled = [d for d in corpus if len(d.title.split()) >= 3]
    return [" ".join(rng.sample(d.title.split(), 3)) for d in rng.sample(titled, count)]


async def closed_loop(hosts: Sequence[Host], clients: int, seconds: float,
                      texts: Sequence[str]) -> tuple[int, int, float]:
    """`clients` clients, dealt out to the hosts' APIs, each sending its next search when the
    last answered, for `seconds`; (answers, errors, wall seconds)."""
    done = errors = 0
    deadline = time.perf_counter() + seconds

    async def client(i: int) -> None:
        nonlocal done, errors
        host = hosts[i % len(hosts)]
        async with httpx.AsyncClient(base_url=host.url, headers=host.headers(),
                                     timeout=30) as http:
            n = i
            while time.perf_counter() < deadline:
                response = await http.post("/v1/search", json={"query": texts[n % len(texts)],
                                                               "limit": 10})
                if response.status_code == 200:
                    done += 1
                else:
                    errors += 1
                n += clients

    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    return done, errors, time.perf_counter() - started


def search_run(stack: Stack, hosts: Sequence[Host], apis: int, clients: int, seconds: float,
               texts: Sequence[str]) -> SearchRun:
    meter = Meter(stack, hosts)
    asyncio.run(closed_loop(hosts[:apis], clients, 2.0, texts))  # warm both paths
    meter.start()
    done, errors, wall = asyncio.run(closed_loop(hosts[:apis], clients, seconds, texts))
    run = SearchRun(apis, done, errors, wall, meter.stop())
    log(f"[searches] {apis} API(s), {clients} clients: {run.rate:.1f}/s, {errors} errors")
    return run


