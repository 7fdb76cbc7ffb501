"""Conversation memory benchmark: LoCoMo dev through the real pipeline, evidence recall per mode,
GET memory latency on a 10,000-message session, summary lag at 20 messages/s, integrity.

Everything goes in as message events through the broker, the consumer and the workers (started
as children on a fresh stack of this benchmark's own). Then, in the same run:
1. evidence recall@5/@10 at turn level per question category (1-4 scored, 5 adversarial apart)
   for lexical (BM25), dense, hybrid (RRF of both) and hybrid over turns plus summaries, each
   question asked across its user's sessions (the /v1/memory/search path);
2. GET /v1/sessions/{id}/memory p50/p95 on a session of 10,000 messages (through the API app);
3. summary lag at 20 messages/s with the extractive summariser: per message past the window, the
   time from its publication until the summary point moved far enough to bring the session back
   within the window;
4. every message stored once and extracted once by each extractor (none lost, none twice).

    python -m bench.memory [--embedder static|minilm] [--out report.md]
"""

from __future__ import annotations

import asyncio
import pickle
import sys
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import psycopg

from bench.harness.processes import PipelineProcesses, fresh_stack
from bench.harness.runenv import (
    BENCH_DIR,
    bench_parser,
    emit_report,
    log,
    machine_lines,
    quiet_logging,
)
from bench.memory import data, fusion as memoryfusion
from bench.memory.get import get_memory_ms
from bench.memory.report import Results, report
from pipeline.domain.memory_model import session_key
from pipeline.kafka.io import make_producer
from pipeline.kafka.publisher import EventPublisher
from pipeline.settings import Settings

# This benchmark's own ports (below the ephemeral range, apart from the tests' and the other
# benchmarks'), so it can run beside them.
PORTS = {"pg_port": 13232, "kafka_port": 13892, "s3_port": 13800, "falkordb_port": 13179,
         "redis_port": 13180}
MODES = {"lexical": (("lexical",), "messages"), "dense": (("dense",), "messages"),
         "hybrid": (("lexical", "dense"), "messages"),
         "lexical+summaries": (("lexical",), "both"),
         "hybrid+summaries": (("lexical", "dense"), "both")}
BIG_SESSION = 10_000
LAG_MESSAGES, LAG_RATE, LAG_SESSIONS = 600, 20.0, 4


def settings_for(embedder: str) -> Settings:
    shift = {"static": 200, "minilm": 100}[embedder]  # one stack per embedder, side by side
    return Settings.model_validate({"data_dir": BENCH_DIR / f"memory-{embedder}",
                                    "embedder": embedder, "sweep_interval": 2.0,
                                    **{name: port + shift for name, port in PORTS.items()}})


