"""Applying object events: a put (a first-class object, cut into parts, or an explicit part)
and a soft delete.

The embed worker hands a put object to the graph once it is embedded; the outbox row written
here syncs it at once too, since fields other than its index text may have changed.
"""

from __future__ import annotations

import uuid
from datetime import datetime

from pipeline.domain.chunking import Chunk, chunk_text, part_id
from pipeline.domain.errors import (
    IdConflict,
    InvalidInput,
    ObjectNotFound,
    ParentIsPart,
    ParentNotFound,
    VectorMismatch,
    VectorOnParts,
)
from pipeline.domain.index_text import entity_index_text, part_index_text, text_hash
from pipeline.domain.structure import has_structure, split_structure
from pipeline.domain.vectors import caller_model
from pipeline.domain.write_model import ObjectHead, ObjectWrite
from pipeline.ingest.records import Applying, check_version
from pipeline.outbox.ops import NODE_SYNC
from pipeline.ports import EventStore
from schemas.events import ObjectPut, ObjectSoftDelete, ParsedEvent


def _owned(head: ObjectHead | None, namespace: uuid.UUID) -> ObjectHead | None:
    """The row if it belongs to `namespace`; a row of another namespace is a conflict."""
    if head is not None and head.namespace_id != namespace:
        raise IdConflict("this object id is already used by another namespace", field="data.id")
    return head


def _upsert_owned(store: EventStore, rows: list[ObjectWrite]) -> None:
    """Write `rows`; one whose id another namespace owns (a derived part id included) refuses
    the whole event. The store checks in the same statement as the write, so no concurrent
    batch can slip a foreign row in between."""
    refused = store.upsert_objects(rows)
    if refused:
        raise IdConflict(f"id {refused[0]} (of this object or one of its parts) is already used"
                         " by another namespace", field="data.id")


def put(ctx: Applying, event: ParsedEvent, payload: ObjectPut) -> None:
    """Write an object (and the parts cut from its content) or, with `parent_id`, a part."""
    assert event.object_id is not None
    store, outcome = ctx.store, ctx.outcome
    object_id = event.object_id
    ctx.catalog.validate_put(payload.kind, payload.properties)
    if payload.parent_id is not None:
        _put_part(ctx, event, payload, object_id)
        return
    head = _owned(store.lock_object(object_id), event.namespace)
    if head is not None:
        check_version(head.source_version, event.version)
        if head.parent_id is not None:
            raise InvalidInput("this id belongs to a part; a part is put with its parent_id",
                               field="data.parent_id")
    rows = put_rows(ctx, event, payload)
    vector = _caller_vector(ctx, payload, rows)
    if head is not None or has_structure(payload):
        _write_structure(ctx, event, payload, object_id, object_id, rows)
    # Chunked parts not cut again are stale: those past the new end, and those stored under an
    # id of the scheme before part ids were derived within the namespace (replaced by their
    # namespaced twin; docs/operations.md). Explicit parts stay as sent. A new object has none:
    # a part's parent_id references its parent (ON DELETE CASCADE), so that read is skipped.
    if head is not None:
        fresh = {row.id for row in rows}
        store.delete_rows([pid for pid, _ in store.chunked_parts_of(object_id)
                           if pid not in fresh])
    _upsert_owned(store, rows)
    _store_vector(ctx, [row.id for row in rows], vector, new=head is None)
    if head is not None and head.title != payload.title:
        # Explicit parts are not re-sent with their parent, but their index text holds its title.
        store.retitle_parts(object_id, payload.title, [
            (pid, text_hash(part_index_text(payload.title, content or "")))
            for pid, content in store.explicit_parts_of(object_id)])
        store.keep_caller_vectors(object_id)
    if head is not None and head.deleted_at is not None:
        store.revive_parts(object_id, head.deleted_at)
    revived = head is not None and head.deleted_at is not None
    store.record_object_versions([(object_id, "revive" if revived else "put", event.event_id,
                                   event.version)])
    # The embed worker writes the node once the object is embedded; an object whose index text
    # did not change is synced now (its other fields may have).
    outcome.embed_roots.add(object_id)
    store.enqueue(event.namespace, object_id, NODE_SYNC)
    outcome.outbox_rows += 1


def _write_structure(ctx: Applying, event: ParsedEvent, payload: ObjectPut, root_id: uuid.UUID,
                     put_id: uuid.UUID, rows: list[ObjectWrite]) -> None:
    """The put's supplied structure, placed on its rows (its parts by their offsets in the
    content, cut again: chunking is deterministic), and the facts it states; a put without one
    clears what an earlier put supplied."""
    written = [row.id for row in rows] or [put_id]
    placed = None
    if has_structure(payload):
        chunks = _chunks(ctx, payload) if len(rows) > 1 else []
        placed = split_structure(payload, put_id, [
            (part_id(event.namespace, put_id, c.position), c.start, c.end) for c in chunks])
    ctx.store.write_structure(event.namespace, root_id, put_id, written, placed, event.event_id)


def _chunks(ctx: Applying, payload: ObjectPut) -> list[Chunk]:
    """The parts a first-class put's content is cut into (none when its kind is not cut)."""
    spec = ctx.catalog.get(payload.kind)
    chunked = bool(payload.content and payload.content.strip()) and (
        ctx.catalog.is_open or (spec is not None and spec.is_parent))
    options = ctx.options
    return chunk_text(payload.content or "", max_tokens=options.chunk_max_tokens,
                      overlap_tokens=options.chunk_overlap_tokens) if chunked else []


