"""Several "hosts" on one machine over one set of shared services (also used by
tests/faults/test_two_hosts.py).

A host is what one machine of a deployment runs: one `brainstream up` (a supervisor and its
consumer, embedding, extraction and relay workers and API), with its own DATA_DIR and its own
ports (API, consumer and worker metrics), pointed at the shared services as external ones
(POSTGRES_DSN, KAFKA_BOOTSTRAP, FALKORDB_URL, REDIS_URL set: `up` starts nothing embedded, only
probes them, migrates and makes sure the topics exist). Its consumer joins the one consumer
group (the input topic's partitions are split between the hosts), its workers take tasks from
the shared Celery queues, its API keeps its own lexical replica under its DATA_DIR.

`kill9` takes the whole host down at once the way a lost machine goes: SIGKILL to the supervisor
and to every process group of its children (each child of `up` leads a group of its own; Celery's
pool processes and uvicorn's workers are in it), nothing stopped in order.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import psutil

from bench.harness.runenv import REPO
from pipeline.settings import Settings
from pipeline.supervisor.lifeline import PidRecords
from pipeline.supervisor.runner import app_processes

# What one host runs besides its supervisor (`brainstream up`'s children).
HOST_PROCESSES = tuple(spec.name for spec in app_processes(Settings.model_validate({})))
# Ports a host takes from its base port: the API, the consumer's metrics, the embedding worker's
# metrics and, from `up`, the relay's and the extraction worker's (worker metrics + 1, + 2).
PORTS_PER_HOST = 5


def shared_env(shared: Settings) -> dict[str, str]:
    """The settings every host shares: the services (as external ones), the topics, the graph;
    BRAINSTREAM_* of this process's environment are not passed on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAINSTREAM_")}
    env.update({
        "BRAINSTREAM_POSTGRES_DSN": shared.effective_postgres_dsn,
        "BRAINSTREAM_KAFKA_BOOTSTRAP": shared.effective_kafka_bootstrap,
        "BRAINSTREAM_FALKORDB_URL": shared.effective_falkordb_url,
        "BRAINSTREAM_REDIS_URL": shared.effective_redis_url,
        "BRAINSTREAM_GRAPH_NAME": shared.graph_name,
        "BRAINSTREAM_TOPIC_EVENTS": shared.topic_events,
        "BRAINSTREAM_TOPIC_DLQ": shared.topic_dlq,
        "BRAINSTREAM_TOPIC_CHANGES": shared.topic_changes,
        "BRAINSTREAM_TOPIC_PARTITIONS": str(shared.topic_partitions),
        "BRAINSTREAM_EMBEDDER": shared.embedder,
        # two hosts share the machine's cores: one API process each
        "BRAINSTREAM_API_WORKERS": "1",
        "PYTHONUNBUFFERED": "1",
        "HF_HUB_OFFLINE": "1",
    })
    return env


def service_ports(shared: Settings) -> tuple[int, ...]:
    """The loopback ports of the shared services (what a host in a namespace must reach)."""
    urls = [shared.effective_postgres_dsn, f"kafka://{shared.effective_kafka_bootstrap}",
            shared.effective_falkordb_url, shared.effective_redis_url]
    ports = []
    for url in urls:
        parts = urlsplit(url)
        if parts.hostname not in ("127.0.0.1", "localhost") or parts.port is None:
            raise ValueError(f"not a loopback service: {url}")
        ports.append(parts.port)
    return tuple(ports)


# Inside its own network namespace a host listens on the project's default ports: every host
# the same ones, as on machines of their own.
INNER_PORTS = {"API_PORT": 8000, "CONSUMER_METRICS_PORT": 9101, "WORKER_METRICS_PORT": 9102}


