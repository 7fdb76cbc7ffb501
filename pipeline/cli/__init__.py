"""The `brainstream` command: one entry point for operators."""

from __future__ import annotations

import json
import os
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import psycopg

from pipeline.cli.generations import context_settings as _settings
from pipeline.cli.generations import generations, replay
from pipeline.domain.errors import BrainstreamError
from pipeline.domain.settings import Settings

F = TypeVar("F", bound=Callable[..., Any])


def _active(ctx: click.Context, generation: int | None = None) -> Settings:
    """The settings addressing the active index generation (or the named one): every command
    that reads or writes the index acts on it."""
    from pipeline.ops.generations import resolve

    return resolve(_settings(ctx), generation)


def _generation_option(func: F) -> F:
    return click.option("--generation", "generation", type=int, default=None,
                        help="Act on this index generation (default: the active one).")(func)


def _echo(line: str) -> None:
    click.echo(line)


class _Group(click.Group):
    """Turns our own errors into one clear line and exit status 2, not a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except BrainstreamError as exc:
            click.echo(f"error [{exc.code}]: {exc.message}", err=True)
            sys.exit(2)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """brainstream: event-driven ingestion and indexing for a knowledge base.

    Settings come from BRAINSTREAM_* environment variables or a .env file
    (see docs/operations.md).
    """


# -- services -----------------------------------------------------------------------------


@main.group(cls=_Group)
def services() -> None:
    """Run the embedded stack: PostgreSQL, the Kafka-protocol broker, FalkorDB and Redis."""


@services.command("start")
@click.pass_context
def services_start(ctx: click.Context) -> None:
    """Start every embedded service that is not running and wait until each is ready.

    A healthy running service is reused; a service whose URL/DSN is configured is external and
    only probed.
    """
    from pipeline.services.stack import Stack

    settings = _settings(ctx)
    click.echo(f"data directory: {settings.resolved_data_dir}")
    Stack(settings).start(report=_echo)


@services.command("stop")
@click.pass_context
def services_stop(ctx: click.Context) -> None:
    """Stop every embedded service; nothing is left running."""
    from pipeline.services.stack import Stack

    Stack(_settings(ctx)).stop(report=_echo)


@services.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@click.pass_context
def services_status(ctx: click.Context, as_json: bool) -> None:
    """Show each service's state and address; exit status 1 unless all are healthy."""
    from pipeline.services.stack import Stack

    rows = Stack(_settings(ctx)).status()
    if as_json:
        click.echo(json.dumps([row.__dict__ for row in rows], indent=2))
    else:
        click.echo(f"{'service':10}{'mode':10}{'state':11}{'pid':>8}  address")
        for row in rows:
            pid = str(row.pid) if row.pid else "-"
            line = f"{row.name:10}{row.mode:10}{row.state:11}{pid:>8}  {row.address}"
            if row.detail:
                line += f"  ({row.detail})"
            click.echo(line)
    if not all(row.healthy for row in rows):
        sys.exit(1)


# -- schema -------------------------------------------------------------------------------


@main.command()
@click.option("--postgres/--no-postgres", default=True, help="Apply SQL migrations.")
@click.option("--graph/--no-graph", default=True, help="Prepare graph constraints and indexes.")
@click.option("--topics/--no-topics", default=True, help="Create the Kafka topics.")
@click.pass_context
def migrate(ctx: click.Context, postgres: bool, graph: bool, topics: bool) -> None:
    """Bring Postgres, the graph and the Kafka topics to the current schema (idempotent)."""
    from pipeline.ops.generations import migrate_generations

    settings = _settings(ctx)
    # every index generation (the base database first; it holds the generations' table)
    applied = migrate_generations(settings, postgres=postgres, graph=graph, report=_echo)
    if postgres:
        click.echo(f"postgres: {len(applied)} migration(s) applied")
    if topics:
        from pipeline.kafka.topics import ensure_topics

        ensure_topics(settings, report=_echo)


# -- kinds and events ---------------------------------------------------------------------


@main.group(cls=_Group)
def kinds() -> None:
    """The kind catalog (empty = open mode: every kind accepted)."""


