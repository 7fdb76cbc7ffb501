"""Memory recall as an application meets it: each LoCoMo dev conversation one session, every turn
published with the time it was said and without its speaker's name in the text, each question
asked through `POST /v1/memory/search` with the defaults; turn recall@10 per category and per
conversation, the tuning conversation and the held-out one printed apart.

A turn is a message of role `user` (the conversation's first speaker) or `assistant`, its
speaker's name in `metadata.speaker` (as chat apps keep it), its content the turn's text (with an
image's caption), created at its LoCoMo session's date plus one minute per turn. Everything goes
in through the broker, the consumer and the workers; the questions through the API app.
Categories: single-hop (LoCoMo 4), temporal (2), multi-hop (1), open-domain (3); adversarial
(5) apart, outside "overall". The baseline, measured in the same run on the same rows, is the
same search with the recall rules off (`MemorySearchLimits(rules=None)`: the fused
lexical and dense channels alone). `include_knowledge: true` runs too: memory hits keep their
places beside the (here empty) document hits.

    python -m bench.memory.recall [--embedder minilm|static] [--reuse] [--out FILE]

`--reuse` keeps the rows an earlier run published (the rules are query-side: no re-ingest).
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness.inprocess import bench_stack
from bench.harness.processes import PipelineProcesses, bench_settings
from bench.harness.runenv import (
    BENCH_DIR,
    add_reuse_and_out,
    bench_parser,
    emit_report,
    log,
    machine_lines,
    quiet_logging,
)
from bench.memory import data
from pipeline.kafka.io import make_producer
from pipeline.kafka.publisher import EventPublisher
from pipeline.settings import Settings

# Which conversation (index in the dataset) every rule was chosen on; the other is held out.
TUNING, HELD_OUT = 0, 1
CATEGORIES = {"single-hop": 4, "temporal": 2, "multi-hop": 1, "open-domain": 3}
ADVERSARIAL = 5
K = 10
TARGETS = {"overall": 0.80, "multi-hop": 0.5}  # on the held-out conversation

Search = Callable[[str, str], list[str]]  # (user_id, question) -> dia_ids of the hits, best first


def turns_of(conv: data.Conversation) -> list[data.Turn]:
    """The conversation as one session: every LoCoMo session's turns in order, named by the
    conversation, the speaker's name out of the text."""
    out = []
    for turns in conv.sessions.values():
        for t in turns:
            out.append(data.Turn(t.dia_id, conv.user_id, t.role, t.content.split(": ", 1)[1],
                                 t.created_at))
    return out


def payload(turn: data.Turn, speaker: str) -> dict[str, Any]:
    return {"uuid": turn.uuid, "role": turn.role, "content": turn.content,
            "metadata": {"dia_id": turn.dia_id, "speaker": speaker},
            "created_at": turn.created_at.isoformat()}


def publish(settings: Settings, ns: uuid.UUID, conversations: list[data.Conversation]) -> int:
    publisher = EventPublisher(make_producer(settings), settings.topic_events)
    count = 0
    try:
        for conv in conversations:
            speakers = {t.dia_id: t.content.split(":", 1)[0]
                        for ts in conv.sessions.values() for t in ts}
            publisher.send_event(data.envelope(ns, "session.put", {
                "session_id": conv.user_id, "user_id": conv.user_id}))
            turns = turns_of(conv)
            for start in range(0, len(turns), 100):
                publisher.send_event(data.envelope(ns, "messages.add", {
                    "session_id": conv.user_id,
                    "messages": [payload(t, speakers[t.dia_id])
                                 for t in turns[start:start + 100]]}))
            count += len(turns)
        publisher.flush()
    finally:
        publisher.producer.close()
    return count


def ingest(settings: Settings, ns: uuid.UUID, conversations: list[data.Conversation]) -> None:
    from bench.memory.__main__ import integrity, wait_settled

    procs = PipelineProcesses(settings, workers=2)
    procs.start()
    try:
        turns = publish(settings, ns, conversations)
        seconds = wait_settled(settings, ns, turns, timeout=3600)
        procs.check_alive()
    finally:
        procs.stop()
    checks = integrity(settings, ns, turns)
    log(f"{turns} turns stored and extracted in {seconds:.0f} s; {checks}")
    if checks["stored"] != turns or checks["extracted once (x3)"] != 3 * turns \
            or checks["failed"]:
        raise RuntimeError(f"integrity: {checks}")


