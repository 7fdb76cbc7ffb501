"""`brainstream publish`, `brainstream delete` and `brainstream dlq`: events into the input topic
(a file of them; a delete by source or filter), and the dead letters that came back out of it
(listed by code, shown, re-driven)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import click

from pipeline.cli.common import CliGroup, active_settings, context_settings, generation_option


@click.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--namespace", type=click.UUID, default=None,
              help="Namespace for bare objects (lines without a CloudEvents envelope).")
@click.option("--source", default="brainstream-cli", show_default=True,
              help="CloudEvents source for wrapped bare objects.")
@click.option("--key-id", default=None,
              help="Sign every record with this publisher key (default: "
                   "BRAINSTREAM_PUBLISH_KEY_ID). Its secret comes from "
                   "BRAINSTREAM_PUBLISH_KEY_SECRET, else BRAINSTREAM_PUBLISHER_KEYS; never from "
                   "the command line, where other users can read it.")
@click.pass_context
def publish(ctx: click.Context, path: Path, namespace: uuid.UUID | None, source: str,
            key_id: str | None) -> None:
    """Publish a JSONL file of events to the input topic, keyed per aggregate.

    A line that is a bare object becomes a put. Lines that are not valid events are sent as they
    are; the consumer dead-letters them with the reason. With a publisher key, every record is
    signed (namespaces bound to keys accept only signed records).
    """
    from pipeline.kafka.io import make_producer
    from pipeline.kafka.publisher import EventPublisher, read_lines
    from pipeline.kafka.signing import signer_for

    settings = context_settings(ctx)
    signer = signer_for(settings, key_id)
    producer = make_producer(settings)
    try:
        report = EventPublisher(producer, settings.topic_events, signer,
                                max_event_bytes=settings.max_event_bytes).publish_lines(
            read_lines(path), namespace=namespace, source=source)
    finally:
        producer.close()
    signed = f", signed with key {signer.key_id}" if signer is not None else ""
    click.echo(f"published {report.sent} record(s) to {settings.topic_events}{signed} "
               f"({report.wrapped} wrapped, {report.unparsed} not valid events: they will be "
               "dead-lettered)")


@click.group(cls=CliGroup)
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

    letters = dead.read_all(context_settings(ctx))  # the topic: the same for every generation
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

    click.echo(dead.describe(dead.find(dead.read_all(context_settings(ctx)), ref)))


@dlq.command("retry")
@click.argument("refs", nargs=-1)
@click.option("--code", default=None, help="Re-drive every letter with this code.")
@click.option("--all", "everything", is_flag=True, help="Re-drive every letter.")
@click.pass_context
def dlq_retry(ctx: click.Context, refs: tuple[str, ...], code: str | None,
              everything: bool) -> None:
    """Send dead letters back to the input topic (embedding failures: back to pending; graph
    sync failures: the outbox row back to the relay).

    Each letter is re-driven once; an event that then applies is applied once."""
    from pipeline.domain.errors import InvalidInput
    from pipeline.ops import dlq as dead

    if not (refs or code or everything):
        raise InvalidInput("name letters (partition:offset), --code CODE or --all",
                           field="refs")
    settings = active_settings(ctx)
    letters = dead.read_all(settings)
    chosen = [d for d in letters if everything or d.ref in refs or (code and d.code == code)]
    missing = set(refs) - {d.ref for d in chosen}
    if missing:
        raise InvalidInput(f"no dead letter {sorted(missing)[0]}", field="refs")
    counts = dead.retry(settings, chosen)
    click.echo(f"re-drove {counts['republished']} to the input topic, {counts['reembed']} back "
               f"to embedding, {counts['reextract']} back to entity extraction, "
               f"{counts['requeued']} back to the graph outbox; "
               f"{counts['skipped']} were re-driven before")
    if counts["cut"]:
        click.echo(f"{counts['cut']} not re-driven: cut to fit the dead-letter topic (`dlq show` "
                   "names the source offset that holds the whole record)", err=True)


@click.command("delete")
@click.option("--namespace", type=click.UUID, required=True, help="The namespace to delete in.")
@click.option("--source", "of_source", default=None,
              help="Delete the objects this publisher (CloudEvents source) put last.")
@click.option("--filters", "filters_json", default=None,
              help='The search\'s filters as JSON, e.g. \'{"kind": "deal", "stage": "lost"}\'; '
                   "with --source, both must match.")
@click.option("--where", "where_json", default=None,
              help='The search\'s where conditions as JSON, e.g. '
                   '\'{"jsonpath": "$.amount", "lt": 1000}\'.')
@click.option("--all", "everything", is_flag=True,
              help="Every object of the namespace (only alone).")
@click.option("--dry-run", is_flag=True, help="Only count; publish nothing.")
@click.option("--as-source", default="brainstream-cli", show_default=True,
              help="The CloudEvents source of the delete event itself.")
@click.option("--key-id", default=None, help="Sign the event with this publisher key (see "
              "`publish --help`).")
@generation_option
@click.pass_context
def delete(ctx: click.Context, namespace: uuid.UUID, of_source: str | None,
           filters_json: str | None, where_json: str | None, everything: bool,
           dry_run: bool, as_source: str,
           key_id: str | None, generation: int | None) -> None:
    """Soft-delete the objects of a source or matching filters, as one event on the input
    topic (a replay repeats it): it deletes what matches when the consumer applies it, at most
    10,000 objects (run it again for more). Counts on the active generation first."""
    from pipeline.kafka.io import make_producer
    from pipeline.kafka.publisher import EventPublisher
    from pipeline.kafka.signing import signer_for
    from pipeline.ops.deletes import count, envelope
    from schemas.deletes import parse_delete
    from schemas.limits import DELETE_MAX

    parsed: dict[str, Any] = {}
    for hint, text in (("filters", filters_json), ("where", where_json)):
        try:
            parsed[hint] = json.loads(text) if text is not None else None
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint=f"--{hint}") from None
    payload = parse_delete({"source": of_source, **parsed, "all": everything})
    settings = active_settings(ctx, generation)
    found = count(settings, namespace, payload)
    click.echo(f"{found.matched} object(s) match now; one delete removes at most {DELETE_MAX}")
    for object_id in found.sample_ids:
        click.echo(f"  {object_id}")
    if dry_run:
        return
    signer = signer_for(settings, key_id)
    producer = make_producer(settings)
    try:
        publisher = EventPublisher(producer, settings.topic_events, signer,
                                   max_event_bytes=settings.max_event_bytes)
        event = envelope(namespace, payload, as_source)
        publisher.send_event(event)
        publisher.flush()
    finally:
        producer.close()
    click.echo(f"published delete {event['id']} to {settings.topic_events}: the consumer "
               "applies it in its place in the log")
