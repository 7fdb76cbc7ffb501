"""`brainstream up`'s console: one compact status line instead of every process's output.

The line is built from what `brainstream status` collects (`pipeline.ops.status.collect`, for
the active index generation), read in a thread of its own every STATUS_INTERVAL seconds
so a slow service never stalls the supervisor: pipeline processes running, embedded services
healthy, consumer lag, the backlogs that are not empty, dead letters, and the consumer's rate
(events committed per second since the previous reading). On a terminal the line is rewritten
in place, and the supervisor's own events (a process started, died, restarted) scroll above it;
otherwise (a log file, a pipe, systemd) the line is printed only when it changed, at most once
per CONSOLE_LINE_INTERVAL seconds, so an idle pipeline writes nothing.
"""

from __future__ import annotations

import shutil
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from pipeline.ops.status import DeadLetterTally, StatusReport, collect_active
from pipeline.settings import Settings

# Counting the lag reads the records past the committed offsets, again at every collection: the
# status line stops at this many ("lag 10000+"), so a large backlog is not re-read every few
# seconds while the consumer works through it (`brainstream status` counts up to 200,000).
LAG_RECORDS = 10_000
# Seconds between two collections of `brainstream status` for the status line: each costs a few
# queries and a broker round trip, and a person reads a line every few seconds at most.
STATUS_INTERVAL = 2.0


@dataclass(frozen=True)
class Reading:
    """One status collection, and when it was taken (monotonic seconds)."""

    report: StatusReport
    at: float

    @property
    def committed(self) -> int | None:
        """Events the consumer has committed over every partition (None when unknown)."""
        parts = self.report.lag.get("partitions") if self.report.lag else None
        if not parts:
            return None
        return sum(int(p["committed"] or 0) for p in parts)


def rate(previous: Reading | None, current: Reading) -> float | None:
    """Events per second the consumer committed between two readings (None when unknown, or
    when the offsets went back: a replay switched the consumer group)."""
    if previous is None or previous.committed is None or current.committed is None:
        return None
    done, elapsed = current.committed - previous.committed, current.at - previous.at
    return done / elapsed if done >= 0 and elapsed > 0 else None


def _backlogs(report: StatusReport) -> list[str]:
    memory = report.memory.get("extractors", {}) if report.memory else {}
    counts = {
        "embed": report.embedding.get("pending", 0) if report.embedding else 0,
        "extract": report.extraction.get("pending", 0) if report.extraction else 0,
        "outbox": report.outbox.get("backlog", 0) if report.outbox else 0,
        "lexical": report.lexical.get("count", 0) if report.lexical else 0,
        "memory": sum(e["pending"] for e in memory.values())
        + (report.memory.get("summariser_pending", 0) if report.memory else 0),
        "deferred": report.deferred.get("count", 0) if report.deferred else 0,
    }
    # Celery's queues are left out: the sweep's task passes through one every few seconds, and
    # a line that flickers with it would be printed each time; a stuck worker shows as a
    # process down or as a backlog above.
    return [f"{name} {count}" for name, count in counts.items() if count]


def status_line(report: StatusReport, processes: tuple[int, int], events_per_second: float | None
                ) -> str:
    """The compact status: `processes 5/5 · services 5/5 · lag 0 · backlog none · dlq 0 ·
    3 ev/s`, then what could not be collected."""
    healthy = sum(1 for s in report.services if s["state"] == "healthy")
    parts = [f"processes {processes[0]}/{processes[1]}",
             f"services {healthy}/{len(report.services)}"]
    if report.lag:
        parts.append(f"lag {report.lag['total']}" + ("" if report.lag["exact"] else "+"))
    if report.outbox or report.embedding:  # the database answered
        backlogs = _backlogs(report)
        parts.append("backlog " + (", ".join(backlogs) if backlogs else "none"))
    if report.dead_letters:
        parts.append(f"dlq {report.dead_letters['count']}"
                     + ("" if report.dead_letters["exact"] else "+"))
    if events_per_second is not None:
        parts.append(f"{events_per_second:.0f} ev/s")
    if report.errors:
        parts.append("unknown: " + ", ".join(sorted(report.errors)))
    return " · ".join(parts)


