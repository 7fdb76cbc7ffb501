"""`brainstream migrate` and `brainstream kinds`: the schema of the data (SQL migrations, graph
indexes, Kafka topics) and the kind catalog events are validated against."""

from __future__ import annotations

from pathlib import Path

import click
import psycopg

from pipeline.cli.common import CliGroup, active_settings, context_settings, echo
from pipeline.settings import Settings


@click.command()
@click.option("--postgres/--no-postgres", default=True, help="Apply SQL migrations.")
@click.option("--graph/--no-graph", default=True, help="Prepare graph constraints and indexes.")
@click.option("--topics/--no-topics", default=True, help="Create the Kafka topics.")
@click.pass_context
def migrate(ctx: click.Context, postgres: bool, graph: bool, topics: bool) -> None:
    """Bring Postgres, the graph and the Kafka topics to the current schema (idempotent)."""
    from pipeline.ops.generations import migrate_generations

    settings = context_settings(ctx)
    # every index generation (the base database first; it holds the generations' table)
    applied = migrate_generations(settings, postgres=postgres, graph=graph, report=echo)
    if postgres:
        click.echo(f"postgres: {len(applied)} migration(s) applied")
    if topics:
        from pipeline.kafka.topics import ensure_topics

        ensure_topics(settings, report=echo)


# -- kinds and events ---------------------------------------------------------------------


@click.group(cls=CliGroup)
def kinds() -> None:
    """The kind catalog (empty = open mode: every kind accepted)."""


@kinds.command("apply")
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.pass_context
def kinds_apply(ctx: click.Context, path: Path) -> None:
    """Apply a kinds.yaml additively: new kinds and fields are added, nothing is removed."""
    from pipeline.domain.kind_documents import decode_document, relations_from_dict
    from pipeline.domain.kinds import catalog_from_dict
    from pipeline.ingest.store.catalog import apply_catalog, apply_relations
    from pipeline.ops.generations import apply_to_live

    document = decode_document(path.read_text(encoding="utf-8"))  # decoded once for both
    incoming = catalog_from_dict(document)
    relations = relations_from_dict(document)
    merged: list[object] = []

    def apply(settings: Settings) -> None:
        nonlocal merged
        with psycopg.connect(settings.effective_postgres_dsn) as conn:
            merged = list(apply_catalog(conn, incoming))
            apply_relations(conn, relations)

    # the active generation and one a replay is building: both must validate alike
    apply_to_live(context_settings(ctx), apply)
    click.echo(f"applied {len(incoming)} kind(s) and {len(relations)} relation type(s) from"
               f" {path}; the catalog has {len(merged)} kind(s)")


@kinds.command("list")
@click.pass_context
def kinds_list(ctx: click.Context) -> None:
    """Print the catalog as YAML."""
    import yaml

    from pipeline.domain.kinds import catalog_to_dict
    from pipeline.ingest.store.catalog import read_catalog, read_relations

    with psycopg.connect(active_settings(ctx).effective_postgres_dsn) as conn:
        specs = read_catalog(conn)
        relations = read_relations(conn)
    doc = catalog_to_dict(specs)
    if relations:
        doc["relations"] = [r.to_dict() for r in relations]
    click.echo(yaml.safe_dump(doc, sort_keys=False), nl=False)