def put_rows(ctx: Applying, event: ParsedEvent, payload: ObjectPut,
             at: datetime | None = None) -> list[ObjectWrite]:
    """The rows a put of a first-class object writes: the object, then the parts cut from its
    content in their order (stamped with `at`, None: the event time the store holds)."""
    assert event.object_id is not None
    options, object_id = ctx.options, event.object_id
    index_text = entity_index_text(payload.title, payload.summary, payload.properties,
                                   payload.content, content_cap_chars=options.content_cap_chars)
    rows = [ObjectWrite(
        id=object_id, namespace_id=event.namespace, kind=payload.kind, title=payload.title,
        summary=payload.summary, properties=dict(payload.properties), content=payload.content,
        content_type=payload.content_type, parent_id=None, position=None,
        index_text_hash=text_hash(index_text), source_version=event.version,
        event_id=event.event_id, source=event.source, at=at,
    )]
    for chunk in _chunks(ctx, payload):
        rows.append(ObjectWrite(
            id=part_id(event.namespace, object_id, chunk.position),
            namespace_id=event.namespace, kind=payload.kind,
            title=None, summary=None, properties={}, content=chunk.text,
            content_type=payload.content_type, parent_id=object_id, position=chunk.position,
            index_text_hash=text_hash(part_index_text(payload.title, chunk.text)),
            source_version=None, event_id=event.event_id, source=event.source, chunked=True,
            context_title=payload.title, at=at,
        ))
    return rows


def _caller_vector(ctx: Applying, payload: ObjectPut, rows: list[ObjectWrite]
                   ) -> list[float] | None:
    """The put's vector checked against the generation's model (VectorMismatch), or None.

    A vector is the vector of the one searchable row a put writes: the object, or with its
    content cut into one part that part too (the whole content). Cut into several parts, no
    vector is each part's: refused (VectorOnParts); the caller sends the parts itself."""
    if payload.vector is None:
        return None
    space = ctx.options.vector_space
    if space is None:
        raise VectorMismatch("this pipeline takes no caller vectors", field="data.vector")
    values = space.check(payload.vector.model, payload.vector.values, field="data.vector")
    if len(rows) > 2:
        raise VectorOnParts(
            f"the content is cut into {len(rows) - 1} parts and one vector cannot be each"
            " part's: put the parts (with parent_id) each with its vector, or shorter content",
            field="data.vector")
    return values


def _store_vector(ctx: Applying, ids: list[uuid.UUID], vector: list[float] | None, *,
                  new: bool) -> None:
    """The rows take the caller's vector; without one, rows that held a caller's vector go
    back to the model's (a new object holds none: nothing to ask)."""
    space = ctx.options.vector_space
    if vector is None and (new or space is None):
        return
    ctx.store.set_caller_vector(ids, vector, caller_model(space) if space else "")


def _put_part(ctx: Applying, event: ParsedEvent, payload: ObjectPut, object_id: uuid.UUID) -> None:
    """An explicit part: under a live first-class parent of the same namespace."""
    assert payload.parent_id is not None
    store = ctx.store
    vector = _caller_vector(ctx, payload, [])
    parents = store.share_objects([payload.parent_id])
    parent = parents.get(payload.parent_id)
    if parent is None or parent.namespace_id != event.namespace or parent.deleted_at is not None:
        raise ParentNotFound("the parent is missing, deleted or in another namespace",
                             field="data.parent_id")
    if parent.parent_id is not None:
        raise ParentIsPart("the parent is itself a part", field="data.parent_id")
    head = _owned(store.lock_object(object_id), event.namespace)
    if head is not None:
        check_version(head.source_version, event.version)
    if head is not None or has_structure(payload):
        _write_structure(ctx, event, payload, payload.parent_id, object_id, [])
    _upsert_owned(store, [ObjectWrite(
        id=object_id, namespace_id=event.namespace, kind=payload.kind, title=payload.title,
        summary=payload.summary, properties=dict(payload.properties), content=payload.content,
        content_type=payload.content_type, parent_id=payload.parent_id, position=payload.position,
        index_text_hash=text_hash(part_index_text(parent.title, payload.content or "")),
        source_version=event.version, event_id=event.event_id, source=event.source,
        context_title=parent.title,
    )])
    _store_vector(ctx, [object_id], vector, new=head is None)
    ctx.outcome.embed_roots.add(payload.parent_id)
    store.enqueue(event.namespace, payload.parent_id, NODE_SYNC)
    ctx.outcome.outbox_rows += 1


def soft_delete(ctx: Applying, event: ParsedEvent, delete: ObjectSoftDelete) -> None:
    """Hide an object (with its parts); its root's node is re-synced (removed)."""
    store = ctx.store
    head = store.lock_object(delete.id)
    if head is None or head.namespace_id != event.namespace:
        raise ObjectNotFound("no such object in this namespace", field="data.id")
    check_version(head.source_version, event.version)
    store.soft_delete_object(delete.id, event.version, event.event_id)
    if head.deleted_at is None and head.parent_id is None:  # a version of a live object only
        store.record_object_versions([(delete.id, "delete", event.event_id, event.version)])
    store.invalidate_facts(delete.id, event.event_id)
    root = head.parent_id or delete.id
    store.enqueue(event.namespace, root, NODE_SYNC)
    ctx.outcome.outbox_rows += 1