def api_search(settings: Settings, ns: uuid.UUID, **fields: Any
               ) -> tuple[Search, Callable[[], None]]:
    """POST /v1/memory/search through the API app, every field but query, user_id and
    `fields` left to its default."""
    from fastapi.testclient import TestClient

    from api.app import create_app

    key = f"bench-{uuid.uuid4().hex}"
    client = TestClient(create_app(settings.model_copy(update={"api_keys": {key: [str(ns)]}})))
    client.__enter__()
    headers = {"Authorization": f"Bearer {key}"}

    def search(user: str, question: str) -> list[str]:
        res = client.post("/v1/memory/search", headers=headers,
                          json={"query": question, "user_id": user, **fields})
        if res.status_code != 200:
            raise RuntimeError(f"memory search answered {res.status_code}: {res.text}")
        return [h["metadata"]["dia_id"] for h in res.json()["results"]]
    return search, lambda: client.__exit__(None, None, None)


def core_search(settings: Settings, ns: uuid.UUID, **limits: Any
                ) -> tuple[Search, Callable[[], None]]:
    """The same search in-process with other `MemorySearchLimits` (the baseline); the engine
    is the returned function's `engine` attribute (the grid swaps its limits)."""
    from pipeline.embedding.embedders import build_embedder
    from pipeline.memory.search import MemoryQuery, MemorySearch, MemorySearchLimits
    from pipeline.memory.store.search import PgMemorySearcher
    from pipeline.postgres.pool import make_async_pool
    from pipeline.wiring.services import query_embedder

    loop = asyncio.new_event_loop()
    embedder = build_embedder(settings)
    pool = loop.run_until_complete(make_async_pool(settings, name="bench-recall"))
    searcher = PgMemorySearcher(pool)
    engine = MemorySearch(searcher, query_embedder(lambda: embedder),
                          MemorySearchLimits(**limits))

    async def one(user: str, question: str) -> list[str]:
        sessions = await searcher.sessions(ns, user_id=user)
        answer = await engine.search(ns, sessions, MemoryQuery(question))
        return [h.row.metadata["dia_id"] for h in answer.hits]

    def close() -> None:
        loop.run_until_complete(pool.close())
        loop.close()

    def run(user: str, question: str) -> list[str]:
        return loop.run_until_complete(one(user, question))
    run.engine = engine  # type: ignore[attr-defined]
    return run, close


# The grid the rules' constants were chosen from, on the tuning conversation alone, then single
# changes from the defaults (the rules found flat or harmful there).
GRID = {"speaker_weight": (0.5, 0.75, 1.0), "own_words_weight": (0.0, 0.5, 1.0),
        "echo_weight": (0.0, 0.5, 1.0)}
SINGLE: list[dict[str, Any]] = [{"time_weight": 0.0}, {"time_weight": 2.0},
                                {"entity_weight": 0.25}, {"entity_weight": 0.5},
                                {"entity_weight": 1.0}, {"strip_speakers": False},
                                {"own_words_weight": 0.75}]


def tune(settings: Settings, ns: uuid.UUID, questions: list[data.Question], user: str
         ) -> list[str]:
    """Recall@K on the tuning conversation for every point of GRID (Markdown lines)."""
    import itertools

    from pipeline.memory.recall_rules import RecallRules
    from pipeline.memory.search import MemorySearchLimits

    asked = [q for q in questions if q.user_id == user]
    search, close = core_search(settings, ns)
    points = [dict(zip(GRID, p, strict=True)) for p in itertools.product(*GRID.values())]
    lines = ["| rules (the defaults but) | overall | multi-hop | temporal |", "|---|---|---|---|"]
    scored = []
    try:
        for point in [*points, *SINGLE]:
            rules = RecallRules(**point)
            search.engine.limits = MemorySearchLimits(rules=rules)  # type: ignore[attr-defined]
            row = measure(search, asked)[user]
            label = ", ".join(f"{k} {v}" for k, v in point.items())
            scored.append((row["overall"], label, row))
            log(f"{label}: {row['overall']:.3f}")
    finally:
        close()
    for overall, label, row in sorted(scored, key=lambda x: -x[0]):
        lines.append(f"| {label} | {overall:.3f} | {row['multi-hop']:.3f} |"
                     f" {row['temporal']:.3f} |")
    return lines


