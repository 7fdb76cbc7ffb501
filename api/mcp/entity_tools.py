"""The entity tools: open an entity (its labels, counts, neighbours and a page of mentions),
find entities by name, and the curator's queue: the possibly-same pairs with their evidence
(a read) and a decision on one (`decide_pair`, a write: the API takes it only from a key with
the admin scope on the namespace and answers 403 `scope_required` otherwise).

No `from __future__ import annotations` here: the SDK reads the signatures (read_tools.py).
"""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from api.mcp.backend import ApiBackend, segment
from api.mcp.read_tools import Json, body

EntityId = Annotated[str, Field(description="an entity id (UUID) from an earlier answer")]


def register_entity_reads(server: MCPServer, api: ApiBackend) -> None:
    """Add `entity`, `search_entities` and `possibly_same` to `server`."""

    async def entity(ctx: Context, entity_id: EntityId, mentions: Annotated[int | None, Field(
            description="how many of its mentions to add (0: none; default 10)")] = None,
            cursor: Annotated[str | None, Field(
                description="the mentions' cursor from an earlier answer: the next page")
            ] = None) -> Json:
        path = f"/v1/entities/{segment(entity_id, 'entity_id')}"
        result: Json = await api.call(ctx, "GET", path)
        wanted = 10 if mentions is None else mentions
        if wanted > 0:
            result["mentions"] = await api.call(ctx, "GET", f"{path}/mentions", params={
                "limit": wanted, "cursor": cursor})
        return result

    async def search_entities(ctx: Context, query: Annotated[str, Field(
            description="a name, or part of one")], limit: Annotated[int | None, Field(
                description="at most this many (default 10)")] = None,
            labels: Annotated[list[str] | None, Field(
                description="only entities with these labels")] = None) -> Json:
        result: Json = await api.call(ctx, "POST", "/v1/entities/search", body=body(
            query=query, limit=limit, labels=labels))
        return result

    async def possibly_same(ctx: Context, status: Annotated[str | None, Field(
            description='"held" (default: the undecided pairs), "deferred", "verified" or '
                        '"refused"')] = None,
            limit: Annotated[int | None, Field(description="pairs per page (default 20)")
                             ] = None,
            cursor: Annotated[str | None, Field(description="from an earlier answer")] = None
            ) -> Json:
        result: Json = await api.call(ctx, "GET", "/v1/entities/possibly_same", params={
            "status": status, "limit": limit, "cursor": cursor})
        return result

    tools: list[tuple[Any, str, str]] = [
        (entity, "entity", "One entity by id: name, labels, aliases, how many mentions and "
         "objects name it, its strongest neighbours, and a page of its mentions with "
         "snippets."),
        (search_entities, "search_entities", "Find entities by name (exact, alias, spelling, "
         "initials, meaning...), best first, with the method and confidence of each."),
        (possibly_same, "possibly_same", "The curator's queue: pairs of entities that may be "
         "one, with evidence (names, aliases, shared neighbours, mentions); decide one with "
         "decide_pair."),
    ]
    for fn, name, description in tools:
        server.add_tool(fn, name=name, description=description)


def register_entity_writes(server: MCPServer, api: ApiBackend) -> None:
    """Add `decide_pair` to `server`."""

    async def decide_pair(ctx: Context, from_id: EntityId, to_id: EntityId,
                          decision: Annotated[str, Field(
                              description='"verify" (they are one: from is merged into to), '
                                          '"refuse" (they are different) or "defer" (decide '
                                          'later)')]) -> Json:
        path = (f"/v1/entities/possibly_same/{segment(from_id, 'from_id')}/"
                f"{segment(to_id, 'to_id')}")
        result: Json = await api.call(ctx, "POST", path, body={"decision": decision})
        return result

    server.add_tool(decide_pair, name="decide_pair", description=(
        "Decide a possibly-same pair (needs a key with the admin scope): verify merges them, "
        "refuse keeps them apart for good, defer moves the pair to the deferred list."))
