"""The conversation-memory reads: a session's memory, and a search of one session's or one
user's messages (writing messages is `add_messages`, a write tool).

No `from __future__ import annotations` here: the SDK reads the signatures (read_tools.py).
"""

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from api.mcp.backend import ApiBackend, segment
from api.mcp.read_tools import Json, body


def register_memory_tools(server: MCPServer, api: ApiBackend) -> None:
    """Add the memory reads (memory_get, memory_search) to `server`."""

    async def memory_get(ctx: Context, session_id: str, lastn: Annotated[int | None, Field(
            description="the last n messages (default: those after the summary)")] = None,
            ) -> Json:
        path = f"/v1/sessions/{segment(session_id, 'session_id')}/memory"
        result: Json = await api.call(ctx, "GET", path, params={"lastn": lastn})
        return result

    async def memory_search(ctx: Context, query: str, session_id: Annotated[str | None, Field(
            description="search this session")] = None, user_id: Annotated[str | None, Field(
                description="or all sessions of this user")] = None,
            limit: int | None = None, search_scope: Annotated[str | None, Field(
                description='"messages" (default), "summary" or "both"')] = None,
            where: Annotated[Json | None, Field(
                description="metadata filter: {\"jsonpath\": \"$.key\", \"eq\": value}, or "
                            "{\"and\"|\"or\": [...]}")] = None,
            since: str | None = None, until: str | None = None,
            include_knowledge: Annotated[bool | None, Field(
                description="also search the documents (answered apart, as `knowledge`)")
            ] = None) -> Json:
        fields = body(query=query, limit=limit, search_scope=search_scope, where=where,
                      since=since, until=until, include_knowledge=include_knowledge)
        if session_id is not None:
            path = f"/v1/sessions/{segment(session_id, 'session_id')}/search"
        else:
            path, fields = "/v1/memory/search", {**fields, **body(user_id=user_id)}
        result: Json = await api.call(ctx, "POST", path, body=fields)
        return result

    tools: list[tuple[Any, str, str]] = [
        (memory_get, "memory_get", "A session's memory: its running summary and the recent "
         "messages after it (or the last `lastn`)."),
        (memory_search, "memory_search", "Search conversation memory: one session's messages "
         "and summaries (session_id), or all sessions of a user (user_id); with "
         "include_knowledge, the knowledge base's documents for the same query too."),
    ]
    for fn, name, description in tools:
        server.add_tool(fn, name=name, description=description)
