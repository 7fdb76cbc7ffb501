"""The ingestion benchmark's harness (also used by `bench/memory` and `bench/query`'s HTTP
measurements): its own embedded stack, the real pipeline processes as children, and a meter of the
CPU each of them spends.

Everything here drives the pipeline from the outside, the way a deployment does: events go in
through the input topic (`bench/ingest/flow.py` publishes them and watches them come out indexed).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from bench.harness.runenv import BENCH_DIR, REPO
from pipeline.embedding.settings import EmbedderName
from pipeline.graph.falkordb.schema import prepare_graph
from pipeline.kafka.topics import ensure_topics
from pipeline.ops.migrations import apply_migrations
from pipeline.services.process import terminate_tree
from pipeline.services.stack import Stack
from pipeline.settings import Settings

# Ports are the defaults moved by an offset per embedder, so both stacks (and the developer's
# and the tests' stacks) can exist side by side; plus BRAINSTREAM_TEST_PORT_OFFSET when set, so
# several worktrees can benchmark at once on one machine.
DEFAULT_PORTS = {"pg_port": 55432, "kafka_port": 19092, "s3_port": 19000,
                 "falkordb_port": 16379, "redis_port": 16380}
PORT_OFFSETS: dict[str, int] = {"static": 700, "minilm": 800}


def bench_settings(embedder: EmbedderName, **overrides: str) -> Settings:
    """Settings of an embedder's benchmark stack: own data dir, own ports, `overrides` (setting
    name -> value, as `--set` gives them), the project's defaults for everything else."""
    shift = int(os.environ.get("BRAINSTREAM_TEST_PORT_OFFSET", "0"))
    offset = PORT_OFFSETS[embedder] + shift
    ports = {name: port + offset for name, port in DEFAULT_PORTS.items()}
    if shift:  # Postgres below the ephemeral range, where a client's local port cannot take it
        ports["pg_port"] = 15432 + offset
    # model_validate, not the constructor: no environment variable or .env is consulted.
    return Settings.model_validate({"data_dir": BENCH_DIR / embedder, "embedder": embedder,
                                    **ports, **overrides})


def child_env(settings: Settings) -> dict[str, str]:
    """The environment that gives a pipeline process exactly `settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAINSTREAM_")}
    for name in sorted(settings.model_fields_set):
        value = getattr(settings, name)
        if value is None:
            continue
        if isinstance(value, dict):  # as JSON (API_KEYS's records included)
            env[f"BRAINSTREAM_{name.upper()}"] = json.dumps(
                settings.model_dump(mode="json", include={name})[name])
        elif isinstance(value, Path):
            env[f"BRAINSTREAM_{name.upper()}"] = str(value.expanduser().resolve())
        else:
            env[f"BRAINSTREAM_{name.upper()}"] = str(value)
    env.update({"PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"})
    return env


def fresh_stack(settings: Settings) -> Stack:
    """Stop whatever an earlier run left on this data dir, wipe it, start and migrate anew, so
    every run measures empty stores."""
    stack = Stack(settings)
    stack.stop()
    shutil.rmtree(settings.resolved_data_dir, ignore_errors=True)
    try:
        stack.start()
        apply_migrations(settings)
        prepare_graph(settings)
        ensure_topics(settings)
    except BaseException:
        stack.stop()  # a service that failed to start (a port in use) must not strand the others
        raise
    return stack


@dataclass
class PipelineProcesses:
    """The consumer, the embedding workers, the extraction worker and the relay, as children of
    the benchmark."""

    settings: Settings
    workers: int
    extractors: int = 1  # the extract worker's --concurrency (`brainstream up` runs 1)
    children: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def commands(self) -> dict[str, list[str]]:
        """Each process's `brainstream` sub-command."""
        return {
            "consumer": ["consumer"],
            "worker": ["worker", "--queues", "celery", "--concurrency", str(self.workers),
                       "--beat"],
            "extract": ["worker", "--queues", "extract", "--concurrency",
                        str(self.extractors), "--no-beat"],
            "relay": ["worker", "--queues", "relay", "--concurrency", "2", "--no-beat"],
        }

    def start(self) -> None:
        """Start every process, logging to DATA_DIR/logs/bench-NAME.log."""
        log_dir = self.settings.resolved_data_dir / "logs"
        log_dir.mkdir(parents=True, exist_ok=True)
        env = child_env(self.settings)
        for name, argv in self.commands().items():
            with open(log_dir / f"bench-{name}.log", "ab") as log:
                self.children[name] = subprocess.Popen(
                    [sys.executable, "-m", "pipeline.cli", *argv], env=env, cwd=REPO,
                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def check_alive(self) -> None:
        """Raise if a pipeline process has exited (a benchmark of a dead pipeline is void)."""
        for name, proc in self.children.items():
            code = proc.poll()
            if code is not None:
                raise RuntimeError(f"pipeline process {name} exited with status {code}; see "
                                   f"{self.settings.resolved_data_dir / 'logs'}")

    def stop(self) -> None:
        """Terminate every process tree (Celery's pool children too)."""
        for proc in self.children.values():
            if proc.poll() is None:
                terminate_tree(proc.pid, timeout=20)
        self.children.clear()


# -- CPU accounting -------------------------------------------------------------------------


def _cpu_times(pid: int, *, recursive: bool) -> dict[int, float]:
    """CPU seconds (user + system) of a process, and of its descendants if `recursive`."""
    out: dict[int, float] = {}
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)] if recursive else [root]
    except psutil.NoSuchProcess:
        return out
    for proc in procs:
        try:
            times = proc.cpu_times()
            out[proc.pid] = times.user + times.system
        except psutil.NoSuchProcess:
            continue
    return out


class CpuMeter:
    """CPU seconds each component of the pipeline spent between `start` and `stop`.

    Processes that exit in between are not counted (their time is lost to psutil), so the totals
    are lower bounds; the pipeline's processes and servers are long-lived, so little is missed.
    The benchmark process is counted without its children (the pipeline processes).
    """

    def __init__(self, stack: Stack, processes: PipelineProcesses) -> None:
        self.roots: dict[str, list[int]] = {}
        for service in stack.services:
            pid = service.running_pid()
            if pid is not None:
                self.roots.setdefault(service.name, []).append(pid)
        for name, proc in processes.children.items():
            self.roots[name] = [proc.pid]
        self._before: dict[str, dict[int, float]] = {}
        self._wall = 0.0

    def _snapshot(self) -> dict[str, dict[int, float]]:
        snap: dict[str, dict[int, float]] = {}
        for name, pids in self.roots.items():
            merged: dict[int, float] = {}
            for pid in pids:
                merged.update(_cpu_times(pid, recursive=True))
            snap[name] = merged
        snap["bench"] = _cpu_times(os.getpid(), recursive=False)
        return snap

    def start(self) -> None:
        self._before = self._snapshot()
        self._wall = time.perf_counter()

    def stop(self) -> tuple[float, dict[str, float]]:
        """(wall seconds, CPU seconds by component) since `start`."""
        wall = time.perf_counter() - self._wall
        after = self._snapshot()
        used = {name: sum(t - self._before.get(name, {}).get(pid, 0.0)
                          for pid, t in times.items())
                for name, times in after.items()}
        return wall, used
