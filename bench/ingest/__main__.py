"""End-to-end ingestion benchmark on SciFact: throughput, latency at half load, and baselines.

For each embedder the benchmark starts its own embedded stack (data dir
`.brainstream-bench/<embedder>`, wiped first; ports = defaults + 700 for static, + 800 for
MiniLM), migrates it, and measures, in this order:

1. baselines on the same texts: the embedder alone (1 process; as many processes as there are
   embedding workers; for MiniLM also those processes with one torch thread each) and a naive
   synchronous loop (chunk, embed, insert, write the graph, commit, one document at a time).
   The embedder alone is measured again after the pipeline has stopped, and its ratios are
   against both runs pooled: on a shared machine the speed of a CPU-second drifts over the
   minutes between them (by 10 % on 2026-12-03), and one side measured in a fast minute and the
   other in a slow one moved the MiniLM ratio by as much;
2. the real pipeline (consumer, `--workers` embedding workers with beat, one relay), run as
   subprocesses: after a warm-up, N documents published as fast as possible; documents/s and
   parts/s from the first publish to the last `brainstream.object.indexed` change event;
3. publish-to-indexed latency while publishing at half the measured throughput for
   `--latency-seconds`, split into stages with Postgres's timestamps.

A document whose change event never comes (nothing indexed for `IDLE_TIMEOUT` seconds) is
reported as lost rather than waited for. Progress goes to stderr, the Markdown report to stdout.

Modules: `corpus.py` (documents and their events), `bench/harness/processes.py` (stack, pipeline
processes, CPU meter), `flow.py` (timed publisher, changes watcher, stages), `baselines.py`,
`report.py` (results and tables).

Usage: python -m bench.ingest --embedder static|minilm|both [--docs N] [--workers W]
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import uuid
from collections.abc import Sequence

import psycopg

from bench.harness import pgstatements
from bench.harness.processes import CpuMeter, PipelineProcesses, bench_settings, fresh_stack
from bench.harness.runenv import (
    bench_parser,
    code_version,
    load_average,
    machine,
    quiet_logging,
    say,
)
from bench.ingest.baselines import EmbedRate, embedder_alone, index_texts, naive_loop
from bench.ingest.corpus import CORPUS, Doc, cycle_docs, load_corpus
from bench.ingest.flow import IDLE_TIMEOUT, ChangeWatcher, TimedPublisher, stage_breakdown
from bench.ingest.report import Latency, Result, Throughput, report
from bench.ingest.writeamp import difference, snapshot
from pipeline.embedding.settings import EmbedderName
from pipeline.settings import Settings

# Defaults sized so `--embedder both` ends in about 10 minutes on 2 cores: MiniLM embeds about
# 13 passages/s per process here, so it gets a subset of the corpus.
DEFAULT_DOCS: dict[str, int | None] = {"static": None, "minilm": 600}  # None = whole corpus
DEFAULT_BASELINE_DOCS: dict[str, int | None] = {"static": None, "minilm": 150}
DEFAULT_NAIVE_DOCS: dict[str, int] = {"static": 300, "minilm": 60}
WARMUP_DOCS = 48


def embed_configs(name: str, workers: int) -> list[tuple[int, int | None]]:
    """(processes, torch threads) of the embedder-alone runs: one process, as many processes as
    workers built as the workers build them, and for MiniLM also with one thread each (on few
    cores, processes with one thread can beat oversubscribed default threads)."""
    configs: list[tuple[int, int | None]] = [(1, None)]
    if workers > 1:
        configs.append((workers, None))
        if name == "minilm":
            configs.append((workers, 1))
    return configs


def embed_baselines(name: str, settings: Settings, texts: Sequence[str], workers: int,
                    when: str) -> list[EmbedRate]:
    """The embedder alone in each configuration of `embed_configs`."""
    say(f"[{name}] embedder alone on {len(texts)} passages ({when} the pipeline), "
        f"load {load_average()}")
    rates = []
    for processes_, threads in embed_configs(name, workers):
        rate = embedder_alone(settings, texts, processes_, threads)
        say(f"[{name}]   {rate.label}: {rate.passages_per_s:.1f} passages/s, "
            f"{rate.cpu_ms_per_passage:.2f} CPU ms/passage")
        rates.append(rate)
    return rates


def run_embedder(name: EmbedderName, corpus: Sequence[Doc], args: argparse.Namespace) -> Result:
    """Start the stack, measure baselines and the pipeline, stop everything."""
    settings = bench_settings(name, **dict(args.set))
    docs = list(corpus[:args.docs or DEFAULT_DOCS[name] or len(corpus)])
    baseline_count = args.baseline_docs or DEFAULT_BASELINE_DOCS[name] or len(docs)
    naive_count = args.naive_docs or DEFAULT_NAIVE_DOCS[name]
    baseline_texts = [t for doc in docs[:baseline_count] for t in index_texts(doc, settings).all]
    say(f"[{name}] {len(docs)} docs; stack in {settings.resolved_data_dir}")
    stack = fresh_stack(settings)
    processes = PipelineProcesses(settings, args.workers, args.extractors)
    watcher = ChangeWatcher(settings)
    publisher: TimedPublisher | None = None
    try:
        if args.pg_statements:
            pgstatements.configure(settings)
            stack.stop()
            stack.start()
        embed_before = embed_baselines(name, settings, baseline_texts, args.workers, "before")
        say(f"[{name}] naive loop on {naive_count} docs, load {load_average()}")
        naive = naive_loop(settings, docs[:naive_count], uuid.uuid4(),
                           CpuMeter(stack, processes))
        say(f"[{name}]   {naive.docs_per_s:.1f} docs/s")

        processes.start()
        watcher.start()
        publisher = TimedPublisher(settings)
        say(f"[{name}] pipeline started ({args.workers} embedding workers); warming up")
        warmup = uuid.uuid4()
        watcher.watch(warmup)
        sent = publisher.burst(warmup, cycle_docs(corpus[-WARMUP_DOCS:], WARMUP_DOCS))
        warm = watcher.wait_indexed(warmup, list(sent), idle_timeout=IDLE_TIMEOUT,
                                    processes=processes)
        say(f"[{name}]   {len(warm)} of {len(sent)} warm-up docs indexed")

        if args.pg_statements:
            pgstatements.reset(settings)
        burst = throughput(name, settings, docs, CpuMeter(stack, processes), watcher,
                           publisher, processes)
        if args.pg_statements:
            say(f"[{name}] the throughput phase's top statements (pg_stat_statements):\n"
                + "\n".join(pgstatements.top(settings, args.pg_statements, 220)))
        if args.pg_statements:
            pgstatements.reset(settings)
        steady = latency(name, settings, burst.docs / burst.seconds / 2, corpus, watcher,
                         publisher, processes, args.latency_seconds, CpuMeter(stack, processes))
        if args.pg_statements:
            say(f"[{name}] the latency phase's top statements (pg_stat_statements):\n"
                + "\n".join(pgstatements.top(settings, args.pg_statements, 220)))
        processes.stop()
        embed_after = embed_baselines(name, settings, baseline_texts, args.workers, "after")
        return Result(embedder=name, workers=args.workers,
                      embed_runs=list(zip(embed_before, embed_after, strict=True)),
                      baseline_docs=baseline_count, naive=naive, throughput=burst,
                      latency=steady)
    finally:
        if publisher is not None:
            publisher.close()
        watcher.stop()
        processes.stop()
        stack.stop()


def throughput(name: str, settings: Settings, docs: Sequence[Doc], meter: CpuMeter,
               watcher: ChangeWatcher, publisher: TimedPublisher,
               processes: PipelineProcesses) -> Throughput:
    """Publish every document at once; wall time from the first publish to the last indexed."""
    namespace = uuid.uuid4()
    watcher.watch(namespace)
    load_before = load_average()
    say(f"[{name}] throughput: publishing {len(docs)} docs, load {load_before}")
    writes_before = snapshot(settings, wait=True)
    meter.start()
    sent = publisher.burst(namespace, cycle_docs(docs, len(docs)))
    say(f"[{name}]   published in {max(sent.values()) - min(sent.values()):.1f}s")
    done = watcher.wait_indexed(namespace, list(sent), idle_timeout=IDLE_TIMEOUT,
                                processes=processes)
    if not done:
        raise RuntimeError("no document was indexed")
    cpu_wall, cpu = meter.stop()
    extracted, settled = wait_settled(settings, namespace)
    settled_wall, settled_cpu = meter.stop()  # the same start: indexing plus what followed it
    writes = difference(settings, writes_before, snapshot(settings, wait=True))
    seconds = max(done.values()) - min(sent.values())
    say(f"[{name}]   last part extracted {extracted - min(sent.values()):.1f}s after the first "
        f"publish, everything settled after {settled - min(sent.values()):.1f}s")
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE parent_id = ANY(%s::uuid[])), count(parent_id)"
            " FROM objects WHERE namespace_id = %s",
            ([uuid.UUID(i) for i in done], namespace)).fetchone()
    parts, all_parts = (int(row[0]), int(row[1])) if row else (0, 0)
    if len(done) < len(sent):
        say(f"[{name}]   LOST: {len(sent) - len(done)} of {len(sent)} docs never announced "
            f"as indexed ({IDLE_TIMEOUT:.0f}s without progress)")
    say(f"[{name}]   {len(done)} docs indexed in {seconds:.1f}s: "
        f"{len(done) / seconds:.1f} docs/s, {parts / seconds:.1f} parts/s")
    return Throughput(published=len(sent), docs=len(done), parts=parts, all_parts=all_parts,
                      seconds=seconds, cpu_wall=cpu_wall, cpu=cpu,
                      load=(load_before, load_average()), writes=writes,
                      distinct_texts=sum(len(set(index_texts(doc, settings).all))
                                         for doc in docs),
                      extracted_after=extracted - min(sent.values()),
                      settled_after=settled - min(sent.values()),
                      settled_cpu_wall=settled_wall, settled_cpu=settled_cpu)


# What is still to do for a namespace after its documents were announced as indexed: entity
# extraction (behind embedding), the proposal pass, and the outbox rows that project both.
_UNSETTLED = """
SELECT (SELECT count(*) FROM entity_extraction WHERE namespace_id = %(ns)s AND status = 'pending')
     + (SELECT count(*) FROM outbox WHERE namespace_id = %(ns)s AND done_at IS NULL
          AND failed_at IS NULL)
     + (SELECT count(*) FROM entity_proposal_queue q JOIN entities e ON e.id = q.entity_id
          WHERE e.namespace_id = %(ns)s AND e.merged_into IS NULL),
       (SELECT extract(epoch FROM max(updated_at)) FROM entity_extraction
          WHERE namespace_id = %(ns)s)
