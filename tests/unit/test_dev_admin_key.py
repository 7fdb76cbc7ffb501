"""`brainstream up` without API keys: its development key holds every scope on its namespace
and reads the explorer's operator page (pipeline/supervisor/runner.py), and the API reads the
key as `up` hands it over."""

from __future__ import annotations

import json
import uuid

from pipeline.supervisor.runner import development_access
from tests.stackutil import make_settings


def test_the_development_key_holds_every_scope_and_the_operator_page() -> None:
    namespace = uuid.uuid4()
    env = development_access("dev-key", str(namespace))
    settings = make_settings(api_keys=env["BRAINSTREAM_API_KEYS"])
    key = settings.api_keys["dev-key"]
    assert key.name == "dev" and key.source == "api:dev"
    assert key.granted(namespace) == ("read", "write", "admin")
    assert key.operator
    assert set(json.loads(env["BRAINSTREAM_API_KEYS"])) == {"dev-key"}
