"""`brainstream services`: the embedded stack (PostgreSQL, the broker and its S3 store, FalkorDB,
Redis), started, stopped and probed by the project itself."""

from __future__ import annotations

import json
import sys

import click

from pipeline.cli.common import CliGroup, context_settings, echo


@click.group(cls=CliGroup)
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

    settings = context_settings(ctx)
    click.echo(f"data directory: {settings.resolved_data_dir}")
    Stack(settings).start(report=echo)


@services.command("stop")
@click.pass_context
def services_stop(ctx: click.Context) -> None:
    """Stop every embedded service; nothing is left running."""
    from pipeline.services.stack import Stack

    Stack(context_settings(ctx)).stop(report=echo)


@services.command("status")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@click.pass_context
def services_status(ctx: click.Context, as_json: bool) -> None:
    """Show each service's state and address; exit status 1 unless all are healthy."""
    from pipeline.services.stack import Stack

    rows = Stack(context_settings(ctx)).status()
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