"""


def wait_settled(settings: Settings, namespace: uuid.UUID, timeout: float = 300.0
                 ) -> tuple[float, float]:
    """Poll until the namespace has nothing left to extract, propose or project; (the epoch
    time its last part was extracted, the epoch time it was seen settled)."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
        while True:
            row = conn.execute(_UNSETTLED, {"ns": namespace}).fetchone()
            assert row is not None
            if row[0] == 0:
                return float(row[1] or time.time()), time.time()
            if time.monotonic() > deadline:
                raise RuntimeError(f"{row[0]} extraction, proposal or outbox rows still "
                                   f"pending {timeout:.0f}s after the last document indexed")
            time.sleep(0.25)  # the poll's own Postgres time is inside the settled CPU figure


def latency(name: str, settings: Settings, rate: float, corpus: Sequence[Doc],
            watcher: ChangeWatcher, publisher: TimedPublisher, processes: PipelineProcesses,
            duration: float, meter: CpuMeter) -> Latency:
    """Publish at `rate` for `duration` seconds; publish-to-indexed time of each document."""
    count = max(10, round(rate * duration))
    namespace = uuid.uuid4()
    watcher.watch(namespace)
    load_before = load_average()
    say(f"[{name}] latency: {count} docs at {rate:.1f} docs/s, load {load_before}")
    meter.start()
    sent = publisher.steady(namespace, cycle_docs(corpus, count), rate)
    done = watcher.wait_indexed(namespace, list(sent), idle_timeout=IDLE_TIMEOUT,
                                processes=processes)
    cpu_wall, cpu = meter.stop()
    result = Latency(target_rate=rate,
                     publish_rate=(count - 1) / (max(sent.values()) - min(sent.values())),
                     seconds=[done[i] - sent[i] if i in done else math.inf for i in sent],
                     stages=stage_breakdown(settings, namespace, sent, done,
                                            publisher.acked),
                     load=(load_before, load_average()), cpu_wall=cpu_wall, cpu=cpu)
    say(f"[{name}]   p50 {result.percentile(50):.2f}s, p99 {result.percentile(99):.2f}s, "
        f"{result.lost} lost")
    return result


