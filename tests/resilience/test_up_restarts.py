"""`brainstream up` starts a pipeline process that died again (with a back-off, logged), and the
pipeline goes on: runs `up` for real on the private stack of tests/hostile/test_processes.py."""

from __future__ import annotations

import os
import re
import signal
import uuid

import pytest

from pipeline.settings import Settings
from tests.hostile.test_processes import (  # noqa: F401 - fixtures used by name
    Supervisor,
    private_stack,
    services_up,
)
from tests.pipelineutil import Publisher, indexed, put, wait_for


@pytest.mark.slow  # a private stack and a whole `up`: about 100 s
def test_up_restarts_a_process_that_died(services_up: Settings) -> None:  # noqa: F811
    settings = services_up
    up = Supervisor.start(settings)
    try:
        before = up.wait_ready(pool=False)
        dead = before["relay"].pid
        os.killpg(dead, signal.SIGKILL)  # the relay worker and its pool, as the OOM killer would
        restarted = wait_for(
            lambda: (p := up.children().get("relay")) is not None and p.pid != dead and p,
            timeout=60, what=f"`up` to start the relay again (log {up.log})")
        out = up.output()
        assert re.search(r"relay exited with status -9 after \d+ s; restarting it in 1 s "
                         r"\(1 in a row\)", out), out[-2000:]
        assert f"relay     started   pid {restarted.pid}" in out
        # the others kept running, and the restarted relay does its work: a new object gets
        # into the graph
        after = up.children()
        assert {n: p.pid for n, p in after.items() if n != "relay"} == \
            {n: p.pid for n, p in before.items() if n != "relay"}
        event = put(uuid.uuid4(), title="after the relay's restart")
        publisher = Publisher(settings)
        try:
            publisher.send(event, event["data"]["id"])
        finally:
            publisher.close()
        wait_for(lambda: indexed(settings, event["data"]["id"]), timeout=90,
                 what="an object published after the restart to reach the graph")
        assert up.stop() == 0
    finally:
        up.kill()