class Console:
    """Where `up` writes: the supervisor's events as lines, and the status line."""

    def __init__(self, stream: TextIO, *, line_interval: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream
        self.tty = stream.isatty()
        self.line_interval = line_interval
        self.clock = clock
        self.current = ""  # the status line last shown (a terminal keeps it on screen)
        self.printed_at: float | None = None
        self.closed = False
        self.lock = threading.Lock()  # events come from the supervisor, the line from a poll

    def event(self, line: str) -> None:
        """A line that stays: on a terminal it goes above the status line, which is redrawn."""
        with self.lock:
            if self.tty and self.current:
                self.stream.write("\r\x1b[K" + line + "\n" + self._fit(self.current))
            else:
                self.stream.write(line + "\n")
            self.stream.flush()

    def status(self, line: str) -> None:
        """A new status line: redrawn in place on a terminal; otherwise printed only when it
        differs from the last printed one and at least `line_interval` seconds after it."""
        stamped = f"{time.strftime('%H:%M:%S')} {line}"
        with self.lock:
            if self.closed:  # `up` is stopping: its events alone from now on
                return
            if self.tty:
                self.current = stamped
                self.stream.write("\r\x1b[K" + self._fit(stamped))
            else:
                now = self.clock()
                if line == self.current or (self.printed_at is not None
                                            and now - self.printed_at < self.line_interval):
                    return
                self.current, self.printed_at = line, now
                self.stream.write(stamped + "\n")
            self.stream.flush()

    def close(self) -> None:
        """End the status line on a terminal, so what follows starts on a line of its own."""
        with self.lock:
            if self.tty and self.current:
                self.stream.write("\n")
                self.stream.flush()
            self.current = ""
            self.closed = True

    @staticmethod
    def _fit(line: str) -> str:
        # a line wider than the terminal wraps, and "\r" would then rewrite only its last row
        width = shutil.get_terminal_size((120, 24)).columns
        return line if len(line) < width else line[:max(1, width - 2)] + "…"


class StatusPoller:
    """Collects the status every `interval` seconds in a daemon thread and hands the line to
    `show`; `processes()` says how many pipeline processes run, of how many."""

    def __init__(self, settings: Settings, show: Callable[[str], None],
                 processes: Callable[[], tuple[int, int]]) -> None:
        self.settings = settings
        self.show = show
        self.processes = processes
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name="status-line", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopped.set()

    def _run(self) -> None:
        previous: Reading | None = None
        tally = DeadLetterTally()
        while not self.stopped.is_set():
            try:
                reading = Reading(collect_active(self.settings, tally=tally,
                                                 lag_records=LAG_RECORDS), time.monotonic())
                line = status_line(reading.report, self.processes(), rate(previous, reading))
                previous = reading
            except Exception as exc:  # collect reports a down part itself; this is a bug
                line = f"status unavailable: {type(exc).__name__}: {exc}"
            if not self.stopped.is_set():
                self.show(line)
            self.stopped.wait(STATUS_INTERVAL)


def announce_when_answering(url: str, report: Callable[[str], None], message: str, *,
                            stopped: threading.Event, warn_after: float) -> None:
    """Report `message` once `url` answers 200. uvicorn binds its port before its workers have
    started (loaded the query embedder, opened pools): 40 s on this machine under load, during
    which a "ready" would have been a lie. Says so once if nothing answers within
    `warn_after` seconds, and keeps asking; gives up quietly when `stopped` is set."""
    deadline = time.monotonic() + warn_after
    warned = False
    while not stopped.is_set():
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    report(message)
                    return
        except (OSError, ValueError):
            pass  # not listening yet, or not answering yet
        if not warned and time.monotonic() > deadline:
            report(f"the API has not answered {url} within {warn_after:.0f} s: still waiting "
                   "(brainstream logs api)")
            warned = True
        stopped.wait(0.5)
