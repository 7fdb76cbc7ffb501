"""`brainstream mcp` (issue 15 item 1) with the SDK's own client, over stdio (spawned) and over
streamable HTTP, in front of a running `brainstream api` over the running pipeline: a question
answered with the tools, two tenants, and bad arguments as tool errors naming the field."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from mcp import Client

from tests.apiutil import ApiTenant
from tests.mcp.conftest import RunningApi, mcp_env, mcp_http_server
from tests.mcp.mcputil import answer, http_client, stdio_params, tool_error

EXPECTED_TOOLS = {
    "search", "find_exact", "find_objects", "find_links", "expand", "expand_many",
    "list_recipes", "run_recipe", "continue", "read", "children", "schema", "resolve", "paths",
    "history",
    "entity_facts",
    "memory_get", "memory_search", "save_object", "delete_object", "delete_objects", "save_link",
    "add_messages", "entity", "search_entities", "possibly_same", "decide_pair"}


WRITE_TOOLS = {"save_object", "delete_object", "delete_objects", "save_link", "add_messages",
               "decide_pair"}


@pytest.fixture(scope="module")
def mcp_http(api_process: RunningApi) -> Iterator[str]:
    """`brainstream mcp --transport http`: its endpoint URL."""
    with mcp_http_server(mcp_env(api_process)) as url:
        yield url


async def _ask(client: Any, tool: str, **arguments: Any) -> Any:
    return await client.call_tool(tool, arguments)


def test_stdio_answers_a_question_with_the_tools(
        api_process: RunningApi, ev_tenants: dict[str, ApiTenant]) -> None:
    a = ev_tenants["a"]

    async def session() -> None:
        async with Client(stdio_params(mcp_env(api_process, BRAINSTREAM_MCP_API_KEY=a.key))
                          ) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == EXPECTED_TOOLS
            # the filters are described from the live schema: kinds and filterable fields
            assert "deal" in (tools["search"].description or "")
            assert "stage" in (tools["search"].description or "")
            saved = answer(await _ask(client, "save_object", kind="company",
                                      title="Brindlewood Kilns",
                                      summary="Kiln maker that fires porcelain for labs.",
                                      properties={"industry": "ceramics"}, wait=True))
            assert saved["status"] == "applied"
            found = answer(await _ask(client, "search", query="Brindlewood porcelain kilns"))
            assert saved["object_id"] in [o["id"] for o in found["objects"]]
            ceramics = {"jsonpath": "$.industry", "in": ["ceramics"]}
            kept = answer(await _ask(client, "search", query="Brindlewood porcelain kilns",
                                     where=ceramics))
            assert [o["id"] for o in kept["objects"]] == [saved["object_id"]]
            left = answer(await _ask(client, "find_exact", query="Brindlewood Kilns",
                                     where={"not": ceramics}))
            assert saved["object_id"] not in [o["id"] for o in left["objects"]]
            read = answer(await _ask(client, "read", object_id=saved["object_id"]))
            assert (read["title"], read["properties"]["industry"]) == \
                ("Brindlewood Kilns", "ceramics")
            history = answer(await _ask(client, "history", object_id=saved["object_id"]))
            assert [(v["change"], v["title"]) for v in history["versions"]] == \
                [("put", "Brindlewood Kilns")]

    asyncio.run(session())


def test_http_forwards_each_callers_key(
        mcp_http: str, ev_tenants: dict[str, ApiTenant]) -> None:
    a, b = ev_tenants["a"], ev_tenants["b"]

    async def session() -> None:
        async with http_client(mcp_http, a.headers) as client_a:
            saved = answer(await _ask(client_a, "save_object", kind="company",
                                      title="Saltmarsh Turbines", wait=True))
            assert saved["status"] == "applied"
            # the exact channels find it at once; Tantivy's facet counts follow the lexical
            # writer's commit, a moment later
            for _ in range(120):
                mine = answer(await _ask(client_a, "find_exact", query="Saltmarsh Turbines",
                                         facets=[{"field": "kind"}], sort={"field": "title"}))
                if mine["facets"]["kind"]["buckets"]:
                    break
                await asyncio.sleep(0.25)
            assert [o["id"] for o in mine["objects"]] == [saved["object_id"]]
            assert mine["facets"]["kind"]["buckets"] == [{"value": "company", "count": 1}]
        async with http_client(mcp_http, b.headers) as client_b:
            theirs = answer(await _ask(client_b, "find_exact", query="Saltmarsh Turbines",
                                       facets=[{"field": "kind"}]))
            assert theirs["objects"] == [] and theirs["facets"]["kind"]["buckets"] == []
            missing = tool_error(await _ask(client_b, "read", object_id=saved["object_id"]))
            assert missing["status"] == 404
        # B's key naming A's namespace: refused, nothing saved there
        foreign = {**b.headers, "X-Namespace": str(a.namespace)}
        async with http_client(mcp_http, foreign) as client_x:
            refused = tool_error(await _ask(client_x, "save_object", kind="company",
                                            title="Smuggled into A", wait=True))
            assert (refused["status"], refused["error"]["code"]) == (403, "namespace_forbidden")
        async with http_client(mcp_http, a.headers) as client_a:
            none = answer(await _ask(client_a, "find_exact", query="Smuggled into A"))
            assert none["objects"] == []

    asyncio.run(session())


def test_a_bad_argument_is_a_tool_error_naming_the_field(
        mcp_http: str, ev_tenants: dict[str, ApiTenant]) -> None:
    a = ev_tenants["a"]

    async def session() -> None:
        async with http_client(mcp_http, a.headers) as client:
            mode = tool_error(await _ask(client, "search", query="kilns", mode="sideways"))
            assert (mode["status"], mode["error"]["field"]) == (422, "mode")
            kind = tool_error(await _ask(client, "save_object", kind="no_such_kind",
                                         title="Nope"))
            assert (kind["status"], kind["error"]["field"]) == (422, "events.0.data.kind")
            stage = tool_error(await _ask(client, "search", query="kilns",
                                          filters={"no_such_field": "x"}))
            assert stage["error"]["field"] == "filters.no_such_field"
            # the ranking knobs reach the API: no reranker here, no channel "nope"
            rerank = tool_error(await _ask(client, "search", query="kilns", rerank=True))
            assert (rerank["status"], rerank["error"]["field"]) == (422, "rerank")
            fusion = tool_error(await _ask(client, "search", query="kilns",
                                           fusion={"weights": {"nope": 1}}))
            assert fusion["error"]["field"] == "fusion.weights.nope"
            ranged = tool_error(await _ask(client, "search", query="kilns", where={
                "and": [{"jsonpath": "$.industry", "gt": 3}]}))
            assert ranged["error"]["field"] == "where.and[0].gt"
            # a path argument stays one URL segment: no reaching /v1/schema through `read`
            bad_id = tool_error(await _ask(client, "read", object_id="../schema"))
            assert (bad_id["status"], bad_id["error"]["code"]) == (404, "not_found")
            # an argument the tool's own schema refuses (no API call): named too
            result = await _ask(client, "search")
            assert result.is_error and "query" in result.content[0].text

    asyncio.run(session())


def test_memory_tools_write_and_read_a_session(
        mcp_http: str, ev_tenants: dict[str, ApiTenant]) -> None:
    a, b = ev_tenants["a"], ev_tenants["b"]
    session_id = f"mcp-{uuid.uuid4().hex[:8]}"

    async def session() -> None:
        async with http_client(mcp_http, a.headers) as client:
            added = answer(await _ask(client, "add_messages", session_id=session_id, messages=[
                {"role": "user", "content": "My heron sanctuary opens in April."}], wait=True))
            assert added["status"] == "applied"
            memory = answer(await _ask(client, "memory_get", session_id=session_id))
            assert [m["content"] for m in memory["messages"]] == [
                "My heron sanctuary opens in April."]
            # searchable once the memory worker has extracted the message (after it is stored)
            for _ in range(120):
                hits = answer(await _ask(client, "memory_search", session_id=session_id,
                                         query="heron sanctuary"))
                if hits["results"]:
                    break
                await asyncio.sleep(0.25)
            assert [(h["session_id"], h["content"]) for h in hits["results"]] == [
                (session_id, "My heron sanctuary opens in April.")]
        async with http_client(mcp_http, b.headers) as other:
            assert tool_error(await _ask(other, "memory_get", session_id=session_id))[
                "status"] == 404

    asyncio.run(session())


def test_links_and_deletes_through_the_tools(
        mcp_http: str, ev_tenants: dict[str, ApiTenant]) -> None:
    a = ev_tenants["a"]

    async def session() -> None:
        async with http_client(mcp_http, a.headers) as client:
            deal = answer(await _ask(client, "save_object", kind="deal", title="Larkspur refit",
                                     properties={"stage": "won"}, wait=True))
            buyer = answer(await _ask(client, "save_object", kind="company",
                                      title="Larkspur Ferries", wait=True))
            link = answer(await _ask(client, "save_link", from_id=deal["object_id"],
                                     to_id=buyer["object_id"], relation_type="buyer",
                                     meta={"note": "the ferry operator buys"},
                                     valid_from="2024-03-01T00:00:00Z", wait=True))
            assert link["status"] == "applied"
            # the link's validity reaches its history
            held = answer(await _ask(client, "expand", object_id=deal["object_id"],
                                     relation_types=["buyer"], as_of="2024-06-01T00:00:00Z"))
            assert [o["relation"]["valid_from"] for o in held["objects"]] == [
                "2024-03-01T00:00:00Z"]
            before = answer(await _ask(client, "expand", object_id=deal["object_id"],
                                       relation_types=["buyer"], as_of="2024-01-01T00:00:00Z"))
            assert before["objects"] == []
            # the graph is written by the relay after the event is applied
            for _ in range(120):
                near = answer(await _ask(client, "expand", object_id=deal["object_id"],
                                         relation_types=["buyer"]))
                if near["objects"]:
                    break
                await asyncio.sleep(0.25)
            assert [o["id"] for o in near["objects"]] == [buyer["object_id"]]
            gone = answer(await _ask(client, "delete_object", object_id=buyer["object_id"],
                                     wait=True))
            assert gone["status"] == "applied"
            assert tool_error(await _ask(client, "read", object_id=buyer["object_id"]))[
                "status"] == 404
            won = answer(await _ask(client, "search", query="Larkspur",
                                    filters={"kind": "deal", "stage": "won"}))
            assert [o["id"] for o in won["objects"]] == [deal["object_id"]]
            # a delete by filter: counted first, then one event
            refit = {"kind": "deal", "title": "Larkspur refit"}
            counted = answer(await _ask(client, "delete_objects", filters=refit, dry_run=True))
            assert (counted["matched"], counted["sample_ids"]) == (1, [deal["object_id"]])
            dropped = answer(await _ask(client, "delete_objects", filters=refit, wait=True))
            assert (dropped["status"], dropped["matched"]) == ("applied", 1)
            assert tool_error(await _ask(client, "read", object_id=deal["object_id"]))[
                "status"] == 404

    asyncio.run(session())


def test_entity_tools_read_the_queue_and_decisions_need_admin(
        mcp_http: str, ev_tenants: dict[str, ApiTenant]) -> None:
    a = ev_tenants["a"]

    async def session() -> None:
        async with http_client(mcp_http, a.headers) as client:
            queue = answer(await _ask(client, "possibly_same"))
            assert queue["status"] == "held" and isinstance(queue["pairs"], list)
            found = answer(await _ask(client, "search_entities", query="Brindlewood Kilns"))
            assert "entities" in found and found["query"] == "Brindlewood Kilns"
            # a write key is not a curator: the API refuses the decision, named
            pair = [str(uuid.uuid4()), str(uuid.uuid4())]
            refused = tool_error(await _ask(client, "decide_pair", from_id=pair[0],
                                            to_id=pair[1], decision="defer"))
            assert (refused["status"], refused["error"]["code"]) == (403, "scope_required")
            missing = tool_error(await _ask(client, "entity", entity_id=pair[0]))
            assert missing["status"] == 404

    asyncio.run(session())
