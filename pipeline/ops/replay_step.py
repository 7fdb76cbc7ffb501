"""The replay's loop body: consume a batch into the new generation, then run in-process what the
workers run for the live one (every stage of `pipeline/wiring/stages.py`: embed, extract
entities, apply curators' decisions and propose merges, run the message extractors and the
summariser, relay; then refresh the search vocabulary) and builds this host's lexical replica
of the new generation (the other read hosts follow its change log themselves), since the workers
keep serving the active generation meanwhile: a switched generation has its objects and its
messages embedded and searchable."""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafka import KafkaConsumer

from pipeline.embedding.embedders import build_embedder, build_name_embedder
from pipeline.entities.extractors import build_extractor
from pipeline.graph.falkordb.writer import FalkorGraphWriter
from pipeline.ingest.processor import BatchProcessor
from pipeline.ingest.records import RawRecord
from pipeline.kafka.markers import marker_generation
from pipeline.lexical.vocab import refresh_vocab
from pipeline.lexical.writer import LexicalWriter
from pipeline.memory.ports import Summariser
from pipeline.memory.summarisers import build_summariser
from pipeline.ports import ChangeSink, DeadLetterSink, Embedder, Extractor, GraphWriter
from pipeline.settings import Settings
from pipeline.wiring.stages import BY_NAME, STAGES, Stage, pending

# The stages a replay runs at once (one thread per group; a stage's waits are on Postgres,
# FalkorDB or the model, so two cores both work): safe as it is for the workers' processes, since
# every stage claims with a lease and writes by compare-and-set. The stages of one group share a
# client that may not be shared between threads (the extractor finds the entities of rows and of
# messages). A stage in no group runs alone. `lexical` is this host's replica of the new
# generation (no worker stage: `pipeline/lexical/replica.py`), in a group of its own.
LEXICAL = "lexical"
CONCURRENT: tuple[tuple[str, ...], ...] = (("embed",), ("extract", "memory"), ("relay",),
                                           (LEXICAL,))


@dataclass
class ReplayReport:
    """What a replay did."""

    generation: int
    records: int = 0
    applied: int = 0
    duplicates: int = 0
    stale: int = 0
    deferred: int = 0
    markers: int = 0
    skipped: int = 0  # older than --since
    rejected: Counter[str] = field(default_factory=Counter)  # by error code, not re-published
    embedded: int = 0  # rows the model embedded
    reused: int = 0  # rows and messages given a stored vector of the same text and model
    embed_failed: int = 0
    extracted: int = 0
    extract_failed: int = 0
    # message extractor results stored and given up on (every extractor), summary folds
    memory_extracted: int = 0
    memory_failed: int = 0
    summary_folds: int = 0
    changes_suppressed: int = 0
    switched: bool = False
    seconds: float = 0.0


class Cursor(Protocol):
    """Where the replay is: positions per partition, the markers seen, the `--since` bound."""

    positions: dict[int, int]
    markers_seen: dict[int, int]
    since_ms: int | None


