"""Rebuild without paying the model twice: first ingest to settled, then `replay` with the same
model, through the public interfaces.

For the chosen embedder the benchmark starts its own embedded stack (data dir
`.brainstream-bench/rebuild-<embedder>`, wiped first; the ingest benchmark's ports), starts the
real pipeline processes (consumer, embedding workers with beat, extract worker, relay), and:

1. publishes the corpus at once (SciFact abstracts, or `--synthetic N` documents: SciFact's
   abstracts cycled under titles of their own, so every text is new) and waits until the
   namespace has settled: every document and part embedded, extracted, examined by the proposal
   pass, projected and in the lexical index. That is the first ingest's time (the baseline);
2. runs `brainstream replay` as an operator does (a subprocess, the workers still running) and
   takes the time from its start to the switch (the line `generation 2 is active`), the rows it
   embedded and the rows given their stored vectors (its summary line), then its whole time
   with the hand-off;
3. runs `brainstream verify` on the new generation.

Targets: the replay embeds 0 rows; with MiniLM it switches in <= 0.1x the first ingest's time;
with the static embedder a replay runs at >= 300 documents/s to the switch (the issue sizes
that one at 100,000 documents: `--synthetic 100000`, an hour's first ingest on 2 cores).

Usage: python -m bench.rebuild --embedder static|minilm [--docs N | --synthetic N]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

from bench.harness.processes import PipelineProcesses, bench_settings, child_env, fresh_stack
from bench.harness.runenv import (
    BENCH_DIR,
    REPO,
    bench_parser,
    code_version,
    load_average,
    machine,
    quiet_logging,
    say,
)
from bench.ingest.corpus import Doc, cycle_docs, load_corpus
from bench.ingest.flow import TimedPublisher
from pipeline.settings import Settings

# The switch's targets, from the issue: a replay with the same model is a copy of vectors, so it
# must cost a small fraction of the model's first pass; the static pipeline's own cost per
# document bounds how fast a rebuild can go at all.
MINILM_SWITCH_RATIO = 0.1
STATIC_DOCS_PER_S = 300.0
SETTLE_TIMEOUT = 7200.0

# What still waits in a generation's database, all stages together (the whole database: the
# benchmark's corpus is its only namespace).
_UNSETTLED = """
SELECT (SELECT count(*) FROM object_embeddings e JOIN objects o ON o.id = e.id
          WHERE e.embed_status = 'pending' AND o.deleted_at IS NULL)
     + (SELECT count(*) FROM entity_extraction WHERE status = 'pending')
     + (SELECT count(*) FROM outbox WHERE done_at IS NULL AND failed_at IS NULL)
     + (SELECT count(*) FROM entity_proposal_queue),
       (SELECT count(*) FROM objects WHERE parent_id IS NULL),
       (SELECT count(*) FROM objects)
"""


@dataclass
class Ingest:
    docs: int
    rows: int
    seconds: float
    load: tuple[str, str]


@dataclass
class Rebuild:
    switch_seconds: float
    total_seconds: float
    embedded: int
    reused: int
    summary: str
    verify_ok: bool
    verify_line: str
    load: tuple[str, str]


def synthetic(corpus: Sequence[Doc], count: int) -> list[tuple[str, Doc]]:
    """`count` documents: SciFact's abstracts cycled, each under a title of its own (so its
    index text, and its parts', is new)."""
    return [(key, Doc(doc.source_id, f"Synthetic {i}: {doc.title}", doc.text))
            for i, (key, doc) in enumerate(cycle_docs(corpus, count))]


def settled(settings: Settings, docs: int) -> tuple[bool, int]:
    """Whether every document arrived and nothing waits; the rows (documents and parts)."""
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute(_UNSETTLED).fetchone()
    assert row is not None
    return int(row[0]) == 0 and int(row[1]) >= docs, int(row[2])


def first_ingest(settings: Settings, docs: list[tuple[str, Doc]],
                 processes: PipelineProcesses) -> Ingest:
    """Publish at once, wait until settled."""
    load = load_average()
    publisher = TimedPublisher(settings)
    namespace = uuid.uuid4()
    say(f"first ingest: publishing {len(docs):,} docs, load {load}")
    started = time.monotonic()
    try:
        publisher.burst(namespace, docs)
    finally:
        publisher.producer.close()
    say(f"  published in {time.monotonic() - started:.1f}s")
    deadline = started + SETTLE_TIMEOUT
    last = 0.0
    while True:
        done, rows = settled(settings, len(docs))
        if done:
            break
        processes.check_alive()
        if time.monotonic() > deadline:
            raise RuntimeError(f"not settled after {SETTLE_TIMEOUT:.0f}s")
        if time.monotonic() - last > 30:
            say(f"  {time.monotonic() - started:.0f}s: {rows:,} rows so far")
            last = time.monotonic()
        time.sleep(0.5)
    seconds = time.monotonic() - started
    say(f"  settled in {seconds:.1f}s ({rows:,} rows)")
    return Ingest(len(docs), rows, seconds, (load, load_average()))


