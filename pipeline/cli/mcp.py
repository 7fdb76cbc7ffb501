"""`brainstream mcp`: the MCP server (issue 15 item 1, docs/operations.md), a thin adapter over
the HTTP API for models, on stdio or streamable HTTP."""

from __future__ import annotations

import click

from pipeline.cli.common import context_settings


@click.command()
@click.option("--transport", type=click.Choice(["stdio", "http"]), default="stdio",
              show_default=True, help="stdio (a client spawns the server) or streamable HTTP.")
@click.option("--host", default="127.0.0.1", show_default=True, help="HTTP bind address.")
@click.option("--port", type=int, default=8765, show_default=True, help="HTTP port.")
@click.option("--read-only", is_flag=True, help="Serve the read tools only: no tool saves, "
              "deletes or adds messages, whatever the caller's key may do.")
@click.pass_context
def mcp(ctx: click.Context, transport: str, host: str, port: int, read_only: bool) -> None:
    """Serve the API's tools to MCP clients. stdio acts with BRAINSTREAM_MCP_API_KEY; HTTP
    (http://HOST:PORT/mcp) admits a caller whose bearer key the API accepts and forwards its
    Authorization header, answering the Host names of BRAINSTREAM_MCP_ALLOWED_HOSTS (default:
    HOST and loopback). The API is BRAINSTREAM_MCP_API_URL (default: this API_HOST and
    API_PORT)."""
    from api.mcp.server import run

    run(context_settings(ctx), "stdio" if transport == "stdio" else "http", host, port,
        read_only=read_only)