def measure(search: Search, questions: list[data.Question]) -> dict[str, dict[str, float]]:
    """Per conversation: recall@K per category, "overall" (categories 1-4), "adversarial"."""
    sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    names = {c: n for n, c in CATEGORIES.items()} | {ADVERSARIAL: "adversarial"}
    for q in questions:
        r = data.recall([{d} for d in search(q.user_id, q.text)], q.evidence, K)
        sums[q.user_id][names[q.category]].append(r)
        if q.category != ADVERSARIAL:
            sums[q.user_id]["overall"].append(r)
    return {user: {name: sum(v) / len(v) for name, v in cats.items()}
            for user, cats in sums.items()}


def counts(questions: list[data.Question], user: str) -> dict[str, int]:
    names = {c: n for n, c in CATEGORIES.items()} | {ADVERSARIAL: "adversarial"}
    out: dict[str, int] = defaultdict(int)
    for q in questions:
        if q.user_id == user:
            out[names[q.category]] += 1
            out["overall"] += q.category != ADVERSARIAL
    return out


def report(tables: dict[str, dict[str, dict[str, float]]], users: list[str],
           questions: list[data.Question], settings: Settings) -> str:
    columns = [*CATEGORIES, "overall", "adversarial"]
    lines = [f"# Memory recall@{K}, one session per conversation (embedder {settings.embedder})",
             "", *machine_lines(), ""]
    for role, user in (("tuning", users[TUNING]), ("held-out", users[HELD_OUT])):
        n = counts(questions, user)
        lines += [f"## {user} ({role})", "",
                  "| search | " + " | ".join(f"{c} ({n[c]})" for c in columns) + " |",
                  "|---" * (len(columns) + 1) + "|"]
        base = tables.get("baseline", {}).get(user)
        for label, table in tables.items():
            row = table[user]
            cells = []
            for c in columns:
                if not n[c]:
                    cells.append("-")
                    continue
                cell = f"{row.get(c, 0.0):.3f}"
                if base is not None and label != "baseline" and base.get(c):
                    cell += f" ({row.get(c, 0.0) / base[c]:.2f}x)"
                cells.append(cell)
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    held = tables["default (API)"][users[HELD_OUT]]
    lines += ["| target (held-out) | measured | target | verdict |", "|---|---|---|---|"]
    for name, target in TARGETS.items():
        got = held.get(name, 0.0)
        verdict = "PASS" if got >= target else f"FAIL (short by {target - got:.3f})"
        lines.append(f"| {name} R@{K} | {got:.3f} | >= {target} | {verdict} |")
    return "\n".join(lines)


def main() -> int:
    parser = bench_parser(__doc__, "python -m bench.memory.recall")
    parser.add_argument("--embedder", choices=["static", "minilm"], default="minilm")
    parser.add_argument("--no-baseline", action="store_true",
                        help="only the API's defaults (code without the recall rules' switch)")
    parser.add_argument("--tune", action="store_true",
                        help="also the grid of rule constants on the tuning conversation")
    add_reuse_and_out(parser, "keep the rows an earlier run published")
    args = parser.parse_args()
    quiet_logging()
    settings = bench_settings(args.embedder).model_copy(
        update={"data_dir": BENCH_DIR / f"memory-recall-{args.embedder}"})
    conversations, questions = data.load()
    users = [c.user_id for c in conversations]
    ns_file: Path = settings.resolved_data_dir / "bench-recall-namespace"
    with bench_stack(settings, fresh=not args.reuse):
        if args.reuse and ns_file.exists():
            ns = uuid.UUID(ns_file.read_text().strip())
        else:
            ns = uuid.uuid4()
            log(f"publishing {len(users)} conversations as one session each")
            ingest(settings, ns, conversations)
            ns_file.write_text(str(ns))
        tables: dict[str, dict[str, dict[str, float]]] = {}
        runs: list[tuple[str, Callable[[], tuple[Search, Callable[[], None]]]]] = []
        if not args.no_baseline:
            runs.append(("baseline", lambda: core_search(settings, ns, rules=None)))
        runs.append(("default (API)", lambda: api_search(settings, ns)))
        runs.append(("include_knowledge", lambda: api_search(settings, ns,
                                                             include_knowledge=True)))
        for label, make in runs:
            search, close = make()
            try:
                tables[label] = measure(search, questions)
            finally:
                close()
            log(f"{label}: " + ", ".join(f"{u} {tables[label][u]['overall']:.3f}"
                                         for u in users))
        grid = tune(settings, ns, questions, users[TUNING]) if args.tune else []
    text = report(tables, users, questions, settings)
    if grid:
        text += f"\n\nRule constants on {users[TUNING]} (tuning) alone:\n\n" + "\n".join(grid)
    emit_report(text, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
