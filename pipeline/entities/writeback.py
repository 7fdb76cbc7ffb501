"""The extraction stage's write-back: one transaction per batch.

For the extracted rows whose text did not change meanwhile (compare-and-set on the text hash;
the others stay pending), the rows' mentions are replaced, each mention's entity resolved by
exact name then alias (created when neither knows it), surface and extractor aliases added and
RELATES edges written for the triples. Entities are keyed by (namespace, normalised name,
label class): a typed mention (PERSON "Jordan") names the entity of its class, an untyped one
(the heuristic's shape labels) the untyped entity of its name, else the one typed entity of that
name when there is exactly one (`pipeline/entities/store/writes.py: by_norm`). Then, for
every entity and pair whose rows changed (extracted rows, soft-deleted or revived rows,
hard-deleted rows), `part_count` and the CO_OCCURS weights are recomputed from the live rows.
The entity layer lives in Postgres alone (no graph projection, so no outbox row).

Writers of the same entities serialize on advisory locks taken in one global order before any
write, so two workers cannot deadlock; a rollback (deadlock with another writer such as the
resolver, serialization) retries the transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import psycopg

from pipeline.domain.mentions import Extraction, Mention
from pipeline.entities.ids import Pair, counted_entities, entity_id, pairs
from pipeline.entities.likeness import label_class
from pipeline.entities.names import normalise
from pipeline.entities.settings import EntitySettings
from pipeline.entities.store import extraction as rows_sql, facts as facts_sql, writes as sql
from pipeline.entities.store.extraction import RowText

Conn = psycopg.Connection[Any]
Key = tuple[uuid.UUID, str, str]  # (namespace, normalised name, label class)

# A batch normalises each mention's name, surface text and aliases several times (its keys
# before and inside the transaction, its aliases, its triples), and names recur across rows:
# the function is pure, its answers are kept (bounded).
_normalise = lru_cache(maxsize=16_384)(normalise)


# The entities of one row that count for co-occurrence (the most mentioned first): a row naming
# n entities adds n*(n-1)/2 pairs, so a long list must not flood the edge table.
COOCCUR_CAP = 20
# Row ids a CO_OCCURS edge keeps as its evidence (what a path cites).
EVIDENCE_N = 5
# The extractor a row's mentions are recorded as coming from when its put supplied them.
SUPPLIED = "supplied"

@dataclass
class WriteResult:
    """What one write-back did."""

    extracted: int = 0
    skipped: list[uuid.UUID] = field(default_factory=list)  # text changed meanwhile
    recounted: int = 0
    mentions: int = 0
    created: list[uuid.UUID] = field(default_factory=list)


def key_of(namespace: uuid.UUID, m: Mention) -> Key:
    """The entity key a mention names."""
    return namespace, _normalise(m.name), label_class(m.label)


def end_key(namespace: uuid.UUID, name: str, label: str | None) -> Key:
    """The entity key a triple's end names: untyped for an extractor's triple (no label), the
    key of its entity for a publisher's relation."""
    return namespace, _normalise(name), label_class(label) if label else ""


def mention_keys(rows: Sequence[tuple[RowText, Extraction]]) -> dict[Key, Mention]:
    """Each (namespace, norm, class) the rows' mentions name, with the first mention naming it
    (its name and label describe an entity created for it), then the ends of the publishers'
    relations (an entity of the put, maybe mentioned only in another of its rows)."""
    out: dict[Key, Mention] = {}
    for row, found in rows:
        for m in found.mentions:
            out.setdefault(key_of(row.namespace_id, m), m)
    for row, found in rows:
        for t in found.triples:
            for name, label in ((t.subject, t.subject_label), (t.object, t.object_label)):
                if label is not None and _normalise(name):
                    out.setdefault(end_key(row.namespace_id, name, label),
                                   Mention(name, label, "", 0, 0, ""))
    return out


