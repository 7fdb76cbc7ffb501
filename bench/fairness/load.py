"""The two tenants' request loops, closed-loop over HTTP (httpx) against the API process.

- B (`steady`): `loops` loops, each sending its next search as soon as the last answered, for a
  fixed time; every request's latency and status are recorded (a transport error or timeout is
  an error with the time it took).
- A (`hostile`): in a child process of its own (`hostile_process`), so its client work never
  delays B's event loop: `loops` loops, each cycling through a memory search across its user's
  sessions, an `auto` search of its next namespace (rotating over all of them: the first one
  of a namespace in each API process starts a PPR snapshot build) and a publish of new
  documents with `wait` (through the slow broker). A refused request (429, 503) is sent again
  at once: the worst a caller may do. Answers are counted by kind and status.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection

import httpx

from bench.fairness import data

JSON = {"content-type": "application/json"}
# A client gives up after this long: past the API's own request deadline (30 s by default), so
# a request the API answers late is counted by its answer, not by the client's patience.
CLIENT_TIMEOUT = 60.0
HOSTILE_KINDS = ("memory", "auto", "publish")


@dataclass(frozen=True)
class Sample:
    """One of B's requests: its mode, latency (seconds), status (or transport error), and
    whether a 200 said it was degraded (a channel left out, e.g. the embedder's)."""

    kind: str
    seconds: float
    status: int | str
    degraded: bool = False

    @property
    def ok(self) -> bool:
        return isinstance(self.status, int) and 200 <= self.status < 300


def _client(base_url: str, key: str, connections: int) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    return httpx.AsyncClient(base_url=base_url, timeout=CLIENT_TIMEOUT, limits=limits,
                             headers={"Authorization": f"Bearer {key}"})


async def steady(base_url: str, key: str, requests: Sequence[tuple[str, bytes]], loops: int,
                 seconds: float, *, limit: int | None = None) -> list[Sample]:
    """B's load: `loops` closed loops over `requests` (loop i starts `i * len / loops` in, so
    every phase sends the same requests in the same order) for `seconds`, or until `limit`
    requests were sent; no request starts after that, those in flight finish."""
    samples: list[Sample] = []
    sent = itertools.count()
    async with _client(base_url, key, loops) as client:
        stop_at = time.monotonic() + seconds

        async def loop(i: int) -> None:
            for n in itertools.count(i * len(requests) // loops):
                if time.monotonic() >= stop_at or (limit is not None and next(sent) >= limit):
                    return
                kind, body = requests[n % len(requests)]
                began = time.perf_counter()
                status: int | str
                degraded = False
                try:
                    response = await client.post("/v1/search", content=body, headers=JSON)
                    status = response.status_code
                except httpx.HTTPError as exc:
                    status = type(exc).__name__
                took = time.perf_counter() - began
                if status == 200:
                    degraded = bool(json.loads(response.content).get("degrade"))
                samples.append(Sample(kind, took, status, degraded))

        await asyncio.gather(*(loop(i) for i in range(loops)))
    return samples


@dataclass(frozen=True)
class HostilePlan:
    """What A's child process sends: its key and namespaces, its memory questions, its
    searches per namespace, the passages it publishes."""

    base_url: str
    tenant: data.Tenant
    loops: int
    questions: list[str]
    titles: dict[str, list[str]]  # namespace -> titles of its documents
    docs: list[data.Passage]
    events_per_publish: int
    mix: tuple[str, ...] = HOSTILE_KINDS  # what each loop sends, in turn (kinds may repeat)


@dataclass
class HostileTally:
    """A's answers: (kind, status or transport error) -> count, and the `mode` its `auto`
    searches were answered in."""

    answers: Counter[tuple[str, str]] = field(default_factory=Counter)
    auto_modes: Counter[str] = field(default_factory=Counter)
    answered: dict[str, list[float]] = field(default_factory=dict)  # kind -> 2xx latencies
    seconds: float = 0.0


async def hostile(plan: HostilePlan, seconds: float, run: int) -> HostileTally:
    """A's load for `seconds` (run number `run` keeps publish ids unique across phases)."""
    tally = HostileTally()
    tenant = plan.tenant
    memory = [data.memory_search_body(tenant, q) for q in plan.questions]
    spaces = [str(ns) for ns in tenant.namespaces]
    counter = itertools.count()
    async with _client(plan.base_url, tenant.key, plan.loops) as client:
        began = time.monotonic()
        stop_at = began + seconds

        async def send(kind: str, n: int) -> None:
            """Send request number `n` of A's, of `kind`."""
            headers = dict(JSON)
            if kind == "memory":
                headers["X-Namespace"] = spaces[0]
                path, body = "/v1/memory/search", memory[n % len(memory)]
            elif kind == "auto":
                ns = spaces[n % len(spaces)]
                titles = plan.titles[ns]
                headers["X-Namespace"] = ns
                path = "/v1/search"
                body = data.search_body(titles[(n // len(spaces)) % len(titles)], "auto")
            else:
                headers["X-Namespace"] = spaces[0]
                first = (n * plan.events_per_publish) % len(plan.docs)
                docs = [plan.docs[(first + j) % len(plan.docs)]
                        for j in range(plan.events_per_publish)]
                path, body = "/v1/events", data.publish_body(docs, f"fairness-{run}-{n}")
            began = time.perf_counter()
            try:
                response = await client.post(path, content=body, headers=headers)
                status: str = str(response.status_code)
                if response.is_success:
                    tally.answered.setdefault(kind, []).append(time.perf_counter() - began)
                if kind == "auto" and response.status_code == 200:
                    tally.auto_modes[str(json.loads(response.content).get("mode"))] += 1
            except httpx.HTTPError as exc:
                status = type(exc).__name__
            tally.answers[(kind, status)] += 1

        async def loop(i: int) -> None:
            for step in itertools.count(i):
                if time.monotonic() >= stop_at:
                    return
                await send(plan.mix[step % len(plan.mix)], next(counter))

        await asyncio.gather(*(loop(i) for i in range(plan.loops)))
        tally.seconds = time.monotonic() - began
    return tally


def parse_mix(text: str) -> tuple[str, ...]:
    """`memory:2,auto:1,publish:1` -> the cycle each of A's loops sends (a kind left out is
    not sent)."""
    out: list[str] = []
    for item in text.split(","):
        kind, _, weight = item.partition(":")
        if kind.strip() not in HOSTILE_KINDS:
            raise ValueError(f"--mix: {kind!r} is none of {', '.join(HOSTILE_KINDS)}")
        out += [kind.strip()] * int(weight or "1")
    if not out:
        raise ValueError("--mix: nothing to send")
    return tuple(out)


def hostile_process(plan: HostilePlan, conn: Connection) -> None:
    """A child process's body: say it is ready (imports done), wait for (seconds, run) from the
    parent, run A's load, send the tally back."""
    conn.send("ready")
    seconds, run = conn.recv()
    conn.send(asyncio.run(hostile(plan, seconds, run)))
    conn.recv()  # the parent reads this process's CPU time before it exits
