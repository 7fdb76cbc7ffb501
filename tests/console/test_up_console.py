"""Issue 15, item 4: `brainstream up`'s quieter console, on the real stack.

One `up` runs for the whole module on the private embedded stack of
tests/hostile/test_processes.py (its own data directory and ports), with small log files so that
they rotate within seconds. What is asserted: `up` prints its status line and none of its
processes' output (no Celery banner, no root warning); each process logs to its own rotating
file; `brainstream logs` prints and follows them; a worker's pool process has loaded its
embedder before it runs its first embedding task.
"""

from __future__ import annotations

import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path

import httpx
import pytest

from pipeline.services.stack import Stack
from pipeline.settings import Settings
from pipeline.supervisor.runner import LOG_BACKUPS
from tests.hostile.test_processes import (  # noqa: F401 - fixture used by name
    API_PORT,
    PIPELINE,
    Supervisor,
    private_stack,
)
from tests.pipelineutil import Publisher, indexed, put, wait_for
from tests.stackutil import settings_env

pytestmark = [pytest.mark.stack]

MAX_BYTES = 32768
BACKUPS = LOG_BACKUPS
STATUS = re.compile(r"^\d\d:\d\d:\d\d processes 5/5 · services 5/5 · lag \d+\+? · "
                    r"backlog .+ · dlq \d+", re.M)
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ")


@pytest.fixture(scope="module")
def up(private_stack: Settings) -> Iterator[Supervisor]:  # noqa: F811
    Stack(private_stack).start()
    supervisor = Supervisor.start(private_stack, {
        "BRAINSTREAM_LOG_MAX_BYTES": str(MAX_BYTES),
        "BRAINSTREAM_CONSOLE_LINE_INTERVAL": "0",
        "BRAINSTREAM_API_WORKERS": "1"})
    try:
        supervisor.wait_ready(pool=False)
        yield supervisor
        assert supervisor.stop() == 0
    finally:
        supervisor.kill()


def _logs(settings: Settings) -> Path:
    return settings.resolved_data_dir / "logs"


def _history(settings: Settings, name: str) -> list[str]:
    """Every line a process's log files hold, oldest first (the data directory is this module's
    own, so they hold this run only)."""
    path = _logs(settings) / f"{name}.log"
    files = [path.with_name(f"{path.name}.{n}") for n in range(BACKUPS, 0, -1)] + [path]
    return [line for file in files if file.exists()
            for line in file.read_text(errors="replace").splitlines()]


def _logs_command(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "logs", *args],
                          env=settings_env(settings), capture_output=True, text=True,
                          timeout=60)


def test_up_prints_a_status_line_and_none_of_its_processes_output(up: Supervisor) -> None:
    wait_for(lambda: STATUS.search(up.output()), timeout=60, interval=0.5,
             what=f"`up`'s status line ({up.log})")
    out = up.output()
    # Each process's own output went to its log file, not to `up`'s: no Celery banner, no
    # root warning, no faust or uvicorn lines, no sweep line.
    for noise in ("[queues]", "[tasks]", "SecurityWarning", "superuser", "[^Worker]",
                  "Uvicorn running", "Scheduler: Sending due task", "[worker]", "[consumer]"):
        assert noise not in out, f"{noise!r} in `up`'s output:\n{out[-3000:]}"
    # said once the API answers, by a thread of its own: it may follow the first status line
    wait_for(lambda: "ready. Ctrl-C stops everything. Logs:" in up.output() or None,
             timeout=60, interval=0.5, what=f"`up`'s ready line ({up.log})")
    # the beat sends the sweep every few seconds: its line reaches the worker's log, not `up`'s
    wait_for(lambda: "Scheduler: Sending due task sweep"
             in "\n".join(_history(up.settings, "worker")) or None, timeout=60,
             what="the sweep's line in worker.log")


def test_the_status_line_is_printed_again_when_it_changes(up: Supervisor) -> None:
    def dead_letters() -> list[int]:
        return [int(m.group(1)) for m in re.finditer(r" · dlq (\d+)", up.output())]

    before = wait_for(dead_letters, timeout=60, what="a status line")[-1]
    publisher = Publisher(up.settings)
    try:
        publisher.send(b"{not json", "poison")  # dead-lettered by the consumer
    finally:
        publisher.close()
    wait_for(lambda: before + 1 in dead_letters(), timeout=60, interval=0.5,
             what=f"a status line with {before + 1} dead letters ({up.log})")
    # not a terminal: a line per change, not one per collection (every 0.5 s here)
    lines = [m.group(1) for m in re.finditer(r"^\d\d:\d\d:\d\d (processes .*)$",
                                              up.output(), re.M)]
    assert all(a != b for a, b in pairwise(lines)), lines


