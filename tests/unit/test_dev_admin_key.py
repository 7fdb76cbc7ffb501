"""`brainstream up` without API keys: its development key reads its namespace and, unless the
operator named admin keys, the explorer's operator page (pipeline/supervisor/runner.py)."""

from __future__ import annotations

import json

from pipeline.supervisor.runner import development_access
from tests.stackutil import make_settings


def test_the_development_key_is_the_admin_key_when_none_is_set() -> None:
    env = development_access(make_settings(), "dev-key", "ns-1")
    assert json.loads(env["BRAINSTREAM_API_KEYS"]) == {"dev-key": ["ns-1"]}
    assert json.loads(env["BRAINSTREAM_API_ADMIN_KEYS"]) == ["dev-key"]


def test_named_admin_keys_stay_the_only_ones() -> None:
    env = development_access(make_settings(api_admin_keys=["ops"]), "dev-key", "ns-1")
    assert "BRAINSTREAM_API_ADMIN_KEYS" not in env  # the API reads the operator's own setting
