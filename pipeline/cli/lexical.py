"""`brainstream lexical`: this host's replica of the Tantivy lexical indexes of one index
generation (the active one unless `--generation` names another): `rebuild`, `verify`, and
`snapshot` / `seed` to start a new host's replica from a copy of another's (`brainstream
status` lists every host's replica)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import click

from pipeline.cli.common import CliGroup, active_settings, generation_option


@click.group(cls=CliGroup)
def lexical() -> None:
    """The lexical index (Tantivy, one per namespace)."""


@lexical.command("rebuild")
@click.option("--namespace", type=click.UUID, default=None,
              help="Rebuild this namespace only (default: every namespace).")
@generation_option
@click.pass_context
def lexical_rebuild(ctx: click.Context, namespace: uuid.UUID | None,
                    generation: int | None) -> None:
    """Rewrite the lexical indexes from Postgres (searches see the old index until each
    namespace's commit)."""
    from pipeline.ops.lexical import rebuild_lexical

    settings = active_settings(ctx, generation)
    stats = rebuild_lexical(settings, namespace)
    click.echo(f"generation {settings.generation}: {stats.commits} namespace(s), "
               f"{stats.roots} objects, {stats.documents} documents indexed")


@lexical.command("verify")
@click.option("--sample", type=int, default=20, show_default=True,
              help="Objects per namespace whose documents are compared.")
@click.option("--repair", is_flag=True, help="Log what drifted again for the writers.")
@generation_option
@click.pass_context
def lexical_verify(ctx: click.Context, sample: int, repair: bool,
                   generation: int | None) -> None:
    """Compare the lexical indexes with Postgres (documents per namespace, sampled documents);
    exit 1 on drift."""
    from pipeline.ops.lexical import verify_lexical

    settings = active_settings(ctx, generation)
    check = verify_lexical(settings, sample=sample, repair=repair)
    behind = ("not built yet" if check.queued < 0
              else f"{check.queued} log row(s) not yet applied")
    click.echo(f"generation {check.generation}: {len(check.namespaces)} namespace(s), "
               f"this replica: {behind}")
    for ns in check.namespaces:
        state = "ok" if ns.clean else "DRIFT"
        click.echo(f"  {ns.namespace}: {ns.expected} searchable rows, {ns.indexed} documents, "
                   f"{ns.pending} pending, {len(ns.drifted)} of {ns.sampled} sampled differ "
                   f"[{state}]")
    if check.clean:
        click.echo("Postgres and the lexical index agree")
        sys.exit(0)
    if repair:
        click.echo("logged the drifted objects again for the lexical writers")
    sys.exit(1)


@lexical.command("snapshot")
@click.argument("target", type=click.Path(file_okay=False, path_type=Path))
@generation_option
@click.pass_context
def lexical_snapshot(ctx: click.Context, target: Path, generation: int | None) -> None:
    """Copy this host's replica into TARGET, a seed for a new host (`lexical seed` there, within
    an hour: the change log keeps what the seed lacks that long)."""
    from pipeline.lexical.seeds import snapshot
    from pipeline.ops.lexical import lexical_pool

    settings = active_settings(ctx, generation)
    with lexical_pool(settings) as pool:
        seed = snapshot(settings, pool, target)
    click.echo(f"generation {seed.generation}: {seed.namespaces} namespace(s) copied to {target}")


@lexical.command("seed")
@click.argument("source", type=click.Path(exists=True, file_okay=False, path_type=Path))
@generation_option
@click.pass_context
def lexical_seed(ctx: click.Context, source: Path, generation: int | None) -> None:
    """Make the copy in SOURCE (`lexical snapshot` on another host) this host's replica; its
    follower applies the change log from the copy's cursor."""
    from pipeline.lexical.seeds import adopt_seed
    from pipeline.ops.lexical import lexical_pool

    settings = active_settings(ctx, generation)
    with lexical_pool(settings) as pool:
        seed = adopt_seed(settings, pool, source)
    click.echo(f"generation {seed.generation}: {seed.namespaces} namespace(s) seeded; the "
               "follower applies the log from the copy's cursor")
