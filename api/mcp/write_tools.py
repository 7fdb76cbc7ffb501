"""The write tools: each publishes one event through `POST /v1/events` (objects and links),
`POST /v1/objects/delete` (the objects of a source or filter) or the session's messages
endpoint, and returns the event id, the status ("accepted", or "applied" when asked to wait and
the pipeline applied it in time) and the ids it wrote. A server started with `--read-only` does
not register them.

No `from __future__ import annotations` here: the SDK reads the signatures (read_tools.py).
"""

import uuid
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from api.mcp.backend import ApiBackend, segment
from api.mcp.read_tools import Json, body

Wait = Annotated[bool, Field(description="answer only once the pipeline applied the write "
                                         "(bounded: status stays \"accepted\" past the wait)")]
ObjectId = Annotated[str, Field(description="the object's id (UUID)")]


async def publish(api: ApiBackend, ctx: Context, event_type: str, data: Json, wait: bool,
                  version: int | None = None) -> Json:
    """One event through POST /v1/events; its event id and status. The id is chosen here (the
    API requires one, or an Idempotency-Key): one tool call is one event."""
    event = body(type=f"brainstream.{event_type}", data=data, version=version,
                 id=str(uuid.uuid4()))
    answer = await api.call(ctx, "POST", "/v1/events", body={"events": [event], "wait": wait})
    out: Json = answer["events"][0]
    return out


def register_write_tools(server: MCPServer, api: ApiBackend) -> None:
    """Add the write tools (objects, links, a session's messages) to `server`."""

    async def save_object(ctx: Context, kind: Annotated[str, Field(
            description="the object's kind (see the schema tool)")],
            title: str | None = None, summary: str | None = None,
            properties: Annotated[Json | None, Field(
                description="the kind's fields, e.g. {\"stage\": \"won\"}")] = None,
            content: Annotated[str | None, Field(
                description="the text body (long text is cut into parts)")] = None,
            content_type: Annotated[str | None, Field(
                description='"text/plain" (default) or "text/markdown"')] = None,
            object_id: Annotated[str | None, Field(
                description="the id to create or replace (a new UUID when unset)")] = None,
            version: Annotated[int | None, Field(
                description="source version: an older one than stored is ignored")] = None,
            wait: Wait = False) -> Json:
        object_id = object_id or str(uuid.uuid4())
        out = await publish(api, ctx, "object.put", body(
            id=object_id, kind=kind, title=title, summary=summary, properties=properties,
            content=content, content_type=content_type), wait, version)
        return {**out, "object_id": object_id}

    async def delete_object(ctx: Context, object_id: ObjectId, wait: Wait = False) -> Json:
        out = await publish(api, ctx, "object.soft_delete", {"id": object_id}, wait)
        return {**out, "object_id": object_id}

    async def delete_objects(ctx: Context, source: Annotated[str | None, Field(
            description="the publisher (CloudEvents source) whose objects go")] = None,
            filters: Annotated[Json | None, Field(
                description="the search's filters, e.g. {\"kind\": \"deal\", \"stage\": "
                            "\"lost\"}; with source, both must match")] = None,
            dry_run: Annotated[bool, Field(
                description="only count (matched, sample_ids); nothing is deleted")] = False,
            wait: Wait = False) -> Json:
        answer: Json = await api.call(ctx, "POST", "/v1/objects/delete", body=body(
            source=source, filters=filters, dry_run=dry_run, wait=wait))
        return answer

    async def save_link(ctx: Context, from_id: ObjectId, to_id: ObjectId,
                        relation_type: Annotated[str, Field(
                            description="e.g. buyer, about (letters, digits, underscore)")],
                        meta: Annotated[Json | None, Field(
                            description="{note?, status?, role?, confidence? (0-1], "
                                        "evidence_id?}")] = None,
                        valid_from: Annotated[str | None, Field(
                            description="when it started to hold in the world (RFC 3339 with "
                                        "an offset); none: always, or from now once the link "
                                        "has history")] = None,
                        valid_to: Annotated[str | None, Field(
                            description="when it stopped holding (RFC 3339); none: still")] = None,
                        wait: Wait = False) -> Json:
        return await publish(api, ctx, "link.put", body(
            **{"from": from_id, "to": to_id}, relation_type=relation_type, meta=meta,
            valid_from=valid_from, valid_to=valid_to), wait)

    async def add_messages(ctx: Context, session_id: Annotated[str, Field(
            description="the session (created when new)")],
            messages: Annotated[list[Json], Field(
                description='[{"role": "user"|"assistant"|..., "content": "...", '
                            '"metadata"?: {...}, "uuid"?: "..."}]')],
            wait: Wait = False) -> Json:
        sent = [m if not isinstance(m, dict) or "uuid" in m else {**m, "uuid": str(uuid.uuid4())}
                for m in messages]
        path = f"/v1/sessions/{segment(session_id, 'session_id')}/messages"
        result: Json = await api.call(ctx, "POST", path, body={"messages": sent, "wait": wait})
        return result

    tools: list[tuple[Any, str, str]] = [
        (save_object, "save_object", "Create or replace an object (a put event). Returns "
         "event_id, status and object_id; wait=true to be able to search or read it at once."),
        (delete_object, "delete_object", "Delete an object (a soft delete event): it and its "
         "parts disappear from every answer."),
        (delete_objects, "delete_objects", "Delete every object of a source or matching "
         "filters (one event: what matches when it is applied, at most `limit`). Run it with "
         "dry_run=true first and check `matched`."),
        (save_link, "save_link", "Create or replace a link from one object to another (a "
         "link event), with its relation type and metadata."),
        (add_messages, "add_messages", "Add messages to a conversation session (created when "
         "new); returns the event id, status and, once applied, the stored messages."),
    ]
    for fn, name, description in tools:
        server.add_tool(fn, name=name, description=description)
