"""Conversation memory in the entity layer: a message's entities (what the memory extractor
stores as `metadata.system.entities`, pipeline/memory/extraction.py) resolved to the
namespace's entities and their spans written to `message_mentions` (migration 0055).

A name is resolved exactly as the document extraction stage resolves it (`writes.by_norm`:
normalised name and label class, then alias, merges followed), and an entity no row knows yet
is created with the id the stage would give it (`ids.entity_id`), so "Caroline" in a chat and
in a document is one entity whichever came first, and a replay rebuilds the same ids. A new
entity enters the proposal pass's queue by the insert trigger of `entities`, as a document's
does. Messages do not count in `part_count` nor in CO_OCCURS (migration 0055 says why).

Runs in the caller's transaction (the extractor's write-back): writing the same message twice
gives the same rows.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg

from pipeline.entities.ids import entity_id
from pipeline.entities.likeness import label_class
from pipeline.entities.names import normalise
from pipeline.entities.store import writes as sql

Conn = psycopg.Connection[Any]
Key = tuple[uuid.UUID, str, str]  # (namespace, normalised name, label class)


@dataclass(frozen=True)
class MessageEntities:
    """One message's extracted entities: `[{name, label, matches: [{start, end, text}]}]`."""

    namespace_id: uuid.UUID
    message_uuid: uuid.UUID
    entities: Sequence[Mapping[str, Any]]


def _keyed(message: MessageEntities) -> list[tuple[Key, Mapping[str, Any]]]:
    out = []
    for entry in message.entities:
        name, label = str(entry.get("name") or ""), str(entry.get("label") or "")
        norm = normalise(name)
        if norm and label and "\x00" not in name + label:
            out.append(((message.namespace_id, norm, label_class(label)), entry))
    return out


def link_messages(conn: Conn, messages: Sequence[MessageEntities]) -> int:
    """The messages' mentions become exactly what their entities say (entities created when
    no entity of the namespace has the name); the number of mention rows written."""
    if not messages:
        return 0
    keyed = [(m, _keyed(m)) for m in messages]
    firsts: dict[Key, Mapping[str, Any]] = {}
    for _, entries in keyed:
        for key, entry in entries:
            firsts.setdefault(key, entry)
    known = sql.by_norm(conn, firsts)
    new = {key: entry for key, entry in firsts.items() if key not in known}
    sql.lock_entities(conn, [*known.values(), *(entity_id(*key) for key in new)])
    # Typed first, as the stage does: an untyped name then joins the one typed entity.
    for typed in (True, False):
        batch = {key: e for key, e in new.items() if bool(key[2]) == typed and key not in known}
        if not typed and batch:
            known.update(sql.by_norm(conn, batch))
            batch = {key: e for key, e in batch.items() if key not in known}
        if not batch:
            continue
        sql.create_entities(conn, [sql.NewEntity(entity_id(*key), key[0],
                                                 str(e["name"]).strip(), key[1], str(e["label"]))
                                   for key, e in batch.items()])
        known.update(sql.by_norm(conn, batch))

    rows: dict[tuple[uuid.UUID, uuid.UUID, int, int], tuple[Any, ...]] = {}
    aliases: set[tuple[uuid.UUID, str, str, uuid.UUID, str]] = set()
    for message, entries in keyed:
        for key, entry in entries:
            eid = known.get(key)
            if eid is None:
                continue
            ns = message.namespace_id
            for surface in [str(entry["name"]), *(str(x.get("text") or "")
                                                  for x in entry.get("matches") or ())]:
                norm = normalise(surface)
                if norm and "\x00" not in surface:
                    aliases.add((ns, norm, surface.strip(), eid, "surface"))
            for match in entry.get("matches") or ():
                start, end = int(match["start"]), int(match["end"])
                if 0 <= start < end:
                    rows.setdefault((ns, message.message_uuid, start, end), (
                        ns, message.message_uuid, start, end, eid, str(entry["label"]),
                        str(match.get("text") or "")))
    conn.execute(
        "DELETE FROM message_mentions m USING unnest(%b::uuid[], %b::uuid[]) AS q(ns, id)"
        " WHERE m.namespace_id = q.ns AND m.message_uuid = q.id",
        ([m.namespace_id for m in messages], [m.message_uuid for m in messages]))
    if rows:
        with conn.cursor() as cur, cur.copy(
                "COPY message_mentions (namespace_id, message_uuid, start_pos, end_pos,"
                " entity_id, label, text) FROM STDIN") as copy:
            for span in sorted(rows, key=lambda k: (str(k[0]), str(k[1]), k[2], k[3])):
                copy.write_row(rows[span])
    sql.add_aliases(conn, aliases)
    return len(rows)