@dataclass
class InProcessWork:
    """The workers' jobs, run by the replay itself on the new generation: every background stage
    of `pipeline/wiring/stages.py`, in order, on these resources (what a worker's runtime holds
    for the active generation)."""

    settings: Settings
    pool: Any
    embedder: Embedder
    extractor: Extractor
    graph: GraphWriter
    changes: ChangeSink
    name_embedder: Embedder  # entity names' vectors, written by the proposal pass
    summariser: Summariser
    # failures are marked, not dead-lettered again (they were when first consumed)
    dead_letters: DeadLetterSink | None = None
    # the live generation's database: its stored vectors of the same model are reused
    vector_source: Any = None

    @classmethod
    def for_generation(cls, settings: Settings, pool: Any, changes: ChangeSink, *,
                       vector_source: Any = None) -> InProcessWork:
        """The jobs on the generation's database and graph, with its embedder and extractor
        (and the stored vectors of `vector_source`, a pool on the live generation)."""
        embedder = build_embedder(settings)
        return cls(settings, pool, embedder, build_extractor(settings),
                   FalkorGraphWriter.from_settings(settings), changes,
                   build_name_embedder(settings, passages=embedder),
                   build_summariser(settings, embedder), vector_source=vector_source)

    def run(self, result: ReplayReport, *, rounds: int, defer: tuple[str, ...] = ()) -> None:
        """Every stage but those of `defer`, each bounded by `rounds`; the groups of
        `CONCURRENT` at once, as the workers' processes run them for the live generation."""
        grouped = {name for group in CONCURRENT for name in group}
        groups: list[list[Stage | str]] = [
            [BY_NAME.get(n, n) for n in group if n not in defer and (n in BY_NAME or n == LEXICAL)]
            for group in CONCURRENT]
        groups += [[stage] for stage in STAGES if stage.name not in grouped | set(defer)]
        groups = [group for group in groups if group]

        def run_one(stage: Stage | str) -> tuple[str, dict[str, Any]]:
            if isinstance(stage, str):  # the lexical replica
                writer = LexicalWriter(self.settings, self.pool)
                return stage, writer.run(max_rounds=rounds).__dict__
            return stage.name, stage.run(self, None, rounds, True).stats

        def run_group(group: list[Stage | str]) -> list[tuple[str, dict[str, Any]]]:
            return [run_one(stage) for stage in group]

        with ThreadPoolExecutor(len(groups), thread_name_prefix="replay-stage") as threads:
            done = [pair for pairs in threads.map(run_group, groups) for pair in pairs]
        for name, stats in done:
            if name == "embed":
                result.embedded += stats["embedded"]
                result.reused += stats["reused"]
                result.embed_failed += stats["failed"]
            elif name == "extract":
                result.extracted += stats["extracted"]
                result.extract_failed += stats["failed"]
            elif name == "memory":
                result.memory_extracted += sum(stats["extracted"].values())
                result.memory_failed += sum(stats["extract_failed"].values())
                result.reused += stats["reused"]
                result.summary_folds += stats["folds"]
        with self.pool.connection() as conn:
            refresh_vocab(conn)  # the sweep's job in a live generation

    def extract_pending(self) -> int:
        return self._pending("extract")

    def memory_pending(self) -> int:
        """Message extractor rows and summariser requests waiting (nobody else holds them
        before the switch: the workers serve the active generation)."""
        return self._pending("memory")

    def lexical_pending(self) -> int:
        """Log rows this host's replica of the generation has not applied (1 at least while
        it has never built itself)."""
        return LexicalWriter(self.settings, self.pool).pending()

    def _pending(self, stage: str) -> int:
        return BY_NAME[stage].pending(self.pool, 0.0)

    def backlogs(self) -> tuple[int, int, int, int, int]:
        """Rows waiting for an embedding, an extraction, the memory work, the graph, the
        lexical index."""
        waiting = pending(self.pool)
        return (waiting["embed"], waiting["extract"], waiting["memory"], waiting["relay"],
                self.lexical_pending())


class ReplayStep:
    """Consuming and applying batches, and the in-process work."""

    def __init__(self, consumer: KafkaConsumer, processor: BatchProcessor, work: InProcessWork,
                 replay: Cursor, result: ReplayReport, gen_id: int) -> None:
        self.gen_id = gen_id
        self.consumer = consumer
        self.processor = processor
        self.in_process = work
        self.pool = work.pool
        self.replay = replay
        self.result = result

    def consume(self, limit: int) -> int:
        """Poll one batch and apply it durably; the number of records."""
        polled = self.consumer.poll(timeout_ms=200, max_records=limit)
        records: list[RawRecord] = []
        gen_id = self.gen_id
        since_ms = self.replay.since_ms
        for tp, messages in sorted(polled.items(), key=lambda kv: kv[0].partition):
            for m in messages:
                headers = tuple((str(k), bytes(v or b"")) for k, v in m.headers or [])
                self.replay.positions[tp.partition] = m.offset + 1
                if marker_generation(m.value, headers) == gen_id:
                    self.replay.markers_seen.setdefault(tp.partition, m.offset)
                elif since_ms is not None and 0 <= (m.timestamp or 0) < since_ms:
                    self.result.skipped += 1  # older than --since
                    continue
                records.append(RawRecord(tp.topic, tp.partition, m.offset, m.key,
                                         bytes(m.value or b""), headers,
                                         m.timestamp if m.timestamp and m.timestamp > 0
                                         else None))
        if not records:
            return 0
        outcome = self.processor.process(records)
        r = self.result
        r.records += len(records)
        r.applied += outcome.applied
        r.duplicates += outcome.duplicates
        r.stale += outcome.stale
        r.deferred += outcome.deferred
        r.markers += outcome.markers
        return len(records)

    def work(self, *, final: bool) -> None:
        """Extract and relay some of the backlog between batches; embed (and everything else)
        all of it when `final`. Embedding waits for the end of the topic: a later event may
        still change a text, and a vector is only worth its model call (or its lookup) for the
        text the switched generation holds."""
        if final:
            self.in_process.run(self.result, rounds=1000)
        else:
            self.in_process.run(self.result, rounds=2, defer=("embed",))

    def settle(self) -> None:
        """Before deciding "caught up": retry every deferred event now (its endpoint may have
        arrived in the last batch), then drain the embedding, extraction, memory and outbox
        backlogs and the search vocabulary queue."""
        with self.pool.connection() as conn:
            conn.execute("UPDATE deferred_events SET next_attempt_at = now()")
        outcome = self.processor.process([])
        self.result.applied += outcome.applied
        while any(before := self.in_process.backlogs()):
            self.work(final=True)
            if self.in_process.backlogs() == before:
                time.sleep(0.5)  # the graph is down or rows are leased: wait, then retry
        with self.pool.connection() as conn:
            while refresh_vocab(conn) is None:  # a worker's sweep holds it: wait for it
                time.sleep(0.1)
