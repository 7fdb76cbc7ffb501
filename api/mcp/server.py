"""Assembling the MCP server (`brainstream mcp`): the API it calls, the live schema read once at
start for the tools' descriptions, the tools, and the two transports."""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from api.mcp.backend import ApiBackend
from api.mcp.guide import INSTRUCTIONS
from api.mcp.read_tools import register_read_tools
from api.mcp.write_tools import register_write_tools
from pipeline.domain.errors import ConfigError
from pipeline.domain.setting_values import local_http_url
from pipeline.settings import Settings

log = logging.getLogger(__name__)

Transport = Literal["stdio", "http"]
# Where the streamable HTTP endpoint is served (http://HOST:PORT/mcp).
HTTP_PATH = "/mcp"

# Seconds one API call of a tool may take: past the API's own request deadline (30 s), so the
# API answers (504 with its reason) before the tool gives up.
API_TIMEOUT = 60.0


def backend_for(settings: Settings, transport: Transport) -> ApiBackend:
    """The API calls of this transport: over stdio with MCP_API_KEY (required), over HTTP with
    each caller's own Authorization header."""
    url = settings.mcp_api_url or local_http_url(settings.api_host, settings.api_port)
    key = settings.mcp_api_key.get_secret_value() if settings.mcp_api_key else None
    if transport == "stdio" and not key:
        raise ConfigError("BRAINSTREAM_MCP_API_KEY is required with --transport stdio (the "
                          "API key the tools act with)")
    return ApiBackend(url.rstrip("/"), API_TIMEOUT, api_key=key,
                      namespace=settings.mcp_namespace, forward_caller=transport == "http")


def live_schema(api: ApiBackend) -> dict[str, Any] | None:
    """`/v1/schema` read with the server's own key, for the descriptions; None (the tools say
    to call `schema`) when there is no key or the API does not answer yet."""
    if not api.api_key:
        return None
    try:
        schema: dict[str, Any] = api.fetch_sync("/v1/schema")
        return schema
    except ToolError as exc:
        log.warning("the schema could not be read at start (%s); the tools' descriptions "
                    "name no kinds", exc)
        return None


def build_server(settings: Settings, transport: Transport) -> MCPServer:
    """The MCP server with every tool, its descriptions built from the live schema."""
    api = backend_for(settings, transport)
    server: MCPServer = MCPServer("brainstream", instructions=INSTRUCTIONS, log_level="WARNING")
    schema = live_schema(api)
    register_read_tools(server, api, schema)
    register_write_tools(server, api)
    return server


def run(settings: Settings, transport: Transport, host: str, port: int) -> None:
    """Serve until stopped: on stdin/stdout (logs on stderr), or on http://host:port/mcp."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    server = build_server(settings, transport)
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=host, port=port, streamable_http_path=HTTP_PATH)
