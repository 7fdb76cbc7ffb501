"""`brainstream up`: the whole pipeline in the foreground on one machine.

Starts the embedded services (reusing running ones), migrates, then runs each pipeline process
(consumers, workers, API) as a child with its output prefixed by its name. Ctrl-C (or SIGTERM)
stops the children, then the embedded services; a child that dies takes the others down with a
non-zero exit so a broken process is never hidden.

A supervisor killed outright takes its children with it, and the next `up` stops whatever an
earlier one left running before it starts (`pipeline.ops.lifeline`).
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType

from pipeline.domain.settings import Settings
from pipeline.ops.lifeline import SUPERVISOR_ENV, PidRecords
from pipeline.services.process import terminate_tree

Report = Callable[[str], None]


@dataclass(frozen=True)
class ProcessSpec:
    """A pipeline process `up` runs."""

    name: str
    argv: list[str]
    listens: str = ""  # where it serves, for the start-up banner
    env: dict[str, str] = field(default_factory=dict)


def app_processes(settings: Settings, env: dict[str, str] | None = None
                  ) -> list[ProcessSpec]:
    """Every pipeline process, in start order."""
    exe = [sys.executable, "-m", "pipeline.cli"]
    api = f"http://{settings.api_host}:{settings.api_port} (OpenAPI at /docs)"
    registered = [
        ("consumer", ["consumer"], ""),
        ("worker", ["worker", "--queues", "celery", "--beat"], ""),
        # extraction and the resolver's proposal pass on their own queue and process, so
        # a backlog of extraction never delays embedding
        ("extract", ["worker", "--queues", "extract", "--concurrency", "1", "--no-beat",
                     "--metrics-port", str(settings.worker_metrics_port + 2)], ""),
        ("relay", ["worker", "--queues", "relay", "--concurrency", "1", "--no-beat",
                   "--metrics-port", str(settings.worker_metrics_port + 1)], ""),
        ("api", ["api"], api),
    ]
    return [ProcessSpec(name=name, argv=[*exe, *argv], listens=listens, env=dict(env or {}))
            for name, argv, listens in registered]


def development_key(settings: Settings) -> tuple[str, str]:
    """A stable development API key and namespace under DATA_DIR (for `up` without API_KEYS)."""
    path = settings.resolved_data_dir / "dev-credentials.json"
    if path.exists():
        data = json.loads(path.read_text())
        return str(data["key"]), str(data["namespace"])
    key, namespace = f"dev-{secrets.token_urlsafe(18)}", str(uuid.uuid4())
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "namespace": namespace}) + "\n")
    path.chmod(0o600)
    return key, namespace


class _Stop(Exception):
    pass


def run_up(settings: Settings, *, stop_services: bool, report: Report) -> None:
    """Start everything and supervise it until Ctrl-C or a child exits."""
    from pipeline.kafka.topics import ensure_topics
    from pipeline.ops.generations import migrate_generations
    from pipeline.services.stack import Stack

    stack = Stack(settings)
    report(f"data directory: {settings.resolved_data_dir}")
    records = PidRecords(settings.resolved_data_dir)
    for stale in records.claim(os.getpid()):
        report(f"stopped {stale}, left running by an earlier `brainstream up`")
    stack.start(report=report)
    children: list[tuple[ProcessSpec, subprocess.Popen[bytes]]] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        raise _Stop()

    signal.signal(signal.SIGTERM, on_signal)
    exit_code = 0
    try:
        migrate_generations(settings, report=report)
        ensure_topics(settings, report=report)
        env = {SUPERVISOR_ENV: str(os.getpid())}
        if not settings.api_keys:
            key, namespace = development_key(settings)
            env["BRAINSTREAM_API_KEYS"] = json.dumps({key: [namespace]})
            report(f"development API key: {key}  (namespace {namespace}; publish bare objects "
                   f"with --namespace {namespace}; set BRAINSTREAM_API_KEYS to use your own)")
        for spec in app_processes(settings, env):
            proc = subprocess.Popen(spec.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    env={**os.environ, **spec.env}, start_new_session=True)
            children.append((spec, proc))
            records.write(spec.name, proc.pid, spec.argv)
            report(f"{spec.name:9} started   pid {proc.pid}"
                   + (f", listening on {spec.listens}" if spec.listens else ""))
        _banner(settings, report)
        exit_code = _supervise(children, report)
    except (KeyboardInterrupt, _Stop):
        report("stopping ...")
    finally:
        for spec, proc in reversed(children):
            if proc.poll() is None:
                terminate_tree(proc.pid, timeout=20)
                report(f"{spec.name:9} stopped")
            records.remove(spec.name)
        records.remove("supervisor")
        if stop_services:
            stack.stop(report=report)
        else:
            report("embedded services left running (brainstream services stop)")
    if exit_code:
        sys.exit(exit_code)


def _banner(settings: Settings, report: Report) -> None:
    report("ready. Ctrl-C stops everything.")


def _supervise(children: list[tuple[ProcessSpec, subprocess.Popen[bytes]]],
               report: Report) -> int:
    """Relay children's output line by line; return when one exits (its code) or forever."""
    if not children:
        while True:
            time.sleep(3600)
    selector = selectors.DefaultSelector()
    pending: dict[str, bytes] = {}  # a child's last, unfinished line
    for spec, proc in children:
        assert proc.stdout is not None
        selector.register(proc.stdout.fileno(), selectors.EVENT_READ, spec)
        pending[spec.name] = b""
    while True:
        for key, _ in selector.select(timeout=1.0):
            # What the pipe holds now, unbuffered: a buffered readline() would keep the lines
            # after the first in its buffer, unseen by select(), until the child wrote again.
            chunk = os.read(key.fd, 65536)
            if not chunk:  # the child closed its output: its last line, if unfinished
                selector.unregister(key.fd)
                chunk = b"\n" if pending[key.data.name] else b""
            *lines, pending[key.data.name] = (pending[key.data.name] + chunk).split(b"\n")
            for line in lines:
                report(f"[{key.data.name}] {line.decode(errors='replace').rstrip()}")
        for spec, proc in children:
            code = proc.poll()
            if code is not None:
                report(f"{spec.name} exited with status {code}; stopping the others")
                return code or 1
