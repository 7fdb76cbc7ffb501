"""`brainstream entities`: the entity layer's operator commands."""

from __future__ import annotations

import uuid

import click

from pipeline.cli.common import active_settings, generation_option


@click.group()
def entities() -> None:
    """Entities extracted from the content (mentions, aliases, entity edges)."""


@entities.command("backfill")
@click.option("--namespace", type=click.UUID, default=None,
              help="Only this namespace's rows (default: every namespace).")
@generation_option
@click.pass_context
def backfill(ctx: click.Context, namespace: uuid.UUID | None, generation: int | None) -> None:
    """Extract the entities of every live row without a done extraction (data written before
    the entity layer, or whose extraction failed), in-process with progress."""
    from pipeline.ops.backfill import backfill as run_backfill

    report = run_backfill(active_settings(ctx, generation), namespace)
    s = report.stats
    click.echo(f"marked {report.marked} rows pending; extracted {s.extracted}, failed "
               f"{s.failed}, {s.mentions} mentions, {s.entities_created} new entities; "
               f"{report.names_embedded} names embedded")