def rows_naming(rows: Sequence[tuple[RowText, Extraction]]) -> dict[Key, int]:
    """How many of the rows name each key: the `part_count` an entity created for the key
    starts with (the recount after the mentions are written corrects what a span taken by
    another mention, a deleted row or an untyped name typed elsewhere changes)."""
    named: dict[Key, set[uuid.UUID]] = {}
    for row, found in rows:
        for m in found.mentions:
            named.setdefault(key_of(row.namespace_id, m), set()).add(row.id)
    return {key: len(ids) for key, ids in named.items()}


def triple_keys(rows: Sequence[tuple[RowText, Extraction]]) -> set[Key]:
    """Each key the rows' triples name as subject or object: a triple names no class, so its
    names are looked up untyped (or in its row, `_relations`)."""
    return {end_key(row.namespace_id, name, label) for row, found in rows
            for t in found.triples
            for name, label in ((t.subject, t.subject_label), (t.object, t.object_label))}


def write_batch(conn: Conn, settings: EntitySettings, extractor: str,
                extracted: Sequence[tuple[RowText, Extraction]], recount: Sequence[uuid.UUID],
                seen: Mapping[Key, uuid.UUID]) -> WriteResult:
    """Write one batch back in the caller's transaction (see the module docstring). `seen`:
    the batch's names resolved before the transaction (`entities.by_norm`); only the names it
    lacks are looked up here, and its entities are followed to whatever they were merged into
    meanwhile."""
    result = WriteResult()
    state = rows_sql.lock_rows(conn, [r.id for r, _ in extracted] + list(recount))
    keep = [(row, found) for row, found in extracted
            if row.id in state and state[row.id][0] == row.text_hash
            and state[row.id][1] == 'pending']
    kept = {row.id for row, _ in keep}
    result.skipped = [row.id for row, _ in extracted if row.id not in kept]
    rows_sql.release(conn, result.skipped)
    # A recount row whose text changed meanwhile is pending: its extraction recounts it (the
    # lease this claim took is dropped, or the extraction would wait for it to expire).
    claimed_recount = recount
    recount = [rid for rid in recount if rid in state and state[rid][3]
               and state[rid][1] != 'pending']
    rows_sql.release(conn, sorted(set(claimed_recount) - set(recount)))
    gone = rows_sql.take_gone(conn, settings.extract_batch_size)

    old = sql.mention_counts(conn, [row.id for row, _ in keep] + recount)
    firsts = mention_keys(keep)
    triples = triple_keys(keep)
    keys = set(firsts) | triples
    known = sql.follow(conn, {key: seen[key] for key in keys if key in seen})
    known.update(sql.by_norm(conn, [key for key in keys if key not in seen]))
    new = {key: m for key, m in firsts.items() if key not in known}
    named = rows_naming(keep) if new else {}
    sql.lock_entities(conn, [*known.values(), *(entity_id(*key) for key in new),
                             *(e for counts in old.values() for e in counts),
                             *(e for g in gone for e in g.mentions)])
    # Typed entities first: an untyped mention of a name this batch types once ("Jordan" in
    # quotes beside PERSON "Jordan") then names that entity instead of a second one.
    for typed in (True, False):
        batch = {key: m for key, m in new.items() if bool(key[2]) == typed}
        if not typed:
            known.update(sql.by_norm(conn, [k for k in {*batch, *triples}
                                            if k not in known]))
            batch = {key: m for key, m in batch.items() if key not in known}
        if not batch:
            continue
        sql.create_entities(conn, [
            sql.NewEntity(entity_id(*key), key[0], m.name.strip(), key[1], m.label,
                          named.get(key, 0)) for key, m in batch.items()])
        # The ids now there: ours, or those of a writer that created the name first.
        created = sql.by_norm(conn, batch)
        result.created += [eid for key, eid in created.items() if eid == entity_id(*key)]
        known.update(created)

    mention_rows, aliases = _mentions(keep, known)
    sql.replace_mentions(conn, [row.id for row, _ in keep], mention_rows)
    sql.add_aliases(conn, aliases)
    touched = set(_relations(conn, keep, state, known))

    new_counts: dict[uuid.UUID, dict[uuid.UUID, int]] = {row.id: {} for row, _ in keep}
    for m in mention_rows:
        new_counts[m.row_id][m.entity_id] = new_counts[m.row_id].get(m.entity_id, 0) + 1
    # Before and after: a pair the row no longer names loses this row's weight.
    cap = COOCCUR_CAP
    touched_pairs: set[Pair] = set()
    for counts in [*old.values(), *new_counts.values(), *(g.mentions for g in gone)]:
        touched_pairs |= pairs(counted_entities(counts, cap))
        touched.update(counts)
    sql.recount_entities(conn, touched)
    sql.recount_pairs(conn, touched_pairs, cap=cap, evidence_n=EVIDENCE_N)

    facts_sql.fill_ids(conn, [row.id for row, _ in keep if row.supplied is not None], known,
                       lambda ns, name, label: end_key(ns, name, label),
                       lambda keys: sql.by_norm(conn, keys))
    rows_sql.mark_done(conn, [(row.id, row.text_hash,
                               SUPPLIED if row.supplied is not None else extractor,
                               len(found.triples)) for row, found in keep])
    rows_sql.mark_recounted(conn, recount)
    result.extracted = len(keep)
    result.recounted = len(recount) + len(gone)
    result.mentions = len(mention_rows)
    return result


