"""Issue 35 item 3 and the MCP part of item 1: who the HTTP MCP transport answers, on the real
stack (a `brainstream api` process over the running pipeline, two tenants, `brainstream mcp`
processes that know no API keys).

- no MCP message is served without a bearer key the API accepts: `initialize` and `tools/list`
  without a key or with an unknown one are 401 in the API's error shape; an API that does not
  answer is 503; a valid key works end to end, statelessly (no session is opened);
- `.`, `..` and empty path arguments are tool errors naming the argument, not another route;
- `--read-only` registers no write tool (HTTP and stdio);
- a Host or Origin the server was not told to answer is refused (421 / 403), the configured
  public host and origin pass.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp import Client

from tests.apiutil import ApiTenant
from tests.mcp.conftest import RunningApi, free_port, mcp_env, mcp_http_server
from tests.mcp.mcputil import answer, http_client, stdio_params, tool_error
from tests.mcp.test_mcp_server import EXPECTED_TOOLS, WRITE_TOOLS

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "gate-test", "version": "0"}}}
TOOLS_LIST = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}


def _post(url: str, message: dict[str, Any], headers: dict[str, str]) -> httpx.Response:
    """One MCP message as a raw streamable HTTP POST (the answer's body read whole)."""
    return httpx.post(url, json=message, timeout=60, headers={
        "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-06-18",
        **headers})


def _host(url: str) -> str:
    return httpx.URL(url).netloc.decode()


@pytest.fixture(scope="module")
def gate_http(api_process: RunningApi) -> Iterator[str]:
    """`brainstream mcp --transport http` with the defaults (loopback hosts)."""
    with mcp_http_server(mcp_env(api_process)) as url:
        yield url


def test_no_mcp_message_is_served_without_a_valid_key(
        gate_http: str, ev_tenants: dict[str, ApiTenant]) -> None:
    for message in (INITIALIZE, TOOLS_LIST):
        for headers in ({}, {"Authorization": "Bearer"}, {"Authorization": "Basic eDp5"}):
            missing = _post(gate_http, message, headers)
            assert missing.status_code == 401, (message["method"], headers, missing.text)
            assert missing.headers["www-authenticate"].startswith("Bearer")
            assert missing.json()["error"]["code"] == "unauthorized"
            assert missing.json()["error"]["field"] == "Authorization"
        unknown = _post(gate_http, message, {"Authorization": f"Bearer nope-{uuid.uuid4()}"})
        assert unknown.status_code == 401, unknown.text
        assert unknown.headers["www-authenticate"].startswith("Bearer")
        assert unknown.json()["error"] == {"code": "unauthorized", "message": "unknown API key",
                                           "field": "Authorization"}
    assert httpx.get(gate_http, timeout=10).status_code == 401  # the GET stream too

    async def anonymous_client() -> None:
        async with http_client(gate_http, {}) as client:
            await client.list_tools()

    with pytest.raises(Exception) as refused:  # the SDK's client fails at `initialize`
        asyncio.run(anonymous_client())
    assert "tools" not in str(refused.value).lower()


def test_a_valid_key_works_end_to_end_without_a_session(
        gate_http: str, ev_tenants: dict[str, ApiTenant]) -> None:
    a, b = ev_tenants["a"], ev_tenants["b"]
    opened = _post(gate_http, INITIALIZE, a.headers)
    assert opened.status_code == 200, opened.text
    assert "mcp-session-id" not in opened.headers  # stateless: no session table to fill

    async def session() -> None:
        async with http_client(gate_http, a.headers) as client:
            assert {t.name for t in (await client.list_tools()).tools} == EXPECTED_TOOLS
            saved = answer(await client.call_tool("save_object", {
                "kind": "company", "title": "Quillfeather Gate Works",
                "summary": "Forges iron garden gates.", "wait": True}))
            assert saved["status"] == "applied"
            found = answer(await client.call_tool("search", {"query": "Quillfeather gates"}))
            assert saved["object_id"] in [o["id"] for o in found["objects"]]
        async with http_client(gate_http, b.headers) as other:
            theirs = answer(await other.call_tool("search", {"query": "Quillfeather gates"}))
            assert saved["object_id"] not in [o["id"] for o in theirs["objects"]]

    asyncio.run(session())


def test_dot_segments_are_refused_naming_the_argument(
        gate_http: str, ev_tenants: dict[str, ApiTenant]) -> None:
    a = ev_tenants["a"]
    calls = [("read", {"object_id": ".."}, "object_id"), ("read", {"object_id": "."}, "object_id"),
             ("read", {"object_id": ""}, "object_id"),
             ("children", {"object_id": ".."}, "object_id"),
             ("run_recipe", {"name": "..", "object_ids": [str(uuid.uuid4())]}, "name"),
             ("memory_get", {"session_id": ".."}, "session_id"),
             ("memory_search", {"session_id": ".", "query": "x"}, "session_id"),
             ("add_messages", {"session_id": "..", "messages": [
                 {"role": "user", "content": "x"}]}, "session_id")]

    async def session() -> None:
        async with http_client(gate_http, a.headers) as client:
            for tool, arguments, argument in calls:
                error = tool_error(await client.call_tool(tool, arguments))
                assert (error["status"], error["error"]["code"], error["error"]["field"]) == \
                    (422, "invalid_input", argument), (tool, arguments, error)

    asyncio.run(session())


def test_read_only_registers_no_write_tool(
        api_process: RunningApi, ev_tenants: dict[str, ApiTenant]) -> None:
    a = ev_tenants["a"]
    read_tools = EXPECTED_TOOLS - WRITE_TOOLS

    async def over_http(url: str) -> None:
        async with http_client(url, a.headers) as client:
            assert {t.name for t in (await client.list_tools()).tools} == read_tools
            assert "read-only" in (client.instructions or "")
            found = answer(await client.call_tool("find_exact", {"query": "anything at all"}))
            assert "objects" in found
            refused = await client.call_tool("save_object", {"kind": "company", "title": "No"})
            assert refused.is_error and "save_object" in refused.content[0].text

    with mcp_http_server(mcp_env(api_process), "--read-only") as url:
        asyncio.run(over_http(url))

    async def over_stdio() -> None:
        params = stdio_params(mcp_env(api_process, BRAINSTREAM_MCP_API_KEY=a.key))
        params.args = [*params.args, "--read-only"]
        async with Client(params) as client:
            assert {t.name for t in (await client.list_tools()).tools} == read_tools
            assert "save_object" not in (client.instructions or "")

    asyncio.run(over_stdio())


def test_a_foreign_host_or_origin_is_refused(
        gate_http: str, ev_tenants: dict[str, ApiTenant]) -> None:
    a = ev_tenants["a"]
    port = httpx.URL(gate_http).port
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        assert _post(gate_http, INITIALIZE, {**a.headers, "Host": host}).status_code == 200
    for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}"):
        assert _post(gate_http, INITIALIZE, {**a.headers, "Origin": origin}).status_code == 200
    # a DNS-rebinding page: its own name in Host, or its origin
    assert _post(gate_http, INITIALIZE, {**a.headers, "Host": f"evil.example:{port}"}
                 ).status_code == 421
    assert _post(gate_http, INITIALIZE, {**a.headers, "Origin": "http://evil.example"}
                 ).status_code == 403
    assert _post(gate_http, INITIALIZE, {**a.headers, "Origin": "http://localhost:1"}
                 ).status_code == 403


