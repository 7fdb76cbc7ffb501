"""The client on the real stack, through the running API process: every endpoint, the paging
helpers over real multi-page answers, typed errors from the real API, and two tenants (one
client per key) that never see each other's objects, sessions or entities."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest

from brainstream_client import ApiError, AsyncClient, Client, RecipeBody
from brainstream_client.models.memory import MessageBody
from tests.client.conftest import PAGED, LiveApi, LiveTenant
from tests.pipelineutil import Publisher, envelope, wait_for

pytestmark = pytest.mark.stack


@pytest.fixture(scope="module")
def clients(live_api: LiveApi) -> Iterator[dict[str, Client]]:
    made = {name: Client(live_api.url, api_key=t.key) for name, t in live_api.tenants.items()}
    yield made
    for client in made.values():
        client.close()


def _all_ids(tenant: LiveTenant) -> set[str]:
    return {*tenant.ids.values(), *tenant.paged}


def _paged_ids(client: Client) -> list[str] | None:
    """The ids of a full walk of a "Quillwort" search, once the lexical index holds all."""
    ids = [str(o.id) for o in client.iter_objects(client.search("Quillwort gaskets",
                                                                limit=10), limit=10)]
    return ids if len(set(ids)) >= PAGED else None


def test_search_pages_follow_continue_within_the_tenant(live_api: LiveApi,
                                                        clients: dict[str, Client]) -> None:
    for name, client in clients.items():
        tenant = live_api.tenants[name]
        ids = wait_for(lambda c=client: _paged_ids(c), timeout=60,
                       what="the paged objects to be searchable")
        assert len(ids) == len(set(ids)), "a page repeated an object"
        assert set(tenant.paged) <= set(ids) <= _all_ids(tenant)
        pages = list(client.iter_pages(client.search("Quillwort gaskets", limit=10)))
        assert len(pages) >= 3  # 23 objects at most 10 a page: a real multi-page walk
        assert [str(o.id) for p in pages for o in p.objects] == ids


def test_a_tenant_never_sees_the_other_tenants_objects(live_api: LiveApi,
                                                       clients: dict[str, Client]) -> None:
    a, b = live_api.tenants["a"], live_api.tenants["b"]
    assert clients["a"].read(a.ids["company"]).title == "Acme Robotics"
    for object_id in (a.ids["company"], a.paged[0]):
        with pytest.raises(ApiError) as raised:
            clients["b"].read(object_id)
        assert (raised.value.status, raised.value.code) == (404, "not_found")
    found = clients["b"].find_exact("Acme Robotics", limit=50)
    assert {str(o.id) for o in found.objects} <= _all_ids(b)
    assert b.ids["company"] in {str(o.id) for o in found.objects}
    with pytest.raises(ApiError) as raised:
        clients["b"].expand(a.ids["deal"])
    assert raised.value.status == 404


def test_every_read_endpoint_answers_typed(live_api: LiveApi, clients: dict[str, Client]
                                          ) -> None:
    client, ids = clients["a"], live_api.tenants["a"].ids
    assert client.healthz() == {"status": "ok"}
    assert client.readyz()["status"] == "ready"
    assert "company" in {k["kind"] for k in client.schema()["kinds"]}
    exact = client.find_exact("Acme Robotics", filters={"kind": "company"})
    assert str(exact.objects[0].id) == ids["company"]
    found = client.find_objects("Acme Robotics", include_entities=True)
    assert ids["company"] in {str(o.id) for o in found.objects}
    assert found.entities is not None
    links = client.find_links("buyer", "buying entity")
    assert [str(o.id) for o in links.objects] == [ids["company"]]
    assert links.objects[0].relation is not None
    assert str(links.objects[0].relation.source_id) == ids["deal"]
    around = client.expand(ids["deal"], relation_types=["buyer"], direction="out")
    assert [str(o.id) for o in around.objects] == [ids["company"]]
    many = client.expand_many([ids["deal"], ids["note"]])
    assert ids["company"] in {str(o.id) for o in many.objects}
    note = client.read(ids["note"])
    assert note.content is not None and "Rotterdam" in note.content
    parts = client.children(ids["note"], limit=50).objects
    assert parts and all(str(p.parent_id) == ids["note"] for p in parts)
    paths = client.paths([ids["note"]], [ids["company"]], max_hops=3)
    assert paths.status == "found"
    assert str(paths.paths[0].nodes[0].id) == ids["note"]
    with pytest.raises(ApiError) as raised:
        client.search("acme", limit=1000)
    assert (raised.value.status, raised.value.field) == (422, "limit")


def test_recipes_round_trip_per_tenant(live_api: LiveApi, clients: dict[str, Client]) -> None:
    client, ids = clients["a"], live_api.tenants["a"].ids
    name = f"buyers_{uuid.uuid4().hex[:6]}"
    spec = RecipeBody(relation_types=["buyer"], direction="out", max_hops=1)
    assert client.put_recipe(name, spec) == spec
    assert client.get_recipe(name).source == "namespace"
    assert name in {r.name for r in client.list_recipes().recipes}
    assert name not in {r.name for r in clients["b"].list_recipes().recipes}
    ran = client.run_recipe(name, [ids["deal"]])
    assert [str(o.id) for o in ran.objects] == [ids["company"]]
    client.delete_recipe(name)
    with pytest.raises(ApiError) as raised:
        client.get_recipe(name)
    assert raised.value.status == 404


def _resolved(client: Client, phrases: list[str]) -> list[str] | None:
    answers = client.resolve(queries=phrases).results
    ids = [str(a.entity_id) for a in answers if a.entity_id is not None]
    return ids if len(ids) == len(phrases) else None


def test_entities_resolve_read_and_curate(live_api: LiveApi, clients: dict[str, Client]
                                         ) -> None:
    a, b = clients["a"], clients["b"]
    dana, acme = wait_for(lambda: _resolved(a, ["Dana Whitfield", "Acme Robotics"]),
                          timeout=90, what="the note's entities to be extracted")
    entity = a.entity(dana)
    assert entity.name.lower() == "dana whitfield" and entity.part_count >= 1
    with pytest.raises(ApiError) as raised:
        b.entity(dana)  # tenant B has its own Dana Whitfield, not this one
    assert raised.value.status == 404
    plan = a.merge_entities(dana, acme, dry_run=True)
    assert (str(plan.from_), str(plan.into), plan.dry_run) == (dana, acme, True)
    with pytest.raises(ApiError) as raised:
        b.merge_entities(dana, acme, dry_run=True)  # B's key writes, it does not curate
    assert (raised.value.status, raised.value.code) == (403, "scope_required")
    with pytest.raises(ApiError) as raised:
        a.decide_pair(dana, dana, "refuse")
    assert (raised.value.status, raised.value.field) == (422, "to")
    assert a.entity(dana).id == entity.id  # the dry run merged nothing


def test_memory_pages_and_search_per_tenant(live_api: LiveApi, clients: dict[str, Client],
                                            publisher: Publisher) -> None:
    a, b = clients["a"], clients["b"]
    user = f"user-{uuid.uuid4().hex[:6]}"
    sessions = [f"{user}-s{i}" for i in range(3)]
    for session_id in sessions:  # a session's user is set by its session.put event
        publisher.send(envelope("session.put", live_api.tenants["a"].namespace,
                                {"session_id": session_id, "user_id": user}), session_id)
    said = [f"turn {i}: the quillwort order ships from Rotterdam" for i in range(7)]
    a.add_messages(sessions[0], [MessageBody(uuid=uuid.uuid4(), role="user", content=text)
                                 for text in said[:1]])
    a.add_messages(sessions[0], [{"uuid": str(uuid.uuid4()), "role": "assistant",
                                  "content": text} for text in said[1:]], wait=True)
    wait_for(lambda: len(list(a.iter_messages(sessions[0]))) == 7, timeout=60,
             what="the messages to be stored")
    first = a.messages(sessions[0], limit=3)
    assert first.next_after_seq is not None  # a real multi-page answer
    walked = list(a.iter_messages(sessions[0], limit=3))
    assert [m.content for m in walked] == said
    assert [m.seq for m in walked] == sorted({m.seq for m in walked})
    assert a.session(sessions[0]).message_count == 7
    assert [m.content for m in a.memory(sessions[0], lastn=2).messages] == said[-2:]
    found = wait_for(lambda: {s.session_id for s in a.iter_sessions(user_id=user, limit=2)}
                     == set(sessions) or None, timeout=60, what="the three sessions")
    assert found
    hits = wait_for(lambda: a.search_session(sessions[0], "quillwort Rotterdam").results,
                    timeout=60, what="the messages to be searchable")
    assert {h.session_id for h in hits} == {sessions[0]}
    assert {h.session_id for h in a.search_memory(user, "quillwort Rotterdam").results} == {
        sessions[0]}
    with pytest.raises(ApiError) as raised:
        b.session(sessions[0])
    assert raised.value.status == 404
    with pytest.raises(ApiError) as raised:
        list(b.iter_messages(sessions[0]))
    assert raised.value.status == 404
    assert list(b.iter_sessions(user_id=user)) == []
    assert b.search_memory(user, "quillwort Rotterdam").results == []


def test_the_async_client_pages_and_reads(live_api: LiveApi) -> None:
    tenant = live_api.tenants["a"]
    session_id = f"async-{uuid.uuid4().hex[:8]}"
    said = [f"async turn {i}" for i in range(5)]

    async def stored(client: AsyncClient) -> list[str]:
        for _ in range(120):
            contents = [m.content async for m in client.iter_messages(session_id, limit=2)]
            if len(contents) == len(said):
                return contents
            await asyncio.sleep(0.5)
        raise AssertionError(f"the messages of {session_id} were not all stored")

    async def run() -> tuple[list[str], str | None, list[str]]:
        async with AsyncClient(live_api.url, api_key=tenant.key) as client:
            first = await client.search("Quillwort gaskets", limit=10)
            ids = [str(o.id) async for o in client.iter_objects(first, limit=10)]
            note = await client.read(tenant.ids["note"])
            await client.add_messages(session_id, [
                {"uuid": str(uuid.uuid4()), "role": "user", "content": text} for text in said],
                wait=True)
            return ids, note.title, await stored(client)

    ids, title, contents = asyncio.run(run())
    assert set(tenant.paged) <= set(ids) <= _all_ids(tenant) and len(ids) == len(set(ids))
    assert title == "Kickoff call with Acme Robotics"
    assert contents == said  # three pages of two, in seq order