@kinds.command("apply")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.pass_context
def kinds_apply(ctx: click.Context, path: Path) -> None:
    """Apply a kinds.yaml additively: new kinds and fields are added, nothing is removed."""
    from pipeline.domain.kinds import load_catalog
    from pipeline.ops.generations import apply_to_live
    from pipeline.stores.postgres.kinds import apply_catalog

    incoming = load_catalog(path.read_text(encoding="utf-8"))
    merged: list[object] = []

    def apply(settings: Settings) -> None:
        nonlocal merged
        with psycopg.connect(settings.effective_postgres_dsn) as conn:
            merged = list(apply_catalog(conn, incoming))

    # the active generation and one a replay is building: both must validate alike
    apply_to_live(_settings(ctx), apply)
    click.echo(f"applied {len(incoming)} kind(s) from {path}; the catalog has {len(merged)}")


@kinds.command("list")
@click.pass_context
def kinds_list(ctx: click.Context) -> None:
    """Print the catalog as YAML."""
    import yaml

    from pipeline.domain.kinds import catalog_to_dict
    from pipeline.stores.postgres.kinds import read_catalog

    with psycopg.connect(_active(ctx).effective_postgres_dsn) as conn:
        specs = read_catalog(conn)
    click.echo(yaml.safe_dump(catalog_to_dict(specs), sort_keys=False), nl=False)


@main.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--namespace", type=click.UUID, default=None,
              help="Namespace for bare objects (lines without a CloudEvents envelope).")
@click.option("--source", default="brainstream-cli", show_default=True,
              help="CloudEvents source for wrapped bare objects.")
@click.pass_context
def publish(ctx: click.Context, path: Path, namespace: uuid.UUID | None, source: str) -> None:
    """Publish a JSONL file of events to the input topic, keyed per aggregate.

    A line that is a bare object becomes a put. Lines that are not valid events are sent as they
    are; the consumer dead-letters them with the reason.
    """
    from pipeline.kafka.io import make_producer
    from pipeline.kafka.publisher import EventPublisher, read_lines

    settings = _settings(ctx)
    producer = make_producer(settings)
    try:
        report = EventPublisher(producer, settings.topic_events).publish_lines(
            read_lines(path), namespace=namespace, source=source)
    finally:
        producer.close()
    click.echo(f"published {report.sent} record(s) to {settings.topic_events} "
               f"({report.wrapped} wrapped, {report.unparsed} not valid events: they will be "
               "dead-lettered)")


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@_generation_option
@click.pass_context
def status(ctx: click.Context, as_json: bool, generation: int | None) -> None:
    """Services, consumer lag per partition, outbox and embedding backlog, waiting events and
    dead letters of the active index generation; exit status 1 when something is unhealthy."""
    from pipeline.ops.status import collect, render

    settings = _active(ctx, generation)
    report = collect(settings, group=settings.consumer_group)
    where = {"generation": settings.generation, "graph": settings.graph_name,
             "consumer_group": settings.consumer_group}
    if as_json:
        click.echo(json.dumps({**report.to_dict(), "index": where}, indent=2, default=str))
    else:
        click.echo(f"index generation {settings.generation} (graph {settings.graph_name}, "
                   f"consumer group {settings.consumer_group})")
        click.echo(render(report))
    if not report.healthy:
        sys.exit(1)


@main.group(cls=_Group)
def dlq() -> None:
    """Dead letters: list by code, show one, re-drive after a fix."""


@dlq.command("list")
@click.option("--code", default=None, help="Only letters with this error code.")
@click.option("--limit", type=int, default=20, show_default=True, help="Letters to list.")
@click.pass_context
def dlq_list(ctx: click.Context, code: str | None, limit: int) -> None:
    """Counts by error code, then the most recent letters (ref = partition:offset)."""
    from pipeline.kafka.io import H_MESSAGE
    from pipeline.ops import dlq as dead

    letters = dead.read_all(_settings(ctx))  # the topic: the same for every generation
    click.echo(f"{len(letters)} dead letter(s)")
    for name, count in dead.summarize(letters):
        click.echo(f"  {name:28} {count}")
    shown = [d for d in letters if code is None or d.code == code][-limit:]
    for letter in shown:
        click.echo(f"{letter.ref:>10}  {letter.code:26} {(letter.header(H_MESSAGE) or '')[:90]}")


