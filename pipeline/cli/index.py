"""Commands on one index generation (the active one unless `--generation` names another):
`status`, `verify`, `purge`, `graph rebuild` and `reembed`."""

from __future__ import annotations

import json
import sys

import click

from pipeline.cli.common import CliGroup, active_settings, context_settings, generation_option


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")
@generation_option
@click.pass_context
def status(ctx: click.Context, as_json: bool, generation: int | None) -> None:
    """Services, consumer lag per partition, the outbox, embedding, extraction, lexical index,
    entity decision and proposal pass backlogs, the Celery queues, waiting events and dead
    letters of the active index generation; exit status 1 when something is unhealthy."""
    from pipeline.ops.status import collect_active, render

    report = collect_active(context_settings(ctx), generation)
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
    else:
        index = report.index
        click.echo(f"index generation {index['generation']} (graph {index['graph']}, consumer "
                   f"group {index['consumer_group']})" if index["generation"] is not None else
                   "index generation unknown (the base database cannot be reached)")
        click.echo(render(report))
    if not report.healthy:
        sys.exit(1)


@click.command()
@click.option("--older-than", "older_than", required=True,
              help="Retention, e.g. 30d, 12h: what was soft-deleted before that goes.")
@generation_option
@click.pass_context
def purge(ctx: click.Context, older_than: str, generation: int | None) -> None:
    """Hard-delete soft-deleted objects (with parts and links) and memory sessions (with
    their messages and summaries) past a retention."""
    from pipeline.ops.memory import purge_memory
    from pipeline.ops.purge import parse_age, purge as run_purge

    age = parse_age(older_than)

    def show(result: object) -> None:
        click.echo(f"  ... {getattr(result, 'objects', 0)} objects so far", err=True)

    settings = active_settings(ctx, generation)
    result = run_purge(settings, age, progress=show)
    click.echo(f"purged {result.objects} objects, {result.parts} parts, {result.links} links, "
               f"{result.outbox_rows} finished outbox rows (soft-deleted before {older_than} ago)")
    memory = purge_memory(settings, age)
    click.echo(f"purged {memory.sessions} memory sessions, {memory.messages} messages, "
               f"{memory.summaries} summaries")


@click.command()
@click.option("--repair", is_flag=True, help="Queue every drifted aggregate for the relay, "
              "rebuild a vector index that no longer answers and delete a leftover entity "
              "projection.")
@click.option("--sample", type=int, default=200, show_default=True,
              help="Vectors to look up in the vector index (0 skips the check).")
@generation_option
@click.pass_context
def verify(ctx: click.Context, repair: bool, sample: int, generation: int | None) -> None:
    """Report every disagreement between Postgres and the graph, and every broken history
    invariant; exit 1 on either."""
    from pipeline.cli.memory import show_memory_check
    from pipeline.ops.history_check import verify_history
    from pipeline.ops.memory import verify_memory
    from pipeline.ops.verify import repair as run_repair, verify as run_verify

    settings = active_settings(ctx, generation)
    drift = run_verify(settings, vector_sample=sample)
    click.echo(f"checked {drift.nodes.checked} objects and {drift.edges.checked} links")
    for name, count in drift.summary():
        click.echo(f"  {name:42} {count}")
    memory = verify_memory(settings)
    show_memory_check(memory)
    history = verify_history(settings)
    click.echo("history: " + ("its invariants hold" if history.clean else "VIOLATED"))
    for name, (count, examples) in history.violations.items():
        click.echo(f"  {name:42} {count}" + (f"  e.g. {', '.join(examples)}" if count else ""))
    if drift.clean:
        click.echo("Postgres and the graph agree")
        sys.exit(0 if memory.clean and history.clean else 1)
    if repair:
        done = run_repair(settings, drift)
        click.echo(f"queued {done['nodes']} node and {done['edges']} edge re-syncs for the relay"
                   + ("; rebuilt the vector index" if done["vector_index_rebuilt"] else "")
                   + (f"; deleted {done['retired_entities']} leftover entity nodes"
                      if done["retired_entities"] else ""))
    sys.exit(1)


@click.group(cls=CliGroup)
def graph() -> None:
    """The graph projection."""


@graph.command("rebuild")
@generation_option
@click.pass_context
def graph_rebuild(ctx: click.Context, generation: int | None) -> None:
    """Drop the graph and re-project it from Postgres (nodes, edges, indexes), with progress."""
    from pipeline.ops.rebuild import rebuild_graph

    queued = rebuild_graph(active_settings(ctx, generation))
    click.echo(f"graph rebuilt from {queued} objects and links")


@click.command()
@generation_option
@click.option("--all", "every", is_flag=True,
              help="Every row, reusing no stored vector (a model server that changed its "
              "weights under the same name and address).")
@click.pass_context
def reembed(ctx: click.Context, generation: int | None, every: bool) -> None:
    """Re-embed every object whose vector another model computed (a new model or version of
    the same dimension), then re-sync the graph; rows of the current model keep theirs.

    A model of another dimension needs a new generation: `brainstream replay --embedder`.
    """
    from pipeline.ops.rebuild import reembed as run_reembed

    count = run_reembed(active_settings(ctx, generation), every=every)
    click.echo(f"re-embedded {count} rows")


# -- pipeline processes -------------------------------------------------------------------
