"""`brainstream entities`: the entity layer's operator commands."""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import Any

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


# Evidence shown per pair (the API's queue shows the same: api/routes/entity_pages.py).
REVIEW_ALIASES = 10
REVIEW_CONTEXTS = 3
REVIEW_SHARED = 5
REVIEW_PAGE = 50
_CHOICES = {"m": "verify", "r": "refuse", "d": "defer"}


@entities.command("review")
@click.option("--namespace", type=click.UUID, default=None,
              help="Only this namespace's pairs (default: every namespace that has some).")
@click.option("--status", type=click.Choice(["held", "deferred", "verified", "refused"]),
              default="held", show_default=True, help="Which pairs.")
@click.option("--json", "as_json", is_flag=True,
              help="Print the pairs with their evidence as JSON lines; decide nothing.")
@click.option("--by", "decided_by", default=None,
              help="The curator's name recorded with each decision (default: $USER).")
@generation_option
@click.pass_context
def review(ctx: click.Context, namespace: uuid.UUID | None, status: str, as_json: bool,
           decided_by: str | None, generation: int | None) -> None:
    """Review POSSIBLY_SAME pairs one at a time with their evidence: [m]erge (verify),
    [r]efuse, [d]efer, [s]kip, [q]uit. Each decision is published as an event and applied at
    once, as the API's curators' decisions are (a replay repeats it)."""
    import getpass

    import psycopg

    from pipeline.entities.store import pages
    from pipeline.postgres.plans import run

    settings = active_settings(ctx, generation)
    publisher = None if as_json else _decision_publisher(settings)
    by = decided_by or getpass.getuser()
    try:
        with psycopg.connect(settings.effective_postgres_dsn, autocommit=True) as conn:
            spaces = [namespace] if namespace else run(conn, pages.namespaces_with(status))
            for ns in spaces:
                after: tuple[Any, ...] | None = None
                while True:
                    found = run(conn, pages.pairs(ns, status, REVIEW_PAGE, after,
                                                  aliases=REVIEW_ALIASES,
                                                  contexts=REVIEW_CONTEXTS,
                                                  shared=REVIEW_SHARED))
                    for pair in found:
                        if as_json:
                            click.echo(json.dumps({"namespace": str(ns), **_pair_json(pair)},
                                                  default=str))
                        elif not _review_one(conn, publisher, ns, pair, by):
                            return
                    if len(found) < REVIEW_PAGE:
                        break
                    after = found[-1].key
    finally:
        if publisher is not None:
            publisher.close()


def _decision_publisher(settings: Any) -> Any:
    from pipeline.kafka.io import make_producer
    from pipeline.kafka.publisher import EventPublisher, LazyPublisher
    from pipeline.kafka.signing import signer_for

    return LazyPublisher(lambda: EventPublisher(make_producer(settings), settings.topic_events,
                                                signer_for(settings),
                                                max_event_bytes=settings.max_event_bytes),
                         timeout=30.0)


def _pair_json(pair: Any) -> dict[str, Any]:
    out: dict[str, Any] = dataclasses.asdict(pair)
    out["from"], out["to"] = out.pop("from_end"), out.pop("to_end")
    out.pop("key")
    out["shared_neighbours"] = [{"entity_id": i, "name": n, "label": lb, "weight": w}
                                for i, n, lb, w in out.pop("shared")]
    return out


def _review_one(conn: Any, publisher: Any, ns: uuid.UUID, pair: Any, by: str) -> bool:
    """Show one pair and act on the answer; False to stop."""
    from pipeline.domain.errors import BrainstreamError
    from pipeline.entities.curation import decide

    confidence = "-" if pair.confidence is None else f"{pair.confidence:.2f}"
    click.echo(f"\n{ns}  {pair.status}  confidence {confidence} ({pair.method})")
    for side, end in (("from", pair.from_end), ("to", pair.to_end)):
        aliases = f"; aliases: {', '.join(end.aliases)}" if end.aliases else ""
        click.echo(f"  {side}: {end.name} [{end.label}] {end.id}, {end.part_count} parts"
                   f"{aliases}")
        for m in end.contexts:
            click.echo(f"      \"{m.snippet.text}\"  ({m.object_id})")
    if pair.shared:
        click.echo("  both joined to: " + ", ".join(n for _, n, _, _ in pair.shared))
    answer = click.prompt("  [m]erge, [r]efuse, [d]efer, [s]kip, [q]uit",
                          type=click.Choice(["m", "r", "d", "s", "q"]), show_choices=False)
    if answer == "q":
        return False
    if answer == "s":
        return True
    try:
        done, status = decide(conn, publisher, ns, _CHOICES[answer], pair.from_end.id,
                              pair.to_end.id, decided_by=by, source=f"cli:{by}")
    except BrainstreamError as exc:
        click.echo(f"  not decided [{exc.code}]: {exc.message}")
        return True
    merged = f", merged into {done.merge.into_id}" if done.merge else ""
    click.echo(f"  {status}{merged}")
    return True