@dataclass
class Host:
    """One `brainstream up` over the shared services, with its own data directory and ports;
    with `reach` (the services' ports, `service_ports`), in a network namespace of its own
    (bench/harness/netns.py), its API exposed on `base_port`."""

    name: str
    data_dir: Path
    base_port: int
    env: dict[str, str]  # shared_env(...) plus whatever this run adds (keys, intervals)
    api_key: str = ""
    reach: tuple[int, ...] = ()
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    gate: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def api_port(self) -> int:
        return self.base_port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / "up.log"

    def host_env(self) -> dict[str, str]:
        """The environment of this host's `up`: the shared one, its data dir and ports."""
        ports = INNER_PORTS if self.reach else {
            "API_PORT": self.api_port, "CONSUMER_METRICS_PORT": self.base_port + 1,
            "WORKER_METRICS_PORT": self.base_port + 2}
        return {**self.env, "BRAINSTREAM_DATA_DIR": str(self.data_dir),
                **{f"BRAINSTREAM_{name}": str(port) for name, port in ports.items()}}

    def start(self) -> Host:
        """Start the host's supervisor (its own session: `kill9` reaches all of it), in its
        own network namespace with `reach`."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        prefix: list[str] = []
        if self.reach:
            self.gate = subprocess.Popen(
                [sys.executable, "-m", "bench.harness.netns",
                 *(f"--reach={port}" for port in self.reach),
                 f"--expose={self.api_port}:{INNER_PORTS['API_PORT']}"],
                cwd=REPO, stdout=subprocess.PIPE, start_new_session=True)
            assert self.gate.stdout is not None
            if self.gate.stdout.readline().strip() != b"ready":
                raise RuntimeError(f"host {self.name}'s network namespace did not start "
                                   f"(status {self.gate.wait(timeout=10)})")
            prefix = ["nsenter", f"--net=/proc/{self.gate.pid}/ns/net", "--"]
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(
                [*prefix, sys.executable, "-m", "pipeline.cli", "up", "--keep-services"],
                env=self.host_env(), cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        return self

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def pids(self) -> dict[str, int]:
        """The live processes `up` recorded (supervisor and children) by name."""
        out = {}
        for record in PidRecords(self.data_dir).read():
            proc = record.matching_process()
            if proc is not None:
                out[record.name] = proc.pid
        return out

    def processes(self) -> list[psutil.Process]:
        """Every process of the host now: the supervisor, its descendants, and whatever else is
        in the process group of one of them (what a child spawned and left behind)."""
        if self.popen is None:
            return []
        roots = {self.popen.pid, *self.pids().values()}
        found: dict[int, psutil.Process] = {}
        for pid in roots:
            with contextlib.suppress(psutil.NoSuchProcess):
                root = psutil.Process(pid)
                for proc in (root, *root.children(recursive=True)):
                    found[proc.pid] = proc
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
                if os.getpgid(proc.pid) in roots:
                    found[proc.pid] = proc
        return list(found.values())

    def kill9(self) -> int:
        """SIGKILL every process of the host at once (supervisor, consumer, workers, API, and
        their process groups); how many processes were killed."""
        procs = self.processes()
        groups = {self.popen.pid} if self.popen is not None else set()
        groups.update(self.pids().values())
        for pgid in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        for proc in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        psutil.wait_procs(procs, timeout=30)
        if self.popen is not None:
            self.popen.wait(timeout=30)
        self._close_gate(signal.SIGKILL)
        return len(procs)

    def _close_gate(self, signum: int) -> None:
        """Stop the network namespace's gate (the namespace goes with its last process)."""
        if self.gate is not None and self.gate.poll() is None:
            self.gate.send_signal(signum)
            self.gate.wait(timeout=30)

    def stop(self) -> None:
        """Stop the host as Ctrl-C does (the supervisor stops its children), killed after a
        minute."""
        if self.alive:
            assert self.popen is not None
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill9()
        self._close_gate(signal.SIGTERM)

    def running(self) -> bool:
        """Whether the supervisor and every one of its processes run."""
        return self.alive and set(HOST_PROCESSES) <= set(self.pids())

    def cpu_by_process(self) -> dict[str, float]:
        """CPU seconds (user + system) each of the host's processes spent so far, with its
        descendants and its process group (Celery's pool, uvicorn's workers); keyed by the
        names `up` gives them ("supervisor" for `up` itself)."""
        pids = self.pids()
        leaders = {pid: name for name, pid in pids.items()}
        out: dict[str, float] = {}
        for proc in self.processes():
            with contextlib.suppress(psutil.Error, ProcessLookupError, PermissionError):
                group = os.getpgid(proc.pid)
                name = leaders.get(proc.pid) or leaders.get(group) or "supervisor"
                times = proc.cpu_times()
                out[name] = out.get(name, 0.0) + times.user + times.system
        return out

    # -- its API ---------------------------------------------------------------------------

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def get(self, path: str, timeout: float = 30.0) -> httpx.Response:
        return httpx.get(self.url + path, headers=self.headers(), timeout=timeout)

    def post(self, path: str, body: Mapping[str, Any], timeout: float = 60.0,
             headers: Mapping[str, str] | None = None) -> httpx.Response:
        return httpx.post(self.url + path, json=body, timeout=timeout,
                          headers={**self.headers(), **(headers or {})})

    def readyz(self) -> tuple[int, dict[str, Any]]:
        """(status, body) of /readyz; (0, {}) while nothing answers."""
        try:
            response = httpx.get(self.url + "/readyz", timeout=10)
        except httpx.TransportError:
            return 0, {}
        try:
            body = response.json()
        except json.JSONDecodeError:
            body = {}
        return response.status_code, body

    def wait_ready(self, timeout: float = 180.0) -> float:
        """Until every process runs and /readyz answers 200; the seconds it took."""
        started = time.monotonic()
        deadline = started + timeout
        status, body = 0, dict[str, Any]()
        while time.monotonic() < deadline:
            if not self.alive:
                raise RuntimeError(f"host {self.name}'s `up` exited with status "
                                   f"{self.popen.returncode if self.popen else None}; "
                                   f"see {self.log_path} and {self.data_dir / 'logs'}")
            status, body = self.readyz()
            if status == 200 and self.running():
                return time.monotonic() - started
            time.sleep(0.5)
        raise TimeoutError(f"host {self.name} not ready after {timeout:.0f}s: /readyz {status} "
                           f"{body}; processes {sorted(self.pids())} (see {self.log_path})")

    def cli(self, *args: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
        """A `brainstream` command with this host's settings (its data directory)."""
        return subprocess.run([sys.executable, "-m", "pipeline.cli", *args],
                              env=self.host_env(), cwd=REPO, capture_output=True, text=True,
                              timeout=timeout, check=False)
