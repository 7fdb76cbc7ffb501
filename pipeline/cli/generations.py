"""`brainstream replay` and `brainstream generations`: rebuilding the index into a new
generation, and managing generations (registered on the main group by pipeline/cli/__init__.py;
errors become one line and exit status 2 there)."""

from __future__ import annotations

import json
from typing import Any

import click

from pipeline.cli.common import context_settings, echo


@click.command()
@click.option("--since", type=click.DateTime(formats=["%Y-%m-%d", "%Y-%m-%dT%H:%M:%S",
                                                      "%Y-%m-%dT%H:%M:%S%z"]),
              default=None, help="Start at the first record at or after this time (UTC unless "
              "it names an offset) instead of the earliest offset.")
@click.option("--embedder", type=click.Choice(["minilm", "static", "http"]), default=None,
              help="Embedder of the new generation (default: BRAINSTREAM_EMBEDDER).")
@click.option("--switch/--no-switch", default=True, show_default=True,
              help="Activate the new generation once it caught up (or leave that to "
              "`generations activate`).")
@click.option("--batch", type=int, default=None,
              help="Records per batch at most (default: the consumer's largest, 2,000).")
@click.pass_context
def replay(ctx: click.Context, since: Any, embedder: str | None, switch: bool,
           batch: int | None) -> None:
    """Rebuild the index from the input topic into a new generation, then switch to it.

    The API and the pipeline keep using the active generation meanwhile. The replay publishes
    a marker record to every partition, consumes from the earliest offset (or --since) with the
    new generation's consumer group, and switches once it is past its markers with nothing
    left to embed or project. Progress (records, rate, ETA) goes to stderr.
    """
    import logging
    from datetime import UTC

    from pipeline.ops.replay import Replay

    logging.getLogger("kafka").setLevel(logging.WARNING)  # keep the progress line readable

    if since is not None and since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    result = Replay(context_settings(ctx), since=since, embedder=embedder, switch=switch,
                    batch=batch, report=echo).run()
    rejected = sum(result.rejected.values())
    click.echo(f"generation {result.generation}: {result.records:,} records in "
               f"{result.seconds:,.1f}s: {result.applied:,} applied, {result.duplicates:,} "
               f"duplicates, {result.stale:,} stale, {result.deferred:,} deferred, "
               f"{result.markers:,} markers; {result.embedded:,} rows embedded, "
               f"{result.reused:,} given their stored vectors, "
               f"{result.extracted:,} rows' entities extracted, "
               f"{result.memory_extracted:,} message extractor results, "
               f"{result.summary_folds:,} summary folds"
               + (f"; {result.skipped:,} records older than --since skipped"
                  if result.skipped else ""))
    if rejected:
        codes = ", ".join(f"{code} {n}" for code, n in sorted(result.rejected.items()))
        click.echo(f"{rejected} event(s) rejected again, not re-published to the dead-letter "
                   f"topic ({codes})")
    if result.embed_failed:
        click.echo(f"{result.embed_failed} row(s) failed to embed (marked failed; see "
                   "`status --generation`)")
    if result.memory_failed:
        click.echo(f"{result.memory_failed} message extractor result(s) failed (marked failed;"
                   " see `memory verify --generation`)")
    click.echo(f"generation {result.generation} is active" if result.switched else
               f"generation {result.generation} is ready; switch with `brainstream "
               f"generations activate {result.generation}`")


@click.group()
def generations() -> None:
    """Index generations: list them, switch the active one, drop old ones."""


@generations.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@click.pass_context
def generations_list(ctx: click.Context, as_json: bool) -> None:
    """Every generation with its state, database, graph, consumer group and embedder."""
    from pipeline.generations.active import list_generations

    gens = list_generations(context_settings(ctx))
    if as_json:
        click.echo(json.dumps([g.__dict__ for g in gens], indent=2, default=str))
        return
    click.echo(f"{'id':>3}  {'state':9}{'database':26}{'graph':22}{'embedder':12}created")
    for g in gens:
        created = g.created_at.isoformat(timespec="seconds") if g.created_at else "-"
        notes = [g.note] if g.note else []
        if g.state in ("active", "building") and g.handoff_at is None and not g.implicit:
            notes.append("no hand-off yet: the live consumer has not moved to it")
        click.echo(f"{g.id:>3}  {g.state:9}{g.dbname:26}{g.graph_name:22}"
                   f"{g.embedder + '/' + str(g.embedding_dim):12}{created}"
                   + (f"  ({'; '.join(notes)})" if notes else ""))


@generations.command("activate")
@click.argument("generation", type=int)
@click.pass_context
def generations_activate(ctx: click.Context, generation: int) -> None:
    """Make a built (or retired) generation the active one: readers switch within seconds and
    the live consumer moves to its consumer group."""
    from pipeline.ops.generations import activate

    gen = activate(context_settings(ctx), generation)
    click.echo(f"generation {gen.id} is active ({gen.dbname}, graph {gen.graph_name})")


@generations.command("drop")
@click.argument("generation", type=int)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_context
def generations_drop(ctx: click.Context, generation: int, yes: bool) -> None:
    """Drop a generation that is not active: its database and its graph (generation 1, the
    base database holding the control table, is emptied instead of dropped)."""
    from pipeline.ops.generations import drop_generation

    if not yes:
        click.confirm(f"drop index generation {generation} (its data cannot be recovered)?",
                      abort=True)
    drop_generation(context_settings(ctx), generation, report=echo)
    click.echo(f"generation {generation} dropped")
