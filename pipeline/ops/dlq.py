"""Dead letters: inspect them by code, and re-drive them after a fix.

A dead letter keeps the original record (key, value, headers) plus `brainstream.*` headers
naming the failure. Re-driving sends the original record back to the input topic; the consumer's
processed-event ledger makes a re-driven event apply at most once. Letters about embedding (their
value describes an object, not an event) are re-driven by setting the object back to pending.
Re-driven letters are recorded, so a second `retry` does not send them again.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg
from kafka import KafkaConsumer, TopicPartition

from pipeline.domain.errors import InvalidInput
from pipeline.domain.settings import Settings
from pipeline.kafka.io import H_CODE, H_EVENT_ID, H_MESSAGE, H_TOPIC, OWN_HEADERS, make_producer

EMBEDDING_FAILED = "embedding_failed"


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


def _ensure_ledger(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS dlq_redrives (dlq_partition integer NOT NULL,"
                 " dlq_offset bigint NOT NULL, redriven_at timestamptz NOT NULL DEFAULT now(),"
                 " PRIMARY KEY (dlq_partition, dlq_offset))")


def retry(settings: Settings, letters: Sequence[DeadLetter]) -> dict[str, int]:
    """Re-drive letters not re-driven before; returns counts by how they were re-driven."""
    counts = {"republished": 0, "reembed": 0, "skipped": 0}
    producer = make_producer(settings)
    try:
        with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
            _ensure_ledger(conn)
            for letter in letters:
                claimed = conn.execute(
                    "INSERT INTO dlq_redrives (dlq_partition, dlq_offset) VALUES (%s, %s)"
                    " ON CONFLICT DO NOTHING RETURNING 1", (letter.partition, letter.offset)
                ).fetchone()
                if claimed is None:
                    counts["skipped"] += 1
                    continue
                if letter.code == EMBEDDING_FAILED and letter.header(H_TOPIC) == "embedding":
                    object_id = uuid.UUID(json.loads(letter.value)["id"])
                    conn.execute("UPDATE objects SET embed_status = 'pending', embed_attempts = 0,"
                                 " embed_error = NULL, embed_lease_until = NULL"
                                 " WHERE id = %s AND embed_status = 'failed'", (object_id,))
                    counts["reembed"] += 1
                    continue
                headers = [(k, v) for k, v in letter.headers if k not in OWN_HEADERS]
                producer.send(settings.topic_events, key=letter.key, value=letter.value,
                              headers=headers).get(timeout=30)
                counts["republished"] += 1
        producer.flush(timeout=30)
    finally:
        producer.close()
    return counts
