"""API_KEYS (pipeline/access.py): the full form and the shorthand, scopes implied upward, and a
bad entry refused by its position and name, never by its secret."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from pipeline.access import MAX_IN_FLIGHT, PUBLISH_RATE, parse_api_keys, shorthand_name
from pipeline.domain.errors import ConfigError
from pipeline.settings import load_settings

NS_A, NS_B = uuid.uuid4(), uuid.uuid4()
SECRET = "s3cret-never-printed"


def _keys(value: Any) -> Any:
    return load_settings(api_keys=json.dumps(value)).api_keys


def test_the_full_form_and_the_shorthand() -> None:
    keys = _keys({"k1": {"name": "crm-sync", "scopes": {str(NS_A): ["write"],
                                                        str(NS_B): ["read"]}},
                  "k2": [str(NS_A)], "k3": {"name": "ops", "operator": True}})
    crm, short, ops = keys["k1"], keys["k2"], keys["k3"]
    assert crm.granted(NS_A) == ("read", "write") and crm.granted(NS_B) == ("read",)
    assert crm.allows(NS_A, "write") and not crm.allows(NS_B, "write")
    assert not crm.allows(NS_A, "admin") and not crm.operator
    assert crm.source == "api:crm-sync" and crm.namespaces == [NS_A, NS_B]
    assert short.name == shorthand_name("k2") and short.name.startswith("key-")
    assert short.granted(NS_A) == ("read",) and short.granted(NS_B) == ()
    assert ops.operator and ops.namespaces == []


@pytest.mark.parametrize(("entry", "says"), [
    ({"name": "crm sync"}, "key 2 ('crm sync'): name"),
    ({"name": "x" * 65}, "key 2"),
    ({"name": "n", "scopes": {"not-a-uuid": ["read"]}}, "key 2 ('n'): scopes.not-a-uuid"),
    ({"name": "n", "scopes": {str(NS_A): ["root"]}}, f"key 2 ('n'): scopes.{NS_A}.0"),
    ({"name": "n", "scopes": {str(NS_A): []}}, "has no scope"),
    ({"name": "n", "admin": True}, "key 2 ('n'): admin"),
    ({"name": "first"}, "key 2 ('first'): the name is also key 1's"),
    (["not-a-uuid"], "key 2 ('key-"),
    ("read", "key 2"),
])
def test_a_bad_entry_is_named_without_its_secret(entry: Any, says: str) -> None:
    with pytest.raises(ConfigError) as raised:
        _keys({"k1": {"name": "first"}, SECRET: entry})
    assert says in raised.value.message
    assert SECRET not in raised.value.message
    assert SECRET not in str(raised.value.__cause__)  # nor in the chained pydantic error


def test_a_secret_with_spaces_is_refused() -> None:
    with pytest.raises(ConfigError, match="leading or trailing spaces"):
        _keys({" padded ": [str(NS_A)]})


@pytest.mark.parametrize("removed", ["BRAINSTREAM_API_ADMIN_KEYS", "BRAINSTREAM_ENTITY_CURATORS"])
def test_a_removed_key_setting_stops_the_processes(monkeypatch: pytest.MonkeyPatch,
                                                   tmp_path: Any, removed: str) -> None:
    monkeypatch.chdir(tmp_path)  # no .env
    monkeypatch.setenv(removed, '["an-operator-key"]')
    with pytest.raises(ConfigError, match="BRAINSTREAM_API_KEYS") as raised:
        load_settings()
    assert removed in raised.value.message and "an-operator-key" not in raised.value.message


def test_a_key_carries_its_own_limits_with_defaults() -> None:
    keys = parse_api_keys({
        "s1": {"name": "batch", "scopes": {str(uuid.uuid4()): ["write"]},
               "max_in_flight": 32, "publish_rate": 500},
        "s2": [str(uuid.uuid4())]})
    assert (keys["s1"].max_in_flight, keys["s1"].publish_rate) == (32, 500)
    assert (keys["s2"].max_in_flight, keys["s2"].publish_rate) == (MAX_IN_FLIGHT, PUBLISH_RATE)
    for bad in ({"max_in_flight": 0}, {"publish_rate": 0}):
        with pytest.raises(ValueError, match="key 1 \\('x'\\)"):
            parse_api_keys({"s3": {"name": "x", **bad}})
