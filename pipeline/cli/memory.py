"""`brainstream memory`: operations on conversation memory (issue 12): `purge` (also part of
`brainstream purge`) and `verify` (also part of `brainstream verify`)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from pipeline.cli.common import CliGroup, active_settings, generation_option

if TYPE_CHECKING:
    from pipeline.ops.memory import MemoryCheck


@click.group(cls=CliGroup)
def memory() -> None:
    """Conversation memory: sessions, messages, summaries."""


@memory.command("purge")
@click.option("--older-than", "older_than", default=None,
              help="Retention, e.g. 30d, 12h (default: BRAINSTREAM_MEMORY_RETENTION_DAYS).")
@generation_option
@click.pass_context
def memory_purge(ctx: click.Context, older_than: str | None, generation: int | None) -> None:
    """Hard-delete sessions soft-deleted past the retention, with their messages and
    summaries, and messages hidden by a delete longer ago than that."""
    from pipeline.ops.memory import purge_memory
    from pipeline.ops.purge import parse_age

    age = parse_age(older_than) if older_than is not None else None
    result = purge_memory(active_settings(ctx, generation), age)
    click.echo(f"purged {result.sessions} sessions, {result.messages} messages, "
               f"{result.summaries} summaries")


@memory.command("verify")
@generation_option
@click.pass_context
def memory_verify(ctx: click.Context, generation: int | None) -> None:
    """Counts per namespace, messages whose extractors are pending or failed, and the tables'
    invariants; exit 1 when one is broken."""
    from pipeline.ops.memory import verify_memory

    check = verify_memory(active_settings(ctx, generation))
    show_memory_check(check)
    if not check.clean:
        sys.exit(1)


def show_memory_check(check: MemoryCheck) -> None:
    """Print a memory check (`memory verify`, `verify`)."""
    click.echo(f"memory: {len(check.namespaces)} namespaces")
    for n in check.namespaces:
        click.echo(f"  {n.namespace}: {n.sessions} sessions ({n.deleted_sessions} deleted), "
                   f"{n.messages} messages ({n.hidden_messages} hidden), {n.summaries} "
                   f"summaries; extractors pending on {n.pending_messages} messages, failed on "
                   f"{n.failed_messages}")
    for name, count in (("messages missing extractor rows", check.missing_extractor_rows),
                        ("sessions with a message past last_seq", check.seq_mismatches),
                        ("summary points naming no summary", check.dangling_summary_points),
                        ("extractor results missing (done rows)", check.missing_results)):
        click.echo(f"  {name:42} {count}")
