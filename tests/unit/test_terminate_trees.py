"""`terminate_trees` signals every process before it waits for any (what `brainstream up`'s
Ctrl-C relies on: its children stop together, not one after another)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pipeline.services.process import terminate_trees

# On TERM: leave a marker, then write "together" to it and exit once every sibling has left its
# own, or "alone" after 8 s (what one signalled before its siblings' stop was even begun sees).
# The outcome goes to a file: the exit status is lost to psutil, which reaps the children.
_CHILD = """
import os, signal, sys, time
markers = sys.argv[1:]
def on_term(*_):
    open(markers[0], "w").close()
    deadline = time.monotonic() + 8
    while time.monotonic() < deadline:
        if all(os.path.exists(m) for m in markers):
            break
        time.sleep(0.05)
    else:
        open(markers[0], "w").write("alone")
        sys.exit(3)
    open(markers[0], "w").write("together")
    sys.exit(0)
signal.signal(signal.SIGTERM, on_term)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def test_every_process_is_signalled_before_any_is_waited_for(tmp_path: Path) -> None:
    markers = [tmp_path / f"term-{i}" for i in range(3)]
    procs = []
    for i in range(3):
        mine = [str(markers[i]), *(str(m) for j, m in enumerate(markers) if j != i)]
        proc = subprocess.Popen([sys.executable, "-c", _CHILD, *mine],
                                stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        procs.append(proc)
    try:
        terminate_trees([proc.pid for proc in procs], timeout=30)
        assert [m.read_text() for m in markers] == ["together"] * 3
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
