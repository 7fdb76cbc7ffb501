"""The Python examples of client/README.md, for the tests that run them: each block on its
own, as a reader would paste it, with the API's address and a tenant's key in the
environment (`Client()` reads them)."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "client" / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
PUBLISHING = "client.publish("  # blocks that need POST /v1/events


def blocks() -> list[str]:
    """The Python blocks, each padded with blank lines to where it stands in the README, so a
    traceback names the README's own line."""
    text = README.read_text(encoding="utf-8")
    return ["\n" * text.count("\n", 0, m.start(1)) + m.group(1) for m in BLOCK.finditer(text)]


def run_block(code: str, url: str, key: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run one example against the API at `url` as the tenant of `key`; what it printed."""
    monkeypatch.setenv("BRAINSTREAM_API_URL", url)
    monkeypatch.setenv("BRAINSTREAM_API_KEY", key)
    monkeypatch.delenv("BRAINSTREAM_NAMESPACE", raising=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
    return out.getvalue()