def test_each_process_logs_to_its_own_rotating_file(up: Supervisor) -> None:
    logs = _logs(up.settings)
    children = up.children()
    for name in PIPELINE:
        assert f"--- started pid {children[name].pid}: " in "\n".join(
            _history(up.settings, name)), name
    # The API logs each request: enough of them fill its log BACKUPS + 1 times over, so it
    # rotates past its last backup. What is kept is the newest lines, every one of them.
    pad = "x" * 900  # long lines: fewer requests fill the files
    probes = (BACKUPS + 2) * MAX_BYTES // len(pad)
    with httpx.Client(base_url=f"http://127.0.0.1:{API_PORT}") as client:
        for n in range(probes):
            assert client.get("/healthz", params={"probe": n, "pad": pad}).status_code == 200
    wait_for(lambda: f"probe={probes - 1}&" in "\n".join(_history(up.settings, "api")),
             timeout=30, what="the last request in the API's log")
    assert (logs / f"api.log.{BACKUPS}").exists()
    assert not (logs / f"api.log.{BACKUPS + 1}").exists()
    for file in logs.glob("api.log*"):
        assert file.stat().st_size <= MAX_BYTES, file
    history = _history(up.settings, "api")
    assert all(STAMP.match(line) for line in history)
    kept = [int(m.group(1)) for line in history if (m := re.search(r"probe=(\d+)&", line))]
    assert kept[0] > 0, "nothing rotated away"
    assert kept == list(range(kept[0], probes)), "a line was lost or repeated in a rotation"
    # the root warning Celery printed at every worker's start (as root, JSON only) is gone
    for name in ("extract", "relay"):
        history = "\n".join(_history(up.settings, name))
        assert "[queues]" in history, f"{name}: its banner, at least, is logged"
        assert "SecurityWarning" not in history and "superuser" not in history, history


def test_logs_prints_a_process_last_lines(up: Supervisor) -> None:
    settings = up.settings
    one = _logs_command(settings, "relay", "-n", "4")
    assert one.returncode == 0, one.stderr
    lines = one.stdout.splitlines()
    assert len(lines) == 4
    history = _history(settings, "relay")
    at = history.index(lines[0])
    assert history[at:at + 4] == lines


def test_logs_interleaves_every_process_and_refuses_an_unknown_one(up: Supervisor) -> None:
    settings = up.settings
    every = _logs_command(settings, "-n", "60")
    assert every.returncode == 0, every.stderr
    prefixed = [re.match(r"^\[(\w+)\] (\S+) ", line) for line in every.stdout.splitlines()]
    assert len(prefixed) == 60 and all(prefixed), every.stdout
    assert {m.group(1) for m in prefixed if m} <= set(PIPELINE)
    stamps = [m.group(2) for m in prefixed if m]
    assert stamps == sorted(stamps), "interleaved out of time order"

    unknown = _logs_command(settings, "nosuch")
    assert unknown.returncode == 2
    assert "'nosuch'" in unknown.stderr and "relay" in unknown.stderr, unknown.stderr


def test_logs_follows_a_process(up: Supervisor) -> None:
    settings = up.settings
    follow = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "logs", "worker", "-f",
                               "-n", "0"], env=settings_env(settings),
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert follow.stdout is not None
        followed = follow.stdout.readline()  # the next sweep, within seconds
        assert STAMP.match(followed), followed
        wait_for(lambda: followed.rstrip("\n") in _history(settings, "worker"), timeout=10,
                 what="the followed line in the worker's log")
    finally:
        follow.kill()
        follow.wait()


def test_a_worker_loads_its_embedder_before_its_first_embedding_task(up: Supervisor) -> None:
    event = put(uuid.uuid4(), title="the first document after start-up")
    publisher = Publisher(up.settings)
    try:
        publisher.send(event, event["data"]["id"])
    finally:
        publisher.close()
    wait_for(lambda: indexed(up.settings, event["data"]["id"]), timeout=90,
             what="the document to be embedded and in the graph")
    history = _history(up.settings, "worker")
    ran = next(line for line in history
               if re.search(r"Task brainstream\.embed\[[^]]+\] succeeded", line))
    pool_process = re.search(r"/(ForkPoolWorker-\d+)\]", ran)
    assert pool_process, ran
    loaded = [i for i, line in enumerate(history)
              if f"{pool_process.group(1)}] embedder static loaded at start" in line]
    assert loaded and loaded[0] < history.index(ran), \
        f"{pool_process.group(1)} ran an embedding before it had loaded its embedder"


def test_stopping_up_keeps_what_its_processes_wrote_on_their_way_out(up: Supervisor) -> None:
    # the module's last test: it stops the module's `up`
    assert up.stop() == 0
    assert "Finished server process" in "\n".join(_history(up.settings, "api"))
    assert "Warm shutdown" in "\n".join(_history(up.settings, "relay"))
    out = up.output()
    assert out.index("stopping ...") < out.index("api       stopped")
