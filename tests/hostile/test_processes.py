"""Issue 10, item 16: the pipeline's processes under an unlucky operator.

`brainstream up` runs here for real, on a private embedded stack of this module (its own data
directory and ports, next to the session's), so killing it, stopping its services and starting it
again never disturbs the shared stack. What is asserted:

- a supervisor killed with SIGKILL takes every pipeline process with it (consumer, workers and
  their pool processes, API); the embedded services stay up, by design, and are reused;
- `up` stops what an earlier supervisor left running (from its pid records) before it starts, and
  never signals a process that merely reuses a recorded pid;
- with every service down the processes wait, they do not spin (CPU time over an interval);
- `brainstream status` reports a down service as down and exits 1, without a traceback;
- the fault tests' finalizer (`restore_stack`) brings a stopped service back.

Tests that kill the supervisor, start `up` over a killed one's leftovers or stop services under
running processes take 10-45 s each: marked `slow` (`make faults`), they stay out of `make test`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from pipeline.ops.generations import migrate_generations
from pipeline.services.stack import Stack
from pipeline.settings import Settings
from pipeline.supervisor.lifeline import SUPERVISOR_ENV, PidRecords, stop_group
from tests.pipelineutil import wait_for
from tests.stackutil import (
    TEST_DATA_DIR,
    TEST_PORTS,
    make_settings,
    restore_stack,
    settings_env,
)

pytestmark = [pytest.mark.stack]

PIPELINE = ("consumer", "worker", "extract", "relay", "api")
_OFFSET = int(os.environ.get("BRAINSTREAM_TEST_PORT_OFFSET", "0"))
API_PORT = 28050 + _OFFSET  # beside the test stack's ports, moved by the same offset


@pytest.fixture(scope="module")
def private_stack() -> Iterator[Settings]:
    """An embedded stack of this module only, started once; stopped at the end."""
    # Outside TEST_DATA_DIR: the session's stack fixture wipes that when it first starts.
    data_dir = TEST_DATA_DIR.with_name(TEST_DATA_DIR.name + "-procs")
    settings = make_settings(data_dir, **{name: port + 50 for name, port in TEST_PORTS.items()})
    stack = Stack(settings)
    stack.stop()  # leftovers of an interrupted run
    shutil.rmtree(data_dir, ignore_errors=True)
    stack.start()
    migrate_generations(settings)  # as an earlier `up` left it (a stale API needs the schema)
    yield settings
    stack.stop()


@pytest.fixture()
def services_up(private_stack: Settings) -> Settings:
    """The private stack running (a test that stopped it left it stopped)."""
    Stack(private_stack).start()
    return private_stack


@dataclass
class Supervisor:
    """One `brainstream up` run as an operator would, output to a log file."""

    settings: Settings
    popen: subprocess.Popen[bytes]
    log: Path
    log_start: int  # where this run's output begins in the log
    # where this run's lines begin in each process's log file (DATA_DIR/logs/<name>.log)
    process_log_start: dict[str, int]

    @classmethod
    def start(cls, settings: Settings, env: dict[str, str] | None = None) -> Supervisor:
        """`up` with `env` added to the settings' environment."""
        env = {**settings_env(settings), "PYTHONUNBUFFERED": "1",
               "BRAINSTREAM_API_PORT": str(API_PORT),
               "BRAINSTREAM_CONSUMER_METRICS_PORT": str(API_PORT + 1),
               "BRAINSTREAM_WORKER_METRICS_PORT": str(API_PORT + 2), **(env or {})}
        log = settings.resolved_data_dir / "up.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        logs = settings.resolved_data_dir / "logs"
        process_log_start = {name: (logs / f"{name}.log").stat().st_size
                             if (logs / f"{name}.log").exists() else 0 for name in PIPELINE}
        with open(log, "ab") as out:
            start = out.tell()
            popen = subprocess.Popen(
                [sys.executable, "-m", "pipeline.cli", "up", "--keep-services"], env=env,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        return cls(settings, popen, log, start, process_log_start)

    def output(self) -> str:
        """What `up` itself printed (its events and status lines)."""
        with open(self.log, "rb") as log:
            log.seek(self.log_start)
            return log.read().decode(errors="replace")

    def process_output(self, name: str) -> str:
        """What one pipeline process wrote in this run, from its log file (and the file it
        rotated to last, if it did since)."""
        path = self.settings.resolved_data_dir / "logs" / f"{name}.log"
        start = self.process_log_start[name]
        parts = [(path.with_name(path.name + ".1"), start), (path, 0)] \
            if path.exists() and path.stat().st_size < start else [(path, start)]
        text = ""
        for file, offset in parts:
            if file.exists():
                with open(file, "rb") as log:
                    log.seek(offset)
                    text += log.read().decode(errors="replace")
        return text

    def children(self) -> dict[str, psutil.Process]:
        """The pipeline processes it recorded (and that still run)."""
        running = {r.name: r.matching_process() for r in
                   PidRecords(self.settings.resolved_data_dir).read()}
        return {name: proc for name, proc in running.items()
                if name in PIPELINE and proc is not None and proc.ppid() == self.popen.pid}

    def wait_ready(self, *, pool: bool = True) -> dict[str, psutil.Process]:
        """Until every process runs and the API answers (and, with `pool`, the worker forked
        its pool processes); the processes by name."""
        def all_recorded() -> dict[str, psutil.Process] | None:
            if self.popen.poll() is not None:
                raise AssertionError(f"`up` exited with status {self.popen.returncode}\n"
                                     + self.diagnosis())
            children = self.children()
            return children if len(children) == len(PIPELINE) else None

        # Recorded only after `up` stopped what an earlier one left: the API that answers then
        # is this one's.
        try:
            children = wait_for(all_recorded, timeout=120, interval=0.5,
                                what=f"every pipeline process of `up` (log {self.log})")
            # API_WORKERS defaults to the cores: each spawned worker imports the whole stack
            wait_for(lambda: _answers(API_PORT), timeout=120, interval=0.5,
                     what=f"`up` to serve its API (log {self.log})")
            wait_for(lambda: "[^Worker]: Ready" in self.process_output("consumer"),
                     timeout=60, interval=0.5, what=f"the consumer to join its group ({self.log})")
            if pool:  # Celery forks them after start-up
                wait_for(lambda: len(children["worker"].children()) >= 2, timeout=60,
                         what="the worker's pool processes")
        except AssertionError as exc:  # a clean-clone run keeps no files: say what `up` said
            if "--- `up`" in str(exc):
                raise
            raise AssertionError(f"{exc}\n{self.diagnosis()}") from None
        return children

    def diagnosis(self, lines: int = 40) -> str:
        """What `up` printed and the last lines of each process's log, for a failure message."""
        out = [f"--- `up` ({self.log}):", *self.output().splitlines()[-lines:]]
        for name in PIPELINE:
            out += [f"--- {name}:", *self.process_output(name).splitlines()[-lines // 4:]]
        return "\n".join(out)

    def stop(self) -> int:
        """As Ctrl-C would: the supervisor stops its processes in order; its exit status."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            return self.popen.wait(timeout=90)
        raise AssertionError(f"`up` did not stop in 90 s\n{self.diagnosis()}")

    def kill(self) -> None:
        """Clean-up after a test, whatever state it left: the supervisor and its processes."""
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait(timeout=30)
        for record in PidRecords(self.settings.resolved_data_dir).read():
            if record.name in PIPELINE and record.matching_process():
                stop_group(record.pid)


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def _tree(procs: dict[str, psutil.Process]) -> list[psutil.Process]:
    return [p for proc in procs.values() for p in (proc, *proc.children(recursive=True))]


def _alive(procs: list[psutil.Process]) -> list[str]:
    alive = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                alive.append(f"{proc.pid} {' '.join(proc.cmdline()[3:5])}")
        except psutil.NoSuchProcess:
            pass
    return alive


@pytest.mark.slow  # kills and restarts (`make faults`)
def test_killed_supervisor_takes_its_pipeline_with_it(services_up: Settings) -> None:
    up = Supervisor.start(services_up)
    try:
        tree = _tree(up.wait_ready())
        assert len(tree) >= len(PIPELINE) + 2, "no pool processes under the worker"
        up.popen.kill()  # as the power cut or the OOM killer would: no clean-up runs
        up.popen.wait(timeout=30)
        wait_for(lambda: not _alive(tree), timeout=30,
                 what="the pipeline processes to die with their supervisor")
        # The embedded services are not its children: they stay up, for the next `up`.
        assert all(s.healthy for s in Stack(services_up).status())
    finally:
        up.kill()


@pytest.mark.slow  # kills and restarts (`make faults`)
def test_up_stops_what_an_earlier_supervisor_left_and_starts(services_up: Settings) -> None:
    settings = services_up
    records = PidRecords(settings.resolved_data_dir)
    # An API of an earlier, killed supervisor that had no lifeline: it holds the API port.
    env = {**settings_env(settings), "BRAINSTREAM_API_PORT": str(API_PORT)}
    stale_argv = [sys.executable, "-m", "pipeline.cli", "api"]
    stale = subprocess.Popen(stale_argv, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
    # And a process that merely reuses a recorded pid (another create time, command line).
    bystander = subprocess.Popen(["sleep", "300"])
    up: Supervisor | None = None
    try:
        wait_for(lambda: _answers(API_PORT), timeout=90, what="the stale API to serve")
        records.write("api", stale.pid, stale_argv)
        (records.run_dir / "pipeline-consumer.json").write_text(json.dumps({
            "name": "consumer", "pid": bystander.pid,
            "create_time": psutil.Process(bystander.pid).create_time() - 1000,
            "cmdline": [sys.executable, "-m", "pipeline.cli", "consumer"]}))
        up = Supervisor.start(settings)
        up.wait_ready(pool=False)
        assert stale.poll() is not None, "the stale API still runs"
        assert bystander.poll() is None, "a process that only reused a recorded pid was killed"
        assert "left running by an earlier `brainstream up`" in up.output()
        assert up.stop() == 0
        assert not [r for r in records.read() if r.name in (*PIPELINE, "supervisor")]
    finally:
        for proc in (stale, bystander):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        if up is not None:
            up.kill()


def test_up_finds_what_a_gone_process_left_in_its_group(tmp_path: Path) -> None:
    # uvicorn's spawned workers (API_WORKERS > 1) get no parent-death signal: when the recorded
    # API process is gone, its group's members started under the old supervisor are stopped.
    records = PidRecords(tmp_path)
    gone = 1 << 22  # the earlier supervisor: a pid at Linux's pid_max, so none runs
    records.run_dir.mkdir()
    (records.run_dir / "pipeline-supervisor.json").write_text(json.dumps({
        "name": "supervisor", "pid": gone, "create_time": 0.0, "cmdline": ["up"]}))
    env = {**os.environ, SUPERVISOR_ENV: str(gone)}
    argv = [sys.executable, "-c", "import subprocess, sys; "
            "print(subprocess.Popen(['sleep', '300']).pid, flush=True); sys.stdin.read()"]
    leader = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              start_new_session=True)
    # Same environment, another process group: not the gone process's, never touched.
    bystander = subprocess.Popen(["sleep", "300"], env=env, start_new_session=True)
    assert leader.stdout is not None
    worker = psutil.Process(int(leader.stdout.readline()))
    try:
        records.write("api", leader.pid, argv)
        leader.kill()
        leader.wait()
        assert worker.is_running(), "the worker died with its parent: nothing left to find"
        stopped = records.claim(os.getpid())
        assert stopped and "of api" in stopped[0], stopped
        assert not worker.is_running() or worker.status() == psutil.STATUS_ZOMBIE
        assert bystander.poll() is None
    finally:
        for proc in (worker, psutil.Process(bystander.pid)):
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        bystander.wait()


def test_restore_stack_brings_stopped_services_back(services_up: Settings) -> None:
    # What the fault tests' finalizer relies on so that one failure does not cascade.
    stack = Stack(services_up)
    redis = next(s for s in stack.services if s.name == "redis")
    assert redis.stop()
    assert [r.split()[0] for r in restore_stack(services_up)] == ["redis"]
    assert all(s.healthy for s in stack.status())
    assert restore_stack(services_up) == []


@pytest.mark.slow  # kills and restarts (`make faults`)
def test_processes_wait_without_spinning_while_services_are_down(services_up: Settings) -> None:
    up = Supervisor.start(services_up)
    try:
        procs = up.wait_ready()
        Stack(services_up).stop()  # the `services_up` fixture of the next test restarts it
        time.sleep(2)  # past the first reconnect attempts
        before = {name: _cpu(proc) for name, proc in procs.items()}
        started = time.monotonic()
        time.sleep(4)
        interval = time.monotonic() - started
        assert all(proc.is_running() for proc in procs.values()), \
            "a pipeline process exited instead of waiting for its services"
        busy = {name: round((_cpu(proc) - before[name]) / interval, 2)
                for name, proc in procs.items()}
        # Waiting costs a few reconnect attempts a second, far below a core; the orphaned
        # consumer of the issue burnt 0.74 of one (logging into its dead supervisor's pipe).
        assert all(share < 0.25 for share in busy.values()), busy
    finally:
        up.kill()


def _cpu(proc: psutil.Process) -> float:
    """CPU seconds of a process and its descendants (Celery's pool processes)."""
    while True:
        try:  # psutil raises when a descendant exits while it lists them: list again
            members = (proc, *proc.children(recursive=True))
            break
        except psutil.NoSuchProcess:
            if not proc.is_running():
                return 0.0
    total = 0.0
    for member in members:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = member.cpu_times()
            total += times.user + times.system
    return total


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow  # kills and restarts (`make faults`)
def test_a_consumer_started_while_the_broker_is_down_waits_for_it(services_up: Settings,
                                                                   tmp_path: Path) -> None:
    # Before: faust exited at once when it could not reach the broker, and `up` then stopped
    # every process with "consumer exited".
    broker = next(s for s in Stack(services_up).services if s.name == "broker")
    assert broker.stop()
    log = tmp_path / "consumer.log"
    with open(log, "wb") as out:
        consumer = subprocess.Popen(
            [sys.executable, "-m", "pipeline.cli", "consumer"],
            env={**settings_env(services_up), "PYTHONUNBUFFERED": "1"},
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: log.read_text(errors="replace").count("unreachable; retrying") >= 2,
                 timeout=60, interval=0.5, what="the consumer to wait for the broker")
        assert consumer.poll() is None, log.read_text(errors="replace")
        Stack(services_up).start()
        wait_for(lambda: "[^Worker]: Ready" in log.read_text(errors="replace"), timeout=120,
                 interval=0.5, what="the consumer to start once the broker is back")
        assert consumer.poll() is None, log.read_text(errors="replace")
    finally:
        stop_group(consumer.pid)
        Stack(services_up).start()


@pytest.mark.parametrize("service", ["postgres", "broker", "falkordb", "redis"])
def test_status_reports_a_down_service_and_exits_1(stack_settings: Settings,
                                                   service: str) -> None:
    port = _closed_port()
    setting, url = {
        "postgres": ("POSTGRES_DSN", f"postgresql://postgres@127.0.0.1:{port}/brainstream"),
        "broker": ("KAFKA_BOOTSTRAP", f"127.0.0.1:{port}"),
        "falkordb": ("FALKORDB_URL", f"redis://127.0.0.1:{port}"),
        "redis": ("REDIS_URL", f"redis://127.0.0.1:{port}/0"),
    }[service]
    env = {**settings_env(stack_settings), f"BRAINSTREAM_{setting}": url}
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "status"], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    states = {line.split()[0]: line.split()[2] for line in done.stdout.splitlines()
              if line.startswith("  ") and len(line.split()) >= 3}
    assert states[service] == "unhealthy", done.stdout
    assert all(state == "healthy" for name, state in states.items() if name != service and
               name in ("postgres", "broker", "falkordb", "redis", "s3store")), done.stdout
