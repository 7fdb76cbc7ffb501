"""How the pipeline processes of `brainstream up` live and die with their supervisor.

A supervisor killed outright (kill -9, OOM killer, lost power) runs no clean-up, and its children
run in sessions of their own (so a Ctrl-C in the terminal reaches only the supervisor, which
stops them in order). Two mechanisms keep them from outliving it:

- Parent-death signal (Linux `prctl(PR_SET_PDEATHSIG)`): each child `up` starts arms itself
  (`follow_supervisor`), and arms every process it forks (Celery's pool processes), so the
  kernel SIGKILLs them as soon as their parent is gone, however it died. SIGKILL, not SIGTERM: a
  graceful stop needs the services that may have died with the supervisor, and every step of the
  pipeline is idempotent, so nothing is lost (unacknowledged work is redelivered).
- Pid records under `DATA_DIR/run/pipeline-*.json` (pid, create time, command line): `up` stops
  what an earlier supervisor left running before it starts its own processes, covering what the
  signal cannot reach (no prctl: not Linux; processes started by `spawn`, e.g. uvicorn's
  workers with API_WORKERS > 1: found by their process group and the supervisor their
  environment names). A record is trusted only while the pid
  still has the recorded create time and command line, so a recycled pid is never signalled.

The embedded services (Postgres, FalkorDB, Redis, the broker and its S3 store) are not children
of `up`: they run detached by design, are shared with `brainstream services` and other commands,
and survive a killed supervisor; the next `up` reuses them.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil

from pipeline.domain.errors import ServiceError
from pipeline.services.process import stop_processes

SUPERVISOR_ENV = "BRAINSTREAM_SUPERVISOR_PID"
_PR_SET_PDEATHSIG = 1


# Resolved once, in the parent: looking a symbol up (dlopen) after a fork of a threaded process
# could wait forever on a loader lock another thread held at the fork.
_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None


def _set_parent_death_signal(signum: int) -> bool:
    """Ask the kernel to send `signum` to this process when its parent exits (Linux only)."""
    return _PRCTL is not None and int(_PRCTL(_PR_SET_PDEATHSIG, signum, 0, 0, 0)) == 0


def die_with(parent_pid: int) -> None:
    """Arm this process to be SIGKILLed when `parent_pid` (its parent) exits; if the parent is
    already gone (it died between fork and now), die at once."""
    _set_parent_death_signal(signal.SIGKILL)
    if os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGKILL)


def follow_supervisor() -> None:
    """First thing in a process `up` started (SUPERVISOR_ENV names the supervisor): die with the
    supervisor, and arm every process forked later (Celery's pool processes) to die with this one.

    Armed by the child itself rather than in a `preexec_fn` (unsafe in a threaded parent); the
    parent check in `die_with` covers a supervisor that died before the child got here. The
    signal survives the consumer's re-exec. The kernel ties it to the forking *thread*: a pool
    process billiard forks from its supervisor thread (replacing a crashed one) dies when that
    thread ends, i.e. when the pool shuts down, when it would be stopped anyway.
    """
    supervisor = os.environ.get(SUPERVISOR_ENV)
    if not supervisor:
        return
    die_with(int(supervisor))
    forking: list[int] = []

    def remember_parent() -> None:
        forking[:] = [os.getpid()]

    def arm_forked_child() -> None:
        if forking:
            die_with(forking[0])

    os.register_at_fork(before=remember_parent, after_in_child=arm_forked_child)


# -- pid records of the supervised processes ---------------------------------------------


@dataclass(frozen=True)
class PidRecord:
    """A process `up` started: enough to recognise it later, never a recycled pid."""

    name: str
    pid: int
    create_time: float
    cmdline: list[str]

    def matching_process(self) -> psutil.Process | None:
        """The live process this record describes, or None."""
        try:
            proc = psutil.Process(self.pid)
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            same = (abs(proc.create_time() - self.create_time) < 0.05
                    and proc.cmdline() == self.cmdline)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return None
        return proc if same else None


class PidRecords:
    """The `pipeline-<name>.json` records of one data directory (and the supervisor's own)."""

    def __init__(self, data_dir: Path) -> None:
        self.run_dir = data_dir / "run"

    def _path(self, name: str) -> Path:
        return self.run_dir / f"pipeline-{name}.json"

    def write(self, name: str, pid: int, argv: list[str]) -> PidRecord:
        """Record a process just started with `argv` (what its command line is once it
        exec'd: read from /proc right after the fork it may still be empty)."""
        record = PidRecord(name, pid, psutil.Process(pid).create_time(), list(argv))
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._path(name).write_text(json.dumps(record.__dict__) + "\n")
        return record

    def remove(self, name: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._path(name).unlink()

    def read(self) -> list[PidRecord]:
        """Every record; unreadable ones are dropped (a crash mid-write leaves at worst one)."""
        records = []
        for path in sorted(self.run_dir.glob("pipeline-*.json")):
            try:
                data = json.loads(path.read_text())
                records.append(PidRecord(str(data["name"]), int(data["pid"]),
                                         float(data["create_time"]),
                                         [str(arg) for arg in data["cmdline"]]))
            except (OSError, ValueError, KeyError, TypeError):
                path.unlink(missing_ok=True)
        return records

    def claim(self, supervisor_pid: int) -> list[str]:
        """Before a supervisor starts its processes: refuse if another live supervisor owns this
        data directory, else stop what an earlier one left running; names what was stopped."""
        records = self.read()
        owner = next((r for r in records if r.name == "supervisor"), None)
        if owner is not None and owner.pid != supervisor_pid and owner.matching_process():
            raise ServiceError(f"`brainstream up` already runs on {self.run_dir.parent} "
                               f"(pid {owner.pid}); stop it first")
        stopped = []
        for record in records:
            if record.name != "supervisor":
                proc = record.matching_process()
                if proc is not None:
                    stop_group(proc.pid)
                    stopped.append(f"{record.name} (pid {record.pid})")
                elif owner is not None and (orphans := _orphans(record, owner)):
                    stop_processes(orphans, 10.0)
                    stopped.append(f"{len(orphans)} process(es) of {record.name} "
                                   f"(pid {record.pid}, gone)")
            self.remove(record.name)
        self.write("supervisor", supervisor_pid, psutil.Process(supervisor_pid).cmdline())
        return stopped


def _orphans(record: PidRecord, owner: PidRecord) -> set[psutil.Process]:
    """What a recorded process that is gone left behind, e.g. uvicorn's spawned workers (no
    parent-death signal reaches them): members of its process group started after it under
    the same supervisor (their environment names it); never anything else."""
    found: set[psutil.Process] = set()
    for proc in psutil.process_iter():
        try:
            if (os.getpgid(proc.pid) == record.pid and proc.create_time() >= record.create_time
                    and proc.environ().get(SUPERVISOR_ENV) == str(owner.pid)):
                found.update((proc, *proc.children(recursive=True)))
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return found


def stop_group(pid: int, timeout: float = 10.0) -> None:
    """Stop a process with its descendants and, when it leads its own process group (as `up`'s
    children do), the rest of that group (descendants reparented away from it)."""
    try:
        leader = psutil.Process(pid)
        procs = {leader, *leader.children(recursive=True)}
    except psutil.NoSuchProcess:
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if os.getpgid(pid) == pid:
            procs.update(p for p in psutil.process_iter() if _in_group(p, pid))
    stop_processes(procs, timeout)


def _in_group(proc: psutil.Process, pgid: int) -> bool:
    try:
        return os.getpgid(proc.pid) == pgid
    except (ProcessLookupError, PermissionError):
        return False


def stop_orphans(pgid: int, timeout: float = 10.0) -> None:
    """Stop what is left in the process group of a leader that exited and was reaped (its
    pool processes or spawned workers): while any member lives, no new process can take the
    group's id, so nothing else is signalled."""
    stop_processes({p for p in psutil.process_iter() if _in_group(p, pgid)}, timeout)


API_PARENT_ENV = "BRAINSTREAM_API_PARENT_PID"


def follow_api_parent() -> None:
    """In an API worker that uvicorn spawned (API_WORKERS > 1) under `up`: die with the uvicorn
    process that spawned it, which dies with the supervisor. A spawned process runs no fork
    hook, so `follow_supervisor`'s arming does not reach it; with one worker the app runs in the
    uvicorn process itself, already armed."""
    parent = os.environ.get(API_PARENT_ENV)
    if parent and os.environ.get(SUPERVISOR_ENV) and int(parent) != os.getpid():
        die_with(int(parent))
