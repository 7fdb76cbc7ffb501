"""A replay does the memory work in-process before it may switch (`pipeline/ops/replay_step.py`):
the message extractors (token count, embedding, entities) and the summariser run on the new
generation, catch-up waits for them, and `verify` finds a message whose extractor is done but
whose result is missing. Real Postgres and FalkorDB, the replay's own settle step, on a database
and graph of the test's own (a full replay is `tests/pipeline/test_replay.py`'s)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import psycopg
import pytest

from pipeline.entities.ids import entity_id
from pipeline.ingest.processor import BatchProcessor
from pipeline.ingest.store.events import PgEventStores
from pipeline.kafka.io import KafkaChangeSink, make_producer
from pipeline.kafka.markers import catch_up
from pipeline.ops.memory import check_memory
from pipeline.ops.replay import _CountedLetters, _NoTrigger
from pipeline.ops.replay_step import InProcessWork, ReplayReport, ReplayStep
from pipeline.postgres.pool import make_pool
from pipeline.settings import Settings
from tests.entities.conftest import db, proj_settings
from tests.memory.memutil import add, message
from tests.pipelineutil import ingest

pytestmark = pytest.mark.stack
__all__ = ["db", "proj_settings"]


@dataclass
class Cursor:
    positions: dict[int, int] = field(default_factory=dict)
    markers_seen: dict[int, int] = field(default_factory=dict)
    since_ms: int | None = None


def test_replay_settles_memory_before_it_may_switch(db: psycopg.Connection[Any],
                                                   proj_settings: Settings) -> None:
    settings = proj_settings
    a, b = uuid.uuid4(), uuid.uuid4()
    turns = [message(f"Turn {i}: Maria Lopez asked about the Lisbon office budget for "
                     f"quarter {i % 4 + 1}.") for i in range(settings.memory_window + 4)]
    ingest(settings, [add(a, "long-chat", *turns),
                      add(b, "other", message("Tenant B talks about Oslo."))])
    messages = len(turns) + 1

    pool = make_pool(settings, max_size=3)
    producer = make_producer(settings)
    result = ReplayReport(generation=2)
    try:
        work = InProcessWork.for_generation(settings, pool,
                                            KafkaChangeSink(producer, settings.topic_changes))
        pending = work.memory_pending()
        assert pending == 3 * messages + 2  # three extractors a message, a summariser a session
        state = catch_up([0], {0: 0}, {0: 1}, {}, embed_pending=0, outbox_pending=0,
                         memory_pending=pending)
        assert not state.ready and "message extractor" in state.reason

        processor = BatchProcessor(settings, PgEventStores(pool), _CountedLetters(result),
                                   _NoTrigger())
        ReplayStep(None, processor, work, Cursor(), result, 2).settle()  # type: ignore[arg-type]
        assert work.backlogs() == (0, 0, 0, 0, 0)
    finally:
        producer.close()
        pool.close()

    assert result.memory_extracted == 3 * messages and result.memory_failed == 0
    assert result.summary_folds >= 1
    rows = db.execute("SELECT count(*) FILTER (WHERE embedding IS NOT NULL"
                      " AND token_count IS NOT NULL AND metadata -> 'system' ? 'entities'),"
                      " count(*) FROM messages").fetchone()
    assert rows == (messages, messages)  # every message embedded, counted, its entities found
    # ... and in the namespace's entity layer, under the ids every generation gives them
    linked = db.execute("SELECT DISTINCT m.namespace_id, e.norm, e.id FROM message_mentions m"
                        " JOIN entities e ON e.id = m.entity_id"
                        " WHERE e.norm IN ('maria lopez', 'oslo')").fetchall()
    assert sorted(linked) == sorted([(a, "maria lopez", entity_id(a, "maria lopez")),
                                     (b, "oslo", entity_id(b, "oslo"))])
    [(summary_seq, embedded)] = db.execute(
        "SELECT s.summary_seq, u.embedding IS NOT NULL FROM sessions s"
        " JOIN summaries u ON u.uuid = s.summary_uuid WHERE s.namespace_id = %s", (a,))
    assert summary_seq > 0 and embedded
    check = check_memory(db)
    assert check.clean and {n.pending_messages for n in check.namespaces} == {0}

    # verify: an extractor marked done whose result the message lacks
    db.execute("UPDATE messages SET embedding = NULL WHERE uuid = %s", (turns[0]["uuid"],))
    check = check_memory(db)
    assert check.missing_results == 1 and not check.clean
