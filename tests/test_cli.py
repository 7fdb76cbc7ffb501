"""The `brainstream` command: help everywhere, clear errors for bad configuration."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from pipeline.cli import main


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = [prefix]
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            out += _commands(command, (*prefix, name))
        else:
            out.append((*prefix, name))
    return out


@pytest.mark.parametrize("path", _commands(main), ids=lambda p: " ".join(p) or "brainstream")
def test_every_subcommand_has_help(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output
    assert len(result.output.splitlines()) > 3


def test_bad_setting_is_a_clear_error(tmp_path: object) -> None:
    env = {**os.environ, "BRAINSTREAM_TOPIC_PARTITIONS": "zero"}
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "services", "status"],
                          env=env, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2
    assert "BRAINSTREAM_TOPIC_PARTITIONS" in done.stderr
    assert "Traceback" not in done.stderr


def test_taken_port_via_cli(tmp_path: object) -> None:
    from tests.stackutil import TEST_DATA_DIR

    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        port = blocker.getsockname()[1]
        env = {k: v for k, v in os.environ.items()
                if not k.startswith("BRAINSTREAM_") or k == "BRAINSTREAM_TEST_PORT_OFFSET"}
        env.update({"BRAINSTREAM_DATA_DIR": str(TEST_DATA_DIR / "cli-port"),
                    "BRAINSTREAM_PG_PORT": str(port)})
        done = subprocess.run([sys.executable, "-m", "pipeline.cli", "services", "start"],
                              env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"port {port}" in done.stderr
    assert "BRAINSTREAM_PG_PORT" in done.stderr
    assert "Traceback" not in done.stderr
