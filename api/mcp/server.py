"""Assembling the MCP server (`brainstream mcp`): the API it calls, the live schema read once at
start for the tools' descriptions, the tools (no write tools when read-only), and the two
transports.

Over HTTP the transport runs stateless: every tool is one request and one answer (no progress,
sampling or elicitation goes back to the client), so no session table is kept for anyone to
fill, and any server process can answer any request. In front of it, `gate.McpGate` admits only
callers whose bearer key the API accepts, and the SDK's DNS-rebinding checks refuse a Host or
Origin not allowed (MCP_ALLOWED_HOSTS, MCP_ALLOWED_ORIGINS).
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from api.mcp.backend import ApiBackend
from api.mcp.entity_tools import register_entity_reads, register_entity_writes
from api.mcp.gate import KeyCheck, McpGate
from api.mcp.guide import instructions
from api.mcp.memory_tools import register_memory_tools
from api.mcp.read_tools import register_read_tools
from api.mcp.write_tools import register_write_tools
from pipeline.domain.errors import ConfigError
from pipeline.domain.setting_values import bound_hosts, local_http_url, origins_of
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


def build_server(settings: Settings, transport: Transport, *,
                 read_only: bool = False) -> MCPServer:
    """The MCP server with every tool (the read tools only when `read_only`), their
    descriptions built from the live schema."""
    api = backend_for(settings, transport)
    server: MCPServer = MCPServer("brainstream", instructions=instructions(read_only),
                                  log_level="WARNING")
    schema = live_schema(api)
    register_read_tools(server, api, schema)
    register_memory_tools(server, api)
    register_entity_reads(server, api)
    if not read_only:
        register_write_tools(server, api)
        register_entity_writes(server, api)
    return server


def transport_security(settings: Settings, host: str, port: int) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding checks, always on: MCP_ALLOWED_HOSTS (default: the bind address
    and its loopback forms) and MCP_ALLOWED_ORIGINS (default: those hosts' own origins)."""
    hosts = settings.mcp_allowed_hosts or bound_hosts(host, port)
    origins = settings.mcp_allowed_origins or origins_of(hosts)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True,
                                     allowed_hosts=hosts, allowed_origins=origins)


def http_app(settings: Settings, server: MCPServer, host: str, port: int) -> ASGIApp:
    """The streamable HTTP app at HTTP_PATH: stateless, behind the key check."""
    app = server.streamable_http_app(streamable_http_path=HTTP_PATH, stateless_http=True,
                                     transport_security=transport_security(settings, host, port),
                                     host=host)
    return McpGate(app, KeyCheck(backend_for(settings, "http").base_url))


def run(settings: Settings, transport: Transport, host: str, port: int, *,
        read_only: bool = False) -> None:
    """Serve until stopped: on stdin/stdout (logs on stderr), or on http://host:port/mcp."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING)
    server = build_server(settings, transport, read_only=read_only)
    if transport == "stdio":
        server.run("stdio")
    else:
        uvicorn.run(http_app(settings, server, host, port), host=host, port=port,
                    log_level="warning")