def query(settings: Settings, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(settings.effective_postgres_dsn) as conn:
        return conn.execute(sql, params).fetchall()  # type: ignore[arg-type]


def wait_settled(settings: Settings, ns: uuid.UUID, messages: int, timeout: float) -> float:
    """Seconds until every message of `ns` is stored and extracted and no summariser work is
    pending; raises on timeout."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        [(stored, done, busy)] = query(
            settings, "SELECT (SELECT count(*) FROM messages WHERE namespace_id = %s),"
            " (SELECT count(*) FROM message_extraction WHERE namespace_id = %s"
            "  AND status <> 'pending'),"
            " (SELECT count(*) FROM session_summariser WHERE namespace_id = %s AND pending)",
            ns, ns, ns)
        if stored == messages and done == 3 * messages and busy == 0:
            return time.monotonic() - start
        time.sleep(0.5)
    raise RuntimeError(f"{ns}: not settled after {timeout} s ({stored} stored, {done} done)")


def publish_locomo(publisher: EventPublisher, ns: uuid.UUID,
                   conversations: list[data.Conversation]) -> int:
    count = 0
    for conv in conversations:
        for sid, turns in conv.sessions.items():
            publisher.send_event(data.envelope(ns, "session.put",
                                               {"session_id": sid, "user_id": conv.user_id}))
            for start in range(0, len(turns), 100):
                publisher.send_event(data.envelope(ns, "messages.add", {
                    "session_id": sid,
                    "messages": [data.message_payload(t) for t in turns[start:start + 100]]}))
            count += len(turns)
    publisher.flush()
    return count


async def recall_table(settings: Settings, ns: uuid.UUID, conversations: list[data.Conversation],
                       questions: list[data.Question], results: Results,
                       fusion: bool = False) -> dict[str, dict[str, float]]:
    """Per mode: recall@5/@10 per category, over categories 1-4, and of category 5; with
    `fusion`, the table of fusion rules (bench/memory/fusion.py) into `results.fusion`."""
    from pipeline.embedding.embedders import build_embedder
    from pipeline.memory.search import MemoryQuery, MemorySearch, MemorySearchLimits
    from pipeline.memory.store.search import PgMemorySearcher
    from pipeline.postgres.pool import make_async_pool
    from pipeline.wiring.services import query_embedder

    embedder = build_embedder(settings)
    pool = await make_async_pool(settings, name="bench-memory")
    searcher = PgMemorySearcher(pool)
    embed = await batched_queries(query_embedder(lambda: embedder), embedder,
                                  [q.text for q in questions])
    search = MemorySearch(searcher, embed, MemorySearchLimits())
    by_text = {t.content: t.dia_id for c in conversations for ts in c.sessions.values()
               for t in ts}
    users = {c.user_id: await searcher.sessions(ns, user_id=c.user_id) for c in conversations}
    out: dict[str, dict[str, float]] = {}
    try:
        for mode, (channels, scope) in MODES.items():
            sums: dict[str, list[float]] = defaultdict(list)
            for q in questions:
                answer = await search.search(ns, users[q.user_id], MemoryQuery(
                    q.text, limit=10, search_scope=scope, channels=channels))
                retrieved = [{h.row.metadata["dia_id"]} if h.row.kind == "message" else
                             data.summary_turns(h.row.content, by_text) for h in answer.hits]
                group = "5" if q.category == 5 else "1-4"
                for k in (5, 10):
                    r = data.recall(retrieved, q.evidence, k)
                    sums[f"c{q.category}@{k}"].append(r)
                    sums[f"{group}@{k}"].append(r)
                    sums[f"{q.user_id}:{group}@{k}"].append(r)  # per conversation
            out[mode] = {key: sum(v) / len(v) for key, v in sums.items()}
            log(f"{mode}: R@10 over 1-4 = {out[mode]['1-4@10']:.3f}")
        if fusion:
            cands = await memoryfusion.collect(searcher, embed, ns, users, questions)
            dia = turn_ids(settings, ns, by_text)
            with open(BENCH_DIR / f"fusion-{settings.embedder}.pkl", "wb") as handle:
                pickle.dump((cands, dia), handle)
            results.fusion = memoryfusion.table_lines(memoryfusion.evaluate(cands, dia))
    finally:
        await pool.close()
    return out


async def batched_queries(single: Any, embedder: Any, texts: list[str]) -> Any:
    """A query embedder answering `texts` from vectors embedded in batches up front (MiniLM
    one query at a time, each on a thread, took most of a run on the loaded machine); the
    same model and vectors as the API's, other texts through `single`."""
    vectors: dict[str, list[float]] = {}
    unique = list(dict.fromkeys(texts))
    for start in range(0, len(unique), 64):
        batch = unique[start:start + 64]
        for text, vector in zip(batch, embedder.embed(batch), strict=True):
            vectors[text] = [float(x) for x in vector]

    async def embed(text: str) -> list[float]:
        return vectors[text] if text in vectors else list(await single(text))
    return embed


def turn_ids(settings: Settings, ns: uuid.UUID, by_text: dict[str, str]
             ) -> dict[uuid.UUID, set[str]]:
    """What each message and summary of `ns` stands for, in dia_ids (data.recall)."""
    out = {row[0]: {row[1]} for row in query(
        settings, "SELECT uuid, metadata->>'dia_id' FROM messages WHERE namespace_id = %s", ns)}
    for uid, content in query(settings, "SELECT uuid, content FROM summaries"
                              " WHERE namespace_id = %s", ns):
        out[uid] = data.summary_turns(content, by_text)
    return out


def big_session(settings: Settings, publisher: EventPublisher, ns: uuid.UUID) -> str:
    sid = "big"
    for start in range(0, BIG_SESSION, 100):
        publisher.send_event(data.envelope(ns, "messages.add", {"session_id": sid, "messages": [
            {"uuid": str(uuid.uuid4()), "role": "user" if i % 2 else "assistant",
             "content": f"Message {i}: notes about project {i % 37} and milestone {i % 11}."}
            for i in range(start, start + 100)]}))
    publisher.flush()
    return sid


def summary_lag(settings: Settings, publisher: EventPublisher, ns: uuid.UUID) -> list[float]:
    """Publish LAG_MESSAGES at LAG_RATE over LAG_SESSIONS sessions; the lag of each message
    that pushed its session past the window (see the module docstring)."""
    window = settings.memory_window
    pks = {f"lag-{s}": session_key(ns, f"lag-{s}") for s in range(LAG_SESSIONS)}
    reached: dict[tuple[str, int], float] = {}  # (session, summary_seq) -> first seen
    stop = threading.Event()

    def watch() -> None:
        with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
            while not stop.is_set():
                now = time.monotonic()
                for sid, point in conn.execute("SELECT session_id, summary_seq FROM sessions"
                                               " WHERE id = ANY(%s)", (list(pks.values()),)):
                    reached.setdefault((sid, int(point)), now)
                time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    sent: dict[tuple[str, int], float] = {}
    start = time.monotonic()
    for i in range(LAG_MESSAGES):
        sid = f"lag-{i % LAG_SESSIONS}"
        seq = i // LAG_SESSIONS + 1
        time.sleep(max(0.0, start + i / LAG_RATE - time.monotonic()))
        publisher.send_event(data.envelope(ns, "messages.add", {"session_id": sid, "messages": [
            {"uuid": str(uuid.uuid4()), "role": "user",
             "content": f"Update {seq}: the shipment to depot {seq % 9} left at {seq % 24}h."}]}))
        publisher.flush()
        sent[(sid, seq)] = time.monotonic()
    deadline = time.monotonic() + 120
    per_session = LAG_MESSAGES // LAG_SESSIONS
    needed = per_session - window  # the last message's debt is cleared at this point
    while time.monotonic() < deadline and not all(
            any(s == sid and p >= needed for s, p in reached) for sid in pks):
        time.sleep(0.2)
    stop.set()
    watcher.join(5)
    lags = []
    for (sid, seq), at in sent.items():
        if seq <= window:
            continue
        cleared = [t for (s, p), t in reached.items() if s == sid and p >= seq - window]
        lags.append((min(cleared) if cleared else float("inf")) - at)
    return lags


def integrity(settings: Settings, ns: uuid.UUID, published: int) -> dict[str, int]:
    [(stored, seqs_ok, extracted, twice, failed)] = query(
        settings, "SELECT (SELECT count(*) FROM messages WHERE namespace_id = %s),"
        " (SELECT count(*) FROM sessions WHERE namespace_id = %s AND last_seq = (SELECT count(*)"
        "  FROM messages m WHERE m.session_pk = sessions.id)),"
        " (SELECT count(*) FROM message_extraction WHERE namespace_id = %s AND status = 'done'"
        "  AND attempts = 1),"
        " (SELECT count(*) FROM message_extraction WHERE namespace_id = %s AND attempts > 1),"
        " (SELECT count(*) FROM message_extraction WHERE namespace_id = %s"
        "  AND status = 'failed')", ns, ns, ns, ns, ns)
    return {"published": published, "stored": stored, "extracted once (x3)": extracted,
            "extracted twice": twice, "failed": failed, "sessions with dense seqs": seqs_ok}


def main() -> int:
    parser = bench_parser(__doc__, "python -m bench.memory")
    parser.add_argument("--embedder", choices=["static", "minilm"], default="static")
    parser.add_argument("--workers", type=int, default=2, help="worker processes")
    parser.add_argument("--phases", default="recall,get,lag",
                        help="which of recall, get, lag to run (comma-separated)")
    parser.add_argument("--fusion-table", action="store_true",
                        help="also measure the fusion rules of bench/memory/fusion.py")
    parser.add_argument("--out", type=Path, default=None, help="also write the report here")
    args = parser.parse_args()
    phases = set(args.phases.split(","))
    quiet_logging()
    settings = settings_for(args.embedder)
    log(f"fresh stack in {settings.resolved_data_dir}")
    stack = fresh_stack(settings)
    procs = PipelineProcesses(settings, workers=args.workers)
    procs.start()
    publisher = EventPublisher(make_producer(settings), settings.topic_events)
    results = Results(args.embedder)
    try:
        run_phases(settings, publisher, phases, results, args.fusion_table)
        procs.check_alive()
    finally:
        publisher.producer.close()
        procs.stop()
        stack.stop()
    emit_report(report(results, machine_lines()), args.out)
    return 0


def run_phases(settings: Settings, publisher: EventPublisher, phases: set[str],
               results: Results, fusion: bool = False) -> None:
    if "recall" in phases:
        conversations, results.questions = data.load()
        ns = uuid.uuid4()
        log(f"publishing {len(conversations)} LoCoMo conversations")
        turns = publish_locomo(publisher, ns, conversations)
        results.ingest_s = wait_settled(settings, ns, turns, timeout=3600)
        log(f"{turns} turns stored, extracted and summarised in {results.ingest_s:.0f} s")
        results.recall = asyncio.run(recall_table(settings, ns, conversations,
                                                  results.questions, results, fusion))
        results.checks["LoCoMo"] = integrity(settings, ns, turns)
    if "get" in phases:
        ns = uuid.uuid4()
        log("publishing the 10,000-message session")
        sid = big_session(settings, publisher, ns)
        big_s = wait_settled(settings, ns, BIG_SESSION, timeout=3600)
        log(f"10,000 messages settled in {big_s:.0f} s; timing GET memory")
        results.get_ms = get_memory_ms(settings, ns, sid)
        results.checks["10k session"] = integrity(settings, ns, BIG_SESSION)
    if "lag" in phases:
        ns = uuid.uuid4()
        log(f"summary lag: {LAG_MESSAGES} messages at {LAG_RATE:.0f}/s")
        results.lags = summary_lag(settings, publisher, ns)
        wait_settled(settings, ns, LAG_MESSAGES, timeout=600)
        results.checks["lag sessions"] = integrity(settings, ns, LAG_MESSAGES)


if __name__ == "__main__":
    sys.exit(main())