def cli(settings: Settings, *args: str) -> subprocess.Popen[str]:
    """A `brainstream` command on the benchmark's stack, its output piped."""
    return subprocess.Popen([sys.executable, "-m", "pipeline.cli", *args], cwd=REPO,
                            env=child_env(settings), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)


def replay(settings: Settings) -> Rebuild:
    """`brainstream replay`, timed to the switch and to its end."""
    load = load_average()
    say(f"replay: load {load}")
    started = time.monotonic()
    proc = cli(settings, "replay")
    switch, summary = None, ""
    assert proc.stdout is not None
    for line in proc.stdout:
        say(f"  {line.rstrip()}")
        if switch is None and re.search(r"generation \d+ is active \(was", line):
            switch = time.monotonic() - started
        if "rows embedded" in line:
            summary = line.strip()
    code = proc.wait()
    total = time.monotonic() - started
    if code != 0 or switch is None:
        raise RuntimeError(f"replay failed (status {code})")
    found = re.search(r"([\d,]+) rows embedded, ([\d,]+) given their stored vectors", summary)
    embedded, reused = ((int(found.group(1).replace(",", "")),
                         int(found.group(2).replace(",", ""))) if found else (-1, -1))
    check = cli(settings, "verify")
    out, _ = check.communicate()
    verify_line = next((line for line in out.splitlines() if line.startswith("checked")), "")
    return Rebuild(switch, total, embedded, reused, summary, check.returncode == 0,
                   verify_line, (load, load_average()))


def report(embedder: str, ingest: Ingest, rebuild: Rebuild, command: str) -> str:
    """The Markdown report."""
    info = machine()
    ratio = rebuild.switch_seconds / ingest.seconds
    rate = ingest.docs / rebuild.switch_seconds
    rows = [("rows embedded by the replay (same model)", "0", f"{rebuild.embedded:,}", "-",
             rebuild.embedded == 0)]
    if embedder == "minilm":
        rows.append(("replay to switch / first ingest to settled",
                     f"<= {MINILM_SWITCH_RATIO}x",
                     f"{rebuild.switch_seconds:.1f} / {ingest.seconds:.1f} s",
                     f"{ratio:.3f}x", ratio <= MINILM_SWITCH_RATIO))
    else:
        rows.append(("replay documents/s to the switch", f">= {STATIC_DOCS_PER_S:.0f}",
                     f"{rate:.1f} ({ingest.docs:,} docs)", f"{ratio:.3f}x of first ingest",
                     rate >= STATIC_DOCS_PER_S))
    rows.append(("verify on the new generation", "clean", rebuild.verify_line or "-", "-",
                 rebuild.verify_ok))
    lines = [f"## bench/rebuild ({embedder}), {info['date']}", "",
             "Machine: " + ", ".join(f"{k} {v}" for k, v in info.items() if k != "date") + ".",
             f"Code: {code_version()}. Command: {command}.", "",
             f"First ingest: {ingest.docs:,} documents ({ingest.rows:,} rows) settled in "
             f"{ingest.seconds:.1f} s ({ingest.docs / ingest.seconds:.1f} docs/s; load "
             f"{ingest.load[0]} -> {ingest.load[1]}). Replay: switched after "
             f"{rebuild.switch_seconds:.1f} s, ended after {rebuild.total_seconds:.1f} s "
             f"(load {rebuild.load[0]} -> {rebuild.load[1]}); {rebuild.reused:,} rows and "
             "messages given their stored vectors.", "",
             "| figure | target | measured | ratio | result |", "|---|---|---|---:|---|"]
    lines += [f"| {name} | {target} | {measured} | {r} | {'PASS' if ok else 'FAIL'} |"
              for name, target, measured, r, ok in rows]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = bench_parser(__doc__, "python -m bench.rebuild")
    parser.add_argument("--embedder", choices=["static", "minilm"], default="static")
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--docs", type=int, default=None,
                       help="SciFact documents (default: all 5,183)")
    group.add_argument("--synthetic", type=int, default=None,
                       help="synthetic documents instead (SciFact cycled under new titles)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2,
                        help="embedding worker processes (default: nproc)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Ingest, replay, report."""
    args = parse_args(argv)
    quiet_logging()
    settings = bench_settings(args.embedder, data_dir=str(BENCH_DIR / f"rebuild-{args.embedder}"))
    corpus = load_corpus()
    docs = (synthetic(corpus, args.synthetic) if args.synthetic else
            cycle_docs(corpus, min(args.docs or len(corpus), len(corpus))))
    stack = fresh_stack(settings)
    processes = PipelineProcesses(settings, args.workers)
    try:
        processes.start()
        ingest = first_ingest(settings, docs, processes)
        rebuild = replay(settings)
    finally:
        processes.stop()
        stack.stop()
    command = "python -m bench.rebuild " + " ".join(sys.argv[1:] if argv is None else argv)
    print(report(args.embedder, ingest, rebuild, command))


if __name__ == "__main__":
    main()
