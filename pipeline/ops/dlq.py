"""Dead letters: inspect them by code, and re-drive them after a fix.

A dead letter keeps the original record (key, value, headers) plus `brainstream.*` headers
naming the failure. Re-driving sends the original record back to the input topic; the consumer's
processed-event ledger makes a re-driven event apply at most once. Letters about embedding (their
value describes an object, not an event) are re-driven by setting the object back to pending,
and so are letters about entity extraction (its row back to pending);
letters about the outbox (a row the graph kept refusing) by re-queueing the row. Re-driven letters
are recorded, so a second `retry` does not send them again; the record commits only once the
broker acknowledged the send (or the row was re-queued), so a failed send leaves the letter
re-drivable.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError

from pipeline.domain.errors import ExtractionFailed, GraphSyncFailed, InvalidInput, Unavailable
from pipeline.entities.store import extraction
from pipeline.entities.store.extraction import EXTRACTION_SOURCE
from pipeline.kafka.io import H_CODE, H_EVENT_ID, H_MESSAGE, H_TOPIC, OWN_HEADERS, make_producer
from pipeline.kafka.letter_size import CUT_HEADERS
from pipeline.outbox.letters import LETTER_SOURCE, letter_row
from pipeline.outbox.store import requeue_failed
from pipeline.settings import Settings

EMBEDDING_FAILED = "embedding_failed"

Conn = psycopg.Connection[tuple[object, ...]]


@dataclass(frozen=True)
class DeadLetter:
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]

    @property
    def ref(self) -> str:
        return f"{self.partition}:{self.offset}"

    def header(self, name: str) -> str | None:
        for key, value in self.headers:
            if key == name:
                return value.decode("utf-8", "replace")
        return None

    @property
    def code(self) -> str:
        return self.header(H_CODE) or "unknown"

    @property
    def cut(self) -> bool:
        """Whether the letter holds less than the record (cut to fit the topic): re-driving it
        would publish what it kept, not the event."""
        return any(name in CUT_HEADERS for name, _ in self.headers)


def read_all(settings: Settings, *, max_records: int = 1_000_000,
             idle_seconds: float = 1.0) -> list[DeadLetter]:
    """Every dead letter, oldest first per partition (read to the end, bounded)."""
    consumer = KafkaConsumer(bootstrap_servers=settings.effective_kafka_bootstrap,
                             group_id=None, enable_auto_commit=False, fetch_max_wait_ms=50,
                             client_id="brainstream-dlq")
    try:
        tps = [TopicPartition(settings.topic_dlq, p)
               for p in sorted(consumer.partitions_for_topic(settings.topic_dlq) or [])]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list[DeadLetter] = []
        while len(out) < max_records:
            batch = consumer.poll(timeout_ms=int(idle_seconds * 1000))
            if not batch:
                break
            for records in batch.values():
                out += [DeadLetter(r.partition, r.offset, r.key, r.value,
                                   tuple((k, v or b"") for k, v in r.headers or []))
                        for r in records]
        out.sort(key=lambda d: (d.partition, d.offset))
        return out
    finally:
        consumer.close()


def summarize(letters: Sequence[DeadLetter]) -> list[tuple[str, int]]:
    """(code, count), most frequent first."""
    return Counter(d.code for d in letters).most_common()


def find(letters: Sequence[DeadLetter], ref: str) -> DeadLetter:
    for letter in letters:
        if letter.ref == ref:
            return letter
    raise InvalidInput(f"no dead letter {ref} (refs are partition:offset)", field="ref")


def describe(letter: DeadLetter) -> str:
    lines = [f"dead letter {letter.ref}  code={letter.code}",
             f"  message: {letter.header(H_MESSAGE)}",
             f"  event id: {letter.header(H_EVENT_ID)}",
             f"  key: {letter.key.decode('utf-8', 'replace') if letter.key else None}",
             "  headers:"]
    lines += [f"    {k}: {v.decode('utf-8', 'replace')}" for k, v in letter.headers]
    lines.append("  value:")
    lines.append("    " + letter.value.decode("utf-8", "replace")[:4000])
    return "\n".join(lines)


def _ensure_ledger(conn: Conn) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS dlq_redrives (dlq_partition integer NOT NULL,"
                 " dlq_offset bigint NOT NULL, redriven_at timestamptz NOT NULL DEFAULT now(),"
                 " PRIMARY KEY (dlq_partition, dlq_offset))")


def retry(settings: Settings, letters: Sequence[DeadLetter], *,
          producer: KafkaProducer | None = None) -> dict[str, int]:
    """Re-drive letters not re-driven before; returns counts by how they were re-driven.

    Each letter is one transaction: its `dlq_redrives` row, then the re-drive; the row commits
    only after the broker acknowledged the send, so a send that fails rolls it back and the letter
    stays re-drivable, and a concurrent `retry` waits on the uncommitted row instead of sending
    the letter twice. Raises `Unavailable` at the first send not acknowledged (the letters before
    it are re-driven). `producer`: the one to send with (default: a new one on the settings).
    A letter cut to fit the topic is not re-driven (`cut`): it holds less than the event.
    """
    counts = {"republished": 0, "reembed": 0, "reextract": 0, "requeued": 0, "skipped": 0,
              "cut": 0}
    sender = producer or make_producer(settings)
    try:
        with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
            _ensure_ledger(conn)
            for letter in letters:
                if letter.cut:  # the whole record is at its source offset: send that again
                    counts["cut"] += 1
                    continue
                with conn.transaction():
                    claimed = conn.execute(
                        "INSERT INTO dlq_redrives (dlq_partition, dlq_offset) VALUES (%s, %s)"
                        " ON CONFLICT DO NOTHING RETURNING 1", (letter.partition, letter.offset)
                    ).fetchone()
                    if claimed is None:
                        counts["skipped"] += 1
                        continue
                    counts[_redrive(conn, sender, settings, letter)] += 1
    finally:
        if producer is None:
            sender.close()
    return counts


def _redrive(conn: Conn, producer: KafkaProducer, settings: Settings,
             letter: DeadLetter) -> str:
    """Re-drive one letter inside the caller's transaction; which way (a key of `retry`'s
    counts)."""
    source = letter.header(H_TOPIC)
    if letter.code == EMBEDDING_FAILED and source == "embedding":
        object_id = uuid.UUID(json.loads(letter.value)["id"])
        conn.execute("UPDATE object_embeddings SET embed_status = 'pending', embed_attempts = 0,"
                     " embed_error = NULL, embed_lease_until = NULL, queued_at = now()"
                     " WHERE id = %s AND embed_status = 'failed'", (object_id,))
        return "reembed"
    if letter.code == ExtractionFailed.code and source == EXTRACTION_SOURCE:
        extraction.retry_failed(conn, uuid.UUID(json.loads(letter.value)["id"]))
        return "reextract"
    if letter.code == GraphSyncFailed.code and source == LETTER_SOURCE:
        # Due again at once; the sweep starts the relay (it finds a backlog).
        requeue_failed(conn, *letter_row(letter.value))
        return "requeued"
    headers = [(k, v) for k, v in letter.headers if k not in OWN_HEADERS]
    try:
        future = producer.send(settings.topic_events, key=letter.key, value=letter.value,
                               headers=headers)
        producer.flush(timeout=30)
        future.get(timeout=30)
    except KafkaError as exc:
        raise Unavailable(f"re-drive of dead letter {letter.ref} to {settings.topic_events} "
                          f"was not acknowledged ({type(exc).__name__}: {exc}); it stays "
                          "re-drivable") from exc
    return "republished"
