"""The publisher helper against `POST /v1/events` (CONTRACT: the endpoint is built on another
branch; these tests fail until it is merged, and then check it): the operation agrees with the
API's document; put, link, soft delete and link delete events published per tenant, waited
for, applied; one invalid event refuses the whole request naming its field and publishes
nothing; another tenant's namespace is refused; the README's publishing example runs."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from api.app import create_app
from brainstream_client import (
    ApiError,
    Client,
    delete_link,
    put_link,
    put_object,
    soft_delete,
)
from brainstream_client.operations import PUBLISH
from tests.client.conftest import LiveApi
from tests.client.readme import PUBLISHING, blocks, run_block
from tests.client.test_client_contract import check_operation
from tests.pipelineutil import wait_for
from tests.stackutil import make_settings

pytestmark = pytest.mark.stack


def test_publish_agrees_with_the_api_document() -> None:
    document: dict[str, Any] = create_app(make_settings()).openapi()
    check_operation(PUBLISH, document)


@pytest.fixture()
def clients(live_api: LiveApi) -> Iterator[dict[str, Client]]:
    made = {name: Client(live_api.url, api_key=t.key) for name, t in live_api.tenants.items()}
    yield made
    for client in made.values():
        client.close()


def _gone(client: Client, object_id: str) -> bool:
    try:
        client.read(object_id)
    except ApiError as error:
        return error.status == 404
    return False


def test_publish_and_wait_applies_per_tenant(clients: dict[str, Client]) -> None:
    a, b = clients["a"], clients["b"]
    supplier, deal = str(uuid.uuid4()), str(uuid.uuid4())
    done = a.publish([put_object("company", id=supplier, title="Borealis Bearings"),
                      put_object("deal", id=deal, title="Borealis bearing order",
                                 properties={"stage": "prospect"}),
                      put_link(deal, supplier, "buyer", note="Borealis supplies bearings")],
                     wait=True)
    assert [(e.type, e.status) for e in done.events] == [
        ("brainstream.object.put", "applied"), ("brainstream.object.put", "applied"),
        ("brainstream.link.put", "applied")]
    assert a.read(supplier).title == "Borealis Bearings"
    # `applied` is Postgres (the truth); expand reads the graph, which the relay brings along
    wait_for(lambda: [str(o.id) for o in a.expand(deal, relation_types=["buyer"]).objects]
             == [supplier] or None, what="the link in the graph")
    assert _gone(b, supplier)  # published into A's namespace only
    a.publish([delete_link(deal, supplier, "buyer"), soft_delete(supplier)], wait=True)
    assert _gone(a, supplier)
    wait_for(lambda: a.expand(deal, relation_types=["buyer"]).objects == [] or None,
             what="the link gone from the graph")


def test_delete_objects_counts_then_deletes_per_tenant(clients: dict[str, Client]) -> None:
    a, b = clients["a"], clients["b"]
    title = f"Gannet {uuid.uuid4().hex[:8]}"
    mine, theirs = str(uuid.uuid4()), str(uuid.uuid4())
    a.publish([put_object("company", id=mine, title=title)], wait=True)
    b.publish([put_object("company", id=theirs, title=title)], wait=True)
    counted = a.delete_objects(filters={"kind": "company", "title": title}, dry_run=True)
    assert (counted.matched, [str(i) for i in counted.sample_ids], counted.event_id) == \
        (1, [mine], None)
    done = a.delete_objects(filters={"kind": "company", "title": title}, wait=True)
    assert (done.status, done.matched) == ("applied", 1)
    assert _gone(a, mine) and b.read(theirs).title == title
    with pytest.raises(ApiError) as raised:
        a.delete_objects()
    assert (raised.value.status, raised.value.field) == (422, "source")


def test_one_invalid_event_publishes_nothing(live_api: LiveApi,
                                             clients: dict[str, Client]) -> None:
    a = clients["a"]
    kept_out = str(uuid.uuid4())
    with pytest.raises(ApiError) as raised:
        a.publish([put_object("company", id=kept_out, title="Never published"),
                   put_object("no such kind!", title="bad")])
    assert (raised.value.status, raised.value.field) == (422, "events.1.data.kind")
    with pytest.raises(ApiError) as raised:
        a.publish([put_object("company", title="elsewhere",
                              namespace=live_api.tenants["b"].namespace)])
    assert (raised.value.status, raised.value.code, raised.value.field) == (
        403, "namespace_forbidden", "events.0.namespace")
    # a later event of the same tenant applied: the refused one would have been before it
    marker = str(uuid.uuid4())
    a.publish([put_object("company", id=marker, title="after the refusal")], wait=True)
    assert a.read(marker).title == "after the refusal"
    assert _gone(a, kept_out)


def test_readme_publishing_example_runs(live_api: LiveApi,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    (code,) = [c for c in blocks() if PUBLISHING in c]
    printed = run_block(code, live_api.url, live_api.tenants["a"].key, monkeypatch)
    assert "Borealis Bearings" in printed
