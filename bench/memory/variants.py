"""What a message is indexed by, compared on LoCoMo dev without the pipeline: each variant of the
lexical text and of the embedded text (windows of turns, the date, the speaker's name), alone
and fused, with recall@10 per conversation (the defaults are chosen on conv-26; conv-30 is the
held-out figure; docs/operations.md).

The turns are lexed by memory search's own BM25 statement on a Postgres of this benchmark's
(`to_tsvector('english', ...)`, the same k1 and b) and embedded in-process (exact cosine over a
user's turns, as the searcher's); the fusion is memory search's weighted RRF. For the shipped
rule the figures equal `python -m bench.memory --phases recall` (the production pipeline).

    python -m bench.memory.variants [--embedder static|minilm] [--dense prev1,prev2] [--out FILE]
"""

from __future__ import annotations

import sys
import uuid
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql

from bench.harness.runenv import (
    BENCH_DIR,
    bench_parser,
    emit_report,
    log,
    machine_lines,
    quiet_logging,
)
from bench.memory import data
from pipeline.domain.bm25 import DEFAULT_B, DEFAULT_K1
from pipeline.domain.index_text import embedder_text
from pipeline.embedding.embedders import build_embedder
from pipeline.embedding.service import EMBED_TEXT_CAP_CHARS
from pipeline.memory.store.search import _BM25
from pipeline.services.postgres import PostgresService
from pipeline.settings import Settings

PG_PORT = 13532  # this benchmark's own Postgres, apart from bench/memory's
DEV, HELD = "conv-26", "conv-30"
Row = tuple[str, int, data.Turn]  # (session id, index in the session, turn)


def _date(t: data.Turn) -> str:
    return f"{t.created_at.day} {t.created_at:%B %Y}"


def _window(sessions: dict[str, list[data.Turn]], back: int, after: int = 0, *,
            dated: bool = False, named: bool = True) -> Callable[[Row], str]:
    def text(row: Row) -> str:
        sid, i, turn = row
        turns = sessions[sid][max(0, i - back): i + 1 + after]
        lines = [t.content if named else t.content.split(": ", 1)[-1] for t in turns]
        return "\n".join([_date(turn), *lines] if dated else lines)
    return text


def variants(sessions: dict[str, list[data.Turn]]) -> dict[str, Callable[[Row], str]]:
    w = sessions
    return {"self": _window(w, 0), "prev1": _window(w, 1), "prev2": _window(w, 2),
            "prev3": _window(w, 3), "next1": _window(w, 0, 1), "prev1next1": _window(w, 1, 1),
            "date+self": _window(w, 0, dated=True), "date+prev1": _window(w, 1, dated=True),
            "date+prev2": _window(w, 2, dated=True), "date+prev3": _window(w, 3, dated=True),
            "noname-prev1": _window(w, 1, named=False)}