def test_the_allowed_hosts_and_origins_are_the_configured_ones(
        api_process: RunningApi, ev_tenants: dict[str, ApiTenant]) -> None:
    a = ev_tenants["a"]
    env = mcp_env(api_process,
                  BRAINSTREAM_MCP_ALLOWED_HOSTS=json.dumps(["kb.example.com", "mcp.internal:*"]))
    with mcp_http_server(env) as url:
        public = {**a.headers, "Host": "kb.example.com"}
        assert _post(url, INITIALIZE, public).status_code == 200
        assert _post(url, INITIALIZE, {**a.headers, "Host": "mcp.internal:9"}).status_code == 200
        # the origins default to the configured hosts' own
        assert _post(url, INITIALIZE, {**public, "Origin": "https://kb.example.com"}
                     ).status_code == 200
        assert _post(url, INITIALIZE, {**public, "Origin": "https://evil.example"}
                     ).status_code == 403
        # the configured list replaces the loopback default
        assert _post(url, INITIALIZE, {**a.headers, "Host": _host(url)}).status_code == 421
    env["BRAINSTREAM_MCP_ALLOWED_ORIGINS"] = json.dumps(["https://app.example.com"])
    with mcp_http_server(env) as url:
        public = {**a.headers, "Host": "kb.example.com"}
        assert _post(url, INITIALIZE, {**public, "Origin": "https://app.example.com"}
                     ).status_code == 200
        assert _post(url, INITIALIZE, {**public, "Origin": "https://kb.example.com"}
                     ).status_code == 403


def test_an_api_that_does_not_answer_is_503_not_401() -> None:
    nowhere = RunningApi(f"http://127.0.0.1:{free_port()}", {"PATH": os.environ["PATH"]})
    env = mcp_env(nowhere)
    with mcp_http_server(env) as url:
        down = _post(url, INITIALIZE, {"Authorization": "Bearer any-key"})
        assert down.status_code == 503, down.text
        assert down.json()["error"]["code"] == "unavailable"
