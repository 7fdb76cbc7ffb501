"""Where the extraction stage's and the proposal pass's CPU goes: cProfile of each in this process
and `pg_stat_statements` on the stack's Postgres (docs/entities.md, "Extraction's CPU", has a
breakdown made with it).

    python -m bench.extract.profile [--docs 600] [--port-offset 3400] [--reuse] [--no-embed]
                                   [--skip-pass] [--interleave] [--dump FILE] [--callers RE]

The first run ingests `--docs` SciFact documents through the consumer's write path on a stack of
its own (`.brainstream-bench/extract-profile-<offset>`) and turns `pg_stat_statements` on
(`shared_preload_libraries`, `track = all`, `track_planning = on`: a trigger's statement is
counted inside its INSERT too); `--reuse` starts from that data again. Each run empties the
entity tables, sets every row pending, and runs the stage and the pass (which writes the new
entities' name vectors first, as in the worker; `--no-embed`: without them), printing for each the
wall time, this process's and the Postgres server's CPU, the costliest statements and the
costliest Python functions. `--dump FILE` writes the pass's POSSIBLY_SAME edges and merges by
name, to compare two versions entity by entity (`diff`).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time
from collections.abc import Callable
from pathlib import Path

from psycopg_pool import ConnectionPool

from bench.extract.stage import NAMESPACE, _postgres_cpu
from bench.harness import pgstatements
from bench.harness.inprocess import apply_events, bench_settings, bench_stack
from bench.harness.runenv import log, quiet_logging
from bench.ingest.corpus import cycle_docs, load_corpus, put_envelope
from pipeline.embedding.embedders import StaticEmbedder
from pipeline.entities.extractors import MAX_MENTIONS_PER_ROW
from pipeline.entities.extractors.heuristic import HeuristicExtractor
from pipeline.entities.merging import PROPOSAL_BATCH, propose_all
from pipeline.entities.resolving import ResolveConfig
from pipeline.entities.stage import ExtractionStage
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings

_HELD = """
SELECT f.name, t.name, d.status, d.method, d.confidence FROM entity_edges d
JOIN entities f ON f.id = d.from_id JOIN entities t ON t.id = d.to_id
WHERE d.edge_type = 'POSSIBLY_SAME' ORDER BY 1, 2, 3"""

_MERGED = """
SELECT f.name, t.name, m.method, m.confidence FROM entity_merges m
JOIN entities f ON f.id = m.from_id JOIN entities t ON t.id = m.into_id ORDER BY 1, 2"""


def _reset(pool: ConnectionPool) -> None:
    """No entity, every row pending (as bench/extract/stage.py resets between its runs)."""
    with pool.connection() as conn:
        conn.execute("TRUNCATE entities CASCADE")
        conn.execute("UPDATE entity_extraction SET status = 'pending', extracted_hash = NULL,"
                     " lease_until = NULL, triples = 0")
        conn.execute("TRUNCATE outbox")
        conn.execute("VACUUM ANALYZE entities, entity_extraction")


def _profiled(name: str, settings: Settings, pool: ConnectionPool,
              run: Callable[[], object], callers: str | None = None) -> None:
    pgstatements.reset(settings)
    profile = cProfile.Profile()
    wall, cpu, server = time.perf_counter(), time.process_time(), _postgres_cpu(settings)
    profile.enable()
    result = run()
    profile.disable()
    print(f"\n## {name}: wall {time.perf_counter() - wall:.2f} s, Python CPU "
          f"{time.process_time() - cpu:.2f} s, Postgres CPU "
          f"{_postgres_cpu(settings) - server:.2f} s\n\n{result}\n")
    print("\n".join(pgstatements.top(settings)))
    for order in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats(order).print_stats(25)
        print(out.getvalue())
    if callers:
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_callers(callers)
        print(out.getvalue())


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.extract.profile",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=600)
    parser.add_argument("--port-offset", type=int, default=3400)
    parser.add_argument("--reuse", action="store_true", help="the data of an earlier run")
    parser.add_argument("--no-embed", action="store_true",
                        help="the pass writes no name vectors")
    parser.add_argument("--skip-pass", action="store_true")
    parser.add_argument("--interleave", action="store_true",
                        help="the pass after every stage batch (the worker with "
                             "ENTITY_PROPOSAL_MAX_DELAY=0), profiled together as one step")
    parser.add_argument("--callers", default=None,
                        help="also print who calls the functions matching this pattern")
    parser.add_argument("--dump", type=Path, default=None,
                        help="write the pass's held pairs and merges by name here")
    args = parser.parse_args()
    quiet_logging()
    settings = bench_settings(f"extract-profile-{args.port_offset}", args.port_offset, "static")
    if not args.reuse:
        with bench_stack(settings, fresh=True):
            events = [put_envelope(NAMESPACE, key, doc)
                      for key, doc in cycle_docs(load_corpus(), args.docs)]
            log(f"applying {len(events)} SciFact documents")
            apply_events(settings, events)
        pgstatements.configure(settings)
    with bench_stack(settings, fresh=False):
        pool = make_pool(settings, max_size=2)
        try:
            _reset(pool)
            embedder = StaticEmbedder()
            embedder.embed(["warm the model up"])
            stage = ExtractionStage(settings, pool, HeuristicExtractor(
                max_mentions=MAX_MENTIONS_PER_ROW))
            names = None if args.no_embed else embedder
            config = ResolveConfig.from_settings(settings)
            if args.interleave:
                def interleaved() -> None:
                    while stage.run(max_batches=1).claimed:
                        propose_all(pool, batch=PROPOSAL_BATCH, config=config,
                                    names=names, max_rounds=1_000_000)
                _profiled("stage and pass, interleaved", settings, pool, interleaved,
                          args.callers)
            else:
                _profiled("stage", settings, pool, lambda: stage.run(max_batches=1_000_000),
                          args.callers)
            if not args.skip_pass:
                _profiled("proposal pass", settings, pool, lambda: propose_all(
                    pool, batch=PROPOSAL_BATCH, config=config, names=names,
                    max_rounds=1_000_000), args.callers)
                if args.dump is not None:
                    with pool.connection() as conn, args.dump.open("w") as out:
                        for row in conn.execute(_HELD).fetchall():
                            print("held", *row, sep="\t", file=out)
                        for row in conn.execute(_MERGED).fetchall():
                            print("merge", *row, sep="\t", file=out)
        finally:
            pool.close()


if __name__ == "__main__":
    main()
