"""Resolution quality: the labelled name pairs as entities in a real Postgres, the proposal pass
over them, and the precision and recall of its merges and possibly-same proposals.

Usage: `python -m bench.extract.resolution [--dsn DSN] [--out FILE] [--scale N] [--no-vectors]`.
Without `--dsn` it starts its own embedded Postgres (under .brainstream-bench/resolution, port
56332 plus BRAINSTREAM_TEST_PORT_OFFSET) and migrates it; with one it uses that database, which
must be migrated (e.g. the test stack's), and touches only the namespaces it derives from the
pair numbers. `--scale N` also times lookups with N entities in each of two namespaces.

Each pair (`tests/data/resolution_pairs.jsonl`) gets its own namespace: `a` is an existing
entity, `b` a new one, both with their static name vectors (as the pass writes them before it
examines an entity; `--no-vectors`: none, so no embedding layer, as this benchmark ran until
2026-12-03), and `propose_for` runs over `b` as after the extraction stage. The pass's
decision for the pair is `merge` when it merged them, `possibly_same` when it held them, else
`distinct`. Two names with the same normalised name and label class are one entity in a
namespace (the store keys entities by them, migration 0021): those pairs are counted as merged
by the exact layer and listed apart; homonyms (same name, model labels that differ) are two
entities and go through the pass. Target: no false merge.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
from pgvector.psycopg import register_vector

from bench.harness.runenv import BENCH_DIR, REPO, bench_parser, emit_report, log, machine_lines
from pipeline.domain.index_text import text_hash
from pipeline.embedding.embedders import StaticEmbedder
from pipeline.embedding.identity import model_key
from pipeline.entities.likeness import label_class
from pipeline.entities.merging import propose_for
from pipeline.entities.names import normalise
from pipeline.entities.resolver import DISTINCT, MERGE, POSSIBLY_SAME
from pipeline.entities.resolving import ResolveConfig, resolve
from pipeline.entities.store import name_vectors
from pipeline.ops.migrations import apply_migrations
from pipeline.ports import Embedder
from pipeline.postgres.plans import run
from pipeline.services.postgres import PostgresService
from pipeline.settings import Settings

PAIRS = REPO / "tests" / "data" / "resolution_pairs.jsonl"
# beside the other benchmarks' stacks; moved like the test stack's by its offset
PORT = 56332 + int(os.environ.get("BRAINSTREAM_TEST_PORT_OFFSET", "0"))
_NS = uuid.UUID("5b1c9a52-6f0e-4c1e-9a57-2c4f0d6b7e11")
_INSERT = ("INSERT INTO entities (id, namespace_id, name, norm, label, part_count, created_at)"
           " VALUES (%s, %s, %s, %s, %s, 1, now() - %s * interval '1 minute')")


def load_pairs() -> list[dict[str, Any]]:
    """The labelled pairs."""
    with PAIRS.open(encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def _clear(conn: psycopg.Connection[Any], namespace: uuid.UUID) -> None:
    for table in ("outbox", "entity_merges", "entity_edges", "entity_aliases"):
        conn.execute(f"DELETE FROM {table} WHERE namespace_id = %s", (namespace,))
    conn.execute("UPDATE entities SET merged_into = NULL WHERE namespace_id = %s", (namespace,))
    conn.execute("DELETE FROM entities WHERE namespace_id = %s", (namespace,))


def decide(conn: psycopg.Connection[Any], index: int, pair: dict[str, Any],
           config: ResolveConfig, names: Embedder | None) -> tuple[str, bool]:
    """The proposal pass's decision for one pair, and whether it was a single entity (same key)."""
    namespace = uuid.uuid5(_NS, f"pair-{index}")
    _clear(conn, namespace)
    if (normalise(pair["a"]), label_class(pair["label_a"])) == (
            normalise(pair["b"]), label_class(pair["label_b"])):
        return MERGE, True
    a, b = uuid.uuid4(), uuid.uuid4()
    conn.execute(_INSERT, (a, namespace, pair["a"], normalise(pair["a"]), pair["label_a"], 2))
    conn.execute(_INSERT, (b, namespace, pair["b"], normalise(pair["b"]), pair["label_b"], 1))
    if names is not None:
        name_vectors.store(conn, [a, b], list(names.embed([pair["a"], pair["b"]])),
                           [text_hash(pair["a"]), text_hash(pair["b"])], model_key(names))
    proposals = propose_for(conn, namespace, [b], config)
    decisions = {p.decision for p in proposals if p.other_id == a}
    _clear(conn, namespace)
    for decision in (MERGE, POSSIBLY_SAME):
        if decision in decisions:
            return decision, False
    return DISTINCT, False


def _ratio(num: int, den: int) -> str:
    return f"{num / den:.3f}" if den else "n/a"


