"""The Celery application: embedding, entity extraction, the outbox relay, the lexical index's
writer and the periodic sweep.

Tasks are named `brainstream.*` so producers (the consumer) can send them by name without
importing the worker's code. Every task is idempotent: it re-reads the state it works on from
Postgres, so a duplicate or redelivered message changes nothing twice.
"""

from __future__ import annotations

from celery import Celery

from pipeline.settings import WORKER_START_TIMEOUT, load_settings

EMBED_TASK = "brainstream.embed"
EXTRACT_TASK = "brainstream.extract"
# The outbox relay (pipeline/outbox/relay.py): objects and links, on the relay queue, in a
# worker of its own, so embedding and extraction never queue ahead of the graph's writes.
RELAY_TASK = "brainstream.relay"
# The resolver's proposal pass over entities nobody examined (what the sweep finds waiting).
PROPOSE_TASK = "brainstream.propose"
SWEEP_TASK = "brainstream.sweep"
# The memory work of sessions (extractors and summariser; args: [session keys as strings]).
MEMORY_TASK = "brainstream.memory"
# Queues: embedding, memory and the sweep on Celery's default `celery`; extraction and the
# proposal pass on `extract`, so a backlog of extraction never holds a new document's embed
# task behind it (FIFO, prefetch 1); the outbox relay on `relay`.
EXTRACT_QUEUE = "extract"
RELAY_QUEUE = "relay"


def create_app() -> Celery:
    settings = load_settings()
    app = Celery("brainstream", broker=settings.effective_redis_url, include=["workers.tasks"])
    app.conf.update(
        task_acks_late=True,  # pessimistic: a task stays queued until it has finished
        task_reject_on_worker_lost=True,
        worker_prefetch_multiplier=1,
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        broker_connection_retry_on_startup=True,
        # Outlive a restart (or a long outage) of Redis: reconnect forever, also after a
        # channel error (a LOADING reply while Redis reads its AOF back), and close the lost
        # connection without ending the worker (workers/consumer.py).
        broker_connection_retry=True,
        broker_connection_max_retries=None,
        broker_channel_error_retry=True,
        worker_consumer="workers.consumer:BrokerRestartConsumer",
        # A running task whose ack can no longer reach the broker finishes its work (Celery 6
        # will cancel it by default): its redelivery is then a no-op, every task being
        # idempotent, where a cancelled one would leave the work for the sweep.
        worker_cancel_long_running_tasks_on_connection_loss=False,
        broker_transport_options={"visibility_timeout": 600},
        task_routes={RELAY_TASK: {"queue": RELAY_QUEUE}, EXTRACT_TASK: {"queue": EXTRACT_QUEUE},
                     PROPOSE_TASK: {"queue": EXTRACT_QUEUE}},
        beat_schedule={
            "sweep": {"task": SWEEP_TASK, "schedule": settings.sweep_interval},
        },
        worker_hijack_root_logger=False,
        # a pool process loads its embedder before it reports up (workers/runtime.py); Celery
        # kills one that has not reported within this many seconds (4 by default)
        worker_proc_alive_timeout=WORKER_START_TIMEOUT,
    )
    return app


# Celery accepts these content types only from a trusted broker: unpickling a message runs code.
_CODE_CARRYING = {"pickle", "application/x-python-serialize", "application/group-python-serialize"}


def quiet_root_warning(celery_app: Celery) -> bool:
    """Silence Celery's "running the worker with superuser privileges" warning when, and only
    when, the app accepts no content type that carries code (ours: JSON only); True if it did.

    Run as root (a development container; the production image runs as an unprivileged user),
    the pipeline keeps root: the consumer and the API run as root beside the worker on the same
    data directory, so dropping the worker alone (Celery's --uid) would protect nothing and split
    the ownership of the files the relay writes and root's `brainstream` commands rewrite. What
    Celery guards against, a broker message that runs code as root, needs pickle: with pickle
    accepted Celery still refuses to start as root (we never set C_FORCE_ROOT), and the warning
    stays.
    """
    import warnings

    from celery.exceptions import SecurityWarning

    if _CODE_CARRYING & set(celery_app.conf.accept_content):
        return False
    warnings.filterwarnings("ignore", message="You're running the worker with superuser",
                            category=SecurityWarning)
    return True


app = create_app()
