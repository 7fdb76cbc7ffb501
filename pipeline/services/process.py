"""Daemon processes of the embedded stack: spawn detached, track by pid file, stop for good.

Each embedded service runs in its own session (so Ctrl-C in a terminal does not reach it and it
outlives the command that started it); its pid file lives under `DATA_DIR/run/` and its log under
`DATA_DIR/logs/`. A pid file is trusted only while that pid is alive *and* its command line still
names our data directory, so a recycled pid is never mistaken for our server.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil

from pipeline.domain.errors import PortInUse, ServiceError


@dataclass(frozen=True)
class Daemon:
    """One long-running process of the embedded stack."""

    name: str
    run_dir: Path
    log_dir: Path
    marker: str  # a string that must appear in the process's command line (our data dir)

    @property
    def pid_file(self) -> Path:
        return self.run_dir / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    def pid(self) -> int | None:
        """The pid of our running process, or None (a stale pid file is removed)."""
        try:
            pid = int(self.pid_file.read_text().strip())
        except (FileNotFoundError, ValueError):
            return None
        if is_our_process(pid, self.marker):
            return pid
        with contextlib.suppress(FileNotFoundError):
            self.pid_file.unlink()
        return None

    def spawn(self, argv: Sequence[str], *, env: dict[str, str] | None = None,
              cwd: Path | None = None) -> int:
        """Start the process detached from our session, output appended to its log file."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            log.write(f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: "
                      f"{' '.join(argv)}\n".encode())
            log.flush()
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=cwd,
                start_new_session=True,
                close_fds=True,
            )
        self.pid_file.write_text(f"{proc.pid}\n")
        return proc.pid

    def launch(self, argv: Sequence[str], *, ready: Callable[[], bool], timeout: float,
               env: dict[str, str] | None = None, cwd: Path | None = None,
               interval: float = 0.2) -> int:
        """Spawn and wait until `ready`; a start that fails leaves no process behind."""
        pid = self.spawn(argv, env=env, cwd=cwd)
        try:
            wait_until(ready, timeout=timeout, what=self.name, daemon=self, interval=interval)
        except BaseException:
            terminate_tree(pid, timeout=10)
            with contextlib.suppress(FileNotFoundError):
                self.pid_file.unlink()
            raise
        return pid

    def exited_early(self) -> bool:
        """True when the process we just spawned is gone (it crashed during start).

        The marker is not consulted: right after fork the child still shows our command line.
        """
        try:
            pid = int(self.pid_file.read_text().strip())
            return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
        except (FileNotFoundError, ValueError, psutil.NoSuchProcess):
            return True

    def stop(self, timeout: float = 20.0) -> bool:
        """SIGTERM the process (and its group), SIGKILL after `timeout`. True if one was running."""
        pid = self.pid()
        if pid is None:
            return False
        terminate_tree(pid, timeout)
        with contextlib.suppress(FileNotFoundError):
            self.pid_file.unlink()
        return True

    def tail_log(self, lines: int = 15) -> str:
        """The end of the log, for error messages."""
        try:
            text = self.log_file.read_text(errors="replace")
        except FileNotFoundError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def is_our_process(pid: int, marker: str) -> bool:
    """True when `pid` is alive (not a zombie) and its command line contains `marker`."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        return marker in " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


def terminate_tree(pid: int, timeout: float) -> None:
    """Stop a process and all its children: TERM, wait, then KILL what is left."""
    terminate_trees([pid], timeout)


def terminate_trees(pids: Iterable[int], timeout: float) -> None:
    """Stop processes and all their children together: each is sent TERM at once and they
    share one wait, so stopping many takes as long as the slowest, not the sum."""
    procs: list[psutil.Process] = []
    for pid in pids:
        try:
            root = psutil.Process(pid)
            procs += [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    stop_processes(procs, timeout)


def stop_processes(procs: Iterable[psutil.Process], timeout: float) -> None:
    """SIGTERM, then SIGKILL after `timeout`; psutil checks each process's identity (create
    time) before signalling it, so a pid recycled meanwhile is left alone."""
    procs = list(procs)
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.send_signal(signal.SIGTERM)
    _gone, alive = psutil.wait_procs(procs, timeout=timeout)
    for proc in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(alive, timeout=5)


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True when nothing listens on host:port (we can bind it ourselves)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def require_free_port(service: str, port: int, setting: str) -> None:
    """Fail with a message naming the port and the setting that moves it."""
    if not port_is_free(port):
        raise PortInUse(
            f"cannot start {service}: port {port} on 127.0.0.1 is already in use by another "
            f"process; stop that process or choose another port with BRAINSTREAM_{setting}",
            field=setting.lower(),
        )


def port_accepts(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    """True when a TCP connection to host:port succeeds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until(check: Callable[[], bool], *, timeout: float, what: str,
               daemon: Daemon | None = None, interval: float = 0.2) -> None:
    """Poll `check` until it is true; fail early if the daemon died, with its log's tail."""
    deadline = time.monotonic() + timeout
    last_error = ""
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except Exception as exc:  # readiness probes fail in many ways while a server boots
            last_error = f"{type(exc).__name__}: {exc}"
        if daemon is not None and daemon.exited_early():
            raise ServiceError(
                f"{what} exited during start-up; last lines of {daemon.log_file}:\n"
                f"{daemon.tail_log()}"
            )
        time.sleep(interval)
    detail = f" (last error: {last_error})" if last_error else ""
    log = f"; see {daemon.log_file}" if daemon is not None else ""
    raise ServiceError(f"{what} was not ready after {timeout:.0f}s{detail}{log}")


def env_with(extra: dict[str, str]) -> dict[str, str]:
    """The current environment plus `extra`."""
    env = dict(os.environ)
    env.update(extra)
    return env