def _mentions(keep: Sequence[tuple[RowText, Extraction]], known: Mapping[Key, uuid.UUID]
              ) -> tuple[list[sql.MentionRow], set[tuple[uuid.UUID, str, str, uuid.UUID, str]]]:
    """The mention rows (one per span: the first mention of a span wins) and the aliases."""
    out: dict[tuple[uuid.UUID, str, int, int], sql.MentionRow] = {}
    aliases: set[tuple[uuid.UUID, str, str, uuid.UUID, str]] = set()
    for row, found in keep:
        ns = row.namespace_id
        for m in found.mentions:
            eid = known.get(key_of(ns, m))
            if eid is None:
                continue
            out.setdefault((row.id, m.field, m.start, m.end), sql.MentionRow(
                row.id, m.field, m.start, m.end, ns, eid, m.label, m.text))
            for alias, source in [(m.text, "surface"), (m.name, "surface"),
                                  *((a, "extractor") for a in m.aliases)]:
                norm = _normalise(alias)
                if norm:
                    aliases.add((ns, norm, alias.strip(), eid, source))
    return list(out.values()), aliases


def _relations(conn: Conn, keep: Sequence[tuple[RowText, Extraction]],
               state: Mapping[uuid.UUID, tuple[str | None, str, int, bool]],
               known: Mapping[Key, uuid.UUID]) -> set[uuid.UUID]:
    """Withdraw what the rows stated before, write what they state now; the entities whose
    RELATES edges changed."""
    stated_before = [row for row, _ in keep if state[row.id][2] > 0]
    touched = sql.withdraw_relations(conn, [row.namespace_id for row in stated_before],
                                     [row.id for row in stated_before])
    edges: dict[tuple[uuid.UUID, uuid.UUID, str, uuid.UUID], set[uuid.UUID]] = {}
    for row, found in keep:
        ns = row.namespace_id
        # a triple's name is first the entity a mention of its own row gives that name (two
        # homonyms in the namespace are no ambiguity for the row that typed it)
        own: dict[str, uuid.UUID] = {}
        for m in found.mentions:
            eid = known.get(key_of(ns, m))
            if eid is not None:
                own.setdefault(_normalise(m.name), eid)
        for t in found.triples:
            subject = (own.get(_normalise(t.subject))
                       or known.get(end_key(ns, t.subject, t.subject_label)))
            obj = own.get(_normalise(t.object)) or known.get(end_key(ns, t.object, t.object_label))
            predicate = _normalise(t.predicate)
            # A name no mention of this batch or entity of the namespace carries is not
            # created from a triple alone (it would have no label and no mention).
            if subject is None or obj is None or subject == obj or not predicate:
                continue
            edges.setdefault((ns, subject, predicate, obj), set()).add(row.id)
            touched |= {subject, obj}
    sql.add_relations(conn, edges)
    return touched