@dlq.command("show")
@click.argument("ref")
@click.pass_context
def dlq_show(ctx: click.Context, ref: str) -> None:
    """One dead letter with its headers and original value (REF is partition:offset)."""
    from pipeline.ops import dlq as dead

    click.echo(dead.describe(dead.find(dead.read_all(_settings(ctx)), ref)))


@dlq.command("retry")
@click.argument("refs", nargs=-1)
@click.option("--code", default=None, help="Re-drive every letter with this code.")
@click.option("--all", "everything", is_flag=True, help="Re-drive every letter.")
@click.pass_context
def dlq_retry(ctx: click.Context, refs: tuple[str, ...], code: str | None,
              everything: bool) -> None:
    """Send dead letters back to the input topic (embedding failures: back to pending).

    Each letter is re-driven once; an event that then applies is applied once."""
    from pipeline.domain.errors import InvalidInput
    from pipeline.ops import dlq as dead

    if not (refs or code or everything):
        raise InvalidInput("name letters (partition:offset), --code CODE or --all",
                           field="refs")
    settings = _active(ctx)
    letters = dead.read_all(settings)
    chosen = [d for d in letters if everything or d.ref in refs or (code and d.code == code)]
    missing = set(refs) - {d.ref for d in chosen}
    if missing:
        raise InvalidInput(f"no dead letter {sorted(missing)[0]}", field="refs")
    counts = dead.retry(settings, chosen)
    click.echo(f"re-drove {counts['republished']} to the input topic, {counts['reembed']} back "
               f"to embedding; {counts['skipped']} were re-driven before")


@main.command()
@click.option("--older-than", "older_than", required=True,
              help="Retention, e.g. 30d, 12h: what was soft-deleted before that goes.")
@_generation_option
@click.pass_context
def purge(ctx: click.Context, older_than: str, generation: int | None) -> None:
    """Hard-delete soft-deleted objects (with parts and links) past a retention."""
    from pipeline.ops.purge import parse_age
    from pipeline.ops.purge import purge as run_purge

    age = parse_age(older_than)

    def show(result: object) -> None:
        click.echo(f"  ... {getattr(result, 'objects', 0)} objects so far", err=True)

    result = run_purge(_active(ctx, generation), age, progress=show)
    click.echo(f"purged {result.objects} objects, {result.parts} parts, {result.links} links, "
               f"{result.outbox_rows} finished outbox rows (soft-deleted before {older_than} ago)")


@main.command()
@click.option("--repair", is_flag=True, help="Queue every drifted aggregate for the relay and "
              "rebuild a vector index that no longer answers.")
@click.option("--sample", type=int, default=200, show_default=True,
              help="Vectors to look up in the vector index (0 skips the check).")
@_generation_option
@click.pass_context
def verify(ctx: click.Context, repair: bool, sample: int, generation: int | None) -> None:
    """Report every disagreement between Postgres and the graph; exit 1 on drift."""
    from pipeline.ops.verify import repair as run_repair
    from pipeline.ops.verify import verify as run_verify

    settings = _active(ctx, generation)
    drift = run_verify(settings, vector_sample=sample)
    click.echo(f"checked {drift.nodes_checked} objects and {drift.edges_checked} links")
    for name, count in drift.summary():
        click.echo(f"  {name:42} {count}")
    if drift.clean:
        click.echo("Postgres and the graph agree")
        return
    if repair:
        done = run_repair(settings, drift)
        click.echo(f"queued {done['nodes']} node and {done['edges']} edge re-syncs for the relay"
                   + ("; rebuilt the vector index" if done["vector_index_rebuilt"] else ""))
    sys.exit(1)


@main.group(cls=_Group)
def graph() -> None:
    """The graph projection."""


@graph.command("rebuild")
@_generation_option
@click.pass_context
def graph_rebuild(ctx: click.Context, generation: int | None) -> None:
    """Drop the graph and re-project it from Postgres (nodes, edges, indexes), with progress."""
    from pipeline.ops.rebuild import rebuild_graph

    queued = rebuild_graph(_active(ctx, generation))
    click.echo(f"graph rebuilt from {queued} objects and links")