def report(pairs: list[dict[str, Any]], got: list[tuple[str, bool]], *, vectors: bool) -> str:
    """The table: per decision, precision and recall; false merges; PASS/FAIL."""
    counts = Counter((p["expected"], g) for p, (g, _) in zip(pairs, got, strict=True))
    lines = ["# Resolution: labelled name pairs through the proposal pass", "",
             *machine_lines(), f"- pairs: {len(pairs)} ({PAIRS.relative_to(REPO)}); "
             f"single entity (same normalised name): {sum(1 for _, s in got if s)}",
             "- name vectors: " + ("static (the pass's embedding layer on)" if vectors
                                   else "none (`--no-vectors`: no embedding layer)"), "",
             "| decision | expected | proposed | correct | precision | recall |",
             "|---|---:|---:|---:|---:|---:|"]
    for decision in (MERGE, POSSIBLY_SAME, DISTINCT):
        expected = sum(n for (e, _), n in counts.items() if e == decision)
        proposed = sum(n for (_, g), n in counts.items() if g == decision)
        correct = counts[(decision, decision)]
        lines.append(f"| {decision} | {expected} | {proposed} | {correct} | "
                     f"{_ratio(correct, proposed)} | {_ratio(correct, expected)} |")
    false_merges = sum(n for (e, g), n in counts.items() if g == MERGE and e != MERGE)
    lines += ["", "| expected \\ proposed | merge | possibly_same | distinct |",
              "|---|---:|---:|---:|"]
    for e in (MERGE, POSSIBLY_SAME, DISTINCT):
        lines.append(f"| {e} | " + " | ".join(str(counts[(e, g)])
                                               for g in (MERGE, POSSIBLY_SAME, DISTINCT)) + " |")
    lines += ["", f"False merges: {false_merges} (target 0): "
                  f"{'PASS' if false_merges == 0 else 'FAIL'}", "", "Misses:", ""]
    for pair, (g, single) in zip(pairs, got, strict=True):
        if g != pair["expected"]:
            lines.append(f"- {pair['kind']}: {pair['a']!r} / {pair['b']!r}: expected "
                         f"{pair['expected']}, proposed {g}{' (one entity)' if single else ''}")
    return "\n".join(lines) + "\n"


_SYLLABLES = ["ka", "lo", "mi", "ne", "ra", "to", "vu", "shi", "pen", "dor", "gal", "rex", "tor",
              "ban", "qui", "sel", "mar", "tin", "zo", "ber"]


def latency(conn: psycopg.Connection[Any], per_namespace: int) -> str:
    """Lookup latency (the resolve plan without embeddings) with `per_namespace` entities in
    each of two namespaces. The names are made of 20 syllables, so they share trigrams far more
    than real names: a stress case for the trigram layer."""
    rng = random.Random(11)

    def word() -> str:
        return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 4))).capitalize()

    spaces = [uuid.uuid5(_NS, f"scale-{per_namespace}-{i}") for i in range(2)]
    for namespace in spaces:
        _clear(conn, namespace)
        seen: set[str] = set()
        with conn.cursor().copy("COPY entities (id, namespace_id, name, norm, label, part_count)"
                                " FROM STDIN") as copy:
            while len(seen) < per_namespace:
                name = " ".join(word() for _ in range(rng.randint(1, 3)))
                if normalise(name) not in seen:
                    seen.add(normalise(name))
                    copy.write_row((uuid.uuid4(), namespace, name, normalise(name), "NAME", 1))
    conn.execute("ANALYZE entities")
    names = [r[0] for r in conn.execute("SELECT name FROM entities WHERE namespace_id = %s"
                                        " ORDER BY md5(name) LIMIT 70", (spaces[0],))]
    phrases = names[:40] + [n[:-1] for n in names[40:]] + ["KLM", "Rex Group", "no such name"] * 10
    config = ResolveConfig()
    took = []
    for phrase in phrases:
        start = time.perf_counter()
        run(conn, resolve(spaces[0], phrase, config, vector=None))
        took.append((time.perf_counter() - start) * 1000)
    for namespace in spaces:
        _clear(conn, namespace)
    took.sort()
    return (f"\nLookup latency, {per_namespace} entities in each of 2 namespaces, "
            f"{len(phrases)} phrases (exact, a letter dropped, acronyms, unknown): "
            f"p50 {statistics.median(took):.1f} ms, p95 {took[int(len(took) * 0.95)]:.1f} ms\n")


def main() -> int:
    parser = bench_parser(__doc__, "python -m bench.extract.resolution")
    parser.add_argument("--dsn", default=None, help="a migrated Postgres to use")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    parser.add_argument("--scale", type=int, default=0,
                        help="also time lookups with this many entities per namespace")
    parser.add_argument("--no-vectors", action="store_true",
                        help="entities without name vectors (no embedding layer)")
    args = parser.parse_args()
    service = None
    if args.dsn is None:
        settings = Settings.model_validate({"data_dir": BENCH_DIR / "resolution",
                                            "pg_port": PORT, "embedder": "static"})
        service = PostgresService(settings)
        log("starting Postgres")
        service.start()
        apply_migrations(settings)
        dsn = settings.effective_postgres_dsn
    else:
        dsn = args.dsn
    try:
        pairs = load_pairs()
        config = ResolveConfig()
        names = None if args.no_vectors else StaticEmbedder()
        with psycopg.connect(dsn, autocommit=True) as conn:
            register_vector(conn)
            log(f"deciding {len(pairs)} pairs")
            got = [decide(conn, i, pair, config, names) for i, pair in enumerate(pairs)]
            text = report(pairs, got, vectors=names is not None)
            if args.scale:
                log(f"timing lookups at {args.scale} entities per namespace")
                text += latency(conn, args.scale)
        emit_report(text, args.out)
        return 0 if "): PASS" in text else 1
    finally:
        if service is not None:
            service.stop()


if __name__ == "__main__":
    sys.exit(main())
