"""`brainstream mcp` refuses to start over stdio without the key its tools would act with: a
clear error and exit status 2, not a server whose every call answers 401."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.stackutil import REPO


def test_stdio_without_a_key_is_a_clear_error() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRAINSTREAM_")}
    done = subprocess.run([sys.executable, "-m", "pipeline.cli", "mcp"], env=env, cwd=REPO,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "error [bad_config]" in done.stderr
    assert "BRAINSTREAM_MCP_API_KEY" in done.stderr
    assert done.stdout == ""  # stdout is the protocol's: nothing else is ever written there