def _setting(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or name.lower() not in Settings.model_fields:
        raise argparse.ArgumentTypeError(f"not NAME=VALUE of a setting: {text!r}")
    return name.lower(), value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line."""
    parser = bench_parser(__doc__, "python -m bench.ingest")
    parser.add_argument("--embedder", choices=["static", "minilm", "both"], default="both")
    parser.add_argument("--extractors", type=int, default=1,
                        help="the extract worker's --concurrency (default 1, as `brainstream "
                             "up` runs it)")
    parser.add_argument("--docs", type=int, default=None,
                        help="documents in the throughput phase (default: static all 5,183, "
                        "minilm 600)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2,
                        help="embedding worker processes (celery --concurrency; default: nproc)")
    parser.add_argument("--latency-seconds", type=float, default=30.0,
                        help="how long to publish at half load (default: 30)")
    parser.add_argument("--baseline-docs", type=int, default=None,
                        help="documents whose texts the embedder-alone baseline embeds "
                        "(default: static all, minilm 150)")
    parser.add_argument("--naive-docs", type=int, default=None,
                        help="documents for the naive loop (default: static 300, minilm 60)")
    parser.add_argument("--pg-statements", type=int, default=0, metavar="N",
                        help="turn pg_stat_statements on and print the throughput phase's N "
                        "costliest statements to stderr (default: off)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        type=_setting, help="a setting of the pipeline's processes (the field "
                        "name, e.g. extract_batch_size=32); repeatable")
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark for the chosen embedders and print the report."""
    args = parse_args(argv)
    quiet_logging()  # before anything imports wordllama
    names: list[EmbedderName] = (["static", "minilm"] if args.embedder == "both"
                                 else [args.embedder])
    info = machine()
    corpus = load_corpus()
    started = time.perf_counter()
    results = [run_embedder(name, corpus, args) for name in names]
    print(f"## bench/ingest, {info['date']}\n")
    print("Machine: " + ", ".join(f"{k} {v}" for k, v in info.items() if k != "date") + ".")
    print(f"Code: {code_version()}.")
    print(f"Corpus: BEIR SciFact corpus ({CORPUS.name}, {len(corpus)} docs). "
          f"Command: python -m bench.ingest {' '.join(sys.argv[1:] if argv is None else argv)}"
          f" (total {time.perf_counter() - started:.0f} s).\n")
    for result in results:
        print(report(result) + "\n")


if __name__ == "__main__":
    main()
