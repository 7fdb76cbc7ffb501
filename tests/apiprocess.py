"""A real `brainstream api` process for a test: started with an environment, on a free port
(or a given one), its output in a log file, waited for until it answers, stopped with its
process group (killed when a publish thread still waits on a hung broker)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.pipelineutil import wait_for
from tests.stackutil import REPO


def free_port() -> int:
    """A TCP port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class ApiProcess:
    port: int
    popen: subprocess.Popen[bytes]
    env: dict[str, str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def healthz(self) -> int:
        return httpx.get(self.url + "/healthz", timeout=30).status_code

    def answers(self, path: str) -> bool:
        """Whether `path` answers 200 now."""
        try:
            return httpx.get(self.url + path, timeout=5).status_code == 200
        except httpx.TransportError:
            return False


@contextmanager
def serve_api(env: dict[str, str], log_path: Path, *, port: int | None = None,
                ready: bool = True) -> Iterator[ApiProcess]:
    """`brainstream api` with `env` while the block runs, once `/readyz` answers 200 (or only
    `/healthz`: `ready=False`, for an API whose dependencies are down on purpose)."""
    port = port or free_port()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as out:
        popen = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "api", "--port",
                                  str(port)], env={"PYTHONUNBUFFERED": "1", **env},
                                 cwd=str(REPO), stdout=out, stderr=subprocess.STDOUT,
                                 start_new_session=True)
    api = ApiProcess(port, popen, env)
    try:
        probe = "/readyz" if ready else "/healthz"
        wait_for(lambda: api.answers(probe), timeout=120, what=f"the API to answer {probe}")
        yield api
    finally:
        os.killpg(popen.pid, signal.SIGTERM)
        try:
            popen.wait(timeout=60)
        except subprocess.TimeoutExpired:  # a publish thread still waiting on a hung broker
            os.killpg(popen.pid, signal.SIGKILL)
            popen.wait(timeout=30)