class Bench:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        conversations, self.questions = data.load()
        self.rows: list[tuple[str, Row]] = []  # (user, row)
        self.sessions: dict[str, list[data.Turn]] = {}
        for c in conversations:
            for sid, turns in c.sessions.items():
                self.sessions[sid] = turns
                self.rows += [(c.user_id, (sid, i, t)) for i, t in enumerate(turns)]
        self.texts = variants(self.sessions)
        self.by_user: dict[str, list[int]] = defaultdict(list)
        for j, (user, _) in enumerate(self.rows):
            self.by_user[user].append(j)
        self.ids = [uuid.UUID(row[2].uuid) for _, row in self.rows]
        self.dia = {uuid.UUID(row[2].uuid): row[2].dia_id for _, row in self.rows}

    def lexical(self, variant: str, depth: int = 100) -> list[list[uuid.UUID]]:
        """Each question's BM25 list over its user's turns, lexed by `variant`."""
        text = self.texts[variant]
        users = {u: uuid.uuid5(uuid.NAMESPACE_URL, u) for u in self.by_user}
        scope = sql.SQL("r.namespace_id = %(ns)s AND r.session_pk = ANY(%(sessions)s::uuid[])")
        statement = sql.SQL(_BM25).format(table=sql.Identifier("turns"),
                                          lexical=sql.SQL("r.lex"), scope=scope)
        with psycopg.connect(self.settings.effective_postgres_dsn, autocommit=True) as conn:
            conn.execute("CREATE TEMP TABLE turns (uuid uuid, namespace_id uuid,"
                         " session_pk uuid, lex tsvector)")
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO turns VALUES (%s, %s, %s, to_tsvector('english', %s))",
                                [(self.ids[j], users[u], users[u], text(row))
                                 for j, (u, row) in enumerate(self.rows)])
            return [[r[0] for r in conn.execute(statement, {
                "ns": users[q.user_id], "sessions": [users[q.user_id]], "query": q.text,
                "k": depth, "k1": DEFAULT_K1, "b": DEFAULT_B}, prepare=False).fetchall()]
                for q in self.questions]

    def dense(self, embed: Callable[[list[str]], np.ndarray], variant: str,
              queries: np.ndarray, depth: int = 100) -> list[list[uuid.UUID]]:
        """Each question's cosine list over its user's turns, embedded as `variant`."""
        cap = EMBED_TEXT_CAP_CHARS
        vectors = embed([embedder_text(self.texts[variant](row), cap_chars=cap)
                         for _, row in self.rows])
        out = []
        for qi, q in enumerate(self.questions):
            idx = np.array(self.by_user[q.user_id])
            order = np.argsort(-(vectors[idx] @ queries[qi]), kind="stable")[:depth]
            out.append([self.ids[idx[o]] for o in order])
        return out

    def recall(self, ranked: list[list[uuid.UUID]], user: str | None) -> float:
        """R@10 over categories 1-4 of `user`'s questions (all with None)."""
        values = [data.recall([{self.dia[i]} for i in ids[:10]], q.evidence, 10)
                  for q, ids in zip(self.questions, ranked, strict=True)
                  if q.category != 5 and user in (None, q.user_id)]
        return sum(values) / len(values)

    def cells(self, ranked: list[list[uuid.UUID]]) -> str:
        return " | ".join(f"{self.recall(ranked, u):.3f}" for u in (DEV, HELD, None))


def rrf(lexical: list[uuid.UUID], dense: list[uuid.UUID], k: int = 10, weight: float = 0.5,
        depth: int = 40) -> list[uuid.UUID]:
    """Memory search's fusion (pipeline/memory/search.py), defaults as shipped."""
    score: dict[uuid.UUID, float] = {}
    for ids, w in ((lexical, 1.0), (dense, weight)):
        for rank, i in enumerate(ids[:depth], start=1):
            score[i] = score.get(i, 0.0) + w / (k + rank)
    return sorted(score, key=lambda i: (-score[i], str(i)))


def main() -> int:
    parser = bench_parser(__doc__, "python -m bench.memory.variants")
    parser.add_argument("--embedder", choices=["static", "minilm"], default="static")
    parser.add_argument("--dense", default="prev1,prev2,date+prev1",
                        help="embedded-text variants (MiniLM takes minutes each)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    quiet_logging()
    settings = Settings.model_validate({"data_dir": BENCH_DIR / "memory-variants",
                                        "pg_port": PG_PORT, "embedder": args.embedder})
    postgres = PostgresService(settings)
    postgres.start()
    try:
        bench = Bench(settings)
        model = build_embedder(settings)

        def embed(texts: list[str]) -> np.ndarray:
            rows = [np.asarray(v, dtype=np.float32) for start in range(0, len(texts), 64)
                    for v in model.embed(texts[start:start + 64])]
            matrix = np.vstack(rows)
            return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)

        queries = embed([q.text for q in bench.questions])
        head = f"| {DEV} (chosen on) | {HELD} (held out) | both |"
        lines = ["# What a message is indexed by (LoCoMo dev, R@10, categories 1-4)", "",
                 *machine_lines(), "", "| lexical text " + head, "|---|---|---|---|"]
        lexical = {}
        for name in bench.texts:
            lexical[name] = bench.lexical(name)
            lines.append(f"| {name} | {bench.cells(lexical[name])} |")
            log(lines[-1])
        dense = {}
        lines += ["", f"| embedded text ({args.embedder}) " + head, "|---|---|---|---|"]
        for name in args.dense.split(","):
            dense[name] = bench.dense(embed, name, queries)
            lines.append(f"| {name} | {bench.cells(dense[name])} |")
            log(lines[-1])
        lines += ["", "| hybrid (RRF k 10, dense x0.5): lexical / embedded " + head,
                  "|---|---|---|---|"]
        for lex in ("prev1", "prev2", "date+prev1", "date+prev2"):
            for den, lists in dense.items():
                fused = [rrf(a, b) for a, b in zip(lexical[lex], lists, strict=True)]
                lines.append(f"| {lex} / {den} | {bench.cells(fused)} |")
        emit_report("\n".join(lines), args.out)
    finally:
        postgres.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
