"""The log files of `brainstream up`'s processes, and `brainstream logs`, which reads them.

The supervisor, not the processes, writes them: it already reads every child's output from one
pipe (Celery's pool processes and uvicorn's workers inherit it), so each file has exactly one
writer and rotates safely; a child's traceback on its way out is kept as well. Each line is
stamped with the time the supervisor read it (UTC), which orders the lines of several files
when `brainstream logs` interleaves them. The files live beside the embedded services' own logs,
`DATA_DIR/logs/<name>.log`, and rotate to `<name>.log.1` ... `<name>.log.<LOG_BACKUPS>`.
"""

from __future__ import annotations

import heapq
import logging
import os
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import IO

from pipeline.domain.errors import InvalidInput
from pipeline.settings import Settings

STAMP_FORMAT = "%Y-%m-%dT%H:%M:%S"
STAMP_LENGTH = len("2026-12-02T01:30:00.000Z")


def log_dir(settings: Settings) -> Path:
    """Where every log file of the data directory lives (the services' and the processes')."""
    return settings.resolved_data_dir / "logs"


class _Stamped(logging.Formatter):
    """`<UTC time with milliseconds>Z <line>`: a prefix of fixed width, sortable as text."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime(STAMP_FORMAT, time.gmtime(record.created))
        return f"{stamp}.{int(record.msecs):03d}Z {record.getMessage()}"


class ProcessLog:
    """One process's rotating log file, written by the supervisor only."""

    def __init__(self, path: Path, *, max_bytes: int, backups: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.handler = RotatingFileHandler(path, maxBytes=max_bytes, backupCount=backups,
                                           encoding="utf-8", errors="replace")
        self.handler.setFormatter(_Stamped())

    def write(self, line: str) -> None:
        """Append one line (rotating first when it would pass the size limit)."""
        # a record built by hand: the line is never %-formatted, whatever it holds
        self.handler.handle(logging.makeLogRecord({"msg": line, "levelno": logging.INFO}))

    def close(self) -> None:
        self.handler.close()


# -- reading: `brainstream logs` ----------------------------------------------------------


def available(settings: Settings) -> list[str]:
    """The names that have a log file (processes and embedded services), sorted."""
    return sorted(p.stem for p in log_dir(settings).glob("*.log"))


def resolve_names(settings: Settings, name: str | None, default: Iterable[str]) -> list[str]:
    """The logs `brainstream logs [name]` reads: the named one, or every name of `default`
    that has a file; an unknown name is refused with the names there are."""
    names = available(settings)
    if name is None:
        return [n for n in default if n in names]
    if name not in names:
        raise InvalidInput(f"no log named {name!r} under {log_dir(settings)}; there are: "
                           f"{', '.join(names) or 'none yet'}", field="process")
    return [name]


def _backups_oldest_first(path: Path) -> list[Path]:
    backups = (p for p in path.parent.glob(path.name + ".*") if p.suffix[1:].isdigit())
    return sorted(backups, key=lambda p: int(p.suffix[1:]), reverse=True)


def interleave(tails: dict[str, list[str]], count: int) -> list[str]:
    """The last `count` lines of several logs in time order, each prefixed `[name]` (lines keep
    their file's order; the stamps, fixed width, compare as text)."""
    merged = heapq.merge(*([(line[:STAMP_LENGTH], i, n, f"[{name}] {line}")
                            for n, line in enumerate(lines)]
                           for i, (name, lines) in enumerate(sorted(tails.items()))))
    return [line for *_, line in merged][-count:] if count > 0 else []


@dataclass
class _Followed:
    name: str
    path: Path
    handle: IO[str] | None = None
    inode: int | None = None
    pending: str = field(default="")


class Follower:
    """Some logs, read once to their end (`history`), then followed as they grow (`poll`),
    across rotations like `tail -F`: a rotated file is read to its end before the new one is
    opened from its start. Both read through the same open file, so no line is lost or shown
    twice between the two."""

    def __init__(self, paths: dict[str, Path]) -> None:
        self.files = [_Followed(name, path) for name, path in sorted(paths.items())]
        for followed in self.files:
            self._open(followed)

    def _open(self, followed: _Followed) -> None:
        try:
            handle = open(followed.path, encoding="utf-8", errors="replace")  # noqa: SIM115 - held across polls
        except FileNotFoundError:
            followed.handle, followed.inode = None, None
            return
        followed.handle, followed.inode = handle, os.fstat(handle.fileno()).st_ino

    def history(self, count: int) -> dict[str, list[str]]:
        """The last `count` lines of each log so far (reaching into its rotated files when
        the current one holds fewer); `poll` goes on from there."""
        out: dict[str, list[str]] = {}
        for followed in self.files:
            current = [line for _, line in self._drain(followed)]
            lines: deque[str] = deque(maxlen=max(count, 0))
            if len(current) < count:
                for backup in _backups_oldest_first(followed.path):
                    with open(backup, encoding="utf-8", errors="replace") as handle:
                        lines.extend(line.rstrip("\n") for line in handle)
            lines.extend(current)
            out[followed.name] = list(lines)
        return out

    def poll(self) -> Iterator[tuple[str, str]]:
        """(name, line) of every complete line written since the last poll."""
        for followed in self.files:
            yield from self._drain(followed)
            try:
                current = os.stat(followed.path).st_ino
            except FileNotFoundError:
                continue
            if current != followed.inode:  # rotated (or created): the old file is done
                if followed.handle is not None:
                    followed.handle.close()
                self._open(followed)
                yield from self._drain(followed)

    def _drain(self, followed: _Followed) -> Iterator[tuple[str, str]]:
        if followed.handle is None:
            return
        *lines, followed.pending = (followed.pending + followed.handle.read()).split("\n")
        for line in lines:
            yield followed.name, line

    def close(self) -> None:
        for followed in self.files:
            if followed.handle is not None:
                followed.handle.close()
