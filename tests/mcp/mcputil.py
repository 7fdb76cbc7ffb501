"""Connecting the SDK's own client to `brainstream mcp`: spawned over stdio, or over
streamable HTTP with a caller's headers; reading a tool's answer or its error."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult

from tests.stackutil import REPO


def stdio_params(env: dict[str, str]) -> StdioServerParameters:
    """`brainstream mcp` (stdio) as the client spawns it."""
    return StdioServerParameters(command=sys.executable, args=["-m", "pipeline.cli", "mcp"],
                                 env=env, cwd=str(REPO))


@asynccontextmanager
async def http_client(url: str, headers: dict[str, str]) -> AsyncIterator[Client]:
    """The SDK's client on the streamable HTTP endpoint, sending `headers` with every call."""
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
            Client(streamable_http_client(url, http_client=http)) as client:
        yield client


def answer(result: CallToolResult) -> dict[str, Any]:
    """A successful tool call's JSON."""
    assert not result.is_error, result.content
    if isinstance(result.structured_content, dict):
        return result.structured_content
    text = result.content[0]
    assert text.type == "text"
    parsed: dict[str, Any] = json.loads(text.text)
    return parsed


def tool_error(result: CallToolResult) -> dict[str, Any]:
    """A failed tool call's API error: {"status", "error": {"code", "message", "field"}}, after
    the SDK's "Error executing tool <name>: " prefix."""
    assert result.is_error, result
    text = result.content[0]
    assert text.type == "text"
    assert text.text.startswith("Error executing tool "), text.text
    parsed: dict[str, Any] = json.loads(text.text[text.text.index("{"):])
    return parsed