@main.command()
@_generation_option
@click.pass_context
def reembed(ctx: click.Context, generation: int | None) -> None:
    """Re-embed every object with the generation's model (same dimension), then re-sync the
    graph.

    A model of another dimension needs a new generation: `brainstream replay --embedder`.
    """
    from pipeline.ops.rebuild import reembed as run_reembed

    count = run_reembed(_active(ctx, generation))
    click.echo(f"re-embedded {count} rows")


# -- pipeline processes -------------------------------------------------------------------


@main.command()
def consumer() -> None:
    """Run the event consumer (faust worker) in the foreground."""
    from consumers.app import main as run_consumer

    run_consumer()


@main.command()
@click.option("--concurrency", type=int, default=None,
              help="Worker processes (default: BRAINSTREAM_WORKER_CONCURRENCY).")
@click.option("--queues", default="celery,relay", show_default=True,
              help="Queues to consume: `celery` (embedding, sweep) and `relay` (graph outbox).")
@click.option("--beat/--no-beat", default=True, show_default=True,
              help="Also run the periodic sweep scheduler (run it in one worker only).")
@click.option("--metrics-port", type=int, default=None,
              help="Port of /metrics (default: BRAINSTREAM_WORKER_METRICS_PORT; 0: none).")
@click.pass_context
def worker(ctx: click.Context, concurrency: int | None, queues: str, beat: bool,
           metrics_port: int | None) -> None:
    """Run a Celery worker (embedding, outbox relay, sweeps) in the foreground."""
    settings = _settings(ctx)
    settings.resolved_data_dir.mkdir(parents=True, exist_ok=True)
    # the pool processes size their embedder threads from this
    os.environ["BRAINSTREAM_WORKER_CONCURRENCY"] = str(concurrency or
                                                       settings.worker_concurrency)
    port = settings.worker_metrics_port if metrics_port is None else metrics_port
    if port:
        from pipeline.metrics.multiproc import prepare_multiprocess_dir

        # before anything imports prometheus_client (its value classes) or Celery forks
        prepare_multiprocess_dir(settings, f"worker-{port}")
        from pipeline.metrics.exporter import serve

        serve(settings, port, lag=False)
    from workers.app import app as celery_app

    argv = ["worker", "--loglevel=INFO", f"--queues={queues}",
            f"--concurrency={concurrency or settings.worker_concurrency}",
            f"--hostname=brainstream-{queues.replace(',', '-')}@%h"]
    if beat:
        argv += ["--beat", f"--schedule={settings.resolved_data_dir / 'celerybeat-schedule'}"]
    celery_app.worker_main(argv=argv)


@main.command()
@click.option("--host", default=None, help="Bind address (default: BRAINSTREAM_API_HOST).")
@click.option("--port", type=int, default=None, help="Port (default: BRAINSTREAM_API_PORT).")
@click.pass_context
def api(ctx: click.Context, host: str | None, port: int | None) -> None:
    """Run the read API (JSON over HTTP, OpenAPI at /docs) in the foreground."""
    import uvicorn

    settings = _settings(ctx)
    if not settings.api_keys:
        click.echo("warning: BRAINSTREAM_API_KEYS is empty: every request will get 401",
                   err=True)
    uvicorn.run("api.main:app", host=host or settings.api_host, port=port or settings.api_port,
                workers=settings.api_workers, log_level="info", proxy_headers=False)


# -- everything ---------------------------------------------------------------------------


@main.command()
@click.option("--stop-services/--keep-services", default=True,
              help="On Ctrl-C also stop the embedded services (default) or leave them running.")
@click.pass_context
def up(ctx: click.Context, stop_services: bool) -> None:
    """Start the services, migrate, and run every pipeline process in the foreground.

    Ctrl-C stops the processes and (by default) the embedded services.
    """
    from pipeline.ops.runner import run_up

    run_up(_settings(ctx), stop_services=stop_services, report=_echo)


# -- index generations (pipeline/cli/generations.py) -----------------------------------------

main.add_command(replay)
main.add_command(generations)
