"""The pipeline processes in the foreground: `consumer`, `worker`, `api`, and `up` (all of them
with the embedded services). The only core module that imports the shells (consumers/,
workers/, api/): it is what starts them."""

from __future__ import annotations

import os

import click

from pipeline.cli.common import context_settings
from pipeline.supervisor.lifeline import API_PARENT_ENV, follow_supervisor


@click.command()
def consumer() -> None:
    """Run the event consumer (faust worker) in the foreground."""
    follow_supervisor()
    from consumers.app import main as run_consumer

    run_consumer()


@click.command()
@click.option("--concurrency", type=int, default=None,
              help="Worker processes (default: BRAINSTREAM_WORKER_CONCURRENCY).")
@click.option("--queues", default="celery,extract,relay", show_default=True,
              help="Queues to consume: `celery` (embedding, memory, sweep), `extract` (entity "
                   "extraction, proposal pass) and `relay` (graph outbox).")
@click.option("--beat/--no-beat", default=True, show_default=True,
              help="Also run the periodic sweep scheduler (run it in one worker only).")
@click.option("--metrics-port", type=int, default=None,
              help="Port of /metrics (default: BRAINSTREAM_WORKER_METRICS_PORT; 0: none).")
@click.pass_context
def worker(ctx: click.Context, concurrency: int | None, queues: str, beat: bool,
           metrics_port: int | None) -> None:
    """Run a Celery worker (embedding, extraction, outbox relay, sweeps) in the foreground."""
    follow_supervisor()
    settings = context_settings(ctx)
    settings.resolved_data_dir.mkdir(parents=True, exist_ok=True)
    # the pool processes size their embedder threads from this
    os.environ["BRAINSTREAM_WORKER_CONCURRENCY"] = str(concurrency or
                                                       settings.worker_concurrency)
    port = settings.worker_metrics_port if metrics_port is None else metrics_port
    if port:
        from pipeline.metrics.multiproc import prepare_multiprocess_dir

        # before anything imports prometheus_client (its value classes) or Celery forks
        prepare_multiprocess_dir(settings, f"worker-{port}")
        from pipeline.ops.exporter import serve

        serve(settings, port, lag=False)
    from workers.app import app as celery_app, quiet_root_warning
    from workers.runtime import name_connections

    quiet_root_warning(celery_app)
    name_connections(queues)
    if set(queues.split(",")) - {"relay"}:  # embedding (celery) or entity names (extract)
        from celery.signals import worker_process_init

        from workers.runtime import embed_with_one_thread, load_embedder_at_start, warm_at_start

        if "celery" not in queues.split(","):
            embed_with_one_thread()  # entity names only, beside the embedding workers
        warm_at_start(passages="celery" in queues.split(","),
                      names="extract" in queues.split(","))
        worker_process_init.connect(load_embedder_at_start, weak=False)
    argv = ["worker", "--loglevel=INFO", f"--queues={queues}",
            f"--concurrency={concurrency or settings.worker_concurrency}",
            f"--hostname=brainstream-{queues.replace(',', '-')}@%h"]
    if beat:
        argv += ["--beat", f"--schedule={settings.resolved_data_dir / 'celerybeat-schedule'}"]
    celery_app.worker_main(argv=argv)


@click.command()
@click.option("--host", default=None, help="Bind address (default: BRAINSTREAM_API_HOST).")
@click.option("--port", type=int, default=None, help="Port (default: BRAINSTREAM_API_PORT).")
@click.pass_context
def api(ctx: click.Context, host: str | None, port: int | None) -> None:
    """Run the read API (JSON over HTTP, OpenAPI at /docs) in the foreground."""
    follow_supervisor()
    os.environ[API_PARENT_ENV] = str(os.getpid())  # what its spawned workers die with
    import uvicorn

    settings = context_settings(ctx)
    if not settings.api_keys:
        click.echo("warning: BRAINSTREAM_API_KEYS is empty: every request will get 401",
                   err=True)
    from api.transport import HTTP_PROTOCOL

    uvicorn.run("api.main:app", host=host or settings.api_host, port=port or settings.api_port,
                workers=settings.api_workers, log_level="info", proxy_headers=False,
                http=HTTP_PROTOCOL)


# -- everything ---------------------------------------------------------------------------


@click.command()
@click.option("--stop-services/--keep-services", default=True,
              help="On Ctrl-C also stop the embedded services (default) or leave them running.")
@click.pass_context
def up(ctx: click.Context, stop_services: bool) -> None:
    """Start the services, migrate, and run every pipeline process in the foreground.

    Ctrl-C stops the processes and (by default) the embedded services.
    """
    from pipeline.supervisor.runner import run_up

    run_up(context_settings(ctx), stop_services=stop_services)


@click.command()
@click.argument("process", required=False)
@click.option("-f", "--follow", is_flag=True, help="Keep printing lines as they are written.")
@click.option("-n", "--lines", "count", type=click.IntRange(min=0), default=20, show_default=True,
              help="How many of the last lines to print first.")
@click.pass_context
def logs(ctx: click.Context, process: str | None, follow: bool, count: int) -> None:
    """Print the log of a process of `brainstream up` (consumer, worker, extract, relay, api)
    or of an embedded service (postgres, s3store, broker, falkordb, redis); with no name, the
    pipeline processes' logs interleaved in time order, each line prefixed with its name.

    Each line starts with the time (UTC) `up` read it from the process.
    """
    import time

    from pipeline.supervisor.logfiles import Follower, interleave, log_dir, resolve_names
    from pipeline.supervisor.runner import app_processes

    settings = context_settings(ctx)
    names = resolve_names(settings, process, [spec.name for spec in app_processes(settings)])
    follower = Follower({name: log_dir(settings) / f"{name}.log" for name in names})
    try:
        history = follower.history(count)
        for line in history[process] if process else interleave(history, count):
            click.echo(line)
        while follow:
            for name, line in follower.poll():
                click.echo(line if process else f"[{name}] {line}")
            time.sleep(0.2)
    except KeyboardInterrupt:
        pass
    finally:
        follower.close()
