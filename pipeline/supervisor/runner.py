"""`brainstream up`: the whole pipeline in the foreground on one machine.

Starts the embedded services (reusing running ones), migrates, then runs each pipeline process
(consumers, workers, API) as a child. Their output goes to one log file each
(`pipeline.supervisor.logfiles`: `brainstream logs` reads them); the console shows a status
line and the supervisor's own events instead (`pipeline.supervisor.console`). Ctrl-C (or SIGTERM)
stops the children, then the embedded services. A child that dies is started again after a
back-off that doubles with each death in a row (1 s up to a minute; a child that ran longer
than the maximum starts the count again), each death and restart logged with its status, so a
broken process is never hidden and a transient one (its service restarting) never takes the
pipeline down.

A supervisor killed outright takes its children with it, and the next `up` stops whatever an
earlier one left running before it starts (`pipeline.supervisor.lifeline`).
"""

from __future__ import annotations

import json
import os
import secrets
import select
import selectors
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType

from pipeline.services.process import terminate_trees
from pipeline.settings import WORKER_START_TIMEOUT, Settings
from pipeline.supervisor.lifeline import SUPERVISOR_ENV, PidRecords, stop_orphans
from pipeline.supervisor.logfiles import ProcessLog, log_dir

Report = Callable[[str], None]
# A child that died is started again after RESTART_BACKOFF seconds, doubled with each death in a
# row, at most RESTART_BACKOFF_MAX: a transient failure (its service restarting) heals in a
# second, a broken process is retried once a minute, never in a tight loop.
RESTART_BACKOFF = 1.0
RESTART_BACKOFF_MAX = 60.0
# Rotated log files kept per process beside the current one (LOG_MAX_BYTES each).
LOG_BACKUPS = 5


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
        # the relay on a queue and processes of its own (one relay writes at a time,
        # cluster-wide: a Postgres advisory lock; docs/performance.md, ingestion)
        ("relay", ["worker", "--queues", "relay", "--concurrency", "2", "--no-beat",
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


# The name of the development key (the source `api:dev` of the events it publishes).
DEV_KEY_NAME = "dev"


def development_access(key: str, namespace: str) -> dict[str, str]:
    """The API's keys under `up` without API_KEYS: the development key, with every scope on its
    namespace and the explorer's operator page (one developer, one tenant: nobody else's data
    to hide)."""
    record = {"name": DEV_KEY_NAME, "scopes": {namespace: ["admin"]}, "operator": True}
    return {"BRAINSTREAM_API_KEYS": json.dumps({key: record})}


class _Stop(Exception):
    pass


def run_up(settings: Settings, *, stop_services: bool) -> None:
    """Start everything and supervise it until Ctrl-C (or SIGTERM)."""
    from pipeline.domain.setting_values import local_http_url
    from pipeline.kafka.topics import ensure_topics
    from pipeline.ops.generations import migrate_generations
    from pipeline.services.stack import Stack
    from pipeline.supervisor.console import Console, StatusPoller, announce_when_answering

    console = Console(sys.stdout, line_interval=settings.console_line_interval)
    report = console.event
    stack = Stack(settings)
    report(f"data directory: {settings.resolved_data_dir}")
    records = PidRecords(settings.resolved_data_dir)
    for stale in records.claim(os.getpid()):
        report(f"stopped {stale}, left running by an earlier `brainstream up`")
    stack.start(report=report)
    supervisor = Supervisor(records, report, backoff=RESTART_BACKOFF,
                            backoff_max=RESTART_BACKOFF_MAX,
                            logs=lambda name: ProcessLog(log_dir(settings) / f"{name}.log",
                                                         max_bytes=settings.log_max_bytes,
                                                         backups=LOG_BACKUPS))
    poller = StatusPoller(settings, console.status, supervisor.running)

    def on_signal(signum: int, frame: FrameType | None) -> None:
        raise _Stop()

    signal.signal(signal.SIGTERM, on_signal)
    try:
        migrate_generations(settings, report=report)
        ensure_topics(settings, report=report)
        env = {SUPERVISOR_ENV: str(os.getpid())}
        if not settings.api_keys:
            key, namespace = development_key(settings)
            env.update(development_access(key, namespace))
            report(f"development API key: {key}  (read, write and admin on namespace "
                   f"{namespace}, and the operator page; publish bare objects with --namespace "
                   f"{namespace}; set BRAINSTREAM_API_KEYS to use your own)")
        for spec in app_processes(settings, env):
            supervisor.start(spec)
        report(f"web explorer: http://{settings.api_host}:{settings.api_port}/ui")
        # "ready" once the API answers, from a thread: supervision starts at once meanwhile
        threading.Thread(target=announce_when_answering, name="ready", daemon=True, args=(
            local_http_url(settings.api_host, settings.api_port) + "/healthz", report,
            f"ready. Ctrl-C stops everything. Logs: {log_dir(settings)} "
            "(brainstream logs [process] -f)"),
            kwargs={"stopped": poller.stopped,
                    "warn_after": WORKER_START_TIMEOUT}).start()
        poller.start()
        supervisor.run()
    except (KeyboardInterrupt, _Stop):
        console.close()  # the last status stays on screen, the stop's events below it
        report("stopping ...")
    finally:
        poller.stop()
        console.close()
        supervisor.stop_all()
        records.remove("supervisor")
        if stop_services:
            stack.stop(report=report)
        else:
            report("embedded services left running (brainstream services stop)")


@dataclass
class _Child:
    spec: ProcessSpec
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    deaths: int = 0  # in a row, each after a short run: what the back-off doubles with
    restart_at: float | None = None


class Supervisor:
    """Runs `up`'s children, writes their output line by line to their log files, and starts
    a dead one again."""

    def __init__(self, records: PidRecords, report: Report, *, backoff: float,
                 backoff_max: float, logs: Callable[[str], ProcessLog]) -> None:
        self.records = records
        self.report = report
        self.open_log = logs
        self.logs: dict[str, ProcessLog] = {}  # by process name, kept across its restarts
        self.backoff = backoff
        self.backoff_max = backoff_max
        self.children: list[_Child] = []
        self.selector = selectors.DefaultSelector()
        self.pending: dict[int, bytes] = {}  # per output pipe: its last, unfinished line

    def start(self, spec: ProcessSpec) -> None:
        """Start a new child."""
        child = _Child(spec)
        self.children.append(child)
        self.logs[spec.name] = self.open_log(spec.name)
        self._launch(child)

    def running(self) -> tuple[int, int]:
        """How many children run, of how many (read from the status line's thread: no
        system call, only what the supervisor's loop last saw)."""
        alive = sum(1 for c in self.children if c.proc is not None and c.proc.returncode is None)
        return alive, len(self.children)

    def _launch(self, child: _Child) -> None:
        spec = child.spec
        proc = subprocess.Popen(spec.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                env={**os.environ, **spec.env}, start_new_session=True)
        child.proc, child.started, child.restart_at = proc, time.monotonic(), None
        assert proc.stdout is not None
        self.selector.register(proc.stdout.fileno(), selectors.EVENT_READ, (child, proc))
        self.pending[proc.stdout.fileno()] = b""
        self.records.write(spec.name, proc.pid, spec.argv)
        self.logs[spec.name].write(f"--- started pid {proc.pid}: {' '.join(spec.argv)}")
        self.report(f"{spec.name:9} started   pid {proc.pid}"
                    + (f", listening on {spec.listens}" if spec.listens else ""))

    def run(self) -> None:
        """Supervise until interrupted."""
        while True:
            self.step(timeout=1.0)

    def step(self, timeout: float) -> None:
        """Relay what the children wrote, note the ones that died, start those due again."""
        if self.selector.get_map():
            for key, _ in self.selector.select(timeout=timeout):
                self._relay(key.fd, key.data)
        else:
            time.sleep(timeout)
        now = time.monotonic()
        for child in self.children:
            if child.proc is not None and child.proc.poll() is not None:
                self._died(child, child.proc, now)
            elif child.restart_at is not None and now >= child.restart_at:
                self._launch(child)

    def _relay(self, fd: int, data: tuple[_Child, subprocess.Popen[bytes]]) -> None:
        child, proc = data
        # What the pipe holds now, unbuffered: a buffered readline() would keep the lines after
        # the first in its buffer, unseen by select(), until the child wrote again.
        chunk = os.read(fd, 65536)
        eof = not chunk
        if eof:  # the child closed its output: its last line, if unfinished
            self.selector.unregister(fd)
            chunk = b"\n" if self.pending[fd] else b""
        *lines, self.pending[fd] = (self.pending[fd] + chunk).split(b"\n")
        log = self.logs[child.spec.name]
        for line in lines:
            log.write(line.decode(errors="replace").rstrip())
        if eof:
            del self.pending[fd]
            assert proc.stdout is not None
            proc.stdout.close()

    def _drain(self, child: _Child, proc: subprocess.Popen[bytes]) -> None:
        """Into its log, what a stopped child wrote on its way out (a shutdown's lines, a
        traceback), up to the end of its output or, if a straggler still holds the pipe open,
        until nothing more comes for a moment (and for a few seconds at most)."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno() if not proc.stdout.closed else -1
        deadline = time.monotonic() + 5.0
        while (fd in self.pending and time.monotonic() < deadline
               and select.select([fd], [], [], 0.2)[0]):
            self._relay(fd, (child, proc))

    def _died(self, child: _Child, proc: subprocess.Popen[bytes], now: float) -> None:
        # a Celery pool process or uvicorn worker it left behind would hold the work (or the
        # port) of the next one: its process group goes with it
        stop_orphans(proc.pid)
        child.proc = None
        ran = now - child.started
        child.deaths = 1 if ran > self.backoff_max else child.deaths + 1
        delay = min(self.backoff_max, self.backoff * 2 ** (child.deaths - 1))
        child.restart_at = now + delay
        message = (f"{child.spec.name} exited with status {proc.returncode} after {ran:.0f} s;"
                   f" restarting it in {delay:.0f} s ({child.deaths} in a row)")
        self.logs[child.spec.name].write(f"--- {message}")
        self.report(message)

    def _running(self) -> Iterator[tuple[_Child, subprocess.Popen[bytes]]]:
        for child in reversed(self.children):
            if child.proc is not None:
                yield child, child.proc

    def stop_all(self) -> None:
        """Stop the children together (20 s each to finish what it holds, then killed; one
        after another, six of them could take minutes), and drop their pid records."""
        running = {proc.pid for _, proc in self._running() if proc.poll() is None}
        terminate_trees(running, timeout=20)
        for child, proc in self._running():
            if proc.pid in running:
                self.report(f"{child.spec.name:9} stopped")
            self._drain(child, proc)
        for child in reversed(self.children):
            self.records.remove(child.spec.name)
        for log in self.logs.values():
            log.close()
