"""What every benchmark shares about its run: where its data and the datasets are, what machine
and code it measures, and how it talks (progress on stderr, the report on stdout and `--out`,
library logging kept quiet).

The benchmarks run as modules from the repository's root (`python -m bench.<name>`), so their
modules import each other by absolute name (`from bench.harness.runenv import log`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[2]
DATASETS = REPO / "bench" / "datasets"
BENCH_DIR = REPO / ".brainstream-bench"


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a JSON-lines file (gzip-compressed when it ends in .gz), blank lines skipped."""
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


# -- what was measured -----------------------------------------------------------------------


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    model = platform.processor() or "unknown"
    with open("/proc/cpuinfo", encoding="utf-8") as handle:
        for line in handle:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    memory = psutil.virtual_memory().total / 2**30
    return {"date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "cpus": str(os.cpu_count()), "cpu model": model, "memory": f"{memory:.0f} GiB",
            "python": platform.python_version(), "kernel": platform.release()}


def code_version() -> str:
    """The checked-out commit, and whether the working tree differs from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              check=False).stdout.strip()

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no")
    return f"{commit}{' with uncommitted changes' if dirty else ''}"


def load_average() -> str:
    """The 1-minute load average (other work on the machine skews every figure)."""
    return f"{os.getloadavg()[0]:.2f}"


def machine_lines() -> list[str]:
    """What and when the figures were measured on, as Markdown bullet lines."""
    info = machine()
    return [f"- {key}: {value}" for key, value in info.items()] + [
        f"- code: {code_version()}", f"- load average (1 min) at start: {load_average()}"]


# -- how a benchmark talks -------------------------------------------------------------------


def say(message: str) -> None:
    """A progress line (stderr, so stdout stays the report)."""
    print(message, file=sys.stderr, flush=True)


def log(message: str) -> None:
    """A progress line with the time of day."""
    say(f"[{time.strftime('%H:%M:%S')}] {message}")


def bench_parser(doc: str | None, prog: str) -> argparse.ArgumentParser:
    """A benchmark's command line, described by the first line of its module docstring; `prog` is
    the command that runs it (`python -m bench.<name>`), which argparse cannot tell from a
    package's `__main__.py`."""
    return argparse.ArgumentParser(prog=prog, description=doc.split("\n")[0] if doc else None)


def add_reuse_and_out(parser: argparse.ArgumentParser, reuse_help: str) -> None:
    """The read-side benchmarks' last two options: keep an earlier run's data, and a file that
    gets a copy of the report."""
    parser.add_argument("--reuse", action="store_true", help=reuse_help)
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")


def quiet_logging() -> None:
    """Warnings and errors only. Call it before anything imports wordllama (which calls
    `logging.basicConfig(level=INFO)`); kafka-python logs every refused connection while the
    broker boots, so it is silenced (its failures still raise)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kafka").setLevel(logging.CRITICAL)


def emit_report(text: str, out: Path | None) -> None:
    """Print the Markdown report to stdout and, with `--out`, write it to that file too."""
    print(text)
    if out:
        out.write_text(text + "\n", encoding="utf-8")
