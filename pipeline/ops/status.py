"""`brainstream status`: what is stuck, and where. Each part is collected independently, so a
down service shows up as an error in its own line instead of hiding the others.

The backlogs (`read_backlogs`) are read the same way for the metrics exporter's gauges, and the
whole report (`collect_active`) for `brainstream up`'s status line
(pipeline/supervisor/console.py)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import psycopg

from pipeline.domain.setting_values import redact_credentials
from pipeline.embedding.service import counts_by_status
from pipeline.entities.store import extraction
from pipeline.kafka.offsets import committed_offsets, read_tails
from pipeline.lexical.postings_switch import NOT_MAINTAINED, postings_maintained
from pipeline.ops.memory import MemoryBacklog, read_memory_backlog
from pipeline.ops.status_queues import (
    read_celery_queues,
    read_lexical_replicas,
    read_queue_backlogs,
)
from pipeline.ops.status_standby import read_replication, render_replication
from pipeline.outbox.store import OpBacklog, backlog_by_op
from pipeline.services.stack import Stack
from pipeline.settings import Settings

CONSUMER_GROUP = "brainstream-consumer"
# The lag is counted by reading the records past the committed offsets (pipeline/kafka/offsets.py):
# past this many, it is reported as "at least".
LAG_RECORDS = 200_000


@dataclass
class StatusReport:
    services: list[dict[str, Any]] = field(default_factory=list)
    lag: dict[str, Any] = field(default_factory=dict)
    outbox: dict[str, Any] = field(default_factory=dict)
    embedding: dict[str, Any] = field(default_factory=dict)
    extraction: dict[str, int] = field(default_factory=dict)
    deferred: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] = field(default_factory=dict)
    # the read hosts' lexical replicas, curators' decisions and the proposal pass
    # (status_queues.py)
    lexical: dict[str, Any] = field(default_factory=dict)
    decisions: dict[str, Any] = field(default_factory=dict)
    proposals: dict[str, Any] = field(default_factory=dict)
    celery_queues: dict[str, int] = field(default_factory=dict)
    dead_letters: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    # which index generation was read (its graph and consumer group), or why that is unknown
    index: dict[str, Any] = field(default_factory=dict)
    # whether the database keeps the SQL BM25 postings, and whether LEXICAL_ENGINE reads them
    sql_postings: dict[str, Any] = field(default_factory=dict)
    # the standbys the primary streams to, and the read standby (status_standby.py)
    replication: dict[str, Any] = field(default_factory=dict)

    @property
    def healthy(self) -> bool:
        return (not self.errors and all(s["state"] == "healthy" for s in self.services)
                and not self.sql_postings.get("problem"))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "healthy": self.healthy}


@dataclass(frozen=True)
class Backlogs:
    """The outbox rows not applied yet, per op, the visible rows per embedding status, the rows
    per entity extraction status (plus `recount`: rows whose entities wait for a recount after
    a delete or revival), and the conversation-memory backlog (extractors, summariser)."""

    outbox: list[OpBacklog]
    embedding: dict[str, int]
    extraction: dict[str, int]
    memory: MemoryBacklog


def read_backlogs(conn: psycopg.Connection[Any], memory_window: int) -> Backlogs:
    """What `status` shows of the outbox, embedding, extraction and memory backlogs, and the
    exporter exports."""
    return Backlogs(backlog_by_op(conn), counts_by_status(conn),
                    extraction.counts_by_status(conn), read_memory_backlog(conn, memory_window))


# What each part of the report reads: a part whose service is down is skipped, not waited on
# (the Kafka client alone spends half a minute failing to bootstrap from a closed port).
_NEEDS = {"lag": "broker", "dead_letters": "broker", "database": "postgres",
          "celery_queues": "redis", "replication": "postgres"}


@dataclass
class DeadLetterTally:
    """The dead-letter topic as far as an earlier collection read it, so that a collection
    repeated every few seconds (`up`'s status line) reads only the records added since instead
    of the whole topic again."""

    topic: str = ""
    ends: dict[int, int] = field(default_factory=dict)  # per partition: one past the last read
    count: int = 0


def collect_active(base: Settings, generation: int | None = None, *,
                   tally: DeadLetterTally | None = None,
                   lag_records: int = LAG_RECORDS) -> StatusReport:
    """`collect` for the active index generation (or the named one). When the base database
    cannot be reached, which generation is active is unknown: every part is still collected
    against `base` (Postgres among them, as down), and `errors["generation"]` says why."""
    from pipeline.generations.active import resolve

    try:
        settings = resolve(base, generation)
    except psycopg.OperationalError as exc:
        report = collect(base, group=base.consumer_group, tally=tally, lag_records=lag_records)
        report.index = {"generation": None,
                        "error": redact_credentials(f"{type(exc).__name__}: {exc}")}
        report.errors["generation"] = report.index["error"]
        return report
    report = collect(settings, group=settings.consumer_group, tally=tally,
                     lag_records=lag_records)
    report.index = {"generation": settings.generation, "graph": settings.graph_name,
                    "consumer_group": settings.consumer_group}
    return report


def collect(settings: Settings, *, group: str = CONSUMER_GROUP,
            tally: DeadLetterTally | None = None, lag_records: int = LAG_RECORDS
            ) -> StatusReport:
    """Every part of the status; the lag is counted exactly up to `lag_records` records (then
    as "at least"), dead letters from where `tally` stopped when one is given."""
    report = StatusReport()
    report.services = [asdict(s) for s in Stack(settings).status()]
    state = {s["name"]: s["state"] for s in report.services}
    for name, part in (("lag", lambda: _lag(settings, group, lag_records)),
                       ("dead_letters", lambda: _dead_letters(settings, tally)),
                       ("database", lambda: _database(settings, report)),
                       ("celery_queues",
                        lambda: read_celery_queues(settings.effective_redis_url)),
                       ("replication", lambda: read_replication(settings))):
        needed = _NEEDS[name]
        if state.get(needed, "healthy") != "healthy":
            report.errors[name] = f"not collected: {needed} is {state[needed]}"
            continue
        try:
            value = part()
            if name != "database":
                setattr(report, name, value)
        except Exception as exc:  # a down dependency is reported, not raised
            # (masked: a client's error may quote the DSN or URL it was given)
            report.errors[name] = redact_credentials(f"{type(exc).__name__}: {exc}")
    return report


def _lag(settings: Settings, group: str, max_records: int) -> dict[str, Any]:
    committed = committed_offsets(settings, settings.topic_events, group)
    tails = read_tails(settings, settings.topic_events, committed, max_records=max_records)
    partitions = [{"partition": t.partition, "committed": committed.get(t.partition),
                   "end": t.end, "lag": t.count, "exact": t.exact} for t in tails]
    return {"group": group, "topic": settings.topic_events,
            "total": sum(p["lag"] for p in partitions),
            "exact": all(p["exact"] for p in partitions), "partitions": partitions}


def _dead_letters(settings: Settings, tally: DeadLetterTally | None) -> dict[str, Any]:
    topic = settings.topic_dlq
    if tally is None:
        tally = DeadLetterTally(topic)
    elif tally.topic != topic:  # another generation's settings name another topic
        tally.topic, tally.ends, tally.count = topic, {}, 0
    tails = read_tails(settings, topic, tally.ends)
    # A read the bound stopped early counted what it read: the next goes on from there.
    tally.ends = {t.partition: t.end for t in tails}
    tally.count += sum(t.count for t in tails)
    return {"topic": topic, "count": tally.count, "exact": all(t.exact for t in tails)}


def _database(settings: Settings, report: StatusReport) -> None:
    with psycopg.connect(settings.effective_postgres_dsn, connect_timeout=5) as conn:
        backlogs = read_backlogs(conn, settings.memory_window)
        report.outbox = {
            "backlog": sum(b.count for b in backlogs.outbox),
            "failed": sum(b.failed for b in backlogs.outbox),
            "by_op": {b.op: {"count": b.count, "oldest_seconds": round(b.oldest_seconds, 1),
                             "max_attempts": b.max_attempts, "last_error": b.last_error,
                             "failed": b.failed}
                      for b in backlogs.outbox}}
        embed = backlogs.embedding
        oldest = conn.execute(
            "SELECT extract(epoch FROM now() - min(e.queued_at)) FROM object_embeddings e"
            " JOIN objects o ON o.id = e.id WHERE e.embed_status = 'pending'"
            " AND o.deleted_at IS NULL").fetchone()
        report.embedding = {"pending": int(embed.get("pending", 0)),
                            "failed": int(embed.get("failed", 0)),
                            "done": int(embed.get("done", 0)),
                            "oldest_pending_seconds": round(float(oldest[0]), 1)
                            if oldest and oldest[0] is not None else None}
        report.extraction = {status: int(backlogs.extraction.get(status, 0))
                             for status in ("pending", "failed", "done", "recount")}
        waiting = conn.execute(
            "SELECT count(*), extract(epoch FROM now() - min(first_seen)) FROM deferred_events"
        ).fetchone()
        report.deferred = {"count": int(waiting[0]) if waiting else 0,
                           "oldest_seconds": round(float(waiting[1]), 1)
                           if waiting and waiting[1] is not None else None}
        memory = backlogs.memory
        report.memory = {
            "extractors": {e.extractor: {"pending": e.pending, "failed": e.failed,
                                         "oldest_pending_seconds": round(
                                             e.oldest_pending_seconds, 1)}
                           for e in memory.extractors},
            "summariser_pending": memory.summariser_pending,
            "summary_lag_messages": memory.summary_lag_messages,
            "summary_lag_max": memory.summary_lag_max}
        maintained = postings_maintained(conn)
        report.sql_postings = {
            "maintained": maintained, "lexical_engine": settings.lexical_engine,
            "problem": NOT_MAINTAINED if settings.lexical_engine == "postgres"
            and not maintained else None}
        queues = read_queue_backlogs(conn)
        report.decisions, report.proposals = queues["decisions"], queues["proposals"]
        report.lexical = read_lexical_replicas(conn)


def render(report: StatusReport) -> str:
    """The human-readable status."""
    lines = ["services:"]
    for s in report.services:
        lines.append(f"  {s['name']:9} {s['mode']:9} {s['state']:10} {s['address']}"
                     + (f"  ({s['detail']})" if s.get("detail") else ""))
    if report.lag:
        approx = "" if report.lag["exact"] else " (at least)"
        lines.append(f"consumer lag ({report.lag['group']}): {report.lag['total']}{approx}")
        for p in report.lag["partitions"]:
            lines.append(f"  partition {p['partition']}: committed {p['committed']}, "
                         f"end {p['end']}, lag {p['lag']}")
    if report.outbox:
        lines.append(f"outbox backlog: {report.outbox['backlog']}, failed: "
                     f"{report.outbox['failed']} (dead-lettered: `dlq retry --code "
                     "graph_sync_failed` after a fix)")
        for op, info in report.outbox["by_op"].items():
            lines.append(f"  {op}: {info['count']} (oldest {info['oldest_seconds']} s, "
                         f"max attempts {info['max_attempts']}), {info['failed']} failed"
                         + (f" last error: {info['last_error']}" if info["last_error"] else ""))
    if report.embedding:
        e = report.embedding
        lines.append(f"embedding: {e['pending']} pending (oldest {e['oldest_pending_seconds']}"
                     f" s), {e['failed']} failed, {e['done']} done")
    if report.extraction:
        x = report.extraction
        lines.append(f"entity extraction: {x['pending']} pending, {x['failed']} failed "
                     f"(dead-lettered `extraction_failed`), {x['done']} done, {x['recount']} "
                     "waiting for a recount")
    if report.deferred:
        lines.append(f"deferred events: {report.deferred['count']} (oldest "
                     f"{report.deferred['oldest_seconds']} s)")
    if report.memory:
        m = report.memory
        lines.append(f"memory: summariser pending for {m['summariser_pending']} sessions, "
                     f"{m['summary_lag_messages']} messages past the window "
                     f"(worst session {m['summary_lag_max']})")
        for name, e in m["extractors"].items():
            lines.append(f"  extractor {name}: {e['pending']} pending (oldest "
                         f"{e['oldest_pending_seconds']} s), {e['failed']} failed")
    if report.lexical:
        lines.append(f"lexical replicas: {len(report.lexical['replicas'])} (change log: "
                     f"{report.lexical['log_rows']} rows)")
        for r in report.lexical["replicas"]:
            lines.append(f"  {r['replica']} {r['data_dir']}: lag {r['lag_seconds']} s, "
                         f"{r['pending']} rows pending, seen {r['seen_seconds_ago']} s ago")
    for title, queue in (("entity decisions pending", report.decisions),
                         ("entity proposal pass queue", report.proposals)):
        if queue:
            lines.append(_queue_line(title, queue))
    if report.sql_postings:
        lines.append(_postings_line(report.sql_postings))
    if report.replication:
        lines.extend(render_replication(report.replication))
    if report.celery_queues:
        q = report.celery_queues
        lines.append("celery queues: " + ", ".join(
            f"{name} {count}" for name, count in q.items() if name != "unacknowledged")
            + f"; {q['unacknowledged']} delivered, not acknowledged")
    if report.dead_letters:
        lines.append(f"dead letters: {report.dead_letters['count']}"
                     + ("" if report.dead_letters["exact"] else " (at least)"))
    for name, error in report.errors.items():
        lines.append(f"error collecting {name}: {error}")
    return "\n".join(lines)


def _queue_line(title: str, queue: dict[str, Any]) -> str:
    line = f"{title}: {queue['count']}"
    if queue["count"]:
        largest = ", ".join(f"{ns} {n}" for ns, n in list(queue["namespaces"].items())[:3])
        line += (f" (oldest {queue['oldest_seconds']} s) in {queue['namespace_count']}"
                 f" namespaces; largest: {largest}")
    if "failed" in queue:
        line += f"; {queue['failed']} failed (recorded with their code, not retried)"
    return line


def _postings_line(p: dict[str, Any]) -> str:
    """Whether the SQL BM25 postings are kept, and whether that is what LEXICAL_ENGINE needs."""
    if p["problem"]:
        return str(p["problem"])
    if not p["maintained"]:
        return "SQL BM25 postings: off (LEXICAL_ENGINE=tantivy reads Tantivy)"
    if p["lexical_engine"] == "postgres":
        return "SQL BM25 postings: on"
    return ("SQL BM25 postings: on, though LEXICAL_ENGINE=tantivy does not read them (the next "
            "`brainstream migrate` turns them off)")
