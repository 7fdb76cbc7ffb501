"""The console's pure parts, without the stack: the status line, its terminal and non-terminal
output, the rate, the log files' rotation as `brainstream logs` reads and follows them, and
when Celery's root warning may be quieted."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from celery import Celery

from pipeline.ops.status import StatusReport
from pipeline.supervisor.console import Console, Reading, rate, status_line
from pipeline.supervisor.logfiles import STAMP_LENGTH, Follower, ProcessLog, interleave
from workers.app import quiet_root_warning


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _report(**parts: Any) -> StatusReport:
    healthy = {"state": "healthy"}
    report = StatusReport(services=[dict(healthy, name=n) for n in ("postgres", "broker")])
    for name, value in parts.items():
        setattr(report, name, value)
    return report


def _lag(*committed: int | None) -> dict[str, Any]:
    return {"total": 3, "exact": True,
            "partitions": [{"partition": i, "committed": c} for i, c in enumerate(committed)]}


def test_the_status_line_names_only_the_backlogs_that_wait() -> None:
    report = _report(lag=_lag(5, 7), outbox={"backlog": 0}, embedding={"pending": 12},
                     extraction={"pending": 0}, memory={"extractors": {"tokens": {"pending": 2}},
                                                        "summariser_pending": 1},
                     dead_letters={"count": 4, "exact": True})
    assert status_line(report, (5, 5), 2.4) == \
        "processes 5/5 · services 2/2 · lag 3 · backlog embed 12, memory 3 · dlq 4 · 2 ev/s"
    idle = _report(lag=_lag(5), outbox={"backlog": 0}, embedding={"pending": 0})
    assert status_line(idle, (4, 5), None) == \
        "processes 4/5 · services 2/2 · lag 3 · backlog none"
    down = _report(errors={"database": "not collected: postgres is stopped"})
    down.services[0]["state"] = "stopped"
    assert status_line(down, (5, 5), None) == \
        "processes 5/5 · services 1/2 · unknown: database"


def test_the_rate_is_what_the_consumer_committed_between_two_readings() -> None:
    first = Reading(_report(lag=_lag(10, 20)), at=100.0)
    second = Reading(_report(lag=_lag(30, 20)), at=110.0)
    assert rate(None, first) is None
    assert rate(first, second) == 2.0
    # a replay's switch starts another consumer group's offsets: no rate, not a negative one
    assert rate(second, Reading(_report(lag=_lag(0, 0)), at=120.0)) is None
    assert rate(first, Reading(_report(), at=120.0)) is None  # the broker was down


def test_on_a_terminal_the_line_is_rewritten_and_events_scroll_above_it() -> None:
    screen = _Terminal()
    console = Console(screen, line_interval=30)
    console.status("lag 0")
    console.status("lag 1")
    console.event("relay exited")
    console.close()
    console.status("lag 2")  # after close: `up` is stopping, its events alone
    out = screen.getvalue()
    frames = out.split("\r\x1b[K")
    assert frames[0] == ""
    assert frames[1].endswith(" lag 0") and frames[2].endswith(" lag 1")
    assert frames[3].startswith("relay exited\n") and frames[3].endswith(" lag 1\n")
    assert "lag 2" not in out


def test_elsewhere_a_line_is_printed_when_it_changed_at_most_every_interval() -> None:
    now = [0.0]
    stream = io.StringIO()
    console = Console(stream, line_interval=30, clock=lambda: now[0])
    console.status("lag 0")
    now[0] = 5
    console.status("lag 0")  # unchanged: nothing
    console.status("lag 9")  # changed, but too soon
    now[0] = 31
    console.status("lag 9")
    now[0] = 100
    console.status("lag 9")  # idle: nothing, however long
    console.event("api exited")
    lines = stream.getvalue().splitlines()
    assert [line.split(" ", 1)[1] for line in lines[:2]] == ["lag 0", "lag 9"]
    assert lines[2:] == ["api exited"]
    assert "\r" not in stream.getvalue()


def test_following_a_log_across_rotations_loses_and_repeats_no_line(tmp_path: Path) -> None:
    path = tmp_path / "worker.log"
    log = ProcessLog(path, max_bytes=1024, backups=3)
    log.write("before")
    follower = Follower({"worker": path})
    assert [line[STAMP_LENGTH + 1:] for line in follower.history(5)["worker"]] == ["before"]
    seen = []
    for n in range(400):
        log.write(f"line {n}")
        if n % 7 == 0:  # several rotations happen between two polls
            seen += [line for _, line in follower.poll()]
    seen += [line for _, line in follower.poll()]
    log.close()
    follower.close()
    assert [line[STAMP_LENGTH + 1:] for line in seen] == [f"line {n}" for n in range(400)]
    assert sorted(p.name for p in tmp_path.iterdir()) == \
        ["worker.log", "worker.log.1", "worker.log.2", "worker.log.3"]
    assert all(p.stat().st_size <= 1024 for p in tmp_path.iterdir())


def test_history_reaches_into_rotated_files(tmp_path: Path) -> None:
    path = tmp_path / "relay.log"
    log = ProcessLog(path, max_bytes=1024, backups=2)
    for n in range(40):
        log.write(f"line {n:02d} " + "x" * 20)
    log.close()
    assert (tmp_path / "relay.log.1").exists()
    follower = Follower({"relay": path})
    tail = follower.history(30)["relay"]
    follower.close()
    assert [line[STAMP_LENGTH + 1:STAMP_LENGTH + 8] for line in tail] == \
        [f"line {n:02d}" for n in range(10, 40)]


def test_interleave_orders_several_logs_by_their_stamps() -> None:
    tails = {"worker": ["2026-12-02T01:00:00.100Z a", "2026-12-02T01:00:00.300Z c"],
             "api": ["2026-12-02T01:00:00.200Z b", "2026-12-02T01:00:00.400Z d"]}
    assert interleave(tails, 3) == ["[api] 2026-12-02T01:00:00.200Z b",
                                    "[worker] 2026-12-02T01:00:00.300Z c",
                                    "[api] 2026-12-02T01:00:00.400Z d"]
    assert interleave(tails, 0) == []


def test_the_root_warning_is_quieted_only_without_pickle() -> None:
    assert quiet_root_warning(Celery("json-only", set_as_current=False,
                                     config_source={"accept_content": ["json"]}))
    # with pickle a broker message can run code as root: Celery's check stays whole
    assert not quiet_root_warning(Celery("pickle", set_as_current=False,
                                         config_source={"accept_content": ["json", "pickle"]}))
